"""`yunshan serve` through the official openai client over loopback: greedy answers streamed and not equal
generate()'s (chat and completions, Llama, PanGu-π and OTCE by the classes yunshan registers, a run folder with
LoRA and the adapter itself, the real SmolLM2 with its own template); usage counts; stop strings; seeded sampling the
same alone or in a batch; 16 concurrent clients all answered, in batches; OpenAI-style 4xx for bad requests; the API
key; Ctrl-C answering what was received (and refusing it with 503 after --drain-timeout)."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

import pytest
import torch

openai = pytest.importorskip("openai")

from fixtures import free_port  # noqa: E402

from yunshan.serve.command import ServeArgs, build_server  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ["企业的资产负债表反映财务状况。", "根据刑法第二百六十四条，盗窃公私财物，数额较大的，处三年以下有期徒刑。",
          "银行 证券 保险 基金 利率 通货膨胀 宏观经济 审计 会计 税法", "The answer is B. Bonds pay coupons.",
          "你好！我是一个金融与法律助手。请问有什么可以帮你？"]
QUESTIONS = ["什么是应收账款？", "合同违约怎么办？", "What is a bond?", "利率上升对银行有何影响？"]
# Raw prompts for /v1/completions: a tiny random model's answer follows mostly the last token, and chat prompts all
# end with the template's assistant marker, so these (different last tokens) are what tell batch rows apart.
PROMPTS = ["什么是应收账款", "合同违约怎么办", "What is a bond", "利率上升对银行有何影响", "The answer is B"]
MAX_NEW = 24
EOS = 2


def _tokenizer(folder: Path):
    """A byte-level BPE tokenizer without a chat template (the server uses yunshan's default)."""
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


def _sharpen(model) -> None:
    """Clear argmax margins, so greedy answers are the same on every CPU and in any batch."""
    with torch.no_grad():
        model.get_input_embeddings().weight.normal_(0.0, 1.0)  # answers that depend on the prompt
        model.lm_head.weight.normal_(0.0, 1.0)
        model.lm_head.weight[EOS] *= 0.5  # a smaller EOS logit: ends some answers, not most


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """Tiny Llama, PanGu-π and OTCE folders, a LoRA adapter of the Llama, and a `yunshan run` folder whose final
    model is the merged LoRA model (with its adapter/ beside, as yunshan sft writes it)."""
    from peft import LoraConfig, PeftModel, get_peft_model
    from transformers import LlamaConfig, LlamaForCausalLM

    from yunshan.models.otce import OtceConfig, OtceForCausalLM
    from yunshan.models.pangu_pi import PanguPiConfig, PanguPiForCausalLM

    root = tmp_path_factory.mktemp("serve")
    tok = _tokenizer(root / "tokenizer")
    common = dict(vocab_size=len(tok), hidden_size=32, num_attention_heads=4, num_key_value_heads=2,
                  max_position_embeddings=256, bos_token_id=1, eos_token_id=EOS, pad_token_id=0,
                  tie_word_embeddings=False)
    builds = {
        "llama": lambda: LlamaForCausalLM(LlamaConfig(intermediate_size=64, num_hidden_layers=2, **common)),
        "pangu": lambda: PanguPiForCausalLM(PanguPiConfig(intermediate_size=64, num_hidden_layers=2, aug_reduction=4,
                                                          **common)),
        "otce": lambda: OtceForCausalLM(OtceConfig(intermediate_size=48, layer_pattern="SM AE", mamba_d_state=8,
                                                   num_experts=4, num_experts_per_tok=2, expert_intermediate_size=24,
                                                   **common)),
    }
    folders = {}
    for name, build in builds.items():
        torch.manual_seed(3)
        model = build()
        _sharpen(model)
        model.save_pretrained(root / name)
        tok.save_pretrained(root / name)
        folders[name] = root / name
    torch.manual_seed(4)
    lora = get_peft_model(LlamaForCausalLM.from_pretrained(folders["llama"]),
                          LoraConfig(r=4, lora_alpha=8, target_modules=["q_proj", "v_proj", "down_proj"],
                                     init_lora_weights=False))
    final = root / "run" / "05_sft"
    lora.save_pretrained(final / "adapter")  # adapter_config.json names the llama folder as its base
    merged = PeftModel.from_pretrained(LlamaForCausalLM.from_pretrained(folders["llama"]), final / "adapter")
    merged.merge_and_unload().save_pretrained(final)
    tok.save_pretrained(final)
    (root / "run" / "run.json").write_text(json.dumps({"name": "tiny-lora-run", "final_model": "05_sft",
                                                        "stages": []}), encoding="utf-8")
    folders.update(run=root / "run", merged=final, adapter=final / "adapter")
    return folders


def chat_ids(folder: Path, messages: list[dict]) -> list[int]:
    from transformers import AutoTokenizer

    from yunshan.data.chat import DEFAULT_CHAT_TEMPLATE

    tok = AutoTokenizer.from_pretrained(folder)
    template = tok.chat_template or DEFAULT_CHAT_TEMPLATE
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True, chat_template=template)
    return tok(text, add_special_tokens=False)["input_ids"]


