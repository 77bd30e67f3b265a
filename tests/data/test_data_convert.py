"""`yunshan data convert`: every input format gives the same documents, filters and caps count exactly, bad input
fails with file/line/field, and the named converters' outputs load with yunshan's own SFT and eval readers."""

import bz2
import csv
import gzip
import json
import lzma
import zipfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import zstandard

from yunshan.cli import main
from yunshan.data.conversations import SftSourceArgs, read_sft_source
from yunshan.data.sources import SourceArgs, read_file_records

RECORDS = [
    {"id": 0, "title": "公告", "content": "董事会决议 通过利润分配方案", "meta": {"source": "sse"}, "lang": "zh"},
    {"id": 1, "title": "Notice", "content": "The board approved the dividend.", "meta": {"source": "news"}, "lang": "en"},
    {"id": 2, "title": None, "content": "无标题正文", "meta": {"source": "sse"}, "lang": "zh"},
    {"id": 3, "title": "重复", "content": "董事会决议 通过利润分配方案", "meta": {"source": "sse"}, "lang": "zh"},
]
TEXTS = [r["content"] for r in RECORDS]


def read_jsonl(path: Path) -> list[dict]:
    raw = path.read_bytes()
    if path.name.endswith(".zst"):
        raw = zstandard.ZstdDecompressor().stream_reader(raw).read()
    elif path.name.endswith(".gz"):
        raw = gzip.decompress(raw)
    return [json.loads(line) for line in raw.decode("utf-8").splitlines()]


def convert(*argv) -> int:
    return main(["data", "convert", *map(str, argv)])


