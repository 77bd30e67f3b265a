"""The knowledge base the sample corpora teach and the sample benchmarks test: fixed finance, legal and general facts.

Every fact is a (term, relation, value) triple written in Chinese and English, e.g. 资产负债表 / 反映 /
企业在某一特定日期的财务状况. The corpora state each fact many times inside varied sentence frames
(`render_fact`) and the SFT exam data asks about them (yunshan.samples.questions). The knowledge base has two sides
(EVAL_FACTS): the training corpora and SFT sets state and ask about the training side only, the evaluation files
ask about the evaluation side only and the held-out texts state it (beside the training-side facts a document
applies by name, such as a report's net profit), so an evaluation item's answer is never in the training data (a
test checks it): the sample benchmarks measure what transfers, not what was memorised. Distractors of a
multiple-choice item are values (or terms) of other facts of the same *kind* and side, so the four options always
read alike.

The facts are not seeded: they are the same for every seed. The legal facts
are the articles of four synthetic codes (《示范民法》, 《示范刑法》, 《示范民事诉讼法》, 《示范劳动法》): they paraphrase
and simplify rules of the kind found in Chinese law and are NOT authoritative statements of any real law; the
amount thresholds and sentencing steps are invented for the samples.

Nothing to run on its own; `python -m yunshan.samples --out DIR` writes everything built from it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from . import lexicon as lx
from .lexicon import cn_numeral


@dataclass(frozen=True)
class Kind:
    """A group of facts whose values (and terms) are interchangeable as multiple-choice distractors."""

    name: str
    domain: str  # finance | legal | general
    zh_category: str  # used in exam stems: 下列关于{zh_category}的表述中...
    en_category: str
    reverse: bool  # whether "which term has this value?" questions read naturally
    extra_values: tuple[str, ...] = ()  # plausible wrong values when the kind has few distinct ones


@dataclass(frozen=True)
class Fact:
    """One term -> value fact, in Chinese and English; `article` places a legal fact in a synthetic code."""

    id: str
    kind: str
    domain: str
    subject: str
    zh_term: str
    zh_rel: str
    zh_value: str
    en_term: str
    en_rel: str
    en_value: str
    article: tuple[str, int] | None = None  # (code, article number) for legal facts

    @property
    def zh(self) -> str:
        """The canonical Chinese statement (no final punctuation): term + relation + value."""
        return f"{self.zh_term}{self.zh_rel}{self.zh_value}"

    @property
    def en(self) -> str:
        """The canonical English statement, capitalised, without the final full stop."""
        return _cap(f"{self.en_term} {self.en_rel} {self.en_value}")


def _cap(s: str) -> str:
    return s[:1].upper() + s[1:]


# Synthetic codes: Chinese title, English title, LawBench-style short name used in article-prediction answers.
CODES = {
    "civil": ("示范民法", "Model Civil Code"),
    "criminal": ("示范刑法", "Model Criminal Code"),
    "procedure": ("示范民事诉讼法", "Model Civil Procedure Law"),
    "labor": ("示范劳动法", "Model Labour Law"),
}

# ------------------------------------------------------------------------------------------------ the tables
# "@ kind | domain | zh category | en category | reverse(0/1) | extra wrong values separated by ;" opens a kind;
# then one fact per line: "subject | zh term | zh rel | zh value | en term | en rel | en value [| code:article]".
_FINANCE_TABLE = """
@ fin_report | finance | 会计报表 | financial statement | 1 |
accounting | 资产负债表 | 反映 | 企业在某一特定日期的财务状况 | the balance sheet | reports | the financial position of an entity at a specific date
accounting | 利润表 | 反映 | 企业在一定会计期间的经营成果 | the income statement | reports | the operating results of an entity over an accounting period
accounting | 现金流量表 | 反映 | 企业在一定会计期间现金和现金等价物流入和流出的情况 | the cash flow statement | reports | the inflows and outflows of cash and cash equivalents over a period
accounting | 所有者权益变动表 | 反映 | 构成所有者权益的各组成部分当期的增减变动情况 | the statement of changes in equity | reports | the movements in each component of owners' equity during the period
accounting | 财务报表附注 | 提供 | 对报表中列示项目的文字描述或明细资料 | the notes to the financial statements | provide | narrative descriptions and breakdowns of the items presented in the statements

@ fin_element | finance | 会计要素或会计科目 | accounting element or account | 1 |
accounting | 资产 | 是指 | 企业过去的交易或者事项形成的、由企业拥有或者控制的、预期会给企业带来经济利益的资源 | assets | are | resources controlled by an entity as a result of past events from which future economic benefits are expected
accounting | 负债 | 是指 | 企业过去的交易或者事项形成的、预期会导致经济利益流出企业的现时义务 | liabilities | are | present obligations arising from past events that are expected to cause an outflow of economic benefits
accounting | 所有者权益 | 是指 | 企业资产扣除负债后由所有者享有的剩余权益 | owners' equity | is | the residual interest in the assets of an entity after deducting all its liabilities
accounting | 收入 | 是指 | 企业在日常活动中形成的、会导致所有者权益增加的、与所有者投入资本无关的经济利益的总流入 | revenue | is | the gross inflow of economic benefits from ordinary activities that increases equity, other than contributions from owners
accounting | 费用 | 是指 | 企业在日常活动中发生的、会导致所有者权益减少的、与向所有者分配利润无关的经济利益的总流出 | expenses | are | outflows of economic benefits from ordinary activities that decrease equity, other than distributions to owners
accounting | 应收账款 | 是指 | 企业因销售商品、提供劳务等经营活动应向购货单位或接受劳务单位收取的款项 | accounts receivable | are | amounts owed to an entity by customers for goods sold or services rendered on credit
accounting | 应付账款 | 是指 | 企业因购买材料、商品和接受劳务等经营活动应支付的款项 | accounts payable | are | amounts an entity owes to suppliers for materials, goods or services bought on credit
accounting | 预付账款 | 是指 | 企业按照购货合同规定预付给供应单位的款项 | prepayments | are | amounts paid to suppliers in advance under purchase contracts
accounting | 预收账款 | 是指 | 企业按照合同规定向购货单位预先收取的款项 | advances from customers | are | amounts received from customers before the goods or services are delivered
accounting | 存货 | 是指 | 企业在日常活动中持有以备出售的产成品或商品、处在生产过程中的在产品以及在生产过程中耗用的材料 | inventories | are | goods held for sale, work in progress, and materials to be consumed in production
accounting | 固定资产 | 是指 | 为生产商品、提供劳务、出租或经营管理而持有且使用寿命超过一个会计年度的有形资产 | fixed assets | are | tangible assets held for production, services, rental or administration and used for more than one accounting year
accounting | 无形资产 | 是指 | 企业拥有或者控制的没有实物形态的可辨认非货币性资产 | intangible assets | are | identifiable non-monetary assets without physical substance controlled by an entity
accounting | 商誉 | 是指 | 企业合并成本大于合并中取得的被购买方可辨认净资产公允价值份额的差额 | goodwill | is | the excess of the cost of a business combination over the acquirer's share of the fair value of the net assets acquired
accounting | 长期股权投资 | 是指 | 投资方对被投资单位实施控制、共同控制或重大影响的权益性投资 | long-term equity investments | are | equity investments through which an investor controls, jointly controls or significantly influences an investee
accounting | 交易性金融资产 | 是指 | 企业为了近期内出售而持有的金融资产 | trading financial assets | are | financial assets held principally for the purpose of selling in the near term
accounting | 在建工程 | 是指 | 企业正在建设、尚未达到预定可使用状态的工程项目 | construction in progress | is | a construction project that has not yet reached its intended usable condition
accounting | 累计折旧 | 是指 | 固定资产在使用寿命内已经计提的折旧总额 | accumulated depreciation | is | the total depreciation charged on fixed assets to date
accounting | 坏账准备 | 是指 | 企业对预计无法收回的应收款项计提的减值准备 | the allowance for bad debts | is | the impairment provision made for receivables that are expected to be uncollectible
accounting | 实收资本 | 是指 | 投资者按照企业章程或合同约定实际投入企业的资本 | paid-in capital | is | the capital actually contributed by investors under the articles of association or the contract
accounting | 资本公积 | 是指 | 企业收到投资者出资额超出其在注册资本中所占份额的部分 | capital reserve | is | the amount contributed by investors in excess of their share of registered capital
accounting | 盈余公积 | 是指 | 企业按照规定从净利润中提取的积累资金 | surplus reserve | is | the fund appropriated from net profit in accordance with regulations
accounting | 未分配利润 | 是指 | 企业留待以后年度分配的结存利润 | undistributed profit | is | the retained profit left for distribution in future years
accounting | 营业外收入 | 是指 | 企业发生的与其日常活动无直接关系的各项利得 | non-operating income | is | gains that are not directly related to an entity's ordinary activities
accounting | 营业外支出 | 是指 | 企业发生的与其日常活动无直接关系的各项损失 | non-operating expenses | are | losses that are not directly related to an entity's ordinary activities
accounting | 管理费用 | 是指 | 企业为组织和管理生产经营活动而发生的各种费用 | administrative expenses | are | expenses incurred to organise and manage an entity's operations
accounting | 销售费用 | 是指 | 企业在销售商品和材料、提供劳务的过程中发生的各种费用 | selling expenses | are | expenses incurred in selling goods and materials and rendering services
accounting | 财务费用 | 是指 | 企业为筹集生产经营所需资金而发生的利息支出等筹资费用 | finance costs | are | costs such as interest expense incurred in raising the funds an entity needs
accounting | 递延所得税资产 | 是指 | 可抵扣暂时性差异在未来期间可以减少的所得税金额 | deferred tax assets | are | the amounts of income tax recoverable in future periods in respect of deductible temporary differences

