"""The recipe loader: YAML files into dataclasses, with ${variables} and dotted command-line overrides.

    yunshan cpt --config recipes/pangu-pi-7b_cpt_full.yaml training.learning_rate=1e-4 data.seq_len=2048

A recipe is a tree of `*Args` dataclasses, each defined beside the stage that reads it (yunshan.training.cpt.CptArgs,
yunshan.training.sft.SftArgs, yunshan.pipeline.PipelineRecipe, ...); this module knows none of them. Loading checks
every key against the dataclass fields: an unknown key is rejected by its full dotted path with the file and line
and the valid keys listed; a value of the wrong type names the path, line, expected type and the value. Overrides use
the same dotted paths; list items are addressed by index (`data.sources.0.weight=0.3`) or, for lists of named items,
by name (`data.sources.finance.weight=0.3`).

Two conventions serve the pipeline's optional sections (`X | None`, such as `push`): `enabled: false` (or null)
in such a section leaves it out and `enabled: true` keeps it, so a stage is switched on and off with one key. A
recipe class may name keys its users must not set (`RESERVED_KEYS`: dotted path -> why), such as the paths
`yunshan run` fills itself; setting one is an error naming the file and line. The resolved recipe is written beside
every run's outputs by yunshan.io.artifacts.write_recipe.

In every string, ${samples}, ${data}, ${models} and ${recipe_dir} are the loader's variables (path_variables), plus
those a recipe class computes from its raw data (`recipe_variables`: a pipeline's ${prepared}). In
path fields, `~` and environment variables are expanded by the dataclasses themselves (yunshan.arguments.field_rules,
the same for flags); a ${NAME} that is neither is an error at its line. A field's declared rule that fails (a
FieldError) is reported at the line of that field's key.
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from pathlib import Path
from typing import Any

import yaml


class RecipeError(ValueError):
    """A recipe problem, with file, line and dotted path in the message."""


# The most values (mappings, lists, scalars) a recipe may expand to, aliases expanded; the largest shipped recipe has
# a few hundred.
MAX_VALUES = 10_000


# ---------------------------------------------------------------- YAML with line numbers


def _compose_with_lines(text: str, filename: str) -> tuple[Any, dict[str, int]]:
    """Parse YAML and record the line of every dotted path (1-based)."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.reader.ReaderError as err:
        # A character YAML does not allow (a control character, a NUL): its message spans lines and has no mark.
        line = text.count("\n", 0, err.position) + 1
        raise RecipeError(f"{filename}:{line}: invalid YAML: character {chr(err.character)!r} is not allowed in "
                          "YAML (control characters other than tab and line ends)") from None
    except yaml.YAMLError as err:
        raise _yaml_error(err, filename) from None
    except RecursionError:  # PyYAML's composer recurses once per level of nesting
        raise RecipeError(f"{filename}: YAML nested too deeply to read (thousands of levels); a recipe is a few "
                          "levels deep") from None
    return _tree(node, filename)


def _tree(node, filename: str) -> tuple[Any, dict[str, int]]:
    """The plain tree (dicts, lists, scalars) of a composed YAML node, and the line of every dotted path."""
    lines: dict[str, int] = {}
    # YAML aliases share one node wherever they are used, so a small file can stand for a huge tree (a "billion
    # laughs" file: 9 levels of 9 aliases are 387 million values) or for an endless one (an alias inside the value it
    # names). The walk below expands every alias, so it counts what it builds and refuses a cycle.
    budget = [MAX_VALUES]
    holding: set[int] = set()  # the nodes being built: the current one and those holding it

    def walk(n, path):
        if n is None:
            return None
        line = n.start_mark.line + 1
        if id(n) in holding:
            raise RecipeError(f"{filename}:{line}: {path or '(top level)'}: an alias refers to the value "
                              "that holds it (a recursive YAML structure); a recipe must be a finite tree")
        budget[0] -= 1
        if budget[0] < 0:
            raise RecipeError(f"{filename}:{line}: YAML aliases expand to more than {MAX_VALUES:,} values (a recipe "
                              "holds a few hundred): write the repeated part out or alias less")
        lines[path] = line
        if isinstance(n, yaml.MappingNode):
            holding.add(id(n))
            try:
                return _mapping(n, path)
            finally:
                holding.discard(id(n))
        if isinstance(n, yaml.SequenceNode):
            holding.add(id(n))
            try:
                return [walk(v, _join(path, str(i))) for i, v in enumerate(n.value)]
            finally:
                holding.discard(id(n))
        return _scalar(n)

    def _mapping(n, path):
        out = {}
        for key_node, value_node in n.value:
            if not isinstance(key_node, yaml.ScalarNode):
                raise RecipeError(f"{filename}:{key_node.start_mark.line + 1}: {path or '(top level)'}: a key must be "
                                  "a plain name, not a list or mapping")
            key = key_node.value
            if key in out:
                raise RecipeError(f"{filename}:{key_node.start_mark.line + 1}: duplicate key {_join(path, key)!r}")
            out[key] = walk(value_node, _join(path, key))
            lines[_join(path, key)] = key_node.start_mark.line + 1
        return out

    try:
        return walk(node, ""), lines
    except yaml.YAMLError as err:  # a scalar no safe constructor builds (a tag such as !!python/object, a bare =)
        raise _yaml_error(err, filename) from None


