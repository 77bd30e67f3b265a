"""The near duplicates `yunshan data prepare` finds on the real laws corpus: every cluster with its size, the true
Jaccard similarity of every pair it removed, and 20 pairs drawn at random to read and judge (benchmarks/README.md).

    yunshan data prepare --config recipes/prepare/laws.yaml keep_work=true        # writes runs/laws_prepared
    .venv/bin/python benchmarks/prepare_near_duplicates.py [--prepared runs/laws_prepared] [--pairs 20]

MinHash estimates the Jaccard similarity of two documents' sets of 5-unit shingles (a unit: a CJK character or a
word; yunshan/prepare/dedup.py) and LSH with 14 bands of 8 rows makes a pair a candidate with probability
1 - (1 - s^8)^14: one half at s = 0.72. Here the similarity of each removed document to the one kept in its cluster
is computed exactly, on the same shingles, so the table shows how similar the pairs found really are; each drawn pair
is printed with its titles, sizes and the lines that differ, for a reader to judge (same document, another version
of one law, or a false match). Exact deduplication ran first, so every pair here is one exact deduplication alone
left in the corpus. Writes benchmarks/results/prepare_near_duplicates.json.
"""

from __future__ import annotations

import argparse
import difflib
import json
import random
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--prepared", default=str(ROOT / "runs/laws_prepared"))
    parser.add_argument("--pairs", type=int, default=20)
    parser.add_argument("--seed", type=int, default=46)
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/prepare_near_duplicates.json"))
    a = parser.parse_args()

    from datatrove.pipeline.dedup.minhash import MinhashConfig

    from yunshan.data.records import read_records
    from yunshan.prepare.dedup import UnitShingles

    prepared = Path(a.prepared)
    clusters = [json.loads(line) for line in (prepared / "near_duplicates.jsonl").read_text(encoding="utf-8")
                .splitlines()]
    report = json.loads((prepared / "prepare_report.json").read_text(encoding="utf-8"))
    texts: dict[str, str] = {}
    for path in {i.rsplit(":", 1)[0] for c in clusters for i in c["kept"] + c["removed"]}:
        for location, record, _ in read_records(path):
            texts[location] = record["text"]
    shingler = UnitShingles("/tmp/unused-signatures", MinhashConfig())

    def shingles(doc_id: str) -> set:
        return set(shingler.get_shingles(texts[doc_id]).ravel().tolist())

    pairs = []
    for c in clusters:
        keep = c["kept"][0] if c["kept"] else c["removed"][0]
        kept_set = shingles(keep)
        for other in c["removed"]:
            if other == keep:
                continue
            s = shingles(other)
            pairs.append({"cluster": c["cluster"], "size": c["size"], "kept": keep, "removed": other,
                          "jaccard": round(len(kept_set & s) / max(len(kept_set | s), 1), 3)})
    sizes: dict[int, int] = {}
    for c in clusters:
        sizes[c["size"]] = sizes.get(c["size"], 0) + 1
    jac = sorted(p["jaccard"] for p in pairs)
    chars_removed = sum(len(texts[p["removed"]]) for p in pairs)
    print(f"{len(clusters)} clusters ({', '.join(f'{n} of size {k}' for k, n in sorted(sizes.items()))}); "
          f"{len(pairs)} documents removed, {chars_removed:,} characters, after exact deduplication removed "
          f"{report['dropped'].get('exact duplicates: exact_duplicate', 0)}")
    if jac:
        print(f"Jaccard of the removed to the kept: min {jac[0]}, median {jac[len(jac) // 2]}, max {jac[-1]}; "
              f"below 0.72: {sum(j < 0.72 for j in jac)}, below 0.5: {sum(j < 0.5 for j in jac)}")
    print("\nclusters (size, first line of the kept document):")
    for c in clusters:
        print(f"  {c['size']:3}  {texts[c['kept'][0] if c['kept'] else c['removed'][0]].splitlines()[0][:70]}")
    rng = random.Random(a.seed)
    sample = rng.sample(pairs, min(a.pairs, len(pairs)))
    print(f"\n{len(sample)} pairs drawn at random (seed {a.seed}):")
    for i, p in enumerate(sample, 1):
        left, right = texts[p["kept"]], texts[p["removed"]]
        diff = [line for line in difflib.unified_diff(left.splitlines(), right.splitlines(), lineterm="", n=0)
                if line[:1] in "+-" and not line.startswith(("+++", "---"))]
        print(f"\n[{i}] Jaccard {p['jaccard']}, cluster of {p['size']}; {len(left):,} vs {len(right):,} characters; "
              f"{len(diff)} lines differ")
        print(f"    kept:    {p['kept'].rsplit('/', 1)[-1]}  {left.splitlines()[0][:60]}")
        print(f"    removed: {p['removed'].rsplit('/', 1)[-1]}  {right.splitlines()[0][:60]}")
        for line in diff[:6]:
            print(f"      {line[:110]}")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps({"clusters": len(clusters), "sizes": sizes, "pairs": pairs,
                                       "sample": sample, "chars_removed": chars_removed}, ensure_ascii=False,
                                      indent=1))


if __name__ == "__main__":
    main()
