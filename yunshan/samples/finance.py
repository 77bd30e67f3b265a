"""Finance documents: announcements, periodic-report excerpts, market commentary and exam notes, zh and en.

Figures are internally consistent (revenue - cost = gross profit, total profit - tax = net profit, assets =
liabilities + equity, dividend totals = shares x rate, ...) because every document is rendered from one drawn set
of integer amounts (cents). Each document also states a few facts of the knowledge base (yunshan.samples.facts),
so a model trained on the corpus can learn them. Reports are long (about 1-3k characters), the other kinds
shorter. Used through `yunshan.samples.generate_corpus("finance")`; `python -m yunshan.samples --out DIR`
writes the corpus.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from . import lexicon as lx
from .facts import FINANCE_FACTS, Fact, state_fact

_BY_TERM = {f.zh_term: f for f in FINANCE_FACTS}


def _fact(term: str) -> Fact:
    return _BY_TERM[term]


def _yuan(cents: int) -> str:
    return lx.fmt_money(cents / 100)


def _wan(cents: int) -> str:
    """Amount in 万元 with two decimals."""
    return f"{cents / 1_000_000:,.2f}"


def _pct(num: float, den: float) -> str:
    return f"{num / den * 100:.2f}%" if den else "0.00%"


def _chg(cur: int, prev: int) -> float:
    return (cur - prev) / abs(prev) * 100 if prev else 0.0


# ------------------------------------------------------------------------------------------------ the figures
@dataclass
class Financials:
    """One year of a company's figures, in cents, with the previous year's headline items."""

    revenue: int
    cost: int
    taxes_surcharges: int
    selling: int
    admin: int
    rnd: int
    finance_cost: int
    other_income: int
    nonop_in: int
    nonop_out: int
    tax_rate: int  # percent
    assets: int
    liabilities: int
    current_assets: int
    current_liabilities: int
    inventory: int
    receivables: int
    shares: int  # number of shares
    op_cash: int
    prev_revenue: int
    prev_net: int
    prev_equity: int

    @property
    def gross(self) -> int:
        return self.revenue - self.cost

    @property
    def operating_profit(self) -> int:
        return (self.gross - self.taxes_surcharges - self.selling - self.admin - self.rnd - self.finance_cost
                + self.other_income)

    @property
    def total_profit(self) -> int:
        return self.operating_profit + self.nonop_in - self.nonop_out

    @property
    def income_tax(self) -> int:
        return max(self.total_profit, 0) * self.tax_rate // 100

    @property
    def net(self) -> int:
        return self.total_profit - self.income_tax

    @property
    def equity(self) -> int:
        return self.assets - self.liabilities

    @property
    def eps(self) -> float:
        return self.net / 100 / self.shares


def draw_financials(rng: random.Random) -> Financials:
    """A consistent set of annual figures for a mid-sized listed company."""
    rev = rng.randint(2 * 10**10, 9 * 10**11)  # 2亿 - 90亿 元, in cents
    r = lambda lo, hi: int(rev * rng.uniform(lo, hi))  # noqa: E731
    assets = r(0.8, 2.6)
    liabilities = int(assets * rng.uniform(0.18, 0.72))
    current_assets = int(assets * rng.uniform(0.3, 0.7))
    growth = rng.uniform(-0.25, 0.45)
    fin = Financials(
        revenue=rev, cost=r(0.55, 0.86), taxes_surcharges=r(0.003, 0.012), selling=r(0.015, 0.07),
        admin=r(0.02, 0.06), rnd=r(0.0, 0.07), finance_cost=r(-0.004, 0.018), other_income=r(0.0, 0.01),
        nonop_in=r(0.0, 0.004), nonop_out=r(0.0, 0.003), tax_rate=rng.choice((15, 25, 25)), assets=assets,
        liabilities=liabilities, current_assets=current_assets,
        current_liabilities=int(liabilities * rng.uniform(0.45, 0.9)),
        inventory=int(current_assets * rng.uniform(0.08, 0.4)),
        receivables=int(current_assets * rng.uniform(0.1, 0.35)),
        shares=rng.randint(20_000, 400_000) * 10_000, op_cash=0, prev_revenue=int(rev / (1 + growth)),
        prev_net=0, prev_equity=0)
    fin.op_cash = int(fin.net * rng.uniform(0.5, 1.6)) if fin.net > 0 else r(-0.03, 0.05)
    fin.prev_net = int(fin.net / (1 + rng.uniform(-0.4, 0.6))) if fin.net > 0 else r(0.01, 0.05)
    fin.prev_equity = int(fin.equity / (1 + rng.uniform(0.0, 0.2)))
    return fin


def dividend_per10(rng: random.Random, net_cents: int, shares: int) -> int:
    """Cash dividend per 10 shares, in cents, paying out 10-50% of net profit (0 when there is no profit)."""
    if net_cents <= 0:
        return 0
    return int(net_cents * rng.uniform(0.1, 0.5) / shares * 10)


# ------------------------------------------------------------------------------------------------ worked examples
def worked_example(rng: random.Random, lang: str) -> tuple[Fact, str, str]:
    """A small calculation that applies a formula fact: (fact, question, answer with the working)."""
    kind = rng.randrange(10)
    a = rng.randint(120, 9800)
    b = rng.randint(20, a - 10) if a > 40 else 10
    if kind == 0:
        f, tax = _fact("净利润"), b * rng.randint(15, 25) // 100 or 1
        q = (f"某企业本年利润总额为{a}万元，所得税费用为{tax}万元，该企业本年净利润是多少？",
             f"A company's total profit for the year is {a} (ten thousand yuan) and its income tax expense is {tax}. "
             "What is its net profit?")
        ans = (f"{f.zh}，所以净利润={a}-{tax}={a - tax}万元。",
               f"{f.en}, so net profit = {a} - {tax} = {a - tax} (ten thousand yuan).")
    elif kind == 1:
        f = _fact("毛利率")
        g = a - b
        q = (f"某公司营业收入为{a}万元，营业成本为{b}万元，其毛利率是多少？",
             f"A company has operating revenue of {a} and operating cost of {b} (ten thousand yuan). "
             "What is its gross margin?")
        ans = (f"毛利等于营业收入减去营业成本，即{a}-{b}={g}万元；{f.zh}，所以毛利率={g}÷{a}≈{g / a * 100:.2f}%。",
               f"Gross profit is {a} - {b} = {g}; {f.en.lower()}, so the gross margin is {g}/{a} = "
               f"{g / a * 100:.2f}%.")
    elif kind == 2:
        f = _fact("流动比率")
        q = (f"某企业流动资产为{a}万元，流动负债为{b}万元，流动比率是多少？",
             f"An entity has current assets of {a} and current liabilities of {b}. What is its current ratio?")
        ans = (f"{f.zh}，所以流动比率={a}÷{b}≈{a / b:.2f}。", f"{f.en}, so the current ratio is {a}/{b} = {a / b:.2f}.")
    elif kind == 3:
        f = _fact("资产负债率")
        q = (f"某公司资产总额为{a}万元，负债总额为{b}万元，资产负债率是多少？",
             f"A company has total assets of {a} and total liabilities of {b}. What is its debt-to-asset ratio?")
        ans = (f"{f.zh}，所以资产负债率={b}÷{a}≈{b / a * 100:.2f}%。",
               f"{f.en}, so the ratio is {b}/{a} = {b / a * 100:.2f}%.")
    elif kind == 4:
        f = _fact("每股收益")
        shares = rng.randint(2, 80) * 1000
        q = (f"某公司归属于普通股股东的净利润为{a}万元，发行在外普通股加权平均数为{shares}万股，每股收益是多少？",
             f"Net profit attributable to ordinary shareholders is {a} (ten thousand yuan) and the weighted average "
             f"number of shares is {shares} (ten thousand). What is earnings per share?")
        ans = (f"{f.zh}，所以每股收益={a}÷{shares}≈{a / shares:.4f}元。",
               f"{f.en}, so EPS = {a}/{shares} = {a / shares:.4f} yuan.")
    elif kind == 5:
        f = _fact("市盈率")
        price, eps = rng.randint(300, 9000) / 100, rng.randint(10, 300) / 100
        q = (f"某股票每股市价为{price:.2f}元，每股收益为{eps:.2f}元，其市盈率是多少？",
             f"A share trades at {price:.2f} yuan and earnings per share are {eps:.2f} yuan. What is the P/E ratio?")
        ans = (f"{f.zh}，所以市盈率={price:.2f}÷{eps:.2f}≈{price / eps:.2f}倍。",
               f"{f.en}, so P/E = {price:.2f}/{eps:.2f} = {price / eps:.2f}.")
    elif kind == 6:
        f = _fact("一般纳税人的增值税应纳税额")
        q = (f"某一般纳税人当期销项税额为{a}万元，当期进项税额为{b}万元，当期应纳增值税是多少？",
             f"A general taxpayer has output VAT of {a} and input VAT of {b} for the period. How much VAT is payable?")
        ans = (f"{f.zh}，所以应纳税额={a}-{b}={a - b}万元。", f"{f.en}, so VAT payable = {a} - {b} = {a - b}.")
    elif kind == 7:
        f = _fact("利润总额")
        nin, nout = rng.randint(1, 90), rng.randint(1, 60)
        q = (f"某企业营业利润为{a}万元，营业外收入为{nin}万元，营业外支出为{nout}万元，利润总额是多少？",
             f"Operating profit is {a}, non-operating income {nin} and non-operating expenses {nout}. "
             "What is total profit?")
        ans = (f"{f.zh}，所以利润总额={a}+{nin}-{nout}={a + nin - nout}万元。",
               f"{f.en}, so total profit = {a} + {nin} - {nout} = {a + nin - nout}.")
    elif kind == 8:
        f = _fact("净资产收益率")
        e0, e1 = rng.randint(1000, 50000), rng.randint(1000, 50000)
        avg = (e0 + e1) / 2
        q = (f"某公司净利润为{b}万元，期初净资产为{e0}万元，期末净资产为{e1}万元，净资产收益率是多少？",
             f"Net profit is {b}; net assets were {e0} at the start and {e1} at the end of the year. What is ROE?")
        ans = (f"平均净资产=({e0}+{e1})÷2={avg:.1f}万元；{f.zh}，所以净资产收益率={b}÷{avg:.1f}≈{b / avg * 100:.2f}%。",
               f"Average net assets are ({e0} + {e1})/2 = {avg:.1f}; {f.en.lower()}, so ROE = {b}/{avg:.1f} = "
               f"{b / avg * 100:.2f}%.")
    else:
        f = _fact("权益乘数")
        q = (f"某企业资产总额为{a}万元，所有者权益总额为{a - b}万元，权益乘数是多少？",
             f"Total assets are {a} and total owners' equity is {a - b}. What is the equity multiplier?")
        ans = (f"{f.zh}，所以权益乘数={a}÷{a - b}≈{a / (a - b):.2f}。",
               f"{f.en}, so the equity multiplier is {a}/{a - b} = {a / (a - b):.2f}.")
    i = 0 if lang == "zh" else 1
    return f, q[i], ans[i]


# ------------------------------------------------------------------------------------------------ shared pieces
_ZH_REASONS_UP = ("下游需求持续回暖", "新产能逐步释放", "产品结构持续优化", "海外市场拓展取得进展", "降本增效措施成效显现",
                  "原材料价格有所回落", "核心产品市场占有率提升", "新签订单同比增加", "数字化改造提升了运营效率")
_ZH_REASONS_DOWN = ("行业竞争加剧导致产品价格下降", "主要原材料价格上涨", "下游客户需求阶段性放缓",
                    "计提的资产减值准备增加", "汇率波动产生汇兑损失", "研发投入大幅增加", "部分项目交付延期")
_ZH_BUSINESS = ("公司坚持“{a}、{b}”的发展战略，持续加大在{ind}领域的投入。", "报告期内，公司{ind}业务实现收入约占营业收入的{p}%。",
                "公司在{region}地区新设{n}个销售服务网点，客户覆盖面进一步扩大。",
                "公司研发团队共有{staff}名成员，全年新获授权专利{m}项。", "公司{ind}产品在{region}市场的占有率稳步提升。",
                "公司完成了对{sub}的收购，进一步完善了产业链布局。", "报告期内公司员工总数为{emp}人，其中研发人员占比{q}%。",
                "公司{region}生产基地{phase}期项目已于{y}年{mo}月投产。", "受益于{reason}，公司{ind}板块毛利水平有所改善。",
                "公司前五名客户合计销售额占年度销售总额的{q}%，客户集中度{conc}。",
                "公司持续推进{ind}业务的智能化改造，单位产品能耗同比下降{small}%。",
                "报告期内公司研发投入占营业收入的比例为{small}%，重点投向{ind}方向。")
_ZH_STRATEGY = ("创新驱动", "质量为本", "客户至上", "精益管理", "稳健经营", "开放合作", "绿色发展", "数字赋能")
_ZH_REGIONS = ("华东", "华南", "华北", "华中", "西南", "西北", "东北", "海外", "长三角", "珠三角", "京津冀", "成渝")


def _disclaimer(rng: random.Random, short: str) -> str:
    """The standard statement that opens an announcement; real ones vary in wording and name the issuer."""
    return rng.choice((
        "{s}及董事会全体成员保证信息披露的内容真实、准确、完整，没有虚假记载、误导性陈述或重大遗漏。",
        "{s}董事会及全体董事保证本公告内容不存在任何虚假记载、误导性陈述或者重大遗漏，并对其内容的真实性、准确性和完整性承担法律责任。",
        "本公司（{s}）及董事会全体成员保证公告内容真实、准确和完整，并对公告中的虚假记载、误导性陈述或者重大遗漏承担责任。",
    )).format(s=short)


def _zh_company_bits(rng: random.Random) -> tuple[str, str, str]:
    full = lx.zh_company(rng)
    return full, lx.zh_short_name(full), lx.stock_code(rng)


def _pick_facts(rng: random.Random, focus: list[Fact], extra: tuple[str, ...], n: int) -> list[Fact]:
    """Up to n facts: the document's focus facts first (they guarantee coverage), then topical ones."""
    out = list(focus[:n])
    pool = [_fact(t) for t in extra if t in _BY_TERM]
    rng.shuffle(pool)
    for f in pool:
        if len(out) >= n + 2:
            break
        if f not in out:
            out.append(f)
    return out


