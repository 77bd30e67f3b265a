"""Instruction and exam releases read unchanged through the SFT format readers: alpaca with LLaMA-Factory's column
mapping, Fin-Eva's JSON Lines rows (3 or 4 options, context, 是/否), CFLUE knowledge, Self-Instruct; every
malformed record a BadRecord naming file, line and field; and every real file of ../shared/realdata/sft read to
the last record (counts as MANIFEST.json gives them).

The fixtures are written here in each layout; none of the real text is copied.
"""

import json
import re
from pathlib import Path

import pytest

from yunshan.data.conversations import (
    SftSourceArgs, from_alpaca, from_ceval_row, from_cflue, from_self_instruct, read_sft_source, sft_records)
from yunshan.data.records import BadRecord, BadRecordError
from yunshan.arguments.recipe import RecipeError, load_recipe

ROOT = Path(__file__).resolve().parents[2]
REALDATA_SFT = ROOT.parent / "shared" / "realdata" / "sft"


def write_jsonl(path: Path, records: list) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf-8")
    return path


def turns(user: str, assistant: str) -> list[dict]:
    return [{"role": "user", "content": user}, {"role": "assistant", "content": assistant}]


# ------------------------------------------------------------------------------------------------ alpaca columns


def test_alpaca_columns_map_llama_factory_names_to_the_records_fields():
    # LexEval's layout: a fixed task prompt in instruction, the question in input, the reference in answer.
    lexeval = {"instruction": "选出正确选项。", "input": "甲乙丙哪个对？", "answer": "AC"}
    assert from_alpaca(lexeval, {"response": "answer"}) == turns("选出正确选项。\n甲乙丙哪个对？", "AC")
    # DISC-Law-Eval's layout: input, output, id (the id is not text).
    disc = {"input": "合同无效怎么办？", "output": "依法返还财产。", "id": 7}
    assert from_alpaca(disc, {"prompt": "input", "response": "output"}) == turns("合同无效怎么办？", "依法返还财产。")
    # A column set to null is not read.
    assert from_alpaca({**lexeval, "system": "s"}, {"response": "answer", "query": None, "system": None}) == turns(
        "选出正确选项。", "AC")
    # Every column renamed, history and system included.
    record = {"q": "问", "ctx": "材料", "a": "答", "h": [["先问", "先答"]], "sys": "简短"}
    assert from_alpaca(record, {"prompt": "q", "query": "ctx", "response": "a", "history": "h", "system": "sys"}) == [
        {"role": "system", "content": "简短"}, {"role": "user", "content": "先问"},
        {"role": "assistant", "content": "先答"}, {"role": "user", "content": "问\n材料"},
        {"role": "assistant", "content": "答"}]


def test_alpaca_structured_response_is_its_json_text():
    record = {"instruction": "抽取事件。", "input": "", "output": [{"类型": "下降", "行业": ""}], "history": []}
    assert from_alpaca(record)[-1]["content"] == '[{"类型": "下降", "行业": ""}]'


def test_alpaca_column_errors_name_the_records_field(tmp_path):
    path = write_jsonl(tmp_path / "lex.jsonl", [{"instruction": "i", "input": "x", "answer": "A"},
                                                {"instruction": "i", "input": "x"},
                                                {"instruction": "i", "input": "x", "answer": " "}])
    args = SftSourceArgs(name="lex", path=str(path), format="alpaca", columns={"response": "answer"})
    with pytest.raises(BadRecordError, match=re.escape(f"{path}:2: field 'answer': missing_field")):
        read_sft_source(args, "fail", {})
    counts = {}
    assert len(read_sft_source(args, "skip", counts)) == 1
    assert counts == {"bad:missing_field": 1, "bad:empty_assistant": 1}


@pytest.mark.parametrize("source, message", [
    ({"format": "messages", "columns": {"response": "answer"}}, "columns apply to format alpaca only"),
    ({"format": "alpaca", "columns": {"answer": "answer"}}, "columns.answer is not an alpaca column; valid: prompt"),
    ({"format": "alpaca", "columns": {"response": ""}}, "columns.response must name a record field, got ''"),
    ({"format": "alpaca", "columns": {"response": None}}, "columns.response must name a record field, got None"),
])
def test_bad_column_mappings_are_refused_in_a_recipe(source, message):
    with pytest.raises(RecipeError, match=message):
        load_recipe(SftSourceArgs, data={"name": "s", "path": "a.jsonl", **source})


