"""`yunshan data prepare` throughput and peak memory, side by side with `yunshan data convert --mask-pii --dedup`
and datatrove's own MinHash example pipeline, on the real laws corpus and on generated text of growing size.

    .venv/bin/python benchmarks/prepare_throughput.py                       # laws + generated 25, 50, 100 MB
    .venv/bin/python benchmarks/prepare_throughput.py --sizes 100 1000      # the 1 GB point (about 1 h on 2 cores)

The three jobs, each in a fresh process on the same input:
- prepare: the whole pipeline of recipes/prepare/laws.yaml (language, page furniture, quality, personal data, exact
  and near duplicates), local executor, 2 tasks on 2 workers;
- convert: `yunshan data convert --mask-pii --dedup` (one process: masking and exact duplicates only);
- datatrove: datatrove's MinHash example (examples/minhash_deduplication.py) as shipped, the reader, its four
  MinHash stages and the writer, with the one change Chinese needs (the word tokenizer: characters, yunshan's
  MixedScriptWords), 2 tasks on 2 workers. It matches prepare's dedup stages; prepare's own stage 1 is UnitShingles.
Generated text: documents of 8-40 paragraphs drawn at random (seeded) from the laws corpus's paragraphs, 1% of them
repeated whole and 1% repeated with one paragraph changed, one in 50 given a made-up phone number; it is written to a
temporary folder, never into the project. Figures: wall seconds, characters per second per core (wall, over the 2
cores prepare and datatrove use, the 1 convert uses),
characters per CPU-second (the machine is shared: CPU time is what the job's processes used, sampled with their
memory every 0.2 s, so a process shorter than that is missed), and peak memory (the sum of the resident memory of
the job's processes). Prints a table and writes JSON
(benchmarks/results/prepare_throughput.json).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
ROOT = Path(__file__).resolve().parents[1]
LAWS = Path(os.environ.get("YUNSHAN_REALDATA", ROOT.parent / "shared" / "realdata")) / "laws" / "laws.jsonl.zst"

PREPARE = """
import sys
from yunshan.prepare.args import InputArgs, LanguageArgs, NearDedupArgs, PrepareArgs, QualityArgs
from yunshan.prepare.pipeline import run_prepare
s = run_prepare(PrepareArgs(inputs=[InputArgs(name="x", path=sys.argv[1])], out=sys.argv[2], tasks=2, workers=2,
                            language=LanguageArgs(keep=["zh"]), quality=QualityArgs(min_chars=50)), progress=False)
print("RESULT", s["documents_written"], s["chars_written"])
"""

DATATROVE = """
import sys
from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.dedup.minhash import (MinhashConfig, MinhashDedupBuckets, MinhashDedupCluster,
                                              MinhashDedupFilter, MinhashDedupSignature)
from datatrove.pipeline.readers import JsonlReader
from datatrove.pipeline.writers import JsonlWriter
from datatrove.utils.hashing import HashConfig
from yunshan.prepare.dedup import MixedScriptWords

src, out = sys.argv[1], sys.argv[2]
config = MinhashConfig(hash_config=HashConfig(precision=64))
reader = lambda: JsonlReader(src, glob_pattern="*.jsonl*")
for name, pipeline, tasks in [
        ("sig", [reader(), MinhashDedupSignature(f"{out}/sigs", config=config, language=MixedScriptWords())], 2),
        ("buckets", [MinhashDedupBuckets(f"{out}/sigs", f"{out}/buckets", config=config)], config.num_buckets),
        ("cluster", [MinhashDedupCluster(f"{out}/buckets", f"{out}/remove", config=config)], 1),
        ("filter", [reader(), MinhashDedupFilter(f"{out}/remove"), JsonlWriter(f"{out}/out")], 2)]:
    LocalPipelineExecutor(pipeline, tasks=tasks, workers=2, logging_dir=f"{out}/logs/{name}").run()
