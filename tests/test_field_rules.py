"""The rules the arguments dataclasses' fields declare in their metadata (yunshan.field_rules), held for every field
of every command: paths expand `~` and environment variables the same way in recipes, flags and code (issue 27
item 7)."""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import subprocess
import sys
import typing
from pathlib import Path

import pytest
import yaml

from test_structure import MODULES
from yunshan.field_rules import FieldError
from yunshan.recipe import RecipeError, load_recipe

ROOT = Path(__file__).resolve().parents[1]


def argument_classes() -> dict[str, type]:
    """Every arguments dataclass of yunshan: a dataclass of its modules with help text on its fields."""
    found = {}
    for name in MODULES:
        if name.endswith("__main__"):
            continue
        module = importlib.import_module(name)
        for obj in vars(module).values():
            if isinstance(obj, type) and dataclasses.is_dataclass(obj) and obj.__module__ == name and any(
                    "help" in f.metadata for f in dataclasses.fields(obj)):
                found[obj.__name__] = obj
    return found


CLASSES = argument_classes()
# Valid values of the fields that have no default or depend on each other, so that every class can be built.
REQUIRED = {
    "ModelArgs": {"preset": "tiny"}, "SourceArgs": {"name": "s", "path": "a.jsonl"},
    "SftSourceArgs": {"name": "s", "path": "a.jsonl", "format": "alpaca"}, "ExtendArgs": {"corpus": [], "new_tokens": 1},
    "ChatArgs": {"model": "m"}, "ServeArgs": {"model": "m"}, "InfoArgs": {"preset_or_path": "tiny"},
    "UpcycleArgs": {"src": "a", "dst": "b"},
    "ImportGgufArgs": {"gguf_file": "a.gguf", "out": "b"}, "ReportArgs": {"tokenizer": ["t"], "text": ["x"]},
    "PipelineRecipe": {"base": {}},
}


# Fields that exclude another (exactly one of the two): setting the first drops the second from REQUIRED.
EXCLUSIVE = {("ModelArgs", "name_or_path"): "preset", ("SourceArgs", "dataset"): "path"}


def build(cls, **values):
    """An instance of `cls` from plain values (nested sections as mappings), through the recipe loader."""
    required = dict(REQUIRED.get(cls.__name__, {}))
    for name in values:
        required.pop(EXCLUSIVE.get((cls.__name__, name)), None)
    return load_recipe(cls, data={**required, **values})


def path_fields(cls) -> list[tuple[str, bool | str]]:
    return [(f.name, f.metadata["path"]) for f in dataclasses.fields(cls) if f.metadata.get("path")]


def test_the_classes_are_found():
    assert {"CptDataArgs", "TrainArgs", "ModelArgs", "SourceArgs", "SftSourceArgs", "EvalArgs", "ChatArgs",
            "ExportArgs", "ExtendArgs", "DecontaminateArgs", "ConvertArgs", "PipelineRecipe",
            "StandInBaseArgs"} <= set(CLASSES)


@pytest.mark.parametrize("name", sorted(CLASSES))
def test_every_path_field_expands_home_and_environment_variables(name, monkeypatch, tmp_path):
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("YUNSHAN_TEST_DATA", str(tmp_path / "data"))
    cls = CLASSES[name]
    hints = typing.get_type_hints(cls)
    for field_name, kind in path_fields(cls):
        for written, expected in (("~/x", tmp_path / "home/x"), ("$YUNSHAN_TEST_DATA/x", tmp_path / "data/x"),
                                  ("${YUNSHAN_TEST_DATA}/x", tmp_path / "data/x")):
            value = f"label={written}" if kind == "labelled" else written
            is_list = typing.get_origin(hints[field_name]) is list
            obj = build(cls, **{field_name: [value] if is_list else value})
            got = getattr(obj, field_name)
            got = got[0] if isinstance(got, list) else got
            assert got == (f"label={expected}" if kind == "labelled" else str(expected)), (field_name, got)
            # Built again (as dataclasses.replace does in yunshan run): unchanged.
            assert dataclasses.replace(obj) == obj
        unset = "label=$YUNSHAN_UNSET_VARIABLE/x" if kind == "labelled" else "$YUNSHAN_UNSET_VARIABLE/x"
        with pytest.raises(RecipeError, match=f"{field_name}: .*environment variable YUNSHAN_UNSET_VARIABLE is not "
                                              "set"):
            build(cls, **{field_name: [unset] if is_list else unset})