# ------------------------------------------------------------------------------------------------ exam rows


def test_fin_eva_rows_in_json_lines(tmp_path):
    four = {"id": "0", "question": "利率上升时债券价格？", "A": "上升", "B": "下降", "C": "不变", "D": "不定",
            "answer": "B"}
    three = {"id": "1", "question": "这句话的情绪？", "A": "中性", "B": "积极", "C": "消极", "answer": "C"}
    context = {"id": "2", "context": "某指数今日收跌。", "question": "哪项正确？", "A": "收涨", "B": "收跌", "C": "停牌",
               "D": "休市", "answer": "B"}
    judged = {"id": "3", "question": "央行是商业银行吗？", "answer": "否"}
    true_false = {"id": "4", "question": "存款保险有上限。（）", "A": "对", "B": "错", "C": "", "D": "", "answer": "A"}
    explained = {"id": "5", "question": "会计分期的前提？", "A": "主体", "B": "持续经营", "C": "货币", "D": "权责",
                 "answer": "B", "explanation": "因为要持续经营。"}
    path = write_jsonl(tmp_path / "fin_eva.train.jsonl", [four, three, context, judged, true_false, explained])
    got = [s.messages for s in read_sft_source(SftSourceArgs(name="fe", path=str(path), format="ceval"), "fail", {})]
    assert got[0] == turns("以下是单项选择题，请选出正确答案。\n\n利率上升时债券价格？\nA. 上升\nB. 下降\nC. 不变\nD. 不定",
                           "答案：B")
    assert got[1][0]["content"].endswith("\nA. 中性\nB. 积极\nC. 消极") and got[1][1]["content"] == "答案：C"
    assert got[2][0]["content"] == ("以下是单项选择题，请选出正确答案。\n\n某指数今日收跌。\n\n哪项正确？\nA. 收涨\nB. 收跌\n"
                                    "C. 停牌\nD. 休市")
    assert got[3] == turns("以下是判断题，请回答是或否。\n\n央行是商业银行吗？", "答案：否")
    assert got[4][0]["content"].endswith("\nA. 对\nB. 错")  # the empty C and D are absent options
    assert got[5][1]["content"] == "答案：B\n解析：因为要持续经营。"
    # A C-Eval CSV still names its subject from the file name.
    (tmp_path / "tax_law_dev.csv").write_text("id,question,A,B,C,D,answer\n0,q,a,b,c,d,D\n", encoding="utf-8")
    csv = read_sft_source(SftSourceArgs(name="t", path=str(tmp_path / "tax_law_dev.csv"), format="ceval"), "fail", {})
    assert csv[0].messages[0]["content"].startswith("以下是关于tax law的单项选择题")


@pytest.mark.parametrize("row, reason, field_name", [
    ({"question": "q", "A": "a", "B": "b", "C": "c", "answer": "D"}, "bad_answer", "answer"),
    ({"question": "q", "answer": "对"}, "bad_answer", "answer"),  # no options: 是 or 否 only
    ({"question": "q", "A": "a", "C": "c", "answer": "A"}, "missing_field", "B"),  # a gap in the letters
    ({"question": "q", "A": "a", "B": "", "C": "c", "answer": "A"}, "missing_field", "B"),  # empty inside
    ({"question": "q", "A": "a", "answer": "A"}, "missing_field", "B"),  # one option is no choice
    ({"A": "a", "B": "b", "answer": "A"}, "missing_field", "question"),
    ({"question": "q", "A": "a", "B": "b"}, "missing_field", "answer"),
    ({"question": "q", "context": ["x"], "A": "a", "B": "b", "answer": "A"}, "non_string_field", "context"),
])
def test_bad_exam_rows(row, reason, field_name):
    with pytest.raises(BadRecord) as err:
        from_ceval_row(row, None)
    assert (err.value.reason, err.value.field_name) == (reason, field_name)


# ------------------------------------------------------------------------------------------------ CFLUE knowledge


def cflue(task: str, choices: str, answer: str, analysis: str = "见教材。") -> dict:
    return {"名称": "基金从业资格", "task": task, "question": "下列说法正确的是（）。", "choices": choices,
            "answer": answer, "analysis": analysis}


