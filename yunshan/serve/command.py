"""`yunshan serve`: an OpenAI-compatible HTTP server over a run, a model folder, an export or a LoRA adapter.

    yunshan serve runs/demo_tiny                                        # the run's final model, http://127.0.0.1:8000
    yunshan serve exports/yunshan-demo --trust-remote-code               # an export, run by its own modeling code
    yunshan serve runs/lora/05_sft/adapter --base runs/lora/04_cpt       # a LoRA adapter with its base
    yunshan serve models/smollm2-135m --served-model-name smollm2 --port 8080 --max-batch-size 16
    YUNSHAN_API_KEY=secret yunshan serve runs/demo_tiny --host 0.0.0.0   # reachable from other machines, with a key

    curl http://127.0.0.1:8000/v1/chat/completions -H 'Content-Type: application/json' \\
      -d '{"model": "demo_tiny", "messages": [{"role": "user", "content": "什么是应收账款？"}]}'

Endpoints: /v1/chat/completions (the model's chat template, or yunshan's default for a tokenizer without one; SSE
streaming with stream=true), /v1/completions (raw prompts), /v1/models, /health. Sampling takes OpenAI's names
(temperature, top_p, max_tokens / max_completion_tokens, stop, seed, n, presence_penalty, frequency_penalty,
logit_bias) and vLLM's extensions (top_k, min_p, repetition_penalty); answers stop at the model's EOS and the
template's end-of-turn token, and carry usage counts. The model is loaded as `yunshan chat` loads it
(yunshan.serve.chat.load_chat_model: PanGu-π and OTCE by the classes yunshan registers, a folder's own code only with
--trust-remote-code, an adapter merged into its base; a `yunshan run` folder means its final model).

Requests wait in one queue and run in batches of up to --max-batch-size rows (yunshan.serve.engine); none is lost:
each is answered, or refused with an OpenAI error (yunshan.serve.app). The server listens on 127.0.0.1 unless
--host says otherwise; with --api-key (or YUNSHAN_API_KEY, which keeps the key out of the process list) every /v1
request must carry `Authorization: Bearer KEY`. A --host other than loopback without a key is refused unless
--allow-unauthenticated-network says so (then a warning is printed), and the port is taken before the model loads:
either mistake is one line, not minutes of loading first. Request bodies over --max-body-mb are refused (413) before
they are parsed. Ctrl-C (or SIGTERM) stops taking connections and answers every request already received, running or
queued; what is still unanswered after --drain-timeout seconds, or at a second Ctrl-C, is refused with a 503 (a
stream ends with an error event), and a third Ctrl-C quits at once.

Built on FastAPI and uvicorn. `transformers serve` (transformers 5.24) was checked first and not used: it loads a
model by `getattr(transformers, config.architectures[0])`, so PanGu-π and OTCE (registered with the Auto classes,
not attributes of transformers) fail with AttributeError; a LoRA adapter folder fails in AutoProcessor; `n` is
ignored with a warning; errors are {"detail": ...} with 422 for malformed JSON; there is no API key; and its
serving package is documented as experimental and subject to change.
"""

from __future__ import annotations

import argparse
import errno
import ipaddress
import logging
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import uvicorn

from yunshan.arguments.field_rules import check_fields

OPT_IN = "--trust-remote-code"
API_KEY_ENV = "YUNSHAN_API_KEY"