def _facts_zh(rng: random.Random, fs: list[Fact]) -> str:
    return "".join(state_fact(rng, f, "zh") for f in fs)


def _facts_en(rng: random.Random, fs: list[Fact]) -> str:
    return " ".join(state_fact(rng, f, "en") for f in fs)


# ------------------------------------------------------------------------------------------------ zh documents
_ZH_MODES = ("采购模式：公司实行“以产定购”的采购模式，主要原材料通过招标方式向合格供应商集中采购。",
             "采购模式：公司与主要供应商签订年度框架协议，按月下达采购订单。",
             "生产模式：公司采用“以销定产”与适度备货相结合的生产模式。",
             "生产模式：公司核心工序自主完成，部分非核心工序委托外部加工。",
             "销售模式：公司以直销为主、经销为辅，重点客户由专门的客户经理服务。",
             "销售模式：公司通过线上平台与线下渠道相结合的方式销售产品。",
             "研发模式：公司建立了以市场需求为导向的研发体系，设有省级工程技术研究中心。")


def _zh_profile(rng: random.Random, short: str, ind: str) -> str:
    products = "、".join(rng.sample(("高端", "智能", "新型", "节能型", "定制化", "模块化", "精密", "环保型"), 2))
    return (f"{short}主要从事{ind}相关产品的研发、生产和销售，主要产品包括{products}{ind}产品及配套服务，"
            f"产品广泛应用于{'、'.join(rng.sample(('工业制造', '消费电子', '基础设施', '医疗健康', '交通运输', '能源电力', '现代农业'), 3))}等领域。"
            + f"{short}的经营模式如下：" + "；".join(m.rstrip("。") for m in rng.sample(_ZH_MODES, 3)) + "。")


