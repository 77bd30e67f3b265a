"""Decontamination: n-gram overlap between training records and evaluation items, Chinese-aware and streaming.

    yunshan data decontaminate corpus.jsonl sft.jsonl --tasks fineval=/data/FinEval lawbench=/data/LawBench \\
        --out runs/decontamination       # the command (yunshan/data_commands.py over yunshan/eval/decontamination.py)

    from yunshan.data.decontamination import NgramIndex, find_overlaps, Text
    index = NgramIndex.build([Text("eval.csv:2", ["题目……"])], n=13)
    for record, overlaps in find_overlaps(training_texts, index): ...

What two texts must share to overlap. Both sides are normalised the same way before they are cut into units:

1. Unicode NFKC: full-width letters, digits and punctuation become their ASCII forms (`ＡＢＣ１２３` is `ABC123`,
   `，` is `,`), compatibility characters fold (`①` is `1`, ligatures split);
2. case folding (`Law` and `LAW` are the same word);
3. units: every CJK ideograph, kana and Hangul syllable is one unit on its own, and every run of other letters,
   digits and combining marks is one unit (an English word, a number such as `2023` or `14.5` split at the dot);
   everything else (punctuation, symbols, spaces, line ends) only separates units and is dropped.

So Chinese is compared character by character and English word by word (a whitespace split would make a whole
Chinese sentence one "word"; a character split would make 13 letters of English match everywhere), and
`第１２条，` matches `第12条`. Not folded: simplified against traditional characters, and numbers written in
different scripts (`一百` against `100`).

An n-gram is n consecutive units of one text field (a corpus document, one turn of a conversation, a question
or one option); n-grams never cross fields or records. A training record overlaps an evaluation item when they
share at least `min_ngrams` distinct n-grams (default 1: any shared n-gram, as the GPT-3 paper's and
lm-evaluation-harness's decontamination count it). Fields of fewer than n units have no n-gram, so an evaluation
item whose every field is that short cannot be checked: `NgramIndex.unchecked` lists them (reported, never
dropped silently). Every hash match is confirmed unit by unit, so a 64-bit hash collision never counts.

Speed and memory: training texts are processed in blocks of about a million characters with numpy (code points ->
unit codes -> rolling 64-bit n-gram hashes -> lookup in the sorted hashes of the evaluation n-grams), so memory
holds the evaluation index (about 18 bytes per evaluation n-gram) and one block, whatever the size of the training
data (benchmarks/decontamination.py measures it).

The digest of a training record (`record_digest`: its text, or its conversation turns) is what a contamination list
names, so `yunshan cpt` / `yunshan sft` (`data.exclude`) leave exactly those records out, whatever path spelling
or line the record is read at.

Written by hand: datatrove's NGramsDecontFilter and lm-evaluation-harness's decontamination cut whitespace words
and read their own task definitions; neither compares Chinese by character, reads the local C-Eval, CMMLU,
LawBench or JEC-QA layouts, or says at which line of which file each side of a hit is.
"""

from __future__ import annotations

import functools
import hashlib
import json
import unicodedata
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

# Unit classes of a code point: separator (dropped), a unit on its own (CJK), part of a word.
SEPARATOR, CJK, WORD = 0, 1, 2
_CJK_RANGES = ((0x3005, 0x3007), (0x3040, 0x30FF), (0x31F0, 0x31FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF),
               (0xAC00, 0xD7AF), (0xF900, 0xFAFF), (0x20000, 0x323AF))
# Multipliers of the rolling hashes (odd 64-bit constants; arithmetic is modulo 2**64).
_WORD_BASE = np.uint64(0x100000001B3)
_NGRAM_BASE = np.uint64(0x9E3779B97F4A7C15)
_WORD_TAG = np.uint64(1 << 63)
DEFAULT_BLOCK_CHARS = 1 << 20


@functools.lru_cache(maxsize=1)
def unit_classes() -> np.ndarray:
    """The class (SEPARATOR, CJK, WORD) of every code point, built once (about half a second)."""
    table = np.zeros(0x110000, dtype=np.uint8)
    for cp in range(0x110000):
        ch = chr(cp)
        if ch.isalnum() or unicodedata.category(ch).startswith("M"):
            table[cp] = WORD
    for lo, hi in _CJK_RANGES:
        block = table[lo: hi + 1]
        block[block == WORD] = CJK
    return table


