"""One lock per output folder (yunshan.io.folder_lock, issue 27 item 3): a second command writing a folder in use stops
in one line before it touches anything, for every command that writes a folder; a lock left by a killed run is
taken over with a note; two runs that find the same stale lock do not both take it."""

import json
import multiprocessing
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from fixtures import train_tokenizer, write_jsonl_corpus
from yunshan.cli import main
from yunshan.io.folder_lock import FolderInUse, folder_lock, lock_path

HOLDER = ("import sys, time\n"
          "from yunshan.io.folder_lock import folder_lock\n"
          "with folder_lock(sys.argv[1], 'test'):\n"
          "    print('held', flush=True)\n"
          "    time.sleep(600)\n")


class Holder:
    """Another process holding the lock of `folder` (a real owner: its pid, host and start are in the file)."""

    def __init__(self, folder: Path):
        self.proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(folder)], stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "held"

    def kill(self) -> None:
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if self.proc.poll() is None:
            self.kill()


def one_line_error(capsys, command: str) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"yunshan {command}: error: ") and "Traceback" not in err, err
    return err


def test_a_live_lock_refuses_and_a_killed_owners_lock_is_taken_over(tmp_path):
    folder = tmp_path / "runs" / "cpt"
    with Holder(folder) as holder:
        owner = json.loads(lock_path(folder).read_text())
        assert owner["pid"] == holder.proc.pid and owner["host"] == socket.gethostname()
        with pytest.raises(FolderInUse) as refused:
            with folder_lock(folder, "training.output_dir"):
                raise AssertionError("entered a folder in use")
        message = str(refused.value)
        assert "\n" not in message and f"pid {holder.proc.pid} on {socket.gethostname()}" in message
        assert str(lock_path(folder)) in message
        assert not folder.exists()  # nothing was touched
        holder.kill()
    notes = []
    with folder_lock(folder, "training.output_dir", log=notes.append):
        assert json.loads(lock_path(folder).read_text())["pid"] == os.getpid()
        with folder_lock(folder, "training.output_dir"):  # the same process again: not a second run
            pass
        assert lock_path(folder).exists()
    assert len(notes) == 1 and f"left by pid {holder.proc.pid}" in notes[0] and "took over" in notes[0]
    assert not lock_path(folder).exists()


def test_two_names_of_one_folder_share_the_lock(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert lock_path(tmp_path / "link") == lock_path(tmp_path / "real") == tmp_path / ".real.lock"
    assert lock_path(tmp_path / "real" / ".." / "real") == tmp_path / ".real.lock"


def test_a_reused_pid_a_reboot_and_an_empty_file_are_stale_another_host_is_not(tmp_path):
    folder = tmp_path / "out"
    path = lock_path(folder)
    with folder_lock(folder, "--out"):
        mine = json.loads(path.read_text())
    for changes in ({"process_start": (mine["process_start"] or 0) + 1, "pid": os.getppid()},  # pid now another's
                    {"boot_id": "another-boot", "pid": os.getppid(), "process_start": None}, {"pid": 0}):
        path.write_text(json.dumps({**mine, "token": "x", **changes}))
        notes = []
        with folder_lock(folder, "--out", log=notes.append):
            pass
        assert len(notes) == 1, changes
    path.write_text("")
    os.utime(path, (time.time() - 60, time.time() - 60))
    with folder_lock(folder, "--out", log=notes.append):
        pass
    assert "empty or damaged" in notes[-1]
    path.write_text(json.dumps({**mine, "token": "x", "host": "elsewhere.example"}))
    with pytest.raises(FolderInUse, match="runs on another host, so this one cannot check it: if that run has ended, "
                                          f"remove {path}"):
        with folder_lock(folder, "--out"):
            pass
    assert path.exists()


def _take(folder: str, results, start) -> None:
    start.wait()
    try:
        with folder_lock(folder, "--out", log=lambda *_: None):
            results.put("held")
            time.sleep(1.0)
    except FolderInUse:
        results.put("refused")


def test_processes_racing_for_a_stale_lock_take_it_once(tmp_path):
    folder = tmp_path / "out"
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    lock_path(folder).parent.mkdir(parents=True, exist_ok=True)
    lock_path(folder).write_text(json.dumps({"pid": dead.pid, "host": socket.gethostname(), "token": "old"}))
    ctx = multiprocessing.get_context("fork")
    results, start = ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=_take, args=(str(folder), results, start)) for _ in range(4)]
    for p in procs:
        p.start()
    start.set()
    for p in procs:
        p.join(60)
    outcomes = sorted(results.get(timeout=5) for _ in procs)
    assert outcomes == ["held", "refused", "refused", "refused"]
    assert not lock_path(folder).exists()


