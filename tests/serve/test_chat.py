"""`yunshan chat` as a person uses it: typed into a real pseudo-terminal (pexpect), the streamed answer equal to
generate()'s, history kept across turns and cleared by /reset, /exit; one-shot JSONL for scripts; PanGu-π by its
own remote code only with --trust-remote-code; a LoRA adapter folder with its base; one-line errors."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest
import torch

from yunshan.serve.chat import ChatArgs, load_chat_model
from yunshan.cli import main

CORPUS = ["企业的资产负债表反映财务状况。", "根据刑法第二百六十四条，盗窃公私财物，数额较大的，处三年以下有期徒刑。",
          "银行 证券 保险 基金 利率 通货膨胀 宏观经济 审计 会计 税法", "The answer is B. Bonds pay coupons.",
          "你好！我是一个金融与法律助手。请问有什么可以帮你？"]
QUESTION = "什么是应收账款？"
MAX_NEW = 20


def _tokenizer(folder: Path):
    """A byte-level BPE tokenizer without a chat template (so yunshan's default is used)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<pad>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS * 3, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    fast.save_pretrained(folder)
    return fast


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A tiny LLaMA, a tiny PanGu-π (saved with its own modeling code) and a LoRA adapter of the LLaMA."""
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    from yunshan.models.pangu_pi import PanguPiConfig, PanguPiForCausalLM

    root = tmp_path_factory.mktemp("chat")
    tok = _tokenizer(root / "tokenizer")
    common = dict(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, bos_token_id=1,
                  eos_token_id=2, pad_token_id=0, tie_word_embeddings=False)
    folders = {}
    for name, build in (("llama", lambda: LlamaForCausalLM(LlamaConfig(**common))),
                        ("pangu", lambda: PanguPiForCausalLM(PanguPiConfig(aug_reduction=4, **common)))):
        torch.manual_seed(3)
        model = build()
        with torch.no_grad():  # clear argmax margins: greedy answers identical on every CPU
            model.lm_head.weight.normal_(0.0, 1.0)
            model.lm_head.weight[2] -= 4.0  # EOS rarely first: answers have some length
        model.save_pretrained(root / name)
        tok.save_pretrained(root / name)
        folders[name] = root / name
    torch.manual_seed(4)
    base = LlamaForCausalLM.from_pretrained(folders["llama"])
    lora = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"],
                                           init_lora_weights=False))
    lora.save_pretrained(root / "adapter")  # adapter_config.json names the llama folder as its base
    folders["adapter"] = root / "adapter"
    return folders


def reference(folder: Path, messages: list[dict], max_new_tokens: int = MAX_NEW, adapter: Path | None = None) -> str:
    """What transformers' generate() answers (greedy), with the conversation rendered by yunshan's default template."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from yunshan.data.chat import DEFAULT_CHAT_TEMPLATE

    tok = AutoTokenizer.from_pretrained(folder)
    model = AutoModelForCausalLM.from_pretrained(folder).eval()
    if adapter is not None:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, adapter)
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True,
                                   chat_template=DEFAULT_CHAT_TEMPLATE)
    ids = torch.tensor([tok(text, add_special_tokens=False)["input_ids"]])
    with torch.no_grad():
        out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids), max_new_tokens=max_new_tokens,
                             do_sample=False, eos_token_id=tok.eos_token_id, pad_token_id=0)
    return tok.decode(out[0, ids.shape[1]:], skip_special_tokens=True)


def yunshan_command() -> list[str]:
    script = Path(sys.executable).parent / "yunshan"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "yunshan.cli"]


def answer_of(child) -> str:
    """The streamed answer: everything between 'assistant> ' and the next prompt (terminal line ends undone)."""
    child.expect_exact("assistant> ")
    child.expect_exact("\r\n\r\nuser> ")
    # An answer cut at --max-new-tokens is followed by a note that is not part of it.
    return child.before.replace("\r\n", "\n").removesuffix(" [cut at --max-new-tokens]")


