"""The run loop of `yunshan run`: stage by stage in the order of STAGES, resumable, with a manifest.

    from yunshan.pipeline import PipelineRunner
    PipelineRunner(recipe).run()                   # or .dry_run() to check everything without training

A stage whose output is complete (its marker in .stages/, written last, matches the stage's fingerprint: its
settings, input hashes and upstream fingerprints; and its files still have the recorded hashes) is skipped on a
re-run; `from_stage` redoes that stage and the later ones. A stage that fails leaves the earlier stages' outputs as
they were and is marked failed in the manifest. Everything this loop knows about a stage comes from its record
(yunshan.pipeline.stages.STAGES).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
import traceback
from pathlib import Path

from yunshan.io.artifacts import RunManifest, StageRecord
from yunshan.data.files import sha256_file

from . import report
from .stages import STAGES, PipelineRecipe, RunLayout

MARKERS = ".stages"  # run_dir/.stages/<stage>.json: kept out of the stage folders (an export is pushed as is)


def hash_tree(folder: Path, skip: tuple[str, ...] = ("checkpoints",)) -> dict[str, str]:
    """sha256 of every file under `folder` (relative paths), except checkpoints."""
    out = {}
    if not folder.exists():
        return out
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        rel = path.relative_to(folder)
        if rel.parts[0] in skip:
            continue
        out[str(rel)] = sha256_file(path)
    return out


def digest_of(obj) -> str:
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()


def input_files(paths: list[str]) -> list[Path]:
    """The files a list of paths, globs and folders names; what does not exist is left out (the dry run reports
    it, the stage itself fails on it)."""
    from yunshan.data.files import resolve_paths

    found = []
    for p in paths:
        try:
            found += [Path(f) for f in resolve_paths(p, "input")]
        except FileNotFoundError:
            continue
    return found


class PipelineRunner:
    def __init__(self, recipe: PipelineRecipe, recipe_path: Path | None = None):
        self.recipe = recipe
        self.recipe_path = recipe_path
        self.layout = RunLayout(recipe)
        self.out = self.layout.out
        self.manifest_path = self.out / "run.json"

    # -- plan ---------------------------------------------------------------------------------------------

    def stage_settings(self, stage) -> dict:
        """The recipe sections a stage depends on (part of its fingerprint), and what it reads outside them."""
        r = dataclasses.asdict(self.recipe)
        settings = {"section": r[stage.section], "model": r["model"], "tokenizer": r["tokenizer"], "name": r["name"]}
        if stage.reads is not None:
            settings["reads"] = stage.reads(self.recipe)[0]
        return settings

    def stage_paths(self, stage) -> list[str]:
        """The data files and folders a stage reads, from its section and what it reads outside it."""
        paths = list(stage.inputs(self.layout.section(stage)))
        if stage.reads is not None:
            paths += stage.reads(self.recipe)[1]
        return [p for p in dict.fromkeys(paths) if p]

    def stage_inputs(self, stage) -> dict[str, str]:
        """Files a stage reads that are not produced by an earlier stage (data), with their hashes."""
        files = input_files(self.stage_paths(stage))
        return {str(f): sha256_file(f) for f in files}

    def fingerprint(self, stage, manifest: RunManifest) -> str:
        ups = {s: (manifest.stage(s).fingerprint if manifest.stage(s) else None)
               for s in stage.upstream_in(self.recipe) if self.layout.enabled(s)}
        return digest_of({"settings": self.stage_settings(stage), "inputs": self.stage_inputs(stage),
                          "upstream": ups,
                          # The folder names the model (a Hub id's cache folder names its commit); no weights needed.
                          "base_model": self.layout.base_model_dir(weights=False) if stage.name != "base" else None})

    def marker(self, name: str) -> Path:
        return self.out / MARKERS / f"{name}.json"

    def is_complete(self, stage, fingerprint: str) -> bool:
        marker = self.marker(stage.name)
        if not marker.is_file():
            return False
        try:
            info = json.loads(marker.read_text())
        except json.JSONDecodeError:
            return False
        if info.get("fingerprint") != fingerprint:
            return False
        return hash_tree(self.layout.folder(stage.name)) == info.get("outputs")

    # -- manifest -----------------------------------------------------------------------------------------

    def load_manifest(self) -> RunManifest:
        """The run's manifest: the stages recorded so far (from run.json, when the run was started before), with
        the run's name, version and models as this recipe says."""
        from yunshan import __version__

        manifest = RunManifest.read(self.manifest_path) if self.manifest_path.is_file() else RunManifest(
            name=self.recipe.name)
        base, final = self.layout.base_model_dir(weights=False), self.layout.final_model_dir()
        manifest.name, manifest.yunshan_version = self.recipe.name, __version__
        manifest.base_model = str(Path(base).resolve()) if Path(base).exists() else base
        manifest.final_model = os.path.relpath(final, self.out) if final.startswith(str(self.out)) else final
        return manifest

    def save_manifest(self, manifest: RunManifest) -> None:
        manifest.write(self.out)

    # -- running ------------------------------------------------------------------------------------------

    def run(self, from_stage: str | None = None) -> RunManifest:
        """Run the stages in order. Under `accelerate launch` (several processes) the distributed stages run on
        every process and the others on the main one while the rest wait; only the main process writes the
        manifest, markers and report. A second `yunshan run` on the same folder stops before touching it
        (yunshan.io.folder_lock; every process of one launch shares the lock), and each stage locks its own folder."""
        from yunshan.io.folder_lock import folder_lock
        from yunshan.io.folders import check_output_folder

        check_output_folder(self.out, "output_dir")
        with folder_lock(self.out, "output_dir"):
            return self._run(from_stage)

    def _run(self, from_stage: str | None) -> RunManifest:
        from yunshan.io.artifacts import write_recipe
        from yunshan.training.heap import release_memory

        started = time.time()
        world = int(os.environ.get("WORLD_SIZE", "1"))
        main = int(os.environ.get("RANK", "0")) == 0
        barrier = _barrier if world > 1 else (lambda: None)
        if main:
            self.out.mkdir(parents=True, exist_ok=True)
            write_recipe(self.recipe, self.out / "recipe.yaml",
                         header=f"resolved pipeline recipe of run {self.recipe.name}")
        barrier()
        manifest = self.load_manifest()
        order = [s.name for s in STAGES]
        forced = False
        for stage in STAGES:
            section = self.layout.section(stage)
            if section is None:
                manifest.drop_stage(stage.name)
                continue
            folder = self.layout.folder(stage.name)
            forced = forced or stage.name == from_stage
            fingerprint = self.fingerprint(stage, manifest)
            if not forced and self.is_complete(stage, fingerprint):
                if main:
                    print(f"== {stage.name}: complete, skipped ({folder})", flush=True)
                if manifest.stage(stage.name) is None:  # run.json lost; the marker vouches for the folder
                    manifest.set_stage(StageRecord(name=stage.name, status="complete", output=folder.name,
                                                   fingerprint=fingerprint, outputs=hash_tree(folder)), order)
                manifest.stage(stage.name).status = "complete"
                continue
            if main:
                print(f"\n== {stage.name} -> {folder}", flush=True)
            record = StageRecord(name=stage.name, status="running", output=folder.name, started=_now(),
                                 fingerprint=fingerprint, inputs=self.stage_inputs(stage))
            manifest.set_stage(record, order)
            marker = self.marker(stage.name)
            if main:
                self.save_manifest(manifest)
                if marker.exists():
                    marker.unlink()  # the stage is redone: its old output no longer counts as complete
            barrier()
            t0 = time.time()
            try:
                summary = stage.run(self.layout, section) if (stage.distributed or main) else {}
            except KeyboardInterrupt:
                record.status, record.seconds = "interrupted", round(time.time() - t0, 1)
                record.error = "interrupted (Ctrl-C)"
                if main:
                    self.save_manifest(manifest)
                raise RunInterrupted(self.interrupted_message(stage, manifest)) from None
            except BaseException as err:
                qualify_error(err, stage)
                record.status, record.seconds = "failed", round(time.time() - t0, 1)
                record.error, record.traceback = f"{type(err).__name__}: {err}", traceback.format_exc()[-4000:]
                if main:
                    self.save_manifest(manifest)
                raise
            # Stages share this process: what the finished one allocated goes back before the next one loads.
            release_memory()
            barrier()
            record.outputs = hash_tree(folder)
            record.status, record.finished, record.seconds = "complete", _now(), round(time.time() - t0, 1)
            record.summary = summary
            if main:
                folder.mkdir(parents=True, exist_ok=True)
                marker.parent.mkdir(parents=True, exist_ok=True)
                marker.write_text(json.dumps({"stage": stage.name, "fingerprint": fingerprint,
                                              "outputs": record.outputs, "finished": record.finished}, indent=1))
                self.save_manifest(manifest)
            barrier()
        manifest.seconds_this_run = round(time.time() - started, 1)
        if main:
            path = report.write_report(self.layout, manifest)
            manifest.report = str(path.relative_to(self.out))
            self.save_manifest(manifest)
            report.print_summary(self.layout, manifest, self.manifest_path)
        barrier()
        return manifest

    def interrupted_message(self, stage, manifest: RunManifest) -> str:
        """What a Ctrl-C in `stage` leaves: the stages kept, the checkpoint a rerun continues from, the command."""
        from yunshan.training.checkpoints import latest_complete_checkpoint

        kept = [s.name for s in manifest.stages if s.status == "complete"]
        parts = [f"Ctrl-C in stage {stage.name}"]
        parts.append(f"kept: {', '.join(kept)} (complete)" if kept else "no stage was complete yet")
        checkpoint = latest_complete_checkpoint(self.layout.folder(stage.name) / "checkpoints")
        if checkpoint is not None:
            parts.append(f"{stage.name} continues from {checkpoint} on a rerun")
        recipe = self.recipe_path or "RECIPE.yaml"
        parts.append(f"resume with: yunshan run {recipe} (the same overrides; complete stages are skipped)")
        return "; ".join(parts)

    def dry_run(self, from_stage: str | None = None) -> dict:
        """Check the recipe's files, models and stages without training anything."""
        problems = []
        r = self.recipe
        if r.model is not None:
            problems += _check_model(r)
        paths = []  # (stage, path): a path an earlier stage writes is not missing, except to the stage writing it
        for stage in STAGES:
            section = self.layout.section(stage)
            if section is not None:
                paths += [(stage.name, p) for p in self.stage_paths(stage)]
                problems += [p for p in stage.check(section) if p not in problems]
        for name, p in dict.fromkeys(paths):
            if p and self.layout.produced_by_earlier_stage(p):
                if name == "prepare":
                    problems.append(f"prepare.inputs: {p} is the prepare stage's own output; name the raw corpus")
                continue
            if p and not input_files([p]) and not os.path.isdir(p) and f"missing: {p}" not in problems:
                problems.append(f"missing: {p}")
        try:
            manifest = self.load_manifest()
        except (FileNotFoundError, ValueError):  # the base model does not resolve: _check_model listed why
            return {"recipe": str(self.recipe_path) if self.recipe_path else None, "output_dir": str(self.out),
                    "plan": [], "problems": problems}
        plan = []
        forced = False
        for stage in STAGES:
            if self.layout.section(stage) is None:
                plan.append({"stage": stage.name, "action": "disabled"})
                continue
            forced = forced or stage.name == from_stage
            try:
                done = not forced and self.is_complete(stage, self.fingerprint(stage, manifest))
            except OSError:
                done = False
            plan.append({"stage": stage.name, "action": "skip (complete)" if done else "run",
                         "output": str(self.layout.folder(stage.name)),
                         **(stage.describe(r) if stage.describe is not None else {})})
        warnings = [w for p in plan for w in p.get("warnings", [])]
        return {"recipe": str(self.recipe_path) if self.recipe_path else None, "output_dir": str(self.out),
                "plan": plan, "problems": problems, **({"warnings": warnings} if warnings else {})}


