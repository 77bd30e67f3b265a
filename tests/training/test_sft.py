"""`yunshan sft` end to end on tiny models: learns a trained form, packing equals no packing, LoRA round trip,
per-source losses, the bundled instruction sets in all five formats, two DDP processes equal one."""

import json
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from fixtures import free_port, train_tokenizer
from yunshan.arguments.recipe import load_recipe
from yunshan.training.sft import SftArgs
from yunshan.training.sft import build_sft_data, make_collator, run_sft

FIN = "asset liability profit dividend equity revenue".split()
LAW = "court contract lawsuit verdict statute plaintiff".split()
FILLER = "apple river stone cloud tiger lamp ocean forest candle mirror violin desert".split()
SAMPLES = Path(__file__).resolve().parents[2] / "yunshan/samples/data/sft"


def domain_task(n, seed):
    rng = random.Random(seed)
    rows = []
    for _ in range(n):
        label = rng.choice(["finance", "law"])
        words = rng.sample(FILLER, 3)
        words.insert(rng.randint(0, 3), rng.choice(FIN if label == "finance" else LAW))
        rows.append({"instruction": "Which domain?", "input": " ".join(words), "output": label})
    return rows


@pytest.fixture(scope="module")
def task(tmp_path_factory):
    root = tmp_path_factory.mktemp("sft")
    train = domain_task(300, 0)
    (root / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in train))
    chat = [{"messages": [{"role": "user", "content": f"Which domain?\n{r['input']}"},
                          {"role": "assistant", "content": r["output"]}]} for r in domain_task(60, 1)]
    (root / "chat.jsonl").write_text("".join(json.dumps(r) + "\n" for r in chat))
    texts = [f"<|user|>\nWhich domain?\n{r['input']}\n<|assistant|>\n{r['output']}" for r in train]
    train_tokenizer(root / "tok", texts, vocab_size=300)
    return root, {r["input"] for r in train} | {c["messages"][0]["content"].split("\n")[1] for c in chat}


def recipe(root, out, **data):
    return load_recipe(SftArgs, data=recipe_data(root, out, **data))


def recipe_data(root, out, **data):
    return {
        "model": {"preset": "tiny", "config_overrides": {"hidden_size": 64, "intermediate_size": 128,
                                                         "num_hidden_layers": 2, "aug_reduction": 8}},
        "tokenizer": {"path": str(root / "tok")},
        "data": {"max_length": 64, "sources": [
            {"name": "alpaca", "path": str(root / "train.jsonl"), "format": "alpaca"},
            {"name": "chat", "path": str(root / "chat.jsonl"), "format": "messages", "heldout": 2}], **data},
        "training": {"output_dir": str(out), "max_steps": 40, "per_device_batch_size": 16, "learning_rate": 3e-3,
                     "warmup_steps": 5, "logging_steps": 10, "save_steps": 20, "weight_decay": 0.0},
    }


