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

- **digits, per script**: the longest run of digits inside one base token, for ASCII digits apart from every other
  script's digits: 1 = single digits (LLaMA-2, SmolLM2, Gemma), 3 = groups of up to three (Llama-3, Qwen), larger =
  no digit rule (GPT-2). Scripts are told apart because a vocabulary may keep a different policy for each: a
  SentencePiece model trained with `split_digits` splits ASCII digits only, so a multilingual one holds Bengali
  `১৯৭১` and `২০` beside no ASCII token with two digits; counting those as digits would license "2021" and "000"
  and change how every number of a finance text is cut. A script with digits in fewer than `min_tokens` base tokens
  shows no policy of its own and follows the ASCII digits' one (the tokenizer's general digit rule: Llama-3's
  `\\p{N}{1,3}` and a `Digits` pre-tokeniser cover every script);
- **digit boundaries and whitespace**: which neighbours a digit, a space or a line break has inside base tokens,
  counted as transitions between character classes (ASCII digit D, another script's digit, space S, line break N,
  letter L, other P). A new token may contain a transition involving a digit, S or N only if base tokens contain it
  too. This keeps "▁2" out of a vocabulary that writes a space and each digit apart, "the " (trailing space) out of
  one whose spaces only lead, and "x\\n" out of one whose line breaks stand apart;
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

# Classes that policies are about (digits of every script, spaces, line breaks); transitions between other classes
# are not restricted. A digit's class is "D" for ASCII 0-9 and "D(SCRIPT)" for another script's digits.
POLICY_CLASSES = frozenset("DSN")
CLASS_NAMES = {"D": "digit", "S": "space", "N": "line break", "L": "letter", "P": "punctuation or symbol",
               "B": "partial UTF-8 character"}
ASCII = "ASCII"
OTHER_NUMERALS = "OTHER NUMERAL"


def digit_script(char: str) -> str:
    """The script of a digit (a character of Unicode category N): "ASCII" for 0-9; for another decimal digit the
    name of its block of ten ("BENGALI", "FULLWIDTH", "ARABIC-INDIC", ...); "OTHER NUMERAL" for numerals that are no
    decimal digit (², ½, Ⅻ, ①, 〇)."""
    if "0" <= char <= "9":
        return ASCII
    value = unicodedata.decimal(char, None)
    if value is None:
        return OTHER_NUMERALS
    zero = unicodedata.name(chr(ord(char) - value), "")
    return zero.rsplit(" DIGIT ZERO", 1)[0] if zero.endswith(" DIGIT ZERO") else zero or OTHER_NUMERALS


def digit_class(script: str) -> str:
    return "D" if script == ASCII else f"D({script})"


def is_policy_class(cls: str) -> bool:
    return cls[0] in POLICY_CLASSES


def is_digit_class(cls: str) -> bool:
    return cls[0] == "D"


def class_name(cls: str) -> str:
    if cls.startswith("D("):
        return f"{cls[2:-1]} digit"
    return CLASS_NAMES[cls]


def char_class(char: str) -> str:
    """D ASCII digit, D(SCRIPT) another script's digit, S space, N line break, L letter or mark, P anything else
    (punctuation, symbols, controls)."""
    if char in "\r\n\u2028\u2029\x0b\x0c\x85":
        return "N"
    if char.isspace() or char == "▁":
        return "S"
    category = unicodedata.category(char)
    if category[0] == "N":
        return digit_class(digit_script(char))
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


def digit_runs(classes: list[str]) -> list[tuple[str, int]]:
    """(digit class, length) of every run of digits of one script."""
    runs: list[tuple[str, int]] = []
    current, length = None, 0
    for c in classes + [""]:
        if c == current:
            length += 1
            continue
        if current is not None:
            runs.append((current, length))
        current, length = (c, 1) if c and is_digit_class(c) else (None, 0)
    return runs


def _describe_runs(longest: int) -> str:
    return "single digits" if longest == 1 else f"groups of up to {longest} digits"


