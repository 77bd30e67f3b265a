"""`yunshan tokenizer report`: compression rate (tokens per character, the paper's Table 7 definition), bytes per
token and the most used new tokens, against hand-computed values."""

from __future__ import annotations

import json

from tokenizers import Tokenizer, decoders, pre_tokenizers
from tokenizers.models import BPE

from yunshan.cli import main
from yunshan.tokenizer import compression_report, format_markdown
from yunshan.tokenizer.base import BYTE_TO_CHAR


def byte_tokenizer(folder, merges=()):
    """256 byte tokens (+ the given merges): each text costs exactly its UTF-8 byte count in tokens."""
    vocab = {c: i for i, c in enumerate(BYTE_TO_CHAR[b] for b in range(256))}
    for left, right in merges:
        vocab[left + right] = len(vocab)
    tok = Tokenizer(BPE(vocab=vocab, merges=list(merges)))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    folder.mkdir()
    tok.save(str(folder / "tokenizer.json"))
    return folder


def test_hand_computed_compression(tmp_path, capsys):
    plain = byte_tokenizer(tmp_path / "bytes")
    merged = byte_tokenizer(tmp_path / "merged", [("a", "b")])
    text = tmp_path / "text.txt"
    text.write_text("ab ab\n\n资产\n", encoding="utf-8")  # texts "ab ab" (5 chars, 5 bytes) and "资产" (2, 6)
    jsonl = tmp_path / "text.jsonl"
    jsonl.write_text(json.dumps({"body": "abab"}) + "\n", encoding="utf-8")
    # A .txt is one text by default (a held-out document whose blank line is a paragraph break inside it) ...
    (whole,) = compression_report([plain, merged], [text], top_new=5)["files"]
    assert (whole["texts"], whole["characters"], whole["bytes"]) == (1, 9, 13)
    assert [r["tokens"] for r in whole["results"]] == [13, 11]
    # ... and its paragraphs on request, as the hand computation below counts them.
    report = compression_report([plain, merged], [text], top_new=5, txt_document="paragraph")
    (f,) = report["files"]
    assert (f["texts"], f["characters"], f["bytes"]) == (2, 7, 11)
    base, ext = f["results"]
    assert (base["tokens"], base["tokens_per_char"], base["bytes_per_token"]) == (11, 11 / 7, 1.0)
    assert (ext["tokens"], ext["tokens_per_char"], ext["bytes_per_token"]) == (9, 9 / 7, 11 / 9)
    assert ext["change_vs_first"] == 9 / 11 - 1
    assert report["tokenizers"][1] == {"name": str(merged), "vocab_size": 257, "new_vs_first": 1}
    assert report["new_tokens_most_used"] == [
        {"tokenizer": str(merged), "top": [{"id": 256, "token": "ab", "text": "ab", "count": 2}]}]
    markdown = format_markdown(report)
    assert "| text.txt | " + str(merged) + " | 2 | 7 | 9 | 1.2857 | 1.222 | -18.18% |" in markdown
    assert '| 256 | "ab" | 2 |' in markdown

    out = tmp_path / "r.json"
    code = main(["tokenizer", "report", "--tokenizer", str(plain), "--tokenizer", str(merged), "--text", str(jsonl),
                 "--text-field", "body", "--json", str(out)])
    assert code == 0
    saved = json.loads(out.read_text(encoding="utf-8"))
    assert [r["tokens"] for r in saved["files"][0]["results"]] == [4, 2]
    assert "| text.jsonl |" in capsys.readouterr().out


def test_report_errors_are_one_line(tmp_path, capsys):
    code = main(["tokenizer", "report", "--tokenizer", str(tmp_path / "missing"), "--text", str(tmp_path / "t")])
    err = capsys.readouterr().err
    assert code == 1 and "does not exist" in err and "Traceback" not in err
