"""Preference data (yunshan.data.preference): every format users hold pairs in, the pairing rules of scored
completions, bad records counted or refused with their location, and TRL's length rule reproduced exactly."""

import json
import re
import random

import pytest

from fixtures import train_tokenizer
from yunshan.data.preference import (
    Pair, PrefSourceArgs, encode_pair, fit_pair, fit_unpaired, encode_unpaired, mix_preference_sources,
    read_preference_source, unpair, Unpaired)
from yunshan.data.records import BadRecordError


def write(path, records):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def read(path, fmt, policy="fail", **extra):
    counts = {}
    records = read_preference_source(PrefSourceArgs(name="s", path=str(path), format=fmt, **extra), policy, counts)
    return [item for record in records for item in record], counts


USER = [{"role": "user", "content": "How long is the limitation period?"}]


def test_pairs_as_strings_messages_implicit_prompts_and_alpaca_rankings(tmp_path):
    records = [
        {"prompt": "Q1", "chosen": "right", "rejected": "wrong"},  # TRL standard, explicit prompt
        {"prompt": USER, "chosen": [{"role": "assistant", "content": "three years"}],  # TRL conversational
         "rejected": [{"role": "assistant", "content": "ten years"}]},
        {"chosen": USER + [{"role": "assistant", "content": "three years"}],  # implicit prompt (shared turns)
         "rejected": USER + [{"role": "assistant", "content": "ten years"}]},
        {"prompt": USER[0]["content"], "chosen": USER + [{"role": "assistant", "content": "three years"}],  # H4 style
         "rejected": USER + [{"role": "assistant", "content": "ten years"}], "system": "Cite the rule."},
        {"instruction": "Name the period", "input": "civil claims", "chosen": "three years", "rejected": "one year"},
    ]
    items, counts = read(write(tmp_path / "p.jsonl", records), "pairs")
    assert counts == {} and len(items) == 5
    assert items[0].prompt == [{"role": "user", "content": "Q1"}] and (items[0].chosen, items[0].rejected) == (
        "right", "wrong")
    for item in items[1:3]:
        assert item.prompt == USER and (item.chosen, item.rejected) == ("three years", "ten years")
    assert items[3].prompt == [{"role": "system", "content": "Cite the rule."}] + USER
    assert items[4].prompt == [{"role": "user", "content": "Name the period\ncivil claims"}]
    assert items[2].location.endswith("p.jsonl:3")


def test_sharegpt_pairs_and_kto_samples(tmp_path):
    share = write(tmp_path / "s.jsonl", [{
        "conversations": [{"from": "human", "value": "hi"}, {"from": "gpt", "value": "hello"},
                          {"from": "human", "value": "period?"}],
        "chosen": {"from": "gpt", "value": "three years"}, "rejected": "ten years", "system": "be careful"}])
    (pair,), _ = read(share, "sharegpt")
    assert [t["role"] for t in pair.prompt] == ["system", "user", "assistant", "user"]
    assert (pair.chosen, pair.rejected) == ("three years", "ten years")
    kto = write(tmp_path / "k.jsonl", [{"prompt": "Q", "completion": "good", "label": True},
                                       {"prompt": USER, "completion": [{"role": "assistant", "content": "bad"}],
                                        "label": False}])
    items, _ = read(kto, "kto")
    assert [(i.completion, i.label) for i in items] == [("good", True), ("bad", False)]
    # pairs become KTO samples as TRL's unpair_preference_dataset makes them
    assert [(u.completion, u.label) for u in unpair([pair])] == [("three years", True), ("ten years", False)]


@pytest.mark.parametrize("rule, expected", [
    ("best_worst", [("c", "a")]),
    ("all_pairs", [("b", "a"), ("c", "a"), ("c", "b"), ("d", "a"), ("d", "b")]),
])
def test_scored_completions_pair_by_the_stated_rule(tmp_path, rule, expected):
    scores = {"a": 1.0, "b": 3.0, "c": 5.0, "d": 5.0}  # c and d tie for best: the first in file order wins
    record = {"instruction": "Q", "completions": [{"response": k, "overall_score": v} for k, v in scores.items()]}
    items, _ = read(write(tmp_path / "u.jsonl", [record]), "ultrafeedback", pairing=rule)
    assert sorted((i.chosen, i.rejected) for i in items) == sorted(expected)


def test_best_random_rejects_a_seeded_lower_completion_and_a_gap_is_respected(tmp_path):
    record = {"prompt": "Q", "completions": [{"text": t, "rating": s} for t, s in
                                             (("top", 9), ("x", 8.9), ("y", 4), ("z", 2))]}
    path = write(tmp_path / "u.jsonl", [record] * 30)
    items, _ = read(path, "ultrafeedback", pairing="best_random", response_field="text", score_field="rating",
                    min_score_gap=0.5)
    assert {i.chosen for i in items} == {"top"} and {i.rejected for i in items} == {"y", "z"}  # x is within the gap
    again, _ = read(path, "ultrafeedback", pairing="best_random", response_field="text", score_field="rating",
                    min_score_gap=0.5)
    assert [i.rejected for i in again] == [i.rejected for i in items]  # seeded: the same pairs every read


BAD = [
    ({"prompt": "Q", "chosen": "same", "rejected": " same "}, "identical_answers", "rejected"),
    ({"prompt": "Q", "chosen": "", "rejected": "x"}, "empty_assistant", "chosen"),
    ({"prompt": "Q", "chosen": "x"}, "missing_field", "rejected"),
    ({"prompt": [{"role": "assistant", "content": "x"}], "chosen": "a", "rejected": "b"}, "wrong_role_order",
     "prompt[0].role"),
    ({"chosen": "a", "rejected": "b"}, "missing_field", "prompt"),
]


