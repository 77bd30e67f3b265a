"""Extension at the scale users have: the corpus counted in worker processes (tokenizer/parallel.py) and over a
seeded sample of bounded size (corpus.sample_documents), the counting fast path for a Digits pipeline, and the
real SmolLM2 tokenizer on the real laws corpus (skipped when ../shared/realdata or the model is absent).
Performance itself is measured by benchmarks/tokenizer_scale.py, not here."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest
from tokenizer_fixtures import extend

from yunshan.tokenizer import load_base_tokenizer
from yunshan.tokenizer import parallel
from yunshan.tokenizer.corpus import CorpusSample, sample_documents

ROOT = Path(__file__).resolve().parents[2]
REALDATA = Path(os.environ.get("YUNSHAN_REALDATA", ROOT.parent / "shared" / "realdata"))
SMOLLM2 = next((p for p in (ROOT / "models" / "smollm2-135m", ROOT.parent / "models" / "smollm2-135m")
                if (p / "tokenizer.json").is_file()), None)


@pytest.mark.parametrize("kind", ["byte_level_llama3", "metaspace"])
def test_counting_and_segmenting_in_worker_processes_give_the_same_tokenizer(kind, bases, corpus, extended, tmp_path,
                                                                             monkeypatch):
    started = tmp_path / "workers"
    started.mkdir()

    def start_worker(job):  # forked workers inherit this patch: each leaves a file behind
        (started / str(os.getpid())).touch()
        parallel._WORKER.update(job)

    monkeypatch.setattr(parallel, "BATCH_CHARS", 5_000)  # the test corpus is ~100 k characters: ~20 batches
    monkeypatch.setattr(parallel, "SEGMENT_CHUNK", 100)
    monkeypatch.setattr(parallel, "_start_worker", start_worker)
    out = tmp_path / "out"
    report = extend(bases[kind], corpus, out, processes=2)
    assert len(list(started.iterdir())) == 2
    plain, plain_report = extended[kind]
    assert (out / "tokenizer.json").read_bytes() == (plain / "tokenizer.json").read_bytes()
    assert report["corpus"] == plain_report["corpus"]


def test_a_corpus_larger_than_the_sample_is_counted_over_a_seeded_sample(bases, corpus, extended, tmp_path):
    kind = "byte_level_llama3"
    _, whole = extended[kind]
    characters = whole["corpus"]["characters"]
    assert whole["corpus"]["sample"] == {"limit": 50_000_000, "seed": 0, "characters": characters,
                                         "documents": 600, "whole_corpus": True}
    limit = characters // 3
    first = extend(bases[kind], corpus, tmp_path / "a", sample_chars=limit, seed=1)
    again = extend(bases[kind], corpus, tmp_path / "b", sample_chars=limit, seed=1)
    other = extend(bases[kind], corpus, tmp_path / "c", sample_chars=limit, seed=2)
    sample = first["corpus"]["sample"]
    assert sample["limit"] == limit and sample["seed"] == 1 and not sample["whole_corpus"]
    assert limit - 1000 < sample["characters"] <= limit and sample["documents"] < 600
    assert first["corpus"]["characters"] == characters  # every document was read (and is in the file counts)
    assert first["corpus"]["words"] < whole["corpus"]["words"] / 2
    assert (tmp_path / "a" / "tokenizer.json").read_bytes() == (tmp_path / "b" / "tokenizer.json").read_bytes()
    assert other["corpus"]["sample"] != sample
    # A limit the corpus fits in counts all of it: the same tokenizer as counting the whole corpus (0).
    fits = extend(bases[kind], corpus, tmp_path / "d", sample_chars=characters)
    unbounded = extend(bases[kind], corpus, tmp_path / "e", sample_chars=0)
    assert fits["corpus"]["sample"]["whole_corpus"] and unbounded["corpus"]["sample"]["whole_corpus"]
    for out in ("d", "e"):
        assert (tmp_path / out / "tokenizer.json").read_bytes() == \
            (extended[kind][0] / "tokenizer.json").read_bytes()


def test_sample_documents_keeps_corpus_order_stays_under_its_limit_and_cuts_long_documents(monkeypatch):
    import yunshan.tokenizer.corpus as corpus_module

    docs = [f"document {i} " * (1 + i % 7) for i in range(500)]
    sample = CorpusSample(limit=2_000, seed=3)
    kept = sample_documents(iter(docs), sample)
    assert sum(map(len, kept)) == sample.characters <= 2_000 and not sample.whole_corpus
    assert [docs.index(d) for d in kept] == sorted(docs.index(d) for d in kept)
    assert kept == sample_documents(iter(docs), CorpusSample(limit=2_000, seed=3))
    streamed = CorpusSample(limit=0, seed=0)
    assert list(sample_documents(iter(docs), streamed)) == docs
    assert (streamed.characters, streamed.documents) == (sum(map(len, docs)), 500)

    monkeypatch.setattr(corpus_module, "SAMPLE_PIECE_CHARS", 40)
    long = "第一条 本法所称的合同\n  是指\n第二条 当事人应当遵循公平原则。\n第三条 依法成立的合同受法律保护。"
    pieces = sample_documents([long], CorpusSample(limit=1_000, seed=0))
    assert "".join(pieces) == long and all(len(p) <= 40 for p in pieces) and len(pieces) > 1
    # Cut after a line break that is followed by text, never inside "\n  是指"'s leading spaces.
    assert all(p.endswith("\n") and not p.endswith("\n  ") for p in pieces[:-1])


def test_fast_word_count_with_a_digits_step_equals_the_pipeline(tmp_path):
    """SmolLM2's layout (Digits(individual_digits) then GPT-2's ByteLevel regex) is counted on the fast path, word
    for word as the `tokenizers` pipeline cuts it, digits of every script included."""
    from tokenizer_corpora import texts
    from tokenizers import Tokenizer, decoders, pre_tokenizers, trainers
    from tokenizers.models import BPE
    from transformers import PreTrainedTokenizerFast

    for individual in (True, False):
        tok = Tokenizer(BPE())
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=individual),
                                                     pre_tokenizers.ByteLevel(add_prefix_space=False)])
        tok.decoder = decoders.ByteLevel()
        tok.train_from_iterator(texts("general", 200) + texts("numbers", 200), trainers.BpeTrainer(
            vocab_size=500, special_tokens=["<|endoftext|>"], show_progress=False,
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
        folder = tmp_path / f"digits_{individual}"
        PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>").save_pretrained(str(folder))
        base = load_base_tokenizer(folder)
        assert base._fast_splitter() is not None
        docs = texts("finance", 50) + texts("numbers", 50, seed=4) + [
            "2023年 12,345.67元 ２０২০ x²+½ Ⅻ 〇 ① 1st 3.14", "  12  34\n56\t7", "a1b22c333", "'s 100% 'll"]
        assert base.count_words(docs) == Counter(w for d in docs for w in base.training_words(d))
        assert base.notes == []


@pytest.mark.skipif(SMOLLM2 is None or not (REALDATA / "laws" / "laws.jsonl.zst").is_file(),
                    reason="needs the real SmolLM2-135M tokenizer (make real-model) and ../shared/realdata/laws")
def test_real_smollm2_on_the_real_laws_corpus(tmp_path):
    """The real tokenizer on real text: the fast count equals the pipeline's (SmolLM2's Digits + ByteLevel layout),
    and an extension from the first documents of the laws corpus (.jsonl.zst, through the one reader) reads its
    digits as single and adds no token with two ASCII digits."""
    from yunshan.tokenizer.corpus import read_corpus

    base = load_base_tokenizer(SMOLLM2)
    docs = []
    for text in read_corpus([REALDATA / "laws" / "laws.jsonl.zst"]):
        docs.append(text)
        if len(docs) == 60:
            break
    assert base.count_words(docs) == Counter(w for d in docs for w in base.training_words(d))
    assert base.notes == []
    corpus = tmp_path / "laws.jsonl"
    corpus.write_text("".join(json.dumps({"text": d}, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8")
    report = extend(SMOLLM2, {"domain": corpus, "words": None}, tmp_path / "out", words=[], new_tokens=300)
    assert report["base_conventions"]["digits"] == "single digits"
    vocab = json.loads((tmp_path / "out" / "tokenizer.json").read_text(encoding="utf-8"))["model"]["vocab"]
    added = [t for t, i in vocab.items() if i >= report["base"]["vocab_size"]]
    digits = "0123456789"
    assert len(added) == 300 and not [t for t in added if any(a in digits and b in digits for a, b in zip(t, t[1:]))]


def test_memory_stays_bounded_as_the_corpus_grows(bases, tmp_path):
    """Issue 33 section 3, through the command in fresh processes: with --sample-chars, a corpus ten times larger
    (every word new, as a real corpus keeps bringing words) peaks within a few MB of the small one, while counting
    all of it (--sample-chars 0) costs tens of MB more. The sample's size is in the report."""
    import random
    import subprocess
    import sys

    rng = random.Random(5)
    letters = "abcdefghijklmnopqrstuvwxyz"

    def write(name: str, documents: int) -> Path:
        path = tmp_path / f"{name}.jsonl"
        with open(path, "w", encoding="utf-8") as f:
            for _ in range(documents):  # ~2,000 characters of distinct 5-9 letter words
                text = " ".join("".join(rng.choices(letters, k=rng.randint(5, 9))) for _ in range(250))
                f.write(json.dumps({"text": text}) + "\n")
        return path

    small, large = write("small", 150), write("large", 1500)
    limit = 250_000

    def run(corpus: Path, sample_chars: int) -> tuple[float, dict]:
        out = tmp_path / f"{corpus.stem}_{sample_chars}"
        # VmHWM: the peak of this process's own memory (ru_maxrss would start at the forking parent's size).
        code = ("from yunshan.cli import main; "
                f"assert main(['tokenizer', 'extend', '--base', {str(bases['byte_level_gpt2'])!r}, '--corpus', "
                f"{str(corpus)!r}, '--new-tokens', '50', '--out', {str(out)!r}, '--sample-chars', "
                f"'{sample_chars}', '--processes', '1']) == 0; "
                "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')][0])")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env={**os.environ, "TOKENIZERS_PARALLELISM": "false"})
        assert done.returncode == 0, done.stderr[-2000:]
        report = json.loads((out / "yunshan_tokenizer_extension.json").read_text(encoding="utf-8"))
        return int(done.stdout.split()[-1]) / 1024, report["corpus"]

    peak_small, small_corpus = run(small, limit)
    peak_large, large_corpus = run(large, limit)
    peak_all, all_corpus = run(large, 0)
    assert not large_corpus["sample"]["whole_corpus"] and large_corpus["sample"]["characters"] <= limit
    assert large_corpus["characters"] > 9 * small_corpus["characters"]  # every document read, a sample counted
    assert all_corpus["sample"]["whole_corpus"] and all_corpus["unique_words"] > 8 * large_corpus["unique_words"]
    print(f"peak MB: small {peak_small:.0f}, large sampled {peak_large:.0f}, large whole {peak_all:.0f}")
    assert peak_large - peak_small < 15, (peak_small, peak_large)
    assert peak_all - peak_small > 45, (peak_small, peak_all)  # the test can tell: counting everything grows
