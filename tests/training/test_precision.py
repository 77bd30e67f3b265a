"""`precision: auto` decides by hardware: bf16 on CPUs with AMX or AVX-512 BF16 and on CUDA GPUs with bf16, fp32
elsewhere (both branches tested with the checks patched, whatever this machine is); bf16 training follows fp32.
One vocabulary (yunshan.loading.precision): torch's names everywhere, the short names fp32/bf16/fp16 accepted and read
as them."""

from __future__ import annotations

import pytest
import torch

from yunshan.training import models


@pytest.fixture
def cpu(monkeypatch):
    """Pretend to be a CPU-only machine with the given instruction sets."""

    def set_caps(amx: bool, avx512_bf16: bool, mkldnn: bool = True):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
        monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
        monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
        monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: mkldnn)

    return set_caps


@pytest.mark.parametrize("amx, avx512_bf16, expected", [
    (True, False, "bfloat16"),    # Intel Xeon (Sapphire Rapids and newer)
    (False, True, "bfloat16"),    # AMD Zen 4 / Zen 5, Intel Cooper Lake
    (True, True, "bfloat16"),
    (False, False, "float32"),   # AMD Zen 3, older Intel: bf16 would be emulated
])
def test_auto_on_cpus(cpu, amx, avx512_bf16, expected):
    cpu(amx, avx512_bf16)
    precision, reason = models.choose_precision("auto")
    assert precision == expected and reason.startswith("auto: CPU")
    if expected == "bfloat16":
        assert ("AMX" in reason) if amx else ("AVX-512 BF16" in reason)
    else:
        assert "emulated" in reason


def test_auto_without_onednn_is_fp32(cpu):
    cpu(amx=True, avx512_bf16=True, mkldnn=False)
    assert models.choose_precision("auto")[0] == "float32"


def test_auto_on_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "GPU")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert models.choose_precision("auto")[0] == "bfloat16"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert models.choose_precision("auto")[0] == "float32"


def test_explicit_precision_is_kept_and_junk_rejected(cpu):
    cpu(amx=False, avx512_bf16=False)
    assert models.choose_precision("bfloat16") == ("bfloat16", "set in the recipe")
    assert models.choose_precision("float32")[0] == "float32"
    with pytest.raises(ValueError, match="auto, float32, bfloat16, float16"):
        models.choose_precision("int8")


def test_one_vocabulary_with_the_short_names_accepted_where_users_write_them(tmp_path):
    """torch's names (float32, bfloat16, float16) are the vocabulary of every precision setting; fp32, bf16 and
    fp16, which recipes write for training.precision (accelerate's and DeepSpeed's names), mean the same anywhere,
    and a checkpoint whose run file says bf16 resumes under a recipe that now reads bfloat16."""
    import dataclasses
    import json

    from yunshan.hub.export import add_arguments as export_flags
    from yunshan.loading.precision import CHOICES, DTYPE_CHOICES, PRECISIONS, eval_autocast, precision_name
    from yunshan.arguments.recipe import load_recipe
    from yunshan.training.arguments import ModelArgs, TrainArgs
    from yunshan.training.checkpoints import RUN_FILE
    from yunshan.training.cpt import CptArgs
    from yunshan.training.resume import plan_run

    assert PRECISIONS == ("auto", "float32", "bfloat16", "float16")
    for short, name in (("fp32", "float32"), ("bf16", "bfloat16"), ("fp16", "float16")):
        assert TrainArgs(precision=short).precision == name == TrainArgs(precision=name).precision
        assert models.choose_precision(short) == (name, "set in the recipe")
        assert ModelArgs(preset="tiny", dtype=short).dtype == name
        assert eval_autocast(short)[0] == name and short in CHOICES and short in DTYPE_CHOICES
    with pytest.raises(ValueError, match=r"model.dtype 'int8' is not valid; use auto, float32, bfloat16, float16"):
        ModelArgs(preset="tiny", dtype="int8")
    with pytest.raises(ValueError, match=r"--dtype 'auto' is not valid; use float32, bfloat16, float16"):
        precision_name("auto", "--dtype", auto=False)  # an export converts to a dtype; auto is no dtype
    recipe = tmp_path / "cpt.yaml"
    recipe.write_text("model: {preset: tiny}\ntokenizer: {path: tok}\ntraining: {precision: bf16}\n")
    loaded = load_recipe(CptArgs, str(recipe))
    assert loaded.training.precision == "bfloat16"
    # A checkpoint of a run whose recipe said bf16 before the names were unified: the same recipe resumes it.
    checkpoint = tmp_path / "run" / "checkpoints" / "checkpoint-4"
    checkpoint.mkdir(parents=True)
    saved = dataclasses.asdict(loaded)
    saved["training"]["precision"] = "bf16"
    (checkpoint / RUN_FILE).write_text(json.dumps({"kind": "cpt", "total_steps": 8, "sequences_per_step": 2,
                                                   "recipe": saved}))
    plan = plan_run(loaded, "cpt", tmp_path / "run", checkpoint, 2)
    assert plan.action == "resume" and plan.changes == {}
    # The export's --dtype flag takes both spellings too.
    import argparse

    parser = argparse.ArgumentParser()
    export_flags(parser)
    assert parser.parse_args(["run", "--out", "x", "--dtype", "bf16"]).dtype == "bf16"
