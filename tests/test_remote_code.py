"""A folder's own code (auto_map) runs only with --trust-remote-code / model.trust_remote_code: export, eval, chat,
the training loaders, model info and the tokenizer tools refuse it in one line and run nothing (planted modules that
would write a file prove it); PanGu-π and OTCE folders saved by yunshan carry auto_map yet load without remote
code."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from fixtures import train_tokenizer

YUNSHAN = [sys.executable, "-m", "yunshan.cli"]


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    """Two tiny Llama folders: one whose tokenizer is a class of its own (tokenization_planted.py), one whose
    model is (configuration_planted.py, modeling_planted.py); importing any of them writes a RAN_* file."""
    from transformers import LlamaConfig, LlamaForCausalLM

    root = tmp_path_factory.mktemp("planted")
    tokenizer = train_tokenizer(root / "tok")
    folders = {}
    for kind in ("tokenizer", "model"):
        folder = root / kind
        LlamaForCausalLM(LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                                     num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)
                         ).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        folders[kind] = folder
    ran = f"open({str(root)!r} + '/RAN_' + __name__.rsplit('.', 1)[-1], 'w').write('ran')\n"
    (folders["tokenizer"] / "tokenization_planted.py").write_text(
        f"from transformers import PreTrainedTokenizerFast\n{ran}"
        "class PlantedTokenizerFast(PreTrainedTokenizerFast):\n    pass\n")
    config = json.loads((folders["tokenizer"] / "tokenizer_config.json").read_text())
    config.update(tokenizer_class="PlantedTokenizerFast",
                  auto_map={"AutoTokenizer": [None, "tokenization_planted.PlantedTokenizerFast"]})
    (folders["tokenizer"] / "tokenizer_config.json").write_text(json.dumps(config))
    (folders["model"] / "configuration_planted.py").write_text(
        f"from transformers import LlamaConfig\n{ran}"
        "class PlantedConfig(LlamaConfig):\n    model_type = 'planted_llama'\n")
    (folders["model"] / "modeling_planted.py").write_text(
        f"from transformers import LlamaForCausalLM\nfrom .configuration_planted import PlantedConfig\n{ran}"
        "class PlantedForCausalLM(LlamaForCausalLM):\n    config_class = PlantedConfig\n")
    config = json.loads((folders["model"] / "config.json").read_text())
    config.update(model_type="planted_llama", auto_map={"AutoConfig": "configuration_planted.PlantedConfig",
                                                        "AutoModelForCausalLM": "modeling_planted.PlantedForCausalLM"})
    (folders["model"] / "config.json").write_text(json.dumps(config))
    return root, folders


def ran(root: Path) -> list[str]:
    return sorted(p.name for p in root.glob("RAN_*"))


def _one_line_refusal(err: BaseException | str, opt_in: str) -> None:
    text = str(err)
    assert "\n" not in text.strip() and "Python code shipped in the folder" in text and opt_in in text, text


def test_every_loader_refuses_a_folders_own_code_without_opt_in(planted):
    from yunshan.serve.chat import ChatArgs, load_chat_model
    from yunshan.eval.loading import load_model as eval_load, load_tokenizer_only
    from yunshan.models.info import load_config
    from yunshan.tokenizer.report import load_backend
    from yunshan.training.arguments import ModelArgs
    from yunshan.training.models import describe_model, load_model, load_tokenizer

    root, folders = planted
    calls = [
        (lambda: eval_load(str(folders["tokenizer"])), "--trust-remote-code"),
        (lambda: eval_load(str(folders["model"])), "--trust-remote-code"),
        (lambda: load_tokenizer_only(str(folders["tokenizer"])), "--trust-remote-code"),
        (lambda: load_tokenizer(folders["tokenizer"]), "model.trust_remote_code"),
        (lambda: load_model(ModelArgs(name_or_path=str(folders["model"]))), "model.trust_remote_code"),
        (lambda: describe_model(ModelArgs(name_or_path=str(folders["model"]))), "model.trust_remote_code"),
        (lambda: load_backend(folders["tokenizer"]), "tokenizer.json"),
        (lambda: load_config(folders["model"]), "yunshan model info reads only configs"),  # no opt-in: never runs
        (lambda: load_chat_model(ChatArgs(model=str(folders["tokenizer"]))), "--trust-remote-code"),
        (lambda: load_chat_model(ChatArgs(model=str(folders["model"]))), "--trust-remote-code"),
    ]
    for call, opt_in in calls:
        with pytest.raises(ValueError) as err:
            call()
        _one_line_refusal(err.value, opt_in)
    assert ran(root) == []


def test_export_and_eval_refuse_a_folders_own_code_and_export_runs_it_only_when_asked(planted, tmp_path):
    root, folders = planted
    env = {**os.environ, "HF_MODULES_CACHE": str(tmp_path / "modules")}
    for argv in (["export", str(folders["tokenizer"]), "--out", str(tmp_path / "e"), "--license", "mit"],
                 ["eval", "--model", str(folders["model"]), "--tasks", "bpc", "--limit", "1", "--out",
                  str(tmp_path / "ev")]):
        result = subprocess.run(YUNSHAN + argv, capture_output=True, text=True, env=env)
        assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr[-2000:]
        _one_line_refusal(result.stderr, "--trust-remote-code")
    assert ran(root) == [] and not (tmp_path / "e").exists()
    asked = subprocess.run(YUNSHAN + ["export", str(folders["tokenizer"]), "--out", str(tmp_path / "e"), "--license",
                                      "mit", "--trust-remote-code"], capture_output=True, text=True, env=env)
    assert asked.returncode == 0, asked.stderr[-2000:]
    assert ran(root) == ["RAN_tokenization_planted"]  # it ran because it was asked to


@pytest.mark.parametrize("preset", ["tiny", "otce-tiny"])
def test_yunshan_architectures_carry_auto_map_and_load_without_remote_code(preset, tmp_path):
    """A PanGu-π or OTCE folder saved by yunshan has an auto_map (for machines without yunshan) and loads through
    yunshan's registered classes with trust_remote_code=False: in eval, in training and in export."""
    from transformers import AutoModelForCausalLM

    from yunshan.eval.loading import load_model as eval_load
    from yunshan.hub.export import export_model
    from yunshan.models import preset_config
    from yunshan.training.arguments import ModelArgs
    from yunshan.training.models import load_model

    tokenizer = train_tokenizer(tmp_path / "model")
    overrides = {"vocab_size": len(tokenizer)}
    if preset == "tiny":
        overrides.update(hidden_size=32, intermediate_size=64, num_hidden_layers=2, aug_reduction=4)
    AutoModelForCausalLM.from_config(preset_config(preset, **overrides)).save_pretrained(tmp_path / "model")
    assert json.loads((tmp_path / "model/config.json").read_text())["auto_map"]
    for model in (eval_load(str(tmp_path / "model"), hash_weights=False).model,
                  load_model(ModelArgs(name_or_path=str(tmp_path / "model")))):
        assert type(model).__module__.startswith("yunshan.models."), type(model)
    export_model(tmp_path / "model", tmp_path / "export", license="mit")
    assert json.loads((tmp_path / "export/config.json").read_text())["auto_map"]
