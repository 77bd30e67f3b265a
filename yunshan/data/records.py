"""The one record reader of the data layer: every file format yunshan reads, one bad-record type, one `.txt` rule.

    from yunshan.data.records import read_records
    for location, record, position in read_records("legal.jsonl.zst"):    # record: a dict, or a BadRecord
        ...

Corpus sources (sources.py), instruction sources (conversations.py), `yunshan data convert` (convert.py),
decontamination and the tokenizer tools (tokenizer/corpus.py, through sources.py) all read files through
`read_records`: .jsonl, .json (a list, {"data": [...]}, or JSON Lines under a .json name, as JEC-QA
ships them), .csv, .parquet and .txt, each optionally compressed (.gz, .zst, .xz, .bz2), and .zip archives of them
(members in name order). A record that cannot be read is not raised but yielded as a `BadRecord` naming its reason
(one of BAD_REASONS), field and what was found, so each caller applies its `on_bad_record` policy (`fail_or_count`):
stop with file, line and field, or count by reason. A file that breaks off (a truncated or corrupt .gz/.zst/.xz/.bz2
stream, a damaged .zip or parquet file) yields the records read up to there and then one `corrupt_file` record, so
a skipping run counts it in its report instead of ending the file early without a word.

Reading resumes from a position (jsonl and txt: byte offset and line; the others: row), which a training run keeps
in its checkpoints; compressed files are decompressed forward to the offset, never re-parsed from a line count.

The `.txt` rule: a corpus `.txt` (continual pretraining, the tokenizer extension's corpus, `yunshan data convert`)
holds one document per paragraph (lines up to a blank or whitespace-only line), because a paragraph is what a
plain-text corpus calls a document: splitting by line would cut every multi-line document into fragments, each closed
with an EOS in training, and the tokenizer would learn its merges on other text than the model trains on.
`txt_document: line` and `file` are there for corpora that mean something else. A held-out or evaluation `.txt` (what
bits and tokens per character are measured on: `read_texts`, HELDOUT_TXT_DOCUMENT) is one continuous document: its
blank lines are paragraph breaks inside the text, not document boundaries, so every paragraph is scored with the
text before it as context (the Civil Code scored paragraph by paragraph gave 8.17 bits/char, as one document 4.44).
A .jsonl/.json held-out file still holds one document per record: there the format says where documents end.

Written by hand because no maintained library offers resumable, validating, byte-offset streaming over mixed local
formats: `datasets` streaming resumes by example count (re-reading), and fails on a bad line without saying which.
"""

from __future__ import annotations

import bz2
import csv
import gzip
import io
import json
import lzma
import os
import zipfile
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

FORMATS = ("jsonl", "json", "parquet", "csv", "txt")
COMPRESSIONS = ("gz", "zst", "xz", "bz2")
TXT_DOCUMENTS = ("paragraph", "line", "file")
NEWLINE = b"\n"
BOM = b"\xef\xbb\xbf"

# Why a record is unusable; every reader and converter counts drops under these names.
BAD_REASONS = {
    "malformed_json": "not valid JSON, or a JSON value that is not an object",
    "invalid_utf8": "bytes that are not UTF-8",
    "malformed_row": "a CSV row the csv module cannot parse, or with more cells than header columns",
    "missing_field": "a field the record needs is absent (or, in instruction data, not a string)",
    "non_string_field": "the text field holds something other than a string",
    "empty_text": "the text is empty or only whitespace",
    "unknown_role": "a conversation turn with a role yunshan does not know",
    "wrong_role_order": "turns not in the order system?, user, assistant, user, ..., assistant",
    "empty_user": "an empty user turn",
    "empty_assistant": "an empty assistant turn",
    "bad_answer": "an exam answer that is not among the options",
    "bad_options": "exam options that cannot be read (CFLUE's choices: not a Python dict literal of letter -> text)",
    "identical_answers": "a preference pair whose chosen and rejected answers are the same text",
    "no_pair": "scored completions that give no pair under the pairing rule (fewer than two usable completions, "
               "or every score within min_score_gap of the others)",
    "bad_label": "a KTO label that is not true or false",
    "bad_score": "a completion score that is not a number",
    "unknown_shape": "a record of none of the shapes the converter knows",
    "corrupt_file": "a compressed file, archive or parquet file that breaks off or cannot be decoded from here on",
    "oversized_record": "a record larger than the reader's limit (a JSON line is skipped unread past the limit)",
}


