"""The Ollama Modelfile of a GGUF export (`yunshan export RUN --out DIR --gguf --ollama`).

    cd DIR && ollama create yunshan-demo -f Modelfile && ollama run yunshan-demo

Ollama writes chat templates in Go's template language, not in Jinja as Hugging Face tokenizers do, and no library
translates one into the other. So the model's Jinja template is recognised instead: it is rendered on probe
conversations (with and without a system prompt, several turns) and compared, character for character, with the
chat formats this module knows how to write in Go: ChatML (`<|im_start|>role ... <|im_end|>`, SmolLM2, Qwen) and
yunshan's default template (`<|user|>` ..., what SFT uses for a tokenizer without a template). A default system
prompt the template inserts when a conversation has none becomes the Modelfile's SYSTEM (Ollama puts it first in
the messages, as the template did). The stop strings are the template's end-of-turn token and EOS. A template that
is none of these gets a Modelfile without TEMPLATE and a note saying so: Ollama then picks a template from the GGUF
file's tokenizer.chat_template by its own matching, which this export cannot promise to be exact.

Values are written as Ollama's Modelfile parser (parser/parser.go in ollama/ollama) reads them back: it has no
escapes, three double quotes closing a line inside a triple-quoted value end the value there, and outside a value's
spaces, tabs and line breaks it keeps only the runes Go's strconv.IsPrint accepts (letters, marks, numbers,
punctuation, symbols, the ASCII space), so an ideographic space (U+3000), a no-break space or a zero-width character
would vanish without a word. A SYSTEM prompt or stop string that the parser might not give back unchanged (any
triple quote, to be safe) is left out with a note instead (tests/hub/test_ollama_modelfile.py holds the file to a
port of that parser and renders the TEMPLATE with Go's text/template as the Ollama server does).
"""

from __future__ import annotations

import unicodedata
from pathlib import Path

PROBES = (
    [{"role": "user", "content": "U1"}],
    [{"role": "system", "content": "S"}, {"role": "user", "content": "U1"}, {"role": "assistant", "content": "A1"},
     {"role": "user", "content": "U2"}],
    [{"role": "user", "content": "U1"}, {"role": "assistant", "content": "A1"}, {"role": "user", "content": "U2"}],
)


def _chatml(messages: list[dict], system: str | None, eos: str) -> str:
    if system is not None and messages[0]["role"] != "system":
        messages = [{"role": "system", "content": system}] + messages
    return "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages) + "<|im_start|>assistant\n"


def _yunshan(messages: list[dict], system: str | None, eos: str) -> str:
    if system is not None and messages[0]["role"] != "system":
        messages = [{"role": "system", "content": system}] + messages
    text = ""
    for m in messages:
        end = eos if m["role"] == "assistant" else ""
        text += f"<|{m['role']}|>\n{m['content']}{end}\n"
    return text + "<|assistant|>\n"


# name -> (reference renderer, Ollama TEMPLATE (Go), stop strings, how a default system prompt is read from the
# rendering of a conversation without one: (opening, closing) around it)
FORMATS = {
    "chatml": (_chatml, "{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>\n{{ end }}"
                        "<|im_start|>assistant\n", ["<|im_end|>"], ("<|im_start|>system\n", "<|im_end|>\n")),
    "yunshan": (_yunshan, "{{- range .Messages }}<|{{ .Role }}|>\n{{ .Content }}"
                          "{{ if eq .Role \"assistant\" }}{EOS}{{ end }}\n{{ end }}<|assistant|>\n", ["{EOS}"],
                ("<|system|>\n", "\n")),
}


def recognise(tokenizer) -> tuple[str, str | None] | None:
    """(format name, default system prompt or None) of the tokenizer's chat template, or None if it is not one
    of FORMATS."""
    template = tokenizer.chat_template
    if not isinstance(template, str):
        return None
    eos = tokenizer.eos_token or ""
    try:
        rendered = [tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in PROBES]
    except Exception:  # noqa: BLE001  (a template that refuses a probe is not one of ours)
        return None
    for name, (render, _, _, (opening, closing)) in FORMATS.items():
        system = None
        first = rendered[0]
        if first.startswith(opening) and closing in first[len(opening):]:
            system = first[len(opening):first.index(closing, len(opening))]
        if all(render(p, system, eos) == r for p, r in zip(PROBES, rendered)):
            return name, system
    return None


def _carried(text: str) -> bool:
    """Whether Ollama's Modelfile parser gives `text` back unchanged from a quoted value (module docstring)."""
    return '"""' not in text and all(c in " \t\r\n" or unicodedata.category(c)[0] in "LMNPS" for c in text)


def _quoted(text: str) -> str:
    # "..." ends at the first `"` followed by a space or line break: triple quotes for anything that holds a quote
    return f'"""{text}"""' if '"' in text or "\n" in text else f'"{text}"'


def write_modelfile(tokenizer, out: Path, gguf_name: str, stop_ids: list[int]) -> list[str]:
    """Write out/Modelfile for the GGUF file `gguf_name` of the model whose HF tokenizer is `tokenizer`; returns
    notes (a template Ollama must pick itself)."""
    lines = ["# Ollama Modelfile written by yunshan export: ollama create NAME -f Modelfile", f"FROM ./{gguf_name}"]
    notes = []
    found = recognise(tokenizer)
    stops = []
    if found is not None:
        name, system = found
        _, template, fmt_stops, _ = FORMATS[name]
        eos = tokenizer.eos_token or ""
        lines.append(f'TEMPLATE """{template.replace("{EOS}", eos)}"""')
        if system and _carried(system):
            lines.append(f'SYSTEM """{system}"""')
        elif system:
            notes.append("the template's default system prompt holds a triple quote or a character Ollama's Modelfile "
                         "parser drops (a space other than U+0020, tab and line breaks, or a control or format "
                         "character): no SYSTEM line; give Ollama the system prompt with each request")
        stops = [s.replace("{EOS}", eos) for s in fmt_stops]
    elif tokenizer.chat_template:
        notes.append("the chat template is none Ollama's TEMPLATE can be written for here (ChatML or yunshan's "
                     "default); the Modelfile has no TEMPLATE, so Ollama picks one from the GGUF file's "
                     "tokenizer.chat_template: check a conversation before relying on it")
        lines.append("# TEMPLATE: not written (see the export's notes); Ollama chooses one from the GGUF metadata")
    # Stop ids that are special or added tokens (an end-of-turn token, EOS) as text; an ordinary vocabulary piece
    # (a template whose end marker is plain text) would cut answers wherever that piece appears.
    added = set(tokenizer.all_special_ids) | set(tokenizer.added_tokens_decoder)
    for token_id in stop_ids:
        token = tokenizer.convert_ids_to_tokens(token_id)
        if token_id in added and token and token not in stops:
            stops.append(token)
    for stop in stops:
        if stop and _carried(stop):
            lines.append(f"PARAMETER stop {_quoted(stop)}")
        else:
            notes.append(f"the stop string {stop!r} cannot be written in a Modelfile unchanged: left out")
    (out / "Modelfile").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return notes
