"""A small pure-Python BPE word encoder over a vocabulary that is still growing.

    yunshan tokenizer extend --base BASE --corpus C.jsonl --words builtin:finance --new-tokens N --out OUT

Used while an extension is being built (`word_lists.py` builds merge chains with it, `extend.py` applies those
chains to the base segmentation of the corpus). The finished tokenizer is always encoded by the `tokenizers`
library; tests check that this encoder agrees with it word for word.

Two merge semantics, one per file format:
- `MergeListTable` (tokenizer.json): a pair merges only if it is in the ranked merge list;
- `PieceTable` (SentencePiece .model): any adjacent pair whose concatenation is a mergeable piece merges, the
  piece with the lowest id first (transformers derives the tokenizer.json merges of a .model in that order).
At each step the pair of lowest rank merges, leftmost first, as both `tokenizers` and SentencePiece do.
"""

from __future__ import annotations

from collections.abc import Callable


class MergeListTable:
    """Ranked merges of a tokenizer.json: (left id, right id) -> (rank, result id)."""

    def __init__(self, merges: list[tuple[str, str]], vocab: dict[str, int]):
        self.vocab = vocab
        self.ranks: dict[tuple[int, int], tuple[int, int]] = {}
        for left, right in merges:
            self.ranks[(vocab[left], vocab[right])] = (len(self.ranks), vocab[left + right])

    def get(self, left: int, right: int) -> tuple[int, int] | None:
        return self.ranks.get((left, right))

    def add(self, left: int, right: int, result: int) -> None:
        self.ranks.setdefault((left, right), (len(self.ranks), result))


class PieceTable:
    """SentencePiece semantics: pairs whose concatenation is a mergeable piece, ranked by that piece's id."""

    def __init__(self, strings: list[str | None], vocab: dict[str, int], mergeable: Callable[[int], bool]):
        self.strings, self.vocab, self.mergeable = strings, vocab, mergeable

    def get(self, left: int, right: int) -> tuple[tuple[int, int], int] | None:
        if not (self.mergeable(left) and self.mergeable(right)):
            return None
        left_string = self.strings[left]
        result = self.vocab.get(left_string + self.strings[right])
        if result is None or not self.mergeable(result):
            return None
        return (result, len(left_string)), result

    def add(self, left: int, right: int, result: int) -> None:
        """Nothing to record: a new piece in the vocabulary is all SentencePiece needs."""


def apply_merges(symbols: list[int], table) -> list[int]:
    """Merge adjacent symbols, lowest rank first (leftmost on ties), until no pair of the table applies."""
    symbols = list(symbols)
    while len(symbols) > 1:
        best = None
        for i in range(len(symbols) - 1):
            found = table.get(symbols[i], symbols[i + 1])
            if found is not None and (best is None or found[0] < best[0]):
                best = (found[0], i, found[1])
        if best is None:
            break
        _, i, result = best
        symbols[i:i + 2] = [result]
    return symbols
