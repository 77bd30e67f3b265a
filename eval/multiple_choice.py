"""What the two multiple-choice families share: reading A-D question CSVs with checks (and a subject's k-shot dev
examples), and answering them subject by subject.

    from yunshan.eval.multiple_choice import answer_questions
    preds = answer_questions(lm, prompts, mode="loglik")      # or mode="generate" for chat models

`ceval.py` (C-Eval, FinEval) and `cmmlu.py` (CMMLU, FinanceIQ) own their columns, prompts and averages; this file
reads rows (errors name the file, line and field), and turns prompts into predicted letters either by the
next-token likelihood of "A".."D" (answer-only, batched), by cloze scoring of the options' texts, or by greedy
generation plus answer extraction (`answer_subjects` picks by mode and tallies the predictions per subject).
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

from .extraction import LETTERS, OPTION_LETTERS, extract_choice


@dataclass
class Question:
    """One multiple-choice question as read from a file: the benchmarks' four options A-D, or 2-10 options A, B, ...
    in your own sets (eval/generic.py); `answer` is None only where answers are not required."""

    id: str
    question: str
    options: tuple[str, ...]
    answer: str | None
    file: str
    line: int
    subject: str = ""  # your own sets' optional `subject` field (the benchmarks group by file instead)

    @property
    def letters(self) -> str:
        """The option letters of this question, "ABCD" for four options."""
        return OPTION_LETTERS[: len(self.options)]


def read_choice_csv(path: Path, columns: dict[str, str], format_name: str, require_answer: bool = True,
                    header_hint: str = "", optional: tuple[str, ...] = ("id",)) -> list[Question]:
    """Read one subject file as released.

    What the releases really hold is accepted: a UTF-8 BOM, header names in another case or with spaces around
    them ("Question" / "question"), an extra index column (CMMLU's leading unnamed one, or a pandas index before
    C-Eval's `id`), empty trailing fields, CRLF line ends, and whitespace around the answer letter (FinEval's
    "D "). The question and option texts are kept exactly as released (the owners' code and lm-eval put them into
    the prompt unstripped). Anything else stops with one line naming the file, the line, the field and what is
    valid.

    Args:
        path: the CSV file (UTF-8, BOM allowed).
        columns: role -> column name for the roles "id", "question", "A".."D", "answer".
        format_name: "C-Eval" or "CMMLU", for error messages.
        require_answer: every row must have an answer in A-D (dev and scored splits).
        header_hint: the expected header, quoted in errors.
        optional: roles whose column may be missing (the id: questions are then numbered from 0).
    """
    with open(path, encoding="utf-8-sig", newline="") as handle:
        reader = csv.reader(handle)
        try:
            header = next(reader)
        except StopIteration:
            raise ValueError(f"{path}: empty file; a {format_name} subject file needs the header {header_hint}")
        except (csv.Error, UnicodeDecodeError) as err:
            raise ValueError(f"{path}:1: not a UTF-8 CSV file ({err}); the {format_name} format is {header_hint}")
        names = [h.strip().lstrip("\ufeff").strip().lower() for h in header]
        index = {}
        for role, name in columns.items():
            if name.lower() in names:
                index[role] = names.index(name.lower())
            elif role not in optional:
                hint = ("; C-Eval's test split is released without answers: score --split val"
                        if role == "answer" and format_name == "C-Eval" else "")
                raise ValueError(f"{path}:1: missing column {name!r} (header is {header}); "
                                 f"the {format_name} format is {header_hint}{hint}")
        questions, line = [], reader.line_num + 1
        while True:
            try:
                row = next(reader)
            except StopIteration:
                break
            except (csv.Error, UnicodeDecodeError) as err:
                raise ValueError(f"{path}:{line}: unreadable CSV row ({err}); the {format_name} format is "
                                 f"{header_hint}") from None
            start, line = line, reader.line_num + 1  # a quoted field may span several lines
            if not any(cell.strip() for cell in row):
                continue
            if len(row) < len(header):
                raise ValueError(f"{path}:{start}: row has {len(row)} fields, the header has {len(header)} "
                                 f"({header_hint})")
            if any(cell.strip() for cell in row[len(header):]):
                raise ValueError(f"{path}:{start}: row has {len(row)} fields, the header has {len(header)} "
                                 f"({header_hint}); a field holding a comma must be quoted")
            get = lambda role: row[index[role]] if role in index else ""  # noqa: E731
            if not get("question").strip():
                raise ValueError(f"{path}:{start}: field {columns['question']!r} is empty; every row needs a question")
            for letter in LETTERS:
                if not get(letter).strip():
                    raise ValueError(f"{path}:{start}: field {columns[letter]!r} is empty; every row needs four "
                                     "options A-D")
            answer = get("answer").strip() or None
            if answer is not None and answer not in LETTERS:
                raise ValueError(f"{path}:{start}: field {columns['answer']!r} is {get('answer')!r}; "
                                 f"it must be one of {', '.join(LETTERS)}")
            if require_answer and answer is None:
                raise ValueError(f"{path}:{start}: field {columns['answer']!r} is empty; "
                                 f"scored and few-shot rows need an answer in {', '.join(LETTERS)}")
            qid = get("id").strip() or str(len(questions))
            questions.append(Question(qid, get("question"), tuple(get(letter) for letter in LETTERS), answer,
                                      str(path), start))
    if not questions:
        raise ValueError(f"{path}: no questions (empty subject); a subject file needs at least one row")
    return questions


def read_dev_shots(path: Path, shots: int, columns: dict[str, str], format_name: str,
                   header_hint: str | None = None) -> list[Question]:
    """The first `shots` solved examples of a subject's dev file: the examples of its k-shot prompts."""
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing; {shots}-shot prompts take examples from the dev split (dev/; "
                                "use --shots 0 without one)")
    dev = read_choice_csv(path, columns, format_name, require_answer=True, header_hint=header_hint)
    if len(dev) < shots:
        raise ValueError(f"{path}: {len(dev)} examples, fewer than --shots {shots}")
    return dev[:shots]


@dataclass
class Prediction:
    """A model's answer to one question: the letter (None = no pattern matched), with its evidence."""

    pred: str | None
    logliks: list[float] | None = None
    output: str | None = None
    pattern: str | None = None
    truncated: bool = False
    rescored: bool = False  # a close call under bf16 autocast, scored again in float32 (likelihood.settle_in_float32)


def answer_questions(lm, prompts: list[str], mode: str = "loglik", batch_size: int = 16,
                     add_bos: bool | None = None,
                     max_new_tokens: int = 32, chat: bool = False, progress: bool = False,
                     desc: str = "questions", choices: list[str] | None = None,
                     letters: list[str] | None = None, delimiter: str = "") -> list[Prediction]:
    """Predicted letters for prompts that end where the answer letter goes.

    mode "loglik": argmax over the options of the log-likelihood of the letter right after the prompt
        (answer-only); the continuations scored are `delimiter` + each letter ("" or lm-eval's target delimiter
        " "), or the strings `choices` for every prompt where given.
    mode "generate": greedy generation (through the chat template when `chat`), then `extract_choice`.
    `letters`: each prompt's option letters (default "ABCD" for every prompt; "ABCDE" for a five-option question).
    """
    letters = letters or [LETTERS] * len(prompts)
    if mode == "loglik":
        from .likelihood import score_choices

        scores = score_choices(lm, [(p, list(choices) if choices else [delimiter + x for x in ls])
                                    for p, ls in zip(prompts, letters)],
                               batch_size=batch_size, add_bos=add_bos, progress=progress, desc=desc)
        return [Prediction(OPTION_LETTERS[s.best], logliks=s.logliks, truncated=s.truncated, rescored=s.rescored)
                for s in scores]
    if mode == "generate":
        from .generation import generate

        outputs = generate(lm, prompts, max_new_tokens=max_new_tokens, batch_size=batch_size, chat=chat,
                           add_bos=add_bos, progress=progress, desc=desc)
        preds = []
        for text, ls in zip(outputs, letters):
            letter, pattern = extract_choice(text, ls)
            preds.append(Prediction(letter, output=text, pattern=pattern))
        return preds
    raise ValueError(f"--mode {mode!r} is not valid; use loglik, cloze or generate")


BLANK = re.compile(r"[（(]\s*[)）]")


def split_at_blank(question: str) -> tuple[str, str | None]:
    """(text before the blank, text after it) of a fill-in question such as "速动比率等于（ ）。"; (question, None)
    when it has no blank."""
    m = BLANK.search(question)
    if not m:
        return question, None
    return question[: m.start()], question[m.end():]


def cloze_prompt(header: str, lead: str, cue: str, shots: list[Question],
                 query: Question) -> tuple[str, list[str]]:
    """Cloze prompt and the four continuations scored, for a format whose questions start with `lead` and whose
    answers follow `cue`. A fill-in question ("...是指（ ）。") is cut at its blank: the prompt ends before the
    blank and each option's text, followed by the rest of the question, continues it; other questions end with the
    cue and each option's text follows. Shots show their question with the answer's text."""

    def filled(q):
        before, after = split_at_blank(q.question)
        answer = q.options[OPTION_LETTERS.index(q.answer)]
        return f"{lead}{before}{answer}{after}" if after is not None else f"{lead}{q.question}\n{cue}{answer}"

    before, after = split_at_blank(query.question)
    shots_text = "".join(filled(s) + "\n\n" for s in shots)
    if after is not None:
        return header + shots_text + f"{lead}{before}", [o + after for o in query.options]
    return header + shots_text + f"{lead}{query.question}\n{cue}", list(query.options)


def cloze_neutral(header: str, lead: str, cue: str, shots: list[Question]) -> str:
    """The cloze prompt without the question (the baseline of mutual-information scoring)."""
    return cloze_prompt(header, lead, cue, shots, Question("", f"{cue}（ ）", ("",), None, "", 0))[0]


def answer_cloze(lm, requests: list[tuple[str, list[str]]], batch_size: int = 16, add_bos: bool | None = None,
                 progress: bool = False, desc: str = "cloze", neutral: list[str] | None = None) -> list[Prediction]:
    """Cloze scoring: the prompt holds the question but not the options, and each option's text is scored as the
    continuation.

    With `neutral` contexts (one per request: the same header without the question), the score is
    log P(option | question) - log P(option | neutral): lm-evaluation-harness's `acc_mutual_info`, which cancels
    how likely an option's text is on its own and keeps what the question adds, i.e. the model's knowledge.
    Without them, the best log-likelihood per character wins (`acc_norm`).

    Neither is the papers' answer-only protocol (which asks the model to pick a letter from listed options, a skill
    small models lack); reports say which mode produced a number."""
    from .likelihood import score_choices, settle_in_float32

    def scored(indices: list[int], suffix: str = "") -> list[tuple[list[float], list[int], list[float], bool]]:
        """(values, tokens summed into each value, each value's scale, truncated) of the requests at `indices`."""
        scores = score_choices(lm, [(requests[i][0], list(requests[i][1])) for i in indices], batch_size=batch_size,
                               add_bos=add_bos, progress=progress, desc=desc + suffix, settle=False)
        base = None
        if neutral is not None:
            base = score_choices(lm, [(neutral[i], list(requests[i][1])) for i in indices], batch_size=batch_size,
                                 add_bos=add_bos, progress=progress, desc=desc + " (neutral)" + suffix, settle=False)
        out = []
        for k, i in enumerate(indices):
            s, opts = scores[k], requests[i][1]
            if base is not None:  # mutual information
                out.append(([a - b for a, b in zip(s.logliks, base[k].logliks)],
                            [a + b for a, b in zip(s.n_tokens, base[k].n_tokens)], [1.0] * len(opts), s.truncated))
            else:  # per character
                out.append(([ll / max(len(o), 1) for ll, o in zip(s.logliks, opts)], s.n_tokens,
                            [1.0 / max(len(o), 1) for o in opts], s.truncated))
        return out

    first = scored(list(range(len(requests))))
    values = [list(v) for v, _, _, _ in first]
    again = set(settle_in_float32(lm, values, [n for _, n, _, _ in first],
                                  lambda indices: [v for v, _, _, _ in scored(indices, " (float32)")],
                                  scales=[scale for _, _, scale, _ in first]))
    preds = []
    for k, (v, (_, _, _, truncated)) in enumerate(zip(values, first)):
        best = max(range(len(v)), key=lambda j: (v[j], -j))
        preds.append(Prediction(OPTION_LETTERS[best], logliks=v, truncated=truncated, rescored=k in again))
    return preds


def delimiter_for(style: str) -> str:
    """What goes between the prompt and the answer letter: nothing, or lm-eval's target_delimiter " "."""
    return " " if style == "lm-eval" else ""


def choices_for(style: str, letters: str = LETTERS) -> list[str]:
    """The continuation strings scored after the prompt (lm-eval puts its target_delimiter " " before them)."""
    return [delimiter_for(style) + x for x in letters]


def answer_subjects(lm, subjects: list, prompt, cloze, neutral, *, limit: int | None = None, mode: str = "loglik",
                    batch_size: int = 16, add_bos: bool | None = None, chat: bool = False, max_new_tokens: int = 32,
                    progress: bool = False, desc: str = "questions",
                    delimiter: str = "") -> tuple[dict[str, int], list[dict], dict]:
    """Answer every question of every subject (each subject's first `limit` questions, when given: a quick look
    whose averages cover those only) and tally the answers: (correct answers per subject key, one record per
    question, the counts every result reports).

    `prompt(subject, question)` is the answer-only prompt (mode loglik or generate, `delimiter` as in
    answer_questions); `cloze(subject, question)` the cloze prompt and its continuations and `neutral(subject)` the
    same prompt without the question (mode cloze, answer_cloze). `add_bos` as there (None: as the tokenizer does)."""
    if limit is not None:
        for subject in subjects:
            subject.questions = subject.questions[:limit]
    items = [(s, q) for s in subjects for q in s.questions]
    if mode == "cloze":
        preds = answer_cloze(lm, [cloze(s, q) for s, q in items], neutral=[neutral(s) for s, _ in items],
                             batch_size=batch_size, add_bos=add_bos, progress=progress, desc=f"{desc} cloze")
    else:
        preds = answer_questions(lm, [prompt(s, q) for s, q in items], mode=mode, batch_size=batch_size,
                                 add_bos=add_bos, max_new_tokens=max_new_tokens, chat=chat, progress=progress,
                                 desc=desc, delimiter=delimiter, letters=[q.letters for _, q in items])
    correct: dict[str, int] = {}
    records = []
    for (s, q), p in zip(items, preds):
        ok = p.pred == q.answer
        correct[s.key] = correct.get(s.key, 0) + int(ok)
        records.append({"subject": s.key, "id": q.id, "gold": q.answer, "pred": p.pred, "correct": ok,
                        "logliks": p.logliks, "output": p.output, "pattern": p.pattern, "rescored": p.rescored})
    counts = {"unmatched": sum(1 for p in preds if p.pred is None),
              "truncated": sum(1 for p in preds if p.truncated),
              "rescored_float32": sum(1 for p in preds if p.rescored)}
    return correct, records, counts
