"""Preference data: read pairs (and KTO's unpaired samples) in the formats users hold them, render them with the chat
template, and fit them to a length by TRL's rule.

Every source declares its format; files are read by the data layer's one reader (yunshan.data.records), and a
record that does not fit is a `BadRecord` that raises naming the file, line and field (policy `fail`) or is counted
by reason (policy `skip`):

- `pairs`: TRL's preference records, `{"prompt", "chosen", "rejected"}`. The prompt is a string (one user turn) or a
  list of `{"role", "content"}` messages (system?, user, assistant, ..., user); each answer is a string or a list of
  messages. Answers written as whole conversations (`{"chosen": [user, assistant], ...}`, as in
  HuggingFaceH4/ultrafeedback_binarized and Anthropic HH) keep only what follows the prompt, and without a `prompt`
  field the prompt is the turns both answers share (TRL's implicit prompt). LLaMA-Factory's alpaca-style ranking
  records `{"instruction", "input", "chosen", "rejected"}` are read too. An optional `system` field is the system
  prompt.
- `sharegpt`: LLaMA-Factory's ShareGPT pairs, `{"conversations": [{"from", "value"}, ...], "chosen": {"from": "gpt",
  "value"}, "rejected": {...}}` (the answers may also be plain strings), with an optional `system`.
- `ultrafeedback`: several scored completions of one prompt, `{"instruction" (or "prompt"), "completions":
  [{"response", "overall_score"}, ...]}` as openbmb/UltraFeedback releases it (the text and score fields are the
  source's `response_field` and `score_field`), turned into pairs by the source's `pairing` rule: `best_worst` (the
  highest score chosen, the lowest rejected: one pair), `best_random` (the highest chosen, a seeded random one of
  those scored lower rejected: the Zephyr binarisation) or `all_pairs` (every two completions whose scores differ,
  the higher chosen). Scores must differ by more than `min_score_gap`; the first completion in file order wins a tie
  for best or worst. A record that gives no pair is counted as `no_pair`.
- `kto`: TRL's unpaired records, `{"prompt", "completion", "label"}` with `label` true (desirable) or false.

A pair whose two answers are the same text is `identical_answers`; an empty answer `empty_assistant`; a missing or
mistyped field `missing_field`. Rendering uses the tokenizer's chat template exactly as SFT does
(yunshan.data.chat.encode_conversation): the prompt is the conversation up to where the answer's assistant turn
starts (its generation prompt included), the answer is the assistant turn as SFT labels it, its end-of-turn marker
included (EOS appended when the template closes a turn with nothing). TRL 1.16 adds the template's text after that
marker (ChatML's newline) to the answer; yunshan scores what SFT trains, and nothing the template adds after it.

Length (`fit_pair`) follows TRL 1.16's documented rule for DPO and KTO (`max_length`, `truncation_mode="keep_start"`):
a sequence longer than max_length keeps its start, so the answer is cut from the right, and a pair whose prompt alone
fills max_length is dropped (no answer token would be left to compare). Every cut and drop is counted.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from pathlib import Path

from yunshan.arguments.field_rules import check_fields

from .conversations import ROLES, SHAREGPT_ROLES
from .files import resolve_paths
from .records import BadRecord, fail_or_count, read_records

PREFERENCE_FORMATS = ("pairs", "sharegpt", "ultrafeedback", "kto")
PAIRING_RULES = ("best_worst", "best_random", "all_pairs")
OVERLONG = ("truncate", "drop", "fail")


@dataclass
class PrefSourceArgs:
    """One preference source of the mixture."""

    name: str = field(metadata={"help": "name in reports"})
    path: list[str] | str = field(metadata={"path": True, "help": "file, folder or glob (.jsonl/.json)"})
    format: str = field(metadata={"help": f"one of {', '.join(PREFERENCE_FORMATS)} (yunshan.data.preference)"})
    weight: float = field(default=1.0, metadata={"range": "> 0", "help": "sampling weight: 2.0 repeats every pair twice, 0.5 keeps "
                                                         "a random half"})
    max_samples: int | None = field(default=None, metadata={"range": ">= 0", "help": "cap on pairs from this source (after weight)"})
    system: str | None = field(default=None, metadata={"help": "system prompt added to prompts that have none"})
    heldout: int = field(default=0, metadata={"range": ">= 0",
        "help": "pairs held out for the held-out preference metrics (whole records: the pairs of one scored record "
                "stay on one side)"})
    card: str | None = field(default=None, metadata={"help": "data card id (data_cards/<card>.md) describing it"})
    pairing: str = field(default="best_worst", metadata={
        "help": f"ultrafeedback: how scored completions become pairs: {', '.join(PAIRING_RULES)}"})
    score_field: str = field(default="overall_score", metadata={"help": "ultrafeedback: a completion's score field"})
    response_field: str = field(default="response", metadata={"help": "ultrafeedback: a completion's text field"})
    min_score_gap: float = field(default=0.0, metadata={"range": ">= 0",
        "help": "ultrafeedback: a pair's scores must differ by more than this"})

    def __post_init__(self):
        check_fields(self)
        if self.format not in PREFERENCE_FORMATS:
            raise ValueError(f"preference source {self.name!r}: format {self.format!r} is not one of "
                             f"{', '.join(PREFERENCE_FORMATS)}")
        if self.pairing not in PAIRING_RULES:
            raise ValueError(f"preference source {self.name!r}: pairing {self.pairing!r} is not one of "
                             f"{', '.join(PAIRING_RULES)}")


@dataclass
class Pair:
    """A prompt (messages ending with a user turn) with a preferred and a dispreferred answer."""

    prompt: list[dict]
    chosen: str
    rejected: str
    source: str = ""
    location: str = ""

    def content(self) -> list[dict]:
        """The record as turns, for contamination lists (yunshan.data.decontamination.record_digest)."""
        return self.prompt + [{"role": "chosen", "content": self.chosen}, {"role": "rejected", "content": self.rejected}]


@dataclass
class Unpaired:
    """KTO's unit: a prompt with one answer labelled desirable (True) or undesirable (False)."""

    prompt: list[dict]
    completion: str
    label: bool
    source: str = ""
    location: str = ""

    def content(self) -> list[dict]:
        return self.prompt + [{"role": "desirable" if self.label else "undesirable", "content": self.completion}]


