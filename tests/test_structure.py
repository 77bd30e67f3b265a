"""The shape of the package: imports point one way (no cycle, counting the imports inside functions too: a circle
that only closes when a function runs is still a circle), each layer of docs/design.md imports only the layers below
it, the data layer never prints, and docstring commands name recipes that exist."""

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


# The folders of yunshan/ as layers, top first (docs/design.md, "Which way imports point"): each imports only the
# layers below it, but for the command modules named in LAYER_EXCEPTIONS.
LAYERS = ["cli", "pipeline", "merging", "serve", "hub", "training", "tokenizer", "prepare", "eval", "models", "data",
          "loading", "arguments", "io", "samples"]
LAYER_EXCEPTIONS = {
    "yunshan.tokenizer.commands": {"training"},  # `yunshan tokenizer report --model` measures an extension's cost
    "yunshan.models.commands": {"merging"},  # `yunshan model merge`
}


def layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def test_layers_point_one_way():
    everything = {name: imports(name, path, module_level_only=False) for name, path in MODULES.items()}
    assert {layer(name) for name in MODULES} - {None} == set(LAYERS), "a folder of yunshan/ is missing from LAYERS"
    upward = sorted(f"{name} -> {m}" for name, deps in everything.items() if layer(name) for m in deps
                    if layer(m) and LAYERS.index(layer(m)) < LAYERS.index(layer(name))
                    and layer(m) not in LAYER_EXCEPTIONS.get(name, ()))
    assert not upward, upward

    def imported_by(prefix, but=()):
        return {m for name, deps in everything.items() if name.startswith(prefix) and name not in but for m in deps}

    # Within the order, narrower rules. The arguments layer knows no command, stage or recipe: only the sample data
    # its `${samples}` variable names. Run records and folders import nothing of yunshan; loading stands on them
    # alone (and on `import yunshan`, which registers the architectures).
    assert {m for m in imported_by("yunshan.arguments") if not m.startswith("yunshan.arguments")} <= {"yunshan.samples"}
    assert {m for m in imported_by("yunshan.io") if not m.startswith("yunshan.io")} == set()
    assert {m for m in imported_by("yunshan.loading") if not m.startswith("yunshan.loading")} <= {
        "yunshan", "yunshan.io.folders"}
    # Training is a library the pipeline drives: it does not read recipes itself.
    assert "yunshan.arguments.recipe" not in imported_by("yunshan.training")
    # The data layer is below training, the pipeline and the commands: of yunshan it knows only the field rules.
    assert {m for m in imported_by("yunshan.data.") if not m.startswith("yunshan.data.")} <= {
        "yunshan.arguments.field_rules"}
    # The tokenizer tools read corpora through the data layer's one reader; apart from its command module, the
    # tokenizer library knows neither evaluation nor the recipe loader.
    assert {"yunshan.data.records", "yunshan.data.sources"} <= everything["yunshan.tokenizer.corpus"]
    library = imported_by("yunshan.tokenizer", but={"yunshan.tokenizer.commands"})
    assert not {m for m in library if m.startswith(("yunshan.eval", "yunshan.arguments.recipe"))}


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
