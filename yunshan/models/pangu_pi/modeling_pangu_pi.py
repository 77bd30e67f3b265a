"""PanGu-π causal language model, written like transformers' Llama and read top to bottom.

Norm, rotary embedding, series informed activation (SIAF), neighbour convolution, MLP, attention, augmented
shortcut, decoder layer, pretrained base, model, causal LM. The formulas and initialisations are the decided
reading of the PanGu-π paper in docs/pangu-pi.md:

    h   = x + Attn(RMSNorm(x)) + sum_i W2_i GELU(W1_i RMSNorm(x))          (augmented shortcuts, Eq. 4)
    out = h + W_down( Conv( SIAF(W_gate z) ) * (W_up z) ),  z = RMSNorm(h)  (SIAF on the gate branch, Eq. 7/9)
    SIAF(u) = sum_{i=1..n} act_i(a_i * u + b_i)

No public PanGu-π modeling code exists, so this file is written by hand; it imports only torch and transformers
(and its sibling configuration file) so that `save_pretrained` ships it as remote code.
"""

import inspect
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn
from transformers import initialization as init
from transformers.cache_utils import Cache, DynamicCache
from transformers.generation import GenerationMixin
from transformers.masking_utils import create_causal_mask
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import BaseModelOutputWithPast, CausalLMOutputWithPast
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS, dynamic_rope_update
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS, PreTrainedModel
from transformers.utils import can_return_tuple
from transformers.utils.generic import merge_with_config_defaults
from transformers.utils.output_capturing import capture_outputs

from .configuration_pangu_pi import PanguPiConfig


# transformers 5.24 renamed the KV-cache argument and output field `past_key_values` to `cache` (the old name is
# deprecated there): the model accepts either and hands the cache on under the name this version reads, so that
# `generate()` keeps its cache with 5.23 and with 5.24+.
CACHE_NAME = "cache" if "cache" in inspect.signature(create_causal_mask).parameters else "past_key_values"


class PanguPiRMSNorm(nn.Module):
    def __init__(self, hidden_size: int, eps: float = 1e-6) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)

    def extra_repr(self):
        return f"{tuple(self.weight.shape)}, eps={self.variance_epsilon}"


class PanguPiRotaryEmbedding(nn.Module):
    """RoPE with every scaling type transformers knows (`rope_parameters["rope_type"]`: default, linear, dynamic,
    yarn, longrope, llama3)."""

    def __init__(self, config: PanguPiConfig):
        super().__init__()
        self.max_seq_len_cached = config.max_position_embeddings
        self.original_max_seq_len = config.max_position_embeddings
        self.config = config
        self.rope_type = self.config.rope_parameters["rope_type"]
        rope_init_fn: Callable = self.compute_default_rope_parameters
        if self.rope_type != "default":
            rope_init_fn = ROPE_INIT_FUNCTIONS[self.rope_type]
        inv_freq, self.attention_scaling = rope_init_fn(self.config)
        self.inv_freq = nn.Buffer(inv_freq, persistent=False)
        self.original_inv_freq = nn.Buffer(inv_freq.clone(), persistent=False)

    @staticmethod
    def compute_default_rope_parameters(config: PanguPiConfig, **kwargs) -> tuple[torch.Tensor, float]:
        base = config.rope_parameters["rope_theta"]
        dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float) / dim))
        return inv_freq, 1.0

    @torch.no_grad()
    @dynamic_rope_update
    def forward(self, x, position_ids):
        freqs = position_ids[..., None].float() * self.inv_freq.to(device=x.device, dtype=torch.float)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos() * self.attention_scaling
        sin = emb.sin() * self.attention_scaling
        return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


# Activations by the names PanguPiConfig accepts. Plain torch functions, so the file needs nothing else.
SIAF_FUNCTIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "silu": F.silu,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "mish": F.mish,
    "identity": lambda x: x,
}


