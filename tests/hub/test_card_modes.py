"""The model card names how each benchmark number was scored: answer likelihood, cloze or generated answer, as
`yunshan eval --mode` recorded it (the demo's cloze results were once labelled "generated answer")."""

from __future__ import annotations

import pytest

from yunshan.eval.commands import EvalArgs, run_eval
from yunshan.eval.tasks import MODE_LABELS, TASKS, mode_label, overall_metric
from yunshan.hub.export import export_model

from .test_model_card import card_of, section


@pytest.mark.parametrize("mode", ["loglik", "cloze", "generate"])
def test_the_card_says_how_each_number_was_scored(run_dir, tmp_path, mode):
    model = run_dir / "04_sft"
    run_eval(EvalArgs(model=[str(model)], tasks=["fineval"], limit=1, shots=0, mode=mode, max_new_tokens=4,
                      out=str(tmp_path / "eval"), progress=False))
    export_model(model, tmp_path / "out", license="mit", eval=[str(tmp_path / "eval" / "results.json")])
    text, _ = card_of(tmp_path / "out")
    evaluation = section(text, "Evaluation")
    assert f"val split, 0-shot, {MODE_LABELS[mode]}, first 1 per subject" in evaluation
    for other in set(MODE_LABELS.values()) - {MODE_LABELS[mode]}:
        assert other not in evaluation


def test_a_mode_without_words_is_refused():
    assert mode_label("cloze").startswith("cloze")
    with pytest.raises(ValueError, match="mode 'rank' has no description; known modes: loglik, cloze, generate"):
        overall_metric(TASKS["fineval"], {"overall": 50.0, "mode": "rank", "split": "val", "shots": 0}, None)


def test_your_own_sets_reach_the_card(run_dir, tmp_path):
    """mc / qa sets of your own (eval/generic.py) are rows of the card's evaluation table and model-index entries,
    the card knowing nothing of them."""
    import json

    from huggingface_hub.repocard_data import model_index_to_eval_results

    model = run_dir / "04_sft"
    mc = tmp_path / "mc.jsonl"
    mc.write_text(json.dumps({"question": "资产负债表反映的是", "choices": ["财务状况", "经营成果", "现金流量"],
                              "answer": "A"}, ensure_ascii=False) + "\n", encoding="utf-8")
    qa = tmp_path / "qa.jsonl"
    qa.write_text(json.dumps({"question": "银行的主要负债是？", "answer": "存款"}, ensure_ascii=False) + "\n",
                  encoding="utf-8")
    run_eval(EvalArgs(model=[str(model)], tasks=[f"mc:ours={mc}", f"qa={qa}"], max_new_tokens=4,
                      out=str(tmp_path / "eval"), progress=False))
    export_model(model, tmp_path / "out", license="mit", eval=[str(tmp_path / "eval" / "results.json")])
    text, meta = card_of(tmp_path / "out")
    evaluation = section(text, "Evaluation")
    assert "| mc:ours (multiple choice, mc.jsonl) | accuracy (%) |" in evaluation
    assert "| qa (short answer, qa.jsonl) | exact match (%) |" in evaluation
    assert "- mc:ours (multiple choice, mc.jsonl): 0-shot, answer likelihood, 1 questions" in evaluation
    _, results = model_index_to_eval_results(meta["model-index"])
    assert {(r.dataset_type, r.metric_type) for r in results} >= {("mc.jsonl", "accuracy"), ("qa.jsonl", "rouge_l")}
