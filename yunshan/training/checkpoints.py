"""Crash-safe checkpoints for transformers' Trainer: a checkpoint counts only once it is complete.

Trainer writes `checkpoint-N/` in place and then deletes old checkpoints beyond `save_total_limit`, so a process
killed while writing can leave a half-written newest checkpoint and, worse, may already have deleted the last good
one. `YunshanTrainer` saves with rotation switched off, adds the data stream's position, then writes a
`COMPLETE` marker (fsynced) and only then deletes old checkpoints, complete ones beyond the limit and any
incomplete leftovers. `latest_complete_checkpoint` is what `resume: auto` picks. Every checkpoint also records the
run it belongs to (RUN_FILE: recipe, total steps; yunshan.training.resume reads it), and `load_final_checkpoint`
puts a checkpoint of the last step into the Trainer without training (a run killed between that checkpoint and its
final save).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import time
from pathlib import Path

from transformers import Trainer

COMPLETE = "COMPLETE"
# In every checkpoint: the run it belongs to (resolved recipe, total steps, resumes), which a rerun compares its
# recipe with (yunshan.training.resume.plan_run).
RUN_FILE = "yunshan_run.json"
_STEP = re.compile(r"^checkpoint-(\d+)$")


def checkpoint_steps(folder: str | Path) -> list[tuple[int, Path, bool]]:
    """(step, path, complete) for every checkpoint-N folder, oldest first."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    found = []
    for child in folder.iterdir():
        m = _STEP.match(child.name)
        if m and child.is_dir():
            found.append((int(m.group(1)), child, (child / COMPLETE).is_file()))
    return sorted(found)


def latest_complete_checkpoint(folder: str | Path) -> Path | None:
    complete = [path for _, path, ok in checkpoint_steps(folder) if ok]
    return complete[-1] if complete else None


def _fsync_write(path: Path, text: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)


def write_run_file(folder: Path, record: dict) -> None:
    (Path(folder) / RUN_FILE).write_text(json.dumps(record, indent=1, ensure_ascii=False, default=str),
                                         encoding="utf-8")


def mark_complete(checkpoint: Path, step: int) -> None:
    from yunshan.io.folders import apply_umask

    apply_umask(Path(checkpoint).rglob("*"))  # safetensors writes 0600; the rest of the folder has the user's umask
    _fsync_write(checkpoint / COMPLETE, json.dumps({"step": step, "time": time.time()}))


@contextlib.contextmanager
def final_save(out: Path):
    """Around a run's final save: a full disk or another OS error while writing the model (safetensors raises its own
    SafetensorError) is one line naming the folder and what to do, not a traceback. Nothing is lost: the marker that
    vouches for the folder is written last, so the folder does not claim the half-written files, and the rerun
    removes their leftovers and resumes from the newest complete checkpoint (yunshan.training.resume)."""
    from safetensors import SafetensorError

    try:
        yield
    except (SafetensorError, OSError) as err:
        reason = " ".join(str(err).split()) or type(err).__name__
        raise OSError(f"{out}: the final save failed ({reason}); free space (or fix the folder) and run the same "
                      "command again: it resumes from the newest complete checkpoint") from None


def rotate(folder: str | Path, keep: int | None) -> None:
    """Keep the newest `keep` complete checkpoints; delete older ones and incomplete ones older than the newest
    complete checkpoint (leftovers of a crash)."""
    entries = checkpoint_steps(folder)
    complete = [(s, p) for s, p, ok in entries if ok]
    if not complete:
        return
    newest = complete[-1][0]
    doomed = [p for s, p, ok in entries if not ok and s < newest]
    if keep is not None and keep > 0:
        doomed += [p for _, p in complete[:-keep]]
    for path in doomed:
        shutil.rmtree(path, ignore_errors=True)


def remove_incomplete_after(folder: str | Path, step: int | None) -> list[Path]:
    """Delete incomplete checkpoints newer than `step` (left by a killed run) before resuming."""
    removed = []
    for s, path, ok in checkpoint_steps(folder):
        if not ok and (step is None or s > step):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


def remove_checkpoints(out: str | Path) -> None:
    """Delete a finished run's checkpoints folder (what `yunshan run` keeps of a stage is its final outputs): first
    renamed aside in one step, so a kill during the deletion never leaves a checkpoint marked complete whose files
    are half gone; a rerun's `reopen` removes what a kill left of the renamed folder."""
    folder = Path(out) / "checkpoints"
    if not folder.exists():
        return
    doomed = Path(out) / ".checkpoints.removing"
    shutil.rmtree(doomed, ignore_errors=True)
    os.rename(folder, doomed)
    shutil.rmtree(doomed, ignore_errors=True)