# d act(z) / dz times an incoming gradient, for the activations whose backward has a fused aten kernel.
SIAF_BACKWARDS: dict[str, Callable[[torch.Tensor, torch.Tensor], torch.Tensor]] = {
    "silu": lambda grad, z: torch.ops.aten.silu_backward(grad, z),
    "gelu": lambda grad, z: torch.ops.aten.gelu_backward(grad, z, approximate="none"),
    "gelu_tanh": lambda grad, z: torch.ops.aten.gelu_backward(grad, z, approximate="tanh"),
    "relu": lambda grad, z: torch.ops.aten.threshold_backward(grad, z, 0),
    "identity": lambda grad, z: grad.clone(),
}


class _SeriesActivationFunction(torch.autograd.Function):
    """sum_i act_i(a_i * u + b_i) with a hand-written backward, for training with n > 1 terms.

    Autograd's graph for the same sum keeps one (tokens, n, channels) tensor per step and reduces it three times in
    the backward; this one keeps the n pre-activations, calls each activation's fused backward once and reduces
    the parameter gradients per term: about 20% less time for the activation's forward and backward on CPU, where
    these memory-bound passes are a visible share of a training step (benchmarks/model_speed.py). Gradients equal
    autograd's (tests/models/test_pangu_pi.py checks them in float64).
    """

    @staticmethod
    def forward(ctx, u, weight, bias, names):
        pre = [torch.addcmul(bias[i], u, weight[i]) for i in range(len(names))]
        out = SIAF_FUNCTIONS[names[0]](pre[0])
        for name, z in zip(names[1:], pre[1:]):
            out = out.add_(SIAF_FUNCTIONS[name](z))
        ctx.names = names
        ctx.save_for_backward(u, weight, *pre)
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        u, weight, *pre = ctx.saved_tensors
        channels = u.shape[-1]
        grad, flat_u = grad.reshape(-1, channels), u.reshape(-1, channels)
        grad_u = None
        grad_weight = torch.empty_like(weight) if ctx.needs_input_grad[1] else None
        grad_bias = torch.empty_like(weight) if ctx.needs_input_grad[2] else None
        for i, (name, z) in enumerate(zip(ctx.names, pre)):
            g = SIAF_BACKWARDS[name](grad, z.reshape(-1, channels))
            if grad_bias is not None:
                grad_bias[i] = g.sum(0)
            if ctx.needs_input_grad[0]:
                grad_u = g * weight[i] if grad_u is None else grad_u.addcmul_(g, weight[i])
            if grad_weight is not None:
                grad_weight[i] = g.mul_(flat_u).sum(0)
        if grad_u is not None:
            grad_u = grad_u.reshape(u.shape)
        return grad_u, grad_weight, grad_bias, None


class PanguPiSeriesActivation(nn.Module):
    """SIAF(u) = sum_{i=1..n} act_i(a_i * u + b_i), with per-channel a_i (`weight[i]`) and b_i (`bias[i]`).

    With n = 1, a = 1, b = 0 it is exactly the plain activation (1 * u + 0 is exact in floating point), which is
    what makes LLaMA parity and function-preserving upcycling possible.
    """

    def __init__(self, config: PanguPiConfig):
        super().__init__()
        self.n = config.siaf_terms
        self.names = list(config.siaf_activations)
        self.acts = [SIAF_FUNCTIONS[name] for name in self.names]
        self.scale = 1.0 / self.n if config.siaf_scale_by_n else 1.0
        self.weight = nn.Parameter(torch.ones(self.n, config.intermediate_size))
        self.bias = nn.Parameter(torch.zeros(self.n, config.intermediate_size))
        # One activation for every term: all terms in one broadcast op each way (fewer kernel calls, which is
        # what dominates single-token decoding on CPU).
        self.shared_act = self.acts[0] if len(set(self.names)) == 1 else None
        # Training with several terms goes through the hand-written backward when every activation has one.
        self.fused_backward = self.n > 1 and all(name in SIAF_BACKWARDS for name in self.names)

    def forward(self, u: torch.Tensor) -> torch.Tensor:
        weight = self.weight.to(u.dtype)
        bias = self.bias.to(u.dtype)
        if self.n == 1:
            out = self.acts[0](torch.addcmul(bias[0], u, weight[0]))
        elif self.fused_backward and torch.is_grad_enabled() and (u.requires_grad or weight.requires_grad):
            out = _SeriesActivationFunction.apply(u, weight, bias, tuple(self.names))
        elif self.shared_act is not None:
            out = self.shared_act(torch.addcmul(bias, u.unsqueeze(-2), weight)).sum(-2)
        else:
            out = self.acts[0](torch.addcmul(bias[0], u, weight[0]))
            for i in range(1, self.n):
                out = out + self.acts[i](torch.addcmul(bias[i], u, weight[i]))
        if self.scale != 1.0:
            out = out * self.scale
        return out

    def extra_repr(self):
        return f"terms={self.n}, activations={self.names}, scale={self.scale}"


