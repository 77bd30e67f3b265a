"""The extension's invariants, for every supported kind of base tokenizer, through AutoTokenizer (as users load it).

Base ids and special tokens unchanged; lossless round trip (hypothesis); no dead tokens; byte-identical reruns;
extending an extension; compression better on domain text and never worse on general text; word-list terms as one
token; the SentencePiece .model written beside tokenizer.json agrees with it piece for piece.
"""

from __future__ import annotations

import json
from functools import lru_cache

import pytest
from tokenizer_fixtures import KINDS, NEW_TOKENS, base_folder, extend
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from transformers import AutoTokenizer

from yunshan.tokenizer import load_base_tokenizer


@lru_cache(maxsize=None)
def auto(path: str):
    return AutoTokenizer.from_pretrained(path)


def encoder(kind: str, path) -> callable:
    """ids of a text without special tokens; a SentencePiece base is encoded by the sentencepiece library itself."""
    if kind == "sentencepiece" and str(path).endswith(".model"):
        import sentencepiece as spm

        sp = spm.SentencePieceProcessor(model_file=str(path))
        return lambda text: sp.encode(text)
    tok = auto(str(path))
    return lambda text: tok.encode(text, add_special_tokens=False)


def texts_of(path) -> list[str]:
    return [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.parametrize("kind", KINDS)
def test_loads_offline_with_auto_tokenizer_and_keeps_base_ids_special_tokens_and_chat_template(kind, bases, extended):
    out, report = extended[kind]
    new = auto(str(out))
    base_size = report["base"]["vocab_size"]
    assert report["vocab_size"] == base_size + NEW_TOKENS == len(new)
    special_map = json.loads((out / "special_tokens_map.json").read_text(encoding="utf-8"))
    assert special_map["eos_token"] == new.eos_token and special_map.get("bos_token") == new.bos_token
    if kind == "sentencepiece":
        import sentencepiece as spm

        sp = spm.SentencePieceProcessor(model_file=str(bases[kind]))
        assert [new.convert_ids_to_tokens(i) for i in range(base_size)] == [sp.id_to_piece(i) for i in range(base_size)]
        assert new.bos_token == "<s>" and new.eos_token == "</s>" and new.unk_token == "<unk>"
        assert new("资产负债表").input_ids[0] == sp.bos_id()  # add_bos_token, as a Llama tokenizer
        return
    base = auto(str(bases[kind]))
    assert new.convert_ids_to_tokens(list(range(base_size))) == base.convert_ids_to_tokens(list(range(base_size)))
    flags = lambda t: (t.content, t.special, t.lstrip, t.rstrip, t.normalized, t.single_word)  # noqa: E731
    assert {i: flags(t) for i, t in new.added_tokens_decoder.items()} == \
        {i: flags(t) for i, t in base.added_tokens_decoder.items()}
    assert new.all_special_tokens == base.all_special_tokens
    assert new.all_special_ids == base.all_special_ids
    if kind == "byte_level_llama3":
        # Added tokens at ids after the model vocabulary kept their ids (the trap of appending after them).
        assert new.convert_tokens_to_ids(["<|im_start|>", "<|im_end|>", "<think>"]) == [800, 801, 802]
        chat = [{"role": "user", "content": "资产负债表是什么？"}]
        assert new.apply_chat_template(chat, tokenize=False, add_generation_prompt=True) == \
            base.apply_chat_template(chat, tokenize=False, add_generation_prompt=True)
        ids = new.apply_chat_template(chat, tokenize=True, add_generation_prompt=True)
        ids = ids["input_ids"] if isinstance(ids, dict) or hasattr(ids, "keys") else ids
        assert ids[0] == 800 and ids.count(801) == 1
    if kind == "metaspace":
        assert new.chat_template == base.chat_template and type(new).__name__ == "LlamaTokenizer"


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "sentencepiece"])  # a .model has pieces, not merges
def test_every_base_merge_is_kept_in_order_before_the_new_ones(kind, bases, extended):
    """The base's merges are the first merges of the extension, all of them, in their order (new ones after).

    Checked on the merge lists themselves: a Llama-3-style base sets ignore_merges, so any text whose word is in
    the vocabulary never consults the merges, and a dropped base merge would pass every encoding test of common
    text; it would still change how other words split."""
    out, report = extended[kind]
    base = load_base_tokenizer(bases[kind])
    new = load_base_tokenizer(out)
    assert base.merges, kind  # every kind here is a BPE with merges
    assert new.merges[:len(base.merges)] == base.merges
    assert len(new.merges) > len(base.merges) and new.ignore_merges == base.ignore_merges
    if kind == "byte_level_llama3":
        assert base.ignore_merges


