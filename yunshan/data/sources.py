"""Corpus sources: read local files or `datasets` datasets as a stream of validated text records.

A source is a list of files (jsonl / json / parquet / csv / txt, optionally .gz or .zst; given as files, folders
or globs) or a `datasets` dataset (a `load_dataset` name or a `save_to_disk` folder). Records are read in
*blocks* starting at a resumable *position*, so a training run can checkpoint where it is in every source and
resume there without re-reading what it already consumed (compressed files and CSV are skipped forward by
decompressing / parsing, never re-tokenised). Each record is validated; a bad record raises `BadRecordError`
naming the file, line and field (policy `fail`) or is counted by reason (policy `skip`).

Written by hand because no maintained library offers resumable, validating, byte-offset streaming over mixed
local formats: `datasets` streaming resumes by example count (re-reading), and fails on a bad line without
saying which one.
"""

from __future__ import annotations

import csv
import glob
import gzip
import io
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

FILE_FORMATS = ("jsonl", "json", "parquet", "csv", "txt")
COMPRESSIONS = ("gz", "zst")
BAD_REASONS = ("malformed_json", "missing_field", "non_string_field", "empty_text", "invalid_utf8", "malformed_row")


class BadRecordError(ValueError):
    """A record that fails validation under `on_bad_record: fail`. The message names file, line and field."""


@dataclass
class SourceArgs:
    """One corpus source of a mixture."""

    name: str = field(metadata={"help": "name used in reports and logs (e.g. finance, legal, general)"})
    path: list[str] | str | None = field(
        default=None,
        metadata={"help": "file, folder or glob (or a list of them): .jsonl .json .parquet .csv .txt, + .gz/.zst"},
    )
    dataset: str | None = field(
        default=None, metadata={"help": "a `datasets` dataset: load_dataset name or save_to_disk folder"}
    )
    dataset_config: str | None = field(default=None, metadata={"help": "load_dataset config name"})
    split: str = field(default="train", metadata={"help": "dataset split"})
    format: str = field(default="auto", metadata={"help": f"auto (from the extension) or one of {FILE_FORMATS}"})
    text_field: str = field(default="text", metadata={"help": "record field holding the text"})
    filter: dict[str, Any] | None = field(
        default=None,
        metadata={"help": "keep records whose fields equal these values (a list means any of them), e.g. {lang: zh}"},
    )
    weight: float = field(default=1.0, metadata={"help": "share of training tokens (normalised over sources)"})
    on_exhausted: str = field(
        default="repeat", metadata={"help": "repeat (reshuffle and start a new epoch) or stop (end the run)"}
    )
    shuffle: bool = field(default=True, metadata={"help": "shuffle file order and documents within blocks"})
    txt_document: str = field(
        default="paragraph", metadata={"help": "txt files: one document per line, paragraph (blank line) or file"}
    )
    card: str | None = field(default=None, metadata={"help": "data card id (data_cards/<card>.md) describing it"})

    def __post_init__(self):
        if (self.path is None) == (self.dataset is None):
            raise ValueError(f"source {self.name!r}: give exactly one of `path` or `dataset`")
        if self.format != "auto" and self.format not in FILE_FORMATS:
            raise ValueError(f"source {self.name!r}: format {self.format!r} is not one of auto, {', '.join(FILE_FORMATS)}")
        if self.on_exhausted not in ("repeat", "stop"):
            raise ValueError(f"source {self.name!r}: on_exhausted must be repeat or stop, got {self.on_exhausted!r}")
        if self.txt_document not in ("line", "paragraph", "file"):
            raise ValueError(f"source {self.name!r}: txt_document must be line, paragraph or file")
        if not self.weight > 0:
            raise ValueError(f"source {self.name!r}: weight must be > 0, got {self.weight}")


@dataclass
class Record:
    """One raw record: its text (None when invalid), why it is invalid, and where it is."""

    text: str | None
    reason: str | None
    location: str  # "file:line" or "dataset[split]#index", for messages
    field_name: str | None = None
    detail: str = ""
    meta: dict | None = None


def format_of(path: str, declared: str) -> tuple[str, str | None]:
    """(format, compression) of a file, from the declared format or the extension."""
    name = path.lower()
    compression = next((c for c in COMPRESSIONS if name.endswith("." + c)), None)
    if compression:
        name = name[: -len(compression) - 1]
    if declared != "auto":
        return declared, compression
    for fmt in FILE_FORMATS:
        if name.endswith("." + fmt):
            return fmt, compression
    raise ValueError(f"{path}: cannot tell the format from the extension; set `format` to one of {FILE_FORMATS}")