def _yaml_error(err: yaml.YAMLError, filename: str) -> RecipeError:
    """PyYAML's error (several lines, with a caret drawing) as one line: file, line, the problem."""
    mark = getattr(err, "problem_mark", None) or getattr(err, "context_mark", None)
    where = f"{filename}:{mark.line + 1}" if mark else filename
    problem = getattr(err, "problem", None) or getattr(err, "context", None) or str(err).split("\n")[0]
    return RecipeError(f"{where}: invalid YAML: {' '.join(str(problem).split())}")


def _scalar(node):
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_object(node, deep=True)
    finally:
        loader.dispose()


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else str(key)


# ---------------------------------------------------------------- building dataclasses


def _type_name(tp) -> str:
    if tp is type(None):
        return "null"
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    if origin is list:
        args = typing.get_args(tp)
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        return "mapping"
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in typing.get_args(tp))
    return getattr(tp, "__name__", str(tp))


class _Builder:
    def __init__(self, filename: str, lines: dict[str, int]):
        self.filename = filename
        self.lines = lines

    def where(self, path: str) -> str:
        # The closest recorded line: the path itself, or its nearest parent (0 = from the command line).
        p = path
        while p and p not in self.lines:
            p = p.rsplit(".", 1)[0] if "." in p else ""
        line = self.lines.get(p)
        if line == 0:
            return "command-line override"
        return f"{self.filename}:{line}" if line else self.filename

    def fail(self, path: str, message: str):
        # A key with a line break or control character in it is shown quoted, so the message stays one line.
        shown = path if path.isprintable() else repr(path)
        raise RecipeError(f"{self.where(path)}: {shown or '(top level)'}: {message}")

    def build(self, cls, data, path: str):
        if data is None:
            data = {}
        if not isinstance(data, dict):
            self.fail(path, f"expected a mapping of {cls.__name__} fields, got {type(data).__name__}")
        hints = typing.get_type_hints(cls)
        fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
        unknown = [k for k in data if k not in fields]
        if unknown:
            key = unknown[0]
            self.fail(_join(path, key), f"unknown key; valid keys here: {', '.join(fields)}")
        kwargs = {}
        for name, value in data.items():
            kwargs[name] = self.convert(hints[name], value, _join(path, name))
        missing = [
            n for n, f in fields.items()
            if n not in kwargs and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]
        if missing:
            self.fail(_join(path, missing[0]), "required key is missing")
        try:
            return cls(**kwargs)
        except (ValueError, TypeError) as err:
            # A rule a field declares (yunshan.arguments.field_rules.FieldError) names its field: the error gets that
            # key's line.
            field_name = getattr(err, "field", None)
            if field_name in fields:
                self.fail(_join(path, field_name), err.message)
            self.fail(path, str(err))

    def convert(self, tp, value, path: str):
        origin = typing.get_origin(tp)
        if origin in (typing.Union, types.UnionType):
            options = typing.get_args(tp)
            if type(None) in options and isinstance(value, dict) and "enabled" in value:
                # An optional section switched with `enabled` (when the section has no field of that name).
                section = next((o for o in options if dataclasses.is_dataclass(o)), None)
                if section is not None and "enabled" not in {f.name for f in dataclasses.fields(section)}:
                    enabled = self.convert(bool, value["enabled"], _join(path, "enabled"))
                    value = {k: v for k, v in value.items() if k != "enabled"} if enabled else None
            if value is None and type(None) in options:
                return None
            errors = []
            for option in options:
                if option is type(None):
                    continue
                try:
                    return self.convert(option, value, path)
                except RecipeError as err:
                    errors.append(err)
            if len(errors) == 1:
                raise errors[0]
            self.fail(path, f"expected {_type_name(tp)}, got {value!r}")
        if origin is typing.Literal:
            if value not in typing.get_args(tp):
                self.fail(path, f"must be one of {', '.join(map(repr, typing.get_args(tp)))}, got {value!r}")
            return value
        if dataclasses.is_dataclass(tp):
            return self.build(tp, value, path)
        if origin is list:
            if not isinstance(value, list):
                self.fail(path, f"expected {_type_name(tp)}, got {value!r}")
            (item,) = typing.get_args(tp) or (Any,)
            return [self.convert(item, v, _join(path, str(i))) for i, v in enumerate(value)]
        if origin is dict:
            if not isinstance(value, dict):
                self.fail(path, f"expected a mapping, got {value!r}")
            return dict(value)
        if tp is Any:
            return value
        if tp is bool:
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no"):
                return value.lower() in ("true", "yes")
            self.fail(path, f"expected true or false, got {value!r}")
        if tp is int:
            if isinstance(value, bool) or not isinstance(value, (int, str)):
                self.fail(path, f"expected an integer, got {value!r}")
            try:
                return int(value)
            except ValueError:
                self.fail(path, f"expected an integer, got {value!r}")
        if tp is float:
            if isinstance(value, bool):
                self.fail(path, f"expected a number, got {value!r}")
            try:
                return float(value)  # also accepts "1e-4", which YAML 1.1 reads as a string
            except (TypeError, ValueError):
                self.fail(path, f"expected a number, got {value!r}")
        if tp is str:
            if isinstance(value, (dict, list)) or value is None:
                self.fail(path, f"expected a string, got {value!r}")
            return str(value)
        return value


