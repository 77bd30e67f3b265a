"""bf16 evaluation that predicts float32's letters: the SmolLM2 pipeline's evaluation, float32 against --dtype auto.

    .venv/bin/python benchmarks/eval_bf16.py                       # after make real-model (~20 min on 2 cores)
    .venv/bin/python benchmarks/eval_bf16.py --limit 3 --rounds 1  # quicker

`--dtype auto` runs every forward pass under bf16 autocast where the CPU multiplies bf16 in hardware (AMX, AVX-512
BF16); with `--recheck-float32` it then rescores in float32 every multiple-choice question whose two best options are
closer than a guard band (yunshan.eval.likelihood.settle_in_float32: BF16_NATS_PER_SQRT_TOKEN * sqrt(tokens) for each
of the two scores). This script measures both on the real model:

1. The band (in-process): FinEval and FinanceIQ sample questions in cloze mode (0-shot, mutual information, the
   recipe's scoring) on each model, in float32 and in raw bf16 (nothing rescored): for every question, how far bf16
   moved the lead of its best option over the second, in units of the band's sqrt(tokens) sum. The band constant
   must stay above the largest of these; the table gives the median, the 99th percentile and the largest, the
   constant, and how many questions the band sends back to float32.
2. The time and the predictions (fresh processes): `yunshan eval` as recipes/smollm2-135m_pipeline_lora.yaml runs it
   (bits/char of the three held-out texts' first 6,000 characters, FinEval and FinanceIQ cloze with 3 questions per
   subject) with --dtype float32, --dtype auto and --dtype auto --recheck-float32, in rotating order over --rounds;
   the rechecked run's letters must all be float32's (the script exits 1 otherwise), the plain auto run's agreement
   is counted, bits/char are reported with their relative change (bf16 rounds them; they are never rescored), and
   each speed-up is the median over rounds of float32 seconds / that side's seconds.

Models: the imported SmolLM2-135M and, when `make demo-real` has run, its SFT output (runs/smollm2-135m/05_sft,
extended tokenizer). Writes benchmarks/results/eval_bf16.json. On a CPU without fast bf16, `auto` is float32 and
there is nothing to measure: the script says so and stops.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks/results"
HELDOUT = ROOT / "yunshan/samples/data/heldout"


def raw_and_exact(model: str, limit: int) -> list[dict]:
    """Per question: float32 values, raw bf16 values, and the band's sqrt(tokens) sum for the bf16 top two."""
    import dataclasses

    from yunshan.eval import likelihood
    from yunshan.eval.ceval import run_ceval
    from yunshan.eval.cmmlu import run_cmmlu
    from yunshan.eval.loading import load_model
    from yunshan.samples import sample_data_dir

    lm = load_model(model, hash_weights=False)
    bf16 = dataclasses.replace(lm, autocast=True)
    captured: list[tuple[list[list[float]], list[float]]] = []
    real = likelihood.settle_in_float32

    def capture(lm_, values, n_tokens, rescore, scales=None):  # record what bf16 gave, rescore nothing
        units = [likelihood.bf16_band(n, likelihood.best_two(v), scales[i] if scales else None)
                 / likelihood.BF16_NATS_PER_SQRT_TOKEN for i, (v, n) in enumerate(zip(values, n_tokens))]
        captured.append(([list(v) for v in values], units))
        return []

    data = Path(sample_data_dir()) / "eval"
    out = []
    for task, run in (("fineval", run_ceval), ("financeiq", run_cmmlu)):
        split = "val" if task == "fineval" else "test"
        kwargs = dict(split=split, shots=0, mode="cloze", limit=limit, batch_size=16)
        exact = run(lm, data / task, **kwargs)["predictions"]
        likelihood.settle_in_float32 = capture
        try:
            with bf16.compute():
                rough = run(bf16, data / task, **kwargs)["predictions"]
        finally:
            likelihood.settle_in_float32 = real
        _, weights = captured.pop()
        for e, r, w in zip(exact, rough, weights):
            out.append({"task": task, "id": e["id"], "float32": e["logliks"], "bf16": r["logliks"], "band_units": w,
                        "same_letter": e["pred"] == r["pred"]})
    return out


def band_table(rows: list[dict]) -> dict:
    """How far bf16 moved each question's lead, in band units, against the shipped band constant."""
    from yunshan.eval.likelihood import BF16_NATS_PER_SQRT_TOKEN, best_two

    moved, in_band = [], 0
    for row in rows:
        i, j = best_two(row["bf16"])
        lead_bf16 = row["bf16"][i] - row["bf16"][j]
        lead_fp32 = row["float32"][i] - row["float32"][j]
        moved.append(abs(lead_bf16 - lead_fp32) / row["band_units"])
        in_band += lead_bf16 <= BF16_NATS_PER_SQRT_TOKEN * row["band_units"]
    moved.sort()
    return {"questions": len(rows), "letters_differ_raw_bf16": sum(not r["same_letter"] for r in rows),
            "moved_max": moved[-1], "moved_p99": moved[int(0.99 * (len(moved) - 1))],
            "moved_median": statistics.median(moved), "constant": BF16_NATS_PER_SQRT_TOKEN,
            "rescored_by_band": in_band}


