"""What the fields of the arguments dataclasses declare in their metadata, applied in one place.

    from yunshan.field_rules import check_fields
    output_dir: str = field(default="runs/cpt", metadata={"help": "run folder", "path": True})
    def __post_init__(self):
        check_fields(self)

Every arguments dataclass (`*Args`, the recipe sections and the flag sets) calls `check_fields` first in its
`__post_init__`, so the rules hold however it is built: by the recipe loader (yunshan.recipe names the file, line and
dotted key of a FieldError), from flags (yunshan.flags names the flag), by `dataclasses.replace` in `yunshan run`, or
in Python.

- `path`: the field holds a path (or a list of paths): True, or "labelled" for LABEL=PATH specs (the part after the
  first "=" is the path). `~` and environment variables ($NAME, ${NAME}) are expanded, the same way for every field
  of every command; a variable that is not set is an error, never a folder literally named "$DATA". A recipe's own
  variables (${samples}, ${data}, ${models}, ${recipe_dir}) are the loader's and are replaced before.
"""

from __future__ import annotations

import dataclasses
import os
import re

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
    place. Raises FieldError naming the field."""
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
