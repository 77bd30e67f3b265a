"""`yunshan data convert`: turn a released dataset into what yunshan reads, streaming, with a drop report.

    yunshan data convert pile-of-law/data/train.courtlisteneropinions.*.jsonl.xz --out pile_of_law.jsonl.zst
    yunshan data convert news.csv --template "{title}\\n{content}" --where src=sina --out news.jsonl --max-chars 5e8
    HF_HUB_OFFLINE=0 HF_DATASETS_OFFLINE=0 yunshan data convert --dataset ORG/NAME --split train --out x.jsonl
    yunshan data convert --from lawyer-llama data/judical_examination.json --out lawyer_llama.jsonl
    yunshan data convert --from jecqa-holdout jec-qa/0_train.json jec-qa/1_train.json --out jecqa_split/
    yunshan data convert --from mc-parquet --layout ceval ceval-exam/ --subject-mapping subject_mapping.json --out ceval/

The generic converter reads local .jsonl/.json/.parquet/.csv/.txt files (optionally .gz/.zst/.xz/.bz2, or inside
.zip archives, given as files, folders or globs) or a `datasets` dataset (hub name or save_to_disk folder), keeps
records that pass `--where`, builds the text from one field or a template joining fields, optionally masks personal
identifiers, drops empty, short and duplicate documents, stops at a character cap, and writes yunshan JSONL
(`{"text": ...}` plus any kept or added fields; .jsonl, .jsonl.gz or .jsonl.zst). Memory stays flat: one record at a
time, except .json files (a JSON list is parsed whole) and `--dedup` (an 8-byte digest per kept document in a set,
about 100 bytes each).

Malformed input (bad JSON, invalid UTF-8, a missing or non-string field) stops the run with file, line and field
(`--on-bad-record fail`, the default, as everywhere in yunshan) or is counted by reason (`skip`). Filter decisions
(`--where`, empty, too short, duplicate) are drops, always counted. The report (stdout, and `--report FILE` as JSON)
gives records read, written, characters written and drops by reason with the first location of each.

Named converters (`--from NAME`) handle releases whose structure needs it: instruction sets with their own field
names become `{"messages": [...]}` (yunshan/data/instruction_sets.py); JEC-QA train files split into train and
held-out parts, and C-Eval/CMMLU Hub parquet become the per-subject CSV layout of yunshan eval
(yunshan/data/exam_layouts.py). Every data card in data_cards/ gives the exact command for its dataset.
"""

from __future__ import annotations

import argparse
import bz2
import csv
import glob
import gzip
import hashlib
import io
import json
import lzma
import os
import re
import string
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .sources import BadRecordError

INPUT_FORMATS = ("jsonl", "json", "parquet", "csv", "txt")
INPUT_COMPRESSIONS = ("gz", "zst", "xz", "bz2")
NAMED = ("lawyer-llama", "chatlaw", "lawgpt-zh", "jecqa-holdout", "mc-parquet")
# Structural problems with the input (subject to --on-bad-record) ...
ERROR_REASONS = ("malformed_json", "invalid_utf8", "missing_field", "non_string_field", "malformed_row", "bad_answer",
                 "wrong_role_order", "empty_assistant", "empty_user", "unknown_shape")
# ... and filter decisions (always counted, never errors).
DROP_REASONS = ("where", "empty_text", "too_short", "duplicate")