def normalize(text: str) -> str:
    """NFKC then case folding: the form both sides are compared in (the module docstring has the rules)."""
    return unicodedata.normalize("NFKC", text).casefold()


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: spreads unit codes over all 64 bits before they enter the n-gram hash."""
    x = x + np.uint64(0x9E3779B97F4A7C15)
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


@dataclass
class Units:
    """The units of a block of normalised text: a 64-bit code each, where it starts and ends (code point offsets
    in the block) and the field it belongs to."""

    codes: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    fields: np.ndarray


def cut_units(fields: list[str]) -> tuple[str, Units]:
    """(the fields joined by NUL, their units). Fields must already be normalised."""
    text = "\x00".join(fields)
    cps = np.frombuffer(text.encode("utf-32-le"), dtype=np.uint32)
    if cps.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return text, Units(np.zeros(0, dtype=np.uint64), empty, empty, empty)
    cls = unit_classes()[cps]
    is_word = cls == WORD
    before = np.concatenate(([False], is_word[:-1]))
    after = np.concatenate((is_word[1:], [False]))
    word_starts = np.flatnonzero(is_word & ~before)
    word_ends = np.flatnonzero(is_word & ~after) + 1
    codes = np.zeros(cps.size, dtype=np.uint64)
    ends = np.zeros(cps.size, dtype=np.int64)
    cjk = np.flatnonzero(cls == CJK)
    codes[cjk] = cps[cjk].astype(np.uint64)
    ends[cjk] = cjk + 1
    if word_starts.size:
        inside = np.flatnonzero(is_word)
        run = np.searchsorted(word_starts, inside, side="right") - 1
        offset = inside - word_starts[run]
        powers = np.cumprod(np.full(int(offset.max()) + 1, _WORD_BASE, dtype=np.uint64))
        with np.errstate(over="ignore"):
            terms = cps[inside].astype(np.uint64) * powers[offset]
        codes[word_starts] = np.add.reduceat(terms, np.searchsorted(inside, word_starts)) | _WORD_TAG
        ends[word_starts] = word_ends
    starts = np.flatnonzero((cls == CJK) | (is_word & ~before))
    lengths = np.array([len(f) for f in fields], dtype=np.int64)
    field_of = np.searchsorted(np.cumsum(lengths + 1), starts, side="right")
    with np.errstate(over="ignore"):
        mixed = _mix(codes[starts])
    return text, Units(mixed, starts, ends[starts], field_of)


def ngram_hashes(units: Units, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(hash of every n-gram starting at each unit, whether it lies inside one field)."""
    count = units.codes.size - n + 1
    if count <= 0:
        return np.zeros(0, dtype=np.uint64), np.zeros(0, dtype=bool)
    h = np.zeros(count, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for j in range(n):
            h = h * _NGRAM_BASE + units.codes[j: j + count]
    return h, units.fields[:count] == units.fields[n - 1:]


def unit_texts(text: str, units: Units, first: int, n: int) -> list[str]:
    return [text[s:e] for s, e in zip(units.starts[first: first + n].tolist(), units.ends[first: first + n].tolist())]


def show_units(units: list[str]) -> str:
    """Units as readable text: CJK units joined directly, a space between two words."""
    classes = unit_classes()
    out, last_word = "", False
    for u in units:
        word = classes[ord(u[0])] == WORD
        out += (" " if word and last_word else "") + u
        last_word = word
    return out


@dataclass
class Text:
    """One evaluation item or training record to compare: where it is, its text fields and the caller's data."""

    location: str  # "file:line" (or the reader's location: "file: record N", "dataset[split] #i")
    fields: list[str]
    tag: Any = None


@dataclass
class Overlap:
    """An evaluation item a training record shares n-grams with."""

    item: Text
    ngrams: int  # distinct shared n-grams
    match: str  # the first shared n-gram, normalised (module docstring)


class NgramIndex:
    """The n-grams of every evaluation item, as sorted 64-bit hashes pointing at (item, field, first unit)."""

    def __init__(self, n: int, items: list[Text], normalized: list[list[str]], hashes: np.ndarray,
                 entries: np.ndarray, unchecked: list[int], ngrams_by_item: np.ndarray):
        self.n = n
        self.items = items
        self.normalized = normalized
        self.hashes = hashes  # sorted
        self.entries = entries  # (item, field, first unit) per hash, int32
        self.unchecked = unchecked  # items without any n-gram (every field shorter than n units)
        self.ngrams_by_item = ngrams_by_item
        self._units: dict[tuple[int, int], list[str]] = {}

    @classmethod
    def build(cls, items: Iterable[Text], n: int = 13) -> NgramIndex:
        if n < 1:
            raise ValueError(f"n must be at least 1, got {n}")
        items = list(items)
        normalized = [[normalize(f) for f in item.fields] for item in items]
        flat = [f for fields in normalized for f in fields]
        owner = np.array([(i, j) for i, fields in enumerate(normalized) for j in range(len(fields))],
                         dtype=np.int32).reshape(-1, 2)
        _, units = cut_units(flat)
        hashes, inside = ngram_hashes(units, n)
        keep = np.flatnonzero(inside)
        field_ids = units.fields[keep]
        field_first = np.searchsorted(units.fields, np.arange(len(flat)))  # first unit of every field
        entries = np.stack([owner[field_ids, 0], owner[field_ids, 1], keep - field_first[field_ids]], axis=1)
        order = np.argsort(hashes[keep], kind="stable")
        counts = np.bincount(owner[field_ids, 0], minlength=len(items)) if len(items) else np.zeros(0, np.int64)
        unchecked = np.flatnonzero(counts == 0).tolist()
        return cls(n, items, normalized, hashes[keep][order], entries[order].astype(np.int32), unchecked, counts)

    def __len__(self) -> int:
        return int(self.hashes.size)

    def item_units(self, item: int, field_no: int) -> list[str]:
        key = (item, field_no)
        if key not in self._units:
            text, units = cut_units([self.normalized[item][field_no]])
            self._units[key] = unit_texts(text, units, 0, units.codes.size)
        return self._units[key]


def find_overlaps(records: Iterable[Text], index: NgramIndex, min_ngrams: int = 1,
                  block_chars: int = DEFAULT_BLOCK_CHARS) -> Iterator[tuple[Text, list[Overlap]]]:
    """Every training record, in order, with the evaluation items it overlaps (an empty list for a clean one).

    Records are read lazily and processed in blocks of about `block_chars` characters, so memory stays flat."""
    block: list[Text] = []
    size = 0
    for record in records:
        block.append(record)
        size += sum(len(f) for f in record.fields)
        if size >= block_chars:
            yield from _scan_block(block, index, min_ngrams)
            block, size = [], 0
    if block:
        yield from _scan_block(block, index, min_ngrams)


def _scan_block(block: list[Text], index: NgramIndex, min_ngrams: int) -> Iterator[tuple[Text, list[Overlap]]]:
    n = index.n
    fields = [normalize(f) for record in block for f in record.fields]
    record_of_field = np.repeat(np.arange(len(block)), [len(r.fields) for r in block])
    found: dict[int, list[Overlap]] = {}
    if fields and len(index):
        text, units = cut_units(fields)
        hashes, inside = ngram_hashes(units, n)
        if hashes.size:
            at = np.searchsorted(index.hashes, hashes)
            grams = np.flatnonzero(inside & (index.hashes[np.minimum(at, len(index) - 1)] == hashes))
            found = _overlaps(index, text, units, hashes, at, grams, record_of_field[units.fields[grams]], min_ngrams)
    for r, record in enumerate(block):
        yield record, found.get(r, [])


def _overlaps(index: NgramIndex, text: str, units: Units, hashes: np.ndarray, at: np.ndarray, grams: np.ndarray,
              records: np.ndarray, min_ngrams: int) -> dict[int, list[Overlap]]:
    """Record -> its overlaps, from the training n-grams whose hash is in the index (`grams`, with their records)."""
    if grams.size == 0:
        return {}
    n = index.n
    # Every (training n-gram, index entry) pair with the same hash, in numpy: a boilerplate n-gram shared by
    # hundreds of items and records costs no Python loop.
    counts = np.searchsorted(index.hashes, hashes[grams], side="right") - at[grams]
    gram = np.repeat(grams, counts)
    entry = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts) + np.repeat(at[grams], counts)
    record = np.repeat(records, counts)
    item = index.entries[entry, 0].astype(np.int64)
    # Distinct n-grams per (record, item) pair: sorted by pair then hash, a new hash within a pair is a new n-gram.
    pair = record * len(index.items) + item
    shared_hash = hashes[gram]
    order = np.lexsort((shared_hash, pair))
    new_pair = np.r_[True, pair[order][1:] != pair[order][:-1]]
    new_gram = new_pair | np.r_[True, shared_hash[order][1:] != shared_hash[order][:-1]]
    shared = np.add.reduceat(new_gram.astype(np.int64), np.flatnonzero(new_pair))
    # The first n-gram (in the record) of each pair is the one shown, once confirmed unit by unit.
    order = np.lexsort((gram, pair))
    firsts = order[np.flatnonzero(np.r_[True, pair[order][1:] != pair[order][:-1]])]
    pairs = np.stack([record[firsts], item[firsts]], axis=1)
    found: dict[int, list[Overlap]] = {}
    for (r, i), k, f in zip(pairs.tolist(), shared.tolist(), firsts.tolist()):
        if k < min_ngrams:
            continue
        shown = _confirmed(index, text, units, gram, entry, record, item, f, r, i)
        if shown is None:
            continue  # every n-gram of the pair was a hash collision
        found.setdefault(r, []).append(Overlap(index.items[i], k, shown))
    return found


def _confirmed(index: NgramIndex, text: str, units: Units, gram, entry, record, item, first: int, r: int,
               i: int) -> str | None:
    """The first n-gram of a (record, item) pair that really is shared (its units equal), shown as text; None when
    every candidate was a 64-bit hash collision (never seen in practice; handled for exactness)."""
    shown = _shared(index, text, units, int(gram[first]), int(entry[first]), i)
    if shown is not None:
        return shown
    for c in np.flatnonzero((record == r) & (item == i)).tolist():
        shown = _shared(index, text, units, int(gram[c]), int(entry[c]), i)
        if shown is not None:
            return shown
    return None


def _shared(index: NgramIndex, text: str, units: Units, gram: int, entry: int, item: int) -> str | None:
    here = unit_texts(text, units, gram, index.n)
    _, field_no, start = index.entries[entry].tolist()
    return show_units(here) if index.item_units(item, field_no)[start: start + index.n] == here else None


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
