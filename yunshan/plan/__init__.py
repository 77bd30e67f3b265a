"""`yunshan plan`: memory per device and time of every training stage of a recipe, before renting the GPUs.

    yunshan plan recipes/pangu-pi-7b_pipeline_full.yaml --gpu a100-80gb --gpus 8
    yunshan plan recipes/llama_pipeline_lora.yaml --gpu h100-sxm --gpus 8 --nodes 2 --model models/llama-7b --json
    yunshan plan recipes/smollm2-135m_laws.yaml --gpu l4 --gpus 1 --bits 4          # as QLoRA would hold it

For each stage the recipe trains (base, cpt, sft, pref), on each engine (one process, DDP, DeepSpeed ZeRO-2/3,
FSDP2): the weights, gradients and optimizer states one device holds, the activations with and without gradient
checkpointing, the peak of a step, whether the recipe's micro-batch fits and the largest that does; then the tokens
the recipe trains on that many devices, their FLOPs (6·N·D) and the time at the stated MFU. The formulas and their
sources are in docs/plan.md; the GPUs in yunshan/plan/gpus.yaml (vendors' datasheets). Nothing is downloaded or
allocated: the model's shape comes from its folder's config.json or a PanGu-π/OTCE preset, built on the meta device.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field, replace
from pathlib import Path

from .estimate import (ENGINE_NAMES, GiB, ModelShape, StageSetup, estimate_memory, format_bytes, format_duration,
                       gpu_spec, largest_micro_batch, load_gpus, seconds_for, trainable_parameters, training_flops,
                       usable_bytes)

# Engines in the order they are recommended: the least communication first.
PREFERENCE = ("single", "ddp", "zero2", "fsdp2", "zero3")
PAIRED_METHODS = ("dpo", "ipo", "orpo", "simpo")     # chosen and rejected in one batch
REFERENCE_METHODS = ("dpo", "ipo", "kto")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", metavar="RECIPE", help="recipe YAML: a pipeline (yunshan run) or one stage's")
    parser.add_argument("overrides", nargs="*", help="dotted overrides, e.g. cpt.training.per_device_batch_size=4")
    parser.add_argument("--gpu", default="a100-80gb", help="accelerator, one of yunshan/plan/gpus.yaml's: "
                        + ", ".join(load_gpus()))
    parser.add_argument("--gpus", type=int, default=8, help="GPUs per node (default 8)")
    parser.add_argument("--nodes", type=int, default=1, help="nodes (default 1)")
    parser.add_argument("--mfu", type=float, default=0.4,
                        help="model FLOPs utilisation the time is computed at (default 0.4)")
    parser.add_argument("--model", default=None,
                        help="the model's shape from this preset or folder instead of the recipe's (a folder not "
                             "made yet, a Hub id)")
    parser.add_argument("--bits", type=int, choices=(4, 8), default=None,
                        help="plan the LoRA stages as QLoRA: frozen linears stored in 4 or 8 bits (bitsandbytes)")
    parser.add_argument("--json", action="store_true", help="print the plan as JSON instead of tables")


def run(args: argparse.Namespace) -> int:
    if args.gpus < 1 or args.nodes < 1:
        raise ValueError(f"--gpus {args.gpus} --nodes {args.nodes}: give whole numbers >= 1")
    if not 0 < args.mfu <= 1:
        raise ValueError(f"--mfu {args.mfu}: give a fraction in (0, 1], e.g. 0.4")
    gpu = gpu_spec(args.gpu)
    result = plan_recipe(Path(args.config), args.overrides, gpu, args.gpus * args.nodes, args.mfu, args.model,
                         args.bits)
    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
    else:
        print(format_plan(result))
    return 0


# ---------------------------------------------------------------- the recipe's stages


@dataclass
class PlannedStage:
    name: str
    model: str                  # where the shape came from
    shape: ModelShape
    setup: StageSetup
    steps: int | None           # optimizer steps (None: epochs over data the plan does not read)
    steps_from: str
    sequences_per_step_per_device: int
    notes: list = field(default_factory=list)


def load_any_recipe(path: Path, overrides: list[str]):
    """(kind, recipe): a pipeline recipe, or one stage's (cpt, sft, pref), whichever the file is."""
    import yaml

    from yunshan.arguments.recipe import RecipeError, load_recipe

    raw = yaml.safe_load(path.read_text(encoding="utf-8")) if path.is_file() else None
    if raw is None and not path.is_file():
        raise FileNotFoundError(f"recipe {path} does not exist")
    if isinstance(raw, dict) and any(k in raw for k in ("cpt", "sft", "preference", "base")):
        from yunshan.pipeline import PipelineRecipe

        return "pipeline", load_recipe(PipelineRecipe, path, overrides)
    from yunshan.training.cpt import CptArgs
    from yunshan.training.preference import PrefArgs
    from yunshan.training.sft import SftArgs

    errors = []
    for kind, cls in (("cpt", CptArgs), ("sft", SftArgs), ("pref", PrefArgs)):
        try:
            return kind, load_recipe(cls, path, overrides)
        except RecipeError as err:
            errors.append(f"as {kind}: {err}")
    raise ValueError(f"{path}: neither a pipeline recipe nor a cpt, sft or pref recipe ({'; '.join(errors)})")


