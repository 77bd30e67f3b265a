"""`yunshan run`: the whole YunShan pipeline from one recipe, stage by stage, into one run folder.

    yunshan run recipes/demo_tiny.yaml                     # the bundled demo: a few minutes on 2 CPU cores
    yunshan run recipes/pangu-pi-7b_yunshan_full.yaml --dry-run
    yunshan run RECIPE.yaml --from cpt                     # redo cpt and everything after it

Stages, in order (each writes its own subfolder of `output_dir`):

    base         stand-in base model (demo only): BPE tokenizer + small PanGu-π pretrained on general text
    tokenizer    vocabulary extension: continued BPE on domain text + word lists (yunshan.tokenizer)
    eval_before  yunshan eval on the base model
    cpt          continual pretraining, domain corpora mixed 1:1 in tokens with general replay (yunshan cpt)
    sft          one stage of mixed general + domain instruction tuning (yunshan sft)
    eval_after   yunshan eval on the final model
    export       safetensors + remote code + tokenizer + model card (yunshan export)
    push         to the Hugging Face Hub (off unless the recipe turns it on)

A stage whose output is complete (its marker in .stages/, written last, matches the stage's settings and inputs,
and its files still have the recorded hashes) is skipped on a re-run; `--from STAGE` redoes that stage and the
later ones. A stage that fails leaves the earlier stages' outputs as they were and is marked failed in the run
manifest (run.json: recipe, stages, timings, input and output hashes, token counts). At the end the runner prints
where everything is and a before/after table, and writes report.md with the plots.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import shutil
import time
import traceback
from pathlib import Path

STAGES = ("base", "tokenizer", "eval_before", "cpt", "sft", "eval_after", "export", "push")
MARKERS = ".stages"  # run_dir/.stages/<stage>.json: kept out of the stage folders (an export is pushed as is)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("recipe", help="pipeline recipe YAML (see recipes/)")
    parser.add_argument("overrides", nargs="*", help="dotted overrides, e.g. cpt.training.max_steps=50")
    parser.add_argument("--from", dest="from_stage", choices=STAGES, help="redo this stage and all later ones")
    parser.add_argument("--dry-run", action="store_true",
                        help="validate paths, fields and the stage plan; train nothing")


def run(args: argparse.Namespace) -> int:
    from yunshan.recipe import PipelineRecipe, load_recipe

    recipe = load_recipe(PipelineRecipe, args.recipe, args.overrides)
    runner = PipelineRunner(recipe, Path(args.recipe))
    if args.dry_run:
        plan = runner.dry_run(args.from_stage)
        print(json.dumps(plan, indent=2, ensure_ascii=False))
        return 0 if not plan["problems"] else 1
    runner.run(args.from_stage)
    return 0


# ---------------------------------------------------------------- hashing


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while block := f.read(chunk):
            digest.update(block)
    return digest.hexdigest()


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
    """The files a list of paths/globs/folders names (for hashing a stage's inputs)."""
    import glob

    found = []
    for p in paths:
        if os.path.isdir(p):
            found += sorted(q for q in Path(p).rglob("*") if q.is_file())
        elif any(c in p for c in "*?["):
            found += sorted(Path(q) for q in glob.glob(p, recursive=True) if os.path.isfile(q))
        elif os.path.isfile(p):
            found.append(Path(p))
    return found


# ---------------------------------------------------------------- the runner


class StageFailed(RuntimeError):
    pass


class PipelineRunner:
    def __init__(self, recipe, recipe_path: Path | None = None):
        self.recipe = recipe
        self.recipe_path = recipe_path
        self.out = Path(recipe.output_dir)
        self.manifest_path = self.out / "run.json"

    # -- plan ---------------------------------------------------------------------------------------------

    def enabled(self, stage: str) -> bool:
        r = self.recipe
        return {
            "base": r.base.enabled,
            "tokenizer": r.tokenizer_extension.enabled,
            "eval_before": r.eval.enabled,
            "cpt": r.cpt.enabled,
            "sft": r.sft.enabled,
            "eval_after": r.eval.enabled,
            "export": r.export.enabled,
            "push": r.push.enabled,
        }[stage]

    def folder(self, stage: str) -> Path:
        return self.out / f"{STAGES.index(stage):02d}_{stage}"

    def base_model_dir(self) -> str:
        if self.recipe.base.enabled:
            return str(self.folder("base"))
        return self.recipe.model.name_or_path

    def base_tokenizer_dir(self) -> str:
        return self.recipe.tokenizer.path or self.base_model_dir()

    def tokenizer_dir(self) -> str:
        return str(self.folder("tokenizer")) if self.enabled("tokenizer") else self.base_tokenizer_dir()

    def final_model_dir(self) -> str:
        for stage in ("sft", "cpt"):
            if self.enabled(stage):
                return str(self.folder(stage))
        return self.base_model_dir()

    def stage_settings(self, stage: str) -> dict:
        """The recipe sections a stage depends on (part of its fingerprint)."""
        r = dataclasses.asdict(self.recipe)
        section = {"base": "base", "tokenizer": "tokenizer_extension", "eval_before": "eval", "cpt": "cpt",
                   "sft": "sft", "eval_after": "eval", "export": "export", "push": "push"}[stage]
        return {"section": r[section], "model": r["model"], "tokenizer": r["tokenizer"], "name": r["name"]}

    def stage_inputs(self, stage: str) -> dict[str, str]:
        """Files a stage reads that are not produced by an earlier stage (data), with their hashes."""
        r = self.recipe
        paths: list[str] = []
        if stage == "base":
            paths = r.base.tokenizer_corpus + [_src_path(s) for s in r.base.data.sources]
        elif stage == "tokenizer":
            paths = r.tokenizer_extension.corpus + [w for w in r.tokenizer_extension.words
                                                    if not w.startswith("builtin:")]
        elif stage == "cpt":
            paths = [_src_path(s) for s in r.cpt.data.sources] + r.cpt.monitor.general + r.cpt.monitor.domain
        elif stage == "sft":
            paths = [p for s in r.sft.data.sources for p in ([s.path] if isinstance(s.path, str) else s.path)]
        elif stage in ("eval_before", "eval_after"):
            paths = [h.split("=", 1)[1] for h in r.eval.heldout if "=" in h] + list(r.eval.text)
            paths += [t.split("=", 1)[1] for t in r.eval.tasks if "=" in t]
        files = [f for p in paths if p for f in input_files([p])]
        return {str(f): sha256_file(f) for f in files}

    def upstream(self, stage: str) -> list[str]:
        """Earlier stages whose outputs this stage reads."""
        return {
            "base": [],
            "tokenizer": ["base"],
            "eval_before": ["base"],
            "cpt": ["base", "tokenizer"],
            "sft": ["base", "tokenizer", "cpt"],
            "eval_after": ["base", "tokenizer", "cpt", "sft"],
            "export": ["base", "tokenizer", "eval_before", "cpt", "sft", "eval_after"],
            "push": ["export"],
        }[stage]

    def fingerprint(self, stage: str, manifest: dict) -> str:
        ups = {s: manifest["stages"].get(s, {}).get("fingerprint") for s in self.upstream(stage) if self.enabled(s)}
        return digest_of({"settings": self.stage_settings(stage), "inputs": self.stage_inputs(stage),
                          "upstream": ups, "base_model": self.base_model_dir() if stage != "base" else None})

    def marker(self, stage: str) -> Path:
        return self.out / MARKERS / f"{stage}.json"

    def is_complete(self, stage: str, fingerprint: str) -> bool:
        marker = self.marker(stage)
        if not marker.is_file():
            return False
        try:
            info = json.loads(marker.read_text())
        except json.JSONDecodeError:
            return False
        if info.get("fingerprint") != fingerprint:
            return False
        return hash_tree(self.folder(stage)) == info.get("outputs")

    # -- manifest -----------------------------------------------------------------------------------------

    def load_manifest(self) -> dict:
        if self.manifest_path.is_file():
            manifest = json.loads(self.manifest_path.read_text())
        else:
            manifest = {}
        from yunshan import __version__

        manifest.update({
            "name": self.recipe.name, "yunshan_version": __version__, "recipe": "recipe.yaml",
            "base_model": str(Path(self.base_model_dir()).resolve()) if Path(self.base_model_dir()).exists()
            else self.base_model_dir(),
            "final_model": os.path.relpath(self.final_model_dir(), self.out)
            if self.final_model_dir().startswith(str(self.out)) else self.final_model_dir(),
        })
        manifest.setdefault("stages", {})
        return manifest

    def save_manifest(self, manifest: dict) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        manifest["stages"] = {s: manifest["stages"][s] for s in STAGES if s in manifest["stages"]}
        manifest["stage_list"] = [{"name": s, **manifest["stages"][s]} for s in STAGES if s in manifest["stages"]]
        ordered = dict(manifest)
        tmp = self.manifest_path.with_suffix(".json.tmp")
        tmp.write_text(json.dumps(ordered, indent=2, ensure_ascii=False))
        os.replace(tmp, self.manifest_path)

    # -- running ------------------------------------------------------------------------------------------

    def run(self, from_stage: str | None = None) -> dict:
        """Run the stages in order. Under `accelerate launch` (several processes) the training stages run on every
        process and the others (tokenizer, evaluation, export, push, which need one process) on the main one while
        the rest wait; only the main process writes the manifest, markers and report."""
        from yunshan.recipe import save_recipe

        started = time.time()
        world = int(os.environ.get("WORLD_SIZE", "1"))
        main = int(os.environ.get("RANK", "0")) == 0
        barrier = _barrier if world > 1 else (lambda: None)
        if main:
            self.out.mkdir(parents=True, exist_ok=True)
            save_recipe(self.recipe, self.out / "recipe.yaml",
                        header=f"resolved pipeline recipe of run {self.recipe.name}")
        barrier()
        manifest = self.load_manifest()
        forced = False
        for stage in STAGES:
            if not self.enabled(stage):
                manifest["stages"].pop(stage, None)
                continue
            forced = forced or stage == from_stage
            fingerprint = self.fingerprint(stage, manifest)
            if not forced and self.is_complete(stage, fingerprint):
                if main:
                    print(f"== {stage}: complete, skipped ({self.folder(stage)})", flush=True)
                manifest["stages"][stage]["status"] = "complete"
                continue
            everywhere = stage in ("cpt", "sft")  # the distributed stages
            if main:
                print(f"\n== {stage} -> {self.folder(stage)}", flush=True)
            entry = {"status": "running", "output": self.folder(stage).name, "started": _now(),
                     "fingerprint": fingerprint, "inputs": self.stage_inputs(stage)}
            manifest["stages"][stage] = entry
            marker = self.marker(stage)
            if main:
                self.save_manifest(manifest)
                if marker.exists():
                    marker.unlink()  # the stage is redone: its old output no longer counts as complete
            barrier()
            t0 = time.time()
            try:
                summary = getattr(self, f"stage_{stage}")() if (everywhere or main) else {}
            except BaseException as err:
                entry.update({"status": "failed", "seconds": round(time.time() - t0, 1),
                              "error": f"{type(err).__name__}: {err}",
                              "traceback": traceback.format_exc()[-4000:]})
                if main:
                    self.save_manifest(manifest)
                raise
            barrier()
            outputs = hash_tree(self.folder(stage))
            entry.update({"status": "complete", "finished": _now(), "seconds": round(time.time() - t0, 1),
                          "outputs": outputs, "summary": summary})
            if main:
                self.folder(stage).mkdir(parents=True, exist_ok=True)
                marker.parent.mkdir(parents=True, exist_ok=True)
                marker.write_text(json.dumps({"stage": stage, "fingerprint": fingerprint, "outputs": outputs,
                                              "finished": entry["finished"]}, indent=1))
                self.save_manifest(manifest)
            barrier()
        manifest["seconds_this_run"] = round(time.time() - started, 1)
        if main:
            report = self.write_report(manifest)
            manifest["report"] = str(report.relative_to(self.out))
            self.save_manifest(manifest)
            self.print_summary(manifest)
        barrier()
        return manifest

    def dry_run(self, from_stage: str | None = None) -> dict:
        """Check the recipe's files, models and stages without training anything."""
        problems = []
        r = self.recipe
        paths = []
        if r.base.enabled:
            paths += r.base.tokenizer_corpus + [_src_path(s) for s in r.base.data.sources]
        else:
            model_dir = Path(r.model.name_or_path)
            if not (model_dir / "config.json").is_file():
                problems.append(f"model.name_or_path: {model_dir} has no config.json")
            else:
                try:
                    from transformers import AutoConfig

                    import yunshan  # noqa: F401

                    AutoConfig.from_pretrained(model_dir, trust_remote_code=r.model.trust_remote_code)
                except Exception as err:  # noqa: BLE001  (reported, not raised: a dry run lists every problem)
                    problems.append(f"model.name_or_path: {model_dir}: {err}")
            tok = Path(r.tokenizer.path or r.model.name_or_path)
            if not any((tok / f).is_file() for f in ("tokenizer.json", "tokenizer.model", "tokenizer_config.json")):
                problems.append(f"tokenizer: no tokenizer files in {tok}")
        if r.tokenizer_extension.enabled:
            paths += r.tokenizer_extension.corpus + r.tokenizer_extension.report_texts
            from yunshan.tokenizer import resolve_word_lists

            try:
                resolve_word_lists(r.tokenizer_extension.words)
            except (ValueError, FileNotFoundError) as err:
                problems.append(f"tokenizer_extension.words: {err}")
        if r.cpt.enabled:
            paths += [_src_path(s) for s in r.cpt.data.sources] + r.cpt.monitor.general + r.cpt.monitor.domain
            if not r.cpt.data.sources:
                problems.append("cpt.data.sources is empty")
        if r.sft.enabled:
            paths += [p for s in r.sft.data.sources for p in ([s.path] if isinstance(s.path, str) else s.path)]
            if not r.sft.data.sources:
                problems.append("sft.data.sources is empty")
        if r.eval.enabled:
            paths += [h.split("=", 1)[1] for h in r.eval.heldout if "=" in h] + list(r.eval.text)
            paths += [t.split("=", 1)[1] for t in r.eval.tasks if "=" in t]
            if r.eval.data_dir:
                paths.append(r.eval.data_dir)
        if r.push.enabled and not r.push.repo_id:
            problems.append("push.enabled but push.repo_id is not set")
        for p in paths:
            if p and not input_files([p]) and not os.path.isdir(p):
                problems.append(f"missing: {p}")
        manifest = self.load_manifest() if self.manifest_path.exists() else {"stages": {}}
        plan = []
        forced = False
        for stage in STAGES:
            if not self.enabled(stage):
                plan.append({"stage": stage, "action": "disabled"})
                continue
            forced = forced or stage == from_stage
            try:
                done = not forced and self.is_complete(stage, self.fingerprint(stage, manifest))
            except OSError:
                done = False
            plan.append({"stage": stage, "action": "skip (complete)" if done else "run",
                         "output": str(self.folder(stage))})
        return {"recipe": str(self.recipe_path) if self.recipe_path else None, "output_dir": str(self.out),
                "plan": plan, "problems": problems}

    # -- stages -------------------------------------------------------------------------------------------

    def stage_base(self) -> dict:
        """Stand-in base: a byte-level BPE tokenizer on general text, then a small PanGu-π pretrained on it."""
        from yunshan.recipe import CptRecipe, MonitorArgs, TokenizerArgs
        from yunshan.training.cpt import run_cpt

        b = self.recipe.base
        out = self.folder("base")
        tok_dir = self.out / "base_tokenizer"
        train_base_tokenizer(b.tokenizer_corpus, b.vocab_size, tok_dir)
        training = dataclasses.replace(b.training, output_dir=str(out))
        summary = run_cpt(CptRecipe(model=b.model, tokenizer=TokenizerArgs(path=str(tok_dir)), data=b.data,
                                    training=training, monitor=MonitorArgs(every_steps=0)))
        shutil.rmtree(out / "checkpoints", ignore_errors=True)
        (out / "STAND_IN_BASE.md").write_text(
            "This model is a stand-in for a downloaded base model: a small PanGu-π and byte-level BPE tokenizer "
            "trained by `yunshan run` on the bundled general sample text only, because this machine cannot "
            "download a real base. Real recipes name a downloaded checkpoint in `model.name_or_path` instead.\n")
        return {"train_loss": summary["train_loss"], "steps": summary["steps"],
                "tokens": summary["data_report"]["tokens_trained"]}

    def stage_tokenizer(self) -> dict:
        from yunshan.tokenizer import ExtendArgs, compression_report, extend_tokenizer

        t = self.recipe.tokenizer_extension
        out = self.folder("tokenizer")
        extension = extend_tokenizer(ExtendArgs(
            base=self.base_tokenizer_dir(), corpus=t.corpus, new_tokens=t.new_tokens, out=str(out),
            words=list(t.words), min_frequency=t.min_frequency, overwrite=True))
        report = {"extension": extension}
        if t.report_texts:
            report["compression"] = compression_report([self.base_tokenizer_dir(), str(out)], t.report_texts)
        (out / "report.json").write_text(json.dumps(report, indent=2, ensure_ascii=False, default=str))
        sizes = _vocab_sizes(self.base_tokenizer_dir(), str(out))
        return {"base_vocab": sizes[0], "new_vocab": sizes[1], "new_tokens": sizes[1] - sizes[0]}

    def _eval(self, stage: str, model_dirs: list[str]) -> dict:
        from yunshan.eval.commands import EvalArgs, run_eval

        e = self.recipe.eval
        out = self.folder(stage)
        report = run_eval(EvalArgs(
            model=model_dirs, tasks=list(e.tasks), data_dir=e.data_dir, limit=e.limit, shots=e.shots, mode=e.mode,
            heldout=list(e.heldout), text=list(e.text), max_length=e.max_length, batch_size=e.batch_size,
            dtype=e.dtype, out=str(out), progress=True))
        return {"results": "results.json", "models": model_dirs, "seconds": report.get("seconds")}

    def stage_eval_before(self) -> dict:
        return self._eval("eval_before", [self.base_model_dir()])

    def stage_eval_after(self) -> dict:
        # Both trained models: after continual pretraining (the replay's effect on forgetting) and the final one.
        models = [str(self.folder(s)) for s in ("cpt", "sft") if self.enabled(s)] or [self.base_model_dir()]
        return self._eval("eval_after", models)

    def stage_cpt(self) -> dict:
        from yunshan.recipe import CptRecipe, TokenizerArgs
        from yunshan.training.cpt import run_cpt

        c = self.recipe.cpt
        model = self._trained_model_args(self.base_model_dir())
        recipe = CptRecipe(model=model,
                           tokenizer=TokenizerArgs(path=self.tokenizer_dir(), base_path=self.base_tokenizer_dir()),
                           data=c.data, training=dataclasses.replace(c.training, output_dir=str(self.folder("cpt"))),
                           lora=c.lora, monitor=c.monitor, warmup=c.warmup)
        summary = run_cpt(recipe)
        shutil.rmtree(self.folder("cpt") / "checkpoints", ignore_errors=True)
        report = summary["data_report"]
        out = {"train_loss": summary["train_loss"], "steps": summary["steps"], "tokens": report["tokens_trained"],
               "tokens_by_source": {n: s["tokens_trained"] for n, s in report["sources"].items()},
               "bpc": summary.get("bpc"), "precision": report.get("precision")}
        if "extension_cost" in report:
            out["extension_cost"] = report["extension_cost"]
        if "embedding_warmup" in report:
            out["embedding_warmup"] = {k: v for k, v in report["embedding_warmup"].items() if k != "checks"}
        return out

    def stage_sft(self) -> dict:
        from yunshan.recipe import SftRecipe, TokenizerArgs
        from yunshan.training.sft import run_sft

        s = self.recipe.sft
        previous = str(self.folder("cpt")) if self.enabled("cpt") else self.base_model_dir()
        tok = previous if self.enabled("cpt") else self.tokenizer_dir()
        recipe = SftRecipe(model=self._trained_model_args(previous),
                           tokenizer=TokenizerArgs(path=tok, base_path=self.base_tokenizer_dir()),
                           data=s.data, training=dataclasses.replace(s.training, output_dir=str(self.folder("sft"))),
                           lora=s.lora)
        summary = run_sft(recipe)
        shutil.rmtree(self.folder("sft") / "checkpoints", ignore_errors=True)
        report = summary["data_report"]
        return {"train_loss": summary["train_loss"], "steps": summary["steps"], "samples": report["samples"],
                "precision": report.get("precision"),
                "samples_by_source": {n: v["samples"] for n, v in report["sources"].items()}}

    def stage_export(self) -> dict:
        from yunshan.hub import export_model

        e = self.recipe.export
        result = export_model(str(self.out), str(self.folder("export")), adapter=e.adapter, license=e.license,
                              language=list(e.language), name=self.recipe.name, repo_id=self.recipe.push.repo_id,
                              overwrite=True)
        return {"files": sorted(p.name for p in self.folder("export").iterdir()), "bytes": result.get("bytes"),
                "parameters": result.get("parameters"), "notes": result.get("notes")}

    def stage_push(self) -> dict:
        from yunshan.hub import push_folder

        p = self.recipe.push
        result = push_folder(str(self.folder("export")), p.repo_id, private=p.private, revision=p.revision,
                             create_pr=p.create_pr)
        self.folder("push").mkdir(parents=True, exist_ok=True)
        (self.folder("push") / "push.json").write_text(json.dumps(result, indent=2, default=str))
        return result

    def _trained_model_args(self, path: str):
        from yunshan.recipe import ModelArgs

        base = self.recipe.model or self.recipe.base.model
        return ModelArgs(name_or_path=path, dtype=base.dtype, attn_implementation=base.attn_implementation,
                         trust_remote_code=base.trust_remote_code)

    # -- report -------------------------------------------------------------------------------------------

    def before_after(self) -> tuple[list[str], list[list[str]]]:
        """(column names, rows) of the before/after table: one column per evaluated model (base, after cpt, after
        sft), then the change from the base to the last; tokenizer compression rows from the tokenizer stage."""
        before = _load_results(self.folder("eval_before") / "results.json")
        after = _load_results(self.folder("eval_after") / "results.json")
        columns, rows = [], []
        if before and after:
            models = [("before", before, next(iter(before["models"])))]
            models += [(f"after {name.split('_', 1)[-1]}", after, name) for name in after["models"]]
            columns = [label for label, _, _ in models]
            mode = after.get("settings", {}).get("mode", "loglik")
            for task, res in after["tasks"].items():
                if task not in before["tasks"]:
                    continue
                values = [doc["tasks"][task]["results"][name] for _, doc, name in models]
                if res.get("format") == "bpc":
                    for label in values[-1]["files"]:
                        if all(label in v["files"] for v in values):
                            kind = "general (forgetting)" if label == "general" else "domain (gain)"
                            nums = [v["files"][label]["bpc"] for v in values]
                            rows.append([f"bits/char, {label}: {kind}"] + [f"{x:.4f}" for x in nums]
                                        + [f"{100 * (nums[-1] / nums[0] - 1):+.1f}%"])
                elif all("overall" in v for v in values):
                    nums = [v["overall"] for v in values]
                    scoring = {"loglik": "answer-only", "cloze": "cloze", "generate": "generated"}.get(mode, mode)
                    rows.append([f"{task} accuracy % ({scoring}; chance 25)"] + [f"{x:.1f}" for x in nums]
                                + [f"{nums[-1] - nums[0]:+.1f} pt"])
        tok_report = self.folder("tokenizer") / "report.json"
        if tok_report.is_file():
            comp = json.loads(tok_report.read_text()).get("compression")
            width = max(len(columns), 2)
            for f in (comp or {}).get("files", []):
                res = f.get("results", [])
                if len(res) == 2:
                    b, a = res[0]["tokens_per_char"], res[1]["tokens_per_char"]
                    cells = [f"{b:.3f}"] + [""] * (width - 2) + [f"{a:.3f}"]
                    rows.append([f"tokens/char, {Path(f['path']).name}"] + cells + [f"{100 * (a / b - 1):+.1f}%"])
            columns = columns or ["before", "after"]
        return columns, rows

    def write_report(self, manifest: dict) -> Path:
        columns, rows = self.before_after()
        lines = [f"# yunshan run: {self.recipe.name}", "",
                 f"Base model: `{manifest['base_model']}`" + (" (stand-in trained here from the bundled general "
                                                                "sample)" if self.recipe.base.enabled else ""),
                 f"Final model: `{manifest['final_model']}`", "", "## Before and after", ""]
        if rows:
            lines += ["| metric | " + " | ".join(columns) + " | change |", "|---|" + "---:|" * (len(columns) + 1)]
            lines += ["| " + " | ".join(r) + " |" for r in rows]
        else:
            lines.append("(no evaluation stages ran)")
        lines += ["", "## Stages", "", "| stage | status | seconds | output |", "|---|---|---:|---|"]
        for stage in STAGES:
            if stage in manifest["stages"]:
                s = manifest["stages"][stage]
                lines.append(f"| {stage} | {s['status']} | {s.get('seconds', '')} | `{s.get('output', '')}` |")
        cpt = manifest["stages"].get("cpt", {}).get("summary")
        if cpt and cpt.get("extension_cost"):
            lines += ["", *_extension_cost_lines(cpt)]
        precisions = [(stage, manifest["stages"][stage].get("summary", {}).get("precision"))
                      for stage in ("cpt", "sft") if stage in manifest["stages"]]
        if any(p for _, p in precisions):
            lines += ["", "Training precision: " + "; ".join(f"{stage} {p['value']} ({p['reason']})"
                                                            for stage, p in precisions if p)]
        if cpt:
            lines += ["", "## Continual-pretraining mixture (tokens trained)", "", "| source | tokens | share |",
                      "|---|---:|---:|"]
            total = sum(cpt["tokens_by_source"].values()) or 1
            lines += [f"| {n} | {t:,} | {100 * t / total:.2f}% |" for n, t in cpt["tokens_by_source"].items()]
        plots = [(self.folder("cpt") / "curves.png", "continual pretraining: loss and held-out bits/char"),
                 (self.folder("sft") / "curves.png", "SFT: loss"),
                 (self.folder("base") / "curves.png", "stand-in base pretraining")]
        lines += ["", "## Plots", ""]
        for path, caption in plots:
            if path.is_file():
                lines += [f"![{caption}]({path.relative_to(self.out)})", ""]
        report = self.out / "report.md"
        report.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return report

    def print_summary(self, manifest: dict) -> None:
        print(f"\n== done: {self.out}", flush=True)
        for stage in STAGES:
            if stage in manifest["stages"]:
                s = manifest["stages"][stage]
                print(f"   {stage:<12} {s['status']:<9} {str(s.get('seconds', '')):>7} s  {self.out / s['output']}")
        columns, rows = self.before_after()
        if rows:
            width = max(len(r[0]) for r in rows)
            print(f"\n   {'metric':<{width}}  " + "  ".join(f"{c:>10}" for c in columns) + "  change")
            for r in rows:
                print(f"   {r[0]:<{width}}  " + "  ".join(f"{c:>10}" for c in r[1:-1]) + f"  {r[-1]}")
        print(f"\n   report: {self.out / 'report.md'}   manifest: {self.manifest_path}", flush=True)


# ---------------------------------------------------------------- helpers


def _extension_cost_lines(cpt: dict) -> list[str]:
    """The step-0 cost of the vocabulary extension and what the warm-up and CPT recovered (held-out bits/char)."""
    cost = cpt["extension_cost"]
    warm = cpt.get("embedding_warmup") or {}
    final = (cpt.get("bpc") or [{}])[-1]
    columns = [("base model, own tokenizer", cost.get("base", {})), ("extended, new rows as initialised",
                                                                    cost.get("init", {}))]
    if cost.get("step0") and warm.get("fit"):
        columns.append(("after the output-row fit", cost["step0"]))
    columns.append((f"after cpt (step {final.get('step', '?')})", {k[4:]: v for k, v in final.items()
                                                                    if k.startswith("bpc_")}))
    lines = ["## Vocabulary extension: cost at step 0 and recovery (held-out bits/char of the cpt monitor)", "",
             f"{cost.get('new_tokens', '?'):,} new tokens; {cost.get('planned_tokens', 0):,} training tokens "
             "planned.", "", "| held-out | " + " | ".join(label for label, _ in columns) + " |",
             "|---|" + "---:|" * len(columns)]
    for name, base in cost.get("base", {}).items():
        cells = []
        for label, values in columns:
            value = values.get(name)
            cells.append("" if value is None else f"{value:.4f}" if values is cost["base"]
                         else f"{value:.4f} ({100 * (value / base - 1):+.1f}%)")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    if warm:
        lines += ["", f"Embedding warm-up: {warm.get('steps')} steps ({warm.get('ended')}), new rows only, learning "
                      f"rate {warm.get('learning_rate')}."]
    lines += [f"Warning: {w}" for w in cost.get("warnings", [])]
    return lines


def _barrier() -> None:
    from accelerate import PartialState

    PartialState().wait_for_everyone()


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def _src_path(source) -> str:
    if source.path is None:
        return ""
    return source.path if isinstance(source.path, str) else source.path[0]


def _load_results(path: Path) -> dict | None:
    return json.loads(path.read_text()) if path.is_file() else None


def _vocab_sizes(*folders: str) -> list[int]:
    from transformers import AutoTokenizer

    return [len(AutoTokenizer.from_pretrained(f)) for f in folders]


def train_base_tokenizer(corpus: list[str], vocab_size: int, out: Path) -> None:
    """A byte-level BPE tokenizer (GPT-2 / Llama-3 style) trained on `corpus` (.jsonl text fields or .txt)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from yunshan.training.monitoring import read_heldout

    texts = []
    for path in input_files(corpus):
        if path.suffix == ".jsonl":
            with open(path, encoding="utf-8") as f:
                texts += [json.loads(line)["text"] for line in f if line.strip()]
        else:
            texts += read_heldout([str(path)], 10**12)
    if not texts:
        raise ValueError(f"base.tokenizer_corpus {corpus} holds no text")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<pad>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>").save_pretrained(out)

