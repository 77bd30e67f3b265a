"""How an exported model was made, read from the files beside it: a `yunshan run` folder (run.json and every stage's
records) or a plain model folder (its data report and recipe, and those of the yunshan training folders it was trained
from, back to the checkpoint the first started from: `trace_base`). The model card (yunshan.hub.card) renders this.

    from yunshan.hub.provenance import collect_provenance
    prov = collect_provenance("runs/demo_tiny")           # a run folder (run.json) or a plain model folder

Everything is read through yunshan.io.artifacts (typed RunManifest, DataReport, TokenizerReport,
DecontaminationReport, EvalResults); every part is optional, and a part that is missing or unreadable is left
empty (the card then says so). Evaluation results are matched to the exported weights by the sha256 `yunshan
eval` recorded: only results for exactly these files count as this model's.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from yunshan.io.artifacts import (
    DataReport, DecontaminationReport, EvalResults, Metric, RunManifest, StageRecord, TokenizerReport)

# Hub repo ids: NAMESPACE/NAME, letters, digits, "-", "_", "." (no "--" or "..", not starting or ending with - or .)
REPO_ID = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9_.-]*[A-Za-z0-9])?/[A-Za-z0-9](?:[A-Za-z0-9_.-]*[A-Za-z0-9])?$")
# A snapshot folder of the HF cache names its repo: .../models--ORG--NAME/snapshots/<sha>
HF_CACHE_SNAPSHOT = re.compile(r"models--([^/\\]+?)--([^/\\]+)[/\\]snapshots[/\\]")


@dataclass
class EvalColumn:
    """One evaluated model: a column of the evaluation table."""

    label: str
    metrics: dict[str, Metric]  # metric key -> the headline metric `yunshan eval` recorded
    this_model: bool = False
    verified: bool = False  # results.json's sha256 equals the exported folder's
    stale: bool = False  # recorded for the final model's stage but for other files than the exported ones
    source: str = ""
    model: str = ""  # the model folder or id the results record as scored


@dataclass
class TrainingRecord:
    """A training stage's output folder: its data report and the sources its recipe named."""

    report: DataReport | None
    sources: list[dict]
    recipe: dict | None


@dataclass
class Provenance:
    """Everything known about how a model folder was made, gathered from the files beside it."""

    source: Path
    model_dir: Path
    run_dir: Path | None = None
    manifest: RunManifest | None = None
    name: str = "model"
    base_model: str | None = None  # path or id as recorded: the checkpoint the training started from
    base_model_id: str | None = None  # Hub id, when known
    base_source: str | None = None  # how a local base folder was made (a GGUF import), when recorded
    stand_in_base: bool = False
    stages: list[StageRecord] = field(default_factory=list)
    cpt: TrainingRecord | None = None
    sft: TrainingRecord | None = None
    preference: TrainingRecord | None = None
    tokenizer_report: TokenizerReport | None = None
    decontamination: DecontaminationReport | None = None
    evals: list[EvalColumn] = field(default_factory=list)
    recipe_path: Path | None = None
    yunshan_version: str | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def adapter_dir(self) -> Path | None:
        folder = self.model_dir / "adapter"
        return folder if (folder / "adapter_config.json").is_file() else None


# ---------------------------------------------------------------- gathering


def _read_json(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return None


def _read_yaml(path: Path) -> dict | None:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, yaml.YAMLError):
        return None
    return data if isinstance(data, dict) else None


def hub_id_of(base: str | None) -> str | None:
    """The Hub id a base-model string names: an HF cache snapshot path or an ORG/NAME that is not a local folder."""
    if not base:
        return None
    match = HF_CACHE_SNAPSHOT.search(base)
    if match:
        return f"{match.group(1)}/{match.group(2)}"
    if REPO_ID.match(base) and not Path(base).exists() and "--" not in base and ".." not in base:
        return base
    return None


def stage_kind(stage: StageRecord) -> str:
    """What a stage did, from its name (eval_before and eval_after are both evaluations)."""
    return "eval" if stage.name.startswith("eval") else stage.name


def is_complete(stage: StageRecord) -> bool:
    return stage.status == "complete"


def resolve_in_run(run_dir: Path, recorded: str | None) -> Path | None:
    """A folder recorded in run.json: relative to the run folder, as recorded (absolute or relative to where the
    run was started), or the run folder's entry of the same name."""
    if not recorded:
        return None
    for candidate in (run_dir / recorded, Path(recorded), run_dir / Path(recorded).name):
        if candidate.exists():
            return candidate
    return None