# ---------------------------------------------------------------- every command that writes a folder


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    root = tmp_path_factory.mktemp("lock")
    corpus = write_jsonl_corpus(root / "corpus.jsonl", 60, 20, 60, seed=2)
    train_tokenizer(root / "tok")
    recipe = {
        "model": {"preset": "tiny", "config_overrides": {"hidden_size": 32, "intermediate_size": 64,
                                                         "num_hidden_layers": 2, "aug_reduction": 4}},
        "tokenizer": {"path": str(root / "tok")},
        "data": {"seq_len": 64, "block_size": 64, "sources": [{"name": "mid", "path": str(corpus)}]},
        "training": {"output_dir": str(root / "run"), "max_steps": 2, "per_device_batch_size": 2, "save_steps": 1},
    }
    (root / "cpt.yaml").write_text(yaml.safe_dump(recipe))
    sft = {"model": {"name_or_path": str(root / "model")}, "training": {"output_dir": str(root / "sft")}}
    (root / "sft.yaml").write_text(yaml.safe_dump(sft))
    pairs = root / "pairs.jsonl"
    pairs.write_text('{"prompt": "a", "chosen": "b", "rejected": "c"}\n')
    pref = {"model": {"name_or_path": str(root / "model")}, "training": {"output_dir": str(root / "pref")},
            "data": {"sources": [{"name": "p", "path": str(pairs), "format": "pairs"}]}}
    (root / "pref.yaml").write_text(yaml.safe_dump(pref))
    (root / "model.gguf").write_bytes(b"GGUF")
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(vocab_size=400, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                 num_attention_heads=4, num_key_value_heads=2)).save_pretrained(root / "model")
    train_tokenizer(root / "model")
    return root, corpus


def test_every_command_that_writes_a_folder_stops_in_one_line_before_touching_it(inputs, tmp_path, capsys):
    root, corpus = inputs
    out = tmp_path / "out"
    commands = {
        "cpt": ["cpt", "--config", str(root / "cpt.yaml"), f"training.output_dir={out}"],
        "sft": ["sft", "--config", str(root / "sft.yaml"), f"training.output_dir={out}"],
        "pref": ["pref", "--config", str(root / "pref.yaml"), f"training.output_dir={out}"],
        "run": ["run", "recipes/demo_tiny.yaml", f"output_dir={out}"],
        "eval": ["eval", "--model", str(root / "tok"), "--tasks", "compression", "--out", str(out)],
        "export": ["export", str(root / "model"), "--out", str(out)],
        "tokenizer": ["tokenizer", "extend", "--base", str(root / "tok"), "--corpus", str(corpus), "--new-tokens",
                      "5", "--out", str(out)],
        "model": ["model", "import-gguf", str(root / "model.gguf"), str(out)],
        "data": ["data", "decontaminate", str(corpus), "--tasks", "fineval", "--out", str(out)],
    }
    here = Path(__file__).resolve().parents[1]
    with Holder(out):
        for command, argv in commands.items():
            cwd = os.getcwd()
            os.chdir(here)
            try:
                assert main(argv) == 1, command
            finally:
                os.chdir(cwd)
            err = one_line_error(capsys, command)
            assert f"{out} is in use by another yunshan run" in err, err
            assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == [".out.lock"], command


def test_a_second_cpt_on_a_running_folder_stops_and_the_first_finishes(inputs, tmp_path, capsys):
    """The issue's case: two `yunshan cpt` on one output_dir at once. The second stops in one line before touching
    anything (the first's recipe.yaml stays), the first finishes as if alone and releases the lock."""
    root, _ = inputs
    out = tmp_path / "run"
    first = [sys.executable, "-m", "yunshan.cli", "cpt", "--config", str(root / "cpt.yaml"),
             f"training.output_dir={out}", "training.max_steps=6"]
    proc = subprocess.Popen(first, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 300
    while not (out / "checkpoints/checkpoint-1/COMPLETE").exists():
        assert proc.poll() is None and time.time() < deadline, proc.stdout.read()[-3000:]
        time.sleep(0.05)
    proc.send_signal(signal.SIGSTOP)  # held mid-run while the second starts, however fast this machine is
    recipe_before = (out / "recipe.yaml").read_bytes()
    try:  # the second in this process (the same `main` as the command line): one interpreter start fewer
        capsys.readouterr()
        code = main([*first[3:-1], "training.max_steps=12"])
        err = capsys.readouterr().err
    finally:
        proc.send_signal(signal.SIGCONT)
    assert code == 1
    assert err.count("\n") == 1 and "is in use by another yunshan run" in err, err
    assert f"pid {proc.pid}" in err
    assert (out / "recipe.yaml").read_bytes() == recipe_before
    assert proc.wait(timeout=300) == 0, proc.stdout.read()[-3000:]
    assert yaml.safe_load((out / "recipe.yaml").read_text())["training"]["max_steps"] == 6
    assert json.loads((out / "yunshan_complete.json").read_text())["step"] == 6
    assert not lock_path(out).exists()
