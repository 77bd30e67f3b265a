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
- amount accuracy (3-7): the gold amount is among the numbers of the prediction;
- document proofreading (2-1): ChERRANT's character-level corpus F0.5 (`cherrant.py`) on the sentence after
  "句子：" in the prompt, the prediction (newlines out, cut to the answer's length + 5) and the answer.
Each rule keeps LawBench's quirks on purpose (for example 2-6 reads an entity up to the next space or newline, not
the next ";"), so scores match its published ones: on LawBench's own published predictions every (model, task)
pair is within 0.1 point of its results.csv (benchmarks/lawbench_agreement.py, benchmarks/README.md).
Gold answers are read and checked by `parse_answers` before anything is generated.
"""

from __future__ import annotations

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
    """A task's score in [0, 1] (x100 for tables), with per-item scores where the metric is per item.

    `abstentions` counts items whose prediction names no option, label, article, term or amount at all (LawBench's
    abstention rate is this count over all items, skipped ones included); `skipped` items LawBench leaves out of
    the score (2-2's label 赔偿, 3-4/3-5's death and life sentences)."""

    score: float
    metric: str
    per_item: list[float | None] = field(default_factory=list)
    abstentions: int = 0
    skipped: int = 0
    details: dict = field(default_factory=dict)  # 2-1: ChERRANT's TP/FP/FN, timed-out items, resources


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
    return entity_f1_parsed(pred, _entities_gold(ref, where), entity_types)


def entity_f1_parsed(pred: str, r: dict[str, str], entity_types: list[str]) -> tuple[float, bool]:
    """`entity_f1` with the reference already read (type -> value)."""
    h = _entities_pred(pred, entity_types)
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


def wsjd_inputs(source: str, prediction: str, answer: str) -> tuple[str, str, str]:
    """LawBench 2-1's (wsjd.py) preparation of one item: (source, prediction, reference) as ChERRANT gets them.

    Newlines and tabs removed; a prediction more than 5 characters longer than the answer (the answer as written,
    before its own newlines are removed) cut to the answer's length + 5; an empty prediction becomes "无内容"."""
    prediction = re.sub(r"\n|\t", "", prediction)
    if len(prediction) - len(answer) > 5:
        prediction = prediction[: len(answer) + 5]
    return re.sub(r"\n|\t", "", source), prediction or NO_CONTENT, re.sub(r"\n|\t", "", answer)


def correction_f05(sources: list[str], predictions: list[str], references: list[str], annotator=None,
                   gold_cache: dict | None = None):
    """LawBench 2-1: ChERRANT's character-level corpus F0.5 (`cherrant.py`), rounded to 4 places as LawBench reports
    it; returns (M2Score, hypothesis annotations). `gold_cache` keeps reference annotations across calls (models
    scored on the same task file share them)."""
    from .cherrant import CharAnnotator, corpus_f05

    annotator = annotator or CharAnnotator()
    hyps, refs = [], []
    for src, pred, ref in zip(sources, predictions, references):
        src, pred, ref = wsjd_inputs(src, pred, ref)
        hyps.append(annotator.annotate(src, pred))
        key = (src, ref)
        gold = gold_cache.get(key) if gold_cache is not None else None
        if gold is None:
            gold = annotator.annotate(src, ref)
            if gold_cache is not None:
                gold_cache[key] = gold
        refs.append(gold)
    return corpus_f05(hyps, refs), hyps


# ------------------------------------------------------------------------------------------------ gold parsing
def _strip_prefix(answer: str, prefixes: str | tuple[str, ...], where: str, suffix: str = "") -> str:
    prefixes = (prefixes,) if isinstance(prefixes, str) else prefixes
    prefix = next((p for p in prefixes if answer.startswith(p)), None)
    if prefix is None or (suffix and not answer.endswith(suffix)):
        raise GoldFormatError(f"{where}: field 'answer' is {answer[:40]!r}; this task's answers look like "
                              + " or ".join(f"'{p}…{suffix}'" for p in prefixes))
    return answer[len(prefix): len(answer) - len(suffix) if suffix else None]


def _gold_letter(answer: str, prefixes: tuple[str, ...], letters: str, where: str) -> str:
    rest = _strip_prefix(answer, prefixes, where)
    if not rest or rest[0] not in letters:
        raise GoldFormatError(f"{where}: field 'answer' is {answer[:40]!r}; expected "
                              + " or ".join(f"'{p}X'" for p in prefixes) + f" with X in {letters}")
    return rest[0]


# 1-2 and 3-6 (both from JEC-QA): LawBench's release writes 1-2's answers with a full-width colon and 3-6's with
# an ASCII one (its jec_kd.py and jec_ac.py each assert their own); either is read for either task.
ANSWER_PREFIXES = ("正确答案：", "正确答案:")


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


