"""Embedding warm-up for an extended vocabulary: fit the new output rows, then train only the new rows, then CPT.

    yunshan cpt --config RECIPE.yaml warmup.steps=60   # on by default when the tokenizer adds tokens; inside max_steps

Extending a real model's vocabulary costs before it helps. Measured on SmolLM2-135M (tied embeddings) with 5,000
new tokens and each new row set to the mean of its pieces' rows (FVT), held-out bits per character at step 0 rose
from 4.59 to 6.78 on general text (+48%), 4.41 to 4.76 on finance and 3.49 to 3.67 on legal. The input side of a
mean row is a fair first guess of the token's meaning; its output side is not: the row scores like the average of
its pieces, so in Chinese text thousands of new tokens look about as likely as each other and the right one gets
little mass. A user's CPT budget cannot pay that back (the paper had 36.5B tokens). Three steps do:

1. **Fit the new output rows** (`fit_new_rows`): run the frozen model over the first sequences of the training
   stream, keep the hidden state in front of every position (the input of the output head) and fit the new rows by
   the exact softmax cross-entropy of the extended vocabulary on those cached states, with Adam, for a few epochs.
   Only the new rows move; the other rows enter through the cached log-sum-exp of their logits, so an epoch costs
   one small matrix product per position instead of a forward pass. For a tied model the row is also the token's
   input embedding, which changes the hidden states: the fit then runs in rounds, each recomputing the states.
   Before the fit, `warmup.distill_steps` > 0 (off by default) first fits the new INPUT rows by token distillation
   (`distill_new_rows`): the frozen body's states after each new token are pulled to its states after the token's
   pieces, through the first `warmup.distill_layers` decoder layers, on the texts of the same sequences; the cost
   of an extension sits mostly on the input side (tokenizer/README.md, "Token distillation").
   Both are checked on `warmup.validation_sequences` (16) further sequences of the stream that neither reads: the
   whole model's cross-entropy on them before and after; a distillation or a fit round that does not lower it is
   undone (the fit keeps its best round), since a fit that lowers its own sequences' cross-entropy can raise unseen
   text's (Gemma-3-270M: tokenizer/README.md, "The fit checked on unseen sequences").
2. **Train only the new rows** (`WarmupController`) for `warmup.steps` steps (the first steps of the run's budget,
   `training.max_steps`, which stays the total: a quarter of it, at most 100, unless given), or until the held-out
   bits per character of every monitored set are at or below the base model's (with its own tokenizer): the rest of the
   model is frozen (no gradients computed for it, so a step is cheaper), and the new rows of the input and output
   embeddings train at `warmup.learning_rate`; the base rows of a trained embedding matrix are masked and not
   decayed. This is Chinese-LLaMA-Alpaca's stage 1, run inside the same Trainer run so checkpoints, exact resume and
   the data stream need nothing new.
3. **Continual pretraining** then starts from the warmed rows: the schedule of `training` (warm-up, cosine) begins at
   the step where the warm-up ended, and every trainable parameter trains.

The cost, base model vs extended model at step 0 (before and after the fit), is measured on the monitor's held-out
texts and saved in the data report (`extension_cost`) and the log. Written by hand: no library fits new vocabulary
rows to a frozen model or phases a Trainer run this way (PEFT's trainable tokens hold the rows; they are used).
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
from transformers import TrainerCallback

from yunshan.arguments.field_rules import check_fields

from yunshan.training.engines import named_parameters, reset_optimizer_state

STATE_FILE = "warmup_state.json"


@dataclass
class EmbeddingWarmupArgs:
    """Embedding warm-up of an extended vocabulary (module docstring of yunshan.training.embedding_warmup)."""

    enabled: str = field(default="auto", metadata={
        "help": "auto (on when the tokenizer adds tokens to the model's and the new rows are trainable), true, false"})
    fit: bool = field(default=True, metadata={
        "help": "fit the new output rows to the frozen model's hidden states on the first training sequences"})
    fit_sequences: int = field(default=64, metadata={"range": ">= 1",
        "help": "training sequences whose hidden states the fit uses"})
    fit_rounds: int = field(default=0, metadata={"range": ">= 0",
        "help": "fit rounds (hidden states recomputed each round); 0 = 3 for a tied model, 1 for an untied one"})
    fit_epochs: int = field(default=3, metadata={"range": ">= 1",
        "help": "passes over the cached hidden states per round"})
    fit_learning_rate: float = field(default=3e-3, metadata={"range": "> 0", "help": "Adam learning rate of the fit"})
    validation_sequences: int = field(default=16, metadata={"range": ">= 0",
        "help": "training sequences after the fit's, which neither the fit nor the distillation reads: the whole "
                "model's cross-entropy on them is measured before and after each, and what does not lower it is "
                "undone (a fit round stops the rounds and the best rows are kept); 0 = no check"})
    distill_steps: int = field(default=0, metadata={"range": ">= 0",
        "help": "token distillation of the new INPUT rows before the output fit: Adam steps of 4 texts each, in which "
                "the frozen body's states after a new token are pulled to its states after the token's pieces "
                "(distill_new_rows); 0 = off"})
    distill_layers: int = field(default=8, metadata={"range": ">= 0",
        "help": "decoder layers the distillation runs through (their output states are matched); 0 = every layer"})
    distill_learning_rate: float = field(default=3e-3, metadata={"range": "> 0",
        "help": "Adam learning rate of the distillation"})
    steps: int | None = field(default=None, metadata={"range": ">= 0",
        "help": "most steps in which only the new rows train, counted inside training.max_steps (the run's budget: "
                "the warm-up takes its first steps, continual pretraining the rest); default: a quarter of "
                "training.max_steps, at most 100 (WARMUP_SHARE, WARMUP_MAX_STEPS). Must be below training.max_steps"})
    learning_rate: float = field(default=1e-3, metadata={"range": "> 0",
        "help": "learning rate of the new rows during the warm-up"})
    until_base_bpc: bool = field(default=True, metadata={
        "help": "end the warm-up early once every held-out bits/char is at or below the base model's"})
    check_every: int = field(default=20, metadata={"range": ">= 1",
        "help": "warm-up steps between two held-out checks"})

    def __post_init__(self):
        check_fields(self)
        if str(self.enabled).lower() not in ("auto", "true", "false"):
            raise ValueError(f"warmup.enabled must be auto, true or false, got {self.enabled!r}")
        self.enabled = str(self.enabled).lower()


# The share of training.max_steps the warm-up may take when warmup.steps is not given. With until_base_bpc it ends
# sooner where the held-out figures reach the base model's (5 of 40 steps on SmolLM2 with the bundled data).
WARMUP_SHARE = 0.25
# ... and at most this many of them: a long run does not spend a quarter of its budget on the new rows alone.
WARMUP_MAX_STEPS = 100


def warmup_budget(args: EmbeddingWarmupArgs, total_steps: int) -> int:
    """The most steps the warm-up takes out of a run of `total_steps` (training.max_steps): warmup.steps, else
    WARMUP_SHARE of the run up to WARMUP_MAX_STEPS; at least one step is left for continual pretraining."""
    if args.steps is None:
        share = min(max(1, round(WARMUP_SHARE * total_steps)), WARMUP_MAX_STEPS)
        return min(share, total_steps - 1) if total_steps > 1 else 0
    if args.steps >= total_steps:
        raise ValueError(f"warmup.steps {args.steps} must be below training.max_steps {total_steps}: the embedding "
                         "warm-up is counted inside the run's budget (training.max_steps is the total, as in other "
                         f"trainers); give warmup.steps < {total_steps}, or leave it out for {round(100 * WARMUP_SHARE)}% "
                         "of the run")
    return args.steps


def choose_warmup(args: EmbeddingWarmupArgs, lora, new_ids: list[int], total_steps: int) -> tuple[bool, int]:
    """The new-token mode of a continual-pretraining run: whether the embedding warm-up runs and the most steps it
    takes (warmup_budget). It runs when the extension adds rows and `warmup.enabled` is true, or auto and the new
    rows train (full training, or LoRA whose lora.new_token_training is not none); true with rows that cannot train
    is an error."""
    from yunshan.training.models import new_token_mode

    rows_trainable = not lora.enabled or new_token_mode(lora, new_ids) != "none"
    on = bool(new_ids) and (args.enabled == "true" or (args.enabled == "auto" and rows_trainable))
    if on and not rows_trainable:
        raise ValueError("warmup.enabled is true but lora.new_token_training is none: the new rows would not train; "
                         "set lora.new_token_training to rows, indices or auto, or warmup.enabled: false")
    return on, warmup_budget(args, total_steps) if on else 0


# ----------------------------------------------------------------------------- the fit


def _decoder(model):
    """The part of a causal LM that returns the hidden states the output head reads (after the final norm)."""
    base = getattr(model, "base_model", None)
    if base is None or base is model:
        raise ValueError(f"{type(model).__name__}: no base_model to read hidden states from")
    return base


@torch.no_grad()
def _collect(model, sequences, fixed: torch.Tensor | None, autocast: bool, batch: int = 8, desc: str = ""):
    """Hidden states before every predicted position, the targets, the log-sum-exp of the fixed rows' logits and,
    for targets among the fixed rows, their logit. Sequences of one length run `batch` at a time (the training
    stream packs them to one length), each batch's positions scored against the fixed rows before the next batch
    runs; the products run in bf16 under `autocast`, accumulated in float32. `fixed` None: every row (no copy of the
    head). `desc`: the progress bar's name (by sequence; yunshan.io.progress)."""
    from yunshan.io.progress import progress_bar

    head = model.get_output_embeddings()
    decoder = _decoder(model)
    device = head.weight.device
    weight = head.weight.float()
    bias = head.bias.float() if getattr(head, "bias", None) is not None else None
    fixed_rows = weight if fixed is None else weight[fixed]
    fixed_bias = None if bias is None else bias if fixed is None else bias[fixed]
    states, targets, lses, target_logits = [], [], [], []
    by_length: dict[int, list[list[int]]] = {}
    for ids in sequences:
        by_length.setdefault(len(ids), []).append(ids)
    with progress_bar(len(sequences), desc, unit="sequence") as bar:
        for rows in by_length.values():
            for start in range(0, len(rows), batch):
                x = torch.tensor(rows[start:start + batch], device=device)
                with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
                    hidden = decoder(input_ids=x, use_cache=False).last_hidden_state
                h = hidden[:, :-1].float().reshape(-1, hidden.shape[-1])
                y = x[:, 1:].reshape(-1)
                for first in range(0, len(y), 2048):
                    chunk, chunk_y = h[first:first + 2048], y[first:first + 2048]
                    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
                        logits = (chunk @ fixed_rows.T).float()
                    if fixed_bias is not None:
                        logits += fixed_bias
                    lses.append(torch.logsumexp(logits, -1))
                    target_logits.append((chunk * weight[chunk_y]).sum(-1)
                                         + (bias[chunk_y] if bias is not None else 0))
                states.append(h)
                targets.append(y)
                bar.update(len(x))
    return torch.cat(states), torch.cat(targets), torch.cat(lses), torch.cat(target_logits)


