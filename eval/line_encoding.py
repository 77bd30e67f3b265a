"""Exact tokenisation of many prompts that share lines: every distinct line is encoded once.

    from yunshan.eval.line_encoding import encode_texts
    ids = encode_texts(tokenizer, prompts)   # == [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]

A 5-shot prompt repeats its header and solved examples in every question of a subject, and lm-eval's rule encodes
each context twice more with each option appended: most of the characters a multiple-choice run tokenises are
lines it has tokenised before. For the tokenizers where it is provably exact, this module cuts every text after
each newline that is followed by a letter, digit, punctuation mark or symbol, encodes each distinct piece once and
concatenates the pieces' ids. Anything else gets the tokenizer's ordinary call.

Why the cut is exact, for the pre-tokenizers accepted below (byte-level BPE with GPT-2's regex, or a Split with
the LLaMA-3, Qwen2 or Qwen3.5 regex followed by a regex-free ByteLevel; no normaliser or a Unicode normal form):
1. The regexes have no look-behind and no anchors, so the pieces of a text from a piece boundary on are the pieces
   of the rest of the text on its own; BPE then works on each piece independently (no dropout).
2. Position i with text[i-1] = "\\n" and text[i] a letter, digit, punctuation mark or symbol (never white space) is
   a piece boundary in every text: the only alternatives of these regexes that can match a newline are white-space
   runs, `[\\r\\n]*` tails of punctuation runs and `\\s*[\\r\\n]+`, none of which can continue into a non-space
   character; and no alternative started before i reads further than text[i] (each stops at the first character
   outside its class, and the one look-ahead, `(?!\\S)`, reads one character).
   So the tokens of text[:i] are those of text[:i] + text[i] without the tokens of text[i] alone (the last piece),
   which is how each line is encoded here, and the tokens of the whole text are the lines' tokens in order.
3. A newline is a stable character of every Unicode normal form: normalising at most moves marks onto a starter,
   and neither a newline nor a following starter that is not a combining mark takes part in that, so normalising
   the text equals normalising its lines (the first character after the cut must normalise to an allowed one).
4. Added (special) tokens are cut out before all this; a cut is skipped when any added token's text occurs within
   its length of the cut, so they never straddle or start at one; a text whose normal form contains an added
   token's text is encoded whole when that token is matched after normalisation.
Tests compare this against the tokenizer's own call on prompts in every bundled format and on adversarial text.
"""

from __future__ import annotations

import bisect
import json
import re
import unicodedata
from dataclasses import dataclass, field
from itertools import chain

_APOS = "(?i:'s|'t|'re|'ve|'m|'ll|'d)"
SAFE_SPLIT_REGEXES = {
    # LLaMA-3 (tiktoken cl100k's pattern)
    _APOS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    # Qwen2, Qwen2.5, Qwen3
    _APOS + r"|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
    # Qwen3.5
    _APOS + r"|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}| ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+",
}
SAFE_NORMALIZERS = {"NFC", "NFD", "NFKC", "NFKD", "Lowercase"}
_START_CATEGORIES = ("L", "N", "P", "S")  # letters, digits, punctuation, symbols: never white space, never marks


def direct_backend(tokenizer):
    """The Rust tokenizer, set up as `tokenizer(texts, add_special_tokens=False)` would set it before calling its
    `encode_batch`, when that call is all the transformers call does; None for classes that change that path."""
    from transformers.tokenization_utils_base import PaddingStrategy, PreTrainedTokenizerBase, TruncationStrategy
    from transformers.tokenization_utils_tokenizers import TokenizersBackend

    kind = type(tokenizer)
    if not (isinstance(tokenizer, TokenizersBackend) and kind.__call__ is PreTrainedTokenizerBase.__call__
            and kind._encode_plus is TokenizersBackend._encode_plus
            and not hasattr(tokenizer, "_switch_to_input_mode")):
        return None
    tokenizer.set_truncation_and_padding(PaddingStrategy.DO_NOT_PAD, TruncationStrategy.DO_NOT_TRUNCATE,
                                         None, 0, None, None)
    backend = tokenizer.backend_tokenizer
    if backend.encode_special_tokens != tokenizer.split_special_tokens:
        backend.encode_special_tokens = tokenizer.split_special_tokens
    return backend


