"""CMMLU-format multiple choice (CMMLU, FinanceIQ): per-subject accuracy and their unweighted mean.

    yunshan eval --model out/yunshan --tasks financeiq=path/to/FinanceIQ --shots 5

Layout (as released): `{dev,test}/{subject}.csv` with columns `,Question,A,B,C,D,Answer` (a leading, unnamed index
column). The prompt names the subject in Chinese, as CMMLU's and FinanceIQ's own code do: CMMLU's English file names
(`agronomy.csv`) by CMMLU's own name table, shipped here (`cmmlu_subjects.json`: 农学, ...; lm-eval's cmmlu task uses
the same names); FinanceIQ's files are named in Chinese (`注册会计师（CPA）.csv`) and the name is the file name. An
optional `subject_mapping.json` beside the splits (subject -> chinese name, or [english name, chinese name, group]
as in C-Eval) overrides both. A subject with none of these stops the run (an English file name would otherwise slip
into a Chinese prompt unnoticed). Prompt (docs/evaluation-formats.md): a header, k solved dev examples "题目：…答案是：X",
the question ending at "答案是：". `prompt_style="lm-eval"` renders lm-evaluation-harness's cmmlu prompt instead (the
question stripped, no "题目：", "答案：" and a space before the letter).
Overall = unweighted mean of the subject accuracies (the paper's FinanceIQ AVG; YunShan 54.56).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from .multiple_choice import (
    Question, answer_subjects, choices_for, cloze_neutral, cloze_prompt, delimiter_for, read_choice_csv,
    read_dev_shots)

# The leading unnamed column is the release's row index: the question's id when present.
COLUMNS = {"id": "", "question": "Question", "A": "A", "B": "B", "C": "C", "D": "D", "answer": "Answer"}
HEADER_HINT = ",Question,A,B,C,D,Answer"
PROMPT_STYLES = ("cmmlu", "lm-eval")
# How each --mode scores, as results.json says it ("scoring").
SCORING = {
    "loglik": "answer-only: the letter A-D most likely right after the prompt (yunshan's, as lm-eval scores)",
    "cloze": "cloze: each option's text after the question, against a neutral context (yunshan's)",
    "generate": "generated answer, yunshan's extraction (extraction.py); an answer no pattern reads counts wrong",
}


@dataclass
class Subject:
    key: str
    name: str
    dev: list[Question] = field(default_factory=list)
    questions: list[Question] = field(default_factory=list)


def cmmlu_subject_names() -> dict[str, str]:
    """CMMLU's own Chinese name of each of its 67 subjects (file stem -> name), as its prompts use them."""
    path = Path(__file__).with_name("cmmlu_subjects.json")
    return json.loads(path.read_text(encoding="utf-8"))["names"]


def _has_cjk(text: str) -> bool:
    return any("\u4e00" <= ch <= "\u9fff" or "\u3400" <= ch <= "\u4dbf" for ch in text)


def subject_name(key: str, mapping: dict[str, str], path: Path) -> str:
    """The Chinese name the prompt gives subject `key` (file `path`): the folder's subject_mapping.json, else
    CMMLU's own table, else a file name that is itself Chinese (FinanceIQ); anything else is an error."""
    if key in mapping:
        return mapping[key]
    builtin = cmmlu_subject_names()
    if key in builtin:
        return builtin[key]
    if _has_cjk(key):
        return key
    raise ValueError(f"{path}: subject {key!r} has no Chinese name for the prompt: it is not one of CMMLU's "
                     f"{len(builtin)} subjects and the file name is not Chinese; add it to "
                     f"{path.parent.parent / 'subject_mapping.json'} as {{\"{key}\": \"中文名\"}}")


def _names(root: Path) -> dict[str, str]:
    path = root / "subject_mapping.json"
    if not path.is_file():
        return {}
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise ValueError(f"{path}:{err.lineno}: not valid JSON ({err.msg})") from None
    names = {}
    for key, value in raw.items():
        if isinstance(value, str) and value:
            names[key] = value
        elif isinstance(value, list) and len(value) >= 2 and isinstance(value[1], str) and value[1]:
            names[key] = value[1]
        else:
            raise ValueError(f"{path}: entry {key!r} is {value!r}; use a chinese name or [english, chinese, group]")
    return names


def load_cmmlu(root: str | Path, split: str = "test", shots: int = 5) -> list[Subject]:
    """Every subject file of `split` (sorted by file name) with its first `shots` dev examples."""
    root = Path(root)
    split_dir = root / split
    files = sorted(split_dir.glob("*.csv"))
    if not files:
        raise FileNotFoundError(f"{split_dir}: no subject files; expected {split}/{{subject}}.csv "
                                f"with columns {HEADER_HINT}")
    names = _names(root)
    subjects = []
    for path in files:
        subject = Subject(path.stem, subject_name(path.stem, names, path))
        # Require answers everywhere: CMMLU and FinanceIQ release their test answers.
        subject.questions = read_choice_csv(path, COLUMNS, "CMMLU", require_answer=True, header_hint=HEADER_HINT)
        if shots > 0:
            subject.dev = read_dev_shots(root / "dev" / path.name, shots, COLUMNS, "CMMLU", HEADER_HINT)
        subjects.append(subject)
    return subjects


def query_text(q: Question) -> str:
    """The scored question of CMMLU's own prompt, ending at "答案是：" where the answer goes (format_example
    with include_answer=False)."""
    # The texts as released: CMMLU's and FinanceIQ's own code put question and options in unchanged.
    a, b, c, d = q.options
    return f"题目：{q.question}\nA. {a}\nB. {b}\nC. {c}\nD. {d}\n答案是："


