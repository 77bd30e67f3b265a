"""The corpus of a vocabulary extension (and the texts of a compression report), read as `yunshan cpt` reads a source.

    yunshan tokenizer extend --base BASE --corpus legal/*.jsonl.zst finance.parquet --new-tokens 3000 --out OUT

yunshan has one record reader, `yunshan.data.records`, and the tokenizer tools read through it (by way of
`yunshan.data.sources`, as continual pretraining and decontamination do), so the extension learns its merges on the
very documents the model then trains on: files, folders and globs; .jsonl, .json, .parquet, .csv and .txt, each
optionally .gz, .zst, .xz or .bz2, and .zip archives of them; the text field (`--text-field`) and `--format` for
files whose name does not say it; the `.txt` rule (one document per paragraph, `--txt-document`); and the same
bad-record policy and reasons (`--on-bad-record fail` stops at the first unusable record naming file, line and field;
`skip` skips it and counts it by reason in the report, per file).

Counting is the base pipeline's normaliser and pre-tokeniser per document plus a `collections.Counter` over the
resulting words (C); no Python loop touches single characters (see `BaseTokenizer.count_words` for the fast path).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path

from yunshan.data.records import TXT_DOCUMENTS
from yunshan.data.sources import SourceArgs, resolve_files, source_texts

ON_BAD_RECORD = ("fail", "skip")
FIX = ("Fix the file (--text-field names the field that holds the text, --format the format of a file whose name does "
       "not say it), or pass --on-bad-record skip to skip unusable records and count them by reason.")


@dataclass
class CorpusFileStats:
    path: str
    documents: int = 0
    characters: int = 0
    bad: dict[str, int] = field(default_factory=dict)  # unusable records skipped, by reason (on_bad_record "skip")


@dataclass
class CorpusStats:
    files: list[CorpusFileStats] = field(default_factory=list)
    words: int = 0          # pre-tokenised words, with repetition
    unique_words: int = 0

    def as_dict(self) -> dict:
        return {"files": [asdict(f) for f in self.files], "words": self.words, "unique_words": self.unique_words}


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


def count_words(documents: Iterator[str], base, stats: CorpusStats) -> Counter:
    """Frequency of every pre-tokenised word of the base pipeline over the documents (`BaseTokenizer.count_words`)."""
    counter = base.count_words(documents)
    stats.words = sum(counter.values())
    stats.unique_words = len(counter)
    return counter
