"""LawBench's three file kinds (task files, published predictions, results.csv) in their released forms, and a
malformed variant of each refused in one line naming the file, the line (and item key) and the field, and what is
valid. Every fixture is written here; the real files are read in test_lawbench_real.py."""

import json
import re

import pytest

from yunshan.eval.lawbench import load_lawbench, load_predictions, load_published_scores, load_task_file
from yunshan.eval.lawbench_scoring import GoldFormatError, parse_answers, score_task

INSTRUCTION_21 = "纠正下面法律文书句子中的错误，只需给出修改后的句子。句子："
ONE_SHOT_21 = ("纠正下面法律文书句子中的错误，只需给出修改后的句子。下面是一个例子:\n他门去了学校。\n他们去了学校。\n"
               "请你回答:\n句子：")


def write_tasks(root, tasks: dict) -> None:
    """Task files as LawBench writes them: a JSON list, indented by two spaces, one field a line."""
    root.mkdir(parents=True, exist_ok=True)
    for task, records in tasks.items():
        (root / f"{task}.json").write_text(json.dumps(records, ensure_ascii=False, indent=2), encoding="utf-8")


def record(instruction, question, answer):
    return {"instruction": instruction, "question": question, "answer": answer}


def test_release_forms_are_read(tmp_path):
    write_tasks(tmp_path / "zero_shot", {
        "1-2": [record("请选出正确答案。", "下列哪项正确?A:甲;B:乙;C:丙;D:丁", "正确答案：B。")],
        "3-6": [record("请分析案件并选出答案。", "甲应如何处理?A:甲;B:乙;C:丙;D:丁", "正确答案:C。")],  # ASCII colon
        "2-1": [record(INSTRUCTION_21, "被告人对起诉书指控的事实无意异。", "被告人对起诉书指控的事实无异议。")],
    })
    # the one-shot form: the solved example sits in the instruction, the sentence after "句子："
    write_tasks(tmp_path / "one_shot", {
        "2-1": [record(ONE_SHOT_21, "被告人对起诉书指控的事实无意异。", "被告人对起诉书指控的事实无异议。")]})
    (tmp_path / "zero_shot" / "bom").mkdir()
    for shots in ("zero_shot", "one_shot"):
        tasks = load_lawbench(tmp_path / shots)
        golds = parse_answers("2-1", [r["answer"] for r in tasks["2-1"]],
                              [r["instruction"] + "\n" + r["question"] for r in tasks["2-1"]])
        assert golds == [("被告人对起诉书指控的事实无意异。", "被告人对起诉书指控的事实无异议。")]
    tasks = load_lawbench(tmp_path / "zero_shot")
    assert score_task("3-6", ["[正确答案]C<eoa>"], [tasks["3-6"][0]["answer"]]).score == 1.0
    assert score_task("1-2", ["[正确答案]B<eoa>"], [tasks["1-2"][0]["answer"]]).score == 1.0
    # a UTF-8 byte-order mark is accepted
    bom = tmp_path / "bom" / "3-6.json"
    bom.parent.mkdir()
    bom.write_bytes(b"\xef\xbb\xbf" + (tmp_path / "zero_shot" / "3-6.json").read_bytes())
    assert load_task_file(bom)[0]["answer"] == "正确答案:C。"


@pytest.mark.parametrize("task, records, error", [
    ("3-6", [record("i", "q", "正确答案:C。"), record("i", "q", "答案:C")],
     r"3-6.json:7: field 'answer' is '答案:C'; this task's answers look like '正确答案：…' or '正确答案:…'"),
    ("3-6", [record("i", "q", "正确答案:E。")],
     r"3-6.json:2: field 'answer' is '正确答案:E。'; expected '正确答案：X' or '正确答案:X' with X in ABCD"),
    ("3-1", [record("i", "q", "法条:刑法第264条、第500条")],
     r"3-1.json:2: field 'answer' is .*; expected '法条:刑法第N条' or '法条:刑法第N条、M条' with article numbers 1-490"),
    ("3-4", [record("i", "q", "刑期:一年")], r"3-4.json:2: field 'answer' is '刑期:一年'; this task's answers look like "
                                            r"'刑期:…个月'"),
    ("3-7", [record("i", "q", "上文涉及到的犯罪金额:3万元。")], r"3-7.json:2: field 'answer' is .*; expected "
                                                             r"'上文涉及到的犯罪金额:N元。' with N a number of yuan"),
    ("2-3", [record("i", "q", "类别:离婚。")], r"2-3.json:2: field 'answer' has the label '离婚'; expected"),
    ("2-6", [record("i", "q", "犯罪嫌疑人张三")], r"2-6.json:2: entity '犯罪嫌疑人张三' is not 'type:value'"),
    ("2-1", [record("请纠正句子。", "他门去了学校。", "他们去了学校。")],
     r"2-1.json:2: field 'question' has no line '句子：' followed by the sentence to correct"),
    ("2-1", [record(INSTRUCTION_21, " ", "他们去了学校。")],
     r"2-1.json:2: field 'question': the line after '句子：' is empty"),
    ("2-9", [record("i", "q", "卖出"), {"instruction": "i", "question": "q"}],
     r"2-9.json:7: record 1 field 'answer' is missing; LawBench records are \{instruction, question, answer\}"),
    ("2-9", [record("i", 3, "卖出")], r"2-9.json:2: record 0 field 'question' is a int"),
    ("2-9", [["i", "q", "a"]], r"2-9.json:2: record 0 is not an object"),
    ("2-9", {"0": record("i", "q", "卖出")}, r"2-9.json:1: expected a JSON list of records"),
    ("2-9", [], r"2-9.json: an empty list"),
])
def test_malformed_task_files(tmp_path, task, records, error):
    write_tasks(tmp_path, {task: records})
    with pytest.raises((ValueError, GoldFormatError), match=rf"^{re.escape(str(tmp_path))}/{error}") as err:
        load_lawbench(tmp_path)
    assert "\n" not in str(err.value)


