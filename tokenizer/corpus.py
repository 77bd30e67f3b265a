"""The corpus of a vocabulary extension (and the texts of a compression report), read as `yunshan cpt` reads a source.

    yunshan tokenizer extend --base BASE --corpus legal/*.jsonl.zst finance.parquet --new-tokens 3000 --out OUT

yunshan has one record reader, `yunshan.data.records`, and the tokenizer tools read through it (by way of
`yunshan.data.sources`, as continual pretraining and decontamination do), so the extension learns its merges on the
very documents the model then trains on: files, folders and globs; .jsonl, .json, .parquet, .csv and .txt, each
optionally .gz, .zst, .xz or .bz2, and .zip archives of them; the text field (`--text-field`) and `--format` for
files whose name does not say it; the `.txt` rule (one document per paragraph, `--txt-document`); and the same
bad-record policy and reasons (`--on-bad-record fail` stops at the first unusable record naming file, line and field;
`skip` skips it and counts it by reason in the report, per file).

The words are counted over a seeded sample of at most `--sample-chars` characters (`sample_documents`; the whole
corpus when it is smaller), so that the memory and time of an extension stay bounded whatever the corpus size: the
sample is what the counts, the segmentation and the merge loop hold, and the report states its size and seed.
Counting is the base pipeline's normaliser and pre-tokeniser per document plus a `collections.Counter` over the
resulting words (C), in one worker process per core (`parallel.py`); no Python loop touches single characters (see
`BaseTokenizer.word_splitter` for the fast path).
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from yunshan.data.records import TXT_DOCUMENTS
from yunshan.data.sources import SourceArgs, resolve_files, source_texts

ON_BAD_RECORD = ("fail", "skip")
# Documents longer than this are sampled in pieces of at most this many characters (cut after a line break where
# one is near), so that one long document cannot outgrow the sample.
SAMPLE_PIECE_CHARS = 1_000_000
FIX = ("Fix the file (--text-field names the field that holds the text, --format the format of a file whose name does "
       "not say it), or pass --on-bad-record skip to skip unusable records and count them by reason.")


@dataclass
class CorpusFileStats:
    path: str
    documents: int = 0
    characters: int = 0
    bad: dict[str, int] = field(default_factory=dict)  # unusable records skipped, by reason (on_bad_record "skip")


@dataclass
class CorpusSample:
    """The part of the corpus whose words are counted."""

    limit: int              # most characters counted (0: the whole corpus)
    seed: int
    characters: int = 0     # characters counted
    documents: int = 0      # documents counted (pieces of a document longer than SAMPLE_PIECE_CHARS count apart)
    whole_corpus: bool = True


@dataclass
class CorpusStats:
    files: list[CorpusFileStats] = field(default_factory=list)
    sample: CorpusSample | None = None
    words: int = 0          # pre-tokenised words of the sample, with repetition
    unique_words: int = 0

    def as_dict(self) -> dict:
        return {"files": [asdict(f) for f in self.files],
                "characters": sum(f.characters for f in self.files),
                "sample": asdict(self.sample) if self.sample is not None else None,
                "words": self.words, "unique_words": self.unique_words}


def corpus_files(paths: list[str | Path], *, format: str = "auto", what: str = "--corpus") -> list[str]:
    """The files that `paths` (files, folders, globs) name, in order; a missing path, an empty file or an unknown
    extension is an error starting with `what`."""
    if not paths:
        raise ValueError(f"{what}: no files given; name at least one file, folder or glob (.jsonl .json .parquet .csv "
                         ".txt, optionally .gz/.zst/.xz/.bz2, or .zip)")
    return resolve_files(_source(paths, format, "text", "paragraph"), what=what, archives=True)


def read_corpus(paths: list[str | Path], *, format: str = "auto", text_field: str = "text",
                txt_document: str = "paragraph", on_bad_record: str = "fail", stats: CorpusStats | None = None,
                what: str = "--corpus") -> Iterator[str]:
    """Yield the text of every usable record of the corpus in file order, filling `stats` (per file: documents,
    characters, bad records by reason) as it goes.

    Args:
        paths: files, folders or globs (`corpus_files`).
        format: "auto" (from each file's name) or one of yunshan.data.records.FORMATS.
        text_field: the record field holding the text (a .txt document is {text_field: text}).
        txt_document: how a .txt file is cut into documents: paragraph, line or file.
        on_bad_record: "fail" (stop with file, line and field) or "skip" (count by reason in `stats`).
        what: who names the files, for errors (a flag or a recipe key).
    """
    if on_bad_record not in ON_BAD_RECORD:
        raise ValueError(f"on_bad_record={on_bad_record!r}: valid values are {', '.join(ON_BAD_RECORD)}")
    if txt_document not in TXT_DOCUMENTS:
        raise ValueError(f"txt_document={txt_document!r}: valid values are {', '.join(TXT_DOCUMENTS)}")
    source = _source(paths, format, text_field, txt_document)
    stats = stats if stats is not None else CorpusStats()
    for path in corpus_files(paths, format=format, what=what):
        file_stats = CorpusFileStats(path)
        stats.files.append(file_stats)
        for record in source_texts(source, on_bad_record, file_stats.bad, context=f"{what}: ", fix=FIX, key="{}",
                                   files=[path]):
            file_stats.documents += 1
            file_stats.characters += len(record.text)
            yield record.text
        if file_stats.documents == 0:
            skipped = sum(file_stats.bad.values())
            raise ValueError(f"{what}: {path} holds no usable document" + (
                f" ({skipped} unusable records skipped: {', '.join(sorted(file_stats.bad))})" if skipped else ""))


def _source(paths, format: str, text_field: str, txt_document: str) -> SourceArgs:
    return SourceArgs(name="corpus", path=[str(p) for p in paths], format=format, text_field=text_field,
                      txt_document=txt_document, shuffle=False)


def sample_documents(documents: Iterable[str], sample: CorpusSample) -> Iterable[str]:
    """The documents to count: all of them, streamed, when `sample.limit` is 0; otherwise a seeded sample of at most
    `sample.limit` characters, in corpus order (the whole corpus when it is no larger).

    Each document (or piece of a long one) draws a random key in corpus order; the sample keeps the smallest keys,
    dropping the largest while the kept text is over the limit, so it holds at most `limit` characters at any time
    and the same corpus and seed give the same sample."""
    if sample.limit <= 0:
        return _counted(documents, sample)
    rng = random.Random(sample.seed)
    kept: list[tuple[float, int, str]] = []  # (-key, order, text): the largest key on top
    size = order = 0
    for text in documents:
        for piece in _pieces(text, min(SAMPLE_PIECE_CHARS, sample.limit)):
            heapq.heappush(kept, (-rng.random(), order, piece))
            order += 1
            size += len(piece)
            while size > sample.limit:
                size -= len(heapq.heappop(kept)[2])
                sample.whole_corpus = False
    kept.sort(key=lambda entry: entry[1])
    sample.characters, sample.documents = size, len(kept)
    return [text for _, _, text in kept]


def _counted(documents: Iterable[str], sample: CorpusSample) -> Iterator[str]:
    for text in documents:
        sample.characters += len(text)
        sample.documents += 1
        yield text


def _pieces(text: str, size: int) -> Iterator[str]:
    """`text` in pieces of at most `size` characters, each cut after a line break followed by text where there is one
    in the second half of the piece (a cut there splits no word of any pre-tokeniser that yunshan knows)."""
    start = 0
    while len(text) - start > size:
        end = start + size
        cut = text.rfind("\n", start + size // 2, end)
        while cut > 0 and cut + 1 < end and text[cut + 1].isspace():
            cut = text.rfind("\n", start + size // 2, cut)
        end = cut + 1 if cut > 0 else end
        yield text[start:end]
        start = end
    yield text[start:] if start else text
