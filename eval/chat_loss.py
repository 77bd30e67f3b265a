"""Held-out instruction sets scored the way SFT trains on them: the model's mean cross-entropy on the assistant turns.

    yunshan eval --model base --model sft --tasks chat_loss \
        --instructions lexeval=alpaca:lexeval.heldout.jsonl \
        --instructions "{name: disc_law, path: disc_law.heldout.jsonl, format: alpaca,
                         columns: {prompt: input, response: output}}"

Each set is an SFT source (yunshan.data.conversations.SftSourceArgs: name, path, format, columns, system,
max_samples; on the command line NAME=FORMAT:PATH or the source as a YAML mapping) read exactly as `yunshan sft`
reads it, rendered with the model's chat template (yunshan's default when the tokenizer has none: what `yunshan sft`
would train it with) and labelled by the SFT code itself (yunshan.data.chat.encode_conversation), so the tokens
scored are the tokens SFT trains on: every assistant turn with its end-of-turn marker, each predicted from all that
comes before it. A conversation longer than --max-length (default: the model's context) loses its oldest turns as
SFT's `truncate_prompt` does, never part of a scored answer; one whose last answer does not fit is left out and
counted. Each set is scored on its first `max_samples` samples (else --limit, else all of it).

Reported per set, lower is better: nats per response token (the SFT loss, on held-out data), bits per response
character (the same nats / ln 2 / the characters of the assistant turns scored: comparable across tokenizers, so
before and after a vocabulary extension), the token perplexity, and the samples, tokens and characters scored.
"""

from __future__ import annotations

import contextlib
import math
from pathlib import Path

import torch

from yunshan.data.conversations import SFT_FORMATS, SftSourceArgs

from .bpc import plan_length_batches
from .likelihood import target_nll


def instruction_set(spec) -> SftSourceArgs:
    """An --instructions entry as an SFT source: an SftSourceArgs, a mapping of its fields, `NAME=FORMAT:PATH`, or a
    YAML mapping `{name: ..., path: ..., format: ..., columns: {...}}` (what the command line gives)."""
    import yaml

    from yunshan.arguments.recipe import RecipeError, load_recipe

    if isinstance(spec, SftSourceArgs):
        return spec
    if isinstance(spec, str) and spec.lstrip().startswith("{"):
        try:
            spec = yaml.safe_load(spec)
        except yaml.YAMLError as err:
            raise ValueError(f"--instructions {spec!r}: not a YAML mapping ({' '.join(str(err).split())})") from None
    if isinstance(spec, dict):
        try:
            return load_recipe(SftSourceArgs, data=dict(spec))
        except RecipeError as err:
            raise ValueError(f"--instructions: {str(err).removeprefix('<recipe>: ')}") from None
    name, eq, rest = str(spec).partition("=")
    fmt, colon, path = rest.partition(":")
    if not (eq and colon and name and path) or fmt not in SFT_FORMATS:
        raise ValueError(f"--instructions {spec!r}: write NAME=FORMAT:PATH (FORMAT one of {', '.join(SFT_FORMATS)}) "
                         "or the source as a YAML mapping {name: ..., path: ..., format: ..., columns: {...}}")
    return SftSourceArgs(name=name, path=path, format=fmt)


@contextlib.contextmanager
def _chat_template(tokenizer):
    """The tokenizer with a chat template while scoring: its own, or yunshan's default for the time being (SFT gives
    a tokenizer without one that template, and saves it with the model)."""
    from yunshan.data.chat import ensure_chat_template

    added = ensure_chat_template(tokenizer)
    try:
        yield "yunshan default (the tokenizer has none; what yunshan sft trains with)" if added else "tokenizer's own"
    finally:
        if added:
            tokenizer.chat_template = None


def scored_tokens(tokenizer, samples, max_length: int) -> tuple[list[dict], dict]:
    """Each sample as SFT encodes it: input ids, the positions it scores (every labelled token t, predicted at t-1)
    and the characters of its scored assistant turns; with the count of truncated and dropped samples."""
    from yunshan.data.chat import encode_conversation, fit_to_length

    rows, counts = [], {"truncated_prompt": 0, "answer_too_long": 0}
    for sample in samples:
        enc = encode_conversation(tokenizer, sample.messages)
        fitted, reason = fit_to_length(enc, max_length, "truncate_prompt")
        if reason:
            counts[reason] += 1
        if fitted is None:
            continue
        targets = [t for t, label in enumerate(fitted.labels) if label != -100 and t > 0]
        # The answers scored: a turn the truncation reached is not trained on (fit_to_length), so not counted.
        answers = [m["content"] for m in sample.messages if m["role"] == "assistant"][-len(fitted.assistant_spans):]
        rows.append({"ids": fitted.input_ids, "at": [t - 1 for t in targets],
                     "targets": [fitted.input_ids[t] for t in targets], "chars": sum(len(a) for a in answers)})
    return rows, counts


