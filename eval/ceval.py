"""C-Eval-format multiple choice (C-Eval, FinEval): per-subject accuracy, group and overall micro-averages.

    yunshan eval --model out/yunshan --tasks fineval=path/to/FinEval --shots 5 --split val

Layout (as released): `subject_mapping.json` (subject -> [english name, chinese name, group]) and
`{dev,val,test}/{subject}_{split}.csv` with columns `id,question,A,B,C,D,answer[,explanation]`. The prompt is
C-Eval's (docs/evaluation-formats.md): a header naming the subject in Chinese, k solved dev examples of the same
subject (the first k rows), then the question ending at "答案：". Group and overall scores are micro-averages (sum
correct / sum questions): the paper's FinEval AVG = (305 Acc + 334 Cert + 207 Econ + 305 Fin) / 1151 is exactly
that.

`prompt_style="lm-eval"` renders lm-evaluation-harness's ceval-valid prompt instead (its description has no
"考试", and a space separates "答案：" from the letter, as its target_delimiter " " puts it), so results can be
checked against lm-eval item by item (tests/eval/test_lm_eval_agreement.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from .multiple_choice import (
    Question, answer_subjects, choices_for, cloze_neutral, cloze_prompt, delimiter_for, read_choice_csv,
    read_dev_shots)

COLUMNS = {"id": "id", "question": "question", "A": "A", "B": "B", "C": "C", "D": "D", "answer": "answer"}
HEADER_HINT = "id,question,A,B,C,D,answer[,explanation]"
PROMPT_STYLES = ("ceval", "lm-eval")


@dataclass
class Subject:
    key: str
    english: str
    chinese: str
    group: str
    dev: list[Question] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)


def load_subject_mapping(root: Path) -> dict[str, tuple[str, str, str]]:
    path = root / "subject_mapping.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing; the C-Eval format needs subject_mapping.json "
                                "(subject -> [english name, chinese name, group])")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from None
    mapping = {}
    for key, value in raw.items():
        if not (isinstance(value, list) and len(value) == 3 and all(isinstance(v, str) and v for v in value)):
            raise ValueError(f"{path}: entry {key!r} is {value!r}; it must be [english name, chinese name, group]")
        mapping[key] = tuple(value)
    if not mapping:
        raise ValueError(f"{path}: no subjects")
    return mapping


def load_ceval(root: str | Path, split: str = "val", shots: int = 5) -> list[Subject]:
    """Every subject of a C-Eval-format folder with its `split` questions and first `shots` dev examples."""
    root = Path(root)
    mapping = load_subject_mapping(root)
    split_dir = root / split
    if not split_dir.is_dir():
        raise FileNotFoundError(f"{split_dir}: missing; expected {split}/{{subject}}_{split}.csv files")
    on_disk = {p.name[: -len(f"_{split}.csv")] for p in split_dir.glob(f"*_{split}.csv")}
    unknown = sorted(on_disk - set(mapping))
    if unknown:
        raise ValueError(f"{split_dir}: subjects {unknown} have no entry in {root / 'subject_mapping.json'}")
    subjects = []
    for key, (english, chinese, group) in mapping.items():
        path = split_dir / f"{key}_{split}.csv"
        if not path.is_file():
            raise FileNotFoundError(f"{path}: missing, but subject {key!r} is listed in subject_mapping.json")
        subject = Subject(key, english, chinese, group)
        subject.questions = read_choice_csv(path, COLUMNS, "C-Eval", require_answer=True, header_hint=HEADER_HINT)
        if shots > 0:
            subject.dev = read_dev_shots(root / "dev" / f"{key}_dev.csv", shots, COLUMNS, "C-Eval", HEADER_HINT)
        subjects.append(subject)
    return subjects


def _body(q: Question, strip_question: bool = False) -> str:
    # The texts as released: C-Eval's own code puts question and options in unchanged; lm-eval strips the question.
    a, b, c, d = q.options
    question = q.question.strip() if strip_question else q.question
    return f"{question}\nA. {a}\nB. {b}\nC. {c}\nD. {d}\n答案："


def render_prompt(subject_chinese: str, shots: list[Question], query: Question, style: str = "ceval") -> str:
    """The full prompt for `query`, ending where the answer letter goes."""
    if style == "ceval":
        # No space before the letter: C-Eval's template writes "答案：A", so the letter is the very next token.
        header = f"以下是中国关于{subject_chinese}考试的单项选择题，请选出其中的正确答案。\n\n"
        return header + "".join(f"{_body(s)}{s.answer}\n\n" for s in shots) + _body(query)
    if style == "lm-eval":
        header = f"以下是中国关于{subject_chinese}的单项选择题，请选出其中的正确答案。\n\n"
        return header + "".join(f"{_body(s, True)} {s.answer}\n\n" for s in shots) + _body(query, True)
    raise ValueError(f"prompt style {style!r} is not valid; use one of {', '.join(PROMPT_STYLES)}")


def render_cloze_prompt(subject_chinese: str, shots: list[Question], query: Question) -> tuple[str, list[str]]:
    """Cloze prompt and the four continuations scored (see multiple_choice.cloze_prompt); questions end "答案："."""
    return cloze_prompt(_cloze_header(subject_chinese), "", "答案：", shots, query)


def cloze_neutral_context(subject_chinese: str, shots: list[Question]) -> str:
    """The cloze prompt without the question (the baseline of mutual-information scoring)."""
    return cloze_neutral(_cloze_header(subject_chinese), "", "答案：", shots)


def _cloze_header(subject_chinese: str) -> str:
    return f"以下是中国关于{subject_chinese}考试的题目，请给出正确答案。\n\n"


def micro(correct: int, n: int) -> float:
    return 100.0 * correct / n if n else float("nan")


def aggregate(subjects: list[Subject], correct_by_subject: dict[str, int]) -> dict:
    """Per-subject accuracy, group micro-averages (in mapping order) and the overall micro-average, in percent."""
    per_subject, groups = {}, {}
    for s in subjects:
        n, c = len(s.questions), correct_by_subject.get(s.key, 0)
        per_subject[s.key] = {"name": s.chinese, "group": s.group, "correct": c, "n": n, "accuracy": micro(c, n)}
        g = groups.setdefault(s.group, {"correct": 0, "n": 0})
        g["correct"] += c
        g["n"] += n
    for g in groups.values():
        g["accuracy"] = micro(g["correct"], g["n"])
    total_c = sum(g["correct"] for g in groups.values())
    total_n = sum(g["n"] for g in groups.values())
    return {"subjects": per_subject, "groups": groups, "overall": micro(total_c, total_n), "n": total_n,
            "average": "micro (sum correct / sum questions), as FinEval's AVG"}


def run_ceval(lm, root: str | Path, split: str = "val", shots: int = 5, limit: int | None = None,
              mode: str = "loglik", prompt_style: str = "ceval", batch_size: int = 16,
              add_bos: bool | None = None, chat: bool = False, max_new_tokens: int = 32,
              progress: bool = False) -> dict:
    """Evaluate one model on a C-Eval-format folder; returns the JSON-ready result (every prediction included).

    `limit` keeps the first N questions of each subject (a quick look; the averages then cover those only).
    """
    if prompt_style not in PROMPT_STYLES:
        raise ValueError(f"prompt style {prompt_style!r} is not valid; use one of {', '.join(PROMPT_STYLES)}")
    subjects = load_ceval(root, split, shots)
    correct, records, counts = answer_subjects(
        lm, subjects, lambda s, q: render_prompt(s.chinese, s.dev, q, prompt_style),
        lambda s, q: render_cloze_prompt(s.chinese, s.dev, q), lambda s: cloze_neutral_context(s.chinese, s.dev),
        limit=limit, mode=mode, batch_size=batch_size, add_bos=add_bos, chat=chat, max_new_tokens=max_new_tokens,
        progress=progress, desc="ceval", delimiter=delimiter_for(prompt_style))
    result = aggregate(subjects, correct)
    result.update({"format": "ceval", "split": split, "shots": shots, "mode": mode, "prompt_style": prompt_style,
                   "limit": limit, **counts, "predictions": records, "columns": list(result["groups"])})
    return result


def run_task(lm, data: Path, args, chat: bool, task=None) -> tuple[dict, list[Path]]:
    """`yunshan eval --tasks fineval|ceval`: this module's entry in yunshan.eval.tasks."""
    return run_ceval(lm, data, split=args.split or "val", shots=args.shots, mode=args.mode,
                     prompt_style="lm-eval" if args.prompt_style == "lm-eval" else "ceval",
                     batch_size=args.batch_size, add_bos=args.add_bos, chat=chat,
                     max_new_tokens=args.max_new_tokens or 32, progress=args.progress, limit=args.limit), []
