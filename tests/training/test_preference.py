"""`yunshan pref` on tiny models: every method raises held-out preference accuracy and reward margin; DPO equals TRL's
DPOTrainer run directly; under LoRA the reference is the adapter-disabled base model; a tied model stays tied and an
extension's trained rows are kept; a run killed by SIGKILL and resumed ends exactly as an uninterrupted one."""

import json
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from fixtures import train_tokenizer
from yunshan.arguments.recipe import load_recipe
from yunshan.training.preference import PrefArgs, run_pref

ROOT = Path(__file__).resolve().parents[2]
SUBJECTS = {"finance": "asset dividend equity revenue".split(), "law": "court contract verdict statute".split()}
FILLER = "apple river stone cloud tiger lamp ocean forest".split()


def pairs(n: int, seed: int) -> list[dict]:
    """Which domain does a word list belong to: the chosen answer is right and cites its rule, the rejected one is
    the other domain, bare (the bundled set's shape, in miniature)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        label = rng.choice(sorted(SUBJECTS))
        words = rng.sample(FILLER, 3) + [rng.choice(SUBJECTS[label])]
        rng.shuffle(words)
        other = "law" if label == "finance" else "finance"
        out.append({"prompt": f"Which domain? {' '.join(words)}", "chosen": f"{label}, by rule {len(label)}.",
                    "rejected": f"{other}."})
    return out


# A chat template whose assistant turn ends with EOS and nothing after it, so that TRL's own tokenisation of a
# conversational pair (the answer: everything after the prompt) and yunshan's (the assistant turn as SFT labels it)
# are the same tokens, and the two trainers see the same batches.
TEMPLATE = ("{% for m in messages %}{% if m['role'] == 'user' %}<|user|>\n{{ m['content'] }}\n"
            "{% elif m['role'] == 'assistant' %}<|assistant|>\n{{ m['content'] }}{{ eos_token }}{% endif %}{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>\n{% endif %}")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Pairs (train and a held-out file), a tokenizer with the template above, a tied Llama shaped like SmolLM2,
    and the same model after an extension whose new rows were trained (a `cpt` folder)."""
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from yunshan.tokenizer import ExtendArgs, extend_tokenizer, resize_embeddings

    root = tmp_path_factory.mktemp("pref")
    train = pairs(160, 0)
    (root / "pairs.jsonl").write_text("".join(json.dumps(r) + "\n" for r in train))
    texts = [f"<|user|>\n{r['prompt']}\n<|assistant|>\n{r['chosen']} {r['rejected']}" for r in train]
    tok = train_tokenizer(root / "llama", texts, vocab_size=300)
    tok.chat_template = TEMPLATE
    tok.save_pretrained(root / "llama")
    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
                     ).save_pretrained(root / "llama")
    corpus = root / "corpus.txt"
    corpus.write_text("\n\n".join(" ".join(SUBJECTS["finance"] + SUBJECTS["law"] + ["rule"]) for _ in range(50)))
    extend_tokenizer(ExtendArgs(base=str(root / "llama"), corpus=[str(corpus)], new_tokens=8,
                                out=str(root / "tok_ext")), log=lambda *_: None)
    model = LlamaForCausalLM.from_pretrained(root / "llama")
    resize_embeddings(model, str(root / "llama"), str(root / "tok_ext"))
    with torch.no_grad():
        model.get_input_embeddings().weight[len(tok):] += 0.5  # as continual pretraining left them: trained
    model.save_pretrained(root / "cpt")
    ext = AutoTokenizer.from_pretrained(root / "tok_ext")
    ext.chat_template = TEMPLATE
    ext.save_pretrained(root / "cpt")
    assert len(ext) > len(tok)
    return root


def recipe_data(world, out, method="dpo", lora=False, **training) -> dict:
    return {
        "method": method, "beta": 2.0 if method == "simpo" else 0.1,
        "model": {"name_or_path": str(world / "llama")},
        "data": {"max_length": 64, "sources": [
            {"name": "domains", "path": str(world / "pairs.jsonl"), "format": "pairs", "heldout": 24}]},
        "training": {"output_dir": str(out), "max_steps": 12, "per_device_batch_size": 8, "learning_rate": 1e-2,
                     "lr_scheduler": "constant", "logging_steps": 3, "save_steps": 100, "weight_decay": 0.0,
                     "precision": "fp32", **training},
        "lora": {"enabled": lora, "r": 8, "alpha": 16, "dropout": 0.0},
    }


