"""Issue 48's re-layout of yunshan/'s top level: rewrite the old module paths to the new ones in the files given.

    python tools/relayout_48.py                   # every tracked text file of the checkout
    python tools/relayout_48.py FILE...           # only these (e.g. `git diff --name-only main...BRANCH`)
    python tools/relayout_48.py --check FILE...   # list what would change, change nothing; exit 1 if anything would
    python tools/relayout_48.py --resolve ours    # in a merge with conflicts: see below

The modules themselves were moved once with `git mv` in the commit that added this script; a branch written before
that commit still names the old paths, and this brings its files onto the new layout. It rewrites only text, the
same way each time, and is idempotent (a second run changes nothing):

- dotted module paths (`yunshan.folders`, `from yunshan.chat import`, `mock.patch("yunshan.pretrained.X")`),
- file paths (`yunshan/folders.py`, `tests/models/test_merge.py`) in code, Markdown, recipes and the Makefile,
- `from yunshan import folders` (one name) and, inside yunshan/models/, `from .merge import` / `from . import merge`.

Prose that names a module by its bare file name (`folders.py`) is left to the reader.

Merging a branch with this one conflicts where the branch changed a line that this commit rewrote (an import of a
moved module, a docstring naming one). Most files this commit changed only by the rewrite above; in those the other
side's version, rewritten, is the merge. `--resolve SIDE` does that for every conflicted file (SIDE is the other
branch's side: `ours` when merging this branch into a main that has the other branch, `theirs` when merging a branch
into this one) and `git add`s it; the files this commit also edited by hand (HAND_EDITED) are listed and left to a
person.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

# old module -> new module
MOVES = {
    # the command line: the dispatcher stays `yunshan.cli` (now a package), `yunshan data` moves beside it
    "yunshan.data_commands": "yunshan.cli.data",
    # the arguments layer: what an arguments dataclass's fields declare, its flags, the recipe loader
    "yunshan.field_rules": "yunshan.arguments.field_rules",
    "yunshan.flags": "yunshan.arguments.flags",
    "yunshan.recipe": "yunshan.arguments.recipe",
    # what a run reads and writes besides data and models: typed records, folders, the lock, progress, report.html
    "yunshan.artifacts": "yunshan.io.artifacts",
    "yunshan.folders": "yunshan.io.folders",
    "yunshan.folder_lock": "yunshan.io.folder_lock",
    "yunshan.progress": "yunshan.io.progress",
    "yunshan.html_page": "yunshan.io.html_page",
    # loading a model: the reference resolved, remote code, the precision vocabulary
    "yunshan.pretrained": "yunshan.loading.pretrained",
    "yunshan.hub_download": "yunshan.loading.hub_download",
    "yunshan.remote_code": "yunshan.loading.remote_code",
    "yunshan.precision": "yunshan.loading.precision",
    # chat beside serve (which loads models the way chat does)
    "yunshan.chat": "yunshan.serve.chat",
    # merging, whose refit trains (on a cpt recipe's data): above training, no longer inside models
    "yunshan.models.merge": "yunshan.merging.merge",
}
# old file -> new file, besides the modules above (whose files follow from their names)
# files whose changes here go beyond the rewrite (new code, reworded docs): a conflict in them is resolved by hand
HAND_EDITED = {
    "docs/design.md", "pyproject.toml", "tests/test_structure.py", "yunshan/README.md", "yunshan/cli/__init__.py",
    "yunshan/training/cpt.py", "yunshan/training/sft.py", "yunshan/training/preference.py",
    "yunshan/training/embedding_warmup.py", "yunshan/training/monitoring.py",
}
FILES = {
    "yunshan/cli.py": "yunshan/cli/__init__.py",
    "tests/test_chat.py": "tests/serve/test_chat.py",
    "tests/models/test_merge.py": "tests/merging/test_merge.py",
}


def _file(module: str) -> str:
    return module.replace(".", "/") + ".py"


def rules() -> list[tuple[re.Pattern, str, str | None]]:
    """(pattern, replacement, the folder a rule is limited to or None), applied in order."""
    found = []
    for old, new in MOVES.items():
        # Not inside a longer dotted name (yunshan.data.chat stays), not a prefix of a longer one (recipes).
        found.append((re.compile(rf"(?<![\w.]){re.escape(old)}(?!\w)"), new, None))
        files = {_file(old): _file(new)}
        for before, after in files.items():
            found.append((re.compile(rf"(?<![\w.]){re.escape(before)}"), after, None))
        package, name = new.rsplit(".", 1)
        if old.count(".") == 1:  # `from yunshan import folders` (alone on its line, maybe `as x`)
            found.append((re.compile(rf"\bfrom yunshan import {re.escape(old.split('.')[1])}\b(?=\s*(?:as \w+)?\s*$)",
                                     re.M), f"from {package} import {name}", None))
    for before, after in FILES.items():
        found.append((re.compile(rf"(?<![\w.]){re.escape(before)}"), after, None))
    # models/commands.py imported merge relatively
    found.append((re.compile(r"\bfrom \.merge import\b"), "from yunshan.merging.merge import", "yunshan/models/"))
    found.append((re.compile(r"\bfrom \. import merge\b"), "from yunshan.merging import merge", "yunshan/models/"))
    return found


def rewrite(text: str, path: str) -> str:
    for pattern, replacement, folder in rules():
        if folder is None or path.startswith(folder):
            text = pattern.sub(replacement, text)
    return text


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=root, check=True, capture_output=True, text=True).stdout


def tracked_files(root: Path) -> list[str]:
    return sorted(set(git(root, "ls-files").splitlines()))  # a conflicted file is listed once per stage


def resolve(root: Path, side: str) -> int:
    """Each conflicted file not in HAND_EDITED: `side`'s version, rewritten, added. Returns 1 if any is left."""
    left = []
    for name in sorted(set(git(root, "diff", "--name-only", "--diff-filter=U").splitlines())):
        if name in HAND_EDITED:
            left.append(name)
            continue
        git(root, "checkout", f"--{side}", "--", name)
        path = root / name
        path.write_text(rewrite(path.read_text(encoding="utf-8"), name), encoding="utf-8")
        git(root, "add", "--", name)
        print(f"resolved {name}")
    for name in left:
        print(f"left to resolve by hand: {name}")
    return 1 if left else 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", help="files to rewrite (default: every tracked file)")
    parser.add_argument("--check", action="store_true", help="only list the files that would change")
    parser.add_argument("--resolve", choices=("ours", "theirs"),
                        help="in a merge: each conflicted file taken from this side (the other branch's), rewritten")
    args = parser.parse_args(argv)
    root = Path(__file__).resolve().parents[1]
    if args.resolve:
        return resolve(root, args.resolve)
    me = Path(__file__).resolve()
    changed = []
    for name in args.files or tracked_files(root):
        path = Path(name) if args.files else root / name
        if not path.is_file() or path.resolve() == me:
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue  # binary
        relative = path.resolve().relative_to(root).as_posix() if path.resolve().is_relative_to(root) else str(path)
        new = rewrite(text, relative)
        if new != text:
            changed.append(relative)
            if not args.check:
                path.write_text(new, encoding="utf-8")
    for name in changed:
        print(name)
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    sys.exit(main())
