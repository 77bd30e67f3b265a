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
benchmark layouts with yunshan eval's own readers (yunshan/eval/items.py; the run itself is
yunshan/eval/decontamination.py), and writes OUT/hits.jsonl (every hit,
with file:line on both sides), OUT/contaminated.jsonl (the contaminated records: what `data.exclude` of `yunshan
cpt` / `yunshan sft` leaves out) and OUT/decontamination.json; `--drop` also writes the inputs without them to
OUT/clean/. With `--config` it checks a pipeline recipe's cpt and sft sources against its eval section's sets, as
the recipe's `decontamination` stage does in `yunshan run`.

This module is the command only: reading, converting, comparing and writing are the data layer's
(yunshan/data/records.py, convert.py, decontamination.py, writers.py), which never prints, and the decontamination
run beside the evaluation sets it reads (yunshan/eval/decontamination.py).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from yunshan.data.records import FORMATS, TXT_DOCUMENTS
from yunshan.eval.decontamination import DecontaminateArgs
from yunshan.arguments.field_rules import check_fields

NAMED = ("lawyer-llama", "chatlaw", "lawgpt-zh", "jecqa-holdout", "mc-parquet")

PREPARE_DOC = """Prepare a corpus at scale on datatrove (docs/prepare.md):

    yunshan data prepare --config recipes/prepare/laws.yaml                  # local: one process per core
    yunshan data prepare --config recipes/prepare/laws.yaml executor=ray     # a Ray cluster (or a local one)
    yunshan data prepare --config recipes/prepare/laws.yaml executor=slurm slurm.partition=cpu
    yunshan data prepare --config RUN_RECIPE.yaml        # a yunshan run recipe: its prepare section, into its folder

The config is a `prepare:` section's fields at the top level (yunshan/prepare/args.py), or a pipeline recipe. The
prepared corpus is OUT/documents/*.jsonl.zst ({"text": ...} per line), which `yunshan tokenizer extend` and `yunshan
cpt` read as they are; OUT/prepare_report.md has every drop by step and reason. A killed run resumes where it was
(rerun the same command)."""