def recipe(world, out, **kwargs) -> PrefArgs:
    return load_recipe(PrefArgs, data=recipe_data(world, out, **kwargs))


def log_rows(out: Path, event: str) -> list[dict]:
    return [r for r in map(json.loads, (out / "log.jsonl").read_text().splitlines()) if r.get("event") == event]


@pytest.mark.parametrize("method, lora", [("dpo", True), ("ipo", False), ("kto", False), ("orpo", False),
                                          ("simpo", True)])
def test_each_method_raises_held_out_preference_accuracy_and_margin(world, tmp_path, method, lora):
    summary = run_pref(recipe(world, tmp_path / "run", method=method, lora=lora))
    before, after = summary["heldout"]["before"], summary["heldout"]["after"]
    assert before["step"] == 0 and after["step"] == 12
    assert after["heldout/reward_margin"] > before["heldout/reward_margin"] + 0.05
    assert after["heldout/reward_accuracy"] >= 0.9 and after["heldout/likelihood_accuracy"] >= 0.9
    assert before["heldout/likelihood_accuracy"] < 0.8
    report = json.loads((tmp_path / "run/data_report.json").read_text())
    assert report["kind"] == "preference" and report["heldout_pairs"] == 24
    assert report["method"]["name"] == method and report["method"]["trl"].startswith("1.")
    assert report["sources"]["domains"]["samples"] == (272 if method == "kto" else 136)  # KTO: each pair as two
    assert report["heldout"]["after"] == after
    train = log_rows(tmp_path / "run", "train")
    assert [r["step"] for r in train] == [3, 6, 9, 12] and all(math_finite(r["loss"]) for r in train)
    assert [r["step"] for r in log_rows(tmp_path / "run", "preference")] == [0, 12]
    assert (tmp_path / "run/curves.png").is_file() and (tmp_path / "run/model.safetensors").is_file()
    assert (tmp_path / "run/adapter/adapter_config.json").is_file() == lora


def math_finite(x) -> bool:
    return x == x and abs(x) != float("inf")


def test_dpo_equals_trls_dpotrainer_run_directly(world, tmp_path):
    """The same records through TRL's DPOTrainer (its own tokenisation of the conversational pairs, its own
    reference loaded from the checkpoint) and through yunshan pref: the same token ids, and the same loss, reward
    margins, rewards and log-probabilities at the first step and the two after it."""
    from datasets import Dataset
    from transformers import AutoTokenizer, LlamaForCausalLM
    from trl import DPOConfig, DPOTrainer

    from yunshan.data.preference import PrefSourceArgs, mix_preference_sources, read_preference_source
    from yunshan.training.preference import _set_up, build_trainer

    data = recipe_data(world, tmp_path / "ours", max_steps=3, logging_steps=1, per_device_batch_size=4,
                       learning_rate=1e-3)
    data["data"]["sources"][0]["heldout"] = 0
    ours = load_recipe(PrefArgs, data=data)
    run_pref(ours)
    source = PrefSourceArgs(**data["data"]["sources"][0])
    items, _ = mix_preference_sources({"domains": read_preference_source(source, "fail", {})}, [source], seed=0)
    dataset = Dataset.from_list([{"prompt": p.prompt, "chosen": [{"role": "assistant", "content": p.chosen}],
                                  "rejected": [{"role": "assistant", "content": p.rejected}]} for p in items])
    tokenizer = AutoTokenizer.from_pretrained(world / "llama")
    args = DPOConfig(output_dir=str(tmp_path / "trl"), max_steps=3, per_device_train_batch_size=4,
                     learning_rate=1e-3, lr_scheduler_type="constant_with_warmup", adam_beta1=0.9, adam_beta2=0.95,
                     adam_epsilon=1e-8, weight_decay=0.0, max_grad_norm=1.0, seed=42, data_seed=0, bf16=False,
                     use_cpu=True, activation_checkpointing=False, logging_steps=1, save_strategy="no",
                     report_to=[], beta=0.1, max_length=64)
    trl = DPOTrainer(model=LlamaForCausalLM.from_pretrained(world / "llama"), args=args, train_dataset=dataset,
                     processing_class=tokenizer)
    run = _set_up(load_recipe(PrefArgs, data={**data, "training": {**data["training"],
                                                                   "output_dir": str(tmp_path / "again")}}), False)
    mine, *_ = build_trainer(run)
    for key in ("prompt_ids", "chosen_ids", "rejected_ids"):
        assert trl.train_dataset[key] == mine.train_dataset[key], key
    trl.train()
    theirs = [r for r in trl.state.log_history if "loss" in r]
    yours = log_rows(tmp_path / "ours", "train")
    assert [r["step"] for r in theirs] == [r["step"] for r in yours] == [1, 2, 3]
    assert abs(yours[0]["loss"] - 0.693147) < 1e-5  # the reference is the starting model
    worst = 0.0
    for a, b in zip(theirs, yours):
        for key in ("loss", "rewards/margins", "rewards/chosen", "rewards/rejected", "rewards/accuracies",
                    "logps/chosen", "logps/rejected", "grad_norm"):
            worst = max(worst, abs(a[key] - b[key]))
            assert abs(a[key] - b[key]) <= 1e-6 * max(1.0, abs(a[key])), (key, a, b)
    print(f"largest difference from TRL's DPOTrainer over 3 steps: {worst:.2e}")


