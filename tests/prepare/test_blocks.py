"""The hand-written blocks of `yunshan data prepare`, each on a fixture of its own: personal data masked exactly
(synthetic identifiers with valid and invalid check digits, numbers inside article numbers, dates, amounts and case
numbers), page furniture removed line by line, the quality rules, the MinHash word tokenizer, language
identification, OpenCC and the decontamination block. Every identifier here is made up."""

import pytest

pytest.importorskip("datatrove", reason="the prepare extra (datatrove) is not installed")

from datatrove.data import Document  # noqa: E402

from yunshan.prepare.args import DecontaminationArgs, LanguageArgs, QualityArgs  # noqa: E402
from yunshan.prepare.dedup import MixedScriptWords, exact_key  # noqa: E402
from yunshan.prepare.pii import PersonalDataMasker, id_number_valid, luhn_valid, mask_personal_data  # noqa: E402
from yunshan.prepare.quality import (ChineseQuality, boilerplate_kind, quality_reason,  # noqa: E402
                                     remove_boilerplate_lines)

WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)


def with_check_digit(first17: str) -> str:
    """GB 11643-1999, computed here independently of the module: sum of digit x weight, mod 11, mapped."""
    return first17 + "10X98765432"[sum(int(d) * w for d, w in zip(first17, WEIGHTS)) % 11]


def luhn_complete(prefix: str) -> str:
    digits = [int(d) for d in prefix][::-1]
    total = sum(d if i % 2 else (d * 2 - 9 if d * 2 > 9 else d * 2) for i, d in enumerate(digits))
    return prefix + str((10 - total % 10) % 10)


ID_A = with_check_digit("11010519491231002")          # the standard's own example: ends in X
ID_B = with_check_digit("44030619900307123")
ID_BAD = ID_B[:-1] + ("0" if ID_B[-1] != "0" else "1")  # wrong check digit: some other number
ID_BAD_DATE = with_check_digit("44030619901332123")     # month 13
CARD = luhn_complete("622202020011223344")               # 19 digits, UnionPay
CARD_16 = luhn_complete("411111111111111")
CARD_BAD = CARD[:-1] + str((int(CARD[-1]) + 1) % 10)
AMOUNT_CARD_LIKE = luhn_complete("62220202001122")       # passes Luhn, but it is an amount below


def test_fixture_identifiers_are_what_they_claim():
    assert ID_A == "11010519491231002X" and id_number_valid(ID_A) and id_number_valid(ID_B)
    assert not id_number_valid(ID_BAD) and not id_number_valid(ID_BAD_DATE)
    assert luhn_valid(CARD) and luhn_valid(CARD_16) and not luhn_valid(CARD_BAD)


def test_personal_data_masked_exactly():
    text = (f"原告张某，身份证号{ID_A}，住北京市。被告李某某，公民身份号码：{ID_B.lower()}。\n"
            f"编号{ID_BAD}与{ID_BAD_DATE}不是身份证号。\n"
            f"联系电话13812345678、138-1234-5678、+86 139 1234 5678，座机010-62345678、(0755)88881234、"
            f"0571-87654321-123。\n"
            f"银行卡号{CARD}，信用卡{CARD_16[:4]} {CARD_16[4:8]} {CARD_16[8:12]} {CARD_16[12:]}，"
            f"校验不过的{CARD_BAD}。邮箱 zhang.san@example.com。\n"
            f"依据《民法典》第一百二十条、第1165条，于2023年5月1日（20230501）判决赔偿人民币{AMOUNT_CARD_LIKE}元，"
            f"另付12345678901元，案号(2023)京0105民初12345号，股票代码600519。")
    masked, counts = mask_personal_data(text)
    expected = ("原告张某，身份证号[身份证号]，住北京市。被告李某某，公民身份号码：[身份证号]。\n"
                f"编号{ID_BAD}与{ID_BAD_DATE}不是身份证号。\n"
                "联系电话[手机号]、[手机号]、[手机号]，座机[电话]、[电话]、[电话]。\n"
                f"银行卡号[银行卡号]，信用卡[银行卡号]，校验不过的{CARD_BAD}。邮箱 [邮箱]。\n"
                f"依据《民法典》第一百二十条、第1165条，于2023年5月1日（20230501）判决赔偿人民币{AMOUNT_CARD_LIKE}元，"
                "另付12345678901元，案号(2023)京0105民初12345号，股票代码600519。")
    assert masked == expected
    assert counts == {"id_number": 2, "mobile": 3, "landline": 3, "bank_card": 2, "email": 1}


def test_party_names_only_when_asked_and_only_natural_persons():
    text = "原告王小明，男，1980年生。被告人赵某某：无业。被告北京某某科技有限公司，住所地北京。上诉人（原审被告）刘洋，女。"
    assert mask_personal_data(text)[0] == text
    masked, counts = mask_personal_data(text, party_names=True)
    assert masked == ("原告[当事人]，男，1980年生。被告人赵某某：无业。被告北京某某科技有限公司，住所地北京。"
                      "上诉人（原审被告）[当事人]，女。")
    assert counts == {"party_name": 2}


def test_masker_block_counts_by_kind():
    docs = [Document(text=f"电话13812345678，身份证{ID_A}", id="a"), Document(text="无号码", id="b")]
    block = PersonalDataMasker()
    out = list(block.run(iter(docs)))
    assert [d.text for d in out] == ["电话[手机号]，身份证[身份证号]", "无号码"]
    assert block.stats["masked_mobile"].total == 1 and block.stats["documents_masked"].total == 1