@pytest.mark.parametrize("record, reason, field", BAD)
def test_bad_pairs_fail_with_file_line_and_field_or_are_counted(tmp_path, record, reason, field):
    path = write(tmp_path / "bad.jsonl", [{"prompt": "ok", "chosen": "a", "rejected": "b"}, record])
    with pytest.raises(BadRecordError, match=re.escape(f"bad.jsonl:2: field {field!r}: {reason}")):
        read(path, "pairs")
    items, counts = read(path, "pairs", policy="skip")
    assert len(items) == 1 and counts == {f"bad:{reason}": 1}


def test_bad_scored_records_and_kto_labels(tmp_path):
    path = write(tmp_path / "u.jsonl", [
        {"instruction": "Q", "completions": [{"response": "a", "overall_score": 3}, {"response": "b",
                                                                                     "overall_score": 3}]},
        {"instruction": "Q", "completions": [{"response": "a", "overall_score": "high"}]}])
    _, counts = read(path, "ultrafeedback", policy="skip")
    assert counts == {"bad:no_pair": 1, "bad:bad_score": 1}
    _, counts = read(write(tmp_path / "k.jsonl", [{"prompt": "Q", "completion": "a", "label": "yes"}]), "kto",
                     policy="skip")
    assert counts == {"bad:bad_label": 1}


def test_mixing_holds_out_whole_records_and_weights_by_source(tmp_path):
    a = [[Pair([{"role": "user", "content": f"a{i}"}], "x", "y", "a")] for i in range(10)]
    b = [[Pair([{"role": "user", "content": f"b{i}"}], "x", "y", "b") for _ in range(3)] for i in range(4)]
    sources = [PrefSourceArgs(name="a", path="-", format="pairs", weight=2.0, heldout=2),
               PrefSourceArgs(name="b", path="-", format="ultrafeedback", heldout=2)]
    train, held = mix_preference_sources({"a": a, "b": b}, sources, seed=0)
    held_b = [p for p in held if p.source == "b"]
    assert len([p for p in held if p.source == "a"]) == 2 and len(held_b) == 3  # one whole record of three pairs
    assert not {p.prompt[0]["content"] for p in held_b} & {p.prompt[0]["content"] for p in train}
    assert len([p for p in train if p.source == "a"]) == 16 and len([p for p in train if p.source == "b"]) == 9
    again, _ = mix_preference_sources({"a": a, "b": b}, sources, seed=0)
    assert [p.prompt for p in again] == [p.prompt for p in train]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    from yunshan.data.chat import ensure_chat_template

    rng = random.Random(0)
    words = "alpha beta gamma delta court contract asset profit".split()
    tok = train_tokenizer(tmp_path_factory.mktemp("tok"), [" ".join(rng.choices(words, k=20)) for _ in range(200)],
                          vocab_size=300)
    ensure_chat_template(tok)
    return tok


def test_encoding_follows_the_chat_template_and_sft_masks(tokenizer):
    from yunshan.data.chat import encode_conversation

    pair = Pair(USER, "three years", "ten years")
    enc, ends = encode_pair(tokenizer, pair)
    full = encode_conversation(tokenizer, USER + [{"role": "assistant", "content": "three years"}])
    trained = [t for t, label in zip(full.input_ids, full.labels) if label != -100]
    # the answer is exactly what SFT trains on (the turn and its end-of-turn marker), the prompt everything before
    assert enc.chosen_ids == trained and enc.prompt_ids + enc.chosen_ids == full.input_ids[:len(enc.prompt_ids)
                                                                                         + len(trained)]
    assert enc.chosen_ids[-1] == tokenizer.eos_token_id and ends == {tokenizer.eos_token_id}
    assert tokenizer.decode(enc.prompt_ids).endswith("<|assistant|>\n")


def test_length_fitting_reproduces_trls_rule_and_counts_it(tokenizer):
    """Fitted pairs collate to exactly what TRL 1.16's DataCollatorForPreference makes of the whole pair with
    max_length (keep_start), and TRL's drop of prompts that fill max_length is reproduced and counted."""
    from trl.trainer.dpo_trainer import DataCollatorForPreference

    long_answer = " ".join(["alpha beta gamma"] * 20)
    enc, _ = encode_pair(tokenizer, Pair(USER, long_answer, "short"))
    limit = len(enc.prompt_ids) + 10
    fitted, reasons = fit_pair(enc, limit, "truncate")
    assert reasons == ["truncated_chosen"] and len(fitted.prompt_ids) + len(fitted.chosen_ids) == limit
    ours = DataCollatorForPreference(pad_token_id=0)([vars(fitted)])
    trls = DataCollatorForPreference(pad_token_id=0, max_length=limit)([vars(enc)])
    for key in ("input_ids", "attention_mask", "completion_mask"):
        assert ours[key].tolist() == trls[key].tolist(), key
    assert fit_pair(enc, len(enc.prompt_ids), "truncate") == (None, ["prompt_too_long"])
    assert fit_pair(enc, limit, "drop") == (None, ["too_long"])
    with pytest.raises(ValueError, match="field 'prompt': too long"):
        fit_pair(enc, limit, "fail")
    # answers that agree on their first tokens become the same once cut: dropped, not trained on as a tie
    same_start, _ = encode_pair(tokenizer, Pair(USER, long_answer + " court", long_answer + " asset"))
    assert fit_pair(same_start, limit, "truncate") == (None, ["identical_after_truncation"])
    one, _ = encode_unpaired(tokenizer, Unpaired(USER, long_answer, True))
    cut, reasons = fit_unpaired(one, limit, "truncate")
    assert reasons == ["truncated_completion"] and len(cut.prompt_ids) + len(cut.completion_ids) == limit
