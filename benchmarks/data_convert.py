"""`yunshan data convert` against the usual `datasets` route: throughput and peak memory. A benchmark, not a test.

    .venv/bin/python benchmarks/data_convert.py            # about 3 minutes on 2 cores
    .venv/bin/python benchmarks/data_convert.py --quick

The job is the one a data card asks for on a crawled corpus: read JSON Lines, keep the Chinese records
(`--where lang=zh`), mask personal identifiers (`--mask-pii`), drop exact duplicates (`--dedup`) and write yunshan
JSONL. Corpora come from yunshan.samples (legal domain, ~70% Chinese) at two sizes, with every 50th document repeated
so deduplication has work. The reference does the same with `datasets`: `load_dataset("json")` (which first writes
an Arrow cache), `filter`, `map` with the same masking function, a dedup `filter`, `to_json`. Both outputs are
checked to hold the same texts.

Every measurement runs in a fresh process (peak RSS is that process's ru_maxrss), tools alternate, and the table
reports the median of the rounds, MB/s of input, the yunshan/datasets speed ratio and how much peak memory grows
from the small to the large corpus (flat memory = the converter's footprint does not grow with the input).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]

YUNSHAN = r"""
import json, resource, sys, time
from yunshan.cli import main
t = time.perf_counter()
code = main(["data", "convert", sys.argv[1], "--where", "lang=zh", "--mask-pii", "--dedup", "--out", sys.argv[2],
             "--report", sys.argv[2] + ".report.json"])
assert code == 0
print(json.dumps({"seconds": time.perf_counter() - t, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""

DATASETS = r"""
import hashlib, json, resource, sys, time
import datasets
from yunshan.data.convert import mask_pii
datasets.disable_progress_bars()
t = time.perf_counter()
ds = datasets.load_dataset("json", data_files=sys.argv[1], split="train", cache_dir=sys.argv[3])
ds = ds.filter(lambda r: r["lang"] == "zh")
ds = ds.map(lambda r: {"text": mask_pii(r["text"], {})})
seen = set()
def first(r):
    d = hashlib.blake2b(r["text"].encode("utf-8"), digest_size=8).digest()
    if d in seen:
        return False
    seen.add(d)
    return True
ds = ds.filter(first).select_columns(["text"])
ds.to_json(sys.argv[2], force_ascii=False)
print(json.dumps({"seconds": time.perf_counter() - t, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def write_corpus(path: Path, n_chars: int) -> int:
    from yunshan.samples import generate_corpus

    with open(path, "w", encoding="utf-8") as f:
        for i, doc in enumerate(generate_corpus("legal", seed=0, n_chars=n_chars)):
            line = json.dumps({"id": doc["id"], "text": doc["text"], "lang": doc["lang"]}, ensure_ascii=False) + "\n"
            f.write(line)
            if i % 50 == 0:
                f.write(line)  # an exact duplicate for --dedup to find
    return path.stat().st_size


def run(tool: str, corpus: Path, out: Path, cache: Path) -> dict:
    code = YUNSHAN if tool == "yunshan" else DATASETS
    args = [sys.executable, "-c", code, str(corpus), str(out), str(cache)]
    proc = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, env=os.environ.copy())
    if proc.returncode != 0:
        raise RuntimeError(f"{tool} failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def texts(path: Path) -> list[str]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line)["text"] for line in f]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="small corpora, one round")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    sizes = {"small": 3_000_000, "large": 12_000_000} if args.quick else {"small": 8_000_000, "large": 32_000_000}
    rounds = 1 if args.quick else args.rounds
    results: dict = {"sizes": {}, "runs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for label, n_chars in sizes.items():
            corpus = tmp / f"{label}.jsonl"
            results["sizes"][label] = {"chars": n_chars, "bytes": write_corpus(corpus, n_chars)}
            for r in range(rounds):
                for tool in ("yunshan", "datasets"):  # alternate, so machine noise hits both
                    out = tmp / f"{label}.{tool}.jsonl"
                    cache = tmp / f"cache-{label}-{tool}-{r}"
                    m = run(tool, corpus, out, cache)
                    results["runs"].setdefault(f"{label}/{tool}", []).append(m)
            same = texts(tmp / f"{label}.yunshan.jsonl") == texts(tmp / f"{label}.datasets.jsonl")
            results["sizes"][label]["same_output"] = same
            report = json.loads((tmp / f"{label}.yunshan.jsonl.report.json").read_text())
            results["sizes"][label]["written"] = report["records_written"]
            results["sizes"][label]["dropped"] = report["dropped"]
            if not same:
                raise SystemExit(f"{label}: yunshan and datasets outputs differ")

    def med(key, field):
        return statistics.median(m[field] for m in results["runs"][key])

    lines = ["| corpus | MB | tool | seconds | MB/s | peak RSS MB | speed ratio (yunshan/datasets) |",
             "|---|---|---|---|---|---|---|"]
    for label, info in results["sizes"].items():
        mb = info["bytes"] / 1e6
        ys, ds = med(f"{label}/yunshan", "seconds"), med(f"{label}/datasets", "seconds")
        for tool, sec in (("yunshan", ys), ("datasets", ds)):
            lines.append(f"| {label} | {mb:.1f} | {tool} | {sec:.2f} | {mb / sec:.1f} | "
                         f"{med(f'{label}/{tool}', 'rss_mb'):.0f} | {ds / ys:.2f}x |")
    growth = {tool: med(f"large/{tool}", "rss_mb") - med(f"small/{tool}", "rss_mb") for tool in ("yunshan", "datasets")}
    results["rss_growth_mb"] = growth
    lines.append("")
    lines.append(f"Peak RSS growth from small to large corpus: yunshan {growth['yunshan']:+.0f} MB, "
                 f"datasets {growth['datasets']:+.0f} MB (same output texts: "
                 f"{all(s['same_output'] for s in results['sizes'].values())}).")
    print("\n".join(lines))
    out_dir = ROOT / "benchmarks" / "results"
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "data_convert.json").write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
