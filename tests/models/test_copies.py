"""Code copied between the Hub-portable model folders stays a copy: every `# Copied from MODULE.NAME [with A->B]`
mark above a class or function is checked against its origin, as transformers' `utils/check_copies.py` does.

The model folders cannot import each other (each must load as remote code on its own), so shared pieces are copied
and marked instead; editing the origin without the copy (or the reverse) fails here.
"""

import ast
import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
MARK = re.compile(r"^# Copied from ([\w.]+)\.(\w+)(?: with (.+))?$")


def definitions(path: Path) -> dict[str, tuple[int, str]]:
    """name -> (first line, source) of every top-level class and function of a file (decorators included)."""
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    out = {}
    for node in ast.parse(text).body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef)):
            start = node.decorator_list[0].lineno if node.decorator_list else node.lineno
            out[node.name] = (start, "\n".join(lines[start - 1:node.end_lineno]))
    return out


def drifted_copies(paths: list[Path]) -> tuple[list[str], list[str]]:
    """(names of the marked copies, one message per copy that differs from its origin) in the given files."""
    names, problems = [], []
    for path in paths:
        lines = path.read_text(encoding="utf-8").splitlines()
        defs = definitions(path)
        starts = {start: name for name, (start, _) in defs.items()}
        for i, line in enumerate(lines, start=1):
            match = MARK.match(line.strip())
            if not match:
                continue
            assert i + 1 in starts, f"{path.name}:{i}: a '# Copied from' mark must sit right above a class or def"
            name, module, origin_name = starts[i + 1], match.group(1), match.group(2)
            expected = definitions(Path(importlib.util.find_spec(module).origin))[origin_name][1]  # not imported
            for pair in (match.group(3) or "").split(","):
                if pair.strip():
                    old, new = pair.strip().split("->")
                    expected = expected.replace(old, new)
            names.append(name)
            if defs[name][1] != expected:
                problems.append(f"{path.name}: {name} is marked '# Copied from {module}.{origin_name}' but differs "
                                "from it; change both or drop the mark")
    return names, problems


def test_every_marked_copy_equals_its_origin():
    names, problems = drifted_copies(sorted((ROOT / "yunshan" / "models").rglob("*.py")))
    # The pieces OTCE shares with PanGu-π: norm, rotary helpers, KV repetition, eager attention.
    assert set(names) >= {"OtceRMSNorm", "rotate_half", "apply_rotary_pos_emb", "repeat_kv", "eager_attention_forward"}
    assert problems == []


def test_a_drifted_copy_is_caught(tmp_path):
    copy = (ROOT / "yunshan/models/otce/modeling_otce.py").read_text(encoding="utf-8")
    drifted = tmp_path / "modeling_otce.py"
    drifted.write_text(copy.replace("hidden_states[:, :, None, :, :].expand", "hidden_states[:, :, None].expand"))
    assert copy != drifted.read_text(encoding="utf-8")
    _, problems = drifted_copies([drifted])
    assert problems == ["modeling_otce.py: repeat_kv is marked '# Copied from yunshan.models.pangu_pi."
                        "modeling_pangu_pi.repeat_kv' but differs from it; change both or drop the mark"]
