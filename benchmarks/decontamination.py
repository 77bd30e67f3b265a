"""`yunshan data decontaminate` throughput and peak memory against corpus size. A benchmark, not a test.

    .venv/bin/python benchmarks/decontamination.py              # 25, 100 and 400 MB corpora (minutes on 2 cores)
    .venv/bin/python benchmarks/decontamination.py --quick      # 2 and 8 MB: checks the script runs

The job is the command as a user runs it: a JSONL corpus (the sample finance, legal and general corpora, their
documents' sentences reshuffled into new documents until the size is reached, so the corpus is not one text
repeated) against every evaluation set bundled with yunshan (FinEval, FinanceIQ, LawBench and JEC-QA layouts,
13-grams), every hit written. Each size runs in a fresh process (peak RSS is that process's ru_maxrss), twice,
alternating sizes; the table gives the median wall seconds, characters/s and MB/s of input, the process's CPU
seconds (user + system: what a shared machine's load does not inflate) and characters per CPU second, contaminated
records, and peak RSS. Flat memory: the peak does not grow with the corpus (the index of the evaluation n-grams and one block of
about a million characters are held, whatever the input size). Throughput includes reading and parsing the JSONL.
Writes benchmarks/results/decontamination.json.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

ROOT = Path(__file__).resolve().parents[1]

RUN = r"""
import json, resource, sys, time
from yunshan.cli import main
t = time.perf_counter()
code = main(["data", "decontaminate", sys.argv[1], "--tasks", "fineval", "financeiq", "lawbench", "jecqa",
             "--out", sys.argv[2], "--show", "0"])
assert code == 0
report = json.load(open(sys.argv[2] + "/decontamination.json"))
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({"seconds": time.perf_counter() - t, "cpu_seconds": usage.ru_utime + usage.ru_stime, "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "characters": report["characters"], "records": report["records"],
                  "contaminated": report["contaminated"], "hits": report["hits"]}))
"""


def build_corpus(path: Path, megabytes: float, seed: int = 0) -> None:
    """Documents of 3-12 sentences drawn from the sample corpora's sentences, until the file has `megabytes`."""
    from yunshan.samples import sample_data_dir

    sentences = []
    for domain in ("finance", "legal", "general"):
        with open(Path(sample_data_dir()) / "corpora" / domain / "train.jsonl", encoding="utf-8") as f:
            for line in f:
                sentences += [s for s in re.split(r"(?<=[。！？.!?])", json.loads(line)["text"]) if s.strip()]
    rng = random.Random(seed)
    target, written = megabytes * 1e6, 0
    with open(path, "w", encoding="utf-8") as f:
        while written < target:
            line = json.dumps({"text": "".join(rng.choices(sentences, k=rng.randint(3, 12)))}, ensure_ascii=False) + "\n"
            f.write(line)
            written += len(line.encode("utf-8"))


def measure(corpus: Path, out: Path) -> dict:
    result = subprocess.run([sys.executable, "-c", RUN, str(corpus), str(out)], capture_output=True, text=True,
                            env={**os.environ, "TQDM_DISABLE": "1"})
    if result.returncode != 0:
        raise RuntimeError(result.stderr[-2000:])
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 and 8 MB, one round")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    sizes = [2, 8] if args.quick else [25, 100, 400]
    rounds = 1 if args.quick else args.rounds
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        corpora = {}
        for size in sizes:
            corpora[size] = Path(tmp) / f"corpus_{size}mb.jsonl"
            build_corpus(corpora[size], size)
        runs: dict[int, list[dict]] = {size: [] for size in sizes}
        for r in range(rounds):
            for size in (sizes if r % 2 == 0 else sizes[::-1]):  # alternate the order between rounds
                runs[size].append(measure(corpora[size], Path(tmp) / f"out_{size}"))
        for size in sizes:
            seconds = statistics.median(m["seconds"] for m in runs[size])
            cpu = statistics.median(m["cpu_seconds"] for m in runs[size])
            first = runs[size][0]
            mb = corpora[size].stat().st_size / 1e6
            rows.append({"corpus_mb": round(mb, 1), "characters": first["characters"], "records": first["records"],
                         "contaminated": first["contaminated"], "hits": first["hits"], "seconds": round(seconds, 2),
                         "cpu_seconds": round(cpu, 2), "chars_per_cpu_s": round(first["characters"] / cpu),
                         "chars_per_s": round(first["characters"] / seconds), "mb_per_s": round(mb / seconds, 2),
                         "peak_rss_mb": round(max(m["rss_mb"] for m in runs[size]))})
    print("| corpus MB | characters | records | contaminated | seconds | M chars/s | MB/s | CPU s | M chars/CPU s "
          "| peak RSS MB |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['corpus_mb']} | {r['characters']:,} | {r['records']:,} | {r['contaminated']:,} | {r['seconds']} | "
              f"{r['chars_per_s'] / 1e6:.2f} | {r['mb_per_s']} | {r['cpu_seconds']} | {r['chars_per_cpu_s'] / 1e6:.2f} "
              f"| {r['peak_rss_mb']} |")
    growth = rows[-1]["peak_rss_mb"] - rows[0]["peak_rss_mb"]
    print(f"\npeak RSS grows {growth} MB from {rows[0]['corpus_mb']} to {rows[-1]['corpus_mb']} MB of corpus")
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "decontamination.json").write_text(json.dumps({"rows": rows, "rss_growth_mb": growth, "quick": args.quick},
                                                         indent=2) + "\n")


if __name__ == "__main__":
    main()