def reference(folder: Path, ids: list[int], max_new: int = MAX_NEW, stop_ids=(EOS,), model=None) -> tuple[str, int, str]:
    """transformers' generate() (greedy) of the model in `folder` (or `model`, already loaded): (answer text,
    tokens generated, finish reason)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    import yunshan  # noqa: F401

    tok = AutoTokenizer.from_pretrained(folder)
    if model is None:
        model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    x = torch.tensor([ids])
    with torch.no_grad():
        out = model.generate(input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=max_new, do_sample=False,
                             eos_token_id=list(stop_ids), pad_token_id=0)
    new = out[0, len(ids):].tolist()
    stopped = bool(new) and new[-1] in stop_ids
    text = tok.decode(new[:-1] if stopped else new, skip_special_tokens=True)
    return text, len(new), "stop" if stopped else "length"


@contextmanager
def serving(model: Path, **options):
    """`yunshan serve MODEL` in this process (uvicorn in a thread) and an openai client for it."""
    port = free_port()
    server = build_server(ServeArgs(model=str(model), port=port, dtype="float32", log_level="warning", **options))
    thread = threading.Thread(target=server.run_serving, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the server did not start"
        time.sleep(0.02)
    client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=options.get("api_key") or "unused",
                           max_retries=0, timeout=120)
    try:
        yield client, server, port
    finally:
        server.should_exit = True
        thread.join(60)
        assert not thread.is_alive()


def streamed(client, **kwargs) -> tuple[list[str], dict, object]:
    """A streamed chat answer: (content pieces, finish reason per choice, usage)."""
    pieces, finishes, used = [], {}, None
    for chunk in client.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kwargs):
        for choice in chunk.choices:
            if choice.delta.content:
                pieces.append((choice.index, choice.delta.content))
            if choice.finish_reason:
                finishes[choice.index] = choice.finish_reason
        if chunk.usage is not None:
            used = chunk.usage
    return pieces, finishes, used


def test_greedy_answers_equal_generate_streamed_or_not_with_usage(models):
    folder = models["llama"]
    with serving(folder) as (client, server, _):
        assert [m.id for m in client.models.list().data] == ["llama"]
        for messages in ([{"role": "user", "content": QUESTIONS[0]}],
                         [{"role": "system", "content": "你是一名金融助手。"}, {"role": "user", "content": QUESTIONS[1]}]):
            ids = chat_ids(folder, messages)
            text, tokens, finish = reference(folder, ids)
            assert text.strip()
            answer = client.chat.completions.create(model="llama", messages=messages, temperature=0, max_tokens=MAX_NEW)
            assert answer.choices[0].message.content == text
            assert answer.choices[0].finish_reason == finish
            assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (len(ids), tokens)
            assert answer.usage.total_tokens == len(ids) + tokens
            pieces, finishes, used = streamed(client, model="llama", messages=messages, temperature=0,
                                              max_tokens=MAX_NEW)
            assert "".join(p for _, p in pieces) == text and len(pieces) > 1  # streamed piece by piece
            assert finishes == {0: finish} and used.completion_tokens == tokens and used.prompt_tokens == len(ids)
        # n greedy choices are n copies of the greedy answer.
        messages = [{"role": "user", "content": QUESTIONS[2]}]
        text, tokens, _ = reference(folder, chat_ids(folder, messages))
        answer = client.chat.completions.create(model="llama", messages=messages, temperature=0, max_tokens=MAX_NEW,
                                                n=3)
        assert [c.message.content for c in answer.choices] == [text] * 3 and answer.usage.completion_tokens == 3 * tokens
        # /v1/completions: the raw prompt, tokenised as the tokenizer does; streamed equal too.
        from transformers import AutoTokenizer

        prompt = "根据刑法第二百六十四条，"
        text, tokens, finish = reference(folder, AutoTokenizer.from_pretrained(folder)(prompt)["input_ids"])
        done = client.completions.create(model="llama", prompt=prompt, temperature=0, max_tokens=MAX_NEW)
        assert (done.choices[0].text, done.choices[0].finish_reason, done.usage.completion_tokens) == (
            text, finish, tokens)
        parts = [c.choices[0].text for c in client.completions.create(model="llama", prompt=prompt, temperature=0,
                                                                       max_tokens=MAX_NEW, stream=True)
                 if c.choices]
        assert "".join(parts) == text
        echoed = client.completions.create(model="llama", prompt=[prompt, "The answer is"], temperature=0,
                                           max_tokens=4, echo=True)
        assert echoed.choices[0].text.startswith(prompt) and echoed.choices[1].text.startswith("The answer is")


@pytest.mark.parametrize("name", ["pangu", "otce"])
def test_pangu_and_otce_are_served_by_the_classes_yunshan_registers(models, name):
    from transformers import AutoTokenizer

    folder = models[name]
    messages = [{"role": "user", "content": QUESTIONS[3]}]
    text, tokens, _ = reference(folder, chat_ids(folder, messages))
    tok = AutoTokenizer.from_pretrained(folder)
    alone = [reference(folder, tok(p)["input_ids"])[0] for p in PROMPTS[:3]]
    assert len(set(alone)) == 3
    with serving(folder) as (client, _, _):
        answer = client.chat.completions.create(model=name, messages=messages, temperature=0, max_tokens=MAX_NEW)
        assert answer.choices[0].message.content == text and answer.usage.completion_tokens == tokens
        # Prompts of different lengths in one batch (left padding) answer as each does alone.
        with ThreadPoolExecutor(6) as pool:
            futures = [pool.submit(client.completions.create, model=name, prompt=PROMPTS[i % 3], temperature=0,
                                   max_tokens=MAX_NEW) for i in range(6)]
            got = [f.result().choices[0].text for f in futures]
        assert got == alone * 2
        # And several prompts in one request.
        several = client.completions.create(model=name, prompt=PROMPTS[:3], temperature=0, max_tokens=MAX_NEW)
        assert [c.text for c in several.choices] == alone


def test_a_run_folder_with_lora_and_the_adapter_itself(models):
    messages = [{"role": "user", "content": QUESTIONS[0]}]
    text, tokens, _ = reference(models["merged"], chat_ids(models["merged"], messages))
    with serving(models["run"]) as (client, _, _):
        assert [m.id for m in client.models.list().data] == ["tiny-lora-run"]  # the run's name
        answer = client.chat.completions.create(model="tiny-lora-run", messages=messages, temperature=0,
                                                max_tokens=MAX_NEW)
        assert answer.choices[0].message.content == text
    with serving(models["adapter"], served_model_name="lora") as (client, _, _):
        answer = client.chat.completions.create(model="lora", messages=messages, temperature=0, max_tokens=MAX_NEW)
        assert answer.choices[0].message.content == text  # the adapter on its base, merged as the run merged it


@contextmanager
def library_warnings():
    """Every Python warning (FutureWarning included) and every warning transformers logs, from any thread, while the
    block runs: the list of their texts. transformers' once-only warnings are reset first so none is hidden by an
    earlier test, and its verbosity is raised to warnings (the tests run it at errors)."""
    import logging
    import warnings

    from transformers.utils import logging as hf_logging

    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record):
            if record.levelno >= logging.WARNING:
                seen.append(record.getMessage())

    logging.Logger.warning_once.cache_clear()
    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_warning()
    handler = Keep()
    root = logging.getLogger("transformers")
    root.addHandler(handler)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            yield seen
        seen += [f"{w.category.__name__}: {w.message}" for w in caught]
    finally:
        root.removeHandler(handler)
        hf_logging.set_verbosity(level)


def test_serving_an_adapter_and_a_model_with_sampling_defaults_warns_nothing(models, tmp_path):
    """No library warning on a normal serve: loading a LoRA adapter (PEFT used to read transformers' deprecated
    `is_gradient_checkpointing`: a FutureWarning), nor answering greedily with a model whose generation_config.json
    asks for sampling (the engine's own config used to set top_k=0 beside do_sample=False: "The following generation
    flags are not valid and may be ignored: ['top_k']"), whose answer stays generate()'s greedy one."""
    import shutil

    messages = [{"role": "user", "content": QUESTIONS[0]}]
    sampling = tmp_path / "sampling"
    shutil.copytree(models["llama"], sampling)
    (sampling / "generation_config.json").write_text(json.dumps({
        "bos_token_id": 1, "eos_token_id": EOS, "pad_token_id": 0, "do_sample": True, "temperature": 0.7,
        "top_p": 0.8, "top_k": 20}))  # a request's own temperature 0 replaces these (app.sampling_defaults)
    text, _, _ = reference(models["llama"], chat_ids(models["llama"], messages))
    with library_warnings() as seen:
        with serving(models["adapter"], served_model_name="lora") as (client, _, _):
            client.chat.completions.create(model="lora", messages=messages, temperature=0, max_tokens=4)
        with serving(sampling) as (client, _, _):
            answer = client.chat.completions.create(model="sampling", messages=messages, temperature=0,
                                                    max_tokens=MAX_NEW)
            sampled = client.chat.completions.create(model="sampling", messages=messages, temperature=0.7, seed=3,
                                                     max_tokens=4)
    assert answer.choices[0].message.content == text and sampled.choices[0].message.content
    assert seen == []


def test_sixteen_concurrent_clients_are_all_answered_in_batches(models):
    """16 clients, 3 requests each (chat and completions, streamed and not): every answer complete and equal to
    the same request sent alone; the engine ran them in batches (fewer batches than requests)."""
    prompts = [f"{p} {i}" for i in range(3) for p in PROMPTS]
    with serving(models["llama"], max_batch_size=8) as (client, server, port):

        def ask(prompt: str, stream: bool, chat: bool) -> tuple[str, int]:
            if chat:
                messages = [{"role": "user", "content": prompt}]
                if stream:
                    pieces, finishes, used = streamed(client, model="llama", messages=messages, temperature=0,
                                                      max_tokens=MAX_NEW)
                    assert 0 in finishes
                    return "".join(p for _, p in pieces), used.completion_tokens
                answer = client.chat.completions.create(model="llama", messages=messages, temperature=0,
                                                        max_tokens=MAX_NEW)
                return answer.choices[0].message.content, answer.usage.completion_tokens
            if stream:
                chunks = list(client.completions.create(model="llama", prompt=prompt, temperature=0,
                                                        max_tokens=MAX_NEW, stream=True,
                                                        stream_options={"include_usage": True}))
                return "".join(c.choices[0].text for c in chunks if c.choices), chunks[-1].usage.completion_tokens
            answer = client.completions.create(model="llama", prompt=prompt, temperature=0, max_tokens=MAX_NEW)
            return answer.choices[0].text, answer.usage.completion_tokens

        alone = {(p, chat): ask(p, False, chat) for p in prompts for chat in (False, True)}
        assert len({alone[(p, False)] for p in prompts}) > 5
        before = server.engine.stats()["batches"]

        def client_session(number: int) -> list[tuple]:
            results = []
            for turn in range(3):
                prompt, chat = prompts[(number + turn * 5) % len(prompts)], bool((number + turn) % 3)
                results.append(((prompt, chat), ask(prompt, bool((number + turn) % 2), chat)))
            return results

        with ThreadPoolExecutor(16) as pool:
            sessions = list(pool.map(client_session, range(16), timeout=300))
        stats = server.engine.stats()
    answers = [r for session in sessions for r in session]
    assert len(answers) == 48
    assert all(answer == alone[key] for key, answer in answers)
    assert stats["largest_batch"] > 1 and stats["batches"] - before < 48 and stats["queued"] == 0


def test_stop_strings_and_stop_ids_end_the_answer_streamed_or_not(models):
    messages = [{"role": "user", "content": QUESTIONS[0]}]
    with serving(models["llama"]) as (client, _, _):
        full = client.chat.completions.create(model="llama", messages=messages, temperature=0, max_tokens=MAX_NEW)
        text = full.choices[0].message.content
        stop = next(text[i:i + 2] for i in range(len(text) // 2, len(text)) if text[i:i + 2].strip()
                    and "\ufffd" not in text[i:i + 2])
        cut = text[:text.index(stop)]
        answer = client.chat.completions.create(model="llama", messages=messages, temperature=0, max_tokens=MAX_NEW,
                                                stop=[stop, "never appears"])
        assert (answer.choices[0].message.content, answer.choices[0].finish_reason) == (cut, "stop")
        pieces, finishes, _ = streamed(client, model="llama", messages=messages, temperature=0, max_tokens=MAX_NEW,
                                       stop=stop)
        assert "".join(p for _, p in pieces) == cut and finishes == {0: "stop"}
        # EOS made certain by logit_bias: the answer ends at once, EOS counted as the one token generated.
        ended = client.completions.create(model="llama", prompt=PROMPTS[0], temperature=0, max_tokens=MAX_NEW,
                                          logit_bias={str(EOS): 100})
        assert (ended.choices[0].text, ended.choices[0].finish_reason, ended.usage.completion_tokens) == ("", "stop", 1)


def test_seeded_sampling_is_the_same_alone_or_in_a_batch(models):
    messages = [{"role": "user", "content": QUESTIONS[1]}]
    ask = dict(model="llama", messages=messages, temperature=1.0, top_p=0.9, max_tokens=MAX_NEW, seed=7)
    with serving(models["llama"], max_batch_size=8) as (client, _, _):
        first = client.chat.completions.create(**ask).choices[0].message.content
        assert client.chat.completions.create(**ask).choices[0].message.content == first
        with ThreadPoolExecutor(6) as pool:
            futures = [pool.submit(client.chat.completions.create, **{**ask, "seed": seed})
                       for seed in (7, 1, 2, 7, 3, 4)]
            got = [f.result().choices[0].message.content for f in futures]
        assert got[0] == got[3] == first
        assert len(set(got)) > 1  # other seeds sample other answers
        # n sampled choices with one seed: choice i draws with seed + i.
        eight = client.chat.completions.create(**{**ask, "seed": 8}).choices[0].message.content
        several = client.chat.completions.create(**{**ask, "n": 2})
        assert [c.message.content for c in several.choices] == [first, eight]


def _raw(port: int, path: str, body: bytes | str, headers: dict | None = None) -> tuple[int, dict]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("POST", path, body=body, headers={"Content-Type": "application/json", **(headers or {})})
    response = conn.getresponse()
    data = json.loads(response.read())
    conn.close()
    return response.status, data


def test_bad_requests_get_openai_errors_never_a_500_or_a_hang(models):
    messages = [{"role": "user", "content": QUESTIONS[0]}]
    with serving(models["llama"], max_n=4) as (client, _, port):
        with pytest.raises(openai.NotFoundError) as err:
            client.chat.completions.create(model="gpt-4o", messages=messages)
        assert err.value.status_code == 404 and err.value.body["code"] == "model_not_found"
        with pytest.raises(openai.NotFoundError):  # a stream asked for is refused before any event is sent
            client.chat.completions.create(model="gpt-4o", messages=messages, stream=True)
        with pytest.raises(openai.BadRequestError) as err:
            client.chat.completions.create(model="llama", messages=messages, n=5)
        assert err.value.body["param"] == "n"
        with pytest.raises(openai.BadRequestError) as err:  # the prompt alone is longer than the 256-token context
            client.chat.completions.create(model="llama", messages=[{"role": "user", "content": "会计 " * 300}])
        assert err.value.body["code"] == "context_length_exceeded" and "256" in err.value.body["message"]
        with pytest.raises(openai.BadRequestError) as err:  # prompt plus max_tokens over the context
            client.completions.create(model="llama", prompt="银行", max_tokens=300)
        assert err.value.body["code"] == "context_length_exceeded"
        for bad in ({"temperature": 3}, {"top_p": 0}, {"stop": ["a", "b", "c", "d", "e"]}, {"logit_bias": {"99999": 5}},
                    {"tools": [{"type": "function", "function": {"name": "f"}}]}, {"logprobs": True},
                    {"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]},
                    {"messages": []}, {"messages": [{"role": "wizard", "content": "hi"}]}):
            with pytest.raises(openai.BadRequestError):
                client.chat.completions.create(**{"model": "llama", "messages": messages, **bad})
        with pytest.raises(openai.BadRequestError):
            client.completions.create(model="llama", prompt=[])
        # Outside what the client lets one send: malformed JSON, an unknown field, a body that is no object.
        for body, words in (("{\"model\": \"llama\", ", "could not parse the JSON"),
                            (json.dumps({"model": "llama", "messages": messages, "frobnicate": 1}), "frobnicate"),
                            ("[1, 2]", "JSON object"), (json.dumps({"messages": messages}), "'model'")):
            status, data = _raw(port, "/v1/chat/completions", body)
            assert status == 400 and words in data["error"]["message"], data
            assert set(data["error"]) == {"message", "type", "param", "code"}
        status, data = _raw(port, "/v1/nothing-here", "{}")
        assert status == 404 and "error" in data
        # Still healthy: a good request is answered.
        assert client.chat.completions.create(model="llama", messages=messages, max_tokens=4).choices[0].message


def test_the_api_key_is_required_when_set(models, monkeypatch):
    messages = [{"role": "user", "content": QUESTIONS[0]}]
    with serving(models["llama"], api_key="s3cret") as (client, _, port):
        assert client.chat.completions.create(model="llama", messages=messages, max_tokens=2).choices
        wrong = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="guess", max_retries=0)
        with pytest.raises(openai.AuthenticationError) as err:
            wrong.models.list()
        assert err.value.body["code"] == "invalid_api_key"
        status, _ = _raw(port, "/v1/chat/completions", json.dumps({"model": "llama", "messages": messages}))
        assert status == 401
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=30) as health:
            assert json.loads(health.read())["status"] == "ok"  # health checks need no key
    monkeypatch.setenv("YUNSHAN_API_KEY", "from-env")  # the key kept out of the process list
    with serving(models["llama"]) as (_, _, port):
        status, data = _raw(port, "/v1/completions", json.dumps({"model": "llama", "prompt": "a"}))
        assert status == 401 and "Missing API key" in data["error"]["message"]
        keyed = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="from-env", max_retries=0)
        assert keyed.models.list().data[0].id == "llama"


