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
