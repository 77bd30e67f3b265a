"""Decontamination: how much of each evaluation item is found in the training data, as the Llama 2 report measures
it, with boilerplate left out; streaming, in numpy.

    yunshan data decontaminate corpus.jsonl sft.jsonl --tasks fineval=data/FinEval lawbench=data/LawBench \\
        --out runs/decontamination       # the command (yunshan/cli/data.py over yunshan/eval/decontamination.py)

    from yunshan.data.decontamination import NgramIndex, Scan, Text
    index = NgramIndex.build([Text("eval.csv:2", ["题目……"])])
    scan = Scan(index, workdir)
    for record in scan.read(training_texts, describe=lambda r: {"location": r.location}): ...
    result = scan.resolve(on_record=lambda meta, pairs: ...)      # result.shares: one per evaluation item

What is compared: windows of units (yunshan/data/ngrams.py: NFKC and case folding; a unit per CJK character, per
word or number otherwise; a window is 13 words or 25 CJK characters, the length calibrated on real Chinese text).

What is measured (Llama 2, "Open Foundation and Fine-Tuned Chat Models", appendix A.6, "Dataset Contamination"):
a unit of an evaluation item is contaminated when it lies in a window that the training data also contains, and an
item's contamination is the share of its units that are contaminated. Llama 2 then calls an item clean below 20% and
dirty from 80%; here the three bands are clean (< `clean_below`, default 0.2), partial, and dirty (>= `dirty_from`,
default 0.8). So an exam question that quotes one statute is not "contaminated" because a law in the corpus holds
that statute (a small share of the item), while a question whose answer is an article of law recited word for word
is dirty. The denominator is every unit of the fields compared, including fields too short to hold a window;
an item with no window at all cannot be checked (counted, never dropped silently). Llama 2 also let a match skip up
to 4 mismatched tokens; windows here must match exactly.

Boilerplate. Formulae every law and every question share (`第十届全国人民代表大会常务委员会第`, `构成犯罪的，依法追究刑事
责任`) would make every item partly "found": a window found in at least `boilerplate_train` training records, or in at
least `boilerplate_eval` distinct evaluation texts, is boilerplate: left out of the shares, and counted (how many
windows, examples with their counts). The share with boilerplate counted too is kept beside (`raw_shares`), so an
item that is only boilerplate, or a benchmark copied into so many documents that its windows look frequent, is still
visible.

A training record and an item "overlap" when they share a window that is not boilerplate; the part of the item that
record alone covers is the pair's share. Records whose pair share reaches a threshold form the contamination list
(`record_digest`), which `yunshan cpt` / `yunshan sft` (`data.exclude`) leave out.

Streaming. Training text goes through in blocks of about `block_chars` characters, and a long record is cut into
pieces at safe points (a CJK character or ASCII punctuation, where neither normalisation nor units change), each
piece continuing the windows of the one before; so memory holds the index and one block, whatever the size of a
record or of the data. During the pass only the window counts per training record are kept; the (record, window)
pairs of windows not yet known to be boilerplate go to a file in `workdir` (at most `boilerplate_train` records per
window), and the shares are resolved from it at the end.

Written by hand: datatrove's NGramsDecontFilter and lm-evaluation-harness's decontamination cut whitespace words,
read their own task definitions and flag any shared 13-gram; neither compares Chinese by character, measures the
share of an item found, leaves boilerplate out, or reads the local C-Eval, CMMLU, LawBench or JEC-QA layouts.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .ngrams import DEFAULT_CJK_N, DEFAULT_N, UnitTables, cut_units, last_safe_cut, safe_cut, show_units, windows

DEFAULT_BLOCK_CHARS = 1 << 18
_MAX_CARRY = 1 << 16
CATEGORIES = ("clean", "partial", "dirty")


@dataclass
class Text:
    """One evaluation item or training record to compare: where it is, its text fields and the caller's data."""

    location: str  # "file:line" (or the reader's location: "file: record N", "dataset[split] #i")
    fields: list[str]
    tag: Any = None