# Personal identifiers masked by --mask-pii. Published Chinese judgments replace party names (张某) but still carry
# resident ID numbers, phone numbers and e-mail addresses now and then; they are replaced by a tag so the model never
# learns one. The ID pattern checks the birth-date part, so ordinary 18-digit amounts or case numbers survive. Digits
# are ASCII digits (how IDs and phone numbers are written in published documents).
PII_PATTERNS = (
    ("id_number", re.compile(r"(?<![0-9A-Za-z])[1-9][0-9]{5}(?:18|19|20)[0-9]{2}(?:0[1-9]|1[0-2])"
                             r"(?:0[1-9]|[12][0-9]|3[01])[0-9]{3}[0-9Xx](?![0-9A-Za-z])"), "[身份证号]"),
    ("phone", re.compile(r"(?<![0-9])(?:\+?86[- ]?)?1[3-9][0-9]{9}(?![0-9])"), "[电话]"),
    ("email", re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}"), "[邮箱]"),
)
# Both number patterns need 11 consecutive ASCII digits: a C-speed pre-check (UTF-8 bytes with every digit mapped to
# "0", then a substring search) lets the regular expressions run only on the rare documents that have them, which
# makes --mask-pii about 10x cheaper on ordinary text (benchmarks/data_convert.py).
_DIGITS_TO_ZERO = bytes(0x30 if 0x30 <= i <= 0x39 else i for i in range(256))
_ELEVEN_DIGITS = b"0" * 11


class Bad(Exception):
    """One unusable record: reason (one of ERROR_REASONS), the field concerned and what was found."""

    def __init__(self, reason: str, field_name: str | None, detail: str):
        super().__init__(detail)
        self.reason, self.field_name, self.detail = reason, field_name, detail


@dataclass
class ConvertReport:
    """What a conversion read, wrote and dropped (by reason, with the first location of each)."""

    converter: str
    inputs: list[str]
    output: str
    records_read: int = 0
    records_written: int = 0
    chars_written: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    first_location: dict[str, str] = field(default_factory=dict)
    pii_masked: dict[str, int] = field(default_factory=dict)
    stopped_by: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    def drop(self, reason: str, location: str) -> None:
        self.dropped[reason] = self.dropped.get(reason, 0) + 1
        self.first_location.setdefault(reason, location)

    def to_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items()}

    def render(self) -> str:
        lines = [f"{self.converter}: {', '.join(self.inputs)} -> {self.output}",
                 f"  records read {self.records_read:,}, written {self.records_written:,}, "
                 f"characters written {self.chars_written:,}"]
        for reason, n in sorted(self.dropped.items()):
            lines.append(f"  dropped {reason}: {n:,} (first at {self.first_location[reason]})")
        for kind, n in sorted(self.pii_masked.items()):
            lines.append(f"  masked {kind}: {n:,}")
        for key, value in self.extra.items():
            lines.append(f"  {key}: {value}")
        if self.stopped_by:
            lines.append(f"  stopped early: {self.stopped_by}")
        return "\n".join(lines)


# ------------------------------------------------------------------------------------------- reading inputs


def compression_of(path: str) -> tuple[str, str | None]:
    """(name without the compression suffix, compression or None)."""
    lower = path.lower()
    for c in INPUT_COMPRESSIONS:
        if lower.endswith("." + c):
            return path[: -len(c) - 1], c
    return path, None


def format_of(path: str, declared: str = "auto") -> str:
    if declared != "auto":
        if declared not in INPUT_FORMATS:
            raise ValueError(f"--format {declared!r} is not one of auto, {', '.join(INPUT_FORMATS)}")
        return declared
    name, _ = compression_of(path)
    for fmt in INPUT_FORMATS:
        if name.lower().endswith("." + fmt):
            return fmt
    raise ValueError(f"{path}: cannot tell the format from the extension; give --format, one of {INPUT_FORMATS}")


def _readable(name: str) -> bool:
    base, _ = compression_of(name)
    return any(base.lower().endswith("." + f) for f in INPUT_FORMATS)


def resolve_inputs(patterns: list[str]) -> list[str]:
    """Files named by paths, folders (searched recursively) or globs, in sorted order; .zip archives kept whole."""
    files: list[str] = []
    for pattern in patterns:
        pattern = os.path.expanduser(pattern)
        if os.path.isdir(pattern):
            found = sorted(str(p) for p in Path(pattern).rglob("*")
                           if p.is_file() and (_readable(p.name) or p.name.lower().endswith(".zip")))
        elif any(ch in pattern for ch in "*?["):
            found = sorted(p for p in glob.glob(pattern, recursive=True) if os.path.isfile(p))
        elif os.path.isfile(pattern):
            found = [pattern]
        else:
            raise FileNotFoundError(f"{pattern}: no such file or folder")
        if not found:
            raise FileNotFoundError(f"{pattern}: matches no .jsonl/.json/.parquet/.csv/.txt (or .zip) file")
        files.extend(found)
    return files


