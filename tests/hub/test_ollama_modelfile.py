"""The Modelfile of `yunshan export --gguf --ollama` held to Ollama's own rules, without an Ollama binary (none is
packaged for Debian or on PyPI): tests/hub/ollama_rules.py ports ollama's Modelfile parser (parser/parser.go), checked
here first against the cases of its own tests (parser/parser_test.go); then every Modelfile yunshan writes (ChatML
with and without a default system prompt, yunshan's default template, SmolLM2's real tokenizer, a template it cannot
translate) must parse to exactly the FROM, TEMPLATE, SYSTEM and stop strings meant, resolve FROM to the GGUF file
beside it and name only parameters Ollama knows. The TEMPLATE is rendered with Go's text/template as the Ollama
server renders it (tests/hub/ollama_template.go; `go` from Debian's golang-go, installed by make test-gguf) and must
equal the Hugging Face chat template's output on conversations with and without a system prompt, several turns,
Chinese text and template-like braces."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from yunshan.data.chat import DEFAULT_CHAT_TEMPLATE
from yunshan.hub.ollama import FORMATS, write_modelfile

from .ollama_rules import ModelfileError, create_request, parse_modelfile
from .test_gguf_export import byte_bpe

ROOT = Path(__file__).resolve().parents[2]
GO_PROGRAM = Path(__file__).with_name("ollama_template.go")
LLAMA3 = ("{{ if .System }}<|start_header_id|>system<|end_header_id|>\n\n{{ .System }}<|eot_id|>{{ end }}"
          "{{ if .Prompt }}<|start_header_id|>user<|end_header_id|>\n\n{{ .Prompt }}<|eot_id|>{{ end }}"
          "<|start_header_id|>assistant<|end_header_id|>\n\n{{ .Response }}<|eot_id|>")

# The cases of ollama's parser/parser_test.go (TestParseFileFile, ...TrimSpace, ...From, ...ParametersMissingValue,
# ...BadCommand, ...Messages, ...Quoted, ...Parameters, ...Comments, ...UTF16ParseFile, ParseMultiByte): input and
# the commands ParseFile returns, or the error it raises.
PARSER_CASES = [
    (f'\nFROM model1\nADAPTER adapter1\nLICENSE MIT\nPARAMETER param1 value1\nPARAMETER param2 value2\n'
     f'TEMPLATE """{LLAMA3}"""    \n',
     [("model", "model1"), ("adapter", "adapter1"), ("license", "MIT"), ("param1", "value1"), ("param2", "value2"),
      ("template", LLAMA3)]),
    (f'\nFROM "     model 1"\nADAPTER      adapter3\nLICENSE "MIT       "\nPARAMETER param1        value1\n'
     f'PARAMETER param2    value2\nTEMPLATE """   {LLAMA3}   """    \n',
     [("model", "     model 1"), ("adapter", "adapter3"), ("license", "MIT       "), ("param1", "value1"),
      ("param2", "value2"), ("template", f"   {LLAMA3}   ")]),
    ('FROM "FOO  BAR  "', [("model", "FOO  BAR  ")]),
    ('FROM "FOO BAR"\nPARAMETER param1 value1', [("model", "FOO BAR"), ("param1", "value1")]),
    ("FROM     FOOO BAR    ", [("model", "FOOO BAR")]),
    ("FROM /what/is/the path ", [("model", "/what/is/the path")]),
    ("FROM llama3:7b-instruct-q4_K_M", [("model", "llama3:7b-instruct-q4_K_M")]),
    ("", "no FROM line"),
    ("PARAMETER param1 value1", "no FROM line"),
    ("PARAMETER param1 value1\nFROM foo", [("param1", "value1"), ("model", "foo")]),
    ("PARAMETER what the \nFROM lemons make lemonade ", [("what", "the"), ("model", "lemons make lemonade")]),
    ("\nFROM foo\nPARAMETER param1\n", "unexpected EOF"),
    ("\nFROM foo\nBADCOMMAND param1 value1\n", "(line 3)"),
    ("\nFROM foo\nRENDERER renderer1\n", [("model", "foo"), ("renderer", "renderer1")]),
    ("\nFROM foo\nMESSAGE system You are a file parser. Always parse things.",
     [("model", "foo"), ("message", "system: You are a file parser. Always parse things.")]),
    ("\nFROM foo\nMESSAGE system You are a file parser.\nMESSAGE user Hey there!\nMESSAGE assistant Hello!\n",
     [("model", "foo"), ("message", "system: You are a file parser."), ("message", "user: Hey there!"),
      ("message", "assistant: Hello!")]),
    ('\nFROM foo\nMESSAGE system """\nYou are a multiline file parser. Always parse things.\n"""\n\t\t\t',
     [("model", "foo"), ("message", "system: \nYou are a multiline file parser. Always parse things.\n")]),
    ("\nFROM foo\nMESSAGE badguy I'm a bad guy!\n", "(line 3)"),
    ("\nFROM foo\nMESSAGE system\n", "unexpected EOF"),
    ("\nFROM foo\nMESSAGE system", "unexpected EOF"),
    ('\nFROM foo\nSYSTEM """\nThis is a\nmultiline system.\n"""\n\t\t\t',
     [("model", "foo"), ("system", "\nThis is a\nmultiline system.\n")]),
    ('\nFROM foo\nSYSTEM """This is a\nmultiline system."""\n\t\t\t',
     [("model", "foo"), ("system", "This is a\nmultiline system.")]),
    ('\nFROM foo\nSYSTEM """This is a multiline system.""\n\t\t\t', "unexpected EOF"),
    ('\nFROM foo\nSYSTEM "\n\t\t\t', "unexpected EOF"),
    ('\nFROM foo\nSYSTEM """\nThis is a multiline system with "quotes".\n"""\n',
     [("model", "foo"), ("system", '\nThis is a multiline system with "quotes".\n')]),
    ('\nFROM foo\nSYSTEM """"""\n', [("model", "foo"), ("system", "")]),
    ('\nFROM foo\nSYSTEM ""\n', [("model", "foo"), ("system", "")]),
    ('\nFROM foo\nSYSTEM "\'"\n', [("model", "foo"), ("system", "'")]),
    ('\nFROM foo\nSYSTEM """\'\'"\'""\'""\'"\'\'\'\'\'""\'""\'"""\n',
     [("model", "foo"), ("system", '\'\'"\'""\'""\'"\'\'\'\'\'""\'""\'')]),
    ('\nFROM foo\nTEMPLATE """\n{{ .Prompt }}\n"""', [("model", "foo"), ("template", "\n{{ .Prompt }}\n")]),
    ("\n# comment\nFROM foo\n\t", [("model", "foo")]),
    ("FROM test\n\tSYSTEM 你好👋", [("model", "test"), ("system", "你好👋")]),
] + [(f"FROM foo\nPARAMETER {line}\n", [("model", "foo"), want]) for line, want in [
    ("num_ctx 1", ("num_ctx", "1")), ("top_p 1.0", ("top_p", "1.0")), ("stop ### User:", ("stop", "### User:")),
    ("stop ### User: ", ("stop", "### User:")), ('stop "### User:"', ("stop", "### User:")),
    ('stop "### User: "', ("stop", "### User: ")), ('stop """### User:"""', ("stop", "### User:")),
    ('stop """### User:\n"""', ("stop", "### User:\n")), ("stop <|endoftext|>", ("stop", "<|endoftext|>")),
    ("stop </s>", ("stop", "</s>"))]]


