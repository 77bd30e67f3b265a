"""`yunshan cpt` end to end on tiny models: outputs, token shares, forgetting monitor, exact resume after SIGKILL,
crash-safe checkpoints, two processes equal one, bad records, LoRA, any HF causal LM, flat memory."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
import yaml
from safetensors.torch import load_file

from fixtures import free_port, three_source_corpora, tied_llama_extended, train_tokenizer
from yunshan.arguments.recipe import RecipeError, load_recipe
from yunshan.training.cpt import CptArgs
from yunshan.training.checkpoints import latest_complete_checkpoint, mark_complete, remove_incomplete_after, rotate
from yunshan.training.cpt import run_cpt

ROOT = Path(__file__).resolve().parents[2]
YUNSHAN = [sys.executable, "-m", "yunshan.cli"]


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    """`yunshan ARGV` through the command line's own `main`, in this process (an interpreter start saved): the exit
    code, stdout and stderr."""
    from yunshan.cli import main

    capsys.readouterr()
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("cpt")
    files = three_source_corpora(root / "corpora")
    tokenizer = train_tokenizer(root / "tok")
    heldout = root / "heldout.txt"
    heldout.write_text("\n\n".join(json.loads(l)["text"] for l in open(files["mid"]).readlines()[-10:]))
    return root, files, tokenizer, heldout


def recipe_dict(setup, out, **training):
    root, files, _, heldout = setup
    return {
        "model": {"preset": "tiny", "config_overrides": {"hidden_size": 32, "intermediate_size": 64,
                                                         "num_hidden_layers": 2, "aug_reduction": 4}},
        "tokenizer": {"path": str(root / "tok")},
        "data": {"seq_len": 64, "block_size": 64, "sources": [
            {"name": "short", "path": str(files["short"]), "weight": 0.25},
            {"name": "mid", "path": str(files["mid"]), "weight": 0.25},
            {"name": "long", "path": str(files["long"]), "weight": 0.5}]},
        "training": {"output_dir": str(out), "max_steps": 24, "per_device_batch_size": 4, "learning_rate": 3e-3,
                     "save_steps": 8, "logging_steps": 4, "warmup_steps": 2, **training},
        "monitor": {"every_steps": 8, "general": [str(heldout)], "domain": [str(heldout)], "max_chars": 3000},
    }


def write_recipe(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    return path


def test_end_to_end_outputs_token_shares_and_monitor(setup, tmp_path):
    out = tmp_path / "run"
    summary = run_cpt(load_recipe(CptArgs, data=recipe_dict(setup, out)))
    for name in ("config.json", "model.safetensors", "tokenizer.json", "recipe.yaml", "data_report.json",
                 "log.jsonl", "curves.png", "modeling_pangu_pi.py"):
        assert (out / name).is_file(), name
    report = json.loads((out / "data_report.json").read_text())
    assert report["tokens_trained"] == 24 * 4 * 64
    for name, weight in (("short", 0.25), ("mid", 0.25), ("long", 0.5)):
        assert abs(report["sources"][name]["token_share"] - weight) < 0.01
    assert sum(s["tokens_trained"] for s in report["sources"].values()) == report["tokens_trained"]
    log = [json.loads(l) for l in (out / "log.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in log if r.get("event") == "train" and "loss" in r]
    assert losses[-1] < losses[0]
    bpc = [r for r in log if r.get("event") == "bpc"]
    assert [r["step"] for r in bpc] == [0, 8, 16, 24]
    assert bpc[-1]["bpc_general"] < bpc[0]["bpc_general"]
    train_rows = [r for r in log if r.get("event") == "train"]
    assert all("tokens_per_s" in r and "tokens_by_source" in r for r in train_rows[1:])
    # The resolved recipe reloads to the same recipe.
    again = load_recipe(CptArgs, out / "recipe.yaml")
    assert again == load_recipe(CptArgs, data=recipe_dict(setup, out))
    assert summary["steps"] == 24


def test_a_run_folder_and_its_checkpoints_have_the_users_umask(setup, tmp_path):
    """safetensors writes its files 0600: the model and every checkpoint's weights get the mode of every other file
    the run writes (the user's umask)."""
    from fixtures import file_modes, umask

    out = tmp_path / "run"
    data = recipe_dict(setup, out, max_steps=2, save_steps=1, save_total_limit=2)
    data["monitor"]["every_steps"] = 0
    with umask(0o027):
        run_cpt(load_recipe(CptArgs, data=data))
    modes = file_modes(out)
    assert {"model.safetensors", "checkpoints/checkpoint-2/model.safetensors"} <= set(modes), sorted(modes)
    assert set(modes.values()) == {0o640}, {name: oct(mode) for name, mode in modes.items() if mode != 0o640}


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_sigkill_then_resume_auto_equals_an_uninterrupted_run(setup, tmp_path, precision):
    """Bit-identical weights after SIGKILL + resume, in float32 and under bf16 autocast (what `auto` picks on
    AMX / AVX-512 BF16 CPUs): the resumed run replays exactly the same operations."""
    data = recipe_dict(setup, tmp_path / "a", max_steps=18, save_steps=6, precision=precision)
    data["monitor"] = {"every_steps": 0}
    recipe_a = write_recipe(tmp_path / "a.yaml", data)
    data["training"]["output_dir"] = str(tmp_path / "b")
    recipe_b = write_recipe(tmp_path / "b.yaml", data)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    subprocess.run(YUNSHAN + ["cpt", "--config", str(recipe_a)], check=True, env=env, capture_output=True)
    proc = subprocess.Popen(YUNSHAN + ["cpt", "--config", str(recipe_b)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while not (tmp_path / "b/checkpoints/checkpoint-6/COMPLETE").exists():  # then 12 steps to go: killed mid-run
        assert proc.poll() is None and time.time() < deadline, "run b ended before its checkpoint"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (tmp_path / "b/model.safetensors").exists()  # it really died mid-run
    resumed = subprocess.run(YUNSHAN + ["cpt", "--config", str(recipe_b)], env=env, capture_output=True, text=True)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "resuming from" in resumed.stdout
    a, b = load_file(tmp_path / "a/model.safetensors"), load_file(tmp_path / "b/model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    ra = json.loads((tmp_path / "a/data_report.json").read_text())
    rb = json.loads((tmp_path / "b/data_report.json").read_text())
    assert {n: s["tokens_trained"] for n, s in ra["sources"].items()} == {
        n: s["tokens_trained"] for n, s in rb["sources"].items()}


def test_a_checkpoint_being_written_never_replaces_the_last_good_one(tmp_path):
    for step in (10, 20):
        (tmp_path / f"checkpoint-{step}").mkdir()
        mark_complete(tmp_path / f"checkpoint-{step}", step)
    (tmp_path / "checkpoint-30").mkdir()  # died while writing: no COMPLETE marker
    (tmp_path / "checkpoint-30" / "model.safetensors").write_bytes(b"partial")
    assert latest_complete_checkpoint(tmp_path).name == "checkpoint-20"
    rotate(tmp_path, keep=1)  # rotation never deletes the newest complete one for an incomplete newer one
    assert latest_complete_checkpoint(tmp_path).name == "checkpoint-20"
    assert not (tmp_path / "checkpoint-10").exists() and (tmp_path / "checkpoint-30").exists()
    assert remove_incomplete_after(tmp_path, 20) == [tmp_path / "checkpoint-30"]


@pytest.mark.multiprocess
@pytest.mark.distributed  # make test runs DDP in test_engines.py::test_cpt_follows_one_process
@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_two_processes_match_one_with_the_same_global_batch(setup, tmp_path, precision):
    # bf16 autocast: each process multiplies half the batch, and oneDNN may pick another kernel (another rounding
    # order) for the smaller shape; bf16 keeps 8 mantissa bits (unit roundoff 2**-8 = 3.9e-3), so the per-step
    # losses agree to a few 1e-3, not to float32's 1e-4.
    tolerance = 1e-4 if precision == "float32" else 5e-3
    data = recipe_dict(setup, tmp_path / "one", max_steps=12, save_steps=100, precision=precision)
    data["monitor"] = {"every_steps": 0}
    one = write_recipe(tmp_path / "one.yaml", data)
    data["training"].update(output_dir=str(tmp_path / "two"), per_device_batch_size=2)
    two = write_recipe(tmp_path / "two.yaml", data)
    subprocess.run(YUNSHAN + ["cpt", "--config", str(one)], check=True, capture_output=True)
    launch = [sys.executable, "-m", "accelerate.commands.launch", "--config_file",
              str(ROOT / "recipes/accelerate/ddp_cpu.yaml"), "--main_process_port", str(free_port()),
              "-m", "yunshan.cli", "cpt", "--config", str(two)]
    result = subprocess.run(launch, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]

    def losses(run):
        rows = [json.loads(l) for l in (tmp_path / run / "log.jsonl").read_text().splitlines()]
        return [(r["step"], r["loss"]) for r in rows if r.get("event") == "train" and "loss" in r]

    l1, l2 = losses("one"), losses("two")
    for run in ("one", "two"):
        assert json.loads((tmp_path / run / "data_report.json").read_text())["precision"]["value"] == precision
    assert [s for s, _ in l1] == [s for s, _ in l2] == [4, 8, 12]
    for (_, a), (_, b) in zip(l1, l2):
        assert abs(a - b) < tolerance * max(1.0, abs(a))


def test_bad_records_fail_with_location_or_are_counted(setup, tmp_path, capsys):
    root, files, _, _ = setup
    bad = tmp_path / "bad.jsonl"
    bad.write_text(open(files["mid"]).read()[:2000].rsplit("\n", 1)[0] + "\n" + '{"txt": "no field"}\n'
                   + '{"text": ""}\n' + open(files["mid"]).read())
    data = recipe_dict(setup, tmp_path / "fail", max_steps=2)
    data["data"]["sources"][1]["path"] = str(bad)
    data["monitor"] = {"every_steps": 0}
    recipe = write_recipe(tmp_path / "fail.yaml", data)
    code, _, err = cli(capsys, "cpt", "--config", str(recipe))
    assert code == 1 and "Traceback" not in err
    assert f"{bad}:" in err and "missing_field" in err and "'text'" in err
    data["data"]["on_bad_record"] = "skip"
    data["training"]["output_dir"] = str(tmp_path / "skip")
    run_cpt(load_recipe(CptArgs, data=data))
    dropped = json.loads((tmp_path / "skip/data_report.json").read_text())["sources"]["mid"]["dropped"]
    assert dropped == {"bad:empty_text": 1, "bad:missing_field": 1}


def test_any_hf_causal_lm_by_path_with_lora(setup, tmp_path):
    from transformers import LlamaConfig, LlamaForCausalLM

    root, _, tokenizer, _ = setup
    llama_dir = tmp_path / "llama"
    LlamaForCausalLM(LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                                 num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2)).save_pretrained(llama_dir)
    tokenizer.save_pretrained(llama_dir)
    data = recipe_dict(setup, tmp_path / "out", max_steps=6)
    data["model"] = {"name_or_path": str(llama_dir)}
    data["tokenizer"] = {}
    data["lora"] = {"enabled": True, "r": 4, "alpha": 8, "dropout": 0.0}
    data["monitor"]["every_steps"] = 0
    summary = run_cpt(load_recipe(CptArgs, data=data))
    assert (tmp_path / "out/adapter/adapter_config.json").is_file()
    merged = load_file(tmp_path / "out/model.safetensors")
    base = load_file(llama_dir / "model.safetensors")
    changed = [k for k in base if not torch.equal(base[k], merged[k])]
    assert changed and all("proj" in k for k in changed)  # LoRA moved only the adapted projections
    assert torch.isfinite(torch.tensor(summary["train_loss"]))


def test_recipe_errors_name_file_line_and_valid_keys(setup, tmp_path):
    data = recipe_dict(setup, tmp_path / "x")
    data["training"]["learnig_rate"] = 1e-4
    path = write_recipe(tmp_path / "typo.yaml", data)
    with pytest.raises(RecipeError) as err:
        load_recipe(CptArgs, path)
    line = next(i for i, l in enumerate(path.read_text().splitlines(), 1) if "learnig_rate" in l)
    assert f"typo.yaml:{line}: training.learnig_rate: unknown key; valid keys here:" in str(err.value)
    assert "learning_rate" in str(err.value)
    data["training"].pop("learnig_rate")
    data["training"]["max_steps"] = "many"
    with pytest.raises(RecipeError, match=r"training.max_steps: expected an integer, got 'many'"):
        load_recipe(CptArgs, write_recipe(tmp_path / "t.yaml", data))
    data["training"]["max_steps"] = 5
    recipe = load_recipe(CptArgs, write_recipe(tmp_path / "ok.yaml", data),
                         ["data.sources.long.weight=2", "training.learning_rate=1e-4", "data.sources.0.weight=0.5"])
    assert recipe.data.sources[2].weight == 2.0 and recipe.data.sources[0].weight == 0.5
    assert recipe.training.learning_rate == 1e-4
    with pytest.raises(RecipeError, match="no item named 'legal'; names: short, mid, long"):
        load_recipe(CptArgs, tmp_path / "ok.yaml", ["data.sources.legal.weight=1"])
    with pytest.raises(RecipeError, match="command-line override: data.seq_len: expected an integer"):
        load_recipe(CptArgs, tmp_path / "ok.yaml", ["data.seq_len=long"])


MEMORY_SCRIPT = """
import sys
from yunshan.data.mixing import SourceStream, TokenBudgetMixer
from yunshan.data.sources import SourceArgs


def status(field):
    for line in open("/proc/self/status"):
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024


tok = lambda texts: [[len(w) for w in t.split()] + [0] for t in texts]
streams = [SourceStream(SourceArgs(name=n, path=sys.argv[1] + f"/{n}.jsonl", on_exhausted="stop"), tok, seed=0,
                        block_size=64) for n in ("short", "mid", "long")]
open("/proc/self/clear_refs", "w").write("5")  # reset the high-water mark the imports left
before = status("VmRSS")
n = sum(1 for _ in TokenBudgetMixer(streams, seq_len=256))
print(n, before, status("VmHWM"))
"""


def test_a_ten_times_larger_corpus_does_not_raise_peak_memory(tmp_path):
    """Peak resident memory while streaming a corpus, and its growth over the memory before streaming, stay flat
    when the corpus is ten times larger (read block by block: 64 documents per source here, 1024 by default)."""
    runs = {}
    for scale in (1, 10):
        files = three_source_corpora(tmp_path / str(scale), scale=4 * scale)
        size = sum(p.stat().st_size for p in files.values())
        out = subprocess.run([sys.executable, "-c", MEMORY_SCRIPT, str(tmp_path / str(scale))],
                             capture_output=True, text=True, check=True).stdout.split()
        sequences, before, peak = map(int, out)
        runs[scale] = {"sequences": sequences, "peak": peak, "growth": peak - before, "corpus": size}
    assert runs[10]["sequences"] > 8 * runs[1]["sequences"]  # it really streamed through ten times the data
    assert runs[10]["peak"] <= 1.10 * runs[1]["peak"], runs
    # Holding the corpus (or its tokens) in memory would grow by more than the ~10 MB file itself.
    assert runs[10]["growth"] <= 0.25 * runs[10]["corpus"], runs


@pytest.fixture(scope="module")
def extended(setup, tmp_path_factory):
    """A base model folder (PanGu-π + its tokenizer) and a tokenizer extended on the domain corpus."""
    from yunshan.models.pangu_pi import PanguPiConfig, PanguPiForCausalLM
    from yunshan.tokenizer import ExtendArgs, extend_tokenizer

    root, files, tokenizer, _ = setup
    tmp = tmp_path_factory.mktemp("extended")
    base = tmp / "base"
    PanguPiForCausalLM(PanguPiConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                                     num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                     aug_reduction=4)).save_pretrained(base)
    tokenizer.save_pretrained(base)
    extend_tokenizer(ExtendArgs(base=str(base), corpus=[str(files["long"]), str(files["mid"])], new_tokens=40,
                                out=str(tmp / "tok_ext")), log=lambda *_: None)
    return base, tmp / "tok_ext"


def test_extended_tokenizer_grows_embeddings_with_subword_means(setup, extended, tmp_path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base, tok_ext = extended
    base_tok, new_tok = AutoTokenizer.from_pretrained(base), AutoTokenizer.from_pretrained(tok_ext)
    data = recipe_dict(setup, tmp_path / "run", max_steps=1, learning_rate=0.0, warmup_steps=0, weight_decay=0.0)
    data["model"] = {"name_or_path": str(base)}
    data["tokenizer"] = {"path": str(tok_ext)}
    data["monitor"]["every_steps"] = 0
    data["warmup"] = {"enabled": False}  # the rows as grown, untouched by the fit
    run_cpt(load_recipe(CptArgs, data=data))
    grown = AutoModelForCausalLM.from_pretrained(tmp_path / "run")
    original = AutoModelForCausalLM.from_pretrained(base)
    assert grown.get_input_embeddings().weight.shape[0] == len(new_tok) > len(base_tok)
    old = original.get_input_embeddings().weight
    new = grown.get_input_embeddings().weight
    assert torch.equal(new[: len(base_tok)], old)  # lr 0: base rows untouched
    for token_id in range(len(base_tok), len(new_tok)):
        text = new_tok.decode([token_id])
        pieces = base_tok(text, add_special_tokens=False)["input_ids"]
        torch.testing.assert_close(new[token_id], old[pieces].mean(0))


def test_the_dry_run_gives_the_budget_per_new_token_before_any_work(setup, extended, tmp_path, capsys):
    """`yunshan cpt --dry-run` with an extended tokenizer: the planned training tokens per new token, and the warning
    the run would print (in the same words) when they are too few, on stderr beside the JSON plan."""
    from transformers import AutoTokenizer

    from yunshan.tokenizer.extend import budget_check

    base, tok_ext = extended
    data = recipe_dict(setup, tmp_path / "run")
    data["model"] = {"name_or_path": str(base)}
    data["tokenizer"] = {"path": str(tok_ext)}
    code = subprocess.run(YUNSHAN + ["cpt", "--config", str(write_recipe(tmp_path / "r.yaml", data)), "--dry-run"],
                          capture_output=True, text=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    assert code.returncode == 0, code.stderr[-2000:]
    plan = json.loads(code.stdout)
    new = len(AutoTokenizer.from_pretrained(tok_ext)) - len(AutoTokenizer.from_pretrained(base))
    want = budget_check(24 * 4 * 64, new)  # max_steps x batch x seq_len
    assert plan["budget"] == want and want["warning"] and f"warning: {want['warning']}" in code.stderr.splitlines()
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("mode, expect", [("indices", "trainable_token_indices"), ("rows", "modules_to_save")])
def test_lora_trains_the_new_rows_of_an_extended_vocabulary(setup, extended, tmp_path, mode, expect):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    base, tok_ext = extended
    n_base = len(AutoTokenizer.from_pretrained(base))
    data = recipe_dict(setup, tmp_path / "run", max_steps=4)
    data["model"] = {"name_or_path": str(base)}
    data["tokenizer"] = {"path": str(tok_ext)}
    data["lora"] = {"enabled": True, "r": 4, "alpha": 8, "dropout": 0.0, "new_token_training": mode}
    data["monitor"]["every_steps"] = 0
    data["warmup"] = {"steps": 2, "fit_sequences": 4}
    run_cpt(load_recipe(CptArgs, data=data))
    config = json.loads((tmp_path / "run/adapter/adapter_config.json").read_text())
    assert config[expect]
    grown = AutoModelForCausalLM.from_pretrained(tmp_path / "run")
    initial = load_file(base / "model.safetensors")["model.embed_tokens.weight"]
    emb = grown.get_input_embeddings().weight
    assert torch.equal(emb[:n_base], initial) if mode == "indices" else not torch.equal(emb[:n_base], initial)
    # The new rows moved from their subword-mean start during training.
    from yunshan.tokenizer import resize_embeddings

    fresh = AutoModelForCausalLM.from_pretrained(base)
    resize_embeddings(fresh, str(base), str(tok_ext))
    assert not torch.equal(emb[n_base:], fresh.get_input_embeddings().weight[n_base:])


@pytest.fixture(scope="module")
def tied_llama(setup, tmp_path_factory):
    """A tied Llama (as SmolLM2, Qwen2.5-0.5B, Gemma) with its tokenizer, and a tokenizer extended on the corpus."""
    root, files, tokenizer, _ = setup
    return tied_llama_extended(tmp_path_factory.mktemp("tied"), tokenizer, [files["long"], files["mid"]])


def _fresh_grown(base, tok_ext):
    from transformers import AutoModelForCausalLM

    from yunshan.tokenizer import resize_embeddings

    fresh = AutoModelForCausalLM.from_pretrained(base)
    resize_embeddings(fresh, str(base), str(tok_ext))
    return fresh.get_input_embeddings().weight.detach()


@pytest.mark.parametrize("mode", ["full", "rows", "indices", "none"])
@pytest.mark.parametrize("warmup", [False, True])
def test_a_tied_model_stays_tied_and_trains_its_new_rows_on_both_sides(setup, tied_llama, tmp_path, mode, warmup):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from yunshan.hub.export import export_model

    base, tok_ext = tied_llama
    n_base, n_new = len(AutoTokenizer.from_pretrained(base)), len(AutoTokenizer.from_pretrained(tok_ext))
    data = recipe_dict(setup, tmp_path / "run", max_steps=4, save_steps=100)
    data["model"] = {"name_or_path": str(base)}
    data["tokenizer"] = {"path": str(tok_ext)}
    data["monitor"]["every_steps"] = 0
    data["warmup"] = {"enabled": str(warmup).lower() if mode != "none" else "auto", "steps": 3, "fit_sequences": 8}
    if mode != "full":
        data["lora"] = {"enabled": True, "r": 4, "alpha": 8, "dropout": 0.0, "new_token_training": mode}
    summary = run_cpt(load_recipe(CptArgs, data=data))
    run = tmp_path / "run"
    config = json.loads((run / "config.json").read_text())
    assert config["tie_word_embeddings"] is True
    weights = load_file(run / "model.safetensors")
    assert "lm_head.weight" not in weights  # one matrix in the file
    model = AutoModelForCausalLM.from_pretrained(run)
    assert model.lm_head.weight is model.model.embed_tokens.weight
    rows = weights["model.embed_tokens.weight"]
    assert rows.shape[0] == n_new
    start = _fresh_grown(base, tok_ext)
    moved = not torch.equal(rows[n_base:], start[n_base:])
    assert moved == (mode != "none"), "the new rows (input and output: one matrix) must train unless mode is none"
    report = json.loads((run / "data_report.json").read_text())
    if warmup and mode != "none":
        # training.max_steps is the whole budget: 3 warm-up steps, then 1 of continual pretraining
        assert report["embedding_warmup"]["steps"] == 3 and summary["steps"] == 4
    else:
        assert "embedding_warmup" not in report and summary["steps"] == 4
    out = tmp_path / "export"
    export_model(run, out)
    exported = load_file(out / "model.safetensors")
    assert "lm_head.weight" not in exported and json.loads((out / "config.json").read_text())["tie_word_embeddings"]


def test_warmup_trains_only_the_new_rows_then_everything(setup, tied_llama, tmp_path):
    """During the warm-up steps only the new rows change (base rows and every other weight bit-identical); then the
    continual pretraining moves the rest. The output-row fit lowers the loss on the sequences it used."""
    base, tok_ext = tied_llama
    from transformers import AutoTokenizer

    n_base = len(AutoTokenizer.from_pretrained(base))
    data = recipe_dict(setup, tmp_path / "warm", max_steps=7, save_steps=3, weight_decay=0.1, save_total_limit=5)
    data["model"] = {"name_or_path": str(base)}
    data["tokenizer"] = {"path": str(tok_ext)}
    data["monitor"]["every_steps"] = 0
    data["warmup"] = {"steps": 3, "fit_sequences": 8, "until_base_bpc": False}
    run_cpt(load_recipe(CptArgs, data=data))
    ckpt = load_file(tmp_path / "warm/checkpoints/checkpoint-3/model.safetensors")
    original = load_file(base / "model.safetensors")
    start = _fresh_grown(base, tok_ext)
    emb = ckpt["model.embed_tokens.weight"]
    assert torch.equal(emb[:n_base], original["model.embed_tokens.weight"])  # base rows: masked, not decayed
    assert not torch.equal(emb[n_base:], start[n_base:])
    for name, value in original.items():
        if name != "model.embed_tokens.weight":
            assert torch.equal(ckpt[name], value), name
    final = load_file(tmp_path / "warm/model.safetensors")
    assert not torch.equal(final["model.layers.0.self_attn.q_proj.weight"],
                           original["model.layers.0.self_attn.q_proj.weight"])
    assert not torch.equal(final["model.embed_tokens.weight"][:n_base], original["model.embed_tokens.weight"])
    report = json.loads((tmp_path / "warm/data_report.json").read_text())
    fit = report["embedding_warmup"]["fit"]
    assert len(fit["rounds"]) == 3  # tied: three rounds
    assert all(r["loss_after"] < r["loss_before"] for r in fit["rounds"])
    # checked on the 16 next sequences of the stream (warmup.validation_sequences), each round lowered it
    assert fit["validation"]["sequences"] == 16 and fit["validation"]["kept_round"] == 3
    assert fit["validation"]["after"] == fit["rounds"][-1]["validation_loss"] < fit["validation"]["before"]
    log = [json.loads(l) for l in (tmp_path / "warm/log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log if r.get("event") == "warmup_end"] == [3]


def test_token_distillation_moves_only_the_new_input_rows_and_lowers_its_loss(setup, tied_llama):
    """aligned_pairs: every extended token ends where a base token ends (a continued BPE), and the texts up to two
    aligned positions are the same; a tokenizer without character offsets is refused. distill_new_rows: its first
    loss is the squared error computed by hand through the first decoder layer and the final norm; the loss falls;
    only the new rows move; the model is given back whole (its layers, requires_grad)."""
    import copy

    from transformers import AutoModelForCausalLM, AutoTokenizer

    from yunshan.training.embedding_warmup import aligned_pairs, distill_new_rows
    from yunshan.training.models import grow_embeddings

    root, files, _, _ = setup
    base, tok_ext = tied_llama
    base_tok, ext_tok = AutoTokenizer.from_pretrained(base), AutoTokenizer.from_pretrained(tok_ext)
    model = AutoModelForCausalLM.from_pretrained(base)
    new_ids = grow_embeddings(model, base_tok, ext_tok)
    texts = [t for t in (json.loads(line)["text"] for line in open(files["mid"]))
             if len(ext_tok(t)["input_ids"]) < len(base_tok(t)["input_ids"])][:3]  # texts with new tokens
    sequences = [ext_tok(texts[0])["input_ids"] + [ext_tok.eos_token_id] + ext_tok(texts[1])["input_ids"],
                 ext_tok(texts[2])["input_ids"]]
    pairs = aligned_pairs(sequences, ext_tok, base_tok)
    assert len(pairs) == 3  # split at the end-of-text token
    for ext_ids, base_ids, js, is_ in pairs:
        assert js == list(range(len(ext_ids))) and len(base_ids) > len(ext_ids)
        assert any(i in new_ids for i in ext_ids)
        for j, i in zip(js[::7], is_[::7]):
            assert ext_tok.decode(ext_ids[:j + 1]) == base_tok.decode(base_ids[:i + 1])
    with pytest.raises(ValueError, match="base tokenizer .* not a fast"):
        aligned_pairs(sequences, ext_tok, type("SlowTokenizer", (), {"is_fast": False})())
    ext_ids, base_ids, js, is_ = pairs[0]
    one_layer = copy.deepcopy(model)
    one_layer.model.layers = one_layer.model.layers[:1]
    with torch.no_grad():
        target = one_layer.model(input_ids=torch.tensor([base_ids])).last_hidden_state[0][is_]
        states = one_layer.model(input_ids=torch.tensor([ext_ids])).last_hidden_state[0][js]
    by_hand = ((states - target) ** 2).sum(-1).mean().item()
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    report = distill_new_rows(model, new_ids, pairs[:1], steps=30, lr=1e-2, layers=1, batch=1, log=lambda *_: None)
    assert report["loss_first"] == pytest.approx(by_hand, rel=1e-5)
    assert report["loss_last"] < 0.5 * report["loss_first"] and report["layers"] == 1
    assert len(model.model.layers) == 2 and all(p.requires_grad for p in model.parameters())
    for name, param in model.named_parameters():
        if name == "model.embed_tokens.weight":
            n = len(base_tok)
            assert torch.equal(param[:n], before[name][:n]) and not torch.equal(param[n:], before[name][n:])
        else:
            assert torch.equal(param, before[name]), name
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight  # still tied


def test_the_fit_and_the_distillation_keep_only_what_lowers_the_cross_entropy_of_unseen_sequences(setup, tied_llama):
    """validation_loss is the model's own mean next-token cross-entropy (F.cross_entropy of its logits). Given
    validation sequences, a fit that lowers it keeps its best round; a fit or a distillation that raises it (an
    absurd learning rate here; the fit of 100 laws tokens on Gemma-3-270M for real) leaves the rows bit-identical to
    what they were, stops the rounds and says so."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from yunshan.training.embedding_warmup import aligned_pairs, distill_new_rows, fit_new_rows, validation_loss
    from yunshan.training.models import grow_embeddings

    _, files, _, _ = setup
    base, tok_ext = tied_llama
    base_tok, ext_tok = AutoTokenizer.from_pretrained(base), AutoTokenizer.from_pretrained(tok_ext)
    model = AutoModelForCausalLM.from_pretrained(base)
    new_ids = grow_embeddings(model, base_tok, ext_tok)
    stream: list[int] = []
    for name in ("mid", "long"):
        for line in open(files[name]):
            stream += ext_tok(json.loads(line)["text"])["input_ids"] + [ext_tok.eos_token_id]
    chunks = [stream[i:i + 64] for i in range(0, 12 * 64, 64)]
    fit, held = chunks[:8], chunks[8:]
    x = torch.tensor(held)
    with torch.no_grad():
        logits = model(input_ids=x).logits
    by_hand = torch.nn.functional.cross_entropy(logits[:, :-1].reshape(-1, logits.shape[-1]), x[:, 1:].reshape(-1))
    for layer in model.model.layers:  # dropout in train mode: the measure runs in eval mode and gives it back
        layer.self_attn.attention_dropout = 0.5
    model.train()
    assert validation_loss(model, held) == pytest.approx(by_hand.item(), rel=1e-5) and model.training
    model.eval()

    weight = model.get_input_embeddings().weight
    start = weight.detach().clone()
    lines: list[str] = []
    bad = fit_new_rows(model, new_ids, fit, rounds=3, epochs=3, lr=100.0, validation=held, log=lines.append)
    assert len(bad["rounds"]) == 1 and bad["validation"]["kept_round"] == 0
    assert bad["rounds"][0]["validation_loss"] > bad["validation"]["before"] == bad["validation"]["after"]
    assert torch.equal(weight, start)
    assert "the rows as they were before the fit are kept" in lines[-1]

    good = fit_new_rows(model, new_ids, fit, rounds=3, epochs=3, lr=3e-3, validation=held, log=lambda *_: None)
    checked = good["validation"]
    assert checked["kept_round"] >= 1 and checked["after"] < checked["before"]
    assert checked["after"] == min(r["validation_loss"] for r in good["rounds"])
    assert checked["after"] == pytest.approx(validation_loss(model, held), rel=1e-6)
    n = len(base_tok)
    assert torch.equal(weight[:n], start[:n]) and not torch.equal(weight[n:], start[n:])
    assert model.get_output_embeddings().weight is weight  # still tied

    fitted = weight.detach().clone()
    distilled = distill_new_rows(model, new_ids, aligned_pairs(fit, ext_tok, base_tok), steps=4, lr=100.0,
                                 layers=1, validation=held, log=lambda *_: None)
    assert distilled["validation"]["after"] > distilled["validation"]["before"]
    assert distilled["validation"]["kept"] is False and torch.equal(weight, fitted)


def test_cpt_distils_the_new_rows_before_the_fit_when_asked(setup, tied_llama, tmp_path):
    """warmup.distill_steps runs the token distillation on the fit's sequences and the data report says so."""
    base, tok_ext = tied_llama
    reports = {}
    for steps in (0, 3):
        data = recipe_dict(setup, tmp_path / f"d{steps}", max_steps=3, save_steps=100)
        data["model"] = {"name_or_path": str(base)}
        data["tokenizer"] = {"path": str(tok_ext)}
        data["monitor"]["every_steps"] = 0
        data["warmup"] = {"steps": 1, "fit_sequences": 4, "until_base_bpc": False, "distill_steps": steps,
                          "distill_layers": 1}
        run_cpt(load_recipe(CptArgs, data=data))
        reports[steps] = json.loads((tmp_path / f"d{steps}/data_report.json").read_text())["embedding_warmup"]
    assert reports[0]["distillation"] is None
    distilled = reports[3]["distillation"]
    assert distilled["steps"] == 3 and distilled["layers"] == 1 and distilled["texts"] >= 4
    assert 0 < distilled["loss_first"] < float("inf") and 0 < distilled["loss_last"] < float("inf")
    # the fit starts from the distilled rows: its first cross-entropy differs from the undistilled run's
    assert reports[3]["fit"]["rounds"][0]["loss_before"] != reports[0]["fit"]["rounds"][0]["loss_before"]


def test_warmup_ends_when_heldout_bpc_reaches_the_base_and_reports_the_cost(setup, tied_llama, tmp_path,
                                                                            monkeypatch):
    """The switch fires at the first check where every held-out bits/char is at or below the base model's. A random
    tiny model cannot earn back even a small cost, so the base figures are raised by 0.01 bits/char (the extended
    model starts 0.004 above the true base): the first check (step 2) must end the warm-up."""
    import yunshan.training.cpt as cpt

    measured = cpt._heldout_bpc
    calls = []

    def raised_base(*args):
        values = measured(*args)
        calls.append(values)
        return {k: v + 0.01 for k, v in values.items()} if len(calls) == 1 else values

    monkeypatch.setattr(cpt, "_heldout_bpc", raised_base)
    base, tok_ext = tied_llama
    data = recipe_dict(setup, tmp_path / "early", max_steps=6, save_steps=100)
    data["model"] = {"name_or_path": str(base)}
    data["tokenizer"] = {"path": str(tok_ext)}
    data["monitor"]["every_steps"] = 0
    data["warmup"] = {"steps": 4, "fit_sequences": 8, "check_every": 2, "learning_rate": 0.03}
    summary = run_cpt(load_recipe(CptArgs, data=data))
    report = json.loads((tmp_path / "early/data_report.json").read_text())
    cost = report["extension_cost"]
    assert set(cost["base"]) == {"general", "domain"} and set(cost["cost_init"]) == {"general", "domain"}
    assert cost["cost_step0"]["general"]["extended"] == cost["step0"]["general"]
    warm = report["embedding_warmup"]
    assert warm["ended"] == "held-out bits/char reached the base model's" and warm["steps"] == 2
    assert cost["init"]["general"] > calls[0]["general"]  # without the raise, the extension costs at step 0
    last = warm["checks"][-1]
    assert all(last[f"bpc_{k}"] <= cost["base"][k] for k in cost["base"])
    assert summary["steps"] == 6  # the budget: the warm-up's unused steps go to continual pretraining


@pytest.mark.parametrize("mode", ["full", "indices"])
def test_resume_inside_the_warmup_equals_an_uninterrupted_run(setup, tied_llama, tmp_path, mode):
    """A run stopped at a checkpoint inside the warm-up (then resumed with resume: auto) ends with exactly the
    weights of an uninterrupted run: the fit is not redone, the phase and the stream position are restored."""
    import shutil

    base, tok_ext = tied_llama
    runs = {}
    for name in ("a", "b"):
        data = recipe_dict(setup, tmp_path / name, max_steps=8, save_steps=2, save_total_limit=10)
        data["model"] = {"name_or_path": str(base)}
        data["tokenizer"] = {"path": str(tok_ext)}
        data["monitor"]["every_steps"] = 0
        data["warmup"] = {"steps": 4, "fit_sequences": 8, "until_base_bpc": False}
        if mode != "full":
            data["lora"] = {"enabled": True, "r": 4, "alpha": 8, "dropout": 0.0, "new_token_training": mode}
        runs[name] = load_recipe(CptArgs, data=data)
    run_cpt(runs["a"])
    run_cpt(runs["b"])
    b = tmp_path / "b"
    # Simulate a kill right after checkpoint 2 (in the warm-up): later checkpoints and the outputs are gone.
    for step in (4, 6, 8):
        shutil.rmtree(b / f"checkpoints/checkpoint-{step}")
    for name in ("model.safetensors", "data_report.json"):
        (b / name).unlink()
    run_cpt(runs["b"])
    wa, wb = load_file(tmp_path / "a/model.safetensors"), load_file(b / "model.safetensors")
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    ra = json.loads((tmp_path / "a/data_report.json").read_text())
    rb = json.loads((b / "data_report.json").read_text())
    assert ra["embedding_warmup"]["steps"] == rb["embedding_warmup"]["steps"] == 4
    assert ra["tokens_trained"] == rb["tokens_trained"]


def test_bf16_losses_follow_fp32(setup, tmp_path):
    """bf16 autocast (what precision: auto picks on CPUs with AMX / AVX-512 BF16 and on GPUs) trains like fp32: on
    the tiny model every logged loss is within 2% of fp32's and the final held-out bits/char within 2%."""
    results = {}
    for precision in ("float32", "bfloat16"):
        data = recipe_dict(setup, tmp_path / precision, max_steps=16, save_steps=100, precision=precision)
        data["monitor"]["every_steps"] = 0
        run_cpt(load_recipe(CptArgs, data=data))
        log = [json.loads(l) for l in (tmp_path / precision / "log.jsonl").read_text().splitlines()]
        results[precision] = ([r["loss"] for r in log if r.get("event") == "train" and "loss" in r],
                              [r for r in log if r.get("event") == "bpc"][-1]["bpc_general"])
        assert json.loads((tmp_path / precision / "data_report.json").read_text())["precision"]["value"] == precision
    (fp32, bpc32), (bf16, bpc16) = results["float32"], results["bfloat16"]
    assert len(fp32) == len(bf16) == 4
    assert all(abs(a - b) <= 0.02 * a for a, b in zip(fp32, bf16)), (fp32, bf16)
    assert abs(bpc16 - bpc32) <= 0.02 * bpc32
    assert fp32 != bf16  # bf16 really ran


def _weights_equal(a: Path, b: Path) -> bool:
    wa, wb = load_file(a), load_file(b)
    return wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def test_rerunning_a_finished_run_leaves_it_alone(setup, tmp_path, capsys):
    """A second `yunshan cpt` of a finished run says so and exits 0 without a step: the weights, report and log are
    the bytes the first run wrote, and no checkpoint past max_steps appears."""
    data = recipe_dict(setup, tmp_path / "run", max_steps=4, save_steps=2)
    data["monitor"] = {"every_steps": 0}
    path = write_recipe(tmp_path / "run.yaml", data)
    run_cpt(load_recipe(CptArgs, path))
    run = tmp_path / "run"
    before = {name: (run / name).read_bytes() for name in ("model.safetensors", "data_report.json", "log.jsonl")}
    code, out, err = cli(capsys, "cpt", "--config", str(path))
    assert code == 0, err[-2000:]
    assert "already finished" in out and "4 of 4 steps" in out
    assert {name: (run / name).read_bytes() for name in before} == before
    assert latest_complete_checkpoint(run / "checkpoints").name == "checkpoint-4"


def test_a_kill_after_the_last_checkpoint_finishes_with_the_uninterrupted_weights(setup, tied_llama, tmp_path):
    """Killed after the checkpoint of the last step but before the final save, the rerun saves that checkpoint's
    weights: exactly an uninterrupted run's, no extra step. With the embedding warm-up the last step is
    training.max_steps, the warm-up included."""
    base, tok_ext = tied_llama
    recipes = {}
    for name in ("a", "b"):
        data = recipe_dict(setup, tmp_path / name, max_steps=4, save_steps=2)
        data["model"] = {"name_or_path": str(base)}
        data["tokenizer"] = {"path": str(tok_ext)}
        data["monitor"]["every_steps"] = 0
        data["warmup"] = {"steps": 2, "fit_sequences": 4, "until_base_bpc": False}
        recipes[name] = load_recipe(CptArgs, data=data)
    run_cpt(recipes["a"])
    run_cpt(recipes["b"])
    b = tmp_path / "b"
    for name in ("model.safetensors", "data_report.json"):
        (b / name).unlink()  # as if killed between the final checkpoint and the final save
    summary = run_cpt(recipes["b"])
    assert summary["steps"] == 4
    assert _weights_equal(tmp_path / "a/model.safetensors", b / "model.safetensors")
    assert latest_complete_checkpoint(b / "checkpoints").name == "checkpoint-4"
    ra = json.loads((tmp_path / "a/data_report.json").read_text())
    rb = json.loads((b / "data_report.json").read_text())
    assert rb["steps"] == ra["steps"] == 4 and rb["tokens_trained"] == ra["tokens_trained"]
    assert rb["embedding_warmup"]["steps"] == ra["embedding_warmup"]["steps"] == 2


def test_a_resume_refuses_a_changed_data_stream_and_records_the_safe_changes(setup, tmp_path, capsys):
    """Resuming with another seq_len, source weight, data seed or a shorter run is refused in one line listing the
    changed fields (nothing is trained); logging and a longer run are allowed and recorded in the data report."""
    import shutil

    data = recipe_dict(setup, tmp_path / "run", max_steps=4, save_steps=2)
    data["monitor"] = {"every_steps": 0}
    path = write_recipe(tmp_path / "run.yaml", data)
    run_cpt(load_recipe(CptArgs, path))
    run = tmp_path / "run"
    shutil.rmtree(run / "checkpoints/checkpoint-4")  # as if killed after checkpoint 2
    for name in ("model.safetensors", "data_report.json"):
        (run / name).unlink()
    code, _, err = cli(capsys, "cpt", "--config", str(path), "data.seq_len=32", "data.sources.long.weight=0.7",
                       "data.seed=1", "training.max_steps=3")
    assert code == 1 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err
    for change in ("data.seq_len 64 -> 32", "data.sources.long.weight 0.5 -> 0.7", "data.seed 0 -> 1",
                   "training.max_steps 4 -> 3"):
        assert change in err, change
    assert "checkpoint-2" in err and "training.resume=never" in err
    assert [p.name for p in (run / "checkpoints").iterdir()] == ["checkpoint-2"]
    summary = run_cpt(load_recipe(CptArgs, path, ["training.logging_steps=1", "training.max_steps=6"]))
    assert summary["steps"] == 6
    report = json.loads((run / "data_report.json").read_text())
    assert report["resumes"] == [{"step": 2, "checkpoint": "checkpoint-2", "changes": {
        "training.logging_steps": [4, 1], "training.max_steps": [4, 6]}}]
    assert report["tokens_trained"] == 6 * 4 * 64
    log = [json.loads(l) for l in (run / "log.jsonl").read_text().splitlines()]
    assert [r["step"] for r in log if r.get("event") == "resume"] == [2]


def test_a_kill_during_the_final_save_of_a_longer_rerun_is_never_exported(setup, tmp_path, capsys):
    """Issue 27 item 4: a finished 2-step run rerun with max_steps 4 and SIGKILLed once checkpoint-4 is complete,
    that is during its final save. The folder then holds no final marker (the rerun removed it before changing
    anything), so `yunshan export` refuses it in one line; the next run finishes from checkpoint-4, removes what the
    killed save left (safetensors' .tmp files) and writes the marker last, and the export goes through."""
    from yunshan.io.artifacts import FinalOutputs
    from yunshan.cli import main

    # The killed rerun is a process of its own (SIGKILL); the runs and exports around it run in this one (the same
    # `main` the command line calls), which saves three interpreter starts.

    out = tmp_path / "run"
    data = recipe_dict(setup, out, max_steps=2, save_steps=2)
    data["monitor"] = {"every_steps": 0}
    path = write_recipe(tmp_path / "run.yaml", data)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    assert main(["cpt", "--config", str(path)]) == 0
    assert json.loads((out / FinalOutputs.FILE).read_text())["step"] == 2
    longer = YUNSHAN + ["cpt", "--config", str(path), "training.max_steps=4"]
    proc = subprocess.Popen(longer, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 300
    while not (out / "checkpoints/checkpoint-4/COMPLETE").exists():
        assert proc.poll() is None and time.time() < deadline, "the rerun ended before its last checkpoint"
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert not (out / FinalOutputs.FILE).exists()
    assert yaml.safe_load((out / "recipe.yaml").read_text())["training"]["max_steps"] == 4
    (out / ".tmpa1B2c3").write_bytes(b"\0" * 4096)  # what safetensors leaves when killed mid-file
    capsys.readouterr()
    assert main(["export", str(out), "--out", str(tmp_path / "export")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1, err
    assert "final save did not complete" in err and "run the same `yunshan cpt`" in err
    assert not (tmp_path / "export").exists()
    assert main(longer[3:]) == 0
    assert "finishing from the last step's checkpoint" in capsys.readouterr().out
    marker = json.loads((out / FinalOutputs.FILE).read_text())
    assert marker["step"] == 4 and "model.safetensors" in marker["files"] and "recipe.yaml" in marker["files"]
    assert not list(out.glob(".tmp*"))
    assert _weights_equal(out / "checkpoints/checkpoint-4/model.safetensors", out / "model.safetensors")
    assert json.loads((out / "data_report.json").read_text())["steps"] == 4
    assert main(["export", str(out), "--out", str(tmp_path / "export")]) == 0


def test_a_full_disk_during_the_final_save_is_one_line_and_the_rerun_finishes(setup, tmp_path, monkeypatch, capsys):
    """Issue 27 item 13: a full disk while cpt writes its final model was a SafetensorError traceback. Now one line
    names the folder and what to do; the folder has no final marker, and the rerun finishes it."""
    import transformers.modeling_utils as modeling_utils
    from safetensors import SafetensorError

    from yunshan.io.artifacts import FinalOutputs
    from yunshan.cli import main

    out = tmp_path / "run"
    data = recipe_dict(setup, out, max_steps=2, save_steps=2)
    data["monitor"] = {"every_steps": 0}
    path = write_recipe(tmp_path / "run.yaml", data)
    real_save = modeling_utils.safe_save_file

    def full_disk(tensors, filename, *args, **kwargs):
        if Path(filename).parent == out:  # the final model; the checkpoints are written
            raise SafetensorError('Error while serializing: I/O error: No space left on device (os error 28)')
        return real_save(tensors, filename, *args, **kwargs)

    monkeypatch.setattr(modeling_utils, "safe_save_file", full_disk)
    assert main(["cpt", "--config", str(path)]) == 1
    err = capsys.readouterr().err
    assert [line for line in err.splitlines() if "error:" in line] == [
        f"yunshan cpt: error: {out}: the final save failed (Error while serializing: I/O error: No space left on device "
        "(os error 28)); free space (or fix the folder) and run the same command again: it resumes from the newest "
        "complete checkpoint"], err[-3000:]
    assert "Traceback" not in err
    assert not (out / FinalOutputs.FILE).exists()
    monkeypatch.setattr(modeling_utils, "safe_save_file", real_save)
    assert main(["cpt", "--config", str(path)]) == 0
    assert json.loads((out / FinalOutputs.FILE).read_text())["step"] == 2


def test_an_infinite_source_weight_stops_at_its_line(setup, tmp_path):
    """Issue 27 item 13: `weight: .inf` beside another source was a ZeroDivisionError in data/mixing.py."""
    data = recipe_dict(setup, tmp_path / "run")
    path = write_recipe(tmp_path / "run.yaml", data)
    text = path.read_text().replace("weight: 0.5", "weight: .inf")
    path.write_text(text)
    line = next(i for i, row in enumerate(text.splitlines(), 1) if "weight: .inf" in row)
    with pytest.raises(RecipeError) as err:
        load_recipe(CptArgs, path)
    assert str(err.value) == f"{path}:{line}: data.sources.2.weight: must be a finite number > 0, got inf"
