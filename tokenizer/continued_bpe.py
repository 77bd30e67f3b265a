"""Continued BPE: learn new merges on top of the base segmentation. The one training loop written by hand.

Called by `extend.py` (`yunshan tokenizer extend ...`). Everything before this loop runs in the `tokenizers`
library: the base normaliser and pre-tokeniser cut the corpus into words, the unique words are counted, and the base
BPE model (Rust) segments each unique word once. This module then runs ordinary BPE training on those base-token
sequences, weighted by word frequency: take the pair that saves the most tokens, give it the next id, update the
pair counts incrementally (only the places where the pair occurs are touched), repeat.

Written by hand because no library trains BPE on top of a given segmentation under these constraints (the
`tokenizers` trainer starts from characters and cannot refuse a pair). The pieces live in flat numpy arrays (token,
next and previous position, one entry per token of every unique piece: 16 bytes, where Python lists of ints cost
about ten times that), every pair's places are kept as arrays (the first ones sorted by pair in one array), and each
step updates all of its places at once with numpy: a step costs a few array operations plus one dictionary update
per pair whose count changed, not a Python loop over every occurrence. Because the new merges are
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

import numpy as np

# Token value of a position merged into its left neighbour (pending characters are -1, -2, ...).
REMOVED = np.iinfo(np.int32).min
# Positions per block when the pairs are first counted and sorted.
INIT_BLOCK = 1 << 22


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


@dataclass
class Pieces:
    """Training pieces in flat arrays: the token ids of every piece one after another (negative ids: pending
    characters), where each piece starts (one more entry than pieces: the end) and how often it occurs."""

    ids: np.ndarray      # int32
    starts: np.ndarray   # int64, len(counts) + 1
    counts: np.ndarray   # int64

    @classmethod
    def from_lists(cls, words: Sequence[Sequence[int]], counts: Sequence[int]) -> Pieces:
        kept = [(w, c) for w, c in zip(words, counts) if len(w)]
        lengths = np.fromiter((len(w) for w, _ in kept), np.int64, len(kept))
        ids = np.fromiter((i for w, _ in kept for i in w), np.int32, int(lengths.sum()))
        return cls(ids, np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
                   np.fromiter((c for _, c in kept), np.int64, len(kept)))


def learn_continued_bpe(
    words: Sequence[Sequence[int]] | Pieces,
    counts: Sequence[int] | None = None,
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
        words: each unique word as its current segmentation (token ids; negative ids are `pending` characters), as
            lists or as `Pieces` (whose id array the loop then uses in place).
        counts: frequency of each word in the corpus (with lists of ids).
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
    pieces = words if isinstance(words, Pieces) else Pieces.from_lists(words, counts)
    pending = dict(pending or {})
    table = _PairTable(pieces, len(strings) + new_token_budget + 1, blocked)
    extra_cost = np.zeros(len(pending) + 1, np.int64)  # pending id -k -> byte tokens it costs beyond one
    for symbol, (_, n_bytes) in pending.items():
        extra_cost[-symbol] = n_bytes - 1
    tokens_before = table.tokens(extra_cost)

    char_count: dict[int, int] = {}
    char_places: dict[int, np.ndarray] = {}
    for symbol, places, total in table.pending_places():
        char_count[symbol], char_places[symbol] = total, places

    def char_gain(s: int) -> int:
        return char_count[s] * (pending[s][1] - 1)

    heap = table.initial_heap(min_frequency)
    heap += [(-char_gain(s), 0, s, 0) for s, c in char_count.items() if c >= min_frequency and pending[s][1] > 1]
    heapq.heapify(heap)
    dead = table.dead  # pairs learned or refused: never queued again, their places no longer kept
    steps: list[LearnedStep] = []
    created = rejected = 0
    reasons: dict[str, int] = defaultdict(int)
    pair_count, key_of = table.count, table.key

    while heap and created < new_token_budget:
        neg_gain, kind, x, y = heapq.heappop(heap)
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
            del char_count[x]
            # Pairs with the neighbours start to count now (a pending character took part in none).
            for pair in table.become(char_places.pop(x), token):
                if pair not in dead and pair_count[pair] >= min_frequency:
                    heapq.heappush(heap, (-pair_count[pair], 1, *table.split(pair)))
            continue

        pair = key_of(x, y)
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
            table.forget(pair)
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
        saved, risen = table.merge(x, y, token)  # a learned pair never needs learning again: dead too
        steps.append(LearnedStep(kind_name, x, y, token, string, saved))
        for rose in risen:
            if rose not in dead and pair_count[rose] >= min_frequency:
                heapq.heappush(heap, (-pair_count[rose], 1, *table.split(rose)))

    stop = "budget" if created >= new_token_budget else "min_frequency"
    return LearnResult(steps, tokens_before, table.tokens(extra_cost), stop, rejected, dict(sorted(reasons.items())))


class _PairTable:
    """The pieces as linked positions in flat arrays, the weighted count of every adjacent pair and where it occurs.

    A pair (a, b) is the key a * capacity + b. Its places are the positions of its left token: first those found at
    the start (`first_blocks`: per block of positions, an array sorted by pair), then arrays added as merges create
    the pair (`later_places`). A place stops holding the pair when a merge changes either token;
    such stale places are dropped when the pair is merged (a place never holds the same pair twice, because the
    strings at a place only grow)."""

    def __init__(self, pieces: Pieces, capacity: int, blocked):
        self.capacity = capacity
        self.tok = pieces.ids if pieces.ids.dtype == np.int32 else pieces.ids.astype(np.int32)  # used in place
        size = len(self.tok)
        # A count fits in 32 bits unless the corpus is enormous; sums are taken in 64 bits either way.
        small = not len(pieces.counts) or int(pieces.counts.max()) < 2**31
        self.weight = np.repeat(pieces.counts.astype(np.int32 if small else np.int64), np.diff(pieces.starts))
        self.nxt = np.arange(1, size + 1, dtype=np.int32)
        self.prv = np.arange(-1, size - 1, dtype=np.int32)
        if size:
            self.nxt[pieces.starts[1:] - 1] = -1
            self.prv[pieces.starts[:-1]] = -1
        self.blocked = np.zeros(capacity, dtype=bool)
        self.blocked[[b for b in blocked if 0 <= b < capacity]] = True
        # The first places, block by block of positions (so that sorting them needs memory for one block only):
        # per block, its pairs' keys (sorted), where each pair's places start, and the places sorted by pair.
        self.first_blocks: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.count: dict[int, int] = {}
        count = self.count
        for start in range(0, size, INIT_BLOCK):
            keys, places = self._pairs_at(np.arange(start, min(size, start + INIT_BLOCK), dtype=np.int32))
            order = np.argsort(keys, kind="stable")
            keys, places = keys[order], places[order]
            starts = np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]])) if len(keys) else order[:0]
            totals = np.add.reduceat(self.weight[places].astype(np.int64), starts) if len(starts) else starts
            self.first_blocks.append((keys[starts], np.append(starts, len(places)), places))
            for key, total in zip(keys[starts].tolist(), totals.tolist()):
                count[key] = count.get(key, 0) + total
        self.later_places: dict[int, list[np.ndarray]] = {}
        self.dead: set[int] = set()  # pairs that will never be merged (learned, or refused)

    def key(self, a: int, b: int) -> int:
        return a * self.capacity + b

    def split(self, key: int) -> tuple[int, int]:
        return divmod(key, self.capacity)

    def initial_heap(self, min_frequency: int) -> list[tuple]:
        keys = np.fromiter(self.count.keys(), np.int64, len(self.count))
        totals = np.fromiter(self.count.values(), np.int64, len(self.count))
        keep = totals >= min_frequency
        return [(-c, 1, *divmod(k, self.capacity)) for k, c in zip(keys[keep].tolist(), totals[keep].tolist())]

    def tokens(self, extra_cost: np.ndarray) -> int:
        """Weighted tokens of all pieces, a pending character costing its byte tokens."""
        alive = self.tok != REMOVED
        total = int(self.weight.sum(where=alive, dtype=np.int64))
        pending = np.flatnonzero(alive & (self.tok < 0))
        return total + int((self.weight[pending].astype(np.int64) * extra_cost[-self.tok[pending]]).sum())

    def pending_places(self):
        """(pending id, its positions, weighted count) of every pending character."""
        places = np.flatnonzero((self.tok < 0) & (self.tok != REMOVED))
        if not len(places):
            return
        order = np.argsort(self.tok[places], kind="stable")
        places = places[order]
        symbols, starts = np.unique(self.tok[places], return_index=True)
        bounds = np.append(starts, len(places))
        for i, symbol in enumerate(symbols.tolist()):
            found = places[bounds[i]:bounds[i + 1]]
            yield symbol, found, int(self.weight[found].sum(dtype=np.int64))

    def _pairs_at(self, places: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(key, place) of the countable pairs starting at these places: a right neighbour exists and neither token
        is pending, merged away or blocked."""
        after = self.nxt[places]
        has = after >= 0
        places = places[has]
        left, right = self.tok[places], self.tok[after[has]]
        ok = (left >= 0) & (right >= 0)
        places, left, right = places[ok], left[ok], right[ok]
        ok = ~(self.blocked[left] | self.blocked[right])
        return left[ok].astype(np.int64) * self.capacity + right[ok], places[ok]

    def _places_of(self, key: int) -> np.ndarray:
        """Every place recorded for a pair (some may be stale), sorted: left to right within each piece."""
        parts = []
        for keys, bounds, places in self.first_blocks:
            i = int(np.searchsorted(keys, key))
            if i < len(keys) and keys[i] == key:
                parts.append(places[bounds[i]:bounds[i + 1]])
        parts += self.later_places.pop(key, [])
        if not parts:
            return np.zeros(0, np.int64)
        if len(parts) == 1:
            return parts[0].astype(np.int64)
        return np.sort(np.concatenate(parts).astype(np.int64), kind="stable")  # sorted runs: a merge sort merges

    def forget(self, key: int) -> None:
        """A pair that will never be merged: its places need no keeping, now or later."""
        self.dead.add(key)
        self.later_places.pop(key, None)

    def _apply(self, removed_keys: np.ndarray, removed_places: np.ndarray, added_places: np.ndarray) -> list[int]:
        """Subtract the pairs that were at `removed_places` (keys given), add the pairs now at `added_places`
        (distinct), keep the new places; returns the pairs whose count rose."""
        added_keys, added_places = self._pairs_at(added_places)
        keys = np.concatenate([removed_keys, added_keys])
        if not len(keys):
            return []
        signed = np.concatenate([-self.weight[removed_places].astype(np.int64),
                                 self.weight[added_places].astype(np.int64)])
        places = np.concatenate([removed_places, added_places])
        order = np.argsort(keys, kind="stable")  # within a pair: its removed places first, then its added ones
        keys, signed, places = keys[order], signed[order], places[order]
        starts = np.flatnonzero(np.concatenate([[True], keys[1:] != keys[:-1]]))
        net = np.add.reduceat(signed, starts)
        first_added = starts + np.add.reduceat((order < len(removed_keys)).astype(np.int64), starts)
        ends = np.append(starts[1:], len(keys))
        risen = []
        count, later = self.count, self.later_places
        for key, change, added_from, end in zip(keys[starts].tolist(), net.tolist(), first_added.tolist(),
                                                ends.tolist()):
            if change:
                total = count.get(key, 0) + change
                if total <= 0:
                    count.pop(key, None)
                    later.pop(key, None)
                    continue
                count[key] = total
                if change > 0:
                    risen.append(key)
            if added_from < end and key in count and key not in self.dead:
                later.setdefault(key, []).append(places[added_from:end].astype(np.int32))
        return risen

    def merge(self, x: int, y: int, token: int) -> tuple[int, list[int]]:
        """Replace every occurrence of (x, y) by `token`, left to right within a piece; returns the tokens saved
        (weighted) and the pairs whose count rose."""
        places = self._places_of(self.key(x, y))
        if len(places):
            right = self.nxt[places]
            ok = (self.tok[places] == x) & (right >= 0)
            places, right = places[ok], right[ok]
            places = places[self.tok[right] == y]
        if x == y and len(places) > 1:
            # "a a a": the first two merge and the third stays (left to right, as the encoder does).
            nxt, kept, last = self.nxt, [], -1
            for place in places.tolist():
                if last < 0 or nxt[last] != place:
                    kept.append(place)
                    last = place
            places = np.array(kept, dtype=np.int64)
        self.count.pop(self.key(x, y), None)
        self.dead.add(self.key(x, y))
        if not len(places):
            return 0, []
        right = self.nxt[places].astype(np.int64)
        left = self.prv[places]
        # The pairs that end or start at an occurrence: (left neighbour, x) and (y, right neighbour). The pair at an
        # occurrence itself is (x, y), whose count is gone already.
        removed_keys, removed_places = self._pairs_at(_sorted_union(left[left >= 0], right))
        keep = removed_keys != self.key(x, y)  # "a a a": the second (a, a) is gone with the first
        after = self.nxt[right]
        self.tok[places] = token
        self.nxt[places] = after
        has = after >= 0
        self.prv[after[has]] = places[has]
        self.tok[right] = REMOVED
        self.nxt[right] = -1
        self.prv[right] = -1
        left = self.prv[places]
        risen = self._apply(removed_keys[keep], removed_places[keep], _sorted_union(left[left >= 0], places))
        return int(self.weight[places].sum(dtype=np.int64)), risen

    def become(self, places: np.ndarray, token: int) -> list[int]:
        """A pending character becomes `token` at these places (sorted); returns the pairs that now count (and
        rose)."""
        self.tok[places] = token
        left = self.prv[places]
        return self._apply(np.zeros(0, np.int64), np.zeros(0, np.int64), _sorted_union(left[left >= 0], places))


def _sorted_union(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The distinct values of two sorted arrays, sorted (one stable sort merges the two runs)."""
    both = np.concatenate([a, b]).astype(np.int64)
    both.sort(kind="stable")
    if len(both) < 2:
        return both
    return both[np.concatenate([[True], both[1:] != both[:-1]])]
