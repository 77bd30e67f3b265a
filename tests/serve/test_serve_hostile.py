"""`yunshan serve` against a careless or hostile client and a careless operator (issue 45): an open --host without
an API key and a port in use stopped in one line before the model loads; request bodies over the limit refused with
413 before parsing, and prompts longer than the context refused before tokenising (TokenBound, checked against the
real token counts of several kinds of tokenizer), with /health answering throughout and memory flat; every sampling
number bounded where it is parsed, and a row that fails in the batched engine failing its request alone, also among
32 concurrent clients; a client that leaves having its row stopped at once, streamed or not; non-ASCII digits in
logit_bias and lone surrogates in the text refused naming the field."""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
import subprocess
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

openai = pytest.importorskip("openai")

from fixtures import free_port  # noqa: E402
from test_serve import (EOS, MAX_NEW, PROMPTS, QUESTIONS, _raw, _sharpen, _tokenizer, serve_process,  # noqa: E402
                        serving, yunshan_command)

from yunshan.serve.command import ServeArgs, build_server, is_loopback  # noqa: E402
from yunshan.serve.token_bound import MAX_DECOMPOSITION, TokenBound  # noqa: E402


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


def _health(port: int) -> dict:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=30) as response:
        return json.loads(response.read())


# ---------------------------------------------------------------- where the server may listen (items 2 and 8)


