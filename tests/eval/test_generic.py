"""Your own evaluation sets (eval/generic.py): a multiple-choice file scores exactly as the same items in the FinEval
layout; short answers and generations scored by exact match, character F1 and ROUGE-L; bad rows stop with
file:line: field; the sets reach results.json, results.md, the model card's metrics and decontamination."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from yunshan.eval import ceval, generic
from yunshan.eval.generic import PromptFormat, normalize_answer, read_rows, run_generic, score_answer, short_answer
from yunshan.eval.lawbench_scoring import char_f1, rouge_l

CEVAL = PromptFormat(description="以下是中国关于{subject}考试的单项选择题，请选出其中的正确答案。\n\n")


def _jsonl(path: Path, rows: list[dict]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


def _as_generic(fineval: Path, out: Path, as_csv: bool = False) -> Path:
    """The FinEval-layout folder's val and dev rows as one mc folder (subject = the chinese name), in the same
    order: list-of-choices JSONL, or a CSV with A-D columns."""
    mapping = ceval.load_subject_mapping(fineval)
    for split, target in (("val", "test"), ("dev", "dev")):
        rows = []
        for key, (_, chinese, _) in mapping.items():
            for q in ceval.read_choice_csv(fineval / split / f"{key}_{split}.csv", ceval.COLUMNS, "C-Eval"):
                if as_csv:
                    rows.append({"id": f"{key}-{q.id}", "subject": chinese, "question": q.question,
                                 **dict(zip("ABCD", q.options)), "answer": q.answer})
                else:
                    rows.append({"id": f"{key}-{q.id}", "subject": chinese, "question": q.question,
                                 "choices": list(q.options), "answer": "ABCD".index(q.answer)})
        if as_csv:
            out.mkdir(parents=True, exist_ok=True)
            with open(out / f"{target}.csv", "w", encoding="utf-8", newline="") as fh:
                w = csv.DictWriter(fh, fieldnames=["id", "subject", "question", "A", "B", "C", "D", "answer"])
                w.writeheader()
                w.writerows(rows)
        else:
            _jsonl(out / f"{target}.jsonl", rows)
    return out


@pytest.mark.parametrize("shots,mode,as_csv", [(0, "loglik", False), (2, "loglik", True), (2, "cloze", False)])
def test_mc_file_scores_exactly_like_the_fineval_layout(tmp_path, llama, writers, shots, mode, as_csv):
    fineval = writers.ceval(tmp_path / "fineval", n_val=4, n_dev=3)
    own = _as_generic(fineval, tmp_path / "own", as_csv=as_csv)
    ref = ceval.run_ceval(llama, fineval, split="val", shots=shots, mode=mode, batch_size=4)
    # FinEval's cloze prompt has a header of its own (ceval._cloze_header): the same words as --description.
    fmt = PromptFormat(description="以下是中国关于{subject}考试的题目，请给出正确答案。\n\n") if mode == "cloze" else CEVAL
    res = run_generic(llama, own, "mc", fmt=fmt, shots=shots, mode=mode, batch_size=4)
    assert res["n"] == ref["n"] == 12 and res["shots"] == shots
    for a, b in zip(res["predictions"], ref["predictions"]):
        assert (a["pred"], a["gold"], a["correct"]) == (b["pred"], b["gold"], b["correct"])
        assert a["logliks"] == pytest.approx(b["logliks"], abs=1e-5)
    assert res["overall"] == ref["overall"]
    for key, (_, chinese, _) in ceval.load_subject_mapping(fineval).items():
        assert res["subjects"][chinese]["accuracy"] == ref["subjects"][key]["accuracy"]
    assert res["chance"] == 25.0


def test_mc_generation_mode_matches_fineval_and_chat_likelihood_scores_the_chat_turn(tmp_path, llama, writers):
    fineval = writers.ceval(tmp_path / "fineval", n_val=2, n_dev=3)
    own = _as_generic(fineval, tmp_path / "own")
    ref = ceval.run_ceval(llama, fineval, split="val", shots=1, mode="generate", chat=True, max_new_tokens=5)
    res = run_generic(llama, own, "mc", fmt=CEVAL, shots=1, mode="generate", chat=True, max_new_tokens=5)
    assert [(p["output"], p["pred"], p["pattern"]) for p in res["predictions"]] == [
        (p["output"], p["pred"], p["pattern"]) for p in ref["predictions"]]
    # --chat on: the prompt is one user turn of the chat template, the letter scored after the assistant's header.
    from yunshan.eval.generation import render_chat
    from yunshan.eval.likelihood import score_choices

    res = run_generic(llama, own, "mc", fmt=CEVAL, chat_likelihood=True)
    subjects, _ = generic.load_set(own, "mc")
    prompts = [render_chat(llama.tokenizer, CEVAL.prompt(s.key, [], q)) for s in subjects for q in s.questions]
    assert prompts[0].startswith("<|user|>以下是中国关于") and prompts[0].endswith("答案：\n<|assistant|>")
    expected = score_choices(llama, [(p, list("ABCD")) for p in prompts])
    for p, e in zip(res["predictions"], expected, strict=True):
        assert p["logliks"] == pytest.approx(e.logliks, abs=1e-5)
    assert res["chat"] is True


def test_mc_prompt_is_ceval_prompt_to_the_byte(tmp_path, writers):
    fineval = writers.ceval(tmp_path / "fineval", n_val=2, n_dev=3)
    own = _as_generic(fineval, tmp_path / "own")
    subjects, _ = generic.load_set(own, "mc", shots=3)
    reference = ceval.load_ceval(fineval, "val", 3)
    for mine, theirs in zip(subjects, reference):
        for a, b in zip(mine.questions, theirs.questions):
            assert CEVAL.prompt(mine.key, mine.dev, a) == ceval.render_prompt(theirs.chinese, theirs.dev, b)


def test_five_options_and_generation_extract_letters_beyond_d(tmp_path, llama):
    rows = [{"question": "哪个是利率工具", "A": "税收", "B": "补贴", "C": "国债", "D": "关税", "E": "公开市场操作",
             "answer": "e"},
            {"question": "股票收益来自", "choices": ["股息", "利息"], "answer": 0}]
    path = _jsonl(tmp_path / "five.jsonl", rows)
    questions = read_rows(path, "mc")
    assert [q.letters for q in questions] == ["ABCDE", "AB"] and [q.answer for q in questions] == ["E", "A"]
    res = run_generic(llama, path, "mc", batch_size=2)
    assert [len(p["logliks"]) for p in res["predictions"]] == [5, 2]
    assert res["chance"] == pytest.approx(100 * (1 / 5 + 1 / 2) / 2)
    from yunshan.eval.extraction import extract_choice

    assert extract_choice("答案是：E", "ABCDE") == ("E", "answer_is")
    assert extract_choice("答案是：E") == (None, None)  # four options: E is no answer


def test_short_answer_metrics():
    assert normalize_answer(" ＡＢＣ，有限公司。") == normalize_answer("abc有限公司")
    assert short_answer("\n答案：三年\n因为……", "答案：") == "三年"
    scores = score_answer("三年以下有期徒刑", ["三年以下有期徒刑", "三年"], ("exact_match", "char_f1", "rouge_l"))
    assert scores == {"exact_match": 1.0, "char_f1": 1.0, "rouge_l": pytest.approx(1.0, abs=1e-6)}
    scores = score_answer("处三年有期徒刑", ["三年以下有期徒刑", "五年"], ("exact_match", "char_f1", "rouge_l"))
    assert scores["exact_match"] == 0.0
    assert scores["char_f1"] == max(char_f1(r, "处三年有期徒刑") for r in ["三年以下有期徒刑", "五年"])
    assert scores["rouge_l"] == max(rouge_l("处三年有期徒刑", r) for r in ["三年以下有期徒刑", "五年"])


def test_qa_and_gen_scores_are_the_mean_of_their_items(tmp_path, llama):
    _jsonl(tmp_path / "qa" / "test.jsonl", [
        {"id": "q1", "question": "盗窃罪规定在刑法第几条？", "answer": ["第二百六十四条", "264"], "subject": "刑法"},
        {"id": "q2", "question": "资产负债表反映什么？", "answer": "财务状况", "subject": "会计"},
        {"id": "q3", "question": "央行提高利率为了什么？", "answer": "抑制通货膨胀", "subject": "会计"}])
    _jsonl(tmp_path / "qa" / "dev.jsonl", [{"question": "银行的主要负债是？", "answer": "存款"}])
    res = run_generic(llama, tmp_path / "qa", "qa", shots=1, max_new_tokens=6, batch_size=2)
    assert res["shots"] == 1 and res["dev"].endswith("dev.jsonl") and res["split"] == "test"
    assert res["predictions"][0]["prompt"] == "银行的主要负债是？\n答案：存款\n\n盗窃罪规定在刑法第几条？\n答案："
    for metric in ("exact_match", "char_f1", "rouge_l"):
        assert res["metrics"][metric] == pytest.approx(100 * sum(p[metric] for p in res["predictions"]) / 3)
        assert res["subjects"]["会计"][metric] == pytest.approx(
            100 * sum(p[metric] for p in res["predictions"][1:]) / 2)
    for p in res["predictions"]:
        assert p["answer"] == short_answer(p["output"], "答案：")
        assert p["char_f1"] == max(char_f1(g, p["answer"]) for g in p["gold"])
    gen = _jsonl(tmp_path / "gen.jsonl", [{"question": "概括：被告人盗窃手机。", "answer": "被告人犯盗窃罪。"}])
    res = run_generic(llama, gen, "gen", max_new_tokens=8, fmt=PromptFormat(answer_prefix=""))
    p = res["predictions"][0]
    assert res["overall"] == pytest.approx(100 * rouge_l(p["output"].strip(), "被告人犯盗窃罪。"))
    assert res["shots"] == 0 and res["dev"] is None


@pytest.mark.parametrize("rows,kind,message", [
    ('{"question": "q", "A": "a", "B": "b", "answer": "C"}', "mc", ":2: field 'answer' is 'C'; it must be one of A, B"),
    ('{"question": "q", "answer": "A"}', "mc", ":2: field 'choices' is missing"),
    ('{"question": "q", "A": "a", "B": "", "C": "c", "answer": "A"}', "mc", ":2: field 'B' is empty but a later"),
    ('{"question": "q", "choices": ["a"], "answer": 0}', "mc", ":2: 1 option(s); a question needs 2 to 10"),
    ('{"question": "q", "choices": ["a", "b"], "answer": 2}', "mc", ":2: field 'answer' is 2; an index must be 0 to 1"),
    ('{"question": "", "choices": ["a", "b"], "answer": "A"}', "mc", ":2: field 'question' is empty"),
    ('{"question": "q", "choices": ["a", "b"], "A": "x", "answer": "A"}', "mc", ":2: fields 'choices' and 'A' both"),
    ('{"question": "q"}', "qa", ":2: field 'answer' is missing"),
    ('{"question": "q", "answer": []}', "qa", ":2: field 'answer' is []"),
    ('{"question": "q", "answer": {"x": 1}}', "gen", ":2: field 'answer' is {'x': 1}"),
    ('{"question": "q", "answer": "a", "id": 1}\n{"question": "r", "answer": "b", "id": "1"}', "qa",
     ":3: field 'id' is '1', already used at line 2"),
    ('{"question": "q", "answer": "a"', "qa", ":2: malformed_json"),
    ('["question"]', "qa", ":2: a row is list, not an object"),
])
def test_bad_rows_are_one_line_errors_naming_file_line_field(tmp_path, rows, kind, message):
    path = tmp_path / "set.jsonl"
    good = {"mc": '{"question": "ok", "choices": ["a", "b"], "answer": "A"}',
            "qa": '{"question": "ok", "answer": "a"}', "gen": '{"question": "ok", "answer": "a"}'}[kind]
    path.write_text(good + "\n" + rows + "\n", encoding="utf-8")
    with pytest.raises(ValueError) as err:
        read_rows(path, kind)
    text = str(err.value)
    assert "\n" not in text and text.startswith(str(path)) and message in text


def test_csv_rows_name_their_line_and_field(tmp_path):
    path = tmp_path / "set.csv"
    path.write_text("\ufeffQuestion , A,B,C,D,E,Answer\nq1,a,b,c,d,,B\n\"q2\nacross lines\",a,b,c,d,e,F\n",
                    encoding="utf-8")
    with pytest.raises(ValueError, match=r"set\.csv:4: field 'answer' is 'F'; it must be one of A, B, C, D, E"):
        read_rows(path, "mc")
    path.write_text("question,A,B,C,D,E,answer\nq1,a,b,c,d,,B\nq2,a,b,c,d,e,E\n", encoding="utf-8")
    assert [q.letters for q in read_rows(path, "mc")] == ["ABCD", "ABCDE"]


def test_json_list_rows_name_their_line(tmp_path):
    path = tmp_path / "set.json"
    path.write_text('[\n {"question": "q", "answer": "a"},\n {"question": "r",\n  "answer": ""}\n]\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"set\.json:3: field 'answer' is ''"):
        read_rows(path, "qa")


def test_folder_layout_errors(tmp_path):
    folder = tmp_path / "set"
    _jsonl(folder / "val.jsonl", [{"question": "q", "answer": "a"}])
    with pytest.raises(FileNotFoundError, match=r"no test\.\* file \(it holds val\.jsonl\)"):
        generic.load_set(folder, "qa")
    assert generic.load_set(folder, "qa", split="val")[1]["shots"] == 0
    _jsonl(folder / "dev.jsonl", [{"question": "q", "answer": "a", "subject": "x"}])
    _jsonl(folder / "test.jsonl", [{"question": "q", "answer": "a", "subject": "y"}])
    with pytest.raises(ValueError, match=r"dev\.jsonl: 0 dev rows for subject 'y', fewer than --shots 1"):
        generic.load_set(folder, "qa", shots=1)


def test_cli_results_tables_card_metrics_and_labels(tmp_path, llama_dir, writers):
    from yunshan.io.artifacts import EvalResults
    from yunshan.cli import main

    fineval = writers.ceval(tmp_path / "fineval", n_val=3, n_dev=2)
    own = _as_generic(fineval, tmp_path / "own")
    qa = _jsonl(tmp_path / "qa.jsonl", [{"question": "资产负债表反映什么？", "answer": "财务状况"}])
    gen = _jsonl(tmp_path / "gen.csv.jsonl", [{"question": "概括：被告人盗窃。", "answer": "盗窃罪"}])
    out = tmp_path / "run"
    code = main(["eval", "--model", str(llama_dir), "--tasks", f"mc:fin={own}", f"mc={own / 'test.jsonl'}",
                 f"qa={qa}", f"gen:summary={gen}", "--shots", "2", "--max-new-tokens", "4",
                 "--description", CEVAL.description, "--out", str(out), "--no-progress"])
    assert code == 0
    results = EvalResults.read(out / "results.json")
    assert list(results.tasks) == ["mc:fin", "mc", "qa", "gen:summary"]
    name = next(iter(results.models))
    fin = results.tasks["mc:fin"]
    assert fin.format == "generic" and fin.results[name]["shots"] == 2
    from yunshan.eval.loading import load_model

    assert fin.results[name]["overall"] == ceval.run_ceval(load_model(str(llama_dir)), fineval, shots=2)["overall"]
    assert results.tasks["mc"].results[name]["shots"] == 0  # a file: no dev rows
    metrics = {m.key: m for ms in (t.metrics[name] for t in results.tasks.values()) for m in ms}
    assert set(metrics) == {"mc:fin/accuracy", "mc/accuracy", "qa/exact_match", "qa/char_f1", "qa/rouge_l",
                            "gen:summary/rouge_l", "gen:summary/char_f1"}
    assert metrics["mc:fin/accuracy"].detail.startswith("2-shot, answer likelihood")
    assert metrics["qa/exact_match"].eval_result["dataset_type"] == "qa.jsonl"
    md = (out / "results.md").read_text(encoding="utf-8")
    assert "## mc:fin\n\n| Model | 会计 | 银行从业资格 | 金融学 | AVG |" in md
    assert "## qa\n\n| Model | exact match | character F1 | ROUGE-L |" in md
    assert "## gen:summary\n\n| Model | ROUGE-L | character F1 |" in md


def test_cli_task_spec_errors(tmp_path, llama_dir, capsys):
    from yunshan.cli import main

    qa = _jsonl(tmp_path / "qa.jsonl", [{"question": "q", "answer": "a"}])
    for tasks, message in ((["mc"], "--tasks mc: no data path; give mc=PATH"),
                           ([f"qa={qa}", f"qa={qa}"], "'qa' given twice; label your own sets apart: qa:LABEL=PATH"),
                           ([f"fineval:x={qa}"], "unknown task 'fineval:x'"),
                           ([f"qa:={qa}"], "empty label after qa:")):
        assert main(["eval", "--model", str(llama_dir), "--tasks", *tasks, "--out", str(tmp_path / "o")]) == 1
        assert message in capsys.readouterr().err


def test_decontamination_checks_your_own_sets(tmp_path):
    from yunshan.eval.decontamination import DecontaminateArgs, run_decontamination

    question = "根据本行的内部信贷管理办法第十二条的规定，对于单户授信总额超过五千万元的企业客户，贷款发放前需要经过哪一级审批委员会审议"
    own = tmp_path / "own"
    _jsonl(own / "test.jsonl", [{"id": "leak", "question": question, "choices": ["支行", "分行", "总行", "董事会"],
                                 "answer": "C", "subject": "信贷"},
                                {"id": "clean", "question": "完全不同的另一个问题，与训练语料没有任何重合的内容，用来对照检查结果是否正确",
                                 "choices": ["甲", "乙"], "answer": "A"}])
    corpus = _jsonl(tmp_path / "corpus" / "train.jsonl", [{"text": "内部资料：" + question + "？答案是总行。"}])
    report, _ = run_decontamination(DecontaminateArgs(inputs=[str(corpus)], tasks=[f"mc:bank={own}"],
                                                      out=str(tmp_path / "d")))
    items = [json.loads(line) for line in (tmp_path / "d" / "items.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [i["id"] for i in items if i["task"] == "mc:bank"] == ["test.jsonl#leak"]
    assert items[0]["eval"].endswith("test.jsonl:1") and items[0]["group"] == "信贷"
