"""Your own evaluation sets: multiple choice, short answer and free generation from JSONL, JSON, CSV or parquet.

    yunshan eval --model out/yunshan --tasks mc=ours/loans.jsonl qa=ours/qa.csv gen=ours/summaries/ --shots 3
    yunshan eval --model out/yunshan --tasks mc:loans=loans.jsonl mc:deposits=deposits.csv   # two sets, two labels

A task is KIND[:LABEL]=PATH, KIND one of `mc`, `qa`, `gen` (the label names the set in tables, results.json and the
model card; without one the label is the kind). PATH is a file, whose rows are scored 0-shot, or a folder holding
`test.*` (the rows scored; `--split NAME` scores `NAME.*` instead) and optionally `dev.*`, whose rows are the few-shot
examples: a question gets the first `--shots` dev rows of its own subject (the first `--shots` dev rows when the dev
rows have no subject), as C-Eval's k-shot prompts do. Every format of yunshan's record reader is read (.jsonl,
.json, .csv, .parquet, compressed); CSV headers are matched without regard to case, a UTF-8 BOM or spaces.

Rows (every field name in lower case; `id` and `subject` optional everywhere, `subject` breaks the scores down):
- mc: `question`; the options as `choices` (a list of 2-10 texts) or as fields `A`, `B`, ... (up to `J`; in CSV an
  empty cell ends a row's options, so rows with four and five options share one file); `answer`: the letter (or,
  in JSON, a 0-based index into `choices`).
- qa: `question`; `answer`: the reference answer, or a list of accepted answers (JSON).
- gen: `question` (the instruction or prompt); `answer`: the reference text, or a list of references (JSON).
A bad row stops the run with one line naming the file, the line and the field, and what is valid.

The prompt is `--description` (its `{subject}` replaced by the row's subject), the examples, then the question:

    {question_prefix}{question}\\n[A. {A}\\nB. {B}\\n...\\n]{answer_prefix}

each example closed by its answer and a blank line. With `--description "以下是中国关于{subject}考试的单项选择题，
请选出其中的正确答案。\\n\\n"` and the default prefixes ("", "答案：") the prompt is C-Eval's to the byte, so a FinEval
subject written as a mc file scores exactly as the FinEval task does (tests/eval/test_generic.py).

Scoring:
- mc: as the built-in multiple-choice tasks score (multiple_choice.py): `--mode loglik`, the likelihood of each
  option's letter right after the prompt (answer-only); `cloze`, each option's text (mutual information against the
  prompt without the question); `generate`, greedy decoding and the documented letter extraction (extraction.py).
  Accuracy is the micro-average over questions; chance is the mean of 1 / (options of each question).
- qa: greedy decoding; the answer is the first non-empty line of the output (a short answer ends its line, as
  lm-evaluation-harness's `until: ["\\n"]` ends it), with the answer prefix removed when the model repeats it.
  Exact match compares after NFKC, case folding and removing whitespace and punctuation; character F1 is CJRC's and
  ROUGE-L LawBench's (jieba words), both from lawbench_scoring.py. Several accepted answers: the best of each.
- gen: greedy decoding, the whole output (stripped); ROUGE-L and character F1 as for qa.
Scores are in percent, micro-averaged over items.

The chat template is used where the model writes its answer (qa, gen, mc with --mode generate) as `--chat` says
(auto: when the tokenizer has one), as the built-in tasks use it; for likelihood scoring (mc loglik) only with
`--chat on`: the prompt becomes one user turn and the letter is scored after the assistant's header
(lm-evaluation-harness's --apply_chat_template). Cloze scoring continues the question text itself and never uses it.
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass, field
from pathlib import Path

from .extraction import OPTION_LETTERS
from .multiple_choice import Question

KINDS = ("mc", "qa", "gen")
KIND_NAMES = {"mc": "multiple choice", "qa": "short answer", "gen": "free generation"}
# Each kind's scores in percent: the first is the headline (`overall`).
KIND_METRICS = {"mc": ("accuracy",), "qa": ("exact_match", "char_f1", "rouge_l"), "gen": ("rouge_l", "char_f1")}
METRIC_NAMES = {"accuracy": "accuracy", "exact_match": "exact match", "char_f1": "character F1",
                "rouge_l": "ROUGE-L"}
ROW_HINT = {
    "mc": "{question, choices: [..] or A, B, ..., answer: letter, id?, subject?}",
    "qa": "{question, answer: text or [texts], id?, subject?}",
    "gen": "{question, answer: reference text or [texts], id?, subject?}",
}
SPLIT_DEFAULT = "test"


@dataclass
class Item:
    """One short-answer or generation row: its question and accepted answers (one or more)."""

    id: str
    question: str
    answers: list[str]
    file: str
    line: int
    subject: str = ""


@dataclass
class Subject:
    """The rows of one subject (one "" subject when the rows have none), as multiple_choice.answer_subjects takes."""

    key: str
    dev: list = field(default_factory=list)
    questions: list = field(default_factory=list)


# ------------------------------------------------------------------------------------------------ reading rows
def _json_lines(path: Path) -> list[int] | None:
    """The line each element of a JSON-list file starts on (None when the file is not one JSON list)."""
    from yunshan.data.records import list_item_lines

    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    if not text.lstrip().startswith("["):
        return None
    try:
        json.loads(text)
    except json.JSONDecodeError:
        return None
    return list_item_lines(text)


def is_row_file(path: Path) -> bool:
    """Whether a file holds rows by its name: .jsonl, .json, .csv or .parquet, optionally compressed."""
    from yunshan.data.records import format_of

    try:
        return format_of(str(path))[0] != "txt"
    except ValueError:
        return False


def _rows(path: Path, kind: str):
    """(where, line, row with lower-case keys) of every row of a file; unreadable rows stop with file:line."""
    from yunshan.data.records import BadRecord, read_records

    if not is_row_file(path):
        raise ValueError(f"{path}: not a file of rows; {kind} rows come in .jsonl, .json, .csv or .parquet "
                         "(optionally .gz/.zst/.xz/.bz2)")
    lines = None
    for where, record, _ in read_records(str(path)):
        if ": record " in where:  # a JSON list: name the line the element starts on
            if lines is None:
                lines = _json_lines(path) or []
            index = int(where.rsplit(" ", 1)[1])
            if index < len(lines):
                where = f"{path}:{lines[index]}"
        if isinstance(record, BadRecord):
            raise ValueError(f"{record.describe()}; {kind} rows are {ROW_HINT[kind]}")
        if not isinstance(record, dict):
            raise ValueError(f"{where}: a row is {type(record).__name__}, not an object; {kind} rows are "
                             f"{ROW_HINT[kind]}")
        line = int(where.rsplit(":", 1)[1]) if where.rsplit(":", 1)[-1].isdigit() else 0
        yield where, line, {str(k).strip().lstrip("\ufeff").strip().lower(): v for k, v in record.items()}


def _text(row: dict, name: str, where: str, kind: str, required: bool = True) -> str:
    value = row.get(name)
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            what = "is missing" if name not in row else "is empty"
            raise ValueError(f"{where}: field {name!r} {what}; {kind} rows are {ROW_HINT[kind]}")
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise ValueError(f"{where}: field {name!r} is {value!r}; it must be a text")
    return str(value)


def _options(row: dict, where: str) -> tuple[str, ...]:
    letters = [x for x in OPTION_LETTERS if x.lower() in row]
    if "choices" in row and row["choices"] not in (None, ""):
        if letters:
            raise ValueError(f"{where}: fields 'choices' and {', '.join(repr(x) for x in letters)} both given; give "
                             "the options either as a list 'choices' or as fields A, B, ...")
        options = row["choices"]
        if not isinstance(options, list) or not all(isinstance(o, (str, int)) and not isinstance(o, bool)
                                                    and str(o).strip() for o in options):
            raise ValueError(f"{where}: field 'choices' is {options!r}; it must be a list of non-empty texts")
        options = [str(o) for o in options]
    else:
        if not letters:
            raise ValueError(f"{where}: field 'choices' is missing (and no fields A, B, ...); mc rows are "
                             f"{ROW_HINT['mc']}")
        options = []
        for x in OPTION_LETTERS[:OPTION_LETTERS.index(letters[-1]) + 1]:
            value = row.get(x.lower())
            if value is None or (isinstance(value, str) and not value.strip()):
                options.append(None)
            elif isinstance(value, bool) or not isinstance(value, (str, int)):
                raise ValueError(f"{where}: field {x!r} is {value!r}; an option must be a text")
            else:
                options.append(str(value))
        while options and options[-1] is None:  # an empty cell ends the row's options
            options.pop()
        if None in options:
            gap = OPTION_LETTERS[options.index(None)]
            raise ValueError(f"{where}: field {gap!r} is empty but a later option is not; options are A, B, ... "
                             "without gaps")
    if not 2 <= len(options) <= len(OPTION_LETTERS):
        raise ValueError(f"{where}: {len(options)} option(s); a question needs 2 to {len(OPTION_LETTERS)} options "
                         f"({OPTION_LETTERS[0]}-{OPTION_LETTERS[-1]})")
    return tuple(options)


def _answer_letter(row: dict, options: tuple[str, ...], where: str, required: bool) -> str | None:
    letters = OPTION_LETTERS[: len(options)]
    value = row.get("answer")
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise ValueError(f"{where}: field 'answer' is {'missing' if 'answer' not in row else 'empty'}; it must be "
                             f"one of {', '.join(letters)}")
        return None
    if isinstance(value, int) and not isinstance(value, bool):  # JSON: a 0-based index, as Hub datasets write it
        if 0 <= value < len(options):
            return letters[value]
        raise ValueError(f"{where}: field 'answer' is {value}; an index must be 0 to {len(options) - 1} (or a letter "
                         f"{', '.join(letters)})")
    if isinstance(value, str) and value.strip().upper() in letters and len(value.strip()) == 1:
        return value.strip().upper()
    raise ValueError(f"{where}: field 'answer' is {value!r}; it must be one of {', '.join(letters)} (the row's "
                     f"{len(options)} options)")


def _answers(row: dict, where: str, kind: str) -> list[str]:
    value = row.get("answer")
    values = value if isinstance(value, list) else [value]
    if not values or any(v is None or isinstance(v, bool) or not isinstance(v, (str, int)) or not str(v).strip()
                         for v in values):
        what = "is missing" if "answer" not in row else f"is {value!r}"
        raise ValueError(f"{where}: field 'answer' {what}; it must be a non-empty text or a list of them "
                         f"({kind} rows are {ROW_HINT[kind]})")
    return [str(v) for v in values]


def read_rows(path: str | Path, kind: str, require_answer: bool = True) -> list:
    """The rows of one file: `Question`s (mc) or `Item`s (qa, gen), each with its file and line."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; valid: {', '.join(KINDS)}")
    path = Path(path)
    out, seen = [], {}
    for where, line, row in _rows(path, kind):
        question = _text(row, "question", where, kind)
        qid = _text(row, "id", where, kind, required=False).strip() or str(len(out))
        if qid in seen:
            raise ValueError(f"{where}: field 'id' is {qid!r}, already used at line {seen[qid]}; ids must be unique")
        seen[qid] = line
        subject = _text(row, "subject", where, kind, required=False).strip()
        if kind == "mc":
            options = _options(row, where)
            out.append(Question(qid, question, options, _answer_letter(row, options, where, require_answer),
                                str(path), line, subject))
        else:
            out.append(Item(qid, question, _answers(row, where, kind), str(path), line, subject))
    if not out:
        raise ValueError(f"{path}: no rows; a {kind} file needs at least one row {ROW_HINT[kind]}")
    return out


