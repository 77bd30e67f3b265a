"""LLaMA -> PanGu-π: exact conversion and function-preserving upcycling.

    yunshan model upcycle path/to/llama out/pangu-pi --siaf-terms 2 --aug-shortcuts 1

With n = 1 and T = 0 a PanGu-π decoder *is* a LLaMA decoder, so LLaMA weights copied over give the same logits.
`from_llama` goes further and adds the PanGu-π parts without changing the function at step 0 (docs/pangu-pi.md):
SIAF term 1 gets a = 1, b = 0 (the LLaMA activation); every further term a = 0, b = 0 (act(0) = 0 for SiLU, yet
d/da = u * act'(0) is non-zero, so the term learns); each augmented shortcut gets a random W1 and W2 = 0 (W2 then
receives gradient at once, W1 from the first update on); the optional neighbour convolution starts as identity.

Unlike the model files, this module may import the rest of yunshan (it is not shipped as remote code).
"""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedModel

from .configuration_pangu_pi import SIAF_ACTIVATIONS, PanguPiConfig
from .modeling_pangu_pi import PanguPiForCausalLM

# Config fields a LLaMA config shares with PanGu-π, copied as they are.
SHARED_FIELDS = (
    "vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
    "num_key_value_heads", "head_dim", "hidden_act", "max_position_embeddings", "initializer_range",
    "rms_norm_eps", "use_cache", "pad_token_id", "bos_token_id", "eos_token_id", "tie_word_embeddings",
    "rope_parameters", "attention_bias", "attention_dropout", "mlp_bias",
)
TOKENIZER_FILES = (
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model",
    "added_tokens.json", "chat_template.jinja", "vocab.json", "merges.txt", "generation_config.json",
)


def pangu_pi_config_from_llama(llama_config: LlamaConfig, **pangu_fields) -> PanguPiConfig:
    """A PanguPiConfig with the LLaMA config's shared fields and the given PanGu-π fields."""
    if getattr(llama_config, "model_type", None) != "llama":
        raise ValueError(
            f"expected a LLaMA config (model_type 'llama'), got model_type {llama_config.model_type!r}; "
            "yunshan converts LlamaForCausalLM checkpoints only"
        )
    if llama_config.hidden_act not in SIAF_ACTIVATIONS:
        raise ValueError(
            f"LLaMA hidden_act {llama_config.hidden_act!r} has no PanGu-π equivalent; valid: {SIAF_ACTIVATIONS}"
        )
    fields = {name: getattr(llama_config, name) for name in SHARED_FIELDS if hasattr(llama_config, name)}
    if fields.get("rope_parameters") is not None:
        fields["rope_parameters"] = dict(fields["rope_parameters"])
    fields.update(pangu_fields)
    return PanguPiConfig(**fields)


def load_llama(model_or_path: PreTrainedModel | str | os.PathLike, dtype: torch.dtype = torch.float32):
    if isinstance(model_or_path, LlamaForCausalLM):
        return model_or_path
    if isinstance(model_or_path, PreTrainedModel):
        raise ValueError(f"expected a LlamaForCausalLM, got {type(model_or_path).__name__}")
    path = Path(model_or_path)
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"{path}: no config.json; expected a LlamaForCausalLM folder (save_pretrained)")
    return LlamaForCausalLM.from_pretrained(path, dtype=dtype)