def test_interactive_chat_in_a_pseudo_terminal_streams_what_generate_returns(models):
    pexpect = pytest.importorskip("pexpect")
    system = "你是一名金融助手。"
    cmd = yunshan_command() + ["chat", str(models["llama"]), "--system", system, "--temperature", "0",
                               "--max-new-tokens", str(MAX_NEW), "--dtype", "float32"]
    child = pexpect.spawn(cmd[0], cmd[1:], encoding="utf-8", timeout=180, dimensions=(50, 400))
    try:
        child.expect_exact("yunshan chat: ")
        child.expect_exact("chat template: yunshan default")
        child.expect_exact("user> ")
        child.sendline(QUESTION)
        first = answer_of(child)
        history = [{"role": "system", "content": system}, {"role": "user", "content": QUESTION}]
        assert first == reference(models["llama"], history) and first.strip()
        # The second turn is answered with the first in the conversation.
        child.sendline("请再解释一遍")
        second = answer_of(child)
        history += [{"role": "assistant", "content": first}, {"role": "user", "content": "请再解释一遍"}]
        assert second == reference(models["llama"], history)
        # /reset: the same question gets the first answer again (the system prompt stays).
        child.sendline("/reset")
        child.expect_exact("(conversation cleared)")
        child.sendline(QUESTION)
        assert answer_of(child) == first
        child.sendline("/exit")
        child.expect(pexpect.EOF)
    finally:
        child.close()
    assert child.exitstatus == 0


def test_the_answer_is_written_piece_by_piece_while_it_is_generated(models):
    """Streaming, not printing at the end: each piece reaches the terminal before generate() has made the next
    token (the model's forward calls are counted when each piece is written)."""
    from yunshan.serve.chat import respond

    args = ChatArgs(model=str(models["llama"]), dtype="float32", temperature=0, max_new_tokens=MAX_NEW)
    chat = load_chat_model(args)
    calls, seen = [0], []
    forward = chat.model.forward

    def counted(*a, **k):  # a model slow enough that a loaded machine still reads each piece in time
        calls[0] += 1
        time.sleep(0.05)
        return forward(*a, **k)

    chat.model.forward = counted
    pieces = []
    messages = [{"role": "user", "content": QUESTION}]
    text, new_tokens, _ = respond(chat, messages, args, write=lambda piece: (pieces.append(piece), seen.append(calls[0])))
    assert "".join(pieces) == text == reference(models["llama"], messages) and new_tokens > 2
    # Pieces were written at several points of the generation, the first long before its end.
    assert len(pieces) > 2 and seen == sorted(seen) and len(set(seen)) > 2 and seen[0] < calls[0] - 2


