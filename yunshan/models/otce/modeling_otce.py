"""OTCE causal language model, written like transformers' Llama and Jamba and read top to bottom.

Norm, rotary embeddings, the linear scan (per-step and chunked, with its backward), the selective SSM mixer,
the SwiTanhDGLU feed-forward, the router and the cross-domain experts, attention, decoder layer, Expresser layer,
load-balancing loss, pretrained base, model, causal LM. The formulas are the decided reading of the OTCE paper in
docs/otce.md:

    SSM:       x, z = in_proj(h); x = SiLU(conv(x)); dt, B, C = RMSNorm each (x_proj(x)); B, C = RoPE(B), RoPE(C)
               Delta = softplus(dt_proj(dt)); A = -exp(A_log); h_t = exp(Delta_t A) h_{t-1} + Delta_t B_t x_t
               y = (C_t . h_t + D x) * SiLU(z); out_proj(y)
    FFN:       W2(SiLU(x W) * tanh(x V))                                           (SwiTanhDGLU, Eq. 13b)
    cohesive:  expert_i(x) = W2_i(SiLU(x W_i) * tanh(x V))          V shared    (Eq. 18)
    expansive: s = FFN_shared(x); expert_i(x) = FFN_i(sigmoid(s . w3_i) * s)      (Eq. 19 with the code's sigmoid)
    Expresser: o = h; h += Attn(RMSNorm(h)); h += FFN(RMSNorm(h)); h = W_proj(SiLU(W_dense(RMSNorm(h) + o)))

The authors' code (transformers 4.41 plus mamba-ssm CUDA kernels) is not used; this file is pure PyTorch and
imports only torch and transformers (and its sibling configuration file) so that `save_pretrained` ships it as
remote code.
"""

import inspect
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn
from transformers import initialization as init
from transformers.cache_utils import Cache, DynamicCache
from transformers.generation import GenerationMixin
from transformers.masking_utils import create_causal_mask, create_recurrent_attention_mask
from transformers.modeling_layers import GradientCheckpointingLayer
from transformers.modeling_outputs import MoeCausalLMOutputWithPast, MoeModelOutputWithPast
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS, dynamic_rope_update
from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS, PreTrainedModel
from transformers.utils import can_return_tuple
from transformers.utils.generic import merge_with_config_defaults
from transformers.utils.output_capturing import OutputRecorder, capture_outputs

from .configuration_otce import OtceConfig


# transformers 5.24 renamed the KV-cache argument and output field `past_key_values` to `cache` (the old name is
# deprecated there): the model accepts either and hands the cache on under the name this version reads, so that
# `generate()` keeps its cache with 5.23 and with 5.24+.
CACHE_NAME = "cache" if "cache" in inspect.signature(create_causal_mask).parameters else "past_key_values"

# Activations by the names OtceConfig accepts. Plain torch functions, so the file needs nothing else.
ACTIVATIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {
    "silu": F.silu,
    "gelu": F.gelu,
    "gelu_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "relu": F.relu,
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "identity": lambda x: x,
}


# Copied from yunshan.models.pangu_pi.modeling_pangu_pi.PanguPiRMSNorm with PanguPi->Otce
class OtceRMSNorm(nn.Module):
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


class OtceRotaryEmbedding(nn.Module):
    """RoPE for attention, with every scaling type transformers knows (`rope_parameters["rope_type"]`)."""

    def __init__(self, config: OtceConfig):
        super().__init__()
        self.max_seq_len_cached = config.max_position_embeddings
        self.original_max_seq_len = config.max_position_embeddings
        self.config = config
        self.rope_type = self.select_rope_type(config)
        rope_init_fn: Callable = self.compute_default_rope_parameters
        if self.rope_type != "default":
            rope_init_fn = ROPE_INIT_FUNCTIONS[self.rope_type]
        inv_freq, self.attention_scaling = rope_init_fn(self.config)
        self.inv_freq = nn.Buffer(inv_freq, persistent=False)
        self.original_inv_freq = nn.Buffer(inv_freq.clone(), persistent=False)

    @staticmethod
    def select_rope_type(config: OtceConfig) -> str:
        return config.rope_parameters["rope_type"]

    @staticmethod
    def compute_default_rope_parameters(config: OtceConfig, **kwargs) -> tuple[torch.Tensor, float]:
        base = config.rope_parameters["rope_theta"]
        dim = config.head_dim
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


class OtceStateRotaryEmbedding(OtceRotaryEmbedding):
    """RoPE of dimension `mamba_d_state` for the SSM's B and C (paper section 3.1, Algorithm 4): C_j . B_i then
    depends on j - i. Always the default (unscaled) RoPE with `rope_theta`."""

    @staticmethod
    def select_rope_type(config: OtceConfig) -> str:
        return "default"

    @staticmethod
    def compute_default_rope_parameters(config: OtceConfig, **kwargs) -> tuple[torch.Tensor, float]:
        base = config.rope_parameters["rope_theta"]
        dim = config.mamba_d_state
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float) / dim))
        return inv_freq, 1.0


# Copied from yunshan.models.pangu_pi.modeling_pangu_pi.rotate_half
def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


