"""Sample evaluation sets in the published formats of FinEval (C-Eval layout), FinanceIQ (CMMLU layout),
LawBench and JEC-QA (see docs/evaluation-formats.md of the project for the formats and scoring).

All multiple-choice items ask about facts of the evaluation side of the knowledge base (yunshan.samples.facts:
EVAL_FACTS, which no training text states) with the "eval" phrasings of yunshan.samples.questions; the LawBench
charge / article / prison-term tasks use the synthetic criminal cases and sentencing model of yunshan.samples.legal,
narrated by a generator on the evaluation side (other wordings, names and amounts than any training case); task 1-1
asks to recite articles of the evaluation side, which no training text quotes. Sizes are fixed and small (they do
not grow with `scale`).

    python -m yunshan.samples --out DIR          # writes DIR/eval/{fineval,financeiq,lawbench,jecqa}/...
"""

from __future__ import annotations

import json
import random

from . import lexicon as lx
from .corpus import stream_rng
from .facts import CODES, FINANCE_FACTS, LEGAL_FACTS, articles, on_side
from .formats import OutFile, render_csv, render_json_list, render_jsonl
from .legal import criminal_case
from .questions import (LETTERS, MCItem, askable, balance_answers, case_item, case_multi, fact_item, multi,
                        unique_items)

# FinEval subject -> [english name, chinese name, group]; groups as in FinEval's subject_mapping.json.
FINEVAL_SUBJECTS: dict[str, list[str]] = {
    "accounting": ["Accounting", "会计", "Accounting"],
    "auditing": ["Auditing", "审计学", "Accounting"],
    "tax_law": ["Tax Law", "税法", "Certificate"],
    "banking_practitioner_qualification_certificate": ["Banking Practitioner Qualification Certificate", "银行从业资格",
                                                       "Certificate"],
    "securities_practitioner_qualification_certificate": ["Securities Practitioner Qualification Certificate",
                                                          "证券从业资格", "Certificate"],
    "macroeconomics": ["Macroeconomics", "宏观经济学", "Economy"],
    "microeconomics": ["Microeconomics", "微观经济学", "Economy"],
    "monetary_financial_theory": ["Monetary Financial Theory", "货币金融学", "Finance"],
    "insurance": ["Insurance", "保险学", "Finance"],
}
# FinanceIQ subject (file name, as in the release) -> FinEval subjects whose facts it draws on.
FINANCEIQ_SUBJECTS: dict[str, tuple[str, ...]] = {
    "注册会计师（CPA）": ("accounting", "auditing"),
    "税务师": ("tax_law",),
    "银行从业资格": ("banking_practitioner_qualification_certificate", "monetary_financial_theory"),
    "证券从业资格": ("securities_practitioner_qualification_certificate",),
    "经济师": ("macroeconomics", "microeconomics"),
    "保险从业资格": ("insurance",),
}
FINEVAL_SIZES = {"dev": 5, "val": 20, "test": 20}
FINANCEIQ_SIZES = {"dev": 5, "test": 25}
LAWBENCH_SIZE = 25
JECQA_SIZES = {0: 80, 1: 60}

CEVAL_HEADER = ["id", "question", "A", "B", "C", "D", "answer", "explanation"]
CMMLU_HEADER = ["", "Question", "A", "B", "C", "D", "Answer"]

# LawBench instructions, as the released tasks word them (the sample answers follow each task's answer format).
LAWBENCH_TASKS = {
    "1-1": ("article_recitation", "回答以下问题，只需直接给出法条内容:"),
    "1-2": ("knowledge_qa", "请你运用法律知识从A,B,C,D中选出一个正确的答案，并写在[正确答案]和<eoa>之间。"
                            "例如[正确答案]A<eoa>。请你严格按照这个格式回答。"),
    "2-6": ("entity_extraction", "请从下面的事实中抽取犯罪嫌疑人、受害人、被盗货币、物品价值、盗窃获利、被盗物品、作案工具、时间、"
                                 "地点、组织机构等实体，按照“实体类型:实体”的格式给出答案，多个实体之间用分号隔开，文中没有的实体类型不必列出。"),
    "2-9": ("event_detection", "请从以下事件类型中选出下面事实所包含的事件类型：支付/给付、欺骗、搜查/扣押、要求/请求、卖出、买入、获利、"
                               "拘捕、鉴定、同意/接受、供述、联络、帮助/救助、租用/借用、受伤、伪造、卖淫、伤害人身、赔偿、归还/偿还。"
                               "多个事件类型之间用分号分隔。"),
    "3-1": ("article_prediction", "根据下列事实和罪名给出涉及的刑法法条。只需给出刑法法条编号，请将答案填在[法条]与<eoa>之间。"
                                  "例如[法条]刑法第128条、刑法第341条<eoa>"),
    "3-3": ("charge_prediction", "请你模拟法官依据下面事实给出罪名，只需要给出罪名的名称，将答案写在[罪名]和<eoa>之间。"
                                 "例如[罪名]盗窃;诈骗<eoa>。请你严格按照这个格式回答。"),
    "3-4": ("prison_term_prediction", "根据下列事实、罪名和刑法法条预测判决刑期。只需给出判决刑期为多少月，请将答案填在[刑期]与<eoa>之间。"
                                      "例如[刑期]12月<eoa>。"),
    "3-6": ("case_analysis", "请你运用法律知识从A,B,C,D中选出一个正确的答案，并写在[正确答案]和<eoa>之间。"
                             "例如[正确答案]A<eoa>。请你严格按照这个格式回答。"),
}


