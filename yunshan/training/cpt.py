"""`yunshan cpt`: continual pretraining on domain corpora mixed with replayed general data, in tokens.

    yunshan cpt --config recipes/pangu-pi-7b_cpt_full.yaml
    yunshan cpt --config recipes/pangu-pi-7b_cpt_full.yaml training.max_steps=100 data.seq_len=1024
    accelerate launch --config_file recipes/accelerate/ddp.yaml -m yunshan.cli cpt --config RECIPE.yaml

The data path, top to bottom: each source is read and validated (yunshan.data.sources), tokenised in blocks and
mixed by token budget into packed sequences (yunshan.data.mixing, .packing), served to transformers' Trainer by a
dataset that knows its exact position at every step (yunshan.data.stream). Checkpoints hold that position and
are marked complete before old ones are deleted (yunshan.training.checkpoints); `resume: auto` continues from the
newest complete one with exactly the sequences an uninterrupted run would have seen. The output folder holds the
model (merged if LoRA), tokenizer, resolved recipe, data report, JSONL log and a PNG of the curves. Any launch config
of recipes/accelerate/ works (DDP, DeepSpeed ZeRO-2/3, FSDP2); what sharded weights ask of the code outside the
training step is in yunshan.training.engines.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from yunshan.data.sources import SourceArgs
from yunshan.training.arguments import LoraArgs, ModelArgs, TokenizerArgs, TrainArgs
from yunshan.training.embedding_warmup import EmbeddingWarmupArgs
from yunshan.arguments.field_rules import check_fields


@dataclass
class CptDataArgs:
    """The mixture: sources with token weights, packed into fixed-length sequences."""

    sources: list[SourceArgs] = field(default_factory=list, metadata={"help": "corpus sources with weights"})
    seq_len: int = field(default=2048, metadata={"range": ">= 8", "help": "tokens per packed training sequence"})
    document_mask: bool = field(
        default=False, metadata={"help": "restart positions per document and keep attention inside documents"})
    chunk_tokens: int | None = field(
        default=None, metadata={"range": ">= 1",
        "help": "longest piece taken from one source at a time (default seq_len / 4); "
                                        "the token ratio holds to within 2 * chunk_tokens over any stretch"})
    block_size: int = field(default=1024, metadata={"range": ">= 1",
        "help": "documents read, tokenised and shuffled together"})
    on_bad_record: str = field(default="fail", metadata={"help": "fail (stop with file, line, field) or skip (count)"})
    dedup: bool = field(default=False, metadata={"help": "drop exact duplicate documents (content hash), counted"})
    exclude: str | None = field(default=None, metadata={"path": True,
        "help": "contamination list (contaminated.jsonl of yunshan data decontaminate): its documents are left out, "
                "each counted as dropped 'contaminated'"})
    add_bos: str = field(default="auto", metadata={"help": "BOS before each document: auto (if the tokenizer "
                                                           "adds one by default), true or false"})
    seed: int = field(default=0, metadata={"range": "[0, 4294967295]",
        "help": "seed of the data order (shuffles, mixing)"})

    def __post_init__(self):
        check_fields(self)
        if self.on_bad_record not in ("fail", "skip"):
            raise ValueError(f"data.on_bad_record must be fail or skip, got {self.on_bad_record!r}")
        if self.add_bos not in ("auto", "true", "false", True, False):
            raise ValueError(f"data.add_bos must be auto, true or false, got {self.add_bos!r}")


@dataclass
class MonitorArgs:
    """The forgetting monitor: held-out bits per character during training."""

    every_steps: int = field(default=100, metadata={"range": ">= 0",
        "help": "measure every N steps (0 = only at start and end)"})
    general: list[str] = field(default_factory=list, metadata={"path": True, "help": "held-out general text files"})
    domain: list[str] = field(default_factory=list, metadata={"path": True, "help": "held-out domain text files"})
    max_chars: int = field(default=20000, metadata={"range": ">= 1",
        "help": "characters of each held-out set to score"})
    max_length: int | None = field(default=None, metadata={"range": ">= 2",
        "help": "scoring window (default data.seq_len)"})

    def __post_init__(self):
        check_fields(self)

@dataclass
class CptArgs:
    """Continual pretraining: `yunshan cpt --config RECIPE.yaml [key=value ...]`."""

    model: ModelArgs = field(default_factory=lambda: ModelArgs(preset="tiny"))
    tokenizer: TokenizerArgs = field(default_factory=TokenizerArgs)
    data: CptDataArgs = field(default_factory=CptDataArgs)
    training: TrainArgs = field(default_factory=TrainArgs)
    lora: LoraArgs = field(default_factory=LoraArgs)
    monitor: MonitorArgs = field(default_factory=MonitorArgs)
    warmup: EmbeddingWarmupArgs = field(default_factory=EmbeddingWarmupArgs)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from yunshan.arguments.flags import add_recipe_flags

    add_recipe_flags(parser, "training.max_steps=100", "validate the recipe, sources and model; no training")


def run(args: argparse.Namespace) -> int:
    from yunshan.arguments.flags import recipe_from_flags

    recipe = recipe_from_flags(CptArgs, args)
    result = run_cpt(recipe, dry_run=args.dry_run)
    if args.dry_run:
        print(json.dumps(result, indent=2))
    return 0


def make_tokenize(tokenizer, add_bos: str | bool):
    """A function texts -> token id lists (BOS per config, EOS after every document)."""
    bos = tokenizer.bos_token_id
    if add_bos in ("auto",):
        probe = tokenizer("a")["input_ids"]
        add_bos = bos is not None and len(probe) > 0 and probe[0] == bos
    else:
        add_bos = add_bos in (True, "true")
    if add_bos and bos is None:
        raise ValueError("data.add_bos is true but the tokenizer has no bos_token")
    eos = tokenizer.eos_token_id
    head = [bos] if add_bos else []

    def tokenize(texts: list[str]) -> list[list[int]]:
        ids = tokenizer(texts, add_special_tokens=False, return_attention_mask=False)["input_ids"]
        return [head + x + [eos] for x in ids]

    return tokenize


def build_stream(recipe, tokenizer):
    """The packed, mixed training stream of a recipe (also used by benchmarks and tests)."""
    from yunshan.data.mixing import SourceStream, TokenBudgetMixer
    from yunshan.data.stream import PackedStreamDataset

    data = recipe.data
    if not data.sources:
        raise ValueError("data.sources is empty: a continual-pretraining recipe needs at least one source")
    from yunshan.data.decontamination import Exclusions

    tokenize = make_tokenize(tokenizer, data.add_bos)
    exclude = Exclusions.load(data.exclude)
    streams = [
        SourceStream(source, tokenize, seed=data.seed, block_size=data.block_size,
                     on_bad_record=data.on_bad_record, dedup=data.dedup, exclude=exclude)
        for source in data.sources
    ]
    mixer = TokenBudgetMixer(streams, data.seq_len, data.chunk_tokens, data.document_mask)
    return PackedStreamDataset(mixer, data.document_mask)


def run_cpt(recipe, dry_run: bool = False, callbacks: list | None = None) -> dict:
    """Run continual pretraining as the recipe says; returns a summary (paths and figures).

    Three steps: set up (plan the run, load and grow the model, fit and warm up the new rows' start), train (the
    Trainer with the monitor, the embedding warm-up and the trackers), save (model, tokenizer, data report, curves).
    `callbacks`: extra transformers TrainerCallbacks (benchmarks time steps with one)."""
    from yunshan.io.folder_lock import folder_lock
    from yunshan.io.folders import check_output_folder
    from yunshan.training.checkpoints import final_save

    started = time.time()
    if dry_run:
        return _set_up(recipe, dry_run)  # reads only: no lock
    out = check_output_folder(recipe.training.output_dir, "training.output_dir")  # before hours of work
    # A second run on this folder stops here, before anything in it is touched (yunshan.io.folder_lock).
    with folder_lock(out, "training.output_dir"):
        run = _set_up(recipe)
        if not isinstance(run, CptRun):
            return run  # a run that was already finished
        trained = _train(run, callbacks)
        with final_save(run.out):  # a full disk: one line, not a SafetensorError traceback
            return _save(run, trained, started)


@dataclass
class CptRun:
    """Everything set up before the first step: the plan, the data stream, the model as it starts training."""

    recipe: CptArgs
    out: Path
    ckpt_dir: Path
    rank_zero: bool
    precision: str
    precision_reason: str
    sequences_per_step: int
    tokens_per_step: int
    total_steps: int
    warmup_on: bool  # the embedding warm-up runs (new rows, trainable)
    warmup_steps: int
    plan: object  # yunshan.training.resume.RunPlan
    resume_from: Path | None
    tokenizer: object
    stream: object  # yunshan.data.stream.PackedStreamDataset
    heldout: dict
    monitor_length: int
    targs: object  # transformers.TrainingArguments
    model: object
    new_ids: list[int]
    cost: dict  # the extension's step-0 cost (base model, new rows as initialised), when measured
    fit_report: dict | None
    distill_report: dict | None = None
    chunked_loss: object | None = None  # yunshan.training.chunked_loss.ChunkedLoss (training.loss), None: plain
    loss_report: dict | None = None


@dataclass
class CptTraining:
    """What training leaves for the save: the Trainer (its state and model), the engine, the warm-up controller and
    the monitor, and the training loss."""

    trainer: object
    engine: object
    controller: object | None
    monitor: object | None
    train_loss: float | None


def _set_up(recipe: CptArgs, dry_run: bool = False) -> CptRun | dict:
    """The run's phases before the first step (yunshan.training.setup has the ones every stage shares): plan the
    run, resolve the folders and load the tokenizers, read the data, describe (a dry run ends there), choose the
    new-token mode, load the model, grow its rows measuring the extension's cost, give the new rows their start,
    apply LoRA and prepare the output folder. Returns the summary instead for a dry run or a finished run."""
    from yunshan.training.arguments import training_arguments
    from yunshan.training.embedding_warmup import choose_warmup
    from yunshan.training.models import load_model, resolve_sources, training_loss
    from yunshan.training.monitoring import read_heldout_sets
    from yunshan.training.setup import load_tokenizers, open_folder, start_run, with_lora

    run = start_run(recipe, "cpt", dry_run, safe=_changes_a_resume_accepts)
    if isinstance(run, dict):
        return run  # finished: nothing is touched, not even a Hub id
    # Hub ids become folders of the HF cache (downloaded unless HF_HUB_OFFLINE=1; a dry run fetches no weights).
    model_args, tok_path, base_path = resolve_sources(recipe, weights=not dry_run)
    tokens = load_tokenizers(recipe, tok_path, base_path)
    tokens_per_step = run.per_step * recipe.data.seq_len
    budget = _check_budget(recipe, tokens, tokens_per_step, run.rank_zero, dry_run)
    stream = build_stream(recipe, tokens.tokenizer)
    heldout = read_heldout_sets(recipe.monitor)
    if dry_run:  # no weights are loaded: the config is read and the parameters counted on the meta device
        return _dry_run_summary(recipe, run, model_args, tokens, stream, heldout, budget, tokens_per_step)
    total_steps = recipe.training.total_steps()  # the budget: the embedding warm-up is counted inside it
    warmup_on, warmup_steps = choose_warmup(recipe.warmup, recipe.lora, tokens.new_ids, total_steps)
    run = open_folder(run, total_steps)
    if isinstance(run, dict):
        return run
    # Before the model: under a DeepSpeed ZeRO-3 launch, TrainingArguments switch on zero.Init, so the model loads
    # partitioned across the processes (yunshan.training.engines says what that asks of the code below).
    targs = training_arguments(
        recipe.training, run.out, run.ckpt_dir, total_steps, run.precision, run.rank_zero,
        ignore_data_skip=True,  # the stream resumes from its saved position instead of re-reading k steps
        dataloader_num_workers=0,  # the stream tracks its position in this process
    )
    model = load_model(model_args, vocab_size=len(tokens.tokenizer))
    monitor_length = recipe.monitor.max_length or recipe.data.seq_len
    new_ids, cost = _grow_measuring_cost(model, tokens, recipe, run, heldout, monitor_length)
    fit_report, distill_report = _start_new_rows(model, new_ids, tokens, recipe, run, warmup_on)
    model = with_lora(model, recipe, new_ids)
    chunked_loss, loss_report = training_loss(model, recipe.training)
    _prepare_outputs(recipe, run, model, stream, tokens_per_step, total_steps, warmup_steps, loss_report)
    return CptRun(recipe=recipe, out=run.out, ckpt_dir=run.ckpt_dir, rank_zero=run.rank_zero,
                  precision=run.precision, precision_reason=run.precision_reason, sequences_per_step=run.per_step,
                  tokens_per_step=tokens_per_step, total_steps=total_steps, warmup_on=warmup_on,
                  warmup_steps=warmup_steps, plan=run.plan, resume_from=run.resume_from, tokenizer=tokens.tokenizer,
                  stream=stream, heldout=heldout, monitor_length=monitor_length, targs=targs, model=model,
                  new_ids=new_ids, cost=cost, fit_report=fit_report, distill_report=distill_report,
                  chunked_loss=chunked_loss, loss_report=loss_report)


def _changes_a_resume_accepts(checkpoint: Path | None) -> tuple[str, ...]:
    """The monitor only measures, unless an unfinished embedding warm-up ends on its figures."""
    from yunshan.training.embedding_warmup import warmup_running

    return () if checkpoint is not None and warmup_running(checkpoint) else ("monitor.",)


def _check_budget(recipe: CptArgs, tokens, tokens_per_step: int, rank_zero: bool, dry_run: bool) -> dict:
    """The training tokens per new token, before any work (the same check and words as the warning beside the
    step-0 cost)."""
    from yunshan.tokenizer.extend import budget_check

    budget = budget_check(tokens_per_step * recipe.training.total_steps(), len(tokens.new_ids))
    if budget["warning"] and rank_zero:
        print(f"warning: {budget['warning']}", file=sys.stderr if dry_run else sys.stdout, flush=True)
    return budget


def _dry_run_summary(recipe: CptArgs, run, model_args, tokens, stream, heldout: dict, budget: dict,
                     tokens_per_step: int) -> dict:
    """What `yunshan cpt --dry-run` prints: the model from its config (meta device, no weights), the tokenizers, the
    first sequence of the mixture (every source read, validated and tokenised up to its first block), the plan."""
    from yunshan.training.models import describe_model

    first = next(iter(stream))
    train = recipe.training
    return {
        **describe_model(model_args, len(tokens.tokenizer)), "tokenizer_size": len(tokens.tokenizer),
        "new_tokens": max(0, len(tokens.tokenizer) - len(tokens.base)) if tokens.base is not None else 0,
        **({"budget": budget} if tokens.new_ids else {}),
        "sources": [s.name for s in recipe.data.sources],
        "weights": stream.mixer.weights, "seq_len": len(first["input_ids"]), "tokens_per_step": tokens_per_step,
        "total_tokens": tokens_per_step * train.total_steps(),
        "resume_from": str(run.resume_from) if run.resume_from else None, "run": run.plan.action,
        "precision": run.precision, "heldout_sets": list(heldout),
    }


def _grow_measuring_cost(model, tokens, recipe: CptArgs, run, heldout: dict, monitor_length: int):
    """The new rows grown (yunshan.training.models.grow_embeddings), with the extension's step-0 cost measured
    around them on a fresh run with held-out sets: the base model with its own tokenizer before, the new rows as
    initialised after. Returns (new ids, cost)."""
    from yunshan.training.embedding_warmup import from_main_process
    from yunshan.training.engines import gathered, holds_weights
    from yunshan.training.models import grow_embeddings

    autocast = run.precision == "bfloat16"
    here = holds_weights(model)  # false on FSDP ranks that receive rank 0's weights when training starts
    cost: dict = {}
    if tokens.new_ids and heldout and run.resume_from is None:
        with gathered(model.parameters()):
            cost["base"] = _heldout_bpc(model, tokens.base, heldout, monitor_length, autocast,
                                        "extension cost: base model") if here else None
    new_ids = grow_embeddings(model, tokens.base, tokens.tokenizer, init=recipe.tokenizer.new_row_init)
    if new_ids != tokens.new_ids:
        raise RuntimeError(f"the embeddings grew by ids {new_ids[:3]}.. but the tokenizers planned "
                           f"{tokens.new_ids[:3]}..")
    if cost:
        with gathered(model.parameters()):
            cost["init"] = _heldout_bpc(model, tokens.tokenizer, heldout, monitor_length, autocast,
                                        "extension cost: new rows as initialised") if here else None
        cost = from_main_process(cost)
    return new_ids, cost


def _start_new_rows(model, new_ids: list[int], tokens, recipe: CptArgs, run, warmup_on: bool):
    """The new rows' start before the warm-up: on a fresh run the output rows fitted and/or the new rows distilled
    on the first training sequences (saved beside the checkpoints), on a resumed one the fitted output rows read
    back. Returns (fit report, distillation report), None where not run."""
    from yunshan.io.progress import progress_bar
    from yunshan.training.embedding_warmup import (
        FIT_FILE, aligned_pairs, distill_new_rows, fit_new_rows, load_fitted_rows, save_fitted_rows)
    from yunshan.training.engines import gathered, holds_weights
    from yunshan.training.models import is_tied

    warm, autocast, here = recipe.warmup, run.precision == "bfloat16", holds_weights(model)
    fit_file = run.ckpt_dir / FIT_FILE
    log = print if run.rank_zero else (lambda *_: None)
    fit_report = distill_report = None
    if warmup_on and (warm.fit or warm.distill_steps) and run.resume_from is None:
        rounds = warm.fit_rounds or (3 if is_tied(model) else 1)
        wanted = warm.fit_sequences + warm.validation_sequences
        # the first of them read, tokenised and packed (a block of every source: tens of seconds on a real corpus)
        sequences = []
        with progress_bar(wanted, "fit of the new output rows: the first training sequences", unit="sequence") as bar:
            for _, item in zip(range(wanted), build_stream(recipe, tokens.tokenizer)):
                sequences.append(item["input_ids"].tolist())
                bar.update(1)
        sequences, validation = sequences[:warm.fit_sequences], sequences[warm.fit_sequences:]
        with gathered(model.parameters(), modify=True):
            if here and warm.distill_steps:
                distill_report = distill_new_rows(
                    model, new_ids, aligned_pairs(sequences, tokens.tokenizer, tokens.base),
                    steps=warm.distill_steps, lr=warm.distill_learning_rate, layers=warm.distill_layers,
                    autocast=autocast, validation=validation, log=log)
            if here and warm.fit:
                fit_report = fit_new_rows(model, new_ids, sequences, rounds=rounds, epochs=warm.fit_epochs,
                                          lr=warm.fit_learning_rate, autocast=autocast, seed=recipe.training.seed,
                                          validation=validation, log=log)
            if run.rank_zero:
                run.ckpt_dir.mkdir(parents=True, exist_ok=True)
                save_fitted_rows(model, new_ids, fit_file)
    elif warmup_on and warm.fit:  # resuming: the rows as fitted when the run began
        with gathered([model.get_output_embeddings().weight], modify=True):
            if here and not load_fitted_rows(model, new_ids, fit_file) and run.rank_zero:
                print(f"note: {fit_file} is missing; the frozen copy of the fitted output rows is not restored "
                      "(the rows that train come from the checkpoint)", flush=True)
    return fit_report, distill_report


def _prepare_outputs(recipe: CptArgs, run, model, stream, tokens_per_step: int, total_steps: int,
                     warmup_steps: int, loss_report: dict) -> None:
    """The output folder prepared (rank zero), the stream moved to a resumed run's position, and the run's line."""
    from yunshan.training.models import trainable_summary
    from yunshan.training.resume import prepare_outputs, resume_line

    if run.rank_zero:
        prepare_outputs(recipe, run.plan, run.out, run.ckpt_dir, model, recipe.lora)
    if run.resume_from is not None:
        stream.load_state(run.resume_from)
        if run.rank_zero:
            print(resume_line(run.plan, run.resume_from, f" (sequence {stream.mixer.sequence})"), flush=True)
    if run.rank_zero:
        print(f"model: {type(model).__name__}, {trainable_summary(model)}; precision {run.precision} "
              f"({run.precision_reason}); {tokens_per_step:,} tokens per step x {total_steps} steps "
              "(training.max_steps)"
              + (f", the first {warmup_steps} of them ({100 * warmup_steps / total_steps:.0f}%) at most embedding "
                 "warm-up (warmup.steps), the rest continual pretraining" if warmup_steps else "")
              + f"; {loss_report['reason']}", flush=True)


def _train(run: CptRun, callbacks: list | None = None) -> CptTraining:
    """The Trainer with the JSONL log, the forgetting monitor, the embedding warm-up and the trackers; trains as
    planned (from the start, on from a checkpoint, or only loading a last-step checkpoint)."""
    from transformers import default_data_collator

    from yunshan.training.checkpoints import YunshanTrainer, train_as_planned
    from yunshan.training.embedding_warmup import WarmupController
    from yunshan.training.engines import engine_of
    from yunshan.training.monitoring import ForgettingMonitor, JsonlLogger
    from yunshan.training.resume import run_record
    from yunshan.training.tracking import attach as attach_trackers

    recipe, out, stream, rank_zero = run.recipe, run.out, run.stream, run.rank_zero
    tokens_per_step, sequences_per_step = run.tokens_per_step, run.sequences_per_step
    logger = JsonlLogger(out / "log.jsonl", tokens_per_step,
                         lambda step: stream.state_before(step * sequences_per_step)["emitted"], main_process=rank_zero)
    callbacks = [logger, *(callbacks or [])]
    monitor = None
    if run.heldout:
        monitor = ForgettingMonitor(run.tokenizer, run.heldout, recipe.monitor.every_steps, run.monitor_length, logger,
                                    autocast=run.precision == "bfloat16")
        callbacks.append(monitor)
    controller = None
    if run.warmup_on:
        controller = WarmupController(dataclasses.replace(recipe.warmup, steps=run.warmup_steps), run.new_ids,
                                      recipe.training.learning_rate, monitor=monitor, base_bpc=run.cost.get("base"),
                                      logger=logger)
        if run.resume_from is not None:
            controller.load(run.resume_from)
        callbacks.append(controller)
    if run.cost and rank_zero:
        _report_cost(run.cost, run.new_ids, run.total_steps * tokens_per_step, run.warmup_on, out)

    def token_shares(step: int) -> dict:
        """The realised share of every source in the tokens trained so far (the mixture as it really is)."""
        try:
            emitted = stream.state_before(step * sequences_per_step)["emitted"]
        except RuntimeError:
            return {}
        total = sum(emitted.values()) or 1
        return {f"token_share_{name}": round(n / total, 6) for name, n in emitted.items()}

    trainer = YunshanTrainer(
        model=run.model, args=run.targs, train_dataset=stream, data_collator=default_data_collator,
        callbacks=callbacks, data_stream=stream, sequences_per_step=sequences_per_step, warmup=controller,
        log_extras=token_shares,
        run_record=run_record(recipe, "cpt", run.total_steps, sequences_per_step, run.plan.resumes),
        loraplus_lr_ratio=recipe.lora.loraplus_lr_ratio if recipe.lora.enabled else None,
        chunked_loss=run.chunked_loss,
    )
    attach_trackers(trainer, recipe, out)
    engine = engine_of(trainer.accelerator, run.model)
    if monitor is not None:
        monitor.trainer = trainer
    train_loss = train_as_planned(trainer, run.plan, run.resume_from, logger, rank_zero)
    return CptTraining(trainer, engine, controller, monitor, train_loss)


def _save(run: CptRun, trained: CptTraining, started: float) -> dict:
    """The final model (LoRA merged, the adapter beside it), tokenizer, data report and curves, then the marker that
    vouches for them (FinalOutputs), on the main process; every process takes part in gathering a sharded model."""
    from yunshan.io.artifacts import FinalOutputs
    from yunshan.training.engines import final_model
    from yunshan.training.models import save_adapter
    from yunshan.training.monitoring import plot_curves

    recipe, out, trainer = run.recipe, run.out, trained.trainer
    summary = {"output_dir": str(out), "steps": trainer.state.global_step, "train_loss": trained.train_loss}
    trained_sequences = trainer.state.global_step * run.sequences_per_step
    final = final_model(trainer)  # every process takes part in gathering a sharded model
    if run.rank_zero:
        if recipe.lora.enabled:
            save_adapter(final, recipe.lora, out / "adapter", run.ckpt_dir)
            final = final.merge_and_unload()
        final.config.use_cache = True
        final.save_pretrained(out)
        run.tokenizer.save_pretrained(out)
        report = build_data_report(recipe, run.stream, trained_sequences, run.tokens_per_step,
                                   trainer.state.global_step)
        if recipe.data.exclude:
            report.exclude = {"list": recipe.data.exclude,
                              "records": len(run.stream.mixer.streams[0].exclude.digests)}
        report.precision = {"value": run.precision, "reason": run.precision_reason}
        report.engine = trained.engine.to_dict()
        report.loss = run.loss_report
        if run.new_ids:
            report.new_tokens = len(run.new_ids)
            cost_file = out / "extension_cost.json"
            if cost_file.is_file():
                report.extension_cost = _cost_with_step0(json.loads(cost_file.read_text()), out / "log.jsonl")
        if trained.controller is not None:
            report.embedding_warmup = {**trained.controller.report(run.tokens_per_step, run.total_steps),
                                       "fit": run.fit_report, "distillation": run.distill_report}
        report.resumes = run.plan.resumes or None
        if trained.monitor is not None:
            summary["bpc"] = trained.monitor.history
        base_bpc = (report.extension_cost or {}).get("base") if run.new_ids else None
        plot = plot_curves(out / "log.jsonl", out / "curves.png", f"yunshan cpt: {out.name}", base_bpc=base_bpc,
                           weights={s.name: s.weight for s in recipe.data.sources})
        report.write(out)
        # Last: the marker that the folder holds this run's finished outputs (yunshan.training.resume).
        FinalOutputs.of(out, "cpt", trainer.state.global_step).write(out)
        summary.update({"data_report": report, "curves": str(plot), "seconds": time.time() - started})
        print(f"saved the model, tokenizer, recipe.yaml, data_report.json, log.jsonl and curves.png to {out}",
              flush=True)
    trainer.accelerator.wait_for_everyone()
    return summary


def _heldout_bpc(model, tokenizer, heldout: dict, max_length: int, autocast: bool, what: str) -> dict:
    """Bits per character of each held-out set (the forgetting monitor's computation), with a progress bar per set
    named `what` and the set."""
    from yunshan.training.monitoring import bits_per_character

    return {name: bits_per_character(model, tokenizer, docs, max_length, autocast=autocast,
                                     desc=f"{what}, held-out {name}")["bpc"]
            for name, docs in heldout.items()}


def _report_cost(cost: dict, new_ids: list[int], planned_tokens: int, warmup_on: bool, out: Path) -> None:
    """Print and save the step-0 cost of the extension; warn when it is large for the planned budget."""
    from yunshan.tokenizer.extend import budget_check
    from yunshan.training.embedding_warmup import format_cost, relative_cost

    saved = {"base": cost["base"], "init": cost["init"], "cost_init": relative_cost(cost["base"], cost["init"]),
             "new_tokens": len(new_ids), "planned_tokens": planned_tokens}
    print(f"extension cost at step 0 (bits/char, base model with its own tokenizer -> extended model, new rows "
          f"as initialised): {format_cost(saved['cost_init'])}", flush=True)
    rise = max((c["change"] for c in saved["cost_init"].values()), default=0.0)
    warnings = []
    if rise > 0.05 and not warmup_on:
        warnings.append(f"the extension raises held-out bits/char by up to {100 * rise:.0f}% at step 0 and the "
                        "embedding warm-up is off (warmup.enabled)")
    budget = budget_check(planned_tokens, len(new_ids))["warning"]  # said at the start too, in the same words
    if budget:
        warnings.append(budget)
    for warning in warnings:
        print(f"warning: {warning}", flush=True)
    saved["warnings"] = warnings
    (out / "extension_cost.json").write_text(json.dumps(saved, indent=2))


def _cost_with_step0(cost: dict, log_path: Path) -> dict:
    """Add the monitor's step-0 figures (the extended model after the output-row fit) to the saved cost."""
    from yunshan.training.embedding_warmup import relative_cost

    rows = [json.loads(line) for line in log_path.read_text().splitlines() if line.strip()] if log_path.is_file() else []
    first = next((r for r in rows if r.get("event") == "bpc" and r.get("step") == 0), None)
    if first is not None:
        cost["step0"] = {k[4:]: v for k, v in first.items() if k.startswith("bpc_")}
        cost["cost_step0"] = relative_cost(cost["base"], cost["step0"])
    return cost


def build_data_report(recipe, stream, trained_sequences: int, tokens_per_step: int, steps: int):
    """Tokens per source actually trained on (exact, from the stream state at the last step), documents read and
    drops per reason (as read so far), the seed and the source definitions: the run's DataReport."""
    from yunshan.io.artifacts import CptSourceReport, DataReport

    state = stream.state_before(trained_sequences)
    live = stream.mixer.report()
    total = sum(state["emitted"].values()) or 1
    sources = {}
    for source in recipe.data.sources:
        name = source.name
        sources[name] = CptSourceReport(
            weight=live["sources"][name]["weight"],
            tokens_trained=state["emitted"][name],
            token_share=state["emitted"][name] / total,
            documents_read=live["sources"][name]["documents_read"],
            epochs_completed=live["sources"][name]["epochs_completed"],
            dropped=live["sources"][name]["dropped"],
            path=source.path if source.path is not None else source.dataset,
        )
    return DataReport(
        kind="cpt", steps=steps, sequences=trained_sequences, seq_len=recipe.data.seq_len,
        tokens_trained=sum(state["emitted"].values()), tokens_per_step=tokens_per_step, seed=recipe.data.seed,
        on_bad_record=recipe.data.on_bad_record, dedup=recipe.data.dedup, document_mask=recipe.data.document_mask,
        sources=sources)