class BadRecord(Exception):
    """One unusable record: why (a key of BAD_REASONS), the field concerned and what was found there."""

    def __init__(self, reason: str, field_name: str | None = None, detail: str = "", location: str | None = None):
        if reason not in BAD_REASONS:
            raise ValueError(f"unknown bad-record reason {reason!r} (a bug in yunshan); known: {', '.join(BAD_REASONS)}")
        super().__init__(detail)
        self.reason, self.field_name, self.detail, self.location = reason, field_name, detail, location

    def at(self, location: str) -> BadRecord:
        self.location = location
        return self

    def describe(self) -> str:
        """'file:line: field 'x': reason (detail)'."""
        where = self.location or "?"
        where = f"{where}: field {self.field_name!r}" if self.field_name else where
        return f"{where}: {self.reason} ({self.detail})"


class BadRecordError(ValueError):
    """A bad record under `on_bad_record: fail`; the message names the file, line and field and what to do."""


def fail_or_count(bad: BadRecord, policy: str, counts: dict, context: str = "", fix: str = "", key: str = "{}"):
    """Apply an `on_bad_record` policy: `fail` raises BadRecordError (context + where + reason + fix), `skip` adds
    one to counts[key.format(reason)]."""
    if policy == "fail":
        raise BadRecordError(f"{context}{bad.describe()}. {fix}".rstrip())
    name = key.format(bad.reason)
    counts[name] = counts.get(name, 0) + 1


# ---------------------------------------------------------------- files


def compression_of(path: str) -> str | None:
    lower = path.lower()
    return next((c for c in COMPRESSIONS if lower.endswith("." + c)), None)


def format_of(path: str, declared: str = "auto") -> tuple[str, str | None]:
    """(format, compression or None) of a file, from the declared format or the extension."""
    compression = compression_of(path)
    name = path.lower()[: -len(compression) - 1] if compression else path.lower()
    if declared != "auto":
        if declared not in FORMATS:
            raise ValueError(f"format {declared!r} is not one of auto, {', '.join(FORMATS)}")
        return declared, compression
    for fmt in FORMATS:
        if name.endswith("." + fmt):
            return fmt, compression
    raise ValueError(f"{path}: cannot tell the format from the extension; set the format to one of "
                     f"{', '.join(FORMATS)}")


def is_readable(path: str) -> bool:
    """Whether `read_records` can tell the format of a file from its name (archives included)."""
    try:
        format_of(path)
        return True
    except ValueError:
        return path.lower().endswith(".zip")


def open_binary(path: str, compression: str | None, raw=None):
    """A binary stream of the file's (decompressed) bytes; `raw` instead of opening `path` (an open file or a zip
    member)."""
    raw = raw if raw is not None else open(path, "rb")
    if compression == "gz":
        return gzip.GzipFile(fileobj=raw)
    if compression == "xz":
        return lzma.LZMAFile(raw)
    if compression == "bz2":
        return bz2.BZ2File(raw)
    if compression == "zst":
        return io.BufferedReader(_ZstdReader(raw))  # line iteration needs a buffered reader
    return raw