@torch.no_grad()
def from_llama(
    model_or_path: PreTrainedModel | str | os.PathLike,
    siaf_terms: int = 2,
    aug_shortcuts: int = 1,
    aug_reduction: int = 32,
    siaf_neighbor_kernel: int = 1,
    seed: int = 0,
    **pangu_fields,
) -> PanguPiForCausalLM:
    """Build a PanGu-π model from a LLaMA checkpoint whose logits equal the LLaMA's at step 0.

    Args:
        model_or_path: a `LlamaForCausalLM` or a folder it was saved to.
        siaf_terms: n, the SIAF terms (1 keeps the plain activation).
        aug_shortcuts: T, augmented shortcuts per layer (0 = none).
        aug_reduction: r, bottleneck reduction of the shortcuts (clipped to the hidden size).
        siaf_neighbor_kernel: kernel of the optional neighbour convolution (1 = off).
        seed: seed for the shortcuts' random W1.
        pangu_fields: any other PanguPiConfig field (e.g. `siaf_activations`).
    """
    if pangu_fields.get("siaf_scale_by_n") and siaf_terms > 1:
        # (1/n) * act(a u + b) cannot equal act(u) for any a, b: the function would change at step 0.
        raise ValueError("siaf_scale_by_n=True cannot be upcycled without changing the function; leave it False")
    llama = load_llama(model_or_path)
    config = pangu_pi_config_from_llama(
        llama.config,
        siaf_terms=siaf_terms,
        aug_shortcuts=aug_shortcuts,
        aug_reduction=min(aug_reduction, llama.config.hidden_size),
        siaf_neighbor_kernel=siaf_neighbor_kernel,
        **pangu_fields,
    )
    config.architectures = ["PanguPiForCausalLM"]
    dtype = next(llama.parameters()).dtype
    model = PanguPiForCausalLM(config).to(dtype)
    missing, unexpected = model.load_state_dict(llama.state_dict(), strict=False)
    if unexpected:
        raise ValueError(f"LLaMA weights with no PanGu-π counterpart: {unexpected[:5]}")
    generator = torch.Generator().manual_seed(seed)
    for layer in model.model.layers:
        siaf = layer.mlp.act_fn
        siaf.weight.zero_()
        siaf.bias.zero_()
        siaf.weight[0].fill_(1.0)
        if layer.mlp.neighbor_conv is not None:
            layer.mlp.neighbor_conv.weight.zero_()
            layer.mlp.neighbor_conv.weight[:, -1] = 1.0
        if layer.aug_shortcut is not None:
            fc1 = layer.aug_shortcut.fc1
            std = config.initializer_range
            fc1.weight.copy_(torch.randn(fc1.weight.shape, generator=generator) * std)
            layer.aug_shortcut.fc2.weight.zero_()
            for linear in (fc1, layer.aug_shortcut.fc2):
                if linear.bias is not None:
                    linear.bias.zero_()
    expected_missing = {
        name for name, _ in model.named_parameters()
        if ".act_fn." in name or ".aug_shortcut." in name or ".neighbor_conv." in name
    }
    if config.tie_word_embeddings:
        expected_missing.add("lm_head.weight")
    left = set(missing) - expected_missing
    if left:
        raise ValueError(f"PanGu-π parameters not filled from the LLaMA checkpoint: {sorted(left)[:5]}")
    if config.tie_word_embeddings:
        model.tie_weights()
    if llama.generation_config is not None:
        model.generation_config = llama.generation_config
    return model


def upcycle_checkpoint(src: str | os.PathLike, dst: str | os.PathLike, **kwargs) -> PanguPiForCausalLM:
    """`from_llama` on a saved folder, saved to `dst` with remote code and the source's tokenizer files."""
    dst = Path(dst)
    model = from_llama(src, **kwargs)
    dst.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(dst)
    for name in TOKENIZER_FILES:
        if (Path(src) / name).is_file() and not (dst / name).exists():
            shutil.copy2(Path(src) / name, dst / name)
    return model


# ---------------------------------------------------------------- PanGu-π -> LLaMA (serving-friendly export)

# PanGu-π activation name -> the same function's name in transformers' ACT2FN (what LlamaConfig.hidden_act takes).
LLAMA_ACTIVATIONS = {"silu": "silu", "gelu": "gelu", "gelu_tanh": "gelu_pytorch_tanh", "relu": "relu",
                     "tanh": "tanh", "sigmoid": "sigmoid", "mish": "mish", "identity": "linear"}
_ACT_FN = re.compile(r"^(model\.layers\.\d+\.mlp)\.act_fn\.(weight|bias)$")


def llama_equivalence_problems(config: dict) -> list[str]:
    """Why a PanGu-π config (config.json as a dict) is not exactly a LLaMA; [] when it is.

    With n = 1 SIAF term, T = 0 augmented shortcuts and no neighbour convolution, a PanGu-π decoder computes
    act(a * gate(x) + b) * up(x): a LLaMA MLP whose gate rows are scaled by a and whose gate bias is b."""
    if config.get("model_type") != "pangu_pi":
        return [f"model_type is {config.get('model_type')!r}, not 'pangu_pi' (--as-llama converts a Llama-equivalent "
                "PanGu-π; other models export as they are, without it)"]
    problems = []
    if config.get("siaf_terms", 2) != 1:
        problems.append(f"siaf_terms={config.get('siaf_terms', 2)}: a series of several activations has no LLaMA "
                        "counterpart (needs siaf_terms=1)")
    if config.get("aug_shortcuts", 1) != 0:
        problems.append(f"aug_shortcuts={config.get('aug_shortcuts', 1)}: augmented shortcuts beside attention are "
                        "layers a LLaMA has not (needs aug_shortcuts=0)")
    if config.get("siaf_neighbor_kernel", 1) != 1:
        problems.append(f"siaf_neighbor_kernel={config['siaf_neighbor_kernel']}: the neighbour convolution has no "
                        "LLaMA counterpart (needs siaf_neighbor_kernel=1)")
    acts = config.get("siaf_activations") or [config.get("hidden_act", "silu")]
    if acts[0] not in LLAMA_ACTIVATIONS:
        problems.append(f"siaf_activations={acts}: no LLaMA activation of that name (valid: "
                        f"{', '.join(LLAMA_ACTIVATIONS)})")
    return problems


