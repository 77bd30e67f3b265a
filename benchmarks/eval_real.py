"""The SmolLM2 pipeline's evaluation, this checkout against an older one: seconds and identical scores.

    .venv/bin/python benchmarks/eval_real.py                 # old = f462bf6 (before the eval speed-ups), ~20 min
    .venv/bin/python benchmarks/eval_real.py --old REV --limit 10

Runs the evaluation that `recipes/smollm2-135m_pipeline_lora.yaml` runs before and after training (held-out
bits/char on general, finance and legal text, FinEval and FinanceIQ samples in cloze mode, 0-shot, --limit
documents/questions per subject, max_length 1024) on the imported SmolLM2-135M (`make real-model`), once with the
code of revision --old (extracted with `git archive` into a temporary folder and put first on PYTHONPATH, same venv,
same libraries) and once with this checkout, in float32 on both sides so the scores can be compared to the last
bit. The two sides alternate (old, new, new, old, ... over --rounds pairs) in fresh processes; the speed-up is the
median of the per-pair ratios of wall-clock seconds (the machine is shared: each pair ran under the same load).
Every prediction must be the same letter and every bits-per-character figure equal within 1e-5 (relative): the
script exits 1 otherwise; the largest difference between the two sides' option log-likelihoods is reported (the
shared-prefix attention sums in another order than one plain forward: float32 rounding, ~1e-5 relative). A last run with `--dtype auto` (bf16 autocast where the CPU has it fast)
is timed too and compared with the new float32 run: how many predicted letters agree per task and how far each
bits-per-character figure moved (bf16 rounds every matrix product's inputs, so they are not required to be identical). Writes
benchmarks/results/eval_real.json.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks/results"
TOLERANCE = 1e-5


def eval_command(model: Path, out: Path, limit: int, dtype: str) -> list[str]:
    heldout = ROOT / "yunshan/samples/data/heldout"
    return [sys.executable, "-c", "import sys; from yunshan.cli import main; sys.exit(main())", "eval",
            "--model", str(model), "--tasks", "bpc", "fineval", "financeiq", "--mode", "cloze", "--shots", "0",
            *(a for name in ("general", "finance", "legal") for a in ("--heldout", f"{name}={heldout / name}.txt")),
            "--limit", str(limit), "--max-length", "1024", "--batch-size", "16", "--dtype", dtype,
            "--no-progress", "--out", str(out)]


def timed(cmd: list[str], code: Path | None) -> tuple[float, float]:
    """Wall and CPU seconds of one fresh process; `code` first on PYTHONPATH (the old revision)."""
    env = dict(os.environ, HF_HUB_OFFLINE="1", HF_DATASETS_OFFLINE="1", TRANSFORMERS_VERBOSITY="error")
    if code is not None:
        env["PYTHONPATH"] = str(code)
    before = os.times()
    started = time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=code or ROOT, capture_output=True, text=True)
    wall = time.perf_counter() - started
    after = os.times()
    if done.returncode:
        sys.stderr.write(done.stdout[-3000:] + done.stderr[-3000:])
        raise SystemExit(f"{' '.join(cmd[3:6])}... failed ({done.returncode})")
    return wall, (after.children_user - before.children_user) + (after.children_system - before.children_system)


def loglik_deviation(a, b) -> tuple[float, float]:
    """Largest absolute and relative difference between the two sides' option log-likelihoods."""
    worst_abs = worst_rel = 0.0
    for task, entry in a.items():
        for model, result in entry.get("results", {}).items():
            others = b[task]["results"][model].get("predictions") or []
            for p, q in zip(result.get("predictions") or [], others):
                for x, y in zip(p.get("logliks") or [], q.get("logliks") or []):
                    worst_abs = max(worst_abs, abs(x - y))
                    worst_rel = max(worst_rel, abs(x - y) / max(abs(x), 1e-12))
    return worst_abs, worst_rel


def differences(a, b, path: str = "") -> list[str]:
    """Where two results.json task trees differ: any prediction, or a number beyond TOLERANCE (relative)."""
    if isinstance(a, dict) and isinstance(b, dict):
        found = []
        for key in sorted(set(a) | set(b)):
            if key in ("path", "seconds", "metrics", "logliks"):  # logliks: see loglik_deviation
                continue
            if key == "files" and not isinstance(a.get(key), dict):  # the input files' hashes, not bpc's per file
                continue
            if key not in a or key not in b:
                found.append(f"{path}/{key}: only on one side")
            else:
                found += differences(a[key], b[key], f"{path}/{key}")
        return found
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} vs {len(b)} items"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]")]
    if isinstance(a, float) or isinstance(b, float):
        if isinstance(a, (int, float)) and isinstance(b, (int, float)) and (
                math.isclose(a, b, rel_tol=TOLERANCE, abs_tol=TOLERANCE)):
            return []
        return [f"{path}: {a!r} vs {b!r}"]
    return [] if a == b else [f"{path}: {a!r} vs {b!r}"]