@dataclass
class ConvertArgs:
    """Arguments of `yunshan data convert`."""

    inputs: list[str] = field(default_factory=list, metadata={"path": True,
        "help": "files, folders or globs (.jsonl .json .parquet .csv .txt, + .gz .zst .xz .bz2, or .zip archives of "
                "them)"})
    out: str = field(default="", metadata={"path": True,
        "help": "output .jsonl/.jsonl.gz/.jsonl.zst (a folder for jecqa-holdout and mc-parquet)"})
    converter: str = field(default="text", metadata={
        "help": "text (the generic converter) or a named converter for a release's structure"})
    dataset: str | None = field(default=None, metadata={"path": True,
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
    min_chars: int = field(default=1, metadata={"range": ">= 0", "help": "drop documents shorter than this"})
    dedup: bool = field(default=False, metadata={"help": "drop exact duplicate documents"})
    max_records: float | None = field(default=None, metadata={"range": ">= 1",
        "help": "stop after writing this many records"})
    max_chars: float | None = field(default=None, metadata={"range": ">= 1",
        "help": "stop before the characters written would exceed this (e.g. 5e8)"})
    on_bad_record: str = field(default="fail", metadata={
        "help": "fail (stop with file, line and field) or skip (count by reason)"})
    report: str | None = field(default=None, metadata={"path": True,
        "help": "also write the report as JSON to this file"})

    def __post_init__(self):
        check_fields(self)

@dataclass
class NamedConverterArgs:
    """Options of the named converters (`--from NAME`)."""

    context: str = field(default="drop", metadata={
        "help": "lawyer-llama, lawgpt-zh: drop the supporting law articles or prepend them to the question"})
    system: str = field(default="drop", metadata={
        "help": "chatlaw: drop or keep its meta_instruction as the system turn"})
    heldout_fraction: float = field(default=0.1, metadata={"range": "(0, 1)",
        "help": "jecqa-holdout: share of questions held out (by a hash of the id)"})
    layout: str | None = field(default=None, metadata={"help": "mc-parquet: the CSV layout to write"})
    subject_mapping: str | None = field(default=None, metadata={"path": True,
        "help": "mc-parquet ceval: subject_mapping.json to check and copy"})

    def __post_init__(self):
        check_fields(self)

def add_arguments(parser: argparse.ArgumentParser) -> None:
    from yunshan.data.conversations import SFT_FORMATS
    from yunshan.arguments.flags import add_flags

    sub = parser.add_subparsers(dest="data_command", metavar="SUBCOMMAND")
    d = sub.add_parser("decontaminate", help="n-gram overlap of training data with the evaluation sets, every hit "
                                            "with file:line on both sides", description=__doc__,
                       formatter_class=argparse.RawDescriptionHelpFormatter)
    add_flags(d, DecontaminateArgs, positional={"inputs": "TRAIN"}, metavars={"tasks": "TASK", "heldout": "LABEL=FILE"},
              choices={"format": ("text", *SFT_FORMATS), "on_bad_record": ("fail", "skip")})
    d.add_argument("--config", help="a yunshan run recipe: check its cpt and sft sources against its eval sets "
                                    "(instead of TRAIN files)")
    from yunshan.arguments.flags import add_recipe_flags

    prep = sub.add_parser("prepare", help="prepare a corpus at scale on datatrove: clean, mask personal data, "
                                          "decontaminate, deduplicate (local, Ray or Slurm)",
                          description=PREPARE_DOC, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_recipe_flags(prep, "executor=ray tasks=8", "check the inputs and print the stages; prepare nothing")
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


def _number(value: float | None) -> int | None:
    """A count given as a number (5e8 is fine; its range, >= 1, is checked by the field)."""
    return None if value is None else int(value)


def run(args: argparse.Namespace) -> int:
    if getattr(args, "data_command", None) == "decontaminate":
        return run_decontaminate_command(args)
    if getattr(args, "data_command", None) == "prepare":
        return run_prepare_command(args)
    if getattr(args, "data_command", None) != "convert":
        raise ValueError("usage: yunshan data convert INPUTS --out OUT [options] or yunshan data decontaminate "
                         "TRAIN --tasks ... --out OUT; see yunshan data SUBCOMMAND --help")
    return run_convert(args)


def run_convert(args: argparse.Namespace) -> int:
    from yunshan.data.convert import ConvertReport, TextArgs, convert_text, read_dataset, read_inputs
    from yunshan.data.files import resolve_paths
    from yunshan.data.records import is_readable
    from yunshan.arguments.flags import from_flags

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


def run_decontaminate_command(args: argparse.Namespace) -> int:
    """`yunshan data decontaminate`: the engine is yunshan.eval.decontamination; this reads the flags (or a pipeline
    recipe's plan, as its decontamination stage makes it) and prints the summary."""
    from yunshan.eval.decontamination import render_decontamination, run_decontamination
    from yunshan.arguments.flags import from_flags

    a = from_flags(DecontaminateArgs, args)
    if args.config:
        if a.inputs:
            raise ValueError("give TRAIN files or --config RECIPE.yaml, not both")
        from yunshan.pipeline import PipelineRecipe
        from yunshan.pipeline.stages import decontamination_plan, preference_sources
        from yunshan.arguments.recipe import load_recipe

        recipe = load_recipe(PipelineRecipe, args.config)
        a, cpt_sources, sft_sources = decontamination_plan(recipe, a)
        pref_sources, pref_seed = preference_sources(recipe, a)
    else:
        cpt_sources = sft_sources = None
    from yunshan.io.folder_lock import folder_lock
    from yunshan.io.folders import check_output_folder

    # A second decontamination writing the same --out stops here, before anything is read or written.
    with folder_lock(check_output_folder(a.out, "--out"), "--out"):
        if args.config:
            report, shown = run_decontamination(a, cpt_sources, sft_sources, pref_sources=pref_sources,
                                                pref_seed=pref_seed)
        else:
            report, shown = run_decontamination(a, clean=a.drop)
    print(render_decontamination(report, shown, a.out))
    return 0


def run_prepare_command(args: argparse.Namespace) -> int:
    """`yunshan data prepare`: a prepare config (PrepareArgs at the top level) or a pipeline recipe's prepare section
    (written into the run's prepare folder, as `yunshan run` would)."""
    import yaml

    from yunshan.io.folder_lock import folder_lock
    from yunshan.prepare.args import PrepareArgs
    from yunshan.prepare.pipeline import describe_prepare, run_prepare
    from yunshan.prepare.report import render_summary
    from yunshan.arguments.recipe import load_recipe

    with open(args.config, encoding="utf-8") as f:
        top = yaml.safe_load(f) or {}
    if isinstance(top, dict) and "prepare" in top:
        from yunshan.pipeline import PipelineRecipe, RunLayout

        recipe = load_recipe(PipelineRecipe, args.config, args.overrides)
        if recipe.prepare is None:
            raise ValueError(f"{args.config}: the prepare section is disabled")
        a = dataclasses.replace(recipe.prepare, out=str(RunLayout(recipe).folder("prepare")))
    else:
        a = load_recipe(PrepareArgs, args.config, args.overrides)
    if args.dry_run:
        print(json.dumps(describe_prepare(a), indent=2, ensure_ascii=False))
        return 0
    Path(a.out).mkdir(parents=True, exist_ok=True)
    with folder_lock(Path(a.out), "prepare.out"):
        summary = run_prepare(a)
    print(render_summary(summary, Path(a.out)))
    return 0