@pytest.mark.parametrize("text,want", PARSER_CASES)
def test_the_port_parses_as_ollamas_own_tests_say(text, want):
    if isinstance(want, str):
        with pytest.raises(ModelfileError, match=want.replace("(", r"\(").replace(")", r"\)")):
            parse_modelfile(text)
    else:
        assert parse_modelfile(text) == want
        assert parse_modelfile(text.encode("utf-8")) == want


def test_the_port_reads_utf16_with_a_bom_and_drops_what_go_does_not_print():
    text = "FROM bob\nPARAMETER param1 1\nSYSTEM You are a utf16 file.\n"
    want = [("model", "bob"), ("param1", "1"), ("system", "You are a utf16 file.")]
    assert parse_modelfile(b"\xff\xfe" + text.encode("utf-16-le")) == want
    assert parse_modelfile(b"\xfe\xff" + text.encode("utf-16-be")) == want
    # strconv.IsPrint: an ideographic space and a zero-width space vanish; tabs and line breaks inside quotes stay
    assert parse_modelfile('FROM x\nSYSTEM """a\u3000b\u200bc\td\ne"""\n') == [("model", "x"), ("system", "abc\td\ne")]
    # no escapes: a triple quote at the end of a line inside the value ends it there (elsewhere it is kept)
    with pytest.raises(ModelfileError):
        parse_modelfile('FROM x\nSYSTEM """say """\nhi"""\n')
    assert parse_modelfile('FROM x\nSYSTEM """say """ hi"""\n') == [("model", "x"), ("system", 'say """ hi')]


def _write(tmp_path: Path, tok, stop_ids: list[int]) -> tuple[str, list[str]]:
    out = tmp_path / "export"
    out.mkdir()
    (out / "m-F16.gguf").write_bytes(b"GGUF")  # FROM must resolve to a file beside the Modelfile
    notes = write_modelfile(tok, out, "m-F16.gguf", stop_ids)
    return (out / "Modelfile").read_text(encoding="utf-8"), notes


def _request(tmp_path: Path, modelfile: str) -> dict:
    request = create_request(parse_modelfile(modelfile.encode("utf-8")), tmp_path / "export")
    assert request["files"] == [(tmp_path / "export" / "m-F16.gguf").resolve()] and "from" not in request
    return request


