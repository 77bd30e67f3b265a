"""Instruction data: read alpaca, messages, ShareGPT, exam rows (C-Eval/FinEval CSV, Fin-Eva JSON Lines), JEC-QA,
CFLUE and Self-Instruct records as conversations, each release in its own layout.

Every source declares its format; files are read by the data layer's one reader (yunshan.data.records) and each
record becomes a list of {"role", "content"} turns (optional system first, then user/assistant alternating, ending
with an assistant turn). A record that does not fit is a `BadRecord` that raises `BadRecordError` naming the file,
line and field (policy `fail`) or is counted by reason (policy `skip`): wrong role order, empty assistant turn,
unknown role, missing field, malformed JSON, an answer that is not among the options.

The formats, each a release's own layout:
- alpaca: `instruction, input, output`, optional `system` and `history` ([[q, a], ...]); other field names through
  `columns`, named as LLaMA-Factory's dataset_info.json names them (prompt, query, response, history, system). The
  history turns, then instruction + "\\n" + input -> output.
- messages: `messages: [{role, content}, ...]`; sharegpt: `conversations: [{from, value}, ...]`.
- ceval: C-Eval/FinEval CSV `{dev,val}/{subject}_{split}.csv` (id, question, A-D, answer, [explanation]: the subject
  from the file name), or such rows in JSON Lines as Fin-Eva ships them (2-6 options from A, an optional `context`
  before the question, or no options and a 是/否 answer: a judgement). The exam prompt -> 答案：X (解析：
  explanation).
- jecqa: JEC-QA `statement, option_list, answer: [letters]` -> 答案：A、C.
- cflue: CFLUE knowledge `名称, task, question, choices, answer, analysis`; `choices` is a Python dict literal in a
  string, `task` 单项选择题, 多项选择题 or 判断题 -> 答案：ABD (解析：analysis).
- self_instruct: Self-Instruct `instruction, instances: [{input, output}, ...]`: one sample per instance,
  instruction + "\\n" + input -> output.

An alpaca response that is a JSON object or list instead of a string (CFLUE's extraction tasks give their answers
so) is the answer written as JSON (`json.dumps`, non-ASCII kept), the text a model would have to produce.
"""

from __future__ import annotations

import ast
import json
import random
from dataclasses import dataclass, field
from pathlib import Path

from yunshan.arguments.field_rules import check_fields

from .files import resolve_paths
from .records import BadRecord, fail_or_count, read_records

SFT_FORMATS = ("alpaca", "messages", "sharegpt", "ceval", "jecqa", "cflue", "self_instruct")
ROLES = ("system", "user", "assistant")
SHAREGPT_ROLES = {"system": "system", "human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant"}
CEVAL_COLUMNS = ("question", "A", "B", "C", "D", "answer")
# The alpaca columns and the fields they read by default. The names are LLaMA-Factory's (dataset_info.json
# `columns`: prompt, query, response, history, system); its defaults are instruction, input and output, and yunshan
# also reads `history` and `system` when a record has them.
ALPACA_COLUMNS = {"prompt": "instruction", "query": "input", "response": "output", "history": "history",
                  "system": "system"}
OPTIONAL_COLUMNS = ("query", "history", "system")  # null in `columns`: the records have none
OPTION_LETTERS = "ABCDEF"
# Exam kinds as the prompt names them (CFLUE's `task` values; C-Eval and Fin-Eva rows are single choice or, without
# options, 是/否 judgements).
EXAM_KINDS = ("单项选择题", "多项选择题", "判断题")
JUDGEMENT_ANSWERS = ("是", "否")


