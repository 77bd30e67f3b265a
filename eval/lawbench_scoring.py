"""LawBench's published scoring rules, reimplemented: answer extraction per task type and each task's metric.

    from yunshan.eval.lawbench_scoring import score_task
    score = score_task("3-4", predictions, answers, prompts)   # -> TaskScore(score=..., per_item=[...], ...)

Reproduced from LawBench's evaluation code (the scorer behind its leaderboard and the PanGu-π paper's Table 10):
- option accuracy: an answer is right only when the gold option is the only option of the list that occurs in
  the prediction (letters A-D / A-E, or the task's label names);
- set F1: the labels (or article numbers) found in the prediction against the gold set, F1 per item, averaged;
- character F1: CJRC's reading-comprehension F1 over characters (lower-cased, only letters and digits kept);
  NER (2-6) and trigger words (2-10) use it per entity / per trigger ("soft F1");
- ROUGE-L F: jieba-segmented words, LCS over the whole text (rouge_chinese's summary-level ROUGE-L); an empty
  prediction scores as the text "无内容";
- prison term (3-4, 3-5): (ln 216 - mean |ln(g+1) - ln(p+1)|) / ln 216 with the months read as LawBench reads
  them (Chinese numerals converted by cn2an; the first "N个月"/"N月", else the first "N年" x 12; nothing found
  counts ln 216); death and life sentences are skipped as LawBench skips them;
- amount accuracy (3-7): the gold amount is among the numbers of the prediction.
Each rule keeps LawBench's quirks on purpose (for example 2-6 reads an entity up to the next space or newline, not
the next ";"), so scores match its published ones. One exception, documented in eval/README.md: document
proofreading (2-1) is scored by F0.5 over character edits found with difflib, not by ChERRANT's aligner.
"""

from __future__ import annotations

import difflib
import json
import math
import re
import warnings
from collections import Counter
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

NO_CONTENT = "无内容"


@dataclass
class TaskScore:
    """A task's score in [0, 1] (x100 for tables), with per-item scores where the metric is per item."""

    score: float
    metric: str
    per_item: list[float | None] = field(default_factory=list)
    abstentions: int = 0
    skipped: int = 0


class GoldFormatError(ValueError):
    """A gold answer is not in the form its task's scorer expects."""


@lru_cache(maxsize=1)
def labels() -> dict[str, list[str]]:
    return json.loads((Path(__file__).with_name("lawbench_labels.json")).read_text(encoding="utf-8"))


# ------------------------------------------------------------------------------------------------ building blocks
def found_options(prediction: str, options: list[str]) -> list[str]:
    """Options that occur in the prediction (each counted once), in option order."""
    return [o for o in options if o in prediction]


def option_correct(prediction: str, options: list[str], gold: str) -> tuple[int, bool]:
    """(1 if the gold option is the only option present, else 0; True if no option is present = abstention)."""
    present = found_options(prediction, options)
    return int(present == [gold]), not present


def set_f1(pred: set, gold: set) -> float:
    overlap = len(pred & gold)
    precision = overlap / len(pred) if pred else 0.0
    recall = overlap / len(gold) if gold else 0.0
    return 2 * precision * recall / (precision + recall) if precision + recall > 0 else 0.0


def _char_tokens(text: str) -> list[str]:
    if not text:
        return []
    return [ch for ch in text.lower() if ch.isdigit() or ch.isalpha()]


def char_f1(gold: str, pred: str) -> float:
    """CJRC character F1: both empty after normalisation = 1, one empty = 0."""
    g, p = _char_tokens(gold), _char_tokens(pred)
    if not g or not p:
        return float(g == p)
    same = sum((Counter(g) & Counter(p)).values())
    if same == 0:
        return 0.0
    precision, recall = same / len(p), same / len(g)
    return 2 * precision * recall / (precision + recall)


