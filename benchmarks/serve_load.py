"""`yunshan serve` under load: 16 concurrent openai clients, every answer checked, p50/p99 latency and tokens/s.

    python benchmarks/serve_load.py                                     # models/smollm2-135m (make real-model)
    python benchmarks/serve_load.py --model models/smollm2-135m --batch-sizes 1 16 --requests 2
    python benchmarks/serve_load.py --llama-cpp-gguf exports/smollm2-f32/m-F32.gguf exports/smollm2-f16/m-F16.gguf

For each --batch-sizes value the script starts `yunshan serve MODEL --max-batch-size B` in its own process, sends one
warm-up request, then lets --clients threads (default 16) each send --requests chat requests (finance, legal and
general questions; greedy, --max-tokens each) through the official `openai` client, all at once; odd-numbered
clients stream, so with 16 clients x 2 requests every question is asked once streamed and once not. It checks every
answer is complete (a finish reason, usage counts, the streamed and non-streamed text of a question equal to each
other), then stops the server with SIGINT (it must exit 0). Reported per configuration: requests answered, wall
seconds, latency p50 / p99 (request sent -> last byte), time to first token p50 of the streamed ones, completion
tokens per second and requests per second over the whole run, and the CPU seconds the server process (with its
children) spent in that window beside the wall time: on a shared machine the wall clock mostly measures waiting, the
CPU seconds what the server itself cost. The load average before and after each row and the benchmark's nice value
are recorded.

With --llama-cpp-gguf FILE... (GGUF exports of the same model, `yunshan export MODEL --out DIR --gguf --quant f16`)
and `llama-cpp-python[server]` installed (`pip install -e ".[gguf]"`), the same clients send the same requests to
llama.cpp's OpenAI server (`python -m llama_cpp.server`), one row per file: --threads threads with
OMP_WAIT_POLICY=PASSIVE (as yunshan sets for itself), one request at a time (llama-cpp-python's server has one
sequence and queues the rest), `--interrupt_requests False` (or each new request cuts the streamed answer in
progress), greedy with `repeat_penalty` 1.0 (llama-cpp-python's default 1.1 would change the greedy answers). Its
streamed chunks carry no usage, so a streamed answer's tokens are those of the non-streamed answer to the same
question, the same tokens under greedy decoding (the number of such answers is reported). Each row also counts the questions answered with the same text as in the
first row. Writes benchmarks/results/serve_load.json.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = [
    "什么是应收账款？请简要说明。", "合同一方违约时，守约方可以主张哪些救济？", "What does a bond's coupon rate mean?",
    "利率上升对商业银行的净息差有何影响？", "简述刑法中盗窃罪的构成要件。", "Explain the difference between equity and debt.",
    "什么是资产负债表？", "劳动合同解除需要提前多少天通知？", "Summarise what inflation is in two sentences.",
    "公司法中股东的基本权利有哪些？", "How is net present value computed?", "什么是不可抗力？",
    "What is the role of an auditor?", "个人所得税的起征点是多少？", "Why do central banks raise interest rates?",
    "简述民法典中诉讼时效的一般规定。",
]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(cmd: list[str], log: Path, env: dict | None = None) -> subprocess.Popen:
    # The server's output goes to a file: a pipe nobody reads fills up (llama.cpp prints its whole model metadata)
    # and the server then blocks on its next write.
    with open(log, "w", encoding="utf-8") as out:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, text=True, env=env)


def wait_ready(url: str, proc: subprocess.Popen, log: Path, timeout: float = 600) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            tail = log.read_text(encoding="utf-8", errors="replace")[-2000:]
            raise RuntimeError(f"the server exited with {proc.returncode} (log {log}): {tail}")
        try:
            with urllib.request.urlopen(url, timeout=5):
                return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{url} did not answer within {timeout:.0f} s")


def start_yunshan(model: str, batch_size: int, port: int, dtype: str, log: Path) -> subprocess.Popen:
    exe = Path(sys.executable).with_name("yunshan")
    cmd = [str(exe)] if exe.is_file() else [sys.executable, "-m", "yunshan.cli"]
    cmd += ["serve", model, "--port", str(port), "--max-batch-size", str(batch_size), "--served-model-name", "m",
            "--dtype", dtype, "--log-level", "warning", "--max-queue", "1024"]
    proc = launch(cmd, log)
    wait_ready(f"http://127.0.0.1:{port}/health", proc, log)
    return proc


def start_llama_cpp(gguf: str, port: int, threads: int, log: Path) -> subprocess.Popen:
    cmd = [sys.executable, "-m", "llama_cpp.server", "--model", gguf, "--model_alias", "m", "--host", "127.0.0.1",
           "--port", str(port), "--n_threads", str(threads), "--n_threads_batch", str(threads), "--n_ctx", "2048",
           "--interrupt_requests", "False"]
    # ggml's CPU threads are OpenMP threads: passive waiting, as yunshan sets for torch (yunshan/__init__.py), or on a
    # shared machine each of them spins while the other waits for a core (28-62 s instead of 1.9 s for one answer).
    proc = launch(cmd, log, env={**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")})
    wait_ready(f"http://127.0.0.1:{port}/v1/models", proc, log)
    return proc


def one_request(client, question: str, stream: bool, max_tokens: int, extra: dict | None) -> dict:
    messages = [{"role": "user", "content": question}]
    sent = time.perf_counter()
    first = None
    if stream:
        text, finish, used = "", None, None
        for chunk in client.chat.completions.create(model="m", messages=messages, temperature=0, max_tokens=max_tokens,
                                                    stream=True, stream_options={"include_usage": True},
                                                    extra_body=extra):
            for choice in chunk.choices:
                if choice.delta.content:
                    first = first or time.perf_counter()
                    text += choice.delta.content
                finish = choice.finish_reason or finish
            used = chunk.usage or used
    else:
        answer = client.chat.completions.create(model="m", messages=messages, temperature=0, max_tokens=max_tokens,
                                                extra_body=extra)
        text, finish, used = answer.choices[0].message.content, answer.choices[0].finish_reason, answer.usage
    done = time.perf_counter()
    return {"question": question, "stream": stream, "text": text, "finish": finish,
            "completion_tokens": used.completion_tokens if used else None, "latency": done - sent,
            "ttft": (first - sent) if first else None}


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process and all its descendants (live and waited for)."""
    import psutil

    proc = psutil.Process(pid)
    total = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            t = p.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += t.user + t.system + (t.children_user + t.children_system if p is proc else 0.0)
    return total


