"""Shared-prefix attention: score a batch of questions that start with the same tokens without repeating them.

    from yunshan.eval.shared_prefix import supports_packed_tails, last_log_probs_packed
    if supports_packed_tails(lm.model):
        log_probs = last_log_probs_packed(lm, rows, shared)   # rows share their first `shared` token ids

A 5-shot prompt is mostly its header and solved examples, identical for every question of a subject. The prefix
runs once (batch 1) into a KV cache; then all the questions' own tails run as ONE packed row (no padding, positions
restarting after the prefix) against that cache, with an attention function that splits each query's attention in
two exact parts and merges them by their log-sum-exp, as Hydragen (Juravsky et al., 2024, "Hydragen:
High-Throughput LLM Inference with Shared Prefixes") and FlashInfer's cascade attention do:

    prefix part: every tail token against the shared prefix keys: one dense, non-causal attention call with the
                 query heads of a KV group stacked along the sequence axis (no KV repetition over the batch);
    tail part:   each tail causally against its own tokens (the tails padded to one short batch for this call only);
    merge:       o = o1 * exp(lse1 - lse) + o2 * exp(lse2 - lse), lse = logaddexp(lse1, lse2).

The same softmax over the same keys, so the outputs equal ordinary attention up to float rounding (tested against
the model's own forward). In the last layer only the tails' last tokens get an output: after that attention every
layer works per token, and only those positions' logits are read. Compared with repeating the prefix cache over the batch (the fallback in likelihood.py),
this saves the copies of the cache, the padding of the tails in every projection and MLP, and the per-layer mask.

Written here because transformers has no shared-prefix attention for its eager/SDPA paths and vLLM/FlashInfer need
a GPU. It is registered (on first use) under transformers' documented extension point, `AttentionInterface`, and
used only for model types whose layers mix tokens through attention alone: packing the tails into one row would
let a convolution or state-space layer read across questions.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import torch

ATTENTION_NAME = "yunshan_shared_prefix"

# Model types whose only token mixing is (full, unwindowed) causal attention through ALL_ATTENTION_FUNCTIONS and
# whose layers forward extra keyword arguments to it. Anything else uses the repeated-cache path.
_PACKABLE_TYPES = {"llama", "mistral", "qwen2", "qwen3", "pangu_pi"}


@dataclass
class PackedTails:
    """Layout of the packed tail row: tail i occupies packed positions starts[i] .. starts[i] + lengths[i] - 1."""

    prefix_length: int
    lengths: list[int]
    to_padded: torch.Tensor  # (batch * max_length,) packed index for every padded slot (pads point at slot 0)
    to_packed: torch.Tensor  # (n_packed,) padded flat index of every packed token
    last: torch.Tensor  # (batch,) packed index of each tail's last token
    valid: torch.Tensor  # (batch, width) True where a padded slot holds a real token
    last_only_layer: int | None = None  # in this call (1-based), only the tails' last tokens need an output
    calls: int = field(default=0)

    @classmethod
    def build(cls, prefix_length: int, lengths: list[int], device, last_only_layer: int | None = None) -> PackedTails:
        width = max(lengths)
        ends = torch.tensor(lengths, dtype=torch.long).cumsum(0)
        starts = ends - torch.tensor(lengths)
        offsets = torch.arange(width)
        valid = offsets[None, :] < torch.tensor(lengths)[:, None]
        to_padded = torch.where(valid, starts[:, None] + offsets[None, :], 0).reshape(-1)
        to_packed = (torch.arange(len(lengths))[:, None] * width + offsets[None, :])[valid]
        return cls(prefix_length, list(lengths), to_padded.to(device), to_packed.to(device), (ends - 1).to(device),
                   valid.to(device), last_only_layer)

    @property
    def width(self) -> int:
        return max(self.lengths)


def _attention_with_lse(query, key, value, causal: bool, scale: float,
                        kernel: bool | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """softmax(q k^T * scale [causal]) v and the log-sum-exp of each query's scores, float32 for the lse.

    Shapes (batch, heads, length, head_dim); key and value have as many heads as query. `kernel` (default: on CPU)
    picks torch's CPU flash-attention kernel over the plain matmul formulation."""
    if kernel is None:  # a private op of torch's CPU backend (present in the pinned torch); else plain matmuls
        kernel = query.device.type == "cpu" and hasattr(torch.ops.aten, "_scaled_dot_product_flash_attention_for_cpu")
    if kernel:
        # The CPU flash kernel returns the log-sum-exp it computes anyway (public SDPA does not expose it).
        out, lse = torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(
            query, key, value, 0.0, causal, scale=scale)
        return out, lse.float()
    scores = torch.matmul(query.float(), key.float().transpose(-1, -2)) * scale
    if causal:
        n_q, n_k = scores.shape[-2:]
        scores = scores.masked_fill(torch.ones(n_q, n_k, dtype=torch.bool, device=scores.device).triu(1), -torch.inf)
    lse = torch.logsumexp(scores, dim=-1)
    out = torch.matmul(torch.exp(scores - lse[..., None]), value.float()).to(query.dtype)
    return out, lse


