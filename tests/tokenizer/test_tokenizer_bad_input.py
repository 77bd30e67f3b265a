"""Bad input gets a clear one-line message through `yunshan tokenizer extend`, and nothing is written to --out."""

from __future__ import annotations

import json

import pytest

from yunshan.cli import main


def run_extend(capsys, base, corpus_files, out, *extra):
    code = main(["tokenizer", "extend", "--base", str(base), "--corpus", *map(str, corpus_files),
                 "--new-tokens", "50", "--out", str(out), *map(str, extra)])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.fixture
def llama3(bases):
    return bases["byte_level_llama3"]


def test_missing_and_empty_corpus_files(capsys, llama3, tmp_path):
    out = tmp_path / "out"
    code, _, err = run_extend(capsys, llama3, [tmp_path / "nope.jsonl"], out)
    assert code == 1 and f"--corpus: {tmp_path / 'nope.jsonl'} does not exist" in err and "Traceback" not in err
    code, _, err = run_extend(capsys, llama3, [tmp_path / "*.jsonl.zst"], out)
    assert code == 1 and "*.jsonl.zst matches no corpus file" in err
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    code, _, err = run_extend(capsys, llama3, [empty], out)
    assert code == 1 and f"--corpus: {empty} is empty" in err
    blank = tmp_path / "blank.txt"
    blank.write_text("\n  \n", encoding="utf-8")
    code, _, err = run_extend(capsys, llama3, [blank], out)
    assert code == 1 and f"--corpus: {blank} holds no usable document" in err
    unknown = tmp_path / "notes.md"
    unknown.write_text("资产负债表\n", encoding="utf-8")
    code, _, err = run_extend(capsys, llama3, [unknown], out)
    assert code == 1 and "cannot tell the format from the extension" in err
    assert not out.exists()
    code, _, err = run_extend(capsys, llama3, [unknown], out, "--format", "txt", "--min-frequency", "1")
    assert code == 0, err


def test_the_word_lists_are_checked_against_new_tokens_before_the_corpus_is_read(capsys, llama3, tmp_path,
                                                                                monkeypatch):
    """A --new-tokens below what the word lists need stops before a single record is read (a newcomer waited 16 s
    for this error on a real corpus)."""
    import yunshan.tokenizer.extend as extend_module

    def never(*args, **kwargs):
        raise AssertionError("the corpus was read")

    monkeypatch.setattr(extend_module, "read_corpus", never)
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"text": "资产负债表"}\n', encoding="utf-8")
    code, _, err = run_extend(capsys, llama3, [corpus], tmp_path / "out", "--words", "builtin:finance",
                              "--new-tokens", "3")
    assert code == 1 and "the word lists need" in err and "but --new-tokens is 3" in err


def test_invalid_utf8_error_names_file_line_and_byte_offset_or_is_skipped_and_counted(capsys, llama3, corpus,
                                                                                      tmp_path):
    bad = tmp_path / "latin1.txt"
    # One document per paragraph (yunshan's .txt rule): the paragraph holding the Latin-1 line is skipped whole.
    good_line = "资产负债表显示公司的净利润增长。\n\n".encode("utf-8")
    bad.write_bytes(good_line * 3 + "Bilanz für 2023\n\n".encode("latin-1") + good_line * 3)
    out = tmp_path / "out"
    code, _, err = run_extend(capsys, llama3, [bad], out)
    offset = len(good_line) * 3 + len("Bilanz f")
    assert code == 1
    assert f"--corpus: {bad}:7: invalid_utf8 (invalid UTF-8 at byte offset {offset} of the file)" in err
    assert "--on-bad-record skip" in err and err.count("\n") == 1
    assert not out.exists()

    code, _, err = run_extend(capsys, llama3, [bad, corpus["domain"]], out, "--on-bad-record", "skip")
    assert code == 0, err
    report = json.loads((out / "yunshan_tokenizer_extension.json").read_text(encoding="utf-8"))
    first = report["corpus"]["files"][0]
    assert (first["documents"], first["bad"]) == (6, {"invalid_utf8": 1})