@ fin_formula | finance | 财务指标 | financial measure | 1 |
accounting | 净利润 | 等于 | 利润总额减去所得税费用 | net profit | equals | total profit minus income tax expense
accounting | 毛利 | 等于 | 营业收入减去营业成本 | gross profit | equals | operating revenue minus operating cost
accounting | 利润总额 | 等于 | 营业利润加上营业外收入再减去营业外支出 | total profit | equals | operating profit plus non-operating income minus non-operating expenses
accounting | 毛利率 | 等于 | 毛利除以营业收入 | gross margin | equals | gross profit divided by operating revenue
accounting | 净利率 | 等于 | 净利润除以营业收入 | net margin | equals | net profit divided by operating revenue
accounting | 流动比率 | 等于 | 流动资产除以流动负债 | the current ratio | equals | current assets divided by current liabilities
accounting | 速动比率 | 等于 | 速动资产除以流动负债 | the quick ratio | equals | quick assets divided by current liabilities
accounting | 资产负债率 | 等于 | 负债总额除以资产总额 | the debt-to-asset ratio | equals | total liabilities divided by total assets
accounting | 净资产收益率 | 等于 | 净利润除以平均净资产 | return on equity | equals | net profit divided by average net assets
accounting | 总资产收益率 | 等于 | 净利润除以平均资产总额 | return on assets | equals | net profit divided by average total assets
accounting | 每股收益 | 等于 | 归属于普通股股东的净利润除以发行在外普通股的加权平均数 | earnings per share | equals | net profit attributable to ordinary shareholders divided by the weighted average number of ordinary shares outstanding
securities_practitioner_qualification_certificate | 市盈率 | 等于 | 每股市价除以每股收益 | the price-to-earnings ratio | equals | the market price per share divided by earnings per share
securities_practitioner_qualification_certificate | 市净率 | 等于 | 每股市价除以每股净资产 | the price-to-book ratio | equals | the market price per share divided by net assets per share
accounting | 存货周转率 | 等于 | 营业成本除以平均存货余额 | inventory turnover | equals | operating cost divided by average inventory
accounting | 应收账款周转率 | 等于 | 营业收入除以平均应收账款余额 | receivables turnover | equals | operating revenue divided by average accounts receivable
accounting | 权益乘数 | 等于 | 资产总额除以所有者权益总额 | the equity multiplier | equals | total assets divided by total owners' equity
accounting | 利息保障倍数 | 等于 | 息税前利润除以利息费用 | the interest coverage ratio | equals | earnings before interest and tax divided by interest expense
securities_practitioner_qualification_certificate | 股息率 | 等于 | 每股股利除以每股市价 | the dividend yield | equals | dividends per share divided by the market price per share
tax_law | 一般纳税人的增值税应纳税额 | 等于 | 当期销项税额减去当期进项税额 | the VAT payable by a general taxpayer | equals | output VAT for the period minus input VAT for the period
auditing | 审计风险 | 等于 | 重大错报风险乘以检查风险 | audit risk | equals | the risk of material misstatement multiplied by detection risk
monetary_financial_theory | 基础货币 | 等于 | 流通中的现金加上商业银行的存款准备金 | the monetary base | equals | currency in circulation plus the reserves commercial banks hold

@ fin_principle | finance | 会计信息质量要求 | accounting principle | 1 |
accounting | 谨慎性 | 要求 | 企业不应高估资产或者收益、低估负债或者费用 | prudence | requires | that an entity not overstate assets or income nor understate liabilities or expenses
accounting | 实质重于形式 | 要求 | 企业按照交易或者事项的经济实质进行会计确认、计量和报告 | substance over form | requires | that transactions be recognised, measured and reported according to their economic substance
accounting | 重要性 | 要求 | 企业提供的会计信息反映与财务状况、经营成果和现金流量有关的所有重要交易或者事项 | materiality | requires | that the information reflect all transactions significant to the financial position, results and cash flows
accounting | 可比性 | 要求 | 同一企业不同时期以及不同企业相同会计期间的相似交易采用一致的会计政策 | comparability | requires | that consistent accounting policies be applied to similar transactions across periods and across entities
accounting | 及时性 | 要求 | 企业对已经发生的交易或者事项及时进行会计确认、计量和报告，不得提前或者延后 | timeliness | requires | that transactions be recognised, measured and reported promptly, neither early nor late
accounting | 可靠性 | 要求 | 企业以实际发生的交易或者事项为依据进行会计确认、计量和报告 | reliability | requires | that recognition, measurement and reporting be based on transactions that actually occurred
accounting | 权责发生制 | 要求 | 凡是当期已经实现的收入和已经发生的费用，无论款项是否收付，都作为当期的收入和费用 | the accrual basis | requires | that revenue earned and expenses incurred in a period be recognised in that period whether or not cash has moved
accounting | 收付实现制 | 要求 | 以款项的实际收付为标准确认本期的收入和费用 | the cash basis | requires | that revenue and expenses be recognised when cash is actually received or paid

@ fin_assumption | finance | 会计基本假设或计量属性 | accounting assumption or measurement basis | 1 |
accounting | 会计主体 | 是指 | 企业会计确认、计量和报告的空间范围 | the accounting entity assumption | is | the spatial scope within which an enterprise recognises, measures and reports
accounting | 持续经营 | 是指 | 在可以预见的将来企业将会按当前的规模和状态继续经营下去 | the going concern assumption | is | that the enterprise will continue operating at its current scale for the foreseeable future
accounting | 会计分期 | 是指 | 将企业持续经营的生产经营活动划分为连续的、长短相同的期间 | the accounting period assumption | is | the division of continuing operations into consecutive periods of equal length
accounting | 货币计量 | 是指 | 会计主体在会计确认、计量和报告时以货币作为计量尺度 | the monetary measurement assumption | is | that the entity uses money as the unit of measure when it recognises, measures and reports
accounting | 历史成本 | 是指 | 取得或制造某项财产物资时实际支付的现金或者其他等价物 | historical cost | is | the cash or equivalent actually paid when an asset was acquired or made
accounting | 重置成本 | 是指 | 按照当前市场条件重新取得同样一项资产所需支付的现金或现金等价物金额 | replacement cost | is | the amount of cash needed to acquire the same asset again under current market conditions
accounting | 现值 | 是指 | 对未来现金流量以恰当的折现率进行折现后的价值 | present value | is | the value of future cash flows discounted at an appropriate rate
accounting | 公允价值 | 是指 | 市场参与者在计量日发生的有序交易中出售一项资产所能收到的价格 | fair value | is | the price that would be received to sell an asset in an orderly transaction between market participants at the measurement date

@ fin_pct | finance | 税率或监管比例 | rate or regulatory ratio | 0 | 5%;12%;17%;30%;35%;50%;150%
tax_law | 企业所得税的基本税率 | 为 | 25% | the standard corporate income tax rate | is | 25%
tax_law | 国家重点扶持的高新技术企业适用的企业所得税税率 | 为 | 15% | the corporate income tax rate for state-supported high-tech enterprises | is | 15%
tax_law | 增值税一般纳税人销售货物的基本税率 | 为 | 13% | the basic VAT rate on sales of goods by general taxpayers | is | 13%
tax_law | 增值税一般纳税人提供交通运输服务的税率 | 为 | 9% | the VAT rate on transport services provided by general taxpayers | is | 9%
tax_law | 增值税一般纳税人提供现代服务的税率 | 为 | 6% | the VAT rate on modern services provided by general taxpayers | is | 6%
tax_law | 增值税小规模纳税人的征收率 | 为 | 3% | the VAT levy rate for small-scale taxpayers | is | 3%
tax_law | 个人所得税综合所得适用的最高边际税率 | 为 | 45% | the top marginal individual income tax rate on comprehensive income | is | 45%
tax_law | 利息、股息、红利所得适用的个人所得税税率 | 为 | 20% | the individual income tax rate on interest, dividends and bonuses | is | 20%
tax_law | 纳税人所在地在市区的城市维护建设税税率 | 为 | 7% | the urban maintenance and construction tax rate for taxpayers located in a city | is | 7%
tax_law | 非居民企业取得境内股息所得适用的预提所得税税率 | 为 | 10% | the withholding tax rate on domestic dividends received by non-resident enterprises | is | 10%
banking_practitioner_qualification_certificate | 商业银行资本充足率的监管最低要求 | 为 | 8% | the regulatory minimum capital adequacy ratio of a commercial bank | is | 8%
banking_practitioner_qualification_certificate | 商业银行核心一级资本充足率的监管最低要求 | 为 | 5% | the regulatory minimum core tier-one capital ratio of a commercial bank | is | 5%
banking_practitioner_qualification_certificate | 商业银行一级资本充足率的监管最低要求 | 为 | 6% | the regulatory minimum tier-one capital ratio of a commercial bank | is | 6%
banking_practitioner_qualification_certificate | 商业银行流动性覆盖率的监管最低要求 | 为 | 100% | the regulatory minimum liquidity coverage ratio of a commercial bank | is | 100%
securities_practitioner_qualification_certificate | 主板股票的日涨跌幅限制 | 为 | 10% | the daily price limit for main-board shares | is | 10%
securities_practitioner_qualification_certificate | 创业板股票的日涨跌幅限制 | 为 | 20% | the daily price limit for ChiNext shares | is | 20%
securities_practitioner_qualification_certificate | 投资者持股达到需要首次披露权益变动报告的比例 | 为 | 5% | the shareholding at which an investor must first disclose a change in interests | is | 5%

@ fin_tax | finance | 税收概念 | tax concept | 1 |
tax_law | 增值税 | 是指 | 以商品和劳务在流转过程中产生的增值额为计税依据征收的一种流转税 | value-added tax | is | a turnover tax levied on the value added as goods and services move through the chain
tax_law | 消费税 | 是指 | 对特定消费品和消费行为在特定环节征收的一种流转税 | consumption tax | is | a turnover tax levied on specific consumer goods at specific stages
tax_law | 企业所得税 | 是指 | 对企业和其他取得收入的组织的生产经营所得和其他所得征收的税 | corporate income tax | is | a tax on the business income and other income of enterprises and income-earning organisations
tax_law | 印花税 | 是指 | 对经济活动中书立、领受应税凭证的行为征收的税 | stamp duty | is | a tax on executing or receiving taxable documents in economic activities
tax_law | 进项税额 | 是指 | 纳税人购进货物、劳务、服务等支付或者负担的增值税额 | input VAT | is | the VAT a taxpayer pays or bears when purchasing goods, labour or services
tax_law | 销项税额 | 是指 | 纳税人发生应税销售行为时按照销售额和适用税率计算收取的增值税额 | output VAT | is | the VAT a taxpayer charges on taxable sales at the applicable rate
tax_law | 应纳税所得额 | 是指 | 企业每一纳税年度的收入总额减除不征税收入、免税收入、各项扣除以及允许弥补的以前年度亏损后的余额 | taxable income | is | total annual revenue less non-taxable income, exempt income, deductions and allowable prior-year losses

