"""The chunked loss against the plain one: peak resident memory and training tokens/s of `yunshan cpt` and `yunshan
sft` as recipes/smollm2-135m_laws.yaml runs them, on SmolLM2-135M and Gemma-3-270M, side by side in one run.

    nice -n 5 .venv/bin/python benchmarks/chunked_loss.py                        # both models, 3 steps each stage
    .venv/bin/python benchmarks/chunked_loss.py --models smollm2-135m --precisions float32 --steps 2

Every configuration (model x stage x precision x training.loss) trains in a process of its own, so each peak is that
run's own (os.wait4's ru_maxrss of the child: model loading included, as a user sees it). The stages are the laws
recipe's sections with only the model, the step count and `training.loss` changed: CPT LoRA r=64 on every
projection, 2 sequences of 512 tokens x 2 micro-steps a step (laws corpus : general replay 1:1, the real laws corpus
from ../shared/realdata or YUNSHAN_REALDATA); SFT LoRA r=16, 4 packed rows of 512 tokens a step. `--seq-len 2048`
runs the CPT at the issue's 2,048 tokens per sequence (1 sequence x 4 micro-steps). Tokens/s is the trained tokens
per second of the steps after the first (the first pays for allocation). The logged losses of the two losses must
agree within 1e-5 relative in float32 (the table's last column; under bf16 autocast the first step's loss, from the
same weights, is held to it; later steps follow updates whose gradients differ at bf16's rounding in both paths).
Results: benchmarks/results/chunked_loss.json and a markdown table.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as yunshan sets it; must precede importing torch
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "recipes/smollm2-135m_laws.yaml"
REALDATA = Path(os.environ.get("YUNSHAN_REALDATA") or ROOT.parent / "shared" / "realdata")
MODELS = ("smollm2-135m", "gemma3-270m")
REL = 1e-5


# ------------------------------------------------------------------------------------------------ one run (child)


def stage_args(stage: str, model_dir: Path, loss: str, precision: str, steps: int, seq_len: int, out: Path,
               checkpointing: bool = False):
    """The laws recipe's `stage` section on `model_dir` (its own tokenizer: no extension), `steps` steps, with
    gradient checkpointing on or off."""
    from yunshan.pipeline import PipelineRecipe
    from yunshan.pipeline.stages import unprepared
    from yunshan.arguments.recipe import load_recipe
    from yunshan.training.arguments import ModelArgs, TokenizerArgs

    os.environ.setdefault("YUNSHAN_REALDATA", str(REALDATA))
    recipe = unprepared(load_recipe(PipelineRecipe, str(RECIPE)))  # the raw laws corpus
    section = getattr(recipe, stage)
    training = dataclasses.replace(section.training, max_steps=steps, output_dir=str(out), resume="never",
                                   save_steps=10 ** 6, logging_steps=1, warmup_steps=0, precision=precision, loss=loss,
                                   gradient_checkpointing=checkpointing)
    changes = {"model": ModelArgs(name_or_path=str(model_dir)), "tokenizer": TokenizerArgs(path=str(model_dir)),
               "training": training}
    if stage == "cpt":
        if seq_len != section.data.seq_len:  # the issue's 2,048-token sequences: 1 x 4 micro-steps
            training = dataclasses.replace(training, per_device_batch_size=1, gradient_accumulation_steps=4)
            changes["training"] = training
        changes["data"] = dataclasses.replace(section.data, seq_len=seq_len)
        changes["monitor"] = dataclasses.replace(section.monitor, general=[], domain=[])
        changes["warmup"] = dataclasses.replace(section.warmup, enabled="false")
    return dataclasses.replace(section, **changes)


def child(spec: dict) -> None:
    from transformers import TrainerCallback

    class Clock(TrainerCallback):
        def __init__(self):
            self.ends = []

        def on_step_end(self, args, state, control, **kwargs):
            self.ends.append(time.perf_counter())

    clock = Clock()
    args = stage_args(spec["stage"], Path(spec["model"]), spec["loss"], spec["precision"], spec["steps"],
                      spec["seq_len"], Path(spec["out"]), spec.get("checkpointing", False))
    started = time.perf_counter()
    if spec["stage"] == "cpt":
        from yunshan.training.cpt import run_cpt

        run_cpt(args, callbacks=[clock])
    else:
        from yunshan.training.sft import run_sft

        run_sft(args, callbacks=[clock])
    out = Path(spec["out"])
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines() if line.strip()]
    report = json.loads((out / "data_report.json").read_text())
    train = [r for r in log if r.get("event") == "train" and "loss" in r]
    tokens_per_step = (report["tokens_per_step"] if spec["stage"] == "cpt"
                       else report["real_tokens"] / report["rows"] * args.training.per_device_batch_size)
    gaps = [b - a for a, b in zip(clock.ends, clock.ends[1:])]
    Path(spec["result"]).write_text(json.dumps({
        "losses": [r["loss"] for r in train], "tokens_per_step": tokens_per_step,
        "tokens_per_s": tokens_per_step * len(gaps) / sum(gaps) if gaps else None,
        "seconds": time.perf_counter() - started, "loss_mode": report.get("loss"), "precision": report["precision"]}))


# ------------------------------------------------------------------------------------------------ the comparison


def run_child(spec: dict, tmp: Path) -> dict:
    spec = {**spec, "out": str(tmp / "out"), "result": str(tmp / "result.json")}
    command = [sys.executable, __file__, "--child", json.dumps(spec)]
    with open(tmp / "log.txt", "w") as log:
        proc = subprocess.Popen(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
    code = os.waitstatus_to_exitcode(status)
    measured = {"peak_rss_gb": usage.ru_maxrss / 2 ** 20, "cpu_seconds": usage.ru_utime + usage.ru_stime}
    if code:  # recorded, not raised: a plain run killed for memory (SIGKILL from the OOM killer) is a result
        print(f"{spec['model']} {spec['stage']} {spec['precision']} {spec['loss']}: FAILED (exit {code}"
              + (", killed: out of memory?" if code == -9 else "") + "), last lines:\n"
              + (tmp / "log.txt").read_text()[-1500:], flush=True)
        return {**measured, "failed": code, "losses": [], "tokens_per_s": None, "tokens_per_step": None}
    return {**json.loads((tmp / "result.json").read_text()), **measured}


def relative_difference(a: list[float], b: list[float]) -> float | None:
    pairs = list(zip(a, b))
    return max(abs(x - y) / abs(x) for x, y in pairs) if pairs else None


def cell(value, form: str) -> str:
    return "-" if value is None else format(value, form)


def cpu_name() -> str:
    try:
        return next(line.split(":", 1)[1].strip() for line in open("/proc/cpuinfo") if line.startswith("model name"))
    except (OSError, StopIteration):
        return "unknown"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), help="folders under models/ (or paths)")
    parser.add_argument("--stages", nargs="+", default=["cpt", "sft"], choices=["cpt", "sft"])
    parser.add_argument("--precisions", nargs="+", default=None,
                        help="float32 and/or bfloat16 (default: float32, and bfloat16 where the CPU multiplies it fast)")
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--seq-len", type=int, default=512, help="CPT tokens per sequence (the laws recipe: 512)")
    parser.add_argument("--losses", nargs="+", default=["plain", "chunked"], choices=["plain", "chunked"],
                        help="chunked alone where the plain loss would not fit in this machine's memory")
    parser.add_argument("--checkpointing", action="store_true",
                        help="gradient checkpointing on in both runs (the laws recipes' setting)")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(json.loads(args.child))

    from yunshan.loading.precision import fast_bf16

    precisions = args.precisions or (["float32", "bfloat16"] if fast_bf16()[0] else ["float32"])
    models = [Path(m) if "/" in m else ROOT / "models" / m for m in args.models]
    missing = [str(m) for m in models if not (m / "config.json").is_file()]
    if missing:
        raise SystemExit(f"no model folder at {', '.join(missing)}: `make real-model` imports SmolLM2-135M; "
                         "benchmarks/README.md says how Gemma-3-270M is imported")
    results = ROOT / "benchmarks/results"
    results.mkdir(exist_ok=True)
    path = results / "chunked_loss.json"
    # Rows of earlier invocations are kept unless this one measures the same configuration again (one table for
    # runs made model by model); every row says when and with what it was measured.
    kept = json.loads(path.read_text())["rows"] if path.is_file() else []
    rows = []

    def save():
        done = {(r["model"], r["stage"], r["precision"], r["seq_len"], r["checkpointing"]) for r in rows}
        earlier = [r for r in kept if (r["model"], r["stage"], r["precision"], r.get("seq_len"),
                                       r.get("checkpointing", False)) not in done]
        path.write_text(json.dumps({"rows": earlier + rows}, indent=1))
        return earlier + rows

    with tempfile.TemporaryDirectory(prefix="chunked_loss_") as tmp:
        for model in models:
            for stage in args.stages:
                for precision in precisions:
                    runs = {}
                    for loss in args.losses:
                        spec = {"model": str(model), "stage": stage, "loss": loss, "precision": precision,
                                "steps": args.steps, "seq_len": args.seq_len, "checkpointing": args.checkpointing}
                        folder = Path(tmp) / f"{model.name}-{stage}-{precision}-{loss}"
                        folder.mkdir()
                        runs[loss] = run_child(spec, folder)
                        print(f"{model.name} {stage} {precision} {loss}: peak {runs[loss]['peak_rss_gb']:.2f} GB, "
                              f"{cell(runs[loss]['tokens_per_s'], '.0f')} tokens/s, losses {runs[loss]['losses']}",
                              flush=True)
                    absent = {"peak_rss_gb": None, "failed": "not run", "losses": [], "tokens_per_s": None,
                              "tokens_per_step": None}
                    plain, chunked = runs.get("plain", absent), runs.get("chunked", absent)
                    assert chunked.get("failed") or chunked["loss_mode"]["value"] == "chunked", chunked["loss_mode"]
                    rows.append({"model": model.name, "stage": stage, "precision": precision,
                                 "seq_len": args.seq_len if stage == "cpt" else None, "steps": args.steps,
                                 "checkpointing": args.checkpointing,
                                 "measured": time.strftime("%Y-%m-%d %H:%M"), "cpu": cpu_name(),
                                 "plain": plain, "chunked": chunked,
                                 "first_loss_rel": relative_difference(plain["losses"][:1], chunked["losses"][:1]),
                                 "losses_rel": relative_difference(plain["losses"], chunked["losses"])})
                    save()
    rows = save()
    print("\n| model | stage | precision | checkpointing | tokens/step | peak RSS plain | peak RSS chunked | ratio | tokens/s plain "
          "| tokens/s chunked | losses: largest relative difference (first step) |")
    print("|---|---|---|---|---:|---:|---:|---:|---:|---:|---|")
    for r in rows:
        p, c = r["plain"], r["chunked"]
        plain_peak = "not run" if p["peak_rss_gb"] is None else f"{p['peak_rss_gb']:.2f} GB" + (
            " (killed)" if p.get("failed") else "")
        ratio = c["peak_rss_gb"] / p["peak_rss_gb"] if p["peak_rss_gb"] and c["peak_rss_gb"] else None
        print(f"| {r['model']} | {r['stage']} | {r['precision']} | {'on' if r.get('checkpointing') else 'off'} | "
              f"{cell(c['tokens_per_step'], ',.0f')} | "
              f"{plain_peak} | {cell(c['peak_rss_gb'], '.2f')} GB | {cell(ratio, '.2f')} | {cell(p['tokens_per_s'], '.0f')} | "
              f"{cell(c['tokens_per_s'], '.0f')} | {cell(r['losses_rel'], '.1e')} ({cell(r['first_loss_rel'], '.1e')}) |")
    failed = [r for r in rows if (r["losses_rel"] if r["precision"] == "float32" else r["first_loss_rel"]) is not None
              and (r["losses_rel"] if r["precision"] == "float32" else r["first_loss_rel"]) > REL]
    print(f"\nwrote {path}")
    if failed:
        raise SystemExit(f"losses differ by more than {REL} relative: "
                         + ", ".join(f"{r['model']} {r['stage']} {r['precision']}" for r in failed))


if __name__ == "__main__":
    main()