def resolve_files(args: SourceArgs) -> list[str]:
    """The sorted list of files a source names (folders are searched recursively for known extensions)."""
    patterns = [args.path] if isinstance(args.path, str) else list(args.path)
    files: list[str] = []
    for pattern in patterns:
        pattern = os.path.expanduser(str(pattern))
        if os.path.isdir(pattern):
            found = [
                str(p) for p in sorted(Path(pattern).rglob("*"))
                if p.is_file() and any(str(p).lower().endswith(f".{f}{c}") for f in FILE_FORMATS
                                       for c in ("", ".gz", ".zst"))
            ]
        elif any(ch in pattern for ch in "*?["):
            found = sorted(p for p in glob.glob(pattern, recursive=True) if os.path.isfile(p))
        elif os.path.isfile(pattern):
            found = [pattern]
        else:
            raise FileNotFoundError(f"source {args.name!r}: {pattern} does not exist")
        if not found:
            raise FileNotFoundError(f"source {args.name!r}: {pattern} matches no corpus file")
        files.extend(found)
    for f in files:
        format_of(f, args.format)  # fail early on unknown extensions
        if os.path.getsize(f) == 0:
            raise ValueError(f"source {args.name!r}: {f} is empty")
    return files


def open_binary(path: str, compression: str | None):
    if compression == "gz":
        return gzip.open(path, "rb")
    if compression == "zst":
        import zstandard

        # Line iteration needs a buffered reader on top of zstd's raw stream reader.
        return io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(open(path, "rb"), closefd=True))
    return open(path, "rb")


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


class RecordValidator:
    """Turns one raw record (a dict) into text, or into a reason why it is unusable."""

    def __init__(self, args: SourceArgs):
        self.args = args

    def check(self, obj: Any, location: str) -> Record:
        field_name = self.args.text_field
        if not isinstance(obj, dict):
            return Record(None, "malformed_json", location, None, f"expected an object, got {type(obj).__name__}")
        if field_name not in obj:
            keys = ", ".join(sorted(map(str, obj))[:10])
            return Record(None, "missing_field", location, field_name, f"record has fields: {keys}")
        text = obj[field_name]
        if not isinstance(text, str):
            return Record(None, "non_string_field", location, field_name, f"got {type(text).__name__}")
        if not text.strip():
            return Record(None, "empty_text", location, field_name, "text is empty or whitespace")
        return Record(text, None, location, field_name, meta=obj)

    def keep(self, record: Record) -> bool:
        """The optional filter: every named field must equal the value (or be one of the list)."""
        if not self.args.filter or record.meta is None:
            return True
        for key, wanted in self.args.filter.items():
            value = record.meta.get(key)
            if isinstance(wanted, list) and value not in wanted:
                return False
            if not isinstance(wanted, list) and value != wanted:
                return False
        return True


def read_file_records(path: str, args: SourceArgs, position: dict) -> Iterator[tuple[Record, dict]]:
    """Records of one file from `position` (format-specific: byte offset + line, or row index), each with the
    position just after it."""
    fmt, compression = format_of(path, args.format)
    validator = RecordValidator(args)
    if fmt in ("jsonl", "txt"):
        yield from _read_lines(path, fmt, compression, args, position, validator)
    elif fmt == "json":
        with open_binary(path, compression) as f:
            raw = f.read()
        try:
            data = json.loads(raw.decode("utf-8"))
        except UnicodeDecodeError as err:
            raise BadRecordError(f"{path}: invalid UTF-8 at byte {err.start}; the whole JSON file is unreadable")
        except json.JSONDecodeError as err:
            raise BadRecordError(f"{path}:{err.lineno}: malformed JSON ({err.msg}); the whole file is unreadable")
        if isinstance(data, dict) and isinstance(data.get("data"), list):
            data = data["data"]
        if not isinstance(data, list):
            raise BadRecordError(f"{path}: a .json source must hold a list of records (or {{'data': [...]}})")
        for i in range(position.get("row", 0), len(data)):
            yield validator.check(data[i], f"{path}: record {i}"), {"row": i + 1}
    elif fmt == "parquet":
        import pyarrow.parquet as pq

        pf = pq.ParquetFile(path)
        row = position.get("row", 0)
        start_group, seen = 0, 0
        while start_group < pf.num_row_groups and seen + pf.metadata.row_group(start_group).num_rows <= row:
            seen += pf.metadata.row_group(start_group).num_rows
            start_group += 1
        for g in range(start_group, pf.num_row_groups):
            table = pf.read_row_group(g)
            rows = table.to_pylist()
            for j in range(max(0, row - seen), len(rows)):
                yield validator.check(rows[j], f"{path}: row {seen + j}"), {"row": seen + j + 1}
            seen += len(rows)
    elif fmt == "csv":
        with open_binary(path, compression) as fb:
            text_stream = io.TextIOWrapper(fb, encoding="utf-8", newline="")
            reader = csv.DictReader(text_stream)
            try:
                for i, row in enumerate(reader):
                    if i < position.get("row", 0):
                        continue  # CSV cannot seek by byte reliably (quoted newlines): parse forward
                    line = reader.line_num
                    if None in row:
                        rec = Record(None, "malformed_row", f"{path}:{line}", None, "more cells than header columns")
                    else:
                        rec = validator.check(row, f"{path}:{line}")
                    yield rec, {"row": i + 1}
            except UnicodeDecodeError as err:
                raise BadRecordError(f"{path}: invalid UTF-8 at byte {err.start} (CSV files must be UTF-8)")


