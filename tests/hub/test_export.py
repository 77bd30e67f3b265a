"""`yunshan export`: the export loads where yunshan cannot be imported and gives the same logits (merged PanGu-π
from a run, sharded; LoRA adapter on its base; a plain Llama; code written from the package), the card's usage
code runs, shards match transformers' own, dtype conversion is exact, and a failed export leaves --out alone."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from yunshan.cli import main
from yunshan.hub.export import export_model


def tensors(folder: Path, prefix: str = "model") -> dict[str, torch.Tensor]:
    out = {}
    for path in sorted(folder.glob(f"{prefix}*.safetensors")):
        out.update(load_file(path))
    return out


def load_local(folder: Path):
    from transformers import AutoModelForCausalLM

    import yunshan  # noqa: F401

    return AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()


@pytest.fixture(scope="module")
def exports(run_dir, run_export, llama_dir, tmp_path_factory):
    root = tmp_path_factory.mktemp("exports-more")
    # A model folder whose code files and auto_map were lost: export writes them from the installed package.
    bare = root / "bare-cpt"
    shutil.copytree(run_dir / "03_cpt", bare)
    for py in bare.glob("*.py"):
        py.unlink()
    config = json.loads((bare / "config.json").read_text())
    del config["auto_map"]
    (bare / "config.json").write_text(json.dumps(config))
    return {
        "run": run_export,
        "adapter": Path(export_model(run_dir, root / "adapter", adapter=True, base_model="org/tiny-cpt",
                                     license="apache-2.0")["out"]),
        "llama": Path(export_model(llama_dir, root / "llama", license="mit", language=["en"])["out"]),
        "llama_bf16": Path(export_model(llama_dir, root / "llama-bf16", dtype="bfloat16", license="mit")["out"]),
        "package_code": Path(export_model(bare, root / "package-code", license="mit")["out"]),
    }


@pytest.fixture(scope="module")
def remote(exports, run_dir, tmp_path_factory):
    """One fresh interpreter in which `import yunshan` fails loads every export and runs the card's usage code."""
    work = tmp_path_factory.mktemp("remote")
    ids = torch.randint(3, 300, (2, 12))
    torch.save(ids, work / "ids.pt")
    usage = re.search(r"```python\n(.*?)```", (exports["run"] / "README.md").read_text(encoding="utf-8"), re.S)
    (work / "usage.py").write_text(usage.group(1).replace("org/yunshan-tiny", str(exports["run"])))
    script = textwrap.dedent(f"""
        import json, runpy, sys
        sys.modules["yunshan"] = None  # any `import yunshan` now raises ImportError
        import torch
        from peft import PeftModel
        from transformers import AutoModelForCausalLM
        ids = torch.load({str(work / "ids.pt")!r}, weights_only=True)
        out, kinds = {{}}, {{}}
        def load(path, **kw):
            return AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32, **kw).eval()
        for name in ("run", "package_code"):
            model = load({json.dumps({k: str(v) for k, v in exports.items()})}[name], trust_remote_code=True)
            kinds[name] = type(model).__module__
            out[name] = model(ids).logits
        base = load({str(run_dir / "03_cpt")!r}, trust_remote_code=True)
        out["adapter"] = PeftModel.from_pretrained(base, {str(exports["adapter"])!r}).eval()(ids).logits
        model = load({str(exports["llama"])!r})
        kinds["llama"] = type(model).__module__
        out["llama"] = model(ids).logits
        torch.save(out, {str(work / "logits.pt")!r})
        print("KINDS", json.dumps(kinds))
        runpy.run_path({str(work / "usage.py")!r})
        print("USAGE_DONE")
    """)
    env = {**os.environ, "PYTHONPATH": "", "HF_MODULES_CACHE": str(work / "modules"), "HF_HUB_OFFLINE": "1"}
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=work, env=env,
                            timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    return {"ids": ids, "logits": torch.load(work / "logits.pt", weights_only=True), "stdout": result.stdout}