def _training_record(folder: Path) -> TrainingRecord | None:
    """The data report (which says whether the folder is a cpt, sft or preference output) and recipe of a training
    folder."""
    report = None
    if (folder / DataReport.FILE).is_file():
        try:
            report = DataReport.read(folder)
        except ValueError:
            report = None  # written by an older yunshan, without its kind: shown as not recorded
    recipe = _read_yaml(folder / "recipe.yaml")
    if report is None and recipe is None:
        return None
    sources = ((recipe or {}).get("data") or {}).get("sources") or []
    return TrainingRecord(report, [s for s in sources if isinstance(s, dict)], recipe)


def _local_folder(recorded: str, beside: Path) -> Path | None:
    """A folder a recipe names: as recorded (absolute, or relative to where the command ran), else beside the folder
    whose recipe names it."""
    for candidate in (Path(recorded), beside / recorded, beside.parent / recorded):
        if candidate.is_dir():
            return candidate
    return None


def trace_base(recorded: str | None, beside: Path) -> tuple[str | None, list[tuple[str, Path, TrainingRecord]]]:
    """Follow a recorded base back through yunshan's own training folders: a standalone `yunshan sft` of a `yunshan
    cpt` folder names the cpt folder as its model, whose recipe names the checkpoint it started from. Returns (that
    checkpoint as its recipe records it, the training folders passed on the way as (kind, folder, record), nearest
    first). A folder without a data report of its kind (a model saved some other way) ends the chain."""
    chain: list[tuple[str, Path, TrainingRecord]] = []
    seen: set[Path] = set()
    while recorded:
        folder = _local_folder(recorded, beside)
        if folder is None or folder.resolve() in seen:
            break
        seen.add(folder.resolve())
        record = _training_record(folder)
        kind = record.report.kind if record and record.report else None
        if kind is None:
            break
        chain.append((kind, folder, record))
        model_args = (record.recipe or {}).get("model") or {}
        recorded = model_args.get("name_or_path") or (
            f"PanGu-π preset {model_args['preset']!r} (trained from scratch)" if model_args.get("preset") else None)
        beside = folder
    return recorded, chain


def import_source(folder: Path) -> tuple[str | None, str | None]:
    """(what made a local model folder, its Hub id) from `yunshan model import-gguf`'s report: the GGUF file and the
    name and organization its metadata gives; the Hub id when the metadata names a huggingface.co repository."""
    from yunshan.models.gguf import IMPORT_REPORT

    report = _read_json(folder / IMPORT_REPORT)
    if not isinstance(report, dict):
        return None, None
    meta = report.get("gguf_metadata") if isinstance(report.get("gguf_metadata"), dict) else {}
    file = (report.get("source") or {}).get("file") if isinstance(report.get("source"), dict) else None
    named = [str(meta[k]) for k in ("general.name", "general.organization") if meta.get(k)]
    what = "imported by `yunshan model import-gguf`" + (f" from `{file}`" if file else "") + (
        f" ({', '.join(named)})" if named else "")
    hub = None
    for key in ("general.repo_url", "general.source.repo_url", "general.source.huggingface.repository"):
        url = str(meta.get(key) or "")
        candidate = url.split("huggingface.co/", 1)[1].strip("/") if "huggingface.co/" in url else url
        if candidate and REPO_ID.match(candidate) and hub_id_of(candidate) == candidate:
            hub = candidate
            break
    return what, hub


def _known_models(prov: Provenance, base_dir: Path | None) -> dict[Path, str]:
    """The folders this model was made from, resolved -> what the card calls them (to name the model an --eval
    results file scored)."""
    known = {}
    if base_dir is not None:
        known[base_dir.resolve()] = "the model the training started from"
    for stage in prov.stages:
        folder = resolve_in_run(prov.run_dir, stage.output) if prov.run_dir else Path(stage.output)
        if folder is not None and folder.exists() and folder.resolve() != prov.model_dir.resolve():
            known.setdefault(folder.resolve(), f"the {stage_kind(stage)} stage's model this one was trained from")
    return known