def shape_of(model_args, override: str | None) -> tuple[ModelShape, str]:
    """The shape of a recipe's `model` section (or of --model), and where it came from."""
    from yunshan.models import preset_config, presets

    if override is not None:
        from yunshan.models.info import load_config

        return ModelShape.from_config(load_config(override)), f"--model {override}"
    if model_args.preset is not None:
        config = preset_config(model_args.preset, **(model_args.config_overrides or {}))
        return ModelShape.from_config(config), f"preset {model_args.preset}"
    folder = Path(model_args.name_or_path)
    if (folder / "config.json").is_file():
        from yunshan.models.info import load_config

        return ModelShape.from_config(load_config(folder)), str(folder)
    if folder.name in presets():
        # The recipe names a checkpoint not made yet (pangu-pi-7b, from `yunshan model upcycle`): its preset's shape.
        return ModelShape.from_config(preset_config(folder.name)), f"preset {folder.name} (no folder at {folder})"
    raise ValueError(f"model.name_or_path {model_args.name_or_path}: no config.json there and not a preset name; "
                     f"give --model PRESET or --model FOLDER (presets: {', '.join(presets())})")


def new_row_mode(lora, new_rows: int) -> str:
    """lora.new_token_training as yunshan cpt resolves it."""
    if not lora.enabled or new_rows == 0 or lora.new_token_training == "none":
        return "none"
    if lora.new_token_training == "auto":
        return "indices" if new_rows <= lora.indices_threshold else "rows"
    return lora.new_token_training


def stage_setup(section, shape: ModelShape, new_rows: int, kind: str, bits: int | None) -> StageSetup:
    from yunshan.training.arguments import LoraArgs

    train, lora = section.training, getattr(section, "lora", None) or LoraArgs()   # the stand-in base: full training
    if kind in ("cpt", "base"):
        seq_len, per_sample = section.data.seq_len, 1
    else:
        seq_len = section.data.max_length
        per_sample = 2 if kind == "pref" and section.method in PAIRED_METHODS else 1
    loss = {"plain": "plain"}.get(train.loss, "chunked")
    reference_copy = reference_forward = False
    if kind == "pref":
        loss = "chunked" if section.method in REFERENCE_METHODS else "plain"   # TRL's chunked head for DPO/KTO
        reference_forward = section.method in REFERENCE_METHODS and section.reference != "precompute"
        reference_copy = section.method in REFERENCE_METHODS and (
            section.reference == "copy" or (section.reference == "auto" and not lora.enabled))
    targets = lora.target_modules
    return StageSetup(
        micro_batch=train.per_device_batch_size, seq_len=seq_len, sequences_per_sample=per_sample,
        gradient_checkpointing=train.gradient_checkpointing, lora=lora.enabled, lora_r=lora.r,
        lora_targets=None if targets in (None, "all-linear") else tuple(targets), lora_dropout=lora.dropout,
        new_rows=new_rows, new_row_training=new_row_mode(lora, new_rows),
        quantization_bits=bits if lora.enabled else None,
        model_dtype=section.model.dtype if section.model.dtype in ("bfloat16", "float16") else "float32",
        precision="float32" if train.precision == "float32" else "bfloat16",
        loss=loss, loss_chunk_tokens=train.loss_chunk_tokens, attention=section.model.attn_implementation,
        reference_copy=reference_copy, reference_forward=reference_forward)