def yunshan_command() -> list[str]:
    script = Path(sys.executable).parent / "yunshan"
    return [str(script)] if script.is_file() else [sys.executable, "-m", "yunshan.cli"]


@contextmanager
def serve_process(folder: Path, *flags: str):
    """`yunshan serve` as a user starts it, in its own process (Ctrl-C is a real SIGINT)."""
    port = free_port()
    proc = subprocess.Popen(yunshan_command() + ["serve", str(folder), "--port", str(port), "--dtype", "float32",
                                                 *flags], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 180
        while True:
            assert proc.poll() is None, proc.stdout.read()
            assert time.monotonic() < deadline, "the server did not start"
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5):
                    break
            except OSError:
                time.sleep(0.1)
        yield proc, port
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.wait(30)


def _wait_for_queue(port: int) -> dict:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5) as response:
            stats = json.loads(response.read())
        if stats["running"] and stats["queued"]:
            return stats
        time.sleep(0.01)
    raise AssertionError("requests never queued")


LONG = 100  # tokens per answer; EOS is forbidden with logit_bias, so each answer is exactly this long


def _ask(client, number: int):
    kwargs = dict(model="llama", messages=[{"role": "user", "content": QUESTIONS[number % 4]}], temperature=0,
                  max_tokens=LONG, logit_bias={str(EOS): -100})
    if number % 2:
        pieces, finishes, used = streamed(client, **kwargs)
        return finishes[0], used.completion_tokens
    answer = client.chat.completions.create(**kwargs)
    return answer.choices[0].finish_reason, answer.usage.completion_tokens