def _read_lines(path, fmt, compression, args, position, validator):
    offset, line_no = position.get("offset", 0), position.get("line", 0)
    with open_binary(path, compression) as f:
        skip_bytes(f, offset)
        if fmt == "txt" and args.txt_document == "file":
            if offset:
                return
            raw = f.read()
            yield _txt_record(raw, path, 1, 0, validator), {"offset": len(raw), "line": raw.count(b"\n") + 1}
            return
        if fmt == "txt" and args.txt_document == "paragraph":
            paragraph, start_offset, start_line = [], offset, line_no + 1
            for raw in f:
                line_no += 1
                offset += len(raw)
                if raw.strip():
                    if not paragraph:
                        start_line = line_no
                    paragraph.append(raw)
                    continue
                if paragraph:
                    yield _txt_record(b"".join(paragraph), path, start_line, start_offset, validator), {
                        "offset": offset, "line": line_no}
                    paragraph = []
                start_offset = offset
            if paragraph:
                yield _txt_record(b"".join(paragraph), path, start_line, start_offset, validator), {
                    "offset": offset, "line": line_no}
            return
        for raw in f:
            line_no += 1
            start = offset
            offset += len(raw)
            after = {"offset": offset, "line": line_no}
            if fmt == "txt":
                if raw.strip():
                    yield _txt_record(raw, path, line_no, start, validator), after
                continue
            if not raw.strip():
                continue  # blank lines between JSON records are not records
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as err:
                yield Record(None, "invalid_utf8", f"{path}:{line_no}", None,
                             f"invalid UTF-8 at byte offset {start + err.start} of the file"), after
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as err:
                yield Record(None, "malformed_json", f"{path}:{line_no}", None,
                             f"{err.msg} at column {err.colno}"), after
                continue
            yield validator.check(obj, f"{path}:{line_no}"), after


def _txt_record(raw: bytes, path: str, line: int, start_offset: int, validator) -> Record:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        return Record(None, "invalid_utf8", f"{path}:{line}", None,
                      f"invalid UTF-8 at byte offset {start_offset + err.start} of the file")
    text = text.rstrip("\n")
    return validator.check({validator.args.text_field: text}, f"{path}:{line}")


def load_hf_dataset(args: SourceArgs):
    """A `datasets` dataset: a save_to_disk folder (random access) or a load_dataset name (streaming)."""
    import datasets

    datasets.config.SLEEP_TIME_ON_THREADS_SHUTDOWN = 0  # closing a streamed parquet iterator early sleeps 5 s
    if os.path.isdir(args.dataset) and (Path(args.dataset) / "dataset_info.json").exists() or (
        os.path.isdir(args.dataset) and (Path(args.dataset) / "dataset_dict.json").exists()
    ):
        ds = datasets.load_from_disk(args.dataset)
        if isinstance(ds, datasets.DatasetDict):
            if args.split not in ds:
                raise ValueError(f"source {args.name!r}: {args.dataset} has splits {list(ds)}, not {args.split!r}")
            ds = ds[args.split]
        return ds
    return datasets.load_dataset(args.dataset, args.dataset_config, split=args.split, streaming=True)


def read_dataset_records(ds, args: SourceArgs, position: dict) -> Iterator[tuple[Record, dict]]:
    """Records of a `datasets` dataset from `position` ({"index": i} for a Dataset, {"state": ...} for a
    streaming IterableDataset, which restores with `load_state_dict`)."""
    import datasets

    validator = RecordValidator(args)
    where = f"{args.dataset}[{args.split}]"
    if isinstance(ds, datasets.Dataset):
        for i in range(position.get("index", 0), len(ds)):
            yield validator.check(ds[i], f"{where} #{i}"), {"index": i + 1}
        return
    if position.get("state") is not None:
        ds.load_state_dict(position["state"])
    i = position.get("index", 0)
    for example in ds:
        yield validator.check(example, f"{where} #{i}"), {"index": i + 1, "state": ds.state_dict()}
        i += 1
