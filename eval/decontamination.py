"""Decontamination: every training record compared with every item of the evaluation sets, every hit written with
file:line on both sides; the engine of `yunshan data decontaminate` and of `yunshan run`'s decontamination stage.

    yunshan data decontaminate --config recipes/demo_tiny.yaml --out runs/decontamination
    yunshan data decontaminate corpus.jsonl.zst --tasks fineval=/data/FinEval --n 13 --out runs/decontamination

    from yunshan.eval.decontamination import DecontaminateArgs, run_decontamination
    report, first_hits = run_decontamination(DecontaminateArgs(inputs=["corpus.jsonl"], tasks=["fineval"], out="d"))

It lives beside the evaluation-set readers it compares against (items.py reads every benchmark layout as
yunshan eval does; tasks.py and texts.py resolve the task names and held-out texts), as lm-evaluation-harness keeps
its `decontamination/` and datatrove its `decont/`. The n-gram units, the index and the streaming comparison are
the data layer's (yunshan/data/decontamination.py); the training sources are read exactly as yunshan cpt and sft
read them (yunshan/data/sources.py, conversations.py). The report is yunshan.artifacts.DecontaminationReport;
`render_decontamination` is the summary the command and the pipeline stage print.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class DecontaminateArgs:
    """Arguments of `yunshan data decontaminate`, and the `decontamination` section of a `yunshan run` recipe (there
    the training data is the cpt and sft sources, and the evaluation sets default to the eval section's)."""

    inputs: list[str] = field(default_factory=list, metadata={
        "help": "training files, folders or globs, read as --format says (in yunshan run: the cpt and sft sources)"})
    format: str = field(default="text", metadata={
        "help": "how the inputs are read: text (a corpus, as yunshan cpt reads it: the --text-field of each record, "
                "a .txt paragraph) or an SFT format (alpaca, messages, sharegpt, ceval, jecqa: every turn)"})
    text_field: str = field(default="text", metadata={"help": "format text: the record field holding the text"})
    tasks: list[str] = field(default_factory=list, metadata={
        "help": "evaluation sets, NAME or NAME=PATH as yunshan eval --tasks (fineval, ceval, financeiq, cmmlu, "
                "lawbench, jecqa; bpc: the --heldout texts); default: every benchmark folder of --data-dir, in "
                "yunshan run the eval section's tasks"})
    data_dir: str | None = field(default=None, metadata={
        "help": "folder with one subfolder per task name (default: the sample sets of yunshan.samples)"})
    heldout: list[str] = field(default_factory=list, metadata={
        "help": "LABEL=FILE held-out texts checked too (bits per character; in yunshan run default the eval "
                "section's and the cpt monitor's)"})
    n: int = field(default=13, metadata={
        "help": "n-gram length in units: one CJK character or one word/number of other scripts"})
    min_ngrams: int = field(default=1, metadata={
        "help": "distinct shared n-grams that make a training record and an evaluation item overlap"})
    drop: bool = field(default=False, metadata={
        "help": "leave the contaminated records out: in yunshan run the cpt and sft stages skip them (counted in "
                "their data reports and the model card); here, also write the inputs without them to OUT/clean/"})
    on_bad_record: str = field(default="fail", metadata={
        "help": "an unreadable training record: fail (stop with file, line and field) or skip (count)"})
    show: int = field(default=10, metadata={"help": "hits printed (every hit is written to OUT/hits.jsonl)"})
    out: str = field(default="runs/decontamination", metadata={
        "help": "output folder: decontamination.json, hits.jsonl, contaminated.jsonl"})

    def __post_init__(self):
        from yunshan.data.conversations import SFT_FORMATS

        if self.format != "text" and self.format not in SFT_FORMATS:
            raise ValueError(f"decontamination format {self.format!r} is not text or one of {', '.join(SFT_FORMATS)}")
        if self.n < 1 or self.min_ngrams < 1:
            raise ValueError(f"decontamination n and min_ngrams must be at least 1, got {self.n} and "
                             f"{self.min_ngrams}")
        if self.on_bad_record not in ("fail", "skip"):
            raise ValueError(f"decontamination on_bad_record must be fail or skip, got {self.on_bad_record!r}")


def eval_sets(args: DecontaminateArgs) -> tuple[list[tuple[str, str, list]], list[str]]:
    """(name, path, items) of every evaluation set, and the tasks that have nothing to compare (with why)."""
    from yunshan.eval.items import FORMATS, eval_items, heldout_items
    from yunshan.eval.tasks import TASKS, resolve_tasks
    from yunshan.eval.texts import default_texts, labelled_files

    specs = list(args.tasks)
    if not specs:  # every benchmark folder of the data folder
        root = Path(args.data_dir) if args.data_dir else None
        if root is None:
            from yunshan.samples import sample_data_dir

            root = Path(sample_data_dir()) / "eval"
        specs = [name for name, task in TASKS.items() if task.format in FORMATS and (root / name).is_dir()]
        if not specs:
            raise ValueError(f"--tasks not given and {root} holds no benchmark folder named after a task "
                             f"({', '.join(t for t, task in TASKS.items() if task.format in FORMATS)})")
    sets, not_checked = [], []
    for name, task, path in resolve_tasks(specs, args.data_dir):
        if task.format in FORMATS:
            sets.append((name, str(path), list(eval_items(name, path))))
        elif task.format == "bpc":
            files = labelled_files(args.heldout, "--heldout") if args.heldout else {
                p.stem: p for p in default_texts("bpc")}
            for label, file in files.items():
                sets.append((f"heldout:{label}", str(file), list(heldout_items(label, file))))
        else:
            not_checked.append(f"{name}: a text task (its texts are not an evaluation set)")
    if args.heldout and not any(n == "bpc" for n in specs):
        for label, file in labelled_files(args.heldout, "--heldout").items():
            sets.append((f"heldout:{label}", str(file), list(heldout_items(label, file))))
    names = [s[0] for s in sets]
    if len(set(names)) != len(names):
        raise ValueError(f"evaluation sets named twice: {names}; give each task or held-out label once")
    return sets, not_checked


def input_sources(args: DecontaminateArgs) -> tuple[list, list]:
    """The command's TRAIN inputs as corpus sources (format text) or instruction sources (an SFT format), one per
    input named after its file, read exactly as yunshan cpt / sft read such a source."""
    from yunshan.data.conversations import SftSourceArgs
    from yunshan.data.sources import SourceArgs

    if not args.inputs:
        raise ValueError("no training data: give TRAIN files, folders or globs, or --config RECIPE.yaml")
    names: list[str] = []
    for spec in args.inputs:
        base = Path(spec.rstrip("/")).name.split(".")[0] or "input"
        name, k = base, 2
        while name in names:
            name, k = f"{base}_{k}", k + 1
        names.append(name)
    if args.format == "text":
        return [SourceArgs(name=n, path=p, text_field=args.text_field, shuffle=False)
                for n, p in zip(names, args.inputs)], []
    return [], [SftSourceArgs(name=n, path=p, format=args.format) for n, p in zip(names, args.inputs)]


def run_decontamination(args: DecontaminateArgs, cpt_sources: list | None = None, sft_sources: list | None = None,
                        clean: bool = False, progress: bool = True):
    """Compare training records with every item of the evaluation sets and write into args.out:
    decontamination.json (yunshan.artifacts.DecontaminationReport), hits.jsonl (one line per training record and
    evaluation item that overlap, file:line of both), contaminated.jsonl (one line per contaminated record: its
    digest, which `data.exclude` of cpt and sft reads) and, with `clean`, OUT/clean/SOURCE.jsonl (each source
    without its contaminated records). The training data is `cpt_sources` and `sft_sources` (yunshan run), else
    args.inputs. Returns (report, the first args.show hits)."""
    import time

    from tqdm.auto import tqdm

    from yunshan.artifacts import DecontaminationReport, EvalSetCheck, SourceCheck
    from yunshan.data.decontamination import NgramIndex, conversation_texts, corpus_texts, find_overlaps, record_digest
    from yunshan.data.writers import JsonlWriter

    started = time.time()
    if cpt_sources is None and sft_sources is None:
        cpt_sources, sft_sources = input_sources(args)
    sources = [("cpt", s) for s in cpt_sources or []] + [("sft", s) for s in sft_sources or []]
    if not sources:
        raise ValueError("no training sources to check")
    names = [f"{kind}:{s.name}" for kind, s in sources]
    if len(set(names)) != len(names):
        raise ValueError(f"training source names must be unique within cpt and within sft: {names}")
    sets, not_checked = eval_sets(args)
    items = [item for _, _, set_items in sets for item in set_items]
    index = NgramIndex.build(items, args.n)
    report = DecontaminationReport(
        n=args.n, min_ngrams=args.min_ngrams, drop=args.drop, not_checked=not_checked,
        normalization="NFKC, case folding; a unit per CJK character, per word or number otherwise; punctuation and "
                      "spaces dropped (yunshan/data/decontamination.py)",
        eval_sets={}, sources={})
    first = 0
    unchecked = set(index.unchecked)
    for name, path, set_items in sets:
        span = range(first, first + len(set_items))
        report.eval_sets[name] = EvalSetCheck(path=path, items=len(set_items),
                                              ngrams=int(index.ngrams_by_item[span.start: span.stop].sum()),
                                              unchecked=sum(1 for i in span if i in unchecked))
        first += len(set_items)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    shown = []
    hits_file = JsonlWriter(str(out / "hits.jsonl"))
    listed = JsonlWriter(str(out / "contaminated.jsonl"))
    try:
        for (kind, source), name in zip(sources, names):
            check = report.sources[name] = SourceCheck(kind=kind)
            read = corpus_texts if kind == "cpt" else conversation_texts
            texts = read(source, args.on_bad_record, check.bad)
            writer = JsonlWriter(str(out / "clean" / f"{kind}_{source.name}.jsonl")) if clean else None
            bar = tqdm(desc=f"decontaminate {name}", unit=" records", disable=not progress, mininterval=1)
            for record, overlaps in find_overlaps(texts, index, args.min_ngrams):
                check.records += 1
                check.characters += sum(len(f) for f in record.fields)
                bar.update(1)
                if not overlaps:
                    if writer is not None:
                        writer.write(record.tag["record"])
                    continue
                check.contaminated += 1
                check.hits += len(overlaps)
                digest = record_digest(record.tag["content"])
                listed.write({"digest": digest, "source": name, "location": record.location,
                              "eval": [o.item.location for o in overlaps]})
                for o in overlaps:
                    hit = {"train": record.location, "source": name, "eval": o.item.location,
                           "task": o.item.tag["task"], "id": o.item.tag["id"], "ngrams": o.ngrams, "match": o.match,
                           "digest": digest}
                    hits_file.write(hit)
                    if len(shown) < args.show:
                        shown.append(hit)
            bar.close()
            if writer is not None:
                writer.close()
    except BaseException:
        hits_file.close(keep=False)
        listed.close(keep=False)
        raise
    hits_file.close()
    listed.close()
    for check in report.sources.values():
        report.records += check.records
        report.characters += check.characters
        report.contaminated += check.contaminated
        report.hits += check.hits
    report.seconds = round(time.time() - started, 2)
    report.write(out)
    return report, shown


def render_decontamination(report, shown: list[dict], out: str | Path) -> str:
    """The summary printed by the command and the pipeline stage."""
    lines = [f"decontamination: {report.n}-grams ({report.normalization})", "", "  evaluation sets:"]
    for name, s in report.eval_sets.items():
        lines.append(f"    {name:<22} {s.items:>7,} items  {s.ngrams:>10,} n-grams"
                     + (f"  ({s.unchecked:,} items shorter than {report.n} units: not checkable)" if s.unchecked
                        else "") + f"  {s.path}")
    for reason in report.not_checked:
        lines.append(f"    not checked: {reason}")
    lines += ["", "  training sources:"]
    for name, s in report.sources.items():
        bad = f"  unreadable {sum(s.bad.values()):,} ({', '.join(f'{k} {v}' for k, v in s.bad.items())})" if s.bad else ""
        lines.append(f"    {name:<22} {s.kind:<4} {s.records:>8,} records  {s.contaminated:>6,} contaminated  "
                     f"{s.hits:>6,} hits{bad}")
    rate = report.characters / report.seconds if report.seconds else 0.0
    lines += ["", f"  {report.contaminated:,} of {report.records:,} training records overlap the evaluation sets "
                  f"({report.hits:,} hits); {report.characters:,} characters in {report.seconds} s ({rate:,.0f} "
                  "characters/s, reading and parsing included)"]
    if shown:
        lines += ["", f"  first {len(shown)} hits (training record <-> evaluation item: shared n-grams, the first one):"]
        for h in shown:
            lines.append(f"    {h['train']}  <->  {h['eval']}  [{h['task']} {h['id']}]  {h['ngrams']}: {h['match']}")
    out = Path(out)
    lines += ["", f"  wrote {out / 'decontamination.json'}, {out / 'hits.jsonl'} (every hit), "
                  f"{out / 'contaminated.jsonl'} (for data.exclude)"
              + (f" and {out / 'clean'}/" if report.drop and (out / "clean").is_dir() else "")]
    return "\n".join(lines)