# Copied from yunshan.models.pangu_pi.modeling_pangu_pi.apply_rotary_pos_emb
def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    cos = cos.unsqueeze(unsqueeze_dim)
    sin = sin.unsqueeze(unsqueeze_dim)
    q_embed = (q * cos) + (rotate_half(q) * sin)
    k_embed = (k * cos) + (rotate_half(k) * sin)
    return q_embed, k_embed


# ---------------------------------------------------------------------------------------------------- linear scan
# The selective SSM's recurrence is h_t = a_t * h_{t-1} + b_t, elementwise over (batch, channel, state), along time
# (dim 0). On CPU the per-step loop over contiguous time slices touches every element once and beat every parallel
# form we measured (doubling and chunked scans were 3-10x slower: they move more memory, and the CPU is memory
# bound); on accelerators the chunked form runs the T steps of all chunks at once and carries the state across
# chunks.


def linear_scan(a: torch.Tensor, b: torch.Tensor, h0: torch.Tensor | None = None, chunk_size: int = 1):
    """All states of h_t = a_t * h_{t-1} + b_t for t = 0..L-1 (time is dim 0), starting from h0 (zeros if None).

    chunk_size 1 (or >= L) runs the per-step recurrence. chunk_size T > 1 splits time into chunks of T steps,
    scans all chunks at once from a zero state (T steps over (L/T, ...) slices), multiplies out each chunk's
    cumulative decay, carries the state across chunks (L/T steps) and adds each chunk's carried-in state times the
    decay (one pass). Only products of the a_t (<= 1 for a decaying SSM) appear, so it is as stable as the loop.
    """
    length = a.shape[0]
    if chunk_size <= 1 or chunk_size >= length:
        states = torch.empty(b.shape, dtype=b.dtype, device=b.device)
        h = h0
        for t in range(length):
            if h is None:
                h = states[t].copy_(b[t])
            else:
                h = torch.addcmul(b[t], a[t], h, out=states[t])
        return states
    chunks = -(-length // chunk_size)
    pad = chunks * chunk_size - length
    if pad:
        a = torch.cat([a, a.new_ones((pad, *a.shape[1:]))])
        b = torch.cat([b, b.new_zeros((pad, *b.shape[1:]))])
    a_c = a.reshape(chunks, chunk_size, *a.shape[1:])
    b_c = b.reshape(chunks, chunk_size, *b.shape[1:])
    local = torch.empty_like(b_c)
    local[:, 0] = b_c[:, 0]
    for t in range(1, chunk_size):
        local[:, t] = torch.addcmul(b_c[:, t], a_c[:, t], local[:, t - 1])
    decay = torch.cumprod(a_c, dim=1)
    carried = torch.empty_like(b_c[:, 0])
    h = h0 if h0 is not None else torch.zeros_like(b_c[0, 0])
    for c in range(chunks):
        carried[c] = h
        h = torch.addcmul(local[c, -1], decay[c, -1], h)
    states = torch.addcmul(local, decay, carried[:, None]).view(chunks * chunk_size, *b.shape[1:])
    return states[:length]


def reverse_linear_scan(a: torch.Tensor, grad: torch.Tensor, chunk_size: int = 1) -> torch.Tensor:
    """g_t = grad_t + a_{t+1} * g_{t+1} (the adjoint of `linear_scan`), computed backwards in time."""
    length = a.shape[0]
    if chunk_size <= 1 or chunk_size >= length:
        out = torch.empty(grad.shape, dtype=grad.dtype, device=grad.device)
        g = out[length - 1].copy_(grad[length - 1])
        for t in range(length - 2, -1, -1):
            g = torch.addcmul(grad[t], a[t + 1], g, out=out[t])
        return out
    a_next = torch.cat([a[1:], torch.zeros_like(a[:1])])
    return linear_scan(a_next.flip(0), grad.flip(0), None, chunk_size).flip(0)


class OtceLinearScan(torch.autograd.Function):
    """`linear_scan` with a hand-written backward (another scan, run backwards), so autograd keeps two tensors
    (a and the states) instead of one graph node per time step."""

    @staticmethod
    def forward(ctx, a, b, h0, chunk_size):
        states = linear_scan(a, b, h0, chunk_size)
        ctx.chunk_size = chunk_size
        ctx.has_h0 = h0 is not None
        ctx.save_for_backward(a, states, h0 if h0 is not None else a.new_zeros(()))
        return states

    @staticmethod
    def backward(ctx, grad_states):
        a, states, h0 = ctx.saved_tensors
        g = reverse_linear_scan(a, grad_states.contiguous(), ctx.chunk_size)
        grad_a = torch.empty_like(a)
        torch.mul(g[1:], states[:-1], out=grad_a[1:])
        if ctx.has_h0:
            torch.mul(g[0], h0, out=grad_a[0])
        else:
            grad_a[0].zero_()
        grad_h0 = g[0] * a[0] if ctx.has_h0 and ctx.needs_input_grad[2] else None
        return grad_a, g, grad_h0, None


# Time steps per block when no gradient is needed (see selective_scan).
INFERENCE_BLOCK = 64


def selective_scan(
    x: torch.Tensor,
    dt: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    D: torch.Tensor | None = None,
    h0: torch.Tensor | None = None,
    resets: torch.Tensor | None = None,
    chunk_size: int = 1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The selective SSM in float32 (float64 for float64 inputs): y_t = C_t . h_t + D * x_t with
    h_t = exp(dt_t A) h_{t-1} + dt_t B_t x_t.

    Args:
        x, dt: (batch, length, d_inner); dt already softplus'ed.
        A: (d_inner, N), negative.
        B, C: (batch, length, N).
        D: (d_inner,) skip weights, or None.
        h0: (batch, d_inner, N) state before the first token (from the cache), or None for zeros.
        resets: (batch, length) bool, True where a new document starts: the state is cleared before that token.
        chunk_size: see `linear_scan`.

    Returns y (batch, length, d_inner) and the last state (batch, d_inner, N).
    """
    batch, length, d_inner = x.shape
    n_state = A.shape[-1]
    dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    if length == 1:
        # One decoding step: the recurrence once, without the time-major layout the scan needs.
        x0, dt0 = x[:, 0].to(dtype), dt[:, 0].to(dtype)
        b = (dt0 * x0).unsqueeze(-1) * B[:, 0].to(dtype).unsqueeze(1)
        state = b
        if h0 is not None:
            a = torch.exp(dt0.unsqueeze(-1) * A.to(dtype))
            if resets is not None:
                a = a * (~resets[:, 0]).to(dtype)[:, None, None]
            state = torch.addcmul(b, a, h0.to(dtype))
        y = torch.matmul(state, C[:, 0].to(dtype).unsqueeze(-1)).transpose(1, 2)
        if D is not None:
            y = y + x.to(dtype) * D.to(dtype)
        return y, state
    needs_grad = torch.is_grad_enabled() and any(
        t is not None and t.requires_grad for t in (x, dt, A, B, C, D, h0)
    )
    if not needs_grad and length > INFERENCE_BLOCK:
        # Inference on long inputs: blocks of time whose (block, batch, d_inner, N) tensors stay in the CPU caches,
        # carrying the state from block to block (same numbers; measured 2.5-4x faster than materialising 4,096 steps).
        ys, state = [], h0
        for start in range(0, length, INFERENCE_BLOCK):
            part = slice(start, start + INFERENCE_BLOCK)
            y, state = selective_scan(
                x[:, part], dt[:, part], A, B[:, part], C[:, part], D, state,
                None if resets is None else resets[:, part], chunk_size,
            )
            ys.append(y)
        return torch.cat(ys, 1), state
    # Time-major and contiguous, so that every time step of the scan is one contiguous (batch, d_inner, N) slice.
    x_t = x.transpose(0, 1).to(dtype).contiguous()
    dt_t = dt.transpose(0, 1).to(dtype).contiguous()
    a = torch.exp(dt_t.unsqueeze(-1) * A.to(dtype))  # (length, batch, d_inner, N)
    if resets is not None:
        a = a * (~resets).transpose(0, 1)[:, :, None, None].to(dtype)
    b = (dt_t * x_t).unsqueeze(-1) * B.transpose(0, 1).to(dtype).contiguous().unsqueeze(2)
    states = OtceLinearScan.apply(a, b, None if h0 is None else h0.to(dtype), chunk_size)
    c = C.transpose(0, 1).to(dtype).reshape(length * batch, n_state, 1)
    y = torch.matmul(states.view(length * batch, d_inner, n_state), c).view(length, batch, d_inner).transpose(0, 1)
    if D is not None:
        y = y + x.to(dtype) * D.to(dtype)
    return y, states[-1]


class OtceMambaMixer(nn.Module):
    """The selective SSM block (Mamba-1 / S6 with Jamba's RMSNorms on dt, B and C and OTCE's RoPE on B and C).

    The cache keeps the last `mamba_d_conv - 1` inputs of the convolution and the (batch, d_inner, N) state, so
    cached decoding equals a full forward. Padding tokens (2D attention mask) are zeroed before the projection and
    after the convolution, so they never enter the state; tokens at position 0 after the first one start a new
    document (packed sequences): the state is cleared and the convolution does not reach across.
    """

    def __init__(self, config: OtceConfig, layer_idx: int):
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.hidden_size = config.hidden_size
        self.ssm_state_size = config.mamba_d_state
        self.conv_kernel_size = config.mamba_d_conv
        self.intermediate_size = config.mamba_expand * config.hidden_size
        self.time_step_rank = config.mamba_dt_rank
        self.use_rope = config.mamba_rope
        self.in_proj = nn.Linear(self.hidden_size, self.intermediate_size * 2, bias=config.mamba_proj_bias)
        self.conv1d = None
        if config.mamba_use_conv:
            self.conv1d = nn.Conv1d(
                self.intermediate_size, self.intermediate_size, kernel_size=self.conv_kernel_size,
                groups=self.intermediate_size, bias=config.mamba_conv_bias,
            )
        self.x_proj = nn.Linear(self.intermediate_size, self.time_step_rank + 2 * self.ssm_state_size, bias=False)
        self.dt_proj = nn.Linear(self.time_step_rank, self.intermediate_size, bias=True)
        A = torch.arange(1, self.ssm_state_size + 1, dtype=torch.float32)[None, :].expand(self.intermediate_size, -1)
        self.A_log = nn.Parameter(torch.log(A).contiguous())
        self.D = nn.Parameter(torch.ones(self.intermediate_size)) if config.mamba_use_d else None
        self.out_proj = nn.Linear(self.intermediate_size, self.hidden_size, bias=config.mamba_proj_bias)
        self.dt_layernorm = OtceRMSNorm(self.time_step_rank, eps=config.rms_norm_eps)
        self.b_layernorm = OtceRMSNorm(self.ssm_state_size, eps=config.rms_norm_eps)
        self.c_layernorm = OtceRMSNorm(self.ssm_state_size, eps=config.rms_norm_eps)

    def cached_state(self, past_key_values: Cache | None) -> torch.Tensor | None:
        if past_key_values is None:
            return None
        if self.layer_idx >= len(past_key_values.layers):
            raise ValueError(
                "OTCE needs a cache built from its config, with one layer per block: pass "
                "DynamicCache(config=model.config) (generate() does this), not DynamicCache()"
            )
        layer = past_key_values.layers[self.layer_idx]
        if layer.is_recurrent_states_initialized[0] and layer.has_previous_state[0]:
            return layer.recurrent_states[0]
        return None

    def causal_conv(self, x, past_key_values, segment_positions):
        """Depthwise causal convolution over time of x (batch, length, d_inner), then SiLU."""
        k, length = self.conv_kernel_size, x.shape[1]
        x = x.transpose(1, 2)
        if past_key_values is not None:
            # The cache returns the previous k-1 inputs followed by the new ones (zero-padded on the first call).
            x = past_key_values.update_conv_state(x, self.layer_idx, conv_kernel_size=k - 1)
        x = x[..., -(length + k - 1) :]
        if x.shape[-1] < length + k - 1:
            x = F.pad(x, (length + k - 1 - x.shape[-1], 0))
        weight = self.conv1d.weight
        if segment_positions is None and length > 32:
            out = F.conv1d(x, weight, self.conv1d.bias, groups=self.intermediate_size)
        else:
            # k shifted multiply-adds: for short inputs (decoding) PyTorch's depthwise conv1d costs tens of
            # milliseconds per call on CPU, this costs microseconds. With packed documents, tap j (j tokens back) is
            # dropped where the token is fewer than j tokens into its document.
            taps = weight[:, 0, :]
            out = x[..., k - 1 :] * taps[:, k - 1 : k]
            for j in range(1, k):
                tap = x[..., k - 1 - j : k - 1 - j + length] * taps[:, k - 1 - j : k - j]
                if segment_positions is not None:
                    tap = tap * (segment_positions[:, None, :] >= j).to(tap.dtype)
                out = out + tap
            if self.conv1d.bias is not None:
                out = out + self.conv1d.bias[:, None]
        return F.silu(out).transpose(1, 2)

    def forward(
        self,
        hidden_states: torch.Tensor,
        position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None,
        attention_mask: torch.Tensor | None = None,
        segment_positions: torch.Tensor | None = None,
        past_key_values: Cache | None = None,
    ) -> torch.Tensor:
        dtype = hidden_states.dtype
        h0 = self.cached_state(past_key_values)
        mask = None if attention_mask is None else attention_mask[:, :, None].to(dtype)
        if mask is not None:
            hidden_states = hidden_states * mask
        x, z = self.in_proj(hidden_states).chunk(2, dim=-1)
        if self.conv1d is not None:
            x = self.causal_conv(x, past_key_values, segment_positions)
            if mask is not None:
                x = x * mask
        dt, B, C = torch.split(
            self.x_proj(x), [self.time_step_rank, self.ssm_state_size, self.ssm_state_size], dim=-1
        )
        dt, B, C = self.dt_layernorm(dt), self.b_layernorm(B), self.c_layernorm(C)
        if self.use_rope:
            cos, sin = position_embeddings  # (batch or 1, length, N), like B and C
            B = B * cos + rotate_half(B) * sin
            C = C * cos + rotate_half(C) * sin
        dt = F.softplus(self.dt_proj(dt))
        resets = None if segment_positions is None else segment_positions == 0
        chunk = self.config.mamba_chunk_size or (1 if x.device.type == "cpu" else 64)
        y, last_state = selective_scan(
            x, dt, -torch.exp(self.A_log.float()), B, C, self.D, h0, resets, chunk
        )
        if past_key_values is not None:
            past_key_values.update_recurrent_state(last_state.detach(), self.layer_idx)
            # Layers without a convolution never call update_conv_state, which is what sets this flag.
            past_key_values.layers[self.layer_idx].has_previous_state[0] = True
        y = y.to(dtype) * F.silu(z)
        return self.out_proj(y)


# --------------------------------------------------------------------------------------------------- feed-forward


class OtceMLP(nn.Module):
    """SwiTanhDGLU (with the default `ffn_up_act="tanh"`): down_proj(act(gate_proj x) * up_act(up_proj x))."""

    def __init__(self, config: OtceConfig, intermediate_size: int):
        super().__init__()
        self.hidden_size = config.hidden_size
        self.intermediate_size = intermediate_size
        self.gate_proj = nn.Linear(self.hidden_size, intermediate_size, bias=False)
        self.up_proj = nn.Linear(self.hidden_size, intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, self.hidden_size, bias=False)
        self.act_fn = ACTIVATIONS[config.hidden_act]
        self.up_act_fn = ACTIVATIONS[config.ffn_up_act]

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_act_fn(self.up_proj(x)))


class OtceCohesiveExpert(nn.Module):
    """A cohesive cross-domain expert: private W (gate_proj) and W2 (down_proj); V is shared by the block."""

    def __init__(self, config: OtceConfig):
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_size, config.expert_intermediate_size, bias=False)
        self.down_proj = nn.Linear(config.expert_intermediate_size, config.hidden_size, bias=False)
        self.act_fn = ACTIVATIONS[config.hidden_act]

    def forward(self, x, shared_up):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * shared_up)


class OtceExpansiveExpert(OtceMLP):
    """An expansive cross-domain expert: a private SwiTanhDGLU fed with the shared FFN's output s, gated by the
    scalar sigmoid(s . w3_i) (`shared_gate`, d -> 1)."""

    def __init__(self, config: OtceConfig):
        super().__init__(config, config.expert_intermediate_size)
        self.shared_gate = nn.Linear(config.hidden_size, 1, bias=False)

    def forward(self, shared):
        return super().forward(torch.sigmoid(self.shared_gate(shared)) * shared)


class OtceTopKRouter(nn.Module):
    """Softmax over the router logits in float32, top-k, weights not renormalised. Returns
    `(router_logits, top_k_weights, top_k_index)`."""

    def __init__(self, config: OtceConfig):
        super().__init__()
        self.top_k = config.num_experts_per_tok
        self.num_experts = config.num_experts
        self.weight = nn.Parameter(torch.empty(self.num_experts, config.hidden_size))

    def forward(self, hidden_states: torch.Tensor):
        router_logits = F.linear(hidden_states, self.weight)
        probs = F.softmax(router_logits, dim=-1, dtype=torch.float32)
        top_k_weights, top_k_index = torch.topk(probs, self.top_k, dim=-1)
        return router_logits, top_k_weights.to(hidden_states.dtype), top_k_index


class OtceSparseMoeBlock(nn.Module):
    """Routed experts of `expert_type` plain, cohesive or expansive (see OtceConfig). Each token goes to its top-k
    experts; what is shared (V, the shared FFN, the shared expert) is computed once per token, not per expert."""

    def __init__(self, config: OtceConfig):
        super().__init__()
        self.expert_type = config.expert_type
        self.num_experts = config.num_experts
        self.router = OtceTopKRouter(config)
        self.shared_up_proj = None
        self.shared_expert = None
        self.up_act_fn = ACTIVATIONS[config.ffn_up_act]
        if self.expert_type == "cohesive":
            self.shared_up_proj = nn.Linear(config.hidden_size, config.expert_intermediate_size, bias=False)
            experts = [OtceCohesiveExpert(config) for _ in range(config.num_experts)]
        elif self.expert_type == "expansive":
            self.shared_expert = OtceMLP(config, config.shared_expert_intermediate_size)
            experts = [OtceExpansiveExpert(config) for _ in range(config.num_experts)]
        else:
            if config.shared_expert_intermediate_size > 0:
                self.shared_expert = OtceMLP(config, config.shared_expert_intermediate_size)
            experts = [OtceMLP(config, config.expert_intermediate_size) for _ in range(config.num_experts)]
        self.experts = nn.ModuleList(experts)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        batch, length, hidden = hidden_states.shape
        flat = hidden_states.reshape(-1, hidden)
        _, top_k_weights, top_k_index = self.router(flat)
        expert_input = flat
        shared_up = None
        out = torch.zeros_like(flat)
        if self.expert_type == "cohesive":
            shared_up = self.up_act_fn(self.shared_up_proj(flat))
        elif self.expert_type == "expansive":
            expert_input = self.shared_expert(flat)
        with torch.no_grad():
            expert_mask = F.one_hot(top_k_index, num_classes=self.num_experts).permute(2, 1, 0)
            expert_hit = (expert_mask.sum(dim=(-1, -2)) > 0).nonzero()[:, 0].tolist()
        for expert_idx in expert_hit:
            top_k_pos, token_idx = torch.where(expert_mask[expert_idx])
            expert = self.experts[expert_idx]
            if shared_up is not None:
                current = expert(expert_input[token_idx], shared_up[token_idx])
            else:
                current = expert(expert_input[token_idx])
            current = current * top_k_weights[token_idx, top_k_pos, None]
            # index_put_ with accumulate: on CPU out-of-place index_add costs ~30 ms per call, this ~10 us.
            out.index_put_((token_idx,), current.to(out.dtype), accumulate=True)
        if self.expert_type == "plain" and self.shared_expert is not None:
            out = out + self.shared_expert(flat)  # DeepSeekMoE's always-on shared expert
        return out.reshape(batch, length, hidden)


# ------------------------------------------------------------------------------------------------------ attention


# Copied from yunshan.models.pangu_pi.modeling_pangu_pi.repeat_kv
def repeat_kv(hidden_states: torch.Tensor, n_rep: int) -> torch.Tensor:
    batch, num_key_value_heads, slen, head_dim = hidden_states.shape
    if n_rep == 1:
        return hidden_states
    hidden_states = hidden_states[:, :, None, :, :].expand(batch, num_key_value_heads, n_rep, slen, head_dim)
    return hidden_states.reshape(batch, num_key_value_heads * n_rep, slen, head_dim)


# Copied from yunshan.models.pangu_pi.modeling_pangu_pi.eager_attention_forward
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


class OtceAttention(nn.Module):
    """Grouped-query attention with optional RoPE; eager, SDPA or any attention backend transformers registers."""

    def __init__(self, config: OtceConfig, layer_idx: int):
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.head_dim = config.head_dim
        self.num_key_value_groups = config.num_attention_heads // config.num_key_value_heads
        self.scaling = self.head_dim**-0.5
        self.attention_dropout = config.attention_dropout
        self.is_causal = True
        self.q_proj = nn.Linear(config.hidden_size, config.num_attention_heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(config.hidden_size, config.num_key_value_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(config.hidden_size, config.num_key_value_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(config.num_attention_heads * self.head_dim, config.hidden_size, bias=False)

    def forward(
        self,
        hidden_states: torch.Tensor,
        position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None,
        attention_mask: torch.Tensor | None = None,
        past_key_values: Cache | None = None,
        **kwargs,
    ) -> tuple[torch.Tensor, torch.Tensor | None]:
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        query_states = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        value_states = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        if position_embeddings is not None:
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


# --------------------------------------------------------------------------------------------------------- layers


class OtceDecoderLayer(GradientCheckpointingLayer):
    """One block of the layer pattern: pre-RMSNorm residual mixer (`mamba` or `self_attn`), then pre-RMSNorm
    residual feed-forward (`feed_forward`: dense MLP or experts). Module names follow Jamba's."""

    def __init__(self, config: OtceConfig, layer_idx: int):
        super().__init__()
        block = config.layers_block_type[layer_idx]
        self.block_type = block
        if block[0] == "S":
            self.mamba = OtceMambaMixer(config, layer_idx)
        else:
            self.self_attn = OtceAttention(config, layer_idx)
        if block[1] == "E":
            self.feed_forward = OtceSparseMoeBlock(config)
        else:
            self.feed_forward = OtceMLP(config, config.intermediate_size)
        self.input_layernorm = OtceRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.pre_ff_layernorm = OtceRMSNorm(config.hidden_size, eps=config.rms_norm_eps)

    def forward(
        self,
        hidden_states: torch.Tensor,
        attention_mask: torch.Tensor | None = None,
        ssm_mask: torch.Tensor | None = None,
        position_ids: torch.LongTensor | None = None,
        past_key_values: Cache | None = None,
        use_cache: bool | None = False,
        position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None,
        ssm_position_embeddings: tuple[torch.Tensor, torch.Tensor] | None = None,
        segment_positions: torch.Tensor | None = None,
        **kwargs,
    ) -> torch.Tensor:
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        if self.block_type[0] == "S":
            hidden_states = self.mamba(
                hidden_states, ssm_position_embeddings, ssm_mask, segment_positions, past_key_values
            )
        else:
            hidden_states, _ = self.self_attn(
                hidden_states=hidden_states,
                position_embeddings=position_embeddings,
                attention_mask=attention_mask,
                past_key_values=past_key_values,
                position_ids=position_ids,
                **kwargs,
            )
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = self.feed_forward(self.pre_ff_layernorm(hidden_states))
        return residual + hidden_states


class OtceExpresserLayer(OtceDecoderLayer):
    """The Expresser (docs/otce.md): an attention block whose output is mixed back with the block's input and sent
    through a dense SiLU projection, without a residual:

        o = h;  h = h + Attn(RMSNorm(h));  h = h + FFN(RMSNorm(h));  h = W_proj(SiLU(W_dense(RMSNorm(h) + o)))
    """

    def __init__(self, config: OtceConfig, layer_idx: int):
        super().__init__(config, layer_idx)
        self.pre_dense_layernorm = OtceRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.dense = nn.Linear(config.hidden_size, config.hidden_size, bias=False)
        self.projection = nn.Linear(config.hidden_size, config.hidden_size, bias=False)
        self.act_fn = ACTIVATIONS[config.hidden_act]

    def forward(self, hidden_states: torch.Tensor, *args, **kwargs) -> torch.Tensor:
        block_input = hidden_states
        hidden_states = super().forward(hidden_states, *args, **kwargs)
        hidden_states = self.pre_dense_layernorm(hidden_states) + block_input
        return self.projection(self.act_fn(self.dense(hidden_states)))


# ----------------------------------------------------------------------------------------------------------- loss


def load_balancing_loss_func(
    router_logits: tuple[torch.Tensor, ...] | None,
    num_experts: int,
    top_k: int,
    attention_mask: torch.Tensor | None = None,
) -> torch.Tensor | None:
    """Switch/Mixtral load-balancing loss over all MoE layers: num_experts * sum_e f_e * P_e, where f_e is the
    share of the (token, top-k slot) assignments that go to expert e and P_e the mean router probability of e,
    both over every layer's non-padding tokens.

    Args:
        router_logits: one (batch * length, num_experts) tensor per MoE layer.
        attention_mask: (batch, length) with 0 for padding, or None.
    """
    if not router_logits:
        return None
    device = router_logits[0].device
    logits = torch.cat([layer.to(device) for layer in router_logits], dim=0).float()
    probs = F.softmax(logits, dim=-1)
    _, selected = torch.topk(probs, top_k, dim=-1)
    assignments = F.one_hot(selected, num_experts).float()  # (tokens * layers, top_k, experts)
    if attention_mask is None:
        tokens_per_expert = assignments.mean(dim=0)
        prob_per_expert = probs.mean(dim=0)
    else:
        # The logits cover the current tokens only: the mask's last `length` columns.
        length = router_logits[0].shape[0] // attention_mask.shape[0]
        mask = attention_mask[:, -length:].reshape(-1).to(device=device, dtype=torch.float32)
        mask = mask.repeat(len(router_logits))
        tokens_per_expert = (assignments * mask[:, None, None]).sum(dim=0) / mask.sum()
        prob_per_expert = (probs * mask[:, None]).sum(dim=0) / mask.sum()
    return num_experts * torch.sum(tokens_per_expert * prob_per_expert[None, :])


# ---------------------------------------------------------------------------------------------------------- model


class OtcePreTrainedModel(PreTrainedModel):
    config: OtceConfig
    config_class = OtceConfig
    base_model_prefix = "model"
    supports_gradient_checkpointing = True
    _no_split_modules = ["OtceDecoderLayer", "OtceExpresserLayer"]
    _skip_keys_device_placement = ["past_key_values"]
    _supports_flash_attn = True
    _supports_sdpa = True
    _is_stateful = True  # SSM states cannot be rolled back: no assisted decoding
    _can_compile_fullgraph = False
    _supports_attention_backend = True
    _can_record_outputs = {
        "hidden_states": OtceDecoderLayer,
        "attentions": OtceAttention,
        "router_logits": OutputRecorder(OtceTopKRouter, index=0),
    }

    @torch.no_grad()
    def _init_weights(self, module):
        super()._init_weights(module)
        std = self.config.initializer_range
        if isinstance(module, OtceMambaMixer):
            # Runs after the mixer's children were initialised (post-order), so these override the generic init.
            A = torch.arange(1, module.ssm_state_size + 1, dtype=torch.float32)[None, :]
            init.copy_(module.A_log, torch.log(A).expand_as(module.A_log))
            if module.D is not None:
                init.ones_(module.D)
            # Mamba's dt initialisation: dt log-uniform in [dt_min, dt_max], stored as softplus^-1 in the bias.
            cfg = self.config
            dt_std = module.time_step_rank**-0.5
            init.uniform_(module.dt_proj.weight, -dt_std, dt_std)
            log_min, log_max = torch.log(torch.tensor(cfg.mamba_dt_min)), torch.log(torch.tensor(cfg.mamba_dt_max))
            dt = torch.exp(torch.rand(module.intermediate_size) * (log_max - log_min) + log_min)
            dt = dt.clamp(min=cfg.mamba_dt_init_floor)
            init.copy_(module.dt_proj.bias, dt + torch.log(-torch.expm1(-dt)))
            if module.conv1d is not None:  # PyTorch's (and HF Mamba's) conv init, not the 0.02 normal
                init.kaiming_uniform_(module.conv1d.weight, a=5**0.5)
                if module.conv1d.bias is not None:
                    init.zeros_(module.conv1d.bias)
        elif isinstance(module, OtceTopKRouter):
            init.normal_(module.weight, mean=0.0, std=std)


class OtceModel(OtcePreTrainedModel):
    def __init__(self, config: OtceConfig):
        super().__init__(config)
        self.padding_idx = config.pad_token_id
        self.vocab_size = config.vocab_size
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size, self.padding_idx)
        layers = []
        for layer_idx in range(config.num_hidden_layers):
            last = layer_idx == config.num_hidden_layers - 1
            layer_class = OtceExpresserLayer if last and config.use_expresser else OtceDecoderLayer
            layers.append(layer_class(config, layer_idx))
        self.layers = nn.ModuleList(layers)
        self.norm = OtceRMSNorm(config.hidden_size, eps=config.rms_norm_eps)
        self.rotary_emb = OtceRotaryEmbedding(config) if config.attention_rope else None
        self.ssm_rotary_emb = OtceStateRotaryEmbedding(config) if config.mamba_rope else None
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
    ) -> MoeModelOutputWithPast:
        if (input_ids is None) ^ (inputs_embeds is not None):
            raise ValueError("You must specify exactly one of input_ids or inputs_embeds")
        past_key_values = cache if cache is not None else past_key_values
        if inputs_embeds is None:
            inputs_embeds = self.embed_tokens(input_ids)
        if use_cache and past_key_values is None:
            past_key_values = DynamicCache(config=self.config)
        batch, length = inputs_embeds.shape[:2]
        past_seen_tokens = past_key_values.get_seq_length() if past_key_values is not None else 0
        if position_ids is None:
            if attention_mask is not None and attention_mask.dim() == 2 and (
                attention_mask.shape[-1] == past_seen_tokens + length
            ):
                # Count only real tokens, so a left-padded sequence gets the positions it has alone (the SSM's
                # RoPE is not shift-invariant: its decay differs across state dimensions).
                position_ids = (attention_mask.long().cumsum(-1) - 1).clamp(min=0)[:, -length:]
            else:
                position_ids = torch.arange(length, device=inputs_embeds.device) + past_seen_tokens
                position_ids = position_ids.unsqueeze(0)

        causal_mask = create_causal_mask(
            config=self.config,
            inputs_embeds=inputs_embeds,
            attention_mask=attention_mask,
            position_ids=position_ids,
            **{CACHE_NAME: past_key_values},
        )
        ssm_mask = create_recurrent_attention_mask(
            config=self.config, inputs_embeds=inputs_embeds, attention_mask=attention_mask,
            **{CACHE_NAME: past_key_values},
        )
        # Positions that restart at 0 inside the sequence mark packed documents (or left padding): the SSM clears
        # its state there and its convolution does not reach across.
        segment_positions = None
        if length > 1 and bool((position_ids[:, 1:] == 0).any()):
            segment_positions = position_ids.expand(batch, -1)

        hidden_states = inputs_embeds
        position_embeddings = self.rotary_emb(hidden_states, position_ids) if self.rotary_emb is not None else None
        ssm_position_embeddings = None
        if self.ssm_rotary_emb is not None:
            ssm_position_embeddings = self.ssm_rotary_emb(hidden_states, position_ids)
        for decoder_layer in self.layers[: self.config.num_hidden_layers]:
            hidden_states = decoder_layer(
                hidden_states,
                attention_mask=causal_mask,
                ssm_mask=ssm_mask,
                position_ids=position_ids,
                past_key_values=past_key_values,
                use_cache=use_cache,
                position_embeddings=position_embeddings,
                ssm_position_embeddings=ssm_position_embeddings,
                segment_positions=segment_positions,
                **kwargs,
            )
        hidden_states = self.norm(hidden_states)
        return MoeModelOutputWithPast(last_hidden_state=hidden_states, **{CACHE_NAME: past_key_values})


