"""`yunshan data decontaminate`: units and the exact normalisation, calibrated windows, the share of each evaluation
item found in training (Llama 2's measure) against a brute-force reference, boilerplate left out and counted,
every overlap with file:line on both sides, streaming within a record in bounded memory, contamination lists that
training applies, clean copies, the real laws corpus against real LawBench, and one-line errors."""

import csv
import json
import random
import tempfile
import unicodedata
from pathlib import Path

import numpy as np
import pytest
from fixtures import realdata
from hypothesis import given, settings
from hypothesis import strategies as st

from yunshan.cli import main
from yunshan.data import ngrams
from yunshan.data.conversations import SftSourceArgs, read_sft_source
from yunshan.data.decontamination import Exclusions, NgramIndex, Scan, Text
from yunshan.data.ngrams import CJK, SEPARATOR, WORD, UnitTables, cut_units, normalize, windows

QUESTION = "企业因销售商品、提供劳务等经营活动应向购货单位收取的款项在会计上属于下列哪一个会计科目"
STATEMENT = "甲公司与乙公司签订买卖合同后乙公司未按约定期限交付货物甲公司可以主张何种权利以维护自身利益"
LAW_QUESTION = "事实:被告人董某于当年三月某日晚间在哈尔滨市地铁站出口趁被害人不备窃取其香烟一条价值人民币一万四千元后逃离现场被抓获"
# Hard cases of NFKC: combining marks, expansions, Hangul jamo that compose, a dotted capital I, final sigma.
TRICKY = "甲乙丙丁 ab,。Ｃ1e\u0301ﬁ…½\u1100\u1161가İ\u0323ÅΣς"


def units(text: str) -> list[str]:
    u = cut_units(UnitTables(), [text])
    return u.text(0, len(u))


def test_units_are_cjk_characters_and_words_after_nfkc_and_case_folding():
    assert units("第１２条，Hello　WORLD！2023年ＡＢＣ") == ["第", "12", "条", "hello", "world", "2023", "年", "abc"]
    assert units("《民法典》第五百条") == units("民法典 第五百条") == list("民法典第五百条")
    assert units("café naïve") == ["café", "naïve"]  # combining marks stay inside their word
    assert units("かな한국어") == ["か", "な", "한", "국", "어"]
    assert units("…、。 \n\t") == []


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(TRICKY, max_size=25), min_size=1, max_size=4))
def test_the_table_normalisation_is_unicodedata_nfkc_then_casefold(texts):
    """The per-code-point tables (and unicodedata around context characters) give exactly NFKC + casefold."""
    tables = UnitTables()
    u = cut_units(tables, texts)
    assert u.normalized.tobytes().decode("utf-32-le") == "\x00".join(normalize(t) for t in texts)


def test_only_combining_marks_and_jamo_compose_with_the_character_before():
    """The fast path rests on this: every second character of a canonical decomposition is a mark or a jamo."""
    seconds = set()
    for cp in range(0x110000):
        d = unicodedata.decomposition(chr(cp))
        if d and not d.startswith("<"):
            seconds.update(int(p, 16) for p in d.split()[1:])
    assert seconds and all(unicodedata.category(chr(c)).startswith("M") or 0x1100 <= c <= 0x11FF for c in seconds)


def test_windows_are_13_words_or_25_cjk_characters():
    tables = UnitTables()

    def lengths(text, n=13, cjk_n=25):
        u = cut_units(tables, [text])
        return windows(tables, u, n, cjk_n).length.tolist()

    chinese = "中华人民共和国民法典是新中国第一部以法典命名的法律在法律体系中居于基础性地位"
    assert set(lengths(chinese)) == {25} and len(lengths(chinese)) == len(units(chinese)) - 24
    english = " ".join(f"word{i}" for i in range(20))
    assert set(lengths(english)) == {13} and len(lengths(english)) == 20 - 12
    # A mix: 3 numbers weigh 3 words, so 13 - 3 = 10 words' worth of characters (10 * 25 / 13 -> 20) complete it.
    assert lengths("2016年3月28日" + "被告人颜某在本市洪山区马湖新村足球场")[0] == 3 + 4 + 16
    assert lengths("短题") == []


