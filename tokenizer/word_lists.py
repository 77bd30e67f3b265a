"""Curated word lists: read and clean them, and make every term reachable as one token through chains of merges.

    yunshan tokenizer extend --base BASE --corpus C.jsonl --words builtin:finance my_terms.txt --new-tokens N --out OUT

A word list is a UTF-8 text file, one term per line; blank lines, lines starting with "#" and repeated terms are
dropped and counted. `builtin:NAME` names a list shipped in tokenizer/wordlists/ (finance_zh, finance_en, legal_zh,
legal_en; `builtin:finance`, `builtin:legal` and `builtin:all` expand to several); see wordlists/README.md.

A term is not added as a special token (that would cut text around it and never compose). Every term is encoded
with the base vocabulary and BPE is run over the terms themselves until each is one token (`build_merge_chains`):
the terms become reachable through chains of ordinary merges, and pieces they share become tokens once, for all
of them (../shared/docs/tokenizer-extension.md, "Word lists", joins each term left to right instead, which costs
more tokens). These merges are built before the corpus BPE, so they rank above the corpus merges and the corpus
BPE learns on top of them. A term gets one chain per
form in which a text shows it: alone ("资产负债表"); after a space for Latin-script terms of byte-level tokenizers
(" amortization"); and, for SentencePiece-style tokenizers, also inside a word for scripts written without spaces
(Chinese: "...的资产负债表..." has no "▁" before the term). A term that the pre-tokeniser cuts into several words
("balance sheet" with a byte-level tokenizer) cannot become one token and is reported, not added.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from .bpe_encoder import apply_merges
from .continued_bpe import LearnedStep, learn_continued_bpe

WORDLIST_DIR = Path(__file__).resolve().parent / "wordlists"
BUILTIN_LISTS = ("finance_zh", "finance_en", "legal_zh", "legal_en")
BUILTIN_GROUPS = {"finance": ("finance_zh", "finance_en"), "legal": ("legal_zh", "legal_en"), "all": BUILTIN_LISTS}


@dataclass
class WordList:
    source: str
    terms: list[str]
    lines: int = 0
    blank_lines: int = 0
    comment_lines: int = 0
    duplicates: int = 0

    def summary(self) -> dict:
        out = asdict(self)
        out["terms"] = len(self.terms)
        return out


def resolve_word_lists(specs: list[str]) -> list[Path]:
    """Expand `builtin:NAME` specs to shipped files; other specs are file paths."""
    paths: list[Path] = []
    for spec in specs:
        if spec.startswith("builtin:"):
            name = spec.split(":", 1)[1]
            names = BUILTIN_GROUPS.get(name, (name,) if name in BUILTIN_LISTS else None)
            if names is None:
                valid = ", ".join(f"builtin:{n}" for n in (*BUILTIN_LISTS, *BUILTIN_GROUPS))
                raise ValueError(f"unknown word list {spec!r}; shipped lists are {valid}")
            paths += [WORDLIST_DIR / f"{n}.txt" for n in names]
        else:
            paths.append(Path(spec))
    return paths


def load_word_list(path: str | Path) -> WordList:
    """Read one word list, dropping (and counting) blank lines, "#" comments and duplicates."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"word list {path} does not exist")
    data = path.read_bytes()
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise ValueError(f"{path}: line {line}: invalid UTF-8 at byte offset {err.start} ({err.reason}); word lists "
                         "must be UTF-8, one term per line") from None
    result = WordList(str(path), [])
    seen: set[str] = set()
    for line in text.splitlines():
        result.lines += 1
        term = line.strip()
        if not term:
            result.blank_lines += 1
        elif term.startswith("#"):
            result.comment_lines += 1
        elif term in seen:
            result.duplicates += 1
        else:
            seen.add(term)
            result.terms.append(term)
    if not result.terms:
        raise ValueError(f"word list {path} has no terms ({result.lines} lines: {result.blank_lines} blank, "
                         f"{result.comment_lines} comments)")
    return result


@dataclass
class TermResult:
    term: str
    # "added", "already_one_token", "split_by_pre_tokenizer", "reserved" (a piece would equal an added or
    # byte-fallback token), "not_one_token" (SentencePiece semantics joined the pieces differently),
    # "breaks_base_convention" (one token would join what the base keeps apart: digits, a space, a line break)
    status: str
    forms: list[str] = field(default_factory=list)   # model-space words that encode to one token


def term_forms(base, term: str) -> list[str] | None:
    """Model-space words in which `term` should be one token; None when the pre-tokeniser splits the term."""
    alone = base.words(term)
    if len(alone) != 1:
        return None
    forms = [alone[0]]
    first = term[0]
    if base.kind == "byte_level" and first.isascii() and first.isalnum():
        spaced = base.words(" " + term)
        if len(spaced) == 1:
            forms.append(spaced[0])
    elif base.kind != "byte_level" and not first.isascii() and " " not in term:
        inner = base.normalizer.normalize_str(term) if base.normalizer is not None else term
        inner = inner.lstrip("▁")
        if inner and "▁" not in inner:
            forms.append(inner)
    return list(dict.fromkeys(forms))


