"""How many Chinese characters make the 13 words of a decontamination window: characters per word of real Chinese
text, cut into words by jieba (a segmenter run here once, never at run time). A benchmark, not a test.

    .venv/bin/python benchmarks/cjk_ngram_length.py        # about a minute on 2 cores; needs ../shared/realdata

The method (GPT-3, lm-evaluation-harness, Llama 2's appendix A.6) compares word n-grams, 13 words long. yunshan
compares Chinese by character (a segmenter at run time would be slow and would cut the same text differently in a
question and in a corpus), so its window for CJK text is 13 words' worth of characters: `cjk_n` =
round(13 x characters per word). Words here are jieba 0.42.1's default (precise) cut; a word counts when it holds
a CJK character, and its CJK characters are counted (punctuation, digits and Latin words are words of their own
in both schemes, so they are left out of the ratio). Texts: a seeded sample of 300 laws of the laws corpus, the
Civil Code, every CMMLU test question and FinEval val question with its options (general and finance exam Chinese),
and every LawBench zero-shot question and answer. Writes benchmarks/results/cjk_ngram_length.json.
"""

from __future__ import annotations

import csv
import io
import json
import os
import random
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REALDATA = Path(os.environ.get("YUNSHAN_REALDATA") or ROOT.parent / "shared" / "realdata")
CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")


def characters_per_word(texts) -> tuple[int, int]:
    import jieba

    jieba.setLogLevel(60)
    chars = words = 0
    for text in texts:
        for word in jieba.cut(text):
            n = len(CJK.findall(word))
            if n:
                chars, words = chars + n, words + 1
    return chars, words


def corpora() -> dict[str, list[str]]:
    import zstandard

    with open(REALDATA / "laws" / "laws.jsonl.zst", "rb") as f:
        lines = io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(f), encoding="utf-8").read().splitlines()
    laws = [json.loads(line)["text"] for line in lines if line.strip()]
    out = {"laws corpus (300 laws, seed 0)": random.Random(0).sample(laws, 300),
           "Civil Code": [(REALDATA / "laws" / "civil_code.txt").read_text(encoding="utf-8")]}
    out["CMMLU test (questions + options)"] = [
        " ".join(row[k] for k in ("Question", "A", "B", "C", "D"))
        for path in sorted((REALDATA / "cmmlu" / "test").glob("*.csv"))
        for row in csv.DictReader(open(path, encoding="utf-8"))]
    out["FinEval val (questions + options)"] = [
        " ".join(row[k] for k in ("question", "A", "B", "C", "D"))
        for path in sorted((REALDATA / "fineval" / "val").glob("*.csv"))
        for row in csv.DictReader(open(path, encoding="utf-8"))]
    out["LawBench zero-shot (questions + answers)"] = [
        r["question"] + r["answer"] for path in sorted((REALDATA / "lawbench" / "data" / "zero_shot").glob("*.json"))
        for r in json.loads(path.read_text(encoding="utf-8"))]
    return out


def main() -> None:
    if not REALDATA.is_dir():
        raise SystemExit(f"{REALDATA} is absent: the real releases are not beside this checkout (set YUNSHAN_REALDATA)")
    rows = []
    for name, texts in corpora().items():
        chars, words = characters_per_word(texts)
        rows.append({"text": name, "cjk_characters": chars, "words": words, "characters_per_word": chars / words,
                     "characters_in_13_words": 13 * chars / words})
    print("| text | CJK characters | jieba words | characters per word | 13 words in characters |")
    print("|---|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['text']} | {r['cjk_characters']:,} | {r['words']:,} | {r['characters_per_word']:.2f} | "
              f"{r['characters_in_13_words']:.1f} |")
    low, high = min(r["characters_per_word"] for r in rows), max(r["characters_per_word"] for r in rows)
    print(f"\ncharacters per word {low:.2f}-{high:.2f}: 13 words are {13 * low:.0f}-{13 * high:.0f} characters; "
          "yunshan's default cjk_n is 25 (1.9 characters per word)")
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    (out / "cjk_ngram_length.json").write_text(json.dumps({"rows": rows, "segmenter": "jieba 0.42.1 (precise)"},
                                                          indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
