"""`yunshan data convert` and `yunshan data decontaminate`: turn a released dataset into what yunshan reads, and
check training data against the evaluation sets.

    yunshan data convert pile-of-law/data/train.courtlisteneropinions.*.jsonl.xz --out pile_of_law.jsonl.zst
    yunshan data convert news.csv --template "{title}\\n{content}" --where src=sina --out news.jsonl --max-chars 5e8
    HF_HUB_OFFLINE=0 HF_DATASETS_OFFLINE=0 yunshan data convert --dataset ORG/NAME --split train --out x.jsonl
    yunshan data convert --from lawyer-llama data/judical_examination.json --out lawyer_llama.jsonl
    yunshan data convert --from jecqa-holdout jec-qa/0_train.json jec-qa/1_train.json --out jecqa_split/
    yunshan data convert --from mc-parquet --layout ceval ceval-exam/ --subject-mapping subject_mapping.json --out ceval/

The generic converter reads local .jsonl/.json/.parquet/.csv/.txt files (optionally .gz/.zst/.xz/.bz2, or inside
.zip archives, given as files, folders or globs) or a `datasets` dataset (hub name or save_to_disk folder), keeps
records that pass `--where`, builds the text from one field or a template joining fields, optionally masks personal
identifiers, drops empty, short and duplicate documents, stops at a character cap, and writes yunshan JSONL
(`{"text": ...}` plus any kept or added fields; .jsonl, .jsonl.gz or .jsonl.zst). Memory stays flat: one record at a
time, except .json files (a JSON list is parsed whole) and `--dedup` (an 8-byte digest per kept document in a set,
about 100 bytes each).

Malformed input (bad JSON, invalid UTF-8, a missing or non-string field) stops the run with file, line and field
(`--on-bad-record fail`, the default, as everywhere in yunshan) or is counted by reason (`skip`). Filter decisions
(`--where`, empty, too short, duplicate) are drops, always counted. The report (stdout, and `--report FILE` as JSON)
gives records read, written, characters written and drops by reason with the first location of each.

Named converters (`--from NAME`) handle releases whose structure needs it: instruction sets with their own field
names become `{"messages": [...]}` (yunshan/data/instruction_sets.py); JEC-QA train files split into train and
held-out parts, and C-Eval/CMMLU Hub parquet become the per-subject CSV layout of yunshan eval
(yunshan/data/exam_layouts.py). Every data card in data_cards/ gives the exact command for its dataset.

    yunshan data decontaminate --config recipes/demo_tiny.yaml --out runs/decontamination
    yunshan data decontaminate corpus.jsonl.zst --tasks fineval=/data/FinEval lawbench=/data/LawBench/data/zero_shot \
        --n 13 --out runs/decontamination [--drop]
    yunshan data decontaminate sft_legal.jsonl --format messages --tasks jecqa=/data/JEC-QA --out runs/decont_sft

`decontaminate` compares training records with every item of the evaluation sets by n-grams of characters (CJK) and
words (everything else) after NFKC and case folding (yunshan/data/decontamination.py has the rules), reads the
benchmark layouts with yunshan eval's own readers (yunshan/eval/items.py), and writes OUT/hits.jsonl (every hit,
with file:line on both sides), OUT/contaminated.jsonl (the contaminated records: what `data.exclude` of `yunshan
cpt` / `yunshan sft` leaves out) and OUT/decontamination.json; `--drop` also writes the inputs without them to
OUT/clean/. With `--config` it checks a pipeline recipe's cpt and sft sources against its eval section's sets, as
the recipe's `decontamination` stage does in `yunshan run`.

This module is the command only: reading, converting, comparing and writing are the data layer's
(yunshan/data/records.py, convert.py, decontamination.py, writers.py), which never prints.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from yunshan.data.records import FORMATS, TXT_DOCUMENTS

NAMED = ("lawyer-llama", "chatlaw", "lawgpt-zh", "jecqa-holdout", "mc-parquet")


@dataclass
class ConvertArgs:
    """Arguments of `yunshan data convert`."""

    inputs: list[str] = field(default_factory=list, metadata={
        "help": "files, folders or globs (.jsonl .json .parquet .csv .txt, + .gz .zst .xz .bz2, or .zip archives of "
                "them)"})
    out: str = field(default="", metadata={
        "help": "output .jsonl/.jsonl.gz/.jsonl.zst (a folder for jecqa-holdout and mc-parquet)"})
    converter: str = field(default="text", metadata={
        "help": "text (the generic converter) or a named converter for a release's structure"})
    dataset: str | None = field(default=None, metadata={
        "help": "read a `datasets` dataset instead of files: hub name or save_to_disk folder"})
    config: str | None = field(default=None, metadata={"help": "--dataset config name"})
    split: str = field(default="train", metadata={"help": "--dataset split"})
    format: str = field(default="auto", metadata={
        "help": f"input format: auto (from the extension) or one of {', '.join(FORMATS)}"})
    txt_document: str = field(default="paragraph", metadata={
        "help": "txt inputs: one document per paragraph (blank-line separated), line or file"})
    text_field: str = field(default="text", metadata={"help": "record field holding the text (a.b for nested fields)"})
    template: str | None = field(default=None, metadata={
        "help": 'build the text from several fields, e.g. "{title}\\n{content}"'})
    where: list[str] = field(default_factory=list, metadata={
        "help": "keep records whose field equals the value (FIELD=VALUE; the same field twice means either)"})
    keep_fields: str = field(default="", metadata={"help": "comma-separated fields copied into each output record"})
    add: list[str] = field(default_factory=list, metadata={
        "help": "constant field added to every output record, e.g. lang=zh"})
    mask_pii: bool = field(default=False, metadata={
        "help": "replace resident ID numbers, mobile numbers and e-mail addresses by tags"})
    min_chars: int = field(default=1, metadata={"help": "drop documents shorter than this"})
    dedup: bool = field(default=False, metadata={"help": "drop exact duplicate documents"})
    max_records: str | None = field(default=None, metadata={"help": "stop after writing this many records"})
    max_chars: str | None = field(default=None, metadata={
        "help": "stop before the characters written would exceed this (e.g. 5e8)"})
    on_bad_record: str = field(default="fail", metadata={
        "help": "fail (stop with file, line and field) or skip (count by reason)"})
    report: str | None = field(default=None, metadata={"help": "also write the report as JSON to this file"})


@dataclass
class NamedConverterArgs:
    """Options of the named converters (`--from NAME`)."""

    context: str = field(default="drop", metadata={
        "help": "lawyer-llama, lawgpt-zh: drop the supporting law articles or prepend them to the question"})
    system: str = field(default="drop", metadata={
        "help": "chatlaw: drop or keep its meta_instruction as the system turn"})
    heldout_fraction: float = field(default=0.1, metadata={
        "help": "jecqa-holdout: share of questions held out (by a hash of the id)"})
    layout: str | None = field(default=None, metadata={"help": "mc-parquet: the CSV layout to write"})
    subject_mapping: str | None = field(default=None, metadata={
        "help": "mc-parquet ceval: subject_mapping.json to check and copy"})


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


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from yunshan.data.conversations import SFT_FORMATS
    from yunshan.flags import add_flags

    sub = parser.add_subparsers(dest="data_command", metavar="SUBCOMMAND")
    d = sub.add_parser("decontaminate", help="n-gram overlap of training data with the evaluation sets, every hit "
                                            "with file:line on both sides", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flags(d, DecontaminateArgs, positional={"inputs": "TRAIN"}, metavars={"tasks": "TASK", "heldout": "LABEL=FILE"},
              choices={"format": ("text", *SFT_FORMATS), "on_bad_record": ("fail", "skip")})
    d.add_argument("--config", help="a yunshan run recipe: check its cpt and sft sources against its eval sets "
                                    "(instead of TRAIN files)")
    p = sub.add_parser("convert", help="convert a released dataset into yunshan JSONL, messages SFT data or eval "
                                       "layouts", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flags(p, ConvertArgs, positional={"inputs": "INPUT"}, required=("out",), names={"converter": "--from"},
              metavars={"where": "FIELD=VALUE", "add": "FIELD=VALUE"},
              choices={"converter": ("text", *NAMED), "on_bad_record": ("fail", "skip"),
                       "txt_document": TXT_DOCUMENTS})
    add_flags(p.add_argument_group("named converters"), NamedConverterArgs,
              choices={"context": ("drop", "prepend"), "system": ("drop", "keep"), "layout": ("ceval", "cmmlu")})


def _pairs(items: list[str], option: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for item in items or []:
        if "=" not in item:
            raise ValueError(f"{option} {item!r}: expected FIELD=VALUE")
        key, value = item.split("=", 1)
        out.setdefault(key.strip(), []).append(value)
    return out


def _number(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"expected a number (5e8 is fine), got {text!r}") from None
    if value <= 0:
        raise ValueError(f"expected a positive number, got {text!r}")
    return int(value)


def run(args: argparse.Namespace) -> int:
    if getattr(args, "data_command", None) == "decontaminate":
        return run_decontaminate_command(args)
    if getattr(args, "data_command", None) != "convert":
        raise ValueError("usage: yunshan data convert INPUTS --out OUT [options] or yunshan data decontaminate "
                         "TRAIN --tasks ... --out OUT; see yunshan data SUBCOMMAND --help")
    return run_convert(args)


def run_convert(args: argparse.Namespace) -> int:
    from yunshan.data.convert import ConvertReport, TextArgs, convert_text, read_dataset, read_inputs
    from yunshan.data.files import resolve_paths
    from yunshan.data.records import is_readable
    from yunshan.flags import from_flags

    a, named = from_flags(ConvertArgs, args), from_flags(NamedConverterArgs, args)
    if a.dataset and a.inputs:
        raise ValueError("give input files or --dataset, not both")
    if not a.dataset and not a.inputs:
        raise ValueError("no input: give files, folders or globs, or --dataset NAME")
    max_records, max_chars = _number(a.max_records), _number(a.max_chars)
    if a.dataset:
        inputs = [a.dataset]
        records = read_dataset(a.dataset, a.config, a.split)
    else:
        inputs = resolve_paths(a.inputs, "input", keep=is_readable, kinds=".jsonl/.json/.parquet/.csv/.txt (or .zip) file")
        records = read_inputs(inputs, a.format, a.txt_document)
    report = ConvertReport(a.converter, inputs, a.out)
    if a.converter == "text":
        text_args = TextArgs(
            text_field=a.text_field, template=a.template, where=_pairs(a.where, "--where"),
            keep_fields=[f for f in a.keep_fields.split(",") if f],
            add_fields={k: v[-1] for k, v in _pairs(a.add, "--add").items()},
            mask_pii=a.mask_pii, min_chars=a.min_chars, dedup=a.dedup)
        convert_text(records, a.out, text_args, report, a.on_bad_record, max_records, max_chars)
    elif a.converter in ("lawyer-llama", "chatlaw", "lawgpt-zh"):
        from yunshan.data.instruction_sets import convert_instructions

        convert_instructions(a.converter, records, a.out, report, a.on_bad_record, max_records,
                             context=named.context, system=named.system)
    elif a.converter == "jecqa-holdout":
        from yunshan.data.exam_layouts import split_jecqa

        if a.dataset:
            raise ValueError("jecqa-holdout reads the released JEC-QA files, not --dataset")
        split_jecqa(inputs, a.out, named.heldout_fraction, report, a.on_bad_record)
    else:
        from yunshan.data.exam_layouts import parquet_to_csv_layout

        if a.dataset or len(a.inputs) != 1 or not os.path.isdir(a.inputs[0]):
            raise ValueError("mc-parquet reads one folder: the downloaded Hub parquet files of the benchmark")
        if named.layout is None:
            raise ValueError("mc-parquet needs --layout ceval or --layout cmmlu")
        parquet_to_csv_layout(a.inputs[0], a.out, named.layout, report, named.subject_mapping)
    print(report.render())
    if a.report:
        Path(a.report).write_text(json.dumps(report.to_dict(), ensure_ascii=False, indent=1) + "\n",
                                  encoding="utf-8")
    if report.records_written == 0:
        print("warning: nothing was written; check --text-field/--template/--where against the report",
              file=sys.stderr)
    return 0


# ---------------------------------------------------------------- yunshan data decontaminate


def _eval_sets(args: DecontaminateArgs) -> tuple[list[tuple[str, str, list]], list[str]]:
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


def _input_sources(args: DecontaminateArgs) -> tuple[list, list]:
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
        cpt_sources, sft_sources = _input_sources(args)
    sources = [("cpt", s) for s in cpt_sources or []] + [("sft", s) for s in sft_sources or []]
    if not sources:
        raise ValueError("no training sources to check")
    names = [f"{kind}:{s.name}" for kind, s in sources]
    if len(set(names)) != len(names):
        raise ValueError(f"training source names must be unique within cpt and within sft: {names}")
    sets, not_checked = _eval_sets(args)
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


def run_decontaminate_command(args: argparse.Namespace) -> int:
    from yunshan.flags import from_flags

    a = from_flags(DecontaminateArgs, args)
    if args.config:
        if a.inputs:
            raise ValueError("give TRAIN files or --config RECIPE.yaml, not both")
        from yunshan.pipeline.stages import decontamination_plan
        from yunshan.recipe import load_recipe
        from yunshan.pipeline import PipelineRecipe

        recipe = load_recipe(PipelineRecipe, args.config)
        a, cpt_sources, sft_sources = decontamination_plan(recipe, a)
        report, shown = run_decontamination(a, cpt_sources, sft_sources)
    else:
        report, shown = run_decontamination(a, clean=a.drop)
    print(render_decontamination(report, shown, a.out))
    return 0