def _lm_eval_body(q: Question) -> str:
    # lm-evaluation-harness's cmmlu doc_to_text: "{{Question.strip()}}\nA. {{A}}...\n答案：".
    a, b, c, d = q.options
    return f"{q.question.strip()}\nA. {a}\nB. {b}\nC. {c}\nD. {d}\n答案："


def prompt_header(subject_name: str) -> str:
    """The line that opens every CMMLU-format prompt (CMMLU's and FinanceIQ's gen_prompt)."""
    return f"以下是关于{subject_name}的单项选择题，请直接给出正确答案的选项。\n\n"


def solved_example(q: Question) -> str:
    """One few-shot example of CMMLU's own prompt: the question, its options and its answer (format_example)."""
    return f"{query_text(q)}{q.answer}\n\n"


def render_prompt(subject_name: str, shots: list[Question], query: Question, style: str = "cmmlu") -> str:
    """The prompt for `query`, ending where the answer letter goes: CMMLU's own ("答案是：", the letter follows
    with no space) or lm-eval's cmmlu task's ("答案：", then its target delimiter " " and the letter)."""
    if style == "cmmlu":
        return prompt_header(subject_name) + "".join(solved_example(s) for s in shots) + query_text(query)
    if style == "lm-eval":
        return (prompt_header(subject_name) + "".join(f"{_lm_eval_body(s)} {s.answer}\n\n" for s in shots)
                + _lm_eval_body(query))
    raise ValueError(f"prompt style {style!r} is not valid for the CMMLU format; "
                     f"use one of {', '.join(PROMPT_STYLES)}")


def render_cloze_prompt(subject_name: str, shots: list[Question], query: Question) -> tuple[str, list[str]]:
    """Cloze prompt and the four continuations scored (see multiple_choice.cloze_prompt); questions start "题目："
    and end "答案是："."""
    return cloze_prompt(_cloze_header(subject_name), "题目：", "答案是：", shots, query)


def cloze_neutral_context(subject_name: str, shots: list[Question]) -> str:
    """The cloze prompt without the question (the baseline of mutual-information scoring)."""
    return cloze_neutral(_cloze_header(subject_name), "题目：", "答案是：", shots)


def _cloze_header(subject_name: str) -> str:
    return f"以下是关于{subject_name}的题目，请直接给出正确答案。\n\n"


def aggregate(subjects: list[Subject], correct_by_subject: dict[str, int]) -> dict:
    """Per-subject accuracy and the unweighted mean over subjects (CMMLU's and FinanceIQ's average), percent."""
    per_subject = {}
    for s in subjects:
        n, c = len(s.questions), correct_by_subject.get(s.key, 0)
        per_subject[s.key] = {"name": s.name, "correct": c, "n": n, "accuracy": 100.0 * c / n}
    accs = [v["accuracy"] for v in per_subject.values()]
    return {"subjects": per_subject, "overall": sum(accs) / len(accs), "n": sum(len(s.questions) for s in subjects),
            "average": "unweighted mean of subject accuracies, as CMMLU's and FinanceIQ's AVG"}


def run_cmmlu(lm, root: str | Path, split: str = "test", shots: int = 5, limit: int | None = None,
              mode: str = "loglik", batch_size: int = 16, add_bos: bool | None = None, chat: bool = False,
              max_new_tokens: int = 32, progress: bool = False, prompt_style: str = "cmmlu") -> dict:
    """Evaluate one model on a CMMLU-format folder; returns the JSON-ready result (every prediction included)."""
    if prompt_style not in PROMPT_STYLES:
        raise ValueError(f"prompt style {prompt_style!r} is not valid for the CMMLU format; "
                         f"use one of {', '.join(PROMPT_STYLES)}")
    subjects = load_cmmlu(root, split, shots)
    correct, records, counts = answer_subjects(
        lm, subjects, lambda s, q: render_prompt(s.name, s.dev, q, prompt_style),
        lambda s, q: render_cloze_prompt(s.name, s.dev, q), lambda s: cloze_neutral_context(s.name, s.dev),
        limit=limit, mode=mode, batch_size=batch_size, add_bos=add_bos, chat=chat, max_new_tokens=max_new_tokens,
        progress=progress, desc="cmmlu", delimiter=delimiter_for(prompt_style))
    result = aggregate(subjects, correct)
    result.update({"format": "cmmlu", "split": split, "shots": shots, "mode": mode, "prompt_style": prompt_style,
                   "scoring": SCORING.get(mode, mode),
                   "limit": limit, **counts, "predictions": records, "columns": list(result["subjects"])})
    return result


def run_task(lm, data: Path, args, chat: bool, task=None) -> tuple[dict, list[Path]]:
    """`yunshan eval --tasks financeiq|cmmlu`: this module's entry in yunshan.eval.tasks (FinanceIQ's --mode generate
    runs financeiq.py instead)."""
    result = run_cmmlu(lm, data, split=args.split or "test", shots=args.shots, mode=args.mode,
                       prompt_style="lm-eval" if args.prompt_style == "lm-eval" else "cmmlu",
                       batch_size=args.batch_size, add_bos=args.add_bos, chat=chat,
                       max_new_tokens=args.max_new_tokens or 32, progress=args.progress, limit=args.limit)
    if task is not None and task.generate:
        result["scoring"] += (f"; not {task.title}'s own scoring, which reads generated answers (--mode generate, "
                              f"{task.generate}.py)")
    return result, []