def test_bad_jsonl_lines_name_the_line(capsys, llama3, tmp_path):
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"text": "ok"}\n{"text": \n', encoding="utf-8")
    code, _, err = run_extend(capsys, llama3, [broken], tmp_path / "out")
    assert code == 1 and f"{broken}:2: malformed_json" in err
    other = tmp_path / "other.jsonl"
    other.write_text('{"content": "资产负债表"}\n', encoding="utf-8")
    code, _, err = run_extend(capsys, llama3, [other], tmp_path / "out")
    assert code == 1 and f"{other}:1: field 'text': missing_field (record has fields: content)" in err
    assert "--text-field" in err
    code, _, err = run_extend(capsys, llama3, [other], tmp_path / "out", "--text-field", "content")
    assert code == 0, err


def test_bad_records_are_skipped_and_counted_by_reason_as_cpt_counts_them(capsys, llama3, tmp_path):
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text('{"text": "资产负债表显示公司的净利润增长。"}\n{"text": \n{"text": ""}\n{"text": 7}\n[1]\n'
                     '{"body": "x"}\n{"text": "违约责任由合同约定。"}\n', encoding="utf-8")
    out = tmp_path / "out"
    code, _, err = run_extend(capsys, llama3, [mixed], out, "--on-bad-record", "skip", "--min-frequency", "1")
    assert code == 0, err
    report = json.loads((out / "yunshan_tokenizer_extension.json").read_text(encoding="utf-8"))
    assert report["corpus"]["files"] == [{"path": str(mixed), "documents": 2, "characters": 26, "bad": {
        "malformed_json": 2, "empty_text": 1, "non_string_field": 1, "missing_field": 1}}]
    # The same counts as `yunshan cpt`'s reader gives for this file.
    from yunshan.data.sources import SourceArgs, source_texts

    counts: dict = {}
    assert len(list(source_texts(SourceArgs(name="x", path=str(mixed)), "skip", counts))) == 2
    assert counts == {f"bad:{k}": v for k, v in report["corpus"]["files"][0]["bad"].items()}


def test_more_tokens_than_the_corpus_supports_reports_how_many_were_learned(capsys, llama3, tmp_path):
    small = tmp_path / "small.txt"
    small.write_text("资产负债表 资产负债表\n资产负债表\n", encoding="utf-8")
    out = tmp_path / "out"
    code, stdout, err = run_extend(capsys, llama3, [small], out, "--min-frequency", "2")
    assert code == 0, err
    report = json.loads((out / "yunshan_tokenizer_extension.json").read_text(encoding="utf-8"))
    learned = report["new_tokens"]["added"]
    assert 0 < learned < 50
    assert report["new_tokens"]["corpus_stop_reason"] == \
        f"no pair occurs at least 2 times: learned {learned} of 50 corpus tokens"
    assert f"only {learned} of the 50 new tokens requested" in stdout
    assert f"-> {report['vocab_size']:,}" in stdout


def test_word_lists_needing_more_than_n_tokens_and_unknown_builtin(capsys, llama3, corpus, tmp_path):
    out = tmp_path / "out"
    code, _, err = run_extend(capsys, llama3, [corpus["domain"]], out, "--words", "builtin:medicine")
    assert code == 1 and "unknown word list 'builtin:medicine'" in err and "builtin:finance_zh" in err
    blank = tmp_path / "blank.txt"
    blank.write_text("\n\n# only comments\n", encoding="utf-8")
    code, _, err = run_extend(capsys, llama3, [corpus["domain"]], out, "--words", blank)
    assert code == 1 and "has no terms" in err
    assert not out.exists()


def test_bad_base_tokenizers_get_a_message_naming_what_is_supported(capsys, corpus, tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers

    empty_folder = tmp_path / "no_tokenizer"
    empty_folder.mkdir()
    (empty_folder / "config.json").write_text("{}")
    code, _, err = run_extend(capsys, empty_folder, [corpus["domain"]], tmp_path / "out")
    assert code == 1 and "has no tokenizer.json or tokenizer.model" in err and "config.json" in err

    wordpiece = tmp_path / "wordpiece"
    wordpiece.mkdir()
    tok = Tokenizer(models.WordPiece({"[UNK]": 0, "a": 1}, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.save(str(wordpiece / "tokenizer.json"))
    code, _, err = run_extend(capsys, wordpiece, [corpus["domain"]], tmp_path / "out")
    assert code == 1 and "model type WordPiece is not supported" in err and "byte-level" in err

    import io

    import sentencepiece as spm

    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(["hello world"] * 50 + ["资产负债表"] * 50),
                                   model_writer=buffer, vocab_size=30, model_type="unigram", minloglevel=2,
                                   hard_vocab_limit=False)
    unigram = tmp_path / "unigram.model"
    unigram.write_bytes(buffer.getvalue())
    code, _, err = run_extend(capsys, unigram, [corpus["domain"]], tmp_path / "out")
    assert code == 1 and "model_type is Unigram" in err and "supported are BPE SentencePiece models" in err

    not_a_model = tmp_path / "junk.model"
    not_a_model.write_bytes(b"\xff\x00junk")
    code, _, err = run_extend(capsys, not_a_model, [corpus["domain"]], tmp_path / "out")
    assert code == 1 and "not a SentencePiece model file" in err
    assert not (tmp_path / "out").exists()


def test_out_is_never_half_written(capsys, llama3, corpus, tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("user data")
    code, _, err = run_extend(capsys, llama3, [corpus["domain"]], out)
    assert code == 1 and "exists and is not empty; pass --overwrite" in err
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
    (out / "keep.txt").unlink()
    code, _, err = run_extend(capsys, llama3, [corpus["domain"]], out)
    assert code == 0, err
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    # A failure after the run started (the word lists need more tokens) leaves --out as it was, and no temporary
    # folder behind.
    code, _, err = run_extend(capsys, llama3, [corpus["domain"]], out, "--overwrite", "--words", "builtin:all",
                              "--new-tokens", "5")
    assert code == 1 and {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    code, _, err = run_extend(capsys, llama3, [corpus["domain"]], out, "--overwrite", "--new-tokens", "7")
    assert code == 0, err
    assert (out / "tokenizer.json").read_bytes() != before["tokenizer.json"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_overwrite_replaces_only_an_earlier_extension(capsys, llama3, corpus, tmp_path):
    """--overwrite never deletes what the extension did not write: a user's folder, a file added to an extension,
    or the base tokenizer and corpus inside --out."""
    parent = tmp_path / "parent"
    parent.mkdir()
    (parent / "notes.txt").write_text("user data")
    code, _, err = run_extend(capsys, llama3, [corpus["domain"]], parent, "--overwrite")
    assert code == 1 and f"--out {parent} is not a folder written by yunshan tokenizer extend" in err
    assert err.count("\n") == 1 and [p.name for p in parent.iterdir()] == ["notes.txt"]
    (parent / "notes.txt").unlink()
    base = parent / "base"
    base.mkdir()
    for f in llama3.iterdir():
        (base / f.name).write_bytes(f.read_bytes())
    code, _, err = run_extend(capsys, base, [corpus["domain"]], parent, "--overwrite")
    assert code == 1 and f"--out {parent} holds the base tokenizer {base}: replacing --out would delete it" in err
    assert (base / "tokenizer.json").is_file()
    out = tmp_path / "ext"
    assert run_extend(capsys, llama3, [corpus["domain"]], out)[0] == 0
    (out / "mine.txt").write_text("user data")
    code, _, err = run_extend(capsys, llama3, [corpus["domain"]], out, "--overwrite")
    assert code == 1 and "holds mine.txt, which yunshan tokenizer extend did not write" in err
    assert (out / "mine.txt").read_text() == "user data"