SIDES = {"float32": ["--dtype", "float32"], "auto": ["--dtype", "auto"],
         "recheck": ["--dtype", "auto", "--recheck-float32"]}


def eval_command(model: str, out: Path, side: str) -> list[str]:
    return [sys.executable, "-c", "import sys; from yunshan.cli import main; sys.exit(main())", "eval",
            "--model", model, "--tasks", "bpc", "fineval", "financeiq", "--mode", "cloze", "--shots", "0",
            *(a for name in ("general", "finance", "legal") for a in ("--heldout", f"{name}={HELDOUT / name}.txt")),
            "--limit", "3", "--max-chars", "6000", "--max-length", "1024", "--batch-size", "16", *SIDES[side],
            "--no-progress", "--out", str(out)]


def timed(cmd: list[str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True,
                          env=dict(os.environ, TRANSFORMERS_VERBOSITY="error"))
    if done.returncode:
        sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
        raise SystemExit(f"yunshan eval failed ({done.returncode})")
    return time.perf_counter() - started


def compare(fp32: dict, other: dict) -> dict:
    """Predicted letters equal to float32's, questions rescored, and each bits/char's relative change."""
    letters = same = rescored = 0
    for task in ("fineval", "financeiq"):
        for model, result in fp32["tasks"][task]["results"].items():
            theirs = other["tasks"][task]["results"][model]
            for p, q in zip(result["predictions"], theirs["predictions"]):
                letters += 1
                same += p["pred"] == q["pred"]
            rescored += theirs.get("rescored_float32", 0)
    bpc = {}
    for model, result in fp32["tasks"]["bpc"]["results"].items():
        for label, f in result["files"].items():
            g = other["tasks"]["bpc"]["results"][model]["files"][label]
            bpc[label] = (g["bpc"] - f["bpc"]) / f["bpc"]
    return {"questions": letters, "same_letter": same, "rescored": rescored, "bpc_relative_change": bpc}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", action="append", help="model folders (default: SmolLM2 and its demo-real SFT)")
    parser.add_argument("--limit", type=int, default=8, help="questions per subject for the band (part 1)")
    parser.add_argument("--rounds", type=int, default=1, help="float32/auto pairs per model (part 2)")
    args = parser.parse_args()

    from yunshan.loading.precision import eval_autocast

    _, fast, why = eval_autocast("auto")
    if not fast:
        print(f"--dtype auto is float32 on this machine ({why}): nothing to compare")
        return 0
    models = args.model or [str(p) for p in (ROOT / "models/smollm2-135m", ROOT / "runs/smollm2-135m/05_sft")
                            if (p / "config.json").is_file()]
    if not models:
        raise SystemExit("no model: run `make real-model` first")
    report = {"cpu": platform.processor() or platform.machine(), "auto": why, "cores": os.cpu_count(),
              "models": {}}
    failed = False
    for model in models:
        name = Path(model).name
        rows = raw_and_exact(model, args.limit)
        band = band_table(rows)
        runs = RESULTS / "eval_bf16_runs" / name
        pairs = []
        for r in range(args.rounds):
            order = list(SIDES)[r % 3:] + list(SIDES)[:r % 3]
            pairs.append({side: timed(eval_command(model, runs / side, side)) for side in order})
        results = {side: json.loads((runs / side / "results.json").read_text()) for side in SIDES}
        sides = {side: compare(results["float32"], results[side]) for side in ("auto", "recheck")}
        for side in sides:
            sides[side]["speedup"] = statistics.median(p["float32"] / p[side] for p in pairs)
        failed |= sides["recheck"]["same_letter"] != sides["recheck"]["questions"]
        report["models"][name] = {"band": band, "seconds": pairs, "sides": sides, "rows": rows}
        print(f"\n{name}: {band['questions']} questions for the band (--limit {args.limit})")
        print("| raw bf16 letters differing | lead moved (band units): median | p99 | max | constant | "
              "rescored by the band |")
        print("|---:|---:|---:|---:|---:|---:|")
        print(f"| {band['letters_differ_raw_bf16']} | {band['moved_median']:.4f} | {band['moved_p99']:.4f} | "
              f"{band['moved_max']:.4f} | {band['constant']} | {band['rescored_by_band']} of {band['questions']} |")
        print("| eval | seconds | speed-up vs float32 | letters equal to float32's | rescored | bpc change "
              "(general, finance, legal) |")
        print("|---|---:|---:|---:|---:|---|")
        print(f"| float32 | {pairs[-1]['float32']:.1f} | 1.00x | | | |")
        for side, label in (("auto", "auto"), ("recheck", "auto --recheck-float32")):
            c = sides[side]
            print(f"| {label} | {pairs[-1][side]:.1f} | {c['speedup']:.2f}x | {c['same_letter']} of {c['questions']} | "
                  f"{c['rescored']} | " + ", ".join(f"{100 * v:+.3f}%" for v in c["bpc_relative_change"].values())
                  + " |")
        RESULTS.mkdir(parents=True, exist_ok=True)
        (RESULTS / "eval_bf16.json").write_text(json.dumps(report, indent=1) + "\n")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "eval_bf16.json").write_text(json.dumps(report, indent=1) + "\n")
    print(f"\nwrote {RESULTS / 'eval_bf16.json'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
