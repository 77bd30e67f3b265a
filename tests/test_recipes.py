"""Every shipped recipe loads and dry-runs: fields valid, every path it names found, the stage plan computed.

Real recipes name data under ${data} and models under ${models}; the test points YUNSHAN_DATA and YUNSHAN_MODELS at
a temporary folder and writes a small, format-correct stand-in for every path a recipe names (a tiny PanGu-π with a
tokenizer for every model folder), so the dry run checks the recipe itself, not the data's presence.
"""

import json
import re
from pathlib import Path

import pytest
import yaml

from fixtures import train_tokenizer
from yunshan.pipeline import PipelineRecipe
from yunshan.arguments.recipe import load_recipe
from yunshan.training.cpt import CptArgs
from yunshan.training.preference import PrefArgs
from yunshan.training.sft import SftArgs

ROOT = Path(__file__).resolve().parents[1]
RECIPES = sorted(p for p in (ROOT / "recipes").glob("*.yaml"))
KINDS = {"pipeline": PipelineRecipe, "cpt": CptArgs, "sft": SftArgs, "pref": PrefArgs}


# Whole pipelines named for what they make rather than <model>_pipeline_<method>: the demo and the laws run.
PIPELINES = {"demo_tiny.yaml", "smollm2-135m_laws.yaml", "gemma3-270m_laws.yaml"}


def kind_of(path: Path) -> str:
    if path.name in PIPELINES:
        return "pipeline"
    stage = path.stem.split("_")[1]
    assert stage in KINDS, f"{path.name}: recipes are named <model>_<stage>_<method>.yaml, stage in {list(KINDS)}"
    return stage


def test_recipe_names_and_header_comments():
    assert RECIPES, "no recipes shipped"
    for path in RECIPES:
        kind_of(path)
        text = path.read_text(encoding="utf-8")
        assert text.startswith("#"), f"{path.name}: must open with a comment giving the launch command"
        header = text.split("\n\n")[0]
        assert "yunshan" in header and ("Hardware" in header or "hardware" in header or "CPU" in header), path.name


JECQA = {"id": "1", "statement": "s", "option_list": {"A": "a", "B": "b", "C": "c", "D": "d"}, "answer": ["A"],
         "source": 0}
MESSAGES = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}
ALPACA = {"instruction": "q", "input": "", "output": "a"}


def write_stand_in(path: Path, fmt: str) -> None:
    """A small file or folder of the right format where a recipe expects data."""
    if "*" in path.name:
        path = path.parent / path.name.replace("*", "part-0")
    path.parent.mkdir(parents=True, exist_ok=True)
    if fmt == "jecqa":
        path.mkdir(parents=True, exist_ok=True)
        (path / "0_train.json").write_text(json.dumps(JECQA) + "\n")
    elif fmt == "dir":
        path.mkdir(parents=True, exist_ok=True)
    elif fmt in ("messages", "alpaca"):
        path.write_text(json.dumps(MESSAGES if fmt == "messages" else ALPACA) + "\n")
    elif path.suffix == ".txt":
        path.write_text("第一段文字。\n\nSecond paragraph of text.\n")
    else:
        records = "".join(json.dumps({"text": f"文本 {i} text"}, ensure_ascii=False) + "\n" for i in range(5)).encode()
        if path.name.endswith(".zst"):
            import zstandard

            records = zstandard.ZstdCompressor().compress(records)
        elif path.name.endswith(".gz"):
            import gzip

            records = gzip.compress(records)
        path.write_bytes(records)


