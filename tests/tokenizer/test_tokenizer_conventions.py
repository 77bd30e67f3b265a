"""The base's segmentation conventions (tokenizer/conventions.py): detected per kind, and never broken by an extension.

The bases are trained in-process (tokenizer_fixtures.py) on general text with many numbers: a SentencePiece model
with split_digits=True (and its Llama-2-style tokenizer.json, which carries no digit rule), a byte-level BPE with
Llama-3's split regex and one with GPT-2's. The domain corpus is full of years, amounts and article numbers, which a
plain continued BPE would merge ("20", "2021", "▁2").
"""

from __future__ import annotations

import json

import pytest
from tokenizer_fixtures import KINDS, extend
from tokenizers import Tokenizer

from yunshan.tokenizer import load_base_tokenizer
from yunshan.tokenizer.conventions import detect_conventions, units


def test_units_and_violations_by_hand():
    assert units("a 2\n".encode()) == ["L", "S", "D", "N"]
    # part of a UTF-8 character is one B unit; a whole Chinese character is a letter
    assert units("资".encode()[:2]) == ["B"] and units("的".encode() + "资".encode()[:1]) == ["L", "B"]
    # "▁" is a space; digits of other scripts are digits of their own script
    assert units("▁２০2".encode()) == ["S", "D(FULLWIDTH)", "D(BENGALI)", "D"]
    assert units("²〇".encode()) == ["D(OTHER NUMERAL)", "D(OTHER NUMERAL)"]
    from yunshan.tokenizer.conventions import Conventions

    single = Conventions(max_digit_run=1, transitions=frozenset({("S", "L"), ("S", "S")}), min_tokens=2)
    assert single.violation(b"2021").startswith("digit run longer than 1 (4 digits")
    assert single.violation(b" 2").startswith("space followed by digit")
    assert single.violation(b"the ").startswith("letter followed by space")
    assert single.violation(b" the") is None and single.violation("资产负债表".encode()) is None
    assert single.violation("第3条".encode()).startswith("letter followed by digit")
    groups = Conventions(max_digit_run=3, transitions=frozenset({("D", "D")}), min_tokens=2)
    assert groups.violation(b"202") is None and groups.violation(b"2021") is not None
    # Bengali digits with a policy of their own (runs of up to 4), ASCII digits single: "১৯৭১" is fine, "2021" not,
    # and full-width digits (no policy of their own) follow the ASCII digits.
    per_script = Conventions(max_digit_run=1, min_tokens=2, script_digit_runs={"BENGALI": 4},
                             transitions=frozenset({("D(BENGALI)", "D(BENGALI)"), ("S", "D(BENGALI)")}))
    assert per_script.violation("▁১৯৭১".encode()) is None
    assert per_script.violation("১৯৭১৯".encode()).startswith("BENGALI digit run longer than 4 (5 BENGALI digits")
    assert per_script.violation(b"2021").startswith("digit run longer than 1 (4 digits in a row")
    assert per_script.violation("２０".encode()).startswith("digit run longer than 1")
    assert per_script.violation("১2".encode()).startswith("BENGALI digit followed by digit")
    assert per_script.digits == "ASCII digits: single digits; BENGALI digits: groups of up to 4 digits"
    assert per_script.as_dict()["max_digit_run_by_script"] == {"ASCII": 1, "BENGALI": 4}
    assert "D(BENGALI)+D" in per_script.as_dict()["forbidden_transitions"]


@pytest.mark.parametrize("kind,expected", [("sentencepiece", 1), ("metaspace", 1), ("byte_level_llama3", 3)])
def test_digit_convention_detected(kind, expected, bases):
    conventions = detect_conventions(load_base_tokenizer(bases[kind]))
    assert conventions.max_digit_run == expected
    if kind == "sentencepiece":
        assert "split_digits=True" in conventions.evidence[0]
    if kind == "byte_level_llama3":
        assert any("up to 3" in e for e in conventions.evidence)


def test_gpt2_style_base_keeps_runs_of_digits(bases):
    conventions = detect_conventions(load_base_tokenizer(bases["byte_level_gpt2"]))
    # GPT-2's regex keeps numbers whole: the base learned 4-digit tokens (years) and " 2019"-style tokens
    assert conventions.max_digit_run >= 4 and ("S", "D") in conventions.transitions


