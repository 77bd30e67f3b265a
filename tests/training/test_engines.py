"""`yunshan cpt` and `yunshan sft` under `accelerate launch` with 2 CPU processes (gloo) for every engine: DDP,
DeepSpeed ZeRO-2, DeepSpeed ZeRO-3 and FSDP2, with the launch configs in recipes/accelerate/*_cpu.yaml.

    make test               # one run per engine: test_cpt_follows_one_process
    make test-distributed   # every multi-process test (marker `multiprocess`; `distributed` = not in make test)

Every run is compared with one process on the same global batch (per-device batch halved, same data in the same
order). Tolerance, for float32 runs of at most 10 steps: every weight within 1e-5 (absolute); logged losses,
gradient norms and held-out bits/char within 5e-5 (absolute, on values of 0.03 to 6). Why: the engines split the
batch between processes and sum gradients in another order (all-reduce, reduce-scatter), which changes float32
results in the last places; measured on these tests under every engine (2 processes, gloo, this Zen 4 CPU): weights
differ by at most 1.2e-7, losses by 1.4e-6 (3 units in the last place of a float32 near 6), gradient norms by
1.9e-6, bits/char by 8e-9. The bounds leave a margin of 25x (losses) to 80x (weights) for other CPUs' kernels, and
stay at least 12x below what any real fault here moved: one wrong Adam update moves weights by about the learning
rate (3e-3), and the faults these tests were written against moved losses or gradient norms by 6e-4 to 9e-3 and
weights by 9e-3 to 0.3 (an adapter initialised from another random state, Adam moments kept across the embedding
warm-up, frozen weights trained by FSDP, fitted rows lost on resume). Where nothing is computed differently (rows
written once, frozen weights) the comparison is exact.

FSDP on CPU: accelerate 1.15 enables FSDP only for accelerator process groups, so the FSDP runs go through
tests/training/fsdp_cpu_launch.py, which lets accelerate take its FSDP branch on the CPU process group and then runs
`yunshan.cli` (its docstring has the details); `yunshan` alone refuses an FSDP launch that accelerate turned into DDP.
"""

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

from fixtures import free_port, three_source_corpora, train_tokenizer

ROOT = Path(__file__).resolve().parents[2]
FSDP_LAUNCHER = Path(__file__).with_name("fsdp_cpu_launch.py")
ENGINES = {"ddp": "ddp_cpu.yaml", "zero2": "deepspeed_zero2_cpu.yaml", "zero3": "deepspeed_zero3_cpu.yaml",
           "fsdp": "fsdp_cpu.yaml"}
EXPECTED = {  # what the data report must say each launch really ran
    "ddp": {"name": "ddp", "zero_stage": None, "fsdp_version": None, "shards_weights": False},
    "zero2": {"name": "deepspeed", "zero_stage": 2, "zero_init": False, "shards_weights": False},
    "zero3": {"name": "deepspeed", "zero_stage": 3, "zero_init": True, "shards_weights": True},
    "fsdp": {"name": "fsdp", "fsdp_version": 2, "shards_weights": True},
}
LOSS_TOL = 5e-5
WEIGHT_TOL = 1e-5

multiprocess = pytest.mark.multiprocess
distributed = pytest.mark.distributed  # only in make test-distributed


# ----------------------------------------------------------------------------- launching


def launch_command(engine: str, command: str, recipe: Path, config: Path | None = None) -> list[str]:
    target = [str(FSDP_LAUNCHER)] if engine == "fsdp" else ["-m", "yunshan.cli"]
    return [sys.executable, "-m", "accelerate.commands.launch", "--config_file",
            str(config or ROOT / "recipes/accelerate" / ENGINES[engine]), "--main_process_port", str(free_port()),
            *target, command, "--config", str(recipe)]


