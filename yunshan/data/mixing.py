"""Token-budget mixing: several corpus sources into one packed stream whose token shares match the weights.

YunShan mixes domain corpora with replayed general data "at a 1:1 ratio" (paper section 6.3). HF-based trainers
mix per document or per sample, so "1:1" silently becomes 1:1 documents, and a corpus of long reports swamps one
of short posts. Here the ratio is counted in tokens:

- each source is a `SourceStream` of tokenised documents (EOS after each), read in blocks, shuffled within a
  block and in file order per epoch, repeated with a new shuffle when it runs out (or ending the run);
- the mixer fills each sequence piece by piece: the next piece comes from the source that is furthest behind its
  share (smallest tokens_emitted / weight) and is at most `chunk_tokens` long, so every source's cumulative token
  count stays within `chunk_tokens` of its target and any stretch of packed sequences holds each source's share
  to within 2 * chunk_tokens tokens (0.5% over 100 sequences of 2048 with the default chunk of seq_len / 4);
- the whole position (every source's block, document and token offset, counters, epoch) is a small JSON state,
  so a checkpoint resumes exactly where it was: only the current block of each source is re-read (at most
  `block_size` documents), nothing already consumed is re-tokenised.

Written by hand: no maintained library mixes by token budget with exact resume (litdata mixes token blocks but
not from raw text with validation; `datasets.interleave_datasets` mixes by example).
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from collections.abc import Callable, Iterator

import numpy as np

from .decontamination import Exclusions
from .packing import PackedSequence, SequenceBuilder
from .records import BadRecord, fail_or_count
from .sources import RecordValidator, SourceArgs, load_hf_dataset, read_dataset_records, read_file_records, resolve_files


TOKENIZE_BATCH = 64  # documents per tokenizer call: bounds what the tokenizer holds at once


class SourceExhausted(Exception):
    """A source with `on_exhausted: stop` has no documents left: the stream ends."""


def _rng(*parts) -> random.Random:
    # String seeds hash deterministically (sha512 of the text), unlike hash() which is salted per process.
    return random.Random("/".join(map(str, parts)))


class SourceStream:
    """Tokenised documents of one source, block by block, resumable from `state()`."""

    def __init__(
        self,
        args: SourceArgs,
        tokenize: Callable[[list[str]], list[list[int]]],
        seed: int,
        block_size: int = 1024,
        on_bad_record: str = "fail",
        dedup: bool = False,
        exclude=None,
    ):
        if on_bad_record not in ("fail", "skip"):
            raise ValueError(f"on_bad_record must be fail or skip, got {on_bad_record!r}")
        self.args = args
        self.name = args.name
        self.tokenize = tokenize
        self.seed = seed
        self.block_size = block_size
        self.on_bad_record = on_bad_record
        self.dedup = dedup
        # A contamination list (yunshan.data.decontamination.Exclusions): its documents are left out, counted.
        self.exclude = exclude if exclude is not None else Exclusions()
        if args.dataset is not None:
            self.dataset = load_hf_dataset(args)
            self.files = None
            self.n_files = 1
            # A streaming dataset restarts each epoch from its initial state.
            self.dataset_initial_position = (
                {"state": self.dataset.state_dict()} if hasattr(self.dataset, "state_dict") else {}
            )
        else:
            self.dataset = None
            self.files = resolve_files(args)
            self.n_files = len(self.files)
        self.validator = RecordValidator(args)
        # Position of the current block and how far into it we are.
        self.epoch = 0
        self.block_no = 0
        self.block_start = {"file": 0, "pos": {}}
        self.block: list[np.ndarray] = []  # the block's documents, int32 token ids each
        self.block_end = None
        self.doc_index = 0  # documents of the block fully or partly consumed before the current one
        self.token_offset = 0  # tokens of the current document already emitted
        self.doc_serial = 0  # increases per document; identifies pieces of one document
        self.stats = Counter()  # reasons, documents, duplicates, filtered (includes the current block)
        self.stats_before_block = Counter()
        self.epoch_hashes: dict[int, dict[int, list[int]]] = {}  # epoch -> block -> content hashes (dedup)
        self.loaded = False

    # ------------------------------------------------------------------ reading

    def _file_order(self, epoch: int) -> list[int]:
        order = list(range(len(self.files)))
        if self.args.shuffle:
            _rng(self.seed, self.name, "files", epoch).shuffle(order)
        return order

    def _records_from(self, start: dict):
        """(record, position after it) from a block start to the end of the epoch. A `None` record marks a file
        boundary, whose position needs no seeking; position {"file": n_files} is the end of the epoch."""
        if self.dataset is not None:
            pos = start["pos"] or self.dataset_initial_position
            if start["file"] == 0:
                for record, after in read_dataset_records(self.dataset, self.args, pos):
                    yield record, {"file": 0, "pos": after}
            yield None, {"file": 1, "pos": {}}
            return
        order = self._file_order(self.epoch)
        file_idx, pos = start["file"], start["pos"]
        while file_idx < len(order):
            for record, after in read_file_records(self.files[order[file_idx]], self.args, pos):
                yield record, {"file": file_idx, "pos": after}
            file_idx, pos = file_idx + 1, {}
            yield None, {"file": file_idx, "pos": {}}

    def _seen_before(self, epoch: int, block_no: int) -> set[int]:
        blocks = self.epoch_hashes.get(epoch, {})
        return {h for b, hashes in blocks.items() if b < block_no for h in hashes}

    def _load_block(self) -> None:
        """Read, validate, deduplicate, tokenise and shuffle the block at `block_start`."""
        self.stats_before_block = Counter(self.stats)
        texts, end = [], self.block_start
        seen = self._seen_before(self.epoch, self.block_no) if self.dedup else None
        block_hashes = []
        for record, after in self._records_from(self.block_start):
            end = after
            if record is None:
                if len(texts) >= self.block_size:
                    break
                continue
            if isinstance(record, BadRecord):
                fail_or_count(record, self.on_bad_record, self.stats, context=f"source {self.name!r}: ",
                              fix="Fix the record, or set data.on_bad_record: skip to skip and count bad records.",
                              key="bad:{}")
                continue
            if not self.validator.keep(record):
                self.stats["filtered"] += 1
                continue
            if self.exclude.excludes(record.text):
                self.stats["contaminated"] += 1
                continue
            if self.dedup:
                digest = int.from_bytes(hashlib.blake2b(record.text.encode("utf-8"), digest_size=8).digest(), "little")
                if digest in seen:
                    self.stats["duplicate"] += 1
                    continue
                seen.add(digest)
                block_hashes.append(digest)
            texts.append(record.text)
            if len(texts) >= self.block_size:
                break
        if self.dedup:
            self.epoch_hashes.setdefault(self.epoch, {})[self.block_no] = block_hashes
            for old in [e for e in self.epoch_hashes if e < self.epoch - 1]:
                del self.epoch_hashes[old]
        self.stats["documents"] += len(texts)
        # Tokenised a slice at a time and kept as int32 arrays: a block of 1,024 laws is ~10 M tokens, 4 bytes each
        # here against ~36 as Python ints (and the tokenizer's per-token objects for the whole block at once): 1.5 GB
        # of the laws recipe's CPT peak and 21 s before its first step.
        docs = [np.asarray(ids, dtype=np.int32) for i in range(0, len(texts), TOKENIZE_BATCH)
                for ids in self.tokenize(texts[i:i + TOKENIZE_BATCH])]
        del texts
        if self.args.shuffle:
            _rng(self.seed, self.name, "block", self.epoch, self.block_no).shuffle(docs)
        self.block, self.block_end = docs, end
        self.loaded = True

    def _advance_block(self) -> None:
        """Move to the next block, or to a new epoch (reshuffled) when this one is read to the end."""
        if self.block_end["file"] >= self.n_files:
            if self.args.on_exhausted == "stop":
                raise SourceExhausted(self.name)
            if self.stats["documents"] == 0:
                raise ValueError(
                    f"source {self.name!r} has no usable documents; drops by reason: "
                    f"{dict((k, v) for k, v in self.stats.items() if k != 'documents') or 'none'}"
                )
            self.epoch += 1
            self.stats["epochs_completed"] += 1
            self.block_no = 0
            self.block_start = {"file": 0, "pos": {}}
        else:
            self.block_no += 1
            self.block_start = self.block_end
        self.doc_index, self.token_offset = 0, 0
        self._load_block()

    # ------------------------------------------------------------------ consuming

    def next_piece(self, max_tokens: int) -> tuple[list[int], int, bool]:
        """Up to `max_tokens` tokens of the current document: (tokens, document serial, starts_document)."""
        if not self.loaded:
            self._load_block()
        while self.doc_index >= len(self.block):
            self._advance_block()
        doc = self.block[self.doc_index]
        starts = self.token_offset == 0
        piece = doc[self.token_offset : self.token_offset + max_tokens].tolist()
        self.token_offset += len(piece)
        serial = self.doc_serial
        if self.token_offset >= len(doc):
            self.doc_index += 1
            self.token_offset = 0
            self.doc_serial += 1
        return piece, serial, starts

    def state(self) -> dict:
        """Everything needed to continue exactly from here (small: positions and counters)."""
        return {
            "epoch": self.epoch,
            "block_no": self.block_no,
            "block_start": self.block_start,
            "doc_index": self.doc_index,
            "token_offset": self.token_offset,
            "doc_serial": self.doc_serial,
            "stats_before_block": dict(self.stats_before_block) if self.loaded else dict(self.stats),
        }

    def dedup_hashes(self, state: dict) -> np.ndarray:
        """The content hashes seen in the state's epoch before its block (saved beside a checkpoint)."""
        return np.array(sorted(self._seen_before(state["epoch"], state["block_no"])), dtype=np.uint64)

    def restore(self, state: dict, hashes: np.ndarray | None = None) -> None:
        self.epoch = state["epoch"]
        self.block_no = state["block_no"]
        self.block_start = state["block_start"]
        self.stats = Counter(state["stats_before_block"])
        self.epoch_hashes = {}
        if self.dedup and hashes is not None:
            self.epoch_hashes[self.epoch] = {-1: [int(h) for h in hashes]}
        self._load_block()  # re-reads only this block; re-adds its counts
        self.doc_index = state["doc_index"]
        self.token_offset = state["token_offset"]
        self.doc_serial = state["doc_serial"]


