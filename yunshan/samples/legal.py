"""Legal documents: synthetic statute excerpts, civil and criminal case summaries, consultations, exam notes.

The statutes are the articles of four synthetic codes built from the knowledge base (yunshan.samples.facts);
they imitate the style of Chinese statutes ("第一百八十八条 向人民法院请求保护民事权利的诉讼时效期间为三年")
but are written for these samples and are not real law. Criminal cases follow a synthetic sentencing model
(`criminal_case`, `SENTENCING`): base term from the amount bracket, then percentage adjustments for surrender,
confession, restitution, recidivism. The same model produces the corpus judgments and the LawBench-style
charge / article / prison-term items, so the rule behind those answers is learnable from the corpus, while the
cases themselves are not in it: a generator on the evaluation side (corpus.SideRandom) narrates its cases with
other wordings, items, names, places and amounts, and statute excerpts quote only the articles of its own side
of the knowledge base (the sentencing guideline's text only on the training side). Civil judgments compute
their amounts (interest, liquidated damages, severance, court fees) from the drawn facts, so they add up.

Used through `yunshan.samples.generate_corpus("legal")`; `python -m yunshan.samples --out DIR` writes it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from . import lexicon as lx
from .facts import CODES, LEGAL_FACTS, Fact, article_title, articles, articles_en, state_fact, rng_side

_BY_TERM = {f.zh_term: f for f in LEGAL_FACTS}


def _fact(term: str) -> Fact:
    return _BY_TERM[term]


def _cite(f: Fact) -> str:
    return article_title(*f.article) if f.article else ""


# ------------------------------------------------------------------------------------------------ sentencing
@dataclass(frozen=True)
class CrimeRule:
    """Synthetic sentencing rule of one offence: brackets of (lower bound yuan, start months, yuan per month, cap)."""

    name: str  # charge without 罪, as LawBench writes it
    article: int
    en: str
    brackets: tuple[tuple[int, int, int, int], ...] = ()


SENTENCING: dict[str, CrimeRule] = {r.name: r for r in (
    CrimeRule("盗窃", 264, "theft", ((3000, 6, 1000, 35), (30000, 36, 5000, 119), (300000, 120, 50000, 180))),
    CrimeRule("诈骗", 266, "fraud", ((5000, 8, 2000, 39), (50000, 40, 8000, 119), (500000, 120, 60000, 180))),
    CrimeRule("职务侵占", 271, "embezzlement", ((60000, 10, 20000, 47), (1000000, 48, 100000, 150))),
    CrimeRule("合同诈骗", 224, "contract fraud", ((20000, 10, 6000, 41), (200000, 42, 30000, 150))),
    CrimeRule("抢劫", 263, "robbery", ((0, 36, 4000, 120),)),
    CrimeRule("故意伤害", 234, "intentional injury"),
    CrimeRule("危险驾驶", 136, "dangerous driving"),
)}

# Adjustments in percent of the base term; several are added together before multiplying (stated in the corpus).
ADJUSTMENTS = {"自首": -20, "坦白": -10, "退赃谅解": -10, "累犯": 20, "从犯": -30}
_ADJ_FACT = {"自首": "对于自首的被告人，可以减少基准刑的比例", "坦白": "对于坦白的被告人，可以减少基准刑的比例",
             "退赃谅解": "对于退赃退赔并取得被害人谅解的被告人，可以减少基准刑的比例", "累犯": "对于累犯，应当增加基准刑的比例",
             "从犯": "对于从犯，应当减少基准刑的比例"}


def base_term(crime: str, amount: int = 0, injury: str = "", alcohol: int = 0) -> int:
    """Base term in months under the synthetic guideline (0 when the amount is below the first threshold)."""
    if crime == "故意伤害":
        return 14 if injury == "轻伤一级" else 8
    if crime == "危险驾驶":
        return min(6, 1 + (alcohol - 80) // 40)
    months = 0
    for low, start, step, cap in SENTENCING[crime].brackets:
        if amount >= low:
            months = min(cap, start + (amount - low) // step)
    return months


def adjusted_term(base: int, factors: list[str]) -> int:
    """Final term: base x (100 + sum of adjustment percents) / 100, rounded half up, at least one month."""
    pct = 100 + sum(ADJUSTMENTS[f] for f in factors)
    return max(1, (base * pct + 50) // 100)


def guideline_articles() -> list[str]:
    """The synthetic sentencing guideline (《示范量刑指导意见》) as Chinese sentences, one per rule."""
    out = []
    names = ("数额较大", "数额巨大", "数额特别巨大")
    for r in SENTENCING.values():
        for i, (low, start, step, cap) in enumerate(r.brackets):
            if r.name == "抢劫":
                out.append(f"抢劫的，以{lx.cn_numeral(start)}个月有期徒刑为量刑起点，抢劫数额每增加{step}元，增加一个月刑期，"
                           f"最高不超过{lx.cn_numeral(cap)}个月。")
            else:
                out.append(f"{r.name}{names[i]}的，以{lx.cn_numeral(start)}个月有期徒刑为量刑起点，在{low}元的基础上数额每增加{step}元，"
                           f"增加一个月刑期，最高不超过{lx.cn_numeral(cap)}个月。")
    out.append("故意伤害致一人轻伤二级的，以八个月有期徒刑为量刑起点；致一人轻伤一级的，以十四个月有期徒刑为量刑起点。")
    out.append("醉酒驾驶机动车，血液酒精含量每一百毫升八十毫克的，以一个月拘役为量刑起点，每增加四十毫克，增加一个月拘役，最高不超过六个月。")
    out.append("有多个量刑情节的，将各情节的调节比例相加后与基准刑相乘，得出宣告刑。")
    for term in _ADJ_FACT.values():
        out.append(_fact(term).zh + "。")
    return out


# ------------------------------------------------------------------------------------------------ criminal cases
_ITEMS = (("手机", "部", 1500, 9000), ("笔记本电脑", "台", 3000, 15000), ("电动自行车", "辆", 1500, 6000),
          ("金项链", "条", 3000, 40000), ("手表", "块", 2000, 80000), ("铜线", "批", 5000, 90000),
          ("白酒", "箱", 3000, 30000), ("摩托车", "辆", 3000, 12000), ("平板电脑", "台", 2000, 8000),
          ("香烟", "条", 3000, 25000), ("电缆", "批", 8000, 200000), ("翡翠手镯", "只", 5000, 500000))
_PLACES = ("{c}市{d}区{s}路一家超市内", "{c}市{d}区{s}街的公交车上", "{c}市{d}区{s}路的一处工地", "{c}市{d}区{s}大道的一家商场",
           "{c}市{d}区{s}路的地铁站出口", "{c}市{d}区{s}街一小区停车场", "{c}市{d}区{s}路的一家网吧")
_PRETEXTS = ("能够帮助办理低息贷款", "可以低价代购手机", "投资其推荐的理财项目可获得高额回报", "能够帮其子女安排工作",
             "自己是网购平台的客服、需要为其办理退款", "自己在外地出了车祸急需用钱", "可以代办驾驶证")
_CHANNELS = ("网络聊天软件", "婚恋网站", "电话", "朋友介绍", "短视频平台")
_WEAPONS = ("木棍", "啤酒瓶", "拳头", "铁管", "砖块")
_POSITIONS = ("出纳", "会计", "仓库保管员", "销售经理", "采购员", "店长")


def _place(rng: random.Random) -> str:
    return rng.choice(_PLACES).format(c=rng.choice(lx.ZH_CITIES), d=rng.choice(lx.ZH_DISTRICTS),
                                      s=rng.choice(lx.ZH_STREETS))


@dataclass
class CriminalCase:
    """One synthetic criminal case: the facts as narrated, the structured answers LawBench tasks ask for."""

    crime: str
    defendant: str
    victim: str
    amount: int
    factors: list[str]
    base: int
    months: int
    facts_text: str  # the 事实 paragraph
    events: list[str] = field(default_factory=list)  # LawBench event types, in order of appearance
    entities: list[tuple[str, str]] = field(default_factory=list)  # (type, value) for extraction

    @property
    def article(self) -> int:
        return SENTENCING[self.crime].article

    @property
    def term_zh(self) -> str:
        """'有期徒刑二年三个月' / '拘役四个月'."""
        if self.crime == "危险驾驶":
            return f"拘役{lx.cn_numeral(self.months)}个月"
        y, m = divmod(self.months, 12)
        return "有期徒刑" + (f"{lx.cn_numeral(y)}年" if y else "") + (f"{lx.cn_numeral(m)}个月" if m else "")


def criminal_case(rng: random.Random, crime: str | None = None) -> CriminalCase:
    """Draw a criminal case; amounts always reach the first threshold so the case is a crime."""
    crime = crime or rng.choice(("盗窃", "盗窃", "盗窃", "诈骗", "诈骗", "职务侵占", "合同诈骗", "抢劫", "故意伤害", "危险驾驶"))
    d, v = lx.zh_anon_person(rng), lx.zh_anon_person(rng)
    while v == d:
        v = lx.zh_anon_person(rng)
    ymd = lx.zh_date(rng, (2014, 2023))
    when = f"{lx.fmt_zh_date(ymd)}{rng.randint(0, 23)}时许"
    ev: list[str] = []
    ent: list[tuple[str, str]] = [("犯罪嫌疑人", d)]
    amount, injury, alcohol = 0, "", 0
    rule = SENTENCING[crime]
    if rule.brackets:
        low = rule.brackets[0][0] or 500
        top = rule.brackets[-1][0] * 2 if len(rule.brackets) > 1 else 60000
        # log-uniform amounts, so every bracket occurs
        amount = int(low * (top / low) ** rng.random()) // 10 * 10 + rng.choice((0, 0, 10, 30))
        amount = max(amount, low)
    if crime == "盗窃":
        # an item that can plausibly be worth the amount (a phone is not worth 300,000 yuan)
        # (from the items of the generator's side, so a training and an evaluation case never steal the same thing)
        side = _ITEMS[getattr(rng, "side", 0)::2]
        fits = ([it for it in side if it[2] <= amount <= it[3]] or [it for it in _ITEMS if it[2] <= amount <= it[3]]
                or [("黄金首饰", "批", 0, 0), ("现金及财物", "宗", 0, 0)])
        item, unit, _, _ = rng.choice(fits)
        place = _place(rng)
        mode = rng.randrange(3)
        if mode == 0:
            # Each fixed phrase in two wordings: training cases draw the first, evaluation cases the second (SideRandom).
            took = rng.choice(("，趁被害人{v}不备，窃取其", "，乘被害人{v}没有注意，偷走了其"))
            valued = rng.choice(("。经价格认证中心鉴定，被盗{item}价值人民币", "。价格认定结论书认定，涉案{item}值人民币"))
            text = f"{when}，被告人{d}在{place}" + took.format(v=v) + f"{item}一{unit}" + valued.format(item=item) + f"{amount}元。"
            ent += [("受害人", v), ("被盗物品", item), ("物品价值", f"{amount}元"), ("时间", when), ("地点", place)]
            ev += ["鉴定"]
        elif mode == 1:
            tool = rng.choice(("螺丝刀", "铁丝", "液压剪", "万能钥匙"))
            text = (f"{when}，被告人{d}携带{tool}撬开被害人{v}家的房门，入户窃得现金人民币{amount}元。")
            ent += [("受害人", v), ("被盗货币", f"{amount}元"), ("作案工具", tool), ("时间", when)]
        else:
            sold = max(100, amount * rng.randint(20, 60) // 100 // 10 * 10)
            sold_to = rng.choice(("，后以{sold}元的价格卖给他人，所得款项已被挥霍。经鉴定，被盗{item}价值人民币",
                                  "，随即以{sold}元销赃，赃款已被其花光。据价格认定，涉案{item}值人民币"))
            text = (f"{when}，被告人{d}在{place}窃取被害人{v}的{item}一{unit}" + sold_to.format(sold=sold, item=item)
                    + f"{amount}元。")
            ent += [("受害人", v), ("被盗物品", item), ("物品价值", f"{amount}元"), ("盗窃获利", f"{sold}元"),
                    ("时间", when), ("地点", place)]
            ev += ["卖出", "获利", "鉴定"]
    elif crime == "诈骗":
        text = (f"{lx.fmt_zh_date(ymd)}起，被告人{d}通过{rng.choice(_CHANNELS)}与被害人{v}取得联系，谎称{rng.choice(_PRETEXTS)}，"
                f"骗取{v}通过银行转账向其支付人民币{amount}元。")
        ev += ["联络", "欺骗", "支付/给付"]
    elif crime == "职务侵占":
        company = lx.zh_company(rng, listed=False)
        text = (f"被告人{d}在担任{company}{rng.choice(_POSITIONS)}期间，利用负责收取货款的职务便利，"
                f"{rng.choice(('截留客户支付的货款', '虚构报销事项', '私自出售单位库存货物'))}，先后将本单位资金共计人民币{amount}元据为己有。")
        ev += ["获利"]
    elif crime == "合同诈骗":
        company = lx.zh_company(rng, listed=False)
        text = (f"{lx.fmt_zh_date(ymd)}，被告人{d}以{company}的名义与被害单位签订{rng.choice(('钢材', '化肥', '电子元件', '煤炭', '建材'))}"
                f"购销合同，在收取对方预付货款人民币{amount}元后，未按约定供货，并更换联系方式逃匿。")
        ev += ["欺骗", "支付/给付"]
    elif crime == "抢劫":
        text = (f"{when}，被告人{d}在{_place(rng)}持{rng.choice(('水果刀', '木棍', '仿真枪'))}拦住被害人{v}，以暴力相威胁，"
                f"要求{v}交出财物，劫得现金及物品共计价值人民币{amount}元。")
        ev += ["要求/请求"]
    elif crime == "故意伤害":
        injury = rng.choice(("轻伤一级", "轻伤二级"))
        text = (f"{when}，被告人{d}在{_place(rng)}因琐事与被害人{v}发生争执，继而用{rng.choice(_WEAPONS)}击打{v}的"
                f"{rng.choice(('头部', '面部', '背部', '手臂'))}，致{v}受伤。经鉴定，{v}的损伤程度为{injury}。")
        ev += ["伤害人身", "受伤", "鉴定"]
    else:  # 危险驾驶
        alcohol = rng.randint(80, 300)
        text = (f"{when}，被告人{d}饮酒后驾驶小型轿车行驶至{rng.choice(lx.ZH_CITIES)}市{rng.choice(lx.ZH_STREETS)}路时，"
                f"被执勤民警查获。经鉴定，{d}血液中的乙醇含量为{alcohol}mg/100ml。")
        ev += ["拘捕", "鉴定"]
    factors: list[str] = []
    if rng.random() < 0.3:
        factors.append("自首")
        text += rng.choice(("案发后，被告人{d}主动到公安机关投案，如实供述了自己的罪行。",
                            "被告人{d}于案发次日自行前往派出所投案，并交代了全部作案经过。")).format(d=d)
        ev.append("供述")
    else:
        if crime != "危险驾驶":
            text += f"{lx.fmt_zh_date(lx.add_days(ymd, rng.randint(1, 90)))}，被告人{d}被公安机关抓获。"
            ev.append("拘捕")
        if rng.random() < 0.6:
            factors.append("坦白")
            text += rng.choice(("到案后，被告人{d}如实供述了上述犯罪事实。", "归案后，被告人{d}对上述事实供认不讳。")).format(d=d)
            ev.append("供述")
    if crime not in ("危险驾驶",) and rng.random() < 0.4:
        factors.append("退赃谅解")
        text += rng.choice(("案发后，被告人{d}已赔偿被害人全部经济损失，并取得了被害人的谅解。",
                            "审理期间，被告人{d}退赔了被害人的全部损失，被害人对其表示谅解。")).format(d=d)
        ev.append("赔偿")
    if rng.random() < 0.12:
        factors.append("累犯")
        text += f"另查明，被告人{d}曾因犯罪被判处有期徒刑，于{ymd[0] - rng.randint(1, 4)}年刑满释放。"
    base = base_term(crime, amount, injury, alcohol)
    seen: list[str] = []
    for e in ev:
        if e not in seen:
            seen.append(e)
    return CriminalCase(crime, d, v, amount, factors, base, adjusted_term(base, factors), text, seen, ent)


def judgment_reasoning(case: CriminalCase) -> str:
    """The court's reasoning and holding for a criminal case, stating the rules that fix the term."""
    rule = SENTENCING[case.crime]
    parts = [f"本院认为，被告人{case.defendant}的行为已构成{case.crime}罪。" + _fact(case.crime + "罪").zh + "。"]
    if rule.brackets and case.crime != "抢劫":
        names = ("数额较大", "数额巨大", "数额特别巨大")
        i = max(j for j, b in enumerate(rule.brackets) if case.amount >= b[0])
        low, start, step, cap = rule.brackets[i]
        parts.append(f"被告人{case.defendant}{case.crime}数额为{case.amount}元，属于{names[i]}。按照《示范量刑指导意见》，以{start}个月为量刑起点，"
                     f"数额每增加{step}元增加一个月，确定基准刑为{case.base}个月。")
    elif case.crime == "抢劫":
        parts.append(f"按照《示范量刑指导意见》，抢劫的以三十六个月为量刑起点，本案抢劫数额{case.amount}元，每增加4000元增加一个月，"
                     f"确定基准刑为{case.base}个月。")
    elif case.crime == "危险驾驶":
        parts.append("按照《示范量刑指导意见》，醉酒驾驶机动车的以一个月拘役为量刑起点，血液酒精含量在每一百毫升八十毫克的基础上每增加四十毫克，"
                     f"增加一个月拘役，确定基准刑为{case.base}个月。" + _fact("在道路上醉酒驾驶机动车的").zh + "。")
    else:
        parts.append(f"按照《示范量刑指导意见》，故意伤害致一人{'轻伤一级的以十四个月' if case.base == 14 else '轻伤二级的以八个月'}"
                     f"有期徒刑为量刑起点，确定基准刑为{case.base}个月。" + _fact("故意伤害他人身体致人轻伤的").zh + "。")
    for f in case.factors:
        d = case.defendant
        parts.append({"自首": f"被告人{d}犯罪以后自动投案，如实供述自己的罪行，是自首。",
                      "坦白": f"被告人{d}到案后如实供述自己的罪行，系坦白。",
                      "退赃谅解": f"被告人{d}已退赔被害人损失并取得被害人{case.victim}的谅解。",
                      "累犯": f"被告人{d}在刑罚执行完毕以后五年以内再犯应当判处有期徒刑以上刑罚之罪，是累犯。",
                      "从犯": f"被告人{d}在共同犯罪中起次要作用，是从犯。"}[f] + _fact(_ADJ_FACT[f]).zh + "。")
    if case.factors:
        pct = sum(ADJUSTMENTS[f] for f in case.factors)
        parts.append(f"综合被告人{case.defendant}的上述情节，调节比例合计为{pct:+d}%，宣告刑为{case.months}个月。")
    parts.append(f"依照{article_title('criminal', case.article)}之规定，判决如下：被告人{case.defendant}犯{case.crime}罪，判处"
                 f"{case.term_zh}，并处罚金人民币{max(1000, case.months * 1000)}元。")
    return "".join(parts)