class PanguPiNeighborConv(nn.Module):
    """Causal depthwise convolution over the token axis (kernel k, one filter per channel, no bias).

    out[t] = sum_{j=0..k-1} w[:, k-1-j] * u[t-j], where a tap j is dropped when it would reach before the start of
    the token's own document (position_ids[t] < j) so packed documents and left padding never leak into each other.
    With a cache, the last k-1 inputs are kept as a convolution state of the layer (transformers' linear-attention
    cache layers), so cached decoding equals a full forward.
    """

    def __init__(self, config: PanguPiConfig, layer_idx: int):
        super().__init__()
        self.layer_idx = layer_idx
        self.kernel_size = config.siaf_neighbor_kernel
        self.weight = nn.Parameter(torch.zeros(config.intermediate_size, self.kernel_size))
        self.weight.data[:, -1] = 1.0

    def forward(
        self,
        u: torch.Tensor,
        position_ids: torch.LongTensor | None = None,
        token_mask: torch.Tensor | None = None,
        past_key_values: Cache | None = None,
    ) -> torch.Tensor:
        k, seq_len = self.kernel_size, u.shape[1]
        if token_mask is not None:
            # Padding positions contribute nothing to their neighbours (and hold zeros in the cached state).
            u = u * token_mask[:, -seq_len:, None].to(u.dtype)
        if past_key_values is not None:
            # The cache stores (batch, channels, time) and returns the previous k-1 inputs followed by the new ones.
            full = past_key_values.update_conv_state(
                u.transpose(1, 2), self.layer_idx, conv_kernel_size=k - 1
            ).transpose(1, 2)
            full = full[:, -(seq_len + k - 1) :]
            pad = seq_len + k - 1 - full.shape[1]
        else:
            full, pad = u, k - 1
        if pad > 0:
            full = F.pad(full, (0, 0, pad, 0))
        weight = self.weight.to(u.dtype)
        out = full[:, k - 1 :] * weight[:, k - 1]
        for j in range(1, k):
            tap = full[:, k - 1 - j : k - 1 - j + seq_len] * weight[:, k - 1 - j]
            if position_ids is not None:
                tap = tap * (position_ids[:, -seq_len:, None] >= j).to(u.dtype)
            out = out + tap
        return out

    def extra_repr(self):
        return f"channels={self.weight.shape[0]}, kernel_size={self.kernel_size}, causal=True"


class PanguPiMLP(nn.Module):
    """SwiGLU feed-forward with the series activation on the gate branch: W_down(SIAF(W_gate x) * W_up x)."""

    def __init__(self, config: PanguPiConfig, layer_idx: int = 0):
        super().__init__()
        self.config = config
        self.hidden_size = config.hidden_size
        self.intermediate_size = config.intermediate_size
        self.gate_proj = nn.Linear(self.hidden_size, self.intermediate_size, bias=config.mlp_bias)
        self.up_proj = nn.Linear(self.hidden_size, self.intermediate_size, bias=config.mlp_bias)
        self.down_proj = nn.Linear(self.intermediate_size, self.hidden_size, bias=config.mlp_bias)
        self.act_fn = PanguPiSeriesActivation(config)
        self.neighbor_conv = (
            PanguPiNeighborConv(config, layer_idx) if config.siaf_neighbor_kernel > 1 else None
        )

    def forward(self, x, position_ids=None, token_mask=None, past_key_values=None):
        gate = self.act_fn(self.gate_proj(x))
        if self.neighbor_conv is not None:
            gate = self.neighbor_conv(gate, position_ids, token_mask, past_key_values)
        return self.down_proj(gate * self.up_proj(x))