def test_held_out_metrics_reach_the_log_the_trackers_and_the_curves(world, tmp_path, monkeypatch):
    """The held-out pairs' metrics and bits/char every eval_steps, TRL's batch metrics at every logging step: in the
    JSONL log, in TensorBoard at the same steps (read back with tensorboard's own reader), and as panels of
    curves.png."""
    from test_tracking import read_tensorboard
    from yunshan.training.monitoring import curve_panels

    monkeypatch.delenv("TENSORBOARD_LOGGING_DIR", raising=False)
    heldout = tmp_path / "heldout.txt"
    heldout.write_text("\n\n".join(f"{r['prompt']} {r['chosen']}" for r in pairs(20, 9)))
    data = recipe_data(world, tmp_path / "run", lora=True, max_steps=6, logging_steps=2, report_to=["tensorboard"])
    data.update(eval_steps=3, monitor={"every_steps": 3, "general": [str(heldout)], "max_chars": 2000})
    run_pref(load_recipe(PrefArgs, data=data))
    out = tmp_path / "run"
    held = {r["step"]: r for r in log_rows(out, "preference")}
    bpc = {r["step"]: r["bpc_general"] for r in log_rows(out, "bpc")}
    train = {r["step"]: r for r in log_rows(out, "train")}
    assert sorted(held) == sorted(bpc) == [0, 3, 6] and sorted(train) == [2, 4, 6]
    acc = read_tensorboard(out / "tensorboard")
    scalars = {tag: {e.step: e.value for e in acc.Scalars(tag)} for tag in acc.Tags()["scalars"]}
    for key in ("heldout/reward_margin", "heldout/reward_accuracy", "heldout/likelihood_accuracy"):
        assert scalars[f"train/{key}"] == pytest.approx({s: r[key] for s, r in held.items()}, abs=1e-6), key
    assert scalars["train/bpc_general"] == pytest.approx(bpc, rel=1e-6)
    assert scalars["train/rewards/margins"] == pytest.approx({s: r["rewards/margins"] for s, r in train.items()})
    panels = curve_panels([json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()])
    assert [p["title"] for p in panels] == ["training loss", "preference accuracy",
                                            "reward margin (chosen - rejected)", "held-out bits per character"]
    assert all(p["series"] for p in panels)


