"""Re-sharding a checkpoint for the Hub: peak memory and wall time of `yunshan export` vs transformers' own route
(from_pretrained + save_pretrained), on the same checkpoint and shard size (not a timed test).

    .venv/bin/python benchmarks/export_memory.py            # a ~680 MB float32 Llama into 50 MB shards, 3 rounds
    .venv/bin/python benchmarks/export_memory.py --quick    # ~170 MB, 2 rounds

The source is a Llama (a transformers architecture, so both routes can load it) saved as one float32
model.safetensors with its tokenizer. Each measurement is a fresh process: its peak resident memory is its VmHWM
(/proc/self/status), which counts the memory-mapped file pages it touched as well as its own allocations, for both
routes alike; a process that only imports torch, transformers and yunshan gives the baseline that is subtracted.
Cases: re-shard (float32 -> --shard-size shards) and re-shard with conversion to bfloat16. The two routes run in
alternating order in every round (the machine is shared and noisy); the table gives medians and the ratio of
medians, and both routes must write the same tensors in the same number of shards. yunshan holds one output shard at a time
(its sources are opened per shard), transformers the whole model. Results go to benchmarks/results/export_memory.json.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

BASELINE = "import torch, transformers, yunshan, yunshan.hub.export\nfrom transformers import AutoModelForCausalLM"
YUNSHAN = """
from yunshan.hub.export import export_model
export_model({src!r}, {out!r}, max_shard_size={shard!r}, dtype={dtype!r}, license="mit", recipe=False)
"""
TRANSFORMERS = """
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
model = AutoModelForCausalLM.from_pretrained({src!r}, dtype=getattr(torch, {dtype!r} or "float32"))
model.save_pretrained({out!r}, max_shard_size={shard!r})
AutoTokenizer.from_pretrained({src!r}).save_pretrained({out!r})
"""


def build_source(folder: Path, layers: int) -> int:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<pad>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(["资产负债表 balance sheet 合同 contract"] * 50, trainer)
    PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>",
                            pad_token="<pad>").save_pretrained(folder)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=32000, hidden_size=1024, intermediate_size=2816, num_hidden_layers=layers,
                         num_attention_heads=8, num_key_value_heads=8, tie_word_embeddings=False)
    model = LlamaForCausalLM(config)
    model.save_pretrained(folder)
    return sum(p.numel() for p in model.parameters())


PEAK = """
for line in open("/proc/self/status"):
    if line.startswith("VmHWM:"):
        print("PEAK_KB", line.split()[1])
"""


def measure(code: str) -> tuple[float, float]:
    """(peak resident MB, wall seconds) of a fresh interpreter running `code`. The peak is the process's own VmHWM
    (Linux): ru_maxrss of a forked child would start from the parent's resident size at fork."""
    start = time.perf_counter()
    result = subprocess.run([sys.executable, "-c", code + PEAK], capture_output=True, text=True)
    wall = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(result.stderr[-3000:])
    return int(result.stdout.split("PEAK_KB", 1)[1].split()[0]) / 1024, wall


def same_output(a: Path, b: Path) -> bool:
    """The same tensors (names, dtypes, values) in the same number of shards. Which shard holds which tensor may
    differ: save_pretrained orders a loaded model's tensors as its checkpoint listed them, yunshan in module order."""
    from safetensors.torch import load_file

    def read(folder: Path) -> tuple[dict, int]:
        shards = sorted(folder.glob("model-*.safetensors"))
        tensors = {}
        for shard in shards:
            tensors.update(load_file(shard))
        return tensors, len(shards)

    (x, nx), (y, ny) = read(a), read(b)
    return nx == ny and x.keys() == y.keys() and all(x[k].dtype == y[k].dtype and (x[k] == y[k]).all() for k in x)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=8, help="Llama layers (hidden 1024): 8 is ~170M params, 680 MB")
    ap.add_argument("--shard-size", default="50MB", help="max_shard_size of both routes")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="2 layers, 2 rounds")
    args = ap.parse_args()
    if args.quick:
        args.layers, args.rounds = 2, 2
    work = Path(tempfile.mkdtemp(prefix="yunshan-export-bench-"))
    src = work / "source"
    params = build_source(src, args.layers)
    size_mb = (src / "model.safetensors").stat().st_size / 1e6
    print(f"source: Llama, {params:,} parameters, {size_mb:,.0f} MB float32, shards of {args.shard_size}", flush=True)
    results: dict = {"baseline": []}
    cases = [("float32", None), ("bfloat16", "bfloat16")]
    for case, _ in cases:
        results[case] = {"yunshan": [], "transformers": []}
    for r in range(args.rounds):
        results["baseline"].append(measure(BASELINE)[0])
        for case, dtype in cases:
            order = ["yunshan", "transformers"] if r % 2 == 0 else ["transformers", "yunshan"]
            for route in order:
                out = work / f"{route}-{case}-{r}"
                code = (YUNSHAN if route == "yunshan" else TRANSFORMERS).format(
                    src=str(src), out=str(out), shard=args.shard_size, dtype=dtype)
                results[case][route].append(measure(textwrap.dedent(code)))
            ours, theirs = work / f"yunshan-{case}-{r}", work / f"transformers-{case}-{r}"
            if not same_output(ours, theirs):
                raise SystemExit(f"round {r}, {case}: the two routes wrote different shards or tensors")
            for folder in (ours, theirs):
                shutil.rmtree(folder)
        print(f"round {r + 1}/{args.rounds} done", flush=True)
    base = statistics.median(results["baseline"])
    rows, summary = [], {}
    for case, _ in cases:
        med = {route: (statistics.median(m for m, _ in runs) - base, statistics.median(w for _, w in runs))
               for route, runs in results[case].items()}
        summary[case] = {route: {"peak_mb_above_baseline": round(m, 1), "wall_s": round(w, 2)}
                         for route, (m, w) in med.items()}
        summary[case]["memory_ratio_transformers_over_yunshan"] = round(
            med["transformers"][0] / max(med["yunshan"][0], 1.0), 2)
        summary[case]["time_ratio_transformers_over_yunshan"] = round(med["transformers"][1] / med["yunshan"][1], 2)
        rows.append(f"| {case} | {med['yunshan'][0]:,.0f} | {med['transformers'][0]:,.0f} | "
                    f"{summary[case]['memory_ratio_transformers_over_yunshan']:.2f}x | {med['yunshan'][1]:.1f} | "
                    f"{med['transformers'][1]:.1f} | {summary[case]['time_ratio_transformers_over_yunshan']:.2f}x |")
    print(f"\nsource {size_mb:,.0f} MB float32; shards {args.shard_size}; baseline process (imports only) "
          f"{base:,.0f} MB; medians of {args.rounds} alternated rounds\n")
    print("| case | yunshan peak MB | transformers peak MB | memory ratio | yunshan s | transformers s | time ratio |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    print("\n".join(rows))
    out = Path(__file__).parent / "results" / "export_memory.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps({
        "source_mb": round(size_mb, 1), "parameters": params, "shard_size": args.shard_size, "rounds": args.rounds,
        "baseline_mb": round(base, 1), "summary": summary, "raw": results, "machine": platform.platform(),
        "cpus": os.cpu_count()}, indent=2))
    print(f"\nwrote {out}")
    shutil.rmtree(work)
    return 0


if __name__ == "__main__":
    sys.exit(main())