def test_cflue_single_multiple_and_true_false():
    single = from_cflue(cflue("单项选择题", "{'A': '甲', 'B': '乙', 'C': '丙', 'D': '丁'}", "C"))
    assert single == turns("以下是关于基金从业资格的单项选择题，请选出正确答案。\n\n下列说法正确的是（）。\nA. 甲\nB. 乙\nC. 丙\nD. 丁",
                           "答案：C\n解析：见教材。")
    multiple = from_cflue(cflue("多项选择题", "{'A': '甲', 'B': '乙', 'C': \"丙's\", 'D': '丁', 'E': '戊'}", "ABE", ""))
    assert multiple[0]["content"].startswith("以下是关于基金从业资格的多项选择题") and "\nC. 丙's\nD. 丁\nE. 戊" in multiple[0]["content"]
    assert multiple[1]["content"] == "答案：ABE"  # no analysis: the letters alone
    judged = from_cflue(cflue("判断题", "{'A': '对', 'B': '错'}", "B"))
    assert judged[0]["content"].startswith("以下是关于基金从业资格的判断题，请选出正确答案。") and judged[1]["content"].startswith("答案：B")


@pytest.mark.parametrize("record, reason, field_name", [
    # Code in the string is never run: literal_eval refuses it.
    (cflue("单项选择题", "__import__('os').system('echo hacked')", "A"), "bad_options", "choices"),
    (cflue("单项选择题", "{'A': '甲', 'B': '乙'", "A"), "bad_options", "choices"),  # cut short
    (cflue("单项选择题", "['甲', '乙']", "A"), "bad_options", "choices"),  # not a dict
    (cflue("单项选择题", "{'A': '甲'}", "A"), "bad_options", "choices"),  # one option
    (cflue("单项选择题", "{'A': '甲', 'B': '乙'}", "C"), "bad_answer", "answer"),
    (cflue("单项选择题", "{'A': '甲', 'B': '乙'}", "AB"), "bad_answer", "answer"),  # two letters, single choice
    (cflue("多项选择题", "{'A': '甲', 'B': '乙'}", "AA"), "bad_answer", "answer"),
    (cflue("填空题", "{'A': '甲', 'B': '乙'}", "A"), "unknown_shape", "task"),
    ({k: v for k, v in cflue("单项选择题", "", "A").items() if k != "choices"}, "missing_field", "choices"),
])
def test_bad_cflue_records(record, reason, field_name):
    with pytest.raises(BadRecord) as err:
        from_cflue(record)
    assert (err.value.reason, err.value.field_name) == (reason, field_name)


# ------------------------------------------------------------------------------------------------ Self-Instruct


def test_self_instruct_gives_one_sample_per_instance(tmp_path):
    one = {"id": "seed_task_1", "name": "haiku", "instruction": "Write a haiku about rain.",
           "instances": [{"input": "", "output": "Soft rain on tin roofs"}], "is_classification": False}
    two = {"id": "user_task_2", "motivation_app": "Mail", "instruction": "Shorten the sentence.",
           "instances": [{"input": "It is the case that it rains.", "output": "It rains."},
                         {"input": "We are of the opinion that no.", "output": "We think not."}]}
    path = write_jsonl(tmp_path / "self_instruct.jsonl", [one, two])
    records = list(sft_records(SftSourceArgs(name="si", path=str(path), format="self_instruct")))
    assert [loc for loc, _ in records] == [f"{path}:1", f"{path}:2 instance 0", f"{path}:2 instance 1"]
    assert records[0][1] == turns("Write a haiku about rain.", "Soft rain on tin roofs")
    assert records[2][1] == turns("Shorten the sentence.\nWe are of the opinion that no.", "We think not.")


@pytest.mark.parametrize("record, reason, field_name", [
    ({"instruction": "x", "instances": []}, "missing_field", "instances"),
    ({"instruction": "x", "instances": [{"input": "", "output": "a"}, {"input": "", "output": " "}]}, "empty_assistant",
     "instances[1].output"),
    ({"instruction": "x", "instances": [{"input": ""}]}, "missing_field", "instances[0].output"),
    ({"instruction": "x", "instances": [{"input": 3, "output": "a"}]}, "missing_field", "instances[0].input"),
    ({"instruction": " ", "instances": [{"input": "", "output": "a"}]}, "empty_user", "instruction"),
])
def test_bad_self_instruct_records(record, reason, field_name):
    with pytest.raises(BadRecord) as err:
        from_self_instruct(record)
    assert (err.value.reason, err.value.field_name) == (reason, field_name)


