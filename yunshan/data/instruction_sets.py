"""Named converters for the legal instruction sets the PanGu-π paper names: each release -> `{"messages": [...]}`.

    yunshan data convert --from lawyer-llama lawyer-llama/data/*.json --out sft/lawyer_llama.jsonl
    yunshan data convert --from chatlaw "ChatLaw/data/demo_data_法律咨询.jsonl" --out sft/chatlaw.jsonl
    yunshan data convert --from lawgpt-zh LawGPT_zh/*.json --out sft/lawgpt_zh.jsonl --context prepend

The output is yunshan's `messages` SFT format (yunshan/data/conversations.py), validated with the same rules (user
and assistant alternating, a non-empty assistant turn last) before it is written, so a converted file always loads.

Record shapes, as released (data_cards/<id>.md cites where each was read):
- Lawyer LLaMA (`AndrewZhe/lawyer-llama`, data/): judical_examination*.json and legal_advice.json are a JSON list
  whose items are lists of `{"instruction", "input", "output"}` turns; legal_counsel_with_article_v2.json items are
  `{"query", "laws", "response"}`; legal_counsel_multi_turn_with_article_v2.json items are `{"query", "laws",
  "history": ["[客户] ...", "[律师] ...", ...]}`. The shape is detected per record.
- ChatLaw (`PKU-YuanGroup/ChatLaw`, data/demo_data_*.jsonl): `{"meta_instruction", "chat": [{"咨询者": q,
  "ChatLAW": a}, ...], "subject"}`. The meta instruction names the assistant "ChatLAW ... 北京大学团队"; it is dropped
  unless `--system keep`, so a model trained on it does not introduce itself as ChatLaw.
- LawGPT_zh (`LiuHC0428/LAW-GPT`): `{"question", "answer", "reference": [law articles]}` (JSON list or lines).

`--context prepend` puts the supporting law articles (Lawyer LLaMA `laws`, LawGPT_zh `reference`) before the first
question as `相关法条：...`; the default drops them, so the answers (which cite those articles) teach the articles
themselves rather than reading them from the prompt.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .conversations import validate_turns
from .convert import ConvertReport, write_converted
from .records import BadRecord

CLIENT, LAWYER = "[客户]", "[律师]"


def _text(obj: dict, key: str, where: str | None = None) -> str:
    if key not in obj:
        raise BadRecord("missing_field", where or key, f"record has fields {', '.join(sorted(map(str, obj)))}")
    value = obj[key]
    if not isinstance(value, str):
        raise BadRecord("non_string_field", where or key, f"expected a string, got {type(value).__name__}")
    return value


def _context(items: Any, key: str) -> str:
    if items is None:
        return ""
    if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
        raise BadRecord("non_string_field", key, "expected a list of law-article strings")
    return "相关法条：\n" + "\n".join(x.strip() for x in items) + "\n\n" if items else ""


def lawyer_llama_turns(obj: Any, context: str) -> list[dict]:
    if isinstance(obj, list):  # [{"instruction", "input", "output"}, ...]: one exchange per item
        if not obj:
            raise BadRecord("missing_field", "[0]", "an empty list of turns")
        turns = []
        for i, pair in enumerate(obj):
            if not isinstance(pair, dict):
                raise BadRecord("unknown_shape", f"[{i}]", f"expected an object, got {type(pair).__name__}")
            prompt = _text(pair, "instruction", f"[{i}].instruction")
            extra = pair.get("input") or ""
            if not isinstance(extra, str):
                raise BadRecord("non_string_field", f"[{i}].input", "expected a string")
            turns += [{"role": "user", "content": prompt + ("\n" + extra if extra.strip() else "")},
                      {"role": "assistant", "content": _text(pair, "output", f"[{i}].output")}]
        return turns
    if not isinstance(obj, dict):
        raise BadRecord("unknown_shape", None, f"expected a list of turns or an object, got {type(obj).__name__}")
    prefix = _context(obj.get("laws"), "laws") if context == "prepend" else ""
    if "history" in obj:  # multi-turn consultation: "[客户] ..." / "[律师] ..." strings
        history = obj["history"]
        if not isinstance(history, list) or not history:
            raise BadRecord("missing_field", "history", "expected a non-empty list of '[客户] ...'/'[律师] ...' strings")
        turns = []
        for i, line in enumerate(history):
            if not isinstance(line, str):
                raise BadRecord("non_string_field", f"history[{i}]", "expected a string")
            line = line.strip()
            if line.startswith(CLIENT):
                role, content = "user", line[len(CLIENT):].strip()
            elif line.startswith(LAWYER):
                role, content = "assistant", line[len(LAWYER):].strip()
            else:
                raise BadRecord("unknown_shape", f"history[{i}]", f"starts with neither {CLIENT} nor {LAWYER}: {line[:20]!r}")
            turns.append({"role": role, "content": content})
        if turns and turns[0]["role"] == "user":
            turns[0]["content"] = prefix + turns[0]["content"]
        return turns
    if "query" in obj and "response" in obj:
        return [{"role": "user", "content": prefix + _text(obj, "query")},
                {"role": "assistant", "content": _text(obj, "response")}]
    raise BadRecord("unknown_shape", None, f"not a Lawyer LLaMA record (fields: {', '.join(sorted(map(str, obj)))}); "
                                     "expected a list of instruction/input/output, query+response or query+history")


def chatlaw_turns(obj: Any, system: str) -> list[dict]:
    if not isinstance(obj, dict):
        raise BadRecord("unknown_shape", None, f"expected an object, got {type(obj).__name__}")
    chat = obj.get("chat")
    if not isinstance(chat, list) or not chat:
        raise BadRecord("missing_field", "chat", "expected a non-empty list of {咨询者, ChatLAW}")
    turns = []
    if system == "keep":
        meta = obj.get("meta_instruction")
        if isinstance(meta, str) and meta.strip():
            turns.append({"role": "system", "content": meta})
    for i, exchange in enumerate(chat):
        if not isinstance(exchange, dict):
            raise BadRecord("unknown_shape", f"chat[{i}]", "expected {咨询者: question, ChatLAW: answer}")
        turns += [{"role": "user", "content": _text(exchange, "咨询者", f"chat[{i}].咨询者")},
                  {"role": "assistant", "content": _text(exchange, "ChatLAW", f"chat[{i}].ChatLAW")}]
    return turns


def lawgpt_zh_turns(obj: Any, context: str) -> list[dict]:
    if not isinstance(obj, dict):
        raise BadRecord("unknown_shape", None, f"expected an object, got {type(obj).__name__}")
    prefix = _context(obj.get("reference"), "reference") if context == "prepend" else ""
    return [{"role": "user", "content": prefix + _text(obj, "question")},
            {"role": "assistant", "content": _text(obj, "answer")}]


def convert_instructions(name: str, records: Iterator[tuple[str, Any]], out: str, report: ConvertReport,
                         on_bad_record: str = "fail", max_records: int | None = None, context: str = "drop",
                         system: str = "drop") -> ConvertReport:
    """Stream one release's records into messages JSONL; fills and returns `report`."""
    to_turns = {"lawyer-llama": lambda o: lawyer_llama_turns(o, context),
                "chatlaw": lambda o: chatlaw_turns(o, system),
                "lawgpt-zh": lambda o: lawgpt_zh_turns(o, context)}[name]

    def convert(location: str, record):
        turns = validate_turns(to_turns(record), "messages")  # the SFT reader's own rule: role order, empty turns
        return {"messages": turns}, sum(len(t["content"]) for t in turns)

    return write_converted(records, out, report, convert, on_bad_record, max_records)
