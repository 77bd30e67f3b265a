"""OTCE model classes: numbers against references (transformers' Jamba, naive recurrences, hand computations)."""

import io
import json
import math
import os
import subprocess
import sys
import textwrap
from contextlib import redirect_stdout

import pytest
import torch
import torch.nn.functional as F
from transformers import AutoConfig, AutoModel, AutoModelForCausalLM, DynamicCache, JambaConfig, JambaForCausalLM

import yunshan  # noqa: F401  (registers the Auto classes)
from yunshan.models.info import count_parameters_by_part
from yunshan.models.otce import (
    OTCE_LORA_TARGETS,
    OTCE_PRESETS,
    OtceConfig,
    OtceForCausalLM,
    OtceModel,
    parse_layer_pattern,
)
from yunshan.models.otce.convert import from_jamba, jamba_layer_pattern
from yunshan.models.otce.modeling_otce import (
    OtceLinearScan,
    linear_scan,
    load_balancing_loss_func,
    selective_scan,
)

VOCAB = 97


def tiny_config(**overrides) -> OtceConfig:
    fields = dict(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=48, layer_pattern="SM SE AE SM AM",
        num_attention_heads=4, num_key_value_heads=2, mamba_d_state=8, mamba_expand=2, num_experts=4,
        num_experts_per_tok=2, expert_intermediate_size=24, max_position_embeddings=256, pad_token_id=0,
    )
    fields.update(overrides)
    return OtceConfig(**fields)


def perturb(model):
    """Give the parts a fresh init leaves near-trivial (norm gains, D, conv bias) values that exercise them."""
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight") or name.endswith(".D") or "conv1d.bias" in name:
                param.normal_(1.0 if "norm" in name or name.endswith(".D") else 0.0, 0.3)
    return model


def build(**overrides):
    return perturb(OtceForCausalLM(tiny_config(**overrides))).eval()


# ---------------------------------------------------------------- layer pattern and config validation


def test_layer_pattern_expands_the_paper_layouts():
    blocks = parse_layer_pattern("SM SE*11 AE*2 SE*8 SM AM")
    assert blocks == ["SM"] + ["SE"] * 11 + ["AE"] * 2 + ["SE"] * 8 + ["SM", "AM"]
    assert parse_layer_pattern("SMSMSMSMAMSMSMAM") == ["SM"] * 4 + ["AM"] + ["SM"] * 2 + ["AM"]
    # Table 8's Jamba layout in the paper's own notation, and a lower-case variant.
    jamba = parse_layer_pattern("(SM+SE+SM+SE+AM+SE+SM+SE)×3")
    assert jamba == ["SM", "SE", "SM", "SE", "AM", "SE", "SM", "SE"] * 3
    assert parse_layer_pattern("(sm se) * 2 am") == ["SM", "SE", "SM", "SE", "AM"]
    config = OtceConfig.from_preset("otce-1b")
    assert config.num_hidden_layers == 24
    assert config.layer_types.count("full_attention") == 3 and config.layer_types[12] == "full_attention"


@pytest.mark.parametrize(
    "overrides, field",
    [
        (dict(layer_pattern="SM SX AM"), "layer_pattern"),  # unknown letter
        (dict(layer_pattern="SM S AM"), "layer_pattern"),  # mixer without feed-forward
        (dict(layer_pattern="SM ME AM"), "layer_pattern"),  # feed-forward first
        (dict(layer_pattern="SM*0 AM"), "layer_pattern"),  # repeat count
        (dict(layer_pattern="SM* AM"), "layer_pattern"),
        (dict(layer_pattern="(SM SE AM"), "layer_pattern"),  # unclosed group
        (dict(layer_pattern="SM) AM"), "layer_pattern"),
        (dict(layer_pattern="  "), "layer_pattern"),
        (dict(layer_pattern="SM SE SM"), "layer_pattern"),  # no attention block
        (dict(num_experts_per_tok=5), "num_experts_per_tok"),  # top-k > experts
        (dict(num_experts=0), "num_experts"),
        (dict(expert_type="shared"), "expert_type"),
        (dict(ffn_up_act="swish"), "ffn_up_act"),
        (dict(hidden_act="swiglu"), "hidden_act"),
        (dict(layer_pattern="SM AM SM"), "use_expresser"),  # Expresser needs a last attention block
        (dict(expert_type="cohesive", shared_expert_intermediate_size=16), "shared_expert_intermediate_size"),
        (dict(num_hidden_layers=4), "num_hidden_layers"),
        (dict(num_key_value_heads=3), "num_key_value_heads"),
        (dict(mamba_d_state=7), "mamba_d_state"),  # RoPE rotates pairs
        (dict(mamba_d_conv=1), "mamba_d_conv"),
        (dict(mamba_chunk_size=-1), "mamba_chunk_size"),
        (dict(hidden_size=30), "hidden_size"),
    ],
)
def test_every_invalid_field_raises_naming_it(overrides, field):
    with pytest.raises(ValueError) as err:
        tiny_config(**overrides)
    message = str(err.value)
    assert f"OtceConfig.{field}=" in message
    assert "must" in message or "valid" in message  # says what would be valid


