"""Continued BPE: learn new merges on top of the base segmentation. The one training loop written by hand.

Called by `extend.py` (`yunshan tokenizer extend ...`). Everything before this loop runs in the `tokenizers`
library: the base normaliser and pre-tokeniser cut the corpus into words, the unique words are counted, and the base
BPE model (Rust) segments each unique word once. This module then runs ordinary BPE training on those base-token
sequences, weighted by word frequency: take the pair that saves the most tokens, give it the next id, update the
pair counts incrementally (only the words that contain the pair are touched), repeat. Because the new merges are
learned on the segmentation the encoder really produces once every base merge has fired, each new token is emitted
on its own text, and text without domain pairs is cut exactly as before (../shared/docs/tokenizer-extension.md).

Two extra kinds of step, both scored in tokens saved like merges:
- "char": for SentencePiece-style bases with byte fallback, a character the base can only spell as 2-4 byte tokens
  becomes a token itself (saving `bytes - 1` tokens per occurrence); until then pairs touching it are not counted.
- "free": a pair whose concatenation is already a token (BPE merge lists are not complete, so the base may never
  join these two halves) is merged without growing the vocabulary.

Ties are broken by (kind, left id, right id), so the same inputs always give the same merges.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass
class LearnedStep:
    """One learned vocabulary step, in the order it was learned (= its merge priority)."""

    kind: str            # "merge" (new token from two pieces), "free" (pieces join into an existing token), "char"
    left: int | None     # id of the left piece (None for "char")
    right: int | None    # id of the right piece (None for "char")
    token: int           # id of the resulting token
    string: str          # model-space string of the resulting token
    gain: int            # tokens saved on the training words when the step was taken


@dataclass
class LearnResult:
    steps: list[LearnedStep]
    tokens_before: int   # tokens of the training words (weighted) before the first step
    tokens_after: int    # ... and after the last
    stop_reason: str     # why learning stopped: "budget" or "min_frequency"
    rejected: int        # pairs skipped because their concatenation is reserved, too long or breaks a convention
    rejected_by_reason: dict[str, int] = None  # "reserved", "too_long", and the convention each rejected pair broke


def learn_continued_bpe(
    words: Sequence[Sequence[int]],
    counts: Sequence[int],
    *,
    strings: list[str | None],
    vocab: dict[str, int],
    new_token_budget: int,
    min_frequency: int = 2,
    blocked: set[int] = frozenset(),
    pending: dict[int, tuple[str, int]] | None = None,
    reserved: set[str] = frozenset(),
    max_token_chars: int | None = None,
    token_chars: Callable[[str], int] = len,
    violation: Callable[[str], str | None] | None = None,
) -> LearnResult:
    """Learn up to `new_token_budget` new tokens from the segmented training words.

    Args:
        words: each unique word as its current segmentation (token ids; negative ids are `pending` characters).
        counts: frequency of each word in the corpus.
        strings: id -> model-space string of every existing token; new tokens are appended (ids = positions).
        vocab: string -> id of every existing token; new tokens are added.
        new_token_budget: how many new ids may be created ("free" merges do not count).
        min_frequency: a pair (or pending character) must occur at least this often to be learned.
        blocked: ids that never take part in a merge (byte-fallback tokens, unknown, added tokens).
        pending: negative id -> (character, number of byte tokens it costs) for characters the base spells in bytes.
        reserved: strings a new token must not equal (added tokens, byte-fallback tokens, the unknown token).
        max_token_chars: longest new token allowed, in characters of its text (None = no limit).
        token_chars: length in characters of a model-space string (for `max_token_chars`).
        violation: model-space string of a would-be new token -> why it breaks a base convention, or None
            (`conventions.py`); a pair whose new token breaks one is never merged.
    """
    pending = dict(pending or {})
    words = [list(w) for w in words]
    counts = list(counts)

    def cost(word: list[int]) -> int:
        if not pending:
            return len(word)
        return len(word) + sum(pending[s][1] - 1 for s in word if s < 0)

    tokens_before = sum(cost(w) * c for w, c in zip(words, counts))
    pair_count: dict[tuple[int, int], int] = defaultdict(int)
    where: dict[tuple[int, int], set[int]] = defaultdict(set)
    char_count: dict[int, int] = defaultdict(int)
    char_where: dict[int, set[int]] = defaultdict(set)
    for wi, (word, count) in enumerate(zip(words, counts)):
        for a, b in zip(word, word[1:]):
            if a >= 0 and b >= 0 and a not in blocked and b not in blocked:
                pair_count[(a, b)] += count
                where[(a, b)].add(wi)
        for s in word:
            if s < 0:
                char_count[s] += count
                char_where[s].add(wi)

    def char_gain(s: int) -> int:
        return char_count[s] * (pending[s][1] - 1)

    heap = [(-c, 1, a, b) for (a, b), c in pair_count.items() if c >= min_frequency]
    heap += [(-char_gain(s), 0, s, 0) for s, c in char_count.items() if c >= min_frequency and pending[s][1] > 1]
    heapq.heapify(heap)
    dead: set[tuple[int, int]] = set()
    steps: list[LearnedStep] = []
    created = rejected = 0
    reasons: dict[str, int] = defaultdict(int)

    def commit(delta: dict[tuple[int, int], int]) -> None:
        """Apply the net change of each pair count; queue pairs whose count rose."""
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
        delta: dict[tuple[int, int], int] = defaultdict(int)
        if kind == 0:  # a pending character becomes a token
            if x not in char_count:
                continue
            current = char_gain(x)
            if current != -neg_gain:
                if 0 < current < -neg_gain:
                    heapq.heappush(heap, (-current, 0, x, 0))
                continue
            char = pending[x][0]
            token = len(strings)
            strings.append(char)
            vocab[char] = token
            created += 1
            steps.append(LearnedStep("char", None, None, token, char, current))
            for wi in sorted(char_where.pop(x)):
                word, count = words[wi], counts[wi]
                for i, s in enumerate(word):
                    if s != x:
                        continue
                    word[i] = token
                    # Pairs with the neighbours start to count now (a pending character took part in none).
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
            # Stale entry: a count that fell is re-queued; a count that rose already has a newer entry.
            if min_frequency <= current < -neg_gain and pair not in dead:
                heapq.heappush(heap, (-current, 1, x, y))
            continue
        string = strings[x] + strings[y]
        existing = vocab.get(string)
        too_long = max_token_chars is not None and existing is None and token_chars(string) > max_token_chars
        broken = violation(string) if violation is not None and existing is None else None
        if string in reserved or too_long or broken:
            dead.add(pair)
            rejected += 1
            reasons["reserved" if string in reserved else "too_long" if too_long else broken.split(" (")[0]] += 1
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
                    # Merge in place, recording only the pairs around this occurrence (as the Rust trainer does).
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
        steps.append(LearnedStep(kind_name, x, y, token, string, saved))
        dead.add(pair)  # a learned pair never needs learning again
        commit(delta)

    stop = "budget" if created >= new_token_budget else "min_frequency"
    tokens_after = sum(cost(w) * c for w, c in zip(words, counts))
    return LearnResult(steps, tokens_before, tokens_after, stop, rejected, dict(sorted(reasons.items())))