def split_files(path: str | Path, split: str | None = None) -> tuple[Path, Path | None]:
    """(the file scored, the dev file or None) of a task path: a file is scored as it is; a folder holds
    `{split}.*` (default test) and optionally `dev.*`."""
    path = Path(path)
    if path.is_file():
        return path, None
    if not path.is_dir():
        raise FileNotFoundError(f"{path}: no such file or folder")

    def one(stem: str) -> Path | None:
        found = sorted(p for p in path.iterdir() if p.is_file() and p.name.split(".", 1)[0] == stem
                       and is_row_file(p))
        if len(found) > 1:
            raise ValueError(f"{path}: {len(found)} files named {stem}.* ({', '.join(p.name for p in found)}); keep "
                             "one")
        return found[0] if found else None

    split = split or SPLIT_DEFAULT
    scored = one(split)
    if scored is None:
        names = ", ".join(sorted(p.name for p in path.iterdir())) or "nothing"
        raise FileNotFoundError(f"{path}: no {split}.* file (it holds {names}); a task folder holds {split}.jsonl "
                                "(or .json/.csv/.parquet) and optionally dev.*; --split NAME scores NAME.*")
    return scored, (one("dev") if split != "dev" else None)


def load_set(path: str | Path, kind: str, split: str | None = None, shots: int = 0) -> tuple[list[Subject], dict]:
    """The subjects of a task (rows grouped by `subject`, in order of first appearance), each question's dev
    examples attached (`Subject.dev` is per subject; a subject without dev rows of its own takes the dev rows that
    have no subject), and what was read: {"file", "dev", "shots"}."""
    scored, dev_file = split_files(path, split)
    rows = read_rows(scored, kind)
    dev = read_rows(dev_file, kind) if dev_file is not None and shots > 0 else []
    subjects: dict[str, Subject] = {}
    for row in rows:
        subjects.setdefault(row.subject, Subject(row.subject)).questions.append(row)
    if shots > 0 and dev_file is not None:
        for subject in subjects.values():
            own = [d for d in dev if d.subject == subject.key] or [d for d in dev if not d.subject]
            if len(own) < shots:
                whose = f"subject {subject.key!r}" if subject.key else "rows without a subject"
                raise ValueError(f"{dev_file}: {len(own)} dev rows for {whose}, fewer than --shots {shots}")
            subject.dev = own[:shots]
    used = shots if dev_file is not None else 0
    return list(subjects.values()), {"file": str(scored), "dev": str(dev_file) if dev_file else None, "shots": used}