def lcs_length(a: list, b: list) -> int:
    """Length of the longest common subsequence (bit-parallel: one big-int step per element of b)."""
    if not a or not b:
        return 0
    masks: dict = {}
    for i, token in enumerate(a):
        masks[token] = masks.get(token, 0) | (1 << i)
    full = (1 << len(a)) - 1
    v = full
    for token in b:
        u = v & masks.get(token, 0)
        v = ((v + u) | (v - u)) & full
    return len(a) - bin(v).count("1")


def _cut_sentences(text: str) -> list[str]:
    # rouge_chinese's splitter: the words are the same either way, except that a split can fall inside a word.
    text = re.sub(r"([。！？\?])([^”’])", r"\1\n\2", text)
    text = re.sub(r"(\.{6})([^”’])", r"\1\n\2", text)
    text = re.sub(r"(\…{2})([^”’])", r"\1\n\2", text)
    text = re.sub(r"([。！？\?][”’])([^，。！？\?])", r"\1\n\2", text)
    return text.rstrip().split("\n")


def _rouge_words(segmented: str) -> list[str]:
    sentences = [" ".join(s.split()) for s in _cut_sentences(segmented) if len(s) > 0]
    return [w for s in sentences for w in s.split(" ")]


def rouge_l_words(hyp: str, ref: str) -> float:
    """ROUGE-L F of two space-separated texts, exactly as rouge_chinese 1.0.3 computes 'rouge-l' 'f'."""
    h, r = _rouge_words(hyp), _rouge_words(ref)
    if not h or not r:
        raise ValueError("ROUGE-L needs a non-empty hypothesis and reference")
    lcs = lcs_length(r, h)
    precision, recall = lcs / len(h), lcs / len(r)
    return 2.0 * ((precision * recall) / (precision + recall + 1e-8))


@lru_cache(maxsize=1)
def _jieba():
    import logging

    import jieba

    jieba.setLogLevel(logging.WARNING)  # silence "Building prefix dict ..." on every run
    return jieba


def segment(text: str) -> str:
    return " ".join(_jieba().cut(text))


def rouge_l(prediction: str, reference: str) -> float:
    """LawBench's ROUGE-L: jieba words, an empty prediction replaced by "无内容"."""
    hyp = segment(prediction)
    if hyp.strip() == "":
        hyp = NO_CONTENT
    return rouge_l_words(hyp, segment(reference))


def cn_to_arabic(text: str) -> str:
    """Chinese numerals in running text to Arabic digits (cn2an's "cn2an" transform, as LawBench uses)."""
    import cn2an

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return cn2an.transform(text, "cn2an")


def prison_months(prediction: str) -> int | None:
    """Months of imprisonment as LawBench reads a prediction, or None when it finds no term."""
    text = cn_to_arabic(prediction)
    months = [int(m) for m in re.findall(r"(\d+)个月", text)] + [int(m) for m in re.findall(r"(\d+)月", text)]
    if months:
        return months[0]
    years = [int(y) for y in re.findall(r"(\d+)年", text)]
    return years[0] * 12 if years else None


def article_numbers(prediction: str) -> set[int]:
    """Criminal-law article numbers in a prediction, chunk by chunk ("、"-separated), as LawBench parses them."""
    numbers = set()
    for chunk in prediction.split("、"):
        chunk = chunk.replace("万元", "元")
        chunk = re.sub(r"第(.*?)款", "", chunk)  # clause numbers are not articles
        chunk = re.sub(r"第(.*?)条", lambda m: m.group(1), chunk)
        digits = re.findall(r"\d+", cn_to_arabic(chunk))
        if digits:
            numbers.add(int(digits[0]))  # one article per chunk: the first number
    return numbers


def _entities_gold(ref: str, where: str) -> dict[str, str]:
    out = {}
    if ref.strip() == "":
        return out
    for seg in ref.split(";"):
        parts = seg.split(":")
        if len(parts) < 2:
            raise GoldFormatError(f"{where}: entity {seg!r} is not 'type:value'")
        out[parts[0]] = parts[1]
    return out