class OtceForCausalLM(OtcePreTrainedModel, GenerationMixin):
    _tied_weights_keys = {"lm_head.weight": "model.embed_tokens.weight"}
    _tp_plan = {"lm_head": "colwise_gather_output"}
    _pp_plan = {"lm_head": (["hidden_states"], ["logits"])}

    def __init__(self, config: OtceConfig):
        super().__init__(config)
        self.model = OtceModel(config)
        self.vocab_size = config.vocab_size
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self.has_experts = any(block[1] == "E" for block in config.layers_block_type)
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
        output_router_logits: bool | None = None,
        logits_to_keep: int | torch.Tensor = 0,
        cache: Cache | None = None,
        **kwargs,
    ) -> MoeCausalLMOutputWithPast:
        r"""With `labels`, the loss is the causal LM loss plus `router_aux_loss_coef` times the load-balancing loss
        (also returned as `aux_loss`). Router logits are returned when `output_router_logits` is set."""
        requested = output_router_logits if output_router_logits is not None else self.config.output_router_logits
        need_router = self.has_experts and (requested or labels is not None)
        outputs: MoeModelOutputWithPast = self.model(
            input_ids=input_ids,
            attention_mask=attention_mask,
            position_ids=position_ids,
            past_key_values=cache if cache is not None else past_key_values,
            inputs_embeds=inputs_embeds,
            use_cache=use_cache,
            output_router_logits=need_router,
            **kwargs,
        )
        hidden_states = outputs.last_hidden_state
        slice_indices = slice(-logits_to_keep, None) if isinstance(logits_to_keep, int) else logits_to_keep
        logits = self.lm_head(hidden_states[:, slice_indices, :])
        loss = aux_loss = None
        if need_router:
            aux_loss = load_balancing_loss_func(
                outputs.router_logits, self.config.num_experts, self.config.num_experts_per_tok,
                attention_mask if attention_mask is not None and attention_mask.dim() == 2 else None,
            )
        if labels is not None:
            loss = self.loss_function(logits=logits, labels=labels, vocab_size=self.config.vocab_size, **kwargs)
            if aux_loss is not None:
                loss = loss + self.config.router_aux_loss_coef * aux_loss.to(loss.device)
        return MoeCausalLMOutputWithPast(
            loss=loss,
            aux_loss=aux_loss,
            logits=logits,
            **{CACHE_NAME: getattr(outputs, CACHE_NAME)},
            hidden_states=outputs.hidden_states,
            attentions=outputs.attentions,
            router_logits=outputs.router_logits if requested else None,
        )


__all__ = [
    "OtceForCausalLM",
    "OtceModel",
    "OtcePreTrainedModel",
    "linear_scan",
    "load_balancing_loss_func",
    "selective_scan",
]
