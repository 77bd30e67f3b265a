"""Instruction formats, chat-template label masks (hand-computed, token by token), length policy, packing."""

import json

import pytest

from fixtures import train_tokenizer
from yunshan.data.chat import DEFAULT_CHAT_TEMPLATE, encode_conversation, ensure_chat_template, fit_to_length
from yunshan.data.conversations import (
    SftSourceArgs, from_alpaca, from_ceval_row, from_jecqa, from_sharegpt, mix_sft_sources, read_sft_source)
from yunshan.data.packing import best_fit_pack
from yunshan.data.records import BadRecordError

CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    tok = train_tokenizer(tmp_path_factory.mktemp("tok"))
    ensure_chat_template(tok)
    return tok


def ids(tok, text):
    return tok(text, add_special_tokens=False)["input_ids"]


def expected(tok, pieces):
    """Hand-built ids and labels from (text, trained?) pieces, tokenised piece by piece."""
    all_ids, labels = [], []
    for text, trained in pieces:
        piece = ids(tok, text)
        all_ids += piece
        labels += piece if trained else [-100] * len(piece)
    return all_ids, labels


def check(tok, messages, pieces):
    enc = encode_conversation(tok, messages)
    want_ids, want_labels = expected(tok, pieces)
    assert enc.input_ids == want_ids  # the pieces tokenise the same alone as in the whole text
    for t, (got, want) in enumerate(zip(enc.labels, want_labels)):
        assert got == want, (t, tok.decode([enc.input_ids[t]]), got, want)
    assert len(enc.labels) == len(want_labels)


def test_single_turn_mask(tokenizer):
    check(tokenizer, [{"role": "user", "content": "alpha beta"}, {"role": "assistant", "content": "gamma delta"}], [
        ("<|user|>\nalpha beta\n<|assistant|>\n", False), ("gamma delta</s>", True), ("\n", False)])


def test_multi_turn_mask_trains_every_assistant_turn(tokenizer):
    messages = [{"role": "user", "content": "资产 是"}, {"role": "assistant", "content": "负债 利润"},
                {"role": "user", "content": "court"}, {"role": "assistant", "content": "contract market"}]
    check(tokenizer, messages, [
        ("<|user|>\n资产 是\n<|assistant|>\n", False), ("负债 利润</s>", True), ("\n<|user|>\ncourt\n<|assistant|>\n", False),
        ("contract market</s>", True), ("\n", False)])


def test_system_prompt_with_a_chatml_template(tmp_path):
    tok = train_tokenizer(tmp_path)
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tok.chat_template = CHATML
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "alpha"},
                {"role": "assistant", "content": "beta gamma"}]
    enc = encode_conversation(tok, messages)
    start, end = tok.convert_tokens_to_ids(["<|im_start|>", "<|im_end|>"])
    want = ([start] + ids(tok, "system\nbe brief") + [end] + ids(tok, "\n") + [start] + ids(tok, "user\nalpha") + [end]
            + ids(tok, "\n") + [start] + ids(tok, "assistant\n"))
    answer = ids(tok, "beta gamma") + [end]  # the template's end-of-turn marker is trained, not an extra EOS
    assert enc.input_ids == want + answer + ids(tok, "\n")
    assert enc.labels == [-100] * len(want) + answer + [-100] * len(ids(tok, "\n"))


def test_template_without_end_marker_gets_eos(tmp_path):
    tok = train_tokenizer(tmp_path)
    tok.chat_template = "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}" \
                        "{% if add_generation_prompt %}assistant: {% endif %}"
    enc = encode_conversation(tok, [{"role": "user", "content": "alpha"}, {"role": "assistant", "content": "beta"}])
    assert enc.input_ids[enc.assistant_spans[0][1] - 1] == tok.eos_token_id
    assert enc.labels[enc.assistant_spans[0][1] - 1] == tok.eos_token_id


def test_default_template_is_added_only_when_missing(tmp_path):
    tok = train_tokenizer(tmp_path)
    assert ensure_chat_template(tok) and tok.chat_template == DEFAULT_CHAT_TEMPLATE
    tok.chat_template = CHATML
    assert not ensure_chat_template(tok) and tok.chat_template == CHATML


def test_overlong_samples_never_cut_inside_a_trained_answer(tokenizer):
    messages = [{"role": "user", "content": "alpha " * 20}, {"role": "assistant", "content": "beta " * 10},
                {"role": "user", "content": "gamma"}, {"role": "assistant", "content": "delta epsilon"}]
    enc = encode_conversation(tokenizer, messages)
    first_answer_end = enc.assistant_spans[0][1]
    max_len = len(enc.input_ids) - first_answer_end + 3  # the cut lands inside the first answer
    fitted, reason = fit_to_length(enc, max_len, "truncate_prompt")
    assert reason == "truncated_prompt" and len(fitted.input_ids) == max_len
    trained = [l for l in fitted.labels if l != -100]
    assert tokenizer.decode(trained) == "delta epsilon</s>"  # the cut answer is not trained on
    assert fit_to_length(enc, max_len, "drop") == (None, "too_long")
    assert fit_to_length(enc, 4, "truncate_prompt") == (None, "answer_too_long")  # answer + one prompt token > 4