def _split(rng: random.Random, total: int, n: int) -> list[int]:
    """n positive-ish parts that sum exactly to total."""
    w = [rng.uniform(0.7, 1.3) for _ in range(n)]
    parts = [int(total * x / sum(w)) for x in w[:-1]]
    return parts + [total - sum(parts)]


def _zh_quarters(rng: random.Random, fin: Financials) -> str:
    revs, nets = _split(rng, fin.revenue, 4), _split(rng, fin.net, 4)
    rows = [f"第{lx.cn_numeral(i + 1)}季度：营业收入{_wan(r)}，净利润{_wan(n)}；" for i, (r, n) in enumerate(zip(revs, nets, strict=True))]
    return "".join(rows) + f"四个季度合计营业收入{_wan(fin.revenue)}万元，净利润{_wan(fin.net)}万元，与年度数据一致。"


def _zh_cashflow(rng: random.Random, fin: Financials) -> str:
    inv = -int(fin.revenue * rng.uniform(0.01, 0.2))
    fund = int(fin.revenue * rng.uniform(-0.12, 0.12))
    total = fin.op_cash + inv + fund
    return (f"经营活动产生的现金流量净额为{_yuan(fin.op_cash)}元，投资活动产生的现金流量净额为{_yuan(inv)}元，"
            f"筹资活动产生的现金流量净额为{_yuan(fund)}元，现金及现金等价物净{'增加' if total >= 0 else '减少'}额为{_yuan(abs(total))}元。"
            + rng.choice((f"经营活动现金流量净额与净利润存在差异，主要是应收账款{'增加' if rng.random() < 0.5 else '减少'}"
                          f"{_wan(int(fin.receivables * rng.uniform(0.05, 0.3)))}万元和存货变动所致。",
                          f"投资活动现金流出主要用于新建{rng.randint(1, 6)}条生产线和购置设备。",
                          f"筹资活动现金流量主要为取得借款{_wan(abs(fund) + fin.revenue // 50)}万元和分配股利。")))


def _zh_holders(rng: random.Random, shares: int) -> str:
    pcts = sorted((rng.randint(50, 3500) / 100 for _ in range(5)), reverse=True)
    out = []
    for p in pcts:
        holder = rng.choice((lambda: lx.zh_person(rng), lambda: lx.zh_company(rng, listed=False),
                             lambda: rng.choice(lx.ZH_CITIES) + "市国有资产投资控股有限公司",
                             lambda: "全国社保基金" + lx.cn_numeral(rng.randint(101, 999)) + "组合"))()
        out.append(f"{holder}持股{int(shares * p / 100):,}股，占比{p:.2f}%")
    return "；".join(out) + f"；前五名股东合计持股比例为{sum(pcts):.2f}%。"


def _industry_of(full: str) -> str:
    """The industry word inside a name made by lexicon.zh_company, so the text talks about the right business."""
    for ind in sorted(lx.ZH_INDUSTRIES, key=len, reverse=True):
        if ind in full:
            return ind
    return "综合"