@dataclass
class Conventions:
    """What the base vocabulary never does, and the evidence for it."""

    max_digit_run: int                     # longest run of ASCII digits allowed inside a new token
    transitions: frozenset                 # allowed (class, class) pairs that involve a digit, S or N
    min_tokens: int                        # base tokens needed for a run length or transition to count
    # Scripts whose digits follow a policy of their own (digits in at least min_tokens base tokens) -> the longest
    # run allowed; every other script's digits follow the ASCII digits' policy.
    script_digit_runs: dict = field(default_factory=dict)
    digit_run_counts: dict = field(default_factory=dict)   # script -> {run length: base tokens with it}
    transition_counts: dict = field(default_factory=dict)  # "D+S" -> base tokens with that transition
    evidence: list[str] = field(default_factory=list)      # what the pipeline / training options say

    @property
    def digits(self) -> str:
        """The digit policy in words: "single digits", or per script where scripts differ."""
        own = {s: r for s, r in self.script_digit_runs.items() if r != self.max_digit_run}
        if not own:
            return _describe_runs(self.max_digit_run)
        return "; ".join([f"ASCII digits: {_describe_runs(self.max_digit_run)}"]
                         + [f"{s} digits: {_describe_runs(r)}" for s, r in sorted(own.items())])

    def _classes(self, token_bytes: bytes) -> list[str]:
        """The token's classes, the digits of a script without a policy of its own counted as ASCII digits."""
        return [c if not c.startswith("D(") or c[2:-1] in self.script_digit_runs else "D" for c in units(token_bytes)]

    def violation(self, token_bytes: bytes) -> str | None:
        """Why a token with these bytes would break a base convention, or None when it breaks none."""
        classes = self._classes(token_bytes)
        for cls, length in digit_runs(classes):
            script = ASCII if cls == "D" else cls[2:-1]
            limit = self.max_digit_run if cls == "D" else self.script_digit_runs[script]
            if length > limit:
                named = "" if cls == "D" else f"{script} "
                return (f"{named}digit run longer than {limit} ({length} {named}digits in a row; the base keeps "
                        f"{_describe_runs(limit)})")
        for a, b in zip(classes, classes[1:]):
            if (is_policy_class(a) or is_policy_class(b)) and (a, b) not in self.transitions:
                return (f"{class_name(a)} followed by {class_name(b)} (no base token joins them: "
                        "the base keeps that boundary)")
        return None

    def as_dict(self) -> dict:
        classes = ["D", *(digit_class(s) for s in sorted(self.script_digit_runs)), *"SNLPB"]
        return {
            "digits": self.digits, "max_digit_run": self.max_digit_run,
            "max_digit_run_by_script": {ASCII: self.max_digit_run, **dict(sorted(self.script_digit_runs.items()))},
            "allowed_transitions": sorted(_transition(a, b) for a, b in self.transitions),
            "forbidden_transitions": sorted(_transition(a, b) for a in classes for b in classes
                                            if (is_policy_class(a) or is_policy_class(b))
                                            and (a, b) not in self.transitions),
            "min_tokens": self.min_tokens, "digit_run_counts": self.digit_run_counts,
            "transition_counts": self.transition_counts, "evidence": self.evidence,
        }


def _transition(a: str, b: str) -> str:
    """"DS" for two one-letter classes (as the report has always written them), "D(BENGALI)+S" otherwise."""
    return a + b if len(a) == len(b) == 1 else f"{a}+{b}"


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
        min_tokens: base tokens needed for a digit-run length or a transition to count as allowed, and for a script's
            digits to show a policy of their own (default: 2, or one in 20,000 vocabulary entries for larger
            vocabularies).
    """
    size = len(base.id_to_token)
    if min_tokens is None:
        min_tokens = max(2, size // 20000)
    runs: dict[str, Counter] = {}      # script -> Counter(longest run in a token)
    with_digits: Counter = Counter()   # script -> base tokens holding its digits
    transitions: Counter = Counter()
    for idx, token in enumerate(base.id_to_token):
        if token is None or not base.mergeable(idx):
            continue
        classes = units(base.token_bytes(token))
        longest: dict[str, int] = {}
        for cls, length in digit_runs(classes):
            script = ASCII if cls == "D" else cls[2:-1]
            longest[script] = max(longest.get(script, 0), length)
        for script, length in longest.items():
            runs.setdefault(script, Counter())[length] += 1
            with_digits[script] += 1
        transitions.update({(a, b) for a, b in zip(classes, classes[1:]) if is_policy_class(a) or is_policy_class(b)})
    own = sorted(s for s, n in with_digits.items() if s != ASCII and n >= min_tokens)

    def longest_run(script: str) -> int:
        # The longest run length L such that at least min_tokens tokens hold a run of L or more; single digits are
        # always allowed (a digit must be spellable).
        counts = runs.get(script, Counter())
        for length in sorted(counts, reverse=True):
            if sum(c for r, c in counts.items() if r >= length) >= min_tokens:
                return max(length, 1)
        return 1

    # A script without a policy of its own is read as ASCII digits, in the base tokens as in a new token.
    def as_checked(cls: str) -> str:
        return "D" if cls.startswith("D(") and cls[2:-1] not in own else cls

    checked: Counter = Counter()
    for (a, b), count in transitions.items():
        a, b = as_checked(a), as_checked(b)
        checked[(a, b)] += count
    allowed = frozenset(pair for pair, count in checked.items() if count >= min_tokens)
    return Conventions(
        max_digit_run=longest_run(ASCII), transitions=allowed, min_tokens=min_tokens,
        script_digit_runs={s: longest_run(s) for s in own},
        digit_run_counts={s: {str(k): v for k, v in sorted(c.items())} for s, c in sorted(runs.items())},
        transition_counts={_transition(a, b): c for (a, b), c in sorted(transitions.items())},
        evidence=_pipeline_evidence(base),
    )