@dataclass
class SftSourceArgs:
    """One instruction source of the SFT mixture."""

    name: str = field(metadata={"help": "name in reports and per-source losses"})
    path: list[str] | str = field(metadata={"path": True,
        "help": "file, folder or glob (.jsonl/.json; .csv for ceval)"})
    format: str = field(metadata={"help": f"one of {', '.join(SFT_FORMATS)}"})
    weight: float = field(default=1.0, metadata={"range": "> 0",
        "help": "sampling weight: 2.0 repeats every sample twice, 0.5 "
                                                         "keeps a random half"})
    max_samples: int | None = field(default=None, metadata={"range": ">= 0",
        "help": "cap on samples from this source (after weight)"})
    system: str | None = field(default=None, metadata={"help": "system prompt added to samples that have none"})
    columns: dict[str, str] | None = field(default=None, metadata={
        "help": "format alpaca: the record field of each part, as LLaMA-Factory's dataset_info.json `columns` names "
                "them: prompt (default instruction), query (input), response (output), history (history), system "
                "(system); query, history and system may be null (not read), and a query naming the prompt's field "
                "is not read twice: {prompt: input, response: output} reads records of input and output only"})
    heldout: int = field(default=0, metadata={"range": ">= 0", "help": "samples held out for generation at the end"})
    card: str | None = field(default=None, metadata={"help": "data card id (data_cards/<card>.md) describing it"})

    def __post_init__(self):
        check_fields(self)
        if self.format not in SFT_FORMATS:
            raise ValueError(f"sft source {self.name!r}: format {self.format!r} is not one of {', '.join(SFT_FORMATS)}")
        if self.columns is not None:
            if self.format != "alpaca":
                raise ValueError(f"sft source {self.name!r}: columns apply to format alpaca only (format is "
                                 f"{self.format!r})")
            unknown = [k for k in self.columns if k not in ALPACA_COLUMNS]
            if unknown:
                raise ValueError(f"sft source {self.name!r}: columns.{unknown[0]} is not an alpaca column; valid: "
                                 f"{', '.join(ALPACA_COLUMNS)} (LLaMA-Factory's names)")
            for key, value in self.columns.items():
                if not (isinstance(value, str) and value) and not (value is None and key in OPTIONAL_COLUMNS):
                    raise ValueError(f"sft source {self.name!r}: columns.{key} must name a record field"
                                     + (" (or be null: not read)" if key in OPTIONAL_COLUMNS else "")
                                     + f", got {value!r}")


@dataclass
class Sample:
    messages: list[dict]
    source: str
    location: str


def _files(args: SftSourceArgs) -> list[str]:
    exts = (".csv", ".jsonl", ".json") if args.format == "ceval" else (".jsonl", ".json")
    return resolve_paths(args.path, f"sft source {args.name!r}", keep=lambda p: Path(p).suffix in exts,
                         kinds="file")


def _text(obj: dict, key: str, required: bool = True) -> str:
    if key not in obj:
        if required:
            raise BadRecord("missing_field", key, f"record has fields: {', '.join(sorted(map(str, obj)))}")
        return ""
    value = obj[key]
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise BadRecord("missing_field", key, f"expected a string, got {type(value).__name__}")
    return value


def validate_turns(turns: list[dict], field_name: str) -> list[dict]:
    """System (optional, first) then user/assistant alternating, ending with a non-empty assistant turn."""
    if not turns:
        raise BadRecord("missing_field", field_name, "no turns")
    offset = 1 if turns[0]["role"] == "system" else 0
    body = turns[offset:]
    if not body:
        raise BadRecord("wrong_role_order", field_name, "only a system turn")
    for i, turn in enumerate(body):
        expected = "user" if i % 2 == 0 else "assistant"
        where = f"{field_name}[{i + offset}]"
        if turn["role"] != expected:
            raise BadRecord("wrong_role_order", f"{where}.role",
                       f"expected {expected} (system?, then user/assistant alternating), got {turn['role']}")
        if not turn["content"].strip():
            reason = "empty_assistant" if expected == "assistant" else "empty_user"
            raise BadRecord(reason, f"{where}.content", f"empty {expected} turn")
    if body[-1]["role"] != "assistant":
        raise BadRecord("wrong_role_order", field_name, "the last turn must be the assistant's")
    return turns


def _response(obj: dict, key: str) -> str:
    """An answer field: a string, or a JSON object or list written as JSON (a structured answer is that text)."""
    if key in obj and isinstance(obj[key], (dict, list)):
        return json.dumps(obj[key], ensure_ascii=False)
    return _text(obj, key)