def test_fields_named_like_paths_declare_it():
    """A new field named like a path (…path, …_dir, out, …_file, …folder) must say `path` in its metadata, so it
    expands like every other."""
    for cls in CLASSES.values():
        for f in dataclasses.fields(cls):
            if f.name.endswith(("path", "_dir", "_file", "folder")) or f.name in ("out", "output_dir"):
                assert f.metadata.get("path"), f"{cls.__name__}.{f.name}"


def test_a_recipe_flags_and_a_recipe_path_expand_alike(monkeypatch, tmp_path):
    from yunshan.cli import build_parser
    from yunshan.flags import from_flags
    from yunshan.training.cpt import CptArgs

    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setenv("CORPORA", "/data/corpora")
    (tmp_path / "r.yaml").write_text(yaml.safe_dump({
        "model": {"name_or_path": "~/models/base"}, "tokenizer": {"path": "${CORPORA}/tok"},
        "data": {"sources": [{"name": "a", "path": ["~/a.jsonl", "$CORPORA/b/*.jsonl"]}]},
        "monitor": {"general": ["~/heldout.txt"]}}))
    recipe = load_recipe(CptArgs, "~/r.yaml", ["training.output_dir=~/runs/x"])
    assert recipe.model.name_or_path == f"{tmp_path}/models/base" and recipe.tokenizer.path == "/data/corpora/tok"
    assert recipe.data.sources[0].path == [f"{tmp_path}/a.jsonl", "/data/corpora/b/*.jsonl"]
    assert recipe.monitor.general == [f"{tmp_path}/heldout.txt"]
    assert recipe.training.output_dir == f"{tmp_path}/runs/x"
    with pytest.raises(RecipeError, match=r"r.yaml:\d+: tokenizer.path: \$NOT_SET_HERE/tok: environment variable "
                                          "NOT_SET_HERE is not set"):
        (tmp_path / "r.yaml").write_text(yaml.safe_dump({"tokenizer": {"path": "$NOT_SET_HERE/tok"}}))
        load_recipe(CptArgs, tmp_path / "r.yaml")
    args = build_parser(["eval"]).parse_args(["eval", "--model", "~/m", "--out", "~/e", "--heldout", "g=~/g.txt"])
    from yunshan.eval.commands import EvalArgs

    flags = from_flags(EvalArgs, args)
    assert (flags.model, flags.out, flags.heldout) == ([f"{tmp_path}/m"], f"{tmp_path}/e", [f"g={tmp_path}/g.txt"])
    args = build_parser(["eval"]).parse_args(["eval", "--model", "m", "--out", "$NOT_SET_HERE/e"])
    with pytest.raises(ValueError, match=r"^--out: \$NOT_SET_HERE/e: environment variable NOT_SET_HERE is not set"):
        from_flags(EvalArgs, args)


def test_a_pipeline_with_home_in_its_paths_writes_where_they_point(tmp_path):
    """The issue's case: `output_dir: ~/runs/x` in a `yunshan run` recipe made the runner write a literal ./~/runs/x,
    and model.name_or_path with ~ was not found. Now every stage's folder is under $HOME/runs/x."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    from fixtures import train_tokenizer

    home = tmp_path / "home"
    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(vocab_size=400, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                 num_attention_heads=4, num_key_value_heads=2)).save_pretrained(home / "models/tiny")
    train_tokenizer(home / "models/tiny")
    (tmp_path / "work").mkdir()
    recipe = tmp_path / "work/pipeline.yaml"
    recipe.write_text(yaml.safe_dump({
        "name": "home-paths", "output_dir": "~/runs/x", "model": {"name_or_path": "~/models/tiny"},
        "eval": {"tasks": ["compression"], "text": ["${samples}/heldout/finance.txt"]}}))
    env = {**os.environ, "HOME": str(home)}
    result = subprocess.run([sys.executable, "-m", "yunshan.cli", "run", str(recipe)], cwd=tmp_path / "work",
                            env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    assert sorted(p.name for p in (tmp_path / "work").iterdir()) == ["pipeline.yaml"]  # no ./~ folder
    manifest = json.loads((home / "runs/x/run.json").read_text())
    assert manifest["base_model"] == str(home / "models/tiny")
    assert (home / "runs/x/02_eval_before/results.json").is_file()
