"""Malformed benchmark files fail with a message that names the file, the line or record, and what is valid."""

import json
import re

import pytest

from yunshan.eval.ceval import load_ceval
from yunshan.eval.cmmlu import load_cmmlu
from yunshan.eval.jecqa import load_jecqa
from yunshan.eval.lawbench import load_lawbench


def _rewrite(path, old, new):
    path.write_text(path.read_text(encoding="utf-8").replace(old, new, 1), encoding="utf-8")


def test_missing_column(tmp_path, writers):
    root = writers.ceval(tmp_path / "f")
    f = root / "val" / "banking_val.csv"
    _rewrite(f, "id,question,A,B,C,D,answer", "id,question,A,B,C,answer")
    with pytest.raises(ValueError, match=rf"{re.escape(str(f))}:1: missing column 'D' .*id,question,A,B,C,D,answer"):
        load_ceval(root, shots=3)


def test_answer_not_in_a_to_d_names_file_and_line(tmp_path, writers):
    root = writers.cmmlu(tmp_path / "q")
    f = root / "test" / "银行从业资格.csv"
    lines = f.read_text(encoding="utf-8").splitlines()
    lines[3] = lines[3][:-1] + "E"  # the third question (file line 4)
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"{re.escape(str(f))}:4: field 'Answer' is 'E'; it must be one of A, B, C, D"):
        load_cmmlu(root, shots=3)


def test_line_numbers_count_multiline_fields(tmp_path, writers):
    root = writers.ceval(tmp_path / "f")
    f = root / "val" / "accounting_val.csv"
    # The first question spans lines 2-3, so the bad row is on line 4.
    f.write_text('id,question,A,B,C,D,answer,explanation\n0,"第一行\n第二行",a,b,c,d,A,\n1,q,a,b,c,d,X,\n',
                 encoding="utf-8")
    with pytest.raises(ValueError, match=rf"{re.escape(str(f))}:4: field 'answer' is 'X'"):
        load_ceval(root, shots=3)


def test_empty_subject_and_missing_mapping(tmp_path, writers):
    root = writers.ceval(tmp_path / "f")
    f = root / "val" / "finance_val.csv"
    f.write_text("id,question,A,B,C,D,answer\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"{re.escape(str(f))}: no questions \(empty subject\)"):
        load_ceval(root, shots=3)
    (root / "subject_mapping.json").unlink()
    with pytest.raises(FileNotFoundError, match="subject_mapping.json: missing"):
        load_ceval(root, shots=3)


def test_unlisted_subject_and_missing_dev(tmp_path, writers):
    root = writers.ceval(tmp_path / "f")
    (root / "val" / "extra_val.csv").write_text("id,question,A,B,C,D,answer\n0,q,a,b,c,d,A\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"\['extra'\] have no entry"):
        load_ceval(root, shots=3)
    (root / "val" / "extra_val.csv").unlink()
    (root / "dev" / "banking_dev.csv").unlink()
    with pytest.raises(FileNotFoundError, match="banking_dev.csv: missing; 3-shot"):
        load_ceval(root, shots=3)
    assert len(load_ceval(root, shots=0)) == 3


def test_lawbench_and_jecqa_errors(tmp_path, writers):
    root = writers.lawbench(tmp_path / "l")
    (root / "2-9.json").write_text(json.dumps([{"instruction": "x", "question": "y"}]), encoding="utf-8")
    with pytest.raises(ValueError, match=r"2-9.json:1: record 0 field 'answer' is missing"):
        load_lawbench(root)
    f = writers.jecqa(tmp_path / "j" / "0_test.json")
    lines = f.read_text(encoding="utf-8").splitlines()
    rec = json.loads(lines[1])
    rec["answer"] = ["E"]
    lines[1] = json.dumps(rec, ensure_ascii=False)
    f.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(ValueError, match=rf"{re.escape(str(f))}:2: field 'answer' is \['E'\]"):
        load_jecqa(f)
