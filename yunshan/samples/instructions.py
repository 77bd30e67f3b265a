"""Sample SFT sets in the formats yunshan's SFT reader accepts, plus exam data in JEC-QA and C-Eval layouts.

- general alpaca   {"instruction", "input", "output"[, "system"]}: arithmetic word problems (answers computed),
                   rewriting, general-knowledge Q&A (the general facts), translation, sentiment, extraction.
- legal messages   {"messages": [{"role": "system"|"user"|"assistant", "content"}]}: consultations (some
                   multi-turn) and criminal case analyses with the synthetic sentencing model.
- finance ShareGPT {"conversations": [{"from": "system"|"human"|"gpt", "value"}]}: concept questions,
                   calculations, report analysis.
- exam data        JEC-QA records and C-Eval rows with the "sft" phrasings of yunshan.samples.questions, about
                   the training side of the knowledge base (never a fact the eval files ask about).

Conversations always alternate user/assistant after an optional system turn and end with a non-empty
assistant turn. `python -m yunshan.samples --out DIR` writes them under DIR/sft/.
"""

from __future__ import annotations

import random

from . import lexicon as lx
from .benchmarks import (CEVAL_HEADER, FINEVAL_SUBJECTS, _ceval_rows, _cycle_maker, _subject_facts, jecqa_items,
                         jecqa_record)
from .corpus import stream_rng
from .facts import FINANCE_FACTS as _FINANCE
from .facts import GENERAL_FACTS as _GENERAL
from .facts import LEGAL_FACTS as _LEGAL
from .facts import Fact, facts_of_kind, on_side

# SFT data is training data: it states and asks about the training side of the knowledge base only.
FINANCE_FACTS, GENERAL_FACTS, LEGAL_FACTS = (on_side(fs, "train") for fs in (_FINANCE, _GENERAL, _LEGAL))
from .finance import draw_financials, worked_example
from .formats import OutFile, render_csv, render_jsonl
from .legal import consultation_turn, consultation_turn_en, criminal_case, judgment_reasoning
from .questions import unique_items

SIZES = {"general_alpaca": 1200, "legal_messages": 600, "finance_sharegpt": 600}
JECQA_SFT_SIZES = {0: 240, 1: 160}
EXAM_ROWS_PER_SUBJECT = 30

# ------------------------------------------------------------------------------------------------ general
_ZH_REWRITE = (
    ("明天咱们一起去{p}吧，不见不散！", "我们约定明天一同前往{p}，届时准时见面。"),
    ("这家店的{f}真是太好吃了，下次还来！", "这家店的{f}味道很好，值得再次光顾。"),
    ("{c}最近老下雨，烦死了。", "{c}近期降雨频繁，给出行带来了不便。"),
    ("你能帮我看看这个问题不？", "请问您能否帮我看一下这个问题？"),
    ("我{n}点就到，你别急哈。", "我预计{n}点到达，请您不必着急。"),
    ("这电影也太长了吧，看得我都困了。", "这部电影时长较长，观看过程中我感到有些疲倦。"),
    ("{p}那边人超多，挤都挤不进去。", "{p}游客众多，十分拥挤。"),
    ("周末要不要一块儿去{c}玩两天？", "周末是否有意一同前往{c}游玩两天？"),
)
_EN_REWRITE = (
    ("{a} painted the fence.", "The fence was painted by {a}."),
    ("The children planted {n} trees in the park.", "{n} trees were planted in the park by the children."),
    ("{a} wrote the report last week.", "The report was written by {a} last week."),
    ("The storm damaged {n} houses.", "{n} houses were damaged by the storm."),
    ("Can't make it tomorrow, sorry!", "I am sorry, but I will not be able to attend tomorrow."),
    ("Thanks a lot for the help with the move!", "Thank you very much for your help with the move."),
)
_TRANSLATE = (
    ("今天天气很好。", "The weather is nice today."), ("我每天早上七点起床。", "I get up at seven every morning."),
    ("这本书非常有意思。", "This book is very interesting."), ("请问火车站怎么走？", "Excuse me, how do I get to the train station?"),
    ("我们周末去爬山吧。", "Let's go hiking this weekend."), ("他正在厨房里做饭。", "He is cooking in the kitchen."),
    ("这家餐厅的菜很好吃。", "The food at this restaurant is delicious."), ("我喜欢在公园里散步。", "I like walking in the park."),
    ("明天可能会下雨。", "It may rain tomorrow."), ("她会说三种语言。", "She speaks three languages."),
    ("图书馆几点关门？", "What time does the library close?"), ("我的手机没电了。", "My phone has run out of battery."),
    ("请把窗户打开。", "Please open the window."), ("这个周末我要去看望爷爷奶奶。", "I am visiting my grandparents this weekend."),
    ("孩子们在操场上踢足球。", "The children are playing football on the playground."),
    ("这座桥是去年建成的。", "This bridge was completed last year."), ("我正在学习弹钢琴。", "I am learning to play the piano."),
    ("春天来了，花都开了。", "Spring has come and the flowers are in bloom."), ("他每天骑自行车上班。", "He cycles to work every day."),
    ("晚饭后我们一起看了一部电影。", "After dinner we watched a film together."),
)
_NUM_TRANSLATE = (("我有{n}本书。", "I have {n} books."), ("这个房间里有{n}把椅子。", "There are {n} chairs in this room."),
                  ("我们班有{n}名学生。", "There are {n} students in our class."),
                  ("从这里到车站要走{n}分钟。", "It takes {n} minutes to walk from here to the station."))
