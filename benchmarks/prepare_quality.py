"""The quality rules of `yunshan data prepare` measured on the real laws corpus: each rule's value per document
(percentiles) and how many real laws each threshold would drop, beside a synthetic page of web furniture and spam.

    python benchmarks/prepare_quality.py [--corpus ../shared/realdata/laws/laws.jsonl.zst] [--out FILE.json]

The laws are official texts: a rule that drops one of them is too strict for this corpus, so the defaults of
yunshan/prepare/args.py QualityArgs are set above the real laws' highest values (the table says where), and the
spam fixture below shows what they catch. Prints a table, writes JSON (default benchmarks/results/prepare_quality.json).
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np

from yunshan.data.records import read_records
from yunshan.prepare.args import QualityArgs
from yunshan.prepare.quality import cjk_share, dup_line_share, quality_reason, repetition_shares, symbol_share

ROOT = Path(__file__).resolve().parents[1]
SPAM = ["点击这里领取大奖！" * 40, "首页 > 新闻 > 正文\n" * 30, "| --- | --- | --- |\n" * 50,
        "function(){var a=1;return a;} " * 40, "Buy cheap pills online now best price " * 30]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--corpus", default=str(ROOT.parent / "shared/realdata/laws/laws.jsonl.zst"))
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/prepare_quality.json"))
    a = parser.parse_args()
    args = QualityArgs()
    values = {"top_char_ngram": [], "dup_char_ngram": [], "dup_lines": [], "cjk_share": [], "symbol_share": []}
    for _, record, _ in read_records(a.corpus):
        text = record["text"]
        compact = re.sub(r"\s+", "", text)
        top, dup = repetition_shares(text, args.top_ngram, args.dup_ngram)
        for key, v in (("top_char_ngram", top), ("dup_char_ngram", dup), ("dup_lines", dup_line_share(text)),
                       ("cjk_share", cjk_share(compact)), ("symbol_share", symbol_share(compact))):
            values[key].append(v)
    limits = {"top_char_ngram": ("max", args.max_top_ngram_share), "dup_char_ngram": ("max", args.max_dup_ngram_share),
              "dup_lines": ("max", args.max_dup_line_share), "cjk_share": ("min", args.min_cjk_share),
              "symbol_share": ("max", args.max_symbol_share)}
    rows = {}
    print(f"{'rule':16} {'p50':>6} {'p99':>6} {'p99.9':>6} {'max/min':>8} {'limit':>6} {'laws dropped':>12}")
    for key, v in values.items():
        v = np.array(v)
        kind, limit = limits[key]
        extreme = v.max() if kind == "max" else v.min()
        dropped = int((v > limit).sum() if kind == "max" else (v < limit).sum())
        rows[key] = {"p50": float(np.percentile(v, 50)), "p99": float(np.percentile(v, 99)),
                     "p99.9": float(np.percentile(v, 99.9)), kind: float(extreme), "limit": limit,
                     "laws_dropped": dropped, "documents": len(v)}
        print(f"{key:16} {rows[key]['p50']:6.3f} {rows[key]['p99']:6.3f} {rows[key]['p99.9']:6.3f} "
              f"{extreme:8.3f} {limit:6.2f} {dropped:12,}")
    spam = {s[:20]: quality_reason(s, args) for s in SPAM}
    for start, reason in spam.items():
        print(f"spam {start!r}: {reason}")
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps({"corpus": a.corpus, "rules": rows, "spam": spam}, ensure_ascii=False, indent=1))


if __name__ == "__main__":
    main()