def prepare_stand_ins(recipe_path: Path, data: Path, models: Path) -> None:
    raw = yaml.safe_load(recipe_path.read_text(encoding="utf-8"))
    formats = {}

    def walk(node):
        if isinstance(node, dict):
            if "path" in node and isinstance(node["path"], str) and node.get("format"):
                formats[node["path"]] = node["format"]
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)

    walk(raw)
    text = recipe_path.read_text(encoding="utf-8")
    for ref in sorted(set(re.findall(r"\$\{data\}/[^\"',\]\s}]+", text))):
        fmt = formats.get(ref, "dir" if "." not in Path(ref).name else "text")
        write_stand_in(data / ref[len("${data}/"):], fmt)
    tok = None
    for ref in sorted(set(re.findall(r"\$\{models\}/[^\"',\]\s}]+", text))):
        folder = models / ref[len("${models}/"):]
        folder.mkdir(parents=True, exist_ok=True)
        tok = tok or train_tokenizer(folder)
        tok.save_pretrained(folder)
        from yunshan.models.pangu_pi import PanguPiConfig

        PanguPiConfig.from_preset("tiny", vocab_size=len(tok)).save_pretrained(folder)


@pytest.mark.parametrize("path", RECIPES, ids=lambda p: p.name)
def test_every_recipe_loads_and_dry_runs(path, tmp_path, monkeypatch, capsys):
    data, models = tmp_path / "data", tmp_path / "models"
    monkeypatch.setenv("YUNSHAN_DATA", str(data))
    monkeypatch.setenv("YUNSHAN_MODELS", str(models))
    if "${realdata}" in path.read_text(encoding="utf-8"):
        # A recipe of the real releases is dry-run on them, unchanged (the dry run opens every corpus and text).
        from fixtures import realdata

        monkeypatch.setenv("YUNSHAN_REALDATA", str(realdata()))
    prepare_stand_ins(path, data, models)
    kind = kind_of(path)
    # A pipeline's run folder is given as an override, as on the command line: ${prepared} (the prepare stage's
    # corpus, which the laws recipes' tokenizer and cpt read) lies inside it.
    recipe = load_recipe(KINDS[kind], path, [f"output_dir={tmp_path / 'run'}"] if kind == "pipeline" else None)
    if kind == "pipeline":
        from yunshan.pipeline import PipelineRunner

        plan = PipelineRunner(recipe, path).dry_run()
        assert plan["problems"] == [], plan["problems"]
        assert [p["action"] for p in plan["plan"] if p["stage"] in ("cpt", "sft")] == ["run", "run"]
        tokenizer = next(p for p in plan["plan"] if p["stage"] == "tokenizer")
        if tokenizer["action"] == "run":  # the new tokens as the cpt budget caps them (none when it carries none)
            assert 0 <= tokenizer["new_tokens"] <= recipe.tokenizer_extension.new_tokens
            assert tokenizer["new_tokens"] > 0 or "capped at 0" in tokenizer["capped"]
        return
    if kind in ("sft", "pref") and not Path(recipe.model.name_or_path).is_absolute():
        # The SFT recipe starts from the cpt recipe's output folder: stand in for it too.
        folder = Path(recipe.model.name_or_path)
        monkeypatch.chdir(tmp_path)
        (tmp_path / folder).mkdir(parents=True)
        tok = train_tokenizer(tmp_path / folder)
        from yunshan.models.pangu_pi import PanguPiConfig

        PanguPiConfig.from_preset("tiny", vocab_size=len(tok)).save_pretrained(tmp_path / folder)
    # In this process (the same `main` as the command line; an interpreter start each was most of this test's time).
    from yunshan.cli import main

    capsys.readouterr()
    code = main([kind, "--config", str(path), "--dry-run", f"training.output_dir={tmp_path / 'out'}"])
    out = capsys.readouterr()
    assert code == 0, out.err[-3000:]
    plan = json.loads(out.out[out.out.index("{"):])
    assert plan["parameters"] > 0


def test_every_setting_has_help():
    """Every field of every recipe section (the stage commands' own arguments) says what it does: the flags of
    `yunshan eval`, `export`, `push` and `tokenizer extend` show the same text."""
    from yunshan.arguments.recipe import describe

    for cls in KINDS.values():
        rows = describe(cls)
        assert rows and [key for key, _, help_text in rows if not help_text] == [], cls.__name__