# ---------------------------------------------------------------- records into pairs


def _string(obj: dict, key: str) -> str:
    if key not in obj:
        raise BadRecord("missing_field", key, f"record has fields: {', '.join(sorted(map(str, obj)))}")
    if not isinstance(obj[key], str):
        raise BadRecord("missing_field", key, f"expected a string, got {type(obj[key]).__name__}")
    return obj[key]


def _messages(value, field_name: str, roles: dict | None = None) -> list[dict]:
    """A list of {role, content} (or, with `roles`, ShareGPT {from, value}) as {role, content} turns."""
    if not isinstance(value, list):
        raise BadRecord("missing_field", field_name, "expected a string or a list of messages")
    key, text = ("from", "value") if roles else ("role", "content")
    valid = roles or {r: r for r in ROLES}
    turns = []
    for i, m in enumerate(value):
        if not isinstance(m, dict) or key not in m:
            raise BadRecord("missing_field", f"{field_name}[{i}].{key}", f"each message needs {key} and {text}")
        if m[key] not in valid:
            raise BadRecord("unknown_role", f"{field_name}[{i}].{key}", f"{m[key]!r}; valid: {', '.join(valid)}")
        if not isinstance(m.get(text), str):
            raise BadRecord("missing_field", f"{field_name}[{i}].{text}", "expected a string")
        turns.append({"role": valid[m[key]], "content": m[text]})
    return turns


def validate_prompt(turns: list[dict], field_name: str) -> list[dict]:
    """System (optional, first), then user/assistant alternating, ending with a non-empty user turn."""
    offset = 1 if turns and turns[0]["role"] == "system" else 0
    body = turns[offset:]
    if not body:
        raise BadRecord("missing_field", field_name, "no user turn")
    for i, turn in enumerate(body):
        expected = "user" if i % 2 == 0 else "assistant"
        if turn["role"] != expected:
            raise BadRecord("wrong_role_order", f"{field_name}[{i + offset}].role",
                            f"expected {expected} (system?, then user/assistant alternating, ending with user), got "
                            f"{turn['role']}")
        if not turn["content"].strip():
            raise BadRecord("empty_user" if expected == "user" else "empty_assistant", f"{field_name}[{i + offset}]"
                            ".content", f"empty {expected} turn")
    if body[-1]["role"] != "user":
        raise BadRecord("wrong_role_order", field_name, "the prompt must end with a user turn")
    return turns