def test_pattern_errors_point_at_the_character():
    with pytest.raises(ValueError, match=r"at character 3: unknown letter 'X'"):
        parse_layer_pattern("SM XM AM")
    with pytest.raises(ValueError, match=r"at character 4: mixer 'S' must be followed by .* found 'X'"):
        parse_layer_pattern("SM SX AM")
    with pytest.raises(ValueError, match="preset"):
        OtceConfig.from_preset("otce-7b")


# ---------------------------------------------------------------- parameter counts


def test_presets_reproduce_the_paper_parameter_counts():
    small = count_parameters_by_part(OtceConfig.from_preset("otce-281m"))
    assert 281.0e6 <= small["total"] <= 282.0e6  # paper Table 1: 281M
    # The same layout as Jamba (last block SSM + MLP, no Expresser) is the paper's 283M Jamba.
    jamba = JambaConfig(
        vocab_size=65536, hidden_size=1024, intermediate_size=4096, num_hidden_layers=8, num_attention_heads=16,
        num_key_value_heads=2, mamba_d_state=16, num_experts=1, expert_layer_period=1, expert_layer_offset=0,
    )
    assert 283.0e6 <= count_parameters_by_part(jamba)["total"] <= 284.5e6
    big = count_parameters_by_part(OtceConfig.from_preset("otce-1b"))
    assert 0.99e9 <= big["total"] <= 1.01e9  # paper Table 6: 1B
    c = OtceConfig.from_preset("otce-1b")
    d, n_moe = c.hidden_size, 21
    # Shared : private expert parameters 1 : 8 (paper Table 6).
    assert big["shared_experts"] * 8 == n_moe * 4 * 3 * d * c.expert_intermediate_size
    assert big["router"] == n_moe * c.num_experts * d
    assert big["expresser"] == 2 * d * d + d


def test_parameter_parts_of_otce_names_leave_other_models_alone():
    from yunshan.models.info import part_of

    assert part_of("model.layers.4.dense.weight") == part_of("model.layers.4.projection.weight") == "expresser"
    assert part_of("model.layers.0.mamba.b_layernorm.weight") == "ssm"
    assert part_of("model.layers.1.feed_forward.experts.2.shared_gate.weight") == "experts"
    assert part_of("model.layers.1.feed_forward.shared_expert.up_proj.weight") == "shared_experts"
    assert part_of("gpt_neox.layers.0.attention.dense.weight") == "attention"  # GPT-NeoX / Phi / Falcon names


@pytest.mark.parametrize("expert_type", ["plain", "cohesive", "expansive"])
def test_expert_sharing_matches_the_formulas(expert_type):
    shared = {"plain": 0, "cohesive": 24, "expansive": 40}[expert_type]
    config = tiny_config(expert_type=expert_type, shared_expert_intermediate_size=shared)
    parts = count_parameters_by_part(config)
    d, e, i, n_moe = 32, 4, 24, 2
    expected = {
        "plain": (n_moe * e * 3 * d * i, 0),
        "cohesive": (n_moe * e * 2 * d * i, n_moe * d * i),  # W, W2 private; exactly one V per block
        "expansive": (n_moe * e * (3 * d * i + d), n_moe * 3 * d * shared),  # private FFN + w3; one shared FFN
    }[expert_type]
    assert (parts["experts"], parts["shared_experts"]) == expected
    assert parts["router"] == n_moe * e * d
    model = OtceForCausalLM(config)
    block = model.model.layers[1].feed_forward
    if expert_type == "cohesive":
        assert block.shared_up_proj.weight.shape == (i, d)
        assert not any("up_proj" in n for n, _ in block.experts.named_parameters())
    if expert_type == "plain":
        plus_shared = count_parameters_by_part(tiny_config(expert_type="plain", shared_expert_intermediate_size=20))
        assert plus_shared["shared_experts"] == n_moe * 3 * d * 20  # DeepSeekMoE's isolated shared expert


# ---------------------------------------------------------------- the scan