def stage_steps(section, kind: str) -> tuple[int | None, str]:
    train = section.training
    if train.max_steps is not None:
        return train.max_steps, "training.max_steps"
    if train.epochs is not None:
        return None, (f"training.epochs {train.epochs:g} over data the plan does not read: set "
                      f"{'sft.' if kind == 'sft' else ''}training.max_steps=N for the time")
    return train.total_steps(), "the default training.max_steps"


def planned_stages(kind: str, recipe, devices: int, model_override: str | None, bits: int | None) -> list[PlannedStage]:
    stages = []

    def add(name, section, shape, source, new_rows=0, kind_=None):
        steps, steps_from = stage_steps(section, kind_ or name)
        setup = stage_setup(section, shape, new_rows, kind_ or name, bits)
        per_step = section.training.per_device_batch_size * section.training.gradient_accumulation_steps
        stages.append(PlannedStage(name, source, shape, setup, steps, steps_from, per_step))

    if kind != "pipeline":
        shape, source = shape_of(recipe.model, model_override)
        new_rows, note = tokenizer_rows(recipe.tokenizer, shape)
        add(kind, recipe, shape.with_vocab(shape.vocab_size + new_rows), source, new_rows)
        stages[-1].notes = [note] if note else []
        return stages
    if recipe.base is not None and model_override is None:
        base = recipe.base
        config_overrides = {**(base.model.config_overrides or {}), "vocab_size": base.vocab_size}
        shape, source = shape_of(replace(base.model, config_overrides=config_overrides), None)
        add("base", base, shape, f"stand-in base: {source}", kind_="cpt")
    else:
        shape, source = shape_of(recipe.model, model_override)
    new_rows = 0
    if recipe.tokenizer_extension is not None and recipe.cpt is not None:
        from yunshan.tokenizer.extend import capped_new_tokens

        cpt = recipe.cpt
        budget = (cpt.training.total_steps() * cpt.training.per_device_batch_size
                  * cpt.training.gradient_accumulation_steps * devices * cpt.data.seq_len)
        new_rows, _ = capped_new_tokens(replace(recipe.tokenizer_extension, budget_tokens=budget))
    elif recipe.tokenizer_extension is not None:
        new_rows = recipe.tokenizer_extension.new_tokens
    extended = shape.with_vocab(shape.vocab_size + new_rows)
    for name, section in (("cpt", recipe.cpt), ("sft", recipe.sft), ("pref", recipe.preference)):
        if section is not None:
            # cpt grows the embeddings and trains the new rows; sft and pref start from its (already grown) model.
            add(name, section, extended, source, new_rows if name == "cpt" else 0)
    return stages


def tokenizer_rows(tokenizer_args, shape: ModelShape) -> tuple[int, str | None]:
    """New rows a stage recipe's own tokenizer adds to the model, and a note when it could not be read."""
    path = tokenizer_args.path
    if not path:
        return 0, None
    folder = Path(path)
    if not any((folder / name).is_file() for name in ("tokenizer.json", "tokenizer_config.json")):
        return 0, f"tokenizer.path {path}: no tokenizer there yet, so no new rows are counted"
    from transformers import AutoTokenizer

    return max(0, len(AutoTokenizer.from_pretrained(folder)) - shape.vocab_size), None


# ---------------------------------------------------------------- the plan


def engines_for(devices: int) -> tuple[str, ...]:
    return ("single",) if devices == 1 else ("ddp", "zero2", "zero3", "fsdp2")