def run_load(base_url: str, clients: int, requests: int, max_tokens: int, server_pid: int,
             extra: dict | None = None) -> dict:
    import openai

    client = openai.OpenAI(base_url=base_url, api_key="unused", max_retries=0, timeout=3600)
    one_request(client, QUESTIONS[0], False, 8, extra)  # warm-up
    start = threading.Event()

    def session(number: int) -> list[dict]:
        start.wait()
        # Odd clients stream: with 16 clients and 2 turns every question is asked once streamed and once not.
        return [one_request(client, QUESTIONS[(number + 7 * turn) % len(QUESTIONS)], number % 2 == 1,
                            max_tokens, extra) for turn in range(requests)]

    load_before = os.getloadavg()
    with ThreadPoolExecutor(clients) as pool:
        futures = [pool.submit(session, i) for i in range(clients)]
        cpu_before, client_before = cpu_seconds(server_pid), time.process_time()
        began = time.perf_counter()
        start.set()
        results = [r for f in futures for r in f.result()]
        wall = time.perf_counter() - began
        cpu, client_cpu = cpu_seconds(server_pid) - cpu_before, time.process_time() - client_before
    # A stream without usage (llama-cpp-python's): the tokens of the non-streamed answer to the same question, which
    # greedy decoding makes the same tokens (the texts can still differ where the tokens are not whole UTF-8
    # characters, and are then reported as differing).
    counted = {r["question"]: r["completion_tokens"] for r in results if r["completion_tokens"] and not r["stream"]}
    inferred = 0
    for r in results:
        if r["completion_tokens"] is None and r["question"] in counted:
            r["completion_tokens"], inferred = counted[r["question"]], inferred + 1
    complete = [r for r in results if r["finish"] in ("stop", "length") and r["completion_tokens"]]
    # The same question answered streamed and not must read the same (greedy).
    texts: dict[str, set[str]] = {}
    for r in results:
        texts.setdefault(r["question"], set()).add(r["text"])
    differing = sorted(q for q, t in texts.items() if len(t) > 1)
    latencies = sorted(r["latency"] for r in results)
    ttfts = sorted(r["ttft"] for r in results if r["ttft"] is not None)
    tokens = sum(r["completion_tokens"] or 0 for r in results)
    return {"requests": len(results), "complete": len(complete), "differing_questions": differing,
            "wall_s": wall, "server_cpu_s": cpu, "client_cpu_s": client_cpu, "load_before": load_before,
            "load_after": os.getloadavg(), "tokens_from_non_streamed": inferred, "answers": texts_by_question(results),
            "latency_p50_s": statistics.median(latencies),
            "latency_p99_s": latencies[min(len(latencies) - 1, int(round(0.99 * (len(latencies) - 1))))],
            "ttft_p50_s": statistics.median(ttfts) if ttfts else None, "completion_tokens": tokens,
            "tokens_per_s": tokens / wall, "requests_per_s": len(results) / wall}


