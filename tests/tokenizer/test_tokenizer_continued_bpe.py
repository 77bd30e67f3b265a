"""The hand-written parts: the continued-BPE merge loop (against a hand-computed example and a brute-force
reference) and the Python word encoder (against the `tokenizers` library, word for word)."""

from __future__ import annotations

from collections import Counter

import pytest
from tokenizer_fixtures import KINDS
from hypothesis import given, settings
from hypothesis import strategies as st

from yunshan.tokenizer.base import load_base_tokenizer
from yunshan.tokenizer.bpe_encoder import MergeListTable, PieceTable, apply_merges
from yunshan.tokenizer.continued_bpe import learn_continued_bpe
from yunshan.tokenizer.word_lists import initial_symbols

ALPHABET = "deilnorstw"


def as_ids(word: str) -> list[int]:
    return [ALPHABET.index(c) for c in word]


def test_hand_computed_example():
    # Sennrich et al.'s example: low x5, lower x2, newest x6, widest x3.
    words = [as_ids("low"), as_ids("lower"), as_ids("newest"), as_ids("widest")]
    counts = [5, 2, 6, 3]
    strings = list(ALPHABET)
    vocab = {c: i for i, c in enumerate(ALPHABET)}
    result = learn_continued_bpe(words, counts, strings=strings, vocab=vocab, new_token_budget=4)
    # (e,s) and (s,t) both occur 9 times; the tie goes to the smaller ids (e=1,s=7) < (s=7,t=8).
    assert [(s.string, s.token, s.gain, s.kind) for s in result.steps] == [
        ("es", 10, 9, "merge"), ("est", 11, 9, "merge"), ("lo", 12, 7, "merge"), ("low", 13, 7, "merge")]
    assert result.tokens_before == 5 * 3 + 2 * 5 + 6 * 6 + 3 * 6 == 79
    assert result.tokens_after == 79 - 9 - 9 - 7 - 7
    assert result.stop_reason == "budget"
    assert strings[10:] == ["es", "est", "lo", "low"] and vocab["low"] == 13


def naive_bpe(words, counts, strings, budget, min_frequency, blocked=frozenset()):
    """Reference: recount every pair from scratch at every step."""
    words = [list(w) for w in words]
    strings = list(strings)
    vocab = {s: i for i, s in enumerate(strings)}
    steps, created = [], 0
    while created < budget:
        pairs = Counter()
        for w, c in zip(words, counts):
            for a, b in zip(w, w[1:]):
                if a not in blocked and b not in blocked:
                    pairs[(a, b)] += c
        done = {(s[0], s[1]) for s in steps}
        candidates = [(-c, p) for p, c in pairs.items() if c >= min_frequency and p not in done]
        if not candidates:
            break
        _, (x, y) = min(candidates)
        string = strings[x] + strings[y]
        token = vocab.get(string)
        if token is None:
            token = len(strings)
            strings.append(string)
            vocab[string] = token
            created += 1
        steps.append((x, y, token))
        for w in words:
            i = 0
            while i < len(w) - 1:
                if w[i] == x and w[i + 1] == y:
                    w[i:i + 2] = [token]
                i += 1
    return steps, words


@settings(max_examples=200, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.text("abcd", min_size=1, max_size=9), st.integers(1, 6)), min_size=1, max_size=12),
       st.integers(0, 12), st.integers(1, 3))
def test_incremental_counts_match_brute_force(entries, budget, min_frequency):
    words = [[ord(c) - ord("a") for c in w] for w, _ in entries]
    counts = [c for _, c in entries]
    strings = list("abcd")
    result = learn_continued_bpe(words, counts, strings=list(strings), vocab={c: i for i, c in enumerate(strings)},
                                 new_token_budget=budget, min_frequency=min_frequency)
    expected, final_words = naive_bpe(words, counts, strings, budget, min_frequency)
    assert [(s.left, s.right, s.token) for s in result.steps] == expected
    assert result.tokens_after == sum(len(w) * c for w, c in zip(final_words, counts))
    # Re-encoding every word from scratch with the learned merges gives the same segmentation as the loop did.
    strings_all = list(strings) + [None] * 64
    vocab = {c: i for i, c in enumerate(strings)}
    for s in result.steps:
        vocab[s.string] = s.token
        strings_all[s.token] = s.string
    table = MergeListTable([(strings_all[s.left], strings_all[s.right]) for s in result.steps], vocab)
    assert [apply_merges(w, table) for w in words] == final_words