def repeat_kv(hidden_states: torch.Tensor, n_rep: int) -> torch.Tensor:
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


def eager_attention_forward(
    module: nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    scaling: float,
    dropout: float = 0.0,
    **kwargs,
):
    key_states = repeat_kv(key, module.num_key_value_groups)
    value_states = repeat_kv(value, module.num_key_value_groups)
    attn_weights = torch.matmul(query, key_states.transpose(2, 3)) * scaling
    if attention_mask is not None:
        attn_weights = attn_weights + attention_mask
    attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query.dtype)
    attn_weights = nn.functional.dropout(attn_weights, p=dropout, training=module.training)
    attn_output = torch.matmul(attn_weights, value_states)
    attn_output = attn_output.transpose(1, 2).contiguous()
    return attn_output, attn_weights


class PanguPiAttention(nn.Module):
    """Grouped-query attention with RoPE; eager, SDPA or any attention backend transformers registers."""

    def __init__(self, config: PanguPiConfig, layer_idx: int):
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.head_dim = config.head_dim
        self.num_key_value_groups = config.num_attention_heads // config.num_key_value_heads
        self.scaling = self.head_dim**-0.5
        self.attention_dropout = config.attention_dropout
        self.is_causal = True
        self.q_proj = nn.Linear(config.hidden_size, config.num_attention_heads * self.head_dim, bias=config.attention_bias)
        self.k_proj = nn.Linear(config.hidden_size, config.num_key_value_heads * self.head_dim, bias=config.attention_bias)
        self.v_proj = nn.Linear(config.hidden_size, config.num_key_value_heads * self.head_dim, bias=config.attention_bias)
        self.o_proj = nn.Linear(config.num_attention_heads * self.head_dim, config.hidden_size, bias=config.attention_bias)

    def forward(
        self,
        hidden_states: torch.Tensor,
        position_embeddings: tuple[torch.Tensor, torch.Tensor],
        attention_mask: torch.Tensor | None = None,
        past_key_values: Cache | None = None,
        **kwargs,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        query_states = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)

        cos, sin = position_embeddings
        query_states, key_states = apply_rotary_pos_emb(query_states, key_states, cos, sin)
        if past_key_values is not None:
            key_states, value_states = past_key_values.update(key_states, value_states, self.layer_idx)

        attention_interface: Callable = ALL_ATTENTION_FUNCTIONS.get_interface(
            self.config._attn_implementation, eager_attention_forward
        )
        attn_output, attn_weights = attention_interface(
            self,
            query_states,
            key_states,
            value_states,
            attention_mask,
            dropout=0.0 if not self.training else self.attention_dropout,
            scaling=self.scaling,
            **kwargs,
        )
        attn_output = attn_output.reshape(*input_shape, -1).contiguous()
        return self.o_proj(attn_output), attn_weights


class PanguPiAugmentedShortcut(nn.Module):
    """The T augmented shortcuts of one layer, sum_{i=1..T} W2_i GELU(W1_i z) with W1_i: d -> d/r, W2_i: d/r -> d.

    The T bottlenecks are stored side by side (fc1: d -> T*d/r, fc2: T*d/r -> d): the sum of T separate
    bottlenecks is exactly one bottleneck of width T*d/r with concatenated weights, and one matmul each way is
    faster. With `aug_bias` the T output biases collapse into one vector, which spans the same functions.
    Named fc1/fc2 (not up/down_proj) so LoRA targets for the MLP never match the shortcuts by accident.
    """

    def __init__(self, config: PanguPiConfig):
        super().__init__()
        self.num_shortcuts = config.aug_shortcuts
        self.bottleneck = config.hidden_size // config.aug_reduction
        width = self.num_shortcuts * max(self.bottleneck, 1)
        self.fc1 = nn.Linear(config.hidden_size, width, bias=config.aug_bias)
        self.fc2 = nn.Linear(width, config.hidden_size, bias=config.aug_bias)
        # Read by _init_weights, which visits this Linear on its own (after or before its parent).
        self.fc2.zero_init = config.aug_zero_init

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.fc2(F.gelu(self.fc1(z)))

    def extra_repr(self):
        return f"shortcuts={self.num_shortcuts}, bottleneck={self.bottleneck}"