def plan_stage(stage: PlannedStage, gpu: dict, devices: int, mfu: float) -> dict:
    limit = usable_bytes(gpu["memory_gib"])
    setup = stage.setup
    rows = []
    for engine in engines_for(devices):
        mem = estimate_memory(stage.shape, setup, engine, devices)
        largest = {gc: largest_micro_batch(stage.shape, replace(setup, gradient_checkpointing=gc), engine, devices,
                                           limit) for gc in (False, True)}
        rows.append({**mem.to_dict(), "fits": mem.peak <= limit,
                     "max_micro_batch": largest[setup.gradient_checkpointing],
                     "max_micro_batch_no_checkpointing": largest[False],
                     "max_micro_batch_checkpointing": largest[True]})
    recommendation = recommend(rows, setup)
    tokens = None
    if stage.steps is not None:
        tokens = stage.steps * stage.sequences_per_step_per_device * devices * setup.seq_len \
            * setup.sequences_per_sample
    flops = training_flops(stage.shape, setup, tokens) if tokens is not None else None
    seconds = seconds_for(flops["total"], gpu, devices, mfu) if flops else None
    return {"stage": stage.name, "model": stage.model, "shape": stage.shape.to_dict(),
            "setup": {**setup.__dict__, "lora_targets": list(setup.lora_targets or []) or None},
            "trainable_parameters": trainable_parameters(stage.shape, setup),
            "steps": stage.steps, "steps_from": stage.steps_from, "tokens": tokens, "flops": flops,
            "seconds": seconds, "notes": stage.notes, "usable_bytes": limit, "engines": rows,
            "recommendation": recommendation}


def recommend(rows: list[dict], setup: StageSetup) -> dict:
    """The engine to launch with: the first in PREFERENCE whose peak fits at the recipe's micro-batch; failing
    that, the first that fits with gradient checkpointing switched on; failing that, none."""
    by_engine = {r["engine"]: r for r in rows}
    ordered = [by_engine[e] for e in PREFERENCE if e in by_engine]
    for row in ordered:
        if row["fits"]:
            return {"engine": row["engine"], "gradient_checkpointing": setup.gradient_checkpointing,
                    "micro_batch": setup.micro_batch, "why": "fits at the recipe's micro-batch"}
    if not setup.gradient_checkpointing:
        for row in ordered:
            if row["max_micro_batch_checkpointing"] >= setup.micro_batch:
                return {"engine": row["engine"], "gradient_checkpointing": True, "micro_batch": setup.micro_batch,
                        "why": "fits at the recipe's micro-batch with training.gradient_checkpointing: true"}
    for row in ordered:
        best = max(row["max_micro_batch"], row["max_micro_batch_checkpointing"])
        if best >= 1:
            return {"engine": row["engine"], "gradient_checkpointing": row["max_micro_batch"] < 1 or
                    row["max_micro_batch_checkpointing"] > row["max_micro_batch"], "micro_batch": best,
                    "why": f"the recipe's micro-batch {setup.micro_batch} does not fit; {best} does (raise "
                           "gradient_accumulation_steps to keep the batch)"}
    return {"engine": None, "gradient_checkpointing": True, "micro_batch": 0,
            "why": "no engine fits one sequence on these devices: more devices, ZeRO-3 with offload, or LoRA/QLoRA"}


def plan_recipe(path: Path, overrides: list[str], gpu: dict, devices: int, mfu: float,
                model_override: str | None = None, bits: int | None = None) -> dict:
    kind, recipe = load_any_recipe(path, overrides or [])
    stages = planned_stages(kind, recipe, devices, model_override, bits)
    if not stages:
        raise ValueError(f"{path}: the recipe trains nothing (no base, cpt, sft or preference section)")
    return {"recipe": str(path), "kind": kind, "gpu": gpu, "devices": devices, "mfu": mfu,
            "stages": [plan_stage(s, gpu, devices, mfu) for s in stages]}


# ---------------------------------------------------------------- the table