def test_one_shot_prompts_give_json_lines(models, tmp_path, capsys):
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_text(json.dumps({"prompt": "你好"}, ensure_ascii=False) + "\n\n" + json.dumps(
        {"messages": [{"role": "user", "content": QUESTION}, {"role": "assistant", "content": "应收账款是债权。"},
                      {"role": "user", "content": "举个例子"}]}, ensure_ascii=False) + "\n", encoding="utf-8")
    assert main(["chat", str(models["llama"]), "--prompt", QUESTION, "--prompts", str(prompts), "--temperature", "0",
                 "--max-new-tokens", str(MAX_NEW), "--dtype", "float32"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["prompt"] for r in lines] == [QUESTION, "你好", "举个例子"]
    assert lines[0]["response"] == reference(models["llama"], [{"role": "user", "content": QUESTION}])
    assert lines[2]["response"] == reference(models["llama"], lines[2]["messages"]) and len(lines[2]["messages"]) == 3
    assert all(r["finish"] in ("stop", "length") and 0 < r["new_tokens"] <= MAX_NEW for r in lines)
    assert any(r["finish"] == "length" and r["new_tokens"] == MAX_NEW for r in lines)


def test_sampling_flags_and_seed(models, tmp_path):
    def sample(seed, out, **flags):
        argv = ["chat", str(models["llama"]), "--prompt", QUESTION, "--seed", str(seed), "--max-new-tokens", "12",
                "--dtype", "float32", "--out", str(out)]
        for k, v in flags.items():
            argv += [f"--{k.replace('_', '-')}", str(v)]
        assert main(argv) == 0
        return json.loads(out.read_text(encoding="utf-8"))["response"]

    hot = {"temperature": 5.0, "top_p": 1.0}  # a flat distribution: seeds decide the answer
    a, b, *others = (sample(s, tmp_path / f"{i}.jsonl", **hot) for i, s in enumerate((1, 1, 2, 3)))
    assert a == b and any(o != a for o in others)  # same seed, same answer; other seeds, other answers
    # top-k 1 is greedy whatever the temperature.
    assert sample(3, tmp_path / "k.jsonl", temperature=1.5, top_k=1) == reference(
        models["llama"], [{"role": "user", "content": QUESTION}], max_new_tokens=12)


def test_pangu_runs_its_own_code_only_with_trust_remote_code(models, tmp_path, capsys):
    own = load_chat_model(ChatArgs(model=str(models["pangu"]), dtype="float32", trust_remote_code=True))
    installed = load_chat_model(ChatArgs(model=str(models["pangu"]), dtype="float32"))
    assert type(own.model).__module__.startswith("transformers_modules")
    assert type(installed.model).__module__.startswith("yunshan.models")
    assert "the folder's own code" in own.description and "installed code" in installed.description
    assert main(["chat", str(models["pangu"]), "--trust-remote-code", "--prompt", QUESTION, "--temperature", "0",
                 "--max-new-tokens", str(MAX_NEW), "--dtype", "float32"]) == 0
    line = json.loads(capsys.readouterr().out)
    assert line["response"] == reference(models["pangu"], [{"role": "user", "content": QUESTION}])
    # A model type only the folder's code defines: refused without the flag, with the reason.
    custom = tmp_path / "custom"
    custom.mkdir()
    for f in models["pangu"].iterdir():
        (custom / f.name).write_bytes(f.read_bytes())
    config = json.loads((custom / "config.json").read_text())
    config["model_type"] = "pangu_pi_custom"
    (custom / "config.json").write_text(json.dumps(config))
    assert main(["chat", str(custom), "--prompt", "x"]) == 1
    assert "run it with --trust-remote-code" in capsys.readouterr().err


def test_a_lora_adapter_folder_with_its_base(models, tmp_path, capsys):
    assert main(["chat", str(models["adapter"]), "--prompt", QUESTION, "--temperature", "0", "--max-new-tokens",
                 str(MAX_NEW), "--dtype", "float32"]) == 0
    with_adapter = json.loads(capsys.readouterr().out)["response"]
    messages = [{"role": "user", "content": QUESTION}]
    assert with_adapter == reference(models["llama"], messages, adapter=models["adapter"])
    assert with_adapter != reference(models["llama"], messages)  # the adapter changes the answers
    # --base overrides the recorded base (here the same weights copied elsewhere).
    copy = tmp_path / "base"
    copy.mkdir()
    for f in models["llama"].iterdir():
        (copy / f.name).write_bytes(f.read_bytes())
    assert main(["chat", str(models["adapter"]), "--base", str(copy), "--prompt", QUESTION, "--temperature", "0",
                 "--max-new-tokens", str(MAX_NEW), "--dtype", "float32"]) == 0
    assert json.loads(capsys.readouterr().out)["response"] == with_adapter


def test_bad_input_is_one_line(models, tmp_path, capsys):
    assert main(["chat", str(tmp_path / "nope"), "--prompt", "x"]) == 1
    assert "no such folder" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "ok"}\n{"text": "no prompt"}\n', encoding="utf-8")
    assert main(["chat", str(models["llama"]), "--prompts", str(bad)]) == 1
    assert f"{bad}:2: field 'prompt'" in capsys.readouterr().err
    assert main(["chat", str(models["llama"]), "--base", str(models["llama"]), "--prompt", "x"]) == 1
    assert "has no adapter_config.json" in capsys.readouterr().err
    assert main(["chat", str(models["llama"]), "--temperature", "-1"]) == 1
    assert "--temperature: must be >= 0, got -1.0" in capsys.readouterr().err
    # A Hub id that is not in the cache, offline (the suite sets HF_HUB_OFFLINE=1): the id and the command.
    assert main(["chat", "no-such-org/no-such-model", "--prompt", "x"]) == 1
    err = capsys.readouterr().err
    assert "MODEL: no-such-org/no-such-model is not a local folder" in err and "`hf download no-such-org" in err
    # A damaged tokenizer.json: one line naming the file, not a KeyError traceback.
    damaged = tmp_path / "damaged"
    damaged.mkdir()
    for f in models["llama"].iterdir():
        (damaged / f.name).write_bytes(f.read_bytes())
    (damaged / "tokenizer.json").write_text("{}")
    assert main(["chat", str(damaged), "--prompt", "x"]) == 1
    err = capsys.readouterr().err
    assert f"{damaged}/tokenizer.json: transformers cannot load this tokenizer" in err and err.count("\n") == 1