class PanguPiDecoderLayer(GradientCheckpointingLayer):
    def __init__(self, config: PanguPiConfig, layer_idx: int):
        super().__init__()
        self.hidden_size = config.hidden_size
        self.self_attn = PanguPiAttention(config=config, layer_idx=layer_idx)
        self.aug_shortcut = PanguPiAugmentedShortcut(config) if config.aug_shortcuts > 0 else None
        self.mlp = PanguPiMLP(config, layer_idx)
        self.input_layernorm = PanguPiRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.post_attention_layernorm = PanguPiRMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        past_key_values: Cache | None = None,
        use_cache: bool | None = False,
        position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None,
        token_mask: torch.Tensor | None = None,
        **kwargs,
    ) -> torch.Tensor:
        residual = hidden_states
        normed = self.input_layernorm(hidden_states)
        attn_output, _ = self.self_attn(
            hidden_states=normed,
            attention_mask=attention_mask,
            position_ids=position_ids,
            past_key_values=past_key_values,
            use_cache=use_cache,
            position_embeddings=position_embeddings,
            **kwargs,
        )
        hidden_states = residual + attn_output
        if self.aug_shortcut is not None:
            # The shortcut reads the same normalised input as attention, in parallel to it (paper Eq. 4).
            hidden_states = hidden_states + self.aug_shortcut(normed)

        residual = hidden_states
        hidden_states = self.post_attention_layernorm(hidden_states)
        hidden_states = self.mlp(hidden_states, position_ids, token_mask, past_key_values)
        return residual + hidden_states


class PanguPiPreTrainedModel(PreTrainedModel):
    config: PanguPiConfig
    config_class = PanguPiConfig
    base_model_prefix = "model"
    supports_gradient_checkpointing = True
    _no_split_modules = ["PanguPiDecoderLayer"]
    _skip_keys_device_placement = ["past_key_values"]
    _supports_flash_attn = True
    _supports_sdpa = True
    _supports_flex_attn = True
    _can_compile_fullgraph = False
    _supports_attention_backend = True
    _can_record_outputs = {
        "hidden_states": PanguPiDecoderLayer,
        "attentions": PanguPiAttention,
    }

    @torch.no_grad()
    def _init_weights(self, module):
        super()._init_weights(module)
        if isinstance(module, PanguPiSeriesActivation):
            # a_i = 1 and distinct b_i evenly spaced in [-0.5, 0.5]: equal terms would stay equal forever.
            init.ones_(module.weight)
            if module.n == 1:
                init.zeros_(module.bias)
            else:
                offsets = torch.linspace(-0.5, 0.5, module.n, dtype=module.bias.dtype, device=module.bias.device)
                init.copy_(module.bias, offsets[:, None].expand_as(module.bias))
        elif isinstance(module, PanguPiNeighborConv):
            # Identity: only the current-token tap is 1, so the convolution starts as a no-op.
            weight = torch.zeros_like(module.weight)
            weight[:, -1] = 1.0
            init.copy_(module.weight, weight)
        elif isinstance(module, nn.Linear) and getattr(module, "zero_init", False):
            init.zeros_(module.weight)


