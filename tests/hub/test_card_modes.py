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
