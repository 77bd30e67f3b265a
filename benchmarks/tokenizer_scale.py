"""Vocabulary extension at the scale users have: `yunshan tokenizer extend` beside the `tokenizers` library's own
`BpeTrainer`, on the real laws corpus at 20 MB, 58 MB and a 1 GB concatenation. A benchmark, not a timed test.

    nice -n 10 .venv/bin/python benchmarks/tokenizer_scale.py                    # default sizes: 1 h 50 min at load 15-20
    nice -n 10 .venv/bin/python benchmarks/tokenizer_scale.py --sizes 20MB 58MB  # without the 1 GB concatenations

Issue 33, section 3. Goal: `yunshan tokenizer extend --base SmolLM2-135M --new-tokens 5000` no slower than
`BpeTrainer` learning 5,000 tokens on the same text, at most 4 GB peak memory at 1 GB of text, and the same held-out
compression (Civil Code tokens per character, +-1%) as the unbounded run (`--sample-chars 0`, which counts every
word of the corpus).

Corpora, from `../shared/realdata/laws/laws.jsonl.zst` (3,464 laws, regulations, judicial interpretations and cases;
20.0 M characters; 58.5 MB as plain JSONL), written as plain `.jsonl` to `--work`:
- 20MB: the corpus's first documents up to 20 MB;
- 58MB: the whole corpus;
- 58MB-sampled: the whole corpus counted over a seeded sample of 2.78 M characters (`--sample-chars` 50 M / 18),
  1/7.2 of its 20.0 M: the share of a real 1 GB corpus (360 M characters, every word new) that the default 50 M
  sample holds, so its Civil Code compression beside the 58MB row's (which counts everything) shows what sampling
  costs on text that does not repeat. Pessimistic: 2.78 M characters give rare words fewer counts than 50 M would;
- 58MB-sample5M, 58MB-sample10M (only when asked for in --sizes): the same with samples of 5 M and 10 M characters
  (1/4 and 1/2 of the corpus), how the cost of sampling falls as the sample grows;
- 1GB: 18 copies of it (1.05 GB), each copy's documents in an order shuffled by `random.Random(SEED + copy)`;
- 1GB-distinct: the same, but copy k > 0 has every CJK ideograph c replaced by the one k * 997 places further in the
  block (U+4E00-U+9FFF, wrapping): 1 GB in which no Chinese word of one copy recurs in another, the way a real 1 GB
  corpus keeps bringing new words. It measures the memory bound (the sample then holds 2.5 times the 58 MB corpus's
  distinct words); yunshan only, because BpeTrainer's memory grows with the distinct words of the whole gigabyte.

For each size, in fresh processes, one after the other on the same machine: yunshan (its defaults: the word counts
of a seeded sample of at most 50 M characters, one counting process per core) and `BpeTrainer(vocab_size=256 + N)`
with the base's own normaliser and pre-tokeniser (SmolLM2: Digits + ByteLevel) and the byte alphabet, fed the same
file through `train_from_iterator` (`json.loads` per line). Both may use every core (TOKENIZERS_PARALLELISM=true).
Measured: wall seconds; CPU seconds (user + system of the process and its children); peak memory, the largest sum
over the process and its children of their proportional set size (PSS: resident memory, a page shared by n
processes counted 1/n in each, so yunshan's forked workers do not count the pages they share with it twice),
sampled every 0.1 s, and beside it the largest sum of their resident sizes (RSS, which counts shared pages once per
process). Then the Civil Code's tokens per character (`yunshan tokenizer report`'s definition) with the base and
with each extension; at 1 GB also the unbounded run (`--sample-chars 0`). The machine is shared:
the load average is recorded before and after each run, and the comparison is the ratio of runs made side by side.
Results: a markdown table on stdout and benchmarks/results/tokenizer_scale.json.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REALDATA = Path(os.environ.get("YUNSHAN_REALDATA", ROOT.parent / "shared" / "realdata"))
SEED = 0
SIZES = {"20MB": 20_000_000, "58MB": None, "58MB-sampled": None, "1GB": 1_000_000_000,
         "1GB-distinct": 1_000_000_000, "58MB-sample5M": None, "58MB-sample10M": None}
DEFAULT_SIZES = ["20MB", "58MB", "58MB-sampled", "1GB", "1GB-distinct"]
COPIES = 18  # of the 58 MB corpus in the 1 GB ones
DEFAULT_SAMPLE_CHARS = 50_000_000  # yunshan tokenizer extend's --sample-chars
# --sample-chars of the rows that count the 58 MB corpus over a sample of it
SAMPLE_CHARS = {"58MB-sampled": DEFAULT_SAMPLE_CHARS // COPIES, "58MB-sample5M": 5_000_000,
                "58MB-sample10M": 10_000_000}
CJK_FIRST, CJK_COUNT = 0x4E00, 0x9FFF - 0x4E00 + 1


@functools.lru_cache(maxsize=None)
def _shift_table(copy: int) -> dict[int, int]:
    return {c: CJK_FIRST + (c - CJK_FIRST + copy * 997) % CJK_COUNT for c in range(CJK_FIRST, CJK_FIRST + CJK_COUNT)}


def shifted(line: bytes, copy: int) -> bytes:
    """A JSONL line with every CJK ideograph moved copy * 997 places along the block (1GB-distinct)."""
    return line.decode("utf-8").translate(_shift_table(copy)).encode("utf-8") if copy else line


def default_base() -> Path:
    for candidate in (ROOT / "models" / "smollm2-135m", ROOT.parent / "models" / "smollm2-135m"):
        if (candidate / "tokenizer.json").is_file():
            return candidate
    return ROOT / "models" / "smollm2-135m"


def write_corpora(work: Path, sizes: list[str]) -> dict[str, Path]:
    """The plain JSONL corpora of the benchmark (kept in --work and reused when they already have the right size)."""
    import zstandard

    source = REALDATA / "laws" / "laws.jsonl.zst"
    if not source.is_file():
        sys.exit(f"{source} not found: the benchmark needs the real laws corpus (../shared/realdata/laws/)")
    work.mkdir(parents=True, exist_ok=True)
    whole = work / "laws_58MB.jsonl"
    if not whole.is_file():
        with open(source, "rb") as raw, open(whole, "wb") as out:
            zstandard.ZstdDecompressor().copy_stream(raw, out)
    lines = whole.read_bytes().splitlines(keepends=True)
    paths = {}
    for size in sizes:
        if size == "58MB" or size in SAMPLE_CHARS:
            paths[size] = whole
            continue
        path = work / f"laws_{size}.jsonl"
        paths[size] = path
        if size == "20MB":
            chosen, total = [], 0
            for line in lines:
                if total + len(line) > SIZES[size]:
                    break
                chosen.append(line)
                total += len(line)
            blob_size = total
        else:
            copies = COPIES
            blob_size = copies * sum(map(len, lines))
        if path.is_file() and path.stat().st_size == blob_size:
            continue
        with open(path, "wb") as out:
            if size == "20MB":
                out.writelines(chosen)
            else:
                for copy in range(copies):
                    order = list(range(len(lines)))
                    random.Random(SEED + copy).shuffle(order)
                    if size == "1GB-distinct":
                        out.writelines(shifted(lines[i], copy) for i in order)
                    else:
                        out.writelines(lines[i] for i in order)
    return paths


def measure(command: list[str], env: dict) -> dict:
    """Run a command in a fresh process: wall and CPU seconds, peak memory of its process tree, load average."""
    import psutil

    load_before = os.getloadavg()
    before = os.times()
    started = time.perf_counter()
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peak = peak_rss = 0
    done = threading.Event()

    def watch():
        nonlocal peak, peak_rss
        root = psutil.Process(process.pid)
        while not done.is_set():
            try:
                tree = [root] + root.children(recursive=True)
                full = [p.memory_full_info() for p in tree]
                peak = max(peak, sum(m.pss for m in full))
                peak_rss = max(peak_rss, sum(m.rss for m in full))
            except psutil.Error:
                pass
            done.wait(0.1)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    output, _ = process.communicate()
    done.set()
    watcher.join()
    wall = time.perf_counter() - started
    after = os.times()
    if process.returncode != 0:
        sys.exit(f"{' '.join(command)} failed ({process.returncode}):\n{output[-3000:]}")
    return {"wall_s": round(wall, 2), "cpu_s": round(after.children_user + after.children_system
                                                     - before.children_user - before.children_system, 2),
            "peak_gb": round(peak / 1e9, 3), "peak_rss_sum_gb": round(peak_rss / 1e9, 3),
            "load_before": [round(x, 2) for x in load_before],
            "load_after": [round(x, 2) for x in os.getloadavg()], "output": output[-2000:]}


def run_bpe_trainer(corpus: Path, base: Path, new_tokens: int, out: Path) -> None:
    """The reference: a fresh BPE of 256 + new_tokens tokens with the base's own normaliser and pre-tokeniser."""
    from tokenizers import Tokenizer, pre_tokenizers, trainers
    from tokenizers.models import BPE

    own = Tokenizer.from_file(str(base / "tokenizer.json"))
    tok = Tokenizer(BPE())
    tok.normalizer, tok.pre_tokenizer, tok.decoder = own.normalizer, own.pre_tokenizer, own.decoder
    alphabet = pre_tokenizers.ByteLevel.alphabet()
    trainer = trainers.BpeTrainer(vocab_size=len(alphabet) + new_tokens, initial_alphabet=alphabet,
                                  show_progress=False)

    def texts():
        with open(corpus, encoding="utf-8") as handle:
            for line in handle:
                yield json.loads(line)["text"]

    tok.train_from_iterator(texts(), trainer)
    out.mkdir(parents=True, exist_ok=True)
    tok.save(str(out / "tokenizer.json"))
    print(f"BpeTrainer: {tok.get_vocab_size()} tokens")