class TokenBudgetMixer:
    """Packs pieces of several sources into sequences so that each source gets `weight` of the tokens."""

    def __init__(
        self,
        streams: list[SourceStream],
        seq_len: int,
        chunk_tokens: int | None = None,
        document_mask: bool = False,
    ):
        if not streams:
            raise ValueError("a mixture needs at least one source")
        names = [s.name for s in streams]
        if len(set(names)) != len(names):
            raise ValueError(f"source names must be unique, got {names}")
        total = sum(s.args.weight for s in streams)
        self.streams = streams
        self.weights = [s.args.weight / total for s in streams]
        self.seq_len = seq_len
        self.chunk_tokens = chunk_tokens or max(1, seq_len // 4)
        self.builder = SequenceBuilder(seq_len, document_mask)
        self.emitted = [0] * len(streams)  # tokens emitted per source (in finished sequences)
        self.sequence = 0
        self.finished = False

    def state(self) -> dict:
        assert len(self.builder.current) == 0, "state is taken between sequences"
        return {
            "sequence": self.sequence,
            "emitted": {s.name: e for s, e in zip(self.streams, self.emitted)},
            "sources": {s.name: s.state() for s in self.streams},
        }

    def restore(self, state: dict, hashes: dict[str, np.ndarray] | None = None) -> None:
        missing = {s.name for s in self.streams} - set(state["sources"])
        if missing:
            raise ValueError(f"checkpoint data state has no position for sources {sorted(missing)}; "
                             "the recipe's sources changed since the checkpoint was written")
        self.sequence = state["sequence"]
        self.emitted = [state["emitted"][s.name] for s in self.streams]
        for s in self.streams:
            s.restore(state["sources"][s.name], (hashes or {}).get(s.name))

    def _next_source(self, emitted_now: list[int]) -> int:
        # The source furthest behind its share (earliest "virtual finish time"); ties go to the first listed.
        return min(range(len(self.streams)), key=lambda i: (emitted_now[i] / self.weights[i], i))

    def next_sequence(self) -> PackedSequence:
        if self.finished:
            raise StopIteration
        emitted_now = list(self.emitted)
        while self.builder.room > 0:
            i = self._next_source(emitted_now)
            stream = self.streams[i]
            try:
                piece, serial, starts = stream.next_piece(min(self.chunk_tokens, self.builder.room))
            except SourceExhausted:
                self.finished = True
                raise StopIteration from None
            self.builder.add(stream.name, serial, piece, starts)
            emitted_now[i] += len(piece)
        self.emitted = emitted_now
        self.sequence += 1
        return self.builder.pop()

    def __iter__(self) -> Iterator[PackedSequence]:
        while True:
            try:
                yield self.next_sequence()
            except StopIteration:
                return

    def report(self) -> dict:
        """Tokens and documents per source, drops per reason, epochs: the run's data report."""
        total = sum(self.emitted) or 1
        sources = {}
        for s, w, e in zip(self.streams, self.weights, self.emitted):
            stats = dict(s.stats)
            sources[s.name] = {
                "weight": w,
                "tokens": e,
                "token_share": e / total,
                "documents_read": stats.pop("documents", 0),
                "epochs_completed": stats.pop("epochs_completed", 0),
                "dropped": {k: v for k, v in sorted(stats.items())},
            }
        return {"sequences": self.sequence, "tokens": sum(self.emitted), "sources": sources}
