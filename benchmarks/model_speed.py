"""PanGu-π against transformers' LlamaForCausalLM on this machine's CPU: a benchmark, not a timed test.

    .venv/bin/python benchmarks/model_speed.py                # 1 torch thread, about 17 minutes
    .venv/bin/python benchmarks/model_speed.py --threads 2    # both cores, about 8 minutes
    .venv/bin/python benchmarks/model_speed.py --quick        # smaller sizes, a couple of minutes

(a) Equal depth (same hidden size, heads, layers and vocabulary): training-step tokens/s and greedy decode ms/token
    of PanGu-π (SIAF n=2, one augmented shortcut r=32) over LLaMA. The paper's overhead at equal depth is
    7.86 / 7.56 = 1.04 (Table 4); target <= 1.05.
(b) Equal parameter count, as the paper compares PanGu-π-1B (12 layers, 100,883-token vocabulary) with a deeper
    LLaMA of the same size and a 32,000-token vocabulary: decode latency ratio (paper 13.8 / 15.4 = 0.90; target
    <= 0.92). By default both models are the paper's 1B shapes at half width (hidden 1024) to keep the run short;
    `--full-width` uses hidden 2048.

The two models run alternately, step by step, in one process; each ratio is the median over rounds of the two
sides' times in that round, so a burst of load from other processes on this shared machine hits both alike; a
second LLaMA of the same shape runs in the same rounds as an A/A control, and its ratio to the first shows the
run's noise floor. One torch thread by default, as benchmarks/otce_speed.py: with two threads on this shared
2-core machine every op pays a wake-up of the second (sleeping, OMP_WAIT_POLICY=PASSIVE) thread, tens of
microseconds, which weighs on PanGu-π's extra small ops (the shortcut's d x d/r matmuls and GELU) rather than on
the architecture's arithmetic; `--threads 2` measures that setting. Results go to
benchmarks/results/model_speed.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as yunshan sets it; must precede importing torch
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402
from transformers import DynamicCache, LlamaConfig, LlamaForCausalLM  # noqa: E402

import yunshan  # noqa: E402,F401
from yunshan.models.pangu_pi import PanguPiConfig, PanguPiForCausalLM  # noqa: E402


def count(model) -> int:
    return sum(p.numel() for p in model.parameters())


def train_step_seconds(model, optimizer, batch, seq):
    ids = torch.randint(3, model.config.vocab_size, (batch, seq))
    start = time.perf_counter()
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return time.perf_counter() - start


@torch.inference_mode()
def decode_ms_per_token(model, prompt_len, new_tokens):
    ids = torch.randint(3, model.config.vocab_size, (1, prompt_len))
    cache = DynamicCache(config=model.config)
    out = model(input_ids=ids, past_key_values=cache, use_cache=True)
    token = out.logits[:, -1:].argmax(-1)
    start = time.perf_counter()
    for _ in range(new_tokens):
        out = model(input_ids=token, past_key_values=out.past_key_values, use_cache=True)
        token = out.logits[:, -1:].argmax(-1)
    return 1000 * (time.perf_counter() - start) / new_tokens


def llama_layers_for_equal_params(pangu: PanguPiForCausalLM, llama_vocab: int, hidden, heads, inter) -> int:
    """The LLaMA depth whose parameter count is closest to the PanGu-π model's."""
    target = count(pangu)
    best = None
    for layers in range(1, 200):
        with torch.device("meta"):
            cfg = LlamaConfig(vocab_size=llama_vocab, hidden_size=hidden, intermediate_size=inter,
                              num_hidden_layers=layers, num_attention_heads=heads)
            n = count(LlamaForCausalLM(cfg))
        if best is None or abs(n - target) < abs(best[1] - target):
            best = (layers, n)
    return best[0]