def _reference_units(text):
    out, word = [], ""
    for ch in normalize(text):
        kind = ngrams._class_of(ch)
        if kind == WORD:
            word += ch
            continue
        if word:
            out.append(word)
            word = ""
        if kind == CJK:
            out.append(ch)
    return out + ([word] if word else [])


def _reference_windows(units_, n, cjk_n):
    found = []
    for i in range(len(units_)):
        weight = 0
        for j in range(i, len(units_)):
            weight += cjk_n if ngrams._class_of(units_[j][0]) == WORD else n
            if weight >= n * cjk_n:
                found.append((i, j + 1 - i, tuple(units_[i: j + 1])))
                break
    return found


def _reference(items, records, n, cjk_n, boilerplate_train, boilerplate_eval):
    """Shares written out directly from the definitions (yunshan/data/decontamination.py)."""
    item_units = [[_reference_units(f) for f in fields] for fields in items]
    record_windows = [{w for f in r for _, _, w in _reference_windows(_reference_units(f), n, cjk_n)} for r in records]
    eval_texts, train_records = {}, {}
    for fields in items:
        for f in fields:
            for _, _, w in _reference_windows(_reference_units(f), n, cjk_n):
                eval_texts.setdefault(w, set()).add(f)
    for found in record_windows:
        for w in found:
            train_records[w] = train_records.get(w, 0) + 1

    def boilerplate(w):
        return (boilerplate_eval and len(eval_texts.get(w, ())) >= boilerplate_eval) or (
            boilerplate_train and train_records.get(w, 0) >= boilerplate_train)

    shares, raw, pairs = [], [], {}
    for i, fields in enumerate(item_units):
        total, covered, covered_raw, offset = sum(len(u) for u in fields), set(), set(), 0
        for units_ in fields:
            for s, length, w in _reference_windows(units_, n, cjk_n):
                span = range(offset + s, offset + s + length)
                if w in train_records:
                    covered_raw.update(span)
                    if not boilerplate(w):
                        covered.update(span)
                for r, found in enumerate(record_windows):
                    if w in found and not boilerplate(w):
                        pairs.setdefault((r, i), set()).update(span)
            offset += len(units_)
        shares.append(len(covered) / total if total else 0.0)
        raw.append(len(covered_raw) / total if total else 0.0)
    return shares, raw, {k: len(v) / sum(len(u) for u in item_units[k[1]]) for k, v in pairs.items()}


def _run(items, records, n, cjk_n, boilerplate_train=0, boilerplate_eval=0, block_chars=1 << 18, index_block=1 << 18):
    index = NgramIndex.build([Text(f"e:{i}", f) for i, f in enumerate(items)], n, cjk_n, block_chars=index_block)
    pairs = {}
    with tempfile.TemporaryDirectory() as work:
        scan = Scan(index, work, boilerplate_train, boilerplate_eval, block_chars=block_chars)
        for _ in scan.read([Text(f"t:{r}", f, r) for r, f in enumerate(records)], lambda r: {"r": r.tag}):
            pass
        result = scan.resolve(lambda d, ps: pairs.update({(d["r"], p.item): p.share for p in ps}))
    return result, pairs


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.text(TRICKY, max_size=30), min_size=1, max_size=2), min_size=1, max_size=5),
       st.lists(st.lists(st.text(TRICKY, max_size=80), min_size=1, max_size=2), min_size=1, max_size=8),
       st.integers(1, 4), st.integers(1, 6), st.sampled_from([0, 2, 3]), st.sampled_from([0, 2]),
       st.integers(3, 60), st.integers(5, 50))
