"""What runs leave beside their outputs, as typed records written and read in this one module.

    from yunshan.io.artifacts import DataReport, EvalResults, RunManifest
    manifest = RunManifest.read("runs/demo_tiny/run.json")        # stages, timings, hashes, summaries
    report = DataReport.read("runs/demo_tiny/04_cpt/data_report.json")
    results = EvalResults.read("runs/demo_tiny/06_eval_after/results.json")

| file | record | written by | read by |
|---|---|---|---|
| run.json | RunManifest (a list of StageRecord) | `yunshan run` | the model card, `yunshan export` |
| data_report.json | DataReport (kind "cpt", "sft" or "preference", a line per source) | `yunshan cpt`, `sft`, `pref` | the pipeline, the card |
| yunshan_complete.json | FinalOutputs (the marker of a finished run folder: kind, step, files) | `yunshan cpt`, `sft`, `pref` (last) | reruns, `yunshan export` |
| results.json | EvalResults (models, tasks, each task's headline Metrics per model) | `yunshan eval` | the pipeline, the card |
| decontamination.json | DecontaminationReport (eval sets by contamination category, boilerplate, sources) | `yunshan data decontaminate` | the pipeline, the card |
| report.json (tokenizer stage) | TokenizerReport (the extension's report, compression before and after) | `yunshan run` | the pipeline report, the card |
| recipe.yaml | the resolved recipe dataclass (`write_recipe`) | every stage | `yunshan run recipe.yaml` |

Each record has `to_json()` / `from_json()` and `write()` / `read()`; a file that is not valid JSON or lacks a
required field is a ValueError naming the file and the field. Readers never guess what a file is from the keys it
happens to hold: a data report says its kind, a result says its headline metrics (so a new benchmark reaches the
model card without the card knowing it).
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml


def write_recipe(recipe, path: str | Path, header: str | None = None) -> None:
    """Write a resolved recipe dataclass (every field, defaults included) as YAML: what `yunshan run` and the
    stage commands save beside their outputs, and what `load_recipe` reads back. Keys the recipe class reserves
    (`RESERVED_KEYS`: set by the runner, not by a recipe) are left out, so the file loads again as it is."""
    data = dataclasses.asdict(recipe)
    for dotted in getattr(type(recipe), "RESERVED_KEYS", {}):
        *parents, last = dotted.split(".")
        node = data
        for key in parents:
            node = node.get(key) if isinstance(node, dict) else None
        if isinstance(node, dict):
            node.pop(last, None)
    text = yaml.safe_dump(data, sort_keys=False, allow_unicode=True)
    Path(path).write_text((f"# {header}\n" if header else "") + text, encoding="utf-8")


def _read_json(path: str | Path) -> dict:
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object at the top level")
    return data


def _write_json(obj: dict, path: str | Path, indent: int = 2) -> None:
    """Write through a temporary file renamed into place: a reader never sees half a file."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(obj, indent=indent, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    os.replace(tmp, path)


class _JsonFile:
    """A record kept as one JSON file in a folder: `FILE`, `to_json()` and `from_json()` make `write` and `read`."""

    FILE = ""
    INDENT = 2

    def write(self, folder: str | Path) -> Path:
        Path(folder).mkdir(parents=True, exist_ok=True)
        path = Path(folder) / self.FILE
        _write_json(self.to_json(), path, self.INDENT)
        return path

    @classmethod
    def read(cls, path: str | Path):
        """The record in `path`, a file or the folder holding it."""
        path = Path(path)
        path = path / cls.FILE if path.is_dir() else path
        return cls.from_json(_read_json(path), str(path))