def test_ctrl_c_answers_every_request_already_received_then_exits(models):
    with serve_process(models["llama"], "--max-batch-size", "2") as (proc, port):
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0, timeout=120)
        with ThreadPoolExecutor(6) as pool:
            futures = [pool.submit(_ask, client, i) for i in range(6)]
            _wait_for_queue(port)  # some requests run, others wait in the queue
            proc.send_signal(signal.SIGINT)
            results = [f.result(timeout=120) for f in futures]
        assert results == [("length", LONG)] * 6  # running and queued alike answered in full
        assert proc.wait(60) == 0
        output = proc.stdout.read()
        assert "shutting down" in output and "stopped" in output and "Traceback" not in output
        with pytest.raises(OSError):  # no longer listening
            urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5)


def test_after_the_drain_timeout_what_is_left_is_refused_with_503(models):
    """--drain-timeout 0: at Ctrl-C (uvicorn's signal handler, called as the signal calls it) the queued requests
    get a 503 and the running streams end with an error event; nothing hangs."""
    with serving(models["llama"], max_batch_size=2, drain_timeout=0) as (client, server, port):

        def outcome(number):
            try:
                return _ask(client, number)
            except openai.APIStatusError as err:  # a queued request: refused with its status before any answer
                return err.status_code
            except openai.APIError as err:  # a running stream: ended by an error event
                return "stream error: " + str(err.message)

        with ThreadPoolExecutor(6) as pool:
            futures = [pool.submit(outcome, i) for i in range(6)]
            _wait_for_queue(port)
            server.handle_exit(signal.SIGINT, None)
            results = [f.result(timeout=120) for f in futures]
    refused = [r for r in results if r == 503 or (isinstance(r, str) and "shut down" in r)]
    assert refused and all(r == ("length", LONG) or r in refused for r in results), results