def _decompress(raw, compression: str | None):
    """A binary stream that decompresses `raw` (an open binary file)."""
    if compression == "gz":
        return gzip.GzipFile(fileobj=raw)
    if compression == "xz":
        return lzma.LZMAFile(raw)
    if compression == "bz2":
        return bz2.BZ2File(raw)
    if compression == "zst":
        import zstandard

        return io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(raw))
    return raw


def iter_file_records(path: str, declared_format: str = "auto", txt_document: str = "paragraph",
                      _stream=None, _display: str | None = None) -> Iterator[tuple[str, Any]]:
    """(location, record dict or Bad) for every record of one file (or one member of a .zip)."""
    display = _display or path
    if _stream is None and path.lower().endswith(".zip"):
        with zipfile.ZipFile(path) as archive:
            members = [m for m in sorted(archive.namelist()) if not m.endswith("/") and _readable(m)]
            if not members:
                names = ", ".join(archive.namelist()[:10])
                raise ValueError(f"{path}: no .jsonl/.json/.parquet/.csv/.txt member (it holds: {names}); unzip it "
                                 "and give the files with --format")
            for member in members:
                with archive.open(member) as raw:
                    yield from iter_file_records(member, declared_format, txt_document, _stream=raw,
                                                 _display=f"{path}!{member}")
        return
    fmt = format_of(path, declared_format)
    _, compression = compression_of(path)
    raw = _stream if _stream is not None else open(path, "rb")
    try:
        stream = _decompress(raw, compression)
        if fmt == "jsonl":
            yield from _jsonl_records(stream, display)
        elif fmt == "json":
            yield from _json_records(stream.read(), display)
        elif fmt == "csv":
            yield from _csv_records(stream, display)
        elif fmt == "txt":
            yield from _txt_records(stream, display, txt_document)
        else:
            # Parquet needs random access: a compressed file or a zip member is read into memory first.
            source = io.BytesIO(stream.read()) if _stream is not None or compression else path
            yield from _parquet_records(source, display)
    finally:
        if _stream is None:
            raw.close()


def _jsonl_records(stream, display):
    for line_no, raw in enumerate(stream, 1):
        if not raw.strip():
            continue
        where = f"{display}:{line_no}"
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            yield where, Bad("invalid_utf8", None, f"invalid UTF-8 at byte {err.start} of the line")
            continue
        try:
            yield where, json.loads(text)
        except json.JSONDecodeError as err:
            yield where, Bad("malformed_json", None, f"{err.msg} at column {err.colno}")


def _json_records(raw: bytes, display):
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw[: err.start].count(b"\n") + 1
        yield f"{display}:{line}", Bad("invalid_utf8", None, f"invalid UTF-8 at byte {err.start}")
        return
    if not text.lstrip().startswith("["):
        # Several releases (JEC-QA among them) name JSON Lines files .json: one object per line.
        yield from _jsonl_records(io.BytesIO(raw), display)
        return
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        yield f"{display}:{err.lineno}", Bad("malformed_json", None, f"{err.msg}; the whole JSON list is unreadable")
        return
    for i, obj in enumerate(data):
        yield f"{display}: record {i}", obj


def _csv_records(stream, display):
    text = io.TextIOWrapper(stream, encoding="utf-8", newline="")
    reader = csv.DictReader(text)
    try:
        for row in reader:
            where = f"{display}:{reader.line_num}"
            if None in row:
                yield where, Bad("malformed_row", None, "more cells than header columns")
            else:
                yield where, row
    except UnicodeDecodeError as err:
        yield f"{display}:{reader.line_num + 1}", Bad("invalid_utf8", None, f"invalid UTF-8 (byte {err.start})")
    except csv.Error as err:
        yield f"{display}:{reader.line_num}", Bad("malformed_row", None, str(err))


