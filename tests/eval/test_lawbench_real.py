"""LawBench's real release (../shared/realdata/lawbench) through the readers `yunshan eval` uses, and LawBench's
published scores reproduced from LawBench's published predictions.

The release is read in place (each test skipped with the reason when it is absent); malformed variants are made at
run time from fixtures of our own (test_malformed.py) or from the real files in a temporary folder, so no release
text is stored in the project. Task 2-1 is scored with ChERRANT's two data files as yunshan ships them
(eval/cherrant_data), or those of a LawBench checkout holding the predictions, or of $YUNSHAN_CHERRANT_DATA.
"""

import json

import pytest
from fixtures import realdata

from yunshan.eval.cherrant import CharAnnotator, find_resource_dir, load_resources
from yunshan.eval.items import eval_items
from yunshan.eval.lawbench import load_lawbench, load_predictions, load_published_scores, load_task_file
from yunshan.eval.lawbench_scoring import TASKS, score_task

MODELS = ("GPT4", "chatglm2-6b-hf", "qwen-7b-chat-hf")
TOLERANCE = 0.1  # points: scores x100, as results.csv x100
# Tasks whose LawBench function reports an abstention rate that main.py copies into results.csv (2-6's is spelled
# "anstention_rate" there, so results.csv has 0 for it).
REPORTED_ABSTENTION = {"1-2", "2-2", "2-3", "2-4", "2-8", "2-9", "3-1", "3-3", "3-4", "3-5", "3-6", "3-7"}


def test_every_zero_shot_task_file_is_read_with_its_counts():
    root = realdata("lawbench", "data", "zero_shot")
    tasks = load_lawbench(root)
    assert sorted(tasks) == sorted(TASKS) and all(len(records) == 500 for records in tasks.values())
    # 3-6 as released: an ASCII colon after 正确答案, 1-2 a full-width one; both read as the same letters
    assert all(r["answer"].startswith("正确答案:") for r in tasks["3-6"])
    assert all(r["answer"].startswith("正确答案：") for r in tasks["1-2"])
    # the decontamination reader goes through the same reader
    assert sum(1 for _ in eval_items("lawbench", root)) == 20 * 500


def test_every_published_prediction_file_is_read():
    root = realdata("lawbench", "predictions", "zero_shot")
    files = sorted(root.glob("*/*.json"))
    assert sorted({f.parent.name for f in files}) == sorted(MODELS) and len(files) == 3 * 18
    chat_form = 0
    for path in files:
        data = load_predictions(path)
        assert len(data["predictions"]) == len(data["answers"]) == len(data["prompts"]) == 500, path
        chat_form += path.read_text(encoding="utf-8").lstrip("{ \n").startswith('"0": {\n        "origin_prompt": [')
    assert chat_form == 18  # GPT4's prompts are OpenCompass's chat turns, the others' plain strings
    published = load_published_scores(root / "results.csv")
    assert len(published) == 3 * 20 and {m for m, _ in published} == set(MODELS)


def test_the_released_answers_are_the_task_files_answers():
    data = realdata("lawbench", "data", "zero_shot")
    preds = load_predictions(realdata("lawbench", "predictions", "zero_shot", "qwen-7b-chat-hf", "3-6.json"))
    assert preds["answers"] == [r["answer"] for r in load_task_file(data / "3-6.json")]


def cherrant_for(root):
    return CharAnnotator(load_resources(find_resource_dir(root)))


@pytest.mark.parametrize("model", MODELS)
def test_published_scores_reproduced(model):
    root = realdata("lawbench", "predictions", "zero_shot")
    published = load_published_scores(root / "results.csv")
    checked = []
    for path in sorted((root / model).glob("*.json")):
        if path.stem == "2-1":
            continue  # test_published_2_1_reproduced
        data = load_predictions(path)
        scored = score_task(path.stem, data["predictions"], data["answers"], data["prompts"], source=str(path),
                            where=data["where"], prompt_field="origin_prompt")
        pub = published[(model, path.stem)]
        assert 100 * scored.score == pytest.approx(pub["score"], abs=TOLERANCE), path
        rate = 100 * scored.abstentions / len(data["answers"]) if path.stem in REPORTED_ABSTENTION else 0.0
        assert rate == pytest.approx(pub["abstention_rate"], abs=TOLERANCE), path
        checked.append(path.stem)
    assert len(checked) == 17


def test_published_2_1_reproduced():
    root = realdata("lawbench", "predictions", "zero_shot")
    published = load_published_scores(root / "results.csv")
    cherrant = cherrant_for(root)
    gold_cache: dict = {}
    for model in MODELS:
        path = root / model / "2-1.json"
        data = load_predictions(path)
        scored = score_task("2-1", data["predictions"], data["answers"], data["prompts"], source=str(path),
                            where=data["where"], prompt_field="origin_prompt", cherrant=cherrant,
                            gold_cache=gold_cache)
        assert 100 * scored.score == pytest.approx(published[(model, "2-1")]["score"], abs=TOLERANCE), model
        assert scored.details["cherrant_resources"] == cherrant.resources.source
    assert len(gold_cache) >= 500  # reference annotations kept across files (the models were run on two data versions)


def test_a_real_task_file_with_one_broken_answer_is_refused_at_its_line(tmp_path):
    """A copy of the real 3-6 file (made here, in a temporary folder) with one answer letter outside A-D."""
    source = realdata("lawbench", "data", "zero_shot", "3-6.json")
    records = json.loads(source.read_text(encoding="utf-8"))
    records[7]["answer"] = "正确答案:E。"
    broken = tmp_path / "3-6.json"
    broken.write_text(json.dumps(records, ensure_ascii=False, indent=2), encoding="utf-8")
    line = 2 + 5 * 7  # "[" on line 1, then five lines a record ("{", its three fields, "}")
    with pytest.raises(ValueError, match=rf"3-6.json:{line}: field 'answer' is '正确答案:E。'; expected '正确答案：X' or "
                                         r"'正确答案:X' with X in ABCD"):
        load_lawbench(tmp_path)