@pytest.mark.parametrize("fmt, good, bad, field_name", [
    ("ceval", {"question": "q", "A": "a", "B": "b", "answer": "A"}, {"question": "q", "A": "a", "B": "b",
                                                                     "answer": "Z"}, "answer"),
    ("cflue", cflue("判断题", "{'A': '对', 'B': '错'}", "A"), cflue("判断题", "{'A': 对}", "A"), "choices"),
    ("self_instruct", {"instruction": "x", "instances": [{"input": "", "output": "y"}]},
     {"instruction": "x", "instances": [{"input": "", "output": ""}]}, "instances[0].output"),
])
def test_a_bad_record_names_file_line_and_field_or_is_counted(tmp_path, fmt, good, bad, field_name):
    path = write_jsonl(tmp_path / f"{fmt}.jsonl", [good, bad, good])
    args = SftSourceArgs(name=fmt, path=str(path), format=fmt)
    where = re.escape(f"sft source '{fmt}': {path}:2: field '{field_name}': ")
    with pytest.raises(BadRecordError, match=where):
        read_sft_source(args, "fail", {})
    counts = {}
    assert len(read_sft_source(args, "skip", counts)) == 2 and sum(counts.values()) == 1


# ------------------------------------------------------------------------------------------------ the real files

# How each real source is read: (folder, format, columns). The data cards' recipe_source entries say the same.
REAL_SOURCES = {
    "lexeval_generation": ("legal", "alpaca", {"response": "answer"}),
    "lexeval_mcq": ("legal", "alpaca", {"response": "answer"}),
    "disc_law_eval_subjective": ("legal", "alpaca", {"prompt": "input", "response": "output"}),
    "disc_finllm_sft_samples": ("finance", "alpaca", None),
    "fin_eva_ant_mcq": ("finance", "ceval", None),
    "fin_eva_sufe_mcq": ("finance", "ceval", None),
    "cflue_knowledge": ("finance", "cflue", None),
    "cflue_application": ("finance", "alpaca", None),
    "oasst1_zh": ("general", "alpaca", None),
    "self_instruct_en": ("general", "self_instruct", None),
}


def real_source(name: str, split: str) -> SftSourceArgs:
    folder, fmt, columns = REAL_SOURCES[name]
    return SftSourceArgs(name=name, path=str(REALDATA_SFT / folder / f"{name}.{split}.jsonl"), format=fmt,
                         columns=columns)


@pytest.mark.skipif(not (REALDATA_SFT / "MANIFEST.json").is_file(),
                    reason=f"the real instruction data is not beside this checkout ({REALDATA_SFT})")
def test_every_real_instruction_file_reads_to_its_last_record():
    manifest = {entry["name"]: entry for entry in json.loads((REALDATA_SFT / "MANIFEST.json").read_text())}
    present = {name for name, e in manifest.items() if (REALDATA_SFT / e["train"]["file"]).is_file()}
    assert present == set(REAL_SOURCES), f"sources without a reader entry here: {sorted(present ^ set(REAL_SOURCES))}"
    for name in sorted(present):
        for split in ("train", "heldout"):
            expected = manifest[name][split]["records"]
            records = list(sft_records(real_source(name, split)))
            bad = [t.describe() for _, t in records if isinstance(t, BadRecord)]
            assert not bad, f"{name}.{split}: {len(bad)} records unreadable, the first: {bad[0]}"
            # One location per record (a Self-Instruct task with several instances adds " instance i").
            lines = {location.split(" instance ")[0] for location, _ in records}
            assert len(lines) == expected, f"{name}.{split}: {len(lines)} records read, MANIFEST.json says {expected}"
            samples = read_sft_source(real_source(name, split), "fail", {})
            assert len(samples) == len(records) and all(s.messages[-1]["content"].strip() for s in samples)


def test_the_real_cards_read_as_this_test_reads():
    """Each real source's data card gives the recipe entry this test reads the files with."""
    import yaml

    found = {}
    for card in sorted((ROOT / "data_cards").glob("*.md")):
        if card.name == "README.md":
            continue
        front = yaml.safe_load(card.read_text(encoding="utf-8").split("---\n")[1])
        entry = (front.get("yunshan") or {}).get("recipe_source") or {}
        path = str(entry.get("path", ""))
        if path.startswith("${realdata}/sft/"):
            name = Path(path).name.split(".")[0]
            found[name] = (path.split("/")[2], entry["format"], entry.get("columns"))
    assert found == REAL_SOURCES
