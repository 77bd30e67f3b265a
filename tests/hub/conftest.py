"""A real `yunshan run`-shaped folder, made by the real entry points on a tiny PanGu-π: a stand-in base, continual
pretraining on the bundled finance/legal/general samples, LoRA SFT, `yunshan eval` before and after, and the
run.json the pipeline runner writes. Plus a tiny Llama model folder (a transformers architecture, no remote code)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch

from fixtures import train_tokenizer

TOKEN = "hf_standInTokenForTests_9f8e7d6c5b4a"  # what HF_TOKEN holds in the push tests; must never be echoed
TINY = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
        "num_key_value_heads": 2, "aug_reduction": 4, "max_position_embeddings": 128}
TRAIN = {"max_steps": 4, "per_device_batch_size": 4, "learning_rate": 3e-3, "save_steps": 100, "logging_steps": 2,
         "warmup_steps": 0, "precision": "fp32"}


def _samples() -> Path:
    from yunshan.samples import sample_data_dir

    return Path(sample_data_dir())


def _head(src: Path, dst: Path, n: int) -> str:
    dst.write_text("".join(src.read_text(encoding="utf-8").splitlines(keepends=True)[:n]), encoding="utf-8")
    return str(dst)


@pytest.fixture(scope="session")
def run_dir(tmp_path_factory) -> Path:
    from yunshan.io.artifacts import RunManifest, StageRecord
    from yunshan.eval.commands import EvalArgs, run_eval
    from yunshan.models.pangu_pi import PanguPiConfig, PanguPiForCausalLM
    from yunshan.arguments.recipe import load_recipe
    from yunshan.training.cpt import CptArgs
    from yunshan.training.sft import SftArgs
    from yunshan.training.cpt import run_cpt
    from yunshan.training.sft import run_sft

    samples = _samples()
    root = tmp_path_factory.mktemp("hub") / "run"
    data = root.parent / "data"
    data.mkdir()
    texts = [json.loads(line)["text"] for domain in ("general", "finance", "legal")
             for line in (samples / f"corpora/{domain}/train.jsonl").read_text(encoding="utf-8").splitlines()[:60]]
    tokenizer = train_tokenizer(data / "tok", texts, vocab_size=400)

    # 00_base: the stand-in base (the runner pretrains one; an initialised tiny PanGu-π does for the card).
    torch.manual_seed(0)
    base = PanguPiForCausalLM(PanguPiConfig.from_preset("tiny", vocab_size=len(tokenizer), **TINY))
    base.save_pretrained(root / "00_base")
    tokenizer.save_pretrained(root / "00_base")
    (root / "00_base" / "STAND_IN_BASE.md").write_text("stand-in base trained by yunshan run\n")

    sources = [{"name": d, "path": str(samples / f"corpora/{d}/train.jsonl"), "weight": w}
               for d, w in (("finance", 0.25), ("legal", 0.25), ("general", 0.5))]
    run_cpt(load_recipe(CptArgs, data={
        "model": {"name_or_path": str(root / "00_base")},
        "data": {"seq_len": 64, "block_size": 64, "sources": sources},
        "training": {"output_dir": str(root / "03_cpt"), **TRAIN}}))
    shutil.rmtree(root / "03_cpt" / "checkpoints")
    run_sft(load_recipe(SftArgs, data={
        "model": {"name_or_path": str(root / "03_cpt")},
        "data": {"max_length": 96, "sources": [
            {"name": "general", "format": "alpaca",
             "path": _head(samples / "sft/general_alpaca.jsonl", data / "general_alpaca.jsonl", 40)},
            {"name": "legal_consultation", "format": "messages",
             "path": _head(samples / "sft/legal_messages.jsonl", data / "legal_messages.jsonl", 20)}]},
        "training": {"output_dir": str(root / "04_sft"), **TRAIN},
        "lora": {"enabled": True, "r": 4, "alpha": 8, "dropout": 0.0}}))
    shutil.rmtree(root / "04_sft" / "checkpoints")

    heldout = [f"general={samples}/heldout/general.txt", f"finance={samples}/heldout/finance.txt"]
    for stage, model in (("02_eval_before", "00_base"), ("05_eval_after", "04_sft")):
        # max_chars: the first 3,000 characters of each held-out text (a .txt is one document, which `limit` leaves
        # whole: 55-60k characters in windows of 64 tokens were most of this fixture's time)
        run_eval(EvalArgs(model=[str(root / model)], tasks=["bpc", "fineval"], limit=1, shots=0, heldout=heldout,
                          max_length=64, max_chars=3000, out=str(root / stage), progress=False))

    cpt_report = json.loads((root / "03_cpt" / "data_report.json").read_text())
    sft_report = json.loads((root / "04_sft" / "data_report.json").read_text())
    stages = [
        StageRecord("base", "complete", "00_base", seconds=61.5,
                    summary={"train_loss": 7.9, "steps": 250, "tokens": 512000}),
        StageRecord("eval_before", "complete", "02_eval_before", seconds=12.25, summary={"results": "results.json"}),
        StageRecord("cpt", "complete", "03_cpt", seconds=130.0,
                    summary={"steps": cpt_report["steps"], "tokens": cpt_report["tokens_trained"]}),
        StageRecord("sft", "complete", "04_sft", seconds=45.0,
                    summary={"steps": sft_report["steps"], "samples": sft_report["samples"]}),
        StageRecord("eval_after", "complete", "05_eval_after", seconds=11.0, summary={"results": "results.json"}),
        StageRecord("export", "running", "06_export"),
    ]
    shutil.copyfile(root / "04_sft" / "recipe.yaml", root / "recipe.yaml")
    # As PipelineRunner writes it.
    RunManifest(name="yunshan-tiny-test", yunshan_version="0.1.0", base_model=str(root / "00_base"),
                final_model="04_sft", stages=stages).write(root)
    return root


@pytest.fixture(scope="session")
def llama_dir(tmp_path_factory) -> Path:
    from transformers import LlamaConfig, LlamaForCausalLM

    folder = tmp_path_factory.mktemp("llama") / "llama-tiny"
    tokenizer = train_tokenizer(folder, vocab_size=300)
    torch.manual_seed(1)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id)
    LlamaForCausalLM(config).save_pretrained(folder)
    return folder


@pytest.fixture(scope="session")
def run_export(run_dir, tmp_path_factory) -> Path:
    """The run exported with small shards (several files) and a license: what the push tests upload."""
    from yunshan.hub.export import export_model

    out = tmp_path_factory.mktemp("exports") / "yunshan-tiny"
    export_model(run_dir, out, max_shard_size="60KB", license="apache-2.0", repo_id="org/yunshan-tiny")
    return out
