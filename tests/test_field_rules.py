"""The rules the arguments dataclasses' fields declare in their metadata (yunshan.arguments.field_rules), held for every
field of every command: paths expand `~` and environment variables the same way in recipes, flags and code (issue 27
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
from yunshan.arguments.field_rules import FieldError
from yunshan.arguments.recipe import RecipeError, load_recipe

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
    "SftSourceArgs": {"name": "s", "path": "a.jsonl", "format": "alpaca"}, "PrefSourceArgs": {"name": "s", "path": "a.jsonl", "format": "pairs"}, "ExtendArgs": {"corpus": [], "new_tokens": 1},
    "ChatArgs": {"model": "m"}, "ServeArgs": {"model": "m"}, "InfoArgs": {"preset_or_path": "tiny"},
    "UpcycleArgs": {"src": "a", "dst": "b"},
    "ImportGgufArgs": {"gguf_file": "a.gguf", "out": "b"}, "MergeArgs": {"model": "a", "instruct": "b", "out": "c"}, "ReportArgs": {"tokenizer": ["t"], "text": ["x"]},
    "PipelineRecipe": {"base": {}}, "InputArgs": {"name": "s", "path": "a.jsonl"},
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
    from yunshan.arguments.flags import from_flags
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


# ---------------------------------------------------------------- ranges (issue 27 item 15)

from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from yunshan.arguments.field_rules import parse_range  # noqa: E402


def numeric_fields(cls) -> list[tuple[str, bool]]:
    """(name, whole numbers only) of every field of `cls` typed int or float (or either | None)."""
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        options = [a for a in typing.get_args(hints[f.name]) if a is not type(None)] or [hints[f.name]]
        if options in ([int], [float]):
            out.append((f.name, options == [int]))
    return out


NUMERIC = [(name, field_name, whole) for name, cls in sorted(CLASSES.items())
           for field_name, whole in numeric_fields(cls)]
# A value in one field's range that another field of the class must not fall below or exceed.
RELATED = {("DecontaminateArgs", "clean_below"): lambda v: {"dirty_from": 1.0},
           ("DecontaminateArgs", "dirty_from"): lambda v: {"clean_below": v}}
RANGES = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


def inside(rule: str, whole: bool):
    low, low_in, high, high_in = parse_range(rule)
    bounded = high != float("inf")
    if whole:
        return st.integers(int(low) + (not low_in), int(high) - (not high_in) if bounded else None)
    return st.floats(low, high if bounded else None, exclude_min=not low_in, exclude_max=bounded and not high_in,
                     allow_nan=False, allow_infinity=False)


def outside(rule: str, whole: bool):
    low, low_in, high, high_in = parse_range(rule)
    if whole:
        below = st.integers(None, int(low) - low_in)
        return below if high == float("inf") else st.one_of(below, st.integers(int(high) + high_in, None))
    below = st.floats(None, low, exclude_max=low_in, allow_nan=False, allow_infinity=False)
    wrong = st.one_of(below, st.sampled_from([float("nan"), float("inf"), float("-inf")]))
    return wrong if high == float("inf") else st.one_of(wrong, st.floats(high, None, exclude_min=high_in,
                                                                         allow_nan=False, allow_infinity=False))


def test_every_numeric_field_states_its_range():
    """Every int and float field of every arguments dataclass declares the range it accepts
    (yunshan.arguments.field_rules), and the flag's help shows it."""
    import argparse

    from yunshan.arguments.flags import add_flags

    assert len(NUMERIC) > 80
    for name, field_name, _ in NUMERIC:
        f = next(f for f in dataclasses.fields(CLASSES[name]) if f.name == field_name)
        assert "range" in f.metadata, f"{name}.{field_name} declares no range"
        parse_range(f.metadata["range"])
    for name, cls in CLASSES.items():
        parser = argparse.ArgumentParser()
        try:
            add_flags(parser, cls)
        except (TypeError, ValueError):  # a recipe section with nested sections is no flag set
            continue
        for action in parser._actions:
            rule = next((f.metadata.get("range") for f in dataclasses.fields(cls) if f.name == action.dest), None)
            if rule:
                assert f"(range {rule})" in action.help, (name, action.dest, action.help)


def _rule(name: str, field_name: str) -> str:
    return next(f for f in dataclasses.fields(CLASSES[name]) if f.name == field_name).metadata["range"]