def from_alpaca(obj: dict, columns: dict[str, str] | None = None) -> list[dict]:
    """Alpaca turns; `columns` maps LLaMA-Factory's column names (prompt, query, response, history, system) to the
    record's fields where they differ from the defaults (ALPACA_COLUMNS)."""
    col = {**ALPACA_COLUMNS, **(columns or {})}
    if col["query"] == col["prompt"]:  # {prompt: input}: the field is the prompt, not also its query
        col["query"] = None
    turns = []
    system = _text(obj, col["system"], required=False) if col["system"] else ""
    if system.strip():
        turns.append({"role": "system", "content": system})
    history = (obj.get(col["history"]) if col["history"] else None) or []
    if not isinstance(history, list):
        raise BadRecord("missing_field", col["history"], "expected a list of [instruction, response] pairs")
    for i, pair in enumerate(history):
        if not (isinstance(pair, (list, tuple)) and len(pair) == 2 and all(isinstance(x, str) for x in pair)):
            raise BadRecord("missing_field", f"{col['history']}[{i}]", "expected [instruction, response]")
        turns += [{"role": "user", "content": pair[0]}, {"role": "assistant", "content": pair[1]}]
    instruction = _text(obj, col["prompt"])
    extra = _text(obj, col["query"], required=False) if col["query"] else ""
    output = _response(obj, col["response"])
    if not instruction.strip():
        raise BadRecord("empty_user", col["prompt"], "empty instruction")
    if not output.strip():
        raise BadRecord("empty_assistant", col["response"], "empty output")
    prompt = instruction + ("\n" + extra if extra.strip() else "")
    turns += [{"role": "user", "content": prompt}, {"role": "assistant", "content": output}]
    return validate_turns(turns, col["history"] or "history")


def from_messages(obj: dict) -> list[dict]:
    messages = obj.get("messages")
    if not isinstance(messages, list):
        raise BadRecord("missing_field", "messages", "expected a list of {role, content}")
    turns = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or "role" not in m:
            raise BadRecord("missing_field", f"messages[{i}].role", "each message needs role and content")
        if m["role"] not in ROLES:
            raise BadRecord("unknown_role", f"messages[{i}].role", f"{m['role']!r}; valid roles: {', '.join(ROLES)}")
        if not isinstance(m.get("content"), str):
            raise BadRecord("missing_field", f"messages[{i}].content", "expected a string")
        turns.append({"role": m["role"], "content": m["content"]})
    return validate_turns(turns, "messages")


def from_sharegpt(obj: dict) -> list[dict]:
    conversations = obj.get("conversations")
    if not isinstance(conversations, list):
        raise BadRecord("missing_field", "conversations", "expected a list of {from, value}")
    turns = []
    for i, m in enumerate(conversations):
        if not isinstance(m, dict) or "from" not in m:
            raise BadRecord("missing_field", f"conversations[{i}].from", "each turn needs from and value")
        if m["from"] not in SHAREGPT_ROLES:
            raise BadRecord("unknown_role", f"conversations[{i}].from",
                       f"{m['from']!r}; valid: {', '.join(SHAREGPT_ROLES)}")
        if not isinstance(m.get("value"), str):
            raise BadRecord("missing_field", f"conversations[{i}].value", "expected a string")
        turns.append({"role": SHAREGPT_ROLES[m["from"]], "content": m["value"]})
    return validate_turns(turns, "conversations")


def exam_prompt(question: str, options: dict[str, str], subject: str | None, multi: bool = False,
                kind: str | None = None) -> str:
    """The exam prompt: a header naming the kind (and subject), the question, then "X. option" lines. `kind` is one
    of EXAM_KINDS (default: 不定项选择题 when `multi`, else 单项选择题)."""
    kind = kind or ("不定项选择题" if multi else "单项选择题")
    ask = "请回答是或否。" if kind == "判断题" and not options else "请选出正确答案。"
    header = f"以下是关于{subject}的{kind}，{ask}\n\n" if subject else f"以下是{kind}，{ask}\n\n"
    return header + question + "".join(f"\n{k}. {v}" for k, v in options.items())