# ------------------------------------------------------------------------------------------------ prompts
@dataclass(frozen=True)
class PromptFormat:
    """How a row becomes a prompt (EvalArgs: --description, --question-prefix, --answer-prefix)."""

    description: str = ""
    question_prefix: str = ""
    answer_prefix: str = "答案："

    def header(self, subject: str) -> str:
        # str.replace, not str.format: a description may hold other braces.
        return self.description.replace("{subject}", subject)

    def body(self, row) -> str:
        options = "".join(f"{x}. {o}\n" for x, o in zip(OPTION_LETTERS, row.options)) if isinstance(
            row, Question) else ""
        return f"{self.question_prefix}{row.question}\n{options}{self.answer_prefix}"

    def prompt(self, subject: str, shots: list, row) -> str:
        """The prompt for `row`, ending where its answer goes."""
        def solved(s):
            return s.answer if isinstance(s, Question) else s.answers[0]

        return self.header(subject) + "".join(f"{self.body(s)}{solved(s)}\n\n" for s in shots) + self.body(row)

    def cloze(self, subject: str, shots: list, row: Question) -> tuple[str, list[str]]:
        from .multiple_choice import cloze_prompt

        return cloze_prompt(self.header(subject), self.question_prefix, self.answer_prefix, shots, row)

    def neutral(self, subject: str, shots: list) -> str:
        from .multiple_choice import cloze_neutral

        return cloze_neutral(self.header(subject), self.question_prefix, self.answer_prefix, shots)


