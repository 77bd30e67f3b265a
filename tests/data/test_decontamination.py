"""`yunshan data decontaminate`: Chinese-aware units, every hit with file:line on both sides (benchmark layouts read by
yunshan eval's readers), exact n-gram matching against a brute-force reference, streaming in blocks, contamination
lists that training applies, clean copies, and one-line errors."""

import csv
import json
import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from yunshan.cli import main
from yunshan.data import decontamination as dc
from yunshan.data.conversations import SftSourceArgs, read_sft_source
from yunshan.data.decontamination import Exclusions, NgramIndex, Text, find_overlaps, normalize

QUESTION = "企业因销售商品、提供劳务等经营活动应向购货单位收取的款项属于下列哪一项"
STATEMENT = "甲公司与乙公司签订买卖合同后乙公司未按约定期限交付货物甲公司可以主张何种权利"
LAW_QUESTION = "事实:被告人董某在哈尔滨市地铁站出口趁被害人不备窃取其香烟一条价值人民币一万四千元"


def units(text: str) -> list[str]:
    joined, u = dc.cut_units([normalize(text)])
    return dc.unit_texts(joined, u, 0, u.codes.size)


def test_units_are_cjk_characters_and_words_after_nfkc_and_case_folding():
    assert units("第１２条，Hello　WORLD！2023年ＡＢＣ") == ["第", "12", "条", "hello", "world", "2023", "年", "abc"]
    assert units("《民法典》第五百条") == units("民法典 第五百条") == list("民法典第五百条")
    assert units("café naïve") == ["café", "naïve"]  # combining marks stay inside their word
    assert units("かな한국어") == ["か", "な", "한", "국", "어"]
    assert units("…、。 \n\t") == []


@pytest.fixture
def eval_sets(tmp_path):
    """A C-Eval-layout set (dev/val/test), a CMMLU-layout set, LawBench (a pretty-printed JSON list) and JEC-QA."""
    root = tmp_path / "eval"
    fineval = root / "fineval"
    (fineval / "val").mkdir(parents=True)
    (fineval / "dev").mkdir()
    (fineval / "test").mkdir()
    (fineval / "subject_mapping.json").write_text(json.dumps({"acc": ["Accounting", "会计", "Accounting"]}),
                                                  encoding="utf-8")
    rows = [["id", "question", "A", "B", "C", "D", "answer", "explanation"],
            ["0", "利息保障倍数等于（ ）。", "营业收入", "负债总额", "销项税额", "息税前利润除以利息费用", "D", ""],
            ["1", QUESTION, "应收账款", "预付账款", "应付账款", "其他应收款", "A", ""]]
    for split, data in (("val", rows), ("dev", rows[:2]), ("test", [r[:6] for r in rows])):
        with open(fineval / split / f"acc_{split}.csv", "w", encoding="utf-8", newline="") as f:
            csv.writer(f).writerows(data)
    law = root / "lawbench"
    law.mkdir()
    (law / "3-1.json").write_text(json.dumps([
        {"instruction": "根据下列事实给出法条。", "question": "事实:某甲骑车撞伤行人。", "answer": "刑法第133条"},
        {"instruction": "根据下列事实给出法条。", "question": LAW_QUESTION, "answer": "刑法第264条"}],
        ensure_ascii=False, indent=2), encoding="utf-8")
    jec = root / "jecqa"
    jec.mkdir()
    records = [{"id": "j1", "statement": "短题", "option_list": dict(zip("ABCD", "甲乙丙丁")), "answer": ["A"]},
               {"id": "j2", "statement": STATEMENT, "option_list": dict(zip("ABCD", "甲乙丙丁")), "answer": ["B"]}]
    (jec / "0_test.json").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records),
                                     encoding="utf-8")
    return root


