"""The parts of an extension that grow with the corpus, on every core: worker processes cut batches of documents into
words and count them, then segment the unique words with the base model.

    yunshan tokenizer extend --base BASE --corpus legal.jsonl.zst --new-tokens 5000 --out OUT --processes 2

The documents are read (decompressed, parsed, sampled) by the calling process and sent in batches of about
`BATCH_CHARS` characters to forked workers; each returns the counts of its batch (words in model space), which are
added up in corpus order, so the words come out in the order of their first occurrence exactly as a count in one
process gives them. The unique words are then segmented in chunks by the same workers (the `tokenizers` BPE model,
one word at a time: faster than its encode_batch, which builds offsets and strings nobody reads here). A corpus
smaller than two batches is counted and segmented in the calling process: starting workers would cost more than it
saves.

The workers are forked, so they inherit the splitting function and the BPE model instead of having them pickled;
where fork is not available everything runs in the calling process.
"""

from __future__ import annotations

import multiprocessing
import os
import threading
from array import array
from collections import Counter
from collections.abc import Callable, Iterable, Iterator

import numpy as np

# Characters of document text per batch sent to a worker: large enough that sending and adding up the counts is cheap
# next to splitting them, small enough that the workers start early and the batches in flight stay small.
BATCH_CHARS = 2_000_000
# Unique words per segmentation task.
SEGMENT_CHUNK = 20_000

# What a worker process works with, set once by the pool's initializer (each worker holds its own copy).
_WORKER: dict = {}


def available_cores() -> int:
    """Cores this process may run on (its CPU affinity), at least 1."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


class Workers:
    """Count the words of documents and segment them, in up to `processes` forked worker processes.

    Args:
        processes: worker processes (1: everything in the calling process).
        split: document -> pieces.
        to_model: piece -> the model-space word (one to one), or None when split gives model-space words.
        model: a `tokenizers` BPE model that segments a model-space word (for `segment`), or None.
    """

    def __init__(self, processes: int, split: Callable[[str], list[str]], to_model: Callable[[str], str] | None,
                 model=None):
        self.processes = processes
        self.job = {"split": split, "to_model": to_model, "model": model}
        self.pool = None

    def __enter__(self) -> Workers:
        return self

    def __exit__(self, kind, error, traceback) -> None:
        if self.pool is not None:
            if kind is None:
                self.pool.close()
            else:
                self.pool.terminate()
            self.pool.join()
            self.pool = None

    def _start(self) -> bool:
        if self.pool is None and self.processes > 1 and "fork" in multiprocessing.get_all_start_methods():
            # A process forked after the `tokenizers` library used its thread pool prints a warning and then runs
            # without it; the workers need no threads, so say so in their environment and keep the warning out.
            saved = os.environ.get("TOKENIZERS_PARALLELISM")
            os.environ["TOKENIZERS_PARALLELISM"] = "false"
            try:
                self.pool = multiprocessing.get_context("fork").Pool(self.processes, initializer=_start_worker,
                                                                     initargs=(self.job,))
            finally:
                if saved is None:
                    os.environ.pop("TOKENIZERS_PARALLELISM", None)
                else:
                    os.environ["TOKENIZERS_PARALLELISM"] = saved
        return self.pool is not None

    def count(self, documents: Iterable[str]) -> Counter:
        """How often each model-space word occurs in the documents, in the order of first occurrence."""
        batches = _batches(documents)
        head = [b for b in (next(batches, None), next(batches, None)) if b is not None]
        counts: Counter = Counter()
        if len(head) < 2 or not self._start():
            for batch in _chain(head, batches):
                counts.update(_count(self.job, batch))
            return counts
        for found in self._imap(_count_batch, _chain(head, batches)):
            counts.update(found)
        return counts

    def segment(self, words: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(ids of all words one after another, length of each word's segmentation), in the order of `words`."""
        chunks = (words[i:i + SEGMENT_CHUNK] for i in range(0, len(words), SEGMENT_CHUNK))
        if self.pool is not None:
            parts = list(self._imap(_segment_chunk, chunks))
        else:
            parts = [_segment(self.job, chunk) for chunk in chunks]
        if not parts:
            return np.zeros(0, np.int32), np.zeros(0, np.int32)
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts])

    def _imap(self, function, tasks: Iterator) -> Iterator:
        """pool.imap (results in task order) with at most two tasks per worker in flight: the pool reads its input in
        a thread of its own as fast as it can, and a corpus read faster than it is split must not pile up."""
        slots, stopped = threading.Semaphore(2 * self.processes), threading.Event()

        def throttled():
            for task in tasks:
                slots.acquire()
                if stopped.is_set():  # the caller stopped early (an error): let the pool's input thread finish
                    return
                yield task

        try:
            for result in self.pool.imap(function, throttled()):
                slots.release()
                yield result
        finally:
            stopped.set()
            slots.release(2 * self.processes + 1)


def _start_worker(job: dict) -> None:
    _WORKER.update(job)


def _count_batch(texts: list[str]) -> Counter:
    return _count(_WORKER, texts)


def _segment_chunk(words: list[str]) -> tuple[np.ndarray, np.ndarray]:
    return _segment(_WORKER, words)


def _count(job: dict, texts: list[str]) -> Counter:
    split, to_model, counts = job["split"], job["to_model"], Counter()
    for text in texts:
        counts.update(split(text))
    if to_model is None:
        return counts
    return Counter({to_model(piece): count for piece, count in counts.items()})  # one to one: no two meet


def _segment(job: dict, words: list[str]) -> tuple[np.ndarray, np.ndarray]:
    model, ids, lengths = job["model"], array("i"), array("i")
    for word in words:
        tokens = model.tokenize(word)
        ids.extend([t.id for t in tokens])
        lengths.append(len(tokens))
    return np.frombuffer(ids, dtype=np.int32).copy(), np.frombuffer(lengths, dtype=np.int32).copy()


def _batches(documents: Iterable[str]) -> Iterator[list[str]]:
    batch, size = [], 0
    for text in documents:
        batch.append(text)
        size += len(text)
        if size >= BATCH_CHARS:
            yield batch
            batch, size = [], 0
    if batch:
        yield batch


def _chain(head: list, rest: Iterator) -> Iterator:
    yield from head
    yield from rest