def test_shares_equal_a_brute_force_reference(items, records, n, cjk_n, bt, be, block_chars, index_block):
    """Whatever the block size (records cut into pieces that carry windows over), the item shares (boilerplate out
    and in) and every record-item share equal the definitions computed by brute force."""
    result, pairs = _run(items, records, n, cjk_n, bt, be, block_chars, index_block)
    shares, raw, expected = _reference(items, records, n, cjk_n, bt, be)
    assert np.allclose(result.shares, shares) and np.allclose(result.raw_shares, raw)
    expected = {k: v for k, v in expected.items() if v > 0}
    assert pairs.keys() == expected.keys() and all(abs(pairs[k] - v) < 1e-9 for k, v in expected.items())


def test_a_hash_match_counts_only_when_the_units_are_equal(monkeypatch):
    """With every window's hash equal, windows are told apart by the second hash in the index and confirmed unit by
    unit in training: the shares are the reference's."""
    real = ngrams._window_hash
    monkeypatch.setattr(ngrams, "_window_hash", lambda tables, codes, first, last, base: (
        np.zeros(first.size, dtype=np.uint64) if base == ngrams._NGRAM_BASE else real(tables, codes, first, last, base)))
    items, records = [["甲乙丙丁戊己"], ["子丑寅卯"]], [["子丑寅卯辰"], ["某某丙丁戊"]]
    result, pairs = _run(items, records, 1, 3)
    shares, raw, expected = _reference(items, records, 1, 3, 0, 0)
    assert np.allclose(result.shares, shares) and pairs == {k: v for k, v in expected.items() if v}
    assert pairs == {(0, 1): 1.0, (1, 0): 0.5}


def test_one_long_record_streams_in_bounded_memory():
    """Issue 27 item 9: a record far larger than a block is cut into pieces (windows carried across the cuts), so
    the memory of the pass is about one block whatever the record's size, and the result is the one in one piece."""
    import tracemalloc

    rng = random.Random(0)
    alphabet = "甲乙丙丁戊己庚辛壬癸子丑寅卯辰巳午未申酉戌亥"
    planted = "".join(rng.choices(alphabet, k=40))
    text = "".join(rng.choices(alphabet + "，。 ab12", k=2_000_000)) + planted + "".join(rng.choices(alphabet, k=1000))
    index = NgramIndex.build([Text("e:1", [planted])])
    with tempfile.TemporaryDirectory() as work:
        scan = Scan(index, work, block_chars=1 << 16)
        tracemalloc.start()
        for _ in scan.read([Text("t:1", [text])], lambda r: {}):
            pass
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        result = scan.resolve()
    assert peak < 40e6, f"{peak / 1e6:.0f} MB for a {len(text) / 1e6:.0f}M-character record"  # was ~80 bytes/char
    assert result.shares[0] == 1.0


def test_one_long_record_takes_no_more_memory_than_many_short_ones(tmp_path):
    """Issue 27 item 9, through the command in fresh processes: one record of 4 million characters peaks within
    100 MB of the same text as 400 records (before: about 80 bytes per character of the record held at once)."""
    import subprocess
    import sys

    rng = random.Random(1)
    text = "".join(rng.choices("甲乙丙丁戊己庚辛壬癸子丑寅卯辰巳午未申酉戌亥，。", k=4_000_000))
    eval_dir = tmp_path / "lawbench"
    eval_dir.mkdir()
    (eval_dir / "1-1.json").write_text(json.dumps([{"instruction": "i", "question": text[1000:1100], "answer": "略"}],
                                                  ensure_ascii=False), encoding="utf-8")
    peaks = {}
    for name, docs in (("one", [text]), ("many", [text[i: i + 10_000] for i in range(0, len(text), 10_000)])):
        corpus_file = tmp_path / f"{name}.jsonl"
        corpus_file.write_text("".join(json.dumps({"text": d}, ensure_ascii=False) + "\n" for d in docs),
                               encoding="utf-8")
        # VmHWM: the peak of this process's own memory (ru_maxrss would start at the forking parent's size).
        code = ("from yunshan.cli import main; "
                f"assert main(['data', 'decontaminate', {str(corpus_file)!r}, '--tasks', 'lawbench={eval_dir}', "
                f"'--out', {str(tmp_path / name)!r}]) == 0; "
                "print([l.split()[1] for l in open('/proc/self/status') if l.startswith('VmHWM')][0])")
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              env={**__import__("os").environ, "TQDM_DISABLE": "1"})
        assert done.returncode == 0, done.stderr[-2000:]
        peaks[name] = int(done.stdout.split()[-1]) / 1024
        report = json.loads((tmp_path / name / "decontamination.json").read_text())
        assert report["eval_sets"]["lawbench"]["dirty"] == 1
    assert peaks["one"] - peaks["many"] < 100, peaks