def _row_options(row: dict) -> dict[str, str]:
    """The options A, B, ... of an exam row, in order: as many letters as the row has, none missing or empty between.
    Empty options at the end are absent ones (a CSV gives every column: Fin-Eva's true/false rows leave C and D
    empty)."""
    present = [k for k in OPTION_LETTERS if k in row]
    letters = OPTION_LETTERS[: len(present)]
    if present != list(letters):
        gap = next(k for k in letters if k not in row)
        raise BadRecord("missing_field", gap,
                        f"options must run from A without a gap; the row has {', '.join(present)}")
    filled = [k for k in letters if row[k] is not None and str(row[k]).strip()]
    letters = letters[: OPTION_LETTERS.index(filled[-1]) + 1] if filled else ""
    for k in letters:
        if k not in filled:
            raise BadRecord("missing_field", k, f"empty option {k} before option {filled[-1]}")
    return {k: str(row[k]) for k in letters}


def from_ceval_row(row: dict, subject: str | None) -> list[dict]:
    """A C-Eval/FinEval row (question, A-D, answer, optional explanation), or a Fin-Eva row in JSON Lines: 2-6
    options from A, an optional `context` put before the question, or no options and a 是/否 answer (a judgement)."""
    for key in ("question", "answer"):
        if row.get(key) is None or not str(row[key]).strip():
            raise BadRecord("missing_field", key, f"exam rows need question and answer (empty or absent {key}); "
                                                  "C-Eval rows are id,question,A,B,C,D,answer")
    options = _row_options(row)
    answer = str(row["answer"]).strip()
    if not options:
        if answer not in JUDGEMENT_ANSWERS:
            raise BadRecord("bad_answer", "answer",
                            f"a row without options is a 是/否 judgement; answer must be 是 or 否, got {answer!r}")
        kind = "判断题"
    else:
        if len(options) < 2:
            raise BadRecord("missing_field", "B", "an exam row needs at least two options (A and B)")
        if answer not in options:
            raise BadRecord("bad_answer", "answer", f"answer must be one of {', '.join(options)}, got {answer!r}")
        kind = "单项选择题"
    reply = f"答案：{answer}"
    explanation = str(row.get("explanation") or "").strip()
    if explanation:
        reply += f"\n解析：{explanation}"
    question = str(row["question"])
    context = row.get("context")
    if context is not None and not isinstance(context, str):
        raise BadRecord("non_string_field", "context", f"expected a string, got {type(context).__name__}")
    if context and context.strip():
        question = context + "\n\n" + question
    return [{"role": "user", "content": exam_prompt(question, options, subject, kind=kind)},
            {"role": "assistant", "content": reply}]


def from_jecqa(obj: dict) -> list[dict]:
    statement = _text(obj, "statement")
    options = obj.get("option_list")
    if not isinstance(options, dict) or not options:
        raise BadRecord("missing_field", "option_list", "expected {A: ..., B: ..., C: ..., D: ...}")
    answer = obj.get("answer")
    if not isinstance(answer, list) or not answer or any(a not in options for a in answer):
        raise BadRecord("bad_answer", "answer", f"expected a non-empty list of option letters, got {answer!r}")
    prompt = exam_prompt(statement, dict(sorted(options.items())), None, multi=True)
    return [{"role": "user", "content": prompt}, {"role": "assistant", "content": "答案：" + "、".join(sorted(answer))}]


def from_cflue(obj: dict) -> list[dict]:
    """A CFLUE knowledge record: `choices` is a Python dict literal in a string (single quotes), read with
    ast.literal_eval, never evaluated as code; `answer` holds the correct letters (one for 单项选择题 and 判断题)."""
    subject = _text(obj, "名称", required=False).strip() or None
    kind = _text(obj, "task")
    if kind not in EXAM_KINDS:
        raise BadRecord("unknown_shape", "task", f"{kind!r} is not one of {', '.join(EXAM_KINDS)}")
    question = _text(obj, "question")
    if not question.strip():
        raise BadRecord("empty_user", "question", "empty question")
    raw = obj.get("choices")
    if raw is None:
        raise BadRecord("missing_field", "choices", "expected a string such as \"{'A': '...', 'B': '...'}\"")
    try:
        choices = ast.literal_eval(raw) if isinstance(raw, str) else raw
    except (ValueError, SyntaxError, MemoryError, RecursionError) as err:
        raise BadRecord("bad_options", "choices", f"not a Python dict literal ({type(err).__name__})") from None
    if not (isinstance(choices, dict) and len(choices) >= 2 and all(isinstance(k, str) and isinstance(v, str)
                                                                    for k, v in choices.items())):
        raise BadRecord("bad_options", "choices",
                        f"expected at least two options {{'A': text, 'B': text, ...}}, got {str(raw)[:60]!r}")
    answer = _text(obj, "answer").strip()
    if not answer or any(a not in choices for a in answer) or len(set(answer)) != len(answer):
        raise BadRecord("bad_answer", "answer",
                        f"expected distinct letters among {', '.join(choices)}, got {answer!r}")
    if kind != "多项选择题" and len(answer) != 1:
        raise BadRecord("bad_answer", "answer", f"a {kind} has one answer, got {answer!r}")
    reply = f"答案：{answer}"
    analysis = _text(obj, "analysis", required=False).strip()
    if analysis:
        reply += f"\n解析：{analysis}"
    return [{"role": "user", "content": exam_prompt(question, dict(sorted(choices.items())), subject, kind=kind)},
            {"role": "assistant", "content": reply}]


