"""LawBench's published scores from LawBench's published predictions, through yunshan's scorer. A benchmark, not a test.

    .venv/bin/python benchmarks/lawbench_agreement.py ../shared/realdata/lawbench/predictions/zero_shot \\
        ../shared/realdata/lawbench/predictions/zero_shot/results.csv
    .venv/bin/python benchmarks/lawbench_agreement.py LawBench/predictions/zero_shot LawBench/predictions/zero_shot/results.csv

PREDICTIONS_DIR holds one folder per model with `{task}.json` prediction files (`{"0": {origin_prompt, prediction,
refr}, ...}`, as LawBench publishes them); RESULTS_CSV is LawBench's `task,model_name,score,abstention_rate`. Every
(model, task) pair with both is scored by `yunshan.eval.lawbench_scoring.score_task` (2-1 through yunshan's ChERRANT,
with ChERRANT's data files from `--cherrant-data`, $YUNSHAN_CHERRANT_DATA, the LawBench checkout holding
PREDICTIONS_DIR, or else as yunshan ships them). Prints, per task, the largest |yunshan - published| over the models (points, x100) and
the largest difference of abstention rates, then every pair beyond 0.1 point; writes every pair to
benchmarks/results/lawbench_agreement[_NAME].json (`--name`).

Abstention rates are compared with what LawBench's main.py reports: tasks whose evaluation function returns no
`abstention_rate` (ROUGE tasks, 2-1, 2-5, 2-10, and 2-6, whose function spells the key `anstention_rate`) are 0 in
results.csv whatever the predictions; yunshan's own count is kept in the JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
TOLERANCE = 0.1  # points (scores x100)

# Tasks whose LawBench evaluation function returns an "abstention_rate" that main.py copies into results.csv.
REPORTED_ABSTENTION = {"1-2", "2-2", "2-3", "2-4", "2-8", "2-9", "3-1", "3-3", "3-4", "3-5", "3-6", "3-7"}


def score_pairs(pred_dir: Path, published: dict, models: list[str] | None, tasks: list[str] | None,
                cherrant, log=print) -> list[dict]:
    from yunshan.eval.lawbench import load_predictions
    from yunshan.eval.lawbench_scoring import TASKS, score_task

    gold_cache: dict = {}
    rows = []
    folders = sorted(p for p in pred_dir.iterdir() if p.is_dir() and not p.name.startswith("."))
    for folder in folders:
        if models and folder.name not in models:
            continue
        started = time.process_time()
        for path in sorted(folder.glob("*.json"), key=lambda p: [int(x) for x in p.stem.split("-")]
                           if p.stem in TASKS else [99]):
            task, model = path.stem, folder.name
            if task not in TASKS or (tasks and task not in tasks):
                continue
            row = {"model": model, "task": task}
            pub = published.get((model, task))
            if pub is not None:
                row.update(published=pub["score"], published_abstention=pub["abstention_rate"])
            try:
                data = load_predictions(path)
                scored = score_task(task, data["predictions"], data["answers"], data["prompts"], source=str(path),
                                    where=data["where"], prompt_field="origin_prompt", cherrant=cherrant,
                                    gold_cache=gold_cache)
            except Exception as err:  # a refused file is a finding: reported, and the rest still scored
                row["error"] = f"{type(err).__name__}: {err}"
                rows.append(row)
                log(f"  {model} {task}: refused: {row['error']}")
                continue
            n = len(data["answers"])
            row.update(yunshan=100.0 * scored.score, n=n, abstentions=scored.abstentions,
                       abstention=100.0 * scored.abstentions / n, skipped=scored.skipped)
            row["reported_abstention"] = row["abstention"] if task in REPORTED_ABSTENTION else 0.0
            if scored.details:
                row["details"] = scored.details
            if pub is not None:
                row["gap"] = abs(row["yunshan"] - row["published"])
                row["abstention_gap"] = abs(row["reported_abstention"] - row["published_abstention"])
            rows.append(row)
        log(f"  {folder.name}: {time.process_time() - started:.1f} CPU s")
    return rows


def task_table(rows: list[dict]) -> tuple[str, list[dict]]:
    from yunshan.eval.lawbench_scoring import TASKS

    lines = ["| task | name | pairs | within 0.1 | max abs. diff (points) | model | abstention max diff |",
             "|---|---|---:|---:|---:|---|---:|"]
    summary = []
    for task in TASKS:
        own = [r for r in rows if r["task"] == task and "gap" in r]
        refused = [r for r in rows if r["task"] == task and "error" in r]
        if not own and not refused:
            continue
        worst = max(own, key=lambda r: r["gap"]) if own else None
        within = sum(r["gap"] <= TOLERANCE for r in own)
        entry = {"task": task, "pairs": len(own), "within": within, "refused": len(refused),
                 "max_gap": worst["gap"] if worst else None, "worst_model": worst["model"] if worst else None,
                 "max_abstention_gap": max((r["abstention_gap"] for r in own), default=None)}
        summary.append(entry)
        gap = f"{entry['max_gap']:.4f}" if worst else "-"
        abst = f"{entry['max_abstention_gap']:.2f}" if own else "-"
        pairs = f"{len(own)}" + (f" (+{len(refused)} refused)" if refused else "")
        lines.append(f"| {task} | {TASKS[task][1]} | {pairs} | {within} | {gap} | {worst['model'] if worst else '-'} "
                     f"| {abst} |")
    return "\n".join(lines), summary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("predictions_dir", type=Path, help="folder of model folders of {task}.json predictions")
    parser.add_argument("results_csv", type=Path, help="LawBench's results.csv (task,model_name,score,abstention_rate)")
    parser.add_argument("--models", nargs="*", help="only these model folders")
    parser.add_argument("--tasks", nargs="*", help="only these task ids")
    parser.add_argument("--cherrant-data", type=Path, help="ChERRANT's data folder (cilin.txt, confusion_dict.txt); "
                        "default: $YUNSHAN_CHERRANT_DATA, the LawBench checkout holding PREDICTIONS_DIR, or "
                        "yunshan's shipped copy")
    parser.add_argument("--name", default="", help="suffix of the JSON file name (lawbench_agreement_NAME.json)")
    args = parser.parse_args(argv)

    from yunshan.eval.cherrant import CharAnnotator, find_resource_dir, load_resources
    from yunshan.eval.lawbench import load_published_scores

    wall, cpu = time.perf_counter(), time.process_time()
    published = load_published_scores(args.results_csv)
    data_dir = args.cherrant_data or find_resource_dir(args.predictions_dir)
    cherrant = CharAnnotator(load_resources(data_dir))
    print(f"ChERRANT data: {data_dir}")
    rows = score_pairs(args.predictions_dir, published, args.models, args.tasks, cherrant)
    table, summary = task_table(rows)
    compared = [r for r in rows if "gap" in r]
    beyond = sorted((r for r in compared if r["gap"] > TOLERANCE), key=lambda r: (r["task"], -r["gap"]))
    refused = [r for r in rows if "error" in r]
    unpublished = [r for r in rows if "published" not in r and "error" not in r]
    models = sorted({r["model"] for r in rows})
    seconds, cpu_seconds = time.perf_counter() - wall, time.process_time() - cpu
    print()
    print(table)
    print(f"\n{sum(r['gap'] <= TOLERANCE for r in compared)} of {len(compared)} (model, task) pairs within "
          f"{TOLERANCE} point, {len(models)} models; {len(refused)} files refused; {len(unpublished)} scored files "
          f"without a published score; {seconds:.0f} s wall, {cpu_seconds:.0f} CPU s")
    for r in beyond:
        print(f"  beyond {TOLERANCE}: {r['model']} {r['task']}: yunshan {r['yunshan']:.4f}, published "
              f"{r['published']:.4f} (diff {r['gap']:.4f})")
    for r in refused:
        print(f"  refused: {r['model']} {r['task']}: {r['error']}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    out = RESULTS / f"lawbench_agreement{'_' + args.name if args.name else ''}.json"
    out.write_text(json.dumps({
        "predictions_dir": str(args.predictions_dir), "results_csv": str(args.results_csv),
        "cherrant_data": str(data_dir) if data_dir else None, "tolerance": TOLERANCE, "models": models,
        "pairs": len(compared), "within": sum(r["gap"] <= TOLERANCE for r in compared), "tasks": summary,
        "seconds": round(seconds, 1), "cpu_seconds": round(cpu_seconds, 1), "rows": rows,
    }, ensure_ascii=False, indent=1), encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
