"""Rolling NLL (every token of a document scored once, for bits per character) against direct computations with the
model's own forward pass."""

import math

import pytest
import torch

from yunshan.eval.bpc import plan_length_batches, rolling_nll, sliding_windows


def test_sliding_windows_score_every_target_once():
    for n, max_len, stride in [(1, 4, 2), (10, 4, 2), (10, 4, 4), (37, 8, 3), (5, 16, 8)]:
        targets = []
        for begin, end, first in sliding_windows(n, max_len, stride):
            assert end - begin <= max_len and begin < first <= end
            targets.extend(range(first, end + 1))
        assert targets == list(range(1, n + 1))


def test_rolling_nll_matches_direct_and_windowed_computation(llama):
    tok = llama.tokenizer
    doc = tok("根据《刑法》第二百六十四条，盗窃公私财物，数额较大的，处三年以下有期徒刑。银行 证券 保险",
              add_special_tokens=False)["input_ids"]
    seq = [tok.bos_token_id] + doc
    with torch.no_grad():
        lp = torch.log_softmax(llama.model(input_ids=torch.tensor([seq])).logits[0].double(), -1)
    direct = -sum(lp[k - 1, seq[k]].item() for k in range(1, len(seq)))
    [whole] = rolling_nll(llama, [doc], max_length=512)
    assert whole.n_windows == 1 and whole.nll == pytest.approx(direct, abs=1e-3)

    # A window of 8 tokens, stride 3: recompute each window by hand.
    manual = 0.0
    for begin, end, first in sliding_windows(len(doc), 8, 3):
        with torch.no_grad():
            wl = torch.log_softmax(llama.model(input_ids=torch.tensor([seq[begin:end]])).logits[0].double(), -1)
        manual -= sum(wl[k - 1 - begin, seq[k]].item() for k in range(first, end + 1))
    [windowed] = rolling_nll(llama, [doc], max_length=8, stride=3, batch_size=4)
    assert windowed.n_windows > 3
    assert windowed.nll == pytest.approx(manual, abs=1e-3)
    assert len(windowed.per_token) == len(doc) and math.isfinite(windowed.nll)


def test_length_batches_cap_rows_and_padded_tokens():
    lengths = [3000, 10, 500, 600, 20, 30, 600, 2048, 40]
    batches = plan_length_batches(lengths, batch_size=3, max_tokens=1200)
    assert sorted(k for b in batches for k in b) == list(range(len(lengths)))
    # longest first; a row longer than the budget runs alone; no batch over 3 rows or 1200 padded tokens
    assert batches[0] == [0] and batches[1] == [7]
    assert [lengths[k] for k in batches[2]] == [600, 600] and [lengths[k] for k in batches[3]] == [500]
    assert all(len(b) <= 3 and max(lengths[k] for k in b) * len(b) <= 1200 or len(b) == 1 for b in batches)
    assert [sorted(lengths[k] for k in b) for b in batches[4:]] == [[20, 30, 40], [10]]


def test_rolling_nll_batched_by_length_equals_one_by_one(llama):
    """Documents of mixed lengths scored in length-planned batches give each document's NLL as alone."""
    docs = [llama.tokenizer(t * n, add_special_tokens=False)["input_ids"] for t, n in
            (("资产负债表", 30), ("银行", 2), ("利率上升", 12), ("股票", 2), ("现金流量", 25))]
    batched = rolling_nll(llama, docs, max_length=64, batch_size=4)
    alone = [rolling_nll(llama, [d], max_length=64, batch_size=1)[0] for d in docs]
    for a, b in zip(batched, alone):
        assert a.n_tokens == b.n_tokens and a.n_windows == b.n_windows
        assert a.nll == pytest.approx(b.nll, rel=1e-6)
