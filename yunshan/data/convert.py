"""Converting released datasets into what yunshan reads: the library behind `yunshan data convert`.

    from yunshan.data.convert import ConvertReport, TextArgs, convert_text, read_inputs
    report = convert_text(read_inputs(["news.csv"]), "news.jsonl", TextArgs(template="{title}\\n{content}"),
                          ConvertReport("text", ["news.csv"], "news.jsonl"))

The generic converter keeps records that pass `where`, builds the text from one field or a template joining fields,
optionally masks personal identifiers, drops empty, short and duplicate documents, stops at a character cap, and
writes yunshan JSONL (`{"text": ...}` plus any kept or added fields). Records come from the data layer's one reader
(yunshan.data.records), one at a time: memory stays flat, except for .json lists (parsed whole) and `dedup` (an
8-byte digest per kept document). A record that cannot be converted is a BadRecord: with `on_bad_record="fail"` the
run stops naming file, line and field, with "skip" it is counted by reason; filter decisions (where, empty, too
short, duplicate) are always counted drops. The named converters for releases with their own structure live in
instruction_sets.py and exam_layouts.py; the command is yunshan/cli/data.py. Nothing here prints.
"""

from __future__ import annotations

import hashlib
import re
import string
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from .records import BadRecord, fail_or_count, load_dataset, read_dataset_records, read_records
from .writers import JsonlWriter

# Filter decisions of the generic converter (always counted, never errors); unusable records count under
# yunshan.data.records.BAD_REASONS.
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

    def bad(self, bad: BadRecord, on_bad_record: str) -> None:
        """A record that cannot be converted: stop with file, line and field (`fail`), or count it (`skip`)."""
        fail_or_count(bad, on_bad_record, self.dropped, fix="Fix the input, choose the field with "
                      "--text-field/--template, or pass --on-bad-record skip to count and skip such records.")
        self.first_location.setdefault(bad.reason, bad.location)

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


def read_inputs(paths: list[str], fmt: str = "auto", txt_document: str = "paragraph") -> Iterator[tuple[str, Any]]:
    """(location, record or BadRecord) of every record of the files, in order."""
    for path in paths:
        for location, record, _ in read_records(path, fmt, txt_document=txt_document):
            yield location, record


def read_dataset(name: str, config: str | None, split: str) -> Iterator[tuple[str, Any]]:
    """(location, record) of a `datasets` dataset: a save_to_disk folder, or a load_dataset name (from the Hub)."""
    ds = load_dataset(name, config, split, f"--dataset {name}")
    for location, record, _ in read_dataset_records(ds, name, split):
        yield location, record


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
    """The document text of one record (raises BadRecord for a missing or non-string field)."""
    if args.template is None:
        try:
            value = _get(record, args.text_field)
        except KeyError:
            raise BadRecord("missing_field", args.text_field,
                      f"record has fields {', '.join(sorted(map(str, record)))}") from None
        if not isinstance(value, str):
            raise BadRecord("non_string_field", args.text_field, f"expected a string, got {type(value).__name__}")
        return value
    parts = []
    for literal, name in parse_template(args.template):
        parts.append(literal)
        if name is None:
            continue
        try:
            value = _get(record, name)
        except KeyError:
            raise BadRecord("missing_field", name, f"the template needs it; record has fields "
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


def write_converted(records: Iterator[tuple[str, Any]], out: str, report: ConvertReport, convert,
                    on_bad_record: str = "fail", max_records: int | None = None,
                    max_chars: int | None = None) -> ConvertReport:
    """The loop every converter shares: read each record, `convert(location, record)` it into (the object to
    write, its characters) or None for a drop it counted itself (a BadRecord it raises goes to `on_bad_record`),
    write JSONL, and stop before a cap is passed. The output appears only when the whole run succeeded."""
    writer = JsonlWriter(out)
    ok = False
    try:
        for location, record in records:
            report.records_read += 1
            try:
                if isinstance(record, BadRecord):
                    raise record
                converted = convert(location, record)
            except BadRecord as bad:
                report.bad(bad.at(bad.location or location), on_bad_record)
                continue
            if converted is None:
                continue
            obj, chars = converted
            if max_chars is not None and report.chars_written + chars > max_chars:
                report.stopped_by = f"--max-chars {max_chars:,} reached at {location}"
                break
            writer.write(obj)
            report.records_written += 1
            report.chars_written += chars
            if max_records is not None and report.records_written >= max_records:
                report.stopped_by = f"--max-records {max_records:,} reached at {location}"
                break
        ok = True
    finally:
        writer.close(keep=ok)
    return report


def convert_text(records: Iterator[tuple[str, Any]], out: str, args: TextArgs, report: ConvertReport,
                 on_bad_record: str = "fail", max_records: int | None = None,
                 max_chars: int | None = None) -> ConvertReport:
    """Stream records into yunshan JSONL; fills and returns `report`."""
    seen: set[bytes] = set()

    def convert(location: str, record):
        if not isinstance(record, dict):
            raise BadRecord("malformed_json", None, f"expected an object, got {type(record).__name__}")
        if args.where and not _matches(record, args.where):
            report.drop("where", location)
            return None
        text = build_text(record, args)
        kept = {}
        for name in args.keep_fields:
            try:
                kept[name] = _get(record, name)
            except KeyError:
                raise BadRecord("missing_field", name, "listed in --keep-fields") from None
        if args.mask_pii:
            text = mask_pii(text, report.pii_masked)
        if not text.strip():
            report.drop("empty_text", location)
            return None
        if len(text) < args.min_chars:
            report.drop("too_short", location)
            return None
        if args.dedup:
            digest = hashlib.blake2b(text.encode("utf-8"), digest_size=8).digest()
            if digest in seen:
                report.drop("duplicate", location)
                return None
            seen.add(digest)
        return {"text": text, **kept, **args.add_fields}, len(text)

    return write_converted(records, out, report, convert, on_bad_record, max_records, max_chars)
