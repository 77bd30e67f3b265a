"""Read the domain corpus for an extension and count its pre-tokenised words.

    yunshan tokenizer extend --base BASE --corpus finance.jsonl legal.txt --new-tokens 3000 --out OUT

Formats: `.jsonl` (one JSON object per line, text in a field, "text" by default) and anything else as plain UTF-8
text with one document per paragraph (lines up to a blank line; `txt_document` "line" or "file" for corpora that
mean something else). That is yunshan's `.txt` rule everywhere (yunshan/data/records.py says why): the merges are
learned on the documents continual pretraining trains on. The rule is copied here, not imported, because the
tokenizer package stands alone; a test checks that both copies split every text the same way. Bad input gets a
message naming the file, line and what is wrong: a missing or empty file, a line that is not valid JSON or lacks the
field, invalid UTF-8 (with the byte offset; with `on_invalid_utf8="skip"` the documents holding it are skipped and
counted instead).

Counting is the base pipeline's normaliser and pre-tokeniser per document plus a `collections.Counter` over the
resulting words (C); no Python loop touches single characters (see `BaseTokenizer.count_words` for the fast path).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path


@dataclass
class CorpusFileStats:
    path: str
    documents: int = 0
    characters: int = 0
    skipped_invalid_utf8: int = 0   # documents skipped because they are not valid UTF-8 (on_invalid_utf8="skip")
    skipped_empty: int = 0          # blank lines / documents with empty text


@dataclass
class CorpusStats:
    files: list[CorpusFileStats] = field(default_factory=list)
    words: int = 0          # pre-tokenised words, with repetition
    unique_words: int = 0

    def as_dict(self) -> dict:
        return {"files": [asdict(f) for f in self.files], "words": self.words, "unique_words": self.unique_words}


# What counts as blank: ASCII whitespace only, as bytes.strip() in yunshan.data.records (a line of ideographic
# spaces is text, not a paragraph break).
_BLANK = " \t\n\r\x0b\x0c"
TXT_DOCUMENTS = ("paragraph", "line", "file")


def split_documents(lines: list[str], txt_document: str = "paragraph") -> list[tuple[int, list[str]]]:
    """(first line number, the document's lines) of a plain text split into lines at "\\n" (line ends kept as
    "\\r" where the file had "\\r\\n"): yunshan's `.txt` rule (copied from yunshan.data.records.txt_documents).
    Paragraph: lines up to a blank or whitespace-only line; line: every non-blank line; file: everything.
    `join_document` makes the text."""
    if txt_document not in TXT_DOCUMENTS:
        raise ValueError(f"txt_document must be one of {', '.join(TXT_DOCUMENTS)}, got {txt_document!r}")
    if txt_document == "file":  # "".split("\n") is [""]: an empty file, no line and no document
        return [(1, lines)] if lines not in ([], [""]) else []
    documents, doc, first = [], [], 0
    for number, line in enumerate(lines, start=1):
        if not line.strip(_BLANK):
            if doc and txt_document == "paragraph":
                documents.append((first, doc))
                doc = []
            continue
        if not doc:
            first = number
        doc.append(line)
        if txt_document == "line":
            documents.append((first, doc))
            doc = []
    if doc:
        documents.append((first, doc))
    return documents


def join_document(lines: list[str]) -> str:
    return "\n".join(lines).rstrip("\r\n")


def _decode_lines(path: Path, data: bytes, on_invalid_utf8: str, stats: CorpusFileStats) -> list[str | None]:
    """The file's lines; with on_invalid_utf8="skip", None for a line that is not UTF-8."""
    if data.startswith(b"\xef\xbb\xbf"):
        data = data[3:]
    try:
        return data.decode("utf-8").split("\n")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        if on_invalid_utf8 != "skip":
            raise ValueError(
                f"{path}: line {line}: invalid UTF-8 at byte offset {err.start} ({err.reason}: "
                f"{data[err.start:err.start + 4]!r}); convert the file to UTF-8, or pass --on-invalid-utf8 skip to "
                "skip and count such documents") from None
    lines: list[str | None] = []
    for raw in data.split(b"\n"):
        try:
            lines.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            lines.append(None)
    return lines


def iter_documents(paths: list[str | Path], *, text_field: str = "text", on_invalid_utf8: str = "error",
                   txt_document: str = "paragraph", stats: CorpusStats | None = None) -> Iterator[str]:
    """Yield the documents of every corpus file in order, filling `stats` as it goes."""
    if on_invalid_utf8 not in ("error", "skip"):
        raise ValueError(f"on_invalid_utf8={on_invalid_utf8!r}: valid values are 'error' and 'skip'")
    if not paths:
        raise ValueError("no corpus files given: pass at least one --corpus FILE (.jsonl or plain text)")
    stats = stats if stats is not None else CorpusStats()
    for path in map(Path, paths):
        if not path.is_file():
            raise FileNotFoundError(f"corpus file {path} does not exist" if not path.exists()
                                    else f"corpus path {path} is not a file")
        data = path.read_bytes()
        if not data.strip():
            raise ValueError(f"corpus file {path} is empty; give a file with at least one document")
        file_stats = CorpusFileStats(str(path))
        stats.files.append(file_stats)
        lines = _decode_lines(path, data, on_invalid_utf8, file_stats)
        if path.suffix.lower() in (".jsonl", ".ndjson"):
            documents = _jsonl_documents(path, lines, text_field, file_stats)
        else:
            documents = _text_documents(lines, txt_document, file_stats)
        for text in documents:
            file_stats.documents += 1
            file_stats.characters += len(text)
            yield text
        if file_stats.documents == 0:
            raise ValueError(f"corpus file {path} has no non-empty documents"
                             + (f" ({file_stats.skipped_invalid_utf8} skipped as invalid UTF-8)"
                                if file_stats.skipped_invalid_utf8 else ""))


def _text_documents(lines: list[str | None], txt_document: str, stats: CorpusFileStats) -> Iterator[str]:
    # A line that is not UTF-8 (None) sinks the document it belongs to, as in yunshan.data.records.
    marked = ["\x00?" if line is None else line for line in lines]
    for first, doc in split_documents(marked, txt_document):
        if any(line is None for line in lines[first - 1:first - 1 + len(doc)]):
            stats.skipped_invalid_utf8 += 1
            continue
        yield join_document(doc)


def _jsonl_documents(path: Path, lines: list[str | None], text_field: str, stats: CorpusFileStats) -> Iterator[str]:
    for number, line in enumerate(lines, start=1):
        if line is None:
            stats.skipped_invalid_utf8 += 1
            continue
        if line.endswith("\r"):  # Windows line ends
            line = line[:-1]
        if not line.strip():
            if line:
                stats.skipped_empty += 1
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}: line {number}: not valid JSON ({err.msg} at column {err.colno})") from None
        if not isinstance(record, dict) or text_field not in record:
            keys = sorted(record) if isinstance(record, dict) else type(record).__name__
            raise ValueError(f"{path}: line {number}: no {text_field!r} field (found {keys}); pass "
                             "--text-field NAME to read another field")
        text = record[text_field]
        if not isinstance(text, str):
            raise ValueError(f"{path}: line {number}: field {text_field!r} is {type(text).__name__}, "
                             "expected a string")
        if not text.strip():
            stats.skipped_empty += 1
            continue
        yield text


def count_words(documents: Iterator[str], base, stats: CorpusStats) -> Counter:
    """Frequency of every pre-tokenised word of the base pipeline over the documents (`BaseTokenizer.count_words`)."""
    counter = base.count_words(documents)
    stats.words = sum(counter.values())
    stats.unique_words = len(counter)
    return counter