def agreement(reference, other) -> dict:
    """Per task: how many predicted letters `other` shares with `reference` (the --dtype auto run against the
    float32 one), and per held-out file the relative difference of bits per character."""
    out = {}
    for task, entry in reference.items():
        for model, result in entry.get("results", {}).items():
            theirs = other[task]["results"][model]
            if result.get("predictions"):
                pairs = list(zip(result["predictions"], theirs.get("predictions") or []))
                same = sum(p.get("pred") == q.get("pred") for p, q in pairs)
                out[task] = {"same": same, "questions": len(pairs)}
            for label, f in (result.get("files") or {}).items():
                g = theirs["files"][label]
                out[f"{task}/{label}"] = {"bpc": f["bpc"], "other": g["bpc"], "rel": (g["bpc"] - f["bpc"]) / f["bpc"]}
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / "models/smollm2-135m"), help="HF folder (make real-model)")
    parser.add_argument("--old", default="f462bf6", help="git revision to compare against")
    parser.add_argument("--limit", type=int, default=40, help="documents per held-out file, questions per subject")
    parser.add_argument("--rounds", type=int, default=1, help="old/new pairs")
    args = parser.parse_args()
    model = Path(args.model).resolve()
    if not (model / "config.json").is_file():
        print(f"{model}: no model; run `make real-model` first", file=sys.stderr)
        return 1
    work = Path(tempfile.mkdtemp(prefix="eval_real-"))
    try:
        old = work / "old"
        old.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.old], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive.stdout, check=True)
        for package in ("eval", "tokenizer"):  # installed as yunshan.eval / yunshan.tokenizer (pyproject package-dir)
            if (old / package).is_dir():
                (old / package).rename(old / "yunshan" / package)
        revision = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                                  text=True).stdout.strip()
        pairs, outs = [], {}
        for r in range(args.rounds):
            times = {}
            for side in (("old", "new") if r % 2 == 0 else ("new", "old")):
                out = work / f"{side}{r}"
                times[side] = timed(eval_command(model, out, args.limit, "float32"), old if side == "old" else None)
                outs[side] = out
                print(f"round {r + 1} {side}: {times[side][0]:.1f} s wall, {times[side][1]:.1f} s CPU", flush=True)
            pairs.append(times)
        old_tasks = json.loads((outs["old"] / "results.json").read_text())["tasks"]
        new_tasks = json.loads((outs["new"] / "results.json").read_text())["tasks"]
        diff = differences(old_tasks, new_tasks)
        deviation = loglik_deviation(old_tasks, new_tasks)
        auto = timed(eval_command(model, work / "auto", args.limit, "auto"), None)
        auto_json = json.loads((work / "auto/results.json").read_text())
        auto_models = auto_json["models"]
        agree = agreement(new_tasks, auto_json["tasks"])
        auto_precision = next(iter(auto_models.values())).get("precision")
        print(f"new, --dtype auto ({auto_precision}): {auto[0]:.1f} s wall")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ratio = statistics.median(p["old"][0] / p["new"][0] for p in pairs)
    rows = [("old (" + args.old + "), float32", statistics.median(p["old"][0] for p in pairs),
             statistics.median(p["old"][1] for p in pairs)),
            (f"new ({revision}), float32", statistics.median(p["new"][0] for p in pairs),
             statistics.median(p["new"][1] for p in pairs)),
            (f"new ({revision}), --dtype auto: {auto_precision}", auto[0], auto[1])]
    print("\n| code | eval wall s | CPU s |\n|---|---:|---:|")
    for name, wall, cpu in rows:
        print(f"| {name} | {wall:.1f} | {cpu:.1f} |")
    print(f"\nspeed-up old/new (float32, median of {len(pairs)} pair(s)): {ratio:.2f}x; "
          f"predictions and bits/char {'identical (within 1e-5)' if not diff else f'DIFFER in {len(diff)} places'}"
          f"; option log-likelihoods differ by at most {deviation[0]:.2e} (relative {deviation[1]:.2e})")
    for line in diff[:20]:
        print("  ", line)
    old_wall = statistics.median(p["old"][0] for p in pairs)
    print(f"\n--dtype auto against float32 (new code): {old_wall / auto[0]:.2f}x faster than old float32, "
          f"{statistics.median(p['new'][0] for p in pairs) / auto[0]:.2f}x than new float32")
    for key, a in agree.items():
        if "same" in a:
            print(f"  {key}: {a['same']} of {a['questions']} predictions as in float32")
        else:
            print(f"  {key}: bits/char {a['bpc']:.5f} (float32) vs {a['other']:.5f} ({100 * a['rel']:+.3f}%)")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "eval_real.json").write_text(json.dumps({
        "model": model.name, "old": args.old, "new": revision, "limit": args.limit, "pairs": pairs,
        "speedup": ratio, "loglik_max_abs": deviation[0], "loglik_max_rel": deviation[1], "auto": {"precision": auto_precision, "wall": auto[0], "cpu": auto[1],
                                                        "against_float32": agree},
        "differences": diff, "cpu": platform.processor() or platform.machine(), "cores": os.cpu_count()},
        indent=2))
    return 1 if diff else 0


if __name__ == "__main__":
    sys.exit(main())