def from_self_instruct(obj: dict) -> list[list[dict]]:
    """A Self-Instruct task: one conversation per instance (instruction + "\\n" + the instance's input -> its
    output), as the Self-Instruct paper fine-tunes on every instance."""
    instruction = _text(obj, "instruction")
    if not instruction.strip():
        raise BadRecord("empty_user", "instruction", "empty instruction")
    instances = obj.get("instances")
    if not isinstance(instances, list) or not instances:
        raise BadRecord("missing_field", "instances", "expected a non-empty list of {input, output}")
    return [_instance_turns(instruction, instance, f"instances[{i}]") for i, instance in enumerate(instances)]


def _instance_turns(instruction: str, instance, where: str) -> list[dict]:
    if not isinstance(instance, dict):
        raise BadRecord("missing_field", where, "expected {input, output}")
    try:
        extra = _text(instance, "input", required=False)
        output = _text(instance, "output")
    except BadRecord as bad:
        bad.field_name = f"{where}.{bad.field_name}"
        raise
    if not output.strip():
        raise BadRecord("empty_assistant", f"{where}.output", "empty output")
    prompt = instruction + ("\n" + extra if extra.strip() else "")
    return [{"role": "user", "content": prompt}, {"role": "assistant", "content": output}]


def ceval_subject(path: str) -> str:
    stem = Path(path).stem
    for split in ("_train", "_dev", "_val", "_test"):
        if stem.endswith(split):
            stem = stem[: -len(split)]
    return stem.replace("_", " ")


def read_sft_source(args: SftSourceArgs, on_bad_record: str, counts: dict, exclude=None) -> list[Sample]:
    """All samples of one source, validated; bad records raise or are counted in `counts` by reason. `exclude`
    (yunshan.data.decontamination.Exclusions): samples of a contamination list are left out, counted as
    "contaminated"."""
    samples = []
    for location, turns in sft_records(args):
        if isinstance(turns, BadRecord):
            fail_or_count(turns, on_bad_record, counts, context=f"sft source {args.name!r}: ", key="bad:{}",
                          fix="Fix the record, or set data.on_bad_record: skip to skip and count bad records.")
            continue
        if exclude is not None and exclude.excludes(turns):
            counts["contaminated"] = counts.get("contaminated", 0) + 1
            continue
        if args.system and turns[0]["role"] != "system":
            turns = [{"role": "system", "content": args.system}] + turns
        samples.append(Sample(turns, args.name, location))
    return samples


def sft_records(args: SftSourceArgs):
    """(location, turns or BadRecord) of every record of every file of one source, before its system prompt."""
    for path in _files(args):
        yield from _records(args, path)