class _ZstdReader(io.RawIOBase):
    """The decompressed bytes of a .zst file, every frame of it, raising EOFError when the file ends inside a frame.

    zstandard's own stream_reader ends quietly where a cut-short file ends, so the rest of the corpus would vanish
    without a word; its decompressobj says whether a frame ended (`eof`) and what follows it (`unused_data`)."""

    def __init__(self, raw):
        import zstandard

        super().__init__()
        self._raw, self._new = raw, zstandard.ZstdDecompressor().decompressobj
        self._frame = self._new()
        self._in_frame = False  # bytes of the current frame have been fed and its end not yet seen
        self._out, self._at = b"", 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while self._at >= len(self._out):
            chunk = self._raw.read(1 << 16)
            if not chunk:
                if self._in_frame:
                    raise EOFError("the zstd stream ends inside a frame (the file is cut short)")
                return 0
            pieces = []
            while chunk:
                if self._frame.eof:
                    self._frame = self._new()
                pieces.append(self._frame.decompress(chunk))
                self._in_frame = not self._frame.eof
                chunk = self._frame.unused_data if self._frame.eof else b""
            self._out, self._at = b"".join(pieces), 0
        n = min(len(buffer), len(self._out) - self._at)
        buffer[:n] = self._out[self._at:self._at + n]
        self._at += n
        return n

    def close(self) -> None:
        if not self.closed:
            self._raw.close()
        super().close()


def skip_bytes(f, n: int) -> None:
    """Move a (possibly decompressing) binary stream forward by n bytes."""
    if n <= 0:
        return
    try:
        f.seek(n)
        return
    except (OSError, io.UnsupportedOperation, ValueError):
        pass
    while n > 0:  # zstd stream readers cannot seek: decompress forward
        chunk = f.read(min(n, 1 << 20))
        if not chunk:
            break
        n -= len(chunk)


# ---------------------------------------------------------------- the reader


def read_records(path: str, fmt: str = "auto", *, txt_document: str = "paragraph", text_field: str = "text",
                 position: dict | None = None, csv_columns: tuple[str, ...] = (), max_line_bytes: int | None = None
                 ) -> Iterator[tuple[str, Any, dict]]:
    """(location, record, position after it) for every record of a file, from `position` on.

    A record is a dict (a .txt document becomes {text_field: text}), another JSON value as found, or a BadRecord
    (its location set). Locations are "file:line" (jsonl, txt, csv), "file: record N" (a JSON list) or
    "file: row N" (parquet); inside a .zip, "archive.zip!member". `csv_columns`: header columns a CSV must have (a
    missing one is a missing_field at line 1, and the file yields nothing else). `max_line_bytes`: a .jsonl line
    longer than this is an `oversized_record`, read past in chunks without being held (memory stays bounded)."""
    if txt_document not in TXT_DOCUMENTS:
        raise ValueError(f"txt_document must be one of {', '.join(TXT_DOCUMENTS)}, got {txt_document!r}")
    if path.lower().endswith(".zip"):
        if position:
            raise ValueError(f"{path}: reading a .zip archive cannot resume from a position; unzip it")
        yield from _read_zip(path, fmt, txt_document, text_field, csv_columns, max_line_bytes)
        return
    fmt, compression = format_of(path, fmt)
    yield from _read(path, path, fmt, compression, None, txt_document, text_field, position or {}, csv_columns,
                     max_line_bytes)


def _read_zip(path, fmt, txt_document, text_field, csv_columns, max_line_bytes=None):
    try:
        archive = zipfile.ZipFile(path)
    except (zipfile.BadZipFile, EOFError) as err:
        yield path, BadRecord("corrupt_file", None, f"not a readable .zip archive: {err}", path), {}
        return
    with archive:
        members = [m for m in sorted(archive.namelist()) if not m.endswith("/") and is_readable(m)
                   and not m.lower().endswith(".zip")]
        if not members:
            names = ", ".join(archive.namelist()[:10])
            raise ValueError(f"{path}: no .jsonl/.json/.parquet/.csv/.txt member (it holds: {names}); unzip it and "
                             "give the files with their format")
        for member in members:
            member_fmt, compression = format_of(member, fmt)
            display = f"{path}!{member}"
            try:
                raw = archive.open(member)
            except (zipfile.BadZipFile, EOFError, OSError, NotImplementedError) as err:
                yield display, BadRecord("corrupt_file", None, f"the archive member cannot be read: {err}",
                                         display), {}
                continue
            with raw:
                yield from _read(member, display, member_fmt, compression, raw, txt_document, text_field, {},
                                 csv_columns, max_line_bytes)