# ------------------------------------------------------------------------------------------------ civil cases
def court_fee(amount: float) -> int:
    """Case acceptance fee (yuan) by the tiered schedule used in the samples' judgments."""
    tiers = ((10000, 0.0), (100000, 0.025), (200000, 0.02), (500000, 0.015), (1000000, 0.01), (2000000, 0.009),
             (float("inf"), 0.008))
    fee, prev = 50.0, 0.0
    for top, rate in tiers:
        if amount > prev:
            fee += (min(amount, top) - prev) * rate
        prev = top
    return int(round(fee))


def _parties(rng: random.Random) -> tuple[str, str, str, str]:
    """(plaintiff, defendant, plaintiff's counsel firm, court)."""
    p = lx.zh_person(rng) if rng.random() < 0.6 else lx.zh_company(rng, listed=False)
    d = lx.zh_person(rng) if rng.random() < 0.6 else lx.zh_company(rng, listed=False)
    return p, d, lx.zh_law_firm(rng), lx.zh_court(rng)


def _civil_loan(rng: random.Random) -> str:
    p, d, firm, court = _parties(rng)
    principal = rng.randint(20, 2000) * 1000
    rate = rng.choice((4, 6, 8, 10, 12, 15))
    lent = lx.zh_date(rng, (2015, 2021))
    months = rng.choice((3, 6, 12, 18, 24))
    due = lx.add_days(lent, months * 30)
    repaid = rng.choice((0, 0, principal // 10, principal // 4, principal // 2)) // 1000 * 1000
    filed = lx.add_days(due, rng.choice((30, 200, 400, 700, 1000, 1200, 1500)))
    late = lx.days_between(due, filed) > 3 * 365
    rest = principal - repaid
    interest = rest * rate * months // 1200
    claim = rest + interest
    fee = court_fee(claim)
    head = [f"{p}诉{d}民间借贷纠纷案", f"原告：{p}。委托诉讼代理人：{lx.zh_person(rng)}，{firm}律师。", f"被告：{d}。",
            f"审理法院：{court}。",
            f"原告诉讼请求：判令被告偿还借款本金{rest}元及借期内利息{interest}元，合计{claim}元，并承担本案诉讼费用。",
            f"法院查明：{lx.fmt_zh_date(lent)}，被告向原告借款{principal}元，约定年利率{rate}%，借期{months}个月，于{lx.fmt_zh_date(due)}前还清。"
            f"原告当日通过{rng.choice(('银行转账', '手机银行', '现金'))}交付了借款{principal}元。"
            + (f"借款到期后，被告仅归还本金{repaid}元，余款经原告{rng.randint(2, 9)}次催要未还。" if repaid
               else f"借款到期后，被告经原告{rng.randint(2, 9)}次催要，未归还任何款项。")
            + f"原告于{lx.fmt_zh_date(filed)}向本院提起诉讼。"]
    if late:
        holding = (f"本院认为，{_fact('向人民法院请求保护民事权利的诉讼时效期间').zh}。本案借款于{lx.fmt_zh_date(due)}到期，原告在此后三年内未向被告主张权利，"
                   f"亦无诉讼时效中止、中断的情形，被告提出诉讼时效抗辩，本院予以支持。" + _fact("诉讼时效").zh + "。"
                   f"判决如下：驳回原告{p}的诉讼请求。案件受理费{fee}元，由原告负担。")
    else:
        holding = (f"本院认为，合法的借贷关系受法律保护。被告向原告借款{principal}元，已归还{repaid}元，尚欠本金{rest}元，应予偿还。"
                   f"按照约定年利率{rate}%计算，{months}个月借期内利息为{rest}×{rate}%×{months}÷12={interest}元。"
                   f"原告起诉未超过三年的诉讼时效期间。" + _fact("举证责任").zh + "，被告未提交已还清借款的证据，应承担不利后果。"
                   f"判决如下：被告{d}于本判决生效之日起十日内偿还原告{p}借款本金{rest}元及利息{interest}元，合计{claim}元。"
                   f"案件受理费{fee}元，适用简易程序减半收取{fee // 2}元，由被告负担。")
    return "\n".join(head + [holding])


def _civil_sale(rng: random.Random) -> str:
    p, d, firm, court = _parties(rng)
    goods = rng.choice(("钢材", "水泥", "电子元器件", "服装面料", "农用化肥", "办公家具", "医疗耗材", "木材"))
    qty, unit = rng.randint(10, 900), rng.randint(80, 9000)
    total = qty * unit
    paid = total * rng.choice((0, 20, 30, 50, 60)) // 100
    unpaid = total - paid
    signed = lx.zh_date(rng, (2016, 2023))
    due = lx.add_days(signed, rng.randint(30, 120))
    days = rng.randint(30, 500)
    daily = rng.choice((3, 5, 10))  # per ten thousand per day
    penalty = unpaid * daily * days // 10000
    loss = unpaid * 4 * days // 36500  # interest loss at 4%/yr
    excessive = penalty > loss * 130 // 100 and rng.random() < 0.5
    awarded = loss * 130 // 100 if excessive else penalty
    fee = court_fee(unpaid + penalty)
    text = [f"{p}与{d}买卖合同纠纷案", f"原告（出卖人）：{p}。被告（买受人）：{d}。审理法院：{court}。",
            f"法院查明：{lx.fmt_zh_date(signed)}，原、被告签订《{goods}购销合同》，约定原告向被告供应{goods}{qty}吨，单价{unit}元，"
            f"总价款{total}元，被告应于{lx.fmt_zh_date(due)}前付清货款，逾期付款的，每日按未付款的万分之{lx.cn_numeral(daily)}支付违约金。"
            f"原告依约交付了全部货物，被告已付款{paid}元，尚欠{unpaid}元。截至起诉之日，被告逾期付款{days}日。",
            f"本院认为，原、被告于{lx.fmt_zh_date(signed)}签订的{goods}购销合同合法有效，被告未按约定支付货款{unpaid}元，构成违约。{_fact('违约金').zh}。"
            f"按照合同约定计算，违约金为{unpaid}×{daily}÷10000×{days}={penalty}元。"]
    if excessive:
        text.append(f"被告主张约定的违约金过高。{_fact('认定违约金过分高于造成的损失的一般标准').zh}。原告的实际损失按年利率4%计算为{loss}元，"
                    f"约定违约金明显过高，本院依被告申请调整为{awarded}元。")
    text.append(f"判决如下：被告{d}于本判决生效之日起十日内向原告{p}支付货款{unpaid}元及违约金{awarded}元。"
                f"案件受理费{fee}元，由被告负担。")
    text.append(f"{_fact('因合同纠纷提起的诉讼').zh}，本案合同履行地在本院辖区，本院依法享有管辖权。")
    return "\n".join(text)


def _civil_lease(rng: random.Random) -> str:
    p, d, firm, court = _parties(rng)
    rent = rng.randint(8, 200) * 100
    deposit_months = rng.choice((1, 2, 3))
    months_owed = rng.randint(deposit_months + 1, 14)  # arrears exceed the deposit, or there would be no claim
    deposit = rent * deposit_months
    owed = rent * months_owed
    net = owed - deposit
    start = lx.zh_date(rng, (2016, 2023))
    fee = court_fee(max(net, 0))
    return "\n".join((
        f"{p}与{d}房屋租赁合同纠纷案",
        f"原告（出租人）：{p}。被告（承租人）：{d}。审理法院：{court}。",
        f"法院查明：{lx.fmt_zh_date(start)}，双方签订房屋租赁合同，约定被告承租原告位于{lx.zh_address(rng)}的房屋，月租金{rent}元，"
        f"押金{deposit}元。被告自{lx.fmt_zh_date(lx.add_days(start, 180))}起拖欠租金共{months_owed}个月，经原告多次催告仍未支付。",
        f"本院认为，被告拖欠租金{months_owed}个月，合计{rent}×{months_owed}={owed}元，依法应予支付。原告收取的押金{deposit}元可以抵扣欠付租金，"
        f"抵扣后被告尚应支付{net}元。" + _fact("租赁合同的租赁期限").zh + "，本案租赁期限符合法律规定。"
        + _fact("因不动产纠纷提起的诉讼").zh + "。",
        f"判决如下：一、解除原、被告之间的房屋租赁合同；二、被告{d}于本判决生效之日起十五日内向原告支付租金{net}元。"
        f"案件受理费{fee}元，由被告负担。"))


def severance_months(years: int, months: int) -> float:
    """Months of wage due as severance: one per full year; 6-11 extra months count as a year, 1-5 as half."""
    return years + (1.0 if months >= 6 else 0.5 if months > 0 else 0.0)


def _civil_labor(rng: random.Random) -> str:
    worker = lx.zh_person(rng)
    employer = lx.zh_company(rng, listed=False)
    court = lx.zh_court(rng)
    wage = rng.randint(30, 250) * 100
    years, months = rng.randint(0, 15), rng.randint(0, 11)
    if years == 0 and months == 0:
        months = 4
    sev = severance_months(years, months)
    comp = int(sev * wage)
    unlawful = rng.random() < 0.5
    ot_hours = rng.randint(0, 120)
    hourly = wage / 21.75 / 8
    ot_pay = int(round(ot_hours * hourly * 1.5))
    total = comp * (2 if unlawful else 1) + ot_pay
    lines = [f"{worker}与{employer}劳动争议案", f"原告（劳动者）：{worker}。被告（用人单位）：{employer}。审理法院：{court}。",
             f"法院查明：原告于{lx.fmt_zh_date(lx.zh_date(rng, (2005, 2020)))}入职被告处，离职前十二个月平均工资为{wage}元，在被告处工作"
             f"{years}年{months}个月。{lx.fmt_zh_date(lx.zh_date(rng, (2021, 2024)))}，被告{'以原告不能胜任工作为由，未经法定程序' if unlawful else '因经营调整，与原告协商一致'}解除了劳动合同。"
             + (f"另查明，原告在职期间工作日延长工作时间{ot_hours}小时，被告未支付加班工资。" if ot_hours else ""),
             f"本院认为，{_fact('经济补偿').zh}。原告工作年限为{years}年{months}个月，应按{sev:g}个月计算，经济补偿为{sev:g}×{wage}={comp}元。"]
    if unlawful:
        lines.append(f"被告违法解除劳动合同，应当按照经济补偿标准的二倍支付赔偿金，即{comp * 2}元。")
    if ot_hours:
        lines.append(f"{_fact('安排劳动者延长工作时间的，支付的工资报酬不低于工资的比例').zh}。原告的小时工资为{wage}÷21.75÷8≈{hourly:.2f}元，"
                     f"加班工资为{ot_hours}×{hourly:.2f}×150%≈{ot_pay}元。")
    lines.append(f"{_fact('劳动争议申请仲裁的时效期间').zh}，原告在该期间内申请了仲裁，未超过时效。"
                 f"判决如下：被告于本判决生效之日起十日内支付原告{'赔偿金' if unlawful else '经济补偿'}"
                 f"{comp * (2 if unlawful else 1)}元" + (f"、加班工资{ot_pay}元，合计{total}元" if ot_hours else "") + "。案件受理费10元，由被告负担。")
    return "\n".join(lines)


def _civil_enrichment(rng: random.Random) -> str:
    p, d, firm, court = _parties(rng)
    amount = rng.randint(2, 900) * 100 + rng.choice((0, 50))
    when = lx.zh_date(rng, (2016, 2023))
    fee = court_fee(amount)
    return "\n".join((
        f"{p}与{d}不当得利纠纷案", f"原告：{p}。被告：{d}。审理法院：{court}。",
        f"法院查明：{lx.fmt_zh_date(when)}，原告在通过手机银行向他人转账时误将{amount}元转入被告账户。原告发现后{rng.randint(2, 30)}日内{rng.randint(2, 8)}次联系被告要求返还，被告以"
        f"{rng.choice(('款项已经花掉', '不认识原告', '该款系他人还款'))}为由拒不返还。",
        f"本院认为，{_fact('不当得利').zh}。被告取得上述{amount}元没有法律根据，原告因此受到损失，被告应当返还。"
        f"{_fact('举证责任').zh}，被告未能证明其取得该款项具有合法依据。",
        f"判决如下：被告{d}于本判决生效之日起十日内返还原告{p}{amount}元。案件受理费{fee}元，适用简易程序减半收取{fee // 2}元，由被告负担。"))


# ------------------------------------------------------------------------------------------------ zh documents
def _zh_statute(rng: random.Random, focus: list[Fact]) -> str:
    if rng.random() < 0.15 and rng_side(rng) == "train":  # the guideline is applied knowledge: training side only
        lines = guideline_articles()
        k = rng.randint(3, min(8, len(lines)))
        start = rng.randrange(len(lines) - k + 1)
        body = [f"第{lx.cn_numeral(i + 1)}条　{t}" for i, t in enumerate(lines) if start <= i < start + k]
        head = ["《示范量刑指导意见》（节选）"] + (["（本文件为示例规范，仅用于模型训练样本。）"] if rng.random() < 0.3 else [])
        return "\n".join(head + body + ["【相关规定】" + state_fact(rng, focus[0], "zh")])
    f0 = next((f for f in focus if f.article), None)
    code = f0.article[0] if f0 else rng.choice(tuple(CODES))
    arts = articles(code, rng_side(rng))
    idx = [n for n, _ in arts].index(f0.article[1]) if f0 else rng.randrange(len(arts))
    k = rng.randint(3, 9)
    lo = max(0, min(idx - rng.randint(0, k - 1), len(arts) - k))
    lines = [f"《{CODES[code][0]}》（节选）"]
    for n, text in arts[lo:lo + k]:
        lines.append(f"第{lx.cn_numeral(n)}条　{text}")
    if rng.random() < 0.5:
        lines.append(rng.choice(("【理解与适用】", "【条文解读】", "【学习提示】")) + "".join(
            state_fact(rng, f, "zh") for f in focus[:rng.randint(2, 4)]))
    return "\n".join(lines)


_EVIDENCE = ("被害人陈述", "证人证言", "价格认定结论书", "鉴定意见", "现场勘验检查笔录", "监控视频截图", "辨认笔录",
             "银行交易明细", "扣押清单", "户籍证明", "到案经过", "被告人的供述与辩解", "聊天记录截图", "书证")


def _zh_criminal(rng: random.Random, focus: list[Fact]) -> str:
    case = criminal_case(rng)
    court = lx.zh_court(rng)
    proc = rng.choice(("公诉机关指控：", "经审理查明：", "检察院起诉书指控："))
    return "\n".join((
        f"被告人{case.defendant}{case.crime}一案刑事判决书（摘要）",
        f"公诉机关：{court.replace('人民法院', '人民检察院')}。被告人：{case.defendant}，{rng.choice(('男', '女'))}，"
        f"{rng.randint(19, 62)}岁，{rng.choice(('无业', '务工', '个体经营者', '公司职员', '农民'))}。审理法院：{court}。",
        proc + case.facts_text,
        "上述事实，有" + "、".join(rng.sample(_EVIDENCE, rng.randint(3, 6))) + "等证据证实，足以认定。"
        + rng.choice((f"被告人{case.defendant}对指控的犯罪事实和罪名均无异议，当庭表示认罪认罚。",
                      f"被告人{case.defendant}对指控的事实无异议，但辩称其犯罪情节较轻。",
                      f"辩护人{lx.zh_person(rng)}提出被告人{case.defendant}系初犯、偶犯，认罪态度较好，建议从轻处罚的辩护意见，本院予以采纳。", "")),
        judgment_reasoning(case),
        rng.choice((f"如不服本判决，可在接到判决书的第二日起十日内，通过本院或者直接向{court[:court.index('市') + 1]}中级人民法院提出上诉。\n", ""))
        + "【相关知识】" + "".join(state_fact(rng, f, "zh") for f in focus[:rng.randint(1, 3)]),
    ))


_CIVIL = (_civil_loan, _civil_sale, _civil_lease, _civil_labor, _civil_enrichment)


_DEFENCES = ("被告辩称，双方之间的款项已于{y}年部分结清，原告主张的数额过高，请求法院依法驳回原告的部分诉讼请求。",
             "被告辩称，其自{y}年{k}月起经营困难，暂时无力支付，愿意分{n}期履行，请求法院酌情处理。",
             "被告经本院传票传唤，于{y}年{n}月{k}日开庭时未到庭应诉，亦未提交书面答辩意见，本院依法缺席审理。",
             "被告对原告主张的基本事实无异议，但认为违约责任的计算标准过高，应以不超过{n}个月的利息为限。",
             "被告辩称，原告于{y}年提交的{n}份证据不足以证明其主张，请求驳回原告的诉讼请求。")
_CIVIL_EVIDENCE = ("合同原件", "银行转账凭证", "催款通知", "聊天记录", "收据", "送货单", "对账单", "录音资料", "证人证言")


def _zh_civil(rng: random.Random, focus: list[Fact]) -> str:
    lines = rng.choice(_CIVIL)(rng).split("\n")
    extra = [rng.choice(_DEFENCES).format(y=rng.randint(2016, 2024), n=rng.randint(2, 12), k=rng.randint(1, 28)),
             "原告为证明其主张，提交了" + "、".join(rng.sample(_CIVIL_EVIDENCE, rng.randint(2, 4))) + "等证据，被告对证据的真实性"
             + rng.choice(("无异议", "有异议但未提供反驳证据", "部分认可")) + "，本院予以确认。"]
    at = next(i for i, line in enumerate(lines) if line.startswith("法院查明"))
    lines[at:at] = extra  # judgments give the defence and the evidence before the court's findings
    return "\n".join(lines) + "\n" + rng.choice(("【评析】", "【裁判要旨】", "【典型意义】")) + "".join(
        state_fact(rng, f, "zh") for f in focus[:rng.randint(2, 4)])


# Questions a client would ask, by relation of the fact; the lawyer's answer states the fact.
_ZH_ASK = {"是指": ("请问什么是{t}？", "{t}是什么意思？", "经常听人说{t}，它到底指什么？", "能解释一下{t}吗？"),
           "为": ("请问{t}是多少？", "想了解一下，{t}是怎么规定的？"),
           "不得超过": ("{t}最长可以是多久？", "{t}有上限吗？"),
           "，处": ("{t}，会受到什么处罚？", "{t}，法律怎么处罚？"),
           "，由": ("{t}，应该去哪个法院起诉？", "{t}，由哪里的法院管辖？")}
# Situations a client opens with, by code of the fact asked about, so the story fits the question.
_ZH_SITUATIONS = {
    "civil": ("我{y}年借给朋友{a}元，到现在还没还。", "我和房东因为{a}元押金的问题发生了纠纷。",
              "我父亲{y}年去世了，家里因为一套{n}0平方米的房子有争议。", "我{y}年和供货商签了{a}元的合同，对方迟迟不发货。",
              "邻居{y}年装修把我家的墙弄坏了，修好要{a}元。", "我误把{a}元转给了一个陌生人。",
              "我{y}年开店的时候签了一份格式合同，违约金高达{a}元。", "我在二手平台上花{a}元买了一辆车，卖家说车不是他的。"),
    "procedure": ("我想起诉欠我{a}元的朋友。", "我和一家外地公司有{a}元的合同纠纷，准备打官司。",
                  "一审判决{n}天前下来了，我觉得不公平。", "法院{y}年判了对方还我{a}元，可对方一直不给。"),
    "labor": ("我和公司因为{a}元工资的事情闹了矛盾。", "我在公司干了{n}年，被辞退了，没有任何补偿。",
              "我在公司做了{n}年，最近公司要和我解除劳动合同。", "公司上个月让我们加班{n}0个小时，但是不给加班费。",
              "我{y}年刚入职，公司说试用期要{n}个月。"),
    "criminal": ("我朋友{y}年因为打架被派出所带走了。", "我在网上买东西被骗了{a}元。", "我亲戚在单位拿了公家的{a}元，现在被调查了。",
                 "我家价值{a}元的电动车被偷了，小偷已经抓到了。", "我弟弟喝了酒开车被交警查了，酒精含量{n}0毫克。"),
}


_ADVICE_EVIDENCE = ("聊天记录", "转账凭证", "合同原件", "收据", "录音", "照片", "证人联系方式", "工资条", "借条")


def consultation_turn(rng: random.Random, fact: Fact) -> tuple[str, str]:
    """A client question about `fact` and a lawyer's answer that states it (Chinese)."""
    asks = _ZH_ASK.get(fact.zh_rel, ("请问{t}{r}什么？", "关于{t}，法律是怎么规定的？"))
    if fact.kind == "law_period":
        asks = asks + ("{t}是多长？",)
    code = fact.article[0] if fact.article else "civil"
    situation = rng.choice(_ZH_SITUATIONS[code]).format(y=rng.randint(2015, 2024), a=rng.randint(2, 500) * 100,
                                                        n=rng.randint(2, 20)) if rng.random() < 0.6 else ""
    q = situation + rng.choice(asks).format(t=fact.zh_term, r=fact.zh_rel)
    cite = _cite(fact)
    a = (rng.choice(("您好，", "你好，", "", "这个问题很常见。")) + (f"根据{cite}的规定，" if cite and rng.random() < 0.7 else "")
         + fact.zh + rng.choice((
             "。建议您尽快整理好{e1}和{e2}等证据，先与对方协商{n}天左右。", "。如果{n}天内协商不成，可以依法向{c}的人民法院起诉。",
             "，具体还要结合{e1}等材料判断，必要时可以委托律师处理，咨询费一般在{m}元左右。", "，请注意在法定期限内主张权利，最好在{n}天内行动。",
             "。")).format(e1=(ev := rng.sample(_ADVICE_EVIDENCE, 2))[0], e2=ev[1], n=rng.randint(3, 30), c=rng.choice(lx.ZH_CITIES),
                         m=rng.randint(2, 20) * 100))
    return q, a


def _zh_consult(rng: random.Random, focus: list[Fact]) -> str:
    lawyer = lx.zh_person(rng)
    lines = [rng.choice(("法律咨询实录", "律师在线答疑", "【法律问答】", "普法热线问答")) + f"（解答律师：{lawyer}，{lx.zh_law_firm(rng)}）"]
    for f in focus[:rng.randint(3, 5)]:
        q, a = consultation_turn(rng, f)
        lines.append(f"问：{q}")
        lines.append(f"答：{a}")
    return "\n".join(lines)


def _zh_exam(rng: random.Random, focus: list[Fact]) -> str:
    area = {"civil": "民法", "criminal": "刑法", "procedure": "民事诉讼法", "labor": "劳动法"}
    a0 = focus[0].article[0] if focus[0].article else "civil"
    lines = [f"法律职业资格考试{area[a0]}考点梳理（{rng.randint(1, 60)}）"]
    for i, f in enumerate(focus[:rng.randint(5, 8)], 1):
        lines.append(f"{i}. {f.zh_term}：" + state_fact(rng, f, "zh") + (f"（见{_cite(f)}）" if f.article and rng.random() < 0.6 else ""))
    if rng.random() < 0.6:
        case = criminal_case(rng)
        lines.append(f"【案例】{case.facts_text}问：被告人{case.defendant}的行为构成何罪？应如何量刑？")
        lines.append(f"【分析】构成{case.crime}罪。基准刑为{case.base}个月，" + (
            f"具有{'、'.join(case.factors)}情节，" if case.factors else "无法定从轻或从重情节，") + f"宣告刑为{case.months}个月。")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------ en documents
def _en_statute(rng: random.Random, focus: list[Fact]) -> str:
    f0 = next((f for f in focus if f.article), None)
    code = f0.article[0] if f0 else rng.choice(tuple(CODES))
    arts = articles_en(code, rng_side(rng))
    idx = [n for n, _ in arts].index(f0.article[1]) if f0 else rng.randrange(len(arts))
    k = rng.randint(3, 8)
    lo = max(0, min(idx - rng.randint(0, k - 1), len(arts) - k))
    lines = [f"{CODES[code][1]}, Articles {arts[lo][0]}-{arts[min(lo + k, len(arts)) - 1][0]} (a synthetic model code written "
             "for training samples)"]
    for n, text in arts[lo:lo + k]:
        lines.append(f"Article {n}. {text}")
    return "\n".join(lines)


def _en_case(rng: random.Random, focus: list[Fact]) -> str:
    p, d = lx.en_person(rng), lx.en_person(rng)
    principal = rng.randint(5, 500) * 1000
    rate = rng.choice((4, 6, 8, 10, 12))
    months = rng.choice((6, 12, 24))
    interest = principal * rate * months // 1200
    lent = lx.zh_date(rng, (2015, 2022))
    late = rng.random() < 0.25
    lines = [f"{p} v. {d} (loan dispute) - case summary",
             f"On {lx.fmt_en_date(lent)} the defendant borrowed {principal:,} yuan from the plaintiff at {rate}% a year for "
             f"{months} months and did not repay.",
             f"The plaintiff claimed the principal and interest of {principal:,} x {rate}% x {months}/12 = {interest:,} yuan."]
    if late:
        lines.append("The claim was filed more than three years after the loan fell due and the defendant pleaded the "
                     "statute of limitations. " + _fact("向人民法院请求保护民事权利的诉讼时效期间").en + ". The claim was dismissed.")
    else:
        lines.append(f"The claim was brought within the statute of limitations, {rng.randint(2, 30)} months after the due "
                     f"date. The court held that the loan was valid and ordered the defendant to pay "
                     f"{principal + interest:,} yuan within ten days. " + _fact("举证责任").en + ".")
    lines.append("Comment: " + " ".join(state_fact(rng, f, "en") for f in focus[:rng.randint(2, 4)]))
    return "\n".join(lines)


_EN_ASK = {"is": ("What is {t}?", "Could you explain {t}?", "I keep hearing about {t}. What is it?"),
           "are": ("What are {t}?", "Could you explain {t}?"),
           "may not exceed": ("How long can {t} be?",), "is punished by": ("How is {t} punished?",),
           "is heard by": ("Which court hears {t}?",), "is heard exclusively by": ("Which court hears {t}?",)}


def consultation_turn_en(rng: random.Random, fact: Fact) -> tuple[str, str]:
    """English counterpart of `consultation_turn`."""
    q = rng.choice(_EN_ASK.get(fact.en_rel, ("What does the law say about {t}?",))).format(t=fact.en_term)
    a = rng.choice(("", "In short: ")) + fact.en + ". " + rng.choice((
        f"Keep the {rng.choice(('contract', 'receipts', 'messages', 'bank records'))} as evidence and try to settle within {rng.randint(3, 30)} days.",
        f"If talks fail after {rng.randint(3, 30)} days you can sue in the people's court of {rng.choice(lx.ZH_CITIES)}.",
        f"The details matter, so consider a consultation; fees are often around {rng.randint(2, 20) * 100} yuan.", ""))
    return q, a.strip()


def _en_consult(rng: random.Random, focus: list[Fact]) -> str:
    lines = [f"Legal Q&A with {lx.en_person(rng)} of {lx.en_firm(rng, 'law')}"]
    for f in focus[:rng.randint(2, 4)]:
        q, a = consultation_turn_en(rng, f)
        lines += [f"Q: {q}", f"A: {a}"]
    return "\n".join(lines)


def _en_exam(rng: random.Random, focus: list[Fact]) -> str:
    lines = [f"Bar exam notes, unit {rng.randint(1, 50)}"]
    for f in focus[:rng.randint(5, 8)]:
        cite = f"Article {f.article[1]} of the {CODES[f.article[0]][1]}: " if f.article and rng.random() < 0.6 else ""
        lines.append(f"- {cite}{state_fact(rng, f, 'en')}")
    return "\n".join(lines)


_ZH_KINDS = (("statute", _zh_statute, 2), ("criminal_judgment", _zh_criminal, 2), ("civil_judgment", _zh_civil, 3),
             ("consultation", _zh_consult, 2), ("exam_notes", _zh_exam, 2))
_EN_KINDS = (("statute", _en_statute, 2), ("case_summary", _en_case, 2), ("consultation", _en_consult, 2),
             ("exam_notes", _en_exam, 2))


def legal_document(rng: random.Random, lang: str, focus: list[Fact]) -> tuple[str, str]:
    """One legal document in `lang` that states (at least the first of) the `focus` facts. Returns (kind, text)."""
    kinds = _ZH_KINDS if lang == "zh" else _EN_KINDS
    kind, gen, _ = rng.choices(kinds, weights=[k[2] for k in kinds])[0]
    return kind, gen(rng, focus)