@pytest.fixture
def inputs(tmp_path):
    """The same four records in every readable format and compression, and inside a zip."""
    jsonl = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in RECORDS).encode()
    folder = tmp_path / "in"
    folder.mkdir()
    files = {
        "jsonl": folder / "a.jsonl", "gz": folder / "a.jsonl.gz", "zst": folder / "a.jsonl.zst",
        "xz": folder / "a.jsonl.xz", "bz2": folder / "a.jsonl.bz2", "json": folder / "a.json",
        "parquet": folder / "a.parquet", "csv": folder / "a.csv", "zip": folder / "a.zip",
    }
    files["jsonl"].write_bytes(jsonl)
    files["gz"].write_bytes(gzip.compress(jsonl))
    files["zst"].write_bytes(zstandard.ZstdCompressor().compress(jsonl))
    files["xz"].write_bytes(lzma.compress(jsonl))
    files["bz2"].write_bytes(bz2.compress(jsonl))
    files["json"].write_text(json.dumps(RECORDS, ensure_ascii=False), encoding="utf-8")
    pq.write_table(pa.Table.from_pylist([{k: v for k, v in r.items() if k != "meta"} for r in RECORDS]),
                   files["parquet"], row_group_size=3)
    with open(files["csv"], "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=["id", "title", "content"])
        w.writeheader()
        w.writerows({k: r[k] for k in ("id", "title", "content")} for r in RECORDS)
    with zipfile.ZipFile(files["zip"], "w") as z:
        z.writestr("sub/part-0.jsonl", jsonl)
        z.writestr("sub/part-1.parquet", files["parquet"].read_bytes())
        z.writestr("README.md", "not data")
    return files


@pytest.mark.parametrize("kind", ["jsonl", "gz", "zst", "xz", "bz2", "json", "parquet", "csv"])
def test_every_format_gives_the_same_documents(inputs, tmp_path, kind):
    out = tmp_path / f"{kind}.jsonl"
    assert convert(inputs[kind], "--text-field", "content", "--out", out) == 0
    assert [r["text"] for r in read_jsonl(out)] == TEXTS


def test_zip_members_are_read_in_name_order(inputs, tmp_path):
    out = tmp_path / "zip.jsonl"
    assert convert(inputs["zip"], "--text-field", "content", "--out", out) == 0
    assert [r["text"] for r in read_jsonl(out)] == TEXTS + TEXTS  # part-0.jsonl then part-1.parquet; README skipped


def test_template_where_dedup_keep_add_and_report(inputs, tmp_path, capsys):
    out, report = tmp_path / "o.jsonl.zst", tmp_path / "report.json"
    code = convert(inputs["jsonl"], "--template", r"{title}\n{content}", "--where", "meta.source=sse",
                   "--dedup", "--keep-fields", "id,lang", "--add", "domain=finance", "--out", out,
                   "--report", report)
    assert code == 0
    rows = read_jsonl(out)
    # Record 1 fails --where; record 3 repeats record 0's content but its title differs, so --dedup keeps it.
    assert rows == [
        {"text": "公告\n董事会决议 通过利润分配方案", "id": 0, "lang": "zh", "domain": "finance"},
        {"text": "无标题正文", "id": 2, "lang": "zh", "domain": "finance"},  # a null title renders empty
        {"text": "重复\n董事会决议 通过利润分配方案", "id": 3, "lang": "zh", "domain": "finance"},
    ]
    rep = json.loads(report.read_text(encoding="utf-8"))
    assert rep["records_read"] == 4 and rep["records_written"] == 3
    assert rep["dropped"] == {"where": 1}
    assert rep["first_location"]["where"].endswith("a.jsonl:2")
    assert rep["chars_written"] == sum(len(r["text"]) for r in rows)
    assert "dropped where: 1" in capsys.readouterr().out


def test_dedup_drops_exact_duplicates_only(inputs, tmp_path):
    out = tmp_path / "d.jsonl"
    assert convert(inputs["jsonl"], "--text-field", "content", "--dedup", "--out", out, "--report",
                   tmp_path / "r.json") == 0
    assert [r["text"] for r in read_jsonl(out)] == TEXTS[:3]
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["dropped"] == {"duplicate": 1} and rep["first_location"]["duplicate"].endswith("a.jsonl:4")


def test_character_and_record_caps_stop_before_exceeding(inputs, tmp_path):
    out = tmp_path / "c.jsonl"
    cap = len(TEXTS[0]) + len(TEXTS[1])  # exactly two documents fit; the third would exceed the cap
    assert convert(inputs["jsonl"], "--text-field", "content", "--max-chars", cap, "--out", out, "--report",
                   tmp_path / "r.json") == 0
    assert [r["text"] for r in read_jsonl(out)] == TEXTS[:2]
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["chars_written"] == cap and "--max-chars" in rep["stopped_by"]
    assert convert(inputs["jsonl"], "--text-field", "content", "--max-records", "1", "--out", out) == 0
    assert [r["text"] for r in read_jsonl(out)] == TEXTS[:1]


def test_pii_masking_counts_each_kind_and_spares_plain_numbers(tmp_path):
    text = ("被告人张某（公民身份号码110101199003071234）联系电话13812345678，邮箱zhang@example.com；"
            "案号(2020)京0101刑初123456789012345678号，涉案金额123456789012345678元。")
    src = tmp_path / "j.jsonl"
    src.write_text(json.dumps({"text": text}, ensure_ascii=False) + "\n", encoding="utf-8")
    out = tmp_path / "m.jsonl"
    assert convert(src, "--mask-pii", "--out", out, "--report", tmp_path / "r.json") == 0
    masked = read_jsonl(out)[0]["text"]
    assert "110101199003071234" not in masked and "13812345678" not in masked and "zhang@example.com" not in masked
    assert "[身份证号]" in masked and "[电话]" in masked and "[邮箱]" in masked
    # 18 digits that are not a plausible ID (no valid birth date) are left alone.
    assert "123456789012345678" in masked
    assert json.loads((tmp_path / "r.json").read_text())["pii_masked"] == {"id_number": 1, "phone": 1, "email": 1}


def test_pii_masking_function_cases():
    from yunshan.data.convert import mask_pii

    counts = {}
    assert mask_pii("请拨+86-13912345678或0755-1234567。", counts) == "请拨[电话]或0755-1234567。"
    assert mask_pii("only mail: a.b@law.cn", counts) == "only mail: [邮箱]"
    assert mask_pii("金额12345678901.5万元外，编号4401061999123112345。", counts) == "金额12345678901.5万元外，编号4401061999123112345。"
    assert mask_pii("身份证44010619991231123X号", counts) == "身份证[身份证号]号"
    assert counts == {"phone": 1, "email": 1, "id_number": 1}


def test_txt_documents_and_output_is_readable_by_cpt_sources(tmp_path):
    src = tmp_path / "t.txt"
    src.write_text("第一段\n续行\n\n第二段\n\n\n", encoding="utf-8")
    out = tmp_path / "t.jsonl.gz"
    assert convert(src, "--out", out) == 0
    assert [r["text"] for r in read_jsonl(out)] == ["第一段\n续行", "第二段"]
    # What yunshan's continual pretraining reads, unchanged.
    texts = [rec.text for rec, _ in read_file_records(str(out), SourceArgs(name="t", path=str(out)), {})]
    assert texts == ["第一段\n续行", "第二段"]


def test_bad_input_fails_with_file_line_and_field(tmp_path, capsys):
    src = tmp_path / "bad.jsonl"
    src.write_text('{"text": "ok"}\n{"text": 5}\n{"body": "x"}\n{oops\n', encoding="utf-8")
    out = tmp_path / "o.jsonl"
    assert convert(src, "--out", out) == 1
    err = capsys.readouterr().err
    assert f"{src}:2: field 'text': non_string_field" in err and "Traceback" not in err
    assert not out.exists() and not Path(str(out) + ".part").exists()  # no half-written output
    assert convert(src, "--out", out, "--on-bad-record", "skip", "--report", tmp_path / "r.json") == 0
    rep = json.loads((tmp_path / "r.json").read_text())
    assert rep["dropped"] == {"non_string_field": 1, "missing_field": 1, "malformed_json": 1}
    assert rep["first_location"]["malformed_json"] == f"{src}:4"
    assert [r["text"] for r in read_jsonl(out)] == ["ok"]


def test_template_missing_field_and_bad_options(inputs, tmp_path, capsys):
    out = tmp_path / "o.jsonl"
    assert convert(inputs["jsonl"], "--template", "{title}\n{body}", "--out", out) == 1
    assert "field 'body': missing_field" in capsys.readouterr().err
    assert convert(inputs["jsonl"], "--out", tmp_path / "o.txt") == 1
    assert "must end in .jsonl" in capsys.readouterr().err
    assert convert(tmp_path / "nope.jsonl", "--out", out) == 1
    assert "no such file" in capsys.readouterr().err
    assert convert(inputs["jsonl"], "--where", "novalue", "--out", out) == 1
    assert "expected FIELD=VALUE" in capsys.readouterr().err
    # A field asked for with --keep-fields but absent: an error, or (skip) the record is dropped, never half-kept.
    assert convert(inputs["jsonl"], "--text-field", "content", "--keep-fields", "lang,url", "--out", out) == 1
    assert f"{inputs['jsonl']}:1: field 'url': missing_field" in capsys.readouterr().err
    assert convert(inputs["jsonl"], "--text-field", "content", "--keep-fields", "url", "--on-bad-record", "skip",
                   "--out", out, "--report", tmp_path / "r.json") == 0
    assert read_jsonl(out) == [] and json.loads((tmp_path / "r.json").read_text())["dropped"] == {"missing_field": 4}


def test_save_to_disk_dataset_is_read_directly(tmp_path):
    import datasets

    datasets.Dataset.from_list([{"body": t} for t in TEXTS]).save_to_disk(str(tmp_path / "ds"))
    out = tmp_path / "ds.jsonl"
    assert convert("--dataset", tmp_path / "ds", "--text-field", "body", "--out", out) == 0
    assert [r["text"] for r in read_jsonl(out)] == TEXTS


# ------------------------------------------------------------------------------------------- named converters


def sft_load(path: Path) -> list[list[dict]]:
    """Samples as yunshan's SFT reader sees them (fails on any malformed record)."""
    return [s.messages for s in read_sft_source(SftSourceArgs(name="x", path=str(path), format="messages"),
                                                "fail", {})]


def test_lawyer_llama_shapes_become_messages(tmp_path):
    exam = [[{"input": "", "instruction": "下列说法正确吗？\n甲\n请给出详细的推理过程之后再给出答案。\n",
              "output": "正确。"}],
            [{"instruction": "问一", "input": "补充", "output": "答一"}, {"instruction": "问二", "output": "答二"}]]
    counsel = [{"query": "离婚需要什么？", "laws": ["《民法典》第一千零七十六条：……"], "response": "需要协议。"}]
    multi = [{"query": "q", "laws": ["法条甲"], "history": ["[客户] 你好，我想离婚", "[律师] 请问有子女吗？",
                                                          "[客户] 有。", "[律师] 那么……"]}]
    for name, data in (("exam.json", exam), ("counsel.json", counsel), ("multi.json", multi)):
        (tmp_path / name).write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    out = tmp_path / "ll.jsonl"
    assert convert("--from", "lawyer-llama", tmp_path / "counsel.json", tmp_path / "exam.json",
                   tmp_path / "multi.json", "--out", out) == 0
    samples = sft_load(out)
    assert samples[0] == [{"role": "user", "content": "离婚需要什么？"}, {"role": "assistant", "content": "需要协议。"}]
    assert samples[2] == [{"role": "user", "content": "问一\n补充"}, {"role": "assistant", "content": "答一"},
                          {"role": "user", "content": "问二"}, {"role": "assistant", "content": "答二"}]
    assert [t["role"] for t in samples[3]] == ["user", "assistant", "user", "assistant"]
    assert samples[3][0]["content"] == "你好，我想离婚"
    assert convert("--from", "lawyer-llama", tmp_path / "counsel.json", "--context", "prepend", "--out", out) == 0
    assert sft_load(out)[0][0]["content"] == "相关法条：\n《民法典》第一千零七十六条：……\n\n离婚需要什么？"


def test_chatlaw_drops_or_keeps_its_meta_instruction(tmp_path):
    rec = {"meta_instruction": "你一个名叫ChatLAW的助理", "plugins": [],
           "chat": [{"咨询者": "会被如何处罚？", "ChatLAW": "应依法处理。"}], "subject": "法律咨询"}
    src = tmp_path / "demo_data_法律咨询.jsonl"
    src.write_text(json.dumps(rec, ensure_ascii=False) + "\n", encoding="utf-8")
    out = tmp_path / "cl.jsonl"
    assert convert("--from", "chatlaw", src, "--out", out) == 0
    assert sft_load(out) == [[{"role": "user", "content": "会被如何处罚？"}, {"role": "assistant", "content": "应依法处理。"}]]
    assert convert("--from", "chatlaw", src, "--system", "keep", "--out", out) == 0
    assert sft_load(out)[0][0] == {"role": "system", "content": "你一个名叫ChatLAW的助理"}


def test_lawgpt_zh_and_named_converter_errors(tmp_path, capsys):
    good = {"question": "公司是否需要承担责任？", "answer": "根据……应当承担。", "reference": ["妇女权益保障法第八十条"]}
    src = tmp_path / "lawgpt.json"
    src.write_text(json.dumps([good, {"question": "缺答案"}, {"question": "q", "answer": ""}], ensure_ascii=False),
                   encoding="utf-8")
    out = tmp_path / "lg.jsonl"
    assert convert("--from", "lawgpt-zh", src, "--out", out) == 1
    assert f"{src}: record 1: field 'answer': missing_field" in capsys.readouterr().err
    assert convert("--from", "lawgpt-zh", src, "--out", out, "--on-bad-record", "skip", "--report",
                   tmp_path / "r.json") == 0
    assert sft_load(out) == [[{"role": "user", "content": "公司是否需要承担责任？"},
                              {"role": "assistant", "content": "根据……应当承担。"}]]
    # The SFT reader's own rule (empty assistant turn) is applied before anything is written.
    assert json.loads((tmp_path / "r.json").read_text())["dropped"] == {"missing_field": 1, "empty_assistant": 1}


def jecqa_record(i: int) -> dict:
    return {"id": f"q{i}", "statement": f"题干{i}", "option_list": {"A": "a", "B": "b", "C": "c", "D": "d"},
            "answer": ["A", "C"] if i % 3 else ["B"], "source": i % 2}


def test_jecqa_holdout_split_is_stable_disjoint_and_loads(tmp_path):
    from yunshan.eval.jecqa import load_jecqa

    files = []
    for name, ids in (("0_train.json", range(0, 60)), ("1_train.json", range(60, 100))):
        path = tmp_path / name
        path.write_text("".join(json.dumps(jecqa_record(i), ensure_ascii=False) + "\n" for i in ids),
                        encoding="utf-8")
        files.append(path)
    out = tmp_path / "split"
    assert convert("--from", "jecqa-holdout", *files, "--heldout-fraction", "0.25", "--out", out) == 0
    train = [json.loads(line) for f in sorted((out / "train").glob("*.json")) for line in f.read_text().splitlines()]
    held = [json.loads(line) for f in sorted((out / "heldout").glob("*.json")) for line in f.read_text().splitlines()]
    ids_train, ids_held = {r["id"] for r in train}, {r["id"] for r in held}
    assert not ids_train & ids_held and len(ids_train | ids_held) == 100
    assert 10 <= len(held) <= 40  # about a quarter
    # Stable: a second run, with the files in the other order, makes the same split.
    out2 = tmp_path / "split2"
    assert convert("--from", "jecqa-holdout", files[1], files[0], "--heldout-fraction", "0.25", "--out", out2) == 0
    held2 = {json.loads(line)["id"] for f in (out2 / "heldout").glob("*.json") for line in f.read_text().splitlines()}
    assert held2 == ids_held
    # Both parts load with yunshan's SFT (jecqa format) and eval readers.
    sft = read_sft_source(SftSourceArgs(name="j", path=str(out / "train"), format="jecqa"), "fail", {})
    assert len(sft) == len(train)
    assert len(load_jecqa(out / "heldout")) == len(held)


def test_jecqa_holdout_rejects_bad_answers(tmp_path, capsys):
    bad = dict(jecqa_record(0), answer=["E"])
    src = tmp_path / "0_train.json"
    src.write_text(json.dumps(bad, ensure_ascii=False) + "\n", encoding="utf-8")
    assert convert("--from", "jecqa-holdout", src, "--out", tmp_path / "s") == 1
    assert f"{src}:1: field 'answer': bad_answer" in capsys.readouterr().err
    assert not (tmp_path / "s").exists()


def mc_rows(n: int, ceval: bool) -> list[dict]:
    rows = []
    for i in range(n):
        if ceval:
            rows.append({"id": i, "question": f"题{i}", "A": "甲", "B": "乙", "C": "丙", "D": "丁",
                         "answer": "ABCD"[i % 4], "explanation": f"解析{i}" if i % 2 else ""})
        else:
            rows.append({"Question": f"题{i}", "A": "甲", "B": "乙", "C": "丙", "D": "丁", "Answer": "ABCD"[i % 4]})
    return rows


def test_ceval_parquet_becomes_the_layout_yunshan_eval_reads(tmp_path):
    from yunshan.eval.ceval import load_ceval

    hub = tmp_path / "ceval-exam"
    for subject in ("accountant", "tax_accountant"):
        (hub / subject).mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist(mc_rows(5, True)), hub / subject / "dev-00000-of-00001.parquet")
        pq.write_table(pa.Table.from_pylist(mc_rows(7, True)), hub / subject / "ceval-exam-val.parquet")
    mapping = {"accountant": ["Accountant", "注册会计师", "Other"], "tax_accountant": ["Tax Accountant", "税务师", "Other"]}
    (tmp_path / "subject_mapping.json").write_text(json.dumps(mapping, ensure_ascii=False), encoding="utf-8")
    out = tmp_path / "ceval"
    assert convert("--from", "mc-parquet", "--layout", "ceval", hub, "--subject-mapping",
                   tmp_path / "subject_mapping.json", "--out", out) == 0
    assert (out / "val" / "accountant_val.csv").read_text(encoding="utf-8").splitlines()[0] == \
        "id,question,A,B,C,D,answer,explanation"
    subjects = load_ceval(out, split="val", shots=5)
    assert [s.key for s in subjects] == ["accountant", "tax_accountant"]
    assert [q.answer for q in subjects[0].questions] == [r["answer"] for r in mc_rows(7, True)]
    assert len(subjects[0].dev) == 5 and subjects[1].chinese == "税务师"