def test_page_furniture_removed_from_inside_documents():
    text = ("首页 > 法律法规 > 正文\n当前位置：首页 > 新闻\n\n# 某某市物业管理条例\n\n第一条 为了规范物业管理活动，制定本条例。\n"
            "第二条 大会秘书处根据代表建议的内容，按照下列规定确定承办单位：\n- 1 -\n第 2 页 共 10 页\n"
            "上一篇：关于印发某某办法的通知\n下一篇：没有了\n【打印本页】【关闭窗口】\n"
            "版权所有 © 2023 某某市人民政府 京ICP备12345678号\n主办单位：某某市司法局\n")
    cleaned, removed = remove_boilerplate_lines(text)
    assert cleaned == ("# 某某市物业管理条例\n\n第一条 为了规范物业管理活动，制定本条例。\n"
                       "第二条 大会秘书处根据代表建议的内容，按照下列规定确定承办单位：")
    assert {k: len(v) for k, v in removed.items()} == {"navigation": 5, "page_number": 2, "copyright": 2}
    assert boilerplate_kind("第一章 总则") is None and boilerplate_kind("2023年5月1日") is None


LAW = ("第一条 为了保护民事主体的合法权益，调整民事关系，维护社会和经济秩序，适应中国特色社会主义发展要求，弘扬社会主义核心价值观，"
       "根据宪法，制定本法。\n第二条 民法调整平等主体的自然人、法人和非法人组织之间的人身关系和财产关系。")


ENGLISH = ("This page is English text about the weather, with football scores of the week, a recipe for soup and "
           "the opening hours of the library on Sundays.")


@pytest.mark.parametrize("text, reason", [
    (LAW, None),
    ("第一条 短。", "too_short"),
    ("点击这里领取大奖！" * 40, "top_char_ngram"),
    ("function(){var a=1;return a;} " * 40, "dup_char_ngram"),
    (("本条例自公布之日起施行。\n" * 6) + LAW, "dup_lines"),
    (ENGLISH, "cjk_share"),
    ("依据本条例第二十条规定的程序办理登记手续并缴纳费用【】《》！？；：“”（）…—@#%&*+=~｜§※→←↑↓☆★○●", "symbol_share"),
])
def test_quality_rules(text, reason):
    assert quality_reason(text, QualityArgs()) == reason


def test_quality_filter_skips_the_cjk_rule_for_other_languages():
    english = Document(text=ENGLISH, id="e", metadata={"language": "en"})
    chinese = Document(text=english.text, id="z", metadata={"language": "zh"})
    block = ChineseQuality(QualityArgs())
    assert [d.id for d in block.run(iter([english, chinese]))] == ["e"]
    assert block.stats["dropped_cjk_share"].total == 1


def test_datatrove_gopher_rules_judge_the_other_languages_only():
    from yunshan.prepare.quality import OtherLanguageGopherQuality, OtherLanguageGopherRepetition

    prose = ("The parties agree that the tenant shall pay the rent on the first day of each month, and that the "
             "landlord shall keep the roof, the walls and the shared stairs in good repair for the whole of the "
             "term. If either party breaks these terms, the other may end the lease after giving notice in writing "
             "and a reasonable time to put the matter right.")
    docs = [Document(text=prose, id="en", metadata={"language": "en"}),
            Document(text="buy now cheap " * 60, id="spam", metadata={"language": "en"}),
            Document(text=LAW, id="zh", metadata={"language": "zh"})]
    repetition, quality = OtherLanguageGopherRepetition(), OtherLanguageGopherQuality()
    kept = list(quality.run(repetition.run(iter(docs))))
    assert [d.id for d in kept] == ["en", "zh"]
    assert repetition.stats["dropped"].total == 1 and quality.stats["dropped"].total == 0


def test_minhash_words_are_characters_for_chinese_and_words_otherwise():
    assert MixedScriptWords().word_tokenize("第12条 Civil Code 民法典") == ["第", "12", "条", "Civil", "Code", "民",
                                                                        "法", "典"]
    assert exact_key(Document(text="  第一条\n\n 内容 ", id="x")) == "第一条 内容"


def test_language_identification_labels_and_drops():
    from yunshan.prepare.language import LanguageId

    docs = [Document(text=LAW, id="zh"), Document(text="The court held that the contract was void. " * 4, id="en"),
            Document(text="これは日本語の文章です。裁判所は契約を無効とした。" * 3, id="ja")]
    block = LanguageId(LanguageArgs(keep=["zh"]))
    kept = list(block.run(iter(docs)))
    assert [d.id for d in kept] == ["zh"] and kept[0].metadata["language"] == "zh"
    assert block.stats["dropped_language"].total == 2


def test_traditional_to_simplified():
    from yunshan.prepare.language import TraditionalToSimplified

    out = list(TraditionalToSimplified().run(iter([Document(text="臺灣的法律規定", id="t")])))
    assert out[0].text == "台湾的法律规定"


def test_decontamination_block_drops_a_document_holding_an_item(tmp_path):
    from yunshan.prepare.decontamination import EvalDecontamination

    item = "甲公司与乙公司签订买卖合同后，乙公司未按约定期限交付货物，甲公司有权解除合同并要求赔偿因此造成的全部损失。"
    (tmp_path / "heldout.txt").write_text(item + "\n\n另一段与训练数据毫无关系的评测文字，用来确认只有包含评测题目的文档被删除。\n",
                                          encoding="utf-8")
    docs = [Document(text="新闻：" + item + "法院支持了甲公司的请求。", id="leak"), Document(text=LAW, id="clean")]
    block = EvalDecontamination(DecontaminationArgs(heldout=[f"exam={tmp_path / 'heldout.txt'}"]))
    kept = list(block.run(iter(docs)))
    assert [d.id for d in kept] == ["clean"]
    assert block.stats["dropped_contaminated"].total == 1
