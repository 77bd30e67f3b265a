"""Instruction data: read alpaca, messages, ShareGPT, C-Eval/FinEval CSV and JEC-QA records as conversations.

Every source declares its format; files are read by the data layer's one reader (yunshan.data.records) and each
record becomes a list of {"role", "content"} turns (optional system first, then user/assistant alternating, ending
with an assistant turn). A record that does not fit is a `BadRecord` that raises `BadRecordError` naming the file,
line and field (policy `fail`) or is counted by reason (policy `skip`): wrong role order, empty assistant turn,
unknown role, missing field, malformed JSON.

Exam rows become question -> answer: the C-Eval prompt style (subject from the file name, options A-D) and the
answer letter, followed by the explanation when the row has one; JEC-QA records list every correct letter.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from yunshan.field_rules import check_fields

from .files import resolve_paths
from .records import BadRecord, fail_or_count, read_records

SFT_FORMATS = ("alpaca", "messages", "sharegpt", "ceval", "jecqa")
ROLES = ("system", "user", "assistant")
SHAREGPT_ROLES = {"system": "system", "human": "user", "user": "user", "gpt": "assistant", "assistant": "assistant"}
CEVAL_COLUMNS = ("question", "A", "B", "C", "D", "answer")


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
    heldout: int = field(default=0, metadata={"range": ">= 0", "help": "samples held out for generation at the end"})
    card: str | None = field(default=None, metadata={"help": "data card id (data_cards/<card>.md) describing it"})

    def __post_init__(self):
        check_fields(self)
        if self.format not in SFT_FORMATS:
            raise ValueError(f"sft source {self.name!r}: format {self.format!r} is not one of {', '.join(SFT_FORMATS)}")


@dataclass
class Sample:
    messages: list[dict]
    source: str
    location: str


def _files(args: SftSourceArgs) -> list[str]:
    exts = (".csv",) if args.format == "ceval" else (".jsonl", ".json")
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


def from_alpaca(obj: dict) -> list[dict]:
    turns = []
    system = _text(obj, "system", required=False)
    if system.strip():
        turns.append({"role": "system", "content": system})
    history = obj.get("history") or []
    if not isinstance(history, list):
        raise BadRecord("missing_field", "history", "expected a list of [instruction, response] pairs")
    for i, pair in enumerate(history):
        if not (isinstance(pair, (list, tuple)) and len(pair) == 2 and all(isinstance(x, str) for x in pair)):
            raise BadRecord("missing_field", f"history[{i}]", "expected [instruction, response]")
        turns += [{"role": "user", "content": pair[0]}, {"role": "assistant", "content": pair[1]}]
    instruction = _text(obj, "instruction")
    extra = _text(obj, "input", required=False)
    output = _text(obj, "output")
    if not instruction.strip():
        raise BadRecord("empty_user", "instruction", "empty instruction")
    if not output.strip():
        raise BadRecord("empty_assistant", "output", "empty output")
    prompt = instruction + ("\n" + extra if extra.strip() else "")
    turns += [{"role": "user", "content": prompt}, {"role": "assistant", "content": output}]
    return validate_turns(turns, "history")


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


def exam_prompt(question: str, options: dict[str, str], subject: str | None, multi: bool = False) -> str:
    kind = "不定项选择题" if multi else "单项选择题"
    header = f"以下是关于{subject}的{kind}，请选出正确答案。\n\n" if subject else f"以下是{kind}，请选出正确答案。\n\n"
    return header + question + "".join(f"\n{k}. {v}" for k, v in options.items())


def from_ceval_row(row: dict, subject: str) -> list[dict]:
    for key in ("question", "A", "B", "C", "D", "answer"):
        if row.get(key) is None or not str(row[key]).strip():
            raise BadRecord("missing_field", key, f"C-Eval rows need id,question,A,B,C,D,answer (empty {key})")
    answer = row["answer"].strip()
    if answer not in ("A", "B", "C", "D"):
        raise BadRecord("bad_answer", "answer", f"answer must be one of A, B, C, D, got {answer!r}")
    reply = f"答案：{answer}"
    explanation = (row.get("explanation") or "").strip()
    if explanation:
        reply += f"\n解析：{explanation}"
    prompt = exam_prompt(row["question"], {k: row[k] for k in "ABCD"}, subject)
    return [{"role": "user", "content": prompt}, {"role": "assistant", "content": reply}]


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
    """(location, turns or BadRecord) for every record of one file."""
    if args.format == "ceval":
        convert, subject = from_ceval_row, ceval_subject(path)
        records = read_records(path, "csv", csv_columns=CEVAL_COLUMNS)
    else:
        convert = {"alpaca": from_alpaca, "messages": from_messages, "sharegpt": from_sharegpt,
                   "jecqa": from_jecqa}[args.format]
        records = read_records(path, "jsonl" if path.endswith(".jsonl") else "json")
    for location, obj, _ in records:
        if isinstance(obj, BadRecord):
            yield location, obj
            continue
        if not isinstance(obj, dict):
            yield location, BadRecord("malformed_json", None, f"expected an object, got {type(obj).__name__}", location)
            continue
        try:
            yield location, convert(obj, subject) if args.format == "ceval" else convert(obj)
        except BadRecord as bad:
            yield location, bad.at(location)


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