def run_group(models: dict, rounds, do_train, batch, seq, prompt, new_tokens):
    """Alternate the models step by step: one training step each, then decode chunks each, `rounds` times (the
    order reverses every round and every chunk). Ratios are paired: each round's time of a model over the same
    round's time of the first model (the reference), then the median, so a burst of load elsewhere hits all alike.
    A second, identically configured copy of the reference in the group measures the noise floor (A/A ratio)."""
    names = list(models)
    results = {name: {"train_s": [], "decode_ms": []} for name in names}
    optims = {}
    if do_train:
        for name, model in models.items():
            optims[name] = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95))
            model.train()
            train_step_seconds(model, optims[name], batch, seq)  # warm-up
    for model in models.values():
        model.eval()
        decode_ms_per_token(model, prompt, 4)  # warm-up
    for r in range(rounds):
        order = list(models.items())
        if r % 2:
            order.reverse()
        if do_train:
            for name, model in order:
                model.train()
                results[name]["train_s"].append(train_step_seconds(model, optims[name], batch, seq))
        for repeat in range(3):  # decoding is short and noisy: three alternating chunks per round
            for name, model in order if repeat % 2 == 0 else order[::-1]:
                model.eval()
                results[name]["decode_ms"].append(decode_ms_per_token(model, prompt, new_tokens))
    ref = names[0]

    def paired(name, key):
        return statistics.median(b / a for a, b in zip(results[ref][key], results[name][key]))

    summary = {"ratios": {name: {"decode": paired(name, "decode_ms"),
                                 **({"train": paired(name, "train_s")} if do_train else {})}
                          for name in names[1:]}}
    for name, model in models.items():
        row = {"params": count(model), "layers": model.config.num_hidden_layers,
               "vocab": model.config.vocab_size, "decode_ms_per_token": statistics.median(results[name]["decode_ms"])}
        if do_train:
            row["train_tokens_per_s"] = batch * seq / statistics.median(results[name]["train_s"])
        summary[name] = row
    return summary


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="smaller models and fewer rounds")
    parser.add_argument("--full-width", action="store_true", help="(b) at the paper's 1B width (hidden 2048)")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (default 1: no thread-pool wake-up per op; see the module docstring)")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "model_speed.json"))
    args = parser.parse_args(argv)
    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    rounds = args.rounds or (3 if args.quick else 10)

    # (a) equal depth
    hidden, heads, inter, layers, vocab = (512, 8, 1408, 4, 8000) if args.quick else (1024, 16, 2816, 6, 32000)
    shared = dict(vocab_size=vocab, hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers,
                  num_attention_heads=heads, num_key_value_heads=heads, max_position_embeddings=2048)
    pangu = PanguPiForCausalLM(PanguPiConfig(**shared, siaf_terms=2, aug_shortcuts=1, aug_reduction=32))
    llama = LlamaForCausalLM(LlamaConfig(**shared))
    control = LlamaForCausalLM(LlamaConfig(**shared))  # an A/A control: the same LLaMA again, other weights
    batch, seq = (4, 128) if args.quick else (4, 256)
    equal_depth = run_group({"llama": llama, "pangu_pi": pangu, "llama (A/A control)": control},
                            rounds, True, batch, seq, 32, 32)
    del pangu, llama, control

    # (b) equal parameter count: PanGu-π-1B shape (12 layers, 100,883 vocabulary) against a deeper 32k LLaMA.
    hidden_b = 2048 if args.full_width else (512 if args.quick else 1024)
    heads_b = hidden_b // 128
    inter_b = {512: 1408, 1024: 2816, 2048: 5632}[hidden_b]
    pangu_b = PanguPiForCausalLM(PanguPiConfig(
        vocab_size=100883, hidden_size=hidden_b, intermediate_size=inter_b, num_hidden_layers=12,
        num_attention_heads=heads_b, siaf_terms=2, aug_shortcuts=1, aug_reduction=32))
    llama_layers = llama_layers_for_equal_params(pangu_b, 32000, hidden_b, heads_b, inter_b)
    llama_b = LlamaForCausalLM(LlamaConfig(
        vocab_size=32000, hidden_size=hidden_b, intermediate_size=inter_b, num_hidden_layers=llama_layers,
        num_attention_heads=heads_b))
    equal_params = run_group({"llama": llama_b, "pangu_pi": pangu_b}, rounds, False, 0, 0, 32, 32)

    depth_ratios, params_ratios = equal_depth.pop("ratios"), equal_params.pop("ratios")
    ratios = {
        "equal_depth_train_time_ratio": depth_ratios["pangu_pi"]["train"],
        "equal_depth_decode_ratio": depth_ratios["pangu_pi"]["decode"],
        "equal_params_decode_ratio": params_ratios["pangu_pi"]["decode"],
    }
    noise = {"train_time_ratio": depth_ratios["llama (A/A control)"]["train"],
             "decode_ratio": depth_ratios["llama (A/A control)"]["decode"]}
    targets = {"equal_depth_train_time_ratio": 1.05, "equal_depth_decode_ratio": 1.05, "equal_params_decode_ratio": 0.92}

    print(f"\nPanGu-π vs LLaMA on {platform.processor() or platform.machine()}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads, {rounds} alternating rounds, medians\n")
    print("| setting | model | layers | vocab | params | train tokens/s | decode ms/token |")
    print("|---|---|---|---|---|---|---|")
    for label, table in (("(a) equal depth", equal_depth), ("(b) equal params", equal_params)):
        for name, row in table.items():
            train = f"{row['train_tokens_per_s']:.0f}" if "train_tokens_per_s" in row else "-"
            print(f"| {label} | {name} | {row['layers']} | {row['vocab']} | {row['params'] / 1e6:.1f}M | {train} | "
                  f"{row['decode_ms_per_token']:.2f} |")
    print("\n| ratio (PanGu-π / LLaMA time, median of paired rounds) | measured | paper | target |")
    print("|---|---|---|---|")
    paper = {"equal_depth_train_time_ratio": 1.04, "equal_depth_decode_ratio": 1.04, "equal_params_decode_ratio": 0.90}
    for key, value in ratios.items():
        ok = "ok" if value <= targets[key] else "MISSED"
        print(f"| {key} | {value:.3f} | {paper[key]:.2f} | <= {targets[key]:.2f} ({ok}) |")
    print(f"\nA/A control (a second LLaMA of the equal-depth shape over the first, same rounds): training time "
          f"{noise['train_time_ratio']:.3f}, decode {noise['decode_ratio']:.3f}; the distance of these from 1.000 "
          f"is this run's noise floor.")

    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({
        "command": " ".join([Path(sys.argv[0]).name, *(argv if argv is not None else sys.argv[1:])]),
        "torch": torch.__version__, "threads": torch.get_num_threads(), "rounds": rounds,
        "equal_depth": equal_depth, "equal_params": equal_params, "ratios": ratios, "targets": targets,
        "aa_control_ratios": noise,
    }, indent=2))
    print(f"\nwrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