def _chatml_tokenizer(tmp_path: Path, system: str | None = None):
    tok = byte_bpe(tmp_path / "tok")
    if system is not None:  # SmolLM2's shape: a default system turn when the conversation has none
        tok.chat_template = (
            "{% if messages[0]['role'] != 'system' %}<|im_start|>system\n" + system + "<|im_end|>\n{% endif %}"
            "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
            "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
    return tok


def test_a_chatml_modelfile_parses_to_what_was_meant(tmp_path):
    tok = _chatml_tokenizer(tmp_path, "你是一名金融与法律助手。")
    modelfile, notes = _write(tmp_path, tok, [tok.convert_tokens_to_ids("<|im_end|>"), tok.eos_token_id])
    assert notes == []
    request = _request(tmp_path, modelfile)
    assert request["template"] == FORMATS["chatml"][1]
    assert request["system"] == "你是一名金融与法律助手。"
    assert request["parameters"] == {"stop": list(dict.fromkeys(["<|im_end|>", tok.eos_token]))}


def test_yunshans_default_template_modelfile(tmp_path):
    tok = byte_bpe(tmp_path / "tok")
    tok.chat_template = DEFAULT_CHAT_TEMPLATE
    modelfile, notes = _write(tmp_path, tok, [tok.eos_token_id])
    request = _request(tmp_path, modelfile)
    assert notes == [] and "system" not in request
    assert request["template"] == FORMATS["yunshan"][1].replace("{EOS}", tok.eos_token)
    assert request["parameters"] == {"stop": [tok.eos_token]}


def test_a_system_prompt_ollama_would_change_is_left_out_with_a_note(tmp_path):
    tok = _chatml_tokenizer(tmp_path, "你是一名助手。\u3000请简要回答。")  # an ideographic space: Ollama drops it
    modelfile, notes = _write(tmp_path, tok, [tok.convert_tokens_to_ids("<|im_end|>")])
    request = _request(tmp_path, modelfile)
    assert "system" not in request and request["template"] == FORMATS["chatml"][1]
    assert any("system prompt" in n for n in notes)


def test_an_untranslatable_template_gets_no_template_and_a_note(tmp_path):
    tok = byte_bpe(tmp_path / "tok")
    tok.chat_template = "{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}"
    modelfile, notes = _write(tmp_path, tok, [tok.eos_token_id])
    request = _request(tmp_path, modelfile)
    assert "template" not in request and notes and request["parameters"] == {"stop": [tok.eos_token]}


def _real_tokenizer():
    from transformers import AutoTokenizer

    for candidate in (ROOT / "models" / "smollm2-135m", ROOT.parent / "models" / "smollm2-135m"):
        if (candidate / "tokenizer.json").is_file():
            return AutoTokenizer.from_pretrained(candidate)
    pytest.skip("no SmolLM2-135M folder (make real-model writes models/smollm2-135m)")


def test_smollm2s_modelfile(tmp_path):
    tok = _real_tokenizer()
    modelfile, notes = _write(tmp_path, tok, [tok.convert_tokens_to_ids("<|im_end|>"), tok.eos_token_id])
    request = _request(tmp_path, modelfile)
    assert notes == [] and request["template"] == FORMATS["chatml"][1]
    assert request["system"] == "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
    assert set(request["parameters"]["stop"]) == {"<|im_end|>", tok.eos_token}


CONVERSATIONS = [
    [{"role": "user", "content": "什么是应收账款？"}],
    [{"role": "system", "content": "你是一名律师。"}, {"role": "user", "content": "合同违约怎么办？"},
     {"role": "assistant", "content": "可以主张违约责任。"}, {"role": "user", "content": "具体呢？ {{ .Role }} {% x %}"}],
    [{"role": "user", "content": "Hi\nthere"}, {"role": "assistant", "content": "Hello."},
     {"role": "user", "content": "  What is NPV?  "}],
]


def _go() -> str:
    go = shutil.which("go") or next((str(p) for p in sorted(Path("/usr/lib").glob("go-*/bin/go"))), None)
    if go is None:
        pytest.skip("no Go toolchain (make test-gguf installs Debian's golang-go)")
    return go


def go_render(template: str, system: str, conversations: list[list[dict]]) -> list[str]:
    """ollama_template.go: the TEMPLATE rendered with Go's text/template as the Ollama server renders it."""
    done = subprocess.run([_go(), "run", str(GO_PROGRAM)], capture_output=True, text=True, timeout=600,
                          input=json.dumps({"template": template, "system": system, "conversations": conversations}))
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.gguf
@pytest.mark.parametrize("kind", ["chatml", "chatml+system", "yunshan", "smollm2"])
def test_ollama_renders_the_template_as_the_chat_template_does(tmp_path, kind):
    if kind == "smollm2":
        tok = _real_tokenizer()
    elif kind == "yunshan":
        tok = byte_bpe(tmp_path / "tok")
        tok.chat_template = DEFAULT_CHAT_TEMPLATE
    else:
        tok = _chatml_tokenizer(tmp_path, "你是一名金融与法律助手。" if kind == "chatml+system" else None)
    modelfile, _ = _write(tmp_path, tok, [tok.eos_token_id])
    request = _request(tmp_path, modelfile)
    rendered = go_render(request["template"], request.get("system", ""), CONVERSATIONS)
    for conversation, got in zip(CONVERSATIONS, rendered):
        assert got == tok.apply_chat_template(conversation, tokenize=False, add_generation_prompt=True)