def _txt_records(stream, display, txt_document):
    if txt_document not in ("line", "paragraph", "file"):
        raise ValueError(f"--txt-document must be line, paragraph or file, got {txt_document!r}")
    lines: list[bytes] = []
    start = 1

    def flush(first_line):
        raw = b"".join(lines)
        try:
            return f"{display}:{first_line}", {"text": raw.decode("utf-8").rstrip("\n")}
        except UnicodeDecodeError as err:
            return f"{display}:{first_line}", Bad("invalid_utf8", None, f"invalid UTF-8 at byte {err.start}")

    for line_no, raw in enumerate(stream, 1):
        if txt_document == "file":
            lines.append(raw)
            continue
        if txt_document == "line":
            if raw.strip():
                lines = [raw]
                yield flush(line_no)
            continue
        if raw.strip():
            if not lines:
                start = line_no
            lines.append(raw)
        elif lines:
            yield flush(start)
            lines = []
    if lines and txt_document != "line":
        yield flush(start)


def _parquet_records(source, display):
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(source)
    row = 0
    for batch in pf.iter_batches(batch_size=1024):
        for record in batch.to_pylist():
            yield f"{display}: row {row}", record
            row += 1


def iter_dataset_records(name: str, config: str | None, split: str) -> Iterator[tuple[str, Any]]:
    """Records of a `datasets` dataset: a save_to_disk folder, or a load_dataset name streamed from the Hub."""
    import datasets

    datasets.config.SLEEP_TIME_ON_THREADS_SHUTDOWN = 0  # closing a streamed parquet iterator early sleeps 5 s
    path = Path(name)
    if path.is_dir() and ((path / "dataset_info.json").exists() or (path / "dataset_dict.json").exists()):
        ds = datasets.load_from_disk(str(path))
        if isinstance(ds, datasets.DatasetDict):
            if split not in ds:
                raise ValueError(f"{name}: splits are {list(ds)}, not {split!r} (give --split)")
            ds = ds[split]
    else:
        try:
            ds = datasets.load_dataset(name, config, split=split, streaming=True)
        except (ConnectionError, FileNotFoundError) as err:
            offline = os.environ.get("HF_HUB_OFFLINE", "0") not in ("0", "false", "False", "")
            hint = (" yunshan runs offline by default: set HF_HUB_OFFLINE=0 HF_DATASETS_OFFLINE=0 to download"
                    if offline else "")
            raise FileNotFoundError(f"--dataset {name}: cannot load it ({err}).{hint}") from None
    for i, record in enumerate(ds):
        yield f"{name}[{split}] #{i}", record


# ------------------------------------------------------------------------------------------ generic converter


@dataclass
class TextArgs:
    """How the generic converter builds one output document from one record."""

    text_field: str = "text"
    template: str | None = None
    where: dict[str, list[str]] = field(default_factory=dict)
    keep_fields: list[str] = field(default_factory=list)
    add_fields: dict[str, str] = field(default_factory=dict)
    mask_pii: bool = False
    min_chars: int = 1
    dedup: bool = False


def parse_template(template: str) -> list[tuple[str, str | None]]:
    """(literal text, field name or None) pieces of a template; `\\n` and `\\t` typed in a shell become a newline
    and a tab, `{{` and `}}` are literal braces, `{a.b}` names a nested field."""
    template = template.replace("\\n", "\n").replace("\\t", "\t")
    try:
        pieces = [(literal, name) for literal, name, _, _ in string.Formatter().parse(template)]
    except ValueError as err:
        raise ValueError(f"--template {template!r}: {err}") from None
    for _, name in pieces:
        if name is not None and not name.strip():
            raise ValueError(f"--template {template!r}: empty {{}}; name a field, e.g. {{title}}")
    return pieces


def _get(record: dict, dotted: str):
    """A field, or a nested field written a.b (FinCorpus keeps its source under meta.source)."""
    value: Any = record
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            raise KeyError(dotted)
        value = value[part]
    return value