@pytest.mark.parametrize("kind", KINDS)
def test_no_dead_tokens(kind, extended):
    """Every new token comes out of the encoder for its own text (model-level for in-word pieces)."""
    out, report = extended[kind]
    new = auto(str(out))
    backend = new.backend_tokenizer
    base = load_base_tokenizer(out if kind != "sentencepiece" else out / "tokenizer.model")
    first = report["base"]["vocab_size"]
    text_checked = 0
    for idx in range(first, report["vocab_size"]):
        string = backend.id_to_token(idx)
        assert [t.id for t in backend.model.tokenize(string)] == [idx], string
        text = base.text_of(string)
        if text is not None:
            text_checked += 1
            assert new.encode(text, add_special_tokens=False) == [idx], (string, text)
    # Byte-level: many new tokens have a text of their own (the others are parts of a UTF-8 character).
    # SentencePiece-style: Chinese pieces inside words (no "▁") and new characters have none; they are checked at
    # the model level above.
    assert text_checked > (NEW_TOKENS // 3 if kind.startswith("byte_level") else 20)
    assert report["new_tokens"]["pruned_dead"] == []


FRAGMENTS = ["资产负债表", "民事诉讼法", " balance", "  ", "\n\n", "\t", "123456", "2023年", "😀", "🇨🇳", "<0xE8>",
             "\ufffd", "Ġ", "Ċ", "<|im_start|>", "<think>", "<s>", "é", "e\u0301", "\x00", "ﬁ", "赟燊",
             " indemnification"]
TEXT = st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(st.characters(exclude_categories=("Cs",)), max_size=8)),
                max_size=8).map("".join)


@pytest.mark.parametrize("kind", KINDS)
def test_lossless_round_trip(kind, bases, extended):
    """decode(encode(x)) == x for every string (SentencePiece-style: the base's own round trip, which already maps
    "▁" to a space and, for transformers' Metaspace conversion, drops a leading space; equal to x otherwise)."""
    new = auto(str(extended[kind][0]))
    base_round = None
    if kind == "metaspace":
        base = auto(str(bases[kind]))
        base_round = lambda x: base.decode(base.encode(x, add_special_tokens=False))  # noqa: E731
    elif kind == "sentencepiece":
        import sentencepiece as spm

        sp = spm.SentencePieceProcessor(model_file=str(bases[kind]))
        base_round = lambda x: sp.decode(sp.encode(x))  # noqa: E731

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(TEXT)
    def check(x):
        round_trip = new.decode(new.encode(x, add_special_tokens=False), skip_special_tokens=False)
        if base_round is None:
            assert round_trip == x
        else:
            if kind == "sentencepiece" and any(s in x for s in ("<s>", "</s>", "<unk>")):
                return  # the sentencepiece library does not treat control pieces in text as tokens
            assert round_trip == base_round(x)
            if "▁" not in x and not x[:1].isspace():
                assert round_trip == x
    check()


@pytest.mark.parametrize("kind", KINDS)
def test_domain_text_compresses_and_general_text_never_gets_worse(kind, bases, extended, corpus):
    out, _ = extended[kind]
    base_enc, new_enc = encoder(kind, bases[kind]), encoder(kind, out)
    domain, general = texts_of(corpus["heldout"]), texts_of(corpus["general"])
    base_domain = sum(len(base_enc(t)) for t in domain)
    new_domain = sum(len(new_enc(t)) for t in domain)
    assert new_domain < 0.8 * base_domain
    for text in general:  # appended merges only ever join base tokens further: per text, never more tokens
        assert len(new_enc(text)) <= len(base_enc(text)), text