def test_a_new_run_in_the_folder_of_a_finished_one_starts_a_new_log(world, tmp_path):
    """The pipeline reruns a stage whose settings changed in the same folder: the new run's log, summary and data
    report hold its own steps only (the logger appends, so the earlier run's log is removed when a run starts over)."""
    run_pref(recipe(world, tmp_path / "run", max_steps=4, logging_steps=2))
    summary = run_pref(recipe(world, tmp_path / "run", max_steps=2, logging_steps=1, learning_rate=3e-3,
                              resume="never"))
    assert [r["step"] for r in log_rows(tmp_path / "run", "preference")] == [0, 2]
    assert [r["step"] for r in log_rows(tmp_path / "run", "train")] == [1, 2]
    assert summary["heldout"]["after"]["step"] == 2


def test_lora_reference_is_the_adapter_disabled_base_model(world, tmp_path):
    """Under LoRA the reference log-probabilities are the frozen base model's (a forward pass of the model as
    loaded), also after the adapter has trained; no reference copy and no "ref" adapter are kept."""
    from transformers import LlamaForCausalLM

    from yunshan.training.preference import _set_up, build_trainer
    from yunshan.training.preference_monitor import answer_logps

    run = _set_up(recipe(world, tmp_path / "run", lora=True, max_steps=3), False)
    trainer, monitor, *_ = build_trainer(run)
    trainer.train()
    assert trainer.ref_model is None and list(trainer.model.peft_config) == ["default"]
    batch = next(iter(trainer.get_train_dataloader()))
    ref_chosen, ref_rejected = trainer.compute_ref_log_probs(trainer.model, batch)
    base = LlamaForCausalLM.from_pretrained(world / "llama").eval()
    n = len(ref_chosen)
    rows = [trainer.train_dataset[i] for i in range(len(trainer.train_dataset))]
    # the batch's pairs, found by their token ids
    ids = batch["input_ids"].tolist()
    from yunshan.data.preference import EncodedPair

    chosen_pairs = []
    for i in range(n):
        seq = [t for t, m in zip(ids[i], batch["attention_mask"][i].tolist()) if m]
        row = next(r for r in rows if r["prompt_ids"] + r["chosen_ids"] == seq)
        chosen_pairs.append(EncodedPair(row["prompt_ids"], row["chosen_ids"], row["rejected_ids"]))
    frozen = answer_logps(base, chosen_pairs, pad_id=0)
    torch.testing.assert_close(ref_chosen.double(), torch.tensor(frozen["chosen"], dtype=torch.float64), atol=1e-4, rtol=0)
    torch.testing.assert_close(ref_rejected.double(), torch.tensor(frozen["rejected"], dtype=torch.float64), atol=1e-4, rtol=0)
    trained = answer_logps(trainer.model, chosen_pairs, pad_id=0)
    assert max(abs(a - b) for a, b in zip(trained["chosen"], frozen["chosen"])) > 1e-3  # the adapter did train


@pytest.mark.parametrize("method, checkpointing", [("dpo", False), ("kto", False), ("dpo", True)])
def test_lora_dpo_and_kto_raise_no_deprecation_warning(world, tmp_path, method, checkpointing):
    """TRL's DPO and KTO read transformers' deprecated `is_gradient_checkpointing` around every reference pass (and
    with gradient checkpointing call its deprecated `gradient_checkpointing_disable` / `_enable`), and PEFT reads it
    when it wraps the model: a normal `yunshan pref` run records no FutureWarning or DeprecationWarning (issue 47;
    tests/training/test_library_warnings.py for cpt and sft)."""
    import warnings

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        run_pref(recipe(world, tmp_path / "run", method=method, lora=True, max_steps=2,
                        gradient_checkpointing=checkpointing))
    assert [f"{w.filename}:{w.lineno}: {w.message}" for w in caught
            if issubclass(w.category, (FutureWarning, DeprecationWarning))] == []


