"""`yunshan eval --tasks lawbench` on a tiny model: every file checked before the first generation, and what was
generated kept in results.partial.json when a task's scoring fails afterwards (real 3-6 once failed after eight
minutes of generation and kept nothing)."""

import json

import yunshan.eval.generation as generation
import yunshan.eval.lawbench as lawbench
from yunshan.cli import main


def test_a_malformed_task_file_stops_the_run_before_any_generation(bench, llama_dir, tmp_path, capsys, monkeypatch):
    calls = []
    real = generation.generate
    monkeypatch.setattr(generation, "generate", lambda *a, **k: calls.append(k.get("desc")) or real(*a, **k))
    records = [{"instruction": "请选出正确答案。", "question": "下列哪项正确?A:甲;B:乙;C:丙;D:丁", "answer": "正确答案:C。"},
               {"instruction": "请选出正确答案。", "question": "下列哪项正确?A:甲;B:乙;C:丙;D:丁", "answer": "C"}]
    bad = bench["lawbench"] / "3-6.json"
    bad.write_text(json.dumps(records, ensure_ascii=False, indent=2), encoding="utf-8")
    out = tmp_path / "run"
    assert main(["eval", "--model", str(llama_dir), "--tasks", f"lawbench={bench['lawbench']}", "--max-new-tokens",
                 "4", "--out", str(out), "--no-progress"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.endswith(f"{bad}:7: field 'answer' is 'C'; this task's answers look like '正确答案：…' or '正确答案:…'")
    assert "Loading weights" not in err and err.count("\n") == 0  # one line, before any model is loaded
    assert calls == []
    assert not (out / "results.partial.json").exists()


def test_generations_survive_a_failing_scorer(bench, llama_dir, tmp_path, capsys, monkeypatch):
    real = lawbench.score_task

    def failing(task, *args, **kwargs):
        if task == "3-3":
            raise ValueError("a scorer bug")
        return real(task, *args, **kwargs)

    monkeypatch.setattr(lawbench, "score_task", failing)
    out = tmp_path / "run"
    assert main(["eval", "--model", str(llama_dir), "--tasks", f"lawbench={bench['lawbench']}", "--max-new-tokens",
                 "4", "--out", str(out), "--no-progress"]) == 1
    assert "a scorer bug" in capsys.readouterr().err and not (out / "results.json").exists()
    partial = json.loads((out / "results.partial.json").read_text(encoding="utf-8"))
    result = partial["tasks"]["lawbench"]["results"][llama_dir.name]
    # The five one-item tasks were generated as one batch: every generation is kept, the task after the failing
    # one unscored.
    assert result["partial"] is True and list(result["tasks"]) == ["1-1", "1-2", "2-9", "3-3", "3-4"]
    for task in ("1-1", "1-2", "2-9"):  # finished: scored, every generation kept
        assert result["tasks"][task]["score"] is not None and len(result["tasks"][task]["predictions"]) == 1
    failed = result["tasks"]["3-3"]
    assert failed["error"] == "ValueError: a scorer bug" and "score" not in failed
    assert [set(p) for p in failed["predictions"]] == [{"prompt", "output", "answer"}]
    assert [set(p) for p in result["tasks"]["3-4"]["predictions"]] == [{"prompt", "output", "answer"}]
    assert "score" not in result["tasks"]["3-4"]


def test_generation_chunks_pool_small_tasks_until_a_batch_is_full():
    assert lawbench.generation_chunks({"1-1": 1, "1-2": 1, "2-1": 1}, 2) == [["1-1", "1-2"], ["2-1"]]
    assert lawbench.generation_chunks({"1-1": 500, "1-2": 3, "2-1": 500}, 16) == [["1-1"], ["1-2", "2-1"]]
    assert lawbench.generation_chunks({"1-1": 1, "1-2": 1}, 1) == [["1-1"], ["1-2"]]
    assert lawbench.generation_chunks({}, 8) == []


def test_pooled_generation_gives_each_task_its_own_outputs(bench, llama_dir, monkeypatch):
    """Five one-item tasks in one generation call (batch 8) get the outputs they get one task at a time (batch 1,
    five calls): the pooled outputs are handed back to the right tasks and padding changes nothing."""
    from yunshan.eval.loading import load_model

    calls = []
    real = generation.generate
    monkeypatch.setattr(generation, "generate", lambda *a, **k: calls.append(k.get("desc")) or real(*a, **k))
    lm = load_model(str(llama_dir), dtype="float32")
    pooled = lawbench.run_lawbench(lm, bench["lawbench"], batch_size=8, max_new_tokens=6)
    assert calls == ["lawbench 1-1..3-4"]
    alone = lawbench.run_lawbench(lm, bench["lawbench"], batch_size=1, max_new_tokens=6)
    assert calls[1:] == ["lawbench 1-1", "lawbench 1-2", "lawbench 2-9", "lawbench 3-3", "lawbench 3-4"]
    for task, entry in alone["tasks"].items():
        assert [p["output"] for p in pooled["tasks"][task]["predictions"]] == [p["output"] for p in entry["predictions"]]
        assert pooled["tasks"][task]["score"] == entry["score"]
    outputs = [p["output"] for e in alone["tasks"].values() for p in e["predictions"]]
    assert len(set(outputs)) > 1  # the tasks' prompts differ, so a mix-up would show
