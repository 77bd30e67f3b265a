"""Multiple-choice items built from the knowledge base, in two phrasing styles: "eval" and "sft".

The evaluation files (benchmarks.py) use the "eval" stems and the SFT exam data (instructions.py) the "sft"
stems, and each style draws its facts and options from its own side of the knowledge base (facts.EVAL_FACTS: "eval"
items from the evaluation side, "sft" items from the training side), so an evaluation item shares neither a
question text nor a fact with the SFT data. Item forms:

- forward:   term + relation, pick the value        资产负债表反映（ ）。
- reverse:   value, pick the term (definitional kinds only)
- statement: one true statement among three false ones made by pairing terms with other facts' values
- multi:     JEC-QA style, one to three true statements
- case:      a synthetic scenario (crime, civil concept) whose answer is a term of the knowledge base

Distractors are values (or terms) of other facts of the same kind and side, so every option reads like a plausible
answer. Each item records the facts that make its correct options true (`fact_ids`), which the tests use to check
that an evaluation item asks about the evaluation side only. The case forms put a scenario to the model: a criminal
case of the sentencing model (legal.py; the offences, amount thresholds and sentencing factors stay on the training
side, so what such an item tests is applying a rule the corpus teaches to a case it never saw) or a legal-concept
scenario (each side has its own half of the scenarios); names, places and amounts come from the item's side. The
one thing both sides share is the theft amount-bracket question's four options, the code's fixed bracket names.
Nothing to run on its own.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from . import lexicon as lx
from .facts import ALL_FACTS, KINDS, LEGAL_FACTS, Fact, facts_of_kind
from .legal import SENTENCING, criminal_case

LETTERS = "ABCD"
_TRUE_PAIRS = {(f.zh_term, f.zh_value) for f in ALL_FACTS.values()}


@dataclass(frozen=True)
class MCItem:
    """A four-option item; `answer` holds one letter for single choice, several for JEC-QA multi-answer."""

    question: str
    options: tuple[str, str, str, str]
    answer: tuple[str, ...]
    fact_ids: tuple[str, ...]
    form: str
    explanation: str

    @property
    def key(self) -> tuple:
        """Identity used to keep items unique within and across files."""
        return (self.question, self.options)


def _place(rng: random.Random, correct: list[str], wrong: list[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    opts = [(c, True) for c in correct] + [(w, False) for w in wrong]
    rng.shuffle(opts)
    return tuple(o for o, _ in opts), tuple(LETTERS[i] for i, (_, ok) in enumerate(opts) if ok)


def _side(style: str) -> str:
    """Evaluation items draw on the evaluation side of the knowledge base, SFT items on the training side."""
    return "eval" if style == "eval" else "train"


def _kin(kind: str, style: str) -> list[Fact]:
    """Facts of a kind for options: the style's side only (an item never names a fact of the other side, see
    askable)."""
    return list(facts_of_kind(kind, _side(style)))


def askable(fact: Fact, style: str = "eval") -> bool:
    """Whether a fact's kind has enough values and facts on the style's side for three wrong options and false
    statements without naming a fact of the other side (evaluation items ask only about such facts)."""
    return (len(_values(fact.kind, fact.zh_value, style)) >= 3 and len(_kin(fact.kind, style)) >= 2
            and len(_false_statements(fact.kind, style)) >= 4)


def _values(kind: str, exclude: str, style: str = "eval") -> list[str]:
    """Distractor values: the side's values and the kind's extra values."""
    side = _side(style)
    seen: list[str] = []
    ordered = [f.zh_value for f in facts_of_kind(kind, side)] + list(KINDS[kind].extra_values)
    for v in ordered:
        if v != exclude and v not in seen:
            seen.append(v)
    return seen


# ------------------------------------------------------------------------------------------------ stems
_STEMS = {
    "eval": {
        "forward": ("{t}{r}（ ）。",),
        "reverse_def": ("“{v}”指的是（ ）。",),
        "reverse": ("{r}{v}的是（ ）。",),
        "statement": ("下列关于{c}的表述中，正确的是（ ）。",),
        "multi": ("关于{c}，下列哪些说法是正确的？",),
        "crime": ("{s}被告人{d}的行为构成（ ）。",),
        "bracket": ("被告人{d}盗窃他人财物，经鉴定价值人民币{a}元。依照《示范刑法》，该盗窃数额属于（ ）。",),
        "case_multi": ("{s}关于本案，下列说法正确的是：",),
    },
    "sft": {
        "forward": ("根据所学知识，{t}{r}____。", "请选出正确答案：{t}{r}哪一项？"),
        "reverse_def": ("以下哪一个概念的含义是“{v}”？", "“{v}”，这描述的是下列哪个概念？"),
        "reverse": ("下列选项中，{r}{v}的是哪一项？",),
        "statement": ("以下说法中，哪一项是正确的？", "判断下列关于{c}的说法，选出正确的一项。"),
        "multi": ("下列关于{c}的说法中，正确的有哪些？", "请选出下列说法中所有正确的选项。"),
        "crime": ("{s}对被告人{d}应当以什么罪名定罪？",),
        "bracket": ("某人窃取他人财物价值{a}元，按照《示范刑法》的标准，其盗窃数额应认定为哪一档？",),
        "case_multi": ("{s}请判断下列关于本案的说法，选出所有正确的选项。",),
    },
}


def _stem(rng: random.Random, style: str, form: str, **kw: str) -> str:
    return rng.choice(_STEMS[style][form]).format(**kw)


def _explain(fact: Fact, letters: tuple[str, ...]) -> str:
    return f"本题考查{fact.zh_term}。{fact.zh}。故本题选{''.join(letters)}。"


# ------------------------------------------------------------------------------------------------ fact forms
def forward(rng: random.Random, fact: Fact, style: str = "eval") -> MCItem:
    """Pick the value of `fact` among values of its kind."""
    wrong = _first(rng, _values(fact.kind, fact.zh_value, style), 3)
    opts, ans = _place(rng, [fact.zh_value], wrong)
    return MCItem(_stem(rng, style, "forward", t=fact.zh_term, r=fact.zh_rel), opts, ans, (fact.id,), "forward",
                  _explain(fact, ans))


def reverse(rng: random.Random, fact: Fact, style: str = "eval") -> MCItem:
    """Pick the term whose value is given (only for kinds where KINDS[kind].reverse)."""
    terms = [f.zh_term for f in _kin(fact.kind, style) if f.zh_term != fact.zh_term and f.zh_value != fact.zh_value]
    opts, ans = _place(rng, [fact.zh_term], _first(rng, terms, 3))
    form = "reverse_def" if fact.zh_rel == "是指" else "reverse"
    return MCItem(_stem(rng, style, form, v=fact.zh_value, r=fact.zh_rel), opts, ans, (fact.id,), "reverse",
                  _explain(fact, ans))


def _first(rng: random.Random, pool: list, k: int) -> list:
    """k entries drawn from the front of `pool`: from its first max(k, 4) entries (the side's own come first)."""
    return rng.sample(pool[:max(k, 4)], k)


def _false_statements(kind: str, style: str = "eval") -> list[str]:
    """Every statement pairing a term of `kind` with a value of another fact of the kind that is false (not a fact),
    from the style's side."""
    out = []
    for g in _kin(kind, style):
        for v in _values(kind, g.zh_value, style):
            s = f"{g.zh_term}{g.zh_rel}{v}"
            if (g.zh_term, v) not in _TRUE_PAIRS and s not in out:
                out.append(s)
    return out


def _false_statement(rng: random.Random, kind: str, avoid: set[str], style: str = "eval") -> str:
    """A false statement of `kind` (_false_statements) not in `avoid`."""
    return rng.choice([s for s in _false_statements(kind, style) if s not in avoid])


def statement(rng: random.Random, fact: Fact, style: str = "eval") -> MCItem:
    """One true statement (the fact) among three false ones of the same kind."""
    avoid = {fact.zh}
    wrong = []
    for _ in range(3):
        wrong.append(_false_statement(rng, fact.kind, avoid, style))
        avoid.add(wrong[-1])
    opts, ans = _place(rng, [fact.zh], wrong)
    return MCItem(_stem(rng, style, "statement", c=KINDS[fact.kind].zh_category), opts, ans, (fact.id,),
                  "statement", f"{fact.zh}，其他选项的表述与相应概念不符。故本题选{ans[0]}。")


def multi(rng: random.Random, fact: Fact, style: str = "eval", n_true: int | None = None) -> MCItem:
    """JEC-QA style: `fact` plus up to two more true statements of its kind, the rest false."""
    n_true = n_true or rng.choice((1, 2, 2, 3))
    others = [f for f in facts_of_kind(fact.kind, _side(style)) if f.id != fact.id]
    trues = [fact] + rng.sample(others, min(n_true - 1, len(others)))
    avoid = {f.zh for f in trues}
    wrong = []
    for _ in range(4 - len(trues)):
        wrong.append(_false_statement(rng, fact.kind, avoid, style))
        avoid.add(wrong[-1])
    opts, ans = _place(rng, [f.zh for f in trues], wrong)
    return MCItem(_stem(rng, style, "multi", c=KINDS[fact.kind].zh_category), opts, ans, tuple(f.id for f in trues),
                  "multi", "".join(f.zh + "。" for f in trues) + f"故本题选{''.join(ans)}。")


def fact_item(rng: random.Random, fact: Fact, form: str, style: str = "eval") -> MCItem:
    """Dispatch on form name: forward, reverse (falls back to statement), statement, multi."""
    if form == "reverse" and (not KINDS[fact.kind].reverse or len(
            [f for f in _kin(fact.kind, style) if f.zh_value != fact.zh_value]) < 3):
        form = "statement"
    return {"forward": forward, "reverse": reverse, "statement": statement, "multi": multi}[form](rng, fact, style)


# ------------------------------------------------------------------------------------------------ case forms
_BY_TERM = {f.zh_term: f for f in LEGAL_FACTS}
# Scenario templates for concepts: (scenario, eval question, sft question); {a}/{b} are people, {m} an amount.
# The answer is always the concept term; distractors are other terms of its kind.
_SCENARIOS = {
    "不当得利": ("{a}通过手机银行转账时，误将{m}元转入{b}的账户，{b}拒不返还。",
             "{a}请求{b}返还该款项的依据是（ ）。", "{a}可以基于什么请求{b}返还？"),
    "无因管理": ("{a}外出期间，邻居{b}发现{a}家水管破裂，在没有约定的情况下自行找人维修并垫付了{m}元维修费。",
             "{b}的行为属于（ ）。", "{b}的行为在法律上应如何定性？"),
    "表见代理": ("{b}原为某公司业务员，离职后仍持有盖有公司公章的空白合同书，并以公司名义与{a}签订合同，{a}有理由相信{b}有代理权。",
             "{b}的代理行为属于（ ）。", "{b}以公司名义签订合同的行为应如何认定？"),
    "善意取得": ("{b}将借用{a}的电动车以合理价格卖给不知情的{c}并已交付。",
             "{c}取得该电动车所有权的依据是（ ）。", "{c}为什么能取得该电动车的所有权？"),
    "留置权": ("{a}将汽车交给{b}经营的修理厂修理，事后拒付修理费{m}元，{b}扣留了该汽车。",
            "{b}扣留汽车所依据的权利是（ ）。", "{b}可以扣留汽车，依据的是什么权利？"),
    "同时履行抗辩权": ("{a}与{b}约定一手交钱一手交货，{b}未付款即要求{a}交货，{a}拒绝交货。",
                "{a}拒绝交货行使的是（ ）。", "{a}拒绝交货是在行使什么权利？"),
    "不安抗辩权": ("{a}与{b}约定{a}先交货，交货前{a}有确切证据证明{b}已经转移财产、逃避债务，{a}中止交货。",
              "{a}中止交货行使的是（ ）。", "{a}中止交货的依据是什么权利？"),
    "代位权": ("{b}欠{a}{m}元到期未还，{c}欠{b}的款项也已到期，{b}一直不向{c}主张，影响了{a}债权的实现。",
            "{a}以自己的名义向{c}主张权利，行使的是（ ）。", "{a}可以以自己的名义向{c}行使什么权利？"),
    "缔约过失责任": ("{b}在与{a}磋商合同时故意隐瞒与订立合同有关的重要事实，导致合同未能订立，{a}为此支出了{m}元考察费用。",
               "{b}应当承担的是（ ）。", "{b}需要对{a}承担什么责任？"),
    "正当防卫": ("{a}深夜遭{b}持刀抢劫，{a}夺下刀具将{b}刺伤，制止了正在进行的抢劫。",
             "{a}的行为属于（ ）。", "对{a}刺伤{b}的行为应当如何认定？"),
    "紧急避险": ("{a}为躲避失控冲来的货车，不得已冲入路边商店，撞坏了一台价值{m}元的展示柜。",
             "{a}的行为属于（ ）。", "{a}撞坏展示柜的行为在刑法上如何定性？"),
    "自首": ("{a}盗窃他人财物后，主动到派出所投案，如实供述了自己的罪行。", "{a}的情形属于（ ）。", "{a}具有什么量刑情节？"),
    "犯罪中止": ("{a}入户盗窃时，看到屋内老人生病卧床，自动放弃盗窃离开。", "{a}的情形属于（ ）。", "{a}的犯罪形态是什么？"),
    "犯罪未遂": ("{a}撬门盗窃时被巡逻民警当场抓获，由于意志以外的原因未能得逞。", "{a}的情形属于（ ）。", "{a}的犯罪形态是什么？"),
    "累犯": ("{a}因盗窃罪被判处有期徒刑二年，刑满释放后第三年又犯抢劫罪，应当判处有期徒刑以上刑罚。",
           "{a}的情形属于（ ）。", "{a}具有什么法定从重情节？"),
}


def case_concept(rng: random.Random, term: str, style: str = "eval") -> MCItem:
    """A scenario whose legal characterisation is the concept `term` (one of CASE_TERMS)."""
    fact = _BY_TERM[term]
    names = {"a": lx.zh_person(rng), "b": lx.zh_person(rng), "c": lx.zh_person(rng), "m": rng.randint(3, 900) * 100}
    scenario, q_eval, q_sft = _SCENARIOS[term]
    q = scenario.format(**names) + (q_eval if style == "eval" else q_sft).format(**names)
    others = [f.zh_term for f in facts_of_kind(fact.kind) if f.zh_term != term]
    opts, ans = _place(rng, [term], rng.sample(others, 3))
    return MCItem(q, opts, ans, (fact.id,), "case", f"{fact.zh}。本案情形符合{term}的特征，故本题选{ans[0]}。")


CASE_TERMS = tuple(_SCENARIOS)


def case_crime(rng: random.Random, style: str = "eval") -> MCItem:
    """A criminal case narrative; pick the offence."""
    case = criminal_case(rng)
    fact = _BY_TERM[case.crime + "罪"]
    others = [f.zh_term for f in facts_of_kind("law_crime") if f.zh_term != fact.zh_term]
    opts, ans = _place(rng, [fact.zh_term], rng.sample(others, 3))
    return MCItem(_stem(rng, style, "crime", s=case.facts_text, d=case.defendant), opts, ans, (fact.id,), "crime",
                  f"{fact.zh}。被告人的行为符合{fact.zh_term}的构成要件，故本题选{ans[0]}。")


_BRACKETS = ("数额较大", "数额巨大", "数额特别巨大")


def case_bracket(rng: random.Random, style: str = "eval") -> MCItem:
    """Theft amount -> bracket (数额较大 / 巨大 / 特别巨大 / not yet 较大), from the synthetic thresholds."""
    lows = [b[0] for b in SENTENCING["盗窃"].brackets]
    which = rng.randrange(4)
    amount = (rng.randint(100, lows[0] - 1) if which == 0 else
              rng.randint(lows[which - 1], (lows[which] - 1) if which < 3 else lows[2] * 5))
    correct = "尚未达到数额较大的标准" if which == 0 else _BRACKETS[which - 1]
    wrong = [x for x in ("尚未达到数额较大的标准",) + _BRACKETS if x != correct]
    opts, ans = _place(rng, [correct], wrong)
    thresholds = [f for f in facts_of_kind("law_threshold") if f.zh_term.startswith("盗窃")]
    return MCItem(_stem(rng, style, "bracket", d=lx.zh_anon_person(rng), a=str(amount)), opts, ans,
                  tuple(f.id for f in thresholds), "bracket",
                  "".join(f.zh + "。" for f in thresholds) + f"本案数额为{amount}元，故本题选{ans[0]}。")


def case_multi(rng: random.Random, style: str = "eval") -> MCItem:
    """JEC-QA case analysis: statements about a criminal case (offence, bracket, surrender, recidivism)."""
    case = criminal_case(rng, rng.choice(("盗窃", "盗窃", "诈骗", "职务侵占", "合同诈骗")))
    crime_fact = _BY_TERM[case.crime + "罪"]
    d = case.defendant
    other_crime = rng.choice([c for c in ("盗窃", "诈骗", "抢夺", "侵占", "敲诈勒索") if c != case.crime])
    brackets = SENTENCING[case.crime].brackets
    i = max(j for j, b in enumerate(brackets) if case.amount >= b[0])
    wrong_bracket = rng.choice([b for j, b in enumerate(_BRACKETS[:len(brackets)]) if j != i] or ["数额特别巨大"])
    cands = [(f"{d}的行为构成{case.crime}罪", True), (f"{d}的行为构成{other_crime}罪", False),
             (f"{d}的{case.crime}数额属于{_BRACKETS[i]}", True), (f"{d}的{case.crime}数额属于{wrong_bracket}", False),
             (f"{d}具有自首情节", "自首" in case.factors), (f"{d}构成累犯", "累犯" in case.factors)]
    picked = [cands[0]] + rng.sample(cands[1:], 3)
    opts, ans = _place(rng, [s for s, ok in picked if ok], [s for s, ok in picked if not ok])
    ids = [crime_fact.id] + [f.id for f in facts_of_kind("law_threshold") if f.zh_term.startswith(case.crime)]
    return MCItem(_stem(rng, style, "case_multi", s=case.facts_text), opts, ans, tuple(ids), "case_multi",
                  f"{crime_fact.zh}。本案数额{case.amount}元，属于{_BRACKETS[i]}。故本题选{''.join(ans)}。")


def case_item(rng: random.Random, style: str = "eval") -> MCItem:
    """A random single-answer case item: concept scenario, offence or theft bracket."""
    r = rng.random()
    if r < 0.5:
        return case_concept(rng, rng.choice(CASE_TERMS), style)
    if r < 0.8:
        return case_crime(rng, style)
    return case_bracket(rng, style)


def unique_items(make, n: int, seen: set, max_tries: int = 50) -> list[MCItem]:
    """Call `make(k)` for k = 0, 1, ... until n items whose keys are not in `seen` (updated in place)."""
    out: list[MCItem] = []
    k = 0
    while len(out) < n:
        if k > n * max_tries:
            raise RuntimeError(f"could not build {n} unique items (got {len(out)})")
        item = make(k)
        k += 1
        if item.key not in seen:
            seen.add(item.key)
            out.append(item)
    return out


def balance_answers(items: list[MCItem], rng: random.Random, seen: set) -> list[MCItem]:
    """The same single-answer items with the correct option moved so that every letter is the answer equally often
    (counts differ by at most one, and the letters that get the extra items are drawn at random, so small sets
    do not all favour A; which item gets which letter is shuffled). A set whose answers lean to one letter lets
    "always A" beat chance, which would make a small model's accuracy misleading. The new keys join `seen` (the
    old ones stay), so later items stay unique against both orders."""
    start = rng.randrange(len(LETTERS))
    targets = [LETTERS[(start + i) % len(LETTERS)] for i in range(len(items))]
    rng.shuffle(targets)
    out = []
    for item, target in zip(items, targets):
        (old,) = item.answer
        i, j = LETTERS.index(old), LETTERS.index(target)
        options = list(item.options)
        options[i], options[j] = options[j], options[i]
        suffix = f"选{old}。"
        if not item.explanation.endswith(suffix):
            raise ValueError(f"explanation does not end with {suffix!r}: {item.explanation!r}")
        moved = replace(item, options=tuple(options), answer=(target,),
                        explanation=item.explanation[: -len(suffix)] + f"选{target}。")
        seen.add(moved.key)
        out.append(moved)
    return out
