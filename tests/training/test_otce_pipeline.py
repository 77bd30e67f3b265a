"""OTCE runs through every yunshan stage like PanGu-π: the whole pipeline (stand-in base, vocabulary extension,
evaluation, decontamination, continual pretraining, SFT, preference tuning (DPO on LoRA: TRL's trainer on a
hybrid Mamba-attention MoE), export) on an OTCE model; the card states the
decontamination count, and the export loads without yunshan."""

import json
import os
import subprocess
import sys
import textwrap

import yaml

from test_pipeline import tiny_recipe
from yunshan.pipeline import PipelineRunner
from yunshan.pipeline import PipelineRecipe
from yunshan.arguments.recipe import load_recipe


def test_otce_through_the_whole_pipeline_and_export(tmp_path):
    data = tiny_recipe(tmp_path, export=True)
    data["export"]["license"] = "apache-2.0"
    data["base"]["model"] = {"preset": "otce-tiny", "config_overrides": {
        "hidden_size": 32, "intermediate_size": 64, "expert_intermediate_size": 32,
        "shared_expert_intermediate_size": 32, "layer_pattern": "SM SE AE AM"}}
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    manifest = PipelineRunner(load_recipe(PipelineRecipe, path), path).run()
    assert all(s.status == "complete" for s in manifest.stages)
    out = tmp_path / "run"
    assert json.loads((out / "05_sft/config.json").read_text())["model_type"] == "otce"
    after = json.loads((out / "07_eval_after/results.json").read_text())
    # tiny_recipe evaluates the benchmarks, two sets of a user's own (eval/generic.py) and a held-out instruction set.
    assert set(after["tasks"]) == {"bpc", "fineval", "mc:bank", "qa", "chat_loss"} and len(after["models"]) == 3  # after cpt, sft, preference
    assert all(r["sets"]["advice"]["tokens"] > 0 for r in after["tasks"]["chat_loss"]["results"].values())
    assert json.loads((out / "06_preference/config.json").read_text())["model_type"] == "otce"  # DPO on its LoRA
    export = out / "08_export"
    assert (export / "modeling_otce.py").is_file() and (export / "README.md").is_file()
    # The card states the decontamination count and the drops training made, per source.
    card = (export / "README.md").read_text(encoding="utf-8")
    decont = manifest.stage("decontamination").summary
    assert "### Decontamination: overlap with the evaluation sets" in card
    assert f"**{decont['contaminated']:,} of {decont['records']:,} training records**" in card
    cpt_dropped = json.loads((out / "04_cpt/data_report.json").read_text())["sources"]["finance"]["dropped"]
    assert f"| cpt:finance | " in card and f" {cpt_dropped['contaminated']:,} |" in card
    assert "left out of training" in card
    # The exported model is the preference-tuned one, and the card says how it was tuned.
    assert "### Preference tuning: pairs per source" in card and "- dpo" in card.split("---")[1]
    assert "| held-out pairs (" in card and "| reward margin |" in card
    script = textwrap.dedent(f"""
        import sys
        sys.modules["yunshan"] = None
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
        tok = AutoTokenizer.from_pretrained({str(export)!r})
        model = AutoModelForCausalLM.from_pretrained({str(export)!r}, trust_remote_code=True).eval()
        ids = tok("资产负债表", return_tensors="pt")
        out = model.generate(**ids, max_new_tokens=3, do_sample=False)
        print("OK", type(model).__name__, out.shape[1] > ids["input_ids"].shape[1])
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path,
                            env={**os.environ, "HF_MODULES_CACHE": str(tmp_path / "modules")})
    assert result.returncode == 0, result.stderr[-3000:]
    assert "OK OtceForCausalLM True" in result.stdout
