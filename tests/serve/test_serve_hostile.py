"""`yunshan serve` against a careless or hostile client and a careless operator (issue 45): an open --host without
an API key and a port in use stopped in one line before the model loads; every sampling number bounded where it is
parsed, and a row that fails in the batched engine failing its request alone, also among 32 concurrent clients;
non-ASCII digits in logit_bias and lone surrogates in the text refused naming the field."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

openai = pytest.importorskip("openai")

from fixtures import free_port  # noqa: E402
from test_serve import (EOS, MAX_NEW, PROMPTS, QUESTIONS, _raw, _sharpen, _tokenizer, serving,  # noqa: E402
                        yunshan_command)

from yunshan.serve.command import ServeArgs, build_server, is_loopback  # noqa: E402


@pytest.fixture(scope="module")
def llama(tmp_path_factory):
    """A tiny Llama with test_serve's tokenizer (byte-level BPE, 256-token context) and clear argmax margins."""
    from transformers import LlamaConfig, LlamaForCausalLM

    folder = tmp_path_factory.mktemp("hostile") / "llama"
    tok = _tokenizer(folder)
    torch.manual_seed(3)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64,
                                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                         max_position_embeddings=256, bos_token_id=1, eos_token_id=EOS,
                                         pad_token_id=0, tie_word_embeddings=False))
    _sharpen(model)
    model.save_pretrained(folder)
    return folder



# ---------------------------------------------------------------- where the server may listen (items 2 and 8)


def test_loopback_hosts():
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.0.0.2", "::1", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "192.168.1.5", "", "no-such-host.invalid"))


def _no_loading(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr("yunshan.chat.load_chat_model", refuse)


def test_an_open_host_without_a_key_is_refused_before_loading(llama, monkeypatch):
    monkeypatch.delenv("YUNSHAN_API_KEY", raising=False)
    with monkeypatch.context() as patched:
        _no_loading(patched)
        for host in ("0.0.0.0", "::"):
            with pytest.raises(ValueError, match="--allow-unauthenticated-network") as err:
                build_server(ServeArgs(model=str(llama), host=host, port=free_port()))
            assert f"--host {host}" in str(err.value) and "API key" in str(err.value)
    # With the flag it serves, saying so loudly; with a key (flag or environment) no warning is needed.
    server = build_server(ServeArgs(model=str(llama), host="0.0.0.0", port=0, allow_unauthenticated_network=True,
                                    dtype="float32"))
    try:
        assert "no API key" in server.warning and "NO API KEY" in server.description
    finally:
        for sock in server.sockets:
            sock.close()
    monkeypatch.setenv("YUNSHAN_API_KEY", "k")
    server = build_server(ServeArgs(model=str(llama), host="0.0.0.0", port=0, dtype="float32"))
    try:
        assert server.warning is None and "API key required" in server.description
    finally:
        for sock in server.sockets:
            sock.close()


def test_a_port_in_use_is_refused_before_loading(llama, monkeypatch):
    _no_loading(monkeypatch)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ValueError, match=f"--port {port}: .*already in use"):
            build_server(ServeArgs(model=str(llama), port=port))


def test_the_command_stops_in_one_line_for_an_open_host_or_a_taken_port(llama, monkeypatch):
    """As a user runs it: exit 1 and one `yunshan serve: error:` line on stderr, no traceback, no loading line."""
    monkeypatch.delenv("YUNSHAN_API_KEY", raising=False)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        for flags, words in ((["--host", "0.0.0.0", "--port", str(free_port())], "--allow-unauthenticated-network"),
                             (["--port", str(port)], f"--port {port}")):
            done = subprocess.run(yunshan_command() + ["serve", str(llama), *flags], capture_output=True, text=True,
                                  timeout=120)
            assert done.returncode == 1, done
            lines = done.stderr.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("yunshan serve: error: ") and words in lines[0], done
            assert "loaded" not in done.stdout and "Traceback" not in done.stderr


# ---------------------------------------------------------------- sampling settings and a failing row (item 4)


@pytest.mark.parametrize("field, good, bad", [
    ("temperature", [0, 0.01, 2], [1e-300, 0.0099, 2.01, -1, float("nan")]),
    ("seed", [0, -2**63, 2**64 - 1], [2**64, -2**63 - 1, 18446744073709551616]),
    ("repetition_penalty", [0.01, 1, 100], [1e-300, 0, 0.0099, 100.5, float("inf")]),
    ("presence_penalty", [-2, 2], [-2.01, 2.01, float("nan")]),
    ("frequency_penalty", [-2, 2], [-2.01, 2.01]),
    ("top_p", [1e-9, 1], [0, 1.01]),
    ("top_k", [0, 2**31 - 1], [-1, 2**31, 2**70]),
    ("min_p", [0, 1], [-0.1, 1.1]),
])
def test_every_sampling_number_is_bounded_where_it_is_parsed(field, good, bad):
    from pydantic import ValidationError

    from yunshan.serve.protocol import ChatCompletionRequest

    base = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    for value in good:
        assert getattr(ChatCompletionRequest.model_validate({**base, field: value}), field) == value
    for value in bad:
        with pytest.raises(ValidationError) as err:
            ChatCompletionRequest.model_validate({**base, field: value})
        assert err.value.errors()[0]["loc"] == (field,)


POISONS = {"temperature": 1e-300, "seed": 18446744073709551616, "repetition_penalty": 1e-300}