def _answer(value, field_name: str, prompt: list[dict] | None, roles: dict | None = None) -> tuple[list, str]:
    """(the turns before the answer, the answer's text) of an answer given as a string, one assistant message, or a
    conversation ending with one (whose leading turns are a prompt)."""
    if isinstance(value, str):
        return [], value
    if isinstance(value, dict):
        value = [value]
    turns = _messages(value, field_name, roles)
    if not turns or turns[-1]["role"] != "assistant":
        raise BadRecord("wrong_role_order", field_name, "an answer must end with one assistant message")
    head = turns[:-1]
    if prompt is not None and head and head != prompt[-len(head):] and head != prompt:
        raise BadRecord("wrong_role_order", field_name, "the answer's leading turns are not the prompt")
    return head, turns[-1]["content"]


def _check_answers(chosen: str, rejected: str) -> None:
    for name, text in (("chosen", chosen), ("rejected", rejected)):
        if not text.strip():
            raise BadRecord("empty_assistant", name, f"empty {name} answer")
    if chosen.strip() == rejected.strip():
        raise BadRecord("identical_answers", "rejected", "the chosen and rejected answers are the same text")


def _prompt_of(obj: dict) -> list[dict] | None:
    """The record's prompt as turns: `prompt` (a string or messages), else alpaca's instruction + input; None when
    the record has neither (an implicit prompt)."""
    if "prompt" in obj:
        value = obj["prompt"]
        if isinstance(value, str):
            return [{"role": "user", "content": value}]
        return _messages(value, "prompt")
    if "instruction" in obj:
        instruction = _string(obj, "instruction")
        extra = obj.get("input") or ""
        if not isinstance(extra, str):
            raise BadRecord("missing_field", "input", "expected a string")
        return [{"role": "user", "content": instruction + ("\n" + extra if extra.strip() else "")}]
    return None


def _with_system(turns: list[dict], obj: dict) -> list[dict]:
    system = obj.get("system")
    if system is None or (turns and turns[0]["role"] == "system"):
        return turns
    if not isinstance(system, str):
        raise BadRecord("missing_field", "system", "expected a string")
    return ([{"role": "system", "content": system}] if system.strip() else []) + turns


def from_pairs(obj: dict) -> list[tuple[list[dict], str, str]]:
    """TRL's {prompt, chosen, rejected} (explicit or implicit prompt) or alpaca-style ranking records."""
    for key in ("chosen", "rejected"):
        if key not in obj:
            raise BadRecord("missing_field", key, f"record has fields: {', '.join(sorted(map(str, obj)))}")
    prompt = _prompt_of(obj)
    head_c, chosen = _answer(obj["chosen"], "chosen", prompt)
    head_r, rejected = _answer(obj["rejected"], "rejected", prompt)
    if prompt is None:  # implicit: the turns both answers share
        if not head_c or head_c != head_r:
            raise BadRecord("missing_field", "prompt", "no prompt field, and the answers share no leading turns")
        prompt = head_c
    prompt = validate_prompt(_with_system(prompt, obj), "prompt")
    _check_answers(chosen, rejected)
    return [(prompt, chosen, rejected)]


def from_sharegpt(obj: dict) -> list[tuple[list[dict], str, str]]:
    """LLaMA-Factory's ShareGPT pairs: conversations (ending with the user's turn), chosen, rejected."""
    if "conversations" not in obj:
        raise BadRecord("missing_field", "conversations", "expected a list of {from, value}")
    prompt = _messages(obj["conversations"], "conversations", SHAREGPT_ROLES)
    for key in ("chosen", "rejected"):
        if key not in obj:
            raise BadRecord("missing_field", key, "expected {from: gpt, value: ...} or a string")
    _, chosen = _answer(obj["chosen"], "chosen", prompt, SHAREGPT_ROLES)
    _, rejected = _answer(obj["rejected"], "rejected", prompt, SHAREGPT_ROLES)
    prompt = validate_prompt(_with_system(prompt, obj), "conversations")
    _check_answers(chosen, rejected)
    return [(prompt, chosen, rejected)]