# ---------------------------------------------------------------- overrides


def _shown(text: str) -> str:
    """`text` as it goes into a one-line error: quoted when it holds a line break or control character."""
    return text if text.isprintable() else repr(text)


def apply_override(data: dict, dotted: str, raw_value: str) -> None:
    """Set `dotted` (e.g. training.learning_rate or data.sources.finance.weight) in the raw recipe dict."""
    shown = _shown(dotted)
    try:
        node = yaml.compose(raw_value, Loader=yaml.SafeLoader)
    except yaml.YAMLError as err:
        problem = getattr(err, "problem", None) or getattr(err, "context", None) or str(err).split("\n")[0]
        raise RecipeError(f"override {shown}={raw_value!r}: not a YAML value ({' '.join(str(problem).split())}); "
                          "quote a plain string, for example key='\"text\"'") from None
    except RecursionError:
        raise RecipeError(f"override {shown}: YAML nested too deeply to read") from None
    # Through the same walk as a file: aliases bounded, a recursive value refused.
    value = _tree(node, f"override {shown}")[0] if raw_value != "" else ""
    keys = dotted.split(".")
    node = data
    for i, key in enumerate(keys):
        last = i == len(keys) - 1
        if isinstance(node, list):
            index = _list_index(node, key, ".".join(keys[: i + 1]))
            if last:
                node[index] = value
            else:
                node = node[index]
            continue
        if not isinstance(node, dict):
            raise RecipeError(f"override {shown}: {_shown('.'.join(keys[:i]))} is not a mapping or list")
        if last:
            node[key] = value
        else:
            if node.get(key) is None:
                node[key] = {}
            node = node[key]


def _list_index(items: list, key: str, path: str) -> int:
    if key.lstrip("-").isdigit():
        index = int(key)
        if not -len(items) <= index < len(items):
            raise RecipeError(f"override {_shown(path)}: index {index} out of range (the list has {len(items)} "
                              "items)")
        return index
    for i, item in enumerate(items):
        if isinstance(item, dict) and item.get("name") == key:
            return i
    names = [item.get("name") for item in items if isinstance(item, dict) and "name" in item]
    raise RecipeError(f"override {_shown(path)}: no item named {key!r}; names: "
                      f"{', '.join(_shown(str(n)) for n in names) or 'none'}")


def parse_overrides(pairs: list[str]) -> list[tuple[str, str]]:
    out = []
    for pair in pairs:
        if "=" not in pair:
            raise RecipeError(f"override {pair!r}: expected key=value (for example training.learning_rate=1e-4)")
        key, value = pair.split("=", 1)
        out.append((key.strip(), value))
    return out