def corpus(tmp_path) -> Path:
    """Training documents: a question copied with other punctuation and widths, a LawBench fact, a JEC-QA statement
    inside a longer text, and clean documents."""
    docs = [
        "今天天气很好，适合出门散步。",
        "复习资料：企业因销售商品，提供劳务等经营活动应向购货单位收取的款项属于下列哪一项？答案是应收账款。",
        "与考试无关的另一段文本，讨论宏观经济形势与货币政策。",
        "案例：" + LAW_QUESTION.replace("一万四千元", "１４８７０元"),  # the first 40+ characters still match
        "司法考试真题：" + STATEMENT + "。",
    ]
    path = tmp_path / "corpus.jsonl"
    path.write_text("".join(json.dumps({"text": d}, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8")
    return path


def decontaminate(*argv) -> int:
    return main(["data", "decontaminate", *map(str, argv)])


def test_every_hit_names_both_sides_by_file_and_line(tmp_path, eval_sets, capsys):
    train = corpus(tmp_path)
    out = tmp_path / "out"
    assert decontaminate(train, "--data-dir", eval_sets, "--out", out) == 0
    hits = [json.loads(line) for line in (out / "hits.jsonl").read_text(encoding="utf-8").splitlines()]
    pairs = {(h["train"], h["eval"]) for h in hits}
    fin = eval_sets / "fineval"
    # The question is in val, test (3 rows of the same file layout) but not in dev (only its first row).
    assert pairs == {(f"{train}:2", f"{fin}/val/acc_val.csv:3"), (f"{train}:2", f"{fin}/test/acc_test.csv:3"),
                     (f"{train}:4", f"{eval_sets}/lawbench/3-1.json:7"),
                     (f"{train}:5", f"{eval_sets}/jecqa/0_test.json:2")}
    question = next(h for h in hits if h["eval"].endswith("acc_val.csv:3"))
    assert question["task"] == "fineval" and question["id"] == "1" and question["match"] == "企业因销售商品提供劳务等经"
    assert question["ngrams"] == len(units(QUESTION)) - 13 + 1  # every 13-gram of the question
    report = json.loads((out / "decontamination.json").read_text())
    assert report["records"] == 5 and report["contaminated"] == 3 and report["hits"] == 4
    assert report["eval_sets"]["jecqa"]["unchecked"] == 1  # "短题" and one-character options: no 13-gram
    listed = [json.loads(line) for line in (out / "contaminated.jsonl").read_text().splitlines()]
    assert [e["location"] for e in listed] == [f"{train}:2", f"{train}:4", f"{train}:5"]
    printed = capsys.readouterr().out
    assert "3 of 5 training records overlap" in printed and f"{train}:2  <->  {fin}/val/acc_val.csv:3" in printed
    # A longer n: the copied LawBench fact and JEC-QA statement still overlap, the question does not.
    assert decontaminate(train, "--data-dir", eval_sets, "--out", out, "--n", str(len(units(QUESTION)) + 1)) == 0
    assert {json.loads(line)["train"] for line in (out / "hits.jsonl").read_text().splitlines()} == {
        f"{train}:4", f"{train}:5"}


def test_drop_writes_clean_copies_and_training_leaves_the_listed_samples_out(tmp_path, eval_sets):
    sft = tmp_path / "sft.jsonl"
    samples = [{"messages": [{"role": "user", "content": "请回答：" + QUESTION}, {"role": "assistant", "content": "A"}]},
               {"messages": [{"role": "user", "content": "你好"}, {"role": "assistant", "content": "你好！"}]}]
    sft.write_text("".join(json.dumps(s, ensure_ascii=False) + "\n" for s in samples), encoding="utf-8")
    out = tmp_path / "out"
    assert decontaminate(sft, "--format", "messages", "--tasks", f"fineval={eval_sets / 'fineval'}", "--drop",
                         "--out", out) == 0
    clean = [json.loads(line) for line in (out / "clean" / "sft_sft.jsonl").read_text().splitlines()]
    assert clean == [samples[1]]
    counts = {}
    kept = read_sft_source(SftSourceArgs(name="s", path=str(sft), format="messages"), "fail", counts,
                           Exclusions.load(str(out / "contaminated.jsonl")))
    assert [s.messages for s in kept] == [samples[1]["messages"]] and counts == {"contaminated": 1}


def test_a_hash_match_counts_only_when_the_units_are_equal(monkeypatch):
    """With every unit hashed alike, every n-gram collides: only really shared n-grams may be reported."""
    import numpy as np

    monkeypatch.setattr(dc, "_mix", lambda x: np.zeros_like(x))
    index = NgramIndex.build([Text("e:1", ["甲乙丙丁戊己"])], n=3)
    found = dict((r.location, o) for r, o in find_overlaps([Text("t:1", ["子丑寅卯"]), Text("t:2", ["某某丙丁戊"])],
                                                             index))
    assert found["t:1"] == [] and [(o.ngrams, o.match) for o in found["t:2"]] == [(1, "丙丁戊")]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text("甲乙丙 ab,", max_size=30), min_size=1, max_size=6),
       st.lists(st.text("甲乙丙 ab,", max_size=40), min_size=1, max_size=8), st.integers(1, 4))
def test_overlaps_equal_a_brute_force_reference(eval_texts, train_texts, n):
    def grams(text):
        u = units(text)
        return {tuple(u[i: i + n]) for i in range(len(u) - n + 1)}

    index = NgramIndex.build([Text(f"e:{i}", [t]) for i, t in enumerate(eval_texts)], n=n)
    records = [Text(f"t:{i}", [t]) for i, t in enumerate(train_texts)]
    for record, overlaps in find_overlaps(records, index, block_chars=25):
        expected = {f"e:{i}": len(grams(e) & grams(record.fields[0])) for i, e in enumerate(eval_texts)}
        assert {o.item.location: o.ngrams for o in overlaps} == {k: v for k, v in expected.items() if v}


def test_training_records_stream_through_in_blocks():
    """Records are pulled a block at a time: the first result arrives long before the input is exhausted."""
    index = NgramIndex.build([Text("e:1", ["甲乙丙丁戊己庚辛壬癸"])], n=5)
    pulled = []

    def records():
        for i in range(10_000):
            pulled.append(i)
            yield Text(f"t:{i}", ["".join(random.Random(i).choices("子丑寅卯辰巳午未", k=100))])

    results = find_overlaps(records(), index, block_chars=5_000)
    next(results)
    assert len(pulled) == 50  # one block of 100-character records


def test_bad_input_is_one_line(tmp_path, eval_sets, capsys):
    train = corpus(tmp_path)
    assert decontaminate(train, "--tasks", f"fineval={tmp_path / 'nope'}", "--out", tmp_path / "o") == 1
    assert f"fineval: {tmp_path / 'nope'} does not exist" in capsys.readouterr().err
    assert decontaminate(train, "--tasks", "bpc", "--heldout", "general", "--out", tmp_path / "o") == 1
    assert "--heldout 'general': use LABEL=FILE" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok"}\n{"text": 3}\n', encoding="utf-8")
    assert decontaminate(bad, "--data-dir", eval_sets, "--out", tmp_path / "o") == 1
    assert f"{bad}:2: field 'text': non_string_field" in capsys.readouterr().err
    listing = tmp_path / "list.jsonl"
    listing.write_text('{"digest": "abc"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"list.jsonl:1: field 'digest'"):
        Exclusions.load(str(listing))