def naive_selective_scan(x, dt, A, B, C, D, h0=None, resets=None):
    """The per-step recurrence exactly as written in the paper (float64 loops, no vectorisation over time)."""
    batch, length, d_inner = x.shape
    h = torch.zeros(batch, d_inner, A.shape[1], dtype=torch.float64) if h0 is None else h0.double().clone()
    ys = []
    for t in range(length):
        decay = torch.exp(dt[:, t, :, None].double() * A.double())
        if resets is not None:
            decay = decay * (~resets[:, t]).double()[:, None, None]
        h = decay * h + dt[:, t, :, None].double() * B[:, t, None, :].double() * x[:, t, :, None].double()
        ys.append((h * C[:, t, None, :].double()).sum(-1) + D.double() * x[:, t].double())
    return torch.stack(ys, 1), h


@pytest.mark.parametrize("chunk_size", [1, 3, 4, 16, 64])
def test_scan_equals_naive_recurrence(chunk_size):
    batch, length, d_inner, n = 2, 21, 6, 4
    x = torch.randn(batch, length, d_inner)
    dt = F.softplus(torch.randn(batch, length, d_inner))
    A = -torch.rand(d_inner, n) * 3
    B, C = torch.randn(batch, length, n), torch.randn(batch, length, n)
    D = torch.randn(d_inner)
    h0 = torch.randn(batch, d_inner, n)
    resets = torch.zeros(batch, length, dtype=torch.bool)
    resets[1, 9] = True
    for args in ((None, None), (h0, None), (h0, resets)):
        y, last = selective_scan(x, dt, A, B, C, D, *args, chunk_size=chunk_size)
        y_ref, last_ref = naive_selective_scan(x, dt, A, B, C, D, *args)
        torch.testing.assert_close(y.double(), y_ref, atol=2e-5, rtol=1e-5)
        torch.testing.assert_close(last.double(), last_ref, atol=2e-5, rtol=1e-5)
    with torch.no_grad():  # inference runs long inputs in blocks of time, carrying the state
        long = (torch.randn(1, 150, 3), F.softplus(torch.randn(1, 150, 3)), A[:3], torch.randn(1, 150, n),
                torch.randn(1, 150, n), D[:3], h0[:1, :3], resets[1:].repeat(1, 8)[:, :150])
        y, last = selective_scan(*long, chunk_size=chunk_size)
    y_ref, last_ref = naive_selective_scan(*long)
    torch.testing.assert_close(y.double(), y_ref, atol=2e-5, rtol=1e-5)
    torch.testing.assert_close(last.double(), last_ref, atol=2e-5, rtol=1e-5)
    # A single decoding step (its own fast path), with a reset in one row only.
    one = (x[:, 9:10], dt[:, 9:10], A, B[:, 9:10], C[:, 9:10], D, h0, resets[:, 9:10])
    y, last = selective_scan(*one, chunk_size=chunk_size)
    y_ref, last_ref = naive_selective_scan(*one)
    torch.testing.assert_close(y.double(), y_ref, atol=2e-5, rtol=1e-5)
    torch.testing.assert_close(last.double(), last_ref, atol=2e-5, rtol=1e-5)


@pytest.mark.parametrize("chunk_size", [1, 4])
def test_scan_backward_passes_gradcheck(chunk_size):
    a = torch.rand(9, 2, 3, dtype=torch.float64) * 0.9 + 0.05
    b = torch.randn(9, 2, 3, dtype=torch.float64)
    h0 = torch.randn(2, 3, dtype=torch.float64)
    for p in (a, b, h0):
        p.requires_grad_(True)
    assert torch.autograd.gradcheck(lambda a, b, h0: OtceLinearScan.apply(a, b, h0, chunk_size), (a, b, h0))
    assert torch.autograd.gradcheck(lambda a, b: OtceLinearScan.apply(a, b, None, chunk_size), (a, b))


def test_chunked_and_per_step_training_give_the_same_logits_and_gradients():
    per_step = build(mamba_chunk_size=1).train()
    chunked = OtceForCausalLM(tiny_config(mamba_chunk_size=4)).train()
    chunked.load_state_dict(per_step.state_dict())
    ids = torch.randint(1, VOCAB, (2, 19))
    loss_a = per_step(ids, labels=ids, use_cache=False).loss
    loss_b = chunked(ids, labels=ids, use_cache=False).loss
    loss_a.backward()
    loss_b.backward()
    torch.testing.assert_close(loss_a, loss_b, atol=1e-6, rtol=1e-6)
    grads = dict(chunked.named_parameters())
    for name, p in per_step.named_parameters():
        torch.testing.assert_close(p.grad, grads[name].grad, atol=1e-5, rtol=1e-4)
    assert linear_scan(torch.ones(5, 1), torch.ones(5, 1), None, 2).flatten().tolist() == [1, 2, 3, 4, 5]