def test_pending_characters_blocked_ids_reserved_strings_and_length_limit():
    strings = ["a", "b", "<0xE8>"]
    vocab = {s: i for i, s in enumerate(strings)}
    # -1 is a 3-byte character the base spells in bytes; id 2 is a byte token that never merges.
    words = [[0, -1, 1], [0, 1], [2, 0, 1]]
    counts = [4, 3, 1]
    result = learn_continued_bpe(words, counts, strings=strings, vocab=vocab, new_token_budget=3,
                                 blocked={2}, pending={-1: ("资", 3)})
    # The character saves 2 tokens x 4 = 8 > pair (a, b) 4; once it is a token, (a, 资) and (资, b) count.
    assert [(s.kind, s.string, s.gain) for s in result.steps][:2] == [("char", "资", 8), ("merge", "ab", 4)]
    assert result.steps[2].string in ("a资", "资b") and result.steps[2].gain == 4
    assert result.tokens_before == 4 * 5 + 3 * 2 + 1 * 3
    blocked_pairs = {(s.left, s.right) for s in result.steps}
    assert (2, 0) not in blocked_pairs

    strings = ["a", "b", "c"]
    vocab = {s: i for i, s in enumerate(strings)}
    result = learn_continued_bpe([[0, 1, 2]], [5], strings=strings, vocab=vocab, new_token_budget=5,
                                 reserved={"ab"}, max_token_chars=2)
    # "ab" is reserved, so (b, c) -> "bc"; "abc" would be 3 characters: rejected, learning stops.
    assert [s.string for s in result.steps] == ["bc"]
    assert result.rejected == 2 and result.stop_reason == "min_frequency"


def test_free_merge_reuses_an_existing_token_without_spending_budget():
    strings = ["a", "b", "ab", "x"]
    vocab = {s: i for i, s in enumerate(strings)}
    result = learn_continued_bpe([[0, 1, 3]], [3], strings=strings, vocab=vocab, new_token_budget=1)
    assert [(s.kind, s.token, s.string) for s in result.steps] == [("free", 2, "ab"), ("merge", 4, "abx")]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("which", ["base", "extended"])
def test_python_encoder_matches_the_tokenizers_library(kind, which, bases, extended, corpus):
    path = bases[kind] if which == "base" else extended[kind][0]
    if kind == "sentencepiece" and which == "extended":
        path = path / "tokenizer.model"
    base = load_base_tokenizer(path)
    strings, vocab = list(base.id_to_token), dict(base.vocab)
    table = (PieceTable(strings, vocab, base.mergeable) if kind == "sentencepiece"
             else MergeListTable(base.merges, vocab))
    lines = corpus["heldout"].read_text(encoding="utf-8").splitlines()
    lines += corpus["general"].read_text(encoding="utf-8").splitlines()
    words = sorted({w for line in lines for w in base.words(line)})
    assert len(words) > 300
    checked = 0
    for word in words:
        symbols = initial_symbols(base, word, vocab, base.mergeable)
        if any(isinstance(s, tuple) for s in symbols):
            continue  # a character the vocabulary lacks (byte fallback): the encoder is only used once it is a token
        assert apply_merges(symbols, table) == base.segment(word), word
        checked += 1
    assert checked > 200


@pytest.mark.parametrize("kind", KINDS)
def test_fast_word_count_equals_the_tokenizers_pipeline(kind, bases, corpus):
    """The counting fast path (regex module) is exact: equal to counting `training_words` (the `tokenizers`
    normaliser and pre-tokeniser), also on odd text; it is in use (no fallback note) for every fixture kind."""
    base = load_base_tokenizer(bases[kind])
    docs = corpus["heldout"].read_text(encoding="utf-8").splitlines()[:150]
    docs += ["  leading spaces", "trailing  ", "tabs\tand\nnew\r\nlines", "emoji 😀🇨🇳 and ﬁ", "<|im_start|>x<think>",
             "<s>资产</s>", "a▁b ▁c", "'S 'll DON'T 123456789", "（括号）【】“引号”，。！", "\u200b\u3000全角空格"]
    docs += corpus["general"].read_text(encoding="utf-8").splitlines()[:100]
    assert base._fast_splitter() is not None
    fast = base.count_words(docs)
    assert base.notes == [] or kind == "metaspace" and "not copied" in base.notes[0]
    assert fast == Counter(w for d in docs for w in base.training_words(d))