def _zh_report(rng: random.Random, focus: list[Fact]) -> str:
    full, short, code = _zh_company_bits(rng)
    ind = _industry_of(full)
    year = rng.randint(2016, 2024)
    fin = draw_financials(rng)
    chg_rev, chg_net = _chg(fin.revenue, fin.prev_revenue), _chg(fin.net, fin.prev_net)
    avg_eq = (fin.equity + fin.prev_equity) / 2
    roe = fin.net / avg_eq * 100 if avg_eq else 0.0
    updown = lambda x: f"增长{x:.2f}%" if x >= 0 else f"下降{-x:.2f}%"  # noqa: E731
    sections = [
        ("重要提示", rng.choice((f"本年度报告摘要来自{short}{year}年年度报告全文，为全面了解本公司的经营成果、财务状况及未来发展规划，投资者应当到证券监管机构指定媒体仔细阅读年度报告全文。",
                             f"本摘要内容摘自{short}{year}年年度报告全文，投资者欲了解详细内容，应当仔细阅读同时刊载于{rng.choice(('巨潮资讯网', '上海证券交易所网站', '深圳证券交易所网站'))}的年度报告全文。"))
         + f"{lx.zh_auditor(rng)}为本公司出具了标准无保留意见的审计报告。" + state_fact(rng, _fact("无保留意见"), "zh")),
        ("主要会计数据和财务指标（单位：元）", "\n".join((
            "（一）利润表主要项目",
            f"营业收入{_yuan(fin.revenue)}，上年同期{_yuan(fin.prev_revenue)}，同比{updown(chg_rev)}；",
            f"营业成本{_yuan(fin.cost)}；毛利{_yuan(fin.gross)}，毛利率{_pct(fin.gross, fin.revenue)}；",
            f"销售费用{_yuan(fin.selling)}，管理费用{_yuan(fin.admin)}，研发费用{_yuan(fin.rnd)}，财务费用{_yuan(fin.finance_cost)}；",
            f"营业利润{_yuan(fin.operating_profit)}；营业外收入{_yuan(fin.nonop_in)}，营业外支出{_yuan(fin.nonop_out)}；",
            f"利润总额{_yuan(fin.total_profit)}；所得税费用{_yuan(fin.income_tax)}（适用税率{fin.tax_rate}%）；",
            f"净利润{_yuan(fin.net)}，上年同期{_yuan(fin.prev_net)}，同比{updown(chg_net)}；",
            f"基本每股收益{fin.eps:.4f}元/股；加权平均净资产收益率{roe:.2f}%。",
            "（二）现金流量表主要项目",
            f"经营活动产生的现金流量净额{_yuan(fin.op_cash)}。",
            f"（三）资产负债表主要项目（{year}年12月31日）",
            f"资产总额{_yuan(fin.assets)}，负债总额{_yuan(fin.liabilities)}，归属于上市公司股东的净资产{_yuan(fin.equity)}，"
            f"资产负债率{_pct(fin.liabilities, fin.assets)}，流动比率{fin.current_assets / fin.current_liabilities:.2f}，"
            f"速动比率{(fin.current_assets - fin.inventory) / fin.current_liabilities:.2f}。"))),
        ("公司基本情况", _zh_profile(rng, short, ind)),
        ("分季度主要财务指标（单位：万元）", _zh_quarters(rng, fin)),
        ("现金流量情况", _zh_cashflow(rng, fin)),
        ("前五名股东持股情况", _zh_holders(rng, fin.shares)),
    ]
    para = []
    for tpl in rng.sample(_ZH_BUSINESS, rng.randint(3, 6)):
        para.append(tpl.format(
            a=rng.choice(_ZH_STRATEGY), b=rng.choice(_ZH_STRATEGY), ind=ind,
            p=rng.randint(12, 85), region=rng.choice(_ZH_REGIONS), n=rng.randint(3, 60), m=rng.randint(5, 160),
            staff=rng.randint(40, 2500), emp=rng.randint(300, 30000), q=rng.randint(8, 45), phase=rng.choice("一二三四"),
            conc=rng.choice(("较低", "适中", "有所下降", "有所上升")), small=f"{rng.uniform(1, 9):.1f}",
            sub=lx.zh_company(rng, listed=False), y=year, mo=rng.randint(1, 12),
            reason=rng.choice(_ZH_REASONS_UP)))
    reasons = _ZH_REASONS_UP if chg_net >= 0 else _ZH_REASONS_DOWN
    para.append(f"报告期内，公司实现营业收入{_wan(fin.revenue)}万元，同比{updown(chg_rev)}；实现净利润{_wan(fin.net)}万元，"
                f"同比{updown(chg_net)}，主要原因是{rng.choice(reasons)}以及{rng.choice(reasons)}。")
    fs = _pick_facts(rng, focus, ("净利润", "毛利", "毛利率", "利润总额", "资产负债率", "流动比率", "速动比率",
                                  "每股收益", "净资产收益率", "资产负债表", "利润表", "现金流量表"), rng.randint(4, 7))
    para.append("关于主要指标的说明：" + _facts_zh(rng, fs)
                + f"按此口径，本年净利润{_yuan(fin.net)}元等于利润总额{_yuan(fin.total_profit)}元减去所得税费用{_yuan(fin.income_tax)}元。")
    sections.append(("经营情况讨论与分析", "".join(para)))
    per10 = dividend_per10(rng, fin.net, fin.shares)
    if per10 and rng.random() < 0.8:
        sections.append(("利润分配预案",
                         f"公司拟以总股本{fin.shares:,}股为基数，向全体股东每10股派发现金红利{per10 / 100:.2f}元（含税），"
                         f"共计派发现金红利{_yuan(fin.shares // 10 * per10)}元，占本年度净利润的{_pct(fin.shares // 10 * per10, fin.net)}，"
                         "本年度不送红股，不以资本公积金转增股本。该预案尚需提交股东大会审议。"))
    risks = rng.sample(("宏观经济波动", "行业政策变化", "原材料价格波动", "汇率变动", "市场竞争加剧", "技术迭代", "应收账款回收"), 3)
    sections.append(("风险提示", rng.choice((
        f"{short}可能面临{'、'.join(risks)}等风险，敬请投资者注意投资风险。",
        f"本报告涉及的{year + 1}年经营计划等前瞻性陈述不构成{short}对投资者的实质承诺，请投资者注意{risks[0]}等风险。",
        f"{short}将持续关注{risks[0]}和{risks[1]}等因素的变化，加强应收账款管理和存货管理，防范经营风险。"))))
    lines = [f"{full}{year}年年度报告摘要", f"证券代码：{code}　证券简称：{short}"]
    for i, (title, body) in enumerate(sections, 1):
        lines += [f"{lx.cn_numeral(i)}、{title}", body]
    return "\n".join(lines)


_ZH_MOTIONS = (
    "关于{y}年度利润分配预案的议案", "关于续聘会计师事务所的议案", "关于向银行申请综合授信额度的议案",
    "关于使用闲置自有资金进行现金管理的议案", "关于计提资产减值准备的议案", "关于回购公司股份方案的议案",
    "关于会计政策变更的议案", "关于为全资子公司提供担保的议案", "关于召开{y}年第{k}次临时股东大会的议案",
    "关于{y}年度董事会工作报告的议案", "关于{y}年度财务决算报告的议案", "关于调整组织架构的议案",
)


def _zh_motion_body(rng: random.Random, motion: str, full: str, year: int, fin_net: int, shares: int) -> str:
    if "利润分配" in motion:
        per10 = dividend_per10(rng, fin_net, shares) or 10
        return (f"经审计，公司{year}年度实现净利润{_yuan(fin_net)}元。公司拟以总股本{shares:,}股为基数，向全体股东每10股派发现金红利"
                f"{per10 / 100:.2f}元（含税），合计派发现金红利{_yuan(shares // 10 * per10)}元。" + state_fact(rng, _fact("未分配利润"), "zh"))
    if "会计师事务所" in motion:
        return f"董事会同意续聘{lx.zh_auditor(rng)}为公司{year + 1}年度审计机构，聘期一年，审计费用为{rng.randint(40, 300)}万元。"
    if "授信" in motion:
        return f"为满足经营发展需要，公司拟向{rng.choice(('工商银行', '农业银行', '中国银行', '建设银行', '交通银行', '招商银行', '兴业银行'))}等金融机构申请总额不超过{rng.randint(2, 80)}亿元的综合授信额度，期限一年。"
    if "现金管理" in motion:
        return (f"在不影响正常经营的前提下，公司拟使用不超过{rng.randint(1, 30)}亿元闲置自有资金购买安全性高、流动性好的理财产品，额度在十二个月内可以滚动使用。"
                + state_fact(rng, _fact("流动性风险"), "zh"))
    if "减值" in motion:
        a, b = rng.randint(100, 9000), rng.randint(50, 6000)
        return (f"根据企业会计准则，公司本期计提坏账准备{a}万元、存货跌价准备{b}万元，合计{a + b}万元，相应减少利润总额{a + b}万元。"
                + state_fact(rng, _fact("坏账准备"), "zh") + state_fact(rng, _fact("谨慎性"), "zh"))
    if "回购" in motion:
        lo = rng.randint(2, 20) * 1000
        return (f"公司拟使用自有资金以集中竞价方式回购公司股份，回购资金总额不低于{lo}万元且不超过{lo * 2}万元，回购价格不超过每股"
                f"{rng.randint(800, 9000) / 100:.2f}元。" + state_fact(rng, _fact("股票回购"), "zh"))
    if "会计政策" in motion:
        return ("本次会计政策变更是根据财政部发布的相关规定进行的调整，不会对公司财务状况和经营成果产生重大影响。"
                + state_fact(rng, _fact("可比性"), "zh"))
    if "担保" in motion:
        return f"公司拟为全资子公司{lx.zh_company(rng, listed=False)}向银行申请的{rng.randint(1, 50) * 1000}万元贷款提供连带责任保证担保。"
    if "临时股东大会" in motion:
        return f"公司定于{lx.fmt_zh_date(lx.zh_date(rng, (year, year)))}在{full}会议室召开临时股东大会，审议本次董事会提交的相关议案。"
    return rng.choice((f"董事会认为，该事项有利于提升{full}的治理水平，符合公司和全体股东的利益。",
                       f"该报告客观反映了公司{year}年度的经营情况和财务状况。",
                       f"本议案尚需提交公司{year}年年度股东大会审议。"))