def test_format_conversions():
    alpaca = from_alpaca({"system": "s", "instruction": "q", "input": "ctx", "output": "a", "history": [["q0", "a0"]]})
    assert alpaca == [{"role": "system", "content": "s"}, {"role": "user", "content": "q0"},
                      {"role": "assistant", "content": "a0"}, {"role": "user", "content": "q\nctx"},
                      {"role": "assistant", "content": "a"}]
    assert from_sharegpt({"conversations": [{"from": "human", "value": "q"}, {"from": "gpt", "value": "a"}]}) == [
        {"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]
    row = {"id": "0", "question": "题", "A": "甲", "B": "乙", "C": "丙", "D": "丁", "answer": "C", "explanation": "因为"}
    ceval = from_ceval_row(row, "会计")
    assert ceval[0]["content"] == "以下是关于会计的单项选择题，请选出正确答案。\n\n题\nA. 甲\nB. 乙\nC. 丙\nD. 丁"
    assert ceval[1]["content"] == "答案：C\n解析：因为"
    jec = from_jecqa({"statement": "s", "option_list": {"B": "b", "A": "a", "C": "c", "D": "d"}, "answer": ["C", "A"]})
    assert jec[1]["content"] == "答案：A、C" and "\nA. a\nB. b" in jec[0]["content"]


BAD = [
    ('{"messages": [{"role": "assistant", "content": "a"}]}', "wrong_role_order", "messages[0].role"),
    ('{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": " "}]}', "empty_assistant",
     "messages[1].content"),
    ('{"messages": [{"role": "user", "content": "q"}, {"role": "bot", "content": "a"}]}', "unknown_role",
     "messages[1].role"),
    ('{"msgs": []}', "missing_field", "messages"),
    ('{"messages": [{"role": "user", "content": "q"}, {"role": "assistant"}]}', "missing_field",
     "messages[1].content"),
    ('{"messages": [', "malformed_json", None),
]


@pytest.mark.parametrize("line, reason, field", BAD)
def test_bad_records_fail_with_file_line_and_field(tmp_path, line, reason, field):
    good = '{"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}'
    path = tmp_path / "m.jsonl"
    path.write_text(good + "\n" + line + "\n")
    args = SftSourceArgs(name="legal", path=str(path), format="messages")
    with pytest.raises(BadRecordError) as err:
        read_sft_source(args, "fail", {})
    assert f"{path}:2" in str(err.value) and reason in str(err.value)
    if field:
        assert f"field {field!r}" in str(err.value)
    counts = {}
    assert len(read_sft_source(args, "skip", counts)) == 1 and counts == {f"bad:{reason}": 1}


def test_ceval_csv_with_a_missing_column_or_bad_answer(tmp_path):
    (tmp_path / "tax_train.csv").write_text("id,question,A,B,C,answer\n0,q,a,b,c,A\n")
    with pytest.raises(BadRecordError, match=r"tax_train.csv:1: field 'D': missing_field"):
        read_sft_source(SftSourceArgs(name="x", path=str(tmp_path / "tax_train.csv"), format="ceval"), "fail", {})
    (tmp_path / "tax_train.csv").write_text("id,question,A,B,C,D,answer\n0,q,a,b,c,d,E\n")
    with pytest.raises(BadRecordError, match=r"tax_train.csv:2: field 'answer': bad_answer"):
        read_sft_source(SftSourceArgs(name="x", path=str(tmp_path / "tax_train.csv"), format="ceval"), "fail", {})


def _sources(tmp_path):
    out = {}
    for name, n in (("general", 40), ("legal", 20), ("finance", 10)):
        path = tmp_path / f"{name}.jsonl"
        path.write_text("".join(json.dumps({"instruction": f"{name} q{i}", "output": f"a{i}"}) + "\n" for i in range(n)))
        out[name] = path
    return out


def test_mixing_weights_caps_determinism(tmp_path):
    files = _sources(tmp_path)
    args = [SftSourceArgs(name="general", path=str(files["general"]), format="alpaca", weight=0.5),
            SftSourceArgs(name="legal", path=str(files["legal"]), format="alpaca", weight=2.0, heldout=2),
            SftSourceArgs(name="finance", path=str(files["finance"]), format="alpaca", max_samples=4)]
    per = {a.name: read_sft_source(a, "fail", {}) for a in args}
    train, held = mix_sft_sources(per, args, seed=1)
    counts = {n: sum(1 for s in train if s.source == n) for n in per}
    assert counts == {"general": 20, "legal": 36, "finance": 4} and len(held) == 2
    assert all(s.source == "legal" for s in held)
    assert not {s.location for s in held} & {s.location for s in train}  # held out = never trained on
    again, _ = mix_sft_sources(per, args, seed=1)
    other, _ = mix_sft_sources(per, args, seed=2)
    order = [s.location for s in train]
    assert order == [s.location for s in again] and order != [s.location for s in other]
    assert {n: sum(1 for s in other if s.source == n) for n in per} == counts  # same composition
    # One shuffled set: sources are interleaved, not in blocks.
    firsts = [s.source for s in train[:20]]
    assert len(set(firsts)) == 3


def test_best_fit_packing_places_every_sample_once_within_capacity():
    import random

    rng = random.Random(0)
    lengths = [rng.randint(5, 120) for _ in range(500)]
    bins = best_fit_pack(lengths, 128)
    placed = sorted(i for b in bins for i in b)
    assert placed == list(range(500))
    assert all(sum(lengths[i] for i in b) <= 128 for b in bins)
    assert sum(lengths) / (len(bins) * 128) > 0.95  # dense
    with pytest.raises(ValueError, match="more than the packing capacity"):
        best_fit_pack([200], 128)