@dataclass
class ServeArgs:
    """Arguments of `yunshan serve`."""

    model: str = field(metadata={"path": True,
        "help": "a `yunshan run` folder, model folder, export, Hub id ORG/NAME, or a PEFT adapter folder (see --base)"})
    revision: str | None = field(default=None, metadata={"help": "branch, tag or commit of a Hub id in MODEL"})
    base: str | None = field(default=None, metadata={"path": True,
        "help": "base model (folder or Hub id) of a LoRA adapter (default: the base_model_name_or_path its "
                "adapter_config.json names)"})
    trust_remote_code: bool = field(default=False, metadata={
        "help": "run the model folder's own modeling code (auto_map), as an exported PanGu-π or OTCE ships it"})
    served_model_name: str | None = field(default=None, metadata={
        "help": "the name clients give as `model` (default: the run's name or the folder's name)"})
    host: str = field(default="127.0.0.1", metadata={
        "help": "address to listen on (0.0.0.0: every interface; then set an API key)"})
    port: int = field(default=8000, metadata={"range": "[0, 65535]", "help": "TCP port"})
    api_key: str | None = field(default=None, metadata={
        "help": f"require `Authorization: Bearer KEY` on /v1 requests (or set {API_KEY_ENV}, which ps does not show)"})
    allow_unauthenticated_network: bool = field(default=False, metadata={
        "help": "serve a --host other than loopback without an API key: anyone who reaches the port can use the "
                "model (refused without this flag)"})
    max_body_mb: float = field(default=8.0, metadata={"range": "> 0",
        "help": "largest request body in MiB; a larger one is refused with 413 before it is parsed"})
    max_batch_size: int = field(default=8, metadata={"range": ">= 1",
        "help": "most rows (requests x n) generated together in one batch"})
    max_queue: int = field(default=256, metadata={"range": ">= 1",
        "help": "most requests waiting; beyond it a request gets 429 (the openai client retries)"})
    max_n: int = field(default=8, metadata={"range": ">= 1", "help": "largest n (choices per request) accepted"})
    max_tokens: int = field(default=512, metadata={"range": ">= 1",
        "help": "answer length of a request that gives no max_tokens (never beyond the model's context)"})
    seed: int | None = field(default=None, metadata={"range": "[0, 4294967295]",
        "help": "seed of the server's sampling (a request's own `seed` fixes its answer in any case)"})
    drain_timeout: float = field(default=60.0, metadata={"range": ">= 0",
        "help": "after Ctrl-C, seconds to finish the requests already received before refusing the rest (503)"})
    dtype: str = field(default="auto", metadata={
        "help": "auto (bf16 autocast where the CPU/GPU multiplies bf16 fast, else float32), float32, bfloat16, "
                "float16"})
    device: str = field(default="cpu", metadata={"help": "torch device"})
    log_level: str = field(default="info", metadata={"help": "uvicorn's log level (info logs every request)"})

    def __post_init__(self):
        check_fields(self)


def served_name(args: ServeArgs, model_dir: Path) -> str:
    """--served-model-name, else the run's name (a run folder) or the folder's name."""
    if args.served_model_name:
        return args.served_model_name
    source = Path(args.model)
    if (source / "run.json").is_file():
        from yunshan.io.artifacts import RunManifest

        return RunManifest.read(source).name or source.resolve().name
    return source.resolve().name if source.exists() else args.model


def is_loopback(host: str) -> bool:
    """Whether every address `host` names is a loopback one (127.0.0.0/8, ::1): then no other machine reaches it."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # a name: every address it resolves to must be loopback
        try:
            infos = socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)
        except OSError:
            return False
        return bool(infos) and all(ipaddress.ip_address(info[4][0].split("%")[0]).is_loopback for info in infos)


def check_exposure(args: ServeArgs, api_key: str | None) -> str | None:
    """ValueError for a server other machines could reach without a key, unless --allow-unauthenticated-network;
    with it, the warning to print."""
    if api_key or is_loopback(args.host):
        return None
    if not args.allow_unauthenticated_network:
        raise ValueError(f"--host {args.host} serves every endpoint to the network and no API key is set: set one "
                         f"(--api-key KEY, or {API_KEY_ENV} to keep it out of the process list), listen on 127.0.0.1, "
                         "or pass --allow-unauthenticated-network to serve it open")
    return (f"WARNING: listening on {args.host}:{args.port} with no API key (--allow-unauthenticated-network): "
            "anyone who can reach this port can use the model")


def bind(host: str, port: int) -> list[socket.socket]:
    """Sockets listening on every address of host:port, as uvicorn would open them, taken before the model loads: a
    port in use stops the command at once (ValueError, one line). Listening, not just bound: two sockets with
    SO_REUSEADDR may both bind a port nobody listens on yet, so a second server would find out only after its load.
    Connections that come while the model loads wait in the backlog and are answered once it runs."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as err:
        raise ValueError(f"--host {host}: {err.strerror or err}") from None
    sockets = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            sockets.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn: a port in TIME_WAIT is free
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            if sockets[0] is not sock:  # port 0: every address on the port the first one got
                address = (address[0], sockets[0].getsockname()[1], *address[2:])
            sock.bind(address)
            sock.listen()
    except OSError as err:
        for sock in sockets:
            sock.close()
        reason = "already in use" if err.errno == errno.EADDRINUSE else err.strerror or str(err)
        raise ValueError(f"--port {port}: cannot listen on {host}:{port}: {reason} (another server? pick another "
                         "--port)") from None
    return sockets


def build_server(args: ServeArgs) -> DrainingServer:
    """The loaded model, its engine and the uvicorn server, ready to run (`server.run_serving()`). Whether the
    server may listen where it is told (an API key for a network address, a free port) is checked first."""
    api_key = args.api_key or os.environ.get(API_KEY_ENV) or None
    warning = check_exposure(args, api_key)
    sockets = bind(args.host, args.port)
    try:
        server = _build(args, sockets, api_key)
    except BaseException:
        for sock in sockets:
            sock.close()
        raise
    server.warning = warning
    if warning:
        server.description += ", NO API KEY"
    return server


def _build(args: ServeArgs, sockets: list[socket.socket], api_key: str | None) -> DrainingServer:
    from yunshan.serve.chat import ChatArgs, load_chat_model, run_final_model
    from yunshan.serve.app import build_app
    from yunshan.serve.engine import Engine

    chat = load_chat_model(ChatArgs(model=args.model, revision=args.revision, base=args.base,
                                    trust_remote_code=args.trust_remote_code, dtype=args.dtype, device=args.device))
    source = Path(args.model)
    model_dir = run_final_model(source) if source.is_dir() else source
    name = served_name(args, model_dir)
    created = int(model_dir.stat().st_mtime) if model_dir.exists() else 0
    engine = Engine(chat, max_batch_size=args.max_batch_size, max_queue=args.max_queue, seed=args.seed)
    app = build_app(engine, model_name=name, api_key=api_key, max_n=args.max_n, max_tokens=args.max_tokens,
                    created=created, max_body_bytes=int(args.max_body_mb * 2**20))
    port = sockets[0].getsockname()[1]
    config = uvicorn.Config(app, host=args.host, port=port, log_level=args.log_level, lifespan="off",
                            timeout_graceful_shutdown=None)
    server = DrainingServer(config, engine, args.drain_timeout, sockets)
    server.description = (f"{chat.description}; served as {name!r} on http://{args.host}:{port}/v1, batches of "
                          f"up to {args.max_batch_size}, context {chat.max_length}"
                          f"{', API key required' if api_key else ''}")
    return server


class DrainingServer(uvicorn.Server):
    """uvicorn's Server with yunshan's shutdown: the first Ctrl-C (or SIGTERM) stops listening and answers what was
    received, the second refuses what is left (503), the third quits at once. The process then exits 0 (uvicorn
    would raise the signal again after its shutdown)."""

    def __init__(self, config, engine, drain_timeout: float, sockets: list[socket.socket] | None = None):
        super().__init__(config)
        self.engine, self.drain_timeout, self.signals_seen = engine, drain_timeout, 0
        self.sockets = sockets  # bound before the model loaded (bind)
        self.description, self.warning = "", None

    def handle_exit(self, sig, frame) -> None:
        self.signals_seen += 1
        log = logging.getLogger("yunshan.serve")
        if self.signals_seen == 1:
            stats = self.engine.stats()
            log.warning("shutting down: answering the %d running and %d queued rows (at most %.0f s; Ctrl-C again "
                        "to refuse them)", stats["running"], stats["queued"], self.drain_timeout)
            self.engine.drain()
            timer = threading.Timer(self.drain_timeout, self.engine.abort, args=(
                f"the server shut down before answering (--drain-timeout {self.drain_timeout:g} s passed)",))
            timer.daemon = True
            timer.start()
            self.should_exit = True  # uvicorn stops listening and waits for the open connections
        elif self.signals_seen == 2:
            log.warning("refusing the requests still unanswered (503)")
            self.engine.abort("the server was stopped before answering (Ctrl-C twice)")
        else:
            self.force_exit = True

    def run_serving(self) -> None:
        """Start the engine, serve until shut down, then stop the engine."""
        self.engine.start()
        try:
            self.run(sockets=self.sockets)
        finally:
            self.engine.abort("the server stopped")
            self.engine.stop(timeout=30)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from yunshan.arguments.flags import add_flags
    from yunshan.loading.precision import CHOICES

    add_flags(parser, ServeArgs, positional={"model": "MODEL"}, choices={
        "dtype": CHOICES, "log_level": ("critical", "error", "warning", "info", "debug", "trace")},
        metavars={"api_key": "KEY"})


def run(args: argparse.Namespace) -> int:
    from yunshan.arguments.flags import from_flags

    a = from_flags(ServeArgs, args)
    started = time.monotonic()
    server = build_server(a)
    print(f"yunshan serve: {server.description} (loaded in {time.monotonic() - started:.1f} s; Ctrl-C drains and "
          "stops)", flush=True)
    if server.warning:
        print(f"yunshan serve: {server.warning}", file=sys.stderr, flush=True)
    server.run_serving()
    print("yunshan serve: stopped", flush=True)
    return 0