@pytest.fixture
def eval_sets(tmp_path):
    """A C-Eval-layout set (dev/val/test), LawBench (a pretty-printed JSON list) and JEC-QA."""
    root = tmp_path / "eval"
    fineval = root / "fineval"
    for split in ("val", "dev", "test"):
        (fineval / split).mkdir(parents=True)
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
        {"instruction": "根据下列事实给出法条。", "question": "事实:某甲骑车撞伤行人。", "answer": "法条:刑法第133条"},
        {"instruction": "根据下列事实给出法条。", "question": LAW_QUESTION, "answer": "法条:刑法第264条"}],
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
        "复习资料：企业因销售商品，提供劳务等经营活动应向购货单位收取的款项在会计上属于下列哪一个会计科目？答案是应收账款。",
        "与考试无关的另一段文本，讨论宏观经济形势与货币政策。",
        "案例：" + LAW_QUESTION.replace("后逃离现场被抓获", "。"),  # most of the fact still matches
        "司法考试真题：" + STATEMENT + "。",
    ]
    path = tmp_path / "train" / "corpus.jsonl"
    path.parent.mkdir()
    path.write_text("".join(json.dumps({"text": d}, ensure_ascii=False) + "\n" for d in docs), encoding="utf-8")
    return path


def decontaminate(*argv) -> int:
    return main(["data", "decontaminate", *map(str, argv)])


def test_every_overlap_names_both_sides_by_file_and_line(tmp_path, eval_sets, capsys):
    train = corpus(tmp_path)
    out = tmp_path / "out"
    assert decontaminate(train, "--data-dir", eval_sets, "--out", out) == 0
    hits = [json.loads(line) for line in (out / "hits.jsonl").read_text(encoding="utf-8").splitlines()]
    pairs = {(h["train"], h["eval"]) for h in hits}
    fin = eval_sets / "fineval"
    # The question is in val and test (the same row) but not in dev (only its first row).
    assert pairs == {(f"{train}:2", f"{fin}/val/acc_val.csv:3"), (f"{train}:2", f"{fin}/test/acc_test.csv:3"),
                     (f"{train}:4", f"{eval_sets}/lawbench/3-1.json:7"),
                     (f"{train}:5", f"{eval_sets}/jecqa/0_test.json:2")}
    question = next(h for h in hits if h["eval"].endswith("acc_val.csv:3"))
    assert question["task"] == "fineval" and question["id"] == "1"
    assert question["match"] == "".join(units(QUESTION)[:25]) == "企业因销售商品提供劳务等经营活动应向购货单位收取的"
    assert question["windows"] == len(units(QUESTION)) - 25 + 1  # every window of the question
    item_units = len(units(QUESTION)) + sum(len(units(o)) for o in ("应收账款", "预付账款", "应付账款", "其他应收款"))
    assert question["share"] == round(len(units(QUESTION)) / item_units, 4)  # the options are not in the corpus
    report = json.loads((out / "decontamination.json").read_text())
    assert report["records"] == 5 and report["overlapping"] == 3 and report["hits"] == 4
    assert report["eval_sets"]["jecqa"]["unchecked"] == 1  # "短题" and one-character options: no window
    assert report["eval_sets"]["lawbench"]["groups"]["3-1"]["items"] == 2
    items = {json.loads(line)["eval"]: json.loads(line) for line in (out / "items.jsonl").read_text().splitlines()}
    assert items[f"{fin}/val/acc_val.csv:3"]["category"] == "partial"  # question found, options not
    assert items[f"{eval_sets}/jecqa/0_test.json:2"]["top_record"] == f"{train}:5"
    listed = [json.loads(line) for line in (out / "contaminated.jsonl").read_text().splitlines()]
    assert [e["location"] for e in listed] == [f"{train}:2", f"{train}:4", f"{train}:5"]  # each holds >= half
    printed = capsys.readouterr().out
    assert "3 of 5 training records share a window" in printed
    # Longer windows: the copied LawBench fact and JEC-QA statement still overlap, the question does not.
    assert decontaminate(train, "--data-dir", eval_sets, "--out", out, "--cjk-n", str(len(units(QUESTION)) + 1)) == 0
    assert {json.loads(line)["train"] for line in (out / "hits.jsonl").read_text().splitlines()} == {
        f"{train}:4", f"{train}:5"}