@pytest.mark.parametrize("name, field_name, whole", NUMERIC, ids=[f"{n}.{f}" for n, f, _ in NUMERIC])
@RANGES
@given(data=st.data())
def test_a_number_in_its_range_is_taken_and_one_outside_is_refused_at_its_line(tmp_path, name, field_name, whole,
                                                                                 data):
    """Hypothesis over each field's range: a value inside loads unchanged from a recipe file; a value outside (below,
    above, NaN, an infinity) is refused in one line naming the file, the key's line and the range."""
    cls, rule = CLASSES[name], _rule(name, field_name)
    good = data.draw(inside(rule, whole), label="inside")
    related = RELATED.get((name, field_name), lambda v: {})(good)
    recipe = tmp_path / "r.yaml"
    recipe.write_text(yaml.safe_dump({**REQUIRED.get(name, {}), **related, field_name: good}), encoding="utf-8")
    got = getattr(load_recipe(cls, recipe), field_name)
    assert got == good or (name, field_name, good, got) == ("ExtendArgs", "max_token_chars", 0, None)  # 0: no limit
    bad = data.draw(outside(rule, whole), label="outside")
    text = yaml.safe_dump({**REQUIRED.get(name, {}), field_name: bad})
    recipe.write_text(text, encoding="utf-8")
    line = next(i for i, row in enumerate(text.splitlines(), 1) if row.startswith(f"{field_name}:"))
    with pytest.raises(RecipeError) as err:
        load_recipe(cls, recipe)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith(f"{recipe}:{line}: {field_name}: must be a finite number "
                              if bad != bad or abs(bad) == float("inf") else f"{recipe}:{line}: {field_name}: must be "), \
        message
    assert rule in message


@pytest.mark.parametrize("name, field_name, whole", NUMERIC, ids=[f"{n}.{f}" for n, f, _ in NUMERIC])
def test_a_flag_out_of_its_range_is_named_by_the_flag(name, field_name, whole):
    """The flags build the same dataclass: a value out of range is one line naming the flag and the range."""
    import argparse

    from yunshan.arguments.flags import from_flags

    low, low_in, _, _ = parse_range(_rule(name, field_name))
    bad = int(low) - 1 if whole else (low - 1 if low_in else low)
    required = REQUIRED.get(name, {})
    with pytest.raises(ValueError, match=rf"^--{field_name.replace('_', '-')}: must be .*, got {bad!r}$"):
        from_flags(CLASSES[name], argparse.Namespace(**{**required, field_name: bad}))
    if not whole:
        with pytest.raises(ValueError, match=rf"^--{field_name.replace('_', '-')}: must be a finite number"):
            from_flags(CLASSES[name], argparse.Namespace(**{**required, field_name: float("nan")}))


@pytest.mark.parametrize("argv, message", [
    (["eval", "--model", "m", "--limit", "-3"], "--limit: must be >= 1, got -3"),
    (["eval", "--model", "m", "--limit", "0"], "--limit: must be >= 1, got 0"),
    (["eval", "--model", "m", "--shots", "-2"], "--shots: must be >= 0, got -2"),
    (["eval", "--model", "m", "--batch-size", "0"], "--batch-size: must be >= 1, got 0"),
    (["chat", "m", "--temperature", "nan"], "--temperature: must be a finite number >= 0, got nan"),
])
def test_the_issues_flags_out_of_range_stop_in_one_line(argv, message, capsys):
    from yunshan.cli import main

    assert main(argv) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize("override, message", [
    ("training.min_lr_ratio=-3", "training.min_lr_ratio: must be in [0, 1], got -3.0"),
    ("training.max_grad_norm=.nan", "training.max_grad_norm: must be a finite number >= 0, got nan"),
    ("training.learning_rate=.nan", "training.learning_rate: must be a finite number >= 0, got nan"),
    ("training.learning_rate=-1e-4", "training.learning_rate: must be >= 0, got -0.0001"),
])
def test_the_issues_recipe_numbers_stop_at_their_line(tmp_path, override, message):
    from yunshan.training.cpt import CptArgs

    recipe = tmp_path / "cpt.yaml"
    key, value = override.split("=")
    section, name = key.split(".")
    recipe.write_text(f"model:\n  preset: tiny\n{section}:\n  {name}: {value}\n", encoding="utf-8")
    with pytest.raises(RecipeError) as err:
        load_recipe(CptArgs, recipe)
    assert str(err.value) == f"{recipe}:4: {message}"