@ fin_audit | finance | 审计概念 | auditing concept | 1 |
auditing | 重大错报风险 | 是指 | 财务报表在审计前存在重大错报的可能性 | the risk of material misstatement | is | the risk that the financial statements are materially misstated before the audit
auditing | 检查风险 | 是指 | 某一认定存在错报而注册会计师未能发现这种错报的可能性 | detection risk | is | the risk that the auditor fails to detect a misstatement that exists in an assertion
auditing | 函证 | 是指 | 注册会计师直接从第三方获取书面答复作为审计证据的过程 | external confirmation | is | the process by which the auditor obtains a written reply directly from a third party as audit evidence
auditing | 监盘 | 是指 | 注册会计师现场监督被审计单位存货等实物资产的盘点并进行适当抽查 | attendance at stocktaking | is | the auditor's observation of the count of inventory and other physical assets, with test counts
auditing | 审计证据 | 是指 | 注册会计师为了得出审计结论和形成审计意见而使用的全部信息 | audit evidence | is | all the information the auditor uses in reaching conclusions on which the opinion is based
auditing | 内部控制 | 是指 | 被审计单位为合理保证财务报告的可靠性、经营的效率和效果以及对法律法规的遵守而设计和执行的政策和程序 | internal control | is | the policies and procedures an entity designs and operates to give reasonable assurance about reliable reporting, efficient operations and compliance
auditing | 分析程序 | 是指 | 注册会计师通过分析不同财务数据之间以及财务数据与非财务数据之间的内在关系对财务信息作出评价 | analytical procedures | are | evaluations of financial information made by studying relationships among financial and non-financial data
auditing | 无保留意见 | 适用于 | 财务报表在所有重大方面按照适用的财务报告编制基础编制并实现公允反映的情形 | an unmodified opinion | applies to | statements that are prepared in all material respects in accordance with the applicable framework and present fairly
auditing | 保留意见 | 适用于 | 错报单独或汇总起来对财务报表影响重大但不具有广泛性的情形 | a qualified opinion | applies to | misstatements that are material but not pervasive to the financial statements
auditing | 否定意见 | 适用于 | 错报单独或汇总起来对财务报表的影响重大且具有广泛性的情形 | an adverse opinion | applies to | misstatements that are both material and pervasive to the financial statements
auditing | 无法表示意见 | 适用于 | 无法获取充分、适当的审计证据且未发现的错报可能产生的影响重大且具有广泛性的情形 | a disclaimer of opinion | applies to | cases where sufficient appropriate evidence cannot be obtained and the possible effects are material and pervasive

@ fin_bank | finance | 货币金融概念 | monetary and banking concept | 1 |
monetary_financial_theory | 存款准备金 | 是指 | 金融机构为保证客户提取存款和资金清算需要而缴存在中央银行的存款 | required reserves | are | deposits that financial institutions keep at the central bank to meet withdrawals and settlement needs
monetary_financial_theory | 再贴现 | 是指 | 商业银行将已贴现未到期的票据再向中央银行进行贴现的行为 | rediscounting | is | a commercial bank's discounting of already-discounted unmatured bills again at the central bank
monetary_financial_theory | 公开市场操作 | 是指 | 中央银行在金融市场上买卖有价证券以调节货币供应量的政策工具 | open market operations | are | the central bank's purchases and sales of securities in the market to adjust the money supply
monetary_financial_theory | 货币乘数 | 是指 | 货币供应量与基础货币之间的倍数关系 | the money multiplier | is | the ratio of the money supply to the monetary base
monetary_financial_theory | 狭义货币供应量M1 | 是指 | 流通中现金加上企业活期存款 | the narrow money supply M1 | is | currency in circulation plus demand deposits of enterprises
monetary_financial_theory | 广义货币供应量M2 | 是指 | M1加上定期存款、储蓄存款等准货币 | the broad money supply M2 | is | M1 plus quasi-money such as time deposits and savings deposits
monetary_financial_theory | 贷款市场报价利率 | 是指 | 由报价行根据对最优质客户执行的贷款利率报价计算得出的利率 | the loan prime rate | is | the rate computed from the rates that quoting banks charge their best customers
monetary_financial_theory | 同业拆借 | 是指 | 金融机构之间进行短期资金融通的行为 | interbank lending | is | short-term lending of funds between financial institutions
banking_practitioner_qualification_certificate | 不良贷款 | 是指 | 五级分类中的次级、可疑和损失三类贷款 | non-performing loans | are | the substandard, doubtful and loss categories of the five-category loan classification
banking_practitioner_qualification_certificate | 资本充足率 | 是指 | 商业银行持有的资本与风险加权资产之间的比率 | the capital adequacy ratio | is | the ratio of a commercial bank's capital to its risk-weighted assets
banking_practitioner_qualification_certificate | 存款保险 | 是指 | 投保机构交纳保费、在投保机构出现问题时由存款保险基金对存款人进行偿付的制度 | deposit insurance | is | a scheme in which insured institutions pay premiums and a fund repays depositors if an institution fails
banking_practitioner_qualification_certificate | 信用风险 | 是指 | 借款人或交易对手未能履行合同义务而造成损失的风险 | credit risk | is | the risk of loss when a borrower or counterparty fails to meet its contractual obligations
banking_practitioner_qualification_certificate | 流动性风险 | 是指 | 商业银行无法以合理成本及时获得充足资金偿付到期债务的风险 | liquidity risk | is | the risk that a bank cannot obtain enough funds at reasonable cost to pay its debts as they fall due
banking_practitioner_qualification_certificate | 操作风险 | 是指 | 由不完善或有问题的内部程序、人员、系统或外部事件所造成损失的风险 | operational risk | is | the risk of loss from inadequate or failed internal processes, people and systems or from external events

@ fin_sec | finance | 证券市场概念 | securities market concept | 1 |
securities_practitioner_qualification_certificate | 股票 | 是指 | 股份有限公司签发的证明股东所持股份的凭证 | a share | is | a certificate issued by a company limited by shares evidencing the shares a shareholder holds
securities_practitioner_qualification_certificate | 债券 | 是指 | 发行人依照法定程序发行、约定在一定期限还本付息的有价证券 | a bond | is | a security issued under statutory procedures that promises to repay principal and interest within a set term
securities_practitioner_qualification_certificate | 证券投资基金 | 是指 | 通过发售基金份额募集资金、由基金托管人托管、由基金管理人管理和运用资金的集合投资方式 | a securities investment fund | is | a pooled investment vehicle that raises money by selling units, held by a custodian and managed by a fund manager
securities_practitioner_qualification_certificate | 可转换公司债券 | 是指 | 在一定期间内依据约定的条件可以转换成股票的公司债券 | a convertible bond | is | a corporate bond that can be converted into shares on agreed terms within a set period
securities_practitioner_qualification_certificate | 期货合约 | 是指 | 由期货交易所统一制定的、规定在将来某一特定时间和地点交割一定数量标的物的标准化合约 | a futures contract | is | a standardised exchange contract to deliver a set quantity of an underlying at a specified future time and place
securities_practitioner_qualification_certificate | 看涨期权 | 是指 | 赋予持有人在约定期限内以约定价格买入标的资产权利的合约 | a call option | is | a contract giving the holder the right to buy the underlying at an agreed price within an agreed period
securities_practitioner_qualification_certificate | 看跌期权 | 是指 | 赋予持有人在约定期限内以约定价格卖出标的资产权利的合约 | a put option | is | a contract giving the holder the right to sell the underlying at an agreed price within an agreed period
securities_practitioner_qualification_certificate | 久期 | 是指 | 债券各期现金流到期时间的加权平均，用于衡量债券价格对利率变动的敏感程度 | duration | is | the weighted average time to a bond's cash flows, measuring the sensitivity of its price to interest rates
securities_practitioner_qualification_certificate | 到期收益率 | 是指 | 使债券未来现金流的现值等于当前价格的折现率 | yield to maturity | is | the discount rate that makes the present value of a bond's future cash flows equal to its price
securities_practitioner_qualification_certificate | 贝塔系数 | 是指 | 衡量单个证券收益率相对于市场组合收益率变动程度的指标 | beta | is | a measure of how much a security's return moves relative to the return of the market portfolio
securities_practitioner_qualification_certificate | 夏普比率 | 是指 | 投资组合的超额收益与其收益标准差的比值 | the Sharpe ratio | is | a portfolio's excess return divided by the standard deviation of its return
securities_practitioner_qualification_certificate | 系统性风险 | 是指 | 由影响整个市场的因素引起、不能通过分散投资消除的风险 | systematic risk | is | risk caused by market-wide factors that cannot be removed by diversification
securities_practitioner_qualification_certificate | 非系统性风险 | 是指 | 只影响个别公司或行业、可以通过分散投资消除的风险 | unsystematic risk | is | risk that affects only a single company or industry and can be removed by diversification
securities_practitioner_qualification_certificate | 融资融券 | 是指 | 投资者向证券公司提供担保物，借入资金买入证券或借入证券卖出的交易活动 | margin trading and short selling | is | trading in which an investor posts collateral with a broker to borrow money to buy or securities to sell
securities_practitioner_qualification_certificate | 首次公开发行 | 是指 | 公司第一次向社会公众公开发行股票的行为 | an initial public offering | is | a company's first sale of shares to the public
securities_practitioner_qualification_certificate | 定向增发 | 是指 | 上市公司向特定对象非公开发行股票的行为 | a private placement | is | a listed company's non-public issue of new shares to specific investors
securities_practitioner_qualification_certificate | 股票回购 | 是指 | 上市公司利用自有资金从二级市场上买回本公司发行在外股份的行为 | a share buyback | is | a listed company's purchase of its own outstanding shares in the secondary market with its own funds
securities_practitioner_qualification_certificate | 除权除息日 | 是指 | 股权登记日后的下一个交易日，当日股价扣除所分配股利或送转股份的价值 | the ex-dividend date | is | the trading day after the record date, on which the price excludes the dividend or bonus shares