def test_boilerplate_is_left_out_and_counted(tmp_path):
    """A formula every training record holds (and so does an evaluation item) is boilerplate: the item it makes
    'found' stays clean, the window is counted with an example, and the raw share still shows it."""
    formula = "对直接负责的主管人员和其他直接责任人员依法给予处分构成犯罪的依法追究刑事责任"
    question = "某市市场监督管理局在检查中发现一家企业伪造检验报告问应如何处理" + formula
    law = tmp_path / "lawbench"
    law.mkdir()
    (law / "3-8.json").write_text(json.dumps([{"instruction": "回答", "question": question, "answer": "略"}],
                                             ensure_ascii=False), encoding="utf-8")
    train = tmp_path / "train.jsonl"
    train.write_text("".join(json.dumps({"text": f"第{i}部条例第{i}条，{formula}。"}, ensure_ascii=False) + "\n"
                             for i in range(12)), encoding="utf-8")
    out = tmp_path / "out"
    assert decontaminate(train, "--tasks", f"lawbench={law}", "--out", out) == 0
    report = json.loads((out / "decontamination.json").read_text())
    assert report["boilerplate"]["windows_train"] > 0 and report["boilerplate"]["records_only_boilerplate"] == 12
    assert report["boilerplate"]["examples"][0]["training_records"] == 12
    assert report["eval_sets"]["lawbench"]["clean"] == 1 and report["eval_sets"]["lawbench"]["raw_partial"] == 1
    assert report["overlapping"] == 0 and not (out / "hits.jsonl").read_text()
    # Boilerplate off: the same formula makes every record overlap.
    assert decontaminate(train, "--tasks", f"lawbench={law}", "--out", out, "--boilerplate-train", "0") == 0
    assert json.loads((out / "decontamination.json").read_text())["overlapping"] == 12


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