def _source_sentence(prompt: str, where: str, field: str) -> str:
    """2-1's sentence to correct: the line after "句子：" in the prompt, as LawBench's wsjd.py finds it."""
    marker = "句子：\n"
    if marker not in prompt:
        raise GoldFormatError(f"{where}: field {field!r} has no line '句子：' followed by the sentence to correct "
                              "(2-1's questions end with '句子：\\n<sentence>')")
    sentence = re.sub(r"\n|\t", "", prompt[prompt.index(marker) + len(marker):].split("\n")[0])
    if not "".join(sentence.split()):
        raise GoldFormatError(f"{where}: field {field!r}: the line after '句子：' is empty; 2-1 needs the sentence "
                              "to correct there")
    return sentence


def _ascii_int(text: str, where: str, answer: str, form: str) -> int:
    if not (text.isascii() and text.isdigit()):
        raise GoldFormatError(f"{where}: field 'answer' is {answer[:40]!r}; expected {form}")
    return int(text)


def parse_answers(task: str, answers: list[str], prompts: list[str] | None = None, where: list[str] | None = None,
                  prompt_field: str = "question") -> list:
    """Each gold answer of a task as its scorer reads it (None for an item LawBench skips), checked first.

    Runs before any generation (`run_lawbench`), so a malformed file fails in seconds, naming `where[i]` (file and
    line, or file and item key), the field and the form the task's answers have. The checks are LawBench's own
    (the asserts of its evaluation functions), plus what would otherwise crash its scorer."""
    if task not in TASKS:
        raise ValueError(f"unknown LawBench task {task!r}; valid ids: {', '.join(TASKS)}")
    where = where if where is not None else [f"record {i}" for i in range(len(answers))]
    metric = TASKS[task][0]
    golds: list = []
    for i, a in enumerate(answers):
        w = where[i]
        if metric == "rouge_l":
            ref = a.replace("答案:", "") if task == "1-1" else a
            if not ref.strip():
                raise GoldFormatError(f"{w}: field 'answer' is empty; ROUGE-L needs a reference text")
            golds.append(ref)
        elif task in ("1-2", "3-6"):
            golds.append(_gold_letter(a, ANSWER_PREFIXES, "ABCD", w))
        elif task == "2-8":
            golds.append(_gold_letter(a, ("[正确答案]",), "ABCDE", w))
        elif task == "2-2":
            label = _strip_prefix(a, "争议焦点类别：", w)[:-1]
            if label == "赔偿":
                golds.append(None)  # LawBench skips this label: it is not among the task's options
            elif label not in labels()["2-2"]:
                raise GoldFormatError(f"{w}: field 'answer' is {a[:40]!r}; expected '争议焦点类别：<label>。' with "
                                      f"one of the {len(labels()['2-2'])} dispute labels of lawbench_labels.json")
            else:
                golds.append(label)
        elif task == "2-4":
            if a not in labels()["2-4"]:
                raise GoldFormatError(f"{w}: field 'answer' is {a[:40]!r}; expected one of the "
                                      f"{len(labels()['2-4'])} topic labels of lawbench_labels.json")
            golds.append(a)
        elif task == "3-1":
            _strip_prefix(a, "法条:刑法第", w, suffix="条")
            form = "'法条:刑法第N条' or '法条:刑法第N条、M条' with article numbers 1-490"
            articles = {_ascii_int(x, w, a, form) for x in a.replace("法条:刑法第", "").replace("条", "").split("、")}
            if not all(1 <= x <= 490 for x in articles):  # LawBench asserts it: the Criminal Law has 490 articles
                raise GoldFormatError(f"{w}: field 'answer' is {a[:40]!r}; expected {form}")
            golds.append(articles)
        elif task == "3-3":
            _strip_prefix(a, "罪名:", w)
            golds.append(set(a.replace("罪名:", "").split(";")))
        elif task == "2-3":
            found = _strip_prefix(a, "类别:", w, suffix="。").split("、")
            unknown = [x for x in found if x not in labels()["2-3"]]
            if unknown:
                raise GoldFormatError(f"{w}: field 'answer' has the label {unknown[0]!r}; expected '类别:<label>、"
                                      f"<label>。' with labels among the {len(labels()['2-3'])} of lawbench_labels.json")
            golds.append(set(found))
        elif task == "2-9":
            golds.append(set(a.split(";")))
        elif task == "2-5":
            golds.append(a.replace("回答:", ""))
        elif task == "2-6":
            golds.append(_entities_gold(a, w))
        elif task == "2-10":
            golds.append(a.split(";"))
        elif metric == "prison_log":
            if "死刑" in a or "无期" in a:
                golds.append(None)  # death and life sentences: LawBench skips them
            else:
                _strip_prefix(a, "刑期:", w, suffix="个月")
                golds.append(_ascii_int(a.replace("刑期:", "").replace("个月", ""), w, a, "'刑期:N个月'"))
        elif task == "3-7":
            _strip_prefix(a, "上文涉及到的犯罪金额:", w, suffix="元。")
            amount = a.replace("上文涉及到的犯罪金额:", "")
            try:
                if "千元" in amount or "万" in amount:  # LawBench asserts plain yuan
                    raise ValueError
                golds.append(float(amount.replace("元。", "")))
            except ValueError:
                raise GoldFormatError(f"{w}: field 'answer' is {a[:40]!r}; expected '上文涉及到的犯罪金额:N元。' "
                                      "with N a number of yuan") from None
        elif task == "2-1":
            if prompts is None:
                raise ValueError(f"{w}: task 2-1 needs the prompts (the sentence to correct is in the question)")
            golds.append((_source_sentence(prompts[i], w, prompt_field), a))
    return golds


