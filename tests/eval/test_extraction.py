"""The answer extractor on a table of real-looking chat answers: every row's letter and the rule that found it."""

import pytest

from yunshan.eval.extraction import extract_choice, extract_choice_set

TABLE = [
    ("B", "B", "first_char"),
    ("C. 现金流量", "C", "first_char"),
    ("（A）财务状况", "A", "first_char"),
    ("[正确答案]D<eoa>", "D", "bracket_tag"),
    ("根据会计准则，答案是：B。资产负债表反映财务状况。", "B", "answer_is"),
    ("分析如下……因此答案为 C", "C", "answer_is"),
    ("答案：A", "A", "answer_colon"),
    ("该题的正确选项是D，因为……", "D", "correct_option_is"),
    ("正确答案：B。", "B", "answer_colon"),
    ("选项A错误，选项C是正确的。", "C", "option_is_correct"),
    ("综上所述，故选B。", "B", "choose"),
    ("The answer is (D) because bonds pay coupons.", "D", "english_answer_is"),
    ("According to the standard, answer: A", "A", "english_answer_is"),
    ("我认为应该是 B 项。", "B", "only_letter"),
    ("我不确定，可能是A也可能是B。", None, None),
    ("这道题目无法判断。", None, None),
    ("According to IFRS, leases are capitalised.", None, None),  # "A" of "According" is not an option letter
    ("", None, None),
]


@pytest.mark.parametrize("text,letter,rule", TABLE)
def test_extract_choice(text, letter, rule):
    assert extract_choice(text) == (letter, rule)


@pytest.mark.parametrize("text,letters", [
    ("ACD", {"A", "C", "D"}),
    ("A、C", {"A", "C"}),
    ("答案是：B和D", {"B", "D"}),
    ("[正确答案]ABD<eoa>", {"A", "B", "D"}),
    ("故选 A,C", {"A", "C"}),
    ("The answers are A, B", {"A", "B"}),
    ("无法回答", None),
])
def test_extract_choice_set(text, letters):
    found, _ = extract_choice_set(text)
    assert (set(found) if found is not None else None) == letters