def test_held_out_scoring_in_chunks_equals_the_models_own_logits(world):
    """The held-out scoring applies the LM head to a few answer positions at a time (label logit minus logsumexp);
    it equals the log-softmax of the model's own logits for the whole batch: on the tied model, under LoRA with
    trained new rows (the head through PEFT's wrapper), and through the one-row fallback of models that transform
    their logits."""
    from peft import LoraConfig, get_peft_model
    from transformers import LlamaForCausalLM

    from yunshan.data.preference import EncodedPair
    from yunshan.training.preference_monitor import _backbone_and_head, answer_logps

    rng = random.Random(0)
    model = LlamaForCausalLM.from_pretrained(world / "cpt").eval()
    vocab = model.config.vocab_size
    pairs = [EncodedPair([rng.randrange(vocab) for _ in range(rng.randint(1, 9))],
                         [rng.randrange(vocab) for _ in range(rng.randint(1, 7))],
                         [rng.randrange(vocab) for _ in range(rng.randint(1, 7))]) for _ in range(7)]
    torch.manual_seed(0)
    lora = get_peft_model(LlamaForCausalLM.from_pretrained(world / "cpt"), LoraConfig(
        r=4, lora_alpha=8, target_modules=["q_proj", "v_proj"], init_lora_weights=False,
        trainable_token_indices={"embed_tokens": list(range(vocab - 8, vocab))})).eval()
    with torch.no_grad():
        for name, p in lora.named_parameters():
            if "trainable_tokens_delta" in name:
                p.normal_()
    for m in (model, lora):
        whole = answer_logps(m, pairs, pad_id=0, batch_size=3, chunk_positions=None)
        for chunk in (1, 5, 1000):
            chunked = answer_logps(m, pairs, pad_id=0, batch_size=3, chunk_positions=chunk)
            assert chunked["chosen_tokens"] == whole["chosen_tokens"]
            torch.testing.assert_close(torch.tensor(chunked["chosen"] + chunked["rejected"]),
                                       torch.tensor(whole["chosen"] + whole["rejected"]), atol=1e-4, rtol=1e-6)
    assert answer_logps(lora, pairs, pad_id=0)["chosen"] != answer_logps(model, pairs, pad_id=0)["chosen"]
    assert _backbone_and_head(model) is not None and _backbone_and_head(lora) is not None  # the chunked path ran
    model.config.final_logit_softcapping = 1e9  # read as a transform: the model's own forward, row by row
    assert _backbone_and_head(model) is None
    whole = answer_logps(model, pairs, pad_id=0, batch_size=3, chunk_positions=None)
    torch.testing.assert_close(torch.tensor(answer_logps(model, pairs, pad_id=0, batch_size=3)["chosen"]),
                               torch.tensor(whole["chosen"]), atol=1e-4, rtol=1e-6)


def test_full_fine_tuning_reference_as_a_copy_or_precomputed_gives_the_same_run(world, tmp_path):
    """Full DPO with the reference as a frozen copy of the starting model, and with its log-probabilities computed
    by TRL before the first step (no copy kept): the same losses, rewards and weights."""
    outs = {}
    for reference in ("copy", "precompute"):
        data = recipe_data(world, tmp_path / reference, max_steps=3, logging_steps=1, learning_rate=1e-3)
        data["reference"] = reference
        summary = run_pref(load_recipe(PrefArgs, data=data))
        assert json.loads((tmp_path / reference / "data_report.json").read_text())["method"]["reference"] == reference
        outs[reference] = tmp_path / reference
    copy, pre = log_rows(outs["copy"], "train"), log_rows(outs["precompute"], "train")
    assert [r["step"] for r in copy] == [r["step"] for r in pre] == [1, 2, 3]
    assert abs(copy[0]["loss"] - 0.693147) < 1e-5  # step 0: the model is its own reference
    for a, b in zip(copy, pre):
        for key in ("loss", "rewards/margins", "rewards/chosen", "logps/rejected"):
            assert abs(a[key] - b[key]) <= 1e-5 * max(1.0, abs(a[key])), (key, a, b)
    a, b = load_file(outs["copy"] / "model.safetensors"), load_file(outs["precompute"] / "model.safetensors")
    assert max((a[k] - b[k]).abs().max().item() for k in a) <= 1e-5
    assert summary["heldout"]["after"]["heldout/reward_margin"] > 0


