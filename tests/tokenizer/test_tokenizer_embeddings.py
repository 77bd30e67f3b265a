"""`resize_embeddings` on transformers' LlamaForCausalLM and yunshan's PanguPiForCausalLM: tied and untied heads,
matrices padded to a multiple; base logits unchanged, new rows equal to the mean of their base pieces."""

from __future__ import annotations

import pytest
import torch
from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

from yunshan.models.pangu_pi import PanguPiConfig, PanguPiForCausalLM
from yunshan.tokenizer import resize_embeddings
from yunshan.tokenizer.report import load_backend


def tiny(arch: str, vocab_size: int, tied: bool):
    fields = dict(vocab_size=vocab_size, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                  tie_word_embeddings=tied)
    if arch == "llama":
        return LlamaForCausalLM(LlamaConfig(**fields)).eval()
    return PanguPiForCausalLM(PanguPiConfig(aug_reduction=4, **fields)).eval()


@pytest.mark.parametrize("arch", ["llama", "pangu_pi"])
@pytest.mark.parametrize("tied", [True, False])
@pytest.mark.parametrize("rows", ["exact", "padded_enough", "padded_too_small"])
def test_resize_keeps_base_logits_and_starts_new_rows_at_the_mean_of_their_pieces(arch, tied, rows, bases, extended):
    base_path, (new_path, report) = bases["byte_level_llama3"], extended["byte_level_llama3"]
    base_size, new_size = report["base"]["vocab_size"], report["vocab_size"]  # 803 -> 1003
    n_rows = {"exact": base_size, "padded_enough": 1024, "padded_too_small": 832}[rows]
    model = tiny(arch, n_rows, tied)
    embed_before = model.get_input_embeddings().weight.detach().clone()
    head_before = model.get_output_embeddings().weight.detach().clone()
    base_tok = AutoTokenizer.from_pretrained(str(base_path))
    ids = torch.tensor([base_tok.encode("本院认为被告应当承担违约责任。The court held the liability.")])
    with torch.no_grad():
        logits_before = model(input_ids=ids).logits

    result = resize_embeddings(model, base_path, new_path, pad_to_multiple_of=64)
    embed = model.get_input_embeddings().weight
    head = model.get_output_embeddings().weight
    expected_rows = {"exact": 1024, "padded_enough": 1024, "padded_too_small": 1024}[rows]
    assert embed.shape[0] == head.shape[0] == model.config.vocab_size == expected_rows
    assert result["resized"] == (rows != "padded_enough") and result["initialised"] == new_size - base_size
    assert (head.data_ptr() == embed.data_ptr()) == tied == result["tied"]
    with torch.no_grad():
        logits_after = model(input_ids=ids).logits
    torch.testing.assert_close(logits_after[..., :base_size], logits_before[..., :base_size], rtol=0, atol=1e-5)
    assert torch.equal(embed[:base_size], embed_before[:base_size])

    base_backend, new_backend = load_backend(base_path), load_backend(new_path)
    term = AutoTokenizer.from_pretrained(str(new_path)).encode("资产负债表", add_special_tokens=False)
    for idx in [base_size, base_size + 57, new_size - 1, *term]:
        pieces = [t.id for t in base_backend.model.tokenize(new_backend.id_to_token(idx))]
        assert len(pieces) > 1 and max(pieces) < base_size
        torch.testing.assert_close(embed[idx], embed_before[pieces].mean(0))
        if not tied:
            torch.testing.assert_close(head[idx], head_before[pieces].mean(0))
    if rows == "padded_enough":  # padding rows past the new vocabulary are left alone
        assert torch.equal(embed[new_size:], embed_before[new_size:])


def test_sentencepiece_characters_start_from_their_byte_rows(bases, extended):
    base_path, (new_path, report) = bases["sentencepiece"], extended["sentencepiece"]
    model = tiny("llama", report["base"]["vocab_size"], tied=False)
    before = model.get_input_embeddings().weight.detach().clone()
    resize_embeddings(model, base_path, new_path)
    new_backend, base_backend = load_backend(new_path), load_backend(base_path)
    char = next(i for i in range(report["base"]["vocab_size"], report["vocab_size"])
                if len(new_backend.id_to_token(i)) == 1)
    pieces = [t.id for t in base_backend.model.tokenize(new_backend.id_to_token(char))]
    assert [base_backend.id_to_token(p)[:3] for p in pieces] == ["<0x"] * len(new_backend.id_to_token(char).encode())
    torch.testing.assert_close(model.get_input_embeddings().weight[char], before[pieces].mean(0))


def test_mean_and_random_inits_and_refusing_a_non_extension(bases, extended):
    base_path, (new_path, report) = bases["byte_level_llama3"], extended["byte_level_llama3"]
    base_size, new_size = report["base"]["vocab_size"], report["vocab_size"]
    model = tiny("llama", base_size, tied=True)
    before = model.get_input_embeddings().weight.detach().clone()
    resize_embeddings(model, base_path, new_path, init="mean")
    rows = model.get_input_embeddings().weight[base_size:new_size]
    torch.testing.assert_close(rows, before.mean(0).expand_as(rows))

    first, second = tiny("llama", base_size, tied=False), tiny("llama", base_size, tied=False)
    resize_embeddings(first, base_path, new_path, init="random", seed=3)
    resize_embeddings(second, base_path, new_path, init="random", seed=3)
    new_rows = first.get_input_embeddings().weight[base_size:new_size]
    assert torch.equal(new_rows, second.get_input_embeddings().weight[base_size:new_size])
    assert abs(new_rows.std().item() - first.config.initializer_range) < 0.002

    with pytest.raises(ValueError, match="not an extension of the base"):
        resize_embeddings(tiny("llama", 2000, tied=True), bases["byte_level_gpt2"], new_path)
    with pytest.raises(ValueError, match="init='zeros': valid values are subword_mean, mean, random"):
        resize_embeddings(model, base_path, new_path, init="zeros")
