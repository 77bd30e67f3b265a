"""Sample preference sets for `yunshan pref`: finance and legal prompts, each with an answer that is correct and
cites its rule and one that is plausible and wrong.

- legal pairs      TRL's `{"prompt", "chosen", "rejected"}`: consultations about the synthetic codes' articles and
                   criminal cases to sentence. The chosen answer states the rule with its article
                   (`根据《示范民法》第N条的规定，...`) or applies the sentencing guideline step by step; the rejected one
                   is confident and wrong: another value of the same kind of rule (a period of two years where the
                   law says three), a wrong article number beside it, the base term without the adjustments, the
                   neighbouring charge. About 60% are plain strings, the rest message lists (TRL's conversational
                   layout, some with a system turn), some with a `system` field.
- finance scored   openbmb/UltraFeedback's layout, `{"instruction", "completions": [{"response", "overall_score"}]}`:
                   three completions per question in random order: the rule stated and applied (score 8-10), the bare
                   result (5-7), and a wrong rule confidently applied (1-3). The pairing rule `best_worst` makes the
                   first chosen and the last rejected.

The prompts use the consultation and worked-example phrasings of the SFT sets, never the multiple-choice stems of
the evaluation files (a test checks that no evaluation question appears here). `python -m yunshan.samples --out DIR`
writes them under DIR/preference/.
"""

from __future__ import annotations

import random

from .corpus import stream_rng
from .facts import CODES, FINANCE_FACTS, KINDS, LEGAL_FACTS, Fact, article_title, facts_of_kind, on_side
from .formats import OutFile, render_jsonl
from .legal import ADJUSTMENTS, SENTENCING, consultation_turn, consultation_turn_en, criminal_case

SIZES = {"legal_pairs": 400, "finance_scored": 300}

_LEGAL_SYSTEMS = ("你是一名律师，回答时请引用所依据的法条。", "你是一个法律咨询助手，依据示例法规（《示范民法》等）回答。",
                  "You are a legal assistant. Cite the article you rely on.")
_FIN_SYSTEMS = ("你是一名注册会计师，回答时请写出所依据的规则或公式。", "You are a financial analyst. State the rule you apply.")
_TRUE = {(f.zh_term, f.zh_value) for f in LEGAL_FACTS + FINANCE_FACTS}
# The training side of the knowledge base only (facts.EVAL_FACTS): the preference sets are training data, so they
# state and misstate no fact the evaluation sets and held-out texts ask about, and draw every template, name and
# number from the training side too (stream_rng's paths name no "eval" or "heldout").
_LEGAL = tuple(f for f in on_side(LEGAL_FACTS, "train") if f.article)
_FINANCE = on_side(FINANCE_FACTS, "train")


def _wrong_value(rng: random.Random, fact: Fact, lang: str) -> str:
    """Another value of the fact's kind on the training side (plausible: the same sort of period, rate or
    definition), never a true one."""
    if lang == "zh":
        pool = [f.zh_value for f in facts_of_kind(fact.kind, "train")] + list(KINDS[fact.kind].extra_values)
        pool = sorted({v for v in pool if v != fact.zh_value and (fact.zh_term, v) not in _TRUE})
    else:
        pool = sorted({f.en_value for f in facts_of_kind(fact.kind, "train") if f.zh_value != fact.zh_value
                       and f.en_value != fact.en_value})
    return rng.choice(pool)


def _article_en(fact: Fact) -> str:
    code, number = fact.article
    return f"Article {number} of the {CODES[code][1]}"


