"""Watching a training run: the forgetting monitor (bits per character on held-out general and domain text), the
JSONL log (loss, lr, tokens/s, tokens seen per source) and the final plot (curves.png): loss (per source for SFT),
held-out bits per character and the realised token share of every source over the steps.

Bits per character, not token perplexity: a model whose tokenizer grew cuts the same text into fewer tokens, so
per-token figures are not comparable before and after; bits per character are (sum of token NLL in bits over the
whole text / number of Unicode characters).
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from pathlib import Path

import torch
from transformers import Trainer, TrainerCallback


def read_heldout(paths: list[str], max_chars: int) -> list[str]:
    """Documents of held-out text files (yunshan.data.records.read_texts: a .txt is one continuous document,
    .jsonl/.json one per record), the first `max_chars` characters in all (in file order, the last one cut)."""
    from yunshan.data.records import first_chars, read_texts

    docs = [text for path in paths for _, text in read_texts(str(path), "held-out text")]
    if not docs:
        raise ValueError(f"held-out files {paths} hold no text")
    return first_chars(docs, max_chars)


def read_heldout_sets(monitor) -> dict[str, list[str]]:
    """The monitor's held-out sets that `monitor` (MonitorArgs) names: "general" and "domain", each only when given,
    as read by `read_heldout`."""
    paths = {"general": monitor.general, "domain": monitor.domain}
    return {name: read_heldout(files, monitor.max_chars) for name, files in paths.items() if files}


@torch.no_grad()
def bits_per_character(model, tokenizer, texts: list[str], max_length: int = 512, stride: int | None = None,
                       batch_size: int = 8, autocast: bool = False, desc: str | None = None) -> dict:
    """Bits per character (and per byte) of `texts` under `model`: yunshan eval's `bpc` computation
    (yunshan.eval.bpc.rolling_nll: every token scored once, sliding windows, first token from BOS/EOS).

    `desc`: a progress bar by window with this name, on the main process (yunshan.io.progress); None: no bar.

    `autocast`: the forward passes under bf16 autocast with the output head in float32, as `yunshan eval --dtype
    auto` computes them (a bf16 training run's monitor: SmolLM2-135M, 2 x 4,000 characters, 34 s against 55 s in
    float32, bits/char 0.003 apart)."""
    from yunshan.eval.bpc import rolling_nll
    from yunshan.eval.loading import LoadedModel, float32_head_while

    was_training = model.training
    model.eval()
    try:
        lm = LoadedModel(name="training", path="", model=model, tokenizer=tokenizer, sha256=None, autocast=autocast)
        ids = [tokenizer(text, add_special_tokens=False)["input_ids"] for text in texts]
        with contextlib.ExitStack() as precision:
            if autocast:  # without it, whatever the caller set stays in force (nothing is switched off)
                precision.enter_context(lm.compute())
                precision.enter_context(float32_head_while(model))
            nlls = rolling_nll(lm, ids, max_length=max_length, stride=stride, batch_size=batch_size,
                               progress=desc is not None, desc=desc or "")
    finally:
        model.train(was_training)
    bits = math.fsum(d.nll for d in nlls) / math.log(2)
    chars = sum(len(t) for t in texts)
    n_bytes = sum(len(t.encode("utf-8")) for t in texts)
    tokens = sum(d.n_tokens for d in nlls)
    return {"bpc": bits / chars, "bits_per_byte": bits / n_bytes, "tokens": tokens, "chars": chars,
            "tokens_per_char": tokens / chars}


class ForgettingMonitor(TrainerCallback):
    """Every `every_steps` steps (and before the first), bits per character on held-out general and domain
    text, logged next to the loss."""

    def __init__(self, tokenizer, heldout: dict[str, list[str]], every_steps: int, max_length: int, logger=None,
                 autocast: bool = False):
        self.tokenizer = tokenizer
        self.autocast = autocast  # measure as the run trains: under bf16 autocast (bits_per_character)
        self.heldout = heldout  # name -> documents
        self.every_steps = every_steps
        self.max_length = max_length
        self.logger = logger
        self.history: list[dict] = []
        self.trainer = None

    def measure(self, model, step: int) -> dict:
        row = {"step": step}
        for name, docs in self.heldout.items():
            row[f"bpc_{name}"] = bits_per_character(model, self.tokenizer, docs, self.max_length,
                                                    autocast=self.autocast,
                                                    desc=f"[step {step}] held-out bits/char, {name}")["bpc"]
        self.history.append(row)
        if self.logger is not None:
            self.logger.write({"event": "bpc", **row})
        if self.trainer is not None:
            # Through the Trainer's log, so every tracker of training.report_to shows the figures beside the loss
            # (the JSONL log has them from the line above; JsonlLogger skips this call).
            # A log call clears control.should_log; kept, so a step that is also a logging step still logs its loss.
            # Trainer.log itself, not the trainer's override: TRL's trainers add (and clear) their batch metrics in
            # theirs, which belong to the next training log.
            control = self.trainer.control
            should_log = control.should_log
            Trainer.log(self.trainer, {k: v for k, v in row.items() if k.startswith("bpc_")})
            self.trainer.control.should_log = should_log
        return row

    def _model(self, kwargs):
        model = kwargs["model"]
        return self.trainer.accelerator.unwrap_model(model) if self.trainer is not None else model

    def on_train_begin(self, args, state, control, **kwargs):
        if not any(r["step"] == state.global_step for r in self.history):
            row = self.measure(self._model(kwargs), state.global_step)
            if state.is_world_process_zero:
                print(_format_bpc(row), flush=True)

    def on_step_end(self, args, state, control, **kwargs):
        if self.every_steps and state.global_step % self.every_steps == 0 or state.global_step == state.max_steps:
            if any(r["step"] == state.global_step for r in self.history):
                return
            row = self.measure(self._model(kwargs), state.global_step)
            if state.is_world_process_zero:
                print(_format_bpc(row), flush=True)


class MicroBatchProgress(TrainerCallback):
    """The micro-batches of a step shown on the Trainer's progress bar ("micro-batch 1/2"), so a step of gradient
    accumulation, which takes as long as its micro-batches together (tens of seconds each on a CPU), is seen
    advancing; YunshanTrainer adds it when training.gradient_accumulation_steps > 1."""

    def __init__(self, trainer):
        self.trainer, self.done = trainer, 0

    def _bar(self):
        from transformers.trainer_callback import ProgressCallback

        found = [c for c in self.trainer.callback_handler.callbacks if isinstance(c, ProgressCallback)]
        return getattr(found[0], "training_bar", None) if found else None

    def on_substep_end(self, args, state, control, **kwargs):
        self.done += 1
        bar = self._bar()
        if bar is not None:
            bar.set_postfix_str(f"micro-batch {self.done}/{args.gradient_accumulation_steps}")

    def on_step_end(self, args, state, control, **kwargs):
        self.done = 0
        bar = self._bar()
        if bar is not None:
            bar.set_postfix_str("", refresh=False)


def _format_bpc(row: dict) -> str:
    parts = [f"{k[4:]} {v:.4f}" for k, v in row.items() if k.startswith("bpc_")]
    return f"[step {row['step']}] bits/char: " + ", ".join(parts)


# Events the monitors write at a step (measured again when a run resumes at that step, so dropped from the log).
MEASURED_EVENTS = ("bpc", "preference")


class JsonlLogger(TrainerCallback):
    """Appends every Trainer log (plus tokens/s and tokens seen per source) to a JSONL file.

    `main_process`: whether this process writes (with several processes each one measures, only the main one
    writes)."""

    def __init__(self, path: Path, tokens_per_step: int, tokens_by_source=None, main_process: bool = True):
        self.path = Path(path)
        self.tokens_per_step = tokens_per_step
        self.tokens_by_source = tokens_by_source  # callable(step) -> {source: tokens} or None
        self.main_process = main_process
        self.last = None

    def write(self, record: dict) -> None:
        if not self.main_process:
            return
        with open(self.path, "a", encoding="utf-8") as f:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")

    def on_train_begin(self, args, state, control, **kwargs):
        self.last = (time.time(), state.global_step)
        step = state.global_step
        if step > 0 and self.main_process and self.path.is_file():
            # A resumed run logs again what the stopped one logged after its checkpoint, and measures the held-out
            # sets at the checkpoint's step again: drop those rows so every step appears once.
            rows = [line for line in self.path.read_text(encoding="utf-8").splitlines() if line.strip()]
            keep = [line for line in rows if (r := json.loads(line)).get("step", 0) < step
                    or (r.get("step") == step and r.get("event") not in MEASURED_EVENTS)]
            if len(keep) < len(rows):
                self.path.write_text("".join(line + "\n" for line in keep), encoding="utf-8")

    def on_log(self, args, state, control, logs=None, **kwargs):
        if not state.is_world_process_zero or not logs:
            return
        if "loss" not in logs and any(k.startswith(("bpc_", "heldout/")) for k in logs):
            return  # a monitor's figures (forgetting, held-out preferences), already written as their own event
        now, step = time.time(), state.global_step
        record = {"event": "train" if "loss" in logs else "log", "step": step, **logs}
        if self.last is not None and step > self.last[1]:
            record["tokens_per_s"] = (step - self.last[1]) * self.tokens_per_step / max(now - self.last[0], 1e-9)
        record["tokens_seen"] = step * self.tokens_per_step
        if self.tokens_by_source is not None:
            try:
                record["tokens_by_source"] = self.tokens_by_source(step)
            except RuntimeError:
                pass
        self.last = (now, step)
        self.write(record)


def curve_panels(records: list[dict], base_bpc: dict | None = None, weights: dict | None = None) -> list[dict]:
    """The panels of curves.png from the JSONL log's records, only those with data: training loss (with the loss
    per source when SFT logged it), held-out bits per character (when the monitor measured any) and the realised
    token share of every source over the steps (when CPT logged tokens per source), with the target `weights`.

    Each panel: {"title", "ylabel", "series": [(label, steps, values)], "levels": [(label, value)]}."""
    train = [r for r in records if r.get("event") == "train" and "loss" in r]
    panels = []
    series = [("all tokens", [r["step"] for r in train], [r["loss"] for r in train])] if train else []
    for key in sorted({k for r in train for k in r if k.startswith("loss_")}):
        pts = [(r["step"], r[key]) for r in train if key in r]
        series.append((key[5:], [p[0] for p in pts], [p[1] for p in pts]))
    panels.append({"title": "training loss" + (" per source" if len(series) > 1 else ""),
                   "ylabel": "loss (nats/token)", "series": series, "levels": []})
    panels += _preference_panels(records, train)
    bpc = [r for r in records if r.get("event") == "bpc"]
    names = sorted({k for r in bpc for k in r if k.startswith("bpc_")})
    if names:
        series = []
        for name in names:
            pts = [(r["step"], r[name]) for r in bpc if name in r]
            series.append((name[4:], [p[0] for p in pts], [p[1] for p in pts]))
        levels = [(f"{name}: base model", value) for name, value in sorted((base_bpc or {}).items())]
        panels.append({"title": "held-out bits per character", "ylabel": "bits / char", "series": series,
                       "levels": levels})
    shares = [(r["step"], r["tokens_by_source"]) for r in train if r.get("tokens_by_source")]
    if shares:
        total_weight = sum((weights or {}).values()) or 1.0
        series = []
        for name in shares[-1][1]:
            pts = [(step, tokens[name] / (sum(tokens.values()) or 1)) for step, tokens in shares if name in tokens]
            series.append((name, [p[0] for p in pts], [p[1] for p in pts]))
        levels = [(f"{name}: weight", w / total_weight) for name, w in (weights or {}).items()]
        panels.append({"title": "realised token share per source", "ylabel": "share of tokens trained",
                       "series": series, "levels": levels})
    return panels


def _preference_panels(records: list[dict], train: list[dict]) -> list[dict]:
    """Preference tuning: accuracy and reward margin on the held-out pairs (the preference monitor's "preference"
    events) beside TRL's figures on the training batches (rewards/accuracies, rewards/margins)."""
    held = [r for r in records if r.get("event") == "preference"]
    if not held:
        return []

    def series(rows, key, label):
        pts = [(r["step"], r[key]) for r in rows if r.get(key) is not None]
        return [(label, [p[0] for p in pts], [p[1] for p in pts])] if pts else []

    accuracy = (series(held, "heldout/likelihood_accuracy", "held-out: chosen more likely (per token)")
                + series(held, "heldout/reward_accuracy", "held-out: reward accuracy")
                + series(train, "rewards/accuracies", "training batches: reward accuracy"))
    margin = (series(held, "heldout/reward_margin", "held-out")
              + series(train, "rewards/margins", "training batches"))
    return [{"title": "preference accuracy", "ylabel": "share of pairs", "series": accuracy,
             "levels": [("chance", 0.5)]},
            {"title": "reward margin (chosen - rejected)", "ylabel": "reward", "series": margin, "levels": []}]