def naive_mixer(mixer, h, position_ids):
    """The SSM block from its weights, step by step, RoPE as explicit 2x2 rotations of (i, i + N/2) pairs."""
    n = mixer.ssm_state_size
    x, z = mixer.in_proj(h).chunk(2, dim=-1)
    k = mixer.conv_kernel_size
    padded = F.pad(x.transpose(1, 2), (k - 1, 0))
    x = F.silu(F.conv1d(padded, mixer.conv1d.weight, mixer.conv1d.bias, groups=x.shape[-1])).transpose(1, 2)
    dt, B, C = torch.split(mixer.x_proj(x), [mixer.time_step_rank, n, n], dim=-1)
    dt, B, C = mixer.dt_layernorm(dt), mixer.b_layernorm(B), mixer.c_layernorm(C)
    theta = 10000.0 ** (-torch.arange(0, n, 2, dtype=torch.float64) / n)
    angle = position_ids[0, :, None].double() * theta  # (length, N/2)
    cos, sin = angle.cos(), angle.sin()

    def rotate(v):
        v1, v2 = v[..., : n // 2].double(), v[..., n // 2 :].double()
        return torch.cat([v1 * cos - v2 * sin, v2 * cos + v1 * sin], -1)

    B, C = rotate(B), rotate(C)
    dt = F.softplus(mixer.dt_proj(dt))
    A = -torch.exp(mixer.A_log)
    y, _ = naive_selective_scan(x, dt, A, B, C, mixer.D)
    return mixer.out_proj((y.float() * F.silu(z)))


def test_ssm_block_matches_the_paper_formulas_step_by_step():
    model = build()
    mixer = model.model.layers[0].mamba
    h = torch.randn(2, 11, 32)
    positions = torch.arange(11)[None]
    emb = model.model.ssm_rotary_emb(h, positions)
    torch.testing.assert_close(mixer(h, emb), naive_mixer(mixer, h, positions), atol=1e-5, rtol=1e-4)


def test_ssm_rope_makes_c_dot_b_depend_only_on_the_distance():
    model = build()
    rope = model.model.ssm_rotary_emb
    c, b = torch.randn(8), torch.randn(8)
    positions = torch.tensor([[2, 5, 10, 13, 40, 43]])
    cos, sin = rope(c[None, None], positions)
    rot = lambda v, i: v * cos[0, i] + torch.cat([-v[4:], v[:4]]) * sin[0, i]  # noqa: E731
    pairs = [(rot(c, j) @ rot(b, i)).item() for i, j in ((0, 1), (2, 3), (4, 5))]  # all at distance 3
    assert pairs[0] == pytest.approx(pairs[1], abs=1e-5) and pairs[0] == pytest.approx(pairs[2], abs=1e-5)
    assert abs((rot(c, 1) @ rot(b, 0)).item() - (rot(c, 2) @ rot(b, 0)).item()) > 1e-3


# ---------------------------------------------------------------- feed-forwards, experts, Expresser


def test_dense_mlp_is_swi_tanh_dglu():
    model = build()
    mlp = model.model.layers[0].feed_forward
    x = torch.randn(3, 32)
    expected = (F.silu(x @ mlp.gate_proj.weight.T) * torch.tanh(x @ mlp.up_proj.weight.T)) @ mlp.down_proj.weight.T
    torch.testing.assert_close(mlp(x), expected)


@pytest.mark.parametrize("expert_type", ["plain", "cohesive", "expansive"])
def test_experts_match_a_hand_computation(expert_type):
    shared = {"plain": 20, "cohesive": 24, "expansive": 40}[expert_type]
    model = build(expert_type=expert_type, shared_expert_intermediate_size=shared)
    block = model.model.layers[1].feed_forward
    x = torch.randn(1, 7, 32)
    out = block(x)[0]
    swi = lambda m, v: m.down_proj(F.silu(m.gate_proj(v)) * torch.tanh(m.up_proj(v)))  # noqa: E731
    for t in range(7):
        token = x[0, t]
        probs = torch.softmax(token @ block.router.weight.T, -1)
        top = torch.topk(probs, 2).indices.tolist()
        expected = torch.zeros(32)
        if expert_type == "plain":
            expected = swi(block.shared_expert, token)  # the always-on shared expert
        for e in top:  # softmax weights of the chosen experts, not renormalised
            expert = block.experts[e]
            if expert_type == "plain":
                y = swi(expert, token)
            elif expert_type == "cohesive":  # Eq. 18: the expert's own W and W2, the block's one V
                y = expert.down_proj(F.silu(expert.gate_proj(token)) * torch.tanh(block.shared_up_proj(token)))
            else:  # Eq. 19: s = shared FFN(x); FFN_e(sigmoid(s . w3_e) * s)
                s = swi(block.shared_expert, token)
                y = swi(expert, torch.sigmoid(expert.shared_gate.weight[0] @ s) * s)
            expected = expected + probs[e] * y
        torch.testing.assert_close(out[t], expected, atol=1e-6, rtol=1e-5)


def test_expresser_matches_its_formula():
    model = build()
    layer = model.model.layers[-1]
    x = torch.randn(1, 6, 32)
    positions = torch.arange(6)[None]
    emb = model.model.rotary_emb(x, positions)
    attn, _ = layer.self_attn(layer.input_layernorm(x), emb, attention_mask=None)
    h = x + attn
    h = h + layer.feed_forward(layer.pre_ff_layernorm(h))
    expected = layer.projection(F.silu(layer.dense(layer.pre_dense_layernorm(h) + x)))
    torch.testing.assert_close(layer(x, position_embeddings=emb, position_ids=positions), expected)


def test_aux_loss_matches_a_hand_computation():
    torch.manual_seed(3)
    layers = [torch.randn(6, 4), torch.randn(6, 4)]  # 2 MoE layers, batch 2 x length 3 tokens, 4 experts
    mask = torch.tensor([[0, 1, 1], [1, 1, 1]])
    top_k, experts = 2, 4
    rows = [(layer, r) for layer in layers for r in range(6) if mask.flatten()[r]]
    counts, probs = [0.0] * experts, [0.0] * experts
    for layer, r in rows:
        p = torch.softmax(layer[r], -1).tolist()
        for e in sorted(range(experts), key=lambda e: -p[e])[:top_k]:
            counts[e] += 1
        for e in range(experts):
            probs[e] += p[e]
    expected = experts * sum((counts[e] / len(rows)) * (probs[e] / len(rows)) for e in range(experts))
    got = load_balancing_loss_func(tuple(layers), experts, top_k, mask)
    assert got.item() == pytest.approx(expected, rel=1e-6)
    unmasked = load_balancing_loss_func(tuple(layers), experts, top_k, None)
    assert unmasked.item() != pytest.approx(expected, rel=1e-3)


def test_loss_adds_the_weighted_aux_loss_and_router_logits_come_on_request():
    model = build(router_aux_loss_coef=0.25)
    ids = torch.randint(1, VOCAB, (2, 10))
    mask = torch.ones_like(ids)
    mask[0, :3] = 0
    out = model(ids, attention_mask=mask, labels=ids, output_router_logits=True)
    assert len(out.router_logits) == 2 and out.router_logits[0].shape == (20, 4)  # the two E blocks
    aux = load_balancing_loss_func(out.router_logits, 4, 2, mask)
    ce = F.cross_entropy(out.logits[:, :-1].reshape(-1, VOCAB), ids[:, 1:].reshape(-1))
    torch.testing.assert_close(out.aux_loss, aux)
    torch.testing.assert_close(out.loss, ce + 0.25 * aux)
    plain = model(ids, attention_mask=mask)
    assert plain.router_logits is None and plain.loss is None
    dense = build(layer_pattern="SM AM")
    assert dense(ids, labels=ids).aux_loss is None


# ---------------------------------------------------------------- forward semantics and caching


MIXER_CONFIGS = {
    "ssm_conv": dict(layer_pattern="SM SE AM", use_expresser=False),
    "ssm_no_conv": dict(layer_pattern="SM SE AM", use_expresser=False, mamba_use_conv=False, mamba_use_d=False),
    "attention": dict(layer_pattern="AM AE", use_expresser=False),
    "expresser": dict(layer_pattern="SE AM"),
    "full": dict(),
}


@pytest.mark.parametrize("name", list(MIXER_CONFIGS))
def test_causality(name):
    model = build(**MIXER_CONFIGS[name])
    ids = torch.randint(1, VOCAB, (2, 14))
    changed = ids.clone()
    changed[:, 9] = (changed[:, 9] % (VOCAB - 1)) + 1
    a, b = model(ids).logits, model(changed).logits
    assert torch.equal(a[:, :9], b[:, :9])
    assert (a[:, 9:] - b[:, 9:]).abs().max() > 1e-4


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("name", list(MIXER_CONFIGS))
def test_cached_decoding_equals_full_forward(name, attn):
    model = build(**MIXER_CONFIGS[name])
    model.config._attn_implementation = attn
    ids = torch.randint(1, VOCAB, (2, 15))
    full = model(ids).logits
    # A prefill shorter than the conv kernel, single tokens, then a multi-token chunk from the cache.
    out = model(ids[:, :2], past_key_values=DynamicCache(config=model.config), use_cache=True)
    steps = [out.logits]
    for t in range(2, 11):
        out = model(ids[:, t : t + 1], past_key_values=out.past_key_values, use_cache=True)
        steps.append(out.logits)
    out = model(ids[:, 11:], past_key_values=out.past_key_values, use_cache=True)
    steps.append(out.logits)
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)