def test_vocabulary_wins_over_a_pipeline_that_lost_its_digit_rule(tmp_path):
    """A byte-level BPE trained with single digits whose tokenizer.json then lost the Digits step (what
    transformers' GGUF conversion of SmolLM2 produces): the vocabulary still says single digits."""
    from tokenizers import Tokenizer as RustTokenizer
    from tokenizers import decoders, pre_tokenizers, trainers
    from tokenizers.models import BPE
    from tokenizer_corpora import texts
    from transformers import PreTrainedTokenizerFast

    tok = RustTokenizer(BPE())
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(texts("general", 300) + texts("numbers", 300), trainers.BpeTrainer(
        vocab_size=700, special_tokens=["<|endoftext|>"], show_progress=False,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)  # the rule is lost
    PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>").save_pretrained(str(tmp_path / "base"))
    base = load_base_tokenizer(tmp_path / "base")
    conventions = detect_conventions(base)
    assert conventions.max_digit_run == 1 and ("S", "D") not in conventions.transitions
    corpus = tmp_path / "numbers.txt"
    corpus.write_text("\n".join(texts("finance", 300) + texts("numbers", 300, seed=3)) + "\n", encoding="utf-8")
    report = extend(tmp_path / "base", {"domain": corpus, "words": None}, tmp_path / "out", words=[],
                    new_tokens=150)
    assert report["new_tokens"]["rejected_by_reason"].get("digit run longer than 1", 0) > 0
    new = json.loads((tmp_path / "out" / "tokenizer.json").read_text(encoding="utf-8"))["model"]["vocab"]
    added = [t for t, i in new.items() if i >= report["base"]["vocab_size"]]
    assert added and not [t for t in added if conventions.violation(base.token_bytes(t))]


def boundaries(encoding) -> set[int]:
    return {start for start, _ in encoding.offsets} | {end for _, end in encoding.offsets}


@pytest.mark.parametrize("kind", KINDS)
def test_no_new_token_crosses_a_boundary_the_base_never_crosses(kind, bases, corpus, extended):
    out, report = extended[kind]
    base = load_base_tokenizer(bases[kind])
    conventions = detect_conventions(base)
    assert report["base_conventions"]["max_digit_run"] == conventions.max_digit_run
    vocab = json.loads((out / "tokenizer.json").read_text(encoding="utf-8"))["model"]["vocab"]
    added = [t for t, i in vocab.items() if i >= report["base"]["vocab_size"]]
    assert len(added) == report["new_tokens"]["added"] > 0
    assert [t for t in added if conventions.violation(base.token_bytes(t))] == []
    # Behaviour: wherever the base cuts between two characters that the conventions keep apart (digit-digit for a
    # single-digit base, space-digit, letter-space, ...), the extended tokenizer cuts there too.
    extended_tok = Tokenizer.from_file(str(out / "tokenizer.json"))
    texts = [line for path in (corpus["domain"], corpus["heldout"], corpus["general"])
             for line in path.read_text(encoding="utf-8").splitlines()[:150] if line.strip()]
    texts = [json.loads(t)["text"] if t.startswith("{") else t for t in texts]
    checked = 0
    for text, before, after in zip(texts, base.backend.encode_batch(texts, add_special_tokens=False),
                                   extended_tok.encode_batch(texts, add_special_tokens=False)):
        kept = boundaries(after)
        for cut in boundaries(before):
            if 0 < cut < len(text) and conventions.violation(text[cut - 1:cut + 1].encode()):
                checked += 1
                assert cut in kept, (text, cut, text[cut - 1:cut + 1])
    assert checked > 1000


@pytest.mark.parametrize("kind", ["sentencepiece", "metaspace"])
def test_digit_rule_is_what_stops_number_merges_on_a_split_digits_base(kind, extended):
    """Without the conventions these bases would have learned digit merges: the report counts the refusals."""
    _, report = extended[kind]
    reasons = report["new_tokens"]["rejected_by_reason"]
    assert reasons.get("digit run longer than 1", 0) + reasons.get("space followed by digit", 0) > 0


@pytest.mark.parametrize("kind", ["sentencepiece", "metaspace"])
def test_word_list_term_with_digits_is_reported_not_added_on_a_split_digits_base(kind, bases, corpus, tmp_path):
    words = tmp_path / "words.txt"
    words.write_text("沪深300\n资产负债表\n", encoding="utf-8")
    report = extend(bases[kind], corpus, tmp_path / "out", words=[str(words)])
    assert {"term": "沪深300", "status": "breaks_base_convention"} in report["terms"]["not_added"]
    assert report["terms"]["by_status"]["added"] == 1


BENGALI_DIGITS = str.maketrans("0123456789", "০১২৩৪৫৬৭৮৯")


@pytest.mark.parametrize("layout", ["sentencepiece", "metaspace"])
def test_no_ascii_digit_run_is_added_when_only_another_script_has_multi_digit_tokens(layout, tmp_path):
    """A multilingual SentencePiece model trained with split_digits (Gemma's case): SentencePiece splits ASCII digits
    only, so the vocabulary holds Bengali "২০", "▁২০২২" and no ASCII token with two digits. Digits are judged per
    script: the extension adds no token joining ASCII digits, whatever the corpus, and Bengali runs stay allowed."""
    import io

    import sentencepiece as spm
    from tokenizer_corpora import texts
    from tokenizer_fixtures import build_metaspace

    buffer = io.BytesIO()
    bengali = [t.translate(BENGALI_DIGITS) for t in texts("numbers", 300, seed=11)]
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts("general", 400) + texts("numbers", 300) + bengali), model_writer=buffer,
        vocab_size=900, model_type="bpe", byte_fallback=True, character_coverage=1.0,
        normalization_rule_name="identity", add_dummy_prefix=True, remove_extra_whitespaces=False,
        split_digits=True, hard_vocab_limit=False, unk_id=0, bos_id=1, eos_id=2, pad_id=-1, minloglevel=2,
        num_threads=1)
    (tmp_path / "sp").mkdir()
    model = tmp_path / "sp" / "tokenizer.model"
    model.write_bytes(buffer.getvalue())
    base_path = model if layout == "sentencepiece" else build_metaspace(tmp_path / "metaspace", model)
    base = load_base_tokenizer(base_path)

    def ascii_run(token: str) -> bool:
        return any(a.isascii() and a.isdigit() and b.isascii() and b.isdigit() for a, b in zip(token, token[1:]))

    mergeable = [t for i, t in enumerate(base.id_to_token) if t is not None and base.mergeable(i)]
    assert [t for t in mergeable if ascii_run(t)] == []
    assert sum(1 for t in mergeable if sum(c in "০১২৩৪৫৬৭৮৯" for c in t) >= 2) >= 10  # the other script's runs

    conventions = detect_conventions(base)
    assert conventions.max_digit_run == 1 and conventions.script_digit_runs["BENGALI"] >= 3
    assert conventions.violation("২০২".encode()) is None and conventions.violation(b"20") is not None
    corpus = tmp_path / "finance.txt"
    corpus.write_text("\n".join(texts("finance", 400) + texts("numbers", 300, seed=3)
                                 + [t.translate(BENGALI_DIGITS) for t in texts("numbers", 100, seed=5)]) + "\n",
                      encoding="utf-8")
    report = extend(base_path, {"domain": corpus, "words": None}, tmp_path / "out", words=[], new_tokens=300)
    assert report["base_conventions"]["max_digit_run_by_script"]["ASCII"] == 1
    assert report["base_conventions"]["digits"].startswith("ASCII digits: single digits; BENGALI digits: groups")
    # Without the per-script rule the corpus's years and amounts would have been merged: the refusals are counted.
    assert report["new_tokens"]["rejected_by_reason"].get("digit run longer than 1", 0) > 0
    vocab = json.loads((tmp_path / "out" / "tokenizer.json").read_text(encoding="utf-8"))["model"]["vocab"]
    added = [t for t, i in vocab.items() if i >= report["base"]["vocab_size"]]
    assert len(added) == report["new_tokens"]["added"] > 100
    assert [t for t in added if ascii_run(t)] == []
    # Behaviour: every ASCII digit of a number-heavy text is still its own token.
    extended = Tokenizer.from_file(str(tmp_path / "out" / "tokenizer.json"))
    text = "2023年营业收入为12345万元，同比增长20.5%，第1024条。"
    pieces = [p for p in extended.encode(text, add_special_tokens=False).tokens if not p.startswith("<0x")]
    assert [p for p in pieces if any(c in "0123456789" for c in p)] == list("2023123452051024")