def _count(n: float) -> str:
    for unit, size in (("T", 1e12), ("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.2f}{unit}"
    return f"{n:.0f}"


def format_plan(plan: dict) -> str:
    gpu, devices = plan["gpu"], plan["devices"]
    lines = [f"yunshan plan {plan['recipe']}: {devices} x {gpu['name']} ({gpu['memory_gib']:g} GiB, "
             f"{gpu['bf16_tflops']:g} dense bf16 TFLOP/s), time at MFU {plan['mfu']:.0%}"]
    for st in plan["stages"]:
        shape, setup = st["shape"], st["setup"]
        method = "full fine-tuning"
        if setup["lora"]:
            kind = f"QLoRA {setup['quantization_bits']}-bit" if setup["quantization_bits"] else "LoRA"
            method = f"{kind} r={setup['lora_r']}" + (
                f", new rows: {setup['new_row_training']}" if setup["new_rows"] else "")
        rows = f" ({setup['new_rows']:,} new rows)" if setup["new_rows"] else ""
        lines += ["", f"## {st['stage']}: {st['model']}, {_count(shape['parameters'])} parameters, vocabulary "
                      f"{shape['vocab_size']:,}{rows}; {method}, {_count(st['trainable_parameters'])} trained",
                  f"micro-batch {setup['micro_batch']} x {setup['seq_len']:,} tokens"
                  + (f" x {setup['sequences_per_sample']} (chosen, rejected)"
                     if setup["sequences_per_sample"] > 1 else "")
                  + f", gradient checkpointing {'on' if setup['gradient_checkpointing'] else 'off'}, "
                    f"{setup['loss']} loss, {setup['attention']} attention"]
        if st["tokens"] is not None:
            f = st["flops"]
            plural = "s" if devices > 1 else ""
            lines.append(f"{st['steps']:,} steps -> {_count(st['tokens'])} tokens on {devices} device{plural}; "
                         f"{f['total']:.3g} FLOPs (dense {f['dense']:.3g} + attention {f['attention']:.3g}"
                         + (f" + reference {f['reference']:.3g}" if f["reference"] else "")
                         + f"); {format_duration(st['seconds'])} at MFU {plan['mfu']:.0%}")
        else:
            lines.append(f"time: ? ({st['steps_from']})")
        lines += [f"note: {note}" for note in st["notes"]]
        gc = "on" if setup["gradient_checkpointing"] else "off"
        other = "off" if gc == "on" else "on"
        lines += ["", f"| engine | weights | grads | optimizer | activations (GC {gc}) | (GC {other}) | peak GiB | "
                      f"fits {st['usable_bytes'] / GiB:.0f} GiB | max micro-batch (GC off/on) |",
                  "|---|---:|---:|---:|---:|---:|---:|:---:|---:|"]
        for r in st["engines"]:
            gc_off, gc_on = r["max_micro_batch_no_checkpointing"], r["max_micro_batch_checkpointing"]
            lines.append(f"| {ENGINE_NAMES[r['engine']]} | {format_bytes(r['weights'] + r['gathered'])} | "
                         f"{format_bytes(r['gradients'])} | {format_bytes(r['optimizer'])} | "
                         f"{format_bytes(r['activations'])} | {format_bytes(r['activations_other'])} | "
                         f"{format_bytes(r['peak'])} | {'yes' if r['fits'] else 'no'} | {gc_off} / {gc_on} |")
        rec = st["recommendation"]
        if rec["engine"]:
            lines.append(f"-> {ENGINE_NAMES[rec['engine']]}, micro-batch {rec['micro_batch']}, gradient checkpointing "
                         f"{'on' if rec['gradient_checkpointing'] else 'off'}: {rec['why']}")
        else:
            lines.append(f"-> {rec['why']}")
    lines += ["", "GiB per device. weights include ZeRO-3/FSDP2's gathered layers; peak = the larger of the start of "
                  "the backward pass and the optimizer step; formulas and sources: docs/plan.md"]
    return "\n".join(lines)
