"""Token-budget mixing and packing: exact token shares, determinism, exact resume, document masks, ranks."""

import json

import numpy as np
import pytest
import torch

from fixtures import three_source_corpora, train_tokenizer
from yunshan.data.mixing import SourceStream, TokenBudgetMixer
from yunshan.data.sources import SourceArgs
from yunshan.data.stream import PackedStreamDataset

WEIGHTS = {"short": 0.25, "mid": 0.25, "long": 0.5}


class CountingTokenizer:
    """Real BPE tokenisation that counts how many texts it was asked to encode."""

    def __init__(self, tokenizer):
        self.tokenizer = tokenizer
        self.calls = 0

    def __call__(self, texts):
        self.calls += len(texts)
        ids = self.tokenizer(texts, add_special_tokens=False)["input_ids"]
        return [x + [self.tokenizer.eos_token_id] for x in ids]


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    root = tmp_path_factory.mktemp("corpora")
    files = three_source_corpora(root)
    tokenizer = train_tokenizer(root / "tok")
    return files, tokenizer


def make_mixer(files, tokenizer, seed=0, seq_len=256, block_size=64, document_mask=False, on_exhausted="repeat",
               counting=None):
    tokenize = counting or CountingTokenizer(tokenizer)
    streams = [
        SourceStream(SourceArgs(name=n, path=str(files[n]), weight=w, on_exhausted=on_exhausted), tokenize,
                     seed=seed, block_size=block_size)
        for n, w in WEIGHTS.items()
    ]
    return TokenBudgetMixer(streams, seq_len=seq_len, document_mask=document_mask), tokenize


def per_sequence_counts(sequences):
    rows = []
    for seq in sequences:
        counts = dict.fromkeys(WEIGHTS, 0)
        for name, length in seq.segments:
            counts[name] += length
        rows.append([counts[n] for n in WEIGHTS])
    return np.array(rows)


def test_token_ratio_within_one_percent_over_any_stretch_of_100_sequences(corpora):
    files, tokenizer = corpora
    mixer, _ = make_mixer(files, tokenizer)
    sequences = [mixer.next_sequence() for _ in range(400)]
    assert all(len(s) == 256 for s in sequences)
    counts = per_sequence_counts(sequences)
    target = np.array(list(WEIGHTS.values()))
    worst = 0.0
    for window in (100, 150, 400):
        for start in range(0, len(sequences) - window + 1):
            share = counts[start : start + window].sum(0) / (window * 256)
            worst = max(worst, np.abs(share - target).max())
    assert worst < 0.01, worst
    # Very different document lengths: the same token share means very different document counts.
    report = mixer.report()["sources"]
    assert report["short"]["documents_read"] > 10 * report["long"]["documents_read"]
    # The exact token counts in the report match the sequences.
    assert [report[n]["tokens"] for n in WEIGHTS] == counts.sum(0).tolist()


def test_packed_sequences_hold_whole_tokenised_documents_in_order(corpora):
    files, tokenizer = corpora
    mixer, _ = make_mixer(files, tokenizer, seq_len=128)
    eos = tokenizer.eos_token_id
    stream = [t for _ in range(50) for t in mixer.next_sequence().input_ids]
    # Every EOS-delimited run decodes to a document of one of the corpora (pieces of one source interleave
    # only at document or chunk boundaries, never inside a token sequence).
    corpus_texts = {json.loads(l)["text"] for f in files.values() for l in open(f, encoding="utf-8")}
    pieces_by_source = {}
    mixer2, _ = make_mixer(files, tokenizer, seq_len=128)
    for _ in range(50):
        seq = mixer2.next_sequence()
        pos = 0
        for name, length in seq.segments:
            pieces_by_source.setdefault(name, []).extend(seq.input_ids[pos : pos + length])
            pos += length
    for name, ids in pieces_by_source.items():
        docs = tokenizer.decode(ids).split(tokenizer.eos_token)
        for text in docs[:-1]:
            assert text in corpus_texts, (name, text[:50])
    assert stream.count(eos) > 0


def test_deterministic_given_seed(corpora):
    files, tokenizer = corpora
    a = [make_mixer(files, tokenizer, seed=3)[0].next_sequence().input_ids for _ in range(1)]
    m1, _ = make_mixer(files, tokenizer, seed=3)
    m2, _ = make_mixer(files, tokenizer, seed=3)
    m3, _ = make_mixer(files, tokenizer, seed=4)
    s1 = [m1.next_sequence().input_ids for _ in range(30)]
    s2 = [m2.next_sequence().input_ids for _ in range(30)]
    s3 = [m3.next_sequence().input_ids for _ in range(30)]
    assert s1 == s2 and s1 != s3 and a[0] == s1[0]


