"""The distribution installs exactly the `yunshan` namespace, with tokenizer/ and eval/ mapped inside it."""

import importlib.util
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAPPED = {"yunshan": ROOT / "yunshan", "yunshan.tokenizer": ROOT / "tokenizer", "yunshan.eval": ROOT / "eval"}


def test_every_package_folder_is_listed_in_pyproject():
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = set()
    for prefix, folder in MAPPED.items():
        for init in folder.rglob("__init__.py"):
            found.add(".".join((prefix, *init.parent.relative_to(folder).parts)))
    assert found <= listed, f"package folders missing from pyproject.toml: {sorted(found - listed)}"


def test_tokenizer_and_eval_install_inside_the_namespace_only():
    assert importlib.util.find_spec("yunshan.tokenizer") is not None
    assert importlib.util.find_spec("yunshan.eval") is not None
    # Outside the repository root, no top-level `tokenizer` or `eval` module exists.
    code = "import importlib.util as u; print(u.find_spec('tokenizer'), u.find_spec('eval'))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/", check=True).stdout
    assert out.strip() == "None None"


def test_console_script_runs(capsys):
    exe = Path(sys.executable).with_name("yunshan")
    result = subprocess.run([str(exe), "model", "info", "pangu-pi-7b"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "pangu-pi-7b (pangu_pi): 6.73B parameters" in result.stdout
    assert "| shortcuts | 30,408,704 |" in result.stdout
    # The script's entry point (pyproject's yunshan.cli:main) on a bad name, in this process: one interpreter start
    # was most of this test's time.
    from yunshan.cli import main

    capsys.readouterr()
    assert main(["model", "info", "no-such-model"]) == 1
    err = capsys.readouterr().err
    assert "neither a preset" in err and "Traceback" not in err