def test_bad_prompts_stop_before_the_model_loads_in_one_line(models, tmp_path, capsys):
    """Issue 27 item 10: invalid UTF-8 given as --prompt (a TextEncodeInput TypeError before) or in a prompts file
    (which named no file) is one line naming the flag or FILE:LINE; the prompts file is read before the model loads
    (here the model folder does not even exist); an adapter folder without weights and --max-new-tokens beyond the
    model's context are one line too."""
    bad_arg = "应收\udcff账款"  # what Python makes of the byte 0xff in a command line
    assert main(["chat", str(models["llama"]), "--prompt", bad_arg]) == 1
    assert "--prompt #1: not valid UTF-8 (byte 0xff at character 3)" in capsys.readouterr().err
    txt = tmp_path / "prompts.txt"
    txt.write_bytes("你好\n".encode() + b"\xff\xfe broken\n")
    assert main(["chat", str(tmp_path / "not-loaded"), "--prompts", str(txt)]) == 1
    err = capsys.readouterr().err
    assert f"{txt}:2: not valid UTF-8 (byte 0xff at byte 1 of the line)" in err and err.count("\n") == 1
    escaped = tmp_path / "prompts.jsonl"
    escaped.write_text('{"prompt": "ok"}\n{"prompt": "\\ud800"}\n', encoding="utf-8")
    assert main(["chat", str(tmp_path / "not-loaded"), "--prompts", str(escaped)]) == 1
    assert f"{escaped}:2: not valid UTF-8 text (a lone surrogate U+D800 at character 1)" in capsys.readouterr().err
    weightless = tmp_path / "adapter"
    weightless.mkdir()
    (weightless / "adapter_config.json").write_bytes((models["adapter"] / "adapter_config.json").read_bytes())
    assert main(["chat", str(weightless), "--prompt", "x"]) == 1
    assert f"{weightless}: an adapter folder (adapter_config.json) without its weights" in capsys.readouterr().err
    assert main(["chat", str(models["llama"]), "--prompt", "x", "--max-new-tokens", "300"]) == 1
    assert ("--max-new-tokens 300: the model's context is 256 tokens and must hold the prompt too; give at most 255"
            in capsys.readouterr().err)


def test_invalid_utf8_typed_in_the_chat_is_refused_and_the_chat_goes_on(models):
    import io

    chat = load_chat_model(ChatArgs(model=str(models["llama"]), dtype="float32"))
    lines = iter(["\udcff\udcfe", "/exit"])
    out = io.StringIO()
    from yunshan.serve.chat import interactive

    interactive(chat, ChatArgs(model=str(models["llama"]), max_new_tokens=4), read=lambda _: next(lines), out=out)
    assert "(not valid UTF-8: byte 0xff at character 1; type it again)" in out.getvalue()


def test_a_prompt_that_cannot_be_answered_does_not_stop_the_batch(models, tmp_path, capsys):
    """Issue 27 items 10 and 11: one over-long line in --prompts, or a conversation the chat template refuses (here
    a system turn, as Gemma's template refuses it), is reported by FILE:LINE and answered as {"error"}; the other
    prompts are answered; exit code 1."""
    from transformers import AutoTokenizer

    prompts = tmp_path / "prompts.txt"
    prompts.write_text(f"你好\n{'银行 证券 保险 ' * 200}\n{QUESTION}\n", encoding="utf-8")
    assert main(["chat", str(models["llama"]), "--prompts", str(prompts), "--temperature", "0", "--max-new-tokens",
                 str(MAX_NEW), "--dtype", "float32"]) == 1
    captured = capsys.readouterr()
    lines = [json.loads(line) for line in captured.out.splitlines()]
    assert [sorted(r) for r in lines] == [["finish", "new_tokens", "prompt", "response"], ["error", "prompt"],
                                          ["finish", "new_tokens", "prompt", "response"]]
    assert lines[2]["response"] == reference(models["llama"], [{"role": "user", "content": QUESTION}])
    assert f"{prompts}:2: not answered: the prompt needs more than" in captured.err
    assert "1 of 3 prompts not answered" in captured.err and "Traceback" not in captured.err
    strict = tmp_path / "strict"
    strict.mkdir()
    for f in models["llama"].iterdir():
        (strict / f.name).write_bytes(f.read_bytes())
    tok = AutoTokenizer.from_pretrained(strict)
    tok.chat_template = ("{% for m in messages %}{% if m['role'] == 'system' %}{{ raise_exception('System role not "
                         "supported') }}{% endif %}<|user|>\n{{ m['content'] }}\n{% endfor %}<|assistant|>\n")
    tok.save_pretrained(strict)
    assert main(["chat", str(strict), "--prompt", QUESTION, "--system", "你是助手", "--max-new-tokens", "4"]) == 1
    captured = capsys.readouterr()
    assert json.loads(captured.out)["error"].endswith("(TemplateError: System role not supported); fix chat_template "
                                                       "in tokenizer_config.json")
    assert "--prompt #1: not answered:" in captured.err and "Traceback" not in captured.err
    assert main(["chat", str(strict), "--prompt", QUESTION, "--max-new-tokens", "4"]) == 0  # without a system turn