def test_broken_json_names_the_line(tmp_path):
    write_tasks(tmp_path, {"2-9": [record("i", "q", "卖出"), record("i", "q", "获利")]})
    path = tmp_path / "2-9.json"
    lines = path.read_text(encoding="utf-8").split("\n")
    lines[8] = lines[8].replace('"question": "q",', '"question": "q"')  # the second record's comma
    path.write_text("\n".join(lines), encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}:10: not valid JSON \(Expecting ',' delimiter\); "
                                         r"expected a JSON list of records$"):
        load_lawbench(tmp_path)
    path.write_text('[{"instruction": "i", "question": "q", "answer": "卖出"}]\n]', encoding="utf-8")
    with pytest.raises(ValueError, match=r"2-9.json:2: text after the end of the JSON list"):
        load_lawbench(tmp_path)


def write_predictions(path, items: dict) -> None:
    """A predictions file as LawBench publishes it: an object of items "0".."N-1", indented by four spaces."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(items, ensure_ascii=False, indent=4), encoding="utf-8")


def item(prompt, prediction, refr):
    return {"origin_prompt": prompt, "prediction": prediction, "refr": refr}


def test_prediction_files_in_both_prompt_forms(tmp_path):
    chat = [{"role": "HUMAN", "prompt": INSTRUCTION_21 + "\n他门去了学校。"}]
    write_predictions(tmp_path / "m" / "2-1.json", {
        "0": item(chat, "他们去了学校。", "他们去了学校。"),
        "1": item(INSTRUCTION_21 + "\n他门去了学校。", "他们去了学校。", "他们去了学校。")})
    data = load_predictions(tmp_path / "m" / "2-1.json")
    assert data["prompts"] == [INSTRUCTION_21 + "\n他门去了学校。"] * 2 and data["task"] == "2-1"
    assert data["where"] == [f'{tmp_path / "m" / "2-1.json"}:2 (item "0")', f'{tmp_path / "m" / "2-1.json"}:12 (item "1")']


@pytest.mark.parametrize("items, error", [
    ({"0": item("q", "A", "正确答案:A。"), "2": item("q", "B", "正确答案:B。")},
     r':7: item key \'2\'; expected the keys "0" to "1" \(LawBench reads items by index\)'),
    ({"0": item("q", "A", "正确答案:A。"), "1": {"origin_prompt": "q", "prediction": "B"}},
     r':7 \(item "1"\): field \'refr\' is missing; expected a string'),
    ({"0": item("q", None, "正确答案:A。")}, r':2 \(item "0"\): field \'prediction\' is a NoneType; expected a string'),
    ({"0": item([{"role": "HUMAN"}], "A", "正确答案:A。")},
     r":2 \(item \"0\"\): field 'origin_prompt' is .*; expected a string or a list of turns"),
    ({"0": item("q", "A", "正确答案:A。"), "1": item("q", "B", "B")},
     r":7 \(item \"1\"\): field 'answer' is 'B'; this task's answers look like"),
    ({"0": ["q", "A", "正确答案:A。"]}, r':2 \(item "0"\): not an object; expected \{origin_prompt, prediction, refr\}'),
    ([item("q", "A", "正确答案:A。")], r":1: expected a JSON object of items"),
])
def test_malformed_prediction_files(tmp_path, items, error):
    path = tmp_path / "m" / "3-6.json"
    write_predictions(path, items)
    with pytest.raises((ValueError, GoldFormatError), match=rf"^{re.escape(str(path))}{error}") as err:
        load_predictions(path)
    assert "\n" not in str(err.value)


def test_results_csv(tmp_path):
    path = tmp_path / "results.csv"
    path.write_text("task,model_name,score,abstention_rate\n2-10,m,0.1890181808381761,0.0\n3-6,m,0.5,0.012\n",
                    encoding="utf-8")
    scores = load_published_scores(path)
    assert scores[("m", "3-6")] == {"score": 50.0, "abstention_rate": 1.2}
    assert scores[("m", "2-10")]["score"] == pytest.approx(18.90181808381761)
    for text, error in [
        ("task,model,score,abstention_rate\n", r":1: header is 'task,model,score,abstention_rate'; expected "
                                              r"'task,model_name,score,abstention_rate'"),
        ("task,model_name,score,abstention_rate\n3-6,m,0.5\n", r":2: 3 fields; expected 4"),
        ("task,model_name,score,abstention_rate\n3-6,m,n/a,0\n", r":2: field 'score' is 'n/a'; expected a number in "
                                                               r"\[0, 1\]"),
        ("task,model_name,score,abstention_rate\n3-6,m,50,0\n", r":2: field 'score' is '50'; expected a number"),
        ("task,model_name,score,abstention_rate\n4-1,m,0.5,0\n", r":2: field 'task' is '4-1'; expected a LawBench task"),
        ("task,model_name,score,abstention_rate\n3-6,m,0.5,0\n3-6,m,0.6,0\n", r":3: model 'm', task '3-6' listed a "
                                                                             r"second time"),
    ]:
        path.write_text(text, encoding="utf-8")
        with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}{error}"):
            load_published_scores(path)
