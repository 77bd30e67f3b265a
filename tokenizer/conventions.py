"""The base tokenizer's segmentation conventions, detected so that no new token breaks them.

    from yunshan.tokenizer.conventions import detect_conventions
    conventions = detect_conventions(base)          # base: yunshan.tokenizer.base.BaseTokenizer
    conventions.violation("2021".encode())          # -> "digit run longer than 1 (4 digits in a row; ...)"

A tokenizer's segmentation policy is only partly written in its pipeline. Llama-3's split regex (`\\p{N}{1,3}`) and a
`Digits` pre-tokeniser say how numbers are cut, but a SentencePiece model trained with `split_digits` (LLaMA-2,
Gemma, ...) keeps that rule in its training options only: the converted tokenizer.json has no digit rule, the
vocabulary simply holds no token with two digits. A tokenizer converted from GGUF may likewise have lost its digit
pre-tokeniser. A continued BPE that sees "2021" a thousand times would then learn "20", "2021" and " 2", and
silently change how every number is tokenised.

So the conventions are read off the base vocabulary itself, which reflects every rule used to train it, and the
pipeline and training options are recorded as supporting evidence:

- **digits**: the longest run of digits (Unicode category N) inside one base token: 1 = single digits (LLaMA-2,
  SmolLM2, Gemma), 3 = groups of up to three (Llama-3, Qwen), larger = no digit rule (GPT-2);
- **digit boundaries and whitespace**: which neighbours a digit, a space or a line break has inside base tokens,
  counted as transitions between character classes (digit D, space S, line break N, letter L, other P). A new
  token may contain a transition involving D, S or N only if base tokens contain it too. This keeps "▁2" out of a
  vocabulary that writes a space and each digit apart, "the " (trailing space) out of one whose spaces only lead,
  and "x\\n" out of one whose line breaks stand apart;
- **byte-fallback pieces, added and special tokens, the unknown token**: never part of a merge, never the string of
  a new token (`BaseTokenizer.mergeable` / `reserved_strings`, enforced where merges are learned).

Transitions between letters, or letters and punctuation, are not policies (a base trained on English has few
Chinese words; that is missing data, not a rule) and are left to the pre-tokeniser, which the extension already
follows. A transition or run length counts as present when at least `min_tokens` base tokens show it, so that a
stray token does not license a whole class of merges. Bytes that do not form a whole UTF-8 character (byte-level
tokens may hold part of a character) are one unit of their own class and take part in no policy.
"""

from __future__ import annotations

import unicodedata
from collections import Counter
from dataclasses import dataclass, field

# Classes that policies are about; transitions between other classes are not restricted.
POLICY_CLASSES = frozenset("DSN")
CLASS_NAMES = {"D": "digit", "S": "space", "N": "line break", "L": "letter", "P": "punctuation or symbol",
               "B": "partial UTF-8 character"}


def char_class(char: str) -> str:
    """D digit, S space, N line break, L letter or mark, P anything else (punctuation, symbols, controls)."""
    if char in "\r\n\u2028\u2029\x0b\x0c\x85":
        return "N"
    if char.isspace() or char == "▁":
        return "S"
    category = unicodedata.category(char)
    if category[0] == "N":
        return "D"
    if category[0] in "LM":
        return "L"
    return "P"


def units(data: bytes) -> list[str]:
    """The classes of the characters of `data`, a byte run that is not whole UTF-8 counting as one class B unit."""
    out: list[str] = []
    i = 0
    while i < len(data):
        byte = data[i]
        size = 1 if byte < 0x80 else 2 if 0xC0 <= byte < 0xE0 else 3 if 0xE0 <= byte < 0xF0 else \
            4 if 0xF0 <= byte < 0xF8 else 0
        chunk = data[i:i + size] if size else b""
        try:
            char = chunk.decode("utf-8") if size and len(chunk) == size else None
        except UnicodeDecodeError:
            char = None
        if char is None:
            if not out or out[-1] != "B":
                out.append("B")
            i += 1
            continue
        out.append(char_class(char))
        i += size
    return out


def digit_runs(classes: list[str]) -> list[int]:
    runs, current = [], 0
    for c in classes:
        if c == "D":
            current += 1
        elif current:
            runs.append(current)
            current = 0
    if current:
        runs.append(current)
    return runs