class RunInterrupted(KeyboardInterrupt):
    """Ctrl-C during `yunshan run`; the message says what is kept and how to resume (the command prints it in one
    line)."""


def qualify_error(err: BaseException, stage) -> None:
    """Make the keys a stage's one-line error names valid in a pipeline recipe: `training.resume=never` of a cpt
    error becomes `cpt.training.resume=never`, the flag `--on-bad-record skip` of the tokenizer stage becomes
    `tokenizer_extension.on_bad_record=skip` (the stage commands word their errors for their own recipe or flags,
    which `yunshan run` does not take). Only ValueErrors with a plain message are rewritten, in place."""
    if not isinstance(err, ValueError) or len(err.args) != 1 or not isinstance(err.args[0], str):
        return
    err.args = (qualify_keys(err.args[0], stage.section),)


def qualify_keys(message: str, section: str) -> str:
    """`message` with every dotted key or --flag of the pipeline section `section` written as its pipeline key."""
    import re
    import typing

    cls = next(a for a in typing.get_args(typing.get_type_hints(PipelineRecipe)[section]) if dataclasses.is_dataclass(a))

    def resolves(keys: list[str]) -> bool:
        target, named = cls, False  # named: a list of records (sources), whose next key is a record's name
        for key in keys:
            if named:
                named = False
                continue
            if not dataclasses.is_dataclass(target):
                return False
            hints = typing.get_type_hints(target)
            if key not in hints:
                return False
            target = hints[key]
            for arg in (target, *typing.get_args(target)):
                if typing.get_origin(arg) is list and any(dataclasses.is_dataclass(a) for a in typing.get_args(arg)):
                    target, named = typing.get_args(arg)[0], True
                    break
            else:
                options = [a for a in typing.get_args(target) if dataclasses.is_dataclass(a)]
                target = options[0] if options else target
        return True

    def pipeline_key(key: str) -> str:
        dotted = f"{section}.{key}"
        if dotted in PipelineRecipe.RESERVED_KEYS:
            # An output folder the runner fills: the pipeline's own is output_dir (one subfolder per stage).
            return "output_dir" if key.endswith("output_dir") or key == "out" else dotted
        return dotted

    def dotted(match: re.Match) -> str:
        key = match.group(1)
        return pipeline_key(key) if resolves(key.split(".")) else key

    def flag(match: re.Match) -> str:
        name, value = match.group(1).replace("-", "_"), match.group(2)
        if not resolves([name]):
            return match.group(0)
        if value in SETTING_WORDS:
            return f"{pipeline_key(name)}={value}"
        return pipeline_key(name) + (f" {value}" if value else "")

    message = re.sub(r"(?<![\w.$/{-])([a-z_]+(?:\.[a-z_]+)+)(?![\w/])", dotted, message)
    return re.sub(r"(?<![\w-])--([a-z][a-z0-9-]*)(?: ([a-z]+))?", flag, message)


