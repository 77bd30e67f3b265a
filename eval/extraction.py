"""Deterministic answer extraction from generated text: one option letter (C-Eval/CMMLU style) or a letter set.

    from yunshan.eval.extraction import extract_choice
    extract_choice("答案是：B")        # -> ("B", "answer_is")

Patterns are tried in the order listed in CHOICE_PATTERNS; the first that matches decides. An answer that no
pattern matches returns (None, None): the caller counts it wrong and reports how many there were. Nothing is
ever guessed at random (FinEval's own extractor falls back to a random letter, so its scores do not reproduce).
FinanceIQ in generate mode is scored by FinanceIQ's own extractor instead, its random letter seeded and counted
(financeiq.py).
"""

from __future__ import annotations

import re
from functools import lru_cache

LETTERS = "ABCD"
# Option letters in order: a question with k options uses the first k (your own sets may have 2-10; eval/generic.py).
OPTION_LETTERS = "ABCDEFGHIJ"
# A letter that stands alone: not inside an English word such as "Answer" or "BAD".
_ALONE = r"(?<![A-Za-z]){}(?![A-Za-z])"


@lru_cache(maxsize=16)
def choice_patterns(letters: str = LETTERS) -> list[tuple[str, re.Pattern | None]]:
    """(name, pattern) for questions whose options are `letters`; group 1 is the letter. Order matters: explicit
    statements before loose ones."""
    L = f"[{letters}]"
    return [
        ("first_char", re.compile(r"^\s*[\(（\[【]?(" + L + r")(?![A-Za-z])")),
        ("bracket_tag", re.compile(r"\[正确答案\]\s*(" + L + r")")),
        ("answer_is", re.compile(r"答案(?:选项)?(?:应该|应)?(?:是|为|选)\s*[：:]?\s*[\(（]?(" + L + r")(?![A-Za-z])")),
        ("answer_colon", re.compile(r"答案\s*[：:]\s*[\(（]?(" + L + r")(?![A-Za-z])")),
        ("correct_option_is", re.compile(r"正确(?:的)?(?:答案|选项)(?:是|为)?\s*[：:]?\s*[\(（]?(" + L + r")(?![A-Za-z])")),
        ("option_is_correct", re.compile(r"选项\s*(" + L + r")\s*(?:是|为)?(?:正确|对)的?")),
        ("choose", re.compile(r"(?:故|所以|因此)?(?:应)?选(?:择)?\s*[：:]?\s*[\(（]?(" + L + r")(?![A-Za-z])")),
        ("english_answer_is", re.compile(r"[Aa]nswer\s*(?:is|:)\s*:?\s*\(?(" + L + r")(?![A-Za-z])")),
        ("only_letter", None),  # the one and only standalone option letter in the text (checked in code)
    ]


CHOICE_PATTERNS = choice_patterns(LETTERS)


def extract_choice(text: str, letters: str = LETTERS) -> tuple[str | None, str | None]:
    """(letter, name of the pattern that found it), or (None, None) when no pattern matches; `letters` are the
    question's option letters (A-D by default; "ABCDE" for five options)."""
    for name, pattern in choice_patterns(letters):
        if pattern is None:
            found = set(re.findall(_ALONE.format(f"[{letters}]"), text))
            if len(found) == 1:
                return found.pop(), name
            continue
        match = pattern.search(text)
        if match:
            return match.group(1), name
    return None, None


_L = "[ABCD]"
_RUN = r"(" + _L + r"(?:\s*[、，,和及与/ ]?\s*" + _L + r")*)(?![A-Za-z])"
SET_PATTERNS: list[tuple[str, re.Pattern]] = [
    ("leading_letters", re.compile(r"^\s*[\(（\[【]?" + _RUN)),
    ("bracket_tag", re.compile(r"\[正确答案\]\s*" + _RUN)),
    ("answer_is", re.compile(r"答案(?:选项)?(?:应该|应)?(?:是|为|选)?\s*[：:]?\s*" + _RUN)),
    ("choose", re.compile(r"(?:故|所以|因此)?(?:应)?选(?:择)?\s*[：:]?\s*" + _RUN)),
    ("english_answer_is", re.compile(r"[Aa]nswers?\s*(?:is|are|:)\s*:?\s*" + _RUN)),
]


def extract_choice_set(text: str) -> tuple[frozenset[str] | None, str | None]:
    """The set of letters a multi-answer response gives (JEC-QA), or (None, None) when no pattern matches."""
    for name, pattern in SET_PATTERNS:
        match = pattern.search(text)
        if match:
            return frozenset(re.findall(_L, match.group(1))), name
    return None, None