def _common_dtype(query, key, value):
    """q, k and v in the dtype transformers' SDPA attention would compute in.

    Under bf16 autocast the projections come out in bf16 but rotary embeddings can return float32 queries and keys
    (and a KV cache keeps what it was given), while the CPU flash kernel needs one dtype: autocast casts SDPA's
    inputs to its dtype, so this does the same; without autocast keys and values follow the query."""
    device = query.device.type
    if torch.is_autocast_enabled(device):
        dtype = torch.get_autocast_dtype(device)
    else:
        dtype = query.dtype
    return query.to(dtype), key.to(dtype), value.to(dtype)


def shared_prefix_attention(module, query, key, value, attention_mask, dropout: float = 0.0,
                            scaling: float | None = None, yunshan_packed_tails: PackedTails | None = None, **kwargs):
    """Attention function (transformers' AttentionInterface signature) for one packed row of tails after a prefix.

    query: (1, heads, n_packed, d); key/value: (1, kv_heads, prefix + n_packed, d) as the KV cache returns them.
    Returns (1, n_packed, heads, d) like sdpa_attention_forward."""
    layout = yunshan_packed_tails
    if layout is None:
        raise RuntimeError(f"the {ATTENTION_NAME!r} attention was called without its packed-tails layout")
    if kwargs.get("softcap") is not None or kwargs.get("sliding_window") is not None or kwargs.get("s_aux") is not None:
        raise RuntimeError(f"the {ATTENTION_NAME!r} attention does not support softcap, sliding windows or sinks")
    layout.calls += 1
    query, key, value = _common_dtype(query, key, value)
    _, heads, n_packed, d = query.shape
    kv_heads = key.shape[1]
    groups = heads // kv_heads
    scale = scaling if scaling is not None else d ** -0.5
    prefix = layout.prefix_length
    if layout.calls == layout.last_only_layer:
        return _last_tokens_attention(layout, query, key, value, scale)

    # Prefix part: the `groups` query heads sharing a KV head are stacked along the sequence axis, so the prefix
    # keys are read once per KV head (no repeat over heads or questions).
    q_stack = query.reshape(1, kv_heads, groups * n_packed, d)
    out1, lse1 = _attention_with_lse(q_stack, key[:, :, :prefix], value[:, :, :prefix], False, scale)
    out1 = out1.reshape(1, heads, n_packed, d)
    lse1 = lse1.reshape(1, heads, n_packed)

    # Tail part: each tail causally over its own tokens. Right padding with a causal mask never lets a real query
    # see a pad key, so no mask tensor is needed; the padded queries' outputs are dropped.
    batch, width = len(layout.lengths), layout.width
    def padded(t, n_heads):
        return t[0].index_select(1, layout.to_padded).reshape(n_heads, batch, width, d).transpose(0, 1)
    k_tail, v_tail = key[:, :, prefix:], value[:, :, prefix:]
    if groups > 1:
        k_tail = k_tail.repeat_interleave(groups, dim=1)
        v_tail = v_tail.repeat_interleave(groups, dim=1)
    out2, lse2 = _attention_with_lse(padded(query, heads), padded(k_tail, heads), padded(v_tail, heads), True, scale)
    out2 = out2.transpose(0, 1).reshape(heads, batch * width, d).index_select(1, layout.to_packed)[None]
    lse2 = lse2.transpose(0, 1).reshape(heads, batch * width).index_select(1, layout.to_packed)[None]

    lse = torch.logaddexp(lse1, lse2)
    w1, w2 = torch.exp(lse1 - lse)[..., None], torch.exp(lse2 - lse)[..., None]
    out = (out1.float() * w1 + out2.float() * w2).to(query.dtype)
    return out.transpose(1, 2).contiguous(), None