def test_run_export_holds_exactly_the_model_files(run_export, run_dir):
    from yunshan.hub.export import EXPORT_MARKER

    names = sorted(p.name for p in run_export.iterdir() if p.name != EXPORT_MARKER)
    assert sorted(json.loads((run_export / EXPORT_MARKER).read_text())["files"]) == names
    shards = [n for n in names if re.fullmatch(r"model-\d{5}-of-\d{5}\.safetensors", n)]
    assert len(shards) >= 3  # 60KB shards of a ~200KB model
    assert sorted(set(names) - set(shards)) == [
        "README.md", "chat_template.jinja", "config.json", "configuration_pangu_pi.py", "generation_config.json",
        "model.safetensors.index.json", "modeling_pangu_pi.py", "recipe.yaml", "tokenizer.json",
        "tokenizer_config.json"]
    config = json.loads((run_export / "config.json").read_text())
    assert config["auto_map"] == json.loads((run_dir / "04_sft" / "config.json").read_text())["auto_map"]
    for name in ("modeling_pangu_pi.py", "configuration_pangu_pi.py", "chat_template.jinja", "generation_config.json"):
        assert (run_export / name).read_bytes() == (run_dir / "04_sft" / name).read_bytes()
    index = json.loads((run_export / "model.safetensors.index.json").read_text())
    assert set(index["weight_map"].values()) == set(shards)
    # Every tensor, bit for bit, and nothing else.
    source, exported = tensors(run_dir / "04_sft"), tensors(run_export)
    assert set(source) == set(exported) == set(index["weight_map"])
    assert all(torch.equal(source[k], exported[k]) for k in source)


def test_exports_load_without_yunshan_and_give_the_same_logits(remote, exports, run_dir, llama_dir):
    ids, logits = remote["ids"], remote["logits"]
    kinds = json.loads(remote["stdout"].split("KINDS ", 1)[1].splitlines()[0])
    assert kinds["run"].startswith("transformers_modules.") and kinds["run"].endswith(".modeling_pangu_pi")
    assert kinds["package_code"].startswith("transformers_modules.")
    assert kinds["llama"] == "transformers.models.llama.modeling_llama"
    with torch.no_grad():
        merged = load_local(run_dir / "04_sft")(ids).logits
        cpt = load_local(run_dir / "03_cpt")(ids).logits
        llama = load_local(llama_dir)(ids).logits
    assert torch.equal(logits["run"], merged)
    assert torch.equal(logits["package_code"], cpt)
    assert torch.equal(logits["llama"], llama)
    # Base + adapter equals the merged weights up to the float error of merging.
    torch.testing.assert_close(logits["adapter"], merged, atol=1e-5, rtol=1e-5)
    assert not torch.allclose(cpt, merged, atol=1e-4)  # the adapter does change the model
    # The card's usage code ran as written (the repo id replaced by the folder): load, chat template, generate.
    assert remote["stdout"].rstrip().endswith("USAGE_DONE")


def test_code_is_written_from_the_package_when_the_folder_lost_it(exports):
    folder = exports["package_code"]
    config = json.loads((folder / "config.json").read_text())
    assert config["auto_map"] == {"AutoConfig": "configuration_pangu_pi.PanguPiConfig",
                                  "AutoModel": "modeling_pangu_pi.PanguPiModel",
                                  "AutoModelForCausalLM": "modeling_pangu_pi.PanguPiForCausalLM"}
    import yunshan.models.pangu_pi.modeling_pangu_pi as modeling

    assert (folder / "modeling_pangu_pi.py").read_text() == Path(modeling.__file__).read_text()


def test_plain_transformers_architecture_needs_no_code(exports, llama_dir):
    folder = exports["llama"]
    assert not list(folder.glob("*.py"))
    assert "auto_map" not in json.loads((folder / "config.json").read_text())
    # One file under the shard size and already laid out as planned: copied byte for byte.
    assert (folder / "model.safetensors").read_bytes() == (llama_dir / "model.safetensors").read_bytes()
    card = (folder / "README.md").read_text()
    assert "trust_remote_code" not in card and "license: mit" in card


