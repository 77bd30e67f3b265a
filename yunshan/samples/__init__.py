"""yunshan.samples: the project's own synthetic sample data and the seeded generator that writes it.

Finance, legal and general corpora (about 70% Chinese), held-out text, SFT sets (alpaca, messages, ShareGPT,
JEC-QA, C-Eval rows) and small eval sets in the FinEval, FinanceIQ, LawBench and JEC-QA formats, all built from
templates and vocabularies written for yunshan around a fixed knowledge base of finance and legal facts. The
training data and the evaluation data (held-out texts, evaluation sets) share no template, fact or entity. No
downloads; the same seed gives the same bytes. See README.md in this folder.

    python -m yunshan.samples --out DIR [--seed S] [--scale X]

    from yunshan.samples import generate_corpus, write_samples, sample_data_dir
    docs = generate_corpus("finance", lang="zh", seed=0, n_chars=1_000_000)
"""

from .corpus import DEFAULT_CHARS, DOMAINS, generate_corpus
from .writer import build_samples, main, sample_data_dir, write_samples

__all__ = ["DEFAULT_CHARS", "DOMAINS", "build_samples", "generate_corpus", "main", "sample_data_dir",
           "write_samples"]
