"""A held-out `.txt` is one continuous document: its blank lines are paragraph breaks inside the text, scored with the
text before them as context, in `yunshan eval`'s bits per character, the forgetting monitor and the compression
report alike; a `.jsonl` held-out file is one document per record (docs/design.md, the `.txt` rule)."""

import json

import pytest

from tests.fixtures import realdata

PARAGRAPHS = ["第一条 为了保护民事主体的合法权益，制定本法。", "第二条 民法调整平等主体之间的人身关系和财产关系。",
              "第三条 民事主体的人身权利、财产权利受法律保护。"]


def write_texts(tmp_path):
    txt = tmp_path / "code.txt"
    txt.write_text("\n\n".join(PARAGRAPHS) + "\n", encoding="utf-8")
    whole = tmp_path / "whole.jsonl"
    whole.write_text(json.dumps({"text": "\n\n".join(PARAGRAPHS)}, ensure_ascii=False) + "\n", encoding="utf-8")
    parts = tmp_path / "parts.jsonl"
    parts.write_text("".join(json.dumps({"text": p}, ensure_ascii=False) + "\n" for p in PARAGRAPHS), encoding="utf-8")
    return txt, whole, parts


def test_every_heldout_reader_takes_a_txt_whole(tmp_path):
    from yunshan.data.records import read_texts
    from yunshan.eval.texts import read_documents
    from yunshan.training.monitoring import read_heldout

    txt, _, parts = write_texts(tmp_path)
    whole = "\n\n".join(PARAGRAPHS)
    assert [t for _, t in read_texts(str(txt), "held-out")] == [whole]
    assert read_documents(txt) == [whole]
    assert read_heldout([str(txt)], 10_000) == [whole]
    assert read_heldout([str(txt)], 30) == [whole[:30]]  # the first max_chars characters, cut inside the document
    # A .jsonl says where its documents end; feature diversity and decontamination ask for paragraphs explicitly.
    assert read_documents(parts) == PARAGRAPHS
    assert read_documents(txt, txt_document="paragraph") == PARAGRAPHS
    from yunshan.eval.items import heldout_items

    assert [item.fields[0] for item in heldout_items("legal", txt)] == PARAGRAPHS


def test_bits_per_character_of_a_txt_are_those_of_the_whole_document(llama, tmp_path):
    """The .txt scores exactly as one record holding the whole text, and not as its paragraphs one by one (each of
    which would start again from BOS without the articles before it)."""
    from yunshan.eval.bpc import run_bpc
    from yunshan.training.monitoring import bits_per_character, read_heldout

    txt, whole, parts = write_texts(tmp_path)
    result = run_bpc(llama, {"txt": txt, "whole": whole, "parts": parts}, max_length=64)["files"]
    assert result["txt"]["documents"] == 1 and result["parts"]["documents"] == 3
    assert result["txt"]["nll_nats"] == pytest.approx(result["whole"]["nll_nats"], rel=1e-9)
    assert result["txt"]["chars"] == result["whole"]["chars"]
    assert result["txt"]["nll_nats"] != pytest.approx(result["parts"]["nll_nats"], rel=1e-3)
    # The forgetting monitor reads and scores it the same way.
    monitor = bits_per_character(llama.model, llama.tokenizer, read_heldout([str(txt)], 10_000), max_length=64)
    assert monitor["bpc"] == pytest.approx(result["txt"]["bpc"], rel=1e-6)


def test_the_compression_report_counts_a_txt_as_one_text(tokenizer_dir, tmp_path):
    from yunshan.tokenizer.report import compression_report

    txt, whole, _ = write_texts(tmp_path)
    report = compression_report([tokenizer_dir], [txt, whole])
    by_file = {f["path"]: f for f in report["files"]}
    assert by_file[str(txt)]["texts"] == 1
    assert by_file[str(txt)]["characters"] == by_file[str(whole)]["characters"]
    assert by_file[str(txt)]["results"][0]["tokens"] == by_file[str(whole)]["results"][0]["tokens"]


def test_the_real_civil_code_is_one_document():
    """The Civil Code (113 k characters, a blank line between articles) is one held-out document."""
    from yunshan.eval.texts import read_documents

    path = realdata("laws", "civil_code.txt")
    docs = read_documents(path)
    assert len(docs) == 1 and len(docs[0]) > 100_000
    assert len(read_documents(path, txt_document="paragraph")) > 1000


def test_the_monitor_under_autocast_scores_as_yunshan_eval_and_puts_the_head_back(llama_dir, tmp_path):
    """A bf16 training run's monitor measures under autocast with the output head in float32, exactly as `yunshan
    eval --dtype auto` does, and leaves the model's own head in place for training to go on."""
    from yunshan.eval.bpc import run_bpc
    from yunshan.eval.loading import float32_head, float32_head_class, load_model
    from yunshan.training.monitoring import bits_per_character, read_heldout

    txt, _, _ = write_texts(tmp_path)
    model = load_model(str(llama_dir))
    head = model.model.get_output_embeddings()
    docs = read_heldout([str(txt)], 10_000)
    plain = bits_per_character(model.model, model.tokenizer, docs, max_length=64)
    mixed = bits_per_character(model.model, model.tokenizer, docs, max_length=64, autocast=True)
    assert model.model.get_output_embeddings() is head  # put back
    assert mixed["bpc"] != plain["bpc"] and mixed["bpc"] == pytest.approx(plain["bpc"], rel=2e-2)
    # yunshan eval's own computation under autocast (a float32 head installed for good)
    reference = load_model(str(llama_dir))
    reference.autocast = True
    assert float32_head(reference.model) and isinstance(reference.model.get_output_embeddings(), float32_head_class())
    with reference.compute():
        expected = run_bpc(reference, {"txt": txt}, max_length=64)["files"]["txt"]["bpc"]
    assert mixed["bpc"] == pytest.approx(expected, rel=1e-9)
    # a head already in float32 stays as it is
    bits_per_character(reference.model, reference.tokenizer, docs, max_length=64, autocast=True)
    assert isinstance(reference.model.get_output_embeddings(), float32_head_class())


def test_general_labels_are_forgetting_and_every_other_label_is_gain():
    from yunshan.eval.bpc import forgetting_table, is_general

    assert is_general("general") and is_general("general_zh") and is_general("general-en")
    assert not any(is_general(x) for x in ("civil_code", "legal", "generally", "zh_general"))
    files = {k: {"bpc": v} for k, v in (("civil_code", 4.0), ("general_zh", 6.0), ("general_en", 1.0))}
    after = {k: {"bpc": v["bpc"] * 0.9} for k, v in files.items()}
    rows = forgetting_table({"files": files}, {"files": after}, "base", "tuned").splitlines()[2:]
    assert [r.split(" | ")[1] for r in rows] == ["gain (domain)", "forgetting (general)", "forgetting (general)"]