def test_instruction_train_sets_against_held_out_instruction_sets(tmp_path):
    """Held-out instruction sets (the eval's chat_loss sets) are evaluation sets: every sample of them, read as SFT
    reads its layout, against every SFT training source read in its own; what each source holds of them is listed and
    counted per source, and SFT leaves it out. On the command line: --instructions NAME=FORMAT:PATH or a mapping."""
    from yunshan.eval.decontamination import DecontaminateArgs, run_decontamination

    answer = "可以主张解除合同并请求赔偿损失，这是违约救济的通常做法；若对方已部分履行，还可以请求继续履行或者采取补救措施，并要求支付违约金。"
    held = tmp_path / "held.jsonl"
    held.write_text(json.dumps({"input": "请说明" + STATEMENT, "output": answer},
                               ensure_ascii=False) + "\n", encoding="utf-8")
    alpaca = tmp_path / "alpaca.jsonl"
    alpaca.write_text(json.dumps({"instruction": "请说明" + STATEMENT, "input": "", "output": answer},
                                 ensure_ascii=False) + "\n"
                      + json.dumps({"instruction": "你好", "input": "", "output": "你好！"}, ensure_ascii=False) + "\n",
                      encoding="utf-8")
    cflue = tmp_path / "cflue.jsonl"
    cflue.write_text(json.dumps({"名称": "法律", "task": "单项选择题", "question": STATEMENT + "（）",
                                 "choices": "{'A': '解除合同', 'B': '无权主张'}", "answer": "A", "analysis": ""},
                                ensure_ascii=False) + "\n", encoding="utf-8")
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"instruction": "写一首关于秋天的短诗", "instances": [{"input": "", "output": "落叶"}]},
                                ensure_ascii=False) + "\n", encoding="utf-8")
    heldout = {"name": "law", "path": str(held), "format": "alpaca", "columns": {"prompt": "input", "response": "output"}}
    sources = [SftSourceArgs(name="alpaca", path=str(alpaca), format="alpaca"),
               SftSourceArgs(name="cflue", path=str(cflue), format="cflue"),
               SftSourceArgs(name="other", path=str(other), format="self_instruct")]
    out = tmp_path / "out"
    report, _ = run_decontamination(DecontaminateArgs(instructions=[heldout], out=str(out)), [], sources,
                                    progress=False)
    assert set(report.eval_sets) == {"instructions:law"} and report.eval_sets["instructions:law"].items == 1
    counts = {name: (c.records, c.overlapping, c.contaminated) for name, c in report.sources.items()}
    # The alpaca copy holds all of the held-out sample; the exam question its statement (less than half of it).
    assert counts == {"sft:alpaca": (2, 1, 1), "sft:cflue": (1, 1, 0), "sft:other": (1, 0, 0)}
    listed = [json.loads(line) for line in (out / "contaminated.jsonl").read_text().splitlines()]
    assert [(e["source"], e["location"], e["eval"]) for e in listed] == [("sft:alpaca", f"{alpaca}:1", [f"{held}:1"])]
    kept = read_sft_source(sources[0], "fail", counts := {}, Exclusions.load(str(out / "contaminated.jsonl")))
    assert [s.messages[0]["content"] for s in kept] == ["你好"] and counts == {"contaminated": 1}
    # The same from the command line.
    assert decontaminate(alpaca, "--format", "alpaca", "--instructions",
                         "{name: law, path: %s, format: alpaca, columns: {prompt: input, response: output}}" % held,
                         "--out", tmp_path / "cli") == 0
    assert json.loads((tmp_path / "cli" / "decontamination.json").read_text())["contaminated"] == 1


def test_preference_sources_are_checked_as_pref_reads_them_and_their_listed_pairs_left_out(tmp_path, eval_sets):
    """A preference source (yunshan run's preference stage) is read as yunshan pref reads it: a scored record's pairs
    each on their own, so the pair whose rejected answer copies an evaluation question is listed and the other pair
    of the same record is not; --drop's clean copy is the kept pairs in TRL's layout, and yunshan pref's reader with
    the list leaves exactly the listed pair out."""
    from yunshan.data.preference import PrefSourceArgs, read_preference_source
    from yunshan.eval.decontamination import DecontaminateArgs, run_decontamination

    scored = tmp_path / "scored.jsonl"
    records = [{"instruction": "会计科目怎么分？", "completions": [
                   {"response": "按经济内容分类，应收账款属于资产类。", "overall_score": 9},
                   {"response": "记住这道题：" + QUESTION, "overall_score": 1},
                   {"response": "不清楚。", "overall_score": 4}]},
               {"instruction": "你好", "completions": [{"response": "你好！", "overall_score": 8},
                                                      {"response": "嗯。", "overall_score": 2}]}]
    scored.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    source = PrefSourceArgs(name="scored", path=str(scored), format="ultrafeedback", pairing="all_pairs")
    out = tmp_path / "out"
    report, _ = run_decontamination(DecontaminateArgs(tasks=[f"fineval={eval_sets / 'fineval'}"], out=str(out)),
                                    [], [], clean=True, progress=False, pref_sources=[source])
    check = report.sources["preference:scored"]
    assert check.kind == "preference" and check.records == 4  # 3 pairs of the first record, 1 of the second
    listed = [json.loads(line) for line in (out / "contaminated.jsonl").read_text().splitlines()]
    assert [e["location"] for e in listed] == [f"{scored}:1", f"{scored}:1"]  # the two pairs holding the question
    clean = [json.loads(line) for line in (out / "clean" / "preference_scored.jsonl").read_text().splitlines()]
    assert [(c["chosen"][0]["content"], c["rejected"][0]["content"]) for c in clean] == [
        ("按经济内容分类，应收账款属于资产类。", "不清楚。"), ("你好！", "嗯。")]
    counts = {}
    kept = read_preference_source(source, "fail", counts, exclude=Exclusions.load(str(out / "contaminated.jsonl")))
    assert [(p.chosen, p.rejected) for r in kept for p in r] == [(c["chosen"][0]["content"], c["rejected"][0]["content"])
                                                                for c in clean]
    assert counts == {"contaminated": 2}
    # the clean copy reads back as format pairs
    again = read_preference_source(PrefSourceArgs(name="c", path=str(out / "clean" / "preference_scored.jsonl"),
                                                  format="pairs"), "fail", {})
    assert len(again) == 2


