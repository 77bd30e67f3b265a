"""The real FinEval and CMMLU releases (../shared/realdata) read unchanged by the readers `yunshan eval` uses, with
their counts; a malformed variant of every real file stopped by one line naming the file, line and field; and the
release variations (BOM, header spelling, index column, trailing fields) accepted.

The releases are read in place (skipped with the reason when the folder is absent); the malformed variants are
written to a temporary folder at run time from the real file, so no release text is stored in the project. Layouts
not in realdata (C-Eval, FinanceIQ, JEC-QA) are covered with fixtures of our own in their released form.
"""

import csv
import json
import re
from pathlib import Path

import pytest
from fixtures import realdata

from yunshan.eval import ceval, cmmlu
from yunshan.eval.items import eval_items
from yunshan.eval.jecqa import load_jecqa, run_jecqa
from yunshan.eval.multiple_choice import read_choice_csv

FINEVAL_GROUPS = {"Accounting": 825, "Certificate": 973, "Economy": 632, "Finance": 910}


def test_fineval_release_counts():
    root = realdata("fineval")
    subjects = ceval.load_ceval(root, "val", shots=5)
    assert len(subjects) == 34
    assert sum(len(s.questions) for s in subjects) == 3340
    assert sum(len(s.dev) for s in subjects) == 170  # five solved examples per subject
    groups: dict[str, int] = {}
    for s in subjects:
        groups[s.group] = groups.get(s.group, 0) + len(s.questions)
    assert groups == FINEVAL_GROUPS
    # The decontamination reader (every split) reads the same files with the same checks.
    assert sum(1 for _ in eval_items("fineval", root)) == 3340 + 170


def test_cmmlu_release_counts_and_chinese_subject_names():
    root = realdata("cmmlu")
    subjects = cmmlu.load_cmmlu(root, "test", shots=5)
    assert len(subjects) == 67
    assert sum(len(s.questions) for s in subjects) == 11582
    assert sum(len(s.dev) for s in subjects) == 335
    names = cmmlu.cmmlu_subject_names()
    assert sorted(s.key for s in subjects) == sorted(names)  # the shipped table covers the release exactly
    for s in subjects:
        assert s.name == names[s.key] and re.search(r"[\u4e00-\u9fff]", s.name), s.key
    agronomy = next(s for s in subjects if s.key == "agronomy")
    prompt = cmmlu.render_prompt(agronomy.name, agronomy.dev, agronomy.questions[0])
    assert prompt.startswith("以下是关于农学的单项选择题，请直接给出正确答案的选项。\n\n题目：")
    assert sum(1 for _ in eval_items("cmmlu", root)) == 11582 + 335


def test_yunshan_eval_reads_every_real_file(tmp_path, llama_dir):
    """`yunshan eval` itself on both releases (every subject file read, one question per subject scored)."""
    from yunshan.eval.commands import EvalArgs, run_eval

    fineval, cmmlu_root = realdata("fineval"), realdata("cmmlu")
    report = run_eval(EvalArgs(model=[str(llama_dir)], tasks=[f"fineval={fineval}", f"cmmlu={cmmlu_root}"],
                               limit=1, shots=5, batch_size=8, out=str(tmp_path / "out"), progress=False,
                               hash_weights=False))
    fin = report["tasks"]["fineval"]["results"][llama_dir.name]
    cm = report["tasks"]["cmmlu"]["results"][llama_dir.name]
    assert (len(fin["subjects"]), fin["n"]) == (34, 34)
    assert (len(cm["subjects"]), cm["n"]) == (67, 67)
    assert cm["subjects"]["agronomy"]["name"] == "农学"
    # Every file of both releases is fingerprinted in results.json.
    assert len(report["tasks"]["fineval"]["files"]) == 34 * 2 + 1
    assert len(report["tasks"]["cmmlu"]["files"]) == 67 * 2


# ------------------------------------------------------------------------------ malformed variants of the real files
def _real_csv_files():
    out = []
    for name, fmt in (("fineval", "C-Eval"), ("cmmlu", "CMMLU")):
        try:
            root = realdata(name)
        except pytest.skip.Exception:
            continue
        out += [(fmt, p) for p in sorted(root.glob("*/*.csv"))]
    return out


def _columns(fmt: str):
    return (ceval.COLUMNS, ceval.HEADER_HINT) if fmt == "C-Eval" else (cmmlu.COLUMNS, cmmlu.HEADER_HINT)


def _rows(path: Path) -> list[list[str]]:
    with open(path, encoding="utf-8-sig", newline="") as fh:
        return list(csv.reader(fh))