def _subject_facts(subjects: tuple[str, ...], side: str = "eval") -> list:
    """The finance facts of some FinEval subjects on one side of the knowledge base (facts.EVAL_FACTS)."""
    return [f for f in on_side(FINANCE_FACTS, side) if f.subject in subjects and askable(f, side)]


def _cycle_maker(rng: random.Random, fs: list, forms: tuple[str, ...], style: str):
    """make(k): walk all facts with the first form, then all with the next, ...; statements after that."""
    fs = list(fs)
    rng.shuffle(fs)

    def make(k: int) -> MCItem:
        form = forms[k // len(fs)] if k // len(fs) < len(forms) else "statement"
        return fact_item(rng, fs[k % len(fs)], form, style)

    return make


def _ceval_rows(items: list[MCItem]) -> list[list]:
    return [[i, it.question, *it.options, it.answer[0], it.explanation] for i, it in enumerate(items)]


# ------------------------------------------------------------------------------------------------ builders
def fineval_items(seed: int, seen: set) -> dict[str, dict[str, list[MCItem]]]:
    """subject -> split -> items, in the order they are written."""
    out = {}
    for subject in FINEVAL_SUBJECTS:
        rng = stream_rng(seed, "eval", "fineval", subject)
        make = _cycle_maker(rng, _subject_facts((subject,)), ("forward", "reverse", "statement"), "eval")
        items = unique_items(make, sum(FINEVAL_SIZES.values()), seen)
        out[subject], start = {}, 0
        for split, n in FINEVAL_SIZES.items():
            balance = stream_rng(seed, "eval", "fineval", subject, split, "answers")
            out[subject][split] = balance_answers(items[start:start + n], balance, seen)
            start += n
    return out


def financeiq_items(seed: int, seen: set) -> dict[str, dict[str, list[MCItem]]]:
    out = {}
    for subject, sources in FINANCEIQ_SUBJECTS.items():
        rng = stream_rng(seed, "eval", "financeiq", subject)
        make = _cycle_maker(rng, _subject_facts(sources), ("statement", "forward", "reverse"), "eval")
        items = unique_items(make, sum(FINANCEIQ_SIZES.values()), seen)
        parts = {"dev": items[:FINANCEIQ_SIZES["dev"]], "test": items[FINANCEIQ_SIZES["dev"]:]}
        out[subject] = {split: balance_answers(part, stream_rng(seed, "eval", "financeiq", subject, split, "answers"),
                                               seen) for split, part in parts.items()}
    return out


def _lawbench_mc(item: MCItem) -> str:
    # LawBench writes the options inline after the question: "...?A:xxx;B:xxx;C:xxx;D:xxx。"
    stem = item.question.replace("（ ）", "").rstrip("。：:")
    return stem + "?" + ";".join(f"{L}:{o}" for L, o in zip(LETTERS, item.options, strict=True)) + "。"


def lawbench_records(seed: int, seen: set) -> tuple[dict[str, list[dict]], dict[str, list[MCItem]]]:
    """(task id -> list of {instruction, question, answer}, task id -> MC items for the choice tasks 1-2 and 3-6)."""
    out: dict[str, list[dict]] = {}
    mc: dict[str, list[MCItem]] = {}
    n = LAWBENCH_SIZE
    rec = lambda task, q, a: {"instruction": LAWBENCH_TASKS[task][1], "question": q, "answer": a}  # noqa: E731

    rng = stream_rng(seed, "eval", "lawbench", "1-1")
    arts = [(code, num, text) for code in CODES for num, text in articles(code, "eval")]
    out["1-1"] = [rec("1-1", f"{CODES[c][0]}第{lx.cn_numeral(num)}条的内容是什么？", f"答案:{text}")
                  for c, num, text in rng.sample(arts, n)]

    rng = stream_rng(seed, "eval", "lawbench", "1-2")
    make = _cycle_maker(rng, [f for f in on_side(LEGAL_FACTS, "eval") if askable(f)], ("statement", "forward", "reverse"),
                        "eval")
    mc["1-2"] = balance_answers(unique_items(make, n, seen), stream_rng(seed, "eval", "lawbench", "1-2", "answers"),
                                seen)
    out["1-2"] = [rec("1-2", _lawbench_mc(it), f"正确答案：{it.answer[0]}。") for it in mc["1-2"]]

    rng = stream_rng(seed, "eval", "lawbench", "3-6")
    mc["3-6"] = balance_answers(unique_items(lambda k: case_item(rng, "eval"), n, seen),
                                stream_rng(seed, "eval", "lawbench", "3-6", "answers"), seen)
    out["3-6"] = [rec("3-6", _lawbench_mc(it), f"正确答案：{it.answer[0]}。") for it in mc["3-6"]]

    rng = stream_rng(seed, "eval", "lawbench", "2-6")
    cases = [criminal_case(rng, "盗窃") for _ in range(n)]
    out["2-6"] = [rec("2-6", c.facts_text, ";".join(f"{t}:{v}" for t, v in c.entities)) for c in cases]

    rng = stream_rng(seed, "eval", "lawbench", "2-9")
    cases = [criminal_case(rng) for _ in range(n)]
    out["2-9"] = [rec("2-9", c.facts_text, ";".join(c.events)) for c in cases]

    rng = stream_rng(seed, "eval", "lawbench", "3-1")
    cases = [criminal_case(rng) for _ in range(n)]
    out["3-1"] = [rec("3-1", f"事实:{c.facts_text}\n罪名:{c.crime}", f"法条:刑法第{c.article}条") for c in cases]

    rng = stream_rng(seed, "eval", "lawbench", "3-3")
    cases = [criminal_case(rng) for _ in range(n)]
    out["3-3"] = [rec("3-3", f"事实:{c.facts_text}", f"罪名:{c.crime}") for c in cases]

    rng = stream_rng(seed, "eval", "lawbench", "3-4")
    cases = [criminal_case(rng) for _ in range(n)]
    out["3-4"] = [rec("3-4", f"事实:{c.facts_text}\n罪名:{c.crime}。法条:刑法第{c.article}条", f"刑期:{c.months}个月")
                  for c in cases]
    return {k: out[k] for k in LAWBENCH_TASKS}, mc


def jecqa_record(item: MCItem, rid: str, source: int) -> dict:
    """An MC item as a JEC-QA record: {id, statement, option_list, answer, source}."""
    return {"id": rid, "statement": item.question, "option_list": dict(zip(LETTERS, item.options, strict=True)),
            "answer": list(item.answer), "source": source}


def jecqa_items(seed: int, seen: set, style: str = "eval", sizes: dict[int, int] = JECQA_SIZES,
                stream: str = "jecqa") -> dict[int, list[MCItem]]:
    """source (0 knowledge, 1 case analysis) -> items. Knowledge items are multi-answer statement sets."""
    rng = stream_rng(seed, "eval" if style == "eval" else "sft", stream, 0)
    fs = [f for f in on_side(LEGAL_FACTS, "eval" if style == "eval" else "train") if askable(f, style)]
    rng.shuffle(fs)
    knowledge = unique_items(lambda k: multi(rng, fs[k % len(fs)], style), sizes[0], seen)
    rng = stream_rng(seed, "eval" if style == "eval" else "sft", stream, 1)
    cases = unique_items(lambda k: case_multi(rng, style) if k % 2 == 0 else case_item(rng, style), sizes[1], seen)
    return {0: knowledge, 1: cases}


# ------------------------------------------------------------------------------------------------ files
def build_eval(seed: int = 0) -> tuple[dict[str, OutFile], dict[str, list[MCItem]]]:
    """All eval files (path under eval/ -> rendered file) and the MC items behind them, keyed by file path."""
    files: dict[str, OutFile] = {}
    items_by_file: dict[str, list[MCItem]] = {}
    seen: set = set()
    files["fineval/subject_mapping.json"] = OutFile(json.dumps(FINEVAL_SUBJECTS, ensure_ascii=False, indent=2) + "\n",
                                                    len(FINEVAL_SUBJECTS))
    for subject, splits in fineval_items(seed, seen).items():
        for split, items in splits.items():
            path = f"fineval/{split}/{subject}_{split}.csv"
            files[path] = render_csv(CEVAL_HEADER, _ceval_rows(items))
            items_by_file[path] = items
    for subject, splits in financeiq_items(seed, seen).items():
        for split, items in splits.items():
            path = f"financeiq/{split}/{subject}.csv"
            files[path] = render_csv(CMMLU_HEADER, [[i, it.question, *it.options, it.answer[0]]
                                                    for i, it in enumerate(items)])
            items_by_file[path] = items
    records, mc = lawbench_records(seed, seen)
    for task, recs in records.items():
        files[f"lawbench/{task}.json"] = render_json_list(recs)
    for task, items in mc.items():
        items_by_file[f"lawbench/{task}.json"] = items
    for source, items in jecqa_items(seed, seen).items():
        path = f"jecqa/{source}_test.json"
        files[path] = render_jsonl([jecqa_record(it, f"{source}_{i}", source) for i, it in enumerate(items)])
        items_by_file[path] = items
    return files, items_by_file
