"""Tokenizer compression: tokens per character (the paper's Table 7 figure) and bytes per token.

    yunshan eval --model base --model extended --tasks compression --text heldout/legal.txt

tokens/char = sum of tokens / sum of Unicode characters over the documents, no BOS or EOS added (lower is
better; the paper: LLaMA2 1.479, PanGu 0.649, YunShan 0.606 on JEC-QA). bytes/token = UTF-8 bytes / tokens
(higher is better). Only the tokenizer is loaded, so the task is fast for any model size.
"""

from __future__ import annotations

from pathlib import Path

from .texts import default_texts, read_documents


def measure_compression(tokenizer, documents: list[str], batch: int = 256) -> dict:
    """Token, character and byte counts of the documents, and the two ratios."""
    tokens = 0
    for start in range(0, len(documents), batch):
        encoded = tokenizer(documents[start: start + batch], add_special_tokens=False)["input_ids"]
        tokens += sum(len(ids) for ids in encoded)
    chars = sum(len(d) for d in documents)
    n_bytes = sum(len(d.encode("utf-8")) for d in documents)
    return {"tokens": tokens, "chars": chars, "bytes": n_bytes, "documents": len(documents),
            "tokens_per_char": tokens / chars, "bytes_per_token": n_bytes / tokens if tokens else float("nan"),
            "vocab_size": len(tokenizer)}


def run_compression(tokenizer, files: list[str | Path], limit: int | None = None) -> dict:
    """Compression of one tokenizer on each file (key = file name) and over all files together."""
    per_file, totals = {}, {"tokens": 0, "chars": 0, "bytes": 0, "documents": 0}
    for file in files:
        docs = read_documents(file)
        docs = docs[:limit] if limit is not None else docs
        m = measure_compression(tokenizer, docs)
        per_file[Path(file).name] = m
        for key in totals:
            totals[key] += m[key]
    totals["tokens_per_char"] = totals["tokens"] / totals["chars"]
    totals["bytes_per_token"] = totals["bytes"] / totals["tokens"] if totals["tokens"] else float("nan")
    return {"format": "compression", "files": per_file, "all": totals, "vocab_size": len(tokenizer),
            "columns": list(per_file)}


def run_task(lm, data, args, chat: bool, task=None) -> tuple[dict, list[Path]]:
    """`yunshan eval --tasks compression` (--text FILE ...): this module's entry in yunshan.eval.tasks."""
    files = [Path(t) for t in args.text] or default_texts("compression")
    return run_compression(lm.tokenizer, files, limit=args.limit), files


def headline(task, result: dict, data) -> list:
    """Tokens per character of each text (lower is better); not model-index entries (a tokenizer property)."""
    from yunshan.io.artifacts import Metric

    from .tasks import is_sample

    return [Metric(f"compression/{label}", f"tokens per character, {label}", "tokens/char ↓",
                   float(f["tokens_per_char"]), lower_is_better=True, sample=is_sample(f.get("path")))
            for label, f in (result.get("files") or {}).items() if f.get("tokens_per_char") is not None]