def _build(cls, data: dict, where: str):
    """`cls` from a JSON object: the fields it has (JSON key `class` for field `class_name`), unknown keys kept out."""
    names = {f.name for f in dataclasses.fields(cls)}
    values = {("class_name" if k == "class" else k): v for k, v in data.items()}
    required = [f.name for f in dataclasses.fields(cls)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
    missing = [n for n in required if n not in values]
    if missing:
        raise ValueError(f"{where}: field {missing[0]!r} is missing")
    return cls(**{k: v for k, v in values.items() if k in names})


def _plain(obj, drop_none: bool = True) -> Any:
    """A record as JSON data; None fields left out (they were never set)."""
    if dataclasses.is_dataclass(obj):
        out = {}
        for f in dataclasses.fields(obj):
            value = getattr(obj, f.name)
            if value is None and drop_none:
                continue
            out["class" if f.name == "class_name" else f.name] = _plain(value, drop_none)
        return out
    if isinstance(obj, dict):
        return {k: _plain(v, drop_none) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_plain(v, drop_none) for v in obj]
    return obj


# ---------------------------------------------------------------- data reports


@dataclass
class CptSourceReport:
    """One corpus source of continual pretraining: what the run trained on from it."""

    weight: float
    tokens_trained: int
    token_share: float
    documents_read: int
    epochs_completed: int
    dropped: dict[str, int] = field(default_factory=dict)  # reason -> records (bad:REASON, filtered, duplicate)
    path: Any = None  # the source's path(s) or dataset


@dataclass
class SftSourceReport:
    """One instruction source of SFT: samples read, kept and trained on."""

    read: int
    samples: int
    tokens: int
    trained_tokens: int
    share_of_samples: float
    dropped: dict[str, int] = field(default_factory=dict)


@dataclass
class PrefSourceReport:
    """One preference source: records read, the pairs (or KTO samples) trained on and held out, what was cut or
    dropped by reason."""

    read: int
    samples: int
    heldout: int
    tokens: int
    answer_tokens: int
    share_of_samples: float
    dropped: dict[str, int] = field(default_factory=dict)  # bad:REASON, contaminated, prompt_too_long, too_long, ...
    truncated: dict[str, int] = field(default_factory=dict)  # truncated_chosen, truncated_rejected, ...


REPORT_KINDS = ("cpt", "sft", "preference")


@dataclass
class DataReport(_JsonFile):
    """What a training run trained on (data_report.json beside the weights): the kind of run, exact counts per
    source and the drops per reason, the seed and the precision."""

    kind: str  # "cpt", "sft" or "preference"
    seed: int
    sources: dict[str, CptSourceReport | SftSourceReport | PrefSourceReport]
    steps: int | None = None
    precision: dict | None = None  # {"value": bf16 | fp32 | ..., "reason": ...}
    engine: dict | None = None  # {"name": single | ddp | deepspeed | fsdp, "processes", "zero_stage", ...}
    loss: dict | None = None  # {"value": chunked | plain, "chunk_tokens", "reason"} (training.loss)
    # data.exclude: {"list": contaminated.jsonl, "records": digests listed}; drops counted as "contaminated"
    exclude: dict | None = None
    resumes: list[dict] | None = None  # every resume: step, checkpoint, the allowed recipe changes (old, new)
    # continual pretraining
    sequences: int | None = None
    seq_len: int | None = None
    tokens_trained: int | None = None
    tokens_per_step: int | None = None
    on_bad_record: str | None = None
    dedup: bool | None = None
    document_mask: bool | None = None
    new_tokens: int | None = None
    extension_cost: dict | None = None
    embedding_warmup: dict | None = None
    # SFT
    samples: int | None = None
    rows: int | None = None
    packing: bool | None = None
    real_tokens: int | None = None
    non_padding_share: float | None = None
    heldout_prompts: int | None = None
    end_of_turn_ids: list[int] | None = None
    # preference tuning
    method: dict | None = None  # {"name", "loss_type", "beta", "reference", ...} as TRL ran it
    max_length: int | None = None
    heldout_pairs: int | None = None
    heldout: dict | None = None  # held-out preference metrics: {"before": {...}, "after": {...}} (step 0, last step)

    FILE = "data_report.json"

    def __post_init__(self):
        if self.kind not in REPORT_KINDS:
            raise ValueError(f"data report kind must be one of {', '.join(REPORT_KINDS)}, got {self.kind!r}")

    def to_json(self) -> dict:
        return _plain(self)

    @classmethod
    def from_json(cls, data: dict, where: str = "data report") -> DataReport:
        if data.get("kind") not in REPORT_KINDS:
            raise ValueError(f"{where}: field 'kind' must be one of {', '.join(REPORT_KINDS)} (a data report written "
                             f"by yunshan cpt, sft or pref), got {data.get('kind')!r}")
        source_cls = {"cpt": CptSourceReport, "sft": SftSourceReport, "preference": PrefSourceReport}[data["kind"]]
        report = _build(cls, data, where)
        report.sources = {name: _build(source_cls, s, f"{where}: sources.{name}")
                          for name, s in (data.get("sources") or {}).items()}
        return report



# ---------------------------------------------------------------- the tokenizer stage


@dataclass
class FinalOutputs(_JsonFile):
    """yunshan_complete.json: the one marker of a finished `yunshan cpt` / `sft` / `pref` run folder. The final save
    writes it last, after the weights, tokenizer, recipe and reports (the files and their sizes listed here, each
    fsynced first), and a run that goes on to change the folder (a rerun, a longer run, a start over) removes it
    before anything else. So a folder holding it is exactly one finished run, and a folder without it is a run in
    progress, killed or failed: `yunshan export` refuses it and a rerun finishes it."""

    kind: str  # "cpt", "sft" or "preference"
    step: int  # the optimizer steps the saved model was trained for
    files: dict[str, int]  # every file of the final outputs (relative path) -> its size in bytes
    finished: str = ""

    FILE = "yunshan_complete.json"
    # Folders of a run folder that are not its final outputs: checkpoints and the trackers' logs.
    NOT_OUTPUTS = ("checkpoints", "tensorboard")

    def to_json(self) -> dict:
        return _plain(self)

    @classmethod
    def from_json(cls, data: dict, where: str = "final outputs") -> FinalOutputs:
        marker = _build(cls, data, where)
        if not isinstance(marker.files, dict) or not isinstance(marker.step, int):
            raise ValueError(f"{where}: fields 'files' (a mapping) and 'step' (a number) are required")
        return marker

    @classmethod
    def of(cls, folder: str | Path, kind: str, step: int) -> FinalOutputs:
        """The marker for what `folder` holds now: every file but the checkpoints, the trackers' logs and hidden
        leftovers (a lock, a temporary file)."""
        import time

        folder = Path(folder)
        files = {}
        for path in sorted(folder.rglob("*")):
            rel = path.relative_to(folder)
            if rel.parts[0] in cls.NOT_OUTPUTS or any(part.startswith(".") for part in rel.parts) or (
                    rel.as_posix() == cls.FILE) or not path.is_file():
                continue
            files[rel.as_posix()] = path.stat().st_size
        return cls(kind=kind, step=step, files=files, finished=time.strftime("%Y-%m-%dT%H:%M:%S%z"))

    def write(self, folder: str | Path) -> Path:
        """Flush every listed file to disk, then write the marker (fsynced): after a crash of the machine too, a
        marker never vouches for a file still in the page cache. The files first get the user's umask mode
        (yunshan.io.folders.apply_umask: safetensors writes its own 0600)."""
        from yunshan.io.folders import apply_umask

        folder = Path(folder)
        apply_umask(folder / name for name in self.files)
        for name in self.files:
            _fsync(folder / name)
        path = super().write(folder)
        _fsync(path)
        _fsync(folder)
        return path

    def problems(self, folder: str | Path) -> list[str]:
        """The listed weight files (safetensors and their index) that are missing or changed size since the final
        save. Other files may be edited by hand (a comment in recipe.yaml, code files removed from a model folder)."""
        out = []
        for name, size in self.files.items():
            if not name.endswith((".safetensors", ".safetensors.index.json")):
                continue
            path = Path(folder) / name
            if not path.is_file():
                out.append(f"{name} is missing")
            elif path.stat().st_size != size:
                out.append(f"{name} has {path.stat().st_size} bytes, not the {size} the final save wrote")
        return out

    @classmethod
    def remove(cls, folder: str | Path) -> None:
        """Unmark the folder (fsynced) before a run changes any of its outputs."""
        path = Path(folder) / cls.FILE
        if path.exists():
            path.unlink()
            _fsync(Path(folder))


def _fsync(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@dataclass
class VocabularySize:
    """One tokenizer of a compression report: its vocabulary and how many of its tokens the first one lacks."""

    name: str
    vocab_size: int
    new_vs_first: int = 0


@dataclass
class CompressionResult:
    """One tokenizer on one text file: tokens, tokens per character (the paper's compression rate)."""

    tokenizer: str
    tokens: int
    tokens_per_char: float
    bytes_per_token: float | None = None
    change_vs_first: float | None = None


@dataclass
class CompressionFile:
    """One text file of a compression report and each tokenizer's counts on it (in the tokenizers' order)."""

    path: str
    texts: int
    characters: int
    bytes: int
    results: list[CompressionResult] = field(default_factory=list)


@dataclass
class Compression:
    """yunshan.tokenizer.compression_report of the base tokenizer (first) and the extended one (last)."""

    tokenizers: list[VocabularySize]
    files: list[CompressionFile]
    definition: str = ""
    new_tokens_most_used: list[dict] = field(default_factory=list)

    def vocabulary_change(self) -> tuple[int, int] | None:
        """(base vocabulary, extended vocabulary): the first and the last tokenizer's; None with fewer than two."""
        if len(self.tokenizers) < 2:
            return None
        return self.tokenizers[0].vocab_size, self.tokenizers[-1].vocab_size

    def tokens_per_char(self) -> list[tuple[str, float, float]]:
        """(file path, tokens/char of the first tokenizer, of the last) for every file measured by two or more."""
        return [(f.path, f.results[0].tokens_per_char, f.results[-1].tokens_per_char)
                for f in self.files if len(f.results) >= 2]


@dataclass
class TokenizerReport(_JsonFile):
    """report.json of the pipeline's tokenizer stage: what `yunshan tokenizer extend` reported (its own
    yunshan_tokenizer_extension.json: new tokens, merges, word lists, files) and, when the recipe names report
    texts, the compression of the base and the extended tokenizer on them."""

    extension: dict
    compression: Compression | None = None

    FILE = "report.json"

    def to_json(self) -> dict:
        out = {"extension": self.extension}
        if self.compression is not None:
            out["compression"] = _plain(self.compression, drop_none=False)
        return out

    @classmethod
    def from_json(cls, data: dict, where: str = "tokenizer report") -> TokenizerReport:
        if not isinstance(data.get("extension"), dict):
            raise ValueError(f"{where}: field 'extension' is missing (not a report.json of the tokenizer stage)")
        compression = None
        if data.get("compression") is not None:
            comp = data["compression"]
            if not isinstance(comp, dict):
                raise ValueError(f"{where}: field 'compression' must be an object")
            compression = _build(Compression, comp, f"{where}: compression")
            compression.tokenizers = [_build(VocabularySize, t, f"{where}: compression.tokenizers.{i}")
                                      for i, t in enumerate(comp.get("tokenizers") or [])]
            files = []
            for i, f in enumerate(comp.get("files") or []):
                entry = _build(CompressionFile, f, f"{where}: compression.files.{i}")
                entry.results = [_build(CompressionResult, r, f"{where}: compression.files.{i}.results.{j}")
                                 for j, r in enumerate(f.get("results") or [])]
                files.append(entry)
            compression.files = files
        return cls(extension=data["extension"], compression=compression)


# ---------------------------------------------------------------- decontamination


@dataclass
class ItemCounts:
    """Evaluation items by how much of each the training data holds (yunshan/data/decontamination.py): clean (below
    the report's clean_below), partial, dirty (from dirty_from), with boilerplate windows left out; raw_partial and
    raw_dirty count them with boilerplate counted in; unchecked items have no window at all."""

    items: int = 0
    unchecked: int = 0
    clean: int = 0
    partial: int = 0
    dirty: int = 0
    raw_partial: int = 0
    raw_dirty: int = 0


@dataclass
class EvalSetCheck(ItemCounts):
    """One evaluation set a decontamination compared the training data with; `groups` splits it by subtask
    (LawBench task, C-Eval/CMMLU subject, JEC-QA file)."""

    path: str = ""
    ngrams: int = 0  # windows indexed
    groups: dict[str, ItemCounts] = field(default_factory=dict)


@dataclass
class SourceCheck:
    """One training source a decontamination read: records compared, overlapping, listed as contaminated."""

    kind: str  # cpt, sft or file
    records: int = 0
    characters: int = 0
    overlapping: int = 0  # records sharing a window that is not boilerplate with an evaluation item
    contaminated: int = 0  # records holding at least record_share of an evaluation item (the contamination list)
    hits: int = 0  # (training record, evaluation item) pairs sharing a window that is not boilerplate
    bad: dict[str, int] = field(default_factory=dict)  # unreadable records by reason (on_bad_record: skip)


@dataclass
class BoilerplateCheck:
    """Windows left out as boilerplate: found in at least `train_records` training records or in at least
    `eval_texts` distinct evaluation texts (0: that test off); how many of each, the most frequent, and the records
    whose every shared window was boilerplate."""

    train_records: int = 0
    eval_texts: int = 0
    windows_train: int = 0
    windows_eval: int = 0
    records_only_boilerplate: int = 0
    examples: list[dict] = field(default_factory=list)  # {"window", "training_records", "evaluation_texts"}


@dataclass
class DecontaminationReport(_JsonFile):
    """decontamination.json of `yunshan data decontaminate` and of the pipeline's decontamination stage: how much of
    each evaluation set the training data holds (items by category, every item found in items.jsonl), the
    boilerplate left out, and per training source the records overlapping and listed (every hit in hits.jsonl, the
    listed records in contaminated.jsonl)."""

    n: int
    normalization: str
    eval_sets: dict[str, EvalSetCheck]
    sources: dict[str, SourceCheck]
    cjk_n: int = 0
    clean_below: float = 0.2
    dirty_from: float = 0.8
    record_share: float = 0.5
    boilerplate: BoilerplateCheck = field(default_factory=BoilerplateCheck)
    records: int = 0
    overlapping: int = 0
    contaminated: int = 0
    hits: int = 0
    windows_found: int = 0  # distinct evaluation windows found in training, boilerplate included
    drop: bool = False  # the contaminated records are left out of training
    seconds: float | None = None
    characters: int = 0
    not_checked: list[str] = field(default_factory=list)  # eval tasks that have no items to compare (and why)
    nothing_checked: list[str] = field(default_factory=list)  # evaluation sets with no item to check (and why)

    FILE = "decontamination.json"

    def to_json(self) -> dict:
        return _plain(self)

    @classmethod
    def from_json(cls, data: dict, where: str = "decontamination report") -> DecontaminationReport:
        report = _build(cls, data, where)
        report.eval_sets = {}
        for k, v in data["eval_sets"].items():
            s = report.eval_sets[k] = _build(EvalSetCheck, v, f"{where}: eval_sets.{k}")
            s.groups = {g: _build(ItemCounts, c, f"{where}: eval_sets.{k}.groups.{g}")
                        for g, c in (v.get("groups") or {}).items()}
        report.sources = {k: _build(SourceCheck, v, f"{where}: sources.{k}") for k, v in data["sources"].items()}
        report.boilerplate = _build(BoilerplateCheck, data.get("boilerplate") or {}, f"{where}: boilerplate")
        return report


# ---------------------------------------------------------------- evaluation results


@dataclass
class Metric:
    """One headline number of one task for one model: what a table row and a model-index entry show."""

    key: str  # stable id across models, e.g. "fineval/accuracy" or "bpc/general"
    benchmark: str  # display name ("FinEval", "held-out general text (yunshan sample)")
    metric: str  # display name with unit ("accuracy (%)", "bits per character ↓")
    value: float
    lower_is_better: bool = False
    detail: str = ""  # how it was measured (split, shots, mode, size)
    sample: bool = False  # measured on yunshan's bundled sample sets, not the released benchmark
    eval_result: dict | None = None  # huggingface_hub.EvalResult fields for model-index; None: not indexed


@dataclass
class EvalModel:
    """One evaluated model: where it was and the sha256 over its files (results count only for those bytes)."""

    path: str
    sha256: str | None = None
    class_name: str | None = None
    parameters: int | None = None
    precision: str | None = None
    add_bos: bool | None = None  # BOS before every prompt, as resolved from --add-bos and the tokenizer
    tokenizer_adds_bos: bool | None = None  # what the tokenizer adds by default (the resolution when unset)


@dataclass
class EvalTask:
    """One task of an evaluation: its result layout, data and hashes, full results and headline metrics per model."""

    format: str
    results: dict[str, dict] = field(default_factory=dict)  # model name -> the benchmark's full result
    metrics: dict[str, list[Metric]] = field(default_factory=dict)  # model name -> headline metrics
    path: str | None = None
    files: dict | None = None
    plot: str | None = None
    seconds: dict[str, float] = field(default_factory=dict)  # model name -> wall seconds of this task


@dataclass
class EvalResults(_JsonFile):
    """results.json of `yunshan eval`: settings, models and tasks."""

    models: dict[str, EvalModel]
    tasks: dict[str, EvalTask]
    settings: dict = field(default_factory=dict)
    yunshan_version: str | None = None
    seconds: float | None = None

    FILE = "results.json"
    INDENT = 1

    def to_json(self) -> dict:
        return {"yunshan_version": self.yunshan_version, "settings": self.settings,
                "models": _plain(self.models), "tasks": _plain(self.tasks), "seconds": self.seconds}

    @classmethod
    def from_json(cls, data: dict, where: str = "results") -> EvalResults:
        if not isinstance(data.get("tasks"), dict):
            raise ValueError(f"{where}: field 'tasks' is missing (not a results.json of yunshan eval)")
        models = {name: _build(EvalModel, m, f"{where}: models.{name}") for name, m in (data.get("models") or {}).items()}
        tasks = {}
        for label, t in data["tasks"].items():
            task = _build(EvalTask, t, f"{where}: tasks.{label}")
            task.metrics = {name: [_build(Metric, m, f"{where}: tasks.{label}.metrics.{name}") for m in ms]
                            for name, ms in (t.get("metrics") or {}).items()}
            tasks[label] = task
        return cls(models=models, tasks=tasks, settings=data.get("settings") or {},
                   yunshan_version=data.get("yunshan_version"), seconds=data.get("seconds"))



# ---------------------------------------------------------------- the run manifest


@dataclass
class StageRecord:
    """One stage of a `yunshan run`: its status, folder, timing, fingerprint, hashes and summary."""

    name: str
    status: str  # running, complete or failed
    output: str  # its folder, relative to the run folder
    started: str | None = None
    finished: str | None = None
    seconds: float | None = None
    fingerprint: str | None = None
    inputs: dict[str, str] = field(default_factory=dict)  # data file -> sha256
    outputs: dict[str, str] = field(default_factory=dict)  # file in its folder -> sha256
    summary: dict = field(default_factory=dict)
    error: str | None = None
    traceback: str | None = None


@dataclass
class RunManifest(_JsonFile):
    """run.json of `yunshan run`: the run, its base and final model, and its stages in order (each once)."""

    name: str
    stages: list[StageRecord] = field(default_factory=list)
    yunshan_version: str | None = None
    recipe: str = "recipe.yaml"
    base_model: str | None = None
    final_model: str | None = None  # relative to the run folder when inside it
    seconds_this_run: float | None = None
    report: str | None = None

    FILE = "run.json"

    def stage(self, name: str) -> StageRecord | None:
        return next((s for s in self.stages if s.name == name), None)

    def set_stage(self, record: StageRecord, order: list[str]) -> None:
        """Put `record` in place of the stage of its name, the stages kept in `order`."""
        kept = {s.name: s for s in self.stages if s.name != record.name}
        kept[record.name] = record
        self.stages = [kept[n] for n in order if n in kept]

    def drop_stage(self, name: str) -> None:
        self.stages = [s for s in self.stages if s.name != name]

    def to_json(self) -> dict:
        return _plain(self)

    @classmethod
    def from_json(cls, data: dict, where: str = "run.json") -> RunManifest:
        stages = data.get("stages") or []
        if not isinstance(stages, list):
            raise ValueError(f"{where}: field 'stages' must be a list of stage records")
        manifest = _build(cls, data, where)
        manifest.stages = [_build(StageRecord, s, f"{where}: stages.{i}") for i, s in enumerate(stages)]
        return manifest