def test_a_tiny_model_answers_held_out_prompts_of_the_trained_form(task, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    root, seen = task
    summary = run_sft(recipe(root, tmp_path / "run"))
    out = tmp_path / "run"
    tok = AutoTokenizer.from_pretrained(out)
    assert tok.chat_template  # yunshan's default template was saved with the model
    model = AutoModelForCausalLM.from_pretrained(out).eval()
    held_out = [(r["input"], r["output"]) for r in domain_task(100, 7) if r["input"] not in seen][:8]
    assert len(held_out) == 8 and {a for _, a in held_out} == {"finance", "law"}
    for prompt, answer in held_out:
        text = tok.apply_chat_template([{"role": "user", "content": f"Which domain?\n{prompt}"}], tokenize=False,
                                       add_generation_prompt=True)
        ids = tok(text, add_special_tokens=False, return_tensors="pt")
        generated = model.generate(**ids, max_new_tokens=5, do_sample=False)
        assert tok.decode(generated[0, ids["input_ids"].shape[1]:], skip_special_tokens=True).strip() == answer
    # Per-source losses are logged next to the loss; generations for the held-out samples are saved.
    rows = [json.loads(l) for l in (out / "log.jsonl").read_text().splitlines()]
    train_rows = [r for r in rows if r.get("event") == "train"]
    assert all("loss_alpaca" in r and "loss_chat" in r for r in train_rows)
    generations = [json.loads(l) for l in (out / "generations.jsonl").read_text().splitlines()]
    assert len(generations) == 2 and all(g["source"] == "chat" for g in generations)
    report = json.loads((out / "data_report.json").read_text())
    assert report["sources"]["alpaca"]["samples"] == 300 and report["sources"]["chat"]["samples"] == 58
    assert summary["steps"] == 40


def test_nothing_left_for_training_names_the_cause_and_every_count(task):
    """Sources whose held-out split takes every sample stop in one line saying so, with each source's counts."""
    from transformers import AutoTokenizer

    from yunshan.data.chat import ensure_chat_template

    root, _ = task
    tok = AutoTokenizer.from_pretrained(root / "tok")
    ensure_chat_template(tok)
    r = recipe(root, root / "x")
    r.data.sources[0].heldout, r.data.sources[1].heldout = 300, 1000
    with pytest.raises(ValueError) as err:
        build_sft_data(r, tok)
    assert str(err.value) == (
        "no SFT sample left for training: the held-out split took every sample read (data.sources.0.heldout: 300, "
        "data.sources.1.heldout: 1000): hold out fewer than the source holds; per source (samples): alpaca: 300 "
        "read, 300 held out, 0 left for training; chat: 60 read, 60 held out, 0 left for training")


@pytest.mark.parametrize("arch", ["pangu_pi", "llama"])
def test_packed_logits_equal_unpacked(task, arch):
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from yunshan.models.pangu_pi import PanguPiConfig, PanguPiForCausalLM

    root, _ = task
    tok = AutoTokenizer.from_pretrained(root / "tok")
    from yunshan.data.chat import ensure_chat_template

    ensure_chat_template(tok)
    rows, _, report = build_sft_data(recipe(root, root / "x", packing=True, max_length=128), tok)
    dims = dict(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                num_attention_heads=4, num_key_value_heads=2)
    model = (LlamaForCausalLM(LlamaConfig(**dims)) if arch == "llama"
             else PanguPiForCausalLM(PanguPiConfig(**dims, aug_reduction=4, siaf_neighbor_kernel=3))).eval()
    batch = make_collator(tok.pad_token_id, packing=True)(rows[:3])
    packed = model(input_ids=batch["input_ids"], position_ids=batch["position_ids"], use_cache=False).logits
    for r in range(3):
        starts = [i for i, p in enumerate(batch["position_ids"][r].tolist()) if p == 0]
        for a, b in zip(starts, starts[1:] + [batch["input_ids"].shape[1]]):
            if batch["labels"][r, a:b].ne(-100).any():
                alone = model(input_ids=batch["input_ids"][r : r + 1, a:b]).logits[0]
                torch.testing.assert_close(packed[r, a:b], alone, atol=1e-5, rtol=1e-5)


def test_lora_sft_saves_reloads_and_merges_with_equal_logits(task, tmp_path):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from yunshan.training.models import load_model

    root, _ = task
    r = recipe(root, tmp_path / "lora")
    r.lora.enabled, r.lora.r, r.lora.alpha, r.lora.dropout = True, 4, 8, 0.0
    r.lora.target_modules = ["q_proj", "v_proj", "gate_proj", "up_proj", "down_proj"]
    r.training.max_steps = 8
    run_sft(r)
    ids = torch.randint(3, 200, (2, 12))
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "lora").eval()
    base = load_model(r.model, vocab_size=merged.config.vocab_size)  # the same initial weights (init_seed)
    reloaded = PeftModel.from_pretrained(base, tmp_path / "lora/adapter").eval()
    torch.testing.assert_close(reloaded(input_ids=ids).logits, merged(input_ids=ids).logits, atol=1e-5, rtol=1e-5)
    untouched = load_model(r.model, vocab_size=merged.config.vocab_size).eval()
    assert not torch.allclose(untouched(input_ids=ids).logits, merged(input_ids=ids).logits)  # LoRA changed it


def test_bundled_instruction_sets_in_all_five_formats(tmp_path):
    from transformers import AutoTokenizer

    from yunshan.data.chat import ensure_chat_template

    tok_dir = tmp_path / "tok"
    texts = [l for f in SAMPLES.glob("*.jsonl") for l in f.read_text(encoding="utf-8").splitlines()[:200]]
    train_tokenizer(tok_dir, texts, vocab_size=2000)
    tok = AutoTokenizer.from_pretrained(tok_dir)
    ensure_chat_template(tok)
    r = load_recipe(SftArgs, data={
        "model": {"preset": "tiny"}, "tokenizer": {"path": str(tok_dir)},
        "data": {"max_length": 1024, "packing": True, "sources": [
            {"name": "general", "path": str(SAMPLES / "general_alpaca.jsonl"), "format": "alpaca"},
            {"name": "legal", "path": str(SAMPLES / "legal_messages.jsonl"), "format": "messages"},
            {"name": "finance", "path": str(SAMPLES / "finance_sharegpt.jsonl"), "format": "sharegpt"},
            {"name": "finance_exam", "path": str(SAMPLES / "finance_exam"), "format": "ceval"},
            {"name": "judicial_exam", "path": str(SAMPLES / "jecqa"), "format": "jecqa"}]}})
    rows, _, report = build_sft_data(r, tok)
    assert report.kind == "sft"
    for name, source in report.sources.items():
        assert source.read > 0 and source.samples > 0, name
        assert not any(k.startswith("bad:") for k in source.dropped), (name, source.dropped)
    assert report.real_tokens / (len(rows) * 1024) >= 0.95  # non-padding share with packing


