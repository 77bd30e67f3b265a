"""Ollama's Modelfile rules, ported from its Go source so the tests can hold yunshan's Modelfile to them without an
Ollama binary (none is packaged for Debian or on PyPI, and this machine reaches nothing else).

Ported by hand from github.com/ollama/ollama at commit fb30760996871fa9460115c753afd2c60d4ab0f7 (2026-08-21):
- `parse_modelfile` is parser/parser.go's ParseFile: the same state machine rune by rune (stateNil, stateName,
  stateValue, stateParameter, stateMessage, stateComment), the same transitions, quoting (`unquote`: `\"\"\"...\"\"\"`,
  `"..."`, else the bare value; no escapes), Go's strings.TrimSpace before unquoting, the rune filter
  strconv.IsPrint (letters, marks, numbers, punctuation, symbols and the ASCII space: any other rune outside a
  quoted value's newlines and tabs is dropped), BOM detection (UTF-8, UTF-16 LE/BE) and the errors (invalid
  command, invalid message role, unexpected EOF, no FROM line).
- `create_request` is the part of Modelfile.CreateRequest that our commands reach: FROM resolved against the
  Modelfile's folder as expandPath does (an existing file becomes a local model file, otherwise a model name),
  TEMPLATE, SYSTEM, and PARAMETER checked against the json tags of api.Options (`stop` is its only []string field,
  so repeated PARAMETER stop lines accumulate).
tests/hub/test_ollama_modelfile.py checks the port against the cases of parser/parser_test.go before using it.
"""

from __future__ import annotations

import os
import unicodedata
from pathlib import Path

COMMANDS = ("from", "license", "template", "system", "adapter", "draft", "renderer", "parser", "parameter", "message",
            "requires")
ROLES = ("system", "user", "assistant")
# api.Options (api/types.go): the json tag of every field FormatParams accepts, and the kind of value it parses.
OPTIONS = {
    "num_keep": int, "seed": int, "num_predict": int, "top_k": int, "top_p": float, "min_p": float,
    "typical_p": float, "repeat_last_n": int, "temperature": float, "repeat_penalty": float,
    "presence_penalty": float, "frequency_penalty": float, "stop": list, "num_ctx": int, "num_batch": int,
    "num_gpu": int, "main_gpu": int, "use_mmap": bool, "num_thread": int, "draft_num_predict": int,
}
DEPRECATED = ("penalize_newline", "low_vram", "f16_kv", "logits_all", "vocab_only", "use_mlock", "mirostat",
              "mirostat_tau", "mirostat_eta")

NIL, NAME, VALUE, PARAMETER, MESSAGE, COMMENT = range(6)
# Go's unicode.IsSpace (strings.TrimSpace): Python's str.isspace also counts U+001C..U+001F, Go does not.
_GO_SPACE = set("\t\n\v\f\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000") | {chr(c) for c in range(0x2000, 0x200B)}


class ModelfileError(ValueError):
    """What ollama's ParseFile returns as an error: `(line N): message`, `unexpected EOF`, `no FROM line`."""


def _is_print(r: str) -> bool:  # strconv.IsPrint
    return r == " " or unicodedata.category(r)[0] in "LMNPS"


def _trim_space(s: str) -> str:
    start, end = 0, len(s)
    while start < end and s[start] in _GO_SPACE:
        start += 1
    while end > start and s[end - 1] in _GO_SPACE:
        end -= 1
    return s[start:end]


def _unquote(s: str) -> tuple[str, bool]:
    if s.startswith('"""'):
        return (s[3:-3], True) if len(s) >= 6 and s.endswith('"""') else ("", False)
    if s.startswith('"'):
        return (s[1:-1], True) if len(s) >= 2 and s.endswith('"') else ("", False)
    return s, True


def _alpha(r: str) -> bool:
    return "a" <= r <= "z" or "A" <= r <= "Z"


def _space(r: str) -> bool:
    return r in " \t"


def _newline(r: str) -> bool:
    return r in "\r\n"


def _next(r: str, state: int) -> tuple[int, str, str | None]:  # parseRuneForState; "" stands for Go's rune 0
    if state == NIL:
        if r == "#":
            return COMMENT, "", None
        if _space(r) or _newline(r):
            return NIL, "", None
        return NAME, r, None
    if state == NAME:
        if _alpha(r):
            return NAME, r, None
        if _space(r):
            return VALUE, "", None
        return NIL, "", "invalid command"
    if state == VALUE:
        return (NIL, r, None) if _newline(r) or _space(r) else (VALUE, r, None)
    if state == PARAMETER:
        if _alpha(r) or "0" <= r <= "9" or r == "_":
            return PARAMETER, r, None
        return (VALUE, "", None) if _space(r) else (NIL, "", "eof")
    if state == MESSAGE:
        if _alpha(r):
            return MESSAGE, r, None
        return (VALUE, "", None) if _space(r) else (NIL, "", "eof")
    return (NIL, "", None) if _newline(r) else (COMMENT, "", None)  # COMMENT