@ fin_macro | finance | 宏观经济概念 | macroeconomic concept | 1 |
macroeconomics | 国内生产总值 | 是指 | 一个国家或地区所有常住单位在一定时期内生产活动的最终成果 | gross domestic product | is | the final output of all resident units of a country or region over a period
macroeconomics | 居民消费价格指数 | 是指 | 反映一定时期内居民所购买的生活消费品和服务项目价格变动趋势和程度的相对数 | the consumer price index | is | a relative number showing the trend and degree of change in the prices of consumer goods and services bought by households
macroeconomics | 工业生产者出厂价格指数 | 是指 | 反映一定时期内全部工业产品出厂价格总水平变动趋势和程度的相对数 | the producer price index | is | a relative number showing the trend and degree of change in ex-factory prices of industrial products
macroeconomics | 通货膨胀 | 是指 | 一般物价水平在一定时期内持续上涨的现象 | inflation | is | a sustained rise in the general price level over a period
macroeconomics | 通货紧缩 | 是指 | 一般物价水平在一定时期内持续下降的现象 | deflation | is | a sustained fall in the general price level over a period
macroeconomics | 滞胀 | 是指 | 经济停滞与通货膨胀同时存在的现象 | stagflation | is | the coexistence of economic stagnation and inflation
macroeconomics | 菲利普斯曲线 | 是指 | 描述失业率与通货膨胀率之间此消彼长关系的曲线 | the Phillips curve | is | a curve describing the trade-off between unemployment and inflation
macroeconomics | 奥肯定律 | 是指 | 失业率与实际产出增长率之间存在反向变动关系的经验规律 | Okun's law | is | the empirical inverse relationship between unemployment and real output growth
macroeconomics | 乘数效应 | 是指 | 支出的变动引起国民收入成倍变动的现象 | the multiplier effect | is | the phenomenon that a change in spending changes national income by a multiple
macroeconomics | 挤出效应 | 是指 | 政府支出增加导致私人投资和消费减少的现象 | the crowding-out effect | is | the reduction in private investment and consumption caused by higher government spending
macroeconomics | 流动性陷阱 | 是指 | 利率降到极低水平时人们愿意持有任何数量的货币、货币政策失效的状态 | the liquidity trap | is | a state in which rates are so low that people hold any amount of money and monetary policy loses its effect
macroeconomics | 扩张性财政政策 | 是指 | 通过增加政府支出或减少税收来刺激总需求的政策 | an expansionary fiscal policy | is | a policy that stimulates aggregate demand by raising government spending or cutting taxes
macroeconomics | 紧缩性货币政策 | 是指 | 通过减少货币供应量、提高利率来抑制总需求的政策 | a contractionary monetary policy | is | a policy that restrains aggregate demand by reducing the money supply and raising interest rates
macroeconomics | 基尼系数 | 是指 | 衡量一个国家或地区居民收入分配差异程度的指标 | the Gini coefficient | is | a measure of how unequally income is distributed among residents of a country or region
macroeconomics | 恩格尔系数 | 是指 | 食品支出总额占个人消费支出总额的比重 | the Engel coefficient | is | the share of food spending in total personal consumption spending
macroeconomics | 自然失业率 | 是指 | 经济处于充分就业状态时仍然存在的摩擦性失业和结构性失业的比率 | the natural rate of unemployment | is | the rate of frictional and structural unemployment that remains at full employment

@ fin_micro | finance | 微观经济概念 | microeconomic concept | 1 |
microeconomics | 机会成本 | 是指 | 为了得到某种东西而放弃的其他选择中价值最高者 | opportunity cost | is | the most valuable alternative given up to obtain something
microeconomics | 沉没成本 | 是指 | 已经发生且无法收回的成本 | a sunk cost | is | a cost that has already been incurred and cannot be recovered
microeconomics | 边际成本 | 是指 | 每增加一单位产量所增加的总成本 | marginal cost | is | the increase in total cost from producing one more unit
microeconomics | 边际效用递减规律 | 是指 | 随着消费数量增加，消费者从每增加一单位商品中得到的效用增量逐渐减少 | the law of diminishing marginal utility | is | the tendency for each additional unit consumed to add less utility than the one before
microeconomics | 需求价格弹性 | 是指 | 需求量变动对价格变动的反应程度 | the price elasticity of demand | is | the responsiveness of the quantity demanded to a change in price
microeconomics | 消费者剩余 | 是指 | 消费者愿意支付的最高价格与实际支付价格之间的差额 | consumer surplus | is | the difference between the most a consumer is willing to pay and the price actually paid
microeconomics | 生产者剩余 | 是指 | 生产者实际得到的收入与其愿意接受的最低收入之间的差额 | producer surplus | is | the difference between what producers receive and the least they would accept
microeconomics | 外部性 | 是指 | 一个经济主体的行为对他人产生了未在市场价格中反映的影响 | an externality | is | an effect of one party's activity on others that is not reflected in market prices
microeconomics | 公共物品 | 是指 | 具有非排他性和非竞争性的物品 | a public good | is | a good that is non-excludable and non-rival
microeconomics | 完全竞争市场 | 是指 | 有大量买者和卖者、产品同质、信息充分且可以自由进出的市场结构 | a perfectly competitive market | is | a market with many buyers and sellers, identical products, full information and free entry and exit
microeconomics | 完全垄断市场 | 是指 | 只有唯一的卖者、产品没有相近替代品的市场结构 | a monopoly | is | a market with a single seller of a product that has no close substitutes
microeconomics | 规模经济 | 是指 | 随着生产规模扩大，长期平均成本逐渐下降的现象 | economies of scale | are | the fall in long-run average cost as the scale of production grows
microeconomics | 吉芬商品 | 是指 | 价格上升时需求量反而增加的特殊商品 | a Giffen good | is | a special good whose quantity demanded rises when its price rises
microeconomics | 帕累托最优 | 是指 | 资源配置已无法在不使任何人境况变坏的情况下使某人境况变好的状态 | Pareto optimality | is | an allocation in which no one can be made better off without making someone worse off

@ fin_ins | finance | 保险原则与概念 | insurance principle or concept | 1 |
insurance | 保险利益原则 | 是指 | 投保人或被保险人对保险标的必须具有法律上承认的利益 | the principle of insurable interest | is | that the policyholder or insured must have a legally recognised interest in the subject matter
insurance | 最大诚信原则 | 是指 | 保险合同当事人订立和履行合同时必须如实告知并恪守约定 | the principle of utmost good faith | is | that the parties to an insurance contract must disclose truthfully and keep their undertakings
insurance | 近因原则 | 是指 | 只有当保险事故与损失之间具有直接的、决定性的因果关系时保险人才承担赔偿责任 | the principle of proximate cause | is | that the insurer pays only when the insured event is the direct and decisive cause of the loss
insurance | 损失补偿原则 | 是指 | 保险人的赔偿以使被保险人恢复到损失前的经济状态为限 | the principle of indemnity | is | that the insurer's payment is limited to restoring the insured to the financial position before the loss
insurance | 代位求偿权 | 是指 | 保险人赔偿被保险人损失后在赔偿金额范围内向第三者请求赔偿的权利 | subrogation | is | the insurer's right, after paying the insured, to claim against the liable third party up to the amount paid
insurance | 免赔额 | 是指 | 保险合同约定的由被保险人自行承担的损失金额 | the deductible | is | the amount of loss that the insured agrees to bear under the policy
insurance | 犹豫期 | 是指 | 投保人收到保险合同后可以无条件解除合同并获得退还保费的一段期间 | the cooling-off period | is | a period after receiving the policy in which the policyholder may cancel without condition and get the premium back
insurance | 现金价值 | 是指 | 长期寿险保单中投保人解除合同时可以领取的金额 | the cash value | is | the amount a policyholder can receive on surrendering a long-term life policy
insurance | 再保险 | 是指 | 保险人将其承担的保险业务以分保形式部分转移给其他保险人的行为 | reinsurance | is | an insurer's transfer of part of the risks it has underwritten to other insurers
"""

_LEGAL_TABLE = """
@ law_period | legal | 法定期间 | statutory period | 0 | 三十日;四年;十年
civil | 向人民法院请求保护民事权利的诉讼时效期间 | 为 | 三年 | the limitation period for asking a people's court to protect civil rights | is | three years | civil:188
civil | 自权利受到损害之日起计算的诉讼时效最长保护期间 | 为 | 二十年 | the longest protection period counted from the day the right was infringed | is | twenty years | civil:188
civil | 当事人自知道或者应当知道撤销事由之日起行使撤销权的期间 | 为 | 一年 | the period for exercising a right of rescission after learning of the ground | is | one year | civil:152
civil | 重大误解的当事人行使撤销权的期间 | 为 | 九十日 | the period for a party acting under gross misunderstanding to rescind | is | ninety days | civil:152
civil | 当事人自民事法律行为发生之日起行使撤销权的最长期间 | 为 | 五年 | the longest period for rescission counted from the juristic act | is | five years | civil:152
civil | 未约定保证期间时的保证期间 | 为 | 主债务履行期限届满之日起六个月 | the guarantee period when none was agreed | is | six months from the maturity of the principal debt | civil:692
civil | 租赁合同的租赁期限 | 不得超过 | 二十年 | the term of a lease | may not exceed | twenty years | civil:705
civil | 申请宣告自然人失踪所需的下落不明时间 | 为 | 二年 | the time a person must be missing before a declaration of disappearance | is | two years | civil:40
civil | 申请宣告自然人死亡所需的下落不明时间 | 为 | 四年 | the time a person must be missing before a declaration of death | is | four years | civil:46
procedure | 当事人不服地方人民法院第一审判决的上诉期间 | 为 | 十五日 | the time limit for appealing a first-instance judgment of a local people's court | is | fifteen days | procedure:171
procedure | 当事人不服地方人民法院第一审裁定的上诉期间 | 为 | 十日 | the time limit for appealing a first-instance ruling of a local people's court | is | ten days | procedure:171
procedure | 人民法院适用普通程序审理案件的审理期限 | 为 | 立案之日起六个月 | the time limit for a case tried under the ordinary procedure | is | six months from filing | procedure:152
procedure | 人民法院适用简易程序审理案件的审理期限 | 为 | 立案之日起三个月 | the time limit for a case tried under the summary procedure | is | three months from filing | procedure:164
procedure | 申请执行的期间 | 为 | 二年 | the time limit for applying for enforcement | is | two years | procedure:250
labor | 劳动争议申请仲裁的时效期间 | 为 | 一年 | the limitation period for applying for labour dispute arbitration | is | one year | labor:27
labor | 劳动合同期限三个月以上不满一年的试用期 | 不得超过 | 一个月 | the probation period of a labour contract of three months to under one year | may not exceed | one month | labor:19
labor | 劳动合同期限一年以上不满三年的试用期 | 不得超过 | 二个月 | the probation period of a labour contract of one to under three years | may not exceed | two months | labor:19
labor | 三年以上固定期限和无固定期限劳动合同的试用期 | 不得超过 | 六个月 | the probation period of a fixed-term contract of three years or more or an open-ended contract | may not exceed | six months | labor:19