@torch.no_grad()
def score_set(lm, samples, max_length: int, batch_size: int = 8, progress: bool = False,
              desc: str = "chat_loss") -> dict:
    """Mean cross-entropy of one instruction set's assistant turns (module docstring); `progress`: a bar by sample."""
    from yunshan.io.progress import progress_bar

    rows, counts = scored_tokens(lm.tokenizer, samples, max_length)
    nll = [0.0] * len(rows)
    with progress_bar(len(rows), desc, unit="sample", enabled=progress) as bar:
        for indices in plan_length_batches([len(r["ids"]) for r in rows], batch_size):
            values = target_nll(lm, [rows[k]["ids"] for k in indices], [rows[k]["at"] for k in indices],
                                [rows[k]["targets"] for k in indices])
            for k, v in zip(indices, values):
                nll[k] = math.fsum(v)
            bar.update(len(indices))
    total = math.fsum(nll)
    tokens = sum(len(r["targets"]) for r in rows)
    chars = sum(r["chars"] for r in rows)
    return {"samples": len(samples), "scored": len(rows), "dropped_answer_too_long": counts["answer_too_long"],
            "truncated_prompt": counts["truncated_prompt"], "tokens": tokens, "chars": chars, "nll_nats": total,
            "nats_per_token": total / tokens if tokens else None,
            "bits_per_char": total / math.log(2) / chars if chars else None,
            "token_perplexity": math.exp(total / tokens) if tokens else None}


def read_set(source: SftSourceArgs, limit: int | None = None) -> list:
    """The samples of a held-out instruction set, as yunshan sft reads them (a bad record stops with file, line and
    field), its first `max_samples` (else `limit`) in file order."""
    from yunshan.data.conversations import read_sft_source

    samples = read_sft_source(source, "fail", {})
    cap = source.max_samples if source.max_samples is not None else limit
    return samples[:cap] if cap is not None else samples


def run_chat_loss(lm, sets: list[SftSourceArgs], limit: int | None = None, max_length: int | None = None,
                  batch_size: int = 8, progress: bool = False) -> dict:
    """Every held-out instruction set scored on one model (`progress`: a bar by sample for each set)."""
    max_length = max_length or lm.max_length
    per_set = {}
    with _chat_template(lm.tokenizer) as template:
        for source in sets:
            result = score_set(lm, read_set(source, limit), max_length, batch_size, progress=progress,
                               desc=f"chat_loss {source.name}")
            per_set[source.name] = {"path": source.path, "format": source.format, **result}
    return {"format": "chat_loss", "sets": per_set, "columns": list(per_set), "max_length": max_length,
            "chat_template": template}


def check_sets(sets: list[SftSourceArgs]) -> None:
    names = [s.name for s in sets]
    if len(set(names)) != len(names):
        raise ValueError(f"--instructions: set names must be unique, got {names}")


def run_task(lm, data, args, chat: bool, task=None) -> tuple[dict, list[Path]]:
    """`yunshan eval --tasks chat_loss` (--instructions ...): this module's entry in yunshan.eval.tasks."""
    from yunshan.data.conversations import _files

    if not args.instructions:
        raise ValueError("--tasks chat_loss: no held-out instruction set; give --instructions NAME=FORMAT:PATH (or, "
                         "in a recipe, eval.instructions: a list of SFT sources)")
    check_sets(args.instructions)
    result = run_chat_loss(lm, args.instructions, limit=args.limit, max_length=args.max_length,
                           batch_size=max(1, args.batch_size // 2), progress=args.progress)
    return result, [Path(f) for s in args.instructions for f in _files(s)]


def headline(task, result: dict, data) -> list:
    """The held-out loss of each set (nats per response token, lower is better), each a model-index entry."""
    from yunshan.io.artifacts import Metric

    out = []
    for name, s in (result.get("sets") or {}).items():
        if s.get("nats_per_token") is None:
            continue
        where = Path(s["path"]).name if isinstance(s.get("path"), str) else name
        out.append(Metric(f"chat_loss/{name}", f"held-out instructions {name}", "nats per response token ↓",
                          float(s["nats_per_token"]), lower_is_better=True,
                          detail=f"{where}, {s['scored']:,} samples, {s['tokens']:,} response tokens, "
                                 f"{s['bits_per_char']:.4f} bits per response character",
                          eval_result=dict(task_type="text-generation", task_name="Text Generation",
                                           dataset_type=f"yunshan-instructions-{name}",
                                           dataset_name=f"held-out instructions {name}", metric_type="loss",
                                           metric_name="cross-entropy on assistant turns (nats per token)",
                                           metric_value=round(float(s["nats_per_token"]), 4))))
    return out
