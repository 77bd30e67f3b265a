"""Jamba -> OTCE: an exact conversion of transformers' JambaForCausalLM into an OtceForCausalLM.

    python -c "from yunshan.models.otce.convert import from_jamba; from_jamba('path/to/jamba').save_pretrained('out')"

With SSM RoPE off, attention RoPE off, plain experts, SwiGLU feed-forwards, no Expresser and Jamba's layer layout,
an OTCE decoder computes exactly what a Jamba decoder computes; this is the parity the tests check. The fields
that must be mapped (everything else keeps its name and meaning, Jamba's `mamba_*` names included):

- attn_layer_period/offset and expert_layer_period/offset -> `layer_pattern` (A where i % period == offset, E
  likewise), e.g. "SM SE SM SE AM SE SM SE";
- Jamba's SSM and attention carry no positions -> `mamba_rope=False`, `attention_rope=False`;
- Jamba's MLPs and experts are SwiGLU -> `ffn_up_act="identity"` (OTCE's default is SwiTanhDGLU, "tanh");
- routed experts of width intermediate_size, nothing shared -> `expert_type="plain"`,
  `expert_intermediate_size=intermediate_size`, `shared_expert_intermediate_size=0`;
- the last layer is an ordinary block -> `use_expresser=False`;
- `hidden_act` must be "silu": OTCE's convolution activation and z gate are SiLU (Jamba uses hidden_act there);
- weights: `experts.gate_up_proj` (E, 2I, d) -> `experts.i.gate_proj.weight` = [:I] and `experts.i.up_proj.weight`
  = [I:]; `experts.down_proj` (E, d, I) -> `experts.i.down_proj.weight`; `model.final_layernorm` -> `model.norm`;
  every other key is the same.

Unlike the model files, this module may import the rest of transformers' model zoo (it is not shipped as remote
code).
"""

from __future__ import annotations

import os
from pathlib import Path

import torch
from transformers import JambaConfig, JambaForCausalLM, PreTrainedModel

from .configuration_otce import OtceConfig
from .modeling_otce import OtceForCausalLM

# Config fields a Jamba config shares with OTCE, copied as they are.
SHARED_FIELDS = (
    "vocab_size", "hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads",
    "hidden_act", "initializer_range", "rms_norm_eps", "use_cache", "pad_token_id", "bos_token_id", "eos_token_id",
    "tie_word_embeddings", "max_position_embeddings", "attention_dropout", "num_experts", "num_experts_per_tok",
    "router_aux_loss_coef", "output_router_logits", "mamba_d_state", "mamba_d_conv", "mamba_expand",
    "mamba_dt_rank", "mamba_conv_bias", "mamba_proj_bias",
)


def jamba_layer_pattern(config: JambaConfig) -> str:
    """Jamba's period/offset layout as an OTCE layer pattern, e.g. "SM SE SM SE AM SE SM SE"."""
    mixers = ["A" if kind == "attention" else "S" for kind in config.layers_block_type]
    ffns = ["E" if n > 1 else "M" for n in config.layers_num_experts]
    return " ".join(m + f for m, f in zip(mixers, ffns))


def otce_config_from_jamba(jamba_config: JambaConfig, **otce_fields) -> OtceConfig:
    """The OtceConfig that computes what `jamba_config` computes (see the table in this module's docstring)."""
    if getattr(jamba_config, "model_type", None) != "jamba":
        raise ValueError(f"expected a Jamba config (model_type 'jamba'), got model_type {jamba_config.model_type!r}")
    if jamba_config.hidden_act != "silu":
        raise ValueError(
            f"Jamba hidden_act {jamba_config.hidden_act!r} cannot be converted: OTCE's SSM uses SiLU after the "
            "convolution and on the z gate; only 'silu' Jamba models convert exactly"
        )
    fields = {name: getattr(jamba_config, name) for name in SHARED_FIELDS}
    fields.update(
        layer_pattern=jamba_layer_pattern(jamba_config), use_expresser=False, mamba_rope=False,
        attention_rope=False, mamba_use_conv=True, mamba_use_d=True, ffn_up_act="identity", expert_type="plain",
        expert_intermediate_size=jamba_config.intermediate_size, shared_expert_intermediate_size=0,
    )
    fields.update(otce_fields)
    return OtceConfig(**fields)


def otce_state_dict_from_jamba(jamba_state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """Rename and split a JambaForCausalLM state dict into OtceForCausalLM keys."""
    out = {}
    for key, value in jamba_state.items():
        if key == "model.final_layernorm.weight":
            out["model.norm.weight"] = value
        elif key.endswith(".feed_forward.experts.gate_up_proj"):
            prefix = key[: -len("gate_up_proj")]
            half = value.shape[1] // 2
            for e in range(value.shape[0]):
                out[f"{prefix}{e}.gate_proj.weight"] = value[e, :half]
                out[f"{prefix}{e}.up_proj.weight"] = value[e, half:]
        elif key.endswith(".feed_forward.experts.down_proj"):
            prefix = key[: -len("down_proj")]
            for e in range(value.shape[0]):
                out[f"{prefix}{e}.down_proj.weight"] = value[e]
        else:
            out[key] = value
    return out


@torch.no_grad()
def from_jamba(
    model_or_path: PreTrainedModel | str | os.PathLike, dtype: torch.dtype = torch.float32, **otce_fields
) -> OtceForCausalLM:
    """An OtceForCausalLM with the weights of a JambaForCausalLM (a model or a save_pretrained folder) and the
    same logits. Extra `otce_fields` override the mapped config (then the logits are no longer Jamba's)."""
    if isinstance(model_or_path, JambaForCausalLM):
        jamba = model_or_path
    elif isinstance(model_or_path, PreTrainedModel):
        raise ValueError(f"expected a JambaForCausalLM, got {type(model_or_path).__name__}")
    else:
        path = Path(model_or_path)
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"{path}: no config.json; expected a JambaForCausalLM folder (save_pretrained)")
        jamba = JambaForCausalLM.from_pretrained(path, dtype=dtype)
    config = otce_config_from_jamba(jamba.config, **otce_fields)
    model = OtceForCausalLM(config).to(dtype)
    state = otce_state_dict_from_jamba(jamba.state_dict())
    missing, unexpected = model.load_state_dict(state, strict=False)
    tied = {"lm_head.weight"} if config.tie_word_embeddings else set()
    if set(missing) - tied or unexpected:
        raise ValueError(f"Jamba -> OTCE weight mapping incomplete: missing {missing}, unexpected {unexpected}")
    if config.tie_word_embeddings:
        model.tie_weights()
    return model.eval()


__all__ = ["from_jamba", "jamba_layer_pattern", "otce_config_from_jamba", "otce_state_dict_from_jamba"]
