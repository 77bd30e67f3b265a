"""What the fields of the arguments dataclasses declare in their metadata, applied in one place.

    from yunshan.arguments.field_rules import check_fields
    output_dir: str = field(default="runs/cpt", metadata={"help": "run folder", "path": True})
    def __post_init__(self):
        check_fields(self)

Every arguments dataclass (`*Args`, the recipe sections and the flag sets) calls `check_fields` first in its
`__post_init__`, so the rules hold however it is built: by the recipe loader (yunshan.arguments.recipe names the file,
line and dotted key of a FieldError), from flags (yunshan.arguments.flags names the flag), by `dataclasses.replace` in
`yunshan run`, or in Python.

- `path`: the field holds a path (or a list of paths): True, or "labelled" for LABEL=PATH specs (the part after the
  first "=" is the path). `~` and environment variables ($NAME, ${NAME}) are expanded, the same way for every field
  of every command; a variable that is not set is an error, never a folder literally named "$DATA". A recipe's own
  variables (${samples}, ${data}, ${models}, ${recipe_dir}) are the loader's and are replaced before.
- `range`: the field holds a number (None where the field allows it: the default applies) in this range, written
  ">= 1", "> 0", "[0, 1]", "(0, 1]", "[0, 1)" or "(0, 1)". NaN, infinities and true/false are never in a range.
  Every int and float field declares one (tests/test_field_rules.py checks it, with hypothesis over each range); the
  flags' help shows it (yunshan.arguments.flags).
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import re
import typing

_BOUND = re.compile(r"^(>=|>)\s*(\S+)$")
_INTERVAL = re.compile(r"^([\[(])\s*([^,\s]+)\s*,\s*([^\])\s]+)\s*([\])])$")
_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")


class FieldError(ValueError):
    """A field's value breaks its declared rule; `field` is its name, so the recipe loader can give the file, line and
    dotted key, and the flags the flag."""

    def __init__(self, field: str, message: str):
        super().__init__(f"{field}: {message}")
        self.field = field
        self.message = message


def check_fields(obj) -> None:
    """Apply the metadata rules of every field of the dataclass instance `obj` (module docstring): paths expanded in
    place, numbers checked against their range. Raises FieldError naming the field."""
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        kind = f.metadata.get("path")
        if kind and value is not None:
            try:
                expanded = ([expand_path(v, kind) for v in value] if isinstance(value, list)
                            else expand_path(value, kind))
            except ValueError as err:
                raise FieldError(f.name, str(err)) from None
            object.__setattr__(obj, f.name, expanded)
        rule = f.metadata.get("range")
        if rule and value is not None:
            problem = range_problem(value, rule, whole=_whole_numbers(type(obj)).get(f.name, False))
            if problem:
                raise FieldError(f.name, problem)


def parse_range(rule: str) -> tuple[float, bool, float, bool]:
    """(low, low included, high, high included) of a range as fields write it (module docstring)."""
    m = _BOUND.match(rule.strip())
    if m:
        return float(m.group(2)), m.group(1) == ">=", math.inf, False
    m = _INTERVAL.match(rule.strip())
    if m:
        return float(m.group(2)), m.group(1) == "[", float(m.group(3)), m.group(4) == "]"
    raise ValueError(f"not a range: {rule!r} (write >= A, > A, [A, B], (A, B], [A, B) or (A, B))")


def range_problem(value, rule: str, whole: bool = False) -> str | None:
    """What is wrong with `value` for the range `rule` (a whole number when `whole`), in words stating the range; None
    when it is in the range."""
    low, low_in, high, high_in = parse_range(rule)
    stated = f"in {rule}" if rule[0] in "[(" else rule
    if isinstance(value, bool) or not isinstance(value, int if whole else (int, float)):
        return f"must be {'a whole number' if whole else 'a number'} {stated}, got {value!r}"
    if isinstance(value, float) and not math.isfinite(value):
        return f"must be a finite number {stated}, got {value!r}"
    if value < low or (value == low and not low_in) or value > high or (value == high and not high_in):
        return f"must be {stated}, got {value!r}"
    return None


@functools.cache
def _whole_numbers(cls) -> dict[str, bool]:
    """Whether each field of dataclass `cls` is typed int (or int | None): its range holds whole numbers only."""
    hints = typing.get_type_hints(cls)
    return {f.name: hints[f.name] in (int, int | None) for f in dataclasses.fields(cls)}


def expand_path(text: str, kind: bool | str = True) -> str:
    """`text` with `~` and environment variables expanded (kind "labelled": only after the first "=" of LABEL=PATH).
    Raises ValueError naming a variable that is not set."""
    if not isinstance(text, str):
        return text
    if kind == "labelled" and "=" in text:
        label, path = text.split("=", 1)
        return f"{label}={expand_path(path)}"
    unset = [a or b for a, b in _VARIABLE.findall(text) if (a or b) not in os.environ]
    if unset:
        raise ValueError(f"{text}: environment variable {unset[0]} is not set (set it, or write the path out)")
    return os.path.expanduser(os.path.expandvars(text))