def _last_tokens_attention(layout: PackedTails, query, key, value, scale: float):
    """The last layer's attention for the tails' last tokens only (the only outputs the scores read: after the last
    attention every layer is per token); the other rows are left zero."""
    _, heads, n_packed, d = query.shape
    kv_heads = key.shape[1]
    groups, batch, width, prefix = heads // kv_heads, len(layout.lengths), layout.width, layout.prefix_length
    q = query[:, :, layout.last]  # (1, heads, batch, d)
    out1, lse1 = _attention_with_lse(q.reshape(1, kv_heads, groups * batch, d), key[:, :, :prefix],
                                     value[:, :, :prefix], False, scale)
    out1, lse1 = out1.reshape(heads, batch, d).float(), lse1.reshape(heads, batch)
    # Each last token against its own tail's keys (all of them are at or before it; pads masked).
    k_tail = key[0, :, prefix:].index_select(1, layout.to_padded).reshape(kv_heads, batch, width, d)
    v_tail = value[0, :, prefix:].index_select(1, layout.to_padded).reshape(kv_heads, batch, width, d)
    q_grouped = q[0].reshape(kv_heads, groups, batch, d).float()
    scores = torch.einsum("kgbd,kbwd->kgbw", q_grouped, k_tail.float()) * scale
    scores = scores.masked_fill(~layout.valid, -torch.inf)
    lse2 = torch.logsumexp(scores, dim=-1)
    out2 = torch.einsum("kgbw,kbwd->kgbd", torch.exp(scores - lse2[..., None]), v_tail.float())
    out2, lse2 = out2.reshape(heads, batch, d), lse2.reshape(heads, batch)
    lse = torch.logaddexp(lse1, lse2)
    merged = out1 * torch.exp(lse1 - lse)[..., None] + out2 * torch.exp(lse2 - lse)[..., None]
    out = query.new_zeros(1, n_packed, heads, d)
    out[0, layout.last] = merged.transpose(0, 1).to(query.dtype)
    return out, None


def _register() -> None:
    from transformers import AttentionInterface

    if ATTENTION_NAME not in AttentionInterface._global_mapping:
        AttentionInterface.register(ATTENTION_NAME, shared_prefix_attention)


@contextlib.contextmanager
def _attention_implementation(model, name: str):
    previous = model.config._attn_implementation
    model.config._attn_implementation = name
    try:
        yield
    finally:
        model.config._attn_implementation = previous


@torch.no_grad()
def prefix_pass(model, prefix: list[int], positions: list[list[int]]):
    """Run the shared prefix once: its cache, and the float32 log-softmax at every needed position inside it (the
    logits of the other prefix positions are never computed)."""
    from transformers import DynamicCache

    device = next(model.parameters()).device
    shared = len(prefix)
    inside = sorted({p for pos in positions for p in pos if p < shared})
    cache = DynamicCache(config=model.config)
    keep = torch.tensor(inside or [shared - 1], dtype=torch.long, device=device)
    prefix_logits = model(input_ids=torch.tensor([prefix], device=device), use_cache=True,
                          logits_to_keep=keep, **{cache_argument(model): cache}).logits[0]
    return cache, {p: torch.log_softmax(prefix_logits[k].float(), dim=-1) for k, p in enumerate(inside)}