def _zh_board(rng: random.Random, focus: list[Fact]) -> str:
    full, short, code = _zh_company_bits(rng)
    year = rng.randint(2016, 2024)
    n = rng.randint(5, 11)
    session, meeting = rng.randint(2, 9), rng.randint(1, 25)
    d1 = lx.zh_date(rng, (year, year))
    d2 = lx.add_days(d1, rng.randint(3, 12))
    fin_net = rng.randint(10**9, 10**12)  # cents
    shares = rng.randint(20_000, 400_000) * 10_000
    parts = [f"证券代码：{code}　证券简称：{short}　公告编号：{year}-{rng.randint(1, 120):03d}",
             f"{full}第{lx.cn_numeral(session)}届董事会第{lx.cn_numeral(meeting)}次会议决议公告",
             _disclaimer(rng, short),
             "一、董事会会议召开情况",
             f"{full}（以下简称“公司”）第{lx.cn_numeral(session)}届董事会第{lx.cn_numeral(meeting)}次会议通知于{lx.fmt_zh_date(d1)}以"
             f"{rng.choice(('电子邮件', '书面送达', '电话及邮件'))}方式发出，会议于{lx.fmt_zh_date(d2)}在公司会议室以"
             f"{rng.choice(('现场表决', '通讯表决', '现场结合通讯表决'))}方式召开。会议应出席董事{n}名，实际出席董事{n}名，会议由董事长"
             f"{lx.zh_person(rng)}主持，公司监事和高级管理人员列席了会议，会议的召集和召开符合有关法律法规和公司章程的规定。",
             "二、董事会会议审议情况"]
    motions = rng.sample(_ZH_MOTIONS, rng.randint(3, 6))
    for i, m in enumerate(motions, 1):
        title = m.format(y=year, k=lx.cn_numeral(rng.randint(1, 4)))
        parts.append(f"{i}. 审议通过《{title}》")
        parts.append(_zh_motion_body(rng, title, full, year, fin_net, shares))
        if rng.random() < 0.15:
            parts.append(f"关联董事{lx.zh_person(rng)}回避表决。表决结果：同意{n - 1}票，反对0票，弃权0票。")
        else:
            parts.append(f"表决结果：同意{n}票，反对0票，弃权0票。")
    parts.append("董事会秘书就相关事项作出说明：" + _facts_zh(rng, focus[:rng.randint(3, 6)]))
    parts.append(f"三、备查文件\n经与会董事签字并加盖董事会印章的第{lx.cn_numeral(session)}届董事会第{lx.cn_numeral(meeting)}次会议决议。")
    parts.append(f"{full}董事会\n{lx.fmt_zh_date(d2)}")
    return "\n".join(parts)


def _zh_dividend(rng: random.Random, focus: list[Fact]) -> str:
    full, short, code = _zh_company_bits(rng)
    year = rng.randint(2016, 2023)
    shares = rng.randint(20_000, 400_000) * 10_000
    per10_cents = rng.randint(5, 120) * 10  # cents per 10 shares
    bonus = rng.choice((0, 0, 0, 2, 3, 4, 5))
    rec = lx.weekday_after(lx.zh_date(rng, (year + 1, year + 1)), 0)
    ex = lx.weekday_after(rec, 1)
    total_cents = shares // 10 * per10_cents
    parts = [f"证券代码：{code}　证券简称：{short}　公告编号：{year + 1}-{rng.randint(1, 120):03d}",
             f"{full}{year}年年度权益分派实施公告",
             _disclaimer(rng, short),
             "一、股东大会审议通过利润分配方案的情况",
             f"公司{year}年年度利润分配方案已获{lx.fmt_zh_date(lx.add_days(rec, -rng.randint(10, 40)))}召开的{year}年年度股东大会审议通过。",
             "二、权益分派方案",
             f"本公司{year}年年度权益分派方案为：以公司现有总股本{shares:,}股为基数，向全体股东每10股派{per10_cents / 100:.2f}元人民币现金（含税）"
             + (f"，同时以资本公积金向全体股东每10股转增{bonus}股。分红前本公司总股本为{shares:,}股，分红后总股本增至{shares + shares // 10 * bonus:,}股。"
                if bonus else "。") + f"本次派发现金红利合计{_yuan(total_cents)}元。",
             "三、股权登记日与除权除息日",
             f"本次权益分派股权登记日为：{lx.fmt_zh_date(rec)}，除权除息日为：{lx.fmt_zh_date(ex)}。"
             + state_fact(rng, _fact("除权除息日"), "zh"),
             "四、权益分派对象",
             f"本次分派对象为截至{lx.fmt_zh_date(rec)}下午证券交易所收市后，在证券登记结算机构登记在册的本公司全体股东。",
             "五、有关税收的说明",
             state_fact(rng, _fact("利息、股息、红利所得适用的个人所得税税率"), "zh")
             + f"{short}将按照有关规定代扣代缴个人所得税，持股期限超过一年的，股息红利所得暂免征收个人所得税；"
               f"持股一个月以内的，实际每10股派发现金{per10_cents / 100 * 0.8:.2f}元。",
             "六、咨询机构",
             f"咨询地址：{lx.zh_address(rng)}；咨询联系人：{lx.zh_person(rng)}；咨询电话：0{rng.randint(10, 999)}-{rng.randint(2000000, 89999999)}。"]
    parts.append("附注：" + _facts_zh(rng, focus[:rng.randint(3, 5)] + [_fact("股息率")]))
    parts.append(f"{full}董事会\n{lx.fmt_zh_date(lx.add_days(rec, -3))}")
    return "\n".join(parts)


