"""What yunshan gives datatrove's deduplication stages: characters as the words of Chinese text, the exact-duplicate
key, and the list of near-duplicate clusters (`yunshan data prepare`).

    MinhashDedupSignature(output_folder, config, language=MixedScriptWords())    # datatrove's stage 1, CJK-aware

Near duplicates are datatrove's MinHash stages (signatures, LSH buckets, clusters, filter). Its shingles are n-grams
of words from a word tokenizer chosen by language; for Chinese that is spaCy with jieba, neither installed with
datatrove[processing], and a segmenter makes the shingles depend on a dictionary. Here every CJK character
(ideographs, kana, Hangul) is a word of its own and every run of other letters and digits is one word, as yunshan's
decontamination cuts units (yunshan/data/ngrams.py): Chinese is shingled by character n-grams and English by word
n-grams, in one document too; every number is the same word (datatrove's `norm_numbers`), so two versions of a law
that differ in their article numbers and dates still look alike. `MixedScriptWords` is that cut as a datatrove
WordTokenizer; `UnitShingles` is datatrove's stage 1 with the same shingles computed in numpy and the signature's
modulo done without a division, in bounded memory (on 300 laws: shingles 7x and the signature 1.4x faster than
datatrove's own, the same signature values; benchmarks/README.md).

The threshold: LSH with `buckets` bands of `hashes_per_bucket` rows makes two documents of Jaccard similarity s a
candidate with probability 1 - (1 - s^r)^b; the similarity at which that is one half is about (1/b)^(1/r). The
defaults (5-character shingles, 14 bands of 8) put it at 0.72, datatrove's own; benchmarks/prepare_near_duplicates.py
measures, on the real laws corpus, the true Jaccard similarity of every pair found, and benchmarks/README.md has
20 sampled pairs read and judged, and what exact deduplication alone left in.

Exact duplicates: datatrove's ExactDedup stages on the document's text with white space collapsed (`exact_key`).
`ClusterLog` writes one line per member of each near-duplicate cluster (kept or removed, its id, characters and
size of its cluster) for the report; datatrove's MinhashDedupFilter gives the cluster of each document it keeps
(`load_cluster_ids`) and hands each one it removes to an exclusion writer, which is a `ClusterLog` too.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from datatrove.pipeline.base import PipelineStep
from datatrove.pipeline.writers.disk_base import DiskWriter
from datatrove.utils.word_tokenizers import WordTokenizer

_CJK_CLASS = r"\u3005-\u3007\u3040-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_WORDS = re.compile(rf"[{_CJK_CLASS}\U00020000-\U000323af]|[^\W{_CJK_CLASS}]+")
_SPACES = re.compile(r"\s+")


class MixedScriptWords(WordTokenizer):
    """A datatrove word tokenizer: a CJK character is a word, so is a run of other letters and digits."""

    def __init__(self):
        super().__init__("mixed")

    def word_tokenize(self, text: str) -> list[str]:
        return _WORDS.findall(text)

    def sent_tokenize(self, text: str) -> list[str]:
        return [s for s in re.split(r"(?<=[。！？!?])\s*|\n+", text) if s.strip()]

    def span_tokenize(self, text: str) -> list[tuple[int, int]]:
        return [m.span() for m in _WORDS.finditer(text)]


def _minhash_signature_class():
    from datatrove.pipeline.dedup.minhash import MinhashDedupSignature

    return MinhashDedupSignature


class UnitShingles(_minhash_signature_class()):
    """datatrove's MinHash stage 1 with its shingles computed in numpy: the units of yunshan's decontamination
    (yunshan/data/ngrams.py `cut_units`: NFKC and case folding, a CJK character or a word per unit, punctuation and
    spaces dropped), every number one and the same unit (datatrove's `norm_numbers`), and a 64-bit hash of every
    n units: the shingles `MixedScriptWords` gives datatrove's own get_shingles, hashed differently, 7x faster (its
    per-n-gram Python loop and text simplification were most of a preparation's time)."""

    name = "🎯 MinHash stage 1 (units)"

    def __init__(self, output_folder, config=None):
        super().__init__(output_folder, config, language=MixedScriptWords())
        self._tables = None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_tables"] = None  # learned per process
        return state

    def get_shingles(self, text: str):
        import numpy as np

        from yunshan.data.ngrams import UnitTables, cut_units

        if self._tables is None:
            self._tables = UnitTables()
        units = cut_units(self._tables, [text])
        n = self.config.n_grams
        if len(units.mixed) < n:
            return np.zeros((0, 1), dtype=np.uint64)
        codes = units.mixed.copy()
        first = units.normalized[units.starts]
        codes[units.words & (first >= 0x30) & (first <= 0x39)] = np.uint64(_NUMBER)
        count = len(codes) - n + 1
        h = np.full(count, np.uint64(0xCBF29CE484222325), dtype=np.uint64)
        for k in range(n):
            h = (h ^ codes[k:k + count]) * np.uint64(_FNV_PRIME)
        return h.reshape(-1, 1)

    def get_signature(self, shingles):
        """datatrove's signature, value for value ((a * s + b) mod 2^64, then mod 2^61 - 1, the minimum per hash),
        with the modulo done by the Mersenne identity instead of a division and the shingles taken 2,048 at a time:
        datatrove's own holds shingles x hashes integers at once (7 GB for an 8 M-character document)."""
        import numpy as np

        a, b = self.parameters
        best = np.full(a.shape[1], np.iinfo(np.uint64).max, dtype=np.uint64)
        prime = np.uint64((1 << 61) - 1)
        shift = np.uint64(61)
        for start in range(0, len(shingles), _ROWS):
            x = shingles[start:start + _ROWS] * a  # wraps modulo 2^64, as datatrove's does
            x += b
            high = x >> shift
            x &= prime
            x += high  # now at most prime + 7: one subtraction for the (astronomically rare) values past prime
            over = x >= prime
            if over.any():
                x[over] -= prime
            if self.config.hash_config.precision == 32:
                x = np.bitwise_and(x, np.uint64(self.config.hash_config.max))
            np.minimum(best, x.min(axis=0), out=best)
        return [part.tolist() for part in np.split(best.astype(self.config.hash_config.np_dtype),
                                                   self.config.num_buckets)]


_NUMBER = 0x4E554D  # every number is this one unit
_FNV_PRIME = 0x100000001B3
_ROWS = 1 << 11


def exact_key(doc) -> str:
    """The text exact deduplication compares: white space collapsed to one space, ends stripped."""
    return _SPACES.sub(" ", doc.text).strip()


def _member(doc, kept: bool) -> dict:
    return {"cluster": doc.metadata.get("minhash_cluster_id", -1), "size": doc.metadata.get("minhash_cluster_size", 1),
            "kept": kept, "id": doc.id, "chars": len(doc.text), "start": doc.text[:80]}


class ClusterLog(PipelineStep):
    """Writes FOLDER/kept/RANK.jsonl: one line per kept document that is in a near-duplicate cluster."""

    type = "🫂 - DEDUP"
    name = "📋 near-duplicate clusters"

    def __init__(self, folder: str):
        super().__init__()
        self.folder = str(folder)

    def run(self, data, rank: int = 0, world_size: int = 1):
        lines = []
        for doc in data:
            if doc.metadata.get("minhash_cluster_id", -1) != -1:
                lines.append(_member(doc, kept=True))
            doc.metadata.pop("minhash_cluster_id", None)
            doc.metadata.pop("minhash_cluster_size", None)
            yield doc
        _write_lines(Path(self.folder) / "kept" / f"{rank:05d}.jsonl", lines)


class RemovedClusterLog(DiskWriter):
    """MinhashDedupFilter's exclusion writer: FOLDER/removed/RANK.jsonl, one line per removed near duplicate."""

    name = "removed near duplicates"

    def __init__(self, folder: str):
        super().__init__(folder, output_filename="${rank}.unused")
        self.folder = str(folder)
        self._lines: list[dict] = []
        self._rank = 0

    def write(self, document, rank: int = 0, **kwargs):
        self._rank = rank
        self._lines.append(_member(document, kept=False))
        self.stat_update("chars_removed", value=len(document.text))

    def _write(self, document, file_handler, filename):  # never called: write() keeps a line per document
        raise NotImplementedError

    def close(self):
        if self._lines:  # the rank is known from a write; a task that removed nothing writes no file
            _write_lines(Path(self.folder) / "removed" / f"{self._rank:05d}.jsonl", self._lines)
        self._lines = []
        super().close()


def _write_lines(path: Path, lines: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    with open(temporary, "w", encoding="utf-8") as f:
        for line in lines:
            f.write(json.dumps(line, ensure_ascii=False) + "\n")
    os.replace(temporary, path)


def load_clusters(folder: str | Path) -> list[dict]:
    """Every near-duplicate cluster (members kept and removed), largest first: {cluster, size, members}."""
    clusters: dict[tuple, dict] = {}
    folder = Path(folder)
    for path in sorted(folder.glob("*/*.jsonl")):
        rank = path.stem
        for line in path.read_text(encoding="utf-8").splitlines():
            member = json.loads(line)
            # cluster ids are global to the run (MinhashDedupCluster numbers them once)
            entry = clusters.setdefault(member["cluster"], {"cluster": member["cluster"], "size": member["size"],
                                                            "members": []})
            entry["members"].append({**member, "rank": rank})
    out = sorted(clusters.values(), key=lambda c: (-c["size"], c["cluster"]))
    for c in out:
        c["members"].sort(key=lambda m: (not m["kept"], m["id"]))
    return out