def test_bad_record_in_a_recipe_fails_with_its_location(task, tmp_path, capsys):
    import yaml

    root, _ = task
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"instruction": "q", "output": "a"}\n{"instruction": "q", "output": ""}\n')
    data = {"model": {"preset": "tiny"}, "tokenizer": {"path": str(root / "tok")},
            "data": {"sources": [{"name": "s", "path": str(bad), "format": "alpaca"}]},
            "training": {"output_dir": str(tmp_path / "o")}}
    (tmp_path / "r.yaml").write_text(yaml.safe_dump(data))
    from yunshan.cli import main  # the command line's own main, in this process (an interpreter start saved)

    capsys.readouterr()
    assert main(["sft", "--config", str(tmp_path / "r.yaml")]) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and f"{bad}:2: field 'output': empty_assistant" in err


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_resume_after_a_crash_equals_an_uninterrupted_run(task, tmp_path, precision):
    import shutil

    from safetensors.torch import load_file

    root, _ = task
    full = recipe(root, tmp_path / "a")
    full.training.max_steps, full.training.save_steps, full.training.precision = 8, 4, precision
    run_sft(full)
    crashed = recipe(root, tmp_path / "b")
    crashed.training.max_steps, crashed.training.save_steps, crashed.training.precision = 8, 4, precision
    run_sft(crashed)
    # As if the process had died after checkpoint 4: later checkpoints and the final outputs are gone.
    shutil.rmtree(tmp_path / "b/checkpoints/checkpoint-8")
    (tmp_path / "b/model.safetensors").unlink()
    assert (tmp_path / "b/checkpoints/checkpoint-4/COMPLETE").is_file()
    run_sft(crashed)  # resume: auto
    a, b = load_file(tmp_path / "a/model.safetensors"), load_file(tmp_path / "b/model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_neftune_noise_changes_training_only(task, tmp_path):
    from safetensors.torch import load_file

    root, _ = task
    plain, noisy = recipe(root, tmp_path / "plain"), recipe(root, tmp_path / "noisy")
    for r in (plain, noisy):
        r.training.max_steps = 3
    noisy.training.neftune_noise_alpha = 5.0
    run_sft(plain)
    run_sft(noisy)
    a, b = load_file(tmp_path / "plain/model.safetensors"), load_file(tmp_path / "noisy/model.safetensors")
    assert any(not torch.equal(a[k], b[k]) for k in a)  # the noise was applied while training
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tmp_path / "noisy").eval()
    ids = torch.randint(3, 100, (1, 8))
    assert torch.equal(model(ids).logits, model(ids).logits)  # no noise hook left on the saved model


@pytest.mark.multiprocess
@pytest.mark.distributed  # make test runs one launch per engine (test_engines.py)
def test_two_processes_match_one_with_the_same_global_batch(task, tmp_path):
    """DDP (2 gloo processes, accelerate launch) with half the per-device batch follows the single process's loss
    curve: same packed rows, same order, loss averaged over the global batch's target tokens, per-source losses
    summed over both processes."""
    import yaml

    root, _ = task
    data = recipe_data(root, tmp_path / "one")
    data["training"].update(max_steps=12, logging_steps=4, save_steps=100)
    (tmp_path / "one.yaml").write_text(yaml.safe_dump(data))
    data["training"].update(output_dir=str(tmp_path / "two"), per_device_batch_size=8)
    (tmp_path / "two.yaml").write_text(yaml.safe_dump(data))
    subprocess.run([sys.executable, "-m", "yunshan.cli", "sft", "--config", str(tmp_path / "one.yaml")],
                   check=True, capture_output=True)
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--config_file",
              str(Path(__file__).resolve().parents[2] / "recipes/accelerate/ddp_cpu.yaml"),
              "--main_process_port", str(free_port()),
              "-m", "yunshan.cli", "sft", "--config", str(tmp_path / "two.yaml")]
    result = subprocess.run(launch, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]

    def curve(run):
        rows = [json.loads(l) for l in (tmp_path / run / "log.jsonl").read_text().splitlines()]
        return [r for r in rows if r.get("event") == "train" and "loss" in r]

    one, two = curve("one"), curve("two")
    assert [r["step"] for r in one] == [r["step"] for r in two] == [4, 8, 12]
    for a, b in zip(one, two):
        for key in ("loss", "loss_alpaca", "loss_chat"):
            assert abs(a[key] - b[key]) <= 2e-4 * max(1.0, abs(a[key])), (key, a, b)  # per-source: 4 decimals