def _decoding_errors(fmt: str, compression: str | None) -> tuple[type[BaseException], ...]:
    """What a decompressor or parser raises on damaged bytes (gzip: BadGzipFile, an OSError, or EOFError when the
    stream is cut short; zlib.error; lzma.LZMAError; bz2 OSError; zstandard.ZstdError; zipfile.BadZipFile for a bad
    member CRC; pyarrow's ArrowException, or UnicodeDecodeError for a damaged string column)."""
    import zlib

    errors: list[type[BaseException]] = [OSError, EOFError, zlib.error, lzma.LZMAError, zipfile.BadZipFile]
    if compression == "zst":
        import zstandard

        errors.append(zstandard.ZstdError)
    if fmt == "parquet":
        import pyarrow

        errors.append(pyarrow.ArrowException)
        errors.append(UnicodeDecodeError)  # a string column whose bytes are not the UTF-8 parquet promises
    return tuple(errors)


def _read(path, display, fmt, compression, raw, txt_document, text_field, position, csv_columns,
          max_line_bytes=None):
    """The records of one file; a file that breaks off ends with one corrupt_file record at the place it broke."""
    raw_given = raw is not None
    if raw is None:
        raw = open(path, "rb")  # not guarded: a missing or unreadable file is an error of its own (OSError)
    errors = _decoding_errors(fmt, compression)
    last: tuple[str, Any, dict] | None = None
    try:
        for last in _read_opened(path, display, fmt, compression, raw, txt_document, text_field, position,
                                 csv_columns, max_line_bytes):
            yield last
    except errors as err:
        where, after = _break_point(display, fmt, last, position)
        what = f"{compression} stream" if compression else "archive member" if raw_given else f"{fmt} file"
        detail = f"the {what} breaks off or is damaged here ({type(err).__name__}: {err}); nothing after it is read"
        yield where, BadRecord("corrupt_file", None, " ".join(detail.split()), where), after
    finally:
        raw.close()


def _break_point(display: str, fmt: str, last, position: dict) -> tuple[str, dict]:
    """Where a damaged file stops being readable: the line (or row) after the last record read, and the position
    after that record (resuming there meets the damage again, so it is counted once per pass)."""
    after = last[2] if last is not None else dict(position)
    if fmt in ("jsonl", "txt"):
        return f"{display}:{after.get('line', 0) + 1}", after
    return f"{display}: {'record' if fmt == 'json' else 'row'} {after.get('row', 0)}", after


def _read_opened(path, display, fmt, compression, raw, txt_document, text_field, position, csv_columns,
                 max_line_bytes=None):
    if fmt == "parquet":
        yield from _parquet_records(path, display, compression, raw, position)
        return
    with open_binary(path, compression, raw) as f:
        if fmt in ("jsonl", "txt"):
            skip_bytes(f, position.get("offset", 0))
            if fmt == "jsonl":
                lines = _lines(f, position.get("offset", 0), position.get("line", 0), max_line_bytes)
                yield from _jsonl_records(lines, display)
            else:
                lines = _lines(f, position.get("offset", 0), position.get("line", 0))
                for line, text, after in txt_documents(lines, txt_document):
                    yield (*_txt_record(text, display, line, text_field), after)
        elif fmt == "json":
            yield from _json_records(f.read(), display, position.get("row", 0))
        else:
            yield from _csv_records(f, display, position.get("row", 0), csv_columns)


class _Oversized(int):
    """In place of a line's bytes: a line longer than the limit, by its length in bytes (never held in memory)."""


