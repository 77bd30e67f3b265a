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


def reference_continued_bpe(words, counts, *, strings, vocab, new_token_budget, min_frequency=2, blocked=frozenset(),
                            pending=None, reserved=frozenset(), max_token_chars=None, token_chars=len):
    """The previous implementation of the loop (per word, Python lists; yunshan before the flat arrays), kept here as
    the oracle the array version must reproduce step for step (so `duplicates` pairs some of its lines with
    tokenizer/continued_bpe.py on purpose)."""
    import heapq
    from collections import defaultdict

    pending = dict(pending or {})
    words = [list(w) for w in words]
    counts = list(counts)

    def cost(word):
        return len(word) + sum(pending[s][1] - 1 for s in word if s < 0)

    tokens_before = sum(cost(w) * c for w, c in zip(words, counts))
    pair_count, where = defaultdict(int), defaultdict(set)
    char_count, char_where = defaultdict(int), defaultdict(set)
    for wi, (word, count) in enumerate(zip(words, counts)):
        for a, b in zip(word, word[1:]):
            if a >= 0 and b >= 0 and a not in blocked and b not in blocked:
                pair_count[(a, b)] += count
                where[(a, b)].add(wi)
        for s in word:
            if s < 0:
                char_count[s] += count
                char_where[s].add(wi)

    def char_gain(s):
        return char_count[s] * (pending[s][1] - 1)

    heap = [(-c, 1, a, b) for (a, b), c in pair_count.items() if c >= min_frequency]
    heap += [(-char_gain(s), 0, s, 0) for s, c in char_count.items() if c >= min_frequency and pending[s][1] > 1]
    heapq.heapify(heap)
    dead, steps, created = set(), [], 0

    def commit(delta):
        for pair, change in delta.items():
            if change == 0:
                continue
            total = pair_count.get(pair, 0) + change
            if total <= 0:
                pair_count.pop(pair, None)
                where.pop(pair, None)
                continue
            pair_count[pair] = total
            if change > 0 and total >= min_frequency and pair not in dead:
                heapq.heappush(heap, (-total, 1, pair[0], pair[1]))

    while heap and created < new_token_budget:
        neg_gain, kind, x, y = heapq.heappop(heap)
        delta = defaultdict(int)
        if kind == 0:
            if x not in char_count:
                continue
            current = char_gain(x)
            if current != -neg_gain:
                if 0 < current < -neg_gain:
                    heapq.heappush(heap, (-current, 0, x, 0))
                continue
            token = len(strings)
            strings.append(pending[x][0])
            vocab[pending[x][0]] = token
            created += 1
            steps.append(("char", None, None, token, current))
            for wi in sorted(char_where.pop(x)):
                word, count = words[wi], counts[wi]
                for i, s in enumerate(word):
                    if s != x:
                        continue
                    word[i] = token
                    if i > 0 and word[i - 1] >= 0 and word[i - 1] not in blocked:
                        delta[(word[i - 1], token)] += count
                        where[(word[i - 1], token)].add(wi)
                    if i + 1 < len(word) and word[i + 1] >= 0 and word[i + 1] not in blocked:
                        delta[(token, word[i + 1])] += count
                        where[(token, word[i + 1])].add(wi)
            del char_count[x]
            commit(delta)
            continue
        pair = (x, y)
        current = pair_count.get(pair, 0)
        if current != -neg_gain:
            if min_frequency <= current < -neg_gain and pair not in dead:
                heapq.heappush(heap, (-current, 1, x, y))
            continue
        string = strings[x] + strings[y]
        existing = vocab.get(string)
        too_long = max_token_chars is not None and existing is None and token_chars(string) > max_token_chars
        if string in reserved or too_long:
            dead.add(pair)
            continue
        if existing is None:
            token = len(strings)
            strings.append(string)
            vocab[string] = token
            created += 1
            kind_name = "merge"
        else:
            token, kind_name = existing, "free"
        saved = 0
        for wi in sorted(where.pop(pair, ())):
            word, count = words[wi], counts[wi]
            i = 0
            while True:
                try:
                    i = word.index(x, i)
                except ValueError:
                    break
                if i + 1 < len(word) and word[i + 1] == y:
                    delta[pair] -= count
                    if i > 0:
                        left = word[i - 1]
                        if left >= 0 and left not in blocked:
                            delta[(left, x)] -= count
                            delta[(left, token)] += count
                            where[(left, token)].add(wi)
                    if i + 2 < len(word):
                        right = word[i + 2]
                        if right >= 0 and right not in blocked:
                            delta[(y, right)] -= count
                            delta[(token, right)] += count
                            where[(token, right)].add(wi)
                    word[i:i + 2] = [token]
                    saved += count
                i += 1
        steps.append((kind_name, x, y, token, saved))
        dead.add(pair)
        commit(delta)
    tokens_after = sum(cost(w) * c for w, c in zip(words, counts))
    return steps, tokens_before, tokens_after


# Words over "abc", a byte token "<0xE8>" that never merges (id 3), the existing token "ab" (id 4) and two characters
# the base spells in bytes (-1: 3 bytes, -2: 2 bytes).
SYMBOLS = st.sampled_from([0, 1, 2, 3, 4, -1, -2])


@settings(max_examples=300, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.lists(SYMBOLS, min_size=1, max_size=12), st.integers(1, 5)), min_size=1, max_size=15),
       st.integers(0, 10), st.integers(1, 3), st.sampled_from([None, 2, 3]), st.booleans())
def test_array_loop_reproduces_the_per_word_loop(entries, budget, min_frequency, max_chars, reserve):
    """Pending characters, blocked ids, free merges into an existing token, reserved strings, a length limit and
    runs of one symbol ("a a a"): the flat-array loop takes the same steps with the same gains as the old one."""
    words, counts = [w for w, _ in entries], [c for _, c in entries]
    base = ["a", "b", "c", "<0xE8>", "ab"]
    settings_ = dict(new_token_budget=budget, min_frequency=min_frequency, blocked={3},
                     pending={-1: ("资", 3), -2: ("é", 2)}, reserved={"bc"} if reserve else set(),
                     max_token_chars=max_chars)
    want, before, after = reference_continued_bpe(words, counts, strings=list(base),
                                                  vocab={s: i for i, s in enumerate(base)}, **settings_)
    import yunshan.tokenizer.continued_bpe as loop

    for block in (loop.INIT_BLOCK, 3):  # the first places are sorted per block of positions: one block, or many
        default, loop.INIT_BLOCK = loop.INIT_BLOCK, block
        try:
            result = learn_continued_bpe(words, counts, strings=list(base), vocab={s: i for i, s in enumerate(base)},
                                         **settings_)
        finally:
            loop.INIT_BLOCK = default
        assert [(s.kind, s.left, s.right, s.token, s.gain) for s in result.steps] == want
        assert (result.tokens_before, result.tokens_after) == (before, after)
