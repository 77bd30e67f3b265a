"""Bits per character (and per byte) of held-out text, and the forgetting-vs-gain table of two models.

    yunshan eval --model base --model adapted --tasks bpc --heldout general=g.txt --heldout legal=l.txt

BPC = total negative log-likelihood of the text (nats) / ln 2 / number of Unicode characters. Every token is
predicted, the first from the BOS (else EOS) token, and documents longer than the model's context are scored with
a sliding window (each window adds `stride` new tokens and keeps the rest as context), so the figure compares
models with different tokenizers: it is the cost of the characters, not of the tokens. Given a "before" model
(the first --model) and an "after" model, the table puts the change on general text (forgetting: it should not
rise much) next to the change on domain text (gain: it should fall) — the 1:1 replay of continual pretraining
exists to keep the first small.
"""

from __future__ import annotations

import math
from pathlib import Path

from .likelihood import rolling_nll
from .texts import default_texts, labelled_files, read_documents

GENERAL = "general"


def first_chars(docs: list[str], max_chars: int) -> list[str]:
    """The documents in order until they hold `max_chars` characters, the last one cut to fill exactly that."""
    if max_chars < 1:
        raise ValueError(f"max_chars must be at least 1, got {max_chars}")
    kept, left = [], max_chars
    for doc in docs:
        if left <= 0:
            break
        kept.append(doc[:left])
        left -= len(kept[-1])
    return kept


def run_bpc(lm, files: dict[str, str | Path], limit: int | None = None, max_length: int | None = None,
            stride: int | None = None, batch_size: int = 8, progress: bool = False,
            max_chars: int | None = None) -> dict:
    """BPC of one model on each labelled file ({"general": path, "legal": path, ...}): its first `limit`
    documents, then its first `max_chars` characters of those."""
    per_file = {}
    for label, path in files.items():
        docs = read_documents(path)
        docs = docs[:limit] if limit is not None else docs
        docs = first_chars(docs, max_chars) if max_chars is not None else docs
        ids = [lm.tokenizer(d, add_special_tokens=False)["input_ids"] for d in docs]
        nlls = rolling_nll(lm, ids, max_length=max_length, stride=stride, batch_size=batch_size,
                           progress=progress, desc=f"bpc {label}")
        nll = math.fsum(d.nll for d in nlls)
        tokens = sum(d.n_tokens for d in nlls)
        chars = sum(len(d) for d in docs)
        n_bytes = sum(len(d.encode("utf-8")) for d in docs)
        per_file[label] = {"path": str(path), "documents": len(docs), "tokens": tokens, "chars": chars,
                           "bytes": n_bytes, "nll_nats": nll, "bpc": nll / math.log(2) / chars,
                           "bits_per_byte": nll / math.log(2) / n_bytes, "token_perplexity": math.exp(nll / tokens),
                           "windows": sum(d.n_windows for d in nlls)}
    return {"format": "bpc", "files": per_file, "max_length": max_length or lm.max_length, "max_chars": max_chars,
            "stride": stride or max(1, (max_length or lm.max_length) // 2), "columns": list(per_file)}


def forgetting_table(before: dict, after: dict, before_name: str, after_name: str) -> str:
    """Markdown: per held-out file, BPC before and after, the change, and whether it is forgetting or gain."""
    lines = [f"| held-out | kind | {before_name} BPC | {after_name} BPC | change | change % |",
             "|---|---|---|---|---|---|"]
    for label in before["files"]:
        if label not in after["files"]:
            continue
        b, a = before["files"][label]["bpc"], after["files"][label]["bpc"]
        kind = "forgetting (general)" if label == GENERAL else "gain (domain)"
        lines.append(f"| {label} | {kind} | {b:.4f} | {a:.4f} | {a - b:+.4f} | {100 * (a - b) / b:+.2f}% |")
    return "\n".join(lines)


def run_task(lm, data, args, chat: bool) -> tuple[dict, list[Path]]:
    """`yunshan eval --tasks bpc` (--heldout LABEL=FILE ...): this module's entry in yunshan.eval.tasks."""
    files = labelled_files(args.heldout, "--heldout") if args.heldout else {p.stem: p for p in default_texts("bpc")}
    result = run_bpc(lm, files, max_length=args.max_length, stride=args.stride,
                     batch_size=max(1, args.batch_size // 2), progress=args.progress,
                     limit=None if args.max_chars is not None else args.limit,
                     max_chars=args.max_chars)  # with max_chars, limit is left to the MC tasks (see EvalArgs)
    return result, list(files.values())


def headline(task, result: dict, data) -> list:
    """Bits per character of each held-out text (lower is better), each a model-index entry."""
    from yunshan.artifacts import Metric

    from .tasks import is_sample

    out = []
    for label, f in (result.get("files") or {}).items():
        if f.get("bpc") is None:
            continue
        sample = is_sample(f.get("path"))
        where = Path(f["path"]).name if f.get("path") else label
        name = f"held-out {label} text" + (" (yunshan sample)" if sample else "")
        out.append(Metric(f"bpc/{label}", name, "bits per character ↓", float(f["bpc"]), lower_is_better=True,
                          detail=f"{where}, {f.get('chars', 0):,} characters", sample=sample, eval_result=dict(
                              task_type="text-generation", task_name="Text Generation",
                              dataset_type=f"yunshan-heldout-{label}", dataset_name=name,
                              metric_type="bits_per_character", metric_name="bits per character",
                              metric_value=round(float(f["bpc"]), 4))))
    return out