def log_probs_packed_at(lm, rows: list[list[int]], shared: int, positions: list[list[int]]) -> list[torch.Tensor]:
    """Log-softmax (float32, shape (len(positions[i]), vocab)) at the given input positions of each row, as one
    forward of each row would give them; rows[i][:shared] must all be equal.

    The prefix runs once and returns the logits of the needed positions inside it (usually only its last, which
    predicts every option's first token); the tails (each row after the prefix) run as one packed row against its
    cache, every tail token getting an output (multi-token continuations: cloze options)."""
    model = lm.model
    device = next(model.parameters()).device
    cache, found = prefix_pass(model, rows[0][:shared], positions)
    tail_rows = [i for i, row in enumerate(rows) if any(p >= shared for p in positions[i])]
    tail_index: dict[tuple[int, int], int] = {}
    if tail_rows:
        lengths = [max(p for p in positions[i]) + 1 - shared for i in tail_rows]  # tokens after the last needed
        starts = [sum(lengths[:k]) for k in range(len(lengths))]                  # position are not run at all
        wanted = []
        for slot, i in enumerate(tail_rows):
            for p in positions[i]:
                if p >= shared:
                    tail_index[(i, p)] = len(wanted)
                    wanted.append(starts[slot] + p - shared)
        _register()
        layout = PackedTails.build(shared, lengths, device)
        ids = torch.tensor([[t for i, n in zip(tail_rows, lengths) for t in rows[i][shared:shared + n]]],
                           dtype=torch.long, device=device)
        position_ids = torch.cat([torch.arange(shared, shared + n) for n in lengths]).unsqueeze(0).to(device)
        with _attention_implementation(model, ATTENTION_NAME):
            logits = model(input_ids=ids, position_ids=position_ids, use_cache=True, yunshan_packed_tails=layout,
                           logits_to_keep=torch.tensor(wanted, dtype=torch.long, device=device),
                           **{cache_argument(model): cache}).logits[0]
        if layout.calls != model.config.num_hidden_layers:
            raise RuntimeError(f"{type(model).__name__}: the shared-prefix attention ran in {layout.calls} of "
                               f"{model.config.num_hidden_layers} layers; its layers do not pass attention kwargs "
                               "through")
    out = []
    for i, pos in enumerate(positions):
        out.append(torch.stack([found[p] if p < shared else torch.log_softmax(logits[tail_index[(i, p)]].float(),
                                                                               dim=-1) for p in pos]))
    return out


def supports_packed_tails(model) -> bool:
    """True for model types whose layers mix tokens only by full causal attention through ALL_ATTENTION_FUNCTIONS."""
    config = model.config
    kind = getattr(config, "model_type", None)
    if kind not in _PACKABLE_TYPES or getattr(config, "_attn_implementation", None) not in ("sdpa", "eager"):
        return False
    if getattr(config, "sliding_window", None) is not None and getattr(config, "use_sliding_window", True):
        return False
    if kind == "pangu_pi" and getattr(config, "siaf_neighbor_kernel", 1) > 1:
        return False  # the neighbour convolution reads the previous tokens of the row
    if any(t != "full_attention" for t in (getattr(config, "layer_types", None) or [])):
        return False
    return getattr(config, "attn_logit_softcapping", None) is None


def cache_argument(model) -> str | None:
    """The name under which `model.forward` takes a KV cache: `cache` (transformers >= 5.24, which renamed it),
    `past_key_values` (earlier versions and models written for them), or None."""
    import inspect

    params = inspect.signature(model.forward).parameters
    return next((name for name in ("cache", "past_key_values") if name in params), None)


@torch.no_grad()
def prefix_cache(model, prefix: list[int]):
    """A DynamicCache holding the KV (and any convolution state) of one run of `prefix` (batch 1)."""
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    device = next(model.parameters()).device
    model(input_ids=torch.tensor([prefix], device=device), use_cache=True, logits_to_keep=1,
          **{cache_argument(model): cache})
    return cache


@torch.no_grad()
def last_log_probs_packed(lm, rows: list[list[int]], shared: int) -> list[torch.Tensor]:
    """Log-softmax (float32, shape (1, vocab)) at each row's last position; rows[i][:shared] must all be equal and
    every row must have at least one token after them."""
    model = lm.model
    device = next(model.parameters()).device
    tails = [r[shared:] for r in rows]
    lengths = [len(t) for t in tails]
    if min(lengths) < 1:
        raise ValueError("every row needs at least one token after the shared prefix")
    cache = prefix_cache(model, rows[0][:shared])
    _register()
    # The last layer only needs outputs at the tails' last tokens: for the attention-only models accepted here
    # nothing after it mixes tokens, and only those positions' logits are read.
    layout = PackedTails.build(shared, lengths, device, last_only_layer=model.config.num_hidden_layers)
    ids = torch.tensor([[t for tail in tails for t in tail]], dtype=torch.long, device=device)
    positions = torch.cat([torch.arange(shared, shared + n) for n in lengths]).unsqueeze(0).to(device)
    with _attention_implementation(model, ATTENTION_NAME):
        logits = model(input_ids=ids, position_ids=positions, use_cache=True, logits_to_keep=layout.last,
                       yunshan_packed_tails=layout, **{cache_argument(model): cache}).logits
    if layout.calls != model.config.num_hidden_layers:
        raise RuntimeError(f"{type(model).__name__}: the shared-prefix attention ran in {layout.calls} of "
                           f"{model.config.num_hidden_layers} layers; its layers do not pass attention kwargs through")
    return [torch.log_softmax(logits[0, i: i + 1].float(), dim=-1) for i in range(len(rows))]