# ------------------------------------------------------------------------------------------------ scoring answers
def normalize_answer(text: str) -> str:
    """What exact match compares: NFKC (full-width to half-width), case folded, whitespace and punctuation removed."""
    text = unicodedata.normalize("NFKC", text).casefold()
    return "".join(ch for ch in text if not ch.isspace() and not unicodedata.category(ch).startswith("P"))


def short_answer(output: str, answer_prefix: str = "") -> str:
    """The answer a short-answer output gives: its first non-empty line, without the answer prefix if repeated."""
    line = next((ln.strip() for ln in output.strip().splitlines() if ln.strip()), "")
    cue = answer_prefix.strip()
    if cue and line.startswith(cue):
        line = line[len(cue):].strip()
    return line


def score_answer(prediction: str, answers: list[str], metrics: tuple[str, ...]) -> dict[str, float]:
    """Each metric of one prediction in [0, 1], the best over the accepted answers."""
    from .lawbench_scoring import char_f1, rouge_l

    def one(metric: str, ref: str) -> float:
        if metric == "exact_match":
            return float(normalize_answer(prediction) == normalize_answer(ref))
        if metric == "char_f1":
            return char_f1(ref, prediction)
        if metric == "rouge_l":
            return rouge_l(prediction, ref)
        raise ValueError(f"unknown metric {metric!r}")

    return {m: max(one(m, ref) for ref in answers) for m in metrics}


