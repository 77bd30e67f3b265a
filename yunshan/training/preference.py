"""`yunshan pref`: preference tuning after SFT (DPO, IPO, KTO, ORPO, SimPO) with TRL's trainers.

    yunshan pref --config recipes/smollm2-135m_pref_lora.yaml
    yunshan pref --config RECIPE.yaml method=simpo beta=2.0 training.max_steps=200

Top to bottom, as `yunshan sft`: every source is read in its declared format and validated
(yunshan.data.preference: TRL's prompt/chosen/rejected pairs as strings or messages, LLaMA-Factory's ShareGPT pairs,
UltraFeedback-style scored completions paired by a stated rule, KTO's unpaired samples), weighted or capped and
shuffled into one training set with a held-out split, rendered with the tokenizer's chat template (the answer is the
assistant turn as SFT labels it), fitted to data.max_length by TRL's rule (answers cut, prompts that fill the length
dropped; counted), and trained by the TRL 1.16 trainer of the method: `DPOTrainer` (method dpo with any of its
`loss_type`s: sigmoid, ipo, hinge, robust with label_smoothing, sigmoid_norm, ...; method ipo is dpo with loss_type
ipo), `KTOTrainer` (kto, apo_zero_unpaired), `trl.experimental.orpo.ORPOTrainer` and `trl.experimental.cpo.CPOTrainer`
with loss_type simpo and cpo_alpha 0 (SimPO). yunshan hands them its own token ids (their tokenisation is skipped) and
its checkpoint handling (yunshan.training.checkpoints: crash-safe checkpoints, exact resume, the run record).

The reference of DPO, IPO and KTO (`reference`): under LoRA the adapter-disabled model (no second copy in memory;
TRL 1.16 copies a PeftModel's adapter as a "ref" adapter for continuing a trained one, and yunshan's adapter is new,
so that copy equals the disabled adapter and is deleted as soon as the trainer is built); under full fine-tuning a
frozen copy of the model as it starts (loaded and grown again: TRL would load its reference from the checkpoint
folder, without the rows an extended vocabulary adds) or `precompute`, the reference's log-probabilities computed by
TRL before the first step with no copy kept. ORPO and SimPO need none. Checkpoints, resume, distributed launch (DDP,
DeepSpeed ZeRO-2/3: yunshan.training.engines), LoRA with new vocabulary rows and trackers work as in `yunshan sft`.
Held-out preference metrics (yunshan.training.preference_monitor) and held-out bits per character (the forgetting
monitor of `yunshan cpt`) are logged and plotted beside TRL's training metrics. TRL's telemetry is not sent.
A run fixes glibc's mmap threshold first (yunshan.training.heap), so its resident set does not climb step by step.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path

from yunshan.data.preference import OVERLONG, PrefSourceArgs
from yunshan.arguments.field_rules import check_fields
from yunshan.training.arguments import LoraArgs, ModelArgs, TokenizerArgs, TrainArgs
from yunshan.training.cpt import MonitorArgs

METHODS = ("dpo", "ipo", "kto", "orpo", "simpo")
# TRL 1.16's loss types (trl.DPOConfig.loss_type, trl.KTOConfig.loss_type)
DPO_LOSS_TYPES = ("sigmoid", "hinge", "ipo", "exo_pair", "nca_pair", "robust", "bco_pair", "sppo_hard", "aot",
                  "aot_unpaired", "apo_zero", "apo_down", "discopop", "sft", "sigmoid_norm")
KTO_LOSS_TYPES = ("kto", "apo_zero_unpaired")
REFERENCES = ("auto", "adapter", "copy", "precompute", "none")
REFERENCE_FREE = ("orpo", "simpo")


@dataclass
class PrefDataArgs:
    """The preference mixture: sources shuffled into one training set, with held-out pairs."""

    sources: list[PrefSourceArgs] = field(default_factory=list, metadata={"help": "preference sources"})
    max_length: int = field(default=1024, metadata={"range": ">= 2",
        "help": "tokens of prompt + answer (TRL's max_length); longer pairs as data.overlong says"})
    overlong: str = field(default="truncate", metadata={
        "help": "a pair longer than max_length: truncate (TRL's keep_start rule: answers cut from the right, a pair "
                "whose prompt alone fills max_length dropped), drop, or fail (a one-line error); all counted"})
    on_bad_record: str = field(default="fail", metadata={"help": "fail (file, line, field) or skip (count)"})
    exclude: str | None = field(default=None, metadata={"path": True,
        "help": "contamination list (contaminated.jsonl of yunshan data decontaminate): its records are left out, "
                "each counted as dropped 'contaminated'"})
    seed: int = field(default=0, metadata={"range": "[0, 4294967295]", "help": "seed of sampling, pairing (best_random), shuffling"})

    def __post_init__(self):
        check_fields(self)
        if self.overlong not in OVERLONG:
            raise ValueError(f"data.overlong must be one of {', '.join(OVERLONG)}, got {self.overlong!r}")
        if self.on_bad_record not in ("fail", "skip"):
            raise ValueError(f"data.on_bad_record must be fail or skip, got {self.on_bad_record!r}")


@dataclass
class PrefArgs:
    """Preference tuning: `yunshan pref --config RECIPE.yaml [key=value ...]`."""

    method: str = field(default="dpo", metadata={
        "help": f"one of {', '.join(METHODS)}: DPO (TRL DPOTrainer), IPO (DPOTrainer, loss_type ipo), KTO "
                "(KTOTrainer: pairs are unpaired, or KTO's own unpaired data), ORPO (ORPOTrainer, no reference), "
                "SimPO (CPOTrainer, loss_type simpo, cpo_alpha 0, no reference)"})
    beta: float = field(default=0.1, metadata={"range": "> 0",
        "help": "DPO/KTO: how far the model may move from the reference (higher: less); IPO: the regulariser tau; "
                "ORPO: the odds-ratio loss weight lambda; SimPO: the reward scale (the paper uses 2.0-2.5)"})
    loss_type: str | None = field(default=None, metadata={
        "help": f"dpo: one of TRL's {', '.join(DPO_LOSS_TYPES)} (default sigmoid; sigmoid_norm and ipo normalise by "
                f"length); kto: {' or '.join(KTO_LOSS_TYPES)} (default kto); not used by ipo, orpo, simpo"})
    label_smoothing: float = field(default=0.0, metadata={"range": "[0, 0.5)",
        "help": "dpo loss_type robust: the probability that a label is flipped, in [0, 0.5); exo_pair: epsilon; "
                "simpo: label smoothing of its sigmoid loss"})
    reference: str = field(default="auto", metadata={
        "help": "the reference of dpo, ipo and kto: auto (adapter under LoRA, else copy), adapter (the "
                "adapter-disabled model, LoRA only), copy (a frozen copy of the starting model), precompute (its "
                "log-probabilities computed before the first step, nothing kept); orpo and simpo: none"})
    simpo_gamma: float = field(default=0.5, metadata={"range": ">= 0", "help": "simpo: the target reward margin gamma"})
    desirable_weight: float = field(default=1.0, metadata={"range": "> 0", "help": "kto: weight of the desirable samples' losses"})
    undesirable_weight: float = field(default=1.0, metadata={"range": "> 0", "help": "kto: weight of the undesirable samples' losses"})
    eval_steps: int = field(default=0, metadata={"range": ">= 0",
        "help": "held-out preference metrics every N steps (0: before the first step and after the last only)"})
    eval_batch_size: int = field(default=4, metadata={"range": ">= 1", "help": "held-out pairs scored per forward pass"})
    model: ModelArgs = field(default_factory=lambda: ModelArgs(preset="tiny"))
    tokenizer: TokenizerArgs = field(default_factory=TokenizerArgs)
    data: PrefDataArgs = field(default_factory=PrefDataArgs)
    training: TrainArgs = field(default_factory=lambda: TrainArgs(output_dir="runs/pref", learning_rate=5e-6,
                                                                  weight_decay=0.0, max_steps=100))
    lora: LoraArgs = field(default_factory=LoraArgs)
    monitor: MonitorArgs = field(default_factory=lambda: MonitorArgs(every_steps=0, max_chars=20000), metadata={
        "help": "held-out bits per character (forgetting) during training, as yunshan cpt's monitor"})

    def __post_init__(self):
        check_fields(self)
        if self.method not in METHODS:
            raise ValueError(f"method must be one of {', '.join(METHODS)}, got {self.method!r}")
        valid = {"dpo": DPO_LOSS_TYPES, "kto": KTO_LOSS_TYPES}.get(self.method, ())
        if self.loss_type is not None and self.loss_type not in valid:
            raise ValueError(f"loss_type {self.loss_type!r} is not one of method {self.method}'s: "
                             + (", ".join(valid) if valid else "it takes none (leave loss_type unset)"))
        if self.reference not in REFERENCES:
            raise ValueError(f"reference must be one of {', '.join(REFERENCES)}, got {self.reference!r}")
        if self.method in REFERENCE_FREE and self.reference not in ("auto", "none"):
            raise ValueError(f"reference {self.reference!r}: method {self.method} uses no reference model (auto or "
                             "none)")
        if self.method not in REFERENCE_FREE and self.reference == "none":
            raise ValueError(f"reference none: method {self.method} needs a reference (auto, adapter, copy or "
                             "precompute)")
        if self.reference == "adapter" and not self.lora.enabled:
            raise ValueError("reference adapter needs lora.enabled: true (without LoRA use copy or precompute)")
        if self.lora.enabled and self.lora.mutates_base:
            raise ValueError(f"lora.init_lora_weights {self.lora.init_lora_weights!r}: PiSSA and OLoRA move the base "
                             "weights into the adapter, so the adapter-disabled model is no longer the model preference "
                             "tuning starts from; use default or gaussian initialisation (DoRA and rsLoRA are fine)")
        if self.lora.enabled and self.lora.loraplus_lr_ratio is not None:
            raise ValueError("lora.loraplus_lr_ratio is not supported by yunshan pref (TRL's trainers build their own "
                             "optimizer); leave it unset")
        if self.training.loss == "chunked" and self.method in ("orpo", "simpo"):
            raise ValueError(f"training.loss: chunked: method {self.method} trains with TRL's "
                             f"{'ORPOTrainer' if self.method == 'orpo' else 'CPOTrainer'}, which scores the full "
                             "logits; use auto or plain (dpo, ipo and kto score through TRL's chunked LM head)")
        if self.reference == "copy" and self.lora.enabled:
            raise ValueError("reference copy with lora.enabled: the adapter-disabled model is the reference already "
                             "(reference adapter or auto); a second copy would only cost memory")

    def resolved_reference(self) -> str:
        if self.method in REFERENCE_FREE:
            return "none"
        if self.reference == "auto":
            return "adapter" if self.lora.enabled else "copy"
        return self.reference

    def resolved_loss_type(self) -> str:
        return {"ipo": "ipo", "orpo": "orpo", "simpo": "simpo"}.get(self.method) or self.loss_type or (
            "kto" if self.method == "kto" else "sigmoid")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from yunshan.arguments.flags import add_recipe_flags

    add_recipe_flags(parser, "method=kto beta=0.1 training.max_steps=200",
                     "validate recipe, data and model; no training")


def run(args: argparse.Namespace) -> int:
    from yunshan.arguments.flags import recipe_from_flags

    recipe = recipe_from_flags(PrefArgs, args)
    result = run_pref(recipe, dry_run=args.dry_run)
    if args.dry_run:
        print(json.dumps(result, indent=2, ensure_ascii=False, default=str))
    return 0


# ---------------------------------------------------------------- data


@dataclass
class PrefData:
    """The tokenised training rows (in TRL's layout for the method), the held-out pairs and the data report."""

    rows: list[dict]
    heldout: list  # yunshan.data.preference.EncodedPair
    report: object  # yunshan.io.artifacts.DataReport


def build_preference_data(recipe: PrefArgs, tokenizer) -> PrefData:
    """Read, validate, mix, render and fit the recipe's preference data (module docstring)."""
    from yunshan.io.artifacts import DataReport, PrefSourceReport
    from yunshan.data.conversations import nothing_left
    from yunshan.data.decontamination import Exclusions
    from yunshan.data.preference import (
        Pair, encode_pair, encode_unpaired, fit_pair, fit_unpaired, mix_preference_sources, pair_by_prompt,
        read_preference_source, unpair)

    data = recipe.data
    if not data.sources:
        raise ValueError("data.sources is empty: a preference recipe needs at least one preference source")
    names = [s.name for s in data.sources]
    if len(set(names)) != len(names):
        raise ValueError(f"preference source names must be unique, got {names}")
    paired = recipe.method != "kto"
    for s in data.sources:
        if paired and s.format == "kto":
            raise ValueError(f"preference source {s.name!r} has format kto (unpaired samples); method {recipe.method} "
                             "trains on pairs: use method kto, or a paired format")
    drops = {s.name: {} for s in data.sources}
    exclude = Exclusions.load(data.exclude)
    per_source = {s.name: read_preference_source(s, data.on_bad_record, drops[s.name], data.seed, exclude)
                  for s in data.sources}
    read_counts = {name: sum(len(r) for r in records) for name, records in per_source.items()}
    read_drops = {name: dict(d) for name, d in drops.items()}
    train, heldout_items = mix_preference_sources(per_source, data.sources, data.seed)
    mixed = train
    if not paired:
        # KTO trains in file order (TRL's sequential sampling) and estimates its KL term from each sample's prompt
        # with the completion before it in the batch: a pair's two halves side by side would give half the samples
        # their own prompt's answer as the "mismatched" one, and a batch of one label would have no contrast.
        train = unpair(train)
        random.Random(f"preference/{data.seed}/unpaired").shuffle(train)
    truncated = {s.name: {} for s in data.sources}
    composition = {name: {"samples": 0, "heldout": 0, "tokens": 0, "answer_tokens": 0} for name in names}
    end_markers: set[int] = set()

    def count(table: dict, source: str, reasons: list[str]) -> None:
        for reason in reasons:
            bucket = truncated if reason.startswith("truncated_") else table
            bucket[source][reason] = bucket[source].get(reason, 0) + 1

    rows = []
    for item in train:
        enc, ends = (encode_pair if isinstance(item, Pair) else encode_unpaired)(tokenizer, item)
        end_markers |= ends
        fitted, reasons = (fit_pair if isinstance(item, Pair) else fit_unpaired)(enc, data.max_length, data.overlong)
        count(drops, item.source, reasons)
        if fitted is None:
            continue
        c = composition[item.source]
        c["samples"] += 1
        answers = ([fitted.chosen_ids, fitted.rejected_ids] if isinstance(item, Pair) else [fitted.completion_ids])
        c["tokens"] += sum(len(fitted.prompt_ids) + len(a) for a in answers)
        c["answer_tokens"] += sum(len(a) for a in answers)
        rows.append(_row(recipe.method, fitted))
    if not rows:
        raise ValueError(nothing_left("preference", "pair" if paired else "item", data.sources, read_counts,
                                      read_drops, mixed, heldout_items, drops, data.max_length))
    heldout = []
    for pair in pair_by_prompt(heldout_items):
        enc, _ = encode_pair(tokenizer, pair)
        fitted, reasons = fit_pair(enc, data.max_length, "truncate" if data.overlong == "fail" else data.overlong)
        if fitted is not None:
            heldout.append(fitted)
            composition[pair.source]["heldout"] += 1
        else:
            drops[pair.source].update({f"heldout_{r}": drops[pair.source].get(f"heldout_{r}", 0) + 1
                                       for r in reasons})
    if heldout_items and not heldout:
        raise ValueError("the held-out split holds no pair (KTO samples pair up only when a prompt has a desirable "
                         "and an undesirable answer); set heldout: 0 or hold out paired records")
    report = DataReport(
        kind="preference", seed=data.seed, samples=len(rows), rows=len(rows), max_length=data.max_length,
        heldout_pairs=len(heldout), end_of_turn_ids=sorted(end_markers),
        real_tokens=sum(c["tokens"] for c in composition.values()),
        sources={name: PrefSourceReport(read=read_counts[name], samples=composition[name]["samples"],
                                        heldout=composition[name]["heldout"], tokens=composition[name]["tokens"],
                                        answer_tokens=composition[name]["answer_tokens"],
                                        share_of_samples=composition[name]["samples"] / len(rows),
                                        dropped=drops[name], truncated=truncated[name])
                 for name in names},
        exclude={"list": data.exclude, "records": len(exclude.digests)} if data.exclude else None)
    return PrefData(rows, heldout, report)


def _row(method: str, enc) -> dict:
    """One training row in the layout TRL's trainer of `method` reads after its own tokenisation (which yunshan's
    trainer classes skip)."""
    if method == "kto":
        return {"prompt_ids": enc.prompt_ids, "completion_ids": enc.completion_ids, "label": enc.label}
    if method in ("dpo", "ipo"):
        return {"prompt_ids": enc.prompt_ids, "chosen_ids": enc.chosen_ids, "rejected_ids": enc.rejected_ids}
    # ORPO and CPO (SimPO): tokenize_row's output for a decoder-only model, labels -100 on the prompt
    row = {"prompt_input_ids": enc.prompt_ids, "prompt_attention_mask": [1] * len(enc.prompt_ids)}
    for name in ("chosen", "rejected"):
        answer = getattr(enc, f"{name}_ids")
        row[f"{name}_input_ids"] = enc.prompt_ids + answer
        row[f"{name}_attention_mask"] = [1] * (len(enc.prompt_ids) + len(answer))
        row[f"{name}_labels"] = [-100] * len(enc.prompt_ids) + answer
    return row


# ---------------------------------------------------------------- TRL's trainers


def trl_classes(method: str):
    """(TRL's trainer class, its config class) for `method` (imported here: TRL loads only for this command)."""
    if method in ("dpo", "ipo"):
        from trl import DPOConfig, DPOTrainer

        return DPOTrainer, DPOConfig
    if method == "kto":
        from trl import KTOConfig, KTOTrainer

        return KTOTrainer, KTOConfig
    with warnings.catch_warnings():  # the notice that trl.experimental may change: yunshan pins the TRL it tested
        warnings.simplefilter("ignore")
        if method == "orpo":
            from trl.experimental.orpo import ORPOConfig, ORPOTrainer

            return ORPOTrainer, ORPOConfig
        from trl.experimental.cpo import CPOConfig, CPOTrainer

        return CPOTrainer, CPOConfig


def make_trainer_class(method: str):
    """TRL's trainer for `method` with yunshan's checkpoints (YunshanTrainer first in the MRO: crash-safe
    checkpoints, the run record, checkpoint parts), yunshan's token ids in place of TRL's tokenisation, and neither
    TRL's model card in every checkpoint (yunshan export writes the card) nor its telemetry."""
    from yunshan.loading.pretrained import activation_checkpointing_alias
    from yunshan.training.checkpoints import YunshanTrainer

    base, _ = trl_classes(method)

    class PreferenceTrainer(YunshanTrainer, base):
        def _send_telemetry(self):
            pass  # yunshan sends nothing anywhere; TRL would ping the Hub from every training run

        def create_model_card(self, *args, **kwargs):
            pass

        def _prepare_dataset(self, dataset, processing_class, args, dataset_name):
            """DPO and KTO: the rows are tokenised and fitted already. KTO's KL term still needs its mismatched
            completions: each batch's completions rotated by one, as KTOTrainer._prepare_dataset builds them."""
            if method != "kto" or not getattr(self, "calculate_KL", False):
                return dataset

            def rotate(batch):
                batch["KL_completion_ids"] = [batch["completion_ids"][-1]] + batch["completion_ids"][:-1]
                return batch

            return dataset.map(rotate, batched=True, batch_size=args.per_device_train_batch_size)

        def tokenize_row(self, feature, model=None):
            return feature  # ORPO and CPO: the rows are in tokenize_row's output layout already

        # TRL's DPO and KTO use transformers' deprecated gradient-checkpointing names around every reference pass:
        # they reach the current ones (yunshan.loading.pretrained.activation_checkpointing_alias), no warning on every
        # run.
        def training_step(self, *args, **kwargs):
            with activation_checkpointing_alias():
                return super().training_step(*args, **kwargs)

        def compute_ref_log_probs(self, *args, **kwargs):  # DPO and KTO, also when precomputed
            with activation_checkpointing_alias():
                return super().compute_ref_log_probs(*args, **kwargs)

    PreferenceTrainer.__name__ = PreferenceTrainer.__qualname__ = f"Yunshan{base.__name__}"
    return PreferenceTrainer


def method_config(recipe: PrefArgs, reference: str) -> dict:
    """The fields of TRL's config class that carry the method's hyperparameters (the rest is the training section);
    every length rule is yunshan's (the rows arrive fitted), so TRL's own truncation is off."""
    method = recipe.method
    common = {"beta": recipe.beta, "disable_dropout": True}
    if method in ("dpo", "ipo"):
        return {**common, "loss_type": [recipe.resolved_loss_type()], "label_smoothing": recipe.label_smoothing,
                "precompute_ref_log_probs": reference == "precompute", "max_length": None}
    if method == "kto":
        return {**common, "loss_type": recipe.resolved_loss_type(), "desirable_weight": recipe.desirable_weight,
                "undesirable_weight": recipe.undesirable_weight,
                "precompute_ref_log_probs": reference == "precompute", "max_length": None}
    if method == "orpo":
        return {**common, "max_length": recipe.data.max_length}
    return {**common, "loss_type": "simpo", "cpo_alpha": 0.0, "simpo_gamma": recipe.simpo_gamma,
            "label_smoothing": recipe.label_smoothing, "max_length": recipe.data.max_length}


# ---------------------------------------------------------------- the run


@dataclass
class PrefRun:
    """Everything set up before the first step."""

    recipe: PrefArgs
    out: Path
    ckpt_dir: Path
    rank_zero: bool
    precision: str
    precision_reason: str
    rows_per_step: int
    total_steps: int
    reference: str
    plan: object  # yunshan.training.resume.RunPlan
    resume_from: Path | None
    tokenizer: object
    data: PrefData
    bpc_texts: dict
    targs: object
    model: object
    ref_model: object | None
    new_ids: list[int]


def run_pref(recipe: PrefArgs, dry_run: bool = False, callbacks: list | None = None) -> dict:
    """Run preference tuning as the recipe says; returns a summary. `callbacks`: extra TrainerCallbacks.

    Three steps: set up (plan, data, model, reference), train (TRL's trainer with the monitors and trackers), save
    (the model, LoRA merged, the adapter beside it; tokenizer, data report with the held-out metrics, curves; the
    marker of the finished folder last)."""
    from yunshan.io.folder_lock import folder_lock
    from yunshan.io.folders import check_output_folder

    if dry_run:
        return _run_pref(recipe, dry_run, callbacks)  # reads only: no lock
    out = check_output_folder(recipe.training.output_dir, "training.output_dir")  # before hours of work
    # A second run on this folder stops here, before anything in it is touched (yunshan.io.folder_lock).
    with folder_lock(out, "training.output_dir"):
        return _run_pref(recipe, dry_run, callbacks)


def _run_pref(recipe: PrefArgs, dry_run: bool, callbacks: list | None) -> dict:
    started = time.time()
    run = _set_up(recipe, dry_run)  # caps glibc's heap growth (start_run, yunshan.training.heap)
    if not isinstance(run, PrefRun):
        return run
    trainer, engine, monitor, bpc, train_loss = _train(run, callbacks)
    return _save(run, trainer, engine, monitor, bpc, train_loss, started)


def _set_up(recipe: PrefArgs, dry_run: bool) -> PrefRun | dict:
    """The run's phases before the first step (yunshan.training.setup): plan the run, resolve the folders and load
    the tokenizers (a chat template added when there is none), read the pairs and the held-out text, describe (a dry
    run ends there), load the model and grow its rows (and the reference's, when it is a copy), apply LoRA and
    prepare the output folder. Returns the summary instead for a dry run or a finished run."""
    from yunshan.training.arguments import training_arguments
    from yunshan.training.models import describe_model, grow_embeddings, load_model, resolve_sources, trainable_summary
    from yunshan.training.monitoring import read_heldout_sets
    from yunshan.training.resume import prepare_outputs, resume_line, settle
    from yunshan.training.setup import load_tokenizers, open_folder, start_run, with_lora

    train = recipe.training
    # What is only measured (the monitors, the held-out scoring batch) may change on resume.
    run = start_run(recipe, "preference", dry_run, safe=("monitor.", "eval_steps", "eval_batch_size"))
    if isinstance(run, dict):
        return run  # finished: nothing is touched, not even a Hub id
    model_args, tok_path, base_path = resolve_sources(recipe, weights=not dry_run)
    tokens = load_tokenizers(recipe, tok_path, base_path, chat=True)
    tokenizer = tokens.tokenizer
    data = build_preference_data(recipe, tokenizer)
    reference = recipe.resolved_reference()
    if recipe.method == "kto" and train.per_device_batch_size < 2 and recipe.resolved_loss_type() == "kto":
        raise ValueError("method kto estimates its KL term from the other samples of each batch: "
                         "training.per_device_batch_size must be >= 2")
    total_steps = train.max_steps
    if train.epochs is not None:
        total_steps = max(1, math.ceil(train.epochs * len(data.rows) / run.per_step))
    bpc_texts = read_heldout_sets(recipe.monitor)
    if dry_run:
        return {**describe_model(model_args, len(tokenizer)), "method": recipe.method,
                "loss_type": recipe.resolved_loss_type(), "reference": reference, "samples": len(data.rows),
                "heldout_pairs": len(data.heldout), "max_steps": total_steps,
                "run": settle(run.plan, total_steps, run.out, "preference").action,
                "chat_template": "yunshan default" if tokens.added_template else "tokenizer's own",
                "sources": data.report.to_json()["sources"], "precision": run.precision}
    run = open_folder(run, total_steps)
    if isinstance(run, dict):
        return run

    _, config_class = trl_classes(recipe.method)
    # Before the model: under a DeepSpeed ZeRO-3 launch the TrainingArguments switch on zero.Init, so the model (and
    # a reference copy) load partitioned (yunshan.training.engines).
    targs = training_arguments(
        train, run.out, run.ckpt_dir, total_steps, run.precision, run.rank_zero, arguments_class=config_class,
        data_seed=recipe.data.seed, remove_unused_columns=False, **method_config(recipe, reference))
    model = load_model(model_args, vocab_size=len(tokenizer))
    new_ids = grow_embeddings(model, tokens.base, tokenizer, init=recipe.tokenizer.new_row_init)
    ref_model = None
    if reference == "copy":
        # The starting model once more, grown the same way (the subword means are deterministic), frozen.
        ref_model = load_model(model_args, vocab_size=len(tokenizer))
        grow_embeddings(ref_model, tokens.base, tokenizer, init=recipe.tokenizer.new_row_init)
        ref_model.eval().requires_grad_(False)
    model = with_lora(model, recipe, new_ids)
    if run.rank_zero:
        prepare_outputs(recipe, run.plan, run.out, run.ckpt_dir)
        if run.plan.action != "fresh":
            print(resume_line(run.plan, run.resume_from), flush=True)
        print(f"model: {type(model).__name__}, {trainable_summary(model)}; {recipe.method} "
              f"({recipe.resolved_loss_type()}, beta {recipe.beta}, reference {reference}); {len(data.rows)} training "
              f"samples, {len(data.heldout)} held-out pairs; {total_steps} steps; precision {run.precision} "
              f"({run.precision_reason}); chat template: "
              f"{'yunshan default' if tokens.added_template else 'the tokenizer own'}", flush=True)
    return PrefRun(recipe=recipe, out=run.out, ckpt_dir=run.ckpt_dir, rank_zero=run.rank_zero,
                   precision=run.precision, precision_reason=run.precision_reason, rows_per_step=run.per_step,
                   total_steps=total_steps, reference=reference, plan=run.plan, resume_from=run.resume_from,
                   tokenizer=tokenizer, data=data, bpc_texts=bpc_texts, targs=targs, model=model,
                   ref_model=ref_model, new_ids=new_ids)


def build_trainer(run: PrefRun, callbacks: list | None = None):
    """TRL's trainer of the method on the run's rows, with the JSONL log, the held-out preference monitor, the
    forgetting monitor (when the recipe names held-out text) and the trackers. Returns (trainer, preference
    monitor, forgetting monitor or None, logger)."""
    from datasets import Dataset

    from yunshan.training.monitoring import ForgettingMonitor, JsonlLogger
    from yunshan.training.preference_monitor import PreferenceMonitor
    from yunshan.training.resume import run_record
    from yunshan.training.tracking import attach as attach_trackers

    recipe, out = run.recipe, run.out
    tokens_per_step = round(run.data.report.real_tokens / max(len(run.data.rows), 1) * run.rows_per_step)
    logger = JsonlLogger(out / "log.jsonl", tokens_per_step, main_process=run.rank_zero)
    monitor = PreferenceMonitor(run.data.heldout, recipe.method, recipe.beta, run.tokenizer.pad_token_id,
                                recipe.eval_steps, recipe.eval_batch_size, logger, run.resume_from)
    bpc = None
    extra = []
    if run.bpc_texts:
        bpc = ForgettingMonitor(run.tokenizer, run.bpc_texts, recipe.monitor.every_steps,
                                recipe.monitor.max_length or recipe.data.max_length, logger,
                                autocast=run.precision == "bfloat16")
        extra.append(bpc)
    kwargs = {"ref_model": run.ref_model} if recipe.method not in REFERENCE_FREE else {}
    trainer = make_trainer_class(recipe.method)(
        model=run.model, args=run.targs, train_dataset=Dataset.from_list(run.data.rows),
        processing_class=run.tokenizer, callbacks=[logger, monitor, *extra, *(callbacks or [])],
        run_record=run_record(recipe, "preference", run.total_steps, run.rows_per_step, run.plan.resumes),
        checkpoint_parts=[monitor], **kwargs)
    peft_config = getattr(trainer.model, "peft_config", None)
    if peft_config and "ref" in peft_config:
        trainer.model.delete_adapter("ref")  # equal to the disabled adapter (module docstring): no copy kept
    attach_trackers(trainer, recipe, out)
    monitor.trainer = trainer
    if bpc is not None:
        bpc.trainer = trainer
    return trainer, monitor, bpc, logger


def _train(run: PrefRun, callbacks: list | None = None):
    from yunshan.training.checkpoints import train_as_planned
    from yunshan.training.engines import engine_of

    trainer, monitor, bpc, logger = build_trainer(run, callbacks)
    engine = engine_of(trainer.accelerator, run.model)
    train_loss = train_as_planned(trainer, run.plan, run.resume_from, logger, run.rank_zero)
    return trainer, engine, monitor, bpc, train_loss


def _save(run: PrefRun, trainer, engine, monitor, bpc, train_loss, started: float) -> dict:
    from yunshan.io.artifacts import FinalOutputs
    from yunshan.training.checkpoints import final_save
    from yunshan.training.engines import final_model
    from yunshan.training.monitoring import plot_curves

    recipe, out = run.recipe, run.out
    summary = {"output_dir": str(out), "steps": trainer.state.global_step, "train_loss": train_loss}
    with final_save(out):  # a full disk: one line, not a SafetensorError traceback
        final = final_model(trainer)  # every process takes part in gathering a sharded model
        if run.rank_zero:
            report = run.data.report
            if recipe.lora.enabled:
                final.save_pretrained(out / "adapter")
                final = final.merge_and_unload()
            final.config.use_cache = True
            stop_ids = sorted({run.tokenizer.eos_token_id, *(report.end_of_turn_ids or [])})
            final.generation_config.eos_token_id = stop_ids if len(stop_ids) > 1 else stop_ids[0]
            final.generation_config.pad_token_id = run.tokenizer.pad_token_id
            final.save_pretrained(out)
            run.tokenizer.save_pretrained(out)
            report.steps = trainer.state.global_step
            report.precision = {"value": run.precision, "reason": run.precision_reason}
            report.engine = engine.to_dict()
            report.loss = pref_loss(recipe)
            report.resumes = run.plan.resumes or None
            report.method = {"name": recipe.method, "loss_type": recipe.resolved_loss_type(), "beta": recipe.beta,
                             "reference": run.reference, "trainer": trl_classes(recipe.method)[0].__name__,
                             "trl": _trl_version()}
            if recipe.method == "simpo":
                report.method["simpo_gamma"] = recipe.simpo_gamma
            if recipe.label_smoothing:
                report.method["label_smoothing"] = recipe.label_smoothing
            history = _history(out / "log.jsonl", "preference")
            if history:
                report.heldout = {"before": history[0], "after": history[-1]}
            if run.new_ids:
                report.new_tokens = len(run.new_ids)
            plot = plot_curves(out / "log.jsonl", out / "curves.png",
                               f"yunshan pref ({recipe.method}): {out.name}")
            report.write(out)
            # Last: the marker that the folder holds this run's finished outputs (yunshan.training.resume).
            FinalOutputs.of(out, "preference", trainer.state.global_step).write(out)
            summary.update({"data_report": report, "curves": str(plot), "heldout": report.heldout,
                            "bpc": _history(out / "log.jsonl", "bpc") or None, "seconds": time.time() - started})
            print(f"saved the model, tokenizer, recipe.yaml, data_report.json, log.jsonl and curves.png to {out}",
                  flush=True)
    trainer.accelerator.wait_for_everyone()
    return summary


def pref_loss(recipe: PrefArgs) -> dict:
    """How the method's log-probabilities are computed, as the data report records it (training.loss): TRL 1.16's
    DPOTrainer and KTOTrainer score the answers through their fused LM head (trl.trainer.utils.add_fused_lm_head: the
    head and log-softmax in chunks of the answer tokens, never the full logits) whatever training.loss says; its
    ORPOTrainer and CPOTrainer (SimPO) from the model's full logits."""
    if recipe.method in REFERENCE_FREE:
        return {"value": "plain", "chunk_tokens": None,
                "reason": f"loss: plain (TRL's {recipe.method} trainer scores the full logits)"}
    return {"value": "chunked", "chunk_tokens": None,
            "reason": "loss: chunked (TRL's fused LM head scores the answers a chunk at a time)"}


def _history(log: Path, event: str) -> list[dict]:
    """The rows of one monitor's event in the JSONL log (the whole run's, also across resumes), by step."""
    if not log.is_file():
        return []
    rows = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows = [{k: v for k, v in r.items() if k != "event"} for r in rows if r.get("event") == event]
    return sorted(rows, key=lambda r: r["step"])


def _trl_version() -> str:
    import trl

    return trl.__version__