print("RESULT")
"""


def generate(path: Path, target_bytes: int, seed: int = 0) -> None:
    """Documents of laws-corpus paragraphs drawn at random, with some repeated and some near-repeated."""
    from yunshan.data.records import read_records

    paragraphs = [p for _, r, _ in read_records(str(LAWS)) for p in r["text"].split("\n") if len(p) > 20]
    rng = random.Random(seed)
    written, docs = 0, []
    with open(path, "w", encoding="utf-8") as f:
        while written < target_bytes:
            roll = rng.random()
            if docs and roll < 0.01:
                text = rng.choice(docs)
            elif docs and roll < 0.02:
                parts = rng.choice(docs).split("\n")
                parts[rng.randrange(len(parts))] = rng.choice(paragraphs)
                text = "\n".join(parts)
            else:
                text = "\n".join(rng.choice(paragraphs) for _ in range(rng.randint(8, 40)))
                if rng.random() < 0.02:
                    text += f"\n联系电话：13{rng.randint(0, 999999999):09d}"
                docs = (docs + [text])[-200:]
            line = json.dumps({"text": text}, ensure_ascii=False) + "\n"
            f.write(line)
            written += len(line.encode("utf-8"))


def measure(command: list[str], chars: int, cores: int) -> dict:
    import psutil

    started = time.time()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    root = psutil.Process(process.pid)
    peak = 0
    cpu: dict[int, float] = {}  # per process of the job: its CPU seconds when last seen (pool workers included)
    while process.poll() is None:
        try:
            procs = [root] + root.children(recursive=True)
            rss = 0
            for p in procs:
                with p.oneshot():
                    times = p.cpu_times()
                    cpu[p.pid] = times.user + times.system
                    rss += p.memory_info().rss
            peak = max(peak, rss)
        except psutil.Error:
            pass
        time.sleep(0.2)
    process.stdout.read()
    seconds = time.time() - started
    cpu_s = sum(cpu.values())
    return {"seconds": round(seconds, 1), "ok": process.returncode == 0, "peak_mb": peak >> 20,
            "cores": cores, "chars_per_s_per_core": round(chars / seconds / cores), "cpu_seconds": round(cpu_s, 1),
            "chars_per_cpu_s": round(chars / cpu_s) if cpu_s else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=float, nargs="*", default=[25, 50, 100], help="generated corpora, MB")
    parser.add_argument("--no-laws", action="store_true")
    parser.add_argument("--tools", nargs="*", default=["prepare", "convert", "datatrove minhash"],
                        help="which jobs to run (the 1 GB point: --no-laws --sizes 1000 --tools prepare)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/prepare_throughput.json"))
    a = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="prepare-bench-") as tmp:
        tmp = Path(tmp)
        corpora = [] if a.no_laws else [("laws", LAWS)]
        for mb in a.sizes:
            path = tmp / f"gen{mb:g}" / "corpus.jsonl"
            path.parent.mkdir()
            generate(path, int(mb * (1 << 20)))
            corpora.append((f"generated {mb:g} MB", path))
        for name, path in corpora:
            from yunshan.data.records import read_records

            chars = sum(len(r["text"]) for _, r, _ in read_records(str(path)))
            size = path.stat().st_size
            for tool, cores, command in (
                    ("prepare", 2, [sys.executable, "-c", PREPARE, str(path), str(tmp / f"{name}-prepare")]),
                    ("convert", 1, [sys.executable, "-m", "yunshan.cli", "data", "convert", str(path), "--mask-pii",
                                 "--dedup", "--out", str(tmp / f"{name}-convert.jsonl")]),
                    ("datatrove minhash", 2, [sys.executable, "-c", DATATROVE, str(path.parent),
                                           str(tmp / f"{name}-datatrove")])):
                if tool not in a.tools:
                    continue
                row = {"corpus": name, "bytes": size, "chars": chars, "tool": tool, **measure(command, chars, cores)}
                rows.append(row)
                print(f"{name:20} {tool:18} {row['seconds']:8.1f} s {row['chars_per_s_per_core']:>10,} chars/s/core "
                      f"{row['chars_per_cpu_s']:>10,} chars/CPU-s {row['peak_mb']:>6,} MB peak  ok={row['ok']}",
                      flush=True)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps({"load_average": os.getloadavg(), "rows": rows}, indent=1))
    print(f"\n| corpus | MB | tool | seconds | chars/s per core | chars per CPU-second | peak MB |")
    print("|---|---:|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['corpus']} | {r['bytes'] / 2**20:.0f} | {r['tool']} | {r['seconds']} | "
              f"{r['chars_per_s_per_core']:,} | {r['chars_per_cpu_s']:,} | {r['peak_mb']:,} |")


if __name__ == "__main__":
    main()