@ law_age | legal | 法定年龄 | statutory age | 0 | 十周岁;十二周岁;二十五周岁
civil | 成年人的年龄标准 | 为 | 十八周岁以上 | the age of majority | is | eighteen years and above | civil:17
civil | 限制民事行为能力的未成年人的年龄 | 为 | 八周岁以上 | the age from which a minor has limited capacity for civil conduct | is | eight years and above | civil:19
civil | 以自己的劳动收入为主要生活来源可以视为完全民事行为能力人的未成年人的年龄 | 为 | 十六周岁以上 | the age from which a minor living mainly on his own earnings is deemed to have full capacity | is | sixteen years and above | civil:18
criminal | 对故意杀人等严重犯罪应当负刑事责任的最低年龄 | 为 | 已满十四周岁 | the minimum age of criminal responsibility for intentional homicide and similar grave crimes | is | fourteen years | criminal:17
civil | 男性的法定结婚年龄 | 为 | 二十二周岁 | the legal marriage age for men | is | twenty-two | civil:1047
civil | 女性的法定结婚年龄 | 为 | 二十周岁 | the legal marriage age for women | is | twenty | civil:1047

@ law_concept | legal | 民事法律概念 | civil law concept | 1 |
civil | 不当得利 | 是指 | 没有法律根据取得不当利益而使他人受到损失的事实，受损失的人可以请求得利人返还 | unjust enrichment | is | obtaining a benefit without legal ground at another's expense, which the loser may reclaim | civil:985
civil | 无因管理 | 是指 | 没有法定的或者约定的义务，为避免他人利益受损失而管理他人事务的行为 | negotiorum gestio | is | managing another person's affairs without a legal or agreed duty in order to protect that person's interests | civil:979
civil | 善意取得 | 是指 | 受让人以合理价格善意受让无处分权人转让的财产并已完成交付或登记时取得所有权的制度 | good-faith acquisition | is | the rule that a buyer in good faith who pays a reasonable price and takes delivery or registration acquires ownership from a non-owner | civil:311
civil | 表见代理 | 是指 | 行为人没有代理权但相对人有理由相信其有代理权，代理行为有效的情形 | apparent agency | is | the case where an actor lacks authority but the counterparty has reason to believe he has it, so the act binds the principal | civil:172
civil | 无权代理 | 是指 | 行为人没有代理权、超越代理权或者代理权终止后仍然实施代理行为 | unauthorised agency | is | acting as an agent without authority, beyond authority or after authority has ended | civil:171
civil | 留置权 | 是指 | 债务人不履行到期债务时债权人可以留置已经合法占有的债务人的动产并优先受偿的权利 | a lien | is | a creditor's right to retain the debtor's movables it lawfully holds and be paid first from them when the debt is unpaid | civil:447
civil | 抵押权 | 是指 | 债务人或者第三人不转移财产占有而将该财产作为债权担保的权利 | a mortgage | is | security over property given by the debtor or a third party without transferring possession | civil:394
civil | 质权 | 是指 | 债务人或者第三人将其动产出质给债权人占有作为债权担保的权利 | a pledge | is | security created by delivering the debtor's or a third party's movables into the creditor's possession | civil:425
civil | 定金 | 是指 | 当事人约定由一方向对方给付、用以担保债务履行的一定数额的金钱 | earnest money | is | a sum one party pays the other to secure performance of a debt | civil:586
civil | 违约金 | 是指 | 当事人约定的一方违约时应当根据违约情况向对方支付的一定数额的金钱 | liquidated damages | are | a sum the parties agree one side pays the other according to the breach | civil:585
civil | 缔约过失责任 | 是指 | 当事人在订立合同过程中违背诚信原则给对方造成损失时应当承担的赔偿责任 | culpa in contrahendo | is | liability to compensate for losses caused by bad faith during contract negotiations | civil:500
civil | 情势变更 | 是指 | 合同成立后合同的基础条件发生了当事人无法预见的重大变化，继续履行对一方明显不公平的情形 | change of circumstances | is | an unforeseeable fundamental change in the basis of a contract that makes continued performance clearly unfair to one party | civil:533
civil | 不安抗辩权 | 是指 | 应当先履行债务的当事人有确切证据证明对方丧失或者可能丧失履行能力时可以中止履行的权利 | the defence of insecurity | is | the right of the party who must perform first to suspend performance on clear evidence that the other side may be unable to perform | civil:527
civil | 同时履行抗辩权 | 是指 | 当事人互负债务且没有先后履行顺序时，一方在对方履行之前有权拒绝其履行请求的权利 | the defence of simultaneous performance | is | the right to refuse performance until the other side performs when mutual debts have no order of performance | civil:525
civil | 代位权 | 是指 | 债务人怠于行使其到期债权影响债权人实现债权时，债权人以自己名义代位行使债务人对相对人权利的权利 | the creditor's subrogation right | is | a creditor's right to exercise in its own name the debtor's claims that the debtor neglects to enforce | civil:535
civil | 要约 | 是指 | 希望与他人订立合同的意思表示 | an offer | is | a declaration of intent to conclude a contract with another person | civil:472
civil | 要约邀请 | 是指 | 希望他人向自己发出要约的表示 | an invitation to offer | is | an expression inviting others to make offers | civil:473
civil | 承诺 | 是指 | 受要约人同意要约的意思表示 | an acceptance | is | the offeree's declaration of assent to an offer | civil:479
civil | 格式条款 | 是指 | 当事人为了重复使用而预先拟定、并在订立合同时未与对方协商的条款 | a standard term | is | a term drafted in advance for repeated use and not negotiated with the other party | civil:496
civil | 连带责任 | 是指 | 权利人有权请求部分或者全部连带责任人承担全部责任的责任形式 | joint and several liability | is | liability under which the right holder may require any or all liable persons to bear the whole liability | civil:178
civil | 按份责任 | 是指 | 各责任人按照确定的份额分别承担责任的责任形式 | several liability | is | liability under which each liable person bears a defined share | civil:177
civil | 法人 | 是指 | 具有民事权利能力和民事行为能力，依法独立享有民事权利和承担民事义务的组织 | a legal person | is | an organisation with civil capacity that independently enjoys civil rights and bears civil obligations | civil:57
civil | 监护 | 是指 | 对无民事行为能力人和限制民事行为能力人的人身、财产及其他合法权益进行监督和保护的制度 | guardianship | is | the system of supervising and protecting the person, property and rights of those without full civil capacity | civil:34
civil | 诉讼时效 | 是指 | 权利人在法定期间内不行使权利，义务人即可提出不履行义务抗辩的制度 | the statute of limitations | is | the rule that once a right holder fails to act within the statutory period the obligor may refuse to perform | civil:192
civil | 除斥期间 | 是指 | 法律规定的某种民事实体权利存续的期间，期间届满权利即消灭 | a period of forfeiture | is | the statutory lifetime of certain substantive rights, which are extinguished when it ends | civil:199
civil | 共同共有 | 是指 | 共有人对共有的不动产或者动产共同享有所有权，不分份额 | common ownership | is | co-ownership of property by all co-owners together without shares | civil:299
civil | 按份共有 | 是指 | 共有人对共有的不动产或者动产按照其份额享有所有权 | ownership in shares | is | co-ownership of property in which each co-owner holds a defined share | civil:298

@ law_pct | legal | 法定比例 | statutory percentage | 0 | 百分之十五;百分之五十;百分之四十
civil | 定金的数额不得超过主合同标的额的比例 | 为 | 百分之二十 | the maximum earnest money as a share of the value of the main contract | is | twenty percent | civil:586
civil | 认定违约金过分高于造成的损失的一般标准 | 为 | 超过损失的百分之三十 | the usual test for liquidated damages being excessively higher than the loss | is | exceeding the loss by thirty percent | civil:585
labor | 安排劳动者延长工作时间的，支付的工资报酬不低于工资的比例 | 为 | 百分之一百五十 | the minimum pay for overtime on working days as a share of normal wages | is | one hundred and fifty percent | labor:44
labor | 休息日安排劳动者工作又不能安排补休的，支付的工资报酬不低于工资的比例 | 为 | 百分之二百 | the minimum pay for work on rest days without time off in lieu | is | two hundred percent | labor:44
labor | 法定休假日安排劳动者工作的，支付的工资报酬不低于工资的比例 | 为 | 百分之三百 | the minimum pay for work on statutory holidays | is | three hundred percent | labor:44
criminal | 对于自首的被告人，可以减少基准刑的比例 | 为 | 百分之二十 | the reduction of the base sentence for a defendant who surrenders | is | twenty percent | criminal:67
criminal | 对于坦白的被告人，可以减少基准刑的比例 | 为 | 百分之十 | the reduction of the base sentence for a defendant who confesses after arrest | is | ten percent | criminal:67
criminal | 对于累犯，应当增加基准刑的比例 | 为 | 百分之二十 | the increase of the base sentence for a recidivist | is | twenty percent | criminal:65
criminal | 对于从犯，应当减少基准刑的比例 | 为 | 百分之三十 | the reduction of the base sentence for an accessory | is | thirty percent | criminal:27
criminal | 对于退赃退赔并取得被害人谅解的被告人，可以减少基准刑的比例 | 为 | 百分之十 | the reduction of the base sentence for a defendant who returns the proceeds and is forgiven by the victim | is | ten percent | criminal:61