def _bounded(f, limit: int) -> Iterator[bytes | _Oversized]:
    """The lines of a binary stream, each longer than `limit` bytes replaced by its length (read in 1 MB chunks)."""
    while True:
        raw = f.readline(limit + 1)
        if not raw:
            return
        if len(raw) <= limit or raw.endswith(NEWLINE):
            yield raw
            continue
        size = len(raw)
        while True:
            chunk = f.readline(1 << 20)
            size += len(chunk)
            if not chunk or chunk.endswith(NEWLINE):
                break
        yield _Oversized(size)


def _lines(f, offset: int, line: int, max_bytes: int | None = None) -> Iterator[tuple[int, int, bytes]]:
    """(line number, byte offset of its start, bytes) of every line from a position on; a UTF-8 byte-order mark at
    the start of the file is not part of the first line. With `max_bytes`, a longer line comes as `_Oversized`."""
    for raw in (f if max_bytes is None else _bounded(f, max_bytes)):
        line += 1
        if isinstance(raw, _Oversized):
            yield line, offset, raw
            offset += raw
            continue
        start = offset
        offset += len(raw)
        if start == 0 and raw.startswith(BOM):
            raw, start = raw[len(BOM):], len(BOM)
        yield line, start, raw


def txt_documents(lines: Iterable[tuple[int, int, bytes]], txt_document: str = "paragraph"
                  ) -> Iterator[tuple[int, tuple[int, bytes], dict]]:
    """The `.txt` rule over (line number, offset, bytes) lines: (first line, (its offset, the document's bytes without
    the final line end), position after it). Paragraph: lines up to a blank or whitespace-only line; line: every
    non-blank line; file: everything."""
    doc: list[bytes] = []
    first = start = end = last = 0
    for number, offset, raw in lines:
        end, last = offset + len(raw), number
        if txt_document == "file":
            if not doc:
                first, start = number, offset
            doc.append(raw)
            continue
        if not raw.strip():
            if doc and txt_document == "paragraph":
                yield first, (start, _join(doc)), {"offset": end, "line": number}
                doc = []
            continue
        if not doc:
            first, start = number, offset
        doc.append(raw)
        if txt_document == "line":
            yield first, (start, _join(doc)), {"offset": end, "line": number}
            doc = []
    if doc:
        yield first, (start, _join(doc)), {"offset": end, "line": last}


def _join(lines: list[bytes]) -> bytes:
    return b"".join(lines).rstrip(b"\r\n")


def split_documents(text: str, txt_document: str = "paragraph") -> list[str]:
    """The documents of a plain text by the `.txt` rule (what `read_records` yields for a .txt file)."""
    data = text.encode("utf-8")
    return [raw.decode("utf-8") for _, (_, raw), _ in txt_documents(_lines(io.BytesIO(data), 0, 0), txt_document)]


def _txt_record(text: tuple[int, bytes], display: str, line: int, text_field: str):
    offset, raw = text
    where = f"{display}:{line}"
    try:
        return where, {text_field: raw.decode("utf-8")}
    except UnicodeDecodeError as err:
        return where, BadRecord("invalid_utf8", None, f"invalid UTF-8 at byte offset {offset + err.start} of the file",
                                where)


def _jsonl_records(lines, display):
    for number, offset, raw in lines:
        if isinstance(raw, _Oversized):
            where = f"{display}:{number}"
            yield where, BadRecord("oversized_record", None, f"a line of {int(raw):,} bytes", where), {
                "offset": offset + raw, "line": number}
            continue
        after = {"offset": offset + len(raw), "line": number}
        if not raw.strip():
            continue  # blank lines between JSON records are not records
        where = f"{display}:{number}"
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            yield where, BadRecord("invalid_utf8", None, f"invalid UTF-8 at byte offset {offset + err.start} of the "
                                                         "file", where), after
            continue
        try:
            yield where, json.loads(text), after
        except json.JSONDecodeError as err:
            yield where, BadRecord("malformed_json", None, f"{err.msg} at column {err.colno}", where), after


