"""The set-up of a training stage, phase by phase: what `yunshan cpt`, `sft` and `pref` do before their first step.

Each stage's `_set_up` is these phases in this order, each one call into the module that owns it (the shape of
litgpt's setup and torchtune's recipe `setup`); the stage adds only its own data and what it alone does to the model:

    run = start_run(recipe, "cpt", dry_run)                    # the run: its folder checked, precision, seed,
                                                               #   what a rerun does (resume.plan_run), the heap
                                                               #   capped (heap.py)
    model_args, tok_path, base_path = resolve_sources(recipe)  # the folders: Hub ids resolved (models.py)
    tokens = load_tokenizers(recipe, tok_path, base_path)      # the run's tokenizer, the base's, the ids it adds
    ...                                                        # the stage's data
    describe_model(model_args, len(tokens.tokenizer))          # a dry run ends here, no weights read (models.py)
    ...                                                        # cpt: the new-token mode (embedding_warmup.py)
    run = open_folder(run, total_steps)                        # the plan settled, the finished marker removed
    targs = training_arguments(...)                            # before the model: ZeRO-3's zero.Init (arguments.py)
    model = load_model(model_args, len(tokens.tokenizer))      # (models.py)
    new_ids = grow_embeddings(model, tokens.base, ...)         # the new vocabulary rows (models.py); cpt measures
                                                               #   the extension's cost around this call
    model = with_lora(model, recipe, new_ids)                  # LoRA, the new rows trainable, if lora.enabled

A phase that finds the run finished returns its summary (a dict) instead; the stage returns it as it is.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path


@dataclass
class RunStart:
    """What a stage knows before it reads any data or model: where it writes, how, and what a rerun does."""

    kind: str  # "cpt", "sft" or "preference" (the run file's and the resume rules' name of the stage)
    out: Path
    ckpt_dir: Path
    rank_zero: bool
    precision: str  # float32 or bfloat16 (yunshan.loading.precision)
    precision_reason: str
    per_step: int  # sequences (cpt) or rows (sft, pref) per optimizer step, over every process
    resume_from: Path | None
    plan: object  # yunshan.training.resume.RunPlan


def start_run(recipe, kind: str, dry_run: bool, safe: tuple[str, ...] | Callable = (),
              world: int | None = None) -> RunStart | dict:
    """The run: the output folder checked (before hours of work, not at the first save), the precision chosen, the
    seed set, the checkpoint `training.resume` names found and the run planned: fresh, resumed, finishing or done.

    Args:
        recipe: the stage's arguments (CptArgs, SftArgs, PrefArgs).
        kind: "cpt", "sft" or "preference".
        dry_run: a dry run plans even a finished run (it reports, touches nothing).
        safe: the recipe keys a resume may change, or a function of the checkpoint (None: none) that gives them.
        world: the number of processes (default: WORLD_SIZE, 1 when unset).

    Returns the finished run's summary instead when it is done and this is no dry run: a finished run touches
    nothing, not even a Hub id."""
    from transformers import set_seed

    from yunshan.io.folders import check_output_folder
    from yunshan.loading.precision import choose_precision
    from yunshan.training.arguments import resolve_resume
    from yunshan.training.resume import finished_summary, plan_run

    train = recipe.training
    out = check_output_folder(train.output_dir, "training.output_dir")
    rank_zero = int(os.environ.get("RANK", "0")) == 0
    world = int(os.environ.get("WORLD_SIZE", "1")) if world is None else world
    precision, precision_reason = choose_precision(train.precision)
    set_seed(train.seed)
    per_step = train.per_device_batch_size * train.gradient_accumulation_steps * world
    ckpt_dir = out / "checkpoints"
    resume_from = resolve_resume(train.resume, ckpt_dir)
    plan = plan_run(recipe, kind, out, resume_from, per_step, safe(resume_from) if callable(safe) else safe)
    if plan.action == "done" and not dry_run:
        return finished_summary(out, plan)
    if not dry_run:
        from yunshan.training.heap import cap_heap_growth

        cap_heap_growth()  # else glibc keeps what each step frees and the resident set climbs (training/heap.py)
        _tell_deepspeed_the_device()
    return RunStart(kind=kind, out=out, ckpt_dir=ckpt_dir, rank_zero=rank_zero, precision=precision,
                    precision_reason=precision_reason, per_step=per_step, resume_from=resume_from, plan=plan)


def _tell_deepspeed_the_device() -> None:
    """Without a CUDA device DeepSpeed (which transformers imports when it is installed) guesses the CPU and warns
    "Setting accelerator to CPU. If you have GPU or other accelerator, we were unable to detect it." on every run:
    the same choice, made here from torch's answer, is given to it (DS_ACCELERATOR) so a CPU run prints nothing.
    A value in the environment is left alone."""
    if "DS_ACCELERATOR" in os.environ:
        return
    import torch

    if not torch.cuda.is_available():
        os.environ["DS_ACCELERATOR"] = "cpu"


@dataclass
class Tokenizers:
    """The tokenizers of a run: its own, the base model's (None when the model's own rows cover it) and the ids the
    extension adds (the rows `grow_embeddings` will give the model, known before it is loaded)."""

    tokenizer: object
    base: object | None
    new_ids: list[int]
    added_template: bool = False  # a chat stage gave the tokenizer yunshan's default chat template


def load_tokenizers(recipe, tok_path, base_path, chat: bool = False) -> Tokenizers:
    """The tokenizers from the folders `resolve_sources` gave; a chat stage's (sft, pref) with a chat template and a
    pad token (yunshan.training.models.load_chat_tokenizers)."""
    from yunshan.training.models import load_chat_tokenizers, load_tokenizer, planned_new_ids

    if chat:
        tokenizer, added_template, base = load_chat_tokenizers(recipe, tok_path, base_path)
    else:
        tokenizer, added_template = load_tokenizer(tok_path, recipe.model.trust_remote_code), False
        base = load_tokenizer(base_path, recipe.model.trust_remote_code) if base_path else None
    return Tokenizers(tokenizer, base, planned_new_ids(base, tokenizer), added_template)


def open_folder(run: RunStart, total_steps: int) -> RunStart | dict:
    """The plan settled on the run's real total steps (a checkpoint at the last step is finished: its summary is
    returned), then the first change to the folder, on rank zero: its finished marker goes, so that it no longer
    claims a finished run (yunshan.training.resume.reopen)."""
    from yunshan.training.resume import finished_summary, reopen, settle

    plan = settle(run.plan, total_steps, run.out, run.kind)
    if plan.action == "done":
        return finished_summary(run.out, plan)
    if run.rank_zero:
        reopen(run.out)
    return dataclasses.replace(run, plan=plan)


def with_lora(model, recipe, new_ids: list[int]):
    """The model wrapped with LoRA when `lora.enabled` (the new vocabulary rows trainable as `lora` says), else as
    it is (yunshan.training.models.apply_lora)."""
    from yunshan.training.models import apply_lora

    if not recipe.lora.enabled:
        return model
    return apply_lora(model, recipe.lora, new_ids, seed=recipe.training.seed)