# Words that are a flag's value when they follow it (`--on-bad-record skip`), not the next word of the sentence.
SETTING_WORDS = ("skip", "fail", "never", "auto", "none", "true", "false", "paragraph", "line", "file")


def _check_model(r: PipelineRecipe) -> list[str]:
    """The base model folder (a Hub id: its config and tokenizer, no weights): a config transformers reads, and
    tokenizer files."""
    from yunshan.loading.hub_download import resolve_pretrained

    problems = []
    try:
        model_dir = Path(resolve_pretrained(r.model.name_or_path, r.model.revision, what="tokenizer"))
        tok = Path(resolve_pretrained(r.tokenizer.path, r.tokenizer.revision, what="tokenizer",
                                      field="tokenizer.path") if r.tokenizer.path else model_dir)
    except (FileNotFoundError, ValueError) as err:
        return [str(err)]
    if not (model_dir / "config.json").is_file():
        problems.append(f"model.name_or_path: {model_dir} has no config.json")
    else:
        from yunshan.loading.remote_code import refuse_remote_code

        try:
            from transformers import AutoConfig

            with refuse_remote_code(r.model.name_or_path, "model.trust_remote_code: true in the recipe"):
                AutoConfig.from_pretrained(model_dir, trust_remote_code=r.model.trust_remote_code)
        except Exception as err:  # noqa: BLE001  (reported, not raised: a dry run lists every problem)
            problems.append(f"model.name_or_path: {' '.join(str(err).split())}" if "Python code shipped" in str(err)
                            else f"model.name_or_path: {model_dir}: {err}")
    if not any((tok / f).is_file() for f in ("tokenizer.json", "tokenizer.model", "tokenizer_config.json")):
        problems.append(f"tokenizer: no tokenizer files in {tok}")
    return problems


def _barrier() -> None:
    from accelerate import PartialState

    PartialState().wait_for_everyone()


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")