def _entities_pred(pred: str, entity_types: list[str]) -> dict[str, str]:
    out = {}
    for etype in entity_types:
        for m in re.finditer(re.escape(etype), pred):
            end = m.end()
            if end >= len(pred) - 2:
                continue
            if pred[end] in (":", "："):
                value = re.split("\n| ", pred[end + 1:].strip())[0].strip()
                if value not in ("无", "未提及"):
                    out[etype] = value
    return out


def entity_f1(pred: str, ref: str, entity_types: list[str], where: str = "") -> tuple[float, bool]:
    """LawBench NER soft F1 of one item (character F1 per matching entity type) and whether it abstained."""
    h, r = _entities_pred(pred, entity_types), _entities_gold(ref, where)
    if not r:
        return float(not h), False
    overlap = [char_f1(r[t], v) for t, v in h.items() if t in r]
    precision = sum(overlap) / len(h) if h else 0.0
    recall = sum(overlap) / len(r)
    return 2 * precision * recall / (precision + recall + 1e-10), not h


def trigger_f1(pred: str, ref: str) -> float:
    """LawBench 2-10: ";"-separated triggers paired in order, character F1 per pair."""
    answers, predictions = ref.split(";"), pred.split(";")
    overlap = [char_f1(r, h) for r, h in zip(answers, predictions)]
    precision = sum(overlap) / len(predictions)
    recall = sum(overlap) / len(answers)
    return 2 * precision * recall / (precision + recall + 1e-10)


def _char_edits(source: str, target: str) -> set[tuple[int, int, str]]:
    ops = difflib.SequenceMatcher(None, source, target, autojunk=False).get_opcodes()
    return {(i1, i2, target[j1:j2]) for tag, i1, i2, j1, j2 in ops if tag != "equal"}


def correction_f05(sources: list[str], predictions: list[str], references: list[str]) -> float:
    """Corpus F0.5 of character edits (source -> prediction vs source -> reference), LawBench 2-1's preprocessing."""
    tp = fp = fn = 0
    for src, pred, ref in zip(sources, predictions, references):
        pred = re.sub(r"\n|\t", "", pred)
        ref = re.sub(r"\n|\t", "", ref)
        if len(pred) - len(ref) > 5:
            pred = pred[: len(ref) + 5]  # LawBench truncates run-on outputs before scoring
        pred = pred or NO_CONTENT
        hyp_edits, ref_edits = _char_edits(src, pred), _char_edits(src, ref)
        tp += len(hyp_edits & ref_edits)
        fp += len(hyp_edits - ref_edits)
        fn += len(ref_edits - hyp_edits)
    precision = tp / (tp + fp) if tp + fp else 1.0
    recall = tp / (tp + fn) if tp + fn else 1.0
    beta2 = 0.25
    return (1 + beta2) * precision * recall / (beta2 * precision + recall) if precision + recall else 0.0


# ------------------------------------------------------------------------------------------------ gold parsing
def _strip_prefix(answer: str, prefix: str, where: str, suffix: str = "") -> str:
    if not answer.startswith(prefix) or (suffix and not answer.endswith(suffix)):
        raise GoldFormatError(f"{where}: field 'answer' is {answer[:40]!r}; this task's answers look like "
                              f"'{prefix}…{suffix}'")
    return answer[len(prefix): len(answer) - len(suffix) if suffix else None]


def _gold_letter(answer: str, prefix: str, letters: str, where: str) -> str:
    rest = _strip_prefix(answer, prefix, where)
    if not rest or rest[0] not in letters:
        raise GoldFormatError(f"{where}: field 'answer' is {answer[:40]!r}; expected '{prefix}X' with X in {letters}")
    return rest[0]