def test_loopback_hosts():
    assert all(is_loopback(h) for h in ("127.0.0.1", "127.0.0.2", "::1", "localhost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "192.168.1.5", "", "no-such-host.invalid"))


def _no_loading(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr("yunshan.serve.chat.load_chat_model", refuse)


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

    from yunshan.serve.chat import ChatArgs, load_chat_model
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


# ---------------------------------------------------------------- a client that leaves (item 5)


@pytest.mark.parametrize("stream", [False, True])
def test_a_client_that_leaves_has_its_row_stopped_within_a_second(llama, stream):
    """A slowed model (50 ms a token, 200 tokens: 10 s) and a client that closes its connection mid-answer: the
    engine's running rows drop to 0 within a second."""
    with serving(llama) as (_, server, port):
        server.engine.chat.model.register_forward_hook(lambda *args: time.sleep(0.05))
        body = json.dumps({"model": "llama", "messages": [{"role": "user", "content": QUESTIONS[0]}],
                           "temperature": 0, "max_tokens": 200, "logit_bias": {str(EOS): -100}, "stream": stream})
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
        conn.request("POST", "/v1/chat/completions", body=body, headers={"Content-Type": "application/json"})
        deadline = time.monotonic() + 30
        while _health(port)["running"] != 1:
            assert time.monotonic() < deadline, "the request never ran"
            time.sleep(0.02)
        time.sleep(0.5)  # tokens are flowing
        conn.sock.shutdown(socket.SHUT_RDWR)
        conn.close()
        left = time.monotonic()
        while _health(port)["running"]:
            assert time.monotonic() - left < 1.0, "the row ran on after its client left"
            time.sleep(0.02)


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


# ---------------------------------------------------------------- big bodies and long prompts (item 3)


class _Watch:
    """Polls /health every 50 ms in a thread, recording each answer's latency and the server process's memory."""

    def __init__(self, port: int, pid: int):
        import psutil

        self.port, self.process = port, psutil.Process(pid)
        self.latencies, self.rss, self.failures = [], [], []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        while not self.stop.is_set():
            started = time.monotonic()
            try:
                _health(self.port)
            except OSError as err:
                self.failures.append(repr(err))
            self.latencies.append(time.monotonic() - started)
            self.rss.append(self.process.memory_info().rss)
            time.sleep(0.05)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.stop.set()
        self.thread.join(30)


def _send(port: int, head: bytes, chunks, timeout: float = 60) -> tuple[int, dict, float]:
    """Send a request (headers, then the body chunks as fast as the socket takes them) and read the answer, which
    may come before the body is all sent: (status, body, seconds from the first byte to the answer)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    started = time.monotonic()
    sock.sendall(head)
    try:
        for chunk in chunks:
            sock.sendall(chunk)
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server answered and closed: read its answer
    response = http.client.HTTPResponse(sock)
    response.begin()
    data = json.loads(response.read())
    elapsed = time.monotonic() - started
    sock.close()
    return response.status, data, elapsed


def _head(path: str, length: int | None) -> bytes:
    framing = f"Content-Length: {length}" if length is not None else "Transfer-Encoding: chunked"
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{framing}\r\n\r\n"
            ).encode()


def test_big_bodies_are_refused_before_parsing_and_long_prompts_before_tokenising(llama):
    """A 50 MB body (declared, or chunked without a length) gets 413 in under a second with the server's memory
    unchanged; a 5 MB prompt (under the 8 MiB limit) gets context_length_exceeded in under a second, from its length
    alone; /health answers within a second throughout, and a normal request is answered after."""
    mb = 2**20
    big = b'{"model": "llama", "prompt": "' + b"a" * (50 * mb) + b'"}'
    chunk = 2**20
    with serve_process(llama) as (proc, port):
        client = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key="unused", max_retries=0, timeout=60)
        client.completions.create(model="llama", prompt=PROMPTS[0], max_tokens=4)  # warm
        with _Watch(port, proc.pid) as watch:
            time.sleep(0.3)
            baseline = max(watch.rss)
            status, data, declared_s = _send(port, _head("/v1/completions", len(big)),
                                             (big[i:i + chunk] for i in range(0, len(big), chunk)))
            assert status == 413 and data["error"]["code"] == "request_too_large", data
            # A client that waits for "100 Continue" before sending its body (curl does over 1 MB) gets the 413 at
            # once, without being invited to send the 50 MB.
            expect = _head("/v1/completions", len(big)).replace(b"\r\n\r\n", b"\r\nExpect: 100-continue\r\n\r\n")
            status, data, expect_s = _send(port, expect, [])
            assert status == 413 and expect_s < 0.5, (status, expect_s)
            chunked = (b"%x\r\n%s\r\n" % (len(big[i:i + chunk]), big[i:i + chunk])
                       for i in range(0, len(big), chunk))
            status, data, chunked_s = _send(port, _head("/v1/chat/completions", None),
                                            (*chunked, b"0\r\n\r\n"))
            assert status == 413 and "8 MiB" in data["error"]["message"], data
            time.sleep(0.3)
            grown = max(watch.rss) - baseline
            long = json.dumps({"model": "llama", "max_tokens": 4,
                               "messages": [{"role": "user", "content": "会计" * (5 * mb // 6)}]},
                              ensure_ascii=False).encode()
            assert 5 * mb <= len(long) < 8 * mb
            status, data, long_s = _send(port, _head("/v1/chat/completions", len(long)), [long])
            assert status == 400 and data["error"]["code"] == "context_length_exceeded", data
            assert "at least" in data["error"]["message"] and "characters" in data["error"]["message"]
            assert client.completions.create(model="llama", prompt=PROMPTS[1], max_tokens=4).choices
        print(f"413 after {declared_s:.3f} s (declared), {expect_s:.3f} s (Expect: 100-continue) and {chunked_s:.3f} s "
              f"(chunked), memory +{grown / mb:.1f} MB; "
              f"5 MB prompt refused after {long_s:.3f} s; /health at most {max(watch.latencies):.3f} s")
        assert declared_s < 1 and chunked_s < 1 and long_s < 1
        assert grown < 16 * mb  # nothing of the 50 MB was kept (the 8 MiB counted of the chunked one, transiently)
        assert not watch.failures and max(watch.latencies) < 1.0


# ---------------------------------------------------------------- TokenBound against real token counts (item 3)


def _byte_fallback_bpe(normalizers: list):
    """A SentencePiece-style BPE (Llama 2, Gemma): ▁ for spaces, byte-fallback tokens, a few merges."""
    from tokenizers import Tokenizer, models
    from tokenizers import normalizers as norm

    pieces = ["<unk>", *(f"<0x{b:02X}>" for b in range(256)), "▁", "a", "b", "c", "é", "会", "计", "▁a", "ab", "▁ab",
              "会计", "▁会计"]
    merges = [("▁", "a"), ("a", "b"), ("▁a", "b"), ("会", "计"), ("▁", "会计")]
    tok = Tokenizer(models.BPE(vocab={p: i for i, p in enumerate(pieces)}, merges=merges, unk_token="<unk>",
                               byte_fallback=True, fuse_unk=True))
    tok.normalizer = norm.Sequence([*normalizers, norm.Prepend("▁"), norm.Replace(" ", "▁")])
    return tok


def _byte_level_bpe(full_alphabet: bool):
    """A byte-level BPE (GPT-2, SmolLM2, Qwen) with or without all 256 byte characters: without, it drops the
    characters whose bytes it lacks, as SmolLM2 drops \\x04."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    from yunshan.tokenizer.base import BYTE_TO_CHAR

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    alphabet = [char for byte, char in BYTE_TO_CHAR.items() if full_alphabet or byte not in (0x04, 0x1D)]
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<s>", "<|im_start|>"], show_progress=False,
                                  initial_alphabet=alphabet)
    tok.train_from_iterator(["会计 资产负债表 ab abab   spaces\n\n" * 3, "é e\u0301 한국어"], trainer)
    return tok


def _unbounded():
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

    wordpiece = Tokenizer(models.WordPiece({"[UNK]": 0, "a": 1}, unk_token="[UNK]"))
    whitespace = Tokenizer(models.BPE({"a": 0, "<unk>": 1}, [], unk_token="<unk>"))
    whitespace.pre_tokenizer = pre_tokenizers.Whitespace()
    strip = _byte_fallback_bpe([normalizers.Strip()])
    fused = Tokenizer(models.BPE({"a": 0, "<unk>": 1}, [], unk_token="<unk>", fuse_unk=True))
    dropping = Tokenizer(models.BPE({"a": 0}, []))
    return {"WordPiece": wordpiece, "Whitespace": whitespace, "Strip": strip, "fuse_unk": fused, "drops": dropping}


def _fast(tok):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast(tokenizer_object=tok)


def test_no_character_decomposes_into_more_than_four_code_points():
    import sys
    import unicodedata

    longest = max(len(unicodedata.normalize("NFD", chr(c))) for c in range(sys.maxunicode + 1)
                  if not 0xD800 <= c < 0xE000)
    assert longest == MAX_DECOMPOSITION


def test_token_bound_is_never_above_the_real_count():
    """For each kind of tokenizer it bounds, TokenBound.least(text) <= the tokens the text encodes to, over random
    texts made to break it (long runs of spaces and newlines, combining marks NFC composes, characters a vocabulary
    lacks, special tokens, CJK); the kinds it cannot bound say why and bound nothing."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
    from tokenizers import normalizers

    bounded = {"byte-level": _fast(_byte_level_bpe(True)), "byte-level, bytes missing": _fast(_byte_level_bpe(False)),
               "byte-fallback": _fast(_byte_fallback_bpe([])),
               "byte-fallback NFC": _fast(_byte_fallback_bpe([normalizers.NFC()])),
               "byte-fallback NFKC": _fast(_byte_fallback_bpe([normalizers.NFKC()]))}
    bounds = {name: TokenBound.of(tok) for name, tok in bounded.items()}
    assert all(b.chars_per_token for b in bounds.values()), bounds
    assert bounds["byte-level, bytes missing"].dropped  # it has no token for some control characters
    assert bounds["byte-fallback NFC"].chars_per_token == MAX_DECOMPOSITION * bounds["byte-fallback"].chars_per_token
    for name, tok in _unbounded().items():
        bound = TokenBound.of(_fast(tok))
        assert bound.chars_per_token is None and bound.least("a" * 1000) == 0 and bound.basis, name

    pieces = st.sampled_from([" ", "  ", "\n", "\t", "a", "ab", "é", "e\u0301", "\u0301", "\u1100\u1161\u11a8", "ḍ̇",
                              "会计", "한", "\x04", "\x1d", "\x00", "<s>", "<|im_start|>", "▁", "😀", "ﷺ", "㍻"])
    texts = st.lists(st.one_of(pieces, st.text(max_size=5)), max_size=40).map("".join)

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck))
    @given(text=texts, repeat=st.sampled_from([1, 50]))
    def check(text, repeat):
        text = text * repeat
        for name, tok in bounded.items():
            count = len(tok(text, add_special_tokens=False)["input_ids"])
            assert bounds[name].least(text) <= count, (name, text[:60], count)

    check()
