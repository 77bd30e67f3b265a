"""`yunshan plan`'s memory estimate against the peak measured on this machine's CPU, for tiny LLaMA models.

    nice -n 10 .venv/bin/python benchmarks/plan_check.py        # every case under both malloc settings, ~6 minutes
    .venv/bin/python benchmarks/plan_check.py --cases 7M-full 30M-lora

Each case (model size x engine) trains in a process of its own: a LLaMA built from a config (float32, SDPA),
full fine-tuning or LoRA (PEFT, r=16 on every projection), torch's AdamW as transformers' Trainer builds it, the
model's own (plain) loss, 4 sequences of 512 tokens a step, 3 steps (the Adam states exist from the first step's end,
so the peak comes in the second or third). The process's peak resident memory (ru_maxrss) is compared with the plan's
CPU prediction (yunshan.plan.estimate.estimate_memory(..., device="cpu")) plus the process's resident memory just
before the model is built (the interpreter, torch, transformers and PEFT: the same for any model). Both the whole peak
and the training part alone (peak minus that baseline) are compared, the second being the one the estimator makes.
Results: benchmarks/results/plan_check.json and a markdown table; the goal is each within 15%.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as yunshan sets it; must precede importing torch
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

ROOT = Path(__file__).resolve().parents[1]
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
SIZES = {  # about 7M, 34M and 127M parameters (untied embedding and head); 1M for the test that runs this script
    "1M": dict(vocab_size=2048, hidden_size=128, intermediate_size=352, num_hidden_layers=2, num_attention_heads=4,
               num_key_value_heads=2),
    "7M": dict(vocab_size=8192, hidden_size=256, intermediate_size=688, num_hidden_layers=4, num_attention_heads=4,
               num_key_value_heads=2),
    "30M": dict(vocab_size=16384, hidden_size=512, intermediate_size=1376, num_hidden_layers=6,
                num_attention_heads=8, num_key_value_heads=4),
    "100M": dict(vocab_size=32000, hidden_size=768, intermediate_size=2048, num_hidden_layers=12,
                 num_attention_heads=12, num_key_value_heads=4),
}
CASES = {  # name -> (size, engine setting)
    "1M-full": ("1M", "full"),
    "7M-full": ("7M", "full"), "7M-lora": ("7M", "lora"),
    "30M-full": ("30M", "full"), "30M-lora": ("30M", "lora"), "30M-full-checkpointing": ("30M", "full-gc"),
    "100M-full": ("100M", "full"), "100M-lora": ("100M", "lora"),
}
BATCH, SEQ, STEPS, RANK = 4, 512, 3, 16


def rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def setup_of(mode: str):
    from yunshan.plan.estimate import StageSetup

    return StageSetup(micro_batch=BATCH, seq_len=SEQ, gradient_checkpointing=mode == "full-gc", lora=mode == "lora",
                      lora_r=RANK, lora_targets=tuple(TARGETS), loss="plain", precision="float32")


def child(case: str) -> None:
    """One case: train, then print the baseline and the step times as JSON (the parent reads ru_maxrss)."""
    import time

    import peft  # noqa: F401  (imported by every case, so the baseline is the same)
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    size, mode = CASES[case]
    config = LlamaConfig(**SIZES[size], tie_word_embeddings=False, max_position_embeddings=SEQ)
    config._attn_implementation = "sdpa"
    ids = torch.randint(0, config.vocab_size, (BATCH, SEQ))
    baseline = rss_bytes()
    model = LlamaForCausalLM(config)
    if mode == "full-gc":
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if mode == "lora":
        from peft import LoraConfig, get_peft_model

        model = get_peft_model(model, LoraConfig(r=RANK, lora_alpha=2 * RANK, target_modules=TARGETS,
                                                 lora_dropout=0.0))
    model.train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
    times = []
    for _ in range(STEPS):
        start = time.perf_counter()
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - start)
    print(json.dumps({"baseline": baseline, "loss": loss.item(), "step_seconds": times,
                      "parameters": sum(p.numel() for p in model.parameters())}))


# glibc's malloc raises its mmap threshold after the first large free (up to 32 MiB), after which freed tensors stay
# in the heap and count as resident: RSS then exceeds the live bytes by what the allocator keeps. A fixed threshold
# returns every freed tensor to the system, so RSS follows the live bytes, which is what the estimator counts (on GPUs
# the caching allocator's reserve plays the allocator's part: yunshan.plan.estimate.usable_bytes leaves 8% for it).
MALLOC = {"fixed": {"MALLOC_MMAP_THRESHOLD_": "131072"}, "default": {}}


def run_case(case: str, malloc: str = "fixed") -> dict:
    command = [sys.executable, __file__, "--child", case]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")}
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True,
                            env={**env, "OMP_NUM_THREADS": "2", **MALLOC[malloc]})
    out = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)   # this child's own peak, not a maximum over all children
    if status:
        raise SystemExit(f"{case}: the child failed (wait status {status})")
    result = json.loads(out.strip().splitlines()[-1])
    peak = usage.ru_maxrss * 1024
    from transformers import LlamaConfig

    from yunshan.plan.estimate import ModelShape, estimate_memory

    size, mode = CASES[case]
    shape = ModelShape.from_config(LlamaConfig(**SIZES[size], tie_word_embeddings=False))
    memory = estimate_memory(shape, setup_of(mode), "single", 1, device="cpu")
    engine = {"full": "full fine-tuning", "lora": "LoRA r=16", "full-gc": "full fine-tuning, gradient checkpointing"}
    return {"case": case, "malloc": malloc, "size": size, "engine": "one process, " + engine[mode],
            "parameters": shape.parameters,
            "baseline_bytes": result["baseline"], "measured_peak_bytes": peak,
            "predicted_peak_bytes": result["baseline"] + memory.peak,
            "measured_training_bytes": peak - result["baseline"], "predicted_training_bytes": memory.peak,
            "estimate": memory.to_dict(), "step_seconds": result["step_seconds"], "loss": result["loss"]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", nargs="*", default=[c for c in CASES if c != "1M-full"], choices=list(CASES))
    parser.add_argument("--malloc", nargs="*", default=["fixed", "default"], choices=list(MALLOC),
                        help="glibc malloc settings to measure under (fixed: RSS follows the live bytes)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "plan_check.json"))
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child)
        return 0
    rows = []
    for case in args.cases:
        for malloc in args.malloc:
            rows.append(run_case(case, malloc))
            r = rows[-1]
            print(f"{case} ({malloc} malloc): measured {r['measured_peak_bytes'] / 2**20:.0f} MiB, predicted "
                  f"{r['predicted_peak_bytes'] / 2**20:.0f} MiB", file=sys.stderr, flush=True)
    print(format_table(rows))
    path = Path(args.out)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"batch": BATCH, "seq_len": SEQ, "steps": STEPS, "rows": rows}, indent=1))
    print(f"\n{path}")
    return 0


def format_table(rows: list[dict]) -> str:
    lines = ["| model | engine | malloc | baseline MiB | peak measured MiB | peak predicted MiB | ratio "
             "| training measured MiB | training predicted MiB | ratio |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        mib = 2 ** 20
        lines.append(
            f"| {r['size']} ({r['parameters'] / 1e6:.1f}M) | {r['engine']} | {r['malloc']} | "
            f"{r['baseline_bytes'] / mib:.0f} | "
            f"{r['measured_peak_bytes'] / mib:.0f} | {r['predicted_peak_bytes'] / mib:.0f} | "
            f"{r['predicted_peak_bytes'] / r['measured_peak_bytes']:.2f} | {r['measured_training_bytes'] / mib:.0f} | "
            f"{r['predicted_training_bytes'] / mib:.0f} | "
            f"{r['predicted_training_bytes'] / r['measured_training_bytes']:.2f} |")
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