# Task id -> (metric, name). The metric names say which rule of the module docstring scores the task.
TASKS: dict[str, tuple[str, str]] = {
    "1-1": ("rouge_l", "Article Recitation"),
    "1-2": ("option_accuracy", "Knowledge Question Answering"),
    "2-1": ("correction_f05", "Document Proofreading"),
    "2-2": ("option_accuracy", "Dispute Focus Identification"),
    "2-3": ("set_f1", "Marital Disputes Identification"),
    "2-4": ("option_accuracy", "Issue Topic Identification"),
    "2-5": ("char_f1", "Reading Comprehension"),
    "2-6": ("entity_f1", "Named-Entity Recognition"),
    "2-7": ("rouge_l", "Opinion Summarization"),
    "2-8": ("option_accuracy", "Argument Mining"),
    "2-9": ("set_f1", "Event Detection"),
    "2-10": ("trigger_f1", "Trigger Word Extraction"),
    "3-1": ("set_f1", "Fact-based Article Prediction"),
    "3-2": ("rouge_l", "Scene-based Article Prediction"),
    "3-3": ("set_f1", "Charge Prediction"),
    "3-4": ("prison_log", "Prison Term Prediction w/o Article"),
    "3-5": ("prison_log", "Prison Term Prediction w/ Article"),
    "3-6": ("option_accuracy", "Case Analysis"),
    "3-7": ("amount_accuracy", "Criminal Damages Calculation"),
    "3-8": ("rouge_l", "Consultation"),
}
LEVELS = {"1": "Memorization", "2": "Understanding", "3": "Applying"}


def _source_sentence(prompt: str, where: str) -> str:
    marker = "句子：\n"
    if marker not in prompt:
        raise GoldFormatError(f"{where}: the question has no '句子：' line; 2-1 needs the sentence to correct")
    return re.sub(r"\n|\t", "", prompt[prompt.index(marker) + len(marker):].split("\n")[0])


