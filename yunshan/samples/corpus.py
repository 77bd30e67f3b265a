"""Seeded corpus streams: `generate_corpus(domain, ...)` yields plain-text documents of one domain.

Every document has its own random generator seeded from (seed, domain, split, index), so a document does not
depend on how many were generated before it, the "heldout" split is a different stream from "train" (no shared
documents, sentences shared only by chance or because they state the same fact), and regeneration is
byte-identical. About 70% of the documents are Chinese. Each document is handed a few "focus" facts from a
rotation over the domain's knowledge base (its training side for "train", its evaluation side for "heldout"), so
every fact is stated many times in any corpus of reasonable size. The held-out stream is on the evaluation side
(SideRandom): other templates, phrasings, names and numbers than the training stream.

    python -m yunshan.samples --out DIR          # writes corpora, held-out text, SFT and eval sets
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator

from .facts import Fact, facts, on_side
from .finance import finance_document
from .general import general_document
from .legal import legal_document

DOMAINS = ("general", "finance", "legal")
SPLITS = ("train", "heldout")
ZH_SHARE = 0.7
# Characters per domain at scale 1.0 (the shipped tree); generate_corpus uses them when no size is given.
DEFAULT_CHARS = {"general": 550_000, "finance": 600_000, "legal": 500_000}
HELDOUT_FRACTION = 0.1
_FOCUS = 10  # facts handed to each document; generators state at least the first one
_BLANK_LINES = re.compile(r"\n\s*\n")
_GENERATORS = {"general": general_document, "finance": finance_document, "legal": legal_document}


class SideRandom(random.Random):
    """A seeded generator on one side of the samples: training data (corpora, SFT sets) draws every choice from the
    even-numbered entries of a template, vocabulary or entity list, evaluation data (held-out texts, evaluation
    sets) from the odd-numbered ones, so the two never share a template, a phrasing or a name. A list of one entry
    is shared (both sides need it)."""

    def __init__(self, seed: str, side: int):
        self.side = side
        super().__init__(seed)

    def _half(self, seq):
        return seq[self.side::2] if len(seq) >= 2 else seq

    def choice(self, seq):
        return super().choice(self._half(seq))

    def randint(self, a: int, b: int) -> int:
        """A whole number of the side's parity (training even, evaluation odd) when [a, b] holds both, so numbers
        drawn into the same sentence frame differ between the sides."""
        v = super().randint(a, b)
        if b > a and v % 2 != self.side:
            v = v + 1 if v < b else v - 1
        return v

    def sample(self, population, k, **kw):
        half = self._half(population) if not isinstance(population, (set, frozenset)) else population
        return super().sample(half if len(half) >= k else population, k, **kw)


EVAL_SIDE = ("heldout", "eval")


def stream_rng(seed: int, *parts: object) -> random.Random:
    """A generator seeded from seed and a path of names (string seeds hash with SHA-512, stable across runs), on the
    evaluation side when the path names "heldout" or "eval" (SideRandom), else on the training side."""
    side = int(any(p in EVAL_SIDE for p in parts))
    return SideRandom("yunshan-samples|" + "|".join(str(p) for p in (seed,) + parts), side)


def _rotation(seed: int, domain: str, side: str) -> list[Fact]:
    order = list(on_side(facts(domain), side))
    stream_rng(seed, domain, "fact-order").shuffle(order)
    return order


def generate_corpus(domain: str, lang: str | None = None, seed: int = 0, n_docs: int | None = None,
                    n_chars: int | None = None, split: str = "train") -> Iterator[dict]:
    """Yield documents `{"id", "text", "lang", "domain", "kind"}` of one domain.

    Args:
        domain: "general", "finance" or "legal".
        lang: None for the natural mix (about 70% "zh"), or "zh" / "en" for one language only.
        seed: any int; the same arguments always give the same documents.
        n_docs: stop after this many documents.
        n_chars: stop once the documents yielded hold at least this many characters (the last one may overshoot).
            With neither n_docs nor n_chars, the default size of the domain at scale 1.0 (DEFAULT_CHARS) is used.
        split: "train" or "heldout"; the two are independent streams.
    """
    if domain not in _GENERATORS:
        raise ValueError(f"unknown domain {domain!r}; valid: {list(DOMAINS)}")
    if lang not in (None, "zh", "en"):
        raise ValueError(f"lang must be None, 'zh' or 'en', got {lang!r}")
    if split not in SPLITS:
        raise ValueError(f"split must be one of {list(SPLITS)}, got {split!r}")
    if n_docs is None and n_chars is None:
        n_chars = DEFAULT_CHARS[domain]
    gen = _GENERATORS[domain]
    order = _rotation(seed, domain, "train" if split == "train" else "eval")
    step = max(1, len(order) // _FOCUS + 1)
    produced = chars = 0
    i = 0
    while (n_docs is None or produced < n_docs) and (n_chars is None or chars < n_chars):
        rng = stream_rng(seed, domain, split, i)
        doc_lang = "zh" if rng.random() < ZH_SHARE else "en"
        if lang is None or doc_lang == lang:
            # focus[0] walks the whole rotation one fact per document; the others are spread across it.
            focus = [order[(i + j * step) % len(order)] for j in range(_FOCUS)]
            kind, text = gen(rng, doc_lang, focus)
            # Held-out files separate documents by a blank line, so a document must never contain one.
            text = _BLANK_LINES.sub("\n", text).strip()
            yield {"id": f"{domain}-{split}-{seed}-{i:07d}", "text": text, "lang": doc_lang, "domain": domain,
                   "kind": kind}
            produced += 1
            chars += len(text)
        i += 1