def _adds_nothing(path: Path, columns: list[EvalColumn], known: dict[Path, str]) -> str | None:
    """Why an --eval results file puts nothing into model-index, or None when it does (or only its staleness,
    noted apart, keeps it out)."""
    if any(c.stale for c in columns):
        return None
    mine = [c for c in columns if c.this_model]
    if not columns:
        return f"--eval {path}: it holds no model's results, so it adds nothing to the card"
    if not mine:
        scored = []
        for c in columns:
            try:
                what = known.get(Path(c.model).resolve()) if c.model else None
            except OSError:
                what = None
            name = Path(c.model).name if c.model else c.label
            scored.append(f"{name} ({c.model})" + (f", {what}" if what else ""))
        return (f"--eval {path}: it holds the results of {'; '.join(scored)}, not of the exported weights (by the "
                "sha256 yunshan eval recorded): shown as a comparison column, left out of model-index")
    if not any(m.eval_result for c in mine for m in c.metrics.values()):
        tasks = sorted({key.split("/", 1)[0] for c in mine for key in c.metrics}) or ["none"]
        return (f"--eval {path}: its tasks ({', '.join(tasks)}) record no metric the Hub's model-index takes "
                "(a benchmark score): shown in the evaluation table only")
    return None


def _eval_columns(results_path: Path, label: str, model_dir: Path, model_hash: str | None,
                  final_stage: bool) -> list[EvalColumn]:
    """One column per model of a `yunshan eval` results.json; marks the exported model's column."""
    try:
        results = EvalResults.read(results_path)
    except ValueError:
        return []
    names = list(results.models) or sorted({m for t in results.tasks.values() for m in t.results})
    columns = []
    for name in names:
        info = results.models.get(name)
        recorded = info.sha256 if info else None
        same_path = False
        if info and info.path:
            try:
                same_path = Path(info.path).resolve() == model_dir.resolve()
            except OSError:
                same_path = False
        verified = bool(recorded) and recorded == model_hash
        # A results.json with hashes tells exactly which weights were scored; without one, fall back to the path.
        this_model = verified or (not recorded and same_path)
        stale = bool(recorded) and not verified and (same_path or final_stage)
        metrics = {m.key: m for task in results.tasks.values() for m in task.metrics.get(name, [])}
        column_label = label if len(names) == 1 else f"{label}: {name}"
        columns.append(EvalColumn(column_label, metrics, this_model=this_model and not stale, verified=verified,
                                  stale=stale, source=str(results_path), model=(info.path if info else "") or name))
    return columns