# ------------------------------------------------------------------------------------------------ running a set
def run_generic(lm, path: str | Path, kind: str, *, fmt: PromptFormat = PromptFormat(), split: str | None = None,
                shots: int = 0, limit: int | None = None, mode: str = "loglik", chat: bool = False,
                chat_likelihood: bool = False, batch_size: int = 16, add_bos: bool | None = None,
                max_new_tokens: int | None = None, progress: bool = False, desc: str = "") -> dict:
    """Evaluate one model on one of your own sets; returns the JSON-ready result (every prediction included).

    `chat` renders generation prompts through the chat template, `chat_likelihood` the mc likelihood prompts too;
    `limit` keeps each subject's first N rows (a quick look: the averages cover those only)."""
    if kind not in KINDS:
        raise ValueError(f"unknown kind {kind!r}; valid: {', '.join(KINDS)}")
    subjects, read = load_set(path, kind, split, shots)
    if limit is not None:
        for s in subjects:
            s.questions = s.questions[:limit]
    desc = desc or kind
    metrics = KIND_METRICS[kind]
    if kind == "mc":
        result = _run_mc(lm, subjects, fmt, mode, chat, chat_likelihood, batch_size, add_bos,
                         max_new_tokens or 32, progress, desc)
    else:
        result = _run_written(lm, subjects, kind, fmt, chat, batch_size, add_bos,
                              max_new_tokens or (32 if kind == "qa" else 256), progress, desc)
    n = sum(len(s.questions) for s in subjects)
    result.update({"format": "generic", "kind": kind, "metric": metrics[0], "n": n, "limit": limit, **read,
                   "split": (split or SPLIT_DEFAULT) if Path(path).is_dir() else None,
                   "prompt": {"description": fmt.description, "question_prefix": fmt.question_prefix,
                              "answer_prefix": fmt.answer_prefix},
                   "columns": [s.key for s in subjects if s.key] if kind == "mc" else list(metrics),
                   "average": "micro (over every item)"})
    return result


def _run_mc(lm, subjects, fmt, mode, chat, chat_likelihood, batch_size, add_bos, max_new_tokens, progress, desc):
    from .generation import render_chat
    from .multiple_choice import answer_subjects

    if mode == "cloze" and chat_likelihood:
        raise ValueError("--chat on with --mode cloze: cloze scoring continues the question's own text, which a chat "
                         "turn would close; use --mode loglik or --chat auto/off")

    def prompt(s, q):
        text = fmt.prompt(s.key, s.dev, q)
        # Generation renders the chat turn itself (answer_subjects' chat); likelihood scoring gets it here.
        return render_chat(lm.tokenizer, text) if mode == "loglik" and chat_likelihood else text

    correct, records, counts = answer_subjects(
        lm, subjects, prompt, lambda s, q: fmt.cloze(s.key, s.dev, q), lambda s: fmt.neutral(s.key, s.dev),
        mode=mode, batch_size=batch_size, add_bos=add_bos, chat=chat, max_new_tokens=max_new_tokens,
        progress=progress, desc=desc)
    per_subject = {}
    for s in subjects:
        n, c = len(s.questions), correct.get(s.key, 0)
        per_subject[s.key] = {"name": s.key or "all", "correct": c, "n": n, "accuracy": 100.0 * c / n if n else None}
    n = sum(len(s.questions) for s in subjects)
    total = sum(correct.values())
    chance = 100.0 * sum(1 / len(q.options) for s in subjects for q in s.questions) / n
    return {"subjects": per_subject, "overall": 100.0 * total / n, "correct": total, "chance": chance, "mode": mode,
            "chat": bool(chat_likelihood if mode == "loglik" else chat and mode == "generate"),
            "predictions": records, **counts}


def _run_written(lm, subjects, kind, fmt, chat, batch_size, add_bos, max_new_tokens, progress, desc):
    from .generation import generate

    items = [(s, q) for s in subjects for q in s.questions]
    prompts = [fmt.prompt(s.key, s.dev, q) for s, q in items]
    outputs = generate(lm, prompts, max_new_tokens=max_new_tokens, batch_size=batch_size, chat=chat,
                       add_bos=add_bos, progress=progress, desc=desc)
    metrics = KIND_METRICS[kind]
    records, sums, per_subject = [], dict.fromkeys(metrics, 0.0), {}
    for (s, q), p, out in zip(items, prompts, outputs):
        answer = short_answer(out, fmt.answer_prefix) if kind == "qa" else out.strip()
        scores = score_answer(answer, q.answers, metrics)
        entry = per_subject.setdefault(s.key, {"name": s.key or "all", "n": 0, **dict.fromkeys(metrics, 0.0)})
        entry["n"] += 1
        for m in metrics:
            sums[m] += scores[m]
            entry[m] += scores[m]
        records.append({"subject": s.key, "id": q.id, "prompt": p, "output": out, "answer": answer,
                        "gold": q.answers, **{m: scores[m] for m in metrics}})
    n = len(items)
    for entry in per_subject.values():
        for m in metrics:
            entry[m] = 100.0 * entry[m] / entry["n"]
    values = {m: 100.0 * sums[m] / n for m in metrics}
    return {"metrics": values, "overall": values[metrics[0]], "subjects": per_subject, "chat": chat,
            "max_new_tokens": max_new_tokens, "empty_answers": sum(1 for r in records if not r["answer"]),
            "predictions": records}


def run_task(lm, data: Path, args, chat: bool, task) -> tuple[dict, list[Path]]:
    """`yunshan eval --tasks mc=PATH qa=PATH gen=PATH` (and KIND:LABEL=PATH): this module's entry in
    yunshan.eval.tasks."""
    kind = task.name.partition(":")[0]
    fmt = PromptFormat(args.description, args.question_prefix, args.answer_prefix)
    return run_generic(lm, data, kind, fmt=fmt, split=args.split, shots=args.shots, limit=args.limit, mode=args.mode,
                       chat=chat, chat_likelihood=args.chat == "on", batch_size=args.batch_size, add_bos=args.add_bos,
                       max_new_tokens=args.max_new_tokens, progress=args.progress, desc=task.name), []


def headline(task, result: dict, data) -> list:
    """Each of the set's scores (accuracy; or exact match, character F1 and ROUGE-L), each a model-index entry."""
    from yunshan.io.artifacts import Metric

    from .tasks import mode_label

    where = Path(result.get("file") or data or task.name).name
    bits = [f"{result['shots']}-shot"]
    if result["kind"] == "mc":
        bits.append(mode_label(result["mode"]))
    if result.get("chat"):
        bits.append("chat template")
    if result.get("limit"):
        bits.append(f"first {result['limit']} per subject")
    bits.append(f"{result['n']:,} {'questions' if result['kind'] == 'mc' else 'items'}")
    name = f"{task.name} ({KIND_NAMES[result['kind']]}, {where})"
    values = result.get("metrics") or {"accuracy": result["overall"]}
    out = []
    for metric, value in values.items():
        out.append(Metric(f"{task.name}/{metric}", name, f"{METRIC_NAMES[metric]} (%)", float(value),
                          detail=", ".join(bits), eval_result=dict(
                              task_type="text-generation", task_name="Text Generation", dataset_type=where,
                              dataset_name=name, dataset_split=result.get("split"), metric_type=metric,
                              metric_name=f"{METRIC_NAMES[metric]} ({result['shots']}-shot)",
                              metric_value=round(float(value), 2))))
    return out