class YunshanTrainer(Trainer):
    """Trainer whose checkpoints hold the data stream position and are marked complete before rotation.

    `log_extras` (step -> {name: number}) adds yunshan's own metrics to every training log. With `warmup` (a
    yunshan.training.embedding_warmup.WarmupController) the new vocabulary rows get a param group
    of their own and every group its own learning-rate lambda, so one run holds the embedding warm-up and the
    continual pretraining after it; the controller's state is saved in every checkpoint. With
    `loraplus_lr_ratio` (lora.loraplus_lr_ratio) the optimizer is PEFT's LoRA+ one: its B matrices learn that many
    times faster than the rest. With `chunked_loss` (yunshan.training.chunked_loss.ChunkedLoss) a training step's
    loss is computed without the full-vocabulary logits; `keep_token_losses` keeps each token's loss of the last
    micro-step in `token_losses` (the output's logits are then empty)."""

    def __init__(self, *args, data_stream=None, sequences_per_step: int = 0, warmup=None, log_extras=None,
                 run_record=None, loraplus_lr_ratio: float | None = None, checkpoint_parts=(), chunked_loss=None,
                 keep_token_losses: bool = False, **kwargs):
        self.loraplus_lr_ratio = loraplus_lr_ratio
        self.chunked_loss = chunked_loss
        self.keep_token_losses = keep_token_losses
        self.token_losses = None
        super().__init__(*args, **kwargs)
        # objects with save(folder): more state written into every checkpoint (the preference monitor's reference)
        self.checkpoint_parts = list(checkpoint_parts)
        self.run_record = run_record  # written into every checkpoint (RUN_FILE; yunshan.training.resume.run_record)
        self.data_stream = data_stream
        self.sequences_per_step = sequences_per_step
        self.warmup = warmup
        self.log_extras = log_extras  # step -> {name: number} added to every training log (yunshan's own metrics)
        if warmup is not None:
            warmup.trainer = self
        if self.args.gradient_accumulation_steps > 1:
            from yunshan.training.monitoring import MicroBatchProgress

            self.add_callback(MicroBatchProgress(self))

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        self.token_losses = None
        if self.chunked_loss is None or "labels" not in inputs or not model.training:
            return super().compute_loss(model, inputs, return_outputs=return_outputs,
                                        num_items_in_batch=num_items_in_batch)
        # The model runs as the Trainer runs it (engine, autocast, num_items_in_batch); only its head computes the
        # loss chunk by chunk instead of the logits (yunshan.training.chunked_loss).
        with self.chunked_loss.computing(inputs["labels"], inputs.get("shift_labels"),
                                         self.keep_token_losses) as request:
            result = super().compute_loss(model, inputs, return_outputs=return_outputs,
                                          num_items_in_batch=num_items_in_batch)
        self.token_losses = request.token_losses
        return result

    def log(self, logs, start_time=None):
        # Added before the callbacks see the log, so every tracker (training.report_to) and the JSONL log get them.
        if self.log_extras is not None and "loss" in logs:
            logs.update(self.log_extras(self.state.global_step))
        return super().log(logs, start_time)

    def create_optimizer(self, model=None):
        fresh = self.optimizer is None
        if fresh and self.loraplus_lr_ratio:
            # PEFT's LoRA+ param groups (A at the learning rate, B and 1-D parameters at ratio x, weight decay as the
            # recipe's) with the optimizer class and settings transformers would use; the warm-up splits them below.
            from peft.optimizers import create_loraplus_optimizer

            target = self.model if model is None else model
            optimizer_cls, kwargs = self.get_optimizer_cls_and_kwargs(self.args, target)
            self.optimizer = create_loraplus_optimizer(target, optimizer_cls, loraplus_lr_ratio=self.loraplus_lr_ratio,
                                                       loraplus_weight_decay=self.args.weight_decay, **kwargs)
            self.optimizer.param_groups[:] = [g for g in self.optimizer.param_groups if g["params"]]
        optimizer = super().create_optimizer(model)
        if fresh and self.warmup is not None:
            self.warmup.split_optimizer(optimizer, self.model if model is None else model)
        return optimizer

    def create_scheduler(self, num_training_steps: int, optimizer=None):
        if self.warmup is None or self.lr_scheduler is not None:
            return super().create_scheduler(num_training_steps, optimizer)
        import torch
        from transformers import get_scheduler

        optimizer = optimizer or self.optimizer

        def schedule(steps: int):
            # transformers' own schedule over the steps after the warm-up (same formulas as without one)
            dummy = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=1.0)
            return get_scheduler(self.args.lr_scheduler_type, optimizer=dummy,
                                 num_warmup_steps=self.args.get_warmup_steps(steps), num_training_steps=steps,
                                 scheduler_specific_kwargs=self.args.lr_scheduler_kwargs).lr_lambdas[0]

        self.lr_scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, self.warmup.lr_lambdas(optimizer, schedule, num_training_steps))
        self._created_lr_scheduler = True
        return self.lr_scheduler

    def _load_optimizer_and_scheduler(self, checkpoint) -> None:
        """Load as transformers does, with the parameters that have no optimizer state in `checkpoint` frozen.

        FSDP2 (torch.distributed.checkpoint) loads optimizer state strictly: every parameter that requires a
        gradient must have state in the checkpoint. The parameters the embedding warm-up keeps frozen have none
        until their first step after it, which torch's optimizers handle alike on every engine (no state until the
        first gradient)."""
        stateless = self.warmup.stateless_parameters(checkpoint) if self.warmup is not None and checkpoint else []
        flags = [p.requires_grad for p in stateless]
        for param in stateless:
            param.requires_grad_(False)
        try:
            super()._load_optimizer_and_scheduler(checkpoint)
        finally:
            for param, flag in zip(stateless, flags):
                param.requires_grad_(flag)

    def _save_checkpoint(self, model, trial) -> None:
        limit = self.args.save_total_limit
        self.args.save_total_limit = None  # rotate only after the new checkpoint is complete
        try:
            super()._save_checkpoint(model, trial)
        finally:
            self.args.save_total_limit = limit
        run_dir = Path(self._get_output_dir(trial=trial))
        folder = run_dir / f"checkpoint-{self.state.global_step}"
        if self.args.should_save and self.data_stream is not None:
            self.data_stream.save_state(folder, self.state.global_step * self.sequences_per_step)
        if self.args.should_save and self.warmup is not None:
            self.warmup.save(folder)
        if self.args.should_save:
            for part in self.checkpoint_parts:
                part.save(folder)
        if self.args.should_save and self.run_record is not None:
            write_run_file(folder, self.run_record)
        self.accelerator.wait_for_everyone()
        if self.args.should_save:
            mark_complete(folder, self.state.global_step)
            rotate(run_dir, limit)
        self.accelerator.wait_for_everyone()


def train_as_planned(trainer, plan, checkpoint: Path | None, logger, rank_zero: bool) -> float | None:
    """Run what `plan` (yunshan.training.resume.plan_run) decided: finish from a checkpoint at the last step without a
    step, else train (resuming from `checkpoint` when given, the resume and its allowed changes logged). Returns the
    training loss."""
    if plan.action == "finish":
        return load_final_checkpoint(trainer, checkpoint)
    if plan.action == "resume" and rank_zero:
        logger.write({"event": "resume", "step": plan.step, "checkpoint": checkpoint.name, "changes": plan.changes})
    return trainer.train(resume_from_checkpoint=str(checkpoint) if checkpoint else None).training_loss


def load_final_checkpoint(trainer, checkpoint: Path) -> float | None:
    """Load a checkpoint taken at the run's last step into `trainer` without a training step: its weights (adapters
    included) and Trainer state, which is what `train()` ends with. Returns the mean of the losses the run logged
    (its training loss as far as the log shows it), or None."""
    from transformers.trainer import TRAINER_STATE_NAME, TrainerState

    if trainer.is_deepspeed_enabled or trainer.is_fsdp_enabled:
        raise ValueError(f"{checkpoint}: the run is at its last step but its final save did not happen; finishing from "
                         "a DeepSpeed or FSDP checkpoint without training is not supported: load the checkpoint with "
                         "the same launch and save it, or start over with training.resume=never")
    trainer._load_from_checkpoint(str(checkpoint))
    trainer.state = TrainerState.load_from_json(str(Path(checkpoint) / TRAINER_STATE_NAME))
    losses = [row["loss"] for row in trainer.state.log_history if "loss" in row]
    return sum(losses) / len(losses) if losses else None
