"""`yunshan sft`: one stage of instruction tuning on general and domain instructions shuffled together.

    yunshan sft --config recipes/pangu-pi-7b_sft_full.yaml
    yunshan sft --config RECIPE.yaml training.epochs=3 data.packing=true lora.enabled=true

Top to bottom: every source is read in its declared format and validated (yunshan.data.conversations), weighted
or capped and shuffled into ONE training set (paper section 6.3), rendered with the tokenizer's chat template
(yunshan's default when it has none, saved with the model) with labels on assistant turns only
(yunshan.data.chat), fitted to max_length without cutting a trained answer, optionally best-fit packed
(yunshan.data.packing), and trained with transformers' Trainer, logging the loss per source. Checkpoints, resume,
distributed launch (DDP, DeepSpeed ZeRO-2/3, FSDP2: yunshan.training.engines) and LoRA work as in `yunshan cpt`. At the end a few held-out prompts are answered (greedy) and
saved beside the model.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from yunshan.data.conversations import SftSourceArgs
from yunshan.training.arguments import LoraArgs, ModelArgs, TokenizerArgs, TrainArgs
from yunshan.arguments.field_rules import check_fields


@dataclass
class SftDataArgs:
    """The SFT mixture: instruction sources shuffled into one training set."""

    sources: list[SftSourceArgs] = field(default_factory=list, metadata={"help": "instruction sources"})
    max_length: int = field(default=2048, metadata={"range": ">= 2",
        "help": "tokens per sample (per packed row with packing)"})
    overlong: str = field(
        default="truncate_prompt",
        metadata={"help": "a sample longer than max_length: truncate_prompt (drop the oldest turns; never cut "
                          "inside a trained answer) or drop; both counted"})
    packing: bool = field(default=False, metadata={"help": "best-fit pack whole samples into max_length rows"})
    on_bad_record: str = field(default="fail", metadata={"help": "fail (file, line, field) or skip (count)"})
    exclude: str | None = field(default=None, metadata={"path": True,
        "help": "contamination list (contaminated.jsonl of yunshan data decontaminate): its samples are left out, "
                "each counted as dropped 'contaminated'"})
    seed: int = field(default=0, metadata={"range": "[0, 4294967295]",
        "help": "seed of sampling, shuffling and packing"})
    max_new_tokens: int = field(default=128, metadata={"range": ">= 1",
        "help": "tokens generated for each held-out prompt at the end"})

    def __post_init__(self):
        check_fields(self)
        if self.overlong not in ("truncate_prompt", "drop"):
            raise ValueError(f"data.overlong must be truncate_prompt or drop, got {self.overlong!r}")
        if self.on_bad_record not in ("fail", "skip"):
            raise ValueError(f"data.on_bad_record must be fail or skip, got {self.on_bad_record!r}")


@dataclass
class SftArgs:
    """Single-stage mixed SFT: `yunshan sft --config RECIPE.yaml [key=value ...]`."""

    model: ModelArgs = field(default_factory=lambda: ModelArgs(preset="tiny"))
    tokenizer: TokenizerArgs = field(default_factory=TokenizerArgs)
    data: SftDataArgs = field(default_factory=SftDataArgs)
    training: TrainArgs = field(default_factory=lambda: TrainArgs(output_dir="runs/sft", learning_rate=2e-5,
                                                                  weight_decay=0.0))
    lora: LoraArgs = field(default_factory=LoraArgs)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from yunshan.arguments.flags import add_recipe_flags

    add_recipe_flags(parser, "training.epochs=2", "validate recipe, data and model; no training")


def run(args: argparse.Namespace) -> int:
    from yunshan.arguments.flags import recipe_from_flags

    recipe = recipe_from_flags(SftArgs, args)
    result = run_sft(recipe, dry_run=args.dry_run)
    if args.dry_run:
        print(json.dumps(result, indent=2, ensure_ascii=False))
    return 0


class SftDataset(torch.utils.data.Dataset):
    """Tokenised (and optionally packed) samples; each row knows the source of every labelled token."""

    def __init__(self, rows: list[dict]):
        self.rows = rows

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, i):
        return self.rows[i]


def build_sft_data(recipe, tokenizer):
    """Read, mix, render, fit and (optionally) pack the recipe's instruction data.

    Returns (rows, held-out samples, the DataReport)."""
    from yunshan.io.artifacts import DataReport, SftSourceReport
    from yunshan.data.chat import encode_conversation, fit_to_length
    from yunshan.data.conversations import mix_sft_sources, nothing_left, read_sft_source
    from yunshan.data.packing import best_fit_pack

    data = recipe.data
    if not data.sources:
        raise ValueError("data.sources is empty: an SFT recipe needs at least one instruction source")
    names = [s.name for s in data.sources]
    if len(set(names)) != len(names):
        raise ValueError(f"sft source names must be unique, got {names}")
    from yunshan.data.decontamination import Exclusions

    drops = {s.name: {} for s in data.sources}
    exclude = Exclusions.load(data.exclude)
    per_source = {s.name: read_sft_source(s, data.on_bad_record, drops[s.name], exclude) for s in data.sources}
    read_counts = {name: len(samples) for name, samples in per_source.items()}
    read_drops = {name: dict(d) for name, d in drops.items()}
    train, heldout = mix_sft_sources(per_source, data.sources, data.seed)
    source_index = {name: i for i, name in enumerate(names)}
    samples = []
    end_markers = set()
    for sample in train:
        enc = encode_conversation(tokenizer, sample.messages)
        end_markers |= enc.end_markers
        fitted, reason = fit_to_length(enc, data.max_length, data.overlong)
        if reason:
            drops[sample.source][reason] = drops[sample.source].get(reason, 0) + 1
        if fitted is None:
            continue
        src = source_index[sample.source]
        samples.append({
            "input_ids": fitted.input_ids,
            "labels": fitted.labels,
            "source_ids": [src if l != -100 else -1 for l in fitted.labels],
            "source": sample.source,
        })
    if not samples:
        raise ValueError(nothing_left("SFT", "sample", data.sources, read_counts, read_drops, train, heldout,
                                      drops, data.max_length))
    composition = {name: {"samples": 0, "tokens": 0, "trained_tokens": 0} for name in names}
    for s in samples:
        c = composition[s["source"]]
        c["samples"] += 1
        c["tokens"] += len(s["input_ids"])
        c["trained_tokens"] += sum(1 for l in s["labels"] if l != -100)
    if data.packing:
        bins = best_fit_pack([len(s["input_ids"]) for s in samples], data.max_length)
        rows = []
        for b in bins:
            row = {"input_ids": [], "labels": [], "source_ids": [], "position_ids": []}
            for i in b:
                s = samples[i]
                row["input_ids"] += s["input_ids"]
                row["labels"] += s["labels"]
                row["source_ids"] += s["source_ids"]
                row["position_ids"] += list(range(len(s["input_ids"])))  # restart per sample
            rows.append(row)
        import random

        random.Random(f"sft-pack/{data.seed}").shuffle(rows)
    else:
        rows = [{k: s[k] for k in ("input_ids", "labels", "source_ids")} for s in samples]
    real_tokens = sum(len(r["input_ids"]) for r in rows)
    report = DataReport(
        kind="sft", seed=data.seed, samples=len(samples), rows=len(rows), packing=data.packing,
        real_tokens=real_tokens, heldout_prompts=len(heldout), end_of_turn_ids=sorted(end_markers),
        sources={name: SftSourceReport(read=read_counts[name], **composition[name], dropped=drops[name],
                                       share_of_samples=composition[name]["samples"] / len(samples))
                 for name in names},
        exclude={"list": data.exclude, "records": len(exclude.digests)} if data.exclude else None)
    return rows, heldout, report


def make_collator(pad_id: int, packing: bool, multiple: int | None = None):
    """Pads a batch to its longest row: input_ids with pad, labels and source ids with -100 / -1. Unpacked rows
    get an attention mask; packed rows get restarting position ids instead (padding forms its own segment)."""

    def collate(rows: list[dict]) -> dict:
        width = max(len(r["input_ids"]) for r in rows)
        if multiple:
            width = math.ceil(width / multiple) * multiple
        batch = {k: torch.full((len(rows), width), v, dtype=torch.long)
                 for k, v in (("input_ids", pad_id), ("labels", -100), ("source_ids", -1))}
        if packing:
            batch["position_ids"] = torch.zeros((len(rows), width), dtype=torch.long)
        else:
            batch["attention_mask"] = torch.zeros((len(rows), width), dtype=torch.long)
        for i, r in enumerate(rows):
            n = len(r["input_ids"])
            batch["input_ids"][i, :n] = torch.tensor(r["input_ids"])
            batch["labels"][i, :n] = torch.tensor(r["labels"])
            batch["source_ids"][i, :n] = torch.tensor(r["source_ids"])
            if packing:
                batch["position_ids"][i, :n] = torch.tensor(r["position_ids"])
                batch["position_ids"][i, n:] = torch.arange(width - n)
            else:
                batch["attention_mask"][i, :n] = 1
        return batch

    return collate


def make_trainer_class():
    from yunshan.training.checkpoints import YunshanTrainer

    class SftTrainer(YunshanTrainer):
        """Logs the loss per source next to the overall loss (each token's loss as the chunked loss computed it, or
        recomputed without gradient from the logits the model produced under the plain loss)."""

        def __init__(self, *args, source_names=(), **kwargs):
            super().__init__(*args, **kwargs)
            self.source_names = list(source_names)
            self._source_sums = torch.zeros(len(self.source_names), dtype=torch.float64)
            self._source_counts = torch.zeros(len(self.source_names), dtype=torch.float64)

        def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
            source_ids = inputs.pop("source_ids")
            loss, outputs = super().compute_loss(model, inputs, return_outputs=True,
                                                 num_items_in_batch=num_items_in_batch)
            with torch.no_grad():
                src = source_ids[:, 1:]
                if self.token_losses is not None:  # the chunked loss: no logits were made
                    token_loss = self.token_losses[:, :-1].reshape(-1)
                else:
                    logits = outputs.logits[:, :-1].float()
                    target = inputs["labels"][:, 1:]
                    token_loss = torch.nn.functional.cross_entropy(
                        logits.reshape(-1, logits.shape[-1]), target.reshape(-1), ignore_index=-100,
                        reduction="none")
                src = src.reshape(-1).cpu()
                token_loss = token_loss.double().cpu()
                for i in range(len(self.source_names)):
                    sel = src == i
                    self._source_sums[i] += token_loss[sel].sum()
                    self._source_counts[i] += sel.sum()
            return (loss, outputs) if return_outputs else loss

        def log(self, logs, start_time=None):
            if "loss" in logs and self._source_counts.sum() > 0:
                sums, counts = self._source_sums.clone(), self._source_counts.clone()
                if self.accelerator.num_processes > 1:
                    sums = self.accelerator.reduce(sums.to(self.accelerator.device), "sum").cpu()
                    counts = self.accelerator.reduce(counts.to(self.accelerator.device), "sum").cpu()
                for name, s, c in zip(self.source_names, sums.tolist(), counts.tolist()):
                    if c > 0:
                        logs[f"loss_{name}"] = round(s / c, 4)
                self._source_sums.zero_()
                self._source_counts.zero_()
            return super().log(logs, start_time)

    return SftTrainer


@torch.no_grad()
def generate_answers(model, tokenizer, heldout, max_new_tokens: int) -> list[dict]:
    """Greedy answers to held-out prompts (the conversation up to its last assistant turn), with a progress bar."""
    from transformers import StoppingCriteriaList

    from yunshan.data.chat import render
    from yunshan.io.progress import TokenCount, progress_bar

    model.eval()
    results = []
    device = next(model.parameters()).device
    with progress_bar(len(heldout), "held-out answers", unit="prompt") as bar:
        for sample in heldout:
            messages = sample.messages[:-1]
            prompt = render(tokenizer, messages, add_generation_prompt=True)
            ids = tokenizer(prompt, add_special_tokens=False, return_tensors="pt").to(device)
            # synced_gpus off: the model is whole in this one process (under ZeRO-3 transformers would otherwise wait
            # for the other processes at every token)
            out = model.generate(**ids, max_new_tokens=max_new_tokens, do_sample=False, synced_gpus=False,
                                 stopping_criteria=StoppingCriteriaList([TokenCount(bar, max_new_tokens)]))
            answer = tokenizer.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True)
            results.append({"source": sample.source, "prompt": messages[-1]["content"],
                            "reference": sample.messages[-1]["content"], "generated": answer.strip()})
            bar.update(1)
    return results


def sft_steps(train: TrainArgs, rows: int, rows_per_step: int) -> tuple[int, str]:
    """The run's optimizer steps and where they come from. One rule, as transformers' Trainer has it: a given
    training.max_steps wins; else training.epochs passes over the rows; else the default."""
    from yunshan.training.arguments import DEFAULT_MAX_STEPS

    from_epochs = max(1, math.ceil(train.epochs * rows / rows_per_step)) if train.epochs is not None else None
    if train.max_steps is not None:
        if from_epochs is None:
            return train.max_steps, "training.max_steps"
        return train.max_steps, (f"training.max_steps, which wins over training.epochs {train.epochs:g} "
                                 f"({from_epochs} steps)")
    if from_epochs is not None:
        return from_epochs, f"training.epochs {train.epochs:g} over {rows} rows of {rows_per_step} per step"
    return DEFAULT_MAX_STEPS, "the default training.max_steps"


def run_sft(recipe, dry_run: bool = False, callbacks: list | None = None) -> dict:
    """Run single-stage mixed SFT as the recipe says; returns a summary. `callbacks`: extra TrainerCallbacks."""
    from yunshan.io.folder_lock import folder_lock
    from yunshan.io.folders import check_output_folder

    if dry_run:
        return _run_sft(recipe, dry_run, callbacks)  # reads only: no lock
    out = check_output_folder(recipe.training.output_dir, "training.output_dir")  # before hours of work
    # A second run on this folder stops here, before anything in it is touched (yunshan.io.folder_lock).
    with folder_lock(out, "training.output_dir"):
        return _run_sft(recipe, dry_run, callbacks)


@dataclass
class SftRun:
    """Everything set up before the first step."""

    recipe: SftArgs
    out: Path
    ckpt_dir: Path
    rank_zero: bool
    rows_per_step: int
    max_steps: int
    plan: object  # yunshan.training.resume.RunPlan
    resume_from: Path | None
    tokenizer: object
    rows: list
    heldout: list
    report: object  # yunshan.io.artifacts.DataReport, filled in as the run goes
    targs: object  # transformers.TrainingArguments
    model: object
    chunked_loss: object | None


def _set_up(recipe: SftArgs, dry_run: bool) -> SftRun | dict:
    """The run's phases before the first step (yunshan.training.setup): plan the run, resolve the folders and load
    the tokenizers (a chat template added when there is none), read and render the data, describe (a dry run ends
    there), load the model, grow its rows, apply LoRA and prepare the output folder. Returns the summary instead for
    a dry run or a finished run."""
    from accelerate import PartialState

    from yunshan.training.arguments import training_arguments
    from yunshan.training.models import (
        describe_model, grow_embeddings, load_model, resolve_sources, trainable_summary, training_loss)
    from yunshan.training.resume import prepare_outputs, resume_line, settle
    from yunshan.training.setup import load_tokenizers, open_folder, start_run, with_lora

    run = start_run(recipe, "sft", dry_run, safe=("data.max_new_tokens",), world=PartialState().num_processes)
    if isinstance(run, dict):
        return run  # finished: nothing is touched, not even a Hub id
    # Hub ids become folders of the HF cache (downloaded unless HF_HUB_OFFLINE=1; a dry run fetches no weights).
    model_args, tok_path, base_path = resolve_sources(recipe, weights=not dry_run)
    tokens = load_tokenizers(recipe, tok_path, base_path, chat=True)
    rows, heldout, report = build_sft_data(recipe, tokens.tokenizer)
    max_steps, steps_from = sft_steps(recipe.training, len(rows), run.per_step)
    if recipe.data.packing:
        report.non_padding_share = report.real_tokens / (len(rows) * recipe.data.max_length)
    if dry_run:  # no weights are loaded
        return {**describe_model(model_args, len(tokens.tokenizer)), "rows": len(rows), "samples": report.samples,
                "max_steps": max_steps, "steps_from": steps_from,
                "run": settle(run.plan, max_steps, run.out, "sft").action,
                "chat_template": "yunshan default" if tokens.added_template else "tokenizer's own",
                "sources": report.to_json()["sources"], "precision": run.precision}
    run = open_folder(run, max_steps)
    if isinstance(run, dict):
        return run
    # Before the model: under a DeepSpeed ZeRO-3 launch, TrainingArguments switch on zero.Init, so the model loads
    # partitioned across the processes (yunshan.training.engines).
    targs = training_arguments(
        recipe.training, run.out, run.ckpt_dir, max_steps, run.precision, run.rank_zero,
        data_seed=recipe.data.seed,
        remove_unused_columns=False,  # source_ids feed the per-source losses
        neftune_noise_alpha=recipe.training.neftune_noise_alpha,
    )
    model = load_model(model_args, vocab_size=len(tokens.tokenizer))
    new_ids = grow_embeddings(model, tokens.base, tokens.tokenizer, init=recipe.tokenizer.new_row_init)
    report.precision = {"value": run.precision, "reason": run.precision_reason}
    model = with_lora(model, recipe, new_ids)
    chunked_loss, report.loss = training_loss(model, recipe.training)
    if run.rank_zero:
        prepare_outputs(recipe, run.plan, run.out, run.ckpt_dir, model, recipe.lora)
        if run.plan.action != "fresh":
            print(resume_line(run.plan, run.resume_from), flush=True)
        print(f"model: {type(model).__name__}, {trainable_summary(model)}; {report.samples} samples in "
              f"{len(rows)} rows; {max_steps} steps ({steps_from}); precision {run.precision} "
              f"({run.precision_reason}); chat template: "
              f"{'yunshan default' if tokens.added_template else 'the tokenizer own'}; {report.loss['reason']}",
              flush=True)
    return SftRun(recipe=recipe, out=run.out, ckpt_dir=run.ckpt_dir, rank_zero=run.rank_zero,
                  rows_per_step=run.per_step, max_steps=max_steps, plan=run.plan, resume_from=run.resume_from,
                  tokenizer=tokens.tokenizer, rows=rows, heldout=heldout, report=report, targs=targs, model=model,
                  chunked_loss=chunked_loss)


def _run_sft(recipe, dry_run: bool, callbacks: list | None) -> dict:
    from yunshan.io.artifacts import FinalOutputs
    from yunshan.training.checkpoints import final_save, train_as_planned
    from yunshan.training.engines import engine_of, final_model
    from yunshan.training.models import save_adapter
    from yunshan.training.monitoring import JsonlLogger, plot_curves
    from yunshan.training.resume import run_record
    from yunshan.training.tracking import attach as attach_trackers

    started = time.time()
    run = _set_up(recipe, dry_run)
    if not isinstance(run, SftRun):
        return run  # a dry run's summary, or a run that was already finished
    out, rank_zero, ckpt_dir, plan, resume_from = run.out, run.rank_zero, run.ckpt_dir, run.plan, run.resume_from
    rows, heldout, report, model, tokenizer = run.rows, run.heldout, run.report, run.model, run.tokenizer
    rows_per_step, max_steps, real = run.rows_per_step, run.max_steps, report.real_tokens
    tokens_per_step = round(real / max(len(rows), 1) * rows_per_step)
    logger = JsonlLogger(out / "log.jsonl", tokens_per_step, main_process=rank_zero)
    trainer = make_trainer_class()(
        model=model, args=run.targs, train_dataset=SftDataset(rows),
        data_collator=make_collator(tokenizer.pad_token_id, recipe.data.packing),
        callbacks=[logger, *(callbacks or [])], source_names=[s.name for s in recipe.data.sources],
        run_record=run_record(recipe, "sft", max_steps, rows_per_step, plan.resumes),
        loraplus_lr_ratio=recipe.lora.loraplus_lr_ratio if recipe.lora.enabled else None,
        chunked_loss=run.chunked_loss, keep_token_losses=True,  # the per-source losses
    )
    attach_trackers(trainer, recipe, out)
    engine = engine_of(trainer.accelerator, model)
    train_loss = train_as_planned(trainer, plan, resume_from, logger, rank_zero)
    summary = {"output_dir": str(out), "steps": trainer.state.global_step, "train_loss": train_loss}
    with final_save(out):  # a full disk: one line, not a SafetensorError traceback
        final = final_model(trainer)  # every process takes part in gathering a sharded model
        if rank_zero:
            report.engine = engine.to_dict()
            if recipe.lora.enabled:
                save_adapter(final, recipe.lora, out / "adapter", ckpt_dir)
                final = final.merge_and_unload()
            final.config.use_cache = True
            # Generation stops where training taught turns to end (EOS or the template's end-of-turn token).
            stop_ids = sorted({tokenizer.eos_token_id, *report.end_of_turn_ids})
            final.generation_config.eos_token_id = stop_ids if len(stop_ids) > 1 else stop_ids[0]
            final.generation_config.pad_token_id = tokenizer.pad_token_id
            final.save_pretrained(out)
            tokenizer.save_pretrained(out)  # with the chat template used in training
            generations = generate_answers(final, tokenizer, heldout, recipe.data.max_new_tokens)
            with open(out / "generations.jsonl", "w", encoding="utf-8") as f:
                for g in generations:
                    f.write(json.dumps(g, ensure_ascii=False) + "\n")
            for g in generations:
                print(f"[{g['source']}] {g['prompt'][:80]!r}\n  -> {g['generated'][:200]!r}\n  (reference: "
                      f"{g['reference'][:120]!r})", flush=True)
            report.steps = trainer.state.global_step
            report.resumes = plan.resumes or None
            plot_curves(out / "log.jsonl", out / "curves.png", f"yunshan sft: {out.name}")
            report.write(out)
            # Last: the marker that the folder holds this run's finished outputs (yunshan.training.resume).
            FinalOutputs.of(out, "sft", trainer.state.global_step).write(out)
            summary.update({"data_report": report, "generations": generations, "seconds": time.time() - started})
            print(f"saved the model, tokenizer (with chat template), recipe.yaml, data_report.json, log.jsonl, "
                  f"generations.jsonl and curves.png to {out}", flush=True)
    trainer.accelerator.wait_for_everyone()
    return summary
