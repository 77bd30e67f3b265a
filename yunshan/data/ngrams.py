"""Text as units and n-gram windows, vectorised with numpy: what decontamination compares
(yunshan/data/decontamination.py).

    from yunshan.data.ngrams import Windows, UnitTables, cut_units, windows
    tables = UnitTables()
    units = cut_units(tables, ["第１２条，Hello　WORLD！"])      # units 第 12 条 hello world
    w = windows(tables, units, n=13, cjk_n=25)                 # every complete window: first unit, length, hash

Normalisation. Both sides of a comparison are read in the same form: Unicode NFKC then case folding (full-width
letters, digits and punctuation become ASCII, `①` is `1`, `Law` is `law`). The form is exactly
`unicodedata.normalize("NFKC", text).casefold()`, computed as a lookup per code point: each code point's own
normalised form is learned the first time it is met (one Python call per distinct code point, a few thousand in
Chinese text), then a block of text is normalised by numpy gathers. That is exact because NFKC changes a character
only in the context of the combining marks and Hangul jamo after it (the only characters that compose with a
preceding one: a test checks this against every decomposition Unicode defines); text around those characters, up to
the next CJK ideograph or ASCII punctuation on each side, is normalised by `unicodedata` itself.

Units. Every CJK ideograph, kana and Hangul syllable is a unit on its own; every run of other letters, digits and
combining marks is one unit (an English word, a number such as `2023`; `14.5` is two); everything else
(punctuation, symbols, spaces, line ends) only separates units. So Chinese is compared character by character and
English word by word, and `第１２条，` matches `第12条`. Not folded: simplified against traditional characters,
numbers written in different scripts (`一百` against `100`).

Windows: the n-grams. The method comes from word n-grams (GPT-3 and lm-evaluation-harness: 13 words). A Chinese
character is not a word: jieba, run once on real text (benchmarks/cjk_ngram_length.py), cuts Chinese into words
of 1.85-2.09 characters (CMMLU 1.85, FinEval 1.87, LawBench 1.89, the Civil Code 1.96, the laws corpus 2.09), so
13 words of Chinese are about 25 characters. A window is the shortest run of consecutive units, starting at any
unit, whose length reaches `n` words, where a word unit counts one word and a CJK unit `n / cjk_n` of one (with
the defaults: 13 words, 25 CJK characters, or a mix, such as 20 characters and 3 numbers). Windows never cross a
text field; a field shorter than one window has none. Each window is hashed (a 64-bit polynomial over its units'
codes, computed from prefix sums, so every window of a block costs a few numpy operations whatever its length) and
a hash match is confirmed unit by unit (CJK units by code point, word units by a 64-bit code of their letters).

Written by hand: datatrove's and lm-evaluation-harness's n-gram decontamination cut whitespace words; neither reads
Chinese as characters, calibrates the n-gram length across scripts, or runs at corpus speed in numpy.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

import numpy as np

# Unit classes of a (normalised) code point: separator (dropped), a unit on its own (CJK), part of a word.
SEPARATOR, CJK, WORD = 0, 1, 2
_CJK_RANGES = ((0x3005, 0x3007), (0x3040, 0x30FF), (0x31F0, 0x31FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF),
               (0xAC00, 0xD7AF), (0xF900, 0xFAFF), (0x20000, 0x323AF))
# Combining marks (every character with a non-zero combining class is one) and the Hangul jamo are the only
# characters that compose with the character before them (tests/data/test_decontamination.py checks it against
# every canonical decomposition); around them NFKC needs the context.
_HANGUL_JAMO = (0x1100, 0x11FF)
# A cut before one of these never changes normalisation or units: a CJK ideograph (a unit of its own, never composed)
# or ASCII punctuation/space (a separator, never composed).
_SAFE_CUT = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\x00-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f]")
_SIZE = 0x110000

DEFAULT_N = 13  # words, as GPT-3 and lm-evaluation-harness
DEFAULT_CJK_N = 25  # CJK characters in a window: 13 words x 1.9 characters per word (module docstring)

# Multipliers (odd 64-bit constants; arithmetic is modulo 2**64, so an odd multiplier has an inverse).
_WORD_BASE = np.uint64(0x100000001B3)
_NGRAM_BASE = 0x9E3779B97F4A7C15
_NGRAM_INVERSE = pow(_NGRAM_BASE, -1, 1 << 64)
_SECOND_BASE = 0xD6E8FEB86659FD93  # the second, independent hash of an evaluation window
_SECOND_INVERSE = pow(_SECOND_BASE, -1, 1 << 64)
_WORD_TAG = np.uint64(1 << 63)


def normalize(text: str) -> str:
    """The form both sides are compared in: NFKC, then case folding (the module docstring says why this order)."""
    return unicodedata.normalize("NFKC", text).casefold()


def _class_of(ch: str) -> int:
    if ch.isalnum() or unicodedata.category(ch).startswith("M"):
        cp = ord(ch)
        return CJK if any(lo <= cp <= hi for lo, hi in _CJK_RANGES) else WORD
    return SEPARATOR


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: spreads unit codes over all 64 bits before they enter the window hash."""
    with np.errstate(over="ignore"):
        x = x + np.uint64(0x9E3779B97F4A7C15)
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


