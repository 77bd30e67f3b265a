r"""`yunshan tokenizer`: extend a tokenizer with finance / legal vocabulary, and compare tokenizers on text.

    yunshan tokenizer extend --base BASE --corpus finance.jsonl legal.jsonl --words builtin:finance builtin:legal \
        --new-tokens 3000 --out out/tokenizer
    yunshan tokenizer report --tokenizer BASE --tokenizer out/tokenizer --text heldout/finance.txt --json r.json

BASE is a folder with tokenizer.json (byte-level BPE like GPT-2 / Llama-3 / Qwen, or SentencePiece-style BPE like
Llama-2) or a SentencePiece BPE .model file. See tokenizer/README.md for the method and the guarantees.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path


def _help(name: str) -> str:
    from .extend import ExtendArgs

    return {f.name: f.metadata["help"] for f in dataclasses.fields(ExtendArgs)}[name]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="tokenizer_command", metavar="ACTION", required=True)
    ext = sub.add_parser("extend", help="grow a base tokenizer with domain BPE tokens and word-list terms")
    ext.add_argument("--base", required=True, help=_help("base"))
    ext.add_argument("--corpus", required=True, nargs="+", metavar="FILE", help=_help("corpus"))
    ext.add_argument("--words", nargs="+", default=[], metavar="FILE", help=_help("words"))
    ext.add_argument("--new-tokens", required=True, type=int, metavar="N", help=_help("new_tokens"))
    ext.add_argument("--out", required=True, metavar="DIR", help=_help("out"))
    ext.add_argument("--min-frequency", type=int, default=2, help=_help("min_frequency") + " (default 2)")
    ext.add_argument("--max-token-chars", default="16",
                     help=_help("max_token_chars").replace("None", "'none'") + " (default 16)")
    ext.add_argument("--text-field", default="text", help=_help("text_field") + " (default text)")
    ext.add_argument("--on-invalid-utf8", choices=("error", "skip"), default="error", help=_help("on_invalid_utf8"))
    ext.add_argument("--overwrite", action="store_true", help=_help("overwrite"))
    ext.add_argument("--model", metavar="DIR",
                     help="measure the step-0 cost on this model (the base's): held-out bits/char of the base model "
                          "with its own tokenizer and of the extended model with new rows as initialised; written to "
                          "extension_cost.json in --out")
    ext.add_argument("--heldout", nargs="+", default=[], metavar="LABEL=FILE",
                     help="held-out texts for --model (blank-line separated paragraphs or .jsonl)")
    ext.add_argument("--init", default="subword_mean", choices=("subword_mean", "mean", "random"),
                     help="new-row initialisation for the --model measurement (default subword_mean)")
    ext.add_argument("--max-chars", type=int, default=20000, help="characters of each held-out file (default 20000)")

    rep = sub.add_parser("report", help="vocabulary size, tokens per character and bytes per token on text files")
    rep.add_argument("--tokenizer", required=True, action="append", metavar="PATH",
                     help="tokenizer folder or .model (repeat; the first is the reference)")
    rep.add_argument("--text", required=True, nargs="+", metavar="FILE",
                     help="text files: .jsonl (one text per record) or plain text (one text per line)")
    rep.add_argument("--text-field", default="text", help="field holding the text in .jsonl files (default text)")
    rep.add_argument("--top-new", type=int, default=20, help="how many of the most used new tokens to list")
    rep.add_argument("--json", metavar="PATH", help="also write the report as JSON here")


def run(args: argparse.Namespace) -> int:
    if args.tokenizer_command == "extend":
        from .extend import ExtendArgs, extend_tokenizer

        limit = args.max_token_chars
        if str(limit).lower() in ("none", "0"):
            limit = None
        else:
            try:
                limit = int(limit)
            except ValueError:
                raise ValueError(f"--max-token-chars {limit!r}: give a whole number or 'none'") from None
        extend_tokenizer(ExtendArgs(
            base=args.base, corpus=args.corpus, words=args.words, new_tokens=args.new_tokens, out=args.out,
            min_frequency=args.min_frequency, max_token_chars=limit, text_field=args.text_field,
            on_invalid_utf8=args.on_invalid_utf8, overwrite=args.overwrite))
        if args.model:
            _measure_cost(args)
        elif args.heldout:
            raise ValueError("--heldout needs --model (the model whose step-0 cost is measured)")
        return 0
    from .report import compression_report, format_markdown

    report = compression_report(args.tokenizer, args.text, text_field=args.text_field, top_new=args.top_new)
    print(format_markdown(report))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(report, ensure_ascii=False, indent=2) + "\n", encoding="utf-8")
    return 0


def _measure_cost(args: argparse.Namespace) -> None:
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
    base_tok = AutoTokenizer.from_pretrained(args.base if Path(args.base).is_dir() else Path(args.base).parent)
    new_tok = AutoTokenizer.from_pretrained(args.out)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
    autocast, why = fast_bf16()
    length = min(1024, getattr(model.config, "max_position_embeddings", 1024) or 1024)

    def measure(tokenizer):
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            return {label: bits_per_character(model, tokenizer, docs, length)["bpc"] for label, docs in files.items()}

    base = measure(base_tok)
    resize_embeddings(model, base_tok, new_tok, init=args.init)
    extended = measure(new_tok)
    rows = {label: {"base": base[label], "extended": extended[label], "change": extended[label] / base[label] - 1}
            for label in files}
    print(f"step-0 cost of the extension on {args.model} (new rows: {args.init}; "
          f"{'bf16 autocast' if autocast else 'fp32'}: {why}):")
    print("| held-out | base bits/char | extended bits/char | change |\n|---|---:|---:|---:|")
    for label, row in rows.items():
        print(f"| {label} | {row['base']:.4f} | {row['extended']:.4f} | {100 * row['change']:+.1f}% |")
    worst = max(row["change"] for row in rows.values())
    if worst > 0.05:
        print(f"warning: the extension costs up to {100 * worst:.0f}% bits/char before training; `yunshan cpt` "
              "recovers it with the embedding warm-up (on by default: warmup.* in the recipe)")
    (Path(args.out) / "extension_cost.json").write_text(json.dumps(
        {"model": str(args.model), "init": args.init, "max_chars": args.max_chars, "heldout": rows,
         "precision": "bf16 autocast" if autocast else "fp32"}, indent=2) + "\n", encoding="utf-8")