def _matches(record: dict, where: dict[str, list[str]]) -> bool:
    for key, wanted in where.items():
        try:
            value = _get(record, key)
        except KeyError:
            return False
        if str(value) not in wanted:
            return False
    return True


def build_text(record: dict, args: TextArgs) -> str:
    """The document text of one record (raises Bad for a missing or non-string field)."""
    if args.template is None:
        try:
            value = _get(record, args.text_field)
        except KeyError:
            raise Bad("missing_field", args.text_field,
                      f"record has fields {', '.join(sorted(map(str, record)))}") from None
        if not isinstance(value, str):
            raise Bad("non_string_field", args.text_field, f"expected a string, got {type(value).__name__}")
        return value
    parts = []
    for literal, name in parse_template(args.template):
        parts.append(literal)
        if name is None:
            continue
        try:
            value = _get(record, name)
        except KeyError:
            raise Bad("missing_field", name, f"the template needs it; record has fields "
                                             f"{', '.join(sorted(map(str, record)))}") from None
        # A null field (a news item without a title) renders empty rather than as the word "None".
        parts.append("" if value is None else str(value))
    return "".join(parts).strip()


def mask_pii(text: str, counts: dict[str, int]) -> str:
    """Replace resident ID numbers, mobile numbers and e-mail addresses by tags; count replacements per kind."""
    has_numbers = _ELEVEN_DIGITS in text.encode("utf-8").translate(_DIGITS_TO_ZERO)
    for kind, pattern, tag in PII_PATTERNS:
        if (kind == "email" and "@" not in text) or (kind != "email" and not has_numbers):
            continue
        text, n = pattern.subn(tag, text)
        if n:
            counts[kind] = counts.get(kind, 0) + n
    return text


class JsonlWriter:
    """Writes JSON Lines to .jsonl / .jsonl.gz / .jsonl.zst through a temporary file renamed at the end, so a failed
    run never leaves a half-written file that looks complete."""

    def __init__(self, out: str):
        lower = out.lower()
        if not (lower.endswith(".jsonl") or lower.endswith(".jsonl.gz") or lower.endswith(".jsonl.zst")):
            raise ValueError(f"--out {out}: the output must end in .jsonl, .jsonl.gz or .jsonl.zst")
        self.out = Path(out)
        self.out.parent.mkdir(parents=True, exist_ok=True)
        self.tmp = self.out.with_name(self.out.name + ".part")
        self._raw = open(self.tmp, "wb")
        if lower.endswith(".gz"):
            self._f = gzip.GzipFile(fileobj=self._raw, mode="wb", mtime=0)
        elif lower.endswith(".zst"):
            import zstandard

            self._f = zstandard.ZstdCompressor(level=10).stream_writer(self._raw, closefd=False)
        else:
            self._f = self._raw

    def write(self, obj: dict) -> None:
        self._f.write((json.dumps(obj, ensure_ascii=False) + "\n").encode("utf-8"))

    def close(self, keep: bool = True) -> None:
        if self._f is not self._raw:
            self._f.close()
        self._raw.close()
        if keep:
            os.replace(self.tmp, self.out)
        else:
            self.tmp.unlink(missing_ok=True)


def raise_or_count(bad: Bad, location: str, report: ConvertReport, on_bad_record: str) -> None:
    if on_bad_record == "fail":
        where = f"{location}: field {bad.field_name!r}" if bad.field_name else location
        raise BadRecordError(f"{where}: {bad.reason} ({bad.detail}). Fix the input, choose the field with "
                             "--text-field/--template, or pass --on-bad-record skip to count and skip such records.")
    report.drop(bad.reason, location)


