"""`yunshan plan` on every shipped recipe: the table of every stage it trains, and the JSON."""

import json
import re
from pathlib import Path

import pytest
from transformers import LlamaConfig

from yunshan.cli import main
from yunshan.models import presets

ROOT = Path(__file__).resolve().parents[2]
RECIPES = sorted((ROOT / "recipes").glob("*.yaml"))
ENGINE_ROWS = ("| DDP |", "| DeepSpeed ZeRO-2 |", "| DeepSpeed ZeRO-3 |", "| FSDP2 |")


def stand_in_models(recipe: Path, models: Path) -> None:
    """A LLaMA config.json (no weights: plan reads only the config) for every ${models}/NAME the recipe names that is
    not a preset; preset names stay missing, so the plan takes the preset's shape."""
    for ref in set(re.findall(r"\$\{models\}/([^\"',\]\s}]+)", recipe.read_text(encoding="utf-8"))):
        if ref not in presets():
            LlamaConfig(vocab_size=4096, hidden_size=256, intermediate_size=704, num_hidden_layers=4,
                        num_attention_heads=4, num_key_value_heads=2).save_pretrained(models / ref)


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_every_recipe_prints_its_table(path, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("YUNSHAN_MODELS", str(tmp_path / "models"))
    monkeypatch.setenv("YUNSHAN_DATA", str(tmp_path / "data"))
    stand_in_models(path, tmp_path / "models")
    import yaml

    raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    name = (raw.get("model") or {}).get("name_or_path") or ""
    # pangu-pi-7b_sft_full.yaml starts from the cpt recipe's output folder, not there before that run: --model.
    extra = ["--model", "pangu-pi-7b"] if name and not name.startswith("${models}") else []
    assert main(["plan", str(path), "--gpu", "a100-80gb", "--gpus", "8", *extra]) == 0
    out = capsys.readouterr().out
    expected = [s for s in ("base", "cpt", "sft") if s in raw] + (["pref"] if "preference" in raw else [])
    if not expected:  # a stage recipe: its stage is in its name
        expected = [path.stem.split("_")[1]]
    assert re.findall(r"^## (\w+):", out, re.M) == expected
    for row in ENGINE_ROWS:
        assert out.count(row) == len(expected), row
    assert out.count("\n-> ") == len(expected)


def test_json_and_one_gpu(tmp_path, monkeypatch, capsys):
    recipe = ROOT / "recipes" / "pangu-pi-7b_pipeline_full.yaml"
    monkeypatch.setenv("YUNSHAN_MODELS", str(tmp_path))
    assert main(["plan", str(recipe), "--gpu", "h100-sxm", "--gpus", "8", "--nodes", "2", "--json",
                 "sft.training.max_steps=100"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["devices"] == 16 and plan["gpu"]["bf16_tflops"] == 989
    cpt, sft = plan["stages"]
    # 12,000 steps x 2 sequences x 64 accumulation x 16 devices x 4,096 tokens; 9,545 new rows (the budget carries them)
    assert cpt["tokens"] == 12_000 * 2 * 64 * 16 * 4096
    assert cpt["shape"]["vocab_size"] == 100_883 + 9_545 and cpt["setup"]["new_rows"] == 9_545
    assert sft["tokens"] == 100 * 2 * 8 * 16 * 4096
    assert cpt["seconds"] == pytest.approx(cpt["flops"]["total"] / (16 * 989e12 * 0.4))
    assert {r["engine"] for r in cpt["engines"]} == {"ddp", "zero2", "zero3", "fsdp2"}
    # A 7B full fine-tune never fits whole on one 80 GB device under DDP (16+ bytes per parameter).
    assert not next(r for r in cpt["engines"] if r["engine"] == "ddp")["fits"]
    assert cpt["recommendation"]["engine"] in ("zero2", "zero3", "fsdp2")

    assert main(["plan", str(recipe), "--gpu", "a100-80gb", "--gpus", "1", "--json"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert [r["engine"] for r in one["stages"][0]["engines"]] == ["single"]


def test_bad_input_is_one_line(tmp_path, monkeypatch, capsys):
    recipe = ROOT / "recipes" / "llama_pipeline_lora.yaml"
    monkeypatch.setenv("YUNSHAN_MODELS", str(tmp_path))
    assert main(["plan", str(recipe), "--gpu", "a100-80gb"]) == 1
    err = capsys.readouterr().err
    assert "model.name_or_path" in err and "--model" in err and len(err.strip().splitlines()) == 1
    assert main(["plan", str(recipe), "--gpu", "tpu-v9"]) == 1
    assert "a100-80gb" in capsys.readouterr().err


def plan_json(capsys, *args) -> dict:
    assert main(["plan", *map(str, args), "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_largest_micro_batch_is_the_last_that_fits_and_the_recommendation_follows(tmp_path, monkeypatch, capsys):
    from dataclasses import replace

    from yunshan.models import preset_config
    from yunshan.plan.estimate import ModelShape, StageSetup, estimate_memory

    recipe = ROOT / "recipes" / "pangu-pi-7b_cpt_full.yaml"
    monkeypatch.setenv("YUNSHAN_MODELS", str(tmp_path))
    # Checkpointing off and 8 sequences of 4,096 tokens: no engine holds it on 8 x A100-80GB, so the plan turns
    # checkpointing on, with the first engine (least communication first) that then fits.
    plan = plan_json(capsys, recipe, "--gpu", "a100-80gb", "--gpus", "8", "training.gradient_checkpointing=false",
                     "training.per_device_batch_size=8")
    (stage,) = plan["stages"]
    assert not any(r["fits"] for r in stage["engines"])
    rec = stage["recommendation"]
    assert rec["gradient_checkpointing"] and rec["micro_batch"] == 8
    fitting = [r["engine"] for r in stage["engines"] if r["max_micro_batch_checkpointing"] >= 8]
    assert rec["engine"] == [e for e in ("ddp", "zero2", "fsdp2", "zero3") if e in fitting][0]
    # The largest micro-batch: it fits, one more does not.
    shape = ModelShape.from_config(preset_config("pangu-pi-7b")).with_vocab(stage["shape"]["vocab_size"])
    setup = StageSetup(**{**stage["setup"], "lora_targets": None, "gradient_checkpointing": True})
    for row in stage["engines"]:
        best = row["max_micro_batch_checkpointing"]
        peak = [estimate_memory(shape, replace(setup, micro_batch=b), row["engine"], 8).peak for b in (best, best + 1)]
        assert peak[0] <= stage["usable_bytes"] < peak[1] if best else stage["usable_bytes"] < peak[1]
    # One 24 GB GPU holds no full fine-tuning of 7B at all: the plan says so instead of naming an engine.
    (alone,) = plan_json(capsys, recipe, "--gpu", "l4", "--gpus", "1")["stages"]
    assert alone["recommendation"]["engine"] is None and alone["engines"][0]["max_micro_batch_checkpointing"] == 0