def from_ultrafeedback(obj: dict, args: PrefSourceArgs, rng: random.Random) -> list[tuple[list[dict], str, str]]:
    """Scored completions of one prompt, paired by `args.pairing` (see the module docstring)."""
    prompt = _prompt_of(obj)
    if prompt is None:
        raise BadRecord("missing_field", "instruction", "expected instruction or prompt")
    prompt = validate_prompt(_with_system(prompt, obj), "prompt")
    completions = obj.get("completions")
    if not isinstance(completions, list):
        raise BadRecord("missing_field", "completions", f"expected a list of {{{args.response_field}, "
                                                        f"{args.score_field}}}")
    scored = []  # (score, text) of the usable completions, in file order
    for i, c in enumerate(completions):
        if not isinstance(c, dict) or not isinstance(c.get(args.response_field), str):
            raise BadRecord("missing_field", f"completions[{i}].{args.response_field}", "expected a string")
        score = c.get(args.score_field)
        if isinstance(score, bool) or not isinstance(score, (int, float)):
            raise BadRecord("bad_score", f"completions[{i}].{args.score_field}", f"expected a number, got {score!r}")
        if c[args.response_field].strip():
            scored.append((float(score), c[args.response_field]))
    gap = args.min_score_gap
    pairs = []
    if args.pairing == "all_pairs":
        for i, (si, ti) in enumerate(scored):
            for sj, tj in scored[i + 1:]:
                if abs(si - sj) > gap and ti.strip() != tj.strip():
                    pairs.append((ti, tj) if si > sj else (tj, ti))
    elif scored:
        best = max(range(len(scored)), key=lambda k: (scored[k][0], -k))
        lower = [k for k in range(len(scored)) if scored[best][0] - scored[k][0] > gap
                 and scored[k][1].strip() != scored[best][1].strip()]
        if lower:
            if args.pairing == "best_worst":
                worst = min(lower, key=lambda k: (scored[k][0], k))
            else:
                worst = rng.choice(lower)
            pairs.append((scored[best][1], scored[worst][1]))
    if not pairs:
        raise BadRecord("no_pair", "completions", f"{len(scored)} usable completion(s), no two scores more than "
                                                  f"{gap} apart")
    return [(prompt, chosen, rejected) for chosen, rejected in pairs]


def from_kto(obj: dict) -> Unpaired:
    prompt = _prompt_of(obj)
    if prompt is None:
        raise BadRecord("missing_field", "prompt", f"record has fields: {', '.join(sorted(map(str, obj)))}")
    if "completion" not in obj:
        raise BadRecord("missing_field", "completion", "expected a string or an assistant message")
    _, completion = _answer(obj["completion"], "completion", prompt)
    label = obj.get("label")
    if not isinstance(label, bool):
        raise BadRecord("bad_label", "label", f"expected true or false, got {label!r}")
    prompt = validate_prompt(_with_system(prompt, obj), "prompt")
    if not completion.strip():
        raise BadRecord("empty_assistant", "completion", "empty completion")
    return Unpaired(prompt, completion, label)


# ---------------------------------------------------------------- sources


def _files(args: PrefSourceArgs) -> list[str]:
    return resolve_paths(args.path, f"preference source {args.name!r}",
                         keep=lambda p: Path(p).suffix in (".jsonl", ".json"), kinds="file")


def preference_records(args: PrefSourceArgs, seed: int = 0, paths: list[str] | None = None):
    """(location, [Pair | Unpaired, ...] or BadRecord) for every record of every file of one source (or of `paths`
    among them), before its system prompt: a record gives one item, or (ultrafeedback) every pair its rule makes."""
    for path in _files(args) if paths is None else paths:
        for location, obj, _ in read_records(path, "jsonl" if path.endswith(".jsonl") else "json"):
            if isinstance(obj, BadRecord):
                yield location, obj
                continue
            if not isinstance(obj, dict):
                yield location, BadRecord("malformed_json", None, f"expected an object, got {type(obj).__name__}",
                                          location)
                continue
            try:
                if args.format == "kto":
                    item = from_kto(obj)
                    item.source, item.location = args.name, location
                    yield location, [item]
                    continue
                if args.format == "ultrafeedback":
                    # seeded per record: the same record pairs alike wherever it sits in the file
                    rng = random.Random(f"pairing/{seed}/{args.name}/{location}")
                    found = from_ultrafeedback(obj, args, rng)
                else:
                    found = (from_sharegpt if args.format == "sharegpt" else from_pairs)(obj)
                yield location, [Pair(p, c, r, args.name, location) for p, c, r in found]
            except BadRecord as bad:
                yield location, bad.at(location)


