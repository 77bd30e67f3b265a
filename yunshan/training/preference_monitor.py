"""The held-out preference metrics of `yunshan pref`: how the model ranks the answers of pairs it never trains on.

    yunshan pref --config RECIPE.yaml preference.eval_steps=10

Every `eval_steps` steps (and before the first and after the last) the model scores the chosen and the rejected
answer of every held-out pair (summed log-probabilities of the answer tokens, as TRL scores a completion) and logs:

- `heldout/logps_chosen`, `heldout/logps_rejected`: the mean over pairs of each answer's summed log-probability;
- `heldout/reward_accuracy`, `heldout/reward_margin`: the share of pairs whose chosen answer earns the higher reward,
  and the mean of chosen minus rejected reward, with the reward the method's own, as TRL's trainers log it on their
  batches: beta x (log-probability - the reference's) for DPO, IPO and KTO, where the reference is the model at step
  0 (TRL's reference: the adapter-disabled model under LoRA, the frozen copy or the precomputed log-probabilities
  otherwise), so both are 0 before the first step; beta x the mean log-probability per answer token for ORPO and
  SimPO (reference-free);
- `heldout/likelihood_accuracy`: the share of pairs whose chosen answer has the higher mean log-probability per token:
  reference-free and length-fair, so it says already at step 0 whether the model prefers the correct answer, and
  compares methods and models.

The step-0 log-probabilities are the reference; they are saved in every checkpoint (REFERENCE_FILE), so a resumed
run measures against the same reference whatever its method keeps in memory. Under several processes every process
scores every pair (the forward passes are collectives under ZeRO-3 and FSDP) and the main one writes the log.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch
from transformers import Trainer, TrainerCallback

REFERENCE_FILE = "preference_reference.json"
# the methods whose reward is beta x (log-probability - the reference's); the others' is beta x the mean per token
REFERENCE_METHODS = ("dpo", "ipo", "kto")


# Answer positions whose logits are formed at once: 256 x a 49k vocabulary is 50 MB in float32, where the whole
# batch's logits (8 rows of 512 tokens) would be 800 MB and their log-softmax as much again.
CHUNK_POSITIONS = 256
# Logit transforms some models apply after the LM head (Gemma's soft-capping, Cohere's and Granite's scales): with any
# of these set the head is not applied here; the model's own forward runs one row at a time instead.
_HEAD_TRANSFORMS = ("final_logit_softcapping", "logit_scale", "output_multiplier", "lm_head_multiplier",
                    "logits_scaling")


@torch.no_grad()
def answer_logps(model, pairs, pad_id: int, batch_size: int = 4,
                 chunk_positions: int | None = CHUNK_POSITIONS) -> dict[str, list[float]]:
    """Summed log-probabilities and token counts of the chosen and rejected answers of `pairs` (EncodedPair) under
    `model`: {"chosen", "rejected", "chosen_tokens", "rejected_tokens"}, one entry per pair.

    With `chunk_positions` the full-vocabulary logits are never built for the batch: the model's backbone gives the
    hidden states, and the LM head is applied to `chunk_positions` answer positions at a time, each giving the label's
    logit minus the logsumexp of its row (tests/training/test_preference.py checks it equals the model's own logits).
    Models that transform the head's logits (_HEAD_TRANSFORMS) or expose no backbone and head run their own forward,
    one row at a time; `chunk_positions=None` runs the model's forward on the whole batch (the reference)."""
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    parts = _backbone_and_head(model) if chunk_positions else None
    step = batch_size if parts is not None or chunk_positions is None else 1
    out = {"chosen": [], "rejected": [], "chosen_tokens": [], "rejected_tokens": []}
    try:
        for start in range(0, len(pairs), batch_size):
            batch = pairs[start:start + batch_size]
            rows = [(p.prompt_ids, p.chosen_ids) for p in batch] + [(p.prompt_ids, p.rejected_ids) for p in batch]
            sums, counts = [], []
            for first in range(0, len(rows), step):
                s, c = _row_logps(model, parts, rows[first:first + step], pad_id, device, chunk_positions)
                sums += s
                counts += c
            k = len(batch)
            out["chosen"] += sums[:k]
            out["rejected"] += sums[k:]
            out["chosen_tokens"] += counts[:k]
            out["rejected_tokens"] += counts[k:]
    finally:
        model.train(was_training)
    return out


def _backbone_and_head(model):
    """(backbone, LM head) of a transformers causal LM (under PEFT: of its base model, adapters in place), or None
    when it has none or transforms the head's logits."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    head = base.get_output_embeddings() if hasattr(base, "get_output_embeddings") else None
    backbone = getattr(base, "base_model", None)
    config = getattr(base, "config", None)
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    if head is None or backbone is None or backbone is base or any(
            getattr(text, name, None) is not None for name in _HEAD_TRANSFORMS):
        return None
    return backbone, head


def _row_logps(model, parts, rows, pad_id: int, device, chunk_positions: int | None):
    """Summed answer log-probabilities and answer token counts of `rows` ((prompt ids, answer ids) each)."""
    width = max(len(a) + len(b) for a, b in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    answer = torch.zeros((len(rows), width), dtype=torch.bool)
    for i, (prompt, completion) in enumerate(rows):
        n = len(prompt) + len(completion)
        ids[i, :n] = torch.tensor(prompt + completion)
        mask[i, :n] = 1
        answer[i, len(prompt):n] = True
    ids, mask = ids.to(device), mask.to(device)
    answer = answer[:, 1:].to(device)
    labels = ids[:, 1:][answer]
    if parts is not None:
        backbone, head = parts
        hidden = backbone(input_ids=ids, attention_mask=mask, use_cache=False).last_hidden_state[:, :-1][answer]
        picked = torch.empty(len(labels), dtype=torch.float32, device=hidden.device)
        for first in range(0, len(labels), chunk_positions):
            logits = head(hidden[first:first + chunk_positions]).float()
            label = labels[first:first + chunk_positions].to(logits.device).unsqueeze(-1)
            picked[first:first + chunk_positions] = (logits.gather(1, label).squeeze(-1)
                                                     - torch.logsumexp(logits, -1))
    else:
        logits = model(input_ids=ids, attention_mask=mask, use_cache=False).logits
        # only the answer positions are normalised
        picked = logits[:, :-1][answer.to(logits.device)].float().log_softmax(-1)
        picked = picked.gather(1, labels.to(logits.device).unsqueeze(-1)).squeeze(-1)
    row_of = torch.arange(len(rows), device=answer.device).unsqueeze(1).expand_as(answer)[answer]
    sums = torch.zeros(len(rows), dtype=torch.float64, device=picked.device).index_add_(
        0, row_of.to(picked.device), picked.double()).cpu().tolist()
    return sums, answer.sum(-1).cpu().tolist()


def preference_metrics(logps: dict, reference: dict | None, method: str, beta: float) -> dict[str, float]:
    """The held-out metrics (module docstring) from the answers' log-probabilities and the reference's."""
    n = len(logps["chosen"])
    if n == 0:
        return {}
    per_token_c = [s / max(t, 1) for s, t in zip(logps["chosen"], logps["chosen_tokens"])]
    per_token_r = [s / max(t, 1) for s, t in zip(logps["rejected"], logps["rejected_tokens"])]
    if method in REFERENCE_METHODS:
        rewards_c = [beta * (a - b) for a, b in zip(logps["chosen"], reference["chosen"])]
        rewards_r = [beta * (a - b) for a, b in zip(logps["rejected"], reference["rejected"])]
    else:
        rewards_c = [beta * x for x in per_token_c]
        rewards_r = [beta * x for x in per_token_r]
    return {
        "heldout/likelihood_accuracy": sum(c > r for c, r in zip(per_token_c, per_token_r)) / n,
        "heldout/reward_accuracy": sum(c > r for c, r in zip(rewards_c, rewards_r)) / n,
        "heldout/reward_margin": math.fsum(c - r for c, r in zip(rewards_c, rewards_r)) / n,
        "heldout/logps_chosen": math.fsum(logps["chosen"]) / n,
        "heldout/logps_rejected": math.fsum(logps["rejected"]) / n,
    }


class PreferenceMonitor(TrainerCallback):
    """Every `every_steps` steps (and before the first and after the last) the held-out preference metrics, logged
    as "preference" events of the JSONL log and through the Trainer's log (so every tracker shows them).

    `resume_from`: the checkpoint a resumed run starts from (its REFERENCE_FILE holds the step-0 log-probabilities).
    `save(folder)` writes them into a checkpoint (YunshanTrainer's checkpoint_parts)."""

    def __init__(self, pairs, method: str, beta: float, pad_id: int, every_steps: int, batch_size: int = 4,
                 logger=None, resume_from: Path | None = None):
        self.pairs = pairs
        self.method = method
        self.beta = beta
        self.pad_id = pad_id
        self.every_steps = every_steps
        self.batch_size = batch_size
        self.logger = logger
        self.resume_from = resume_from
        self.reference: dict | None = None
        self.history: list[dict] = []
        self.trainer = None

    def save(self, folder: str | Path) -> None:
        if self.reference is not None:
            (Path(folder) / REFERENCE_FILE).write_text(json.dumps(self.reference), encoding="utf-8")

    def _load_reference(self) -> None:
        path = Path(self.resume_from) / REFERENCE_FILE
        if not path.is_file():
            raise FileNotFoundError(f"{self.resume_from}: no {REFERENCE_FILE} (the held-out pairs' step-0 "
                                    "log-probabilities); resume from a checkpoint written by yunshan pref, or start "
                                    "over with training.resume=never")
        reference = json.loads(path.read_text(encoding="utf-8"))
        if len(reference.get("chosen", [])) != len(self.pairs):
            raise ValueError(f"{path}: holds {len(reference.get('chosen', []))} held-out pairs, this run has "
                             f"{len(self.pairs)}; the held-out split changed since the checkpoint")
        self.reference = reference

    def measure(self, model, step: int) -> dict:
        logps = answer_logps(model, self.pairs, self.pad_id, self.batch_size)
        if self.reference is None:
            self.reference = logps  # step 0 of a fresh run: the model is the reference
        row = {"step": step, **preference_metrics(logps, self.reference, self.method, self.beta)}
        self.history.append(row)
        if self.logger is not None:
            self.logger.write({"event": "preference", **row})
        if self.trainer is not None:
            # through Trainer.log for the trackers (not TRL's override, which adds and clears its batch metrics: those
            # belong to the next training log); a log call clears control.should_log, which is kept
            control = self.trainer.control
            should_log = control.should_log
            Trainer.log(self.trainer, {k: v for k, v in row.items() if k != "step"})
            self.trainer.control.should_log = should_log
        return row

    def _model(self, kwargs):
        model = kwargs["model"]
        return self.trainer.accelerator.unwrap_model(model) if self.trainer is not None else model

    def _measure_and_print(self, kwargs, state) -> None:
        row = self.measure(self._model(kwargs), state.global_step)
        if state.is_world_process_zero:
            print(format_row(row), flush=True)

    def on_train_begin(self, args, state, control, **kwargs):
        if not self.pairs:
            return
        if state.global_step > 0 and self.reference is None:
            self._load_reference()
        if not any(r["step"] == state.global_step for r in self.history):
            self._measure_and_print(kwargs, state)

    def on_step_end(self, args, state, control, **kwargs):
        if not self.pairs:
            return
        due = self.every_steps and state.global_step % self.every_steps == 0
        if (due or state.global_step == state.max_steps) and not any(
                r["step"] == state.global_step for r in self.history):
            self._measure_and_print(kwargs, state)


def format_row(row: dict) -> str:
    return (f"[step {row['step']}] held-out pairs: chosen more likely {row['heldout/likelihood_accuracy']:.3f}, "
            f"reward accuracy {row['heldout/reward_accuracy']:.3f}, margin {row['heldout/reward_margin']:+.4f}, "
            f"log-probs chosen {row['heldout/logps_chosen']:.2f} / rejected {row['heldout/logps_rejected']:.2f}")