def test_the_real_laws_corpus_against_real_lawbench_separates_recited_statutes_from_boilerplate(tmp_path):
    """Task 1-1 asks to recite articles of law: its answers are in the laws corpus, so most of its items are dirty
    or partial. Task 3-1 (articles from case facts) shares only boilerplate with the laws: every item clean, while
    the formulae are counted as boilerplate (before: 3,278 of 3,464 laws 'contaminated' by 13-character formulae)."""
    laws = realdata("laws", "laws.jsonl.zst")
    lawbench = realdata("lawbench", "data", "zero_shot")
    tasks = tmp_path / "lawbench"
    tasks.mkdir()
    for task in ("1-1", "3-1"):
        (tasks / f"{task}.json").symlink_to(lawbench / f"{task}.json")
    out = tmp_path / "out"
    assert decontaminate(laws, "--tasks", f"lawbench={tasks}", "--out", out, "--show", "0") == 0
    report = json.loads((out / "decontamination.json").read_text())
    recite, facts = report["eval_sets"]["lawbench"]["groups"]["1-1"], report["eval_sets"]["lawbench"]["groups"]["3-1"]
    assert recite["dirty"] + recite["partial"] > 400 and recite["dirty"] > 100
    assert facts["dirty"] == facts["partial"] == 0
    assert report["boilerplate"]["windows_train"] > 0 and report["records"] == 3464
    assert report["overlapping"] < 1000  # laws holding recited articles, not every law
    windows_ = [e["window"] for e in report["boilerplate"]["examples"]]
    assert any("直接负责的主管人员和其他直接责任人员" in w for w in windows_)