def test_sft_after_cpt_keeps_the_trained_rows_of_the_extension(task, tmp_path):
    """SFT from a model that continual pretraining already extended, with tokenizer.base_path still naming the
    original base (as `yunshan run` passed it): the model's trained new rows are kept as they are, not reset to
    their subword means and not trained whole again (the bug that undid CPT on SmolLM2: general bits/char +17%)."""
    from safetensors.torch import load_file
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from yunshan.tokenizer import ExtendArgs, extend_tokenizer, resize_embeddings

    root, _ = task
    base, cpt = tmp_path / "base", tmp_path / "cpt"
    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(vocab_size=300, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
                     ).save_pretrained(base)
    AutoTokenizer.from_pretrained(root / "tok").save_pretrained(base)
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(" ".join(FIN + LAW) for _ in range(50)))
    extend_tokenizer(ExtendArgs(base=str(base), corpus=[str(corpus)], new_tokens=12, out=str(tmp_path / "tok_ext")),
                     log=lambda *_: None)
    # The "cpt" folder: the grown model whose new rows then trained (here: moved away from their start).
    model = LlamaForCausalLM.from_pretrained(base)
    resize_embeddings(model, str(base), str(tmp_path / "tok_ext"))
    n_base, n_new = 300, len(AutoTokenizer.from_pretrained(tmp_path / "tok_ext"))
    assert n_new > n_base
    with torch.no_grad():
        model.get_input_embeddings().weight[n_base:] += 0.5
    model.save_pretrained(cpt)
    AutoTokenizer.from_pretrained(tmp_path / "tok_ext").save_pretrained(cpt)
    trained = load_file(cpt / "model.safetensors")["model.embed_tokens.weight"]

    data = recipe_data(root, tmp_path / "sft")
    data["model"] = {"name_or_path": str(cpt)}
    data["tokenizer"] = {"path": str(cpt), "base_path": str(base)}
    data["training"]["max_steps"] = 3
    data["lora"] = {"enabled": True, "r": 4, "alpha": 8, "dropout": 0.0}  # new_token_training: auto
    run_sft(load_recipe(SftArgs, data=data))
    config = json.loads((tmp_path / "sft/adapter/adapter_config.json").read_text())
    assert not config.get("modules_to_save") and not config.get("trainable_token_indices")
    after = load_file(tmp_path / "sft/model.safetensors")["model.embed_tokens.weight"]
    assert after.shape == trained.shape
    assert torch.equal(after, trained)  # every row, the extension's included, exactly as cpt left it


def test_a_finished_run_is_left_alone_and_a_kill_before_the_final_save_finishes_exactly(task, tmp_path):
    """Rerunning a finished SFT run takes no step and rewrites nothing; a run killed after its last checkpoint but
    before the final save ends with exactly the weights of an uninterrupted one."""
    from safetensors.torch import load_file

    from yunshan.training.checkpoints import latest_complete_checkpoint

    root, _ = task
    recipes = {name: recipe(root, tmp_path / name) for name in ("a", "b")}
    for r in recipes.values():
        r.training.max_steps, r.training.save_steps = 4, 2
    run_sft(recipes["a"])
    run_sft(recipes["b"])
    b = tmp_path / "b"
    before = {name: (b / name).read_bytes() for name in ("model.safetensors", "data_report.json", "log.jsonl")}
    summary = run_sft(recipes["b"])
    assert summary["steps"] == 4 and summary.get("already_finished")
    assert {name: (b / name).read_bytes() for name in before} == before
    for name in ("model.safetensors", "data_report.json"):
        (b / name).unlink()  # as if killed between the final checkpoint and the final save
    assert run_sft(recipes["b"])["steps"] == 4
    assert latest_complete_checkpoint(b / "checkpoints").name == "checkpoint-4"
    wa, wb = load_file(tmp_path / "a/model.safetensors"), load_file(b / "model.safetensors")
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    assert json.loads((b / "data_report.json").read_text())["steps"] == 4


def test_a_resume_refuses_a_changed_recipe(task, tmp_path):
    """A resumed SFT run with another max_length or learning rate stops before training, naming both changes."""
    import shutil

    from yunshan.training.resume import ResumeError

    root, _ = task
    first = recipe(root, tmp_path / "run")
    first.training.max_steps, first.training.save_steps = 4, 2
    run_sft(first)
    shutil.rmtree(tmp_path / "run/checkpoints/checkpoint-4")
    (tmp_path / "run/data_report.json").unlink()
    again = recipe(root, tmp_path / "run", max_length=48)
    again.training.max_steps, again.training.save_steps, again.training.learning_rate = 4, 2, 1e-3
    with pytest.raises(ResumeError, match=r"data.max_length 64 -> 48, training.learning_rate 0.003 -> 0.001"):
        run_sft(again)