def encode_batch(tokenizer, texts: list[str]) -> list[list[int]]:
    """`tokenizer(texts, add_special_tokens=False)["input_ids"]`, calling the Rust tokenizer directly when that is
    all the call would do (turning the Rust encodings into a BatchEncoding is about a third of the time for
    600-token prompts)."""
    backend = direct_backend(tokenizer)
    if backend is not None:
        return [e.ids for e in backend.encode_batch_fast(texts, add_special_tokens=False)]
    return tokenizer(texts, add_special_tokens=False)["input_ids"]


def _safe_pre_tokenizer(state: dict | None) -> bool:
    if state is None:
        return False
    if state.get("type") == "ByteLevel":
        return state.get("use_regex", True) and not state.get("add_prefix_space", False)
    if state.get("type") == "Sequence":
        parts = state.get("pretokenizers", [])
        return (len(parts) == 2 and parts[0].get("type") == "Split"
                and parts[0].get("pattern", {}).get("Regex") in SAFE_SPLIT_REGEXES
                and parts[0].get("behavior") == "Isolated" and not parts[0].get("invert", False)
                and parts[1].get("type") == "ByteLevel" and not parts[1].get("use_regex", True)
                and not parts[1].get("add_prefix_space", False))
    return False


def _safe_normalizer(state: dict | None) -> bool:
    if state is None:
        return True
    if state.get("type") == "Sequence":
        return all(_safe_normalizer(s) for s in state.get("normalizers", []))
    return state.get("type") in SAFE_NORMALIZERS


_NEWLINE_THEN_TEXT = re.compile(r"\n(?=\S)")


@dataclass
class LineSplitter:
    """The facts about one tokenizer that decide where a text may be cut (see the module docstring)."""

    normalizer: object | None
    added: re.Pattern | None  # any added token's text
    reach: int  # longest added token text
    normalized_added: bool  # some added token is matched in the normalised text
    _starts: dict = field(default_factory=dict, repr=False)  # character -> may a line start with it

    @classmethod
    def for_tokenizer(cls, tokenizer) -> LineSplitter | None:
        """A splitter when cutting at lines is provably exact for this tokenizer, else None."""
        backend = direct_backend(tokenizer)
        if backend is None:
            return None
        pre = backend.pre_tokenizer
        norm = backend.normalizer
        if not _safe_pre_tokenizer(json.loads(pre.__getstate__()) if pre is not None else None):
            return None
        if not _safe_normalizer(json.loads(norm.__getstate__()) if norm is not None else None):
            return None
        if type(backend.model).__name__ != "BPE" or backend.model.dropout:
            return None
        tokens = [t for t in backend.get_added_tokens_decoder().values() if t.content]
        added = sorted({t.content for t in tokens}, key=len, reverse=True)
        pattern = re.compile("|".join(map(re.escape, added))) if added else None
        return cls(norm, pattern, max(map(len, added), default=0),
                   norm is not None and any(t.normalized for t in tokens))

    def _starts_line(self, char: str) -> bool:
        ok = self._starts.get(char)
        if ok is None:
            first = self.normalizer.normalize_str(char)[:1] if self.normalizer is not None else char
            ok = self._starts[char] = bool(first) and unicodedata.category(first).startswith(_START_CATEGORIES)
        return ok

    def uncut(self, text: str) -> bool:
        """True when the text must be encoded whole: normalising it writes an added token's text (a full-width
        "＜x＞" becomes "<x>" under NFKC), which the raw-text check cannot see."""
        return self.normalized_added and self.added.search(self.normalizer.normalize_str(text)) is not None

    def cuts(self, text: str, start: int = 0) -> list[int]:
        """Positions i (start <= i < len(text), i > 0) where text may be cut: after a newline, before an allowed
        character, and farther than the longest added token from any added token's text."""
        out = [m.end() for m in _NEWLINE_THEN_TEXT.finditer(text, max(0, start - 1))
               if m.end() >= start and self._starts_line(text[m.end()])]
        if self.added is not None and out:
            # finditer skips occurrences that overlap a found one, but those lie within `reach` of it; and an
            # occurrence within reach of a cut >= start begins at or after start - 2 * reach.
            spans = (m.span() for m in self.added.finditer(text, max(0, start - 2 * self.reach - 1)))
            blocked = [(a - self.reach, b + self.reach) for a, b in spans]
            if blocked:
                out = [i for i in out if not any(a <= i <= b for a, b in blocked)]
        return out