def _zh_forecast(rng: random.Random, focus: list[Fact]) -> str:
    full, short, code = _zh_company_bits(rng)
    year = rng.randint(2016, 2024)
    period = rng.choice((("半年度", "1月1日至6月30日"), ("年度", "1月1日至12月31日"), ("前三季度", "1月1日至9月30日")))
    prev = rng.randint(2000, 90000)  # 万元
    up = rng.random() < 0.6
    lo_p, hi_p = sorted(rng.sample(range(10, 180 if up else 90), 2))
    if up:
        lo, hi = prev * (100 + lo_p) // 100, prev * (100 + hi_p) // 100
        move = f"同比增长{lo_p}%至{hi_p}%"
    else:
        lo, hi = prev * (100 - hi_p) // 100, prev * (100 - lo_p) // 100
        move = f"同比下降{lo_p}%至{hi_p}%"
    reasons = _ZH_REASONS_UP if up else _ZH_REASONS_DOWN
    shares_wan = rng.randint(20_000, 400_000)
    parts = [f"证券代码：{code}　证券简称：{short}　公告编号：{year}-{rng.randint(1, 120):03d}",
             f"{full}{year}年{period[0]}业绩预告",
             _disclaimer(rng, short),
             "一、本期业绩预计情况",
             f"1. 业绩预告期间：{year}年{period[1]}。",
             f"2. 预计的经营业绩：{'同向上升' if up else '同向下降'}。归属于上市公司股东的净利润为{lo:,}万元至{hi:,}万元，"
             f"{move}；上年同期为{prev:,}万元。",
             f"3. 基本每股收益预计为{lo / shares_wan:.4f}元/股至{hi / shares_wan:.4f}元/股（按总股本{shares_wan:,}万股计算）。"
             if rng.random() < 0.5 else "3. 本次业绩预告未经注册会计师预审计。",
             "二、业绩变动原因说明",
             "".join(f"（{lx.cn_numeral(i)}）{r}，对净利润的影响约为{rng.randint(300, 30000):,}万元。"
                     for i, r in enumerate(rng.sample(reasons, rng.randint(2, 3)), 1)),
             "三、其他相关说明",
             f"本次业绩预告是{short}财务部门初步测算的结果，具体财务数据以公司披露的{year}年{period[0]}报告为准。" + _facts_zh(
                 rng, _pick_facts(rng, focus, ("净利润", "每股收益", "利润总额", "利润表"), rng.randint(3, 5))),
             f"{full}董事会\n{lx.fmt_zh_date(lx.zh_date(rng, (year, year)))}"]
    return "\n".join(parts)


_ZH_SECTORS = ("银行", "券商", "保险", "半导体", "医药生物", "白酒", "新能源车", "光伏", "煤炭", "有色金属", "房地产",
               "国防军工", "传媒", "计算机", "通信设备", "家电", "化工", "钢铁", "建筑材料", "食品饮料", "电力",
               "农林牧渔", "交通运输", "机械设备", "汽车零部件", "消费电子")


def _zh_market(rng: random.Random, focus: list[Fact]) -> str:
    y, m, d = lx.zh_date(rng, (2015, 2024))
    sh = rng.uniform(2600, 3700)
    sz = rng.uniform(8500, 14500)
    cy = rng.uniform(1700, 3300)
    c = [rng.uniform(-2.8, 2.8) for _ in range(3)]
    up_s, dn_s = rng.sample(_ZH_SECTORS, 3), rng.sample(_ZH_SECTORS, 3)
    dn_s = [s for s in dn_s if s not in up_s] or [rng.choice(_ZH_SECTORS)]
    vol = rng.randint(5000, 19000)
    analyst = lx.zh_person(rng)
    firm = rng.choice(lx.ZH_CITIES) + rng.choice(lx.ZH_BRAND_CHARS) + rng.choice(lx.ZH_BRAND_CHARS) + "证券"
    arrow = lambda x: f"上涨{x:.2f}%" if x >= 0 else f"下跌{-x:.2f}%"  # noqa: E731
    parts = [f"{m}月{d}日市场综述",
             f"{y}年{m}月{d}日，A股三大指数{'集体收涨' if min(c) > 0 else '集体收跌' if max(c) < 0 else '涨跌不一'}。"
             f"截至收盘，上证指数报{sh:.2f}点，{arrow(c[0])}；深证成指报{sz:.2f}点，{arrow(c[1])}；创业板指报{cy:.2f}点，"
             f"{arrow(c[2])}。两市合计成交额{vol}亿元，较上一交易日{'放量' if rng.random() < 0.5 else '缩量'}{rng.randint(50, 1500)}亿元。",
             f"盘面上，{'、'.join(up_s)}等板块涨幅居前，{'、'.join(dn_s)}等板块表现较弱。"
             f"北向资金全天{'净买入' if rng.random() < 0.55 else '净卖出'}{rng.randint(5, 160)}.{rng.randint(0, 99):02d}亿元。"]
    macro = rng.sample((
        f"国家统计局数据显示，上月居民消费价格指数同比上涨{rng.uniform(-0.5, 3.0):.1f}%，工业生产者出厂价格指数同比{arrow(rng.uniform(-5, 5))[:2]}{abs(rng.uniform(0.1, 5)):.1f}%。",
        f"最新一期一年期贷款市场报价利率为{rng.uniform(3.1, 4.4):.2f}%，五年期以上品种为{rng.uniform(3.6, 4.9):.2f}%。",
        f"央行公布的数据显示，月末广义货币供应量M2余额同比增长{rng.uniform(7.5, 13.5):.1f}%，狭义货币供应量M1余额同比增长{rng.uniform(-3, 9):.1f}%。",
        f"央行今日开展{rng.randint(20, 5000)}亿元7天期逆回购操作，中标利率为{rng.uniform(1.5, 2.6):.2f}%。",
        f"十年期国债收益率报{rng.uniform(2.1, 3.4):.3f}%，较前一交易日{'上行' if rng.random() < 0.5 else '下行'}{rng.randint(1, 8)}个基点。",
    ), rng.randint(1, 3))
    parts.append("".join(macro))
    stocks = []
    for _ in range(rng.randint(2, 4)):
        full, short, code = _zh_company_bits(rng)
        mv = rng.uniform(-10, 10)
        stocks.append(f"{short}（{code}）{'涨停' if mv > 9.9 else arrow(mv)}，" + rng.choice((
            f"公司日前披露{rng.choice(('年度报告', '业绩预告', '回购方案', '分红方案', '重大合同公告'))}",
            f"当日成交额{rng.randint(1, 60)}.{rng.randint(0, 9)}亿元，换手率{rng.uniform(0.5, 18):.2f}%",
            f"机构给予“{rng.choice(('买入', '增持', '中性', '推荐'))}”评级", f"最新市盈率为{rng.uniform(6, 90):.1f}倍")) + "。")
    parts.append("个股方面，" + "".join(stocks))
    parts.append(rng.choice((
        f"港股方面，恒生指数{arrow(rng.uniform(-3, 3))}，报{rng.uniform(14000, 30000):.2f}点。",
        f"商品市场方面，沪金主力合约{arrow(rng.uniform(-2, 2))}，螺纹钢主力合约{arrow(rng.uniform(-3, 3))}。",
        f"债券市场方面，国债期货{'全线上涨' if rng.random() < 0.5 else '多数下跌'}，三十年期主力合约{arrow(rng.uniform(-1, 1))}。",
        f"外汇市场方面，人民币对美元汇率中间价报{rng.uniform(6.3, 7.3):.4f}。")))
    fs = _pick_facts(rng, focus, ("居民消费价格指数", "工业生产者出厂价格指数", "广义货币供应量M2", "狭义货币供应量M1",
                                  "公开市场操作", "贷款市场报价利率", "系统性风险", "市盈率", "主板股票的日涨跌幅限制",
                                  "通货膨胀", "融资融券"), rng.randint(4, 6))
    parts.append(f"{firm}首席分析师{analyst}表示，{rng.choice(('当前市场估值处于历史中枢附近', '短期市场情绪有所修复', '市场仍处于震荡筑底阶段', '增量资金入市节奏有待观察'))}，"
                 f"建议投资者{rng.choice(('关注业绩确定性较强的龙头公司', '控制仓位、均衡配置', '关注高股息资产的配置价值', '把握结构性机会'))}。"
                 + _facts_zh(rng, fs))
    parts.append(rng.choice((f"风险提示：以上内容由{firm}研究所整理，仅供参考，不构成投资建议。", "市场有风险，投资需谨慎。",
                             f"本文观点仅代表分析师{analyst}个人意见，不构成任何投资建议。")))
    return "\n".join(parts)


