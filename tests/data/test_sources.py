"""Corpus sources: every format reads the same records; bad records fail with file/line/field or are counted."""

import gzip
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from yunshan.data.mixing import SourceStream
from yunshan.data.records import BadRecordError
from yunshan.data.sources import SourceArgs, read_file_records, resolve_files

TEXTS = ["第一篇 文档", "second document", "third, with \"quotes\"\nand a newline", "四"]


def words(texts):
    return [[len(w) for w in t.split()] + [0] for t in texts]


def all_texts(args: SourceArgs):
    stream = SourceStream(args, lambda ts: [[ord(c) for c in t] for t in ts], seed=0, on_bad_record="skip")
    stream.args.shuffle = False
    stream._load_block()
    return ["".join(map(chr, d)) for d in stream.block], stream


@pytest.fixture
def corpus_files(tmp_path):
    records = [{"text": t, "id": i} for i, t in enumerate(TEXTS)]
    jsonl = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()
    (tmp_path / "c.jsonl").write_bytes(jsonl)
    (tmp_path / "c.jsonl.gz").write_bytes(gzip.compress(jsonl))
    (tmp_path / "c.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(jsonl))
    (tmp_path / "c.json").write_text(json.dumps(records, ensure_ascii=False))
    pq.write_table(pa.Table.from_pylist(records), tmp_path / "c.parquet", row_group_size=2)
    import csv

    with open(tmp_path / "c.csv", "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=["id", "text"])
        w.writeheader()
        for r in records:
            w.writerow(r)
    return tmp_path


@pytest.mark.parametrize("name", ["c.jsonl", "c.jsonl.gz", "c.jsonl.zst", "c.json", "c.parquet", "c.csv"])
def test_every_format_reads_the_same_texts(corpus_files, name):
    texts, _ = all_texts(SourceArgs(name="x", path=str(corpus_files / name), shuffle=False))
    assert texts == TEXTS


def test_txt_documents_by_paragraph_line_and_file(tmp_path):
    (tmp_path / "a.txt").write_text("one\ntwo lines\n\n\nthree\n\nfour", encoding="utf-8")
    by_par, _ = all_texts(SourceArgs(name="x", path=str(tmp_path / "a.txt"), shuffle=False))
    by_line, _ = all_texts(SourceArgs(name="x", path=str(tmp_path / "a.txt"), shuffle=False, txt_document="line"))
    whole, _ = all_texts(SourceArgs(name="x", path=str(tmp_path / "a.txt"), shuffle=False, txt_document="file"))
    assert by_par == ["one\ntwo lines", "three", "four"]
    assert by_line == ["one", "two lines", "three", "four"]
    assert whole == ["one\ntwo lines\n\n\nthree\n\nfour"]


def test_folders_and_globs_resolve_sorted(corpus_files):
    assert resolve_files(SourceArgs(name="x", path=str(corpus_files / "c.jsonl*"))) == [
        str(corpus_files / n) for n in ("c.jsonl", "c.jsonl.gz", "c.jsonl.zst")]
    assert len(resolve_files(SourceArgs(name="x", path=str(corpus_files)))) == 6


def test_resume_positions_continue_exactly(corpus_files):
    for name in ("c.jsonl", "c.jsonl.gz", "c.jsonl.zst", "c.parquet", "c.csv", "c.json"):
        args = SourceArgs(name="x", path=str(corpus_files / name))
        path = str(corpus_files / name)
        items = list(read_file_records(path, args, {}))
        for k in range(len(items)):
            rest = [r.text for r, _ in read_file_records(path, args, items[k][1])]
            assert rest == [r.text for r, _ in items[k + 1 :]], (name, k)


BAD_LINES = [
    (b'{"text": "fine"}\n', None, None),
    (b'{"text": "unterminated\n', "malformed_json", None),
    (b'{"body": "no text field"}\n', "missing_field", "text"),
    (b'{"text": 42}\n', "non_string_field", "text"),
    (b'{"text": "   "}\n', "empty_text", "text"),
    (b'{"text": "bad \xff byte"}\n', "invalid_utf8", None),
    (b'{"text": "also fine"}\n', None, None),
]


def test_bad_records_fail_with_file_line_and_field(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"".join(line for line, _, _ in BAD_LINES))
    for skip_first in range(1, 6):  # each bad kind in turn is the first one met
        kept = [line for i, (line, _, _) in enumerate(BAD_LINES) if i == 0 or i >= skip_first]
        path.write_bytes(b"".join(kept))
        reason, field = BAD_LINES[skip_first][1], BAD_LINES[skip_first][2]
        stream = SourceStream(SourceArgs(name="legal", path=str(path)), words, seed=0)
        with pytest.raises(BadRecordError) as err:
            stream._load_block()
        message = str(err.value)
        assert f"{path}:2" in message and reason in message and "legal" in message
        if field:
            assert f"field {field!r}" in message
        assert "on_bad_record: skip" in message


def test_invalid_utf8_reports_the_byte_offset(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b'{"text": "ok"}\n{"text": "x\xffy"}\n')
    stream = SourceStream(SourceArgs(name="s", path=str(path)), words, seed=0)
    with pytest.raises(BadRecordError, match=r"bad.jsonl:2: invalid_utf8 \(invalid UTF-8 at byte offset 26"):
        stream._load_block()


def test_skip_policy_counts_every_reason(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(b"".join(line for line, _, _ in BAD_LINES) + b'{"text": "fine"}\n')
    texts, stream = all_texts(SourceArgs(name="s", path=str(path), shuffle=False))
    assert texts == ["fine", "also fine", "fine"]
    assert {k: v for k, v in stream.stats.items() if k.startswith("bad:")} == {
        "bad:malformed_json": 1, "bad:missing_field": 1, "bad:non_string_field": 1, "bad:empty_text": 1,
        "bad:invalid_utf8": 1}


def test_dedup_and_filter_are_counted(tmp_path):
    path = tmp_path / "d.jsonl"
    rows = [{"text": "same", "lang": "zh"}, {"text": "same", "lang": "zh"}, {"text": "other", "lang": "en"},
            {"text": "third", "lang": "zh"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    stream = SourceStream(SourceArgs(name="s", path=str(path), shuffle=False, filter={"lang": "zh"}), words,
                          seed=0, dedup=True)
    stream._load_block()
    assert len(stream.block) == 2
    assert stream.stats["duplicate"] == 1 and stream.stats["filtered"] == 1


def test_missing_empty_and_unknown_files_are_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        resolve_files(SourceArgs(name="s", path=str(tmp_path / "nope.jsonl")))
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(ValueError, match="empty.jsonl is empty"):
        resolve_files(SourceArgs(name="s", path=str(tmp_path / "empty.jsonl")))
    (tmp_path / "data.xml").write_text("<a/>")
    with pytest.raises(ValueError, match="cannot tell the format"):
        resolve_files(SourceArgs(name="s", path=str(tmp_path / "data.xml")))
    with pytest.raises(ValueError, match="exactly one of `path` or `dataset`"):
        SourceArgs(name="s")


def test_only_bad_records_is_a_clear_error(tmp_path):
    path = tmp_path / "allbad.jsonl"
    path.write_text('{"x": 1}\n{"x": 2}\n')
    stream = SourceStream(SourceArgs(name="s", path=str(path)), words, seed=0, on_bad_record="skip")
    with pytest.raises(ValueError, match="no usable documents.*bad:missing_field"):
        stream.next_piece(10)


def test_datasets_sources_saved_folder_and_resume(tmp_path):
    import datasets

    ds = datasets.Dataset.from_list([{"text": f"doc {i}"} for i in range(10)])
    ds.save_to_disk(tmp_path / "saved")
    texts, _ = all_texts(SourceArgs(name="hf", dataset=str(tmp_path / "saved"), shuffle=False))
    assert texts == [f"doc {i}" for i in range(10)]


def test_datasets_folder_streams_and_resumes_from_its_state(tmp_path):
    """A folder of data files given as `dataset` streams through datasets' IterableDataset; a restored state
    continues where it was."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "hf"
    folder.mkdir()
    for shard in range(2):
        rows = [{"text": f"shard {shard} doc {i}"} for i in range(6)]
        pq.write_table(pa.Table.from_pylist(rows), folder / f"train-{shard}.parquet")
    args = SourceArgs(name="hf", dataset=str(folder), shuffle=False)
    stream = SourceStream(args, lambda ts: [[ord(c) for c in t] for t in ts], seed=0, block_size=4)
    texts = []
    for _ in range(12):
        piece, _, _ = stream.next_piece(10**6)
        texts.append("".join(map(chr, piece)))
        if len(texts) == 5:
            state = json.loads(json.dumps(stream.state()))
    assert sorted(texts) == sorted(f"shard {s} doc {i}" for s in range(2) for i in range(6))
    resumed = SourceStream(args, lambda ts: [[ord(c) for c in t] for t in ts], seed=0, block_size=4)
    resumed.restore(state)
    rest = ["".join(map(chr, resumed.next_piece(10**6)[0])) for _ in range(7)]
    assert rest == texts[5:]


def test_file_hashes_are_reused_only_while_the_file_is_unchanged(tmp_path):
    import hashlib
    import os

    from yunshan.data import files

    path = tmp_path / "weights.bin"
    path.write_bytes(b"a" * 1000)
    assert files.sha256_file(path) == hashlib.sha256(b"a" * 1000).hexdigest()
    reads = []
    original = open

    def counting_open(*args, **kwargs):
        reads.append(args[0])
        return original(*args, **kwargs)

    import builtins

    builtins.open, saved = counting_open, builtins.open
    try:
        files.sha256_file(path)  # unchanged: served from memory
        assert not reads
        path.write_bytes(b"b" * 1000)  # same size, new content and modification time
        os.utime(path, ns=(1, 2))
        assert files.sha256_file(path) == hashlib.sha256(b"b" * 1000).hexdigest() and reads
    finally:
        builtins.open = saved


def _damaged(tmp_path):
    """Each compressed or binary format, cut short or with garbage after a good start: (path, texts readable)."""
    import bz2
    import io
    import lzma
    import zipfile

    lines = "".join(json.dumps({"text": f"document {i} " + "word " * 40}) + "\n" for i in range(400)).encode()
    whole = gzip.compress(lines)
    cases = {
        "cut.jsonl.gz": whole[: len(whole) // 2],  # EOFError: ended before the end-of-stream marker
        "garbage.jsonl.gz": b"this is not gzip at all\n" * 4,  # BadGzipFile
        "cut.jsonl.zst": zstandard.ZstdCompressor().compress(lines)[:400],
        "cut.jsonl.xz": lzma.compress(lines)[:300],
        "cut.txt.bz2": bz2.compress(lines)[:300],
        "flipped.jsonl.gz": whole[:200] + bytes(b ^ 0x5A for b in whole[200:260]) + whole[260:],
    }
    for name, data in cases.items():
        (tmp_path / name).write_bytes(data)
    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist([{"text": "x"}] * 10), buf)
    (tmp_path / "cut.parquet").write_bytes(buf.getvalue()[:-30])
    (tmp_path / "junk.zip").write_bytes(b"PK\x03\x04 not really a zip")
    with zipfile.ZipFile(tmp_path / "member.zip", "w") as archive:
        archive.writestr("a.jsonl", lines)
    data = bytearray((tmp_path / "member.zip").read_bytes())
    data[100:140] = b"\0" * 40  # inside the (stored) member: its CRC no longer matches
    (tmp_path / "member.zip").write_bytes(bytes(data))
    return sorted(tmp_path.iterdir())


def test_a_damaged_compressed_file_is_a_bad_record_that_fails_or_is_counted(tmp_path):
    from yunshan.data.records import BadRecord, read_records

    for path in _damaged(tmp_path):
        found = list(read_records(str(path)))  # never an exception
        assert found, path
        location, last, _ = found[-1]
        assert isinstance(last, BadRecord) and last.reason == "corrupt_file", (path, last)
        assert location.startswith(str(path)) and "\n" not in last.describe()
        if path.name != "member.zip":  # (its zeroed bytes are also a malformed line before the CRC check fails)
            assert not any(isinstance(r, BadRecord) for _, r, _ in found[:-1])
    # fail (the default): one line naming the file and the line where it broke off
    cut = tmp_path / "cut.jsonl.gz"
    stream = SourceStream(SourceArgs(name="legal", path=str(cut), shuffle=False), words, seed=0, block_size=10_000)
    with pytest.raises(BadRecordError, match=rf"source 'legal': {cut}:\d+: corrupt_file \(the gz stream breaks off"):
        stream._load_block()
    # skip: the documents before the break are trained on and the break is counted, not silently cut short
    texts, stream = all_texts(SourceArgs(name="legal", path=str(cut), shuffle=False))
    assert 0 < len(texts) < 400 and texts[0].startswith("document 0 ")
    assert stream.stats["bad:corrupt_file"] == 1


def test_a_zst_file_of_several_frames_is_read_to_its_end(tmp_path):
    """pzstd and `cat a.zst b.zst` write several frames: yunshan's own .zst reader goes on to the next one."""
    frames = [zstandard.ZstdCompressor().compress(
        "".join(json.dumps({"text": f"part {k} doc {i}"}) + "\n" for i in range(50)).encode()) for k in range(3)]
    (tmp_path / "multi.jsonl.zst").write_bytes(b"".join(frames))
    texts, stream = all_texts(SourceArgs(name="s", path=str(tmp_path / "multi.jsonl.zst"), shuffle=False))
    assert texts == [f"part {k} doc {i}" for k in range(3) for i in range(50)] and not stream.stats.get("bad:corrupt_file")


def test_a_file_named_like_a_glob_is_that_file_in_every_command(tmp_path, capsys):
    """Issue 27 item 14: a file literally named `corpus[2024].jsonl` was taken as the glob `corpus2.jsonl`,
    `corpus0.jsonl`, ... and matched nothing; an existing path wins over glob expansion in cpt's sources, `yunshan
    data convert` and `yunshan data decontaminate`, and a pattern that is no file still globs."""
    from yunshan.cli import main

    literal = tmp_path / "corpus[2024].jsonl"
    literal.write_text(json.dumps({"text": "二〇二四年的语料，一条记录。" * 3}, ensure_ascii=False) + "\n",
                       encoding="utf-8")
    (tmp_path / "corpus2.jsonl").write_text(json.dumps({"text": "另一个文件"}, ensure_ascii=False) + "\n",
                                            encoding="utf-8")
    assert resolve_files(SourceArgs(name="s", path=str(literal))) == [str(literal)]
    assert resolve_files(SourceArgs(name="s", path=str(tmp_path / "corpus[0-9].jsonl"))) == [
        str(tmp_path / "corpus2.jsonl")]
    out = tmp_path / "out.jsonl"
    assert main(["data", "convert", str(literal), "--out", str(out)]) == 0, capsys.readouterr().err
    assert json.loads(out.read_text(encoding="utf-8"))["text"].startswith("二〇二四年")
    heldout = tmp_path / "heldout.txt"
    heldout.write_text("完全不同的一段评测文字，与语料毫无关系，长度足够组成窗口。" * 2 + "\n", encoding="utf-8")
    assert main(["data", "decontaminate", str(literal), "--tasks", "bpc", "--heldout", f"h={heldout}",
                 "--out", str(tmp_path / "decont")]) == 0, capsys.readouterr().err
    report = json.loads((tmp_path / "decont" / "decontamination.json").read_text(encoding="utf-8"))
    assert report["records"] == 1


def test_a_block_holds_its_tokens_in_four_bytes_each_not_as_python_ints(tmp_path):
    """A block of 1,024 documents is tokenised a slice at a time and kept as int32 arrays (issue 47: the laws recipe's
    block of 1,024 laws, ~10 M tokens, held 1.5 GB as Python int lists; 0.2 GB now). Peak Python-heap allocation
    while loading a block of 1,024 documents x 2,000 tokens is held under twice the block's 8 MB of int32 (Python
    int lists of the whole block would need ~70 MB); the pieces read back are the tokenizer's ids, as lists."""
    import tracemalloc

    docs = [f"{i:04d}" + "x" * 1996 for i in range(1024)]
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in docs))
    tokenize = lambda ts: [[ord(c) + 1000 for c in t] for t in ts]  # ids above CPython's small-int cache
    stream = SourceStream(SourceArgs(name="c", path=str(path)), tokenize, seed=0, on_bad_record="fail")
    stream.args.shuffle = False
    tracemalloc.start()
    stream._load_block()
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    assert len(stream.block) == 1024 and sum(d.nbytes for d in stream.block) == 1024 * 2000 * 4
    assert peak < 2 * 1024 * 2000 * 4, peak
    piece, _, starts = stream.next_piece(6)
    assert piece == [ord(c) + 1000 for c in docs[0][:6]] and type(piece[0]) is int and starts
