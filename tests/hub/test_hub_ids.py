"""Hub ids wherever a model or tokenizer folder is accepted (yunshan.loading.hub_download), against a local stand-in of
the Hub (tests/hub/standin.py): downloaded online at a revision, only the files a causal LM needs; read from the cache
offline; one line naming the id and the `hf download` command when it is not cached; the CLI never sets
HF_HUB_OFFLINE itself."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from yunshan.cli import main

from .standin import HubStandIn

REPO = "org/tiny-llama"


@pytest.fixture
def hub(monkeypatch, tmp_path, llama_dir):
    """The stand-in serving the tiny Llama (plus files yunshan must never fetch), online, with an empty cache."""
    from huggingface_hub import constants

    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    monkeypatch.setattr(constants, "HF_TOKEN_PATH", str(tmp_path / "hf_home" / "token"))
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf_cache"))
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    files = {p.name: p.read_bytes() for p in Path(llama_dir).iterdir() if p.is_file()}
    files["README.md"] = b"---\nlicense: mit\n---\n# tiny llama (main)\n"
    files["original/consolidated.00.pth"] = b"\0" * 4096  # Meta's checkpoint beside the HF weights
    files["tiny-llama.Q4_0.gguf"] = b"GGUF" + b"\0" * 1024
    tag = dict(files, **{"README.md": b"---\nlicense: mit\n---\n# tiny llama (v1)\n"})
    with HubStandIn(set()) as server:
        # As HF_ENDPOINT=server.url would set them at import.
        monkeypatch.setattr(constants, "ENDPOINT", server.url)
        monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE",
                            server.url + "/{repo_id}/resolve/{revision}/{filename}")
        server.add_repo(REPO, files, refs={"v1": tag})
        yield server


def fetched(hub) -> list[str]:
    return sorted({r["path"].split("/resolve/", 1)[1].split("/", 1)[1] for r in hub.requests
                   if r["route"] == "resolve" and r["method"] == "GET"})


def test_eval_of_a_hub_id_at_a_revision(hub, tmp_path, capsys):
    from huggingface_hub import constants

    heldout = tmp_path / "general.txt"
    heldout.write_text("银行的资产负债表反映企业的财务状况。\n\n合同自成立时生效。\n", encoding="utf-8")
    assert main(["eval", "--model", REPO, "--revision", "v1", "--tasks", "bpc", "--heldout", f"general={heldout}",
                 "--max-length", "32", "--out", str(tmp_path / "eval"), "--no-progress"]) == 0
    assert hub.unhandled == []
    results = json.loads((tmp_path / "eval" / "results.json").read_text())
    (name, info), = results["models"].items()
    # Recorded as the cache folder of the tag's commit: the number is traceable to exact bytes.
    commit = hub.commit_of(REPO, "v1")
    assert name == "tiny-llama" and info["path"].endswith(f"models--org--tiny-llama/snapshots/{commit}")
    assert info["path"].startswith(constants.HF_HUB_CACHE)
    assert "(v1)" in (Path(info["path"]) / "README.md").read_text()
    assert results["tasks"]["bpc"]["results"][name]["files"]["general"]["bpc"] > 0
    # Only what a causal LM needs: never Meta's original/ checkpoint or the GGUF file.
    assert fetched(hub) == sorted(["README.md", "config.json", "generation_config.json", "model.safetensors",
                                   "tokenizer.json", "tokenizer_config.json"])


def test_offline_reads_the_cache_and_names_an_uncached_id(hub, tmp_path, monkeypatch, capsys):
    from huggingface_hub import constants

    from yunshan.loading.hub_download import resolve_pretrained

    online = resolve_pretrained(REPO)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    hub.requests.clear()
    assert resolve_pretrained(REPO) == online and hub.requests == []  # from the cache, no request
    capsys.readouterr()
    assert main(["eval", "--model", "org/never-downloaded", "--revision", "v2", "--tasks", "bpc",
                 "--out", str(tmp_path / "eval")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and hub.requests == []
    assert ("--model: org/never-downloaded at revision v2 is not a local folder and not in the Hugging Face cache, "
            "and downloads are off (HF_HUB_OFFLINE=1): run `hf download org/never-downloaded --revision v2`") in err


def test_a_tokenizer_alone_fetches_no_weights(hub, tmp_path):
    from yunshan.samples import sample_data_dir

    corpus = Path(sample_data_dir()) / "corpora" / "finance" / "train.jsonl"
    out = tmp_path / "tok"
    assert main(["tokenizer", "extend", "--base", REPO, "--corpus", str(corpus), "--new-tokens", "20",
                 "--out", str(out)]) == 0
    report = json.loads((out / "yunshan_tokenizer_extension.json").read_text())
    assert "models--org--tiny-llama/snapshots/" in report["base"]["path"]
    from transformers import AutoTokenizer

    assert len(AutoTokenizer.from_pretrained(out)) == report["base"]["vocab_size"] + 20
    assert not any(f.endswith((".safetensors", ".pth", ".gguf")) for f in fetched(hub))


def test_cpt_dry_run_on_a_hub_id(hub, tmp_path, capsys):
    from yunshan.samples import sample_data_dir

    corpus = Path(sample_data_dir()) / "corpora" / "finance" / "train.jsonl"
    recipe = tmp_path / "cpt.yaml"
    recipe.write_text(f"model:\n  name_or_path: {REPO}\n  revision: v1\ndata:\n  seq_len: 32\n  sources:\n"
                      f"    - {{name: finance, path: {corpus}, weight: 1.0}}\n"
                      f"training:\n  output_dir: {tmp_path / 'cpt'}\n  max_steps: 2\n", encoding="utf-8")
    assert main(["cpt", "--config", str(recipe), "--dry-run"]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["model_type"] == "llama" and plan["seq_len"] == 32
    assert "model.safetensors" not in fetched(hub)  # a dry run reads the config, never the weights


@pytest.mark.parametrize("ref, revision, expected", [
    ("org/no-such-model", None, "model.name_or_path: org/no-such-model: no such folder, and no model "
                                "org/no-such-model on the Hub"),
    (REPO, "v9", f"model.name_or_path: the Hub model {REPO} has no revision 'v9'"),
    ("./models/missing", None, "model.name_or_path: ./models/missing: no such folder (and not a Hub id ORG/NAME)"),
])
def test_refusals_name_the_id(hub, ref, revision, expected):
    from yunshan.loading.hub_download import resolve_pretrained

    with pytest.raises(FileNotFoundError) as err:
        resolve_pretrained(ref, revision)
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_a_revision_with_a_local_folder_is_refused(llama_dir):
    from yunshan.loading.hub_download import resolve_pretrained

    with pytest.raises(ValueError, match="is a local folder; a revision .'v1'. applies only to a Hub id"):
        resolve_pretrained(str(llama_dir), "v1")


def test_the_cli_leaves_hf_hub_offline_to_the_user(monkeypatch, capsys):
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    assert main(["model", "info", "tiny", "--json"]) == 0
    assert "HF_HUB_OFFLINE" not in os.environ and "HF_DATASETS_OFFLINE" not in os.environ
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    assert main(["model", "info", "tiny", "--json"]) == 0
    assert os.environ["HF_HUB_OFFLINE"] == "0"


def test_pipeline_dry_run_on_a_hub_id(hub, tmp_path, monkeypatch):
    import yaml

    from yunshan.pipeline import PipelineRecipe, PipelineRunner
    from yunshan.arguments.recipe import load_recipe

    s = "${samples}"
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump({
        "name": "hub-id", "output_dir": str(tmp_path / "run"), "model": {"name_or_path": REPO, "revision": "v1"},
        "cpt": {"data": {"seq_len": 32, "sources": [{"name": "finance", "path": f"{s}/corpora/finance/train.jsonl"}]},
                "training": {"max_steps": 2}}}))
    plan = PipelineRunner(load_recipe(PipelineRecipe, path), path).dry_run()
    assert plan["problems"] == [] and [p["action"] for p in plan["plan"] if p["action"] != "disabled"] == ["run"]
    assert "config.json" in fetched(hub) and "model.safetensors" not in fetched(hub)  # a dry run fetches no weights
    # Offline and not cached: the dry run lists the problem instead of failing.
    path.write_text(path.read_text().replace(REPO, "org/not-cached"))
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    plan = PipelineRunner(load_recipe(PipelineRecipe, path), path).dry_run()
    assert plan["plan"] == [] and len(plan["problems"]) == 1
    assert "org/not-cached at revision v1 is not a local folder" in plan["problems"][0]
    assert "hf download org/not-cached --revision v1" in plan["problems"][0]


def test_cpt_trains_a_hub_id_and_keeps_the_id_in_its_recipe(hub, tmp_path, capsys):
    """Not only a dry run: the weights of the tag are fetched and trained; recipe.yaml names the id and revision
    (re-running it resolves the same commit), not the cache folder."""
    import yaml
    from transformers import AutoModelForCausalLM

    from yunshan.samples import sample_data_dir

    corpus = Path(sample_data_dir()) / "corpora" / "finance" / "train.jsonl"
    out = tmp_path / "cpt"
    recipe = tmp_path / "cpt.yaml"
    recipe.write_text(f"model:\n  name_or_path: {REPO}\n  revision: v1\ndata:\n  seq_len: 32\n  sources:\n"
                      f"    - {{name: finance, path: {corpus}, weight: 1.0}}\n"
                      f"training: {{output_dir: {out}, max_steps: 2, per_device_batch_size: 2, logging_steps: 1,"
                      f" save_steps: 100, precision: fp32}}\n", encoding="utf-8")
    assert main(["cpt", "--config", str(recipe)]) == 0
    assert "model.safetensors" in fetched(hub) and hub.unhandled == []
    assert {r["path"].split("/resolve/", 1)[1].split("/", 1)[0] for r in hub.requests if r["route"] == "resolve"} \
        == {hub.commit_of(REPO, "v1")}  # every file from the tag's commit
    saved = yaml.safe_load((out / "recipe.yaml").read_text())
    assert saved["model"]["name_or_path"] == REPO and saved["model"]["revision"] == "v1"
    assert AutoModelForCausalLM.from_pretrained(out).config.model_type == "llama"
    # A rerun of the finished run is recognised before the id is resolved: no Hub request, nothing written.
    capsys.readouterr()
    requests, weights = len(hub.requests), (out / "model.safetensors").stat().st_mtime_ns
    assert main(["cpt", "--config", str(recipe)]) == 0
    assert "already finished" in capsys.readouterr().out
    assert len(hub.requests) == requests and (out / "model.safetensors").stat().st_mtime_ns == weights
    # The revision is part of the model: resuming with another one is refused, naming the field.
    assert main(["cpt", "--config", str(recipe), "model.revision=main", "training.max_steps=3"]) == 1
    assert 'model.revision "v1" -> "main"' in capsys.readouterr().err and len(hub.requests) == requests


def test_model_info_and_upcycle_take_a_hub_id(hub, tmp_path, capsys):
    import torch
    from transformers import AutoModelForCausalLM

    from yunshan.loading.hub_download import resolve_pretrained

    assert main(["model", "info", REPO, "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["model"] == REPO and info["model_type"] == "llama"
    assert "model.safetensors" not in fetched(hub)  # a config is all `model info` needs
    assert main(["model", "upcycle", REPO, str(tmp_path / "pangu"), "--revision", "v1"]) == 0
    llama = AutoModelForCausalLM.from_pretrained(resolve_pretrained(REPO, "v1")).eval()
    pangu = AutoModelForCausalLM.from_pretrained(tmp_path / "pangu", trust_remote_code=True).eval()
    ids = torch.tensor([[1, 5, 9, 42, 7]])
    with torch.no_grad():
        assert torch.allclose(pangu(ids).logits, llama(ids).logits, atol=1e-5)