# ------------------------------------------------------------------------------------------------ legal
def _legal_consultation(rng: random.Random, lang: str) -> tuple[str, str, str]:
    fact = rng.choice(_LEGAL)
    wrong = _wrong_value(rng, fact, lang)
    if lang == "zh":
        q, _ = consultation_turn(rng, fact)
        advice = rng.choice(("", "建议您保留好相关证据。", "如有争议，可以依法向人民法院起诉。", "请注意在法定期限内主张权利。"))
        chosen = f"根据{article_title(*fact.article)}的规定，{fact.zh}。{advice}"
        # a confident wrong rule: sometimes with a wrong article number beside it, which reads just as authoritative
        cite = ""
        if rng.random() < 0.3:
            code, number = fact.article
            cite = f"根据{article_title(code, number + rng.choice((-7, -3, 2, 5, 11)))}的规定，"
        rejected = f"{cite}{fact.zh_term}{fact.zh_rel}{wrong}。" + rng.choice(("这一点您可以放心。", "", "一般都是这样处理的。"))
        return q, chosen, rejected
    q, _ = consultation_turn_en(rng, fact)
    chosen = f"Under {_article_en(fact)}, {fact.en_term} {fact.en_rel} {fact.en_value}."
    rejected = f"{fact.en_term[:1].upper()}{fact.en_term[1:]} {fact.en_rel} {wrong}." + rng.choice(
        ("", " That is settled.", " You can rely on it."))
    return q, chosen, rejected


def _legal_sentencing(rng: random.Random) -> tuple[str, str, str]:
    case = criminal_case(rng)
    q = case.facts_text + rng.choice(("\n被告人构成什么罪？应当判处多长的刑期？", "\n请给出罪名和宣告刑（以月计）。"))
    rule = SENTENCING[case.crime]
    steps = f"依照{article_title('criminal', rule.article)}，被告人{case.defendant}构成{case.crime}罪，基准刑为{case.base}个月"
    if case.factors:
        pct = sum(ADJUSTMENTS[f] for f in case.factors)
        steps += f"；具有{'、'.join(case.factors)}情节，调节比例合计{pct:+d}%"
    chosen = steps + f"，宣告刑为{case.months}个月。"
    if case.factors and case.months != case.base:
        rejected = f"被告人{case.defendant}构成{case.crime}罪，应当判处{case.base}个月。"  # the adjustments forgotten
    else:
        others = {"盗窃": "抢劫", "抢劫": "盗窃", "诈骗": "合同诈骗", "合同诈骗": "诈骗", "职务侵占": "盗窃",
                  "故意伤害": "寻衅滋事", "危险驾驶": "交通肇事"}
        months = case.months + rng.choice((-6, -3, 4, 8, 12))
        rejected = f"被告人{case.defendant}构成{others[case.crime]}罪，应当判处{max(1, months)}个月。"
    return q, chosen, rejected


def legal_pair(rng: random.Random) -> dict:
    """One legal preference record (TRL's layout, standard or conversational)."""
    if rng.random() < 0.3:
        q, chosen, rejected = _legal_sentencing(rng)
        lang = "zh"
    else:
        lang = "zh" if rng.random() < 0.7 else "en"
        q, chosen, rejected = _legal_consultation(rng, lang)
    systems = [s for s in _LEGAL_SYSTEMS if (s[0] < "\u3000") == (lang == "en")]
    system = rng.choice(systems) if rng.random() < 0.3 else None
    if rng.random() < 0.6:
        record = {"prompt": q, "chosen": chosen, "rejected": rejected}
        return {"system": system, **record} if system else record
    prompt = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": q}]
    return {"prompt": prompt, "chosen": [{"role": "assistant", "content": chosen}],
            "rejected": [{"role": "assistant", "content": rejected}]}


