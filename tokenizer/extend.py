r"""Extend a base tokenizer's vocabulary with domain tokens: word-list chains, then continued BPE on the corpus.

    yunshan tokenizer extend --base path/to/base --corpus finance.jsonl legal.jsonl \
        --words builtin:finance builtin:legal --new-tokens 3000 --out out/tokenizer

    from yunshan.tokenizer import ExtendArgs, extend_tokenizer
    report = extend_tokenizer(ExtendArgs(base="base", corpus=["finance.jsonl"], new_tokens=3000, out="out"))

The method (../shared/docs/tokenizer-extension.md): every base merge keeps its rank and every base id its string;
new merges are appended below them, learned on the segmentation the base encoder really produces, so general text
is cut as before (or shorter) and no new token is dead. Order of the appended merges: word-list chains first (so
curated terms win over corpus merges in running text), then the corpus merges in the order learned. Ids: base ids
unchanged, added tokens unchanged (placed in the model vocabulary at their own ids), new tokens after the largest.

The finished tokenizer is loaded back with the `tokenizers` library and checked (base ids, added tokens, every new
token emitted on its own text, `verify.py`); a token that fails is removed with everything built from it and the
check repeats. Files are written to a temporary folder beside `--out` and moved into place only when everything
succeeded, so a failed run leaves `--out` untouched. The same inputs always give byte-identical files.

Scale: the words are counted over a seeded sample of at most `--sample-chars` characters (50 M by default; the whole
corpus when it is smaller, and the report says which), so memory and time are bounded whatever the corpus size. The
sample is cut into words by the base's own pre-tokeniser (or its verified regex) and each unique word segmented by
its BPE model (Rust), both in one worker process per core (`parallel.py`); the merge loop (`continued_bpe.py`)
updates flat numpy arrays. benchmarks/tokenizer_scale.py measures it beside the `tokenizers` library's BpeTrainer on
the real laws corpus up to 1 GB.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from yunshan.arguments.field_rules import check_fields

from .base import COPIED_FILES, FAST_PATH_CHECK_DOCUMENTS, BaseTokenizer, extended_proto_bytes, load_base_tokenizer
from .bpe_encoder import MergeListTable, PieceTable
from .continued_bpe import LearnedStep, LearnResult, Pieces, learn_continued_bpe
from .conventions import detect_conventions
from .parallel import Workers, available_cores
from .corpus import CorpusSample, CorpusStats, corpus_files, read_corpus, sample_documents
from .verify import check_base_preserved, find_dead_tokens
from .word_lists import build_merge_chains, load_word_list, resolve_word_lists

REPORT_FILE = "yunshan_tokenizer_extension.json"


@dataclass(kw_only=True)
class ExtendArgs:
    """Arguments of `yunshan tokenizer extend` (same names as the command-line flags), and the `tokenizer_extension`
    section of a `yunshan run` recipe (where the runner fills `base` and `out`)."""

    base: str = field(default="", metadata={"path": True,
        "help": "base tokenizer: a folder with tokenizer.json, a SentencePiece .model, or a Hub id ORG/NAME "
                "(its tokenizer files, from the HF cache or downloaded: yunshan.loading.hub_download)"})
    revision: str | None = field(default=None, metadata={"help": "branch, tag or commit of a Hub id in --base"})
    corpus: list[str] = field(metadata={"path": True,
        "help": "domain corpus: files, folders or globs (.jsonl .json .parquet .csv .txt, each optionally "
                ".gz/.zst/.xz/.bz2, or .zip), read as `yunshan cpt` reads a source"})
    new_tokens: int = field(metadata={"range": ">= 1",
        "help": "new tokens to add in total (word-list tokens included)"})
    out: str = field(default="", metadata={"path": True,
        "help": "output folder; written only if the whole extension succeeds"})
    words: list[str] = field(default_factory=list, metadata={"path": True,
        "help": "word lists (one term per line) or builtin:finance / builtin:legal / builtin:all / builtin:NAME"})
    min_frequency: int = field(default=2, metadata={"range": ">= 1",
        "help": "a pair must occur at least this often to be merged"})
    max_token_chars: int | None = field(default=16, metadata={"range": ">= 0",
        "help": "longest corpus token, in characters (word-list terms are exempt); 0 or none for no limit"})
    format: str = field(default="auto", metadata={
        "help": "format of the corpus files: auto (from each file's name) or jsonl, json, parquet, csv, txt"})
    text_field: str = field(default="text", metadata={"help": "record field holding the text"})
    txt_document: str = field(default="paragraph", metadata={
        "help": "plain-text corpus files: one document per paragraph (blank-line separated), line or file: the same "
                "rule as a continual-pretraining source's txt_document"})
    on_bad_record: str = field(default="fail", metadata={
        "help": "fail (stop at the first unusable record: file, line, field) or skip (skip and count by reason), as "
                "yunshan cpt's data.on_bad_record"})
    sample_chars: int = field(default=50_000_000, metadata={"range": ">= 0",
        "help": "count the words of at most this many characters of the corpus: a seeded sample of its documents "
                "when it is larger (the report states its size), so that memory and time stay bounded whatever "
                "the corpus size; 0 counts the whole corpus"})
    seed: int = field(default=0, metadata={"range": "[0, 4294967295]", "help": "seed of the --sample-chars sample"})
    processes: int = field(default=0, metadata={"range": ">= 0",
        "help": "worker processes that count the corpus (0: one per core this process may run on)"})
    report_texts: list[str] = field(default_factory=list, metadata={"path": True,
        "help": "texts to compare the base and extended tokenizers on (tokens per character), after extending"})
    overwrite: bool = field(default=False, metadata={
        "help": "replace the --out folder of an earlier extension (never a folder holding other files)"})
    budget_tokens: int | None = field(default=None, metadata={"range": ">= 1",
        "help": "the training tokens the extended model will have (continual pretraining's planned tokens, replay "
                "included; yunshan run fills it from its cpt section): --new-tokens is capped at budget_tokens / "
                "tokens_per_new_token, so the new rows can be learned in that budget (unset: no cap)"})
    tokens_per_new_token: int = field(default=0, metadata={"range": ">= 0",
        "help": "training tokens needed per new token when --budget-tokens is given (0: the default, "
                "TOKENS_PER_NEW_TOKEN = 100,000, set from real text: benchmarks/README.md, 'Laws: extension against no "
                "extension'; a budget that carries none writes the base tokenizer unchanged)"})

    def __post_init__(self):
        check_fields(self)
        if self.max_token_chars in (0, "0") or str(self.max_token_chars).lower() == "none":
            self.max_token_chars = None


# Training tokens per new token the default cap asks for. Measured on real text (benchmarks/README.md, "Laws: extension
# against no extension": SmolLM2-135M-Instruct, the real laws corpus, the laws recipe's 40 CPT steps of 2,048 tokens,
# held-out Civil Code): 2,000 new tokens (41 training tokens per new token) ended 51% above the same CPT without
# extension, 100 new tokens (819 per new token) 20% above, and even 10 of the most frequent cost 11% at step 0. The
# new rows cost per occurrence, and the most frequent tokens come first, so no small budget pays for them; the
# default is in the range of published extensions (YunShan: 36.5B tokens for 9,545 new tokens), where a budget of
# 1B training tokens carries 10,000 new tokens and the laws recipe's 81,920 carry none. The bundled samples are
# templated text, learned fast: their recipes set 16 (extension_cost.py measured 16 per new token no worse there).
TOKENS_PER_NEW_TOKEN = 100_000


# Fewer training tokens than this per new token, and the new rows are barely trained (YunShan: 36.5B tokens for
# 9,545 new tokens). Checked before any work by `yunshan tokenizer extend --budget-tokens`, `yunshan cpt` (and its dry
# run) and `yunshan run --dry-run`, and again by `yunshan cpt` beside the extension's measured step-0 cost.
TOKENS_PER_NEW_TOKEN_WARNING = 1000


def budget_check(planned_tokens: int, new_tokens: int) -> dict:
    """The training budget per new token: the planned training tokens (continual pretraining's, replay included),
    the new tokens, their ratio and, when it is under TOKENS_PER_NEW_TOKEN_WARNING, the warning (one wording
    wherever it is given)."""
    per_token = planned_tokens / max(new_tokens, 1)
    warning = None
    if new_tokens and per_token < TOKENS_PER_NEW_TOKEN_WARNING:
        warning = (f"the planned run trains {planned_tokens:,} tokens for {new_tokens:,} new tokens ({per_token:,.0f} "
                   f"per new token, under {TOKENS_PER_NEW_TOKEN_WARNING:,}): the new rows will be barely trained; "
                   "fewer new tokens or a longer run recover more of the cost")
    return {"training_tokens": planned_tokens, "new_tokens": new_tokens,
            "tokens_per_new_token": round(per_token) if new_tokens else None, "warning": warning}


def budget_cap(args: ExtendArgs) -> int | None:
    """The most new tokens the planned training budget can carry (None without a budget)."""
    if args.budget_tokens is None:
        return None
    return args.budget_tokens // (args.tokens_per_new_token or TOKENS_PER_NEW_TOKEN)


def capped_new_tokens(args: ExtendArgs) -> tuple[int, str | None]:
    """--new-tokens as the budget allows, and why it was lowered (None when it was not)."""
    cap = budget_cap(args)
    if cap is None or cap >= args.new_tokens:
        return args.new_tokens, None
    per = args.tokens_per_new_token or TOKENS_PER_NEW_TOKEN
    return cap, (f"--new-tokens {args.new_tokens} capped at {cap}: the planned budget of {args.budget_tokens:,} "
                 f"training tokens carries one new token per {per:,} (fewer left the extended model worse than no "
                 "extension on held-out domain text)")


@dataclass
class _Record:
    """One appended vocabulary step, by strings (ids are assigned once the final set of tokens is known)."""

    kind: str            # "merge", "free", "char"
    left: str | None
    right: str | None
    result: str
    source: str          # "word_list" or "corpus"
    gain: int


def _check_args(args: ExtendArgs) -> None:
    for name in ("base", "out"):
        if not getattr(args, name):
            raise ValueError(f"--{name} is required: {_help(name)}")
    if not isinstance(args.new_tokens, int) or args.new_tokens < 0:
        raise ValueError(f"--new-tokens {args.new_tokens!r}: give a whole number >= 0")
    if not isinstance(args.sample_chars, int) or args.sample_chars < 0:
        raise ValueError(f"--sample-chars {args.sample_chars!r}: give a whole number of characters >= 0 (0: all)")
    if not isinstance(args.processes, int) or args.processes < 0:
        raise ValueError(f"--processes {args.processes!r}: give a whole number >= 0 (0: one per core)")
    if args.budget_tokens is not None and (not isinstance(args.budget_tokens, int) or args.budget_tokens < 1):
        raise ValueError(f"--budget-tokens {args.budget_tokens!r}: give a whole number >= 1 (or leave it out)")
    if args.tokens_per_new_token < 0:
        raise ValueError(f"--tokens-per-new-token {args.tokens_per_new_token}: give a whole number >= 0")
    if args.min_frequency < 1:
        raise ValueError(f"--min-frequency {args.min_frequency}: give a whole number >= 1")
    if args.max_token_chars is not None and args.max_token_chars < 2:
        raise ValueError(f"--max-token-chars {args.max_token_chars}: give a number >= 2 (or none)")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {out} exists and is not a folder")
    if out.is_dir() and any(out.iterdir()):
        if not args.overwrite:
            raise ValueError(f"--out {out} exists and is not empty; pass --overwrite to replace it")
        _check_replaceable(out, args)
    from yunshan.io.folders import check_output_folder

    check_output_folder(out, "--out")  # a path through a file, or a folder this user cannot write


def _check_replaceable(out: Path, args: ExtendArgs) -> None:
    """--overwrite replaces only an earlier extension (its REPORT_FILE lists the files it wrote) that holds none of
    this run's inputs: a user's folder, the base tokenizer's or the corpus's, is never deleted."""
    inputs = [("the base tokenizer", args.base), *(("corpus", c) for c in args.corpus),
              *(("word list", w) for w in args.words if not str(w).startswith("builtin:"))]
    for what, path in inputs:
        if Path(path).resolve().is_relative_to(out.resolve()):
            raise ValueError(f"--out {out} holds {what} {path}: replacing --out would delete it; choose another --out")
    from yunshan.io.folders import check_replaceable

    # An older report without its list of files: only the names an extension writes, at the top of the folder.
    check_replaceable(out, REPORT_FILE, "yunshan tokenizer extend", "--out",
                      fallback=("tokenizer.json", "tokenizer.model", *COPIED_FILES, REPORT_FILE))


def _help(name: str) -> str:
    from dataclasses import fields

    return next(f.metadata["help"] for f in fields(ExtendArgs) if f.name == name)


def _token_chars(base: BaseTokenizer):
    if base.kind == "byte_level":
        return lambda string: len(base.token_bytes(string).decode("utf-8", errors="replace"))
    return len


# Training pieces longer than this many tokens are cut (losing one pair per cut): the merge loop's cost grows with
# the length of the pieces, and a long run of Chinese without punctuation is one word.
MAX_PIECE_TOKENS = 64
def _initial_pieces(base: BaseTokenizer, counts: np.ndarray, ids: np.ndarray, lengths: np.ndarray,
                    vocab: dict[str, int], mergeable, segmenter_vocab: dict[str, int]
                    ) -> tuple[Pieces, dict[int, tuple[str, int]]]:
    """The training pieces in flat arrays (`continued_bpe.Pieces`) from the segmentation of each unique word (`ids`
    one word after another, `lengths`; `counts` per word), as `_segmenter`'s model gave it (the base model, with the
    word-list chains appended when there are any: they rank after every base merge, so this is the base
    segmentation with the chains applied).

    Characters the base spells in byte-fallback tokens become pending symbols (negative ids, numbered in word
    order). Pieces are cut at MAX_PIECE_TOKENS; a piece of one token (nothing to merge) is left out.
    """
    # The segmenter numbers the chain tokens as the written tokenizer will; map them to this run's ids all the same.
    remap = {i: vocab[s] for s, i in segmenter_vocab.items() if vocab.get(s) != i}
    if remap:
        table = np.arange(max(segmenter_vocab.values()) + 1, dtype=np.int32)
        for old, new in remap.items():
            table[old] = new
        ids = table[ids]
    lengths = lengths.astype(np.int64)
    starts = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=starts[1:])
    pending: dict[int, tuple[str, int]] = {}
    byte_value = {i: int(t[3:5], 16) for i, t in enumerate(base.id_to_token) if t and base.is_byte_token(i)}
    if byte_value and len(ids):
        ids, lengths, starts = _with_pending(ids, lengths, starts, byte_value, vocab, mergeable, pending)
    # Cut every word into pieces of at most MAX_PIECE_TOKENS tokens (piece k of a word starts at k * MAX): arrays
    # per piece only; the tokens stay where they are, but for the one-token pieces, which are left out.
    per_word = (lengths + MAX_PIECE_TOKENS - 1) // MAX_PIECE_TOKENS
    word_of_piece = np.repeat(np.arange(len(lengths)), per_word)
    index_in_word = np.arange(len(word_of_piece)) - np.repeat(np.cumsum(per_word) - per_word, per_word)
    piece_start = starts[word_of_piece] + index_in_word * MAX_PIECE_TOKENS
    piece_length = np.minimum(starts[word_of_piece + 1] - piece_start, MAX_PIECE_TOKENS)
    del index_in_word
    keep = (piece_length > 1) | (ids[piece_start] < 0)
    kept = np.ones(len(ids), dtype=bool)
    kept[piece_start[~keep]] = False
    offsets = np.concatenate([[0], np.cumsum(piece_length[keep])]).astype(np.int64)
    return Pieces(ids[kept].astype(np.int32), offsets, counts[word_of_piece[keep]].astype(np.int64)), pending


def _with_pending(ids, lengths, starts, byte_value, vocab, mergeable, pending):
    """Words whose segmentation holds byte-fallback tokens, with each character those bytes spell as its token (if
    the vocabulary has it and it may merge) or as a pending symbol."""
    pending_id: dict[str, int] = {}

    def pending_symbol(char: str) -> int:
        if char not in pending_id:
            pending_id[char] = -(len(pending_id) + 1)
            pending[pending_id[char]] = (char, len(char.encode("utf-8")))
        return pending_id[char]

    is_byte = np.zeros(max(int(ids.max()), max(byte_value)) + 1, dtype=bool)
    is_byte[list(byte_value)] = True
    marked = np.concatenate([[0], np.cumsum(is_byte[ids])])
    has_bytes = np.flatnonzero(marked[starts[1:]] > marked[starts[:-1]])
    if not len(has_bytes):
        return ids, lengths, starts
    segments = [ids[starts[i]:starts[i + 1]] for i in range(len(lengths))]
    for i in has_bytes.tolist():
        out: list[int] = []
        buffer = bytearray()
        for idx in segments[i].tolist() + [None]:
            if idx in byte_value:
                buffer.append(byte_value[idx])
                continue
            if buffer:
                try:
                    chars = buffer.decode("utf-8")
                except UnicodeDecodeError:  # cannot happen for decoded text; keep the bytes as they are
                    out += [vocab[f"<0x{b:02X}>"] for b in buffer]
                else:
                    for char in chars:
                        known = vocab.get(char)
                        out.append(known if known is not None and mergeable(known) else pending_symbol(char))
                buffer.clear()
            if idx is not None:
                out.append(idx)
        segments[i] = np.array(out, dtype=np.int32)
    lengths = np.fromiter((len(s) for s in segments), np.int64, len(segments))
    starts = np.zeros(len(lengths) + 1, np.int64)
    np.cumsum(lengths, out=starts[1:])
    return np.concatenate(segments).astype(np.int32), lengths, starts


def _segmenter(base: BaseTokenizer, chain_records: list[_Record]):
    """The BPE model that segments a training word (a `tokenizers` model: no normaliser, pre-tokeniser or added
    tokens, the words are pre-tokenised already) and its vocabulary of new tokens: the base model, or the base with
    the word-list chains appended as the written tokenizer will have them."""
    if not chain_records:
        return base.backend.model, {}
    from tokenizers import Tokenizer

    new_strings, merges = _assemble(base, chain_records)
    model = Tokenizer.from_str(_build_files(base, new_strings, merges)["tokenizer.json"].decode("utf-8")).model
    return model, {s: len(base.id_to_token) + i for i, s in enumerate(new_strings)}


def _prune(records: list[_Record], dead: set[str], base_vocab: dict[str, int]) -> list[_Record]:
    """Drop dead tokens, every step that builds from them, and tokens no remaining step produces."""
    removed = set(dead)
    while True:
        kept = [r for r in records if r.result not in removed and r.left not in removed and r.right not in removed]
        produced = {r.result for r in kept}
        orphans = {r.result for r in records if r.result not in base_vocab and r.result not in produced} - removed
        records = kept
        if not orphans:
            return records
        removed |= orphans


def _assemble(base: BaseTokenizer, records: list[_Record]):
    """New token strings in id order and the appended merges (string pairs) in rank order."""
    new_strings: list[str] = []
    seen: set[str] = set()
    merges: list[tuple[str, str]] = []
    for r in records:
        if r.result not in base.vocab and r.result not in seen:
            seen.add(r.result)
            new_strings.append(r.result)
        if r.kind != "char":
            merges.append((r.left, r.right))
    return new_strings, merges


def _build_files(base: BaseTokenizer, new_strings: list[str], merges: list[tuple[str, str]]) -> dict[str, bytes]:
    """tokenizer.json (and tokenizer.model for a SentencePiece base) of the extended tokenizer."""
    first = len(base.id_to_token)
    files: dict[str, bytes] = {}
    if base.kind == "sentencepiece":
        from .sentencepiece_model import load_model_proto_bytes, tokenizer_json_from_proto

        model_bytes = extended_proto_bytes(base.sp_proto, new_strings)
        files["tokenizer.model"] = model_bytes
        data = tokenizer_json_from_proto(load_model_proto_bytes(model_bytes))
        vocab = data["model"]["vocab"]
        for i, string in enumerate(new_strings):
            if vocab.get(string) != first + i:
                raise RuntimeError(f"SentencePiece piece {string!r} got id {vocab.get(string)}, expected {first + i}")
    else:
        data = json.loads(json.dumps(base.data))
        vocab = data["model"]["vocab"]
        for i, string in enumerate(new_strings):
            vocab[string] = first + i
        data["model"]["merges"] = [list(m) for m in base.merges] + [list(m) for m in merges]
    files["tokenizer.json"] = (json.dumps(data, ensure_ascii=False, indent=2) + "\n").encode("utf-8")
    return files


def _config_files(base: BaseTokenizer) -> dict[str, bytes]:
    """Config files of the base, copied unchanged, plus what is missing.

    A SentencePiece .model gets a minimal tokenizer_config.json (its control pieces as bos/eos/unk, BOS added as a
    Llama tokenizer does). A special_tokens_map.json is derived from tokenizer_config.json when the base has none
    (transformers 5 no longer writes one, older tools still read it).
    """
    files = dict(base.files)
    if "tokenizer_config.json" not in files:
        config = {"tokenizer_class": "PreTrainedTokenizerFast", "clean_up_tokenization_spaces": False,
                  **(base.sp_special_tokens if base.kind == "sentencepiece" else {})}
        if "bos_token" in config:
            config["add_bos_token"] = True
            config["add_eos_token"] = False
        files["tokenizer_config.json"] = (json.dumps(config, ensure_ascii=False, indent=2) + "\n").encode()
    if "special_tokens_map.json" not in files:
        config = json.loads(files["tokenizer_config.json"])
        special = {k: v for k, v in config.items()
                   if (k.endswith("_token") and isinstance(v, (str, dict)))
                   or (k in ("additional_special_tokens", "extra_special_tokens") and v)}
        files["special_tokens_map.json"] = (json.dumps(special, ensure_ascii=False, indent=2) + "\n").encode()
    return files


def extend_tokenizer(args: ExtendArgs, log=print) -> dict:
    """Run the extension and write `args.out`; returns the report also saved as yunshan_tokenizer_extension.json."""
    from yunshan.io.folder_lock import folder_lock

    _check_args(args)
    if args.budget_tokens is not None:  # before any work: the cap, and whether the budget trains what it carries
        allowed, capped = capped_new_tokens(args)
        if capped is not None:
            log(capped + ("; the tokenizer is written unchanged" if allowed == 0 else ""))
        warning = budget_check(args.budget_tokens, allowed)["warning"]
        if warning:
            log(f"warning: {warning}")
    # Another extension writing the same --out stops here (yunshan.io.folder_lock); --out is checked again under the
    # lock, as it may have changed before the lock was taken.
    with folder_lock(args.out, "--out", log):
        _check_args(args)
        return _extend(args, log)


def _extend(args: ExtendArgs, log) -> dict:
    started = time.perf_counter()
    from yunshan.data.files import sha256_file
    from yunshan.loading.hub_download import resolve_pretrained

    # A Hub id is read from its HF cache folder; the report names that folder (its commit is in the path).
    args = dataclasses.replace(args, base=resolve_pretrained(args.base, args.revision, what="tokenizer",
                                                            field="--base"), revision=None)
    base = load_base_tokenizer(args.base)
    word_lists = [load_word_list(p) for p in resolve_word_lists(args.words)]
    terms = list(dict.fromkeys(t for wl in word_lists for t in wl.terms))
    corpus = corpus_files(args.corpus, format=args.format)  # a missing or empty file stops here, before any reading

    base_size = len(base.id_to_token)
    strings: list[str | None] = list(base.id_to_token)
    vocab = dict(base.vocab)

    def mergeable(idx: int) -> bool:
        return idx >= base_size or base.mergeable(idx)

    table = (PieceTable(strings, vocab, mergeable) if base.kind == "sentencepiece"
             else MergeListTable(base.merges, vocab))
    # No new token may break a segmentation rule of the base (digit splitting, whitespace placement): conventions.py.
    conventions = detect_conventions(base)

    def violation(string: str) -> str | None:
        return conventions.violation(base.token_bytes(string))

    forbidden = conventions.as_dict()["forbidden_transitions"]
    log(f"base conventions: {conventions.digits}; no new token joins "
        f"{', '.join(sorted(forbidden, key=lambda t: ('+' in t, t))[:6])}... ({len(forbidden)} class pairs)")
    # The word-list chains need no corpus: built (and checked against --new-tokens) before the corpus is read.
    chain_steps, term_results = build_merge_chains(base, terms, strings=strings, vocab=vocab, table=table,
                                                   mergeable=mergeable, reserved=base.reserved_strings,
                                                   violation=violation)
    chain_new = len(strings) - base_size
    requested = args.new_tokens
    allowed, capped = capped_new_tokens(args)
    if chain_new > allowed and capped is not None:
        raise ValueError(f"the word lists need {chain_new} new tokens but the planned budget of "
                         f"{args.budget_tokens:,} training tokens carries at most {allowed} (one per "
                         f"{args.tokens_per_new_token or TOKENS_PER_NEW_TOKEN:,} tokens; fewer left the extended model "
                         "worse than no extension): shorten the word lists, or plan more training steps")
    if chain_new > args.new_tokens:
        raise ValueError(f"the word lists need {chain_new} new tokens but --new-tokens is {args.new_tokens}; raise "
                         "--new-tokens or shorten the word lists")
    # `allowed`: the new tokens this run adds at most, --new-tokens or the budget's cap (0 when the budget carries
    # none: the base tokenizer is written as it is, so a pipeline goes on without extension and says why).

    def record(step: LearnedStep, source: str) -> _Record:
        left = strings[step.left] if step.left is not None else None
        right = strings[step.right] if step.right is not None else None
        return _Record(step.kind, left, right, step.string, source, step.gain)

    def kept(records: list[_Record]) -> list[_Record]:
        # A SentencePiece model joins any two pieces that form a piece: "free" merges need no record.
        return [r for r in records if r.kind != "free"] if base.kind == "sentencepiece" else records

    chain_records = kept([record(s, "word_list") for s in chain_steps])
    stats = CorpusStats(sample=CorpusSample(limit=args.sample_chars, seed=args.seed))
    corpus_read = not (allowed - chain_new <= 0 and capped is not None)
    if not corpus_read:
        # The budget carries no corpus token: counting 20 M characters (a minute) would learn nothing.
        learned = LearnResult(steps=[], tokens_before=0, tokens_after=0, stop_reason="budget", rejected=0,
                              rejected_by_reason={})
        counted = time.perf_counter()
        log(f"corpus: not read (the budget carries no corpus token; {len(corpus)} file{'s' * (len(corpus) > 1)} "
            "hashed for the report)")
    else:
        learned, counted = _learn_from_corpus(args, base, corpus, stats, strings, vocab, mergeable, chain_records,
                                              allowed - chain_new, violation, started, log)
    records = chain_records + kept([record(s, "corpus") for s in learned.steps])

    from tokenizers import Tokenizer

    pruned: list[str] = []
    for _ in range(10):
        new_strings, merges = _assemble(base, records)
        files = _build_files(base, new_strings, merges)
        tokenizer = Tokenizer.from_str(files["tokenizer.json"].decode("utf-8"))
        problems = check_base_preserved(tokenizer, base)
        if problems:
            raise RuntimeError(f"extension changed the base tokenizer (a bug in yunshan): {problems[:5]}")
        dead = find_dead_tokens(tokenizer, base, [(base_size + i, s) for i, s in enumerate(new_strings)])
        if not dead:
            break
        dead_strings = {new_strings[i - base_size] for i in dead}
        pruned += sorted(dead_strings)
        records = _prune(records, dead_strings, base.vocab)
    else:
        raise RuntimeError("dead tokens remained after 10 pruning rounds (a bug in yunshan)")

    files.update(_config_files(base))
    source_of: dict[str, str] = {}
    for r in records:
        source_of.setdefault(r.result, r.source)
    from_word_lists = sum(1 for s in new_strings if source_of[s] == "word_list")
    status_counts: dict[str, int] = {}
    for t in term_results:
        status_counts[t.status] = status_counts.get(t.status, 0) + 1
    report = {
        "base": {"path": str(args.base), "kind": base.kind, "sha256": base.fingerprint, "vocab_size": base_size},
        "vocab_size": base_size + len(new_strings),
        "new_tokens": {
            "requested": requested, "budget_cap": budget_cap(args), "capped": capped, "added": len(new_strings),
            "from_word_lists": from_word_lists, "from_corpus": len(new_strings) - from_word_lists,
            "characters": sum(1 for r in records if r.kind == "char"),
            "free_merges": sum(1 for r in records if r.kind == "free"),
            "appended_merges": len(merges) if base.kind != "sentencepiece" else None,
            "pruned_dead": pruned,
            "corpus_stop_reason": ("budget reached" if learned.stop_reason == "budget" else
                                   f"no pair occurs at least {args.min_frequency} times: learned "
                                   f"{len(new_strings) - from_word_lists} of {allowed - chain_new} "
                                   "corpus tokens"),
            "rejected_pairs": learned.rejected,
            "rejected_by_reason": learned.rejected_by_reason,
        },
        "base_conventions": conventions.as_dict(),
        "training_words": {"tokens_before": learned.tokens_before, "tokens_after": learned.tokens_after},
        "corpus": {**stats.as_dict(), "read": corpus_read, "sha256": [sha256_file(f) for f in corpus]},
        "word_lists": [wl.summary() for wl in word_lists],
        "terms": {"total": len(terms), "by_status": status_counts,
                  "not_added": [{"term": t.term, "status": t.status} for t in term_results
                                if t.status not in ("added", "already_one_token")]},
        "args": {k: v for k, v in asdict(args).items() if k not in ("out", "overwrite", "report_texts", "processes")},
        "notes": base.notes,
        "files": sorted([*files, REPORT_FILE]),  # what --overwrite may replace later (_check_replaceable)
    }
    files[REPORT_FILE] = (json.dumps(report, ensure_ascii=False, indent=2) + "\n").encode("utf-8")
    _write_atomically(Path(args.out), files, args.overwrite)
    if len(new_strings) < allowed:
        log(f"only {len(new_strings)} of the {allowed} new tokens requested were learned: "
            f"{report['new_tokens']['corpus_stop_reason']}")
    log(f"wrote {args.out}: vocabulary {base_size:,} -> {base_size + len(new_strings):,} "
        f"({from_word_lists} from word lists, {len(new_strings) - from_word_lists} from the corpus) "
        f"in {time.perf_counter() - started:.1f}s")
    if args.report_texts:
        from .report import compression_report

        report["compression"] = compression_report([args.base, args.out], args.report_texts)
    return report


def _learn_from_corpus(args: ExtendArgs, base, corpus, stats, strings, vocab, mergeable, chain_records,
                       corpus_budget: int, violation, started: float, log):
    """Count the corpus' training words (in worker processes) and learn up to `corpus_budget` new tokens by
    continued BPE; returns the LearnResult and the time counting ended."""
    base_size = len(base.id_to_token)
    documents = read_corpus(corpus, format=args.format, text_field=args.text_field, txt_document=args.txt_document,
                            on_bad_record=args.on_bad_record, stats=stats)
    processes = args.processes or available_cores()
    documents = sample_documents(documents, stats.sample)
    documents = iter(documents)
    head = list(itertools.islice(documents, FAST_PATH_CHECK_DOCUMENTS))
    model, segmenter_vocab = _segmenter(base, chain_records)
    with Workers(processes, *base.word_splitter(head), model=model) as workers:
        counter = workers.count(itertools.chain(head, documents))
        stats.words, stats.unique_words = sum(counter.values()), len(counter)
        counted = time.perf_counter()
        bad = sum(n for f in stats.files for n in f.bad.values())
        read = sum(f.characters for f in stats.files)
        log(f"corpus: {sum(f.documents for f in stats.files):,} documents, {read:,} characters in {len(corpus)} "
            f"file{'s' * (len(corpus) > 1)}" + (f" ({bad:,} unusable records skipped)" if bad else "")
            + ("" if stats.sample.whole_corpus else f"; counted a seeded sample of {stats.sample.characters:,} "
               f"characters (--sample-chars {args.sample_chars:,}, --seed {args.seed})")
            + f": {stats.words:,} words ({stats.unique_words:,} unique) in {counted - started:.1f}s "
              f"({processes} process{'es' * (processes > 1)})")
        del documents, head  # the sample's text
        counts = np.fromiter(counter.values(), np.int64, len(counter))
        ids, lengths = workers.segment(list(counter))
    del counter
    pieces, pending = _initial_pieces(base, counts, ids, lengths, vocab, mergeable, segmenter_vocab)
    del counts, ids, lengths
    learned = learn_continued_bpe(
        pieces, strings=strings, vocab=vocab, new_token_budget=corpus_budget,
        min_frequency=args.min_frequency, blocked={i for i in range(base_size) if not base.mergeable(i)},
        pending=pending,
        reserved=base.reserved_strings, max_token_chars=args.max_token_chars, token_chars=_token_chars(base),
        violation=violation)
    del pieces
    log(f"learned {len(learned.steps)} steps in {time.perf_counter() - counted:.1f}s "
        f"(stopped: {learned.stop_reason})")
    return learned, counted


def _write_atomically(out: Path, files: dict[str, bytes], overwrite: bool) -> None:
    """Write `files` into a folder beside `out` and swap it in (yunshan.io.folders.staged_folder): `out` is the old
    folder until every file is written, and a failed swap puts the old one back."""
    from yunshan.io.folders import staged_folder

    out = out.absolute()
    with staged_folder(out) as tmp:
        for name, blob in sorted(files.items()):
            (tmp / name).write_bytes(blob)
        if out.exists() and any(out.iterdir()) and not overwrite:
            raise ValueError(f"--out {out} appeared while extending and is not empty; pass --overwrite")