def validation_loss(model, sequences: list[list[int]], autocast: bool = False,
                    desc: str = "validation cross-entropy") -> float:
    """The model's mean next-token cross-entropy (nats, exact softmax over the whole vocabulary) on `sequences`, in
    eval mode (no dropout); the mode is given back. `desc`: the progress bar's name."""
    was_training = model.training
    model.eval()
    try:
        _, _, lse, target_logit = _collect(model, sequences, None, autocast, desc=desc)
    finally:
        model.train(was_training)
    return (lse - target_logit).mean().item()


def _embedding_matrices(model) -> list[torch.Tensor]:
    """The input embeddings and the output head's weight: one matrix when tied, the input's alone without a head."""
    embed = model.get_input_embeddings().weight
    head = model.get_output_embeddings()
    return [embed] + ([head.weight] if head is not None and head.weight is not embed else [])


def _new_rows(model, new_ids: list[int]) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(matrix, copy of its rows of `new_ids`) for each of `_embedding_matrices`."""
    index = torch.tensor(sorted(new_ids))
    return [(w, w.detach()[index].clone()) for w in _embedding_matrices(model)]


def _put_rows(saved: list[tuple[torch.Tensor, torch.Tensor]], new_ids: list[int]) -> None:
    index = torch.tensor(sorted(new_ids))
    with torch.no_grad():
        for weight, rows in saved:
            weight[index] = rows


def fit_new_rows(model, new_ids: list[int], sequences: list[list[int]], *, rounds: int, epochs: int, lr: float,
                 autocast: bool = False, batch_positions: int = 4096, seed: int = 0,
                 validation: list[list[int]] | None = None, log=print) -> dict:
    """Fit the output rows of `new_ids` (the shared rows, for a tied model) on the frozen model's hidden states.

    Args:
        model: a plain transformers causal LM whose embeddings already have rows for `new_ids`.
        new_ids: ids of the new tokens (their rows are fitted; every other row is fixed).
        sequences: token id lists of the extended tokenizer (the first training sequences).
        rounds: recompute the hidden states this many times (a tied model's new rows are also inputs).
        epochs: Adam passes over the cached states per round.
        lr: Adam learning rate.
        autocast: run the forward passes in bfloat16 autocast (fast on CPUs with AMX/AVX-512 BF16 and on GPUs).
        validation: sequences the fit does not use (the next ones of the stream). When given, the whole model's
            cross-entropy on them is measured before the fit and after each round; the rounds stop at the first one
            that does not lower it and the rows of the best round are kept, or the rows as they were when no round
            lowers it (on Gemma-3-270M, tied, the fit of 100 laws tokens lowers its own sequences' cross-entropy and
            raises unseen text's: tokenizer/README.md, "The fit checked on unseen sequences").
    Returns the positions used and the cross-entropy (nats per position) on them before and after each round (the
    states of a round's "before" come from the rows as the round found them; for a tied model its "after" is on those
    states), and with `validation` the held-out cross-entropy before and after each round and the round kept.
    """
    from yunshan.io.progress import progress_bar

    started = time.perf_counter()
    head = model.get_output_embeddings()
    if head is None:
        raise ValueError(f"{type(model).__name__} has no output embeddings to fit")
    weight = head.weight
    new = torch.tensor(sorted(new_ids))
    is_new = torch.zeros(weight.shape[0], dtype=torch.bool)
    is_new[new] = True
    fixed = (~is_new).nonzero().squeeze(1)
    slot = torch.full((weight.shape[0],), -1, dtype=torch.long)
    slot[new] = torch.arange(len(new))
    bias = head.bias.detach().float()[new] if getattr(head, "bias", None) is not None else None
    generator = torch.Generator().manual_seed(seed)
    was_training = model.training
    model.eval()
    history = []
    checked = None
    checking = "fit of the new output rows: validation cross-entropy"
    if validation:
        checked = {"sequences": len(validation), "kept_round": 0,
                   "before": validation_loss(model, validation, autocast, desc=f"{checking} before the fit")}
        best, best_rows = checked["before"], _new_rows(model, new_ids)
    try:
        for round_ in range(rounds):
            this = f"fit of the new output rows, round {round_ + 1}/{rounds}"
            h, y, lse, target_fixed = _collect(model, sequences, fixed, autocast, desc=f"{this}: hidden states")
            rows = torch.nn.Parameter(weight.detach()[new].float().clone())
            optimizer = torch.optim.Adam([rows], lr=lr)
            target_slot = slot[y]
            target_new = target_slot >= 0

            def loss_of(index):
                with torch.autocast(h.device.type, dtype=torch.bfloat16, enabled=autocast):
                    logits = (h[index] @ rows.T).float()
                if bias is not None:
                    logits = logits + bias
                z = torch.logaddexp(lse[index], torch.logsumexp(logits, -1))
                picked = logits.gather(1, target_slot[index].clamp(min=0)[:, None]).squeeze(1)
                return (z - torch.where(target_new[index], picked, target_fixed[index])).sum()

            with torch.no_grad():
                before = sum(loss_of(torch.arange(i, min(i + batch_positions, len(y)))).item()
                             for i in range(0, len(y), batch_positions)) / len(y)
            with progress_bar(epochs * math.ceil(len(y) / batch_positions), f"{this}: Adam",
                              unit="step") as bar:
                for _ in range(epochs):
                    order = torch.randperm(len(y), generator=generator)
                    for i in range(0, len(y), batch_positions):
                        index = order[i:i + batch_positions]
                        optimizer.zero_grad()
                        (loss_of(index) / len(index)).backward()
                        optimizer.step()
                        bar.update(1)
            with torch.no_grad():
                after = sum(loss_of(torch.arange(i, min(i + batch_positions, len(y)))).item()
                            for i in range(0, len(y), batch_positions)) / len(y)
                weight.data[new] = rows.detach().to(weight.dtype)
            history.append({"round": round_ + 1, "positions": len(y), "new_token_targets": int(target_new.sum()),
                            "loss_before": before, "loss_after": after})
            log(f"fit of the new output rows, round {round_ + 1}/{rounds}: {len(y):,} positions "
                f"({int(target_new.sum()):,} with a new token as target), cross-entropy {before:.4f} -> "
                f"{after:.4f} nats")
            if checked is not None:
                history[-1]["validation_loss"] = held = validation_loss(
                    model, validation, autocast, desc=f"{checking} after round {round_ + 1}")
                if held >= best:
                    log(f"  on the {len(validation)} validation sequences the round raised the cross-entropy "
                        f"({best:.4f} -> {held:.4f} nats): " + ("the rows as they were before the fit are kept"
                        if not checked["kept_round"] else f"the rows of round {checked['kept_round']} are kept"))
                    break
                log(f"  on the {len(validation)} validation sequences: {best:.4f} -> {held:.4f} nats")
                best, best_rows, checked["kept_round"] = held, _new_rows(model, new_ids), round_ + 1
        if checked is not None:
            _put_rows(best_rows, new_ids)
            checked["after"] = best
    finally:
        model.train(was_training)
    return {"rounds": history, "sequences": len(sequences), "validation": checked,
            "seconds": time.perf_counter() - started}


def aligned_pairs(sequences: list[list[int]], tokenizer, base_tokenizer, min_chars: int = 32) -> list[tuple]:
    """The texts of training sequences (split at special tokens: documents packed together) tokenised by the extended
    and by the base tokenizer, with the positions where a token of each ends at the same character: (extended ids,
    base ids, extended positions, base positions). A continued BPE only joins base tokens, so every extended token
    ends where a base token does; positions whose ends differ are left out."""
    for name, tok in (("the extended tokenizer", tokenizer), ("the base tokenizer", base_tokenizer)):
        if not getattr(tok, "is_fast", False):
            raise ValueError(f"warmup.distill_steps: {name} ({type(tok).__name__}) is not a fast (Rust) tokenizer, so "
                             "it gives no character offsets to align the two tokenisations; save it with a "
                             "tokenizer.json (transformers converts most slow tokenizers) or set warmup.distill_steps: 0")
    special = set(tokenizer.all_special_ids)
    pairs = []
    for ids in sequences:
        segment: list[int] = []
        for token in [*ids, None]:
            if token is not None and token not in special:
                segment.append(token)
                continue
            text = tokenizer.decode(segment) if segment else ""
            segment = []
            if len(text) < min_chars:
                continue
            ext = tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
            base = base_tokenizer(text, return_offsets_mapping=True, add_special_tokens=False)
            ends = {end: i for i, (_, end) in enumerate(base["offset_mapping"])}
            js = [j for j, (_, end) in enumerate(ext["offset_mapping"]) if end in ends]
            is_ = [ends[ext["offset_mapping"][j][1]] for j in js]
            if js:
                pairs.append((ext["input_ids"], base["input_ids"][:is_[-1] + 1], js, is_))
    return pairs


def _decoder_layers(decoder):
    """The decoder's list of layers (transformers' Llama-style `layers`, PanGu-pi's and OTCE's), or None."""
    layers = getattr(decoder, "layers", None)
    return layers if isinstance(layers, torch.nn.ModuleList) else None


@contextlib.contextmanager
def only_rows_train(model, matrices: list[torch.Tensor], new_ids: list[int]):
    """For the block: every weight of `model` frozen except `matrices`, whose gradient outside the rows of `new_ids`
    is zeroed (so Adam without weight decay leaves those rows exactly as they were), and eval mode (no dropout: the
    rows fit the model as it will be used). requires_grad, the hooks and the mode are given back after it."""
    keep = torch.zeros(matrices[0].shape[0], 1, dtype=matrices[0].dtype, device=matrices[0].device)
    keep[torch.tensor(sorted(new_ids))] = 1
    trainable = {name: p.requires_grad for name, p in model.named_parameters()}
    was_training = model.training
    hooks = []
    for param in model.parameters():
        param.requires_grad_(False)
    for matrix in matrices:
        matrix.requires_grad_(True)
        hooks.append(matrix.register_hook(lambda grad: grad * keep[:grad.shape[0]].to(grad.dtype)))
    model.eval()
    try:
        yield
    finally:
        for hook in hooks:
            hook.remove()
        for name, param in model.named_parameters():
            param.requires_grad_(trainable[name])
        model.train(was_training)


def distill_new_rows(model, new_ids: list[int], pairs: list[tuple], *, steps: int, lr: float, layers: int = 0,
                     autocast: bool = False, batch: int = 4, validation: list[list[int]] | None = None,
                     log=print) -> dict:
    """Token distillation of the new input rows: fit them so that the frozen body, reading a text with the extended
    tokenizer, gives at the end of every token the states it gives at the end of the same characters with the base
    tokenizer (squared error, mean over the aligned positions of a text, `batch` texts a step, Adam on the new rows
    only). `layers` > 0 runs the first `layers` decoder layers only (then the final norm), on both sides.

    Why: an extension's cost at step 0 is mostly on the input side (benchmarks/extension_fit_rows.py: with SmolLM2
    and 100 new laws tokens, refitting the whole output head leaves 6.00 bits/char of the 6.96 as initialised, the
    base model 4.87): the body has never read the merged token at one position; the mean of its pieces' rows is a
    poor stand-in. The method is Dobler, Elliott and de Melo's "Token Distillation: Attention-aware Input Embeddings
    for New Tokens" (arXiv 2505.20133); written here because no installable library does it.

    With `validation` (sequences of the extended tokenizer the distillation does not read), the whole model's
    cross-entropy on them is measured before and after, and the rows as they were are put back when it did not fall.

    Returns the mean loss of the first and of the last pass over the texts (steps_averaged steps each), the steps,
    the seconds and, with `validation`, the held-out cross-entropy before and after and whether the rows were kept."""
    from yunshan.io.progress import progress_bar

    started = time.perf_counter()
    if not pairs or not steps:
        if steps:
            log("token distillation of the new input rows: skipped, no text of the sequences had an aligned token")
        return {"steps": 0, "texts": len(pairs), "seconds": 0.0}
    decoder = _decoder(model)
    weight = model.get_input_embeddings().weight
    stack = _decoder_layers(decoder)
    if layers and stack is not None and layers < len(stack):
        decoder.layers = stack[:layers]
    else:
        layers = 0
    device = weight.device
    checked = None
    checking = "token distillation: validation cross-entropy"
    if validation:
        checked = {"sequences": len(validation),
                   "before": validation_loss(model, validation, autocast, desc=f"{checking} before")}
        rows_before = _new_rows(model, new_ids)
    optimizer = torch.optim.Adam([weight], lr=lr)
    losses = []
    try:
        with only_rows_train(model, [weight], new_ids), \
                progress_bar(steps * batch, "token distillation of the new input rows", unit="text") as bar:
            for step in range(steps):
                optimizer.zero_grad()
                total = 0.0
                for k in range(batch):
                    ext_ids, base_ids, js, is_ = pairs[(step * batch + k) % len(pairs)]
                    with torch.autocast(device.type, dtype=torch.bfloat16, enabled=autocast):
                        with torch.no_grad():
                            target = decoder(input_ids=torch.tensor([base_ids], device=device),
                                             use_cache=False).last_hidden_state[0]
                        states = decoder(input_ids=torch.tensor([ext_ids], device=device),
                                     use_cache=False).last_hidden_state[0]
                    loss = ((states[js].float() - target[is_].float()) ** 2).sum(-1).mean()
                    (loss / batch).backward()
                    total += loss.item() / batch
                    bar.update(1)
                optimizer.step()
                losses.append(total)
    finally:
        if stack is not None:
            decoder.layers = stack
        weight.grad = None
    # the texts differ from step to step: the loss is compared over a pass of the texts at the start and at the end
    per_pass = min(steps, max(1, -(-len(pairs) // batch)))
    first, last = sum(losses[:per_pass]) / per_pass, sum(losses[-per_pass:]) / per_pass
    if checked is not None:
        checked["after"] = validation_loss(model, validation, autocast, desc=f"{checking} after")
        checked["kept"] = checked["after"] < checked["before"]
        if not checked["kept"]:
            _put_rows(rows_before, new_ids)
    report = {"steps": steps, "layers": layers or "all", "texts": len(pairs), "learning_rate": lr,
              "loss_first": first, "loss_last": last, "steps_averaged": per_pass, "validation": checked,
              "seconds": round(time.perf_counter() - started, 2)}
    log(f"token distillation of the new input rows: {steps} steps through {layers or 'every'} decoder "
        f"layer{'' if layers == 1 else 's'} on {len(pairs)} texts, squared error {first:.4g} -> {last:.4g} "
        f"(mean of the first and of the last {per_pass} steps; {report['seconds']:.0f} s)")
    if checked is not None:
        log(f"  on the {checked['sequences']} validation sequences: cross-entropy {checked['before']:.4f} -> "
            f"{checked['after']:.4f} nats" + ("" if checked["kept"] else ": not lower, the rows as they were are "
                                                                           "put back"))
    return report


def train_new_rows(model, new_ids: list[int], batches, *, lr: float, autocast: bool = False, micro_batch_size: int = 1,
                   log=print) -> dict:
    """Train only the rows of `new_ids`, input embeddings and output head alike (one matrix when tied), with every
    other weight frozen: the warm-up's second step (module docstring) as a plain loop, for a model that is not being
    trained any more (`yunshan model merge --refit-new-rows`: the merged body is no longer the one the rows were
    trained with).

    Args:
        model: a plain transformers causal LM whose embeddings have rows for `new_ids`.
        new_ids: ids of the rows that train; the gradient of every other row is zeroed, so Adam leaves them exactly
            as they were.
        batches: iterable of LongTensors [batch, length] of the model's tokenizer; one optimizer step each.
        lr: Adam learning rate (no weight decay: a decayed row would move without a gradient).
        autocast: forward and backward in bfloat16 autocast (fast on CPUs with AMX / AVX-512 BF16).
        micro_batch_size: sequences per forward pass, their gradients accumulated into the step (the batch's
            sequences have one length, so the step's loss is the same mean): the activations of one sequence, not
            of the batch, are resident (SmolLM2-135M with 4 x 512 tokens at once: above 6 GB).
    Returns the steps, the mean loss (nats per token) of each step and the seconds.
    """
    started = time.perf_counter()
    matrices = _embedding_matrices(model)
    optimizer = torch.optim.Adam(matrices, lr=lr, weight_decay=0.0)
    losses = []
    with only_rows_train(model, matrices, new_ids):
        for step, ids in enumerate(batches, 1):
            optimizer.zero_grad(set_to_none=True)
            total = 0.0
            for part in ids.split(micro_batch_size):
                with torch.autocast(matrices[0].device.type, dtype=torch.bfloat16, enabled=autocast):
                    loss = model(input_ids=part, labels=part).loss * (len(part) / len(ids))
                loss.backward()
                total += loss.item()
            optimizer.step()
            losses.append(total)
            log(f"new rows, step {step}: loss {losses[-1]:.4f} nats per token")
    return {"steps": len(losses), "losses": losses, "learning_rate": lr, "rows": len(new_ids),
            "seconds": time.perf_counter() - started}


FIT_FILE = "warmup_fit.safetensors"


def save_fitted_rows(model, new_ids: list[int], path: Path) -> None:
    """Save the fitted output rows of `new_ids` (whole tensors: under ZeRO-3, call inside `gathered`).

    A resumed run loads them instead of fitting again: where the head stays frozen (LoRA with trainable token
    indices) no engine's checkpoint holds them (DeepSpeed ZeRO-3 checkpoints only what the optimizer trains)."""
    from safetensors.torch import save_file

    rows = model.get_output_embeddings().weight.detach()[torch.tensor(sorted(new_ids))].clone()
    save_file({"rows": rows, "ids": torch.tensor(sorted(new_ids))}, str(path))


def load_fitted_rows(model, new_ids: list[int], path: Path) -> bool:
    """Write the rows `save_fitted_rows` saved back into the output head (whole tensors); False if there is no file."""
    from safetensors.torch import load_file

    if not Path(path).is_file():
        return False
    saved = load_file(str(path))
    if saved["ids"].tolist() != sorted(new_ids):
        raise ValueError(f"{path}: fitted rows for ids {saved['ids'][:3].tolist()}.., but this run adds "
                         f"{sorted(new_ids)[:3]}..; the tokenizer changed since the run began (start a new output_dir)")
    weight = model.get_output_embeddings().weight
    with torch.no_grad():
        weight[saved["ids"]] = saved["rows"].to(weight.dtype)
    return True


# ----------------------------------------------------------------------------- the warm-up phase of training


def new_row_parameters(model, new_ids: list[int]) -> list[tuple[torch.nn.Parameter, int | None, torch.nn.Module]]:
    """The trainable parameters that hold the new rows, each with the number of leading base rows to mask (None when
    the parameter holds only new rows) and the module whose forward uses it: PEFT's trainable-token deltas, a saved
    copy of embed_tokens / lm_head, or the plain embedding matrices of full fine-tuning. Shapes are the whole
    parameters' (a ZeRO-3 partition's `ds_shape`, an FSDP2 DTensor's global shape)."""
    from yunshan.training.engines import full_shape

    found: dict[int, tuple[torch.nn.Parameter, int | None, torch.nn.Module]] = {}
    first_new = min(new_ids)
    for module_name, module in model.named_modules():
        for name, param in module.named_parameters(recurse=False):
            if param.requires_grad and "trainable_tokens_delta" in f"{module_name}.{name}":
                found[id(param)] = (param, None, module)
    if found:
        return list(found.values())
    unwrapped = model.get_base_model() if hasattr(model, "get_base_model") else model
    for module in (unwrapped.get_input_embeddings(), unwrapped.get_output_embeddings()):
        if module is None:
            continue
        # PEFT's ModulesToSaveWrapper trains a copy; its forward weight is the copy's
        copies = getattr(module, "modules_to_save", None)
        target = copies[next(iter(copies))] if copies else module
        weight = getattr(target, "weight", None)
        if weight is not None and weight.requires_grad and full_shape(weight)[0] > first_new:
            found[id(weight)] = (weight, first_new, target)
    return list(found.values())


def _mask_base_rows(rows: int):
    """A gradient hook that zeroes the gradient of the first `rows` rows (the base vocabulary)."""
    return lambda grad: torch.cat([torch.zeros_like(grad[:rows]), grad[rows:]])


class WarmupController(TrainerCallback):
    """Phases one Trainer run: first only the new rows train, then everything trainable (module docstring, step 2).

    The optimizer holds every trainable parameter from the start (the new rows in a group of their own), so the
    switch is a change of learning rates and `requires_grad` only, and a checkpoint restores either phase.
    """

    def __init__(self, args: EmbeddingWarmupArgs, new_ids: list[int], train_lr: float, monitor=None, base_bpc=None,
                 logger=None):
        self.args = args
        self.new_token_ids = list(new_ids)
        # [(param, masked leading rows or None, module)], found when the optimizer is built: FSDP2 replaces the
        # parameters with sharded ones when it wraps the model, which happens first (Trainer.train)
        self.new_rows: list = []
        self.train_lr = train_lr
        self.monitor = monitor
        self.base_bpc = base_bpc or {}            # held-out name -> the base model's bits/char
        self.logger = logger
        self.switched_at: int | None = None if args.steps > 0 else 0
        self.reason = None if args.steps > 0 else "no warm-up steps"
        self.checks: list[dict] = []
        self.trainer = None
        self._hooks = []
        self._masked: dict[int, object] = {}
        # names of the other trained parameters: FSDP2 swaps every parameter for a sharded one after the optimizer
        # is built (accelerate maps the optimizer over), so they are looked up in the model when needed
        self._rest_names: list[str] = []

    # -- the optimizer and schedule (YunshanTrainer calls these)
    def split_optimizer(self, optimizer, model) -> None:
        """Move the new-row parameters of `model` (the one the optimizer was built for) out of the Trainer's groups
        into a group of their own (same hyperparameters but weight decay 0 until the switch)."""
        self.new_rows = new_row_parameters(model, self.new_token_ids)
        ids = {id(p) for p, _, _ in self.new_rows}
        moved = []
        for group in optimizer.param_groups:
            keep = [p for p in group["params"] if id(p) not in ids]
            moved += [(p, group["weight_decay"]) for p in group["params"] if id(p) in ids]
            group["params"] = keep
        optimizer.param_groups[:] = [g for g in optimizer.param_groups if g["params"]]
        names = {id(p): n for n, p in model.named_parameters()}
        self._rest_names = [names[id(p)] for g in optimizer.param_groups for p in g["params"]]
        decay = max((d for _, d in moved), default=0.0)
        # the decay to use after the switch travels with the group (and so with a checkpoint's optimizer state)
        optimizer.add_param_group({"params": [p for p, _ in moved], "weight_decay": decay, "yunshan_new_rows": True,
                                   "yunshan_weight_decay": decay})

    def lr_lambdas(self, optimizer, schedule_factory, total_steps: int):
        """One lambda per param group: the new rows at warmup.learning_rate until the switch, the rest at 0; after
        the switch both follow `schedule_factory(steps left)` counted from the switch."""
        ratio = self.args.learning_rate / self.train_lr if self.train_lr else 0.0
        cache: dict[int, object] = {}

        def after(step: int) -> float:
            start = self.switched_at if self.switched_at is not None else self.args.steps
            if start not in cache:
                cache[start] = schedule_factory(max(1, total_steps - start))
            return cache[start](step - start)

        def new_rows(step: int) -> float:
            if self.switched_at is None or step < self.switched_at:
                return ratio
            return after(step)

        def rest(step: int) -> float:
            if self.switched_at is None or step < self.switched_at:
                return 0.0
            return after(step)

        return [new_rows if g.get("yunshan_new_rows") else rest for g in optimizer.param_groups]

    def stateless_parameters(self, checkpoint) -> list[torch.nn.Parameter]:
        """The parameters without optimizer state in `checkpoint` (a checkpoint-N folder): the frozen ones when it
        was saved inside the warm-up or at its last step (they step for the first time after it)."""
        match = re.search(r"checkpoint-(\d+)$", str(checkpoint).rstrip("/"))
        step = int(match.group(1)) if match else None
        if step is not None and self.switched_at is not None and step > self.switched_at:
            return []
        return self._rest()

    def _rest(self) -> list[torch.nn.Parameter]:
        """The trained parameters other than the new rows, as the (possibly sharded) model now holds them."""
        params = named_parameters(self.trainer.accelerator.unwrap_model(self.trainer.model))
        return [params[name] for name in self._rest_names]

    # -- the phase
    def _enter_warmup(self) -> None:
        for param in self._rest():
            param.requires_grad_(False)
        for _, masked, module in self.new_rows:
            if masked:
                self._hooks.append(module.register_forward_pre_hook(
                    lambda mod, args, n=masked: self._mask_weight(mod.weight, n)))
        for group in self.trainer.optimizer.param_groups:
            if group.get("yunshan_new_rows"):
                group["weight_decay"] = 0.0

    def _mask_weight(self, weight: torch.Tensor, rows: int) -> None:
        """Mask the base rows' gradient of the tensor this forward really uses: the parameter itself for one process,
        DDP and DeepSpeed (gathered in place under ZeRO-3), FSDP2's unsharded parameter (whose gradient FSDP
        reduce-scatters into the sharded one), so the base rows get no gradient, before clipping, under every
        engine."""
        if id(weight) not in self._masked and weight.requires_grad:
            self._masked[id(weight)] = weight.register_hook(_mask_base_rows(rows))

    def _leave_warmup(self, step: int, reason: str) -> None:
        self.switched_at, self.reason = step, reason
        for param in self._rest():
            param.requires_grad_(True)
        for hook in [*self._hooks, *self._masked.values()]:
            hook.remove()
        self._hooks.clear()
        self._masked.clear()
        rest = []
        for index, group in enumerate(self.trainer.optimizer.param_groups):
            if group.get("yunshan_new_rows"):
                group["weight_decay"] = group["yunshan_weight_decay"]
            else:
                rest.append(index)
        # The frozen parameters start their Adam state now, as torch's AdamW does for a parameter whose gradient was
        # None until this step. DeepSpeed's ZeRO optimizers step every partition, with zero gradients for frozen
        # parameters (step counted, moments decayed): forgetting that state makes them match one process.
        reset_optimizer_state(self.trainer.optimizer, rest)
        scheduler = self.trainer.lr_scheduler
        for group, base_lr, fn in zip(self.trainer.optimizer.param_groups, scheduler.base_lrs, scheduler.lr_lambdas):
            group["lr"] = base_lr * fn(step)  # the scheduler already stepped with the warm-up's lambdas
        if self.logger is not None:
            self.logger.write({"event": "warmup_end", "step": step, "reason": reason})
        if self.trainer.is_world_process_zero():
            print(f"[step {step}] embedding warm-up ends ({reason}); continual pretraining of every trainable "
                  "parameter begins", flush=True)

    def on_train_begin(self, args, state, control, **kwargs):
        if self.switched_at is None or state.global_step < self.switched_at:
            self.switched_at = None
            self._enter_warmup()

    def on_step_end(self, args, state, control, **kwargs):
        if self.switched_at is not None:
            return
        step = state.global_step
        if step >= self.args.steps:
            self._leave_warmup(step, f"step limit {self.args.steps}")
            return
        if self.args.until_base_bpc and self.monitor is not None and self.base_bpc and \
                step % self.args.check_every == 0:
            model = self.trainer.accelerator.unwrap_model(kwargs["model"])
            row = next((r for r in self.monitor.history if r["step"] == step), None) or self.monitor.measure(model, step)
            reached = {name: row[f"bpc_{name}"] <= base for name, base in self.base_bpc.items()
                       if f"bpc_{name}" in row}
            self.checks.append({"step": step, **{k: row[k] for k in row if k.startswith("bpc_")}})
            # Every process measured; the main process decides for all (nondeterministic kernels on GPUs could make
            # two processes disagree by a last bit, and a split decision would hang the run).
            if from_main_process(bool(reached) and all(reached.values())):
                self._leave_warmup(step, "held-out bits/char reached the base model's")

    # -- checkpoints
    def state_dict(self) -> dict:
        return {"switched_at": self.switched_at, "reason": self.reason, "base_bpc": self.base_bpc,
                "checks": self.checks}

    def save(self, folder: Path) -> None:
        (Path(folder) / STATE_FILE).write_text(json.dumps(self.state_dict(), indent=1))

    def load(self, folder: Path) -> None:
        path = Path(folder) / STATE_FILE
        if path.is_file():
            state = json.loads(path.read_text())
            self.switched_at, self.reason = state["switched_at"], state["reason"]
            self.base_bpc = state.get("base_bpc") or self.base_bpc
            self.checks = state.get("checks", [])

    def report(self, tokens_per_step: int, total_steps: int | None = None) -> dict:
        steps = self.switched_at if self.switched_at is not None else self.args.steps
        share = {"share_of_budget": round(steps / total_steps, 4), "budget_steps": total_steps} if total_steps else {}
        return {"steps": steps, "tokens": steps * tokens_per_step, "ended": self.reason, "max_steps": self.args.steps,
                **share, "learning_rate": self.args.learning_rate, "checks": self.checks}


def from_main_process(value):
    """`value` as the main process has it, on every process (itself when there is one process)."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return value
    box = [value]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def warmup_running(checkpoint: Path) -> bool:
    """Whether a checkpoint was taken inside an embedding warm-up that has not ended (its end may still depend on
    the forgetting monitor's figures)."""
    path = Path(checkpoint) / STATE_FILE
    return path.is_file() and json.loads(path.read_text()).get("switched_at") is None


def relative_cost(base: dict, extended: dict) -> dict:
    """Per held-out set: base bits/char, extended bits/char and the relative change (the step-0 cost)."""
    out = {}
    for name, value in base.items():
        if name in extended and value:
            out[name] = {"base": value, "extended": extended[name], "change": extended[name] / value - 1.0}
    return out


def format_cost(cost: dict) -> str:
    return ", ".join(f"{name} {c['base']:.4f} -> {c['extended']:.4f} ({100 * c['change']:+.1f}%)"
                     for name, c in cost.items())


def is_finite(values) -> bool:
    return all(math.isfinite(v) for v in values)