@ law_crime | legal | 罪名 | criminal offence | 1 |
criminal | 盗窃罪 | 是指 | 以非法占有为目的，窃取公私财物数额较大或者多次盗窃、入户盗窃、携带凶器盗窃、扒窃的行为 | theft | is | taking public or private property secretly with intent to possess it unlawfully, where the amount is relatively large or the theft is repeated, burglarious, armed or pickpocketing | criminal:264
criminal | 诈骗罪 | 是指 | 以非法占有为目的，用虚构事实或者隐瞒真相的方法骗取数额较大的公私财物的行为 | fraud | is | obtaining a relatively large amount of property by inventing facts or concealing the truth with intent to possess it unlawfully | criminal:266
criminal | 抢劫罪 | 是指 | 以非法占有为目的，以暴力、胁迫或者其他方法当场强行劫取公私财物的行为 | robbery | is | taking property on the spot by violence, coercion or other means with intent to possess it unlawfully | criminal:263
criminal | 抢夺罪 | 是指 | 以非法占有为目的，公然夺取数额较大的公私财物的行为 | snatching | is | openly grabbing a relatively large amount of property with intent to possess it unlawfully | criminal:267
criminal | 故意伤害罪 | 是指 | 故意非法损害他人身体健康的行为 | intentional injury | is | intentionally and unlawfully harming another person's health | criminal:234
criminal | 职务侵占罪 | 是指 | 公司、企业或者其他单位的工作人员利用职务上的便利，将本单位财物非法占为己有且数额较大的行为 | embezzlement by an employee | is | an employee's use of his position to take a relatively large amount of the employer's property as his own | criminal:271
criminal | 挪用资金罪 | 是指 | 公司、企业或者其他单位的工作人员利用职务上的便利，挪用本单位资金归个人使用或者借贷给他人的行为 | misappropriation of funds | is | an employee's use of his position to divert the employer's funds for personal use or to lend them to others | criminal:272
criminal | 合同诈骗罪 | 是指 | 以非法占有为目的，在签订、履行合同过程中骗取对方当事人财物数额较大的行为 | contract fraud | is | obtaining a relatively large amount of the other party's property while signing or performing a contract, with intent to possess it unlawfully | criminal:224
criminal | 危险驾驶罪 | 是指 | 在道路上醉酒驾驶机动车或者追逐竞驶情节恶劣等危及公共安全的行为 | dangerous driving | is | endangering public safety by driving a motor vehicle on a road while drunk or racing in a flagrant way | criminal:136
criminal | 交通肇事罪 | 是指 | 违反交通运输管理法规，因而发生重大事故，致人重伤、死亡或者使公私财产遭受重大损失的行为 | causing a traffic casualty | is | violating traffic regulations and thereby causing a serious accident with severe injury, death or heavy property loss | criminal:133
criminal | 非法吸收公众存款罪 | 是指 | 非法吸收公众存款或者变相吸收公众存款，扰乱金融秩序的行为 | illegal deposit-taking | is | taking deposits from the public illegally or in disguised form and disrupting financial order | criminal:176
criminal | 敲诈勒索罪 | 是指 | 以非法占有为目的，对被害人实施威胁或者要挟，强行索取数额较大的公私财物的行为 | extortion | is | demanding a relatively large amount of property by threats or blackmail with intent to possess it unlawfully | criminal:274
criminal | 侵占罪 | 是指 | 将代为保管的他人财物或者他人的遗忘物、埋藏物非法占为己有，数额较大且拒不退还的行为 | conversion | is | keeping as one's own a relatively large amount of another person's property held in custody, lost or buried, and refusing to return it | criminal:270

@ law_criminal | legal | 刑法概念 | criminal law concept | 1 |
criminal | 罪刑法定原则 | 是指 | 法律明文规定为犯罪行为的依照法律定罪处刑，法律没有明文规定为犯罪行为的不得定罪处刑 | the principle of legality | is | that an act is punished only if the law expressly defines it as a crime | criminal:3
criminal | 正当防卫 | 是指 | 为了使国家、公共利益、本人或者他人的人身、财产和其他权利免受正在进行的不法侵害而采取的制止不法侵害的行为 | self-defence | is | an act that stops an ongoing unlawful attack on the state, the public interest, oneself or others | criminal:20
criminal | 紧急避险 | 是指 | 为了使合法权益免受正在发生的危险，不得已采取的损害另一较小合法权益的行为 | necessity | is | harming a lesser lawful interest as the only way to protect a lawful interest from a present danger | criminal:21
criminal | 犯罪未遂 | 是指 | 已经着手实行犯罪，由于犯罪分子意志以外的原因而未得逞的情形 | attempt | is | having begun to commit a crime that fails for reasons beyond the offender's will | criminal:23
criminal | 犯罪中止 | 是指 | 在犯罪过程中自动放弃犯罪或者自动有效地防止犯罪结果发生的情形 | abandonment | is | voluntarily giving up a crime or effectively preventing its result during its commission | criminal:24
criminal | 共同犯罪 | 是指 | 二人以上共同故意犯罪 | joint crime | is | an intentional crime committed jointly by two or more persons | criminal:25
criminal | 主犯 | 是指 | 组织、领导犯罪集团进行犯罪活动的或者在共同犯罪中起主要作用的犯罪分子 | a principal offender | is | an offender who organises or leads a criminal group or plays the main role in a joint crime | criminal:26
criminal | 从犯 | 是指 | 在共同犯罪中起次要或者辅助作用的犯罪分子 | an accessory | is | an offender who plays a secondary or supporting role in a joint crime | criminal:27
criminal | 累犯 | 是指 | 被判处有期徒刑以上刑罚的犯罪分子在刑罚执行完毕或者赦免以后五年以内再犯应当判处有期徒刑以上刑罚之罪的情形 | recidivism | is | committing, within five years of completing a prison sentence, another crime punishable by imprisonment | criminal:65
criminal | 自首 | 是指 | 犯罪以后自动投案，如实供述自己罪行的行为 | voluntary surrender | is | giving oneself up after a crime and truthfully confessing it | criminal:67
criminal | 坦白 | 是指 | 犯罪嫌疑人被动归案后如实供述自己罪行的行为 | confession | is | truthfully confessing one's crime after being brought to justice | criminal:67
criminal | 立功 | 是指 | 犯罪分子揭发他人犯罪行为查证属实或者提供重要线索使其他案件得以侦破的表现 | meritorious service | is | exposing another person's crime that is verified, or giving leads that solve other cases | criminal:68
criminal | 数罪并罚 | 是指 | 对一人所犯数罪分别定罪量刑后，按照法定原则决定执行刑罚的制度 | the combined punishment of several crimes | is | sentencing each of a person's crimes separately and then fixing the penalty to be served by statutory rules | criminal:69
criminal | 缓刑 | 是指 | 对被判处拘役、三年以下有期徒刑的犯罪分子在一定考验期限内暂缓执行原判刑罚的制度 | probation | is | suspending, for a test period, a sentence of criminal detention or imprisonment of up to three years | criminal:72
criminal | 假释 | 是指 | 对执行一定刑期后确有悔改表现、不致再危害社会的犯罪分子附条件提前释放的制度 | parole | is | conditional early release of a prisoner who has served part of the term, shown repentance and poses no further danger | criminal:81

@ law_threshold | legal | 定罪量刑的数额标准 | amount threshold | 0 | 一千元;一万元;十万元;二十万元
criminal | 盗窃公私财物数额较大的起点 | 为 | 三千元 | the threshold of a relatively large amount in theft | is | 3,000 yuan | criminal:264
criminal | 盗窃公私财物数额巨大的起点 | 为 | 三万元 | the threshold of a huge amount in theft | is | 30,000 yuan | criminal:264
criminal | 盗窃公私财物数额特别巨大的起点 | 为 | 三十万元 | the threshold of an especially huge amount in theft | is | 300,000 yuan | criminal:264
criminal | 诈骗公私财物数额较大的起点 | 为 | 五千元 | the threshold of a relatively large amount in fraud | is | 5,000 yuan | criminal:266
criminal | 诈骗公私财物数额巨大的起点 | 为 | 五万元 | the threshold of a huge amount in fraud | is | 50,000 yuan | criminal:266
criminal | 诈骗公私财物数额特别巨大的起点 | 为 | 五十万元 | the threshold of an especially huge amount in fraud | is | 500,000 yuan | criminal:266
criminal | 职务侵占数额较大的起点 | 为 | 六万元 | the threshold of a relatively large amount in embezzlement by an employee | is | 60,000 yuan | criminal:271
criminal | 职务侵占数额巨大的起点 | 为 | 一百万元 | the threshold of a huge amount in embezzlement by an employee | is | 1,000,000 yuan | criminal:271
criminal | 合同诈骗数额较大的起点 | 为 | 二万元 | the threshold of a relatively large amount in contract fraud | is | 20,000 yuan | criminal:224
criminal | 合同诈骗数额巨大的起点 | 为 | 二十万元 | the threshold of a huge amount in contract fraud | is | 200,000 yuan | criminal:224

@ law_penalty | legal | 法定刑 | statutory penalty | 0 | 五年以上有期徒刑;管制或者罚金
criminal | 盗窃公私财物数额较大的 | ，处 | 三年以下有期徒刑、拘役或者管制，并处或者单处罚金 | theft of a relatively large amount | is punished by | up to three years' imprisonment, criminal detention or public surveillance, with or without a fine | criminal:264
criminal | 盗窃公私财物数额巨大的 | ，处 | 三年以上十年以下有期徒刑，并处罚金 | theft of a huge amount | is punished by | three to ten years' imprisonment and a fine | criminal:264
criminal | 盗窃公私财物数额特别巨大的 | ，处 | 十年以上有期徒刑或者无期徒刑，并处罚金或者没收财产 | theft of an especially huge amount | is punished by | ten years' or life imprisonment and a fine or confiscation of property | criminal:264
criminal | 在道路上醉酒驾驶机动车的 | ，处 | 拘役，并处罚金 | drunk driving of a motor vehicle on a road | is punished by | criminal detention and a fine | criminal:136
criminal | 故意伤害他人身体致人轻伤的 | ，处 | 三年以下有期徒刑、拘役或者管制 | intentional injury causing minor injury | is punished by | up to three years' imprisonment, criminal detention or public surveillance | criminal:234

@ law_venue | legal | 管辖规则 | jurisdiction rule | 0 | 原告住所地人民法院管辖;最高人民法院管辖
procedure | 对公民提起的民事诉讼 | ，由 | 被告住所地人民法院管辖 | a civil action against a citizen | is heard by | the people's court where the defendant is domiciled | procedure:22
procedure | 因合同纠纷提起的诉讼 | ，由 | 被告住所地或者合同履行地人民法院管辖 | an action over a contract dispute | is heard by | the people's court where the defendant is domiciled or where the contract is performed | procedure:24
procedure | 因侵权行为提起的诉讼 | ，由 | 侵权行为地或者被告住所地人民法院管辖 | an action over a tort | is heard by | the people's court where the tort occurred or where the defendant is domiciled | procedure:29
procedure | 因不动产纠纷提起的诉讼 | ，由 | 不动产所在地人民法院专属管辖 | an action over immovable property | is heard exclusively by | the people's court where the property is located | procedure:34
procedure | 因继承遗产纠纷提起的诉讼 | ，由 | 被继承人死亡时住所地或者主要遗产所在地人民法院管辖 | an action over an inheritance | is heard by | the people's court of the deceased's last domicile or where the main estate is located | procedure:34
procedure | 因保险合同纠纷提起的诉讼 | ，由 | 被告住所地或者保险标的物所在地人民法院管辖 | an action over an insurance contract | is heard by | the people's court where the defendant is domiciled or where the insured object is located | procedure:25

