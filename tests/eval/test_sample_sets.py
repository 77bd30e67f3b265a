"""Every task runs on the sample sets shipped in yunshan.samples (the files a user's released benchmarks replace)."""

import json

import pytest

samples = pytest.importorskip("yunshan.samples", reason="yunshan.samples is not on this branch")

from yunshan.cli import main  # noqa: E402
from yunshan.eval.ceval import load_ceval  # noqa: E402
from yunshan.eval.cmmlu import load_cmmlu  # noqa: E402
from yunshan.eval.jecqa import load_jecqa  # noqa: E402
from yunshan.eval.lawbench import load_lawbench  # noqa: E402
from yunshan.eval.lawbench_scoring import labels, score_task  # noqa: E402

ROOT = samples.sample_data_dir()


def test_bundled_sets_load_and_their_gold_answers_score_full_marks():
    fineval = load_ceval(ROOT / "eval" / "fineval", "val", shots=5)
    assert {s.group for s in fineval} == {"Accounting", "Certificate", "Economy", "Finance"}
    assert sum(len(s.questions) for s in fineval) > 0
    assert load_cmmlu(ROOT / "eval" / "financeiq", "test", shots=5)
    assert load_jecqa(ROOT / "eval" / "jecqa")
    # LawBench's scorer must accept every shipped gold answer, and the gold text itself must score 100.
    for task, records in load_lawbench(ROOT / "eval" / "lawbench").items():
        answers = [r["answer"] for r in records]
        prompts = [r["instruction"] + "\n" + r["question"] for r in records]
        # The ideal output: the reference without 1-1's "答案:" prefix; 2-6's entities one per line, the way
        # LawBench reads them (it ends a value at a space or newline, not at ";").
        ideal = [a.replace("答案:", "") if task == "1-1" else a.replace(";", "\n") + "\n" if task == "2-6" else a
                 for a in answers]
        perfect = score_task(task, ideal, answers, prompts, source=task)
        if task == "3-3":
            # LawBench finds charges by substring: "合同诈骗" also contains "诈骗", so even the exact charge scores
            # the set F1 of one right label among n found, 2 / (n + 1).
            found = [sum(label in a for label in labels()["3-3"]) for a in answers]
            assert perfect.per_item == pytest.approx([2 / (n + 1) for n in found])
            continue
        assert perfect.score == pytest.approx(1.0, abs=1e-6), task


def test_every_task_on_the_bundled_sets(llama_dir, pangu_dir, tmp_path):
    out = tmp_path / "run"
    code = main(["eval", "--model", str(llama_dir), "--model", str(pangu_dir), "--tasks", "fineval", "financeiq",
                 "lawbench", "jecqa", "bpc", "compression", "diversity", "--limit", "2", "--shots", "1",
                 "--max-new-tokens", "8", "--out", str(out), "--no-progress"])
    assert code == 0
    report = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert set(report["tasks"]) == {"fineval", "financeiq", "lawbench", "jecqa", "bpc", "compression", "diversity"}
    for task in report["tasks"].values():
        assert len(task["results"]) == 2 and task["files"]
    law = report["tasks"]["lawbench"]["results"][llama_dir.name]
    assert len(law["tasks"]) == len(load_lawbench(ROOT / "eval" / "lawbench"))
    assert set(report["tasks"]["bpc"]["results"][pangu_dir.name]["files"]) == {"general", "finance", "legal"}
