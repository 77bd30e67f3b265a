"""The newcomer's path through `yunshan run` works without workarounds (issue 33): the dry run opens every corpus,
every hint a stage prints is a key the pipeline takes, overrides may follow `--from`, Ctrl-C prints one line saying
what is kept and how to resume, and SFT's max_steps wins over epochs."""

import json
from pathlib import Path

import pytest
import torch
import yaml

from fixtures import three_source_corpora, train_tokenizer
from yunshan.cli import main
from yunshan.pipeline import PipelineRecipe, PipelineRunner
from yunshan.arguments.recipe import load_recipe

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A tiny Llama saved with its byte-level BPE tokenizer (a model folder as a user has one), and corpora."""
    from transformers import LlamaConfig, LlamaForCausalLM

    root = tmp_path_factory.mktemp("newcomer")
    files = three_source_corpora(root / "corpora")
    tokenizer = train_tokenizer(root / "model")
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=True)
    LlamaForCausalLM(config).save_pretrained(root / "model")
    return root, files


def cpt_recipe(tiny, out: Path, **training) -> dict:
    root, files = tiny
    return {
        "name": "newcomer", "output_dir": str(out), "model": {"name_or_path": str(root / "model")},
        "cpt": {"data": {"seq_len": 32, "block_size": 32, "sources": [
                    {"name": "mid", "path": str(files["mid"]), "weight": 0.5},
                    {"name": "short", "path": str(files["short"]), "weight": 0.5}]},
                "training": {"max_steps": 4, "per_device_batch_size": 2, "learning_rate": 1e-3, "save_steps": 1,
                             "logging_steps": 1, **training},
                "monitor": {"every_steps": 0}},
    }


def write(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data, allow_unicode=True, sort_keys=False))
    return path


def zst(path: Path, lines: list[dict]) -> Path:
    import zstandard

    path.write_bytes(zstandard.ZstdCompressor().compress(
        "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in lines).encode("utf-8")))
    return path


def test_the_dry_run_opens_every_corpus(tiny, tmp_path):
    """A corpus the stage could not read is a dry-run problem naming the recipe key, the file and why, before
    anything trains: a compressed file that is not one, a text field that is not there, a bad SFT record."""
    good = zst(tmp_path / "laws.jsonl.zst", [{"text": "第一条 为了保护民事主体的合法权益。"}] * 3)
    wrong_field = zst(tmp_path / "content.jsonl.zst", [{"content": "第一条"}] * 3)
    broken = tmp_path / "broken.jsonl.zst"
    broken.write_bytes(b"this is not zstd at all\n" * 4)
    sft = tmp_path / "sft.jsonl"
    sft.write_text(json.dumps({"instruction": "", "output": ""}) + "\n")
    data = cpt_recipe(tiny, tmp_path / "run")
    data["tokenizer_extension"] = {"corpus": [str(good), str(wrong_field)], "new_tokens": 10}
    data["cpt"]["data"]["sources"].append({"name": "laws", "path": str(good), "weight": 1.0})
    data["cpt"]["data"]["sources"].append({"name": "broken", "path": str(broken), "weight": 1.0})
    data["sft"] = {"data": {"sources": [{"name": "general", "path": str(sft), "format": "alpaca"}]},
                   "training": {"max_steps": 1}}
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"prompt": "问", "chosen": "同一个回答", "rejected": "同一个回答"}) + "\n")
    data["preference"] = {"data": {"sources": [{"name": "legal", "path": str(pairs), "format": "pairs"}]},
                          "training": {"max_steps": 1}}
    path = write(tmp_path / "recipe.yaml", data)
    problems = PipelineRunner(load_recipe(PipelineRecipe, path), path).dry_run()["problems"]
    assert len(problems) == 4, problems
    assert any(p.startswith("preference.data.sources.legal:") and str(pairs) in p for p in problems), problems
    assert any(p.startswith("tokenizer_extension.corpus:") and str(wrong_field) in p and "missing_field" in p
               for p in problems), problems
    assert any(p.startswith("cpt.data.sources.broken:") and str(broken) in p for p in problems), problems
    assert any(p.startswith("sft.data.sources.general:") and str(sft) in p for p in problems), problems
    assert not any(str(good) in p for p in problems)
    # Fixed: the same files through the fields that read them, nothing left to report.
    data["tokenizer_extension"]["text_field"] = "text"
    data["tokenizer_extension"]["corpus"] = [str(good)]
    data["cpt"]["data"]["sources"].pop()
    from yunshan.samples import sample_data_dir

    data["sft"]["data"]["sources"][0]["path"] = str(Path(sample_data_dir()) / "sft/general_alpaca.jsonl")
    data["preference"]["data"]["sources"][0]["path"] = str(Path(sample_data_dir()) / "preference/legal_pairs.jsonl")
    path = write(tmp_path / "recipe.yaml", data)
    assert PipelineRunner(load_recipe(PipelineRecipe, path), path).dry_run()["problems"] == []


def test_a_stage_error_names_the_pipeline_key_and_following_it_works(tiny, tmp_path, capsys):
    """The tokenizer stage stops at a record it cannot read and says how to skip it in the words of the pipeline
    (`tokenizer_extension.on_bad_record=skip`, not the flag of `yunshan tokenizer extend`); given as an override
    after `--from`, the run goes through and counts the record."""
    root, files = tiny
    corpus = tmp_path / "corpus.jsonl"
    lines = Path(files["mid"]).read_text(encoding="utf-8").splitlines(keepends=True)
    corpus.write_bytes("".join(lines[:5]).encode() + b'{"text": "caf\xe9"}\n' + "".join(lines[5:]).encode())
    data = {"name": "newcomer", "output_dir": str(tmp_path / "run"), "model": {"name_or_path": str(root / "model")},
            "tokenizer_extension": {"corpus": [str(corpus)], "new_tokens": 20}}
    path = write(tmp_path / "recipe.yaml", data)
    assert main(["run", str(path)]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert f"{corpus}:6" in err and "tokenizer_extension.on_bad_record=skip" in err, err
    assert "--on-bad-record" not in err
    assert main(["run", str(path), "--from", "tokenizer", "tokenizer_extension.on_bad_record=skip"]) == 0
    report = json.loads((tmp_path / "run/01_tokenizer/report.json").read_text())
    assert report["extension"]["corpus"]["files"][0]["bad"] == {"invalid_utf8": 1}


def test_ctrl_c_then_a_changed_rerun_then_the_hinted_override(tiny, tmp_path, monkeypatch, capsys):
    """Ctrl-C inside cpt: one line (no traceback) naming what is kept and the command that resumes; a rerun with a
    changed data setting is refused with the pipeline's own key `cpt.training.resume=never`, which works when given
    after `--from cpt`."""
    import yunshan.training.cpt as cpt
    from transformers import TrainerCallback

    from yunshan.io.artifacts import RunManifest

    class CtrlC(TrainerCallback):
        def on_save(self, args, state, control, **kwargs):
            if state.global_step == 2:
                raise KeyboardInterrupt

    original = cpt.run_cpt
    monkeypatch.setattr(cpt, "run_cpt", lambda recipe, dry_run=False, callbacks=None: original(
        recipe, dry_run, [CtrlC()]))
    path = write(tmp_path / "recipe.yaml", cpt_recipe(tiny, tmp_path / "run"))
    assert main(["run", str(path)]) == 130
    err = capsys.readouterr().err
    last = err.strip().splitlines()[-1]  # after the progress bars (stderr), the one line
    assert "Traceback" not in err and last.startswith("yunshan run: interrupted: Ctrl-C in stage cpt; "), err
    assert "checkpoint-2" in last and f"yunshan run {path}" in last, last
    assert RunManifest.read(tmp_path / "run/run.json").stage("cpt").status == "interrupted"
    monkeypatch.setattr(cpt, "run_cpt", original)

    assert main(["run", str(path), "--from", "cpt", "cpt.data.seq_len=16"]) == 1
    err = capsys.readouterr().err
    assert "cpt.data.seq_len 32 -> 16" in err and "cpt.training.resume=never" in err, err
    assert " training.resume=never" not in err.replace("cpt.training.resume=never", "")
    assert main(["run", str(path), "--from", "cpt", "cpt.data.seq_len=16", "cpt.training.resume=never"]) == 0
    manifest = RunManifest.read(tmp_path / "run/run.json")
    assert manifest.stage("cpt").status == "complete" and manifest.stage("cpt").summary["steps"] == 4


def test_sft_max_steps_wins_over_epochs_and_the_plan_says_so(tiny):
    from yunshan.training.arguments import TrainArgs
    from yunshan.training.sft import sft_steps

    assert sft_steps(TrainArgs(epochs=2), 710, 2) == (710, "training.epochs 2 over 710 rows of 2 per step")
    steps, why = sft_steps(TrainArgs(epochs=2, max_steps=10), 710, 2)
    assert steps == 10 and "wins over training.epochs 2 (710 steps)" in why
    assert sft_steps(TrainArgs(max_steps=10), 710, 2) == (10, "training.max_steps")
    assert sft_steps(TrainArgs(), 710, 2)[0] == 1000
    # In a pipeline recipe whose sft section sets epochs, the override on the command line is what runs.
    root, _ = tiny
    from yunshan.samples import sample_data_dir

    from yunshan.training.sft import SftArgs, run_sft

    recipe = load_recipe(SftArgs, data={
        "model": {"name_or_path": str(root / "model")},
        "data": {"max_length": 64, "sources": [{"name": "general", "format": "alpaca",
                                                "path": str(Path(sample_data_dir()) / "sft/general_alpaca.jsonl")}]},
        "training": {"epochs": 2, "output_dir": str(root / "sft"), "per_device_batch_size": 2}},
        overrides=["training.max_steps=10"])
    plan = run_sft(recipe, dry_run=True)
    assert plan["max_steps"] == 10 and "wins over training.epochs 2" in plan["steps_from"]


def test_the_embedding_warmup_is_counted_inside_max_steps():
    """training.max_steps is the whole budget: the warm-up takes warmup.steps of it (which must leave a step for
    continual pretraining), else a quarter of it, at most 100 steps, and never all of it."""
    from yunshan.training.embedding_warmup import EmbeddingWarmupArgs, warmup_budget

    assert warmup_budget(EmbeddingWarmupArgs(), 40) == 10
    assert warmup_budget(EmbeddingWarmupArgs(), 30) == 8
    assert warmup_budget(EmbeddingWarmupArgs(), 10_000) == 100
    assert warmup_budget(EmbeddingWarmupArgs(), 2) == 1 and warmup_budget(EmbeddingWarmupArgs(), 1) == 0
    assert warmup_budget(EmbeddingWarmupArgs(steps=10), 30) == 10
    with pytest.raises(ValueError, match="warmup.steps 30 must be below training.max_steps 30"):
        warmup_budget(EmbeddingWarmupArgs(steps=30), 30)
