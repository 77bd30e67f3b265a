"""Prompt rendering byte-exact against the templates of docs/evaluation-formats.md (C-Eval/FinEval, CMMLU/FinanceIQ,
LawBench), and against lm-evaluation-harness's ceval-valid template in its compatibility style."""

from pathlib import Path

import pytest

from yunshan.eval import ceval, cmmlu, jecqa, lawbench
from yunshan.eval.multiple_choice import Question

DOC = Path(__file__).resolve().parents[2] / "docs" / "evaluation-formats.md"

Q1 = Question("0", "企业的资产负债表反映的是", ("财务状况", "经营成果", "现金流量", "利润分配"), "A", "f.csv", 2)
Q2 = Question("1", "商业银行的主要负债是", ("贷款", "存款", "债券投资", "现金"), "B", "f.csv", 3)
QUERY = Question("7", "通货膨胀时，央行通常会", ("降低利率", "增加货币供应", "提高利率", "减少税收"), "C", "f.csv", 9)


def test_ceval_prompt_bytes():
    expected = ("以下是中国关于会计考试的单项选择题，请选出其中的正确答案。\n\n"
                "企业的资产负债表反映的是\nA. 财务状况\nB. 经营成果\nC. 现金流量\nD. 利润分配\n答案：A\n\n"
                "商业银行的主要负债是\nA. 贷款\nB. 存款\nC. 债券投资\nD. 现金\n答案：B\n\n"
                "通货膨胀时，央行通常会\nA. 降低利率\nB. 增加货币供应\nC. 提高利率\nD. 减少税收\n答案：")
    assert ceval.render_prompt("会计", [Q1, Q2], QUERY).encode() == expected.encode()
    zero = ceval.render_prompt("会计", [], QUERY)
    assert zero == expected[:expected.index("\n\n") + 2] + expected[expected.index("通货膨胀"):]


def test_ceval_lm_eval_style_matches_its_task_config():
    # lm-eval's ceval-valid: description "以下是中国关于{name}的单项选择题，请选出其中的正确答案。\n\n", doc_to_text
    # "{{question.strip()}}\nA. {{A}}\nB. {{B}}\nC. {{C}}\nD. {{D}}\n答案：", target_delimiter " ", "\n\n" between shots.
    expected = ("以下是中国关于会计的单项选择题，请选出其中的正确答案。\n\n"
                "企业的资产负债表反映的是\nA. 财务状况\nB. 经营成果\nC. 现金流量\nD. 利润分配\n答案： A\n\n"
                "通货膨胀时，央行通常会\nA. 降低利率\nB. 增加货币供应\nC. 提高利率\nD. 减少税收\n答案：")
    assert ceval.render_prompt("会计", [Q1], QUERY, style="lm-eval") == expected
    assert ceval.choices_for("lm-eval") == [" A", " B", " C", " D"]
    with pytest.raises(ValueError, match="prompt style"):
        ceval.render_prompt("会计", [], QUERY, style="mmlu")


def test_cmmlu_prompt_bytes():
    expected = ("以下是关于注册会计师（CPA）的单项选择题，请直接给出正确答案的选项。\n\n"
                "题目：企业的资产负债表反映的是\nA. 财务状况\nB. 经营成果\nC. 现金流量\nD. 利润分配\n答案是：A\n\n"
                "题目：通货膨胀时，央行通常会\nA. 降低利率\nB. 增加货币供应\nC. 提高利率\nD. 减少税收\n答案是：")
    assert cmmlu.render_prompt("注册会计师（CPA）", [Q1], QUERY).encode() == expected.encode()


def test_lawbench_and_jecqa_prompts():
    rec = {"instruction": "请给出罪名。", "question": "事实:张某窃取财物。", "answer": "罪名:盗窃"}
    assert lawbench.render_prompt(rec) == "请给出罪名。\n事实:张某窃取财物。"
    j = {"statement": "下列说法正确的是", "option_list": {"A": "甲", "B": "乙", "C": "丙", "D": "丁"}}
    assert jecqa.render_prompt(j) == ("以下是中国司法考试的不定项选择题，请选出所有正确答案。\n\n下列说法正确的是\n"
                                      "A. 甲\nB. 乙\nC. 丙\nD. 丁\n答案：")


def test_templates_are_the_ones_written_in_benchmarks_md():
    doc = DOC.read_text(encoding="utf-8")
    # The doc writes each template in backticks with literal "\n"; render with placeholders and compare.
    q = Question("0", "{question}", ("{A}", "{B}", "{C}", "{D}"), "{answer}", "", 0)
    ceval_text = ceval.render_prompt("{subject}", [q], q)
    header, example = ceval_text.split("\n\n", 1)[0] + "\n\n", ceval_text.split("\n\n")[1] + "\n\n"
    assert f"`{header}`".replace("\n", "\\n") in doc
    assert f"`{example}`".replace("\n", "\\n") in doc
    cm = cmmlu.render_prompt("{subject}", [q], q)
    header, example = cm.split("\n\n", 1)[0] + "\n\n", cm.split("\n\n")[1] + "\n\n"
    assert f"`{header}`".replace("\n", "\\n") in doc
    assert f"`{example}`".replace("\n", "\\n") in doc
    assert "`instruction + \"\\n\" + question`" in doc
