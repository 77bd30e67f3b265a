"""What a run leaves beside its outputs, written and read in one place: the resolved recipe (recipe.yaml).

    from yunshan.artifacts import write_recipe
    write_recipe(recipe, "runs/cpt/recipe.yaml", header="resolved recipe of this run")
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import yaml


def write_recipe(recipe, path: str | Path, header: str | None = None) -> None:
    """Write a resolved recipe dataclass (every field, defaults included) as YAML: what `yunshan run` and the
    stage commands save beside their outputs, and what `load_recipe` reads back."""
    text = yaml.safe_dump(dataclasses.asdict(recipe), sort_keys=False, allow_unicode=True)
    Path(path).write_text((f"# {header}\n" if header else "") + text, encoding="utf-8")