def test_cmmlu_parquet_becomes_the_layout_yunshan_eval_reads(tmp_path, capsys):
    from yunshan.eval.cmmlu import load_cmmlu

    hub = tmp_path / "cmmlu"
    for split, n in (("dev", 5), ("test", 9)):
        (hub / "ethnology" / split).mkdir(parents=True)
        pq.write_table(pa.Table.from_pylist(mc_rows(n, False)), hub / "ethnology" / split / "0000.parquet")
    out = tmp_path / "out"
    assert convert("--from", "mc-parquet", "--layout", "cmmlu", hub, "--out", out) == 0
    assert (out / "test" / "ethnology.csv").read_text(encoding="utf-8").splitlines()[:2] == \
        [",Question,A,B,C,D,Answer", "0,题0,甲,乙,丙,丁,A"]
    subjects = load_cmmlu(out, split="test", shots=5)
    assert len(subjects) == 1 and len(subjects[0].questions) == 9 and len(subjects[0].dev) == 5
    # A wrong answer letter names the file, row and field.
    pq.write_table(pa.Table.from_pylist([dict(mc_rows(1, False)[0], Answer="E")]),
                   hub / "ethnology" / "dev" / "0000.parquet")
    assert convert("--from", "mc-parquet", "--layout", "cmmlu", hub, "--out", out) == 1
    assert "row 0: field 'answer': 'E' is not one of A, B, C, D" in capsys.readouterr().err
    assert convert("--from", "mc-parquet", "--layout", "ceval", hub, "--out", out) == 1
    assert "needs --subject-mapping" in capsys.readouterr().err


def test_hub_dataset_offline_says_how_to_go_online(tmp_path, capsys):
    # conftest sets HF_HUB_OFFLINE=1: the converter must not try the network and must say how to allow it.
    assert convert("--dataset", "someone/some-dataset", "--out", tmp_path / "o.jsonl") == 1
    err = capsys.readouterr().err
    assert "--dataset someone/some-dataset: cannot load it" in err and "HF_HUB_OFFLINE=0" in err
