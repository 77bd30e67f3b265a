r"""`yunshan tokenizer`: extend a tokenizer with finance / legal vocabulary, and compare tokenizers on text.

    yunshan tokenizer extend --base BASE --corpus finance.jsonl legal.jsonl --words builtin:finance builtin:legal \
        --new-tokens 3000 --out out/tokenizer
    yunshan tokenizer report --tokenizer BASE --tokenizer out/tokenizer --text heldout/finance.txt --json r.json

BASE is a folder with tokenizer.json (byte-level BPE like GPT-2 / Llama-3 / Qwen, or SentencePiece-style BPE like
Llama-2), a SentencePiece BPE .model file, or a Hub id ORG/NAME (with --revision; yunshan.loading.hub_download). See
tokenizer/README.md for the method and the guarantees.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from yunshan.arguments.field_rules import check_fields


@dataclass
class ExtensionCostArgs:
    """The step-0 cost of an extension on a model (`yunshan tokenizer extend --model`)."""

    model: str | None = field(default=None, metadata={"path": True,
        "help": "measure the step-0 cost on this model (the base's): held-out bits/char of the base model with its "
                "own tokenizer and of the extended model with new rows as initialised; written to "
                "extension_cost.json in --out"})
    heldout: list[str] = field(default_factory=list, metadata={"path": "labelled",
        "help": "LABEL=FILE held-out texts for --model (.txt: one continuous document; .jsonl: one per record)"})
    init: str = field(default="subword_mean", metadata={
        "help": "new-row initialisation for the --model measurement: subword_mean, mean or random"})
    max_chars: int = field(default=20000, metadata={"range": ">= 1", "help": "characters of each held-out file"})
    trust_remote_code: bool = field(default=False, metadata={
        "help": "allow --model's (and the tokenizers') own Python code (auto_map) to run"})

    def __post_init__(self):
        check_fields(self)

@dataclass
class ReportArgs:
    """Arguments of `yunshan tokenizer report`."""

    tokenizer: list[str] = field(metadata={"path": True,
        "help": "tokenizer folder or .model (repeat; the first is the reference)"})
    text: list[str] = field(metadata={"path": True,
        "help": "texts: files, folders or globs in any format yunshan cpt reads (.jsonl: one text per record; .txt: "
                "one text, as held-out texts are read)"})
    format: str = field(default="auto", metadata={"help": "format of the text files: auto (from each name) or jsonl, "
                                                          "json, parquet, csv, txt"})
    text_field: str = field(default="text", metadata={"help": "record field holding the text"})
    txt_document: str = field(default="file", metadata={"help": ".txt files: one text per file (a held-out text is one "
                                                                "document), paragraph or line"})
    top_new: int = field(default=20, metadata={"range": ">= 0", "help": "how many of the most used new tokens to list"})
    json: str | None = field(default=None, metadata={"path": True, "help": "also write the report as JSON here"})

    def __post_init__(self):
        check_fields(self)

def add_arguments(parser: argparse.ArgumentParser) -> None:
    from yunshan.data.records import FORMATS
    from yunshan.arguments.flags import add_flags

    from .extend import ExtendArgs

    sub = parser.add_subparsers(dest="tokenizer_command", metavar="ACTION", required=True)
    ext = sub.add_parser("extend", help="grow a base tokenizer with domain BPE tokens and word-list terms")
    add_flags(ext, ExtendArgs, required=("base", "out"), skip=("max_token_chars",),
              metavars={"corpus": "FILE", "words": "FILE", "new_tokens": "N", "out": "DIR", "report_texts": "FILE"},
              names={"report_texts": "--report-text"},
              choices={"on_bad_record": ("fail", "skip"), "txt_document": ("paragraph", "line", "file"),
                       "format": ("auto", *FORMATS)})
    # The one flag with a word for a value: "none" lifts the limit.
    ext.add_argument("--max-token-chars", default="16", help=_help(ExtendArgs, "max_token_chars") + " (default 16)")
    add_flags(ext.add_argument_group("step-0 cost"), ExtensionCostArgs, metavars={"model": "DIR_OR_ID", "heldout":
              "LABEL=FILE"}, choices={"init": ("subword_mean", "mean", "random")})
    rep = sub.add_parser("report", help="vocabulary size, tokens per character and bytes per token on text files")
    add_flags(rep, ReportArgs, metavars={"tokenizer": "PATH", "text": "FILE", "json": "PATH"},
              choices={"txt_document": ("paragraph", "line", "file"), "format": ("auto", *FORMATS)})


def _help(cls, name: str) -> str:
    return next(f.metadata["help"] for f in dataclasses.fields(cls) if f.name == name)


def run(args: argparse.Namespace) -> int:
    from yunshan.arguments.flags import from_flags

    if args.tokenizer_command == "extend":
        from .extend import ExtendArgs, extend_tokenizer
        from .report import format_markdown

        limit = args.max_token_chars
        if str(limit).lower() not in ("none", "0"):
            try:
                limit = int(limit)
            except ValueError:
                raise ValueError(f"--max-token-chars {limit!r}: give a whole number or 'none'") from None
        report = extend_tokenizer(from_flags(ExtendArgs, args, max_token_chars=limit))
        if "compression" in report:
            print(format_markdown(report["compression"]))
        cost = from_flags(ExtensionCostArgs, args)
        if cost.model:
            from yunshan.loading.hub_download import resolve_pretrained

            cost.model = resolve_pretrained(cost.model, args.revision if cost.model == args.base else None,
                                            field="--model")
            _measure_cost(cost, report["base"]["path"], args.out)
        elif cost.heldout:
            raise ValueError("--heldout needs --model (the model whose step-0 cost is measured)")
        return 0
    from .report import compression_report, format_markdown

    rep = from_flags(ReportArgs, args)
    report = compression_report(rep.tokenizer, rep.text, text_field=rep.text_field, format=rep.format,
                                txt_document=rep.txt_document, top_new=rep.top_new)
    print(format_markdown(report))
    if rep.json:
        Path(rep.json).parent.mkdir(parents=True, exist_ok=True)
        Path(rep.json).write_text(json.dumps(report, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return 0


def _measure_cost(args: ExtensionCostArgs, base_path: str, out: str) -> None:
    """Bits/char of the base model (own tokenizer) and of the extended model at step 0, per held-out file."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from yunshan.training.models import fast_bf16
    from yunshan.training.monitoring import bits_per_character, read_heldout

    from .embeddings import resize_embeddings

    if not args.heldout:
        raise ValueError("--model needs --heldout LABEL=FILE ... (the texts to measure the step-0 cost on)")
    files = {}
    for item in args.heldout:
        label, sep, path = item.partition("=")
        if not sep or not label or not path:
            raise ValueError(f"--heldout {item!r}: expected LABEL=FILE, e.g. general=heldout/general.txt")
        files[label] = read_heldout([path], args.max_chars)
    from yunshan.loading.remote_code import refuse_remote_code

    trust = args.trust_remote_code
    base_dir = base_path if Path(base_path).is_dir() else Path(base_path).parent
    from yunshan.io.folders import check_model_folder, readable_by_transformers

    check_model_folder(args.model, "--model")
    with refuse_remote_code(f"{args.model} (or its tokenizer)", "--trust-remote-code"):
        with readable_by_transformers(base_dir, "tokenizer"):
            base_tok = AutoTokenizer.from_pretrained(base_dir, trust_remote_code=trust)
        new_tok = AutoTokenizer.from_pretrained(out, trust_remote_code=trust)
        with readable_by_transformers(args.model, "model"):
            model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32,
                                                         trust_remote_code=trust).eval()
    autocast, why = fast_bf16()
    length = min(1024, getattr(model.config, "max_position_embeddings", 1024) or 1024)

    def measure(tokenizer, what: str):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            return {label: bits_per_character(model, tokenizer, docs, length,
                                              desc=f"extension cost: {what}, held-out {label}")["bpc"]
                    for label, docs in files.items()}

    base = measure(base_tok, "base model")
    resize_embeddings(model, base_tok, new_tok, init=args.init)
    extended = measure(new_tok, "new rows as initialised")
    rows = {label: {"base": base[label], "extended": extended[label], "change": extended[label] / base[label] - 1}
            for label in files}
    print(f"step-0 cost of the extension on {args.model} (new rows: {args.init}; "
          f"{'bfloat16 autocast' if autocast else 'float32'}: {why}):")
    print("| held-out | base bits/char | extended bits/char | change |\n|---|---:|---:|---:|")
    for label, row in rows.items():
        print(f"| {label} | {row['base']:.4f} | {row['extended']:.4f} | {100 * row['change']:+.1f}% |")
    worst = max(row["change"] for row in rows.values())
    if worst > 0.05:
        print(f"warning: the extension costs up to {100 * worst:.0f}% bits/char before training; `yunshan cpt` "
              "recovers it with the embedding warm-up (on by default: warmup.* in the recipe)")
    (Path(out) / "extension_cost.json").write_text(json.dumps(
        {"model": str(args.model), "init": args.init, "max_chars": args.max_chars, "heldout": rows,
         "precision": "bfloat16 autocast" if autocast else "float32"}, indent=2) + "\n", encoding="utf-8")