def score_task(task: str, predictions: list[str], answers: list[str], prompts: list[str] | None = None,
               source: str = "", where: list[str] | None = None, prompt_field: str = "question",
               cherrant=None, gold_cache: dict | None = None) -> TaskScore:
    """Score one LawBench task (id such as "3-4") the way LawBench does.

    `source` names the file in errors and `where` each item (default "{source}: record {i}"); `prompt_field` is
    the field that holds a 2-1 prompt in that file. 2-1 uses `cherrant` (a `cherrant.CharAnnotator`; by default
    one with ChERRANT's resources found near `source`, `cherrant.find_resource_dir`) and keeps reference
    annotations in `gold_cache` when given."""
    if task not in TASKS:
        raise ValueError(f"{source}: unknown LawBench task {task!r}; valid ids: {', '.join(TASKS)}")
    if len(predictions) != len(answers) or not answers:
        raise ValueError(f"{source}: {len(predictions)} predictions for {len(answers)} answers")
    where = where if where is not None else [f"{source}: record {i}" for i in range(len(answers))]
    golds = parse_answers(task, answers, prompts, where, prompt_field)
    metric = TASKS[task][0]
    per_item: list[float | None] = []
    abstentions = 0
    skipped = sum(g is None for g in golds)

    if metric == "rouge_l":
        per_item = [rouge_l(p, g) for p, g in zip(predictions, golds)]
    elif metric == "option_accuracy":
        options = {"1-2": list("ABCD"), "3-6": list("ABCD"), "2-8": list("ABCDE")}.get(task) or labels()[task]
        for p, g in zip(predictions, golds):
            if g is None:
                per_item.append(None)
                continue
            ok, abstained = option_correct(p, options, g)
            per_item.append(float(ok))
            abstentions += abstained
    elif metric == "set_f1":
        for p, g in zip(predictions, golds):
            pred = article_numbers(p) if task == "3-1" else set(found_options(p, labels()[task]))
            abstentions += not pred
            per_item.append(set_f1(pred, g))
    elif metric == "char_f1":
        per_item = [char_f1(g, p) for p, g in zip(predictions, golds)]
    elif metric == "entity_f1":
        for p, g in zip(predictions, golds):
            value, abstained = entity_f1_parsed(p, g, labels()["2-6"])
            per_item.append(value)
            abstentions += abstained
    elif metric == "trigger_f1":
        per_item = [trigger_f1(p, ";".join(g)) for p, g in zip(predictions, golds)]
    elif metric == "prison_log":
        distances = []
        for p, g in zip(predictions, golds):
            if g is None:
                per_item.append(None)
                continue
            pred = prison_months(p)
            if pred is None:
                abstentions += 1
                distance = math.log(216)
            else:
                distance = abs(math.log(g + 1) - math.log(pred + 1))
            distances.append(distance)
            per_item.append((math.log(216) - distance) / math.log(216))
        if not distances:
            raise ValueError(f"{source}: every answer is a death or life sentence; nothing to score")
        mean = math.fsum(distances) / len(distances)
        return TaskScore((math.log(216) - mean) / math.log(216), metric, per_item, abstentions, skipped)
    elif metric == "amount_accuracy":
        for p, g in zip(predictions, golds):
            numbers = [float(x) for x in re.findall(r"\d+\.?\d*", p)]
            abstentions += not numbers
            per_item.append(float(g in numbers))
    elif metric == "correction_f05":
        from .cherrant import CharAnnotator, find_resource_dir, load_resources

        if cherrant is None:
            cherrant = CharAnnotator(load_resources(find_resource_dir(*([Path(source).parent] if source else []))))
        sources = [g[0] for g in golds]
        m2, hyps = correction_f05(sources, predictions, [g[1] for g in golds], cherrant, gold_cache)
        details = {"tp": m2.tp, "fp": m2.fp, "fn": m2.fn, "precision": m2.precision, "recall": m2.recall,
                   "timed_out": [i for i, h in enumerate(hyps) if h.timed_out],
                   "cherrant_resources": cherrant.resources.source or None}
        return TaskScore(m2.f05, metric, [None] * len(answers), details=details)

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
