"""The shape of the package: imports point one way (no cycle, counting the imports inside functions too: a circle
that only closes when a function runs is still a circle), training does not know the pipeline or the recipe loader,
the data layer neither prints nor imports its commands, and docstring commands name recipes that exist."""

import ast
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# Folder -> the import name it installs as (pyproject.toml's package-dir).
FOLDERS = {"yunshan": ROOT / "yunshan", "yunshan.tokenizer": ROOT / "tokenizer", "yunshan.eval": ROOT / "eval"}


def modules() -> dict[str, Path]:
    found = {}
    for prefix, folder in FOLDERS.items():
        for path in folder.rglob("*.py"):
            parts = path.relative_to(folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join((prefix, *parts))] = path
    return found


MODULES = modules()


def imports(name: str, path: Path, module_level_only: bool, known: dict[str, Path] = MODULES) -> set[str]:
    """The modules of `known` (default: yunshan's) a module imports (at import time only, or anywhere in it)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()

    def visit(node, top: bool):
        for child in ast.iter_child_nodes(node):
            inside = top and not isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import) and (inside or not module_level_only):
                found.update(a.name for a in child.names)
            elif isinstance(child, ast.ImportFrom) and (inside or not module_level_only):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")
                    anchor = anchor[: len(anchor) - child.level + 1]
                    base = ".".join(anchor + ([base] if base else []))
                for alias in child.names:  # `from pkg import sub` imports the submodule, else a name of pkg
                    found.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base)
            visit(child, inside)

    visit(tree, True)
    return {m for m in found if m in known and m != name}


def find_cycle(graph: dict[str, set[str]]) -> list[str]:
    """One import cycle of `graph` (module -> the modules it imports) as [a, b, ..., a], or [] when there is none."""
    state: dict[str, int] = {}
    cycle: list[str] = []

    def walk(node, stack):
        state[node] = 1
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle.extend(stack[stack.index(nxt):] + [nxt])
                return True
            if nxt not in state and walk(nxt, stack + [nxt]):
                return True
        state[node] = 2
        return False

    for start in sorted(graph):
        if start not in state and walk(start, [start]):
            break
    return cycle


def test_no_import_cycle():
    # Imports inside functions count: a function-level import is how a cycle hides from Python at import time
    # (pipeline.stages <-> data_commands, hub <-> push and training.checkpoints <-> resume did, until each was opened).
    graph = {name: imports(name, path, module_level_only=False) for name, path in MODULES.items()}
    cycle = find_cycle(graph)
    assert not cycle, " -> ".join(cycle)


def test_the_cycle_check_sees_imports_inside_functions(tmp_path):
    """The check above fails for a circle that closes only inside a function (a planted pair of modules)."""
    (tmp_path / "a.py").write_text("import json\n\n\ndef f():\n    from pkg.b import g\n    return g\n")
    (tmp_path / "b.py").write_text("from pkg.a import f\n\n\ndef g():\n    return f\n")
    known = {"pkg.a": tmp_path / "a.py", "pkg.b": tmp_path / "b.py"}
    at_import_time = {n: imports(n, p, module_level_only=True, known=known) for n, p in known.items()}
    anywhere = {n: imports(n, p, module_level_only=False, known=known) for n, p in known.items()}
    assert find_cycle(at_import_time) == []
    assert find_cycle(anywhere) == ["pkg.a", "pkg.b", "pkg.a"]


def test_layers_point_one_way():
    everything = {name: imports(name, path, module_level_only=False) for name, path in MODULES.items()}

    def imported_by(prefix):
        return {m for name, deps in everything.items() if name.startswith(prefix) for m in deps}

    # Training is a library the pipeline drives: it knows neither the pipeline nor the recipe loader.
    assert not {m for m in imported_by("yunshan.training") if m.startswith(("yunshan.pipeline", "yunshan.recipe"))}
    # The data layer is below training, the pipeline and the commands.
    assert not {m for m in imported_by("yunshan.data.") if m.startswith(
        ("yunshan.pipeline", "yunshan.training", "yunshan.recipe", "yunshan.cli", "yunshan.data_commands"))}
    # The recipe loader knows no recipe.
    assert everything["yunshan.recipe"] <= {"yunshan.samples"}
    # The tokenizer tools read corpora through the data layer's one reader, never the other way round; apart from
    # its command module (which measures an extension's cost on a model), the tokenizer library knows neither
    # training, the pipeline, evaluation, the recipe loader nor the command line.
    assert not {m for m in imported_by("yunshan.data.") if m.startswith("yunshan.tokenizer")}
    assert {"yunshan.data.records", "yunshan.data.sources"} <= everything["yunshan.tokenizer.corpus"]
    library = {m for name, deps in everything.items() if name.startswith("yunshan.tokenizer")
               and name != "yunshan.tokenizer.commands" for m in deps}
    assert not {m for m in library if m.startswith(
        ("yunshan.pipeline", "yunshan.training", "yunshan.eval", "yunshan.recipe", "yunshan.cli"))}


def test_the_data_layer_never_prints():
    for path in (ROOT / "yunshan" / "data").rglob("*.py"):
        calls = [node.lineno for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
                 if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "print"]
        assert not calls, f"{path.relative_to(ROOT)}: print at lines {calls}; the data layer returns, its commands print"


def test_docstring_commands_name_recipes_that_exist():
    """Every `recipes/NAME.yaml` a module docstring, README or recipe comment names is a shipped recipe."""
    texts = [(p, ast.get_docstring(ast.parse(p.read_text(encoding="utf-8"))) or "") for p in MODULES.values()]
    texts += [(p, p.read_text(encoding="utf-8")) for p in ROOT.glob("**/*.md") if ".venv" not in p.parts]
    texts += [(p, p.read_text(encoding="utf-8")) for p in (ROOT / "recipes").glob("*.yaml")]
    named = {(p, m) for p, text in texts for m in re.findall(r"recipes/([\w.-]+\.yaml)", text)}
    assert named, "no recipe named anywhere: the pattern is broken"
    missing = sorted(f"{p.relative_to(ROOT)}: recipes/{m}" for p, m in named if not (ROOT / "recipes" / m).is_file())
    assert not missing, missing