def test_resume_continues_exactly_without_retokenising_consumed_data(corpora):
    files, tokenizer = corpora
    full, _ = make_mixer(files, tokenizer, block_size=32)
    expected = [full.next_sequence().input_ids for _ in range(300)]  # several blocks and epochs of `long`
    for k in (0, 1, 57, 211):
        first, _ = make_mixer(files, tokenizer, block_size=32)
        for _ in range(k):
            first.next_sequence()
        state = json.loads(json.dumps(first.state()))  # survives a JSON round trip (checkpoint file)
        counting = CountingTokenizer(tokenizer)
        resumed, _ = make_mixer(files, tokenizer, block_size=32, counting=counting)
        resumed.restore(state)
        # Only the current block of each source was re-read: at most 3 blocks of 32 documents.
        assert counting.calls <= 3 * 32
        assert [resumed.next_sequence().input_ids for _ in range(300 - k)] == expected[k:]


def test_stream_dataset_state_before_any_sequence(corpora, tmp_path):
    files, tokenizer = corpora
    mixer, _ = make_mixer(files, tokenizer)
    dataset = PackedStreamDataset(mixer, document_mask=False)
    items = [item["input_ids"] for _, item in zip(range(40), dataset)]
    dataset.save_state(tmp_path, 25)  # as if 25 sequences had been trained on and 40 read ahead
    again, _ = make_mixer(files, tokenizer)
    ds2 = PackedStreamDataset(again, document_mask=False)
    ds2.load_state(tmp_path)
    rest = [item["input_ids"] for _, item in zip(range(15), ds2)]
    assert all(torch.equal(a, b) for a, b in zip(rest, items[25:]))


def test_repeat_reshuffles_each_epoch_and_stop_ends_the_stream(corpora):
    files, tokenizer = corpora
    stream = SourceStream(SourceArgs(name="long", path=str(files["long"])),
                          CountingTokenizer(tokenizer), seed=0, block_size=100)
    first_epoch = [tuple(stream.next_piece(10**6)[0]) for _ in range(20)]
    second_epoch = [tuple(stream.next_piece(10**6)[0]) for _ in range(20)]
    assert sorted(first_epoch) == sorted(second_epoch) and first_epoch != second_epoch
    assert stream.stats["epochs_completed"] == 1
    mixer, _ = make_mixer(files, tokenizer, on_exhausted="stop")
    n = sum(1 for _ in mixer)
    assert 0 < n < 400 and mixer.finished


def test_document_mask_positions_and_labels(corpora):
    files, tokenizer = corpora
    mixer, _ = make_mixer(files, tokenizer, seq_len=128, document_mask=True)
    seq = mixer.next_sequence()
    starts = [i for i, p in enumerate(seq.position_ids) if p == 0]
    assert starts[0] == 0 and len(starts) == len(seq.segments)
    for s in starts:
        assert seq.labels[s] == -100  # never predicted across documents
    assert sum(1 for l in seq.labels if l == -100) == len(starts)
    for a, b in zip(starts, starts[1:] + [128]):
        assert seq.position_ids[a:b] == list(range(b - a))


@pytest.mark.parametrize("arch", ["llama", "pangu_pi"])
def test_document_mask_logits_equal_documents_run_separately(corpora, arch):
    files, tokenizer = corpora
    from transformers import LlamaConfig, LlamaForCausalLM

    from yunshan.models.pangu_pi import PanguPiConfig, PanguPiForCausalLM

    dims = dict(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2)
    model = (LlamaForCausalLM(LlamaConfig(**dims)) if arch == "llama"
             else PanguPiForCausalLM(PanguPiConfig(**dims, aug_reduction=4, siaf_neighbor_kernel=3))).eval()
    mixer, _ = make_mixer(files, tokenizer, seq_len=128, document_mask=True)
    seq = mixer.next_sequence()
    ids = torch.tensor([seq.input_ids])
    packed = model(ids, position_ids=torch.tensor([seq.position_ids]), use_cache=False).logits[0]
    starts = [i for i, p in enumerate(seq.position_ids) if p == 0] + [128]
    for a, b in zip(starts, starts[1:]):
        alone = model(ids[:, a:b]).logits[0]
        torch.testing.assert_close(packed[a:b], alone, atol=1e-5, rtol=1e-5)


def test_ranks_get_disjoint_shares_that_together_equal_one_process(corpora):
    from accelerate.data_loader import IterableDatasetShard

    files, tokenizer = corpora
    single = [x["input_ids"] for _, x in zip(range(24), PackedStreamDataset(make_mixer(files, tokenizer)[0], False))]
    shards = []
    for rank in range(2):
        ds = PackedStreamDataset(make_mixer(files, tokenizer)[0], False)
        shard = IterableDatasetShard(ds, batch_size=3, num_processes=2, process_index=rank)
        shards.append([x["input_ids"] for _, x in zip(range(12), shard)])
    # Global batch g = sequences 6g..6g+5: rank 0 gets the first 3, rank 1 the next 3.
    for g in range(4):
        got = shards[0][3 * g : 3 * g + 3] + shards[1][3 * g : 3 * g + 3]
        assert all(torch.equal(a, b) for a, b in zip(got, single[6 * g : 6 * g + 6]))