def _write(path: Path, rows: list[list[str]]) -> None:
    with open(path, "w", encoding="utf-8", newline="") as fh:
        csv.writer(fh, lineterminator="\n").writerows(rows)


def _line_of(rows: list[list[str]], k: int) -> int:
    """The line row k starts on when written one row per line: embedded newlines push the later rows down."""
    return 1 + sum(1 + sum(cell.count("\n") for cell in row) for row in rows[:k])


FAULTS = ("answer", "short_row", "unquoted_comma", "empty_question", "empty_option", "missing_column")


def test_every_real_file_has_a_malformed_variant_that_is_refused(tmp_path):
    files = _real_csv_files()
    if not files:
        pytest.skip("no real FinEval or CMMLU files beside this checkout")
    for n, (fmt, real) in enumerate(files):
        columns, hint = _columns(fmt)
        rows = _rows(real)
        header = [h.lower() for h in rows[0]]
        col = {role: header.index(name.lower()) for role, name in columns.items()}
        k = 1 + (len(rows) - 1) // 2  # a row in the middle of the file
        fault = FAULTS[n % len(FAULTS)]
        bad = [list(r) for r in rows]
        field = None
        if fault == "answer":
            bad[k][col["answer"]], field = "E", columns["answer"]
            expected = rf":{_line_of(bad, k)}: field '{field}' is 'E'; it must be one of A, B, C, D"
        elif fault == "short_row":
            bad[k] = bad[k][:-1]
            expected = rf":{_line_of(bad, k)}: row has {len(rows[0]) - 1} fields, the header has {len(rows[0])}"
        elif fault == "unquoted_comma":
            q = col["question"]
            bad[k] = bad[k][:q + 1] + ["另一半"] + bad[k][q + 1:]
            expected = rf":{_line_of(bad, k)}: row has {len(rows[0]) + 1} fields, .* must be quoted"
        elif fault == "empty_question":
            bad[k][col["question"]], field = "", columns["question"]
            expected = rf":{_line_of(bad, k)}: field '{field}' is empty"
        elif fault == "empty_option":
            bad[k][col["C"]] = " "
            expected = rf":{_line_of(bad, k)}: field 'C' is empty; every row needs four options A-D"
        else:
            bad[0][col["A"]] = "X"
            expected = r":1: missing column 'A' .*" + re.escape(hint)
        path = tmp_path / real.parent.name / real.name
        path.parent.mkdir(exist_ok=True)
        _write(path, bad)
        with pytest.raises(ValueError) as err:
            read_choice_csv(path, columns, fmt, header_hint=hint)
        message = str(err.value)
        assert "\n" not in message, (real, fault, message)
        assert re.match(re.escape(str(path)) + expected, message), (real, fault, message)


def test_release_variations_are_accepted(tmp_path):
    """BOM or none, header case and spaces, a pandas index column before C-Eval's id, empty trailing fields: the
    same questions as the file as released."""
    for name, fmt, glob in (("fineval", "C-Eval", "val/*.csv"), ("cmmlu", "CMMLU", "test/*.csv")):
        real = sorted(realdata(name).glob(glob))[0]
        columns, hint = _columns(fmt)
        original = read_choice_csv(real, columns, fmt, header_hint=hint)
        rows = _rows(real)
        variants = {
            "bom": ("\ufeff", rows),
            "header case and spaces": ("", [[f" {h.upper()} " for h in rows[0]]] + rows[1:]),
            "index column": ("", [[""] + rows[0]] + [[str(i)] + r for i, r in enumerate(rows[1:])]),
            "trailing empty field": ("", [rows[0]] + [r + [""] for r in rows[1:]]),
        }
        for label, (prefix, variant) in variants.items():
            path = tmp_path / label / real.name
            path.parent.mkdir(exist_ok=True)
            _write(path, variant)
            if prefix:
                path.write_text(prefix + path.read_text(encoding="utf-8"), encoding="utf-8")
            got = read_choice_csv(path, columns, fmt, header_hint=hint)
            assert [(q.question, q.options, q.answer) for q in got] == \
                [(q.question, q.options, q.answer) for q in original], (name, label)


