"""Folders and files the system refuses end in one line naming the file, never a traceback (yunshan.io.folders and
the CLI): an output path through a file or without write permission, a model folder that does not exist, a
damaged tokenizer.json or config.json, a corrupt compressed corpus."""

import gzip
import json
import os

import pytest
import yaml

from fixtures import train_tokenizer, write_jsonl_corpus
from yunshan.cli import main


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    root = tmp_path_factory.mktemp("folders")
    files = {"mid": write_jsonl_corpus(root / "mid.jsonl", 60, 20, 60, seed=2)}
    train_tokenizer(root / "tok")
    return root, files


def cpt_recipe(setup, tmp_path, **changes) -> str:
    root, files = setup
    data = {
        "model": {"preset": "tiny", "config_overrides": {"hidden_size": 32, "intermediate_size": 64,
                                                         "num_hidden_layers": 2, "aug_reduction": 4}},
        "tokenizer": {"path": str(root / "tok")},
        "data": {"seq_len": 64, "block_size": 64, "sources": [{"name": "mid", "path": str(files["mid"])}]},
        "training": {"output_dir": str(tmp_path / "run"), "max_steps": 1, "per_device_batch_size": 2},
    }
    for dotted, value in changes.items():
        section, key = dotted.split(".")
        data[section][key] = value
    path = tmp_path / "recipe.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def one_line_error(capsys, command: str) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"yunshan {command}: error: ") and "Traceback" not in err, err
    return err


def test_an_output_folder_through_a_file_is_one_line_before_any_work(setup, tmp_path, capsys):
    plain = tmp_path / "plain"
    plain.write_text("x")
    assert main(["cpt", "--config", cpt_recipe(setup, tmp_path), f"training.output_dir={plain}/run"]) == 1
    assert f"training.output_dir: {plain}/run is inside {plain}, which is a file" in one_line_error(capsys, "cpt")
    assert main(["cpt", "--config", cpt_recipe(setup, tmp_path), f"training.output_dir={plain}"]) == 1
    assert f"training.output_dir: {plain} is a file" in one_line_error(capsys, "cpt")
    root, files = setup
    assert main(["tokenizer", "extend", "--base", str(root / "tok"), "--corpus", str(files["mid"]),
                 "--new-tokens", "5", "--out", str(plain / "tok")]) == 1
    assert f"--out: {plain / 'tok'} is inside {plain}, which is a file" in one_line_error(capsys, "tokenizer")


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write into any folder, so no folder is unwritable")
def test_an_unwritable_output_folder_is_one_line(setup, tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    assert main(["cpt", "--config", cpt_recipe(setup, tmp_path), f"training.output_dir={locked}/run"]) == 1
    assert f"cannot write into {locked}" in one_line_error(capsys, "cpt")


def test_os_errors_from_anywhere_are_one_line_naming_the_file(tmp_path, capsys, monkeypatch):
    """Whatever OSError escapes a command (here: a folder where a file is expected) is 'file: reason'."""
    import yunshan.tokenizer.commands as commands

    def refuse(args):
        open(tmp_path, "rb")

    monkeypatch.setattr(commands, "run", refuse)
    assert main(["tokenizer", "report", "--tokenizer", "x", "--text", "y"]) == 1
    assert one_line_error(capsys, "tokenizer").endswith(f"error: {tmp_path}: Is a directory\n")


def test_a_model_folder_that_does_not_exist_is_one_line(setup, tmp_path, capsys):
    recipe = cpt_recipe(setup, tmp_path, **{"model.preset": None})
    # transformers alone: "Repo id must be ..." / a hub connection error; yunshan.loading.hub_download names the field
    assert main(["cpt", "--config", recipe, "model.name_or_path=/nonexistent/model"]) == 1
    err = one_line_error(capsys, "cpt")
    assert "model.name_or_path: /nonexistent/model: no such folder (and not a Hub id ORG/NAME)" in err
    assert main(["cpt", "--config", recipe, "model.name_or_path=org/name"]) == 1  # offline: not in the HF cache
    err = one_line_error(capsys, "cpt")
    assert "model.name_or_path: org/name is not a local folder and not in the Hugging Face cache" in err
    assert "`hf download org/name`" in err


@pytest.mark.parametrize("junk, expected", [
    ("{}", "tokenizer.json: transformers cannot load this tokenizer (KeyError: 'added_tokens')"),
    ('{"version": "1.0", "trunc', "tokenizer.json:1: not valid JSON (Unterminated string"),
    ("[1, 2]", "tokenizer.json: expected a JSON object, found a list"),
    (json.dumps({"version": "1.0", "added_tokens": [], "model": {"type": "BPE", "vocab": 5}}),
     "tokenizer.json: transformers cannot load this tokenizer (Exception: invalid type: integer `5`"),
])
def test_a_damaged_tokenizer_json_is_one_line_naming_it(setup, tmp_path, capsys, junk, expected):
    root, _ = setup
    damaged = tmp_path / "tok"
    damaged.mkdir()
    (damaged / "tokenizer_config.json").write_bytes((root / "tok" / "tokenizer_config.json").read_bytes())
    (damaged / "tokenizer.json").write_text(junk)
    assert main(["cpt", "--config", cpt_recipe(setup, tmp_path), f"tokenizer.path={damaged}", "--dry-run"]) == 1
    assert f"{damaged}/{expected}" in one_line_error(capsys, "cpt")
    assert main(["eval", "--model", str(damaged), "--tasks", "compression", "--text", str(setup[1]["mid"]),
                 "--out", str(tmp_path / "eval")]) == 1
    assert f"{damaged}/{expected}" in one_line_error(capsys, "eval")


def test_a_damaged_config_json_is_one_line_naming_it(setup, tmp_path, capsys):
    root, _ = setup
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"model_type": "llama",\n "hidden_size": }')
    recipe = cpt_recipe(setup, tmp_path, **{"model.preset": None})
    assert main(["cpt", "--config", recipe, f"model.name_or_path={model}"]) == 1
    assert f"{model}/config.json:2: not valid JSON" in one_line_error(capsys, "cpt")


