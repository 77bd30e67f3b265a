"""FinanceIQ scored as its owners' code scores it: the `financeiq` task with `--mode generate`.

    yunshan eval --model out/yunshan --tasks financeiq=FinanceIQ/data --mode generate --shots 5

FinanceIQ's own evaluation (Duxiaoman-DI/XuanYuan, `FinanceIQ/src`, last changed in ab14163: `hf_causal_model.py`,
`utils.py`, `categories.py`) never scores letter likelihoods; its README says it reads the option out of the whole
generated answer, to stay close to real use. This module runs that pipeline step by step:

1. Prompt (`gen_prompt`): CMMLU's prompt (cmmlu.py, the same bytes), k solved dev examples, and the owners' trimming:
   header + question over `MAX_LENGTH` (2048, their default) tokens leaves the question alone; otherwise, while the
   examples' tokens reach `MAX_LENGTH` minus header and question, every example of the longest length is removed.
   Token counts are `tokenizer.encode` of each piece, special tokens as the tokenizer adds them, as theirs.
2. Generation (`hf_causal_model.eval`): `max_new_tokens=512`, `repetition_penalty=1.1`, decoding otherwise the
   model's default, which is greedy unless its generation_config.json says to sample (yunshan always decodes
   greedily and records whether the model's config samples). Batches are left-padded; transformers leaves the
   padding out of the repetition penalty, so a batch gives what their one-at-a-time loop gives. Their script
   continues the raw prompt, except for models named "...chat..." outside the LLaMA family, which answer through
   their own remote-code `.chat()` and its settings. `--chat auto` follows it (`owners_chat`: the raw prompt, a
   chat-template turn in place of `.chat()` only for a model that has one); `--chat on` / `off` force either.
3. Saving (`run_eval`, `compute_accuracy`): `pred.replace("\\n", "")` goes into `results_{subject}.csv` through
   pandas and is read back. `saved_response` models that round trip as it ran for the published tables: pandas'
   missing-value strings ("", "NA", "None", "null", ...) come back as NaN, which `extract_choice` sees as "nan";
   a "\\r" left in an unquoted cell ended the row there (Python's csv writer quoted "\\r" only from 3.11.9 / 3.12.3,
   gh-67044), and every non-blank piece after it became a row of its own: no answer, response "nan", scored wrong.
4. Extraction (`extract_choice`): the owners' patterns in their order (the first character; twelve single-match
   patterns; two "recursive" ones that take the last of nested matches; a weak "是 X"; the only letter mentioned),
   then a random letter. The random letter is drawn from `random.Random(f"{seed}:{subject}:{row}")`, so a run
   repeats exactly; results.json counts the answers that fell back to it (a random letter is right a quarter of the
   time) and gives the accuracy with them counted wrong beside the owners' accuracy.
5. Accuracy per subject over the rows read back (the owners drop the first row when its question is "1", a
   guard for a header row); Overall = the unweighted mean over the subjects (theirs: the 10 of categories.py).

Not reproduced: the owners' `--cot` variant (no published table uses it, and `hf_causal_model.py` calls
`gen_prompt` without it, so the header stays the direct-answer one while the question ends "逐步分析并给出答案选项。").
`--mode loglik` (and cloze) on `financeiq` stay yunshan's answer-only alternatives (cmmlu.py), labelled so in
results.json.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from . import cmmlu

SOURCE = "Duxiaoman-DI/XuanYuan FinanceIQ/src (ab14163): hf_causal_model.py, utils.py, categories.py"
# categories.py: the subjects the owners' Overall averages, in their (and the paper's Table 8) order.
SUBJECTS = ("注册会计师（CPA）", "银行从业资格", "证券从业资格", "基金从业资格", "保险从业资格CICE", "经济师", "税务师",
            "期货从业资格", "理财规划师", "精算师-金融数学")
MAX_LENGTH = 2048  # hf_causal_model.py's --max_length default: the budget gen_prompt trims the examples to
MAX_NEW_TOKENS = 512
REPETITION_PENALTY = 1.1
FALLBACK_SEED = 0  # seeds the random letter of answers no pattern reads (the owners' is unseeded)
CHOICES = ("A", "B", "C", "D")
# pandas' default missing-value strings (read_csv na_values): such a saved response is read back as NaN, i.e. "nan".
NA_VALUES = frozenset({"", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN",
                       "<NA>", "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null"})

# extract_choice's patterns, as written in utils.py and in its order: (regex, group holding the letter).
_SINGLE = [
    (r'答案(选项)?(是|为)：? ?([ABCD])', 3),
    (r'答案(是|为)选项 ?([ABCD])', 2),
    (r'故?选择?：? ?([ABCD])', 1),
    (r'([ABCD]) ?选?项(是|为)?正确', 1),
    (r'正确的?选项(是|为) ?([ABCD])', 2),
    (r'答案(应该)?(是|为)([ABCD])', 3),
    (r'选项 ?([ABCD]) ?(是|为)?正确', 1),
    (r'选择答案 ?([ABCD])', 1),
    (r'答案?：?([ABCD])', 1),
    (r'([ABCD])(选?项)?是?符合题意', 1),
    (r'答案选项：? ?([ABCD])', 1),  # chatglm
    (r'答案(选项)?为(.*?)([ABCD])', 3),  # chatgpt
]
_RECURSIVE = [(r'([ABCD])(.*?)当选', 1), (r'([ABCD])(.*?)正确', 1)]
_WEAK = [(r'[^不]是：? ?([ABCD])', 1)]
_ONLY = r'^[^ABCD]*([ABCD])[^ABCD]*$'


@lru_cache(maxsize=1)
def _patterns():
    def compiled(patterns, stage):
        return [(f"{stage}_{i}", re.compile(p, re.M), g) for i, (p, g) in enumerate(patterns, 1)]

    return compiled(_SINGLE, "single"), compiled(_RECURSIVE, "recursive"), compiled(_WEAK, "weak")


# Every rule extract_choice reports, in the order it tries them (docs/evaluation-formats.md lists their patterns).
RULES = ("first_char", *[f"single_{i}" for i in range(1, len(_SINGLE) + 1)],
         *[f"recursive_{i}" for i in range(1, len(_RECURSIVE) + 1)], "weak_1", "only_choice", "random")


def extract_choice(response: str, rng: random.Random) -> tuple[str, str]:
    """FinanceIQ's `extract_choice` (utils.py): (letter, rule), always a letter; `rng` draws it when no rule reads
    one (rule "random"). `response` is the text as compute_accuracy reads it back (saved_response)."""
    if response[:1] in CHOICES:
        return response[0], "first_char"
    single, recursive, weak = _patterns()
    for name, pattern, group in single:
        m = pattern.search(response)
        if m:
            return m.group(group), name
    for name, pattern, group in recursive:
        m = pattern.search(response)
        if m:
            # The last of the matches nested in each other: search again in the match without its first character.
            while m:
                answer = m.group(group)
                m = pattern.search(m.group(0)[1:])
            return answer, name
    for name, pattern, group in weak:
        m = pattern.search(response)
        if m:
            return m.group(group), name
    m = re.match(_ONLY, response)
    if m:
        return m.group(1), "only_choice"
    return CHOICES[rng.randint(0, 3)], "random"


def saved_response(prediction: str, cr_splits_rows: bool = True) -> tuple[str, int]:
    """(the response compute_accuracy reads back, how many extra rows the saved line became) for one generated
    answer: newlines removed as `run_eval` saves it, then pandas' round trip. A "\\r" in a cell the csv writer left
    unquoted (no "," or '"' in it) ends the row; each later piece that is not blank (spaces and tabs only) is a row
    of its own. `cr_splits_rows=False` is a Python whose csv writer quotes "\\r" (3.11.9+, 3.12.3+)."""
    text = prediction.replace("\n", "")
    extra = 0
    if cr_splits_rows and "\r" in text and "," not in text and '"' not in text:
        text, *rest = text.split("\r")
        extra = sum(1 for piece in rest if piece.strip(" \t"))
    return ("nan" if text in NA_VALUES else text), extra


def render_prompt(subject_name: str, shots: list, query, encode=None, max_length: int = MAX_LENGTH) -> tuple[str, int]:
    """(the owners' prompt for `query`, how many of `shots` it kept): `gen_prompt` with `format_example`. `encode`
    (text -> token ids, the tokenizer's `encode`) turns on their trimming; None is their call without a tokenizer."""
    head, end = cmmlu.prompt_header(subject_name), cmmlu.query_text(query)
    examples = [cmmlu.solved_example(s) for s in shots]
    if encode is None:
        return head + "".join(examples) + end, len(examples)
    start_end = len(encode(head)) + len(encode(end))
    if start_end > max_length:  # not even the header fits: the question alone
        return end, 0
    kept = [(e, len(encode(e))) for e in examples]
    while kept and sum(n for _, n in kept) >= max_length - start_end:
        longest = max(n for _, n in kept)
        kept = [(e, n) for e, n in kept if n != longest]
    return head + "".join(e for e, _ in kept) + end, len(kept)


@dataclass
class Row:
    """One row of the owners' results CSV as compute_accuracy reads it back."""

    id: str | None  # the question's id; None for a row split off a response
    question: str | None
    gold: str | None
    response: str
    output: str | None = None  # the generated text (None for a split-off row)
    shots: int | None = None


def score_subject(subject: str, questions: list, outputs: list[str], shots: list[int] | None = None,
                  seed: int = FALLBACK_SEED, cr_splits_rows: bool = True) -> dict:
    """compute_accuracy for one subject: `questions` (Question) and their generated `outputs` in file order. Returns
    the subject's figures and one record per row read back (the random fallback seeded by `seed`, subject, row)."""
    rows: list[Row] = []
    for i, (q, output) in enumerate(zip(questions, outputs, strict=True)):
        response, extra = saved_response(output, cr_splits_rows)
        rows.append(Row(q.id, q.question, q.answer, response, output, shots[i] if shots else None))
        rows.extend(Row(None, None, None, "nan") for _ in range(extra))
    dropped = 0
    if rows and rows[0].question == "1":
        # `if df.iloc[0]['question'] == '1': df = df.drop(0)`: the rows labelled 0, on an integer index only.
        if any(r.id is None for r in rows) or not all(_is_int(r.id) for r in rows):
            raise ValueError(f"{subject}: the first question is '1' and the ids are not all integers; FinanceIQ's "
                             "compute_accuracy stops here (KeyError in df.drop(0))")
        kept = [r for r in rows if int(r.id) != 0]
        dropped, rows = len(rows) - len(kept), kept
    records, correct, fallbacks, lucky = [], 0, 0, 0
    for position, row in enumerate(rows):
        pred, rule = extract_choice(row.response, random.Random(f"{seed}:{subject}:{position}"))
        ok = row.gold is not None and pred == row.gold
        correct += ok
        fallbacks += rule == "random"
        lucky += ok and rule == "random"
        record = {"subject": subject, "id": row.id, "gold": row.gold, "pred": pred, "correct": ok, "rule": rule,
                  "response": row.response, "output": row.output, "shots": row.shots}
        if row.id is None:
            record["split_off"] = True  # a piece of the previous response that became a row of its own
        records.append(record)
    n = len(rows)
    return {"correct": correct, "n": n, "questions": len(questions), "accuracy": 100.0 * correct / n if n else 0.0,
            "random_fallbacks": fallbacks, "accuracy_fallbacks_wrong": 100.0 * (correct - lucky) / n if n else 0.0,
            "split_off_rows": n + dropped - len(questions), "dropped_first_row": dropped, "records": records}


def owners_chat(lm, flag: str, chat: bool) -> bool:
    """Whether the prompt goes into a chat turn. `--chat auto` follows the owners' script: it continues the raw prompt
    for every model except those with their own remote-code `.chat()` (Baichuan, ChatGLM, Qwen-1 and InternLM chat
    models, sent through it), for which the chat template stands in when the tokenizer has one (`chat`, as --chat
    auto resolved it). `--chat on` / `off` decide by themselves."""
    if flag == "auto":
        return chat and callable(getattr(lm.model, "chat", None))
    return chat


def _is_int(text: str | None) -> bool:
    try:
        int(text)
    except (TypeError, ValueError):
        return False
    return True


def _samples(model) -> bool:
    config = getattr(model, "generation_config", None)
    return bool(getattr(config, "do_sample", False))


def run_financeiq(lm, root: str | Path, split: str = "test", shots: int = 5, limit: int | None = None,
                  batch_size: int = 16, add_bos: bool | None = None, chat: bool = False,
                  max_new_tokens: int = MAX_NEW_TOKENS, progress: bool = False, seed: int = FALLBACK_SEED,
                  max_length: int = MAX_LENGTH, cr_splits_rows: bool = True) -> dict:
    """Generate answers to a FinanceIQ-format folder and score them as FinanceIQ's own code does; returns the
    JSON-ready result (cmmlu.py's layout, plus the fallback counts and every row's response and rule)."""
    from .generation import encode_prompt, generate, render_chat
    from .likelihood import resolve_add_bos

    subjects = cmmlu.load_cmmlu(root, split, shots)
    if limit is not None:
        for s in subjects:
            s.questions = s.questions[:limit]
    tokenizer = lm.tokenizer
    encode = lru_cache(maxsize=None)(lambda text: tokenizer.encode(text))  # headers and examples repeat
    prompts, kept, trimmed = [], [], []
    for s in subjects:
        for q in s.questions:
            prompt, k = render_prompt(s.name, s.dev, q, encode, max_length)
            prompts.append(prompt)
            kept.append(k)
            trimmed.append(prompt != render_prompt(s.name, s.dev, q)[0])
    outputs = generate(lm, prompts, max_new_tokens=max_new_tokens, batch_size=batch_size, chat=chat,
                       add_bos=add_bos, progress=progress, desc="financeiq", repetition_penalty=REPETITION_PENALTY)
    # The owners never cut a prompt; yunshan's generate keeps its last (context - max_new_tokens) tokens.
    room, bos = lm.max_length - max_new_tokens, resolve_add_bos(tokenizer, add_bos)
    cut = sum(len(encode_prompt(tokenizer, render_chat(tokenizer, p) if chat else p, bos)) > room for p in prompts)
    per_subject, records, start = {}, [], 0
    for s in subjects:
        n = len(s.questions)
        scored = score_subject(s.key, s.questions, outputs[start:start + n], kept[start:start + n], seed,
                               cr_splits_rows)
        records.extend(scored.pop("records"))
        scored["trimmed_prompts"] = sum(trimmed[start:start + n])
        per_subject[s.key] = {"name": s.name, **scored}
        start += n
    accs = [v["accuracy"] for v in per_subject.values()]
    strict = [v["accuracy_fallbacks_wrong"] for v in per_subject.values()]
    differs = [f"{name} {value}, theirs {theirs}" for name, value, theirs in (
        ("max_new_tokens", max_new_tokens, MAX_NEW_TOKENS), ("max_length", max_length, MAX_LENGTH)) if value != theirs]
    return {
        "format": "cmmlu", "split": split, "shots": shots, "mode": "generate", "prompt_style": "cmmlu", "limit": limit,
        "scoring": f"FinanceIQ's own ({SOURCE}): generated answer, their extract_choice, random letter when no "
                   "pattern reads one (seeded); accuracy per subject, Overall = unweighted mean"
                   + (f"; differs from theirs: {', '.join(differs)}" if differs else ""),
        "subjects": per_subject, "columns": list(per_subject),
        "overall": sum(accs) / len(accs), "overall_fallbacks_wrong": sum(strict) / len(strict),
        "n": sum(v["n"] for v in per_subject.values()),
        "random_fallbacks": sum(v["random_fallbacks"] for v in per_subject.values()),
        "average": "unweighted mean of subject accuracies, as FinanceIQ's Overall",
        # The owners' Overall averages the 10 subjects of categories.py (one missing counts 0, one not listed is
        # ignored); yunshan averages the subjects in the folder and says how that differs.
        "missing_subjects": [x for x in SUBJECTS if x not in per_subject],
        "subjects_not_in_financeiq": [x for x in per_subject if x not in SUBJECTS],
        "generation": {"max_new_tokens": max_new_tokens, "repetition_penalty": REPETITION_PENALTY,
                       "decoding": "greedy", "model_config_samples": _samples(lm.model), "chat": chat,
                       "max_length": max_length, "prompts_cut": cut},
        "fallback_seed": seed, "cr_splits_rows": cr_splits_rows,
        "unmatched": 0, "truncated": cut, "rescored_float32": 0,
        "trimmed_prompts": sum(v["trimmed_prompts"] for v in per_subject.values()),
        "predictions": records,
    }


def run_task(lm, data: Path, args, chat: bool, task=None) -> tuple[dict, list[Path]]:
    """`yunshan eval --tasks financeiq --mode generate`: the Task's `generate` module (yunshan.eval.tasks)."""
    if args.prompt_style == "lm-eval":
        raise ValueError("--prompt-style lm-eval: FinanceIQ's own scoring (--mode generate) uses FinanceIQ's prompt; "
                         "score lm-eval's cmmlu prompt with --mode loglik, or drop --prompt-style")
    return run_financeiq(lm, data, split=args.split or "test", shots=args.shots, limit=args.limit,
                         batch_size=args.batch_size, add_bos=args.add_bos, chat=owners_chat(lm, args.chat, chat),
                         max_new_tokens=args.max_new_tokens or MAX_NEW_TOKENS, progress=args.progress), []