# ---------------------------------------------------------------- entry points


def load_recipe(cls, path: str | Path | None = None, overrides: list[str] | None = None, data: dict | None = None):
    """Build recipe dataclass `cls` from a YAML file (or a dict) plus `key=value` overrides."""
    lines: dict[str, int] = {}
    filename = str(path) if path is not None else "<recipe>"
    if path is not None:
        path = Path(os.path.expanduser(os.path.expandvars(str(path))))
        if not path.is_file():
            raise FileNotFoundError(f"recipe {path} does not exist")
        raw = path.read_bytes()
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as err:
            line = raw.count(b"\n", 0, err.start) + 1
            raise RecipeError(f"{filename}:{line}: not UTF-8 (byte offset {err.start}: {raw[err.start:err.start + 4]!r}); "
                              "a recipe is a UTF-8 YAML file") from None
        data, lines = _compose_with_lines(text, filename)
    data = data if data is not None else {}
    if not isinstance(data, dict):
        raise RecipeError(f"{filename}: a recipe must be a mapping at the top level")
    for key, value in parse_overrides(overrides or []):
        apply_override(data, key, value)
        lines[key] = 0  # an overridden value comes from the command line, not the file
    builder = _Builder(filename, lines)
    for dotted, why in getattr(cls, "RESERVED_KEYS", {}).items():
        node = data
        for key in dotted.split("."):
            node = node.get(key) if isinstance(node, dict) else None
        if node is not None:
            builder.fail(dotted, why)
    variables = path_variables(Path(path).parent if path is not None else Path.cwd())
    if getattr(cls, "recipe_variables", None) is not None:  # a recipe's own, computed from its raw data
        variables = {**variables, **cls.recipe_variables(data, variables)}
    data = expand_variables(data, variables, builder)
    return builder.build(cls, data, "")


def path_variables(recipe_dir: Path) -> dict[str, str]:
    """${...} variables usable in recipe strings."""
    from yunshan.samples import sample_data_dir

    return {
        "samples": str(sample_data_dir()),
        "data": os.environ.get("YUNSHAN_DATA", "data"),
        "models": os.environ.get("YUNSHAN_MODELS", "models"),
        # The real releases (laws corpus, LawBench, FinEval, CMMLU) beside a checkout: ../shared/realdata
        "realdata": os.environ.get("YUNSHAN_REALDATA", "../shared/realdata"),
        "recipe_dir": str(recipe_dir.resolve()),
    }


def expand_variables(data, variables: dict[str, str], builder=None, path: str = ""):
    """Replace ${name} in every string of the raw recipe; an unknown name is an error naming the key."""
    import re

    if isinstance(data, dict):
        return {k: expand_variables(v, variables, builder, _join(path, k)) for k, v in data.items()}
    if isinstance(data, list):
        return [expand_variables(v, variables, builder, _join(path, str(i))) for i, v in enumerate(data)]
    if isinstance(data, str) and "${" in data:
        def replace(match):
            name = match.group(1)
            if name not in variables and name in os.environ:
                return match.group(0)  # an environment variable: path fields expand it (yunshan.arguments.field_rules)
            if name not in variables:
                message = (f"unknown variable ${{{name}}}; known: {', '.join('${' + v + '}' for v in variables)}, "
                           "or an environment variable that is set")
                if builder is not None:
                    builder.fail(path, message)
                raise RecipeError(f"{path}: {message}")
            return variables[name]

        return re.sub(r"\$\{([A-Za-z_]+)\}", replace, data)
    return data


def describe(cls, prefix: str = "") -> list[tuple[str, str, str]]:
    """(dotted key, type, help) for every setting of a recipe class, sections included (a test checks that every
    setting has help)."""
    rows = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        key = _join(prefix, f.name)
        if dataclasses.is_dataclass(tp):
            rows.extend(describe(tp, key))
            continue
        rows.append((key, _type_name(tp) + (f" {f.metadata['range']}" if "range" in f.metadata else ""),
                     f.metadata.get("help", "")))
        inner = [a for a in typing.get_args(tp) if dataclasses.is_dataclass(a)]
        if inner and typing.get_origin(tp) is list:
            rows.extend(describe(inner[0], key + ".N"))
        elif inner:  # an optional section
            rows.extend(describe(inner[0], key))
    return rows