def convert_text(records: Iterator[tuple[str, Any]], out: str, args: TextArgs, report: ConvertReport,
                 on_bad_record: str = "fail", max_records: int | None = None,
                 max_chars: int | None = None) -> ConvertReport:
    """Stream records into yunshan JSONL; fills and returns `report`."""
    writer = JsonlWriter(out)
    seen: set[bytes] = set()
    ok = False
    try:
        for location, record in records:
            report.records_read += 1
            if isinstance(record, Bad):
                raise_or_count(record, location, report, on_bad_record)
                continue
            if not isinstance(record, dict):
                raise_or_count(Bad("malformed_json", None, f"expected an object, got {type(record).__name__}"),
                               location, report, on_bad_record)
                continue
            if args.where and not _matches(record, args.where):
                report.drop("where", location)
                continue
            try:
                text = build_text(record, args)
                kept = {}
                for name in args.keep_fields:
                    try:
                        kept[name] = _get(record, name)
                    except KeyError:
                        raise Bad("missing_field", name, "listed in --keep-fields") from None
            except Bad as bad:
                raise_or_count(bad, location, report, on_bad_record)
                continue
            if args.mask_pii:
                text = mask_pii(text, report.pii_masked)
            if not text.strip():
                report.drop("empty_text", location)
                continue
            if len(text) < args.min_chars:
                report.drop("too_short", location)
                continue
            if args.dedup:
                digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()
                if digest in seen:
                    report.drop("duplicate", location)
                    continue
                seen.add(digest)
            if max_chars is not None and report.chars_written + len(text) > max_chars:
                report.stopped_by = f"--max-chars {max_chars:,} reached at {location}"
                break
            out_record = {"text": text, **kept, **args.add_fields}
            writer.write(out_record)
            report.records_written += 1
            report.chars_written += len(text)
            if max_records is not None and report.records_written >= max_records:
                report.stopped_by = f"--max-records {max_records:,} reached at {location}"
                break
        ok = True
    finally:
        writer.close(keep=ok)
    return report


# ------------------------------------------------------------------------------------------------------ CLI