_SENTIMENT = (
    ("这次旅行太开心了，风景美，吃得也好。", "积极"), ("服务员态度很差，等了一个小时还没上菜。", "消极"),
    ("新买的耳机音质很棒，戴着也舒服。", "积极"), ("快递又晚了三天，包装还破了。", "消极"),
    ("孩子这次考试进步很大，全家都很高兴。", "积极"), ("连着下了一周的雨，心情很低落。", "消极"),
    ("这本小说情节紧凑，一口气就读完了。", "积极"), ("手机用了两个月就开始卡顿，太失望了。", "消极"),
)
_ZH_ASK_GENERAL = {"是": ("{t}是什么？", "请问{t}是什么？", "你知道{t}是什么吗？"), "约为": ("{t}大约是多少？",),
                   "约需": ("{t}大约需要多长时间？",)}
_EN_ASK_GENERAL = {"is": ("What is {t}?",), "are": ("What are {t}?",), "is about": ("Roughly what is {t}?",),
                   "takes about": ("About how long does {t} take?",)}
_SYSTEMS_GENERAL = ("你是一个乐于助人的助手。", "You are a helpful assistant.", "请用简洁准确的语言回答。")


def _arith(rng: random.Random, lang: str) -> tuple[str, str, str]:
    k = rng.randrange(6)
    if k == 0:
        a, b = rng.randint(5, 90), rng.randint(2, 50)
        c = rng.randint(1, a + b - 1)
        if lang == "zh":
            return ("解答下面的应用题。", f"小明有{a}个苹果，妈妈又给了他{b}个，他分给同学{c}个，小明现在还有多少个苹果？",
                    f"{a}+{b}-{c}={a + b - c}，所以小明现在还有{a + b - c}个苹果。")
        return ("Solve the word problem.", f"Tom has {a} apples, gets {b} more and gives away {c}. How many are left?",
                f"{a} + {b} - {c} = {a + b - c}, so Tom has {a + b - c} apples left.")
    if k == 1:
        v, t = rng.randint(30, 120), rng.randint(2, 9)
        if lang == "zh":
            return ("计算下面的问题，并写出过程。", f"一辆汽车以每小时{v}千米的速度行驶了{t}小时，一共行驶了多少千米？",
                    f"路程=速度×时间={v}×{t}={v * t}，所以一共行驶了{v * t}千米。")
        return ("Answer with the working.", f"A car travels at {v} km/h for {t} hours. How far does it go?",
                f"Distance = speed x time = {v} x {t} = {v * t} km.")
    if k == 2:
        p, n = rng.randint(3, 60), rng.randint(2, 9)
        m = ((p * n) // 50 + 1) * 50
        if lang == "zh":
            return ("解答下面的应用题。", f"一本笔记本{p}元，买{n}本，付了{m}元，应找回多少元？",
                    f"{p}×{n}={p * n}元，{m}-{p * n}={m - p * n}元，所以应找回{m - p * n}元。")
        return ("Solve the word problem.", f"A notebook costs {p} yuan. You buy {n} and pay {m} yuan. What change do you get?",
                f"{p} x {n} = {p * n}; {m} - {p * n} = {m - p * n}, so the change is {m - p * n} yuan.")
    if k == 3:
        l, w = rng.randint(3, 40), rng.randint(2, 30)
        if lang == "zh":
            return ("计算下面长方形的面积和周长。", f"一个长方形长{l}米，宽{w}米。",
                    f"面积=长×宽={l}×{w}={l * w}平方米；周长=(长+宽)×2=({l}+{w})×2={(l + w) * 2}米。")
        return ("Find the area and perimeter.", f"A rectangle is {l} m long and {w} m wide.",
                f"Area = {l} x {w} = {l * w} square metres; perimeter = 2 x ({l} + {w}) = {(l + w) * 2} m.")
    if k == 4:
        scores = [rng.randint(60, 100) for _ in range(4)]
        avg = sum(scores) / 4
        if lang == "zh":
            return ("求下面几个数的平均数。", "、".join(map(str, scores)),
                    f"({'+'.join(map(str, scores))})÷4={sum(scores)}÷4={avg:g}，平均数是{avg:g}。")
        return ("Find the mean of these numbers.", ", ".join(map(str, scores)),
                f"({' + '.join(map(str, scores))}) / 4 = {sum(scores)} / 4 = {avg:g}.")
    p, d = rng.randint(8, 90) * 10, rng.randint(5, 9)
    if lang == "zh":
        return ("解答下面的应用题。", f"一件衣服原价{p}元，现在打{d}折出售，现价是多少元？",
                f"{p}×{d}÷10={p * d / 10:g}，所以现价是{p * d / 10:g}元。")
    return ("Solve the word problem.", f"A coat costs {p} yuan and is sold at {100 - d * 10}% off. What is the new price?",
            f"{p} x {d}/10 = {p * d / 10:g}, so it costs {p * d / 10:g} yuan.")


def general_alpaca(rng: random.Random) -> dict:
    """One general instruction record (alpaca layout)."""
    lang = "zh" if rng.random() < 0.7 else "en"
    k = rng.randrange(7)
    if k <= 1:
        ins, inp, out = _arith(rng, lang)
    elif k == 2:
        f = rng.choice(GENERAL_FACTS)
        if lang == "zh":
            ins, inp = rng.choice(_ZH_ASK_GENERAL.get(f.zh_rel, ("关于{t}，你知道些什么？",))).format(t=f.zh_term), ""
            out = f.zh + "。" + rng.choice(("", "这是一个常见的科学常识。", "希望这个回答对你有帮助。"))
        else:
            ins, inp = rng.choice(_EN_ASK_GENERAL.get(f.en_rel, ("Tell me about {t}.",))).format(t=f.en_term), ""
            out = f.en + "."
    elif k == 3:
        if lang == "zh":
            a, b = rng.choice(_ZH_REWRITE)
            kw = dict(p=rng.choice(("公园", "博物馆", "海边", "植物园", "游乐场")), f=rng.choice(("牛肉面", "小笼包", "烤鱼", "馄饨")),
                      c=rng.choice(lx.ZH_CITIES), n=rng.randint(6, 11))
            ins, inp, out = rng.choice(("请把下面这句话改写得更正式一些。", "将下面的口语化表达改写成书面语。")), a.format(**kw), b.format(**kw)
        else:
            a, b = rng.choice(_EN_REWRITE)
            kw = dict(a=lx.en_person(rng), n=rng.randint(3, 90))
            ins = "Rewrite the sentence in the passive voice." if "was" in b or "were" in b else "Rewrite the message formally."
            inp, out = a.format(**kw), b.format(**kw)
    elif k == 4:
        if rng.random() < 0.5:
            zh, en = rng.choice(_TRANSLATE)
        else:
            z, e = rng.choice(_NUM_TRANSLATE)
            n = rng.randint(2, 60)
            zh, en = z.format(n=n), e.format(n=n)
        if rng.random() < 0.5:
            ins, inp, out = rng.choice(("把下面的句子翻译成英文。", "请将下面的中文翻译为英语。")), zh, en
        else:
            ins, inp, out = rng.choice(("Translate the following sentence into Chinese.", "把下面的英文翻译成中文。")), en, zh
    elif k == 5:
        text, label = rng.choice(_SENTIMENT)
        ins, inp, out = "判断下面这句话表达的情感是积极还是消极，只回答“积极”或“消极”。", text, label
    else:
        cities = rng.sample(lx.ZH_CITIES, 3)
        ins = "从下面的句子中找出所有城市名，用顿号隔开。"
        inp = f"今年我去了{cities[0]}、{cities[1]}和{cities[2]}，最喜欢的还是{cities[1]}。"
        out = "、".join(cities)
    rec = {"instruction": ins, "input": inp, "output": out}
    if rng.random() < 0.2:
        rec = {"system": rng.choice(_SYSTEMS_GENERAL), **rec}
    return rec


# ------------------------------------------------------------------------------------------------ legal
_LEGAL_SYSTEMS = ("你是一名经验丰富的律师，请依据法律规定为用户提供准确、易懂的解答。",
                  "你是一个法律咨询助手。以下回答依据的是示例法规（《示范民法》等），仅供学习参考。",
                  "You are a legal assistant. Answer clearly and cite the relevant rule.")


def _related(rng: random.Random, f: Fact) -> Fact:
    """Another training-side fact of f's kind (f itself when it has none)."""
    pool = [g for g in facts_of_kind(f.kind, "train") if g.id != f.id] or [f]
    return rng.choice(pool)


def legal_messages(rng: random.Random) -> dict:
    """One legal conversation (messages layout)."""
    msgs = []
    if rng.random() < 0.5:
        msgs.append({"role": "system", "content": rng.choice(_LEGAL_SYSTEMS)})
    r = rng.random()
    if r < 0.25:
        case = criminal_case(rng)
        q = case.facts_text + rng.choice(("\n请问被告人构成什么罪？大概会被判多久？", "\n请分析本案的罪名和可能的刑期。",
                                          "\n根据上述事实，应当如何定罪量刑？"))
        a = judgment_reasoning(case) + f"\n结论：罪名：{case.crime}；刑期：{case.months}个月。"
        msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
    elif r < 0.75:
        f = rng.choice(LEGAL_FACTS)
        turns = rng.choice((1, 1, 2, 3))
        for t in range(turns):
            q, a = consultation_turn(rng, f)
            if t > 0:
                q = rng.choice(("另外想问一下，", "那么，", "还有一个问题：", "明白了。")) + q
            msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
            f = _related(rng, f)
    else:
        f = rng.choice(LEGAL_FACTS)
        for _ in range(rng.choice((1, 2))):
            q, a = consultation_turn_en(rng, f)
            msgs += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
            f = _related(rng, f)
    return {"messages": msgs}


# ------------------------------------------------------------------------------------------------ finance
_FIN_SYSTEMS = ("你是一名专业的金融分析师，回答要准确、简明。", "你是一个财会知识助手。", "You are a financial analyst assistant.")
_ZH_ASK_FIN = {"是指": ("{t}是什么意思？", "请解释一下{t}。", "什么是{t}？"), "等于": ("{t}怎么计算？", "{t}的计算公式是什么？"),
               "反映": ("{t}反映什么信息？",), "提供": ("{t}提供哪些信息？",), "要求": ("会计上的{t}要求是什么？",),
               "为": ("{t}是多少？",), "适用于": ("什么情况下发表{t}？",)}
_EN_ASK_FIN = {"is": ("What is {t}?", "Explain {t}."), "are": ("What are {t}?",), "equals": ("How is {t} calculated?",),
               "reports": ("What does {t} report?",), "requires": ("What does {t} require?",),
               "applies to": ("When is {t} issued?",), "provide": ("What do {t} provide?",)}


def _fin_concept(rng: random.Random, f: Fact, lang: str) -> tuple[str, str]:
    if lang == "zh":
        q = rng.choice(_ZH_ASK_FIN.get(f.zh_rel, ("请说明{t}。",))).format(t=f.zh_term)
        extra = _related(rng, f)
        a = f.zh + "。" + rng.choice(("", f"与之相关的还有：{extra.zh}。", "理解这一点有助于阅读企业的财务报告。"))
        return q, a
    q = rng.choice(_EN_ASK_FIN.get(f.en_rel, ("Tell me about {t}.",))).format(t=f.en_term)
    return q, f.en + "."


def _fin_report_qa(rng: random.Random, lang: str) -> tuple[str, str]:
    fin = draw_financials(rng)
    w = lambda c: f"{c / 1_000_000:.2f}"  # noqa: E731  (万元)
    gm, nm = fin.gross / fin.revenue * 100, fin.net / fin.revenue * 100
    dr = fin.liabilities / fin.assets * 100
    if lang == "zh":
        q = (f"某公司本年营业收入{w(fin.revenue)}万元，营业成本{w(fin.cost)}万元，利润总额{w(fin.total_profit)}万元，所得税费用"
             f"{w(fin.income_tax)}万元，资产总额{w(fin.assets)}万元，负债总额{w(fin.liabilities)}万元。请计算毛利率、净利润、净利率和资产负债率。")
        a = (f"毛利率=(营业收入-营业成本)÷营业收入=({w(fin.revenue)}-{w(fin.cost)})÷{w(fin.revenue)}≈{gm:.2f}%；"
             f"净利润=利润总额-所得税费用={w(fin.total_profit)}-{w(fin.income_tax)}={w(fin.net)}万元；"
             f"净利率=净利润÷营业收入≈{nm:.2f}%；资产负债率=负债总额÷资产总额≈{dr:.2f}%。")
        return q, a
    m = lambda c: f"{c / 100 / 1e6:.2f}"  # noqa: E731
    q = (f"Revenue is {m(fin.revenue)} million yuan, operating cost {m(fin.cost)} million, total profit "
         f"{m(fin.total_profit)} million and income tax {m(fin.income_tax)} million. Compute the gross margin, net "
         "profit and net margin.")
    a = (f"Gross margin = ({m(fin.revenue)} - {m(fin.cost)}) / {m(fin.revenue)} = {gm:.2f}%. Net profit = "
         f"{m(fin.total_profit)} - {m(fin.income_tax)} = {m(fin.net)} million. Net margin = {nm:.2f}%.")
    return q, a


def finance_sharegpt(rng: random.Random) -> dict:
    """One finance conversation (ShareGPT layout)."""
    conv = []
    if rng.random() < 0.4:
        conv.append({"from": "system", "value": rng.choice(_FIN_SYSTEMS)})
    lang = "zh" if rng.random() < 0.7 else "en"
    for _ in range(rng.choice((1, 1, 2, 3))):
        r = rng.random()
        if r < 0.55:
            q, a = _fin_concept(rng, rng.choice(FINANCE_FACTS), lang)
        elif r < 0.85:
            _, q, a = worked_example(rng, lang)
        else:
            q, a = _fin_report_qa(rng, lang)
        conv += [{"from": "human", "value": q}, {"from": "gpt", "value": a}]
    return {"conversations": conv}


# ------------------------------------------------------------------------------------------------ files
def build_sft(seed: int = 0, scale: float = 1.0) -> dict[str, OutFile]:
    """All SFT files (path under sft/ -> rendered file)."""
    files: dict[str, OutFile] = {}
    for name, make in (("general_alpaca", general_alpaca), ("legal_messages", legal_messages),
                       ("finance_sharegpt", finance_sharegpt)):
        n = max(1, round(SIZES[name] * scale))
        files[f"{name}.jsonl"] = render_jsonl([make(stream_rng(seed, "sft", name, i)) for i in range(n)])
    seen: set = set()
    sizes = {k: max(1, round(v * scale)) for k, v in JECQA_SFT_SIZES.items()}
    for source, items in jecqa_items(seed, seen, style="sft", sizes=sizes, stream="jecqa-sft").items():
        files[f"jecqa/{source}_train.json"] = render_jsonl([jecqa_record(it, f"{source}_{i}", source)
                                                           for i, it in enumerate(items)])
    for subject in FINEVAL_SUBJECTS:
        rng = stream_rng(seed, "sft", "finance_exam", subject)
        make = _cycle_maker(rng, _subject_facts((subject,), "train"), ("forward", "reverse", "statement"), "sft")
        items = unique_items(make, max(1, round(EXAM_ROWS_PER_SUBJECT * scale)), seen)
        files[f"finance_exam/{subject}_train.csv"] = render_csv(CEVAL_HEADER, _ceval_rows(items))
    return files

