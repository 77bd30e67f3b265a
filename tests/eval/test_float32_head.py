"""Under bf16 autocast the output head runs in float32 (yunshan.eval.loading.float32_head): logits are the float32
product of the final hidden state with the head's weight, not bf16 values 0.125-0.25 apart that make answer letters
tie."""

from __future__ import annotations

import pytest
import torch

from yunshan.eval.loading import float32_head, float32_head_class, load_model


def _tiny(tied: bool):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=tied)
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():  # logits of 20-60, where bf16 spaces values 0.125-0.25 apart (SmolLM2's reach 33)
        model.get_output_embeddings().weight.normal_(0.0, 6.0)
    return model


@pytest.mark.parametrize("tied", [False, True])
def test_head_in_float32_under_autocast(tied):
    model = _tiny(tied)
    ids = torch.randint(3, 96, (2, 12))
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(input_ids=ids, output_hidden_states=True)
        plain, hidden = out.logits, out.hidden_states[-1]
        weight = model.get_output_embeddings().weight
        assert float32_head(model) is True
        wrapped = model(input_ids=ids).logits
    reference = torch.nn.functional.linear(hidden.float(), weight.float())  # autocast off: a float32 product
    assert hidden.dtype == torch.float32  # the final norm's output: only the head rounded to bf16
    assert plain.dtype == torch.bfloat16 and wrapped.dtype == torch.float32
    assert reference.abs().max() > 16
    assert (plain.float() - reference).abs().max() > 0.05  # bf16's spacing at these magnitudes
    torch.testing.assert_close(wrapped, reference, rtol=1e-5, atol=1e-5)
    head = model.get_output_embeddings()
    assert isinstance(head, float32_head_class()) and head.weight is weight
    assert (model.get_input_embeddings().weight is head.weight) == tied
    assert float32_head(model) is True  # a second call leaves the wrapper as it is
    assert model.get_output_embeddings() is head


@pytest.mark.parametrize("fast", [False, True])
def test_load_model_wraps_the_head_only_under_autocast(llama_dir, monkeypatch, fast):
    import yunshan.loading.precision as precision

    monkeypatch.setattr(precision, "fast_bf16", lambda: (fast, "patched check"))
    lm = load_model(str(llama_dir), dtype="auto", hash_weights=False)
    assert lm.autocast is fast
    assert isinstance(lm.model.get_output_embeddings(), float32_head_class()) is fast
    assert lm.precision.endswith("; output head in float32") is fast
    plain = load_model(str(llama_dir), dtype="float32", hash_weights=False)
    assert not isinstance(plain.model.get_output_embeddings(), float32_head_class())
    ids = torch.tensor([[1, 5, 9, 14, 20]])
    with torch.no_grad(), lm.compute():
        logits = lm.model(input_ids=ids).logits
    assert logits.dtype == torch.float32
    with torch.no_grad():
        reference = plain.model(input_ids=ids).logits
    if fast:  # the bf16 body still moves the logits a little, the head no longer rounds them to bf16
        torch.testing.assert_close(logits, reference, rtol=0.05, atol=0.05)
    else:
        assert torch.equal(logits, reference)