def _pairs(items: list[str], option: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for item in items or []:
        if "=" not in item:
            raise ValueError(f"{option} {item!r}: expected FIELD=VALUE")
        key, value = item.split("=", 1)
        out.setdefault(key.strip(), []).append(value)
    return out


def _number(text: str | None) -> int | None:
    if text is None:
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"expected a number (5e8 is fine), got {text!r}") from None
    if value <= 0:
        raise ValueError(f"expected a positive number, got {text!r}")
    return int(value)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="data_command", metavar="SUBCOMMAND")
    p = sub.add_parser("convert", help="convert a released dataset into yunshan JSONL, messages SFT data or eval "
                                       "layouts", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("inputs", nargs="*", help="files, folders or globs (.jsonl .json .parquet .csv .txt, + .gz .zst "
                                             ".xz .bz2, or .zip archives of them)")
    p.add_argument("--out", required=True, help="output .jsonl/.jsonl.gz/.jsonl.zst (a folder for jecqa-holdout "
                                                "and mc-parquet)")
    p.add_argument("--from", dest="converter", default="text", choices=("text",) + NAMED,
                   help="text (default: the generic converter) or a named converter for a release's structure")
    p.add_argument("--dataset", help="read a `datasets` dataset instead of files: hub name or save_to_disk folder")
    p.add_argument("--config", help="--dataset config name")
    p.add_argument("--split", default="train", help="--dataset split (default train)")
    p.add_argument("--format", default="auto", help=f"input format: auto (from the extension) or one of "
                                                    f"{', '.join(INPUT_FORMATS)}")
    p.add_argument("--txt-document", default="paragraph", help="txt inputs: one document per line, paragraph "
                                                               "(blank-line separated, default) or file")
    p.add_argument("--text-field", default="text", help="record field holding the text (a.b for nested fields)")
    p.add_argument("--template", help='build the text from several fields, e.g. "{title}\\n{content}"')
    p.add_argument("--where", action="append", metavar="FIELD=VALUE",
                   help="keep records whose field equals the value (repeat; the same field twice means either)")
    p.add_argument("--keep-fields", default="", help="comma-separated fields copied into each output record")
    p.add_argument("--add", action="append", metavar="FIELD=VALUE",
                   help="constant field added to every output record, e.g. lang=zh (repeat)")
    p.add_argument("--mask-pii", action="store_true",
                   help="replace resident ID numbers, mobile numbers and e-mail addresses by tags")
    p.add_argument("--min-chars", type=int, default=1, help="drop documents shorter than this (default 1)")
    p.add_argument("--dedup", action="store_true", help="drop exact duplicate documents")
    p.add_argument("--max-records", help="stop after writing this many records")
    p.add_argument("--max-chars", help="stop before the characters written would exceed this (e.g. 5e8)")
    p.add_argument("--on-bad-record", default="fail", choices=("fail", "skip"),
                   help="fail (stop with file, line and field; default) or skip (count by reason)")
    p.add_argument("--report", help="also write the report as JSON to this file")
    named = p.add_argument_group("named converters")
    named.add_argument("--context", default="drop", choices=("drop", "prepend"),
                       help="lawyer-llama, lawgpt-zh: drop the supporting law articles or prepend them to the "
                            "question")
    named.add_argument("--system", default="drop", choices=("drop", "keep"),
                       help="chatlaw: drop or keep its meta_instruction as the system turn")
    named.add_argument("--heldout-fraction", type=float, default=0.1,
                       help="jecqa-holdout: share of questions held out (by a hash of the id)")
    named.add_argument("--layout", choices=("ceval", "cmmlu"), help="mc-parquet: the CSV layout to write")
    named.add_argument("--subject-mapping", help="mc-parquet ceval: subject_mapping.json to check and copy")


def run(args: argparse.Namespace) -> int:
    if getattr(args, "data_command", None) != "convert":
        raise ValueError("usage: yunshan data convert INPUTS --out OUT [options]; see yunshan data convert --help")
    if args.dataset and args.inputs:
        raise ValueError("give input files or --dataset, not both")
    if not args.dataset and not args.inputs:
        raise ValueError("no input: give files, folders or globs, or --dataset NAME")
    max_records, max_chars = _number(args.max_records), _number(args.max_chars)
    inputs = [args.dataset] if args.dataset else resolve_inputs(args.inputs)
    if args.dataset:
        records = iter_dataset_records(args.dataset, args.config, args.split)
    else:
        records = (r for path in inputs for r in iter_file_records(path, args.format, args.txt_document))
    report = ConvertReport(args.converter, inputs, args.out)
    if args.converter == "text":
        text_args = TextArgs(
            text_field=args.text_field, template=args.template, where=_pairs(args.where, "--where"),
            keep_fields=[f for f in args.keep_fields.split(",") if f],
            add_fields={k: v[-1] for k, v in _pairs(args.add, "--add").items()},
            mask_pii=args.mask_pii, min_chars=args.min_chars, dedup=args.dedup)
        convert_text(records, args.out, text_args, report, args.on_bad_record, max_records, max_chars)
    elif args.converter in ("lawyer-llama", "chatlaw", "lawgpt-zh"):
        from .instruction_sets import convert_instructions

        convert_instructions(args.converter, records, args.out, report, args.on_bad_record, max_records,
                             context=args.context, system=args.system)
    elif args.converter == "jecqa-holdout":
        from .exam_layouts import split_jecqa

        if args.dataset:
            raise ValueError("jecqa-holdout reads the released JEC-QA files, not --dataset")
        split_jecqa(inputs, args.out, args.heldout_fraction, report, args.on_bad_record)
    else:
        from .exam_layouts import parquet_to_csv_layout

        if args.dataset or len(args.inputs) != 1 or not os.path.isdir(args.inputs[0]):
            raise ValueError("mc-parquet reads one folder: the downloaded Hub parquet files of the benchmark")
        if args.layout is None:
            raise ValueError("mc-parquet needs --layout ceval or --layout cmmlu")
        parquet_to_csv_layout(args.inputs[0], args.out, args.layout, report, args.subject_mapping)
    print(report.render())
    if args.report:
        Path(args.report).write_text(json.dumps(report.to_dict(), ensure_ascii=False, indent=1) + "\n",
                                     encoding="utf-8")
    if report.records_written == 0:
        print("warning: nothing was written; check --text-field/--template/--where against the report",
              file=sys.stderr)
    return 0