def read_preference_source(args: PrefSourceArgs, on_bad_record: str, counts: dict, seed: int = 0,
                           exclude=None) -> list[list[Pair | Unpaired]]:
    """Every record of one source as its list of items (pairs or unpaired samples), validated; bad records raise or
    are counted in `counts` by reason. `exclude` (yunshan.data.decontamination.Exclusions): records of a
    contamination list are left out, counted as "contaminated"."""
    records = []
    for location, items in preference_records(args, seed):
        if isinstance(items, BadRecord):
            fail_or_count(items, on_bad_record, counts, context=f"preference source {args.name!r}: ", key="bad:{}",
                          fix="Fix the record, or set data.on_bad_record: skip to skip and count bad records.")
            continue
        kept = []
        for item in items:
            if exclude is not None and exclude.excludes(item.content()):
                counts["contaminated"] = counts.get("contaminated", 0) + 1
                continue
            if args.system and item.prompt[0]["role"] != "system":
                item.prompt = [{"role": "system", "content": args.system}] + item.prompt
            kept.append(item)
        if kept:
            records.append(kept)
    return records


def mix_preference_sources(per_source: dict[str, list[list]], sources: list[PrefSourceArgs], seed: int):
    """As SFT mixes instruction sources (yunshan.data.conversations.mix_sft_sources), by record: each source's
    records are shuffled, whole records held out until `heldout` items are (so the pairs of one scored record never
    straddle the split), the rest weighted (repeated or subsampled) and capped, then everything shuffled into one
    list. Returns (training items, held-out items)."""
    rng = random.Random(f"preference/{seed}")
    train, heldout = [], []
    for args in sources:
        records = list(per_source[args.name])
        random.Random(f"preference/{seed}/{args.name}").shuffle(records)
        held = 0
        while held < args.heldout and records:
            record = records.pop(0)
            heldout.extend(record)
            held += len(record)
        items = [item for record in records for item in record]
        whole, fraction = int(args.weight), args.weight - int(args.weight)
        chosen = items * whole + items[: round(fraction * len(items))]
        if args.max_samples is not None:
            chosen = chosen[: args.max_samples]
        train.extend(chosen)
    rng.shuffle(train)
    return train, heldout


def unpair(items: list) -> list[Unpaired]:
    """Pairs as KTO's unpaired samples (the chosen answer desirable, the rejected one not), as TRL's
    `unpair_preference_dataset` does; unpaired samples stay as they are."""
    out = []
    for item in items:
        if isinstance(item, Pair):
            out.append(Unpaired(item.prompt, item.chosen, True, item.source, item.location))
            out.append(Unpaired(item.prompt, item.rejected, False, item.source, item.location))
        else:
            out.append(item)
    return out


def pair_by_prompt(items: list) -> list[Pair]:
    """Held-out pairs from held-out items: pairs as they are; unpaired samples of the same prompt, every desirable
    one with every undesirable one."""
    pairs = [item for item in items if isinstance(item, Pair)]
    by_prompt: dict[str, tuple[list, list]] = {}
    for item in items:
        if isinstance(item, Unpaired):
            key = repr(item.prompt)
            by_prompt.setdefault(key, ([], []))[0 if item.label else 1].append(item)
    for good, bad in by_prompt.values():
        pairs += [Pair(g.prompt, g.completion, b.completion, g.source, g.location) for g in good for b in bad]
    return pairs


# ---------------------------------------------------------------- tokens


@dataclass
class EncodedPair:
    prompt_ids: list[int]
    chosen_ids: list[int]
    rejected_ids: list[int]
    source: str = ""
    location: str = ""


@dataclass
class EncodedUnpaired:
    prompt_ids: list[int]
    completion_ids: list[int]
    label: bool
    source: str = ""
    location: str = ""


