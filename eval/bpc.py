"""Bits per character (and per byte) of held-out text, and the forgetting-vs-gain table of two models.

    yunshan eval --model base --model adapted --tasks bpc --heldout general=g.txt --heldout legal=l.txt

BPC = total negative log-likelihood of the text (nats) / ln 2 / number of Unicode characters. Every token is
predicted, the first from the BOS (else EOS) token, and documents longer than the model's context are scored with
a sliding window (each window adds `stride` new tokens and keeps the rest as context), so the figure compares
models with different tokenizers: it is the cost of the characters, not of the tokens. Given a "before" model
(the first --model) and an "after" model, the table puts the change on general text (forgetting: it should not
rise much) next to the change on domain text (gain: it should fall) — the 1:1 replay of continual pretraining
exists to keep the first small. A held-out `.txt` is one continuous document (blank lines are paragraph breaks
inside it, yunshan.data.records' `.txt` rule): each paragraph is predicted with the text before it as context.

`rolling_nll` scores every token of a document once (sliding windows, batched by length); yunshan cpt's
forgetting monitor measures its bits per character with it too (yunshan.training.monitoring).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import torch

from yunshan.data.records import first_chars

from .likelihood import prefix_token_id, target_nll
from .texts import default_texts, labelled_files, read_documents

GENERAL = "general"


def is_general(label: str) -> bool:
    """Whether a held-out label names general text, whose rise is forgetting ("general", "general_zh", "general-en",
    ...); every other label is domain text, whose fall is the gain."""
    return label == GENERAL or label.startswith((GENERAL + "_", GENERAL + "-"))


@dataclass
class DocumentNLL:
    """Negative log-likelihood (nats) of one document's tokens, each predicted from its own left context."""

    nll: float
    n_tokens: int
    n_windows: int = 1
    per_token: list[float] = field(default_factory=list, repr=False)


def sliding_windows(n_tokens: int, max_length: int, stride: int) -> list[tuple[int, int, int]]:
    """Windows over s = [prefix] + tokens (length n_tokens + 1) that score every token exactly once.

    Each window is (begin, end, first_target): the model reads s[begin:end] and the window scores targets
    s[first_target .. end] (target k is predicted at input position k - 1 - begin). After the first window, every
    window adds `stride` new targets and keeps at least max_length - stride tokens of context for them.
    """
    if max_length < 1 or not 1 <= stride <= max_length:
        raise ValueError(f"need 1 <= stride ({stride}) <= max_length ({max_length})")
    last = n_tokens  # index of the last target in s
    windows, done = [], 0  # done: targets 1..done are scored
    while done < last:
        end = min(last, done + (max_length if done == 0 else stride))
        begin = max(0, end - max_length)
        windows.append((begin, end, done + 1))
        done = end
    return windows


# Rows per forward in rolling_nll are capped by padded tokens as well as by batch_size: measured on SmolLM2-135M
# (float32, 2 cores), eight held-out documents of 640-3,717 tokens took 720 s as one padded batch and 153 s one by
# one (identical NLL): a padded batch pays its longest row's attention for every row through an explicit mask, and
# its (rows x length x vocabulary) logits reach gigabytes. Short rows are still batched.
MAX_BATCH_TOKENS = 2048


def plan_length_batches(lengths: list[int], batch_size: int, max_tokens: int = MAX_BATCH_TOKENS) -> list[list[int]]:
    """Indices of rows grouped longest first into batches of at most `batch_size` rows and `max_tokens` padded
    tokens (a row longer than that runs alone), none padded to more than twice its length."""
    order = sorted(range(len(lengths)), key=lambda k: -lengths[k])
    batches, current = [], []
    for k in order:
        width = lengths[current[0]] if current else lengths[k]  # longest first: the first row sets the width
        if current and (len(current) == batch_size or width * (len(current) + 1) > max_tokens
                        or 2 * lengths[k] < width):
            batches.append(current)
            current = []
        current.append(k)
    if current:
        batches.append(current)
    return batches


@torch.no_grad()
def rolling_nll(lm, documents: list[list[int]], max_length: int | None = None, stride: int | None = None,
                batch_size: int = 8, progress: bool = False, desc: str = "bpc") -> list[DocumentNLL]:
    """NLL of every token of every document, with a sliding window for documents longer than the model's context.

    The first token is predicted from the prefix token (BOS, else EOS), so every character of the text is paid
    for and bits per character compare across tokenizers. Windows are batched by length (plan_length_batches).
    """
    from yunshan.io.progress import progress_bar

    max_length = max_length or lm.max_length
    stride = stride or max(1, max_length // 2)
    prefix = prefix_token_id(lm.tokenizer)
    jobs = []  # (doc index, input row, target ids, first input position scored)
    for d, tokens in enumerate(documents):
        seq = [prefix] + list(tokens)
        for begin, end, first in sliding_windows(len(tokens), max_length, stride):
            jobs.append((d, seq[begin:end], seq[first: end + 1], first - 1 - begin))
    out = [DocumentNLL(0.0, len(t), 0, []) for t in documents]
    batches = plan_length_batches([len(job[1]) for job in jobs], batch_size)
    pieces: dict[int, list[float]] = {}
    with progress_bar(len(jobs), desc, unit="window", enabled=progress) as bar:  # windows, not batches
        for indices in batches:
            batch = [jobs[k] for k in indices]
            nlls = target_nll(lm, [row for _, row, _, _ in batch],
                              [list(range(first, first + len(targets))) for _, _, targets, first in batch],
                              [targets for _, _, targets, _ in batch])
            for k, values in zip(indices, nlls):
                pieces[k] = values
            bar.update(len(indices))
    for k, (d, _, _, _) in enumerate(jobs):  # jobs are in document and window order
        out[d].per_token.extend(pieces[k])
        out[d].n_windows += 1
    for doc in out:
        doc.nll = math.fsum(doc.per_token)
    return out


def run_bpc(lm, files: dict[str, str | Path], limit: int | None = None, max_length: int | None = None,
            stride: int | None = None, batch_size: int = 8, progress: bool = False,
            max_chars: int | None = None) -> dict:
    """BPC of one model on each labelled file ({"general": path, "legal": path, ...}): its first `limit`
    documents (a .txt is one), then its first `max_chars` characters of those."""
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
        kind = "forgetting (general)" if is_general(label) else "gain (domain)"
        lines.append(f"| {label} | {kind} | {b:.4f} | {a:.4f} | {a - b:+.4f} | {100 * (a - b) / b:+.2f}% |")
    return "\n".join(lines)


def run_task(lm, data, args, chat: bool, task=None) -> tuple[dict, list[Path]]:
    """`yunshan eval --tasks bpc` (--heldout LABEL=FILE ...): this module's entry in yunshan.eval.tasks."""
    files = labelled_files(args.heldout, "--heldout") if args.heldout else {p.stem: p for p in default_texts("bpc")}
    result = run_bpc(lm, files, max_length=args.max_length, stride=args.stride,
                     batch_size=max(1, args.batch_size // 2), progress=args.progress,
                     limit=None if args.max_chars is not None else args.limit,
                     max_chars=args.max_chars)  # with max_chars, limit is left to the MC tasks (see EvalArgs)
    return result, list(files.values())


def headline(task, result: dict, data) -> list:
    """Bits per character of each held-out text (lower is better), each a model-index entry."""
    from yunshan.io.artifacts import Metric

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