def test_a_poisoned_request_among_32_clients_leaves_every_good_one_answered(llama):
    """32 concurrent openai clients, one of them sending one of issue 45's poisons: it gets a 400 naming the field,
    and the 31 others their answers, each equal to the same request alone (batches of 8)."""
    prompts = [f"{p} {i}" for i in range(7) for p in PROMPTS][:31]
    with serving(llama, max_batch_size=8) as (client, server, _):
        def ask(prompt: str) -> str:
            answer = client.completions.create(model="llama", prompt=prompt, temperature=0, max_tokens=8)
            return answer.choices[0].text

        alone = {p: ask(p) for p in prompts}
        for field, value in POISONS.items():
            def poisoned():
                try:
                    client.completions.create(model="llama", prompt=PROMPTS[0], max_tokens=8, temperature=1,
                                              extra_body={field: value})
                except openai.BadRequestError as err:
                    return err.body["param"], err.body["message"]
                return "answered"

            before = server.engine.stats()["batches"]
            with ThreadPoolExecutor(32) as pool:
                bad = pool.submit(poisoned)
                good = [pool.submit(ask, p) for p in prompts]
                answers = [f.result(timeout=300) for f in good]
                refusal = bad.result(timeout=300)
            assert refusal[0] == field, refusal
            assert answers == [alone[p] for p in prompts]
            assert server.engine.stats()["batches"] - before < 31  # they ran in batches


def test_a_failing_row_fails_its_request_alone(llama):
    """Settings that get past the parser (here put straight into the engine) and break the sampler, the scores or
    the warpers fail their own request with a 500 naming the cause; the other rows of the same batch are answered
    exactly as alone."""
    from transformers import AutoTokenizer

    from yunshan.chat import ChatArgs, load_chat_model
    from yunshan.serve.engine import Delta, Engine, Failed, Finished, Job, Sampling

    chat = load_chat_model(ChatArgs(model=str(llama), dtype="float32"))
    tok = AutoTokenizer.from_pretrained(llama)
    engine = Engine(chat, max_batch_size=16)
    engine.start()
    # NaN probabilities, infinite scores, a warper that refuses its setting.
    poisons = [Sampling(max_tokens=MAX_NEW, temperature=1e-300),
               Sampling(max_tokens=MAX_NEW, repetition_penalty=1e-300), Sampling(max_tokens=MAX_NEW, top_k=-5)]

    async def run(requests: list[tuple[str, Sampling]]) -> list[tuple]:
        loop = asyncio.get_running_loop()
        jobs = [Job(tok(prompt)["input_ids"], 1, sampling, loop) for prompt, sampling in requests]
        with engine._cond:  # all queued before the worker looks: one batch
            for job in jobs:
                engine.submit(job)
        results = []
        for job in jobs:
            text = ""
            while True:
                event = await asyncio.wait_for(job.events.get(), 120)
                if isinstance(event, Delta):
                    text += event.text
                elif isinstance(event, Finished):
                    results.append((text, event.reason))
                    break
                elif isinstance(event, Failed):
                    results.append((event.error.status, event.error.message))
                    break
        return results

    try:
        greedy = [(prompt, Sampling(max_tokens=MAX_NEW, temperature=0)) for prompt in PROMPTS[:4]]
        alone = asyncio.run(run(greedy))
        for poison in poisons:
            mixed = asyncio.run(run(greedy[:2] + [(PROMPTS[4], poison)] + greedy[2:]))
            assert mixed[:2] + mixed[3:] == alone
            assert mixed[2][0] == 500 and "generation failed for this request" in mixed[2][1], mixed[2]
        assert engine.stats()["largest_batch"] == 5
    finally:
        engine.stop(timeout=30)


# ---------------------------------------------------------------- fields refused by name (items 6 and 10)


def test_non_ascii_digits_and_lone_surrogates_are_refused_naming_the_field(llama):
    messages = [{"role": "user", "content": QUESTIONS[0]}]
    with serving(llama) as (client, _, port):
        for key in ("²", "١٢", "5²", "+5", " 5"):
            status, data = _raw(port, "/v1/chat/completions", json.dumps(
                {"model": "llama", "messages": messages, "logit_bias": {key: 5}}))
            assert status == 400 and data["error"]["param"] == "logit_bias", (key, data)
        # JSON's \ud800 escape: json.dumps writes a lone surrogate that way.
        for content, param, field in (
                ("abc\ud800", "messages.[0].content", "messages[0].content"),
                ([{"type": "text", "text": "ok"}, {"type": "text", "text": "\udfff!"}], "messages.[0].content",
                 "messages[0].content[1].text")):
            status, data = _raw(port, "/v1/chat/completions", json.dumps(
                {"model": "llama", "messages": [{"role": "user", "content": content}]}))
            assert status == 400 and data["error"]["param"] == param, data
            assert data["error"]["message"].startswith(field) and "U+D" in data["error"]["message"], data
            assert "template" not in data["error"]["message"]
        for prompt, field in (("\ud800", "prompt"), (["fine", "x\ud800"], "prompt[1]")):
            status, data = _raw(port, "/v1/completions", json.dumps({"model": "llama", "prompt": prompt}))
            assert status == 400 and data["error"]["message"].startswith(f"{field}: invalid character U+D800"), data
        # A proper surrogate pair is one character, and welcome.
        assert client.chat.completions.create(model="llama", max_tokens=2, messages=[
            {"role": "user", "content": json.loads('"\\ud83d\\ude00"')}]).choices
