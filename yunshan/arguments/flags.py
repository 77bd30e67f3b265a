"""One command-line style for every `yunshan` command: flags generated from the command's arguments dataclass.

    from yunshan.arguments.flags import add_flags, from_flags
    add_flags(parser, PushArgs, positional={"folder": "DIR"})      # in the command's add_arguments(parser)
    args = from_flags(PushArgs, namespace)                          # in its run(namespace)

Every field of the dataclass becomes `--field-name` with the field's help text and default: bool fields take
`--name/--no-name`, list fields one or more values (the flag may be repeated), `X | None` fields an X. The same
dataclass is the command's recipe section in `yunshan run` (yunshan.pipeline), so a setting has one name, one
default and one help text wherever it is given. Recipe commands (`yunshan cpt`, `sft`, `run`) take
`--config RECIPE.yaml` plus dotted overrides instead (`add_recipe_flags`, loaded by yunshan.arguments.recipe).
"""

from __future__ import annotations

import argparse
import dataclasses
import types
import typing


def _kind(tp) -> tuple[str, type]:
    """("bool" | "list" | "value", element type) of a field type."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(tp) if a is not type(None)]
        lists = [a for a in options if typing.get_origin(a) is list]
        if lists:  # list[str] | str | None: a list on the command line
            return _kind(lists[0])
        return _kind(options[0])
    if tp is bool:
        return "bool", bool
    if origin is list:
        (item,) = typing.get_args(tp) or (str,)
        return "list", item if item in (int, float) else str
    return "value", tp if tp in (int, float) else str


def _default(f: dataclasses.Field):
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def add_flags(parser: argparse.ArgumentParser | argparse._ArgumentGroup, cls, *,
              positional: dict[str, str] | None = None, required: tuple[str, ...] = (),
              names: dict[str, str] | None = None, metavars: dict[str, str] | None = None,
              skip: tuple[str, ...] = (), choices: dict[str, tuple] | None = None) -> None:
    """Add one flag per field of dataclass `cls` (in declaration order, positionals first).

    Args:
        positional: fields given as positional arguments, with their metavar (a list field takes one or more).
        required: fields the command cannot run without (a field without a default is always required).
        names: flag names other than `--field-name` (e.g. {"datasets": "--dataset"}).
        metavars: metavars of flags.
        skip: fields the command line does not set (filled by the command itself).
        choices: the valid values of fields, when argparse should check them.
    """
    positional, names, metavars, choices = positional or {}, names or {}, metavars or {}, choices or {}
    hints = typing.get_type_hints(cls)
    fields = [f for f in dataclasses.fields(cls) if f.init and f.name not in skip]
    fields.sort(key=lambda f: f.name not in positional)  # stable: positionals first, the rest as declared
    for f in fields:
        kind, item = _kind(hints[f.name])
        default = _default(f)
        help_text = f.metadata.get("help", "")
        if "range" in f.metadata:  # checked by yunshan.arguments.field_rules when the dataclass is built
            help_text += f" (range {f.metadata['range']})"
        if f.name in positional:
            nargs = ("+" if default is dataclasses.MISSING else "*") if kind == "list" else None
            parser.add_argument(f.name, metavar=positional[f.name], nargs=nargs, type=item, help=help_text)
            continue
        flag = names.get(f.name, "--" + f.name.replace("_", "-"))
        must = f.name in required or default is dataclasses.MISSING
        shown = "" if must or default in (None, [], "") else f" (default: {_show(default)})"
        if kind == "bool":
            parser.add_argument(flag, dest=f.name, action=argparse.BooleanOptionalAction, default=None,
                                help=help_text + shown)
        elif kind == "list":
            # Defaults stay None here (argparse would append to a default list); from_flags fills them in.
            parser.add_argument(flag, dest=f.name, nargs="+", action="extend", type=item, default=None,
                                required=must, metavar=metavars.get(f.name), choices=choices.get(f.name),
                                help=help_text + shown)
        else:
            parser.add_argument(flag, dest=f.name, type=item, default=None, required=must,
                                metavar=metavars.get(f.name), choices=choices.get(f.name), help=help_text + shown)


def _show(value) -> str:
    return " ".join(map(str, value)) if isinstance(value, list) else str(value)


def from_flags(cls, namespace: argparse.Namespace, **fixed):
    """An instance of `cls` from parsed flags: the values given, the dataclass defaults for the rest, `fixed`
    for fields the command sets itself."""
    values = {}
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        if f.name in fixed:
            values[f.name] = fixed[f.name]
        elif getattr(namespace, f.name, None) is not None:
            values[f.name] = getattr(namespace, f.name)
    from yunshan.arguments.field_rules import FieldError

    try:
        return cls(**values)
    except FieldError as err:  # a rule the field declares (a range, a path): named by its flag
        raise ValueError(f"--{err.field.replace('_', '-')}: {err.message}") from None


def add_recipe_flags(parser: argparse.ArgumentParser, example: str, dry_run: str, positional: bool = False) -> None:
    """`--config RECIPE.yaml` (or the recipe as the first argument), dotted overrides and `--dry-run`: the style of
    the recipe commands."""
    if positional:
        parser.add_argument("config", metavar="RECIPE", help="recipe YAML (see recipes/)")
    else:
        parser.add_argument("--config", required=True, help="recipe YAML (see recipes/)")
    parser.add_argument("overrides", nargs="*", help=f"dotted overrides, e.g. {example}")
    parser.add_argument("--dry-run", action="store_true", help=dry_run)


def recipe_from_flags(cls, namespace: argparse.Namespace):
    """The recipe `--config` names, as dataclass `cls`, with the command line's overrides applied."""
    from yunshan.arguments.recipe import load_recipe

    return load_recipe(cls, namespace.config, namespace.overrides)