def _records(args: SftSourceArgs, path: str):
    """(location, turns or BadRecord) for every record of one file; a Self-Instruct task with several instances gives
    one sample per instance ("file:line instance i")."""
    csv_file = path.lower().endswith(".csv")
    if csv_file:
        records = read_records(path, "csv", csv_columns=CEVAL_COLUMNS)
    else:
        records = read_records(path, "jsonl" if path.endswith(".jsonl") else "json")
    # A C-Eval CSV is one subject, named by its file; Fin-Eva's JSON Lines mix subjects and name none.
    subject = ceval_subject(path) if csv_file else None
    convert = {"alpaca": lambda o: from_alpaca(o, args.columns), "messages": from_messages,
               "sharegpt": from_sharegpt, "ceval": lambda o: from_ceval_row(o, subject), "jecqa": from_jecqa,
               "cflue": from_cflue, "self_instruct": from_self_instruct}[args.format]
    for location, obj, _ in records:
        if isinstance(obj, BadRecord):
            yield location, obj
            continue
        if not isinstance(obj, dict):
            yield location, BadRecord("malformed_json", None, f"expected an object, got {type(obj).__name__}", location)
            continue
        try:
            converted = convert(obj)
        except BadRecord as bad:
            yield location, bad.at(location)
            continue
        if args.format != "self_instruct":
            yield location, converted
        elif len(converted) == 1:
            yield location, converted[0]
        else:
            for i, turns in enumerate(converted):
                yield f"{location} instance {i}", turns


def mix_sft_sources(per_source: dict[str, list[Sample]], sources: list[SftSourceArgs], seed: int):
    """Apply each source's weight (repeat or subsample) and cap, hold out generation prompts, and shuffle
    everything into one training list. Returns (train samples, held-out samples)."""
    rng = random.Random(f"sft/{seed}")
    train, heldout = [], []
    for args in sources:
        samples = list(per_source[args.name])
        local = random.Random(f"sft/{seed}/{args.name}")
        local.shuffle(samples)
        held, samples = samples[: args.heldout], samples[args.heldout :]
        heldout.extend(held)
        whole, fraction = int(args.weight), args.weight - int(args.weight)
        chosen = samples * whole + samples[: round(fraction * len(samples))]
        if args.max_samples is not None:
            chosen = chosen[: args.max_samples]
        train.extend(chosen)
    rng.shuffle(train)
    return train, heldout


def nothing_left(kind: str, unit: str, sources: list, read: dict[str, int], dropped: dict[str, dict[str, int]],
                 train: list, heldout: list, all_drops: dict[str, dict[str, int]], max_length: int) -> str:
    """Why a mixture left nothing to train on (the error of `yunshan sft` and `yunshan pref`), in one line: the cause
    (nothing read, the held-out split took everything, weight and max_samples, or length fitting), then every
    source's counts: `unit`s read, dropped while reading (`dropped`, by reason), held out, left for training (the
    mixer's `heldout` and `train` items, each with `.source`), dropped fitting `max_length` (`all_drops` less
    `dropped`)."""
    fit_drops = {name: {r: n - dropped[name].get(r, 0) for r, n in table.items() if n > dropped[name].get(r, 0)}
                 for name, table in all_drops.items()}

    def count(items: list) -> dict[str, int]:
        out = {s.name: 0 for s in sources}
        for item in items:
            out[item.source] += 1
        return out

    def reasons(table: dict[str, int]) -> str:
        return f"{sum(table.values())} ({', '.join(f'{r} {n}' for r, n in sorted(table.items()))})"

    held, trained = count(heldout), count(train)
    took = [f"data.sources.{i}.heldout: {s.heldout}" for i, s in enumerate(sources)
            if read[s.name] and held[s.name] >= read[s.name]]
    if not any(read.values()):
        cause = ("every record was dropped while reading" if any(dropped.values())
                 else f"the sources hold no {unit}")
    elif not train and took:
        cause = (f"the held-out split took every {unit} read ({', '.join(took)}): hold out fewer than the source "
                 "holds")
    elif not train:
        cause = f"weight and max_samples left no {unit} to train on"
    else:
        cause = (f"every {unit} left for training was dropped fitting data.max_length ({max_length}): raise it, or set "
                 "data.overlong: truncate")
    counts = []
    for s in sources:
        bits = [f"{read[s.name]} read"]
        if dropped[s.name]:
            bits.append(f"{reasons(dropped[s.name])} dropped while reading")
        bits += [f"{held[s.name]} held out", f"{trained[s.name]} left for training"]
        if fit_drops[s.name]:
            bits.append(f"{reasons(fit_drops[s.name])} dropped fitting data.max_length")
        counts.append(f"{s.name}: {', '.join(bits)}")
    return f"no {kind} sample left for training: {cause}; per source ({unit}s): {'; '.join(counts)}"
