"""What the real instruction train sets share with their held-out sets and with the benchmarks the recipes evaluate:
`yunshan data decontaminate`'s engine on every file of ../shared/realdata/sft. A measurement, not a test.

    .venv/bin/python benchmarks/sft_decontamination.py            # 30 s here; writes runs/sft_decontamination
    .venv/bin/python benchmarks/sft_decontamination.py --boilerplate-train 4 --out runs/sft_decontamination_bp4

Training data: the ten train files of ../shared/realdata/sft, each read as `yunshan sft` reads it, with the format and
columns of its data card's recipe entry (data_cards/). Evaluation sets: the ten held-out files as instruction sets (what `eval.instructions`
scores with chat_loss), LawBench (zero-shot, 20 tasks), FinEval (dev and val), CMMLU (dev and test), FinanceIQ (dev
and test) and the Civil Code as a held-out text: the benchmarks the real recipes evaluate. Windows of 13 words or 25
CJK characters, boilerplate left out, a record listed when it alone holds at least half of an item (the defaults of
`yunshan data decontaminate`: docs/decontamination.md). Per train source: records, records sharing any window with an
item, records listed (what `data.exclude` / `decontamination: {drop: true}` leaves out of SFT) and what the listed
records hold half of, set by set. Prints the markdown table and writes benchmarks/results/sft_decontamination.json.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]
REALDATA = Path(os.environ.get("YUNSHAN_REALDATA") or ROOT.parent / "shared" / "realdata")

BENCHMARKS = {"lawbench": "lawbench/data/zero_shot", "fineval": "fineval", "cmmlu": "cmmlu", "financeiq": "financeiq"}


def real_sources() -> dict[str, dict]:
    """Each real source's recipe entry as its data card gives it (name, ${realdata}/sft/... train path, format,
    columns), in the order of ../shared/realdata/sft/MANIFEST.json."""
    import yaml

    entries = {}
    for card in sorted((ROOT / "data_cards").glob("*.md")):
        if card.name != "README.md":
            entry = yaml.safe_load(card.read_text(encoding="utf-8").split("---\n")[1])["yunshan"].get("recipe_source")
            if entry and str(entry["path"]).startswith("${realdata}/sft/"):
                entries[entry["name"]] = entry
    order = [e["name"] for e in json.loads((REALDATA / "sft" / "MANIFEST.json").read_text(encoding="utf-8"))]
    return {name: entries[name] for name in order if name in entries}


def source(entry: dict, split: str):
    from yunshan.data.conversations import SftSourceArgs

    path = str(entry["path"]).replace("${realdata}", str(REALDATA)).replace(".train.", f".{split}.")
    return SftSourceArgs(name=entry["name"], path=path, format=entry["format"], columns=entry.get("columns"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="runs/sft_decontamination", help="the decontamination's output folder")
    parser.add_argument("--boilerplate-train", type=int, default=10,
                        help="a window in this many training records is boilerplate (yunshan's default 10)")
    args = parser.parse_args(argv)
    from yunshan.eval.decontamination import DecontaminateArgs, render_decontamination, run_decontamination

    missing = [p for p in [REALDATA / "sft" / "MANIFEST.json", REALDATA / "laws" / "civil_code.txt",
                           *(REALDATA / b for b in BENCHMARKS.values())] if not p.exists()]
    if missing:
        print(f"needs the real data beside the checkout: {missing[0]} is missing (YUNSHAN_REALDATA)", file=sys.stderr)
        return 1
    sources = real_sources()
    settings = DecontaminateArgs(
        tasks=[f"{name}={REALDATA / path}" for name, path in BENCHMARKS.items()],
        heldout=[f"civil_code={REALDATA / 'laws' / 'civil_code.txt'}"],
        instructions=[source(e, "heldout") for e in sources.values()], out=args.out, show=5,
        boilerplate_train=args.boilerplate_train)
    started = time.time()
    report, shown = run_decontamination(settings, [], [source(e, "train") for e in sources.values()], progress=False)
    seconds = time.time() - started
    print(render_decontamination(report, shown, args.out), "\n")

    # What each listed record holds half of, set by set (hits.jsonl: every record-item pair with its share).
    held: dict[str, dict[str, set]] = {f"sft:{name}": {} for name in sources}
    with open(Path(args.out) / "hits.jsonl", encoding="utf-8") as f:
        for line in f:
            hit = json.loads(line)
            if hit["share"] >= settings.record_share:
                held[hit["source"]].setdefault(hit["task"], set()).add(hit["train"])
    sets = [f"instructions:{name}" for name in sources] + list(BENCHMARKS) + ["heldout:civil_code"]
    rows = []
    for name in sources:
        check = report.sources[f"sft:{name}"]
        by_set = {task: len(locations) for task, locations in held[f"sft:{name}"].items()}
        own = by_set.pop(f"instructions:{name}", 0)
        other = Counter()
        for task, n in by_set.items():
            other[task.removeprefix("instructions:") + (" (held-out)" if task.startswith("instructions:") else "")] += n
        rows.append({"source": name, "records": check.records, "overlapping": check.overlapping,
                     "listed": check.contaminated, "own_heldout": own, "other_sets": dict(other)})
    lines = ["| train source | records | share a window | listed (dropped) | of them: holding half of its own held-out "
             "item | of them: holding half of another set's item (records) |", "|---|---:|---:|---:|---:|---|"]
    for r in rows:
        other = ", ".join(f"{k} {v}" for k, v in sorted(r["other_sets"].items(), key=lambda kv: -kv[1])) or "-"
        lines.append(f"| {r['source']} | {r['records']:,} | {r['overlapping']:,} | {r['listed']:,} | "
                     f"{r['own_heldout']:,} | {other} |")
    items = ["| evaluation set | items | clean | partial | dirty |", "|---|---:|---:|---:|---:|"]
    for name in sets:
        s = report.eval_sets.get(name)
        if s is not None:
            items.append(f"| {name} | {s.items:,} | {s.clean:,} | {s.partial:,} | {s.dirty:,} |")
    print("\n".join(lines), "\n\n" + "\n".join(items))
    print(f"\n{report.records:,} training samples, {report.characters:,} characters; {seconds:.1f} s")
    results = ROOT / "benchmarks" / "results"
    results.mkdir(parents=True, exist_ok=True)
    suffix = "" if args.boilerplate_train == 10 else f"_boilerplate{args.boilerplate_train}"
    (results / f"sft_decontamination{suffix}.json").write_text(json.dumps(
        {"rows": rows, "eval_sets": {n: vars(report.eval_sets[n]) | {"groups": None} for n in sets
                                     if n in report.eval_sets},
         "records": report.records, "characters": report.characters, "seconds": round(seconds, 1),
         "settings": {"n": settings.n, "cjk_n": settings.cjk_n, "record_share": settings.record_share,
                      "boilerplate_train": settings.boilerplate_train, "boilerplate_eval": settings.boilerplate_eval}},
        indent=1, ensure_ascii=False, default=str) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