@ law_procedure | legal | 诉讼法概念 | procedural concept | 1 |
procedure | 举证责任 | 是指 | 当事人对自己提出的主张有责任提供证据，即谁主张谁举证 | the burden of proof | is | each party's duty to provide evidence for its own claims, so whoever asserts must prove | procedure:67
procedure | 回避 | 是指 | 审判人员与案件有利害关系或者其他关系可能影响公正审理时退出该案审理的制度 | recusal | is | the rule that judicial officers withdraw from a case when an interest or relationship could affect a fair trial | procedure:47
procedure | 两审终审制 | 是指 | 一个案件经过两级人民法院审判即告终结的制度 | the two-instance system | is | the rule that a case is finally decided after trial by courts at two levels | procedure:10
procedure | 财产保全 | 是指 | 人民法院为保证将来判决得以执行而对当事人的财产采取查封、扣押、冻结等措施 | property preservation | is | sealing, seizing or freezing a party's property so that a future judgment can be enforced | procedure:103
procedure | 先予执行 | 是指 | 人民法院在作出判决前裁定一方当事人预先给付另一方一定财物的措施 | advance execution | is | a ruling before judgment that one party pay money or property to the other in advance | procedure:109
procedure | 支付令 | 是指 | 人民法院根据债权人申请督促债务人限期清偿金钱或有价证券债务的法律文书 | a payment order | is | a court document issued on a creditor's application urging the debtor to pay a money or securities debt within a time limit | procedure:225
procedure | 法院调解 | 是指 | 在人民法院审判人员主持下双方当事人自愿协商达成协议解决纠纷的活动 | court mediation | is | the settlement of a dispute by voluntary agreement of the parties under the guidance of judicial officers | procedure:96
procedure | 反诉 | 是指 | 在已经开始的诉讼中被告以原告为被告提出的独立的反请求 | a counterclaim | is | an independent claim the defendant brings against the plaintiff in a pending action | procedure:54
procedure | 共同诉讼 | 是指 | 当事人一方或者双方为二人以上的诉讼 | a joint action | is | an action in which one or both sides consist of two or more persons | procedure:55
procedure | 公开审理 | 是指 | 人民法院审理案件除法律另有规定外对社会公开进行的制度 | public trial | is | the rule that courts hear cases in public unless the law provides otherwise | procedure:137