_COURSES = {  # subject -> (zh course names, en course name)
    "accounting": (("初级会计实务", "中级会计实务", "注册会计师会计", "财务报表分析"), "financial accounting"),
    "auditing": (("审计", "注册会计师审计"), "auditing"),
    "tax_law": (("税法", "税务师涉税实务"), "taxation"),
    "banking_practitioner_qualification_certificate": (("银行业法律法规与综合能力", "银行业专业实务"), "banking"),
    "securities_practitioner_qualification_certificate": (("金融市场基础知识", "证券市场基本法律法规"), "securities"),
    "macroeconomics": (("宏观经济学", "经济学基础"), "macroeconomics"),
    "microeconomics": (("微观经济学", "经济学基础"), "microeconomics"),
    "monetary_financial_theory": (("货币金融学", "金融学基础"), "money and banking"),
    "insurance": (("保险原理与实务", "保险学"), "insurance"),
}


def _zh_exam(rng: random.Random, focus: list[Fact]) -> str:
    subject = rng.choice(_COURSES[focus[0].subject][0])
    parts = [f"《{subject}》考点精讲（第{rng.randint(1, 40)}讲）"]
    fs = focus[:rng.randint(6, 10)]
    for i, f in enumerate(fs, 1):
        parts.append(f"考点{lx.cn_numeral(i)}：{f.zh_term}")
        parts.append(state_fact(rng, f, "zh") + rng.choice((
            "", f"考生在答题时要注意区分{f.zh_term}与相近概念。", f"{f.zh_term}在{rng.randint(2012, 2024)}年的考试中以{rng.choice(('单选题', '多选题', '判断题', '计算题'))}形式出现过。",
            f"本考点约占本章分值的{rng.randint(5, 30)}%。")))
    for _ in range(rng.choice((1, 1, 2))):
        f, q, a = worked_example(rng, "zh")
        parts.append(f"【例题】{q}")
        parts.append(f"【解析】{a}")
    parts.append(rng.choice((f"【小结】《{subject}》本讲的{len(fs)}个考点较为基础，但在考试中分值不低，务必熟练掌握。",
                             f"【提示】以上考点请结合{rng.randint(2015, 2024)}年真题反复练习。",
                             f"【备考建议】建议用{rng.randint(1, 5)}天时间先理解概念，再通过计算题巩固。")))
    return "\n".join(parts)


# ------------------------------------------------------------------------------------------------ en documents
def _en_report(rng: random.Random, focus: list[Fact]) -> str:
    company = lx.en_company(rng)
    year = rng.randint(2016, 2024)
    fin = draw_financials(rng)
    chg_rev, chg_net = _chg(fin.revenue, fin.prev_revenue), _chg(fin.net, fin.prev_net)
    ud = lambda x: f"up {x:.1f}%" if x >= 0 else f"down {-x:.1f}%"  # noqa: E731
    m = lambda c: f"{c / 100 / 1e6:,.1f} million"  # noqa: E731
    parts = [f"{company}: full-year {year} results",
             f"{company} reported revenue of {m(fin.revenue)} yuan for {year}, {ud(chg_rev)} from {m(fin.prev_revenue)} "
             f"a year earlier. Operating cost was {m(fin.cost)}, leaving gross profit of {m(fin.gross)} and a gross margin "
             f"of {_pct(fin.gross, fin.revenue)}.",
             f"Selling expenses were {m(fin.selling)}, administrative expenses {m(fin.admin)}, research and development "
             f"{m(fin.rnd)} and finance costs {m(fin.finance_cost)}. Operating profit came to {m(fin.operating_profit)}; "
             f"after non-operating income of {m(fin.nonop_in)} and non-operating expenses of {m(fin.nonop_out)}, total "
             f"profit was {m(fin.total_profit)}.",
             f"Income statement: income tax expense at a {fin.tax_rate}% rate was {m(fin.income_tax)}, so net profit was {m(fin.net)}, "
             f"{ud(chg_net)}. Basic earnings per share were {fin.eps:.4f} yuan.",
             f"Balance sheet: at year end total assets stood at {m(fin.assets)} and total liabilities at {m(fin.liabilities)}, giving "
             f"owners' equity of {m(fin.equity)} and a debt-to-asset ratio of {_pct(fin.liabilities, fin.assets)}. The "
             f"current ratio was {fin.current_assets / fin.current_liabilities:.2f}, so the balance sheet "
             f"{rng.choice(('remains strong', 'is conservatively geared', 'carries moderate leverage', 'has room for new borrowing'))}. "
             f"Cash flow statement: net cash from operating activities was {m(fin.op_cash)}, "
             f"{'above' if fin.op_cash > fin.net else 'below'} net profit of {m(fin.net)}."]
    ceo = lx.en_person(rng)
    parts.append(f"\"{rng.choice(('We delivered', 'The team achieved', 'We are pleased with'))} "
                 f"{rng.choice(('steady progress', 'a resilient performance', 'solid growth'))} in a "
                 f"{rng.choice(('challenging', 'competitive', 'volatile', 'recovering'))} market,\" said chief executive "
                 f"{ceo}. \"Our priorities for {year + 1} are {rng.choice(('cost discipline', 'new capacity', 'overseas expansion', 'product quality'))} "
                 f"and {rng.choice(('cash generation', 'research', 'customer service', 'digital operations'))}.\"")
    fs = _pick_facts(rng, focus, ("净利润", "毛利", "毛利率", "利润总额", "资产负债率", "流动比率", "每股收益",
                                  "资产负债表", "利润表", "现金流量表"), rng.randint(4, 7))
    parts.append("Notes on the measures: " + _facts_en(rng, fs))
    per10 = dividend_per10(rng, fin.net, fin.shares)
    if per10:
        parts.append(f"The board proposed a final dividend of {per10 / 100:.2f} yuan per 10 shares, "
                     f"{_yuan(fin.shares // 10 * per10)} yuan in total on {fin.shares:,} shares, or "
                     f"{_pct(fin.shares // 10 * per10, fin.net)} of net profit.")
    return "\n".join(parts)


