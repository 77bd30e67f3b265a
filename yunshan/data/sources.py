"""Corpus sources of continual pretraining: local files or `datasets` datasets as a stream of validated texts.

    yunshan cpt --config RECIPE.yaml            # data.sources: [{name, path or dataset, weight, ...}]

A source is a list of files (jsonl / json / parquet / csv / txt, optionally .gz, .zst, .xz or .bz2; given as files,
folders or globs) or a `datasets` dataset (a `load_dataset` name or a `save_to_disk` folder). Files are read by the
data layer's one reader (yunshan.data.records) from a resumable *position*, so a training run can checkpoint where
it is in every source and resume there without re-reading what it already consumed. Each record's text field is
validated here; an unusable record is a `BadRecord` that the mixer fails on (file, line and field) or counts by
reason, as `data.on_bad_record` says.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from yunshan.arguments.field_rules import check_fields

from .files import resolve_paths
from . import records
from .records import FORMATS, TXT_DOCUMENTS, BadRecord, format_of, load_dataset, read_records


@dataclass
class SourceArgs:
    """One corpus source of a mixture."""

    name: str = field(metadata={"help": "name used in reports and logs (e.g. finance, legal, general)"})
    path: list[str] | str | None = field(
        default=None,
        metadata={"path": True,
            "help": "file, folder or glob (or a list of them): .jsonl .json .parquet .csv .txt, + .gz/.zst/.xz/.bz2"},
    )
    dataset: str | None = field(
        default=None, metadata={"path": True, "help": "a `datasets` dataset: load_dataset name or save_to_disk folder"}
    )
    dataset_config: str | None = field(default=None, metadata={"help": "load_dataset config name"})
    split: str = field(default="train", metadata={"help": "dataset split"})
    format: str = field(default="auto", metadata={"help": f"auto (from the extension) or one of {FORMATS}"})
    text_field: str = field(default="text", metadata={"help": "record field holding the text"})
    filter: dict[str, Any] | None = field(
        default=None,
        metadata={"help": "keep records whose fields equal these values (a list means any of them), e.g. {lang: zh}"},
    )
    weight: float = field(default=1.0, metadata={"range": "> 0",
        "help": "share of training tokens (normalised over sources)"})
    on_exhausted: str = field(
        default="repeat", metadata={"help": "repeat (reshuffle and start a new epoch) or stop (end the run)"}
    )
    shuffle: bool = field(default=True, metadata={"help": "shuffle file order and documents within blocks"})
    txt_document: str = field(
        default="paragraph", metadata={"help": "txt files: one document per line, paragraph (blank line) or file"}
    )
    card: str | None = field(default=None, metadata={"help": "data card id (data_cards/<card>.md) describing it"})

    def __post_init__(self):
        check_fields(self)
        if (self.path is None) == (self.dataset is None):
            raise ValueError(f"source {self.name!r}: give exactly one of `path` or `dataset`")
        if self.format != "auto" and self.format not in FORMATS:
            raise ValueError(f"source {self.name!r}: format {self.format!r} is not one of auto, {', '.join(FORMATS)}")
        if self.on_exhausted not in ("repeat", "stop"):
            raise ValueError(f"source {self.name!r}: on_exhausted must be repeat or stop, got {self.on_exhausted!r}")
        if self.txt_document not in TXT_DOCUMENTS:
            raise ValueError(f"source {self.name!r}: txt_document must be one of {', '.join(TXT_DOCUMENTS)}")


@dataclass
class TextRecord:
    """One usable record: its text, where it is, and the whole record (for `filter`)."""

    text: str
    location: str  # "file:line" or "dataset[split] #index", for messages
    meta: dict | None = None


def resolve_files(args: SourceArgs, what: str | None = None, archives: bool = False) -> list[str]:
    """The sorted list of files a source names (folders are searched recursively for known extensions).

    `what` names the source in errors (default "source NAME"). `archives`: .zip archives count too (for the tools
    that read a corpus once from the start: a training run must resume inside a file, which an archive cannot)."""
    what = what or f"source {args.name!r}"

    def archive(path: str) -> bool:
        return archives and path.lower().endswith(".zip")

    def known(path: str) -> bool:
        try:
            format_of(path)
            return True
        except ValueError:
            return archive(path)

    files = resolve_paths(args.path, what, keep=known)
    for f in files:
        if not archive(f):
            format_of(f, args.format)  # fail early on unknown extensions
        if os.path.getsize(f) == 0:
            raise ValueError(f"{what}: {f} is empty")
    return files


class RecordValidator:
    """Turns one raw record into its text, or into a BadRecord saying why it is unusable."""

    def __init__(self, args: SourceArgs):
        self.args = args

    def check(self, obj: Any, location: str) -> TextRecord | BadRecord:
        if isinstance(obj, BadRecord):
            return obj
        field_name = self.args.text_field
        if not isinstance(obj, dict):
            return BadRecord("malformed_json", None, f"expected an object, got {type(obj).__name__}", location)
        if field_name not in obj:
            keys = ", ".join(sorted(map(str, obj))[:10])
            return BadRecord("missing_field", field_name, f"record has fields: {keys}", location)
        text = obj[field_name]
        if not isinstance(text, str):
            return BadRecord("non_string_field", field_name, f"got {type(text).__name__}", location)
        if not text.strip():
            return BadRecord("empty_text", field_name, "text is empty or whitespace", location)
        return TextRecord(text, location, meta=obj)

    def keep(self, record: TextRecord) -> bool:
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


def source_texts(args: SourceArgs, on_bad_record: str, counts: dict, *, context: str = "", fix: str = "",
                 key: str = "bad:{}", files: list[str] | None = None) -> Iterator[TextRecord]:
    """The usable records of a source in order (its files as named, not shuffled), read and validated as `yunshan
    cpt` reads them, for the tools that read a whole corpus once (the tokenizer extension, decontamination).

    A bad record stops the reading under `on_bad_record` "fail" (BadRecordError: `context`, file, line, field, then
    `fix`) or is counted in `counts` under `key` ("bad:<reason>"); records the source's `filter` leaves out are not
    yielded. `files`: read only these (files of the source, .zip archives included; default resolve_files')."""
    validator = RecordValidator(args)
    if args.dataset is not None:
        found = (r for r, _ in read_dataset_records(load_hf_dataset(args), args, {}))
    else:
        found = (r for path in (resolve_files(args, archives=True) if files is None else files)
                 for r, _ in read_file_records(path, args, {}))
    for record in found:
        if isinstance(record, BadRecord):
            records.fail_or_count(record, on_bad_record, counts, context=context, fix=fix, key=key)
        elif validator.keep(record):
            yield record


def read_file_records(path: str, args: SourceArgs, position: dict) -> Iterator[tuple[TextRecord | BadRecord, dict]]:
    """Records of one file from `position` (byte offset + line, or row), each with the position just after it."""
    validator = RecordValidator(args)
    for location, obj, after in read_records(path, args.format, txt_document=args.txt_document,
                                             text_field=args.text_field, position=position):
        yield validator.check(obj, location), after


def load_hf_dataset(args: SourceArgs):
    """A source's `datasets` dataset: a save_to_disk folder (random access) or a load_dataset name (streaming)."""
    return load_dataset(args.dataset, args.dataset_config, args.split, f"source {args.name!r}: dataset {args.dataset}")


def read_dataset_records(ds, args: SourceArgs, position: dict) -> Iterator[tuple[TextRecord | BadRecord, dict]]:
    """Records of a source's `datasets` dataset from `position`, validated, each with the position after it."""
    validator = RecordValidator(args)
    for location, obj, after in records.read_dataset_records(ds, args.dataset, args.split, position):
        yield validator.check(obj, location), after
