"""LawBench metrics against hand-computed values and, where installed, LawBench's own ROUGE implementation."""

import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from yunshan.eval.cherrant import CharAnnotator, Resources
from yunshan.eval.lawbench_scoring import (
    GoldFormatError, article_numbers, char_f1, correction_f05, entity_f1, labels, lcs_length, option_correct,
    prison_months, rouge_l, rouge_l_words, score_task, set_f1, trigger_f1, wsjd_inputs,
)


def dp_lcs(a, b):
    t = [[0] * (len(b) + 1) for _ in range(len(a) + 1)]
    for i in range(1, len(a) + 1):
        for j in range(1, len(b) + 1):
            t[i][j] = t[i - 1][j - 1] + 1 if a[i - 1] == b[j - 1] else max(t[i - 1][j], t[i][j - 1])
    return t[-1][-1]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from("abcde"), max_size=30), st.lists(st.sampled_from("abcde"), max_size=30))
def test_bit_parallel_lcs_equals_dynamic_programming(a, b):
    assert lcs_length(a, b) == dp_lcs(a, b)


def test_rouge_l_by_hand():
    # LCS of (我 喜欢 吃 苹果) and (我 不 喜欢 吃 香蕉) is 我 喜欢 吃: P = 3/4, R = 3/5.
    p, r = 3 / 4, 3 / 5
    assert rouge_l_words("我 喜欢 吃 苹果", "我 不 喜欢 吃 香蕉") == pytest.approx(2 * p * r / (p + r + 1e-8))
    # Sentence splitting does not change the words: the LCS runs over the whole text.
    assert rouge_l_words("甲 。 乙", "甲 。 乙") == pytest.approx(1.0, abs=1e-7)
    # An empty prediction is scored as the text 无内容 (a word the reference does not have).
    assert rouge_l("", "盗窃公私财物") == pytest.approx(0.0, abs=1e-9)
    assert rouge_l("无内容", "无内容") == pytest.approx(1.0, abs=1e-7)


def test_rouge_l_equals_lawbench_reference_implementation():
    rouge_chinese = pytest.importorskip("rouge_chinese", reason="rouge-chinese (dev extra) not installed")
    import jieba

    texts = ["盗窃公私财物，数额较大的，处三年以下有期徒刑、拘役或者管制，并处或者单处罚金。",
             "根据《农民专业合作社法》第五十六条，三个以上的农民专业合作社可以出资设立联合社！对吗？是的。",
             "The court held that the contract was void... 合同无效。", "答：无", "a  b\n\n c。。“好”。再见",
             "数额巨大或者有其他严重情节的，处三年以上十年以下有期徒刑，并处罚金。"]
    rng = random.Random(0)
    pairs = [(a, b) for a in texts for b in texts] + [("", texts[0])]
    for _ in range(20):
        a = "".join(rng.sample(texts[0] + texts[1], 25))
        pairs.append((a, texts[rng.randrange(len(texts))]))
    for hyp, ref in pairs:
        h = " ".join(jieba.cut(hyp))
        h = h if h.strip() != "" else "无内容"
        expected = rouge_chinese.Rouge().get_scores([h], [" ".join(jieba.cut(ref))])[0]["rouge-l"]["f"]
        assert rouge_l(hyp, ref) == pytest.approx(expected, abs=1e-12), (hyp, ref)


def test_char_f1_set_f1_by_hand():
    assert char_f1("张三", "张三丰") == pytest.approx(0.8)  # P 2/3, R 1
    assert char_f1("张三。", "张 三!") == 1.0  # punctuation and spaces are not characters that count
    assert char_f1("", "") == 1.0 and char_f1("张三", "") == 0.0
    assert set_f1({"a", "b"}, {"b", "c", "d"}) == pytest.approx(0.4)  # P 1/2, R 1/3
    assert set_f1(set(), {"a"}) == 0.0


def test_option_accuracy_counts_only_a_lone_gold_letter():
    opts = list("ABCD")
    assert option_correct("[正确答案]B<eoa>", opts, "B") == (1, False)
    assert option_correct("B和C都对", opts, "B") == (0, False)
    assert option_correct("我不知道", opts, "B") == (0, True)


def test_prison_score_by_hand():
    assert prison_months("有期徒刑一年") == 12
    assert prison_months("六个月") == 6
    assert prison_months("1年6个月") == 6  # LawBench reads months first, whatever the years say
    assert prison_months("无法判断") is None
    # "两" read as 2, as cn2an up to 0.5.23 reads it (0.5.24 leaves it, which moved published 3-x scores by up to
    # 0.26 point; pyproject.toml pins cn2an below it)
    assert prison_months("判处有期徒刑两年") == 24
    preds, golds = ["有期徒刑一年", "刑期8个月", "不知道", "判处死刑"], ["刑期:8个月", "刑期:8个月", "刑期:8个月", "刑期:死刑"]
    score = score_task("3-4", preds, golds)
    d = [abs(math.log(9) - math.log(13)), 0.0, math.log(216)]
    assert score.score == pytest.approx((math.log(216) - sum(d) / 3) / math.log(216))
    assert score.skipped == 1 and score.abstentions == 1
    assert score.per_item[1] == 1.0 and score.per_item[2] == 0.0 and score.per_item[3] is None


