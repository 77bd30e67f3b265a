"""The data layer's one reader: the `.txt` rule, one bad-record type, formats (the tokenizer tools read through it)."""

import gzip
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from yunshan.data.records import BAD_REASONS, BadRecord, BadRecordError, fail_or_count, read_records, split_documents
from yunshan.tokenizer.corpus import CorpusStats, read_corpus

# Pieces that exercise the rule's edges: CRLF, whitespace-only lines, ideographic spaces (text, not blank), tabs.
PIECES = st.lists(st.sampled_from(["资产", "a b", " ", "\t", "\u3000", "\n", "\n", "\r\n", "\n\n", "x\r"]),
                  max_size=30).map("".join)


@settings(max_examples=100, deadline=None)
@given(text=PIECES, mode=st.sampled_from(["paragraph", "line", "file"]))
def test_the_tokenizer_corpus_is_what_the_data_layer_reads(tmp_path_factory, text, mode):
    """The extension learns its merges on what continual pretraining trains on: the same documents, cut by the same
    `.txt` rule (the tokenizer has no reader of its own)."""
    path = tmp_path_factory.mktemp("txt") / "corpus.txt"
    path.write_bytes(text.encode("utf-8"))
    ours = [d for d in split_documents(text, mode) if d.strip()]
    if not text or not ours:
        return  # an empty file or one without a document is an error of its own (test_tokenizer_bad_input.py)
    assert list(read_corpus([path], txt_document=mode, on_bad_record="skip")) == ours


def test_the_tokenizer_corpus_and_cpt_sources_read_a_txt_file_alike(tmp_path):
    path = tmp_path / "corpus.txt"
    path.write_bytes("\ufeff第一段第一行。\r\n第一段第二行。\r\n\r\nSecond paragraph.\n  \n\u3000全角空格开头\n".encode())
    data_layer = [r["text"] for _, r, _ in read_records(str(path))]
    assert data_layer == ["第一段第一行。\r\n第一段第二行。", "Second paragraph.", "\u3000全角空格开头"]
    assert list(read_corpus([path])) == data_layer


def test_a_txt_paragraph_with_invalid_utf8_is_one_bad_record_in_both(tmp_path):
    path = tmp_path / "latin1.txt"
    path.write_bytes("好的。\n\nBilanz für 2023\n第二行\n\n再见。\n".replace("ü", "\x00").encode("utf-8")
                     .replace(b"\x00", "ü".encode("latin-1")))
    records = [r for _, r, _ in read_records(str(path))]
    assert [r["text"] if isinstance(r, dict) else r.reason for r in records] == ["好的。", "invalid_utf8", "再见。"]
    assert records[1].location == f"{path}:3" and "byte offset 19" in records[1].detail
    stats = CorpusStats()
    assert list(read_corpus([path], on_bad_record="skip", stats=stats)) == ["好的。", "再见。"]
    assert stats.files[0].bad == {"invalid_utf8": 1}
    with pytest.raises(BadRecordError, match=f"--corpus: {path}:3: invalid_utf8"):
        list(read_corpus([path]))


def test_json_files_lists_data_objects_and_json_lines(tmp_path):
    rows = [{"text": "一"}, {"text": "二"}]
    for name, content in [("list.json", json.dumps(rows)), ("data.json", json.dumps({"data": rows})),
                          ("lines.json", "\n".join(json.dumps(r) for r in rows) + "\n")]:
        path = tmp_path / name
        path.write_text(content)
        assert [r["text"] for _, r, _ in read_records(str(path))] == ["一", "二"], name
        # Resuming after the first record gives the second.
        first = next(iter(read_records(str(path))))
        assert [r["text"] for _, r, _ in read_records(str(path), position=first[2])] == ["二"], name
    broken = tmp_path / "broken.json"
    broken.write_text('[{"text": "a"},\n {"text": }]')
    ((where, bad, _),) = list(read_records(str(broken)))
    assert isinstance(bad, BadRecord) and bad.reason == "malformed_json" and where == f"{broken}:2"


def test_compressed_zip_and_csv_records(tmp_path):
    import zipfile

    gz = tmp_path / "a.jsonl.gz"
    gz.write_bytes(gzip.compress(b'{"text": "x"}\n\n{"text": "y"}\n'))
    assert [(w.rsplit(":", 1)[1], r["text"]) for w, r, _ in read_records(str(gz))] == [("1", "x"), ("3", "y")]
    archive = tmp_path / "b.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("2.txt", "第二\n")
        z.writestr("1.csv", "text,n\n第一,1\n")
    assert [(w, r["text"]) for w, r, _ in read_records(str(archive))] == [
        (f"{archive}!1.csv:2", "第一"), (f"{archive}!2.txt:1", "第二")]
    csv_path = tmp_path / "exam.csv"
    csv_path.write_text("question,A\nq,a\n")
    ((where, bad, _),) = list(read_records(str(csv_path), csv_columns=("question", "A", "B")))
    assert (where, bad.reason, bad.field_name) == (f"{csv_path}:1", "missing_field", "B")


def test_one_bad_record_type_and_one_policy():
    bad = BadRecord("missing_field", "text", "record has fields: body", "f.jsonl:3")
    counts = {}
    fail_or_count(bad, "skip", counts, key="bad:{}")
    assert counts == {"bad:missing_field": 1}
    with pytest.raises(BadRecordError, match=r"^source 'x': f.jsonl:3: field 'text': missing_field \(record has "
                                             r"fields: body\). Fix it\.$"):
        fail_or_count(bad, "fail", counts, context="source 'x': ", fix="Fix it.")
    with pytest.raises(ValueError, match="unknown bad-record reason 'typo'"):
        BadRecord("typo")
    assert {"invalid_utf8", "wrong_role_order", "bad_answer", "non_string_field"} <= set(BAD_REASONS)