def _split_answer(tokenizer, prompt: list[dict], answer: str) -> tuple[list[int], list[int], set[int]]:
    """(prompt ids, answer ids, end-of-turn ids) of prompt + answer rendered with the chat template: the answer is
    the last assistant turn as yunshan.data.chat labels it (its end-of-turn marker included), the prompt everything
    before it; what the template adds after the turn is left out."""
    from .chat import encode_conversation

    enc = encode_conversation(tokenizer, prompt + [{"role": "assistant", "content": answer}])
    start, end = enc.assistant_spans[-1]
    return enc.input_ids[:start], enc.input_ids[start:end], enc.end_markers


def encode_pair(tokenizer, pair: Pair) -> tuple[EncodedPair, set[int]]:
    """Token ids of a pair; where the two renderings of the prompt differ at its end (a token merged across the
    boundary), the prompt is their common prefix and the rest moves into each answer, as TRL does."""
    p_c, chosen, ends = _split_answer(tokenizer, pair.prompt, pair.chosen)
    p_r, rejected, more = _split_answer(tokenizer, pair.prompt, pair.rejected)
    common = 0
    while common < min(len(p_c), len(p_r)) and p_c[common] == p_r[common]:
        common += 1
    return EncodedPair(p_c[:common], p_c[common:] + chosen, p_r[common:] + rejected, pair.source,
                       pair.location), ends | more


def encode_unpaired(tokenizer, item: Unpaired) -> tuple[EncodedUnpaired, set[int]]:
    prompt, completion, ends = _split_answer(tokenizer, item.prompt, item.completion)
    return EncodedUnpaired(prompt, completion, item.label, item.source, item.location), ends


def fit_pair(enc: EncodedPair, max_length: int, overlong: str) -> tuple[EncodedPair | None, list[str]]:
    """TRL's length rule (keep_start) on a pair: answers cut from the right so prompt + answer fits `max_length`; a
    pair whose prompt alone fills max_length is dropped, as is one whose answers become the same once cut. With
    `overlong: drop` a pair over the length is dropped instead of cut; with `fail` it stops the run. Returns (the
    pair or None, the reasons counted: prompt_too_long, too_long, truncated_chosen, truncated_rejected,
    identical_after_truncation)."""
    n = len(enc.prompt_ids)
    over = [name for name in ("chosen", "rejected") if n + len(getattr(enc, f"{name}_ids")) > max_length]
    if n >= max_length:
        _overlong_error(enc, overlong, f"the prompt alone has {n} tokens, max_length is {max_length}")
        return None, ["prompt_too_long"]
    if not over:
        return enc, []
    if overlong != "truncate":
        _overlong_error(enc, overlong, f"{n} prompt tokens + {max(len(enc.chosen_ids), len(enc.rejected_ids))} "
                                       f"answer tokens exceed max_length {max_length}")
        return None, ["too_long"]
    room = max_length - n
    fitted = EncodedPair(enc.prompt_ids, enc.chosen_ids[:room], enc.rejected_ids[:room], enc.source, enc.location)
    if fitted.chosen_ids == fitted.rejected_ids:
        return None, ["identical_after_truncation"]
    return fitted, [f"truncated_{name}" for name in over]


def fit_unpaired(enc: EncodedUnpaired, max_length: int, overlong: str) -> tuple[EncodedUnpaired | None, list[str]]:
    """`fit_pair`'s rule for one answer (KTO)."""
    n = len(enc.prompt_ids)
    if n >= max_length:
        _overlong_error(enc, overlong, f"the prompt alone has {n} tokens, max_length is {max_length}")
        return None, ["prompt_too_long"]
    if n + len(enc.completion_ids) <= max_length:
        return enc, []
    if overlong != "truncate":
        _overlong_error(enc, overlong, f"{n} prompt tokens + {len(enc.completion_ids)} answer tokens exceed "
                                       f"max_length {max_length}")
        return None, ["too_long"]
    return EncodedUnpaired(enc.prompt_ids, enc.completion_ids[:max_length - n], enc.label, enc.source,
                           enc.location), ["truncated_completion"]


def _overlong_error(enc, overlong: str, detail: str) -> None:
    if overlong == "fail":
        raise ValueError(f"preference source {enc.source!r}: {enc.location}: field 'prompt': too long ({detail}). "
                         "Raise data.max_length, or set data.overlong: truncate (TRL's rule: answers cut, pairs whose "
                         "prompt fills max_length dropped and counted) or drop")