def _en_notice(rng: random.Random, focus: list[Fact]) -> str:
    company = lx.en_company(rng)
    ymd = lx.zh_date(rng, (2016, 2024))
    n = rng.randint(5, 11)
    kind = rng.randrange(3)
    if kind == 0:
        shares = rng.randint(2_000, 40_000) * 100_000
        dps = rng.randint(3, 90) / 100
        rec = lx.weekday_after(ymd, 0)
        ex = lx.weekday_after(rec, 1)
        body = [f"{company} - dividend notice",
                f"The board of {company} announces a cash dividend of {dps:.2f} yuan per share on {shares:,} shares, "
                f"a total of {lx.fmt_money(dps * shares)} yuan. The record date is {lx.fmt_en_date(rec)} and the "
                f"ex-dividend date is {lx.fmt_en_date(ex)}.", state_fact(rng, _fact("除权除息日"), "en"),
                state_fact(rng, _fact("股息率"), "en")]
    elif kind == 1:
        body = [f"{company} - resolutions of the board meeting",
                f"The board met on {lx.fmt_en_date(ymd)} with {n} of {n} directors present, chaired by "
                f"{lx.en_person(rng)}. The meeting approved the following resolutions:"]
        items = rng.sample((
            f"the annual financial report for {ymd[0] - 1}", f"the reappointment of {lx.en_firm(rng)} as auditor",
            f"a credit facility of up to {rng.randint(1, 60)} billion yuan", "a change in accounting policy",
            f"a share buyback of up to {rng.randint(1, 40) * 10} million yuan", "an impairment provision for receivables",
            f"a guarantee for a subsidiary of {rng.randint(1, 90) * 10} million yuan"), rng.randint(3, 5))
        for i, it in enumerate(items, 1):
            body.append(f"{i}. Approved {it}. Votes: {n} for, 0 against, 0 abstentions.")
    else:
        lo, hi = sorted(rng.sample(range(5, 150), 2))
        prev = rng.randint(20, 900)
        body = [f"{company} - profit warning" if rng.random() < 0.4 else f"{company} - earnings preview",
                f"{company} expects net profit for {ymd[0]} of {prev * (100 + lo) // 100} to {prev * (100 + hi) // 100} "
                f"million yuan, {lo}% to {hi}% above the {prev} million reported a year earlier. The estimate is "
                "unaudited."]
    body.append("Background: " + _facts_en(rng, focus[:rng.randint(3, 5)]))
    return "\n".join(body)


_EN_SECTORS = ("banks", "brokers", "insurers", "chipmakers", "drugmakers", "liquor makers", "electric-vehicle makers",
               "solar firms", "coal miners", "metals producers", "property developers", "defence stocks", "media",
               "software firms", "telecom equipment", "appliance makers", "chemicals", "steelmakers", "utilities")


def _en_market(rng: random.Random, focus: list[Fact]) -> str:
    ymd = lx.zh_date(rng, (2015, 2024))
    c = [rng.uniform(-2.5, 2.5) for _ in range(3)]
    mv = lambda x: f"rose {x:.2f}%" if x >= 0 else f"fell {-x:.2f}%"  # noqa: E731
    up, dn = rng.sample(_EN_SECTORS, 2), rng.sample(_EN_SECTORS, 2)
    parts = [f"Market wrap, {lx.fmt_en_date(ymd)}",
             f"The Shanghai Composite {mv(c[0])} to {rng.uniform(2600, 3700):.2f}, the Shenzhen Component {mv(c[1])} and "
             f"the ChiNext index {mv(c[2])}. Turnover was {rng.randint(500, 1900)} billion yuan.",
             f"{up[0].capitalize()} and {up[1]} led gains while {dn[0]} and {dn[1]} lagged.",
             rng.choice((f"Consumer prices rose {rng.uniform(-0.5, 3):.1f}% from a year earlier, data showed.",
                         f"The one-year loan prime rate was left at {rng.uniform(3.1, 4.4):.2f}%.",
                         f"Broad money M2 grew {rng.uniform(7.5, 13.5):.1f}% year on year.",
                         f"The ten-year government bond yield ended at {rng.uniform(2.1, 3.4):.3f}%."))]
    fs = _pick_facts(rng, focus, ("居民消费价格指数", "广义货币供应量M2", "贷款市场报价利率", "系统性风险", "市盈率",
                                  "通货膨胀", "公开市场操作"), rng.randint(3, 5))
    parts.append(f"{lx.en_person(rng)}, a strategist at {lx.en_company(rng)}, said investors should "
                 f"{rng.choice(('stay diversified', 'favour quality earnings', 'watch liquidity closely', 'keep some cash'))}. "
                 + _facts_en(rng, fs))
    return "\n".join(parts)


def _en_exam(rng: random.Random, focus: list[Fact]) -> str:
    parts = [f"Study notes: {_COURSES[focus[0].subject][1]}, "
             f"lesson {rng.randint(1, 40)}"]
    for f in focus[:rng.randint(6, 10)]:
        parts.append(f"- {_cap_first(f.en_term)}: " + state_fact(rng, f, "en"))
    if rng.random() < 0.7:
        _, q, a = worked_example(rng, "en")
        parts.append(f"Example. {q}\nSolution. {a}")
    return "\n".join(parts)


def _cap_first(s: str) -> str:
    return s[:1].upper() + s[1:]


# ------------------------------------------------------------------------------------------------ entry point
# (kind, generator, weight): reports are the long documents; weights set the mix of kinds.
_ZH_KINDS = (("periodic_report", _zh_report, 3), ("board_resolution", _zh_board, 2), ("dividend", _zh_dividend, 1),
             ("earnings_forecast", _zh_forecast, 1), ("market_commentary", _zh_market, 2), ("exam_notes", _zh_exam, 4))
_EN_KINDS = (("periodic_report", _en_report, 3), ("announcement", _en_notice, 2), ("market_commentary", _en_market, 2),
             ("exam_notes", _en_exam, 3))


def finance_document(rng: random.Random, lang: str, focus: list[Fact]) -> tuple[str, str]:
    """One finance document in `lang` ("zh"/"en") that states (at least the first of) the `focus` facts.

    Returns (kind, text).
    """
    kinds = _ZH_KINDS if lang == "zh" else _EN_KINDS
    kind, gen, _ = rng.choices(kinds, weights=[k[2] for k in kinds])[0]
    return kind, gen(rng, focus)
