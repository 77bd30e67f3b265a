"""Write the whole sample tree (corpora, held-out text, SFT sets, eval sets) and its manifest.

    python -m yunshan.samples --out DIR [--seed S] [--scale X]

Layout under DIR:
    corpora/{general,finance,legal}/train.jsonl     documents {"id", "text", "lang", "domain", "kind"}
    heldout/{general,finance,legal}.txt             held-out documents (another seed stream), blank-line separated
    sft/general_alpaca.jsonl, sft/legal_messages.jsonl, sft/finance_sharegpt.jsonl
    sft/jecqa/{0,1}_train.json, sft/finance_exam/{subject}_train.csv
    preference/legal_pairs.jsonl, preference/finance_scored.jsonl   (yunshan.samples.preference)
    eval/fineval/..., eval/financeiq/..., eval/lawbench/..., eval/jecqa/...
    manifest.json                                   file -> sha256, records, chars; plus seed and scale

The same seed and scale always give byte-identical files; the tree shipped in yunshan/samples/data/ is
`write_samples(sample_data_dir())` with the defaults, and a test regenerates it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path

from .benchmarks import build_eval
from .corpus import DEFAULT_CHARS, DOMAINS, HELDOUT_FRACTION, generate_corpus
from .formats import OutFile, render_jsonl, render_text
from .instructions import build_sft
from .preference import build_preference

MANIFEST = "manifest.json"
# Bump when the generators change in a way that changes the bytes for a given seed.
FORMAT_VERSION = 2


def sample_data_dir() -> Path:
    """The directory of the sample tree shipped inside the package (seed 0, scale 1.0)."""
    return Path(__file__).resolve().parent / "data"


def build_samples(seed: int = 0, scale: float = 1.0) -> dict[str, OutFile]:
    """Every file of the tree, rendered in memory: relative path -> OutFile (the manifest excluded)."""
    if scale <= 0:
        raise ValueError(f"scale must be positive, got {scale}")
    files: dict[str, OutFile] = {}
    for domain in DOMAINS:
        n = int(DEFAULT_CHARS[domain] * scale)
        train = list(generate_corpus(domain, seed=seed, n_chars=n))
        files[f"corpora/{domain}/train.jsonl"] = render_jsonl(train)
        # The held-out stream is independent, but a short templated document (a statute excerpt, say) can still
        # come out identical to a training one; drop those so held-out scores never reward memorised documents.
        seen = {d["text"] for d in train}
        held, chars = [], 0
        for d in generate_corpus(domain, seed=seed, n_docs=10**9, split="heldout"):
            if chars >= max(1, int(n * HELDOUT_FRACTION)):
                break
            if d["text"] not in seen:
                held.append(d["text"])
                chars += len(d["text"])
        files[f"heldout/{domain}.txt"] = render_text(held)
    files.update({f"sft/{p}": f for p, f in build_sft(seed, scale).items()})
    files.update({f"preference/{p}": f for p, f in build_preference(seed, scale).items()})
    eval_files, _ = build_eval(seed)
    files.update({f"eval/{p}": f for p, f in eval_files.items()})
    return files


def _manifest(files: dict[str, OutFile], seed: int, scale: float) -> str:
    entries = {}
    for path in sorted(files):
        f = files[path]
        data = f.text.encode("utf-8")
        entries[path] = {"sha256": hashlib.sha256(data).hexdigest(), "records": f.records, "chars": len(f.text),
                         "bytes": len(data)}
    body = {"generator": "yunshan.samples", "format_version": FORMAT_VERSION, "seed": seed, "scale": scale,
            "synthetic": True, "files": entries}
    return json.dumps(body, ensure_ascii=False, indent=2) + "\n"


def write_samples(out_dir: str | Path, seed: int = 0, scale: float = 1.0) -> dict:
    """Write the sample tree under `out_dir` and return the manifest (as a dict).

    Args:
        out_dir: target directory (created if needed; existing files of the same names are overwritten,
            other files are left alone).
        seed: seed of every stream; the same seed (and scale) gives byte-identical files.
        scale: multiplies the corpus sizes and the SFT set sizes (the eval sets have fixed sizes).
    """
    out = Path(out_dir)
    files = build_samples(seed, scale)
    for rel, f in files.items():
        path = out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(f.text.encode("utf-8"))
    manifest = _manifest(files, seed, scale)
    (out / MANIFEST).write_bytes(manifest.encode("utf-8"))
    return json.loads(manifest)


def main(argv: list[str] | None = None) -> int:
    """Command line: `python -m yunshan.samples --out DIR [--seed S] [--scale X]`; prints a size table."""
    ap = argparse.ArgumentParser(prog="python -m yunshan.samples",
                                 description="Write yunshan's synthetic sample corpora, SFT sets and eval sets.")
    ap.add_argument("--out", required=True, help="output directory")
    ap.add_argument("--seed", type=int, default=0, help="seed of all generators (default 0, the shipped tree)")
    ap.add_argument("--scale", type=float, default=1.0, help="size multiplier for corpora and SFT sets (default 1.0)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    manifest = write_samples(args.out, seed=args.seed, scale=args.scale)
    dt = time.perf_counter() - t0
    groups: dict[str, list[int]] = {}
    for path, e in manifest["files"].items():
        g = "/".join(path.split("/")[:2]) if path.startswith(("corpora", "eval")) else path.split("/")[0]
        acc = groups.setdefault(g, [0, 0, 0])
        acc[0] += e["records"]
        acc[1] += e["chars"]
        acc[2] += e["bytes"]
    print(f"{'group':<22}{'records':>10}{'chars':>12}{'MB':>9}")
    for g, (r, c, b) in sorted(groups.items()):
        print(f"{g:<22}{r:>10}{c:>12}{b / 1e6:>9.2f}")
    total = sum(e["bytes"] for e in manifest["files"].values())
    print(f"wrote {len(manifest['files'])} files, {total / 1e6:.2f} MB, to {args.out} in {dt:.1f}s "
          f"(seed {args.seed}, scale {args.scale})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
