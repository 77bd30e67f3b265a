"""Parameter counts by part for any causal LM config, on the meta device (a 7B config allocates nothing).

    yunshan model info pangu-pi-7b
    yunshan model info otce-1b
    yunshan model info path/to/model_folder
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import torch
from transformers import AutoConfig, AutoModelForCausalLM, PreTrainedConfig

from . import preset_config, presets

PARTS = (
    "embeddings", "attention", "ssm", "ffn", "router", "experts", "shared_experts", "expresser", "siaf",
    "neighbor_conv", "shortcuts", "norms", "lm_head", "other",
)
# OTCE's Expresser parts sit directly on the layer (`layers.N.dense`); other models' `attention.dense` does not match.
EXPRESSER_NAME = re.compile(r"\.layers\.\d+\.(dense|projection|pre_dense_layernorm)\.")


def part_of(name: str) -> str:
    """The part a parameter belongs to, from its transformers-style name."""
    if "embed_tokens" in name or name.endswith("wte.weight"):
        return "embeddings"
    if ".act_fn." in name:
        return "siaf"
    if ".neighbor_conv." in name:
        return "neighbor_conv"
    if ".aug_shortcut." in name:
        return "shortcuts"
    if ".mamba." in name:  # the whole selective SSM block, its inner RMSNorms included
        return "ssm"
    if ".router." in name:
        return "router"
    if ".experts." in name:
        return "experts"
    if ".shared_up_proj." in name or ".shared_expert." in name:
        return "shared_experts"
    if EXPRESSER_NAME.search(name):
        return "expresser"
    if ".self_attn." in name or ".attention." in name or ".attn." in name:
        return "attention"
    if ".mlp." in name or ".feed_forward." in name:
        return "ffn"
    if "norm" in name:
        return "norms"
    if name.startswith("lm_head"):
        return "lm_head"
    return "other"


def load_config(preset_or_path: str | os.PathLike) -> PreTrainedConfig:
    """A config from a preset name (PanGu-π or OTCE) or a model folder holding config.json."""
    known = presets()
    if str(preset_or_path) in known:
        return preset_config(str(preset_or_path))
    path = Path(preset_or_path)
    if not (path / "config.json").is_file():
        raise FileNotFoundError(
            f"{preset_or_path}: neither a preset ({', '.join(known)}) nor a folder with config.json"
        )
    from yunshan.loading.remote_code import refuse_remote_code

    with refuse_remote_code(path, None, "yunshan model info reads only configs that transformers or yunshan define "
                                        "and never runs a folder's code"):
        return AutoConfig.from_pretrained(path, trust_remote_code=False)


def count_parameters_by_part(config: PreTrainedConfig) -> dict[str, int]:
    """Parameter counts by part plus `total` and `non_embedding`; a tied lm_head counts once (as embeddings)."""
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    parts = dict.fromkeys(PARTS, 0)
    for name, param in model.named_parameters():  # named_parameters de-duplicates tied weights
        parts[part_of(name)] += param.numel()
    parts["total"] = sum(parts[p] for p in PARTS)
    parts["non_embedding"] = parts["total"] - parts["embeddings"] - parts["lm_head"]
    return parts


def format_count(n: int) -> str:
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.2f}{unit}"
    return str(n)


def format_parameter_table(name: str, parts: dict[str, int]) -> str:
    lines = [f"{name}: {format_count(parts['total'])} parameters ({parts['total']:,})", "",
             "| part | parameters | share |", "|---|---:|---:|"]
    for part in PARTS:
        if parts[part]:
            lines.append(f"| {part} | {parts[part]:,} | {100 * parts[part] / parts['total']:.2f}% |")
    lines.append(f"| non-embedding | {parts['non_embedding']:,} | "
                 f"{100 * parts['non_embedding'] / parts['total']:.2f}% |")
    return "\n".join(lines)