def tokens_per_char(tokenizers: list[Path], text: Path) -> list[float]:
    from yunshan.tokenizer.report import compression_report

    report = compression_report([str(t) for t in tokenizers], [str(text)], top_new=0)
    return [r["tokens_per_char"] for r in report["files"][0]["results"]]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", nargs="+", default=DEFAULT_SIZES, choices=list(SIZES))
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "tokenizer_scale.json",
                        help="where the results go (JSON)")
    parser.add_argument("--base", type=Path, default=default_base(), help="base tokenizer (SmolLM2-135M's folder)")
    parser.add_argument("--new-tokens", type=int, default=5000)
    parser.add_argument("--work", type=Path, default=Path("/tmp/yunshan_tokenizer_scale"),
                        help="folder for the corpora (1.1 GB) and the tokenizers written")
    parser.add_argument("--no-unbounded", action="store_true", help="skip the unbounded run at 1 GB")
    parser.add_argument("--bpe-trainer", type=Path, help=argparse.SUPPRESS)  # internal: run the reference
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bpe_trainer:
        run_bpe_trainer(args.bpe_trainer, args.base, args.new_tokens, args.out)
        return
    if not (args.base / "tokenizer.json").is_file():
        sys.exit(f"{args.base}: no tokenizer.json; run `make real-model` or pass --base")
    civil_code = REALDATA / "laws" / "civil_code.txt"
    corpora = write_corpora(args.work, args.sizes)
    env = {**os.environ, "TOKENIZERS_PARALLELISM": "true", "HF_HUB_OFFLINE": "1"}
    yunshan = [str(Path(sys.executable).with_name("yunshan")), "tokenizer", "extend", "--base", str(args.base),
               "--new-tokens", str(args.new_tokens), "--overwrite"]
    rows, whole_58mb = [], None
    base_tpc = tokens_per_char([args.base], civil_code)[0]
    for size in args.sizes:
        corpus = corpora[size]
        row = {"size": size, "bytes": corpus.stat().st_size}
        out = args.work / f"extended_{size}"
        flags = ["--sample-chars", str(SAMPLE_CHARS[size])] if size in SAMPLE_CHARS else []
        row["yunshan"] = measure(yunshan + ["--corpus", str(corpus), "--out", str(out)] + flags, env)
        if size != "1GB-distinct" and size not in SAMPLE_CHARS:
            row["bpe_trainer"] = measure([sys.executable, __file__, "--bpe-trainer", str(corpus), "--base",
                                          str(args.base), "--new-tokens", str(args.new_tokens), "--out",
                                          str(args.work / "bpe")], env)
        report = json.loads((out / "yunshan_tokenizer_extension.json").read_text(encoding="utf-8"))
        row["characters"] = report["corpus"]["characters"]
        row["sample"] = report["corpus"]["sample"]
        row["new_tokens"] = report["new_tokens"]["added"]
        row["civil_code_tokens_per_char"] = {"base": base_tpc, "extended": tokens_per_char([out], civil_code)[0]}
        row["training_words"] = {"words": report["corpus"]["words"], "unique": report["corpus"]["unique_words"]}
        if size in SAMPLE_CHARS:  # the unbounded run is the 58MB row's (its whole corpus fits in the sample)
            whole = next((r for r in rows if r["size"] == "58MB"), None) or whole_58mb
            if whole is None:
                done = args.work / "extended_58MB_whole"
                whole = whole_58mb = {
                    "yunshan": measure(yunshan + ["--corpus", str(corpus), "--out", str(done), "--sample-chars", "0"],
                                       env),
                    "civil_code_tokens_per_char": {"extended": tokens_per_char([done], civil_code)[0]}}
            row["unbounded"] = whole["yunshan"]
            row["civil_code_tokens_per_char"]["unbounded"] = whole["civil_code_tokens_per_char"]["extended"]
        if size == "1GB" and not args.no_unbounded:
            whole = args.work / f"extended_{size}_unbounded"
            row["unbounded"] = measure(yunshan + ["--corpus", str(corpus), "--out", str(whole), "--sample-chars",
                                                  "0"], env)
            row["civil_code_tokens_per_char"]["unbounded"] = tokens_per_char([whole], civil_code)[0]
        rows.append(row)
        print_row(row)

    print("\n" + table(rows))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(
        {"machine": {"platform": platform.platform(), "cpus": os.cpu_count(), "python": platform.python_version()},
         "base": str(args.base), "new_tokens": args.new_tokens, "seed": SEED, "rows": rows}, indent=2) + "\n",
        encoding="utf-8")


