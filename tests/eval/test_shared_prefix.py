"""Shared-prefix attention (eval/shared_prefix.py) against plain attention and against the models' own forward."""

from __future__ import annotations

import pytest
import torch

from yunshan.eval.shared_prefix import (
    ATTENTION_NAME,
    PackedTails,
    _attention_with_lse,
    last_log_probs_packed,
    shared_prefix_attention,
    supports_packed_tails,
)


class _Module:  # what an attention function reads off its module
    training = False


def _reference(query, key, value, prefix, lengths, scale):
    """Per tail, float64: softmax over [prefix keys | its own keys up to itself]."""
    heads, kv_heads = query.shape[1], key.shape[1]
    k = key.double().repeat_interleave(heads // kv_heads, dim=1)[0]
    v = value.double().repeat_interleave(heads // kv_heads, dim=1)[0]
    q = query.double()[0]
    out, start = [], 0
    for n in lengths:
        keys = torch.cat([k[:, :prefix], k[:, prefix + start: prefix + start + n]], dim=1)
        vals = torch.cat([v[:, :prefix], v[:, prefix + start: prefix + start + n]], dim=1)
        scores = q[:, start: start + n] @ keys.transpose(-1, -2) * scale
        allowed = torch.ones(n, prefix + n, dtype=torch.bool)
        allowed[:, prefix:] = torch.ones(n, n, dtype=torch.bool).tril()
        out.append(torch.softmax(scores.masked_fill(~allowed, -torch.inf), dim=-1) @ vals)
        start += n
    return torch.cat(out, dim=1).transpose(0, 1)  # (n_packed, heads, d)


@pytest.mark.parametrize("kernel", [True, False])
@pytest.mark.parametrize("heads,kv_heads", [(4, 4), (4, 2), (6, 1)])
def test_attention_equals_per_tail_softmax(kernel, heads, kv_heads, monkeypatch):
    import yunshan.eval.shared_prefix as sp

    monkeypatch.setattr(sp, "_attention_with_lse",
                        lambda *a: _attention_with_lse(*a, kernel=kernel))
    torch.manual_seed(0)
    prefix, lengths, d = 23, [5, 1, 9, 3], 8
    n = sum(lengths)
    query = torch.randn(1, n, heads, d).transpose(1, 2)  # a transposed view, as the models pass it
    key = torch.randn(1, kv_heads, prefix + n, d) * 2
    value = torch.randn(1, kv_heads, prefix + n, d)
    layout = PackedTails.build(prefix, lengths, "cpu")
    out, weights = shared_prefix_attention(_Module(), query, key, value, None, scaling=0.3,
                                           yunshan_packed_tails=layout)
    assert weights is None and layout.calls == 1 and out.shape == (1, n, heads, d)
    torch.testing.assert_close(out[0].double(), _reference(query, key, value, prefix, lengths, 0.3),
                               atol=2e-6, rtol=1e-5)


@pytest.mark.parametrize("heads,kv_heads", [(4, 4), (4, 2)])
def test_last_layer_computes_only_the_last_tokens(heads, kv_heads):
    torch.manual_seed(1)
    prefix, lengths, d = 17, [4, 1, 6], 8
    n = sum(lengths)
    query = torch.randn(1, n, heads, d).transpose(1, 2)
    key, value = torch.randn(1, kv_heads, prefix + n, d) * 2, torch.randn(1, kv_heads, prefix + n, d)
    layout = PackedTails.build(prefix, lengths, "cpu", last_only_layer=1)
    out, _ = shared_prefix_attention(_Module(), query, key, value, None, scaling=0.4, yunshan_packed_tails=layout)
    last = [3, 4, 10]
    assert layout.last.tolist() == last
    reference = _reference(query, key, value, prefix, lengths, 0.4)
    torch.testing.assert_close(out[0, last].double(), reference[last], atol=2e-6, rtol=1e-5)
    others = [i for i in range(n) if i not in last]
    assert out[0, others].abs().max() == 0


def test_layout_indices_by_hand():
    layout = PackedTails.build(10, [2, 3, 1], "cpu")
    # padded slots (3 tails x width 3) -> packed positions; pads point at 0
    assert layout.to_padded.tolist() == [0, 1, 0, 2, 3, 4, 5, 0, 0]
    assert layout.to_packed.tolist() == [0, 1, 3, 4, 5, 6]


def test_attention_refuses_missing_layout_and_windows():
    q = torch.zeros(1, 2, 3, 4)
    kv = torch.zeros(1, 2, 5, 4)
    with pytest.raises(RuntimeError, match="layout"):
        shared_prefix_attention(_Module(), q, kv, kv, None)
    with pytest.raises(RuntimeError, match="sliding"):
        shared_prefix_attention(_Module(), q, kv, kv, None, sliding_window=4,
                                yunshan_packed_tails=PackedTails.build(2, [3], "cpu"))


def _tiny(kind, vocab):
    from transformers import LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM, Qwen2Config
    from transformers import Qwen2ForCausalLM

    from yunshan.models.pangu_pi import PanguPiConfig, PanguPiForCausalLM

    common = dict(vocab_size=vocab, hidden_size=48, intermediate_size=96, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=256, pad_token_id=0)
    torch.manual_seed(3)
    model = {
        "llama": lambda: LlamaForCausalLM(LlamaConfig(**common)),
        "mistral": lambda: MistralForCausalLM(MistralConfig(**common, sliding_window=None)),
        "qwen2": lambda: Qwen2ForCausalLM(Qwen2Config(**common, use_sliding_window=False)),
        "pangu_pi": lambda: PanguPiForCausalLM(PanguPiConfig(**{**common, "hidden_size": 32, "intermediate_size": 64},
                                                             aug_reduction=4)),
    }[kind]()
    with torch.no_grad():
        model.lm_head.weight.normal_(0.0, 0.5)
    return model.eval()


@pytest.mark.parametrize("kind", ["llama", "mistral", "qwen2", "pangu_pi"])
def test_packed_tails_equal_each_rows_own_forward(kind, tokenizer_dir):
    from transformers import AutoTokenizer

    from yunshan.eval.loading import wrap_model

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    model = _tiny(kind, len(tok))
    assert supports_packed_tails(model)
    lm = wrap_model(model, tok)
    g = torch.Generator().manual_seed(4)
    prefix = torch.randint(3, len(tok), (40,), generator=g).tolist()
    rows = [prefix + torch.randint(3, len(tok), (n,), generator=g).tolist() for n in (7, 1, 12, 4, 4)]
    before = model.config._attn_implementation
    packed = last_log_probs_packed(lm, rows, 40)
    assert model.config._attn_implementation == before != ATTENTION_NAME
    for row, lp in zip(rows, packed):
        with torch.no_grad():
            direct = torch.log_softmax(model(input_ids=torch.tensor([row])).logits[0, -1:].float(), dim=-1)
        torch.testing.assert_close(lp, direct, atol=2e-5, rtol=0)


@pytest.mark.parametrize("kind", ["llama", "pangu_pi"])
def test_packed_tails_under_bf16_autocast_follow_the_plain_forward(kind, tokenizer_dir):
    """`yunshan eval --dtype auto` runs the packed tails under bf16 autocast, where rotary embeddings hand the
    attention float32 queries and keys beside bf16 values (the CPU flash kernel refused the mix: 'expected scalar
    type Float but found BFloat16'). The packed log-probabilities follow each row's own forward under the same
    autocast within bf16 rounding: they are no further from the float32 forward than twice that row's own bf16
    forward is (a bound measured on the machine: how far bf16 rounds depends on the CPU's kernels, emulated on CPUs
    without AVX-512 BF16; a fixed 0.02 nats held on one CPU and failed at 0.025 on another, where the packed row was
    nearer float32 than the plain bf16 forward)."""
    from transformers import AutoTokenizer

    from yunshan.eval.loading import wrap_model

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    model = _tiny(kind, len(tok))
    lm = wrap_model(model, tok)
    g = torch.Generator().manual_seed(5)
    prefix = torch.randint(3, len(tok), (40,), generator=g).tolist()
    rows = [prefix + torch.randint(3, len(tok), (n,), generator=g).tolist() for n in (7, 1, 12, 4)]
    with torch.no_grad():
        exact = [torch.log_softmax(model(input_ids=torch.tensor([row])).logits[0, -1:], dim=-1) for row in rows]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        packed = last_log_probs_packed(lm, rows, 40)
        for row, lp, ref in zip(rows, packed, exact):
            with torch.no_grad():
                direct = torch.log_softmax(model(input_ids=torch.tensor([row])).logits[0, -1:].float(), dim=-1)
            assert lp.dtype == torch.float32
            torch.testing.assert_close(lp, direct, atol=0.1, rtol=0)
            rounding = (direct - ref).abs().mean()
            assert 0 < rounding < 0.05  # autocast did run in bf16, and bf16 is near float32
            assert (lp - ref).abs().mean() <= 2 * rounding


def test_which_models_pack(tokenizer_dir):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    from yunshan.models.otce import OtceConfig, OtceForCausalLM
    from yunshan.models.pangu_pi import PanguPiConfig, PanguPiForCausalLM

    assert not supports_packed_tails(PanguPiForCausalLM(PanguPiConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2, aug_reduction=4, siaf_neighbor_kernel=3)))
    assert not supports_packed_tails(Qwen2ForCausalLM(Qwen2Config(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, use_sliding_window=True, sliding_window=16, max_window_layers=0)))
    assert not supports_packed_tails(OtceForCausalLM(OtceConfig(  # state-space layers read across the row
        vocab_size=64, hidden_size=32, intermediate_size=48, layer_pattern="SM AE", num_attention_heads=4,
        num_key_value_heads=2, mamba_d_state=8, num_experts=4, num_experts_per_tok=2, expert_intermediate_size=24)))