@dataclass
class Conventions:
    """What the base vocabulary never does, and the evidence for it."""

    max_digit_run: int                     # longest digit run allowed inside a new token
    transitions: frozenset                 # allowed (class, class) pairs that involve D, S or N
    min_tokens: int                        # base tokens needed for a run length or transition to count
    digit_run_counts: dict = field(default_factory=dict)   # run length -> base tokens with it
    transition_counts: dict = field(default_factory=dict)  # "DS" -> base tokens with that transition
    evidence: list[str] = field(default_factory=list)      # what the pipeline / training options say

    @property
    def digits(self) -> str:
        if self.max_digit_run == 1:
            return "single digits"
        return f"groups of up to {self.max_digit_run} digits"

    def violation(self, token_bytes: bytes) -> str | None:
        """Why a token with these bytes would break a base convention, or None when it breaks none."""
        classes = units(token_bytes)
        runs = digit_runs(classes)
        if runs and max(runs) > self.max_digit_run:
            return (f"digit run longer than {self.max_digit_run} ({max(runs)} digits in a row; the base keeps "
                    f"{self.digits})")
        for a, b in zip(classes, classes[1:]):
            if (a in POLICY_CLASSES or b in POLICY_CLASSES) and (a, b) not in self.transitions:
                return (f"{CLASS_NAMES[a]} followed by {CLASS_NAMES[b]} (no base token joins them: "
                        "the base keeps that boundary)")
        return None

    def as_dict(self) -> dict:
        return {
            "digits": self.digits, "max_digit_run": self.max_digit_run,
            "allowed_transitions": sorted(a + b for a, b in self.transitions),
            "forbidden_transitions": sorted(a + b for a in "DSNLPB" for b in "DSNLPB"
                                            if (a in POLICY_CLASSES or b in POLICY_CLASSES)
                                            and (a, b) not in self.transitions),
            "min_tokens": self.min_tokens, "digit_run_counts": self.digit_run_counts,
            "transition_counts": self.transition_counts, "evidence": self.evidence,
        }


def _pipeline_evidence(base) -> list[str]:
    """What the base's pipeline and training options state about digits and whitespace (recorded, not enforced)."""
    found = []

    def visit(component):
        if isinstance(component, list):
            for item in component:
                visit(item)
            return
        if not isinstance(component, dict):
            return
        kind = component.get("type")
        if kind == "Digits":
            found.append(f"pre-tokeniser Digits(individual_digits={component.get('individual_digits')})")
        if kind == "Split":
            pattern = (component.get("pattern") or {}).get("Regex", "")
            if "\\p{N}{1,3}" in pattern:
                found.append("split regex groups digits by up to 3 (\\p{N}{1,3})")
            elif "\\p{N}+" in pattern or "\\p{N}" in pattern:
                found.append("split regex isolates numbers (\\p{N})")
        for key in ("pretokenizers", "normalizers"):
            visit(component.get(key))

    visit(base.data.get("pre_tokenizer"))
    visit(base.data.get("normalizer"))
    pre = base.data.get("pre_tokenizer") or {}
    if pre.get("type") == "ByteLevel" and pre.get("use_regex", True):
        found.append("ByteLevel pre-tokeniser with GPT-2's regex (numbers as runs: ' ?\\p{N}+')")
    proto = getattr(base, "sp_proto", None)
    if proto is not None:
        spec = proto.trainer_spec
        found.append(f"SentencePiece training options: split_digits={spec.split_digits}, "
                     f"split_by_number={spec.split_by_number}, split_by_whitespace={spec.split_by_whitespace}, "
                     f"treat_whitespace_as_suffix={spec.treat_whitespace_as_suffix}")
    return found


def detect_conventions(base, min_tokens: int | None = None) -> Conventions:
    """Read the conventions off the base vocabulary (module docstring).

    Args:
        base: a `yunshan.tokenizer.base.BaseTokenizer`.
        min_tokens: base tokens needed for a digit-run length or a transition to count as allowed (default: 2, or
            one in 20,000 vocabulary entries for larger vocabularies).
    """
    size = len(base.id_to_token)
    if min_tokens is None:
        min_tokens = max(2, size // 20000)
    runs: Counter = Counter()
    transitions: Counter = Counter()
    for idx, token in enumerate(base.id_to_token):
        if token is None or not base.mergeable(idx):
            continue
        classes = units(base.token_bytes(token))
        longest = max(digit_runs(classes), default=0)
        if longest:
            runs[longest] += 1
        seen = {(a, b) for a, b in zip(classes, classes[1:]) if a in POLICY_CLASSES or b in POLICY_CLASSES}
        transitions.update(seen)
    # The longest run length L such that at least min_tokens tokens hold a run of L or more.
    # Single digits are always allowed (a digit must be spellable).
    max_run = 1
    for length in sorted(runs, reverse=True):
        if sum(c for r, c in runs.items() if r >= length) >= min_tokens:
            max_run = max(length, 1)
            break
    allowed = frozenset(pair for pair, count in transitions.items() if count >= min_tokens)
    return Conventions(
        max_digit_run=max_run, transitions=allowed, min_tokens=min_tokens,
        digit_run_counts={str(k): v for k, v in sorted(runs.items())},
        transition_counts={a + b: c for (a, b), c in sorted(transitions.items())},
        evidence=_pipeline_evidence(base),
    )