@pytest.mark.parametrize("kind", KINDS)
def test_word_list_terms_encode_to_one_token(kind, extended):
    out, report = extended[kind]
    new = auto(str(out))
    for term in ("资产负债表", "民事诉讼法", "违约责任", "indemnification"):
        ids = new.encode(term, add_special_tokens=False)
        assert len(ids) == 1, (term, new.convert_ids_to_tokens(ids))
    if kind.startswith("byte_level"):
        assert len(new.encode(" indemnification", add_special_tokens=False)) == 1
    else:  # inside a Chinese sentence, where no "▁" precedes the term
        pieces = new.convert_ids_to_tokens(new.encode("本公司资产负债表", add_special_tokens=False))
        assert "资产负债表" in pieces, pieces
    assert report["terms"] == {"total": 5, "by_status": {"added": 4, "split_by_pre_tokenizer": 1},
                               "not_added": [{"term": "balance sheet", "status": "split_by_pre_tokenizer"}]}
    (summary,) = report["word_lists"]
    assert (summary["terms"], summary["blank_lines"], summary["duplicates"], summary["comment_lines"]) == (5, 1, 1, 1)
    assert report["new_tokens"]["from_word_lists"] > 0
    assert report["new_tokens"]["from_word_lists"] + report["new_tokens"]["from_corpus"] == NEW_TOKENS


@pytest.mark.parametrize("kind", KINDS)
def test_same_inputs_give_byte_identical_files_and_an_extension_extends(kind, bases, corpus, extended, tmp_path):
    first, report = extended[kind]
    again = tmp_path / "again"
    extend(bases[kind], corpus, again)
    names = sorted(p.name for p in first.iterdir())
    assert names == sorted(p.name for p in again.iterdir())
    for name in names:
        assert (first / name).read_bytes() == (again / name).read_bytes(), name

    # Extend the extension: its ids (base and new) stay, the new ones come after, invariants hold.
    second_base = first / "tokenizer.model" if kind == "sentencepiece" else first
    twice = tmp_path / "twice"
    report2 = extend(second_base, corpus, twice, words=[], new_tokens=50, min_frequency=2)
    assert report2["base"]["vocab_size"] == report["vocab_size"]
    assert report2["vocab_size"] == report["vocab_size"] + report2["new_tokens"]["added"]
    assert report2["new_tokens"]["added"] > 0 and report2["new_tokens"]["pruned_dead"] == []
    once, two = auto(str(first)), auto(str(twice))
    n = report["vocab_size"]
    assert two.convert_ids_to_tokens(list(range(n))) == once.convert_ids_to_tokens(list(range(n)))
    text = "本院认为，被告应当承担违约责任。The plaintiff sought indemnification."
    assert two.decode(two.encode(text, add_special_tokens=False)) == text
    assert len(two.encode(text, add_special_tokens=False)) <= len(once.encode(text, add_special_tokens=False))


def test_sentencepiece_model_scores_and_agreement_with_tokenizer_json(bases, extended, corpus):
    import sentencepiece as spm
    from sentencepiece import sentencepiece_model_pb2 as pb

    out, report = extended["sentencepiece"]
    base_proto, new_proto = pb.ModelProto(), pb.ModelProto()
    base_proto.ParseFromString(bases["sentencepiece"].read_bytes())
    new_proto.ParseFromString((out / "tokenizer.model").read_bytes())
    n = len(base_proto.pieces)
    assert [(p.piece, p.score, p.type) for p in new_proto.pieces[:n]] == \
        [(p.piece, p.score, p.type) for p in base_proto.pieces]
    floor = min(p.score for p in base_proto.pieces)
    new_pieces = new_proto.pieces[n:]
    assert len(new_pieces) == NEW_TOKENS
    assert [p.score for p in new_pieces] == [floor - k for k in range(1, NEW_TOKENS + 1)]
    assert all(p.type == pb.ModelProto.SentencePiece.NORMAL for p in new_pieces)
    assert new_proto.trainer_spec.vocab_size == n + NEW_TOKENS

    sp = spm.SentencePieceProcessor(model_file=str(out / "tokenizer.model"))
    hf = auto(str(out))
    lines = texts_of(corpus["heldout"]) + texts_of(corpus["general"]) + ["  two  spaces\tand\nnew 😀 <0x41> ▁x"]
    for line in lines:
        assert sp.encode(line) == hf.encode(line, add_special_tokens=False), line
    assert sp.decode(sp.encode("资产负债表")) == "资产负债表" and len(sp.encode("资产负债表")) == 1