def plot_curves(log_path: Path, out_png: Path, title: str, base_bpc: dict | None = None,
                weights: dict | None = None) -> Path | None:
    """curves.png from the JSONL log: the panels of `curve_panels`, side by side. The embedding warm-up (new rows
    only), when the log records its end, is shaded on every panel; `base_bpc` (held-out name -> the base model's
    bits/char with its own tokenizer) is drawn as dotted levels: the mark an extended vocabulary has to get back
    under; `weights` (source -> mixture weight) as dotted levels of the token shares."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    records = [json.loads(line) for line in Path(log_path).read_text().splitlines() if line.strip()]
    panels = curve_panels(records, base_bpc, weights)
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 4), squeeze=False)
    warmup_end = next((r["step"] for r in records if r.get("event") == "warmup_end"), None)
    for ax, panel in zip(axes[0], panels):
        colours = {}
        for k, (label, steps, values) in enumerate(panel["series"]):
            many = len(steps) > 12
            line, = ax.plot(steps, values, marker=None if many else "o", ms=3, label=label,
                            lw=2 if k == 0 and panel["title"].startswith("training loss") else 1.2)
            colours[label] = line.get_color()
        for label, value in panel["levels"]:
            ax.axhline(value, ls=":", lw=1, color=colours.get(label.split(":")[0], "grey"), label=label)
        if warmup_end:
            ax.axvspan(0, warmup_end, color="tab:orange", alpha=0.12, lw=0, label="embedding warm-up")
        ax.set(title=panel["title"], xlabel="step", ylabel=panel["ylabel"])
        if not panel["series"]:  # a run shorter than training.logging_steps logs no loss: say so, not a blank box
            ax.text(0.5, 0.5, "no training loss logged\n(fewer steps than training.logging_steps)",
                    ha="center", va="center", transform=ax.transAxes, color="grey")
        if len(panel["series"]) > 1 or panel["levels"] or warmup_end:
            ax.legend(fontsize=8)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out_png, dpi=110)
    plt.close(fig)
    return out_png