def collect_provenance(source: str | Path, eval_files: list[str] | None = None, adapter: bool = False) -> Provenance:
    """Read a run folder (run.json) or a model folder and everything recorded beside it.

    Args:
        source: a `yunshan run` folder (holding run.json) or a model folder (config.json, or adapter/ only).
        eval_files: extra `yunshan eval` results.json files (or folders holding one) to show and, for the entry
            whose recorded hash matches the model folder, to put into model-index.
        adapter: the export is the LoRA adapter; the exported folder is then `model_dir/adapter`.
    """
    from yunshan.eval.loading import sha256_model_dir

    src = Path(source)
    if not src.is_dir():
        raise FileNotFoundError(f"{src}: no such folder (give a `yunshan run` folder or a model folder)")
    manifest_path = src / RunManifest.FILE
    prov = Provenance(source=src, model_dir=src, name=src.resolve().name)
    base_dir = None  # the base model's folder, when it is a local one
    if manifest_path.is_file():
        manifest = RunManifest.read(manifest_path)
        prov.run_dir, prov.manifest = src, manifest
        prov.name = manifest.name or prov.name
        prov.yunshan_version = manifest.yunshan_version
        prov.stages = list(manifest.stages)
        final = resolve_in_run(src, manifest.final_model)
        if final is None:
            raise FileNotFoundError(f"{manifest_path}: field final_model={manifest.final_model!r} is not a "
                                    "folder; finish the run (yunshan run RECIPE) before exporting")
        prov.model_dir = final
        for stage in prov.stages:
            out = resolve_in_run(src, stage.output)
            if out is not None and out.resolve() == final.resolve() and not is_complete(stage):
                raise ValueError(f"{manifest_path}: stage {stage.name} (the final model, {stage.output}) "
                                 f"has status {stage.status!r}, not 'complete'; finish it before exporting")
        prov.base_model = manifest.base_model
        base_dir = resolve_in_run(src, prov.base_model)
        prov.stand_in_base = any(stage_kind(s) == "base" for s in prov.stages) or bool(
            base_dir and (base_dir / "STAND_IN_BASE.md").is_file())
        if (src / "recipe.yaml").is_file():
            prov.recipe_path = src / "recipe.yaml"
        for stage in prov.stages:
            kind = stage_kind(stage)
            out = resolve_in_run(src, stage.output)
            if out is None or not is_complete(stage):
                continue
            if kind in ("cpt", "sft", "preference"):
                setattr(prov, kind, _training_record(out))
            elif kind == "tokenizer" and (out / TokenizerReport.FILE).is_file():
                try:
                    prov.tokenizer_report = TokenizerReport.read(out)
                except ValueError:
                    prov.tokenizer_report = None  # unreadable: the card leaves the section out
            elif kind == "decontamination" and (out / DecontaminationReport.FILE).is_file():
                try:
                    prov.decontamination = DecontaminationReport.read(out)
                except ValueError:
                    prov.decontamination = None  # unreadable: the card says the data was not checked
    else:
        record = _training_record(src)
        kind = record.report.kind if record and record.report else None  # the data report says what made it
        if kind is not None:
            # This folder, then the training folders it was trained from (a standalone sft of a standalone cpt),
            # back to the checkpoint the first of them started from: that is the base model.
            prov.base_model, chain = trace_base(str(src), src.parent)
            for kind, folder, record in reversed(chain):
                setattr(prov, kind, record)
                report = record.report
                summary = {"steps": report.steps, "tokens": report.tokens_trained, "samples": report.samples}
                prov.stages.append(StageRecord(name=kind, status="complete", output=str(folder),
                                               summary={k: v for k, v in summary.items() if v is not None}))
            base_dir = _local_folder(prov.base_model, chain[-1][1]) if prov.base_model else None
            prov.stand_in_base = bool(base_dir and (base_dir / "STAND_IN_BASE.md").is_file())
        if (src / "recipe.yaml").is_file():
            prov.recipe_path = src / "recipe.yaml"
    model_dir = prov.model_dir
    if not (model_dir / "config.json").is_file() and not (adapter and prov.adapter_dir):
        raise FileNotFoundError(f"{model_dir}: no config.json; expected a model folder written by save_pretrained "
                                "(yunshan cpt / sft output) or a yunshan run folder")
    if adapter and prov.adapter_dir is None:
        raise ValueError(f"{model_dir}: no adapter/ folder (adapter_config.json); --adapter exports the LoRA adapter "
                         "of a LoRA run, and this model was trained without LoRA: export the merged weights instead")
    # A recorded base that resolves to a folder (beside the run or from here) is local, whatever it looks like.
    if prov.base_model:
        base_dir = base_dir or (resolve_in_run(prov.run_dir, prov.base_model) if prov.run_dir else _local_folder(
            prov.base_model, src))
        if not (prov.run_dir and base_dir):
            prov.base_model_id = hub_id_of(prov.base_model)
    if base_dir is not None and prov.base_model_id is None:
        prov.base_source, prov.base_model_id = import_source(base_dir)
    if adapter:
        adapter_base = (_read_json(prov.adapter_dir / "adapter_config.json") or {}).get("base_model_name_or_path")
        prov.base_model = adapter_base or prov.base_model
        prov.base_model_id = hub_id_of(adapter_base)
        # The adapter applies to the model it was trained on, not to the checkpoint that model started from.
        adapter_dir = _local_folder(adapter_base, src) if adapter_base else None
        prov.base_source, found = import_source(adapter_dir) if adapter_dir else (None, None)
        prov.base_model_id = prov.base_model_id or found

    # Evaluation results: the run's eval stages in order, then any --eval files.
    result_files: list[tuple[Path, str, bool]] = []
    for stage in prov.stages:
        if stage_kind(stage) != "eval" or not is_complete(stage) or prov.run_dir is None:
            continue
        out = resolve_in_run(prov.run_dir, stage.output)
        if out is not None and (out / EvalResults.FILE).is_file():
            label = stage.name.removeprefix("eval_").removeprefix("eval") or stage.name
            result_files.append((out / EvalResults.FILE, label, stage.name == "eval_after"))
    given = []
    for spec in eval_files or []:
        path = Path(spec)
        path = path / "results.json" if path.is_dir() else path
        if not path.is_file():
            raise FileNotFoundError(f"--eval {spec}: no such results.json (written by yunshan eval --out DIR)")
        result_files.append((path, path.parent.name, False))
        given.append(path)
    if result_files:
        model_hash = sha256_model_dir(model_dir)
        for path, label, final_stage in result_files:
            columns = _eval_columns(path, label, model_dir, model_hash, final_stage)
            prov.evals += columns
            if path in given:
                note = _adds_nothing(path, columns, _known_models(prov, base_dir))
                prov.notes += [note] if note else []
        for column in prov.evals:
            if column.stale:
                prov.notes.append(f"{column.source}: the results of {column.label!r} were recorded for other files "
                                  "than the exported model folder (it changed after the evaluation); they are shown "
                                  "but left out of model-index. Re-run the evaluation to include them.")
    return prov