def test_article_numbers_and_charge_f1():
    assert article_numbers("刑法第二百六十四条、第六十七条") == {264, 67}
    # LawBench drops "第…款" non-greedily from the first 第, so "第六十七条第三款" loses its article too.
    assert article_numbers("刑法第二百六十四条、第六十七条第三款") == {264}
    s = score_task("3-1", ["[法条]刑法第264条、刑法第67条<eoa>"], ["法条:刑法第264条"])
    assert s.score == pytest.approx(2 * 0.5 * 1 / 1.5)
    # "盗窃" also occurs inside "盗窃、抢夺枪支、弹药、爆炸物": LawBench counts substrings, so both labels are found.
    s = score_task("3-3", ["罪名:盗窃"], ["罪名:盗窃"])
    assert s.score == 1.0
    assert score_task("3-3", ["盗窃;诈骗"], ["罪名:盗窃"]).score == pytest.approx(2 / 3)


def test_entity_f1_keeps_lawbench_reading_of_values():
    types = labels()["2-6"]
    ref = "犯罪嫌疑人:张三;受害人:李四"
    assert entity_f1("犯罪嫌疑人:张三\n受害人:李四\n", ref, types)[0] == pytest.approx(1.0, abs=1e-9)
    # On one line LawBench reads 犯罪嫌疑人 as "张三;受害人:李四" (it splits values on spaces and newlines only).
    first = char_f1("张三", "张三;受害人:李四")  # 2 of 7 characters: 4/9
    assert first == pytest.approx(4 / 9)
    expected = (first + 1) / 2
    assert entity_f1("犯罪嫌疑人:张三;受害人:李四", ref, types)[0] == pytest.approx(expected, abs=1e-9)
    assert entity_f1("没有实体", "", types) == (1.0, False)


def test_trigger_f1_and_amount_accuracy():
    assert trigger_f1("窃取;卖出", "窃取;卖掉") == pytest.approx(0.75, abs=1e-9)  # (1 + 1/2) / 2 both ways
    s = score_task("3-7", ["共计5000元", "约5000.5元", "不清楚"], ["上文涉及到的犯罪金额:5000元。"] * 2
                   + ["上文涉及到的犯罪金额:12.5元。"])
    assert s.per_item == [1.0, 0.0, 0.0] and s.abstentions == 1


def test_correction_f05_by_hand():
    plain = CharAnnotator(Resources())  # ChERRANT (cherrant.py) without its Cilin and confusion files
    src, ref = "他门去了学校", "他们去了学校"
    assert correction_f05([src], [ref], [ref], plain)[0].f05 == 1.0
    assert correction_f05([src], [src], [ref], plain)[0].f05 == 0.0  # no edit: recall 0
    # One right edit and one wrong: P = 1/2, R = 1 -> F0.5 = 1.25 * 0.5 / (0.25 * 0.5 + 1) = 5/9, to 4 places.
    assert correction_f05([src], ["他们去了学院"], [ref], plain)[0].f05 == round(5 / 9, 4)


def test_lawbench_2_1_preparation():
    # newlines and tabs out; a prediction more than 5 characters longer than the answer as written cut to its
    # length + 5 (the answer's own newlines count in that length); an empty prediction is "无内容"
    assert wsjd_inputs("他门\t去", "他们去\n", "他们去") == ("他门去", "他们去", "他们去")
    assert wsjd_inputs("甲", "一二三四五六七八九十", "甲乙\n") == ("甲", "一二三四五六七八", "甲乙")
    assert wsjd_inputs("甲", "\n\n", "甲") == ("甲", "无内容", "甲")
    prompt = "纠正下面句子中的错误。句子：\n他门去了学校。"
    scored = score_task("2-1", ["他们去了学校。", "他门去了学校。"], ["他们去了学校。"] * 2, [prompt] * 2,
                        cherrant=CharAnnotator(Resources()))
    assert (scored.details["tp"], scored.details["fp"], scored.details["fn"]) == (1, 0, 1)
    assert scored.score == round(1.25 * 1.0 * 0.5 / (0.25 * 1.0 + 0.5), 4) and scored.details["timed_out"] == []
    assert scored.details["cherrant_resources"] is None  # said in the result: scored without ChERRANT's files


def test_score_task_option_tasks_and_gold_errors():
    assert score_task("1-2", ["答案是B", "A"], ["正确答案：B。", "正确答案：C。"]).score == 0.5
    assert score_task("2-4", ["这是劳动纠纷"], ["劳动纠纷"]).score == 1.0
    assert score_task("2-2", ["诉讼时效", "x"], ["争议焦点类别：诉讼时效。", "争议焦点类别：赔偿。"]).skipped == 1
    with pytest.raises(GoldFormatError, match=r"t\.json: record 1: field 'answer'"):
        score_task("1-2", ["A", "A"], ["正确答案：A。", "B"], source="t.json")
    with pytest.raises(GoldFormatError, match="刑期"):
        score_task("3-4", ["1年"], ["八个月"], source="t.json")
    with pytest.raises(ValueError, match="unknown LawBench task"):
        score_task("9-9", ["a"], ["b"])
