"""Loading a model and tokenizer for training: any HF causal LM or a PanGu-π built from a preset; precision;
growing the embeddings for an extended tokenizer; LoRA (with the new embedding rows trainable).

Shared by continual pretraining and SFT (a stable piece, so shared rather than copied).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import torch

logger = logging.getLogger("yunshan")

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")


def resolve_precision(precision: str) -> str:
    """`auto` -> bf16 where the hardware has fast bf16 (a CUDA GPU that supports it), else fp32.

    CPUs without AMX run bf16 matmuls far slower than fp32, so auto never picks bf16 on a CPU."""
    if precision not in ("auto", "fp32", "bf16", "fp16"):
        raise ValueError(f"training.precision must be auto, fp32, bf16 or fp16, got {precision!r}")
    if precision != "auto":
        return precision
    if torch.cuda.is_available() and torch.cuda.is_bf16_supported():
        return "bf16"
    return "fp32"


def has_tokenizer(path: str | os.PathLike) -> bool:
    return any((Path(path) / name).is_file() for name in TOKENIZER_FILES)


def load_tokenizer(path: str | os.PathLike, trust_remote_code: bool = False):
    from transformers import AutoTokenizer

    if not Path(path).is_dir() or not has_tokenizer(path):
        raise FileNotFoundError(f"{path}: no tokenizer files ({', '.join(TOKENIZER_FILES)}) in this folder")
    tokenizer = AutoTokenizer.from_pretrained(path, trust_remote_code=trust_remote_code)
    if tokenizer.eos_token_id is None:
        raise ValueError(f"{path}: the tokenizer has no eos_token; set one (documents are separated by EOS)")
    return tokenizer


def load_model(model_args, vocab_size: int | None = None):
    """A causal LM from `model.name_or_path` (any HF model folder, offline) or `model.preset` (a PanGu-π preset,
    built from scratch with `config_overrides`; vocab_size defaults to the tokenizer's)."""
    from transformers import AutoModelForCausalLM

    import yunshan  # noqa: F401  (registers PanGu-π)

    dtype = {"auto": "auto", "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[
        model_args.dtype
    ]
    if model_args.name_or_path:
        path = model_args.name_or_path
        if os.path.isdir(path) and not (Path(path) / "config.json").is_file():
            raise FileNotFoundError(f"{path}: no config.json; expected a model folder written by save_pretrained")
        model = AutoModelForCausalLM.from_pretrained(
            path, dtype=torch.float32 if dtype == "auto" else dtype,
            attn_implementation=model_args.attn_implementation, trust_remote_code=model_args.trust_remote_code,
        )
        return model
    config = preset_config(model_args, vocab_size)
    config._attn_implementation = model_args.attn_implementation
    torch.manual_seed(model_args.init_seed)
    return AutoModelForCausalLM.from_config(config)


def preset_config(model_args, vocab_size: int | None = None):
    """The config of a named preset (PanGu-π: pangu-pi-7b, pangu-pi-1b, tiny; OTCE: otce-1b, otce-281m,
    otce-tiny) with the recipe's overrides; vocab_size defaults to the tokenizer's."""
    from yunshan.models.otce import OTCE_PRESETS, OtceConfig
    from yunshan.models.pangu_pi import PANGU_PI_PRESETS, PanguPiConfig

    overrides = dict(model_args.config_overrides or {})
    if vocab_size is not None:
        overrides.setdefault("vocab_size", vocab_size)
    if model_args.preset in OTCE_PRESETS:
        return OtceConfig.from_preset(model_args.preset, **overrides)
    if model_args.preset in PANGU_PI_PRESETS:
        return PanguPiConfig.from_preset(model_args.preset, **overrides)
    raise ValueError(f"model.preset {model_args.preset!r} is not a preset; valid: "
                     f"{', '.join([*PANGU_PI_PRESETS, *OTCE_PRESETS])}")


def describe_model(model_args, vocab_size: int | None = None) -> dict:
    """Class and parameter count of the model a recipe names, from its config only (meta device, no weights)."""
    from transformers import AutoConfig

    import yunshan  # noqa: F401
    from yunshan.models.info import count_parameters_by_part

    if model_args.name_or_path:
        path = Path(model_args.name_or_path)
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"{path}: no config.json; expected a model folder written by save_pretrained")
        config = AutoConfig.from_pretrained(path, trust_remote_code=model_args.trust_remote_code)
    else:
        config = preset_config(model_args, vocab_size)
    parts = count_parameters_by_part(config)
    return {"model_type": config.model_type, "architectures": getattr(config, "architectures", None),
            "parameters": parts["total"], "vocab_size": config.vocab_size}


def grow_embeddings(model, base_tokenizer, tokenizer, init: str = "subword_mean") -> list[int]:
    """Give the model rows for the ids an extended tokenizer adds to the model's own (base) tokenizer.

    New rows start as the mean of the base-tokenizer pieces of their text (yunshan.tokenizer.resize_embeddings),
    also when the matrix was already padded past the new size. Returns the new token ids (empty if none)."""
    rows = model.get_input_embeddings().weight.shape[0]
    if base_tokenizer is None:
        if len(tokenizer) <= rows:
            return []
        raise ValueError(
            f"the tokenizer has {len(tokenizer)} tokens but the model only {rows} embedding rows; subword-mean "
            "initialisation needs the model's original tokenizer: set tokenizer.base_path"
        )
    if len(tokenizer) <= len(base_tokenizer):
        return []
    from yunshan.tokenizer import resize_embeddings

    info = resize_embeddings(model, base_tokenizer, tokenizer, init=init)
    return list(range(info["base_size"], info["new_size"]))


def apply_lora(model, lora_args, new_token_ids: list[int]):
    """Wrap with PEFT LoRA. New vocabulary rows train too: all rows of embed_tokens/lm_head for a large
    extension (modules_to_save), only the new rows (trainable_token_indices) for a few tokens."""
    from peft import LoraConfig, get_peft_model

    target = lora_args.target_modules or "all-linear"
    embed_name = _module_name(model, model.get_input_embeddings())
    head = model.get_output_embeddings()
    head_name = _module_name(model, head) if head is not None else None
    tied = head is not None and head.weight is model.get_input_embeddings().weight
    extra = {}
    mode = lora_args.new_token_training
    if new_token_ids and mode != "none":
        if mode == "auto":
            mode = "indices" if len(new_token_ids) <= lora_args.indices_threshold else "rows"
        if mode == "indices":
            indices = {embed_name: new_token_ids}
            if head_name and not tied:
                indices[head_name] = new_token_ids
            extra["trainable_token_indices"] = indices
        else:
            extra["modules_to_save"] = [embed_name] + ([head_name] if head_name and not tied else [])
    config = LoraConfig(
        r=lora_args.r, lora_alpha=lora_args.alpha, lora_dropout=lora_args.dropout, target_modules=target,
        task_type="CAUSAL_LM", **extra,
    )
    return get_peft_model(model, config)


def _module_name(model, module) -> str:
    for name, m in model.named_modules():
        if m is module:
            return name.split(".")[-1]
    raise ValueError("module not found in model")


def trainable_summary(model) -> str:
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    total = sum(p.numel() for p in model.parameters())
    return f"{trainable:,} trainable of {total:,} parameters ({100 * trainable / max(total, 1):.2f}%)"