class UnitTables:
    """Per code point: its normalised form and whether that needs context, and the unit class of a normalised code
    point; learned the first time each code point is met. One per run (the index owns it), never module state."""

    def __init__(self):
        self.known = np.zeros(_SIZE, dtype=bool)  # raw code point learned
        self.length = np.zeros(_SIZE, dtype=np.int32)  # code points of its normalised form
        self.single = np.zeros(_SIZE, dtype=np.uint32)  # its normalised form when that is one code point
        self.start = np.zeros(_SIZE, dtype=np.int64)  # where its normalised form starts in self.forms
        self.context = np.zeros(_SIZE, dtype=bool)  # its normalisation depends on its neighbours
        self.simple = np.zeros(_SIZE, dtype=bool)  # learned, one code point, no context: the fast path
        self.class_known = np.zeros(_SIZE, dtype=bool)
        self.classes = np.zeros(_SIZE, dtype=np.uint8)
        self.forms = np.zeros(0, dtype=np.uint32)
        self._powers: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def learn(self, cps: np.ndarray) -> None:
        new = cps[~self.known[cps]]
        if new.size == 0:
            return
        forms = []
        at = self.forms.size
        for cp in set(new.tolist()):
            form = normalize(chr(cp))
            form_cps = [ord(c) for c in form]
            self.known[cp] = True
            self.length[cp] = len(form_cps)
            self.single[cp] = form_cps[0]
            self.start[cp] = at
            at += len(form_cps)
            forms += form_cps
            self.context[cp] = any(unicodedata.category(c).startswith("M") or
                                   _HANGUL_JAMO[0] <= ord(c) <= _HANGUL_JAMO[1] for c in chr(cp) + form)
            self.simple[cp] = len(form_cps) == 1 and not self.context[cp]
        self.forms = np.concatenate([self.forms, np.array(forms, dtype=np.uint32)])
        self.learn_classes(np.array(forms, dtype=np.uint32))

    def learn_classes(self, cps: np.ndarray) -> None:
        new = cps[~self.class_known[cps]]
        for cp in set(new.tolist()):
            self.classes[cp] = _class_of(chr(cp))
            self.class_known[cp] = True

    def powers(self, size: int, base: int = _NGRAM_BASE) -> tuple[np.ndarray, np.ndarray]:
        """(base**k, base**-k) for k < size, modulo 2**64: the prefix-sum window hash's weights."""
        have = self._powers.get(base)
        if have is None or have[0].size < size:
            size = max(size, (have[0].size * 5 // 4) if have else 0)
            inverse = pow(base, -1, 1 << 64)
            self._powers[base] = tuple(
                np.cumprod(np.r_[np.uint64(1), np.full(size - 1, b, dtype=np.uint64)], dtype=np.uint64)
                for b in (base, inverse))
        return self._powers[base]

    def normalize_block(self, cps: np.ndarray, segment_starts: np.ndarray | None = None
                        ) -> tuple[np.ndarray, np.ndarray | None]:
        """(normalised code points, the raw index each comes from; None when they are one to one). A stretch
        normalised by unicodedata maps whole to its first raw index, which never lies before its segment's start."""
        if self.simple[cps].all():  # every code point learned, none expands or needs context
            return self.single[cps], None
        self.learn(cps)
        lengths = self.length[cps]
        context = np.flatnonzero(self.context[cps])
        if context.size == 0 and not (lengths != 1).any():
            return self.single[cps], None
        base = self.start[cps]
        forms = self.forms
        if context.size:  # normalise each stretch between safe cuts around these characters with unicodedata
            safe = np.flatnonzero(_safe_mask(cps))
            after = np.searchsorted(safe, context, side="right")
            padded = np.r_[0, safe, cps.size]  # the ends of the block are safe cuts too
            first, end = padded[after], padded[after + 1]
            if segment_starts is not None:
                first = np.maximum(first, segment_starts[np.searchsorted(segment_starts, context, side="right") - 1])
            first, keep = np.unique(first, return_index=True)
            end = end[keep]
            extra, at = [], forms.size
            lengths = lengths.copy()
            for s, e in zip(first.tolist(), end.tolist()):
                text = cps[s:e].tobytes().decode("utf-32-le", "surrogatepass")
                form = np.frombuffer(normalize(text).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
                lengths[s:e] = 0
                lengths[s] = form.size
                base[s] = at
                at += form.size
                extra.append(form)
            extra = np.concatenate(extra)
            self.learn_classes(extra)
            forms = np.concatenate([forms, extra])
        src = np.repeat(np.arange(cps.size), lengths)
        offset = np.arange(src.size) - (np.cumsum(lengths) - lengths)[src]
        return forms[base[src] + offset], src


def _safe_mask(cps: np.ndarray) -> np.ndarray:
    ascii_punct = (cps < 0x80) & ~(((cps >= 0x30) & (cps <= 0x39)) | ((cps >= 0x41) & (cps <= 0x5A)) |
                                   ((cps >= 0x61) & (cps <= 0x7A)))
    return ascii_punct | ((cps >= 0x4E00) & (cps <= 0x9FFF)) | ((cps >= 0x3400) & (cps <= 0x4DBF))


def safe_cut(text: str, at: int, reach: int = 1 << 16) -> int:
    """A position at or after `at` where `text` can be cut without changing its normalisation or units (before a
    CJK ideograph or ASCII punctuation or space); `at` itself when there is none within `reach` characters (a run
    of that many letters with no space: the cut may then split one word). The end of the text is a safe cut."""
    end = min(len(text), at + reach)
    m = _SAFE_CUT.search(text, at, end)
    return m.start() if m else len(text) if end == len(text) else at


def last_safe_cut(text: str, at: int, reach: int = 1 << 16) -> int:
    """The last safe cut (safe_cut) at or before `at`; the start of the text is one; `at` itself when there is none
    within `reach`."""
    lo = max(0, at - reach)
    hi, step = min(at, len(text) - 1) + 1, 64
    while hi > lo:  # backwards, in growing steps: in real text the last safe cut is a few characters back
        start = max(lo, hi - step)
        m = _SAFE_CUT.search(text[start:hi][::-1])  # one character per match, so the reversed text finds it
        if m:
            return hi - 1 - m.start()
        hi, step = start, step * 4
    return 0 if lo == 0 else at


@dataclass
class Units:
    """The units of a block of texts ("segments"): a raw 64-bit code each (CJK: the code point; a word: a code of its
    letters, top bit set), its mixed code (what the window hash uses), where it starts and ends in the normalised
    block, the raw index of its first code point, the segment it belongs to and whether it is a word."""

    codes: np.ndarray
    mixed: np.ndarray
    starts: np.ndarray
    ends: np.ndarray
    raw_starts: np.ndarray
    segments: np.ndarray
    words: np.ndarray
    normalized: np.ndarray  # the normalised code points of the block
    segment_starts: np.ndarray  # raw index of each segment's first character in the block

    def __len__(self) -> int:
        return int(self.codes.size)

    def text(self, first: int, count: int) -> list[str]:
        """The normalised texts of units first..first+count-1."""
        if count <= 0:
            return []
        lo, hi = int(self.starts[first]), int(self.ends[first + count - 1])
        text = self.normalized[lo:hi].tobytes().decode("utf-32-le", "surrogatepass")
        return [text[s - lo: e - lo] for s, e in zip(self.starts[first: first + count].tolist(),
                                                     self.ends[first: first + count].tolist())]


def cut_units(tables: UnitTables, segments: list[str]) -> Units:
    """The units of every segment (a text field, or a piece of one), in order; segments never share a unit."""
    lengths = np.fromiter((len(s) for s in segments), dtype=np.int64, count=len(segments))
    segment_starts = np.cumsum(lengths + 1) - lengths - 1
    cps = np.frombuffer("\x00".join(segments).encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
    norm, src = tables.normalize_block(cps, segment_starts)
    cls = tables.classes[norm]
    is_word = cls == WORD
    before = np.r_[False, is_word[:-1]]
    starts = np.flatnonzero((cls == CJK) | (is_word & ~before))
    word_start = is_word[starts]
    codes = norm[starts].astype(np.uint64)
    ends = starts + 1
    if word_start.any():
        after = np.r_[is_word[1:], False]
        word_starts = starts[word_start]
        word_ends = np.flatnonzero(is_word & ~after) + 1
        inside = np.flatnonzero(is_word)
        run = np.searchsorted(word_starts, inside, side="right") - 1
        offset = inside - word_starts[run]
        powers = np.cumprod(np.r_[np.uint64(1), np.full(int(offset.max()), _WORD_BASE, dtype=np.uint64)],
                            dtype=np.uint64)
        with np.errstate(over="ignore"):
            terms = norm[inside].astype(np.uint64) * powers[offset]
        codes[word_start] = np.add.reduceat(terms, np.searchsorted(inside, word_starts)) | _WORD_TAG
        ends[word_start] = word_ends
    raw_starts = starts if src is None else src[starts]
    marks = np.zeros(cps.size + 1, dtype=np.int32)
    marks[segment_starts[1:]] = 1
    segments_of = np.cumsum(marks)[raw_starts] if raw_starts.size else raw_starts
    return Units(codes, _mix(codes), starts, ends, raw_starts, segments_of, word_start, norm, segment_starts)


@dataclass
class Windows:
    """The complete windows of a block: first unit, length in units, hash; and per unit where its window ends
    (exclusive; beyond the block or its segment when incomplete)."""

    first: np.ndarray
    length: np.ndarray
    hashes: np.ndarray
    ends: np.ndarray
    second: np.ndarray | None = None  # an independent hash (evaluation windows: tells distinct windows apart)


def _window_hash(tables: UnitTables, codes: np.ndarray, first: np.ndarray, last: np.ndarray,
                 base: int) -> np.ndarray:
    """sum(codes[k] * base**(last-1-k) for first <= k < last) mod 2**64 for every window, from prefix sums."""
    powers, inverse = tables.powers(codes.size + 1, base)
    prefix = np.r_[np.uint64(0), np.cumsum(codes * inverse[:codes.size], dtype=np.uint64)]
    return powers[last - 1] * (prefix[last] - prefix[first])


def windows(tables: UnitTables, units: Units, n: int, cjk_n: int, second: bool = False) -> Windows:
    """Every window (module docstring) that lies whole inside one segment; `second`: its second hash too."""
    count = len(units)
    if count == 0:
        empty = np.zeros(0, dtype=np.int64)
        return Windows(empty, empty, np.zeros(0, dtype=np.uint64), empty, np.zeros(0, dtype=np.uint64))
    i = np.arange(count)
    length = np.full(count, cjk_n, dtype=np.int64)
    if units.words.any():  # windows holding a word are shorter in units: the first end whose weight reaches n*cjk_n
        words = np.r_[0, np.cumsum(units.words)]
        has_word = words[np.minimum(i + cjk_n, count)] - words[i] > 0
        k = np.flatnonzero(has_word)
        weight = np.r_[0, np.cumsum(np.where(units.words, cjk_n, n))]
        length[k] = np.searchsorted(weight, weight[k] + n * cjk_n, side="left") - k
    ends = i + length
    inside = (ends <= count) & (units.segments == units.segments[np.minimum(ends, count) - 1])
    first = np.flatnonzero(inside)
    length = length[first]
    last = first + length
    hashes = _window_hash(tables, units.mixed, first, last, _NGRAM_BASE)
    extra = _window_hash(tables, units.codes, first, last, _SECOND_BASE) if second else None
    return Windows(first, length, hashes, ends, extra)


def show_units(units: list[str], tables: UnitTables) -> str:
    """Units as readable text: CJK units joined directly, a space between two words."""
    out, last_word = "", False
    for u in units:
        word = tables.classes[ord(u[0])] == WORD
        out += (" " if word and last_word else "") + u
        last_word = word
    return out