def _distinct(values: np.ndarray) -> np.ndarray:
    """The sorted distinct values (np.unique, by a sort: numpy's hash-based unique is far slower on large arrays)."""
    values = np.sort(values)
    return values[np.r_[True, values[1:] != values[:-1]]] if values.size else values


def _equal_windows(a_codes: np.ndarray, a_first: np.ndarray, a_length: np.ndarray, b_codes: np.ndarray,
                   b_first: np.ndarray, b_length: np.ndarray) -> np.ndarray:
    """Whether window a (a_codes[a_first: a_first + a_length]) equals window b, unit by unit, for each pair."""
    equal = a_length == b_length
    for k in range(int(a_length.max(initial=0))):
        check = equal & (k < a_length)
        if not check.any():
            break
        equal[check] = a_codes[a_first[check] + k] == b_codes[b_first[check] + k]
    return equal


class NgramIndex:
    """The windows of every evaluation item. A distinct window (same units) is one id `u`: its hash (sorted), where
    it first occurs, every occurrence (item, first unit, length) and in how many distinct evaluation texts it is."""

    def __init__(self, n: int, cjk_n: int, tables: UnitTables, items: list[Text]):
        self.n, self.cjk_n, self.tables, self.items = n, cjk_n, tables, items

    @classmethod
    def build(cls, items: Iterable[Text], n: int = DEFAULT_N, cjk_n: int = DEFAULT_CJK_N,
              block_chars: int = DEFAULT_BLOCK_CHARS) -> NgramIndex:
        if n < 1 or cjk_n < 1:
            raise ValueError(f"n and cjk_n must be at least 1, got {n} and {cjk_n}")
        index = cls(n, cjk_n, UnitTables(), list(items))
        texts: dict[str, int] = {}  # distinct field texts: how often a window is in the evaluation data
        # Per occurrence of a window, in compact types (the index's memory is most of a run's): its hash, second hash,
        # item, first unit (of all evaluation units), length and field text.
        parts: dict[str, list] = {k: [] for k in ("codes", "hash", "second", "item", "first", "length", "text")}
        item_units = np.zeros(len(index.items), dtype=np.int64)
        offset = 0
        block: list[tuple[int, str]] = []
        size = 0

        def flush():
            nonlocal offset
            units = cut_units(index.tables, [f for _, f in block])
            w = windows(index.tables, units, n, cjk_n, second=True)
            owners = np.array([i for i, _ in block], dtype=np.int32)
            text_ids = np.array([texts.setdefault(f, len(texts)) for _, f in block], dtype=np.int32)
            np.add.at(item_units, owners[units.segments], 1)
            segment = units.segments[w.first]
            for key, value in (("codes", units.codes), ("hash", w.hashes), ("second", w.second),
                               ("item", owners[segment]), ("first", (w.first + offset).astype(np.int64)),
                               ("length", w.length.astype(np.int32)), ("text", text_ids[segment])):
                parts[key].append(value)
            offset += len(units)
            block.clear()

        for i, item in enumerate(index.items):
            for f in item.fields:
                block.append((i, f))
                size += len(f)
            if size >= block_chars:
                flush()
                size = 0
        if block:
            flush()
        dtypes = {"codes": np.uint64, "hash": np.uint64, "second": np.uint64, "item": np.int32, "first": np.int64,
                  "length": np.int32, "text": np.int32}
        occ = {}
        for key, dtype in dtypes.items():  # one array at a time, its parts freed
            chunks = parts.pop(key)
            occ[key] = np.concatenate(chunks).astype(dtype, copy=False) if chunks else np.zeros(0, dtype=dtype)
            del chunks
        index.codes = occ.pop("codes")  # raw unit codes of every evaluation unit, items one after another
        index.item_units = item_units
        index.item_first = np.cumsum(item_units) - item_units
        windows_per_item = np.bincount(occ["item"], minlength=len(index.items))
        index._group(occ)
        index.unchecked = np.flatnonzero(windows_per_item == 0).tolist()
        index.windows_per_item = windows_per_item
        return index

    def _group(self, occ: dict) -> None:
        """Distinct windows: occurrences grouped by hash; two windows with the same hash are told apart by their
        second, independent hash (a 64-bit collision of the first; never seen in practice). Empties `occ`."""
        occ_hash = occ.pop("hash")
        order = np.argsort(occ_hash)
        occ_hash = occ_hash[order]
        new = np.r_[True, occ_hash[1:] != occ_hash[:-1]] if occ_hash.size else np.zeros(0, dtype=bool)
        u = np.cumsum(new) - 1
        heads = np.flatnonzero(new)
        self.hashes = occ_hash[heads]
        del occ_hash, new
        occ_second = occ.pop("second")[order]
        self.variants: dict[int, list[int]] = {}  # hash position -> further ids with that hash
        seen: dict[tuple[int, int], int] = {}
        next_u = heads.size
        for k in np.flatnonzero(occ_second != occ_second[heads][u]).tolist():
            g = int(u[k])
            key = (g, int(occ_second[k]))
            if key not in seen:
                seen[key] = next_u
                self.variants.setdefault(g, []).append(next_u)
                next_u += 1
            u[k] = seen[key]
        del occ_second
        if self.variants:  # the occurrences of the further ids move to the end, in id order
            by_u = np.argsort(u, kind="stable")
            order, u = order[by_u], u[by_u]
        self.size = next_u  # distinct windows
        self.occ_item, self.occ_first, self.occ_length = (occ.pop(k)[order] for k in ("item", "first", "length"))
        self.occ_ptr = np.r_[0, np.cumsum(np.bincount(u, minlength=next_u))]
        self.rep_first = self.occ_first[self.occ_ptr[:-1]]  # an occurrence of each id
        self.rep_length = self.occ_length[self.occ_ptr[:-1]]
        # In how many distinct evaluation texts each id is.
        occ_text = occ.pop("text")
        texts = int(occ_text.max(initial=0)) + 1
        self.eval_texts = np.bincount(_distinct(u * texts + occ_text[order]) // texts, minlength=next_u)
        del occ_text, order, u
        # A bit per 2**bits hash prefix (about 16 per window: most training windows are rejected by one lookup in a
        # table that stays in cache), then a directory of the sorted hashes by a shorter prefix (about 2 slots per
        # window): where the hashes with that prefix start, so a lookup is two reads instead of a binary search.
        size = int(np.ceil(np.log2(max(self.hashes.size, 1))))
        bits = max(16, size + 4)
        self.prefix_shift = np.uint64(64 - bits)
        table = np.zeros(1 << bits, dtype=bool)
        table[(self.hashes >> self.prefix_shift).astype(np.int64)] = True
        self.prefix_bits = np.packbits(table, bitorder="little")
        slots = max(8, size + 1)
        self.slot_shift = np.uint64(64 - slots)
        counts = np.bincount((self.hashes >> self.slot_shift).astype(np.int64), minlength=1 << slots)
        self.directory = np.r_[0, np.cumsum(counts)].astype(np.int32)

    def __len__(self) -> int:
        return int(self.size)

    def lookup(self, hashes: np.ndarray, codes: np.ndarray, first: np.ndarray,
               length: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(which of the windows are in the index, their ids): hash lookup, then unit by unit confirmation."""
        if self.size == 0 or hashes.size == 0:
            return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
        prefix = (hashes >> self.prefix_shift).astype(np.int64)
        maybe = np.flatnonzero((self.prefix_bits[prefix >> 3] >> (prefix & 7).astype(np.uint8)) & 1)
        wanted = hashes[maybe]
        slot = (wanted >> self.slot_shift).astype(np.int64)
        at, end = self.directory[slot].astype(np.int64), self.directory[slot + 1].astype(np.int64)
        found = np.full(maybe.size, -1, dtype=np.int64)
        left = np.flatnonzero(at < end)
        while left.size:  # a slot holds about two hashes: a few rounds
            hit = self.hashes[at[left]] == wanted[left]
            found[left[hit]] = at[left[hit]]
            left = left[~hit]
            at[left] += 1
            left = left[at[left] < end[left]]
        hit = found >= 0
        which, u = maybe[hit], found[hit]
        same = _equal_windows(codes, first[which], length[which], self.codes, self.rep_first[u], self.rep_length[u])
        if not same.all() and self.variants:
            for k in np.flatnonzero(~same).tolist():
                for v in self.variants.get(int(u[k]), []):
                    if _equal_windows(codes, first[which[k: k + 1]], length[which[k: k + 1]], self.codes,
                                      self.rep_first[v: v + 1], self.rep_length[v: v + 1])[0]:
                        u[k], same[k] = v, True
                        break
        return which[same], u[same]

    def window_text(self, u: int) -> str:
        """The normalised text of window `u` (units as readable text: CJK joined, words spaced)."""
        return self.occurrence_texts(self.rep_first[u: u + 1], self.rep_length[u: u + 1])[0]

    def occurrence_texts(self, first: np.ndarray, length: np.ndarray, chunk_chars: int = 1 << 20) -> list[str]:
        """The normalised texts of windows given by first unit (of all evaluation units) and length: the items they
        lie in are cut into units again, together, a chunk of about `chunk_chars` characters at a time."""
        first, length = np.asarray(first, dtype=np.int64), np.asarray(length, dtype=np.int64)
        item = np.searchsorted(self.item_first, first, side="right") - 1
        out: list[str] = [""] * first.size
        needed = np.unique(item)
        start = 0
        while start < needed.size:
            stop, size = start, 0
            while stop < needed.size and (stop == start or size < chunk_chars):
                size += sum(len(f) for f in self.items[int(needed[stop])].fields)
                stop += 1
            batch = needed[start:stop]
            units = cut_units(self.tables, [f for i in batch.tolist() for f in self.items[i].fields])
            offset = np.cumsum(self.item_units[batch]) - self.item_units[batch]
            mine = np.flatnonzero((item >= batch[0]) & (item <= batch[-1]))
            position = offset[np.searchsorted(batch, item[mine])] + first[mine] - self.item_first[item[mine]]
            for k, p, n in zip(mine.tolist(), position.tolist(), length[mine].tolist()):
                out[k] = show_units(units.text(p, n), self.tables)  # the window's units only
            start = stop
        return out


@dataclass
class Pair:
    """An evaluation item a training record shares windows with (boilerplate left out)."""

    item: int  # index into NgramIndex.items
    share: float  # of the item's units, covered by the windows this record shares with it
    windows: int  # distinct shared windows
    match: str  # the item's first shared window, normalised


@dataclass
class Contamination:
    """The outcome: per evaluation item its share found in training (boilerplate left out, and counted in), the
    records overlapping it and the one covering most of it; the boilerplate left out."""

    shares: np.ndarray
    raw_shares: np.ndarray
    records: np.ndarray  # training records sharing a window (not boilerplate) with the item
    best_share: np.ndarray
    best_record: list  # describe(record) of the record with best_share, or None
    match: list  # the item's first window found in training (not boilerplate), or None
    boilerplate_train: int  # distinct evaluation windows found in >= boilerplate_train training records
    boilerplate_eval: int  # distinct evaluation windows in >= boilerplate_eval evaluation texts, found in training
    boilerplate_examples: list[dict]
    windows_found: int  # distinct evaluation windows found in training (boilerplate included)
    records_with_boilerplate_only: int  # records whose windows found were all boilerplate


class Scan:
    """One pass over the training data against an index, then `resolve`. `workdir` holds the pair files."""

    def __init__(self, index: NgramIndex, workdir: str | Path, boilerplate_train: int = 0,
                 boilerplate_eval: int = 0, block_chars: int = DEFAULT_BLOCK_CHARS):
        self.index = index
        self.boilerplate_train, self.boilerplate_eval = boilerplate_train, boilerplate_eval
        self.block_chars = block_chars
        self.records = 0
        self.train_records = np.zeros(index.size, dtype=np.int64)  # training records holding each window
        self._last_record = np.full(index.size, -1, dtype=np.int64)
        self._eval_boilerplate = (index.eval_texts >= boilerplate_eval) if boilerplate_eval else \
            np.zeros(index.size, dtype=bool)
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self._pairs = open(self.workdir / "pairs.bin", "wb")
        self._meta = open(self.workdir / "records.jsonl", "w", encoding="utf-8")
        self._described = -1
        self._any_window = np.zeros(0, dtype=np.int64)
        self._with_windows = 0  # records sharing any window (boilerplate included)
        self._last_with_windows = -1
        self._block: list[tuple[int, int, str, bool]] = []  # (record, field key, text, continues)
        self._block_records: dict[int, tuple[Text, Callable]] = {}
        self._size = 0
        self._fields = 0
        self._carry: dict[int, str] = {}

    def read(self, records: Iterable[Text], describe: Callable[[Text], dict]) -> Iterator[Text]:
        """Pass every record through, comparing it (in blocks). `describe(record)` is what the report keeps of a
        record that shares a window (its location, digest, source)."""
        for record in records:
            number = self.records
            self.records += 1
            self._block_records[number] = (record, describe)
            for text in record.fields:
                key = self._fields
                self._fields += 1
                start = 0
                while True:
                    room = max(self.block_chars - self._size, 1)
                    cut = len(text) if len(text) - start <= room else safe_cut(text, start + room)
                    piece = self._carry.pop(key, "") + text[start:cut]
                    self._block.append((number, key, piece, cut < len(text)))
                    self._size += cut - start
                    start = cut
                    if self._size >= self.block_chars:
                        self._flush()
                    if start >= len(text):
                        break
            yield record

    def _flush(self) -> None:
        block, self._block, self._size = self._block, [], 0
        if not block:
            return
        index = self.index
        units = cut_units(index.tables, [text for _, _, text, _ in block])
        w = windows(index.tables, units, index.n, index.cjk_n)
        for s, (_, key, text, continues) in enumerate(block):
            if continues:  # carry the units whose windows run on into the next piece of this field
                lo, hi = np.searchsorted(units.segments, [s, s + 1])
                late = lo + int(np.searchsorted(w.ends[lo:hi], hi, side="right"))
                if late < hi:
                    at = last_safe_cut(text, int(units.raw_starts[late] - units.segment_starts[s]))
                    # Only a window's worth of units is carried; a longer carry means a run of letters longer than
                    # the cap with no space, which is then cut (the one place a unit may be split).
                    self._carry[key] = text[max(at, len(text) - _MAX_CARRY):]
        if index.size == 0:
            return
        which, u = index.lookup(w.hashes, units.codes, w.first, w.length)
        owners = np.array([r for r, _, _, _ in block], dtype=np.int64)
        record = owners[units.segments[w.first[which]]]
        keys = _distinct(record * index.size + u)
        record, u = keys // index.size, keys % index.size
        counted = _distinct(record)
        self._with_windows += int(counted.size) - int(counted.size > 0 and counted[0] == self._last_with_windows)
        if counted.size:
            self._last_with_windows = int(counted[-1])
        before = self.train_records[u]
        new = self._last_record[u] != record  # a record read in several blocks counts once
        np.add.at(self.train_records, u[new], 1)
        self._last_record[u] = record
        spill = ~self._eval_boilerplate[u]
        if self.boilerplate_train:
            spill &= before < self.boilerplate_train  # not yet known as frequent in training
        if spill.any():
            record, u = record[spill], u[spill]
            np.stack([record, u], axis=1).astype(np.int64).tofile(self._pairs)
            for r in _distinct(record).tolist():
                if r != self._described:
                    text, describe = self._block_records[r]
                    self._meta.write(json.dumps({"record": r, **describe(text)}, ensure_ascii=False) + "\n")
                    self._described = r
        for r in [r for r in self._block_records if r < self.records - 1]:  # the record being read stays
            del self._block_records[r]

    def resolve(self, on_record: Callable[[dict, list[Pair]], None] | None = None,
                examples: int = 10) -> Contamination:
        """Finish the pass and compute the shares; `on_record(described, pairs)` is called, in record order, for
        every record that shares a window that is not boilerplate."""
        self._flush()
        self._pairs.close()
        self._meta.close()
        index = self.index
        found = self.train_records > 0
        boilerplate = self._eval_boilerplate.copy()
        if self.boilerplate_train:
            boilerplate |= self.train_records >= self.boilerplate_train
        counted = found & ~boilerplate
        raw_shares = self._shares(found)
        shares = self._shares(counted)
        n_items = len(index.items)
        records = np.zeros(n_items, dtype=np.int64)
        best_share = np.zeros(n_items)
        best_record: list = [None] * n_items
        path = self.workdir / "pairs.bin"
        pairs = np.memmap(path, dtype=np.int64, mode="r").reshape(-1, 2) if path.stat().st_size else \
            np.zeros((0, 2), dtype=np.int64)
        overlapping = 0
        with open(self.workdir / "records.jsonl", encoding="utf-8") as meta_file:
            meta = (json.loads(line) for line in meta_file)
            step = 1 << 21
            start = 0
            while start < len(pairs):
                stop = min(start + step, len(pairs))
                while stop < len(pairs) and pairs[stop, 0] == pairs[stop - 1, 0]:
                    stop += 1  # whole records in a chunk
                overlapping += self._resolve_chunk(np.asarray(pairs[start:stop]), boilerplate, meta, records,
                                                   best_share, best_record, on_record)
                start = stop
        del pairs
        (self.workdir / "pairs.bin").unlink()
        (self.workdir / "records.jsonl").unlink()
        match = self._first_matches(counted)
        frequent = np.flatnonzero(found & boilerplate)
        top = frequent[np.argsort(-self.train_records[frequent], kind="stable")[:examples]]
        return Contamination(
            shares=shares, raw_shares=raw_shares, records=records, best_share=best_share, best_record=best_record,
            match=match,
            boilerplate_train=int((found & (self.train_records >= self.boilerplate_train)).sum())
            if self.boilerplate_train else 0,
            boilerplate_eval=int((found & self._eval_boilerplate).sum()),
            boilerplate_examples=[{"window": text, "training_records": int(self.train_records[u]),
                                   "evaluation_texts": int(index.eval_texts[u])}
                                  for u, text in zip(top.tolist(), index.occurrence_texts(index.rep_first[top],
                                                                                          index.rep_length[top]))],
            windows_found=int(found.sum()), records_with_boilerplate_only=self._with_windows - overlapping)

    def _occurrences(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(position in `ids`, item, first unit, length) of every occurrence of the windows `ids`."""
        index = self.index
        count = index.occ_ptr[ids + 1] - index.occ_ptr[ids]
        owner = np.repeat(np.arange(ids.size), count)
        occ = np.repeat(index.occ_ptr[ids], count) + np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count,
                                                                                               count)
        return owner, index.occ_item[occ], index.occ_first[occ], index.occ_length[occ]

    def _shares(self, chosen: np.ndarray) -> np.ndarray:
        """Per item: the share of its units lying in an occurrence of a chosen window."""
        index = self.index
        _, item, first, length = self._occurrences(np.flatnonzero(chosen))
        total = int(index.item_units.sum())
        cover = np.bincount(first, minlength=total + 1) - np.bincount(first + length, minlength=total + 1)
        covered = np.r_[0, np.cumsum(np.cumsum(cover)[:total] > 0)]
        per_item = covered[index.item_first + index.item_units] - covered[index.item_first]
        return np.divide(per_item, index.item_units, out=np.zeros(len(index.items)), where=index.item_units > 0)

    def _first_matches(self, chosen: np.ndarray) -> list:
        index = self.index
        _, item, first, length = self._occurrences(np.flatnonzero(chosen))
        order = np.lexsort((first, item))
        item, first, length = item[order], first[order], length[order]
        heads = np.flatnonzero(np.r_[True, item[1:] != item[:-1]]) if item.size else np.zeros(0, dtype=np.int64)
        match: list = [None] * len(index.items)
        for k, text in zip(item[heads].tolist(), index.occurrence_texts(first[heads], length[heads])):
            match[k] = text
        return match

    def _resolve_chunk(self, pairs, boilerplate, meta, records, best_share, best_record, on_record) -> None:
        index = self.index
        record, u = pairs[:, 0], pairs[:, 1]
        keep = ~boilerplate[u]
        record, u = record[keep], u[keep]
        if record.size == 0:
            return 0
        owner, item, first, length = self._occurrences(u)
        record, u = record[owner], u[owner]
        n_items = len(index.items)
        key = record * n_items + item
        order = np.lexsort((first, key))
        key, u, first, length, item = key[order], u[order], first[order], length[order], item[order]
        new = np.r_[True, key[1:] != key[:-1]]
        heads = np.flatnonzero(new)
        group = np.cumsum(new) - 1
        # Units of the item the pair's occurrences cover: intervals sorted by start; a running maximum of the ends
        # within each pair (offset by pair so the maximum never carries over from the pair before).
        end = first + length
        span = int(end.max()) + 1
        reach = np.maximum.accumulate(end + group * span) - group * span
        before = np.r_[0, reach[:-1]]
        before[heads] = 0
        covered = np.maximum(0, end - np.maximum(first, before))
        covered = np.add.reduceat(covered, heads)
        distinct = _distinct(group * index.size + u) // index.size
        windows_per_pair = np.bincount(distinct, minlength=heads.size)
        pair_record, pair_item = key[heads] // n_items, item[heads]
        pair_share = covered / index.item_units[pair_item]
        np.add.at(records, pair_item, 1)
        described = {}
        for r in _distinct(pair_record).tolist():
            while True:
                entry = next(meta)
                if entry["record"] == r:
                    described[r] = entry
                    break
        better = pair_share > best_share[pair_item]
        for k in np.flatnonzero(better).tolist():
            i = int(pair_item[k])
            if pair_share[k] > best_share[i]:
                best_share[i] = pair_share[k]
                best_record[i] = {k2: v for k2, v in described[int(pair_record[k])].items() if k2 != "record"}
        overlapping = int(_distinct(pair_record).size)
        if on_record is None:
            return overlapping
        bounds = np.flatnonzero(np.r_[True, pair_record[1:] != pair_record[:-1], True])
        matches = index.occurrence_texts(first[heads], length[heads])
        for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
            r = int(pair_record[a])
            result = [Pair(int(pair_item[k]), float(pair_share[k]), int(windows_per_pair[k]), matches[k])
                      for k in range(a, b)]
            on_record({k2: v for k2, v in described[r].items() if k2 != "record"}, result)
        return overlapping


def category(share: float, clean_below: float, dirty_from: float) -> str:
    """clean, partial or dirty (module docstring)."""
    return "clean" if share < clean_below else "dirty" if share >= dirty_from else "partial"


# ---------------------------------------------------------------- contamination lists


def record_digest(content: str | list[dict]) -> str:
    """The identity of a training record in a contamination list: blake2b-128 of its text (a corpus document) or of
    its conversation turns as canonical JSON (an instruction sample, before any system prompt is added)."""
    if not isinstance(content, str):
        content = json.dumps(content, ensure_ascii=False, sort_keys=True, separators=(",", ":"))
    return hashlib.blake2b(content.encode("utf-8"), digest_size=16).hexdigest()


def load_exclusions(path: str | Path) -> frozenset[str]:
    """The record digests of a contamination list (contaminated.jsonl of `yunshan data decontaminate`)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"data.exclude: {path} does not exist (write it with yunshan data decontaminate)")
    digests = set()
    with open(path, encoding="utf-8") as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                entry = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{line_no}: not valid JSON ({err.msg})") from None
            digest = entry.get("digest") if isinstance(entry, dict) else None
            if not isinstance(digest, str) or len(digest) != 32:
                raise ValueError(f"{path}:{line_no}: field 'digest' must be the 32-hex-digit record digest that "
                                 "yunshan data decontaminate writes")
            digests.add(digest)
    return frozenset(digests)


@dataclass
class Exclusions:
    """A contamination list applied while reading: whether a record is one to leave out."""

    digests: frozenset[str] = field(default_factory=frozenset)
    path: str | None = None

    @classmethod
    def load(cls, path: str | None) -> Exclusions:
        return cls(load_exclusions(path), str(path)) if path else cls()

    def excludes(self, content: str | list[dict]) -> bool:
        return bool(self.digests) and record_digest(content) in self.digests


# ---------------------------------------------------------------- training records as texts


def corpus_texts(source, on_bad_record: str, counts: dict) -> Iterator[Text]:
    """The documents of a corpus source (yunshan.data.sources.SourceArgs) as continual pretraining reads them (its
    text field, its filter): tag {"source", "content", "record"}. Bad records raise or are counted by reason."""
    from .sources import source_texts

    for record in source_texts(source, on_bad_record, counts, context=f"source {source.name!r}: ",
                               fix="Fix the record, or pass --on-bad-record skip to count bad records."):
        yield Text(record.location, [record.text], {"source": source.name, "content": record.text,
                                                    "record": record.meta})


def preference_texts(source, on_bad_record: str, counts: dict, seed: int = 0) -> Iterator[Text]:
    """The items of a preference source (yunshan.data.preference.PrefSourceArgs) as `yunshan pref` reads them: every
    pair (a scored record gives the pairs its rule makes with the stage's data.seed) or unpaired sample, one field per
    turn (prompt, chosen and rejected answer); tag {"source", "content": the item's turns, whose digest data.exclude
    matches, "record": the item in TRL's layout, format pairs or kto}."""
    from .preference import Pair, preference_records
    from .records import BadRecord, fail_or_count

    for location, items in preference_records(source, seed):
        if isinstance(items, BadRecord):
            fail_or_count(items, on_bad_record, counts, context=f"preference source {source.name!r}: ", key="bad:{}",
                          fix="Fix the record, or pass --on-bad-record skip to count bad records.")
            continue
        for item in items:
            turns = item.content()
            if isinstance(item, Pair):
                record = {"prompt": item.prompt, "chosen": [{"role": "assistant", "content": item.chosen}],
                          "rejected": [{"role": "assistant", "content": item.rejected}]}
            else:
                record = {"prompt": item.prompt, "completion": [{"role": "assistant", "content": item.completion}],
                          "label": item.label}
            yield Text(location, [t["content"] for t in turns], {"source": source.name, "content": turns,
                                                                 "record": record})


def conversation_texts(source, on_bad_record: str, counts: dict) -> Iterator[Text]:
    """The samples of an instruction source (yunshan.data.conversations.SftSourceArgs) as SFT reads them: one field
    per turn; tag {"source", "content": the turns, "record": {"messages": turns}}."""
    from .conversations import sft_records
    from .records import BadRecord, fail_or_count

    for location, turns in sft_records(source):
        if isinstance(turns, BadRecord):
            fail_or_count(turns, on_bad_record, counts, context=f"sft source {source.name!r}: ", key="bad:{}",
                          fix="Fix the record, or pass --on-bad-record skip to count bad records.")
            continue
        yield Text(location, [t["content"] for t in turns], {"source": source.name, "content": turns,
                                                             "record": {"messages": turns}})