def test_gradient_checkpointing_under_lora_gives_the_same_run(world, tmp_path):
    """The SmolLM2 recipes keep memory down with gradient checkpointing on a LoRA model (the adapter-disabled
    reference pass runs without it): the adapter trains, and the losses, TRL's batch metrics and the weights are
    those of the run without it (recomputation is exact)."""
    from transformers import TrainerCallback

    class Seen(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, **kwargs):
            layers = [m for m in model.modules() if hasattr(m, "gradient_checkpointing")]
            seen[name] = bool(layers) and all(m.gradient_checkpointing for m in layers)

    outs, seen = {}, {}
    for name, checkpointing in (("plain", False), ("checkpointed", True)):
        data = recipe_data(world, tmp_path / name, lora=True, max_steps=3, logging_steps=1, learning_rate=1e-2,
                           gradient_checkpointing=checkpointing)
        run_pref(load_recipe(PrefArgs, data=data), callbacks=[Seen()])
        outs[name] = tmp_path / name
    assert seen == {"plain": False, "checkpointed": True}
    plain, checkpointed = log_rows(outs["plain"], "train"), log_rows(outs["checkpointed"], "train")
    assert [r["step"] for r in plain] == [r["step"] for r in checkpointed] == [1, 2, 3]
    assert plain[-1]["rewards/margins"] > 0.01  # the adapter trained
    for a, b in zip(plain, checkpointed):
        for key in ("loss", "grad_norm", "rewards/margins", "logps/chosen"):
            assert abs(a[key] - b[key]) <= 1e-5 * max(1.0, abs(a[key])), (key, a, b)
    a, b = load_file(outs["plain"] / "model.safetensors"), load_file(outs["checkpointed"] / "model.safetensors")
    assert max((a[k] - b[k]).abs().max().item() for k in a) <= 1e-5


@pytest.mark.parametrize("lora", [True, False])
def test_an_extended_vocabulary_keeps_its_trained_rows(world, tmp_path, lora):
    """Preference tuning of a model whose tokenizer an earlier stage extended and whose new rows it trained, with
    tokenizer.base_path still naming the original base (as yunshan run passes it): the rows are not grown again
    (not reset to subword means): under LoRA they are exactly as they came, under full fine-tuning they train on
    from there; the vocabulary size and the tie are kept."""
    from transformers import LlamaForCausalLM

    data = recipe_data(world, tmp_path / "run", lora=lora, max_steps=3, learning_rate=1e-3)
    data["model"] = {"name_or_path": str(world / "cpt")}
    data["tokenizer"] = {"path": str(world / "cpt"), "base_path": str(world / "llama")}
    run_pref(load_recipe(PrefArgs, data=data))
    came = load_file(world / "cpt/model.safetensors")["model.embed_tokens.weight"]
    left = load_file(tmp_path / "run/model.safetensors")
    assert "lm_head.weight" not in left  # tied: one matrix saved, and it loads tied
    model = LlamaForCausalLM.from_pretrained(tmp_path / "run")
    assert model.lm_head.weight is model.model.embed_tokens.weight
    left = left["model.embed_tokens.weight"]
    assert left.shape == came.shape
    if lora:
        assert torch.equal(left, came)
    else:
        n_base = json.loads((world / "llama/config.json").read_text())["vocab_size"]
        assert (left[n_base:] - came[n_base:]).abs().max() < 0.05  # trained on from the 0.5 shift, not reset
        assert (left[n_base:] - came[n_base:]).abs().max() > 0


@pytest.mark.parametrize("lora, message", [({"init_lora_weights": "pissa"}, "PiSSA and OLoRA"),
                                            ({"loraplus_lr_ratio": 16}, "loraplus_lr_ratio")])
def test_lora_variants_that_break_the_reference_are_refused(world, tmp_path, lora, message):
    data = recipe_data(world, tmp_path / "run", lora=True)
    data["lora"].update(lora)
    with pytest.raises(ValueError, match=message):
        load_recipe(PrefArgs, data=data)


def launch(config: Path, log: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "yunshan.cli", "pref", "--config", str(config)], cwd=ROOT,
                            stdout=open(log, "w"), stderr=subprocess.STDOUT, start_new_session=True)