def test_bad_input_is_one_line(tmp_path, eval_sets, capsys):
    train = corpus(tmp_path)
    assert decontaminate(train, "--tasks", f"fineval={tmp_path / 'nope'}", "--out", tmp_path / "o") == 1
    assert f"fineval: {tmp_path / 'nope'} does not exist" in capsys.readouterr().err
    assert decontaminate(train, "--tasks", "bpc", "--heldout", "general", "--out", tmp_path / "o") == 1
    assert "--heldout 'general': use LABEL=FILE" in capsys.readouterr().err
    assert decontaminate(train, "--data-dir", eval_sets, "--dirty-from", "0.1", "--out", tmp_path / "o") == 1
    assert "clean_below (0.2) must not exceed dirty_from (0.1)" in capsys.readouterr().err
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok"}\n{"text": 3}\n', encoding="utf-8")
    assert decontaminate(bad, "--data-dir", eval_sets, "--out", tmp_path / "o") == 1
    assert f"{bad}:2: field 'text': non_string_field" in capsys.readouterr().err
    listing = tmp_path / "list.jsonl"
    listing.write_text('{"digest": "abc"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"list.jsonl:1: field 'digest'"):
        Exclusions.load(str(listing))


def test_separator_classes():
    tables = UnitTables()
    tables.learn_classes(np.array([ord(c) for c in "a，中"], dtype=np.uint32))
    assert [tables.classes[ord(c)] for c in "a，中"] == [WORD, SEPARATOR, CJK]


def test_an_out_that_holds_the_inputs_is_refused(tmp_path, eval_sets, capsys):
    """Issue 27 item 2: --out holding an input (its hits.jsonl would be replaced), --out inside an input folder, and
    --out over the input folder with --drop (its clean/ copies read back on the next run: 65 -> 130 -> 195 lines) are
    refused in one line before anything is written; the input files are unchanged."""
    d = tmp_path / "d"
    d.mkdir()
    (d / "hits.jsonl").write_text(json.dumps({"text": "用户自己的文件：" + QUESTION}, ensure_ascii=False) + "\n",
                                  encoding="utf-8")
    before = (d / "hits.jsonl").read_bytes()
    tasks = ("--tasks", f"fineval={eval_sets / 'fineval'}")
    assert decontaminate(d / "hits.jsonl", *tasks, "--out", d) == 1
    assert f"--out {d} holds the input {d / 'hits.jsonl'}" in capsys.readouterr().err
    assert decontaminate(d, *tasks, "--out", d, "--drop") == 1
    assert "holds the input" in capsys.readouterr().err
    assert decontaminate(d, *tasks, "--out", d / "decont") == 1
    assert f"lies inside the input folder {d}" in capsys.readouterr().err
    assert decontaminate(f"{d}/*.jsonl", *tasks, "--out", d) == 1
    assert "would read" in capsys.readouterr().err
    assert (d / "hits.jsonl").read_bytes() == before and sorted(p.name for p in d.iterdir()) == ["hits.jsonl"]
    # Beside the inputs, twice: the clean copy is the same each time.
    for _ in range(2):
        assert decontaminate(d, *tasks, "--out", tmp_path / "out", "--drop") == 0
        assert len((tmp_path / "out" / "clean" / "cpt_d.jsonl").read_text().splitlines()) == 0  # the one record listed


def test_a_stop_leaves_no_partial_file(tmp_path, eval_sets, monkeypatch):
    """Issue 27 item 2: a run stopped while writing (Ctrl-C here; SIGTERM is turned into the same) removes its .part
    files and its pass's scratch folder."""
    from yunshan.data import writers

    train = corpus(tmp_path)
    out = tmp_path / "out"
    real_write = writers.JsonlWriter.write
    calls = []

    def interrupted(self, obj):
        calls.append(self.out.name)
        if self.out.parent.name == "clean":
            raise KeyboardInterrupt
        return real_write(self, obj)

    monkeypatch.setattr(writers.JsonlWriter, "write", interrupted)
    # The command line turns the interruption into one line and exit code 130 (yunshan.cli), after the clean-up.
    assert main(["data", "decontaminate", str(train), "--data-dir", str(eval_sets), "--out", str(out), "--drop"]) == 130
    assert any(c.startswith("cpt_") for c in calls)  # it was stopped while writing clean/
    assert not list(out.rglob("*.part")) and not (out / ".scan").exists()


def test_an_empty_evaluation_set_says_nothing_was_checked_and_fails_under_strict(tmp_path, eval_sets, capsys):
    """Issue 27 item 16: an empty held-out file, or a set whose every item is shorter than a window, is reported as
    NOTHING CHECKED (not '0 of 5 records overlap'), and --strict stops with the file named."""
    train = corpus(tmp_path)
    empty = tmp_path / "empty.txt"
    empty.write_text("", encoding="utf-8")
    short = tmp_path / "short.txt"
    short.write_text("短文一篇。\n\n又一篇。\n", encoding="utf-8")
    args = (train, "--tasks", "bpc", "--heldout", f"empty={empty}", f"short={short}", "--out", tmp_path / "o")
    assert decontaminate(*args) == 0
    printed = capsys.readouterr().out
    assert f"NOTHING CHECKED: heldout:empty: {empty} holds no item" in printed
    assert f"NOTHING CHECKED: heldout:short: {short}: every item is shorter than a window" in printed
    report = json.loads((tmp_path / "o" / "decontamination.json").read_text())
    assert len(report["nothing_checked"]) == 2
    assert decontaminate(*args, "--strict") == 1
    assert f"nothing checked in heldout:empty: {empty} holds no item (--strict)" in capsys.readouterr().err