def _decode(data: bytes) -> str:  # unicode.BOMOverride(unicode.UTF8.NewDecoder())
    if data.startswith(b"\xef\xbb\xbf"):
        return data[3:].decode("utf-8", errors="replace")
    if data.startswith(b"\xff\xfe"):
        return data[2:].decode("utf-16-le", errors="replace")
    if data.startswith(b"\xfe\xff"):
        return data[2:].decode("utf-16-be", errors="replace")
    return data.decode("utf-8", errors="replace")


def parse_modelfile(data: bytes | str) -> list[tuple[str, str]]:
    """The commands of a Modelfile as ollama's ParseFile returns them: (name, args), name lower-cased, `model` for
    FROM, the parameter's own name for PARAMETER, args `role: text` for MESSAGE."""
    text = _decode(data) if isinstance(data, bytes) else data
    commands: list[tuple[str, str]] = []
    name, role, line, state, buf = "", "", 1, NIL, []
    for r in text:
        if _newline(r):
            line += 1
        nxt, r, err = _next(r, state)
        if err == "eof":
            raise ModelfileError(f"unexpected EOF: {''.join(buf)}")
        if err:
            raise ModelfileError(f"(line {line}): command must be one of {', '.join(COMMANDS)}")
        if nxt != state:
            if state == NAME:
                word = "".join(buf)
                if word.lower() not in COMMANDS:
                    raise ModelfileError(f"(line {line}): command must be one of {', '.join(COMMANDS)}")
                word = word.lower()
                if word == "from":
                    name = "model"
                elif word == "parameter":
                    nxt = PARAMETER
                elif word == "message":
                    nxt, name = MESSAGE, word
                else:
                    name = word
            elif state == PARAMETER:
                name = "".join(buf)
            elif state == MESSAGE:
                if "".join(buf) not in ROLES:
                    raise ModelfileError(f'(line {line}): message role must be one of "system", "user", or '
                                         '"assistant"')
                role = "".join(buf)
            elif state == VALUE:
                value, ok = _unquote(_trim_space("".join(buf)))
                if not ok or _space(r):
                    buf.append(r)
                    continue
                if role:
                    value, role = f"{role}: {value}", ""
                commands.append((name, value))
            buf, state = [], nxt
        if r and _is_print(r):
            buf.append(r)
    if state == VALUE:
        value, ok = _unquote(_trim_space("".join(buf)))
        if not ok:
            raise ModelfileError("unexpected EOF")
        commands.append((name, f"{role}: {value}" if role else value))
    elif state not in (NIL, COMMENT):
        raise ModelfileError("unexpected EOF")
    if not any(n == "model" for n, _ in commands):
        raise ModelfileError("no FROM line")
    return commands


def create_request(commands: list[tuple[str, str]], relative_dir: Path) -> dict:
    """The fields of ollama's api.CreateRequest that FROM, TEMPLATE, SYSTEM and PARAMETER set (CreateRequest)."""
    request: dict = {"parameters": {}}
    for name, args in commands:
        if name == "model":
            path = Path(os.path.expanduser(args)) if args.startswith("~") else relative_dir / args
            path = path.resolve()
            if path.exists():
                request.setdefault("files", []).append(path)
            else:
                request["from"] = args  # a model name to pull
        elif name in ("template", "system", "license", "renderer", "parser", "requires", "adapter", "draft",
                      "message"):
            request[name] = args
        elif name in DEPRECATED:
            continue
        elif name not in OPTIONS:
            raise ModelfileError(f"unknown parameter '{name}'")
        elif OPTIONS[name] is list:
            request["parameters"].setdefault(name, []).append(args)
        elif OPTIONS[name] is bool:
            if args not in ("1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false", "False"):
                raise ModelfileError(f"invalid bool value [{args}]")
            request["parameters"][name] = args in ("1", "t", "T", "TRUE", "true", "True")
        else:
            try:
                request["parameters"][name] = OPTIONS[name](args)
            except ValueError:
                raise ModelfileError(f"invalid {OPTIONS[name].__name__} value [{args}]") from None
    return request
