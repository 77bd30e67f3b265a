"""The first block of a preparation: yunshan's record reader inside a datatrove reader, every bad record counted by
reason or stopping the run in one line (`yunshan data prepare`).

    RecordReader(InputArgs(name="laws", path="laws.jsonl.zst"), on_bad_record="skip", max_record_mb=8)

It is a datatrove BaseDiskReader (documents, ids, sharding across tasks, `documents` and `doc_len` stats), whose
files are read by yunshan's one record reader (yunshan/data/records.py): .jsonl, .json, .csv, .parquet, .txt, each
plain or .gz/.zst/.xz/.bz2, and .zip archives. Why not datatrove's JsonlReader, CsvReader and ParquetReader: in
datatrove 0.10.1 a line that is not JSON is logged and skipped uncounted, a record without text is skipped with one
warning for the whole run, and an invalid UTF-8 byte ends the file with a warning, its lines lost, those before the
byte too when they share its decoding block (tests/prepare/test_prepare.py: a five-line file yields nothing). Here each of those is a `BadRecord` with file, line
and field: under `on_bad_record: fail` the run stops with that one line, under `skip` it is counted as
`bad_<reason>` in the reader's stats with an example, as everywhere in yunshan. An empty file is `bad_empty_file`.

Memory stays bounded: a JSON line over `max_record_mb` is read past in 1 MB chunks and never held
(`oversized_record`); a record of another format over the limit is dropped as oversized once read.

Sharding: with at least as many files as tasks, task r reads files r, r + tasks, ...; with fewer (one large corpus
file), every task reads every file and keeps the records r, r + tasks, ... of each, so a single file still keeps
every core busy (each task parses the whole file, which costs far less than the steps after it).

WARC files (`format: warc`) are read by datatrove's own WarcReader (warcio), and HTML (`html: true` or WARC) is
extracted by datatrove's Trafilatura block; the pipeline adds both (yunshan/prepare/pipeline.py).
"""

from __future__ import annotations

from datatrove.pipeline.readers.base import BaseDiskReader

from yunshan.data.records import BadRecord, BadRecordError, read_records

from .examples import Examples


def _field(record: dict, dotted: str):
    value = record
    for part in dotted.split("."):
        if not isinstance(value, dict) or part not in value:
            raise KeyError(dotted)
        value = value[part]
    return value


class RecordReader(BaseDiskReader):
    """Reads one input source of a preparation (module docstring)."""

    name = "📖 yunshan records"

    def __init__(self, name: str, files: list[str], fmt: str = "auto", text_field: str = "text",
                 txt_document: str = "paragraph", on_bad_record: str = "fail", max_record_mb: float = 8,
                 keep_fields: tuple[str, ...] = (), examples: Examples | None = None, progress: str | None = None):
        super().__init__(data_folder="/", text_key=text_field, add_file_path=False)
        self.source, self.files, self.fmt = name, list(files), fmt
        self.text_field, self.txt_document = text_field, txt_document
        self.on_bad_record = on_bad_record
        self.max_bytes = int(max_record_mb * (1 << 20))
        self.keep_fields = tuple(keep_fields)
        self.examples = examples
        self.progress = progress  # a folder: every task writes how many documents it has read (the progress bar)

    def _bad(self, bad: BadRecord, rank: int) -> None:
        if self.on_bad_record == "fail":
            raise BadRecordError(f"prepare: source {self.source!r}: {bad.describe()}. Fix the input, or set "
                                 "prepare.on_bad_record: skip to count and skip such records.")
        self.stat_update(f"bad_{bad.reason}")
        if self.examples is not None:
            from datatrove.data import Document

            self.examples.add(f"bad_{bad.reason}", Document(text=bad.describe(), id=bad.location or "?"), rank=rank)

    def read_file(self, filepath: str):  # datatrove's interface; run() below reads with the sharding rule
        for doc, _ in self._documents(filepath, 0, 1, 0):
            yield doc

    def _documents(self, path: str, rank: int, step: int, first: int):
        """(document or None for a bad record, index) of the records of `path` whose index i has i % step == first."""
        index = -1
        for index, (location, record, _) in enumerate(read_records(
                path, self.fmt, txt_document=self.txt_document, text_field=self.text_field,
                max_line_bytes=self.max_bytes)):
            if index % step != first:
                continue
            if not isinstance(record, BadRecord):
                record = self._document(location, record)
            if isinstance(record, BadRecord):
                self._bad(record.at(record.location or location), rank)
                yield None, index
            else:
                yield record, index
        if index == -1 and (step == 1 or first == 0):  # counted once, by the task that reads the file or by task 0
            if self.on_bad_record == "fail":
                raise BadRecordError(f"prepare: source {self.source!r}: {path} is empty (no record). Remove it, or "
                                     "set prepare.on_bad_record: skip to count and skip empty files.")
            self.stat_update("bad_empty_file")

    def _document(self, location: str, record):
        from datatrove.data import Document

        if not isinstance(record, dict):
            return BadRecord("malformed_json", None, f"expected an object, got {type(record).__name__}", location)
        try:
            text = _field(record, self.text_field)
        except KeyError:
            return BadRecord("missing_field", self.text_field,
                             f"record has fields: {', '.join(sorted(map(str, record))[:10])}", location)
        if not isinstance(text, str):
            return BadRecord("non_string_field", self.text_field, f"got {type(text).__name__}", location)
        if not text.strip():
            return BadRecord("empty_text", self.text_field, "text is empty or whitespace", location)
        if len(text) * 4 > self.max_bytes and len(text.encode("utf-8")) > self.max_bytes:
            return BadRecord("oversized_record", self.text_field, f"{len(text):,} characters", location)
        metadata = {"source": self.source}
        for name in self.keep_fields:
            try:
                metadata[name] = _field(record, name)
            except KeyError:
                pass
        return Document(text=text, id=location, metadata=metadata)

    def run(self, data=None, rank: int = 0, world_size: int = 1):
        if data:
            yield from data
        if len(self.files) >= world_size:
            shard, step, first = self.files[rank::world_size], 1, 0
        else:
            shard, step, first = self.files, world_size, rank
        from .progress import Progress

        counter = Progress(self.progress, rank)
        try:
            for path in shard:
                self.stat_update("input_files")
                for doc, _ in self._documents(path, rank, step, first):
                    if doc is None:
                        continue
                    self.stat_update("chars_in", value=len(doc.text))
                    self.update_doc_stats(doc)
                    counter.add(len(doc.text))
                    yield doc
        finally:
            counter.flush()
            if self.examples is not None:
                self.examples.close(rank)
