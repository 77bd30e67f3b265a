"""Seeded corpus streams: `generate_corpus(domain, ...)` yields plain-text documents of one domain.

Every document has its own random generator seeded from (seed, domain, split, index), so a document does not
depend on how many were generated before it, the "heldout" split is a different stream from "train" (no shared
documents, sentences shared only by chance or because they state the same fact), and regeneration is
byte-identical. About 70% of the documents are Chinese. Each document is handed a few "focus" facts from a
rotation over the domain's knowledge base, so every fact is stated many times in any corpus of reasonable size.

    python -m yunshan.samples --out DIR          # writes corpora, held-out text, SFT and eval sets
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterator

from .facts import Fact, facts
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


def stream_rng(seed: int, *parts: object) -> random.Random:
    """A generator seeded from seed and a path of names: string seeds hash with SHA-512, stable across runs."""
    return random.Random("yunshan-samples|" + "|".join(str(p) for p in (seed,) + parts))


def _rotation(seed: int, domain: str) -> list[Fact]:
    order = list(facts(domain))
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
    order = _rotation(seed, domain)
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
