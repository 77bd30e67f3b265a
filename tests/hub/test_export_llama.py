"""`yunshan export --as-llama`: a PanGu-π with siaf_terms=1, aug_shortcuts=0 written as LlamaForCausalLM (no remote
code) gives the same logits and the same greedy text; any other config is refused with the reason in one line."""

from __future__ import annotations

import json

import pytest
import torch

from fixtures import train_tokenizer
from yunshan.cli import main

TINY = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "aug_reduction": 4, "max_position_embeddings": 128}


def pangu_folder(folder, trained: bool, **fields):
    """A tiny PanGu-π saved with a tokenizer; `trained`: SIAF scales and shifts moved off 1 and 0, as training does."""
    from yunshan.models.pangu_pi import PanguPiConfig, PanguPiForCausalLM

    tokenizer = train_tokenizer(folder, vocab_size=300)
    torch.manual_seed(0)
    config = PanguPiConfig.from_preset("tiny", vocab_size=len(tokenizer), bos_token_id=tokenizer.bos_token_id,
                                       eos_token_id=tokenizer.eos_token_id, **{**TINY, **fields})
    model = PanguPiForCausalLM(config).eval()
    if trained:
        with torch.no_grad():
            for layer in model.model.layers:
                layer.mlp.act_fn.weight.add_(0.3 * torch.randn_like(layer.mlp.act_fn.weight))
                layer.mlp.act_fn.bias.add_(0.2 * torch.randn_like(layer.mlp.act_fn.bias))
    model.save_pretrained(folder)
    return model, tokenizer


@pytest.mark.parametrize("trained, shard", [(True, "40KB"), (False, "2GB")])
def test_exported_llama_gives_the_same_logits(tmp_path, trained, shard):
    from safetensors import safe_open
    from transformers import AutoModelForCausalLM, LlamaForCausalLM

    pangu, tokenizer = pangu_folder(tmp_path / "pangu", trained, siaf_terms=1, aug_shortcuts=0)
    out = tmp_path / "llama"
    assert main(["export", str(tmp_path / "pangu"), "--out", str(out), "--as-llama", "--license", "mit",
                 "--max-shard-size", shard]) == 0
    config = json.loads((out / "config.json").read_text())
    assert config["architectures"] == ["LlamaForCausalLM"] and config["model_type"] == "llama"
    assert "auto_map" not in config and not any(k.startswith(("siaf", "aug_")) for k in config)
    assert not list(out.glob("*.py"))  # nothing to trust: any Llama runtime loads it
    # A trained SIAF shift becomes the gate bias (mlp_bias); an untrained one (all zero) needs no biases.
    assert config["mlp_bias"] is trained
    names = set()
    for path in out.glob("*.safetensors"):
        with safe_open(str(path), framework="pt") as handle:
            names |= set(handle.keys())
    assert not any(".act_fn." in n for n in names)
    assert ("model.layers.0.mlp.gate_proj.bias" in names) is trained
    files = len(list(out.glob("*.safetensors")))
    assert files == 1 if shard == "2GB" else files > 1  # sharded: the index names every tensor, new biases too

    llama = AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32).eval()
    assert type(llama) is LlamaForCausalLM
    ids = tokenizer("合同自成立时生效 the bank's capital ratio rose", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        expected, got = pangu(ids).logits, llama(ids).logits
    assert torch.allclose(got, expected, atol=1e-5, rtol=1e-5), (got - expected).abs().max()
    prompt = ids[:, :4]
    assert torch.equal(llama.generate(prompt, max_new_tokens=8, do_sample=False),
                       pangu.generate(prompt, max_new_tokens=8, do_sample=False))
    card = (out / "README.md").read_text()
    assert "`LlamaForCausalLM` (model_type `llama`); trained as `PanguPiForCausalLM`" in card
    assert "trust_remote_code" not in card


@pytest.mark.parametrize("fields, reason", [
    ({"siaf_terms": 2, "aug_shortcuts": 0}, "siaf_terms=2: a series of several activations has no LLaMA counterpart"),
    ({"siaf_terms": 1, "aug_shortcuts": 1}, "aug_shortcuts=1: augmented shortcuts beside attention are layers a LLaMA "
                                            "has not"),
    ({"siaf_terms": 1, "aug_shortcuts": 0, "siaf_neighbor_kernel": 3}, "siaf_neighbor_kernel=3"),
])
def test_a_config_that_is_not_llama_is_refused(tmp_path, capsys, fields, reason):
    pangu_folder(tmp_path / "pangu", False, **fields)
    capsys.readouterr()
    assert main(["export", str(tmp_path / "pangu"), "--out", str(tmp_path / "llama"), "--as-llama"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--as-llama refused, this model is not exactly a Llama" in err and reason in err
    assert "Export it without --as-llama" in err
    assert not (tmp_path / "llama").exists()


def test_other_architectures_and_adapters_are_refused(llama_dir, tmp_path, capsys):
    assert main(["export", str(llama_dir), "--out", str(tmp_path / "a"), "--as-llama"]) == 1
    assert "model_type is 'llama', not 'pangu_pi'" in capsys.readouterr().err
    assert main(["export", str(llama_dir), "--out", str(tmp_path / "b"), "--as-llama", "--adapter"]) == 1
    assert "--as-llama rewrites merged weights; an adapter is exported as trained" in capsys.readouterr().err
