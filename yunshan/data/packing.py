"""Packing: token pieces into fixed-length training sequences.

Continual pretraining concatenates documents (each ending with EOS) into sequences of exactly `seq_len` tokens.
With `document_mask`, position ids restart at every document (and at every piece of a split document that does
not directly continue its previous piece), the first token of each segment is not a label (it would be predicted
from another document), and transformers' attention masks then keep attention inside each segment: every HF
causal LM in transformers 5 builds a block-diagonal mask from restarting position ids when no attention mask
and no cache are given (the model must run with `use_cache=False`).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class PackedSequence:
    input_ids: list[int] = field(default_factory=list)
    labels: list[int] = field(default_factory=list)
    position_ids: list[int] = field(default_factory=list)
    segments: list[tuple[str, int]] = field(default_factory=list)  # (source, length) in order

    def __len__(self):
        return len(self.input_ids)


class SequenceBuilder:
    """Appends pieces to the current sequence; knows whether a piece continues the previous one."""

    def __init__(self, seq_len: int, document_mask: bool):
        self.seq_len = seq_len
        self.document_mask = document_mask
        self.current = PackedSequence()
        self._last_piece_key = None  # (source, document serial) of the last piece appended

    @property
    def room(self) -> int:
        return self.seq_len - len(self.current)

    def add(self, source: str, doc_key, tokens: list[int], starts_document: bool) -> None:
        """Append `tokens` (a piece of document `doc_key` of `source`)."""
        seq = self.current
        continues = not starts_document and self._last_piece_key == (source, doc_key) and len(seq) > 0
        if continues:
            start_pos = seq.position_ids[-1] + 1
            name, length = seq.segments[-1]
            seq.segments[-1] = (name, length + len(tokens))
        else:
            start_pos = 0
            seq.segments.append((source, len(tokens)))
        seq.input_ids.extend(tokens)
        if self.document_mask:
            seq.position_ids.extend(range(start_pos, start_pos + len(tokens)))
            labels = list(tokens)
            if not continues:
                labels[0] = -100  # would be predicted from the previous segment, which it cannot see
            seq.labels.extend(labels)
        else:
            seq.position_ids.extend(range(len(seq.position_ids), len(seq.position_ids) + len(tokens)))
            seq.labels.extend(tokens)
        self._last_piece_key = (source, doc_key)

    def pop(self) -> PackedSequence:
        assert len(self.current) == self.seq_len
        seq, self.current = self.current, PackedSequence()
        self._last_piece_key = None
        return seq


def best_fit_pack(lengths: list[int], capacity: int) -> list[list[int]]:
    """Best-fit decreasing: put each sample (longest first) into the open bin it fills most tightly.

    Returns bins as lists of sample indices; every bin's total length is <= capacity. Samples are never split."""
    import bisect

    order = sorted(range(len(lengths)), key=lambda i: (-lengths[i], i))
    bins: list[list[int]] = []
    free: list[tuple[int, int]] = []  # sorted (remaining capacity, bin index)
    for i in order:
        size = lengths[i]
        if size > capacity:
            raise ValueError(f"sample {i} has {size} tokens, more than the packing capacity {capacity}")
        k = bisect.bisect_left(free, (size, -1))
        if k < len(free):
            remaining, b = free.pop(k)
            bins[b].append(i)
            bisect.insort(free, (remaining - size, b))
        else:
            bins.append([i])
            bisect.insort(free, (capacity - size, len(bins) - 1))
    return bins