def score_task(task: str, predictions: list[str], answers: list[str], prompts: list[str] | None = None,
               source: str = "") -> TaskScore:
    """Score one LawBench task (id such as "3-4") the way LawBench does; `source` names the file in errors."""
    if task not in TASKS:
        raise ValueError(f"{source}: unknown LawBench task {task!r}; valid ids: {', '.join(TASKS)}")
    if len(predictions) != len(answers) or not answers:
        raise ValueError(f"{source}: {len(predictions)} predictions for {len(answers)} answers")
    metric = TASKS[task][0]
    where = lambda i: f"{source}: record {i}"  # noqa: E731
    per_item: list[float | None] = []
    abstentions = skipped = 0

    if metric == "rouge_l":
        for i, (p, a) in enumerate(zip(predictions, answers)):
            ref = a.replace("答案:", "") if task == "1-1" else a
            if not ref.strip():
                raise GoldFormatError(f"{where(i)}: field 'answer' is empty; ROUGE-L needs a reference text")
            per_item.append(rouge_l(p, ref))
    elif metric == "option_accuracy":
        if task in ("1-2", "3-6"):
            options = list("ABCD")
            golds = [_gold_letter(a, "正确答案：", "ABCD", where(i)) for i, a in enumerate(answers)]
        elif task == "2-8":
            options = list("ABCDE")
            golds = [_gold_letter(a, "[正确答案]", "ABCDE", where(i)) for i, a in enumerate(answers)]
        elif task == "2-2":
            options = labels()["2-2"]
            golds = [_strip_prefix(a, "争议焦点类别：", where(i))[:-1] for i, a in enumerate(answers)]
        else:  # 2-4: the answer is the label itself
            options, golds = labels()["2-4"], list(answers)
        for i, (p, g) in enumerate(zip(predictions, golds)):
            if task == "2-2" and g == "赔偿":
                per_item.append(None)  # LawBench skips this label: it is not among the task's options
                skipped += 1
                continue
            if g not in options:
                raise GoldFormatError(f"{where(i)}: gold option {g!r} is not one of the task's options")
            ok, abstained = option_correct(p, options, g)
            per_item.append(float(ok))
            abstentions += abstained
    elif metric == "set_f1":
        for i, (p, a) in enumerate(zip(predictions, answers)):
            if task == "3-1":
                rest = _strip_prefix(a, "法条:刑法第", where(i), suffix="条").replace("条", "")
                parts = rest.split("、")
                if not all(x.isdigit() for x in parts):
                    raise GoldFormatError(f"{where(i)}: field 'answer' is {a!r}; expected '法条:刑法第N条、第M条'")
                gold, pred = {int(x) for x in parts}, article_numbers(p)
            elif task == "3-3":
                gold = set(_strip_prefix(a, "罪名:", where(i)).split(";"))
                pred = set(found_options(p, labels()["3-3"]))
            elif task == "2-3":
                gold = set(_strip_prefix(a, "类别:", where(i), suffix="。").split("、"))
                pred = set(found_options(p, labels()["2-3"]))
            else:  # 2-9
                gold, pred = set(a.split(";")), set(found_options(p, labels()["2-9"]))
            abstentions += not pred
            per_item.append(set_f1(pred, gold))
    elif metric == "char_f1":
        per_item = [char_f1(a.replace("回答:", ""), p) for p, a in zip(predictions, answers)]
    elif metric == "entity_f1":
        for i, (p, a) in enumerate(zip(predictions, answers)):
            value, abstained = entity_f1(p, a, labels()["2-6"], where(i))
            per_item.append(value)
            abstentions += abstained
    elif metric == "trigger_f1":
        per_item = [trigger_f1(p, a) for p, a in zip(predictions, answers)]
    elif metric == "prison_log":
        distances = []
        for i, (p, a) in enumerate(zip(predictions, answers)):
            if "死刑" in a or "无期" in a:
                per_item.append(None)
                skipped += 1
                continue
            months_text = _strip_prefix(a, "刑期:", where(i), suffix="个月")
            if not months_text.isdigit():
                raise GoldFormatError(f"{where(i)}: field 'answer' is {a!r}; expected '刑期:N个月'")
            gold, pred = int(months_text), prison_months(p)
            if pred is None:
                abstentions += 1
                distance = math.log(216)
            else:
                distance = abs(math.log(gold + 1) - math.log(pred + 1))
            distances.append(distance)
            per_item.append((math.log(216) - distance) / math.log(216))
        if not distances:
            raise ValueError(f"{source}: every answer is a death or life sentence; nothing to score")
        mean = math.fsum(distances) / len(distances)
        return TaskScore((math.log(216) - mean) / math.log(216), metric, per_item, abstentions, skipped)
    elif metric == "amount_accuracy":
        for i, (p, a) in enumerate(zip(predictions, answers)):
            amount = _strip_prefix(a, "上文涉及到的犯罪金额:", where(i), suffix="元。")
            try:
                gold = float(amount)
            except ValueError:
                raise GoldFormatError(f"{where(i)}: amount {amount!r} in field 'answer' is not a number") from None
            numbers = [float(x) for x in re.findall(r"\d+\.?\d*", p)]
            abstentions += not numbers
            per_item.append(float(gold in numbers))
    elif metric == "correction_f05":
        if prompts is None:
            raise ValueError(f"{source}: task 2-1 needs the prompts (the sentence to correct is in the question)")
        sources = [_source_sentence(q, where(i)) for i, q in enumerate(prompts)]
        return TaskScore(correction_f05(sources, predictions, answers), metric, [None] * len(answers))

    scored = [v for v in per_item if v is not None]
    if not scored:
        raise ValueError(f"{source}: no item could be scored")
    return TaskScore(math.fsum(scored) / len(scored), metric, per_item, abstentions, skipped)


def aggregate_levels(task_scores: dict[str, float]) -> dict:
    """Column means (Memorization 1-x, Understanding 2-x, Applying 3-x) and the overall mean over tasks.

    With all 20 tasks the overall mean equals the paper's (2 Mem + 10 Und + 8 App) / 20.
    """
    columns = {}
    for level, name in LEVELS.items():
        values = [v for t, v in task_scores.items() if t.split("-")[0] == level]
        columns[name] = math.fsum(values) / len(values) if values else float("nan")
    overall = math.fsum(task_scores.values()) / len(task_scores) if task_scores else float("nan")
    return {"levels": columns, "overall": overall, "n_tasks": len(task_scores),
            "missing_tasks": [t for t in TASKS if t not in task_scores]}