class LlamaExport:
    """A Llama-equivalent PanGu-π written as LlamaForCausalLM, tensor by tensor (yunshan export --as-llama).

    Each layer's SIAF term act(a * u + b) folds into the MLP: gate_proj rows are multiplied by a (in float32, then
    back to the stored dtype) and b becomes gate_proj's bias. A trained b is not zero, so then the LLaMA config says
    mlp_bias=true (LLaMA's one switch for MLP biases) and up_proj / down_proj get zero biases, which change nothing;
    an untrained b = 0 needs no biases. The act_fn tensors are dropped. Every other tensor keeps its name and value.

    Args:
        config: the PanGu-π config.json as a dict (must pass llama_equivalence_problems).
        layout: {tensor name: (file, safetensors dtype, shape)} of the PanGu-π weights.
        read: tensor name -> torch tensor, for the small act_fn tensors read up front.
    """

    def __init__(self, config: dict, layout: dict, read):
        problems = llama_equivalence_problems(config)
        if problems:
            raise ValueError("; ".join(problems))
        self.config = config
        self.scale, self.shift = {}, {}  # "model.layers.N.mlp" -> a, b (float32 vectors)
        for name in layout:
            match = _ACT_FN.match(name)
            if match:
                target = self.scale if match.group(2) == "weight" else self.shift
                target[match.group(1)] = read(name).float().reshape(-1)
        mlps = {n.rsplit(".", 2)[0] for n in layout if n.endswith(".mlp.gate_proj.weight")}
        if set(self.scale) != mlps or set(self.shift) != mlps:
            raise ValueError(f"the weights hold SIAF parameters for {len(self.scale)} of {len(mlps)} MLPs; expected "
                             "model.layers.N.mlp.act_fn.weight and .bias for every layer")
        had_bias = bool(config.get("mlp_bias"))
        self.mlp_bias = had_bias or any(bool(b.abs().max() > 0) for b in self.shift.values())
        self.new_biases = self.mlp_bias and not had_bias
        self.layout = {}  # output name -> (source file or None, dtype, shape)
        for name, (path, dtype, shape) in layout.items():
            if _ACT_FN.match(name):
                continue
            self.layout[name] = (path, dtype, shape)
            if self.new_biases and name.endswith((".mlp.gate_proj.weight", ".mlp.up_proj.weight",
                                                  ".mlp.down_proj.weight")):
                self.layout[name[: -len("weight")] + "bias"] = (None, dtype, [shape[0]])

    def llama_config(self) -> dict:
        """config.json of the LlamaForCausalLM (shared fields as they are, no auto_map, no PanGu-π fields)."""
        fields = {k: self.config[k] for k in SHARED_FIELDS if k in self.config}
        acts = self.config.get("siaf_activations") or [self.config.get("hidden_act", "silu")]
        fields.update(hidden_act=LLAMA_ACTIVATIONS[acts[0]], mlp_bias=self.mlp_bias)
        config = LlamaConfig(**fields)
        config.architectures = ["LlamaForCausalLM"]
        out = config.to_dict()
        for key in ("dtype", "torch_dtype"):
            if key in self.config:
                out[key] = self.config[key]
        return out

    def order(self) -> dict[str, int]:
        """Position of every tensor as LlamaForCausalLM's state_dict orders (and so save_pretrained shards) them."""
        with torch.device("meta"):
            model = LlamaForCausalLM(LlamaConfig(**{k: v for k, v in self.llama_config().items()
                                                    if k not in ("architectures", "model_type")}))
        return {name: i for i, name in enumerate(model.state_dict())}

    def tensor(self, name: str, read) -> torch.Tensor:
        """The output tensor `name`; `read(source name)` gives a PanGu-π tensor."""
        mlp, *leaf = name.rsplit(".", 2)  # "model.layers.N.mlp", ["gate_proj", "weight"]
        if self.layout[name][0] is None:  # a new zero bias (up_proj, down_proj) or gate_proj's = b
            if leaf == ["gate_proj", "bias"]:
                return self.shift[mlp].to(read_dtype(self.layout[name][1]))
            return torch.zeros(self.layout[name][2], dtype=read_dtype(self.layout[name][1]))
        tensor = read(name)
        if leaf == ["gate_proj", "weight"]:
            return (tensor.float() * self.scale[mlp][:, None]).to(tensor.dtype)
        if leaf == ["gate_proj", "bias"]:  # the checkpoint had mlp_bias: act(a * (W u + g) + b)
            return (tensor.float() * self.scale[mlp] + self.shift[mlp]).to(tensor.dtype)
        return tensor


def read_dtype(safetensors_dtype: str) -> torch.dtype:
    return {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16, "F64": torch.float64}[safetensors_dtype]