def test_killed_by_sigkill_and_resumed_equals_uninterrupted(world, tmp_path):
    """Full DPO with a frozen reference copy and the held-out monitor, SIGKILLed once its step-4 checkpoint is
    complete, then run again (resume: auto): the weights, the loss curve and the held-out metrics are exactly those of
    an uninterrupted run."""
    configs = {}
    for name in ("whole", "killed"):
        data = recipe_data(world, tmp_path / name, max_steps=8, save_steps=4, logging_steps=2)
        data["eval_steps"] = 4
        configs[name] = tmp_path / f"{name}.yaml"
        configs[name].write_text(yaml.safe_dump(data))
    assert launch(configs["whole"], tmp_path / "whole.log").wait(timeout=600) == 0
    proc = launch(configs["killed"], tmp_path / "killed.log")
    deadline = time.time() + 600
    while not (tmp_path / "killed/checkpoints/checkpoint-4/COMPLETE").exists():
        assert proc.poll() is None, (tmp_path / "killed.log").read_text()[-3000:]
        assert time.time() < deadline
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (tmp_path / "killed/model.safetensors").exists()
    assert launch(configs["killed"], tmp_path / "resumed.log").wait(timeout=600) == 0
    assert "resuming from" in (tmp_path / "resumed.log").read_text()
    a, b = load_file(tmp_path / "whole/model.safetensors"), load_file(tmp_path / "killed/model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)
    for event, keys in (("train", ("loss", "rewards/margins", "logps/chosen")),
                        ("preference", ("heldout/reward_margin", "heldout/logps_chosen"))):
        whole, killed = log_rows(tmp_path / "whole", event), log_rows(tmp_path / "killed", event)
        assert [r["step"] for r in whole] == [r["step"] for r in killed]
        for x, y in zip(whole, killed):
            assert all(x[k] == y[k] for k in keys), (x, y)
    report = json.loads((tmp_path / "killed/data_report.json").read_text())
    assert report["resumes"][0]["step"] == 4


def test_bad_input_stops_with_one_line_or_is_counted(world, tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    good = pairs(20, 3)
    bad.write_text("".join(json.dumps(r) + "\n" for r in good) + json.dumps(
        {"prompt": "Which domain?", "chosen": "law.", "rejected": "law."}) + "\n" + json.dumps(
        {"prompt": "Which domain? " + "apple " * 80, "chosen": "law.", "rejected": "finance."}) + "\n")
    data = recipe_data(world, tmp_path / "out")
    data["data"]["sources"] = [{"name": "s", "path": str(bad), "format": "pairs"}]
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(data))
    from yunshan.cli import main  # the command line's own main, in this process (an interpreter start saved)

    capsys.readouterr()
    code, err = main(["pref", "--config", str(tmp_path / "r.yaml")]), capsys.readouterr().err
    assert code == 1 and "Traceback" not in err
    assert f"{bad}:21: field 'rejected': identical_answers" in err
    from transformers import AutoTokenizer

    from yunshan.training.preference import build_preference_data

    tokenizer = AutoTokenizer.from_pretrained(world / "llama")
    data["data"]["on_bad_record"] = "skip"
    with pytest.raises(ValueError, match=re.escape(f"{bad}:22: field 'prompt': too long")):
        build_preference_data(load_recipe(PrefArgs, data={**data, "data": {**data["data"], "overlong": "fail"}}),
                              tokenizer)
    report = build_preference_data(load_recipe(PrefArgs, data=data), tokenizer).report
    assert report.sources["s"].dropped == {"bad:identical_answers": 1, "prompt_too_long": 1}
    assert report.samples == 20


def test_nothing_left_for_training_names_the_cause_and_every_count(world, tmp_path, capsys):
    """`data.sources.0.heldout=100000` holds out every pair: one line says the held-out split took them all and gives
    the counts (read, dropped while reading by reason, held out, left for training); a max_length no pair fits says
    length fitting dropped them, by reason."""
    from transformers import AutoTokenizer

    from yunshan.cli import main
    from yunshan.training.preference import build_preference_data

    (tmp_path / "r.yaml").write_text(yaml.safe_dump(recipe_data(world, tmp_path / "out")))
    assert main(["pref", "--config", str(tmp_path / "r.yaml"), "data.sources.0.heldout=100000"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == ("yunshan pref: error: no preference sample left for training: the held-out split took every pair "
                   "read (data.sources.0.heldout: 100000): hold out fewer than the source holds; per source (pairs): "
                   "domains: 160 read, 160 held out, 0 left for training"), err
    assert not (tmp_path / "out").exists()
    data = recipe_data(world, tmp_path / "out")
    data["data"]["max_length"] = 4
    with pytest.raises(ValueError) as err:
        build_preference_data(load_recipe(PrefArgs, data=data), AutoTokenizer.from_pretrained(world / "llama"))
    assert str(err.value) == (
        "no preference sample left for training: every pair left for training was dropped fitting data.max_length "
        "(4): raise it, or set data.overlong: truncate; per source (pairs): domains: 160 read, 24 held out, "
        "136 left for training, 136 (prompt_too_long 136) dropped fitting data.max_length")


# ----------------------------------------------------------------------------- engines


def _engine_runs(world, tmp_path, engine: str, **changes) -> tuple[Path, Path]:
    """One process on the global batch (8 pairs), straight through, and a 2-process launch of `engine` (4 pairs a
    process), SIGKILLed once its step-2 checkpoint is complete and resumed."""
    from test_engines import launch, launch_and_kill

    data = recipe_data(world, tmp_path / "one", max_steps=4, save_steps=2, logging_steps=1, learning_rate=3e-3,
                       per_device_batch_size=8)
    data["eval_steps"] = 2
    data.update(changes)
    run_pref(load_recipe(PrefArgs, data=data))
    data["training"] = {**data["training"], "output_dir": str(tmp_path / engine), "per_device_batch_size": 4}
    config = tmp_path / f"{engine}.yaml"
    config.write_text(yaml.safe_dump(data))
    launch_and_kill(engine, "pref", config, tmp_path / engine / "checkpoints/checkpoint-2")
    assert not (tmp_path / engine / "model.safetensors").exists()
    assert "resuming from" in launch(engine, "pref", config)
    return tmp_path / "one", tmp_path / engine


@pytest.mark.multiprocess
@pytest.mark.distributed  # make test-distributed
@pytest.mark.parametrize("engine, lora", [("ddp", False), ("zero3", True), ("zero3", False)])
def test_ddp_and_zero3_follow_one_process(world, tmp_path, engine, lora):
    """DPO under accelerate launch with 2 CPU processes, SIGKILLed after a checkpoint and resumed: DDP with full
    fine-tuning and a frozen reference copy, DeepSpeed ZeRO-3 with LoRA (the adapter-disabled reference, the
    weights partitioned) and with full fine-tuning (the reference copy partitioned too): the losses, TRL's batch
    metrics, the held-out metrics and the final weights follow one process within test_engines.py's tolerances."""
    from test_engines import LOSS_TOL, WEIGHT_TOL, assert_engine

    one, two = _engine_runs(world, tmp_path, engine, lora={"enabled": lora, "r": 8, "alpha": 16, "dropout": 0.0})
    assert_engine(two, engine)
    for event, keys in (("train", ("loss", "grad_norm", "rewards/margins", "logps/chosen")),
                        ("preference", ("heldout/reward_margin", "heldout/logps_chosen", "heldout/logps_rejected"))):
        a, b = log_rows(one, event), log_rows(two, event)
        assert [r["step"] for r in a] == [r["step"] for r in b] and a, (event, a, b)
        for x, y in zip(a, b):
            for key in keys:
                assert abs(x[key] - y[key]) <= LOSS_TOL * max(1.0, abs(x[key])), (key, x, y)
    a, b = load_file(one / "model.safetensors"), load_file(two / "model.safetensors")
    assert a.keys() == b.keys() and max((a[k] - b[k]).abs().max().item() for k in a) <= WEIGHT_TOL
    report = json.loads((two / "data_report.json").read_text())
    assert report["method"]["reference"] == ("adapter" if lora else "copy") and report["resumes"][0]["step"] == 2