def test_left_padded_batch_and_generation_equal_unpadded_sequences():
    model = build()
    long_seq = torch.randint(1, VOCAB, (11,))
    short_seq = torch.randint(1, VOCAB, (6,))
    batch = torch.stack([long_seq, torch.cat([torch.zeros(5, dtype=torch.long), short_seq])])
    mask = torch.ones_like(batch)
    mask[1, :5] = 0
    logits = model(batch, attention_mask=mask).logits
    torch.testing.assert_close(logits[1, 5:], model(short_seq[None]).logits[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(logits[0], model(long_seq[None]).logits[0], atol=1e-5, rtol=1e-5)
    generated = model.generate(batch, attention_mask=mask, max_new_tokens=6, do_sample=False, pad_token_id=0)
    alone_long = model.generate(long_seq[None], max_new_tokens=6, do_sample=False, pad_token_id=0)
    alone_short = model.generate(short_seq[None], max_new_tokens=6, do_sample=False, pad_token_id=0)
    assert torch.equal(generated[0, 11:], alone_long[0, 11:])
    assert torch.equal(generated[1, 11:], alone_short[0, 6:])


def test_packed_documents_with_restarting_positions_equal_separate_runs():
    model = build()
    a, b = torch.randint(1, VOCAB, (7,)), torch.randint(1, VOCAB, (5,))
    packed = torch.cat([a, b])[None]
    positions = torch.cat([torch.arange(7), torch.arange(5)])[None]
    # use_cache=False: transformers' attention masks detect packing only without a cache (as for Llama).
    logits = model(packed, position_ids=positions, use_cache=False).logits[0]
    torch.testing.assert_close(logits[:7], model(a[None]).logits[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(logits[7:], model(b[None]).logits[0], atol=1e-5, rtol=1e-5)


def test_hidden_states_and_attentions_are_returned():
    model = build()
    model.config._attn_implementation = "eager"
    out = model(torch.randint(1, VOCAB, (1, 6)), output_hidden_states=True, output_attentions=True)
    assert len(out.hidden_states) == 6 and len(out.attentions) == 2  # 5 blocks + embeddings; A blocks
    assert torch.allclose(out.attentions[0].sum(-1), torch.ones(1, 4, 6))


def test_sampling_is_reproducible():
    model = build()
    ids = torch.randint(1, VOCAB, (1, 5))
    kwargs = dict(max_new_tokens=8, do_sample=True, temperature=1.5, top_k=0, pad_token_id=0)
    torch.manual_seed(1)
    first = model.generate(ids, **kwargs)
    torch.manual_seed(1)
    assert torch.equal(first, model.generate(ids, **kwargs))


# ---------------------------------------------------------------- Jamba parity


def jamba_config(**overrides):
    fields = dict(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=48, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, num_experts=4, num_experts_per_tok=2, expert_layer_period=2, expert_layer_offset=1,
        attn_layer_period=4, attn_layer_offset=2, mamba_d_state=8, mamba_d_conv=4, mamba_expand=2,
        use_mamba_kernels=False, pad_token_id=0,
    )
    fields.update(overrides)
    return JambaConfig(**fields)


def random_jamba(**overrides):
    jamba = JambaForCausalLM(jamba_config(**overrides)).eval()
    with torch.no_grad():  # fresh init leaves norms, D and biases trivial: make every mapped weight count
        for name, param in jamba.named_parameters():
            if name.endswith("norm.weight") or name.endswith(".D") or "bias" in name:
                param.normal_(0.5, 0.5)
    return jamba


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize(
    "overrides", [{}, {"tie_word_embeddings": True}, {"mamba_proj_bias": True, "mamba_conv_bias": False}]
)
def test_jamba_parity(overrides, attn):
    jamba = random_jamba(**overrides)
    otce = from_jamba(jamba)
    jamba.config._attn_implementation = attn
    otce.config._attn_implementation = attn
    config = otce.config
    assert config.layer_pattern == "SM SE AM SE" == jamba_layer_pattern(jamba.config)
    assert (config.mamba_rope, config.attention_rope, config.use_expresser) == (False, False, False)
    assert (config.expert_type, config.ffn_up_act) == ("plain", "identity")
    ids = torch.randint(1, VOCAB, (2, 24))
    diff = (otce(ids).logits - jamba(ids).logits).abs().max()
    assert diff <= 1e-5
    if not overrides:  # left padding: both zero the padded tokens before and after the convolution
        mask = torch.ones_like(ids)
        mask[1, :5] = 0
        diff = (otce(ids, attention_mask=mask).logits - jamba(ids, attention_mask=mask).logits)[mask.bool()]
        assert diff.abs().max() <= 1e-5
        a = otce.generate(ids[:, :6], max_new_tokens=6, do_sample=False, pad_token_id=0)
        b = jamba.generate(ids[:, :6], max_new_tokens=6, do_sample=False, pad_token_id=0)
        assert torch.equal(a, b)


def test_jamba_conversion_rejects_what_it_cannot_map(tmp_path):
    with pytest.raises(ValueError, match="silu"):
        from_jamba(JambaForCausalLM(jamba_config(hidden_act="gelu")))
    with pytest.raises(ValueError, match="JambaForCausalLM"):
        from_jamba(OtceForCausalLM(tiny_config()))
    with pytest.raises(FileNotFoundError, match="config.json"):
        from_jamba(tmp_path)


# ---------------------------------------------------------------- saving, Auto classes, remote code


def test_auto_classes_and_save_load_round_trip(tmp_path):
    model = build(tie_word_embeddings=True)
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["model_type"] == "otce" and config["layer_pattern"] == "SM SE AE SM AM"
    assert config["auto_map"]["AutoModelForCausalLM"] == "modeling_otce.OtceForCausalLM"
    assert (tmp_path / "modeling_otce.py").is_file() and (tmp_path / "configuration_otce.py").is_file()
    assert isinstance(AutoConfig.from_pretrained(tmp_path), OtceConfig)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert type(loaded) is OtceForCausalLM
    assert loaded.lm_head.weight.data_ptr() == loaded.model.embed_tokens.weight.data_ptr()
    ids = torch.randint(1, VOCAB, (2, 10))
    assert torch.equal(loaded(ids).logits, model(ids).logits)
    assert type(AutoModel.from_config(tiny_config())) is OtceModel


def test_remote_code_loads_where_yunshan_is_not_importable(tmp_path):
    model = build()
    model.save_pretrained(tmp_path / "model")
    ids = torch.randint(1, VOCAB, (2, 10))
    torch.save({"ids": ids, "logits": model(ids).logits}, tmp_path / "ref.pt")
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules["yunshan"] = None  # any `import yunshan` now raises ImportError
        import torch
        from transformers import AutoModelForCausalLM
        model = AutoModelForCausalLM.from_pretrained({str(tmp_path / "model")!r}, trust_remote_code=True).eval()
        assert "yunshan" not in type(model).__module__, type(model).__module__
        ref = torch.load({str(tmp_path / "ref.pt")!r}, weights_only=True)
        print("MAXDIFF", (model(ref["ids"]).logits - ref["logits"]).abs().max().item())
        out = model.generate(ref["ids"][:1, :4], max_new_tokens=3, do_sample=False, pad_token_id=0)
        print("GENERATED", out.shape[1])
        """
    )
    env = {**os.environ, "HF_MODULES_CACHE": str(tmp_path / "modules"), "PYTHONPATH": ""}
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "MAXDIFF 0.0" in result.stdout and "GENERATED 7" in result.stdout


def test_model_info_cli_knows_the_presets():
    from yunshan.cli import main

    buffer = io.StringIO()
    with redirect_stdout(buffer):
        assert main(["model", "info", "otce-1b", "--json"]) == 0
    info = json.loads(buffer.getvalue())
    assert info["model_type"] == "otce" and info["total"] == 999_976_896
    assert set(OTCE_PRESETS) == {"otce-1b", "otce-281m", "otce-tiny"}


# ---------------------------------------------------------------- training, PEFT, embeddings


def test_training_steps_lower_the_loss_and_update_every_parameter():
    model = OtceForCausalLM(tiny_config()).train()
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    ids = torch.randint(1, VOCAB, (2, 16))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, betas=(0.9, 0.98), eps=1e-6)  # the paper's betas
    losses = []
    for _ in range(15):
        loss = model(ids, labels=ids, use_cache=False).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert all(math.isfinite(v) for v in losses)
    assert losses[-1] < 0.5 * losses[0]
    assert [n for n, p in model.named_parameters() if torch.equal(p, before[n])] == []


def test_gradient_checkpointing_gives_the_same_gradients():
    model = build().train()
    ids = torch.randint(1, VOCAB, (2, 12))
    model(ids, labels=ids, use_cache=False).loss.backward()
    reference = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    model.activation_checkpointing_enable({"use_reentrant": False})
    assert model.model.layers[0].gradient_checkpointing
    model(ids, labels=ids, use_cache=False).loss.backward()
    for name, p in model.named_parameters():  # the routers too: the aux loss flows through the checkpoints
        torch.testing.assert_close(p.grad, reference[name], atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("tied", [False, True])
def test_resize_token_embeddings_keeps_old_logits(tied):
    model = build(tie_word_embeddings=tied)
    ids = torch.randint(1, VOCAB, (2, 8))
    before = model(ids).logits
    model.resize_token_embeddings(VOCAB + 13, pad_to_multiple_of=8)
    assert model.config.vocab_size == 112 and model.lm_head.weight.shape[0] == 112
    torch.testing.assert_close(model(ids).logits[..., :VOCAB], before)


def test_bfloat16_runs_close_to_float32():
    model = build()
    ids = torch.randint(1, VOCAB, (1, 8))
    ref = model(ids).logits
    low = OtceForCausalLM(model.config).to(torch.bfloat16).eval()
    low.load_state_dict(model.state_dict())
    assert (low(ids).logits.float() - ref).abs().max() < 0.1


def test_lora_on_explicit_targets_including_experts_trains_saves_reloads_and_merges(tmp_path):
    from peft import LoraConfig, PeftModel, get_peft_model

    base = build(expert_type="cohesive", shared_expert_intermediate_size=24)
    base_state = {k: v.clone() for k, v in base.state_dict().items()}
    targets = ["q_proj", "v_proj", "in_proj", "out_proj", "gate_proj", "up_proj", "down_proj", "shared_up_proj"]
    peft_model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0, target_modules=targets))
    wrapped = {"layers." + n.rsplit(".lora_A", 1)[0].split(".layers.", 1)[1]
               for n, _ in peft_model.named_parameters() if "lora_A" in n}
    assert "layers.1.feed_forward.experts.3.gate_proj" in wrapped  # a routed expert's projections
    assert "layers.1.feed_forward.experts.0.down_proj" in wrapped
    assert "layers.1.feed_forward.shared_up_proj" in wrapped  # the cohesive shared V
    assert "layers.0.mamba.in_proj" in wrapped and "layers.2.self_attn.q_proj" in wrapped
    ids = torch.randint(1, VOCAB, (2, 16))
    optimizer = torch.optim.AdamW([p for p in peft_model.parameters() if p.requires_grad], lr=1e-2)
    first = None
    for _ in range(8):
        loss = peft_model(input_ids=ids, labels=ids, use_cache=False).loss
        first = first if first is not None else loss.item()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    assert loss.item() < first
    peft_model.eval()
    tuned = peft_model(input_ids=ids).logits
    peft_model.save_pretrained(tmp_path / "adapter")

    fresh = OtceForCausalLM(base.config).eval()
    fresh.load_state_dict(base_state)
    reloaded = PeftModel.from_pretrained(fresh, tmp_path / "adapter").eval()
    torch.testing.assert_close(reloaded(input_ids=ids).logits, tuned, atol=1e-5, rtol=1e-5)
    merged = reloaded.merge_and_unload()
    assert type(merged) is OtceForCausalLM
    torch.testing.assert_close(merged(ids).logits, tuned, atol=1e-4, rtol=1e-4)


def test_default_lora_targets_are_registered_with_peft():
    from peft import LoraConfig, get_peft_model

    peft_model = get_peft_model(build(), LoraConfig(r=2))
    wrapped = {n.split(".")[-4] for n, _ in peft_model.named_parameters() if "lora_A" in n}
    assert wrapped == set(OTCE_LORA_TARGETS) - {"shared_up_proj"}  # expansive experts have no shared V


def test_hf_trainer_steps_with_gradient_accumulation(tmp_path):
    """The integration point the training commands build on: transformers' Trainer with labels, padding and
    gradient accumulation (it passes num_items_in_batch through to the loss)."""
    from transformers import Trainer, TrainingArguments

    model = OtceForCausalLM(tiny_config())
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    ids = torch.randint(1, VOCAB, (8, 12))
    mask = torch.ones_like(ids)
    mask[::2, :3] = 0
    labels = ids.masked_fill(mask == 0, -100)
    rows = [{"input_ids": i, "attention_mask": m, "labels": l} for i, m, l in zip(ids, mask, labels)]
    args = TrainingArguments(
        output_dir=str(tmp_path), per_device_train_batch_size=2, gradient_accumulation_steps=2, max_steps=2,
        learning_rate=1e-2, report_to=[], save_strategy="no", logging_steps=1, use_cpu=True,
        dataloader_num_workers=0, disable_tqdm=True,
    )
    trainer = Trainer(model=model, args=args, train_dataset=rows)
    result = trainer.train()
    assert math.isfinite(result.training_loss)
    changed = [n for n, p in model.named_parameters() if not torch.equal(p, before[n])]
    assert "model.layers.1.feed_forward.router.weight" in changed and "model.layers.0.mamba.A_log" in changed