def initial_symbols(base, word: str, vocab: dict[str, int], mergeable: Callable[[int], bool]) -> list:
    """Starting symbols of a word: token ids, or ("char", c) for a character that is not yet a token."""
    if base.ignore_merges and word in vocab and mergeable(vocab[word]):
        return [vocab[word]]
    symbols: list = []
    for char in word:
        idx = vocab.get(char)
        if idx is not None and mergeable(idx):
            symbols.append(idx)
        elif base.kind == "byte_level":
            raise ValueError(f"{base.source}: the byte-level vocabulary lacks the byte symbol {char!r}; a byte-level "
                             "BPE needs all 256 byte symbols")
        else:
            symbols.append(("char", char))
    return symbols


def build_merge_chains(base, terms: list[str], *, strings: list[str | None], vocab: dict[str, int], table,
                       mergeable: Callable[[int], bool], reserved: set[str] = frozenset(),
                       violation: Callable[[str], str | None] | None = None,
                       ) -> tuple[list[LearnedStep], list[TermResult]]:
    """Append merges (and, for SentencePiece-style bases, characters) until every term is one token.

    The merges are learned by BPE over the terms themselves (every form counted once, run until each is a single
    token), so pieces the terms share become tokens first (资产, 负债, 责任, ...) and a list costs far fewer new
    tokens than joining each term left to right. A form that is still not one token (possible with SentencePiece's
    any-split semantics) is finished by joining the first two pieces of its current segmentation, re-encoding and
    repeating. `strings`, `vocab` and `table` (a `bpe_encoder` table) are updated in place; returns the steps in
    rank order and one result per term. `violation` (model-space string -> reason or None, `conventions.py`): a term
    whose form would break a base convention as one token ("沪深300" where the base keeps digits single) is
    reported and not added; every piece of an allowed form is allowed too (the conventions are about adjacent
    characters and digit runs, which a piece only has fewer of).
    """
    steps: list[LearnedStep] = []
    results: list[TermResult] = []
    work: list[tuple[TermResult, str, list[int]]] = []
    for term in terms:
        forms = term_forms(base, term)
        if forms is None:
            results.append(TermResult(term, "split_by_pre_tokenizer"))
            continue
        if violation is not None and any(violation(form) for form in forms if form not in vocab):
            results.append(TermResult(term, "breaks_base_convention"))
            continue
        result = TermResult(term, "already_one_token")
        results.append(result)
        for form in forms:
            symbols = []
            for symbol in initial_symbols(base, form, vocab, mergeable):
                if isinstance(symbol, tuple):  # a character the base spells in bytes becomes a token
                    char = symbol[1]
                    if char not in vocab:
                        vocab[char] = len(strings)
                        strings.append(char)
                        steps.append(LearnedStep("char", None, None, vocab[char], char, 0))
                    symbol = vocab[char]
                    result.status = "added"
                symbols.append(symbol)
            work.append((result, form, symbols))

    pieces = [apply_merges(symbols, table) for _, _, symbols in work]
    multi = [p for p in pieces if len(p) > 1]
    if multi:
        blocked = {i for i in range(len(strings)) if not mergeable(i)}
        learned = learn_continued_bpe(multi, [1] * len(multi), strings=strings, vocab=vocab,
                                      new_token_budget=sum(len(p) - 1 for p in multi), min_frequency=1,
                                      blocked=blocked, reserved=reserved)
        for step in learned.steps:
            table.add(step.left, step.right, step.token)
            steps.append(step)

    for (result, form, symbols), before in zip(work, pieces):
        if len(before) > 1:
            result.status = "added" if result.status != "reserved" else result.status
        current = apply_merges(symbols, table)
        # Repair: join the first two pieces of the current segmentation, re-encode, repeat. Each new merge ranks
        # last, so it fires only once every existing merge is done.
        while len(current) > 1:
            string = strings[current[0]] + strings[current[1]]
            if string in reserved:
                result.status = "reserved"
                break
            token = vocab.get(string)
            kind = "free"
            if token is None:
                token = len(strings)
                strings.append(string)
                vocab[string] = token
                kind = "merge"
            table.add(current[0], current[1], token)
            steps.append(LearnedStep(kind, current[0], current[1], token, string, 0))
            shorter = apply_merges(symbols, table)
            if len(shorter) >= len(current):  # SentencePiece semantics joined other pieces first
                result.status = "not_one_token"
                break
            current = shorter
        if len(current) == 1:
            result.forms.append(form)
    return steps, results
