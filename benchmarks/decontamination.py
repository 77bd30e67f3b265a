"""`yunshan data decontaminate` on the real laws corpus against real LawBench: throughput and peak memory, this
checkout beside an older revision in one run. A benchmark, not a test.

    .venv/bin/python benchmarks/decontamination.py                  # old = 3c8e9f0 (13-gram engine); ~5 min here
    .venv/bin/python benchmarks/decontamination.py --rounds 1 --old REV

The job is the command as a user runs it: `../shared/realdata/laws/laws.jsonl.zst` (3,464 laws, 20.0 M characters,
zstd JSONL) against the 20 LawBench zero-shot files (10,000 items), every overlap written. Rows:

- `laws x1` and `laws x5` (the corpus read five times, from a file that repeats it: 100 M characters), so the
  fixed cost (reading LawBench, building its index, the end) and the per-character cost of the pass separate;
- `one record`: the laws joined into ONE record of 20 M characters (issue 27 item 9: one 46 MB record peaked at
  2.9 GB before).

Each run is a fresh process; the two revisions alternate (old, new, new, old, ... over --rounds pairs) so both see
the same load on this shared machine. Per row: wall seconds, the command's CPU seconds (user + system of the process
from the call of `yunshan data decontaminate` to its end, the interpreter's start-up and imports left out: what load
does not inflate), characters per CPU second (the command is single-threaded: that is per core), the pass alone
(`x5` minus `x1`: 80 M characters over the difference of CPU seconds), and peak memory (VmHWM of the process). The
old revision runs from `git archive` in a temporary folder, first on PYTHONPATH, same venv. Writes
benchmarks/results/decontamination.json.
"""

from __future__ import annotations

import argparse
import io
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
REALDATA = Path(os.environ.get("YUNSHAN_REALDATA") or ROOT.parent / "shared" / "realdata")

RUN = r"""
import json, resource, sys, time
cpu = lambda: (lambda u: u.ru_utime + u.ru_stime)(resource.getrusage(resource.RUSAGE_SELF))  # noqa: E731
from yunshan.cli import main
start_cpu, t = cpu(), time.perf_counter()
code = main(["data", "decontaminate", sys.argv[1], "--tasks", "lawbench=" + sys.argv[2], "--out", sys.argv[3],
             "--show", "0"])
assert code == 0
seconds, cpu_seconds = time.perf_counter() - t, cpu() - start_cpu
report = json.load(open(sys.argv[3] + "/decontamination.json"))
peak = [int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM")][0]
import yunshan
print(json.dumps({"code": yunshan.__file__, "seconds": seconds, "cpu_seconds": cpu_seconds, "startup_cpu": start_cpu,
                  "peak_mb": peak / 1024, "characters": report["characters"], "records": report["records"],
                  "contaminated": report["contaminated"], "hits": report["hits"]}))
"""


def corpora(folder: Path) -> dict[str, Path]:
    import zstandard

    with open(REALDATA / "laws" / "laws.jsonl.zst", "rb") as f:
        text = io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(f), encoding="utf-8").read()
    lines = [line for line in text.splitlines() if line.strip()]
    out = {"laws x1": REALDATA / "laws" / "laws.jsonl.zst", "laws x5": folder / "laws_x5.jsonl",
           "one record": folder / "one_record.jsonl"}
    out["laws x5"].write_text("\n".join(lines * 5) + "\n", encoding="utf-8")
    joined = "\n\n".join(json.loads(line)["text"] for line in lines)
    out["one record"].write_text(json.dumps({"text": joined}, ensure_ascii=False) + "\n", encoding="utf-8")
    return out