@ law_labor | legal | 劳动法概念 | labour law concept | 1 |
labor | 无固定期限劳动合同 | 是指 | 用人单位与劳动者约定无确定终止时间的劳动合同 | an open-ended labour contract | is | a labour contract with no fixed end date agreed between employer and worker | labor:14
labor | 经济补偿 | 是指 | 劳动合同解除或终止时用人单位按劳动者在本单位工作的年限每满一年支付一个月工资的补偿 | severance pay | is | the compensation of one month's wage for each full year of service that an employer pays when a labour contract ends | labor:47
labor | 竞业限制 | 是指 | 用人单位与掌握商业秘密的劳动者约定在劳动合同解除后一定期限内不得到有竞争关系的单位任职的制度 | a non-compete restriction | is | an agreement that a worker with trade secrets will not join a competitor for a period after leaving | labor:23
labor | 试用期 | 是指 | 用人单位和劳动者在劳动合同中约定的相互考察了解的期间 | the probation period | is | the period agreed in a labour contract for employer and worker to assess each other | labor:19
labor | 劳务派遣 | 是指 | 劳务派遣单位与被派遣劳动者订立劳动合同后将其派遣到用工单位工作的用工形式 | labour dispatch | is | an arrangement in which an agency employs a worker and sends him to work for a user company | labor:58
labor | 工伤 | 是指 | 劳动者在工作时间和工作场所内因工作原因受到的事故伤害 | a work injury | is | an accidental injury a worker suffers at the workplace during working hours because of the work | labor:90
labor | 集体合同 | 是指 | 职工一方与用人单位就劳动报酬、工作时间、休息休假等事项通过平等协商订立的书面协议 | a collective contract | is | a written agreement on pay, hours and leave reached through equal negotiation between the workforce and the employer | labor:51
"""

_GENERAL_TABLE = """
@ gen_fact | general | 常识 | general knowledge | 0 |
science | 水在标准大气压下的沸点 | 是 | 100摄氏度 | the boiling point of water at standard atmospheric pressure | is | 100 degrees Celsius
science | 水在标准大气压下的冰点 | 是 | 0摄氏度 | the freezing point of water at standard atmospheric pressure | is | 0 degrees Celsius
science | 光在真空中的传播速度 | 约为 | 每秒30万千米 | the speed of light in a vacuum | is about | 300,000 kilometres per second
science | 声音在空气中的传播速度 | 约为 | 每秒340米 | the speed of sound in air | is about | 340 metres per second
science | 地球绕太阳公转一周 | 约需 | 365天 | one orbit of the Earth around the Sun | takes about | 365 days
science | 地球自转一周 | 约需 | 24小时 | one rotation of the Earth | takes about | 24 hours
science | 地球唯一的天然卫星 | 是 | 月球 | the Earth's only natural satellite | is | the Moon
science | 太阳系中体积最大的行星 | 是 | 木星 | the largest planet in the solar system | is | Jupiter
science | 距离太阳最近的行星 | 是 | 水星 | the planet closest to the Sun | is | Mercury
science | 植物进行光合作用时释放的气体 | 是 | 氧气 | the gas that plants release during photosynthesis | is | oxygen
science | 人体最大的器官 | 是 | 皮肤 | the largest organ of the human body | is | the skin
science | 成年人全身骨骼的数量 | 是 | 206块 | the number of bones in an adult human body | is | 206
science | 人体的正常体温 | 约为 | 37摄氏度 | normal human body temperature | is about | 37 degrees Celsius
science | 大熊猫的主要食物 | 是 | 竹子 | the main food of the giant panda | is | bamboo
science | 鲸所属的动物类别 | 是 | 哺乳动物 | the animal class that whales belong to | is | mammals
science | 氧元素的化学符号 | 是 | O | the chemical symbol of oxygen | is | O
science | 彩虹通常呈现的颜色数量 | 是 | 七种 | the number of colours usually seen in a rainbow | is | seven
geography | 世界上最高的山峰 | 是 | 珠穆朗玛峰 | the highest mountain in the world | is | Mount Everest
geography | 中国最长的河流 | 是 | 长江 | the longest river in China | is | the Yangtze
geography | 世界上面积最大的海洋 | 是 | 太平洋 | the largest ocean in the world | is | the Pacific Ocean
geography | 世界上面积最大的热带沙漠 | 是 | 撒哈拉沙漠 | the largest hot desert in the world | is | the Sahara
geography | 被称为中华民族母亲河的河流 | 是 | 黄河 | the river called the mother river of the Chinese nation | is | the Yellow River
geography | 西湖所在的省份 | 是 | 浙江省 | the province where West Lake lies | is | Zhejiang
geography | 兵马俑所在的城市 | 是 | 西安 | the city where the Terracotta Army stands | is | Xi'an
history | 中国古代四大发明 | 是 | 造纸术、印刷术、火药和指南针 | the Four Great Inventions of ancient China | are | papermaking, printing, gunpowder and the compass
history | 故宫的旧称 | 是 | 紫禁城 | the old name of the Palace Museum | is | the Forbidden City
history | 万里长城开始修建的时期 | 是 | 春秋战国时期 | the period when building of the Great Wall began | is | the Spring and Autumn and Warring States period
culture | 端午节的传统食物 | 是 | 粽子 | the traditional food of the Dragon Boat Festival | is | zongzi
culture | 中秋节的传统食物 | 是 | 月饼 | the traditional food of the Mid-Autumn Festival | is | mooncakes
culture | 元宵节的传统食物 | 是 | 汤圆 | the traditional food of the Lantern Festival | is | tangyuan
sports | 一支足球队在比赛中同时上场的球员人数 | 是 | 11人 | the number of players a football team has on the pitch | is | 11
sports | 一支篮球队在比赛中同时上场的球员人数 | 是 | 5人 | the number of players a basketball team has on the court | is | 5
sports | 马拉松的全程距离 | 约为 | 42.195公里 | the full marathon distance | is about | 42.195 kilometres
sports | 夏季奥运会的举办周期 | 是 | 每四年一次 | the cycle of the Summer Olympic Games | is | once every four years
technology | 计算机中央处理器的英文简称 | 是 | CPU | the English abbreviation for a computer's central processing unit | is | CPU
technology | 万维网的英文缩写 | 是 | WWW | the abbreviation of the World Wide Web | is | WWW
"""


def _parse(table: str, prefix: str) -> tuple[dict[str, Kind], list[Fact]]:
    kinds: dict[str, Kind] = {}
    facts: list[Fact] = []
    kind: Kind | None = None
    for lineno, raw in enumerate(table.strip().splitlines(), 1):
        line = raw.strip()
        if not line:
            continue
        cells = [c.strip() for c in line.lstrip("@").split("|")]
        if line.startswith("@"):
            name, domain, zh_cat, en_cat, rev, extra = cells
            kind = Kind(name, domain, zh_cat, en_cat, rev == "1", tuple(x for x in extra.split(";") if x))
            kinds[name] = kind
            continue
        if kind is None or len(cells) not in (7, 8):
            raise ValueError(f"facts table {prefix!r} line {lineno}: expected 7 or 8 '|' cells, got {len(cells)}")
        article = None
        if len(cells) == 8:
            code, number = cells[7].split(":")
            article = (code, int(number))
        facts.append(Fact(f"{prefix}-{len(facts) + 1:03d}", kind.name, kind.domain, cells[0], *cells[1:7],
                          article=article))
    return kinds, facts


def _build() -> tuple[dict[str, Kind], dict[str, list[Fact]]]:
    kinds: dict[str, Kind] = {}
    by_domain: dict[str, list[Fact]] = {}
    for domain, table, prefix in (("finance", _FINANCE_TABLE, "fin"), ("legal", _LEGAL_TABLE, "law"),
                                  ("general", _GENERAL_TABLE, "gen")):
        k, f = _parse(table, prefix)
        kinds.update(k)
        by_domain[domain] = f
    return kinds, by_domain


# Immutable after import (tuples of frozen dataclasses), so sharing them is safe.
_KINDS, _BY_DOMAIN = _build()
KINDS: dict[str, Kind] = dict(_KINDS)
FINANCE_FACTS: tuple[Fact, ...] = tuple(_BY_DOMAIN["finance"])
LEGAL_FACTS: tuple[Fact, ...] = tuple(_BY_DOMAIN["legal"])
GENERAL_FACTS: tuple[Fact, ...] = tuple(_BY_DOMAIN["general"])
ALL_FACTS: dict[str, Fact] = {f.id: f for f in FINANCE_FACTS + LEGAL_FACTS + GENERAL_FACTS}


def facts(domain: str) -> tuple[Fact, ...]:
    """The facts of one domain: "finance", "legal" or "general"."""
    table = {"finance": FINANCE_FACTS, "legal": LEGAL_FACTS, "general": GENERAL_FACTS}
    if domain not in table:
        raise ValueError(f"unknown fact domain {domain!r}; valid: {sorted(table)}")
    return table[domain]


def facts_of_kind(kind: str, side: str | None = None) -> tuple[Fact, ...]:
    """The facts of one kind, in table order: all of them, or those of one side ("train" or "eval", see EVAL_FACTS)."""
    return tuple(f for f in ALL_FACTS.values() if f.kind == kind and (side is None or fact_side(f) == side))


# ------------------------------------------------------------------------------------------------ sides
# The evaluation side of the knowledge base: facts that the evaluation sets and the held-out texts state and ask
# about, and that the training corpora and SFT sets never state (a test checks it on the generated tree), so an
# evaluation item or a held-out document shares no fact statement with the training data. Every other fact of a
# kind (in table order) is on it, except the facts the document generators apply by name (a report computes its net
# profit, a judgment cites the statute of limitations, a criminal case its offence, amount thresholds and
# sentencing factors): those stay on the training side.
_APPLIED_BY_NAME = frozenset((
    "一般纳税人的增值税应纳税额", "净利润", "净资产收益率", "利息、股息、红利所得适用的个人所得税税率", "利润总额", "可比性",
    "坏账准备", "市盈率", "权益乘数", "每股收益", "毛利", "毛利率", "流动性风险", "流动比率", "速动比率", "未分配利润", "股息率",
    "股票回购", "谨慎性", "资产负债率", "资产负债表", "利润表", "现金流量表", "无保留意见", "除权除息日", "主板股票的日涨跌幅限制",
    "公开市场操作", "居民消费价格指数", "工业生产者出厂价格指数", "广义货币供应量M2", "狭义货币供应量M1", "系统性风险", "融资融券",
    "贷款市场报价利率", "通货膨胀",
    "举证责任", "不当得利", "向人民法院请求保护民事权利的诉讼时效期间", "因不动产纠纷提起的诉讼", "因合同纠纷提起的诉讼",
    "在道路上醉酒驾驶机动车的", "故意伤害他人身体致人轻伤的", "租赁合同的租赁期限", "诉讼时效", "劳动争议申请仲裁的时效期间",
    "安排劳动者延长工作时间的，支付的工资报酬不低于工资的比例", "经济补偿", "认定违约金过分高于造成的损失的一般标准", "违约金",
    "对于自首的被告人，可以减少基准刑的比例", "对于坦白的被告人，可以减少基准刑的比例",
    "对于退赃退赔并取得被害人谅解的被告人，可以减少基准刑的比例", "对于累犯，应当增加基准刑的比例", "对于从犯，应当减少基准刑的比例",
))
_APPLIED_KINDS = frozenset(("law_crime", "law_threshold"))  # every criminal case applies its offence and amounts


def _eval_side() -> frozenset[str]:
    out = set()
    for kind in KINDS:
        if kind in _APPLIED_KINDS:
            continue
        free = [f for f in facts_of_kind(kind) if f.zh_term not in _APPLIED_BY_NAME]
        out.update(f.id for f in free[1::2])
    return frozenset(out)


EVAL_FACTS: frozenset[str] = _eval_side()


def rng_side(rng: random.Random) -> str:
    """The side a generator draws for: "eval" for the held-out and evaluation streams (corpus.SideRandom)."""
    return "eval" if getattr(rng, "side", 0) else "train"


def fact_side(fact: Fact) -> str:
    """"eval" for a fact of EVAL_FACTS, else "train"."""
    return "eval" if fact.id in EVAL_FACTS else "train"


def on_side(fs, side: str) -> tuple[Fact, ...]:
    """The facts of `fs` on one side."""
    return tuple(f for f in fs if fact_side(f) == side)


# ------------------------------------------------------------------------------------------------ statutes
def articles(code: str, side: str | None = None) -> list[tuple[int, str]]:
    """The synthetic code's articles as (number, Chinese text), sorted by number; with `side`, only the facts of that
    side in each article (an article with none left out), so training text quotes no evaluation fact.

    An article's text is the canonical statements of the facts placed in it, in table order, each ending in 。.
    """
    if code not in CODES:
        raise ValueError(f"unknown code {code!r}; valid: {sorted(CODES)}")
    texts: dict[int, list[str]] = {}
    for f in LEGAL_FACTS:
        if f.article and f.article[0] == code and (side is None or fact_side(f) == side):
            texts.setdefault(f.article[1], []).append(f.zh + "。")
    return [(n, "".join(t)) for n, t in sorted(texts.items())]


def articles_en(code: str, side: str | None = None) -> list[tuple[int, str]]:
    """English counterpart of `articles`."""
    texts: dict[int, list[str]] = {}
    for f in LEGAL_FACTS:
        if f.article and f.article[0] == code and (side is None or fact_side(f) == side):
            texts.setdefault(f.article[1], []).append(f.en + ".")
    return [(n, " ".join(t)) for n, t in sorted(texts.items())]


def article_title(code: str, number: int) -> str:
    """'《示范民法》第一百八十八条' for ("civil", 188)."""
    return f"《{CODES[code][0]}》第{cn_numeral(number)}条"


# ------------------------------------------------------------------------------------------------ phrasing
# Relation-specific rephrasings. Each keeps the term and the value as contiguous substrings, so a reader (or a
# test) can find the fact in any of them; "{t}{r}{v}" (the canonical statement) is always one of the choices.
_ZH_VARIANTS: dict[str, tuple[str, ...]] = {
    "是指": ("{t}是指{v}", "{t}是指{v}", "所谓{t}，是指{v}", "{t}，指的是{v}", "{t}的含义是{v}",
           "{v}，这就是{t}", "教材中把{v}称为{t}"),
    "反映": ("{t}反映{v}", "{t}反映的是{v}", "{t}所反映的是{v}", "{v}，由{t}来反映"),
    "提供": ("{t}提供{v}", "{t}提供的是{v}"),
    "等于": ("{t}等于{v}", "{t}等于{v}", "{t}的计算方法是用{v}", "计算{t}时，用{v}即可", "用{v}，得到的就是{t}"),
    "要求": ("{t}要求{v}", "{t}要求{v}", "根据{t}的要求，{v}", "按照{t}，{v}"),
    "适用于": ("{t}适用于{v}", "对于{v}，注册会计师应当发表{t}", "{t}适用的是{v}"),
    "为": ("{t}为{v}", "{t}为{v}", "{t}是{v}", "按照规定，{t}为{v}"),
    "不得超过": ("{t}不得超过{v}", "{t}最长不得超过{v}"),
    "是": ("{t}是{v}", "{t}是{v}", "{t}就是{v}"),
    "约为": ("{t}约为{v}", "{t}大约是{v}"),
    "约需": ("{t}约需{v}", "{t}大约需要{v}"),
}
_EN_VARIANTS: dict[str, tuple[str, ...]] = {
    # "is defined as" only reads well for definitions, so is/are variants apply to reversible (definitional) kinds.
    "is": ("{t} is {v}", "{t} is {v}", "{t} is defined as {v}"),
    "are": ("{t} are {v}", "{t} are {v}", "{t} are defined as {v}"),
    "equals": ("{t} equals {v}", "{t} equals {v}", "to get {t}, take {v}"),
    "reports": ("{t} reports {v}", "{t} reports {v}", "{t} is the statement that reports {v}"),
    "requires": ("{t} requires {v}", "{t} requires {v}", "under {t}, the rule is {v}"),
}


def render_fact(rng: random.Random, fact: Fact, lang: str) -> str:
    """One phrasing of `fact` (no final punctuation), chosen with `rng` among relation-specific variants."""
    if lang == "zh":
        variants = _ZH_VARIANTS.get(fact.zh_rel, ("{t}{r}{v}",))
        return rng.choice(variants).format(t=fact.zh_term, r=fact.zh_rel, v=fact.zh_value)
    variants = _EN_VARIANTS.get(fact.en_rel, ("{t} {r} {v}",))
    if fact.en_rel in ("is", "are") and not KINDS[fact.kind].reverse:
        variants = ("{t} {r} {v}",)
    return rng.choice(variants).format(t=fact.en_term, r=fact.en_rel, v=fact.en_value)


# Frames that wrap a phrasing in context; {s} is the phrasing. Slots: {p} person, {y} year, {c} city, {o} org.
_ZH_FRAMES = (
    "{s}。", "{s}。", "{s}。", "需要注意的是，{s}。", "简单地说，{s}。", "从考试的角度看，{s}，这是常考的知识点。",
    "{p}在{y}年的一次讲座中提醒听众：{s}。", "很多初学者容易混淆这一点，实际上{s}。", "按照通常的理解，{s}。",
    "在{c}举办的培训班上，讲师反复强调，{s}。", "{o}的内部手册写道：“{s}。”", "回到基本概念，{s}。",
    "正如{p}所说，{s}。", "值得一提的是，{s}。", "复习时应当牢记，{s}。", "{s}，这一点在实务中经常用到。",
    "换句话说，{s}。", "{p}解释道，{s}，这是理解后续内容的基础。",
)
_EN_FRAMES = (
    "{S}.", "{S}.", "{S}.", "Remember that {s}.", "Put simply, {s}.", "As {p} told a seminar in {c} in {y}, {s}.",
    "A point that often appears in exams: {s}.", "In practice, {s}.", "{S}, which is worth keeping in mind.",
    "The training notes of {o} put it this way: {s}.", "It helps to recall the basics: {s}.",
    "As {p} explained, {s}.", "Note that {s}.", "Strictly speaking, {s}.",
)


def say_fact(rng: random.Random, fact: Fact, lang: str, person: str, year: int, city: str, org: str) -> str:
    """A full sentence stating `fact` inside a random context frame (with final punctuation)."""
    s = render_fact(rng, fact, lang)
    frames = _ZH_FRAMES if lang == "zh" else _EN_FRAMES
    return rng.choice(frames).format(s=s, S=_cap(s), p=person, y=year, c=city, o=org)


def state_fact(rng: random.Random, fact: Fact, lang: str) -> str:
    """`say_fact` with a random person, year, city and organisation drawn from the lexicon."""
    if lang == "zh":
        return say_fact(rng, fact, lang, lx.zh_person(rng), rng.randint(2012, 2024), rng.choice(lx.ZH_CITIES),
                        lx.zh_org(rng))
    return say_fact(rng, fact, lang, lx.en_person(rng), rng.randint(2012, 2024), rng.choice(lx.EN_CITIES),
                    lx.en_org(rng))