def common_prefix_length(a, b) -> int:
    """Length of the common prefix of two strings or lists (binary search on C-speed slice comparisons)."""
    lo, hi = 0, min(len(a), len(b))  # a[:lo] == b[:lo]
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[lo:mid] == b[lo:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def encode_texts(tokenizer, texts: list[str]) -> list[list[int]]:
    """input_ids (no special tokens added) of every text, as `tokenizer(text, add_special_tokens=False)` gives them;
    texts that share lines share their encoding work."""
    splitter = LineSplitter.for_tokenizer(tokenizer) if len(texts) > 1 else None
    if splitter is None:
        return encode_batch(tokenizer, texts)
    # Each text becomes pieces (line, first character of the next line or "" after the last line). In sorted order
    # a text shares its cuts and pieces with the previous text up to shortly before where they differ: only the
    # rest is scanned. Leaving out any valid cut is still exact (fewer, longer pieces).
    order = sorted(range(len(texts)), key=texts.__getitem__)
    pieces_of: list[list[tuple[str, str]]] = [[] for _ in texts]
    shared_pieces = [0] * len(texts)  # leading pieces equal to those of the previous text in `order`
    prev_text, prev_cuts, prev_pieces = "", [], []
    for k in order:
        text = texts[k]
        if splitter.uncut(text):
            j, cuts = 0, []
        else:
            # A cut's validity reads the text up to twice the added tokens' reach past it (an added token starting
            # within reach of the cut, and its length): cuts that far inside the common prefix stay valid.
            keep = common_prefix_length(prev_text, text) - 2 * splitter.reach - 1
            j = bisect.bisect_left(prev_cuts, keep)
            cuts = prev_cuts[:j] + splitter.cuts(text, max(keep, 1))
        bounds = [*cuts[j - 1: j], *cuts[j:], len(text)] if j else [0, *cuts, len(text)]
        pieces = prev_pieces[:j] + [(text[a:b], text[b] if b < len(text) else "") for a, b in zip(bounds, bounds[1:])]
        pieces_of[k], shared_pieces[k] = pieces, j
        prev_text, prev_cuts, prev_pieces = text, cuts, pieces
    distinct = list(dict.fromkeys(p for k in order for p in pieces_of[k][shared_pieces[k]:]))
    nexts = list(dict.fromkeys(n for _, n in distinct if n))
    encoded = encode_batch(tokenizer, [line + n for line, n in distinct] + nexts)
    next_ids = dict(zip(nexts, encoded[len(distinct):]))
    ids, broken = {}, set()
    for (line, n), toks in zip(distinct, encoded):
        tail = next_ids[n] if n else []
        if toks[len(toks) - len(tail):] != tail:  # cannot happen for the accepted tokenizers (docstring, point 2)
            broken.add((line, n))
        ids[(line, n)] = toks[: len(toks) - len(tail)]
    out: list[list[int]] = [[] for _ in texts]
    prev_ids, prev_ends = [], [0]  # prev_ends[m]: tokens in the previous text's first m pieces
    for k in order:  # reuse the previous text's ids for the shared leading pieces
        j = shared_pieces[k]
        rest = [ids[p] for p in pieces_of[k][j:]]
        out[k] = prev_ids[: prev_ends[j]] + list(chain.from_iterable(rest))
        ends = prev_ends[: j + 1]
        for toks in rest:
            ends.append(ends[-1] + len(toks))
        prev_ids, prev_ends = out[k], ends
    redo = [k for k, ps in enumerate(pieces_of) if broken.intersection(ps)]
    for k, toks in zip(redo, encode_batch(tokenizer, [texts[k] for k in redo]) if redo else []):
        out[k] = toks
    return out