def _json_records(raw: bytes, display: str, row: int):
    """A JSON list, {"data": [...]}, or JSON Lines in a file named .json (several releases, JEC-QA among them)."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        where = f"{display}:{raw.count(NEWLINE, 0, err.start) + 1}"
        yield where, BadRecord("invalid_utf8", None, f"invalid UTF-8 at byte offset {err.start}; the whole JSON file "
                                                     "is unreadable", where), {"row": row + 1}
        return
    stripped = text.lstrip()
    data = None
    if stripped.startswith("["):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as err:
            where = f"{display}:{err.lineno}"
            yield where, BadRecord("malformed_json", None, f"{err.msg}; the whole JSON list is unreadable",
                                   where), {"row": row + 1}
            return
    elif stripped.startswith("{"):
        try:
            whole = json.loads(text)
        except json.JSONDecodeError:
            whole = None  # not one object: JSON Lines
        if isinstance(whole, dict) and isinstance(whole.get("data"), list):
            data = whole["data"]
    if data is None:
        lines = _lines(io.BytesIO(raw), 0, 0)
        for i, (where, record, _) in enumerate(_jsonl_records(lines, display)):
            if i >= row:
                yield where, record, {"row": i + 1}
        return
    for i in range(row, len(data)):
        where = f"{display}: record {i}"
        yield where, data[i], {"row": i + 1}


def _csv_records(stream, display, row: int, csv_columns):
    text = io.TextIOWrapper(stream, encoding="utf-8", newline="")
    reader = csv.DictReader(text)
    i = 0
    try:
        missing = [c for c in csv_columns if c not in (reader.fieldnames or [])]
        if missing:
            where = f"{display}:1"
            yield where, BadRecord("missing_field", missing[0], f"the header lacks {', '.join(missing)}; expected "
                                   f"{','.join(csv_columns)}", where), {"row": row + 1}
            return
        for i, record in enumerate(reader):
            if i < row:
                continue  # CSV cannot seek by byte reliably (quoted newlines): parse forward
            where = f"{display}:{reader.line_num}"
            if None in record:
                yield where, BadRecord("malformed_row", None, "more cells than header columns", where), {"row": i + 1}
            else:
                yield where, record, {"row": i + 1}
    except UnicodeDecodeError as err:
        where = f"{display}:{reader.line_num + 1}"
        yield where, BadRecord("invalid_utf8", None, f"invalid UTF-8 (byte {err.start}); CSV files must be UTF-8",
                               where), {"row": i + 1}
    except csv.Error as err:
        where = f"{display}:{reader.line_num}"
        yield where, BadRecord("malformed_row", None, str(err), where), {"row": i + 1}


def _parquet_records(path, display, compression, raw, position):
    import pyarrow.parquet as pq

    if compression or not isinstance(raw, io.BufferedReader):
        # parquet needs random access: a compressed file or a zip member is read into memory
        with open_binary(path, compression, raw) as f:
            source = io.BytesIO(f.read())
    else:
        source = raw
    pf = pq.ParquetFile(source)
    row = position.get("row", 0)
    start_group, seen = 0, 0
    while start_group < pf.num_row_groups and seen + pf.metadata.row_group(start_group).num_rows <= row:
        seen += pf.metadata.row_group(start_group).num_rows
        start_group += 1
    for g in range(start_group, pf.num_row_groups):
        rows = pf.read_row_group(g).to_pylist()
        for j in range(max(0, row - seen), len(rows)):
            yield f"{display}: row {seen + j}", rows[j], {"row": seen + j + 1}
        seen += len(rows)


# ---------------------------------------------------------------- `datasets` datasets


def load_dataset(name: str, config: str | None, split: str, what: str):
    """A `datasets` dataset: a save_to_disk folder (random access) or a load_dataset name (streamed; downloaded unless
    HF_HUB_OFFLINE=1). `what` names the dataset and who asks, for errors."""
    import datasets

    datasets.config.SLEEP_TIME_ON_THREADS_SHUTDOWN = 0  # closing a streamed parquet iterator early sleeps 5 s
    path = Path(name)
    if path.is_dir() and ((path / "dataset_info.json").exists() or (path / "dataset_dict.json").exists()):
        ds = datasets.load_from_disk(str(path))
        if isinstance(ds, datasets.DatasetDict):
            if split not in ds:
                raise ValueError(f"{what}: splits are {list(ds)}, not {split!r}")
            ds = ds[split]
        return ds
    try:
        return datasets.load_dataset(name, config, split=split, streaming=True)
    except (ConnectionError, FileNotFoundError) as err:
        offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "false", "False", "")
        hint = (" Downloads are off in this environment (HF_HUB_OFFLINE=1): set HF_HUB_OFFLINE=0 HF_DATASETS_OFFLINE=0 "
                "to download"
                if offline else "")
        raise FileNotFoundError(f"{what}: cannot load it ({err}).{hint}") from None


def read_dataset_records(ds, name: str, split: str, position: dict | None = None
                         ) -> Iterator[tuple[str, Any, dict]]:
    """(location, record, position after it) of a `datasets` dataset from `position` ({"index": i} for a Dataset,
    plus {"state": ...} for a streaming IterableDataset, which restores with `load_state_dict`)."""
    import datasets

    position = position or {}
    where = f"{name}[{split}]"
    if isinstance(ds, datasets.Dataset):
        for i in range(position.get("index", 0), len(ds)):
            yield f"{where} #{i}", ds[i], {"index": i + 1}
        return
    if position.get("state") is not None:
        ds.load_state_dict(position["state"])
    i = position.get("index", 0)
    for example in ds:
        yield f"{where} #{i}", example, {"index": i + 1, "state": ds.state_dict()}
        i += 1


def list_item_lines(text: str) -> list[int]:
    """The line on which each element of a JSON list starts (the list must be valid JSON: its reader checked it)."""
    decoder = json.JSONDecoder()
    i = text.index("[") + 1
    lines, line, counted = [], 1, 0
    while True:
        while i < len(text) and text[i] in " \t\r\n,":
            i += 1
        if i >= len(text) or text[i] == "]":
            return lines
        line += text.count("\n", counted, i)
        counted = i
        lines.append(line)
        _, i = decoder.raw_decode(text, i)


# A held-out or evaluation .txt is one continuous document (the module docstring's `.txt` rule).
HELDOUT_TXT_DOCUMENT = "file"


def read_texts(path: str, what: str, txt_document: str = HELDOUT_TXT_DOCUMENT) -> Iterator[tuple[str, str]]:
    """(location, text) of every document of a held-out text file: a .txt is one continuous document (blank lines
    are paragraph breaks inside it; `txt_document="paragraph"` for a caller that wants its paragraphs as items),
    a .jsonl/.json one document per record (its `text` field). A missing file, a bad record or a record without a
    text string is an error starting with `what` (e.g. "held-out text finance")."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"{what}: {path} does not exist")
    for location, record, _ in read_records(str(path), txt_document=txt_document):
        if isinstance(record, BadRecord):
            raise ValueError(f"{what}: {record.describe()}")
        if not isinstance(record, dict) or not isinstance(record.get("text"), str):
            raise ValueError(f"{what}: {location}: field 'text': missing_field (a record needs a text string)")
        yield location, record["text"]


def first_chars(docs: list[str], max_chars: int) -> list[str]:
    """The documents in order until they hold `max_chars` characters, the last one cut to fill exactly that (the
    first `max_chars` characters of a held-out text, which is one document when it is a .txt)."""
    if max_chars < 1:
        raise ValueError(f"max_chars must be at least 1, got {max_chars}")
    kept, left = [], max_chars
    for doc in docs:
        if left <= 0:
            break
        kept.append(doc[:left])
        left -= len(kept[-1])
    return kept