@pytest.mark.parametrize("kind", ["byte_level_llama3", "metaspace"])
def test_report_file_is_complete_and_reproducible(kind, extended, corpus):
    out, report = extended[kind]
    saved = json.loads((out / "yunshan_tokenizer_extension.json").read_text(encoding="utf-8"))
    assert saved == report
    assert saved["corpus"]["files"][0]["documents"] == 600
    assert saved["corpus"]["unique_words"] <= saved["corpus"]["words"]
    assert saved["training_words"]["tokens_after"] < saved["training_words"]["tokens_before"]
    assert saved["new_tokens"]["corpus_stop_reason"] == "budget reached"
    assert str(out) not in json.dumps(saved)  # the output path is not recorded: reruns elsewhere are identical
    assert base_folder(out) == out


def test_compressed_parquet_zip_and_glob_corpora_give_the_vocabulary_of_the_plain_file(bases, corpus, extended,
                                                                                      tmp_path, capsys):
    """One record reader (yunshan.data.records): the corpus `yunshan cpt` reads in any format or compression is the
    corpus the extension learns from, record for record. docs/pipeline.md's command 1 (`--corpus X.jsonl.gz Y.jsonl.zst
    --words builtin:finance builtin:legal`) runs through the command line."""
    import gzip
    import zipfile

    import pyarrow as pa
    import pyarrow.parquet as pq
    import zstandard

    from yunshan.cli import main

    kind = "byte_level_llama3"
    plain, _ = extended[kind]
    raw = corpus["domain"].read_bytes()
    (tmp_path / "domain.jsonl.gz").write_bytes(gzip.compress(raw))
    (tmp_path / "domain.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(raw))
    rows = [json.loads(line) for line in raw.decode("utf-8").splitlines()]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "domain.parquet", row_group_size=100)
    with zipfile.ZipFile(tmp_path / "domain.zip", "w") as archive:
        archive.writestr("domain.jsonl", raw)
    half = len(rows) // 2
    (tmp_path / "parts").mkdir()
    for i, part in enumerate((rows[:half], rows[half:])):
        (tmp_path / "parts" / f"part-{i}.jsonl.zst").write_bytes(zstandard.ZstdCompressor().compress(
            "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in part).encode("utf-8")))
    want = (plain / "tokenizer.json").read_bytes()
    for name in ("domain.jsonl.gz", "domain.jsonl.zst", "domain.parquet", "domain.zip", "parts/*.jsonl.zst"):
        out = tmp_path / f"out_{name.replace('/', '_').replace('*', 'all')}"
        report = extend(bases[kind], {**corpus, "domain": tmp_path / name}, out)
        assert (out / "tokenizer.json").read_bytes() == want, name
        assert sum(f["documents"] for f in report["corpus"]["files"]) == len(rows), name

    # docs/pipeline.md's command 1 (7B scale), with both compressions at once and the builtin word lists.
    args = ["tokenizer", "extend", "--base", str(bases[kind]), "--words", "builtin:finance", "builtin:legal",
            "--new-tokens", "5300"]
    assert main([*args, "--corpus", str(tmp_path / "domain.jsonl.gz"), str(tmp_path / "parts" / "part-1.jsonl.zst"),
                 "--out", str(tmp_path / "readme")]) == 0, capsys.readouterr().err
    both = tmp_path / "both.jsonl"
    both.write_bytes(raw + "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows[half:]).encode("utf-8"))
    assert main([*args, "--corpus", str(both), "--out", str(tmp_path / "readme_plain")]) == 0
    assert (tmp_path / "readme" / "tokenizer.json").read_bytes() == \
        (tmp_path / "readme_plain" / "tokenizer.json").read_bytes()