def print_row(row: dict) -> None:
    y, b = row["yunshan"], row.get("bpe_trainer")
    other = f", BpeTrainer {b['wall_s']} s / {b['peak_gb']} GB" if b else ""
    print(f"{row['size']}: yunshan {y['wall_s']} s / {y['peak_gb']} GB{other}, load {y['load_before'][0]}-"
          f"{(b or y)['load_after'][0]}", flush=True)


def table(rows: list[dict]) -> str:
    lines = ["| corpus | characters | counted | distinct words counted | wall s yunshan / BpeTrainer (ratio) | "
             "CPU s yunshan / BpeTrainer | peak GB yunshan / BpeTrainer (PSS) | peak GB yunshan / BpeTrainer "
             "(RSS sum) | Civil Code tokens/char: base -> yunshan | load (1 min) |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for row in rows:
        y, b, tpc = row["yunshan"], row.get("bpe_trainer"), row["civil_code_tokens_per_char"]
        counted = "all" if row["sample"]["whole_corpus"] else f"{row['sample']['characters'] / 1e6:.2f} M (sample)"
        civil = f"{tpc['base']:.3f} -> {tpc['extended']:.3f}"
        if row["size"] == "1GB-distinct":
            civil = "(not meaningful: shifted text)"
        if "unbounded" in tpc:
            u = row["unbounded"]
            change = 100 * (tpc["extended"] / tpc["unbounded"] - 1)
            civil += f"; counting all: {tpc['unbounded']:.3f} (sample {change:+.2f}%; {u['wall_s']:.0f} s, " \
                     f"{u['peak_gb']:.2f} GB)"
        if b:
            times = f"{y['wall_s']:.1f} / {b['wall_s']:.1f} ({y['wall_s'] / b['wall_s']:.2f})"
            cpu = f"{y['cpu_s']:.0f} / {b['cpu_s']:.0f}"
            pss = f"{y['peak_gb']:.2f} / {b['peak_gb']:.2f}"
            rss = f"{y.get('peak_rss_sum_gb', float('nan')):.2f} / {b.get('peak_rss_sum_gb', float('nan')):.2f}"
        else:
            times, cpu = f"{y['wall_s']:.1f} / not run", f"{y['cpu_s']:.0f} / -"
            pss, rss = f"{y['peak_gb']:.2f} / -", f"{y.get('peak_rss_sum_gb', float('nan')):.2f} / -"
        lines.append(f"| {row['size']} ({row['bytes'] / 1e6:,.0f} MB) | {row['characters'] / 1e6:.1f} M | {counted} | "
                     f"{row['training_words']['unique']:,} | {times} | {cpu} | {pss} | {rss} | {civil} | "
                     f"{y['load_before'][0]:.1f} -> {(b or y)['load_after'][0]:.1f} |")
    return "\n".join(lines)

if __name__ == "__main__":
    main()