def _real_model() -> Path:
    for candidate in (ROOT / "models" / "smollm2-135m", ROOT.parent / "models" / "smollm2-135m"):
        if (candidate / "config.json").is_file():
            return candidate
    pytest.skip("no SmolLM2-135M folder (make real-model writes models/smollm2-135m)")


def test_the_real_smollm2_answers_as_generate_with_its_own_template():
    folder = _real_model()
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(folder)
    messages = [{"role": "user", "content": "What is a bond? Answer in one sentence."}]
    ids = tok(tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True),
              add_special_tokens=False)["input_ids"]
    with serving(folder, served_model_name="smollm2") as (client, server, _):
        # generate() on the very weights the server loaded (float32), stopped at the template's <|im_end|>.
        text, tokens, finish = reference(folder, ids, max_new=24, stop_ids=(tok.convert_tokens_to_ids("<|im_end|>"),),
                                         model=server.engine.chat.model)
        answer = client.chat.completions.create(model="smollm2", messages=messages, temperature=0, max_tokens=24)
        assert answer.choices[0].message.content == text and text.strip()
        assert (answer.usage.prompt_tokens, answer.usage.completion_tokens) == (len(ids), tokens)
        pieces, finishes, _ = streamed(client, model="smollm2", messages=messages, temperature=0, max_tokens=24)
        assert "".join(p for _, p in pieces) == text and finishes == {0: finish}
