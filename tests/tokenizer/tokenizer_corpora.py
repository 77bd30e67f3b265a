"""Small seeded corpora for the tokenizer tests: general, finance and legal text in Chinese and English.

Built in-process from templates so the tests need no downloads and no other package; sizes are kept small
(tens of kilobytes) so a whole extension runs in about a second.
"""

from __future__ import annotations

import random

GENERAL_ZH = [
    "今天天气很好，我们一起去公园散步。", "他在图书馆看了一下午的书。", "这家餐厅的菜味道不错，价格也合理。",
    "孩子们在操场上踢足球，玩得很开心。", "周末我打算去看望外婆，顺便买些水果。", "城市的交通越来越方便了。",
    "春天来了，路边的花都开了。", "她每天早上六点起床跑步。", "这部电影讲述了一个感人的故事。",
    "我们学校新建了一座体育馆。", "晚饭后大家坐在一起聊天。", "老师布置了很多作业。",
    "火车站里人来人往，非常热闹。", "他喜欢在周末画画和弹钢琴。", "这本小说的作者是一位年轻的作家。",
]
GENERAL_EN = [
    "The weather was lovely, so we walked along the river after lunch.",
    "She spent the whole afternoon reading in the city library.",
    "Our neighbours planted tomatoes and beans in their garden this spring.",
    "The children played football in the park until it got dark.",
    "He cooked a simple dinner of rice, vegetables and fish.",
    "The museum opened a new exhibition about ancient ships.",
    "We missed the early train and had to wait for an hour.",
    "My sister is learning to play the violin at school.",
    "The film tells the story of a family moving to a small village.",
    "After the rain, the streets were quiet and the air smelled fresh.",
]
FIN_TERMS_ZH = ["资产负债表", "利润表", "现金流量表", "营业收入", "净利润", "应收账款", "存货周转率", "资本公积",
                "未分配利润", "每股收益", "市盈率", "可转换债券", "商誉减值", "经营活动现金流量", "流动比率"]
FIN_TERMS_EN = ["revenue", "amortization", "depreciation", "liabilities", "receivables", "dividend", "equity",
                "impairment", "goodwill", "liquidity", "collateral", "derivatives", "securitization", "EBITDA"]
LAW_TERMS_ZH = ["民事诉讼法", "合同纠纷", "违约责任", "诉讼时效", "不当得利", "刑事责任", "判决书", "原告",
                "被告", "上诉人", "最高人民法院", "仲裁裁决", "侵权责任", "连带责任", "管辖权异议"]
LAW_TERMS_EN = ["plaintiff", "defendant", "jurisdiction", "indemnification", "arbitration", "liability",
                "injunction", "statute", "tort", "appellant", "damages", "negligence", "covenant", "testimony"]
COMPANIES = ["嘉川股份", "华远科技", "东湖能源", "北辰医药", "瑞丰银行", "恒信证券"]
COMPANIES_EN = ["Harbor Semiconductor", "Eastlake Energy", "Northstar Pharma", "Ruifeng Bank", "Hengxin Securities"]
RARE_ZH = "赟燊翀婳曌嫣璟琮"  # characters general text never uses: byte fallback in a SentencePiece-style base


def _general(rng: random.Random) -> str:
    if rng.random() < 0.5:
        return "".join(rng.choice(GENERAL_ZH) for _ in range(rng.randint(2, 4)))
    return " ".join(rng.choice(GENERAL_EN) for _ in range(rng.randint(2, 4)))


def _finance(rng: random.Random) -> str:
    if rng.random() < 0.6:
        c, t1, t2 = rng.choice(COMPANIES), rng.choice(FIN_TERMS_ZH), rng.choice(FIN_TERMS_ZH)
        year, pct = rng.randint(2015, 2023), f"{rng.uniform(-30, 60):.2f}%"
        return (f"{c}{year}年年度报告显示，公司{t1}同比变动{pct}，{t2}为{rng.randint(1, 9999)}万元。"
                f"董事会认为{t1}的变化主要由于{rng.choice(FIN_TERMS_ZH)}增加。{rng.choice(RARE_ZH)}{c}的{t2}稳定。")
    c, t1, t2 = rng.choice(COMPANIES_EN), rng.choice(FIN_TERMS_EN), rng.choice(FIN_TERMS_EN)
    return (f"{c} reported that {t1} rose {rng.randint(1, 40)}% in {rng.randint(2015, 2023)}, while {t2} "
            f"fell to {rng.randint(1, 900)} million yuan. Analysts expect {t1} and {rng.choice(FIN_TERMS_EN)} "
            f"to recover.")


def _legal(rng: random.Random) -> str:
    if rng.random() < 0.6:
        t1, t2 = rng.choice(LAW_TERMS_ZH), rng.choice(LAW_TERMS_ZH)
        return (f"根据《中华人民共和国{rng.choice(['民法典', '刑法', '公司法'])}》第{rng.randint(1, 999)}条，"
                f"{t1}应当由{rng.choice(COMPANIES)}承担，本院认为{t2}成立。{rng.choice(RARE_ZH)}")
    t1, t2 = rng.choice(LAW_TERMS_EN), rng.choice(LAW_TERMS_EN)
    return (f"The court held that the {t1} had no {t2} under section {rng.randint(1, 300)}, and the "
            f"{rng.choice(LAW_TERMS_EN)} was dismissed.")


def _numbers(rng: random.Random) -> str:
    """General sentences full of numbers: the bases learn how they cut digits (conventions.py) from these."""
    year, month, day = rng.randint(2015, 2024), rng.randint(1, 12), rng.randint(1, 28)
    if rng.random() < 0.5:
        return (f"{year}年{month}月{day}日，{rng.randint(18, 80)}岁的他坐{rng.randint(1, 300)}路公交车，"
                f"花了{rng.randint(2, 500)}元，住在{rng.randint(1, 30)}号楼{rng.randint(101, 2999)}室。")
    return (f"On {month}/{day}/{year} the {rng.randint(6, 23)}:{rng.randint(10, 59)} train to platform "
            f"{rng.randint(1, 12)} carried {rng.randint(100, 9999)} people, {rng.randint(10, 99)} more than in "
            f"{year - 1}.")


MAKERS = {"general": _general, "finance": _finance, "legal": _legal, "numbers": _numbers}


def texts(domain: str, n: int, seed: int = 0) -> list[str]:
    rng = random.Random(f"{domain}-{seed}")
    return [MAKERS[domain](rng) for _ in range(n)]