class PanguPiModel(PanguPiPreTrainedModel):
    def __init__(self, config: PanguPiConfig):
        super().__init__(config)
        self.padding_idx = config.pad_token_id
        self.vocab_size = config.vocab_size
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size, self.padding_idx)
        self.layers = nn.ModuleList(
            [PanguPiDecoderLayer(config, layer_idx) for layer_idx in range(config.num_hidden_layers)]
        )
        self.norm = PanguPiRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.rotary_emb = PanguPiRotaryEmbedding(config=config)
        self.gradient_checkpointing = False
        self.post_init()

    @merge_with_config_defaults
    @capture_outputs
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        past_key_values: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        use_cache: bool | None = None,
        cache: Cache | None = None,
        **kwargs,
    ) -> BaseModelOutputWithPast:
        if (input_ids is None) ^ (inputs_embeds is not None):
            raise ValueError("You must specify exactly one of input_ids or inputs_embeds")
        past_key_values = cache if cache is not None else past_key_values
        if inputs_embeds is None:
            inputs_embeds = self.embed_tokens(input_ids)
        if use_cache and past_key_values is None:
            past_key_values = DynamicCache(config=self.config)
        if position_ids is None:
            past_seen_tokens = past_key_values.get_seq_length() if past_key_values is not None else 0
            position_ids = torch.arange(inputs_embeds.shape[1], device=inputs_embeds.device) + past_seen_tokens
            position_ids = position_ids.unsqueeze(0)

        # The neighbour convolution needs to know which of the current tokens are padding.
        token_mask = None
        if self.config.siaf_neighbor_kernel > 1 and attention_mask is not None and attention_mask.dim() == 2:
            token_mask = attention_mask

        causal_mask = create_causal_mask(
            config=self.config,
            inputs_embeds=inputs_embeds,
            attention_mask=attention_mask,
            position_ids=position_ids,
            **{CACHE_NAME: past_key_values},
        )
        hidden_states = inputs_embeds
        position_embeddings = self.rotary_emb(hidden_states, position_ids=position_ids)
        for decoder_layer in self.layers[: self.config.num_hidden_layers]:
            hidden_states = decoder_layer(
                hidden_states,
                attention_mask=causal_mask,
                position_embeddings=position_embeddings,
                position_ids=position_ids,
                past_key_values=past_key_values,
                use_cache=use_cache,
                token_mask=token_mask,
                **kwargs,
            )
        hidden_states = self.norm(hidden_states)
        return BaseModelOutputWithPast(last_hidden_state=hidden_states, **{CACHE_NAME: past_key_values})


class PanguPiForCausalLM(PanguPiPreTrainedModel, GenerationMixin):
    _tied_weights_keys = {"lm_head.weight": "model.embed_tokens.weight"}
    _tp_plan = {"lm_head": "colwise_gather_output"}
    _pp_plan = {"lm_head": (["hidden_states"], ["logits"])}

    def __init__(self, config: PanguPiConfig):
        super().__init__(config)
        self.model = PanguPiModel(config)
        self.vocab_size = config.vocab_size
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.post_init()

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        past_key_values: Cache | None = None,
        inputs_embeds: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        use_cache: bool | None = None,
        logits_to_keep: int | torch.Tensor = 0,
        cache: Cache | None = None,
        **kwargs,
    ) -> CausalLMOutputWithPast:
        outputs: BaseModelOutputWithPast = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            past_key_values=cache if cache is not None else past_key_values,
            inputs_embeds=inputs_embeds,
            use_cache=use_cache,
            **kwargs,
        )
        hidden_states = outputs.last_hidden_state
        slice_indices = slice(-logits_to_keep, None) if isinstance(logits_to_keep, int) else logits_to_keep
        logits = self.lm_head(hidden_states[:, slice_indices, :])
        loss = None
        if labels is not None:
            loss = self.loss_function(logits=logits, labels=labels, vocab_size=self.config.vocab_size, **kwargs)
        return CausalLMOutputWithPast(
            loss=loss,
            logits=logits,
            **{CACHE_NAME: getattr(outputs, CACHE_NAME)},
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
        )


__all__ = ["PanguPiForCausalLM", "PanguPiModel", "PanguPiPreTrainedModel"]