def launch(engine: str, command: str, recipe: Path, config: Path | None = None, ok: bool = True) -> str:
    """Run a launch to its end (the DeepSpeed JSON config is named relative to the repository root: cwd)."""
    with open(recipe.with_suffix(".log"), "w") as log:
        proc = subprocess.Popen(launch_command(engine, command, recipe, config), cwd=ROOT, stdout=log,
                                stderr=subprocess.STDOUT, text=True, start_new_session=True)
        try:
            proc.wait(timeout=900)
        finally:
            kill_tree(proc.pid)
    output = recipe.with_suffix(".log").read_text()
    assert (proc.returncode == 0) == ok, output[-4000:]
    return output


def launch_and_kill(engine: str, command: str, recipe: Path, checkpoint: Path, config: Path | None = None) -> None:
    """Start a launch and SIGKILL every process of it once `checkpoint` is complete."""
    with open(recipe.with_suffix(".killed.log"), "w") as log:
        proc = subprocess.Popen(launch_command(engine, command, recipe, config), cwd=ROOT, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.time() + 900
            while not (checkpoint / "COMPLETE").exists():
                assert proc.poll() is None, "the run ended before its checkpoint:\n" + \
                    recipe.with_suffix(".killed.log").read_text()[-3000:]
                assert time.time() < deadline, "no checkpoint in 900 s"
                time.sleep(0.02)
        finally:
            kill_tree(proc.pid)


def kill_tree(pid: int) -> None:
    """SIGKILL a launcher and all its descendants (torchrun starts the workers in sessions of their own)."""
    import psutil

    try:
        root = psutil.Process(pid)
    except psutil.NoSuchProcess:
        return
    procs = [root, *root.children(recursive=True)]
    for proc in procs:
        try:
            proc.send_signal(signal.SIGKILL)
        except psutil.NoSuchProcess:
            pass
    psutil.wait_procs(procs, timeout=30)


def write_recipe(path: Path, data: dict) -> Path:
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    return path


# ----------------------------------------------------------------------------- data, models, references


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """Corpora and an untied PanGu-π with its tokenizer (continual pretraining); instructions and a tied Llama with
    its tokenizer (SFT, shaped like SmolLM2); each base with a tokenizer extended on its own text."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from yunshan.models.pangu_pi import PanguPiConfig, PanguPiForCausalLM
    from yunshan.tokenizer import ExtendArgs, extend_tokenizer

    root = tmp_path_factory.mktemp("engines")
    files = three_source_corpora(root / "corpora")
    tokenizer = train_tokenizer(root / "tok")
    heldout = root / "heldout.txt"
    heldout.write_text("\n\n".join(json.loads(l)["text"] for l in open(files["mid"]).readlines()[-6:]))
    torch.manual_seed(0)
    PanguPiForCausalLM(PanguPiConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                                     num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                     aug_reduction=4)).save_pretrained(root / "pangu")
    tokenizer.save_pretrained(root / "pangu")
    # The same model with its matrices padded past the extended vocabulary (as many checkpoints pad to a multiple of
    # 64 or 128): the new rows are written in place, into ZeRO-3 partitions (transformers' resize makes whole new
    # matrices, so only this path shows whether growth gathers).
    torch.manual_seed(0)
    PanguPiForCausalLM(PanguPiConfig(vocab_size=len(tokenizer) + 64, hidden_size=32, intermediate_size=64,
                                     num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                     aug_reduction=4)).save_pretrained(root / "pangu_padded")
    tokenizer.save_pretrained(root / "pangu_padded")
    extend_tokenizer(ExtendArgs(base=str(root / "pangu"), corpus=[str(files["long"]), str(files["mid"])],
                                new_tokens=40, out=str(root / "pangu_tok_ext")), log=lambda *_: None)

    rng = random.Random(0)
    subjects = {"finance": "asset dividend equity revenue".split(), "law": "court contract verdict statute".split()}
    filler = "apple river stone cloud tiger lamp ocean forest".split()
    rows = []
    for _ in range(240):
        label = rng.choice(sorted(subjects))
        words = rng.sample(filler, 3) + [rng.choice(subjects[label])]
        rng.shuffle(words)
        rows.append({"instruction": "Which domain?", "input": " ".join(words), "output": label})
    (root / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:200]))
    chat = [{"messages": [{"role": "user", "content": f"Which domain?\n{r['input']}"},
                          {"role": "assistant", "content": r["output"]}]} for r in rows[200:]]
    (root / "chat.jsonl").write_text("".join(json.dumps(r) + "\n" for r in chat))
    texts = [f"<|user|>\nWhich domain?\n{r['input']}\n<|assistant|>\n{r['output']}" for r in rows]
    (root / "instructions.txt").write_text("\n\n".join(texts))
    llama_tok = train_tokenizer(root / "llama_tok", texts, vocab_size=300)
    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(vocab_size=len(llama_tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=True)
                     ).save_pretrained(root / "llama")
    llama_tok.save_pretrained(root / "llama")
    extend_tokenizer(ExtendArgs(base=str(root / "llama"), corpus=[str(root / "instructions.txt")], new_tokens=30,
                                out=str(root / "llama_tok_ext")), log=lambda *_: None)
    return {"root": root, "files": files, "heldout": heldout}


def cpt_recipe(world, out: Path, per_device_batch_size: int, **training) -> dict:
    """Full continual pretraining of the PanGu-π on the extended tokenizer: 2 warm-up steps (new input rows
    distilled for 2 steps through the first layer, fitted output rows, then only the new rows train, base rows
    masked), then 4 steps of everything, a checkpoint every 2 steps and held-out bits/char every 2 steps."""
    root, files = world["root"], world["files"]
    return {
        "model": {"name_or_path": str(root / "pangu")},
        "tokenizer": {"path": str(root / "pangu_tok_ext")},
        "data": {"seq_len": 64, "block_size": 64, "sources": [
            {"name": "short", "path": str(files["short"]), "weight": 0.25},
            {"name": "mid", "path": str(files["mid"]), "weight": 0.25},
            {"name": "long", "path": str(files["long"]), "weight": 0.5}]},
        "training": {"output_dir": str(out), "max_steps": 6, "per_device_batch_size": per_device_batch_size,
                     "learning_rate": 3e-3, "warmup_steps": 1, "save_steps": 2, "save_total_limit": 10,
                     "logging_steps": 1, "precision": "fp32", **training},
        "monitor": {"every_steps": 2, "general": [str(world["heldout"])], "max_chars": 1500},
        "warmup": {"steps": 2, "fit_sequences": 4, "until_base_bpc": False, "distill_steps": 2, "distill_layers": 1},
    }


def sft_recipe(world, out: Path, per_device_batch_size: int, **training) -> dict:
    """Mixed SFT of the tied Llama on its extended tokenizer (the new rows grow and train on both sides)."""
    root = world["root"]
    return {
        "model": {"name_or_path": str(root / "llama")},
        "tokenizer": {"path": str(root / "llama_tok_ext")},
        "data": {"max_length": 64, "max_new_tokens": 4, "sources": [
            {"name": "alpaca", "path": str(root / "train.jsonl"), "format": "alpaca"},
            {"name": "chat", "path": str(root / "chat.jsonl"), "format": "messages", "heldout": 2}]},
        "training": {"output_dir": str(out), "max_steps": 6, "per_device_batch_size": per_device_batch_size,
                     "learning_rate": 3e-3, "warmup_steps": 1, "save_steps": 2, "save_total_limit": 10,
                     "logging_steps": 1, "weight_decay": 0.0, "precision": "fp32", **training},
    }


LORA = {"enabled": True, "r": 4, "alpha": 8, "dropout": 0.0}


@pytest.fixture(scope="module")
def one_process(world, tmp_path_factory):
    """Single-process runs on the global batch, each run once per module: name -> output folder."""
    from yunshan.arguments.recipe import load_recipe
    from yunshan.training.cpt import CptArgs, run_cpt
    from yunshan.training.sft import SftArgs, run_sft

    root = tmp_path_factory.mktemp("one_process")
    done: dict[str, Path] = {}

    def run(name: str, make, **changes) -> Path:
        if name not in done:
            out = root / name
            data = make(world, out, 4 if make is cpt_recipe else 8)
            for key, value in changes.items():
                data[key] = value
            (run_cpt if make is cpt_recipe else run_sft)(
                load_recipe(CptArgs if make is cpt_recipe else SftArgs, data=data))
            done[name] = out
        return done[name]

    return run


def engine_recipe(world, tmp_path: Path, make, engine: str, **changes) -> tuple[Path, Path]:
    """The recipe of a 2-process run (half the per-device batch) and its output folder."""
    out = tmp_path / engine
    data = make(world, out, 2 if make is cpt_recipe else 4)
    for key, value in changes.items():
        data[key] = value
    return write_recipe(tmp_path / f"{engine}.yaml", data), out


# ----------------------------------------------------------------------------- comparisons


def log_rows(out: Path, event: str) -> list[dict]:
    return [r for r in map(json.loads, (out / "log.jsonl").read_text().splitlines()) if r.get("event") == event]


def assert_curves_match(one: Path, two: Path, keys=("loss",), event: str = "train") -> None:
    a, b = log_rows(one, event), log_rows(two, event)
    assert [r["step"] for r in a] == [r["step"] for r in b] and a, (a, b)
    for ra, rb in zip(a, b):
        for key in keys:
            assert abs(ra[key] - rb[key]) <= LOSS_TOL, (key, ra, rb)


def assert_weights_match(one: Path, two: Path, name: str = "model.safetensors") -> dict:
    a, b = load_file(one / name), load_file(two / name)
    assert a.keys() == b.keys()
    worst = max((a[k] - b[k]).abs().max().item() for k in a)
    assert worst <= WEIGHT_TOL, worst
    return b


def assert_engine(out: Path, engine: str) -> dict:
    report = json.loads((out / "data_report.json").read_text())
    assert report["engine"]["processes"] == 2
    for key, value in EXPECTED[engine].items():
        assert report["engine"][key] == value, (key, report["engine"])
    return report


# ----------------------------------------------------------------------------- the tests


@multiprocess
@pytest.mark.parametrize("engine", list(ENGINES))
def test_cpt_follows_one_process(world, one_process, tmp_path, engine):
    """Continual pretraining on an extended vocabulary, full fine-tuning, embedding warm-up and forgetting monitor:
    the loss curve, held-out bits/char, checkpoints and final weights follow one process; during the warm-up only
    the new rows move (base rows and every other weight bit-identical at its last checkpoint); the saved model loads
    with from_pretrained."""
    from transformers import AutoModelForCausalLM

    reference = one_process("cpt_full", cpt_recipe)
    recipe, out = engine_recipe(world, tmp_path, cpt_recipe, engine)
    launch(engine, "cpt", recipe)
    report = assert_engine(out, engine)
    assert report["embedding_warmup"]["steps"] == 2 and report["steps"] == 6
    assert report["embedding_warmup"]["distillation"]["steps"] == 2
    assert_curves_match(reference, out, keys=("loss", "grad_norm"))  # the norm shows what trained in the warm-up
    assert_curves_match(reference, out, keys=("bpc_general",), event="bpc")
    assert [r["step"] for r in log_rows(out, "bpc")] == [0, 2, 4, 6]  # measured by every process, logged once
    base = load_file(world["root"] / "pangu/model.safetensors")
    warm = assert_weights_match(reference, out, "checkpoints/checkpoint-2/model.safetensors")
    grown = grown_rows(world["root"] / "pangu", world["root"] / "pangu_tok_ext")
    n_base = base["model.embed_tokens.weight"].shape[0]
    for name, value in base.items():
        if name in grown:
            assert torch.equal(warm[name][:n_base], value), name  # base rows masked in the warm-up
            assert not torch.equal(warm[name][n_base:], grown[name][n_base:]), name  # the new rows trained
        else:
            assert torch.equal(warm[name], value), name  # frozen in the warm-up
    final = assert_weights_match(reference, out)
    assert not torch.equal(final["model.layers.0.self_attn.q_proj.weight"],
                           base["model.layers.0.self_attn.q_proj.weight"])
    model = AutoModelForCausalLM.from_pretrained(out)
    assert model.get_input_embeddings().weight.shape[0] > n_base


@multiprocess
@distributed
@pytest.mark.parametrize("engine", list(ENGINES))
def test_new_rows_equal_the_subword_means_of_one_process_exactly(world, tmp_path, engine):
    """Growth of an extended vocabulary under each engine, on a model whose matrices are padded past the new
    vocabulary: at learning rate 0 the saved embeddings and output head are exactly the base rows, the subword means
    one process computes and the untouched padding rows. Under ZeRO-3 the model is built inside zero.Init (every
    rank's matrices have local shape (0,)) and the rows are written in place: growing them without gathering fails
    (an index error on the empty local tensors), and gathering without writing back leaves the checkpoint's padding
    values in the new rows; this test fails either way. (test_cpt_follows_one_process covers the other path, a
    matrix that transformers' resize_token_embeddings replaces.)"""
    root = world["root"]
    recipe, out = engine_recipe(world, tmp_path, cpt_recipe, engine, model={"name_or_path": str(root / "pangu_padded")},
                                warmup={"enabled": "false"}, monitor={"every_steps": 0})
    data = yaml.safe_load(recipe.read_text())
    data["training"].update(max_steps=1, learning_rate=0.0, warmup_steps=0, weight_decay=0.0, save_steps=10)
    write_recipe(recipe, data)
    launch(engine, "cpt", recipe)
    assert_engine(out, engine)
    saved = load_file(out / "model.safetensors")
    padded = load_file(root / "pangu_padded/model.safetensors")
    expected = grown_rows(root / "pangu_padded", root / "pangu_tok_ext")
    for name, rows in expected.items():
        assert rows.shape == padded[name].shape and not torch.equal(rows, padded[name]), name  # grown in place
        assert torch.equal(saved[name], rows), name


def grown_rows(base: Path, extended: Path) -> dict:
    """The input and output embeddings of `base` grown for `extended` in this one process (subword means)."""
    from transformers import AutoModelForCausalLM

    from yunshan.tokenizer import resize_embeddings

    model = AutoModelForCausalLM.from_pretrained(base)
    resize_embeddings(model, str(base), str(extended))
    return {"model.embed_tokens.weight": model.get_input_embeddings().weight.detach(),
            "lm_head.weight": model.get_output_embeddings().weight.detach()}


@multiprocess
@distributed
@pytest.mark.parametrize("engine", list(ENGINES))
def test_cpt_lora_with_new_rows_killed_and_resumed(world, one_process, tmp_path, engine):
    """LoRA continual pretraining whose new vocabulary rows train as PEFT trainable tokens (input and output side,
    after the embedding warm-up), SIGKILLed after a checkpoint and resumed with resume: auto: the stream position
    and optimizer state restore (tokens per source exact, weights and the adapter within the tolerance of an
    uninterrupted single-process run)."""
    lora = {**LORA, "new_token_training": "indices"}
    reference = one_process("cpt_lora", cpt_recipe, lora=lora, monitor={"every_steps": 0})
    recipe, out = engine_recipe(world, tmp_path, cpt_recipe, engine, lora=lora, monitor={"every_steps": 0})
    launch_and_kill(engine, "cpt", recipe, out / "checkpoints/checkpoint-2")
    assert not (out / "model.safetensors").exists()  # it died mid-run
    resumed = launch(engine, "cpt", recipe)
    assert "resuming from" in resumed and "checkpoint-" in resumed
    assert_curves_match(reference, out, keys=("loss", "grad_norm"))
    report = assert_engine(out, engine)
    expected = json.loads((reference / "data_report.json").read_text())
    assert {n: s["tokens_trained"] for n, s in report["sources"].items()} == {
        n: s["tokens_trained"] for n, s in expected["sources"].items()}
    assert report["embedding_warmup"]["steps"] == expected["embedding_warmup"]["steps"] == 2
    assert_weights_match(reference, out)
    assert_weights_match(reference / "adapter", out / "adapter", "adapter_model.safetensors")
    base = load_file(world["root"] / "pangu/model.safetensors")["model.embed_tokens.weight"]
    final = load_file(out / "model.safetensors")["model.embed_tokens.weight"]
    assert torch.equal(final[:base.shape[0]], base)  # indices mode: only the new rows train


@multiprocess
@distributed
@pytest.mark.parametrize("engine", list(ENGINES))
def test_sft_lora_rows_on_a_tied_model_killed_and_resumed(world, one_process, tmp_path, engine):
    """LoRA SFT of a tied model whose embedding matrix trains as a whole (modules_to_save, tied to the head),
    SIGKILLed after a checkpoint and resumed: per-source losses, the adapter and the merged model follow one process;
    the merged model stays tied (one matrix in the file); the held-out generations are written.

    FSDP with RAM-efficient loading cannot prepare this model (accelerate re-ties it through PEFT's wrappers): the
    launch stops with that one-line error, and the run uses the launch config with that loading off, as the error
    says."""
    lora = {**LORA, "new_token_training": "rows"}
    reference = one_process("sft_lora", sft_recipe, lora=lora)
    recipe, out = engine_recipe(world, tmp_path, sft_recipe, engine, lora=lora)
    config = None
    if engine == "fsdp":
        refused = launch(engine, "sft", recipe, ok=False)
        assert "yunshan sft: error: lora.new_token_training: rows on a model with tied embeddings" in refused
        assert "set fsdp_cpu_ram_efficient_loading: false" in refused
        config = tmp_path / "fsdp_cpu_full_loading.yaml"
        shipped = (ROOT / "recipes/accelerate" / ENGINES[engine]).read_text()
        config.write_text(shipped.replace("fsdp_cpu_ram_efficient_loading: true",
                                          "fsdp_cpu_ram_efficient_loading: false"))
        assert config.read_text() != shipped
    launch_and_kill(engine, "sft", recipe, out / "checkpoints/checkpoint-2", config)
    assert not (out / "model.safetensors").exists()
    assert "resuming from" in launch(engine, "sft", recipe, config)
    assert_engine(out, engine)
    assert_curves_match(reference, out)
    for a, b in zip(log_rows(reference, "train"), log_rows(out, "train")):
        for key in ("loss_alpaca", "loss_chat"):  # logged to 4 decimals (the last one may flip), if in the batch
            assert (key in a) == (key in b) and abs(a.get(key, 0) - b.get(key, 0)) <= 1e-4 + LOSS_TOL, (key, a, b)
    assert_weights_match(reference, out)
    assert_weights_match(reference / "adapter", out / "adapter", "adapter_model.safetensors")
    weights = load_file(out / "model.safetensors")
    assert "lm_head.weight" not in weights and json.loads((out / "config.json").read_text())["tie_word_embeddings"]
    rows = [json.loads(l) for l in (out / "generations.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(r["source"] == "chat" for r in rows)


@multiprocess
@distributed
@pytest.mark.parametrize("engine", list(ENGINES))
def test_sft_full_killed_resumed_and_exported_loads_in_plain_transformers(world, one_process, tmp_path, engine):
    """Full SFT of a tied Llama on its extended vocabulary, SIGKILLed after a checkpoint and resumed (every weight's
    optimizer state restores): the curves and weights follow one process, and the exported folder loads with
    transformers' own LlamaForCausalLM (no yunshan code), tied, with the logits of the single-process model."""
    from transformers import LlamaForCausalLM

    from yunshan.hub.export import export_model

    reference = one_process("sft_full", sft_recipe)
    recipe, out = engine_recipe(world, tmp_path, sft_recipe, engine)
    launch_and_kill(engine, "sft", recipe, out / "checkpoints/checkpoint-2")
    assert not (out / "model.safetensors").exists()
    assert "resuming from" in launch(engine, "sft", recipe)
    assert_engine(out, engine)
    assert_curves_match(reference, out, keys=("loss", "grad_norm"))
    assert_weights_match(reference, out)
    export_model(out, tmp_path / "export")
    exported = LlamaForCausalLM.from_pretrained(tmp_path / "export").eval()
    assert exported.lm_head.weight is exported.model.embed_tokens.weight
    single = LlamaForCausalLM.from_pretrained(reference).eval()
    ids = torch.randint(3, exported.config.vocab_size, (2, 16))
    with torch.no_grad():
        torch.testing.assert_close(exported(ids).logits, single(ids).logits, atol=1e-4, rtol=0)


@multiprocess
def test_one_launch_holds_one_lock_and_a_foreign_lock_stops_every_process(world, tmp_path):
    """Issue 27 item 3 under `accelerate launch` with 2 processes: both processes lock the same output folder. Over a
    stale lock (its owner's pid is dead) exactly one of them takes it over, for the whole launch, and the run trains
    and ends with the lock removed; while another live run holds the lock, each process stops in one line at once
    (none waits for the other), and nothing is written."""
    import socket

    from yunshan.io.folder_lock import lock_path

    def recipe(name: str) -> tuple[Path, Path]:
        data = cpt_recipe(world, tmp_path / name, 2, max_steps=2)
        data["monitor"], data["warmup"] = {"every_steps": 0}, {"enabled": "false"}
        return write_recipe(tmp_path / f"{name}.yaml", data), tmp_path / name

    stale_recipe, stale_out = recipe("stale")
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    lock_path(stale_out).write_text(json.dumps({"pid": dead.pid, "host": socket.gethostname(), "token": "old"}))
    output = launch("ddp", "cpt", stale_recipe)
    assert output.count("took over the stale lock") == 1, output[-3000:]
    assert json.loads((stale_out / "yunshan_complete.json").read_text())["step"] == 2
    assert not lock_path(stale_out).exists()

    held_recipe, held_out = recipe("held")
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time\n"
                               "from yunshan.io.folder_lock import folder_lock\n"
                               "with folder_lock(sys.argv[1], 'test'):\n    print('held', flush=True)\n"
                               "    time.sleep(600)\n", str(held_out)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        output = launch("ddp", "cpt", held_recipe, ok=False)  # a process left waiting would time out here
    finally:
        holder.kill()
        holder.wait()
    refusals = [line for line in output.splitlines() if "yunshan cpt: error:" in line]
    assert len(refusals) == 2 and all(f"pid {holder.pid}" in line and "is in use by another yunshan run" in line
                                      for line in refusals), output[-3000:]
    assert not held_out.exists()


@multiprocess
@distributed
def test_an_fsdp_launch_that_accelerate_turns_into_ddp_stops_with_an_error(world, tmp_path):
    """Without the test launcher, accelerate sets up DDP for the FSDP config on this CPU-only machine; yunshan stops
    with a one-line error instead of training every weight in every process."""
    recipe, out = engine_recipe(world, tmp_path, cpt_recipe, "fsdp", monitor={"every_steps": 0})
    command = launch_command("fsdp", "cpt", recipe)
    command[command.index(str(FSDP_LAUNCHER)):command.index(str(FSDP_LAUNCHER)) + 1] = ["-m", "yunshan.cli"]
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert result.returncode != 0
    assert "yunshan cpt: error: the launch config asks for FSDP but accelerate set up MULTI_CPU" in result.stderr
    assert not (out / "model.safetensors").exists()


@multiprocess
@distributed
@pytest.mark.parametrize("variant", [{"use_dora": True}, {"init_lora_weights": "pissa"},
                                     {"init_lora_weights": "olora"}], ids=["dora", "pissa", "olora"])
def test_lora_variants_that_read_the_weights_stop_under_zero3_in_one_line(world, tmp_path, variant):
    """DoRA (its magnitude vector is the norm of each adapted weight) and PiSSA / OLoRA (an SVD / QR of each adapted
    weight, subtracted from it) read whole weights when PEFT builds the adapter, which ZeRO-3 holds partitioned
    across the processes then (zero.Init): yunshan.training.models.apply_lora refuses them before the first step
    with one line and no traceback, and nothing is written. Each process refuses; the launcher stops the others as
    soon as the first has exited, so under load the second may be stopped before it has printed its line (seen with
    olora in make test-distributed: one line of two)."""
    recipe, out = engine_recipe(world, tmp_path, cpt_recipe, "zero3", lora={**LORA, **variant},
                                monitor={"every_steps": 0})
    result = subprocess.run(launch_command("zero3", "cpt", recipe), cwd=ROOT, capture_output=True, text=True,
                            timeout=900, start_new_session=True)
    assert result.returncode != 0, result.stdout[-3000:]
    errors = [line for line in result.stderr.splitlines() if "yunshan cpt: error:" in line]
    assert 1 <= len(errors) <= 2, result.stderr[-3000:]
    assert all(line.endswith("lora: use_dora and init_lora_weights pissa/olora read every adapted weight when the "
                             "adapter is built, and DeepSpeed ZeRO-3 holds the weights partitioned then; train these "
                             "variants in one process, with DDP, ZeRO-2 or FSDP") for line in errors), errors
    # The launcher (torchrun) reports its failed children with a traceback of its own; none comes from yunshan.
    assert not re.search(r'File "[^"]*/yunshan/', result.stderr), result.stderr[-3000:]
    assert not (out / "model.safetensors").exists()


# The GPU launch config of each CPU one, and the keys in which the two may differ (hardware: process count, GPU ids,
# mixed precision; the DeepSpeed ZeRO-3 JSON files, compared below).
PAIRS = {"ddp_cpu.yaml": "ddp.yaml", "deepspeed_zero2_cpu.yaml": "deepspeed_zero2.yaml",
         "deepspeed_zero3_cpu.yaml": "deepspeed_zero3.yaml", "fsdp_cpu.yaml": "fsdp.yaml"}
HARDWARE_KEYS = {"num_processes", "gpu_ids", "mixed_precision"}


def test_cpu_launch_configs_differ_from_the_gpu_ones_only_in_what_the_hardware_needs():
    """Every launch config loads with accelerate's own reader; each CPU config the tests use is its GPU config with
    only the process count, GPU ids and mixed precision changed (ZeRO-3: and DeepSpeed's persistence threshold, so
    that tiny models are partitioned)."""
    import json as json_module

    from accelerate.commands.config.config_args import load_config_from_file

    folder = ROOT / "recipes/accelerate"
    assert {p.name for p in folder.glob("*.yaml")} == {*PAIRS, *PAIRS.values()}
    for cpu, gpu in PAIRS.items():
        assert load_config_from_file(str(folder / cpu)).num_processes == 2
        assert load_config_from_file(str(folder / gpu)).num_processes == 8
        a, b = yaml.safe_load((folder / cpu).read_text()), yaml.safe_load((folder / gpu).read_text())
        differing = {k for k in a.keys() | b.keys() if a.get(k) != b.get(k)}
        if "deepspeed_config" in differing:
            ds_cpu, ds_gpu = a["deepspeed_config"], b["deepspeed_config"]
            assert {k for k in ds_cpu.keys() | ds_gpu.keys() if ds_cpu.get(k) != ds_gpu.get(k)} == {
                "deepspeed_config_file"}
            files = [json_module.loads((ROOT / c["deepspeed_config_file"]).read_text()) for c in (ds_cpu, ds_gpu)]
            assert files[0]["zero_optimization"].pop("stage3_param_persistence_threshold") == 0
            assert files[0] == files[1]
            differing.remove("deepspeed_config")
        assert differing <= HARDWARE_KEYS, (cpu, differing)
