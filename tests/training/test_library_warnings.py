"""Normal training runs print no library deprecation warning (issue 47): a tiny LoRA `yunshan cpt` and `yunshan sft`
record every FutureWarning and DeprecationWarning raised while they run, and none may come. PEFT's wrapping of the
model read transformers' deprecated `is_gradient_checkpointing` on every LoRA run (yunshan.loading.pretrained.
activation_checkpointing_alias); `yunshan serve`'s side is tests/serve/test_serve.py, `yunshan pref`'s is
tests/training/test_preference.py."""

import json
import warnings

import pytest

from fixtures import three_source_corpora, train_tokenizer
from yunshan.arguments.recipe import load_recipe

TINY = {"preset": "tiny", "config_overrides": {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
                                              "aug_reduction": 4}}
LORA = {"enabled": True, "r": 4, "alpha": 8, "dropout": 0.0}
TRAINING = {"max_steps": 2, "per_device_batch_size": 2, "save_steps": 100, "logging_steps": 1}


def deprecations(run) -> list[str]:
    """The FutureWarnings and DeprecationWarnings raised while `run()` runs, each as 'file:line: text'."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run()
    return [f"{w.filename}:{w.lineno}: {w.message}" for w in caught
            if issubclass(w.category, (FutureWarning, DeprecationWarning))]


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    root = tmp_path_factory.mktemp("warnings")
    files = three_source_corpora(root / "corpora")
    rows = [{"instruction": "Which domain?", "input": f"court contract {i}", "output": "law"} for i in range(32)]
    (root / "sft.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    train_tokenizer(root / "tok")
    return root, files


@pytest.mark.parametrize("checkpointing", [False, True])
def test_lora_cpt_and_sft_raise_no_deprecation_warning(data, tmp_path, checkpointing):
    from yunshan.training.cpt import CptArgs, run_cpt
    from yunshan.training.sft import SftArgs, run_sft

    root, files = data
    training = {**TRAINING, "gradient_checkpointing": checkpointing}
    cpt = load_recipe(CptArgs, data={
        "model": TINY, "tokenizer": {"path": str(root / "tok")}, "lora": LORA,
        "data": {"seq_len": 64, "block_size": 64, "sources": [{"name": "mid", "path": str(files["mid"])}]},
        "training": {"output_dir": str(tmp_path / "cpt"), **training}})
    sft = load_recipe(SftArgs, data={
        "model": TINY, "tokenizer": {"path": str(root / "tok")}, "lora": LORA,
        "data": {"max_length": 64, "sources": [{"name": "a", "path": str(root / "sft.jsonl"), "format": "alpaca"}]},
        "training": {"output_dir": str(tmp_path / "sft"), **training}})
    assert deprecations(lambda: run_cpt(cpt)) == []
    assert deprecations(lambda: run_sft(sft)) == []