def texts_by_question(results: list[dict]) -> dict[str, str]:
    return {r["question"]: r["text"] for r in sorted(results, key=lambda r: r["stream"])}


def stop(proc: subprocess.Popen) -> int:
    proc.send_signal(signal.SIGINT)
    try:
        return proc.wait(120)
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.wait()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / "models/smollm2-135m"), help="model folder (make real-model)")
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--requests", type=int, default=2, help="requests per client")
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[1, 16])
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--llama-cpp-gguf", nargs="+", default=[],
                        help="GGUF exports of the same model to serve with llama.cpp's server, one row each")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2, help="llama.cpp threads")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "serve_load.json"))
    args = parser.parse_args()
    if not (Path(args.model) / "config.json").is_file():
        print(f"no model folder {args.model} (run `make real-model`)", file=sys.stderr)
        return 2

    logs = Path(tempfile.mkdtemp(prefix="serve_load-"))
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    rows: list[dict] = []

    def save() -> None:  # after every row: a run cut short keeps what it measured
        out.write_text(json.dumps({"model": args.model, "clients": args.clients, "requests": args.requests,
                                   "max_tokens": args.max_tokens, "nice": os.nice(0), "threads": args.threads,
                                   "load_average": os.getloadavg(), "rows": rows}, indent=2, ensure_ascii=False),
                       encoding="utf-8")

    for batch in args.batch_sizes:
        port = free_port()
        proc = start_yunshan(args.model, batch, port, args.dtype, logs / f"yunshan-b{batch}.log")
        try:
            row = run_load(f"http://127.0.0.1:{port}/v1", args.clients, args.requests, args.max_tokens, proc.pid)
        finally:
            code = stop(proc)
        rows.append({"server": f"yunshan serve --max-batch-size {batch}", "exit_code": code, **row})
        save()
    if args.llama_cpp_gguf:
        try:
            import llama_cpp.server  # noqa: F401
        except ImportError:
            print("llama-cpp-python[server] is not installed: no llama.cpp row", file=sys.stderr)
            args.llama_cpp_gguf = []
    for gguf in args.llama_cpp_gguf:
        port = free_port()
        proc = start_llama_cpp(gguf, port, args.threads, logs / f"llama-cpp-{Path(gguf).stem}.log")
        try:
            # repeat_penalty 1.0: llama-cpp-python's default (1.1) is no greedy decoding
            row = run_load(f"http://127.0.0.1:{port}/v1", args.clients, args.requests, args.max_tokens, proc.pid,
                           extra={"repeat_penalty": 1.0})
        finally:
            code = stop(proc)
        rows.append({"server": f"llama.cpp server {Path(gguf).name}", "exit_code": code, **row})
        save()
    for r in rows:
        r["same_answers_as_first_row"] = sum(r["answers"].get(q) == t for q, t in rows[0]["answers"].items())

    print(f"\n{args.clients} clients x {args.requests} requests, max_tokens {args.max_tokens}, model {args.model}, "
          f"nice {os.nice(0)}\n")
    print("| server | answered | wall s | server CPU s | latency p50 s | latency p99 s | TTFT p50 s | tokens/s "
          "| requests/s | same answers as row 1 | load before / after |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        ttft = f"{r['ttft_p50_s']:.2f}" if r["ttft_p50_s"] is not None else "-"
        print(f"| {r['server']} | {r['complete']}/{r['requests']} | {r['wall_s']:.1f} | {r['server_cpu_s']:.1f} | "
              f"{r['latency_p50_s']:.2f} | {r['latency_p99_s']:.2f} | {ttft} | {r['tokens_per_s']:.1f} | "
              f"{r['requests_per_s']:.2f} | {r['same_answers_as_first_row']}/{len(rows[0]['answers'])} | "
              f"{r['load_before'][0]:.1f} / {r['load_after'][0]:.1f} |")
    for r in rows:
        if r["tokens_from_non_streamed"]:
            print(f"note: {r['server']}: {r['tokens_from_non_streamed']} streamed answers carried no usage; their tokens "
                  "are those of the non-streamed answer to the same question")
        if r["differing_questions"]:
            print(f"note: {r['server']}: streamed and non-streamed answers differ for {r['differing_questions']}")
        if r["exit_code"] != 0:
            print(f"note: {r['server']} exited with {r['exit_code']} after SIGINT")
    save()
    print(f"\nwrote {out}")
    return 0 if all(r["complete"] == r["requests"] and r["exit_code"] == 0 for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
