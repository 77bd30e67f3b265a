"""OTCE against transformers' JambaForCausalLM on this machine's CPU: a benchmark, not a timed test.

    .venv/bin/python benchmarks/otce_speed.py                # about 7 minutes (Jamba's training and prefill dominate)
    .venv/bin/python benchmarks/otce_speed.py --quick        # smaller sizes, under a minute
    .venv/bin/python benchmarks/otce_speed.py --paper-size   # the paper's 281M / 283M pair (hidden 1024, vocab 65,536)

The pair is the paper's own equal-size comparison (Table 1): Jamba `SMSMSMSMAMSMSMSM` against OTCE
`SMSMSMSMAMSMSMAM` (the last block is the Expresser), same hidden size, FFN width, heads, KV groups, state size 16
and Mamba expansion 2, no experts. OTCE runs as yunshan ships it (RoPE on B/C and on attention, SwiTanhDGLU);
Jamba runs transformers' pure-PyTorch path (no mamba-ssm / causal-conv1d kernels are installed, as on any CPU).
By default both are at half the paper's width (hidden 512, vocabulary 32,000) to keep the run short.

(a) Training: tokens/s of a full AdamW step (forward, backward, update), batch x sequence tokens.
(b) Decoding: greedy ms/token after a short prompt, with each model's cache.
(c) Prefill: one forward over 512 -> 4096 tokens (batch 1, no grad), split into time spent in the SSM blocks
    (forward hooks on the mixers) and the rest; the SSM part should grow linearly (constant us/token).

The two models run alternately, step by step, in one process; ratios (OTCE time / Jamba time, target <= 1.0) are
medians over rounds of the two sides' times in that round, so a burst of load from other processes on this
shared machine hits both alike. Results go to benchmarks/results/otce_speed.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import sys
import time
import warnings
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402
from transformers import DynamicCache, JambaConfig, JambaForCausalLM  # noqa: E402

import yunshan  # noqa: E402,F401
from yunshan.models.otce import OtceConfig, OtceForCausalLM  # noqa: E402


def count(model) -> int:
    return sum(p.numel() for p in model.parameters())


def build_pair(hidden: int, vocab: int, heads: int, kv_heads: int):
    shared = dict(vocab_size=vocab, hidden_size=hidden, intermediate_size=4 * hidden, num_attention_heads=heads,
                  num_key_value_heads=kv_heads, mamba_d_state=16, mamba_expand=2, max_position_embeddings=8192)
    jamba = JambaForCausalLM(JambaConfig(
        **shared, num_hidden_layers=8, attn_layer_period=8, attn_layer_offset=4, num_experts=1,
        expert_layer_period=1, expert_layer_offset=0, use_mamba_kernels=False, pad_token_id=0,
    ))
    otce = OtceForCausalLM(OtceConfig(**shared, layer_pattern="SMSMSMSMAMSMSMAM", use_expresser=True))
    for model in (jamba, otce):
        model.config._attn_implementation = "sdpa"
    return jamba, otce


def train_step_seconds(model, optimizer, batch, seq):
    ids = torch.randint(3, model.config.vocab_size, (batch, seq))
    start = time.perf_counter()
    loss = model(input_ids=ids, labels=ids, use_cache=False).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return time.perf_counter() - start


@torch.inference_mode()
def decode_ms_per_token(model, prompt_len, new_tokens):
    ids = torch.randint(3, model.config.vocab_size, (1, prompt_len))
    out = model(input_ids=ids, past_key_values=DynamicCache(config=model.config), use_cache=True)
    token = out.logits[:, -1:].argmax(-1)
    start = time.perf_counter()
    for _ in range(new_tokens):
        out = model(input_ids=token, past_key_values=out.past_key_values, use_cache=True)
        token = out.logits[:, -1:].argmax(-1)
    return 1000 * (time.perf_counter() - start) / new_tokens


class MixerTimer:
    """Wall time spent inside the SSM mixers of a model (forward pre/post hooks; CPU ops are synchronous)."""

    def __init__(self, model):
        self.total = 0.0
        self.handles = []
        for name, module in model.named_modules():
            if name.endswith(".mamba"):
                self.handles.append(module.register_forward_pre_hook(self.start))
                self.handles.append(module.register_forward_hook(self.stop))

    def start(self, module, args):
        self.t0 = time.perf_counter()

    def stop(self, module, args, output):
        self.total += time.perf_counter() - self.t0


@torch.inference_mode()
def prefill_seconds(model, length, timer):
    ids = torch.randint(3, model.config.vocab_size, (1, length))
    timer.total = 0.0
    start = time.perf_counter()
    model(input_ids=ids, use_cache=False, logits_to_keep=1)
    return time.perf_counter() - start, timer.total


def paired_ratio(a_times, b_times):
    """Median over rounds of (b / a) in the same round."""
    return statistics.median(b / a for a, b in zip(a_times, b_times))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller models, shorter sequences, fewer rounds")
    parser.add_argument("--paper-size", action="store_true", help="hidden 1024, vocabulary 65,536 (281M / 283M)")
    parser.add_argument("--rounds", type=int, default=None, help="alternating rounds (default 3, quick 2)")
    parser.add_argument("--train-batch", type=int, default=2)
    parser.add_argument("--train-seq", type=int, default=None, help="training sequence length (default 128)")
    parser.add_argument("--prefill", default=None, help="comma-separated prefill lengths (default 512,...,4096)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (default 1: on this shared 2-core machine two OpenMP threads stall on "
                             "barriers whenever another process holds a core, which made decoding 10-50x slower)")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "otce_speed.json"))
    args = parser.parse_args(argv)
    warnings.filterwarnings("ignore")
    logging.getLogger("transformers").setLevel(logging.ERROR)
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    rounds = args.rounds or (2 if args.quick else 3)
    if args.paper_size:
        hidden, vocab, heads, kv_heads = 1024, 65536, 16, 2
    elif args.quick:
        hidden, vocab, heads, kv_heads = 256, 8000, 4, 2
    else:
        hidden, vocab, heads, kv_heads = 512, 32000, 8, 2
    seq = args.train_seq or (64 if args.quick else 128)
    lengths = [int(x) for x in (args.prefill or ("256,512,1024" if args.quick else "512,1024,2048,4096")).split(",")]
    jamba, otce = build_pair(hidden, vocab, heads, kv_heads)
    names = {"jamba": jamba, "otce": otce}
    results = {name: {"train_s": [], "decode_ms": [], "prefill": {n: [] for n in lengths}} for name in names}

    # (a) training, alternating step by step (first side alternates too).
    optims = {
        name: torch.optim.AdamW(m.parameters(), lr=1e-4, betas=(0.9, 0.98), eps=1e-6) for name, m in names.items()
    }
    for name, model in names.items():
        model.train()
        train_step_seconds(model, optims[name], args.train_batch, seq)  # warm-up
    for r in range(rounds):
        order = list(names.items()) if r % 2 == 0 else list(names.items())[::-1]
        for name, model in order:
            results[name]["train_s"].append(train_step_seconds(model, optims[name], args.train_batch, seq))
        print(f"train round {r + 1}/{rounds}: " + ", ".join(
            f"{n} {results[n]['train_s'][-1]:.2f}s" for n in names), flush=True)
    del optims

    # (b) decoding: three alternating chunks per round.
    for model in names.values():
        model.eval()
        decode_ms_per_token(model, 32, 4)  # warm-up
    for r in range(rounds):
        for repeat in range(3):
            order = list(names.items()) if (r + repeat) % 2 == 0 else list(names.items())[::-1]
            for name, model in order:
                results[name]["decode_ms"].append(decode_ms_per_token(model, 32, 16))

    # (c) prefill, alternating per length.
    timers = {name: MixerTimer(model) for name, model in names.items()}
    for name, model in names.items():
        prefill_seconds(model, 64, timers[name])  # warm-up
    for n in lengths:
        for r in range(rounds):
            order = list(names.items()) if r % 2 == 0 else list(names.items())[::-1]
            for name, model in order:
                results[name]["prefill"][n].append(prefill_seconds(model, n, timers[name]))
        medians = {name: statistics.median(t for t, _ in results[name]["prefill"][n]) for name in names}
        print(f"prefill {n}: " + ", ".join(f"{name} {t:.2f}s" for name, t in medians.items()), flush=True)

    summary = {"ratios": {
        "train_time_ratio": paired_ratio(results["jamba"]["train_s"], results["otce"]["train_s"]),
        "decode_time_ratio": paired_ratio(results["jamba"]["decode_ms"], results["otce"]["decode_ms"]),
        **{f"prefill_{n}_time_ratio": paired_ratio(
            [t for t, _ in results["jamba"]["prefill"][n]], [t for t, _ in results["otce"]["prefill"][n]])
           for n in lengths},
    }}
    for name, model in names.items():
        row = results[name]
        summary[name] = {
            "params": count(model), "layers": model.config.num_hidden_layers,
            "train_tokens_per_s": args.train_batch * seq / statistics.median(row["train_s"]),
            "decode_ms_per_token": statistics.median(row["decode_ms"]),
            "prefill": {
                n: {"total_s": statistics.median(t for t, _ in row["prefill"][n]),
                    "ssm_s": statistics.median(s for _, s in row["prefill"][n])}
                for n in lengths
            },
        }

    print(f"\nOTCE vs Jamba on {platform.processor() or platform.machine()}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads, {rounds} alternating rounds, medians; hidden {hidden}, vocab {vocab}, "
          f"train batch {args.train_batch} x {seq}\n")
    print("| model | layout | params | train tokens/s | decode ms/token |")
    print("|---|---|---|---|---|")
    layouts = {"jamba": "SMSMSMSMAMSMSMSM", "otce": "SMSMSMSMAMSMSMAM (Expresser)"}
    for name in names:
        row = summary[name]
        print(f"| {name} | {layouts[name]} | {row['params'] / 1e6:.1f}M | {row['train_tokens_per_s']:.1f} | "
              f"{row['decode_ms_per_token']:.2f} |")
    print("\n| prefill tokens | Jamba total s | Jamba SSM us/token | OTCE total s | OTCE SSM us/token "
          "| OTCE / Jamba time |")
    print("|---|---|---|---|---|---|")
    for n in lengths:
        j, o = summary["jamba"]["prefill"][n], summary["otce"]["prefill"][n]
        print(f"| {n} | {j['total_s']:.2f} | {1e6 * j['ssm_s'] / n:.0f} | {o['total_s']:.2f} | "
              f"{1e6 * o['ssm_s'] / n:.0f} | {summary['ratios'][f'prefill_{n}_time_ratio']:.3f} |")
    print("\n| ratio (OTCE / Jamba time, median of paired rounds) | measured | target |")
    print("|---|---|---|")
    for key in ("train_time_ratio", "decode_time_ratio"):
        value = summary["ratios"][key]
        print(f"| {key} | {value:.3f} | <= 1.00 ({'ok' if value <= 1.0 else 'MISSED'}) |")

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
        "torch": torch.__version__, "threads": torch.get_num_threads(), "rounds": rounds,
        "hidden": hidden, "vocab": vocab, "train_batch": args.train_batch, "train_seq": seq,
        "raw": results, **summary,
    }, indent=2, default=str))
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