def measure(corpus: Path, out: Path, code: Path | None) -> dict:
    env = {**os.environ, "TQDM_DISABLE": "1"}
    if code is not None:
        env["PYTHONPATH"] = str(code)
    lawbench = REALDATA / "lawbench" / "data" / "zero_shot"
    # cwd outside the checkout: `python -c` puts the current folder first on sys.path, before PYTHONPATH.
    result = subprocess.run([sys.executable, "-c", RUN, str(corpus), str(lawbench), str(out)], capture_output=True,
                            text=True, env=env, cwd=out.parent)
    if result.returncode != 0:
        raise RuntimeError(result.stderr[-3000:])
    return json.loads(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", default="3c8e9f0", help="git revision to compare against")
    parser.add_argument("--rounds", type=int, default=2, help="old/new pairs per row")
    args = parser.parse_args()
    if not REALDATA.is_dir():
        raise SystemExit(f"{REALDATA} is absent: the real releases are not beside this checkout (set YUNSHAN_REALDATA)")
    load = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        old = tmp / "old"
        old.mkdir()
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", args.old], capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", str(old)], input=archive.stdout, check=True)
        for package in ("eval", "tokenizer"):  # installed as yunshan.eval / yunshan.tokenizer (pyproject package-dir)
            if (old / package).is_dir():
                (old / package).rename(old / "yunshan" / package)
        revision = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True,
                                  text=True).stdout.strip()
        files = corpora(tmp)
        runs: dict[tuple[str, str], list[dict]] = {}
        for name, corpus in files.items():
            for r in range(args.rounds):
                for side in (("old", "new") if r % 2 == 0 else ("new", "old")):
                    m = measure(corpus, tmp / f"out_{side}", old if side == "old" else None)
                    assert m["code"].startswith(str(old)) == (side == "old"), m["code"]
                    runs.setdefault((name, side), []).append(m)
                    print(f"{name:<11} {side}: {m['seconds']:.1f} s wall, {m['cpu_seconds']:.1f} s CPU, "
                          f"{m['peak_mb']:.0f} MB", flush=True)
    rows = []
    for (name, side), ms in runs.items():
        cpu = statistics.median(m["cpu_seconds"] for m in ms)
        wall = statistics.median(m["seconds"] for m in ms)
        rows.append({"corpus": name, "side": side, "revision": args.old if side == "old" else revision,
                     "characters": ms[0]["characters"], "records": ms[0]["records"],
                     "contaminated": ms[0]["contaminated"], "hits": ms[0]["hits"], "seconds": round(wall, 2),
                     "cpu_seconds": round(cpu, 2), "chars_per_cpu_s": round(ms[0]["characters"] / cpu),
                     "peak_mb": round(max(m["peak_mb"] for m in ms))})
    by = {(r["corpus"], r["side"]): r for r in rows}
    passes = {}
    for side in ("old", "new"):
        one, five = by[("laws x1", side)], by[("laws x5", side)]
        passes[side] = (five["characters"] - one["characters"]) / max(five["cpu_seconds"] - one["cpu_seconds"], 1e-9)
    print(f"\nload average at the start: {load[0]:.1f} {load[1]:.1f} {load[2]:.1f} (2 cores)\n")
    print("| corpus | revision | characters | records | listed | wall s | CPU s | M chars / CPU s | peak MB |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in sorted(rows, key=lambda r: (list(files).index(r["corpus"]), r["side"] != "old")):
        print(f"| {r['corpus']} | {r['side']} {r['revision']} | {r['characters']:,} | {r['records']:,} | "
              f"{r['contaminated']:,} | {r['seconds']} | {r['cpu_seconds']} | {r['chars_per_cpu_s'] / 1e6:.2f} | "
              f"{r['peak_mb']:,} |")
    print(f"\nthe pass alone (x5 - x1: 80 M characters): old {passes['old'] / 1e6:.2f}, new {passes['new'] / 1e6:.2f} "
          f"M characters per CPU second ({passes['new'] / passes['old']:.1f}x)")
    for name in files:
        o, n = by[(name, "old")], by[(name, "new")]
        print(f"{name}: CPU {o['cpu_seconds'] / n['cpu_seconds']:.2f}x less, wall {o['seconds'] / n['seconds']:.2f}x, "
              f"peak {o['peak_mb']:,} -> {n['peak_mb']:,} MB")
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "decontamination.json").write_text(json.dumps(
        {"rows": rows, "pass_chars_per_cpu_s": passes, "load_average": load, "old": args.old, "new": revision},
        indent=2) + "\n")


if __name__ == "__main__":
    main()