def test_shards_are_laid_out_as_save_pretrained_lays_out_the_model_in_memory(tmp_path):
    """Module order (embed, layer 0, ..., layer 11, norm, head), so a shard holds consecutive layers."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from fixtures import train_tokenizer

    model = LlamaForCausalLM(LlamaConfig(vocab_size=300, hidden_size=16, intermediate_size=32, num_hidden_layers=12,
                                         num_attention_heads=2, num_key_value_heads=1))
    model.save_pretrained(tmp_path / "src")
    train_tokenizer(tmp_path / "src", vocab_size=300)
    model.save_pretrained(tmp_path / "reference", max_shard_size="10KB")
    export_model(tmp_path / "src", tmp_path / "out", max_shard_size="10KB", license="mit")
    ours = json.loads((tmp_path / "out" / "model.safetensors.index.json").read_text())
    theirs = json.loads((tmp_path / "reference" / "model.safetensors.index.json").read_text())
    assert ours == theirs and len(set(ours["weight_map"].values())) > 10
    for shard in set(ours["weight_map"].values()):
        a, b = load_file(tmp_path / "out" / shard), load_file(tmp_path / "reference" / shard)
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    # And back to one file: the same tensors.
    export_model(tmp_path / "out", tmp_path / "single", license="mit")
    single = load_file(tmp_path / "single" / "model.safetensors")
    assert not (tmp_path / "single" / "model.safetensors.index.json").exists()
    assert all(torch.equal(single[k], v) for k, v in tensors(tmp_path / "src").items())


def test_dtype_conversion_is_exact_and_recorded(exports, llama_dir):
    source, converted = tensors(llama_dir), tensors(exports["llama_bf16"])
    assert all(converted[k].dtype == torch.bfloat16 and torch.equal(converted[k], v.to(torch.bfloat16))
               for k, v in source.items())
    assert json.loads((exports["llama_bf16"] / "config.json").read_text())["dtype"] == "bfloat16"
    assert "| weights | bfloat16 safetensors, 1 file |" in (exports["llama_bf16"] / "README.md").read_text()


def test_adapter_export(exports, run_dir):
    folder = exports["adapter"]
    assert sorted(p.name for p in folder.iterdir()) == [
        ".yunshan_export.json", "README.md", "adapter_config.json", "adapter_model.safetensors", "chat_template.jinja",
        "generation_config.json", "recipe.yaml", "tokenizer.json", "tokenizer_config.json"]
    assert (folder / "adapter_model.safetensors").read_bytes() == (
        run_dir / "04_sft" / "adapter" / "adapter_model.safetensors").read_bytes()
    config = json.loads((folder / "adapter_config.json").read_text())
    assert config["base_model_name_or_path"] == "org/tiny-cpt"
    source = json.loads((run_dir / "04_sft" / "adapter" / "adapter_config.json").read_text())
    assert {k: v for k, v in config.items() if k != "base_model_name_or_path"} == {
        k: v for k, v in source.items() if k != "base_model_name_or_path"}
    card = (folder / "README.md").read_text()
    assert "library_name: peft" in card and "base_model: org/tiny-cpt" in card
    assert "base_model_relation: adapter" in card and "PeftModel.from_pretrained" in card


def test_adapter_export_needs_a_base_on_the_hub(run_dir, llama_dir, tmp_path):
    with pytest.raises(ValueError, match=r"not a Hub model.*--base-model ORG/NAME"):
        export_model(run_dir, tmp_path / "a", adapter=True)
    with pytest.raises(ValueError, match="trained without LoRA"):
        export_model(llama_dir, tmp_path / "b", adapter=True)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_a_failed_export_leaves_out_untouched(run_dir, tmp_path, monkeypatch):
    import yunshan.hub.export

    out = tmp_path / "published"
    export_model(run_dir, out, license="mit")
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def broken(*args):
        raise RuntimeError("export check: simulated failure")

    monkeypatch.setattr(yunshan.hub.export, "check_tokenizer", broken)
    with pytest.raises(RuntimeError, match="simulated failure"):
        export_model(run_dir, out, overwrite=True, license="apache-2.0")
    with pytest.raises(RuntimeError, match="simulated failure"):
        export_model(run_dir, tmp_path / "new", license="mit")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["published"]  # no partial folder left behind


def test_an_existing_out_needs_overwrite(run_dir, tmp_path):
    out = tmp_path / "out"
    export_model(run_dir, out, license="mit")
    with pytest.raises(ValueError, match="already exists; pass --overwrite"):
        export_model(run_dir, out, license="mit")
    (out / "README.md").write_text("stale card")
    export_model(run_dir, out, license="mit", overwrite=True)
    assert (out / "README.md").read_text() != "stale card"
    assert oct(out.stat().st_mode & 0o777) == oct(0o777 & ~_umask())
    assert all(oct(p.stat().st_mode & 0o666) == oct(0o666 & ~_umask()) for p in out.iterdir())


def test_overwrite_removes_only_a_previous_export(run_dir, tmp_path, capsys):
    """--overwrite never deletes the source, a folder holding it, a plain file, or a folder (even a previous export)
    holding files yunshan export did not write: each is refused in one line and left as it was."""
    parent = tmp_path / "parent"
    run = parent / "run"
    shutil.copytree(run_dir, run)
    (parent / "notes.txt").write_text("the user's own file")
    plain = tmp_path / "model.bin"
    plain.write_bytes(b"not a folder")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "draft.md").write_text("a folder of the user's")
    previous = tmp_path / "previous"
    export_model(run_dir, previous, license="mit")
    (previous / "extra.txt").write_text("added by hand after the export")

    def snapshot():
        return {p: p.read_bytes() for root in (parent, plain, mine, previous)
                for p in ([root] if root.is_file() else root.rglob("*")) if p.is_file()}

    before = snapshot()
    for out, message in [(parent, "contains the source"), (run, "contains the source"),
                         (run / "04_sft", "inside the model folder"), (plain, "is a file"),
                         (mine, "not a folder written by yunshan export"),
                         (previous, "extra.txt, which yunshan export did not write")]:
        assert main(["export", str(run), "--out", str(out), "--overwrite", "--license", "mit"]) == 1, out
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, (out, err)
    assert snapshot() == before
    (previous / "extra.txt").unlink()
    assert main(["export", str(run), "--out", str(previous), "--overwrite", "--license", "apache-2.0"]) == 0
    assert "license: apache-2.0" in (previous / "README.md").read_text()


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_cli(run_dir, tmp_path, capsys):
    assert main(["export", str(run_dir), "--out", str(tmp_path / "e"), "--license", "apache-2.0", "--language",
                 "zh", "en", "--tag", "banking", "--repo-id", "org/yunshan-tiny"]) == 0
    printed = capsys.readouterr().out
    assert f"-> {tmp_path / 'e'}" in printed and "model.safetensors" in printed
    assert "- banking" in (tmp_path / "e" / "README.md").read_text()
    for argv, message in [
        (["--license", "apache"], "is not a Hub license id"),
        (["--max-shard-size", "2 gigs"], "--max-shard-size '2 gigs'"),
        (["--language", "Chinese"], "not an ISO 639"),
        (["--license", "other"], "--license other needs --license-name"),
    ]:
        assert main(["export", str(run_dir), "--out", str(tmp_path / "f"), *argv]) == 1
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1
    assert not (tmp_path / "f").exists()


def test_a_symlinked_out_is_written_through(run_dir, tmp_path):
    """Issue 27 item 5: --out that is a symbolic link to a folder: the export replaces the folder the link points to
    and the link stays (before, the link was renamed aside and a real folder put in its place, the target keeping
    the old export even with --overwrite)."""
    real, link = tmp_path / "exports" / "v1", tmp_path / "current"
    export_model(run_dir, real, license="mit")
    link.symlink_to(real, target_is_directory=True)
    export_model(run_dir, link, license="apache-2.0", overwrite=True)
    assert link.is_symlink() and link.resolve() == real.resolve()
    assert "license: apache-2.0" in (real / "README.md").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["current", "exports"]
    assert sorted(p.name for p in real.parent.iterdir()) == ["v1"]
    dangling = tmp_path / "dangling"
    dangling.symlink_to(tmp_path / "exports" / "v2", target_is_directory=True)
    export_model(run_dir, dangling, license="mit")  # a link to a folder still to be made: made there
    assert dangling.is_symlink() and (tmp_path / "exports" / "v2" / "model.safetensors").is_file()


def test_a_killed_export_leaves_nothing_for_the_next_one_to_trip_on(run_dir, tmp_path):
    """Issue 27 item 6: an export SIGKILLed while it writes leaves its hidden .OUT.partial-PID-* folder; the next
    export to that --out removes it. A kill between the two renames of the swap leaves the old export aside, and the
    next export puts it back first."""
    import signal
    import subprocess
    import sys
    import time

    out = tmp_path / "published"
    proc = subprocess.Popen([sys.executable, "-m", "yunshan.cli", "export", str(run_dir), "--out", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while not any((p / "model.safetensors").exists() for p in tmp_path.glob(".published.partial-*")):
        assert proc.poll() is None and time.time() < deadline, "the export ended before it wrote its weights"
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert list(tmp_path.glob(".published.partial-*")) and not out.exists()
    export_model(run_dir, out, license="mit")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["published"]
    # Killed between the renames: --out renamed aside (by a process that no longer runs), the new one not in place.
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    out.rename(tmp_path / f".published.old-{dead.pid}-0a1b2c3d")
    with pytest.raises(ValueError, match="already exists; pass --overwrite"):
        export_model(run_dir, out, license="apache-2.0")
    assert "license: mit" in (out / "README.md").read_text()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["published"]
