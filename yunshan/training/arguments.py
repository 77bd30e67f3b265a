"""transformers' TrainingArguments from a recipe's `training` section, shared by `yunshan cpt` and `yunshan sft`."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

import torch

from yunshan.training.checkpoints import COMPLETE, latest_complete_checkpoint


def resolve_resume(resume: str, ckpt_dir: Path) -> Path | None:
    """The checkpoint `training.resume` names: `auto` = the newest complete one (or none), `never` = none, else a
    path that must hold a complete checkpoint."""
    if resume == "auto":
        return latest_complete_checkpoint(ckpt_dir)
    if resume == "never":
        return None
    path = Path(resume)
    if not (path / COMPLETE).is_file():
        raise FileNotFoundError(f"training.resume={resume}: not a complete checkpoint folder")
    return path


def training_arguments(train, out: Path, ckpt_dir: Path, max_steps: int, precision: str, rank_zero: bool,
                       **extra):
    """TrainingArguments for the recipe's `training` section; `extra` adds the stage's own fields."""
    from transformers import TrainingArguments

    if train.tensorboard:
        if importlib.util.find_spec("tensorboard") is None and importlib.util.find_spec("tensorboardX") is None:
            raise ValueError("training.tensorboard is true but TensorBoard is not installed: "
                             "pip install 'yunshan[tensorboard]' (or set training.tensorboard: false)")
        os.environ.setdefault("TENSORBOARD_LOGGING_DIR", str(out / "tensorboard"))
    scheduler, scheduler_kwargs = {
        "cosine": ("cosine_with_min_lr", {"min_lr_rate": train.min_lr_ratio}),
        "linear": ("linear", {}),
        "constant": ("constant_with_warmup", {}),
    }[train.lr_scheduler]
    return TrainingArguments(
        output_dir=str(ckpt_dir),
        max_steps=max_steps,
        per_device_train_batch_size=train.per_device_batch_size,
        gradient_accumulation_steps=train.gradient_accumulation_steps,
        learning_rate=train.learning_rate,
        lr_scheduler_type=scheduler,
        lr_scheduler_kwargs=scheduler_kwargs,
        warmup_steps=train.warmup_steps,
        adam_beta1=train.adam_beta1,
        adam_beta2=train.adam_beta2,
        adam_epsilon=train.adam_epsilon,
        weight_decay=train.weight_decay,
        max_grad_norm=train.max_grad_norm,
        activation_checkpointing=train.gradient_checkpointing,
        bf16=precision == "bf16",
        fp16=precision == "fp16",
        logging_steps=train.logging_steps,
        save_strategy="steps",
        save_steps=train.save_steps,
        save_total_limit=train.save_total_limit,
        seed=train.seed,
        report_to=["tensorboard"] if train.tensorboard else [],
        use_cpu=not torch.cuda.is_available(),
        deepspeed=train.deepspeed,
        fsdp=train.fsdp or "",
        fsdp_config=train.fsdp_config,
        disable_tqdm=not rank_zero,
        use_cache=False,  # also lets transformers see packed documents in restarting position ids
        **extra,
    )
