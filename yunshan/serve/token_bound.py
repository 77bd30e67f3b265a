"""The fewest tokens a text can encode to, known before encoding it: how `yunshan serve` refuses a prompt far over
the context at once, where tokenising it would take seconds and gigabytes (a 5 MB prompt: 11.7 s).

    bound = TokenBound.of(tokenizer)     # once, when the model is loaded
    bound.least(text)                    # the text encodes to at least this many tokens (0: no bound known)

Why it holds. A BPE model writes a token as the characters it covers (byte-level BPE: one alphabet character per
byte, so a token covers at most as many characters as it has bytes; a byte-fallback token covers one byte of one
character), and it covers every character it is given. So no token covers more characters than its vocabulary
entry is long, and a text of C characters takes at least C / L tokens, L the longest entry (added tokens included:
the template's special tokens are matched in the text as single tokens). That needs the text the model sees to be
no shorter than the text sent, and no character to be dropped or fused with others into one token. Each piece of
the tokenizer's JSON is checked for that:
- normalizers: NFD, NFKD, Lowercase, Prepend and ByteLevel never shorten a text. NFC and NFKC shorten it at most
  MAX_DECOMPOSITION times: every character they write stands for its canonical decomposition (at most 4 code points,
  Unicode's limit, checked over all of Unicode in the tests), and their input decomposes to no fewer code points
  than it has. A Replace of a literal string by a shorter one shortens by that ratio. Anything else (Strip,
  StripAccents, a regular-expression Replace, BertNormalizer, SentencePiece's Precompiled, which can fold
  whitespace) gives no bound.
- pre-tokenizers must keep every character: ByteLevel, Metaspace, Digits, UnicodeScripts, Split and Punctuation
  except with the "Removed" behaviour. Whitespace, WhitespaceSplit, BertPreTokenizer and CharDelimiterSplit drop
  characters: no bound.
- the model: BPE, where a character outside the vocabulary is impossible (byte_fallback with its 256 byte tokens)
  or becomes one unknown token of its own (unk_token without fuse_unk). A byte-level BPE without an unknown token
  drops the bytes its vocabulary lacks: SmolLM2's has no token for the control characters \x04, \x06, \x13, \x14,
  \x16 and \x1d, so a million of them encode to no token at all. Those characters are not counted; a non-ASCII
  character always keeps a byte unless the vocabulary lacks both lead and continuation bytes (then no bound).
  WordPiece (one [UNK] for a whole long word), Unigram and other BPEs that drop or fuse unknown characters: no
  bound.
- added tokens that swallow the whitespace beside them (lstrip / rstrip): no bound.
Without a bound (a slow tokenizer, the kinds above) the prompt is tokenised as it is: off the event loop, within the
request-body limit (yunshan.serve.app).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

# The most code points in the canonical decomposition of one character (Unicode; tests/serve checks all of it).
MAX_DECOMPOSITION = 4
_LONGER_OR_EQUAL = ("NFD", "NFKD", "Lowercase", "Prepend", "ByteLevel")
_KEEPS_EVERY_CHARACTER = ("ByteLevel", "Metaspace", "Digits", "UnicodeScripts", "Split", "Punctuation")


@dataclass(frozen=True)
class TokenBound:
    """`chars_per_token`: no token covers more characters of the text sent (None: no bound for this tokenizer);
    `basis`: what the bound rests on, or why there is none (said in the refusal and in tests)."""

    chars_per_token: float | None
    basis: str
    dropped: str = ""  # characters the tokenizer drops (encodes to no token): not counted

    def least(self, text: str) -> int:
        """Tokens `text` encodes to at least (special tokens the tokenizer adds around it come on top)."""
        if not self.chars_per_token:
            return 0
        counted = len(text) - sum(text.count(char) for char in self.dropped)
        return math.ceil(counted / self.chars_per_token)

    @classmethod
    def of(cls, tokenizer) -> TokenBound:
        backend = getattr(tokenizer, "_tokenizer", None)  # the Rust tokenizer of a fast (tokenizers) tokenizer
        if backend is None:
            return cls(None, "a slow (Python) tokenizer")
        spec = json.loads(backend.to_str())
        vocab = backend.get_vocab(with_added_tokens=True)
        try:
            shrink = _normalizer_shrink(spec.get("normalizer"))
            _check_pre_tokenizer(spec.get("pre_tokenizer"))
            dropped = _dropped_characters(spec["model"], vocab, byte_level=_has_byte_level(spec))
            for added in spec.get("added_tokens") or []:
                if added.get("lstrip") or added.get("rstrip"):
                    raise _NoBound(f"the added token {added['content']!r} swallows the whitespace beside it")
        except _NoBound as why:
            return cls(None, str(why))
        longest = max(len(token) for token in vocab)
        basis = f"no token covers more than {longest} characters"
        if shrink > 1:
            basis += f" of the normalized text, at most {shrink:g} times shorter than the text sent"
        if dropped:
            basis += f" (not counting {len(dropped)} control characters the vocabulary has no byte for)"
        return cls(longest * shrink, basis, dropped)


class _NoBound(Exception):
    pass


def _normalizer_shrink(spec: dict | None) -> float:
    """How many times shorter the normalizer can make a text (1: never shorter); _NoBound if it can drop text."""
    if spec is None:
        return 1.0
    kind = spec.get("type")
    if kind == "Sequence":
        return math.prod(_normalizer_shrink(part) for part in spec.get("normalizers", []))
    if kind in _LONGER_OR_EQUAL:
        return 1.0
    if kind in ("NFC", "NFKC"):
        return float(MAX_DECOMPOSITION)
    if kind == "Replace" and "String" in spec.get("pattern", {}):
        old, new = spec["pattern"]["String"], spec.get("content", "")
        if not new:
            raise _NoBound(f"the normalizer deletes {old!r}")
        return max(1.0, len(old) / len(new))
    raise _NoBound(f"the normalizer {kind} can shorten a text without limit")


def _check_pre_tokenizer(spec: dict | None) -> None:
    if spec is None:
        return
    kind = spec.get("type")
    if kind == "Sequence":
        for part in spec.get("pretokenizers", []):
            _check_pre_tokenizer(part)
    elif kind not in _KEEPS_EVERY_CHARACTER or spec.get("behavior") == "Removed":
        raise _NoBound(f"the pre-tokenizer {kind} drops characters")


def _has_byte_level(spec: dict) -> bool:
    def walk(part: dict | None, key: str) -> bool:
        if part is None:
            return False
        return part.get("type") == "ByteLevel" or any(walk(p, key) for p in part.get(key, []))

    return walk(spec.get("pre_tokenizer"), "pretokenizers") or walk(spec.get("normalizer"), "normalizers")


def _dropped_characters(model: dict, vocab: dict, byte_level: bool) -> str:
    """The characters the model encodes to no token at all; _NoBound if it can fuse or drop others."""
    if model.get("type") != "BPE":
        raise _NoBound(f"a {model.get('type')} model can make one unknown token of many characters")
    if byte_level:
        from yunshan.tokenizer.base import BYTE_TO_CHAR

        # Bytes that UTF-8 never writes (C0, C1, F5-FF) need no token.
        missing = {b for b, char in BYTE_TO_CHAR.items() if char not in vocab and b not in (0xC0, 0xC1)
                   and b < 0xF5}
        if not missing or model.get("unk_token") is not None and not model.get("fuse_unk"):
            return ""  # every byte is a token, or each missing one becomes an unknown token of its own
        if any(0x80 <= b < 0xC0 for b in missing) and any(b >= 0xC0 for b in missing):
            raise _NoBound("the byte-level vocabulary lacks lead and continuation bytes of some characters")
        return "".join(chr(b) for b in sorted(missing) if b < 0x80)
    if model.get("byte_fallback") and all(f"<0x{b:02X}>" in vocab for b in range(256)):
        return ""
    if model.get("unk_token") is None:
        raise _NoBound("the BPE model drops characters outside its vocabulary")
    if model.get("fuse_unk"):
        raise _NoBound("the BPE model fuses a run of unknown characters into one token")
    return ""