# ------------------------------------------------------------------------------------------------ finance
def _calculation(rng: random.Random, lang: str) -> tuple[str, str, str, str]:
    """(question, the rule applied, the bare result, a wrong rule applied) for one of six standard calculations."""
    a = rng.randint(300, 9800)
    b = rng.randint(40, a // 2)
    kind = rng.randrange(6)
    zh = lang == "zh"
    if kind == 0:
        q = (f"某企业本年利润总额为{a}万元，所得税费用为{b}万元，净利润是多少？" if zh else
             f"Total profit is {a} (ten thousand yuan) and income tax expense is {b}. What is net profit?")
        right = (f"净利润等于利润总额减去所得税费用，所以净利润={a}-{b}={a - b}万元。" if zh else
                 f"Net profit equals total profit minus income tax expense: {a} - {b} = {a - b}.")
        bare = f"净利润为{a - b}万元。" if zh else f"Net profit is {a - b}."
        wrong = (f"净利润等于利润总额加上所得税费用，所以净利润={a}+{b}={a + b}万元。" if zh else
                 f"Net profit equals total profit plus income tax expense: {a} + {b} = {a + b}.")
    elif kind == 1:
        g = a - b
        q = (f"某公司营业收入为{a}万元，营业成本为{b}万元，毛利率是多少？" if zh else
             f"Operating revenue is {a} and operating cost is {b}. What is the gross margin?")
        right = (f"毛利率等于毛利除以营业收入，毛利={a}-{b}={g}万元，所以毛利率={g}÷{a}≈{g / a * 100:.2f}%。" if zh else
                 f"Gross margin equals gross profit divided by revenue: ({a} - {b}) / {a} = {g / a * 100:.2f}%.")
        bare = f"毛利率约为{g / a * 100:.2f}%。" if zh else f"The gross margin is {g / a * 100:.2f}%."
        wrong = (f"毛利率等于毛利除以营业成本，所以毛利率={g}÷{b}≈{g / b * 100:.2f}%。" if zh else
                 f"Gross margin equals gross profit divided by cost: {g} / {b} = {g / b * 100:.2f}%.")
    elif kind == 2:
        q = (f"某企业流动资产为{a}万元，流动负债为{b}万元，流动比率是多少？" if zh else
             f"Current assets are {a} and current liabilities are {b}. What is the current ratio?")
        right = (f"流动比率等于流动资产除以流动负债，所以流动比率={a}÷{b}≈{a / b:.2f}。" if zh else
                 f"The current ratio equals current assets divided by current liabilities: {a} / {b} = {a / b:.2f}.")
        bare = f"流动比率约为{a / b:.2f}。" if zh else f"The current ratio is {a / b:.2f}."
        wrong = (f"流动比率等于流动负债除以流动资产，所以流动比率={b}÷{a}≈{b / a:.2f}。" if zh else
                 f"The current ratio equals current liabilities divided by current assets: {b} / {a} = {b / a:.2f}.")
    elif kind == 3:
        q = (f"某公司资产总额为{a}万元，负债总额为{b}万元，资产负债率是多少？" if zh else
             f"Total assets are {a} and total liabilities are {b}. What is the debt-to-asset ratio?")
        right = (f"资产负债率等于负债总额除以资产总额，所以资产负债率={b}÷{a}≈{b / a * 100:.2f}%。" if zh else
                 f"The debt-to-asset ratio equals total liabilities divided by total assets: {b} / {a} = "
                 f"{b / a * 100:.2f}%.")
        bare = f"资产负债率约为{b / a * 100:.2f}%。" if zh else f"The ratio is {b / a * 100:.2f}%."
        wrong = (f"资产负债率等于负债总额除以所有者权益，所以资产负债率={b}÷{a - b}≈{b / (a - b) * 100:.2f}%。" if zh else
                 f"The debt-to-asset ratio equals liabilities divided by equity: {b} / {a - b} = "
                 f"{b / (a - b) * 100:.2f}%.")
    elif kind == 4:
        q = (f"某一般纳税人当期销项税额为{a}万元，进项税额为{b}万元，当期应纳增值税是多少？" if zh else
             f"A general taxpayer has output VAT of {a} and input VAT of {b}. How much VAT is payable?")
        right = (f"一般纳税人的增值税应纳税额等于当期销项税额减去当期进项税额，所以应纳税额={a}-{b}={a - b}万元。" if zh else
                 f"VAT payable equals output VAT minus input VAT: {a} - {b} = {a - b}.")
        bare = f"应纳增值税{a - b}万元。" if zh else f"VAT payable is {a - b}."
        wrong = (f"增值税应纳税额等于销项税额与进项税额之和，所以应纳税额={a}+{b}={a + b}万元。" if zh else
                 f"VAT payable equals output VAT plus input VAT: {a} + {b} = {a + b}.")
    else:
        nin, nout = rng.randint(1, 90), rng.randint(1, 60)
        q = (f"某企业营业利润为{a}万元，营业外收入为{nin}万元，营业外支出为{nout}万元，利润总额是多少？" if zh else
             f"Operating profit is {a}, non-operating income {nin} and non-operating expenses {nout}. What is total "
             "profit?")
        right = (f"利润总额等于营业利润加上营业外收入减去营业外支出，所以利润总额={a}+{nin}-{nout}={a + nin - nout}万元。" if zh
                 else f"Total profit equals operating profit plus non-operating income minus non-operating expenses: "
                      f"{a} + {nin} - {nout} = {a + nin - nout}.")
        bare = f"利润总额为{a + nin - nout}万元。" if zh else f"Total profit is {a + nin - nout}."
        wrong = (f"利润总额等于营业利润减去营业外收入加上营业外支出，所以利润总额={a}-{nin}+{nout}={a - nin + nout}万元。" if zh
                 else f"Total profit equals operating profit minus non-operating income plus non-operating expenses: "
                      f"{a} - {nin} + {nout} = {a - nin + nout}.")
    return q, right, bare, wrong


_ZH_ASK_FIN = ("请解释一下{t}。", "{t}是什么意思？", "关于{t}，准则是怎么规定的？", "能说明一下{t}吗？")
_EN_ASK_FIN = ("What is {t}?", "Could you explain {t}?", "What does the rule say about {t}?")


def _concept(rng: random.Random, lang: str) -> tuple[str, str, str, str]:
    fact = rng.choice(_FINANCE)
    wrong = _wrong_value(rng, fact, lang)
    category = KINDS[fact.kind]
    if lang == "zh":
        q = rng.choice(_ZH_ASK_FIN).format(t=fact.zh_term)
        return (q, f"按照{category.zh_category}的规定，{fact.zh}。", f"{fact.zh_value}。",
                f"{fact.zh_term}{fact.zh_rel}{wrong}。")
    q = rng.choice(_EN_ASK_FIN).format(t=fact.en_term)
    return (q, f"By the rule for this {category.en_category}, {fact.en_term} {fact.en_rel} {fact.en_value}.",
            f"{fact.en_value[:1].upper()}{fact.en_value[1:]}.",
            f"{fact.en_term[:1].upper()}{fact.en_term[1:]} {fact.en_rel} {wrong}.")


def finance_scored(rng: random.Random) -> dict:
    """One finance record with three scored completions (UltraFeedback's layout)."""
    lang = "zh" if rng.random() < 0.7 else "en"
    q, right, bare, wrong = (_calculation if rng.random() < 0.5 else _concept)(rng, lang)
    completions = [{"response": right, "overall_score": rng.choice((8, 9, 10))},
                   {"response": bare, "overall_score": rng.choice((5, 6, 7))},
                   {"response": wrong, "overall_score": rng.choice((1, 2, 3))}]
    rng.shuffle(completions)
    record = {"instruction": q, "completions": completions}
    if rng.random() < 0.2:
        record = {"system": rng.choice([s for s in _FIN_SYSTEMS if (s[0] < "\u3000") == (lang == "en")]),
                  **record}
    return record


# ------------------------------------------------------------------------------------------------ files
def build_preference(seed: int = 0, scale: float = 1.0) -> dict[str, OutFile]:
    """The preference files (path under preference/ -> rendered file)."""
    files = {}
    for name, make in (("legal_pairs", legal_pair), ("finance_scored", finance_scored)):
        n = max(1, round(SIZES[name] * scale))
        files[f"{name}.jsonl"] = render_jsonl([make(stream_rng(seed, "preference", name, i)) for i in range(n)])
    return files

