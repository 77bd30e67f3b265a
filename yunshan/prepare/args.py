"""The arguments of a corpus preparation: `yunshan data prepare --config X.yaml` and the `prepare:` section of a
`yunshan run` recipe (one dataclass tree; every field with help, checked when the recipe loads).

    prepare:
      inputs: [{name: laws, path: "${realdata}/laws/laws.jsonl.zst"}]
      executor: local            # or ray, slurm (the same recipe; the executor is a flag: executor=ray)
      near_dedup: {n_grams: 5}   # characters for Chinese, words for English
      pii: {party_names: false}
      out: runs/laws_prepared    # documents/ holds the prepared corpus (in yunshan run: the stage folder)

The blocks each section switches are described in their modules (yunshan/prepare/*.py) and docs/prepare.md. This
module imports nothing of datatrove, so a pipeline recipe loads where the `prepare` extra is not installed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from yunshan.arguments.field_rules import check_fields


@dataclass
class QualityArgs:
    """The document rules of `prepare.quality` (yunshan/prepare/quality.py has each rule)."""

    enabled: bool = field(default=True, metadata={"help": "apply the rules (false: keep every document)"})
    boilerplate_lines: bool = field(default=True, metadata={
        "help": "remove page-furniture lines (上一篇/下一篇, page numbers, menus, copyright footers) first"})
    min_chars: int = field(default=20, metadata={"range": ">= 0", "help": "too_short: fewer non-space characters"})
    top_ngram: int = field(default=4, metadata={"range": ">= 1", "help": "top_char_ngram: n-gram length in characters"})
    max_top_ngram_share: float = field(default=0.25, metadata={"range": "(0, 1]",
        "help": "top_char_ngram: the most frequent n-gram covers more than this share of the characters"})
    dup_ngram: int = field(default=10, metadata={"range": ">= 1", "help": "dup_char_ngram: n-gram length"})
    max_dup_ngram_share: float = field(default=0.8, metadata={"range": "(0, 1]",
        "help": "dup_char_ngram: characters in repeated n-grams cover more than this share"})
    max_dup_line_share: float = field(default=0.3, metadata={"range": "(0, 1]", "help": "dup_lines: repeated lines"})
    gopher_other_languages: bool = field(default=True, metadata={
        "help": "documents labelled another language than zh also go through datatrove's Gopher quality and "
                "repetition filters (their defaults)"})
    min_cjk_share: float = field(default=0.3, metadata={"range": "[0, 1]",
        "help": "cjk_share: Chinese documents with fewer CJK characters than this share of non-space characters"})
    max_symbol_share: float = field(default=0.3, metadata={"range": "(0, 1]", "help": "symbol_share: P* and S*"})

    def __post_init__(self):
        check_fields(self)


@dataclass
class LanguageArgs:
    """`prepare.language`: language identification (py3langid, shipped in its wheel)."""

    enabled: bool = field(default=True, metadata={"help": "identify the language of every document"})
    keep: list[str] = field(default_factory=lambda: ["zh", "en"], metadata={
        "help": "ISO 639-1 codes kept (empty: keep every language, only label it)"})
    min_score: float = field(default=0.5, metadata={"range": "[0, 1]", "help": "drop below this probability"})
    max_chars: int = field(default=1000, metadata={"range": ">= 1", "help": "characters the model reads"})

    def __post_init__(self):
        check_fields(self)


@dataclass
class DecontaminationArgs:
    """`prepare.decontamination`: drop documents that hold an evaluation item (yunshan's n-gram rule)."""

    enabled: bool = field(default=True, metadata={"help": "check every document against the evaluation sets"})
    tasks: list[str] = field(default_factory=list, metadata={"path": "labelled",
        "help": "evaluation sets as yunshan data decontaminate --tasks (NAME=PATH, bpc with heldout); in yunshan "
                "run default the eval section's"})
    heldout: list[str] = field(default_factory=list, metadata={"path": "labelled",
        "help": "LABEL=FILE held-out texts checked too (in yunshan run default the eval section's)"})
    data_dir: str | None = field(default=None, metadata={"path": True,
        "help": "folder with one subfolder per task name (as yunshan eval --data-dir)"})
    include_path: list[str] = field(default_factory=list, metadata={"path": True,
        "help": "folders of lm-evaluation-harness task YAMLs for lmeval:NAME tasks"})
    n: int = field(default=13, metadata={"range": ">= 1", "help": "window length in words"})
    cjk_n: int = field(default=25, metadata={"range": ">= 1", "help": "window length in CJK characters"})
    record_share: float = field(default=0.5, metadata={"range": "(0, 1]",
        "help": "drop a document that alone holds at least this share of an evaluation item"})
    boilerplate_eval: int = field(default=20, metadata={"range": ">= 0",
        "help": "a window in at least this many distinct evaluation texts never counts (0: off)"})
    batch_chars: int = field(default=1 << 22, metadata={"range": ">= 1",
        "help": "characters of documents compared in one batch (memory: about 40 bytes each)"})

    def __post_init__(self):
        check_fields(self)

    def decontaminate_args(self):
        """The `yunshan data decontaminate` arguments that read the same evaluation sets."""
        from yunshan.eval.decontamination import DecontaminateArgs

        return DecontaminateArgs(tasks=list(self.tasks), heldout=list(self.heldout), data_dir=self.data_dir,
                                 include_path=list(self.include_path), n=self.n, cjk_n=self.cjk_n,
                                 record_share=self.record_share, boilerplate_eval=self.boilerplate_eval,
                                 boilerplate_train=0, inputs=["-"])


INPUT_FORMATS = ("auto", "jsonl", "json", "csv", "parquet", "txt", "warc")
EXECUTORS = ("local", "ray", "slurm")


@dataclass
class InputArgs:
    """One input of a preparation: files, folders or globs read by yunshan's record reader (WARC: datatrove's)."""

    name: str = field(metadata={"help": "name in the report and in each document's metadata (source)"})
    path: list[str] | str = field(default_factory=list, metadata={"path": True,
        "help": "file, folder or glob (or a list): .jsonl .json .csv .parquet .txt (+ .gz .zst .xz .bz2, .zip), "
                ".warc(.gz)"})
    format: str = field(default="auto", metadata={"help": f"one of {', '.join(INPUT_FORMATS)} (auto: the extension)"})
    text_field: str = field(default="text", metadata={"help": "record field holding the text (a.b for nested)"})
    html: bool = field(default=False, metadata={
        "help": "the text field holds HTML: extract the main text with trafilatura (WARC always is)"})
    txt_document: str = field(default="paragraph", metadata={"help": "txt: one document per paragraph, line or file"})
    keep_fields: list[str] = field(default_factory=list, metadata={
        "help": "record fields copied into each document's metadata"})

    def __post_init__(self):
        check_fields(self)
        if self.format not in INPUT_FORMATS:
            raise ValueError(f"input {self.name!r}: format {self.format!r} is not one of {', '.join(INPUT_FORMATS)}")
        if not self.path:
            raise ValueError(f"input {self.name!r}: path is empty; name the files, folders or globs to read")


@dataclass
class PiiArgs:
    """`prepare.pii`: personal data masked with validation (yunshan/prepare/pii.py)."""

    enabled: bool = field(default=True, metadata={
        "help": "mask resident ID numbers, mobile and landline numbers, bank cards and e-mail addresses"})
    party_names: bool = field(default=False, metadata={
        "help": "also mask the names of natural persons after a party role in judgments (原告张三)"})

    def __post_init__(self):
        check_fields(self)


@dataclass
class NearDedupArgs:
    """`prepare.near_dedup`: datatrove's MinHash stages on character n-grams for CJK, word n-grams otherwise."""

    enabled: bool = field(default=True, metadata={"help": "find near duplicates and keep one per cluster"})
    n_grams: int = field(default=5, metadata={"range": ">= 1",
        "help": "shingle length: CJK characters or other words (yunshan/prepare/dedup.py)"})
    buckets: int = field(default=14, metadata={"range": ">= 1", "help": "LSH bands"})
    hashes_per_bucket: int = field(default=8, metadata={"range": ">= 1",
        "help": "rows per band; the similarity at which a pair is found half the time is (1/buckets)^(1/rows)"})
    seed: int = field(default=1, metadata={"range": ">= 0", "help": "seed of the MinHash permutations"})

    def __post_init__(self):
        check_fields(self)

    def threshold(self) -> float:
        """The Jaccard similarity found with probability one half (the LSH S-curve's midpoint, about)."""
        return (1 / self.buckets) ** (1 / self.hashes_per_bucket)


@dataclass
class RayArgs:
    """`prepare.ray`: datatrove's RayPipelineExecutor."""

    address: str | None = field(default=None, metadata={
        "help": "a running Ray cluster (ray://host:10001 or auto); default: start a local one with `workers` CPUs"})
    cpus_per_task: int = field(default=1, metadata={"range": ">= 1", "help": "CPUs reserved per task"})
    mem_per_cpu_gb: float = field(default=2, metadata={"range": "> 0", "help": "memory reserved per CPU (GB)"})

    def __post_init__(self):
        check_fields(self)


@dataclass
class SlurmArgs:
    """`prepare.slurm`: datatrove's SlurmPipelineExecutor (one job array per stage, chained by afterok)."""

    partition: str = field(default="cpu", metadata={"help": "Slurm partition"})
    time: str = field(default="24:00:00", metadata={"help": "time limit per task"})
    cpus_per_task: int = field(default=1, metadata={"range": ">= 1", "help": "CPUs per task"})
    mem_per_cpu_gb: int = field(default=2, metadata={"range": ">= 1", "help": "memory per CPU (GB)"})
    qos: str = field(default="normal", metadata={"help": "quality of service"})
    env_command: str | None = field(default=None, metadata={
        "help": "command that activates the Python environment on the nodes (default: this venv's activate)"})
    sbatch_args: dict[str, str] = field(default_factory=dict, metadata={"help": "more #SBATCH options"})

    def __post_init__(self):
        check_fields(self)


@dataclass
class PrepareArgs:
    """A corpus preparation: read, extract, identify the language, clean, mask, decontaminate, deduplicate, write
    (docs/prepare.md). In `yunshan run`, the stage folder is `out` and documents/ in it is the prepared corpus."""

    inputs: list[InputArgs] = field(default_factory=list, metadata={"help": "the corpora to prepare"})
    out: str = field(default="runs/prepared", metadata={"path": True,
        "help": "output folder: documents/ (the prepared corpus, .jsonl.zst), prepare_report.json/.md, funnel.png, "
                "near_duplicates.jsonl, logs/"})
    executor: str = field(default="local", metadata={"help": f"one of {', '.join(EXECUTORS)}"})
    tasks: int = field(default=0, metadata={"range": ">= 0",
        "help": "tasks the corpus is split into (0: one per CPU core); the output has one file per task"})
    workers: int = field(default=0, metadata={"range": ">= 0", "help": "tasks run at once (0: one per CPU core)"})
    ray: RayArgs = field(default_factory=RayArgs)
    slurm: SlurmArgs = field(default_factory=SlurmArgs)
    on_bad_record: str = field(default="fail", metadata={
        "help": "an unreadable record, a record without text, an oversized record or an empty file: fail (stop "
                "with file, line and field) or skip (count by reason)"})
    max_record_mb: float = field(default=8, metadata={"range": "> 0",
        "help": "a record larger than this is oversized (a JSON line is read past, never held in memory)"})
    language: LanguageArgs = field(default_factory=LanguageArgs)
    traditional_to_simplified: bool = field(default=False, metadata={
        "help": "convert traditional Chinese to simplified (OpenCC t2s)"})
    quality: QualityArgs = field(default_factory=QualityArgs)
    pii: PiiArgs = field(default_factory=PiiArgs)
    decontamination: DecontaminationArgs = field(default_factory=lambda: DecontaminationArgs(enabled=False),
                                                 metadata={"help": "drop documents holding an evaluation item"})
    exact_dedup: bool = field(default=True, metadata={"help": "drop exact duplicates (white space collapsed)"})
    near_dedup: NearDedupArgs = field(default_factory=NearDedupArgs)
    examples: int = field(default=5, metadata={"range": ">= 0",
        "help": "examples kept per drop reason and task for the report"})
    keep_work: bool = field(default=False, metadata={"help": "keep work/ (intermediate files) after a run"})

    def __post_init__(self):
        check_fields(self)
        names = [i.name for i in self.inputs]
        if len(set(names)) != len(names):
            raise ValueError(f"prepare.inputs: names must be unique, got {names}")
        for key, value, valid in (("executor", self.executor, EXECUTORS), ("on_bad_record", self.on_bad_record,
                                                                           ("fail", "skip"))):
            if value not in valid:
                raise ValueError(f"prepare.{key} {value!r} is not one of {', '.join(valid)}")