def test_question_and_option_texts_are_kept_as_released(tmp_path, writers):
    """The owners' code puts cells into the prompt unstripped; only the answer letter is trimmed (FinEval's "D ")."""
    root = writers.cmmlu(tmp_path / "c", subjects=("税务师",), n_test=1, n_dev=0)
    f = root / "test" / "税务师.csv"
    _write(f, [["", "Question", "A", "B", "C", "D", "Answer"], ["0", " 题干 ", "甲 ", "乙", " 丙", "丁", "D "]])
    (q,) = read_choice_csv(f, cmmlu.COLUMNS, "CMMLU", header_hint=cmmlu.HEADER_HINT)
    assert (q.question, q.options, q.answer, q.id) == (" 题干 ", ("甲 ", "乙", " 丙", "丁"), "D", "0")
    assert cmmlu.render_prompt("税务师", [], q).endswith("题目： 题干 \nA. 甲 \nB. 乙\nC.  丙\nD. 丁\n答案是：")
    # lm-eval's cmmlu and ceval tasks strip the question only ({{Question.strip()}}).
    assert cmmlu.render_prompt("税务师", [], q, "lm-eval").endswith("\n\n题干\nA. 甲 \nB. 乙\nC.  丙\nD. 丁\n答案：")


# ------------------------------------------------------------------------- subject names in the CMMLU-format prompt
def test_cmmlu_subject_names_come_from_cmmlu_or_a_chinese_file_name(tmp_path, writers):
    root = writers.cmmlu(tmp_path / "c", subjects=("agronomy", "注册会计师（CPA）"), n_test=1, n_dev=1)
    names = {s.key: s.name for s in cmmlu.load_cmmlu(root, shots=1)}
    assert names == {"agronomy": "农学", "注册会计师（CPA）": "注册会计师（CPA）"}
    (root / "subject_mapping.json").write_text(json.dumps({"agronomy": "农业"}, ensure_ascii=False),
                                               encoding="utf-8")
    assert cmmlu.load_cmmlu(root, shots=1)[0].name == "农业"  # the folder's own mapping wins


def test_an_english_subject_without_a_chinese_name_is_refused(tmp_path, writers):
    root = writers.cmmlu(tmp_path / "c", subjects=("quantum_finance",), n_test=1, n_dev=1)
    f = root / "test" / "quantum_finance.csv"
    with pytest.raises(ValueError, match=rf"^{re.escape(str(f))}: subject 'quantum_finance' has no Chinese name "
                                         r"for the prompt: .*subject_mapping.json"):
        cmmlu.load_cmmlu(root, shots=1)


# ---------------------------------------------------------------------------- C-Eval and JEC-QA in released layouts
def test_ceval_test_split_without_answers_says_to_score_val(tmp_path, writers):
    root = writers.ceval(tmp_path / "ceval")
    (root / "test").mkdir()
    for key in ("accounting", "banking", "finance"):  # C-Eval's test CSVs: no answer column
        _write(root / "test" / f"{key}_test.csv", [["id", "question", "A", "B", "C", "D"], ["0", "q", "a", "b", "c", "d"]])
    with pytest.raises(ValueError, match=r"accounting_test.csv:1: missing column 'answer' .*score --split val"):
        ceval.load_ceval(root, "test", shots=0)
    # Decontamination still reads the test questions (answers are not needed there).
    assert sum(1 for t in eval_items("ceval", root) if "/test/" in t.location) == 3


def _jecqa_record(i, answer=("A",)):
    return {"answer": list(answer), "id": f"{i}", "option_list": {"A": "甲", "B": "乙", "C": "丙", "D": "丁"},
            "statement": f"第{i}题：下列说法正确的是", "subject": "刑法", "type": "0"}


def test_jecqa_release_files_give_the_question_type_by_file_name(tmp_path, llama):
    """The release has no `source` field: 0_*.json are knowledge-driven, 1_*.json case-analysis questions."""
    folder = tmp_path / "jecqa"
    folder.mkdir()
    for name, n in (("0_train.json", 3), ("1_train.json", 2)):
        (folder / name).write_text("".join(json.dumps(_jecqa_record(i), ensure_ascii=False) + "\n" for i in range(n)),
                                   encoding="utf-8")
    records = load_jecqa(folder)
    assert [r["source"] for r in records] == [0, 0, 0, 1, 1]
    result = run_jecqa(llama, folder, batch_size=4)
    assert {k: v["n"] for k, v in result["sources"].items()} == {"knowledge": 3, "case analysis": 2}


def test_jecqa_test_file_without_answers_is_refused_with_the_way_out(tmp_path):
    path = tmp_path / "0_test.json"
    record = _jecqa_record(0)
    del record["answer"]
    path.write_text(json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"^{re.escape(str(path))}:1: field 'answer' is missing; .*jecqa-holdout"):
        load_jecqa(path)