def test_a_corrupt_compressed_corpus_is_one_line_or_counted(setup, tmp_path, capsys):
    _, files = setup
    data = gzip.compress(files["mid"].read_bytes())
    cut = tmp_path / "mid.jsonl.gz"
    cut.write_bytes(data[: len(data) // 3])
    recipe = cpt_recipe(setup, tmp_path, **{"data.sources": [{"name": "mid", "path": str(cut)}]})
    assert main(["cpt", "--config", recipe, "--dry-run"]) == 1
    err = one_line_error(capsys, "cpt")
    assert f"source 'mid': {cut}:" in err and "corrupt_file (the gz stream breaks off" in err


# ---------------------------------------------------------------- replacing a whole output folder


def test_replace_folder_swaps_in_the_new_folder_and_removes_the_old(tmp_path):
    from yunshan.io.folders import replace_folder

    out, new = tmp_path / "out", tmp_path / ".out.partial"
    out.mkdir()
    (out / "a.txt").write_text("old")
    new.mkdir()
    (new / "b.txt").write_text("new")
    replace_folder(new, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no old copy, no partial folder left
    assert [p.name for p in out.iterdir()] == ["b.txt"] and (out / "b.txt").read_text() == "new"
    replace_folder(_folder(tmp_path / ".again", "c.txt"), tmp_path / "fresh")  # nothing there before
    assert [p.name for p in (tmp_path / "fresh").iterdir()] == ["c.txt"]


def _folder(path, name):
    path.mkdir()
    (path / name).write_text(name)
    return path


def test_replace_folder_rolls_back_when_the_new_folder_cannot_be_put_in_place(tmp_path, monkeypatch):
    from yunshan.io import folders

    out = _folder(tmp_path / "out", "keep.txt")
    new = _folder(tmp_path / ".out.partial", "new.txt")
    real_rename = os.rename

    def rename(src, dst):
        if os.fspath(src) == os.fspath(new):
            raise OSError(28, "No space left on device")
        return real_rename(src, dst)

    monkeypatch.setattr(folders.os, "rename", rename)
    with pytest.raises(OSError, match="No space left"):
        folders.replace_folder(new, out)
    # The old folder is back at `out`, as it was; the new one is left for the caller to remove.
    assert [p.name for p in out.iterdir()] == ["keep.txt"] and (out / "keep.txt").read_text() == "keep.txt"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".out.partial", "out"]


def test_a_staged_folder_replaces_out_only_when_its_block_succeeds(tmp_path):
    from yunshan.io.folders import staged_folder

    out = _folder(tmp_path / "out", "old.txt")
    with pytest.raises(RuntimeError, match="half-way"):
        with staged_folder(out) as tmp:
            (tmp / "new.txt").write_text("new")
            raise RuntimeError("failed half-way")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"] and [p.name for p in out.iterdir()] == ["old.txt"]
    with staged_folder(out) as tmp:
        assert tmp.parent == tmp_path and tmp.name.startswith(".out.partial-")
        assert oct(tmp.stat().st_mode & 0o777) == oct(0o777 & ~_umask())  # a folder's usual mode, not 0700
        (tmp / "new.txt").write_text("new")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"] and [p.name for p in out.iterdir()] == ["new.txt"]


def test_a_staged_folders_files_get_the_users_umask(tmp_path):
    """A file written private (safetensors writes 0600) gets 0666 less the umask, an executable 0777 less the umask;
    the umask itself is unchanged."""
    from fixtures import file_modes, umask

    from yunshan.io.folders import staged_folder

    with umask(0o027):
        with staged_folder(tmp_path / "out") as tmp:
            for name, mode in (("model.safetensors", 0o600), ("run.sh", 0o700), ("sub/open.json", 0o666)):
                (tmp / name).parent.mkdir(exist_ok=True)
                (tmp / name).write_text("x")
                (tmp / name).chmod(mode)
        assert _umask() == 0o027
    assert file_modes(tmp_path / "out") == {"model.safetensors": 0o640, "run.sh": 0o750, "sub/open.json": 0o640}


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask
