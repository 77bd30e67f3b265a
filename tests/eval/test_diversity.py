"""Effective dimension d(eps) on data with a known spectrum, and hidden states read from the decoder layers."""

import pytest
import torch

from yunshan.eval.diversity import effective_dimension, layer_states, run_diversity


def test_effective_dimension_on_known_variances():
    torch.manual_seed(0)
    # Independent columns with variances 50, 30, 15, 5 (ratios 0.5, 0.8, 0.95, 1.0), rotated: PCA must undo it.
    z = torch.randn(20000, 4, dtype=torch.float64)
    z = (z - z.mean(0)) / z.std(0)
    x = z * torch.tensor([50, 30, 15, 5], dtype=torch.float64).sqrt()
    q, _ = torch.linalg.qr(torch.randn(4, 4, dtype=torch.float64))
    x = x @ q.T + 7.0  # the mean is removed first
    assert effective_dimension(x, 0.5) == 1
    assert effective_dimension(x, 0.79) == 2
    assert effective_dimension(x, 0.81) == 3
    assert effective_dimension(x, 0.99) == 4
    assert effective_dimension(torch.ones(10, 3), 0.8) == 0  # no variance at all


def test_layer_states_are_decoder_layer_outputs_without_padding(llama):
    docs = ["银行 证券 保险", "根据《刑法》第二百六十四条，盗窃公私财物"]
    states = layer_states(llama, docs, batch_size=2)
    n_tokens = sum(len(llama.tokenizer(d, add_special_tokens=False)["input_ids"]) for d in docs)
    assert len(states) == 2 and all(s.shape == (n_tokens, 48) and s.dtype == torch.float64 for s in states)
    # Against transformers' hidden_states for one unpadded document: entries 1..L-1 are layer outputs (the last
    # entry is after the final norm, so the hook's raw output is compared with a manual forward of the last layer).
    ids = llama.tokenizer(docs[1], add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        out = llama.model(input_ids=torch.tensor([ids]), output_hidden_states=True)
    first = out.hidden_states[1][0].double()
    assert states[0][-len(ids):] == pytest.approx(first, abs=1e-5)
    assert not torch.allclose(states[1][-len(ids):], out.hidden_states[2][0].double(), atol=1e-3)  # normed


def test_run_diversity_reports_every_layer(pangu, tmp_path):
    text = tmp_path / "t.txt"
    text.write_text("银行 证券 保险 基金\n\n会计 审计 税法 金融 利率\n\n宏观经济 微观经济", encoding="utf-8")
    res = run_diversity(pangu, text, eps=0.8)
    assert len(res["effective_dimension"]) == 2 and res["hidden_size"] == 32
    assert all(1 <= d <= 32 for d in res["effective_dimension"])


def _identity_layer_model(features: torch.Tensor, folder):
    """A 2-layer Llama whose every decoder layer returns its input (o_proj and down_proj zero, so attention and MLP
    add exactly 0 to the residual stream), with a word-level tokenizer: the text "w0 w1 ..." has token i's feature
    row features[i] as the output of every layer. The feature matrix is thus chosen by hand, exactly."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    n, hidden = features.shape
    vocab = {f"w{i}": i for i in range(n)} | {"<pad>": n, "<unk>": n + 1}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", unk_token="<unk>", eos_token="<pad>",
                            bos_token="<pad>").save_pretrained(folder)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=n + 2, hidden_size=hidden, intermediate_size=16,
                                         num_hidden_layers=2, num_attention_heads=2, num_key_value_heads=2,
                                         max_position_embeddings=64, pad_token_id=n))
    with torch.no_grad():
        model.model.embed_tokens.weight.zero_()
        model.model.embed_tokens.weight[:n] = features
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
    model.save_pretrained(folder)


def test_diversity_task_agrees_with_direct_svd_on_hand_made_features(tmp_path):
    import numpy as np

    from yunshan.eval.commands import EvalArgs, run_eval

    # 40 tokens in 8 dimensions whose centred covariance has eigenvalues 40, 30, 20, 10, 0, 0, 0, 0 exactly (in
    # exact arithmetic): orthonormal centred columns, scaled, then rotated by a random orthogonal matrix.
    gen = torch.Generator().manual_seed(3)
    z = torch.randn(40, 4, dtype=torch.float64, generator=gen)
    z, _ = torch.linalg.qr(z - z.mean(0))
    rotation, _ = torch.linalg.qr(torch.randn(8, 8, dtype=torch.float64, generator=gen))
    features = torch.cat([z * torch.tensor([40.0, 30.0, 20.0, 10.0], dtype=torch.float64).sqrt(),
                          torch.zeros(40, 4, dtype=torch.float64)], dim=1) @ rotation.T + 0.5
    model_dir = tmp_path / "identity"
    _identity_layer_model(features.float(), model_dir)
    # Three documents of unequal length, scored two per batch: padding must be left out of the feature matrix.
    text = tmp_path / "words.txt"
    text.write_text("\n\n".join(" ".join(f"w{i}" for i in range(a, b)) for a, b in ((0, 25), (25, 32), (32, 40))),
                    encoding="utf-8")

    # The direct computation: the same float32 rows, centred, their singular values by numpy's full SVD.
    x = features.float().double().numpy()
    s = np.linalg.svd(x - x.mean(axis=0), compute_uv=False)
    ratio = np.cumsum(s**2) / np.sum(s**2)
    for eps, by_hand in ((0.3, 1), (0.5, 2), (0.8, 3), (0.95, 4)):  # cumulative ratios 0.4, 0.7, 0.9, 1.0
        direct = int(np.argmax(ratio >= eps - 1e-12)) + 1
        assert direct == by_hand
        report = run_eval(EvalArgs(model=[str(model_dir)], tasks=["diversity"], diversity_text=str(text), eps=eps,
                                   batch_size=2, hash_weights=False, progress=False, out=str(tmp_path / f"eval{eps}")))
        result = report["tasks"]["diversity"]["results"]["identity"]
        assert result["tokens"] == 40 and result["hidden_size"] == 8
        assert result["effective_dimension"] == [direct, direct]
