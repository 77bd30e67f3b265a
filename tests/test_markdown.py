"""The project's Markdown works from any checkout (issue 48): no command names a folder that exists on one machine
only, and every relative link leads somewhere.

What counts as a machine path. A token that starts with `/` at a word boundary (start of line, after whitespace or
one of `( [ = " ' , :`, or just inside an opening backtick) and goes on with a name character is an absolute path,
and every absolute path is refused unless it is one of:
- a system location the same on every POSIX machine: its first part is one of `SYSTEM_ROOTS` (`/usr/bin/time`,
  `/dev/null`, `/proc/...`);
- a generic placeholder: `/path/to/...`;
- a name that is no file path at all: one of the server's HTTP routes (`/v1/...`, `/health`) or one of `yunshan
  chat`'s commands (`/reset`, `/exit`), listed in `NOT_PATHS`.
URLs never match (the slashes of `https://host/a` follow `:` or a name character, never a boundary), nor do
relative paths (`runs/x`, `../shared/realdata`), `~/...` (anyone's home) or `${models}` / `$YUNSHAN_MODELS`. So
`/work/...`, `/tmp/...`, `/home/...`, `/models/...` and `/data/...` (the folders of one machine, and the PanGu-π
weights nobody outside Huawei can download) fail, in prose as in code blocks: a measurement's command a reader copies
is a command too.

What counts as a link. `[text](target)` and `![alt](target)` and reference definitions `[id]: target` outside code
(fenced blocks and inline code spans are skipped). A target with a scheme (`https:`, `mailto:`) is not checked; any
other target is a path relative to the file (or to the repository root when it starts with `/`), which must exist
(a file or a folder) inside the repository; `#anchor`, alone or after a Markdown file, must be the slug of one of
that file's headings by GitHub's rule: the heading's text as rendered (code spans, emphasis and link syntax removed),
lower-cased, every character that is not a letter, digit, `_`, `-` or space removed, spaces turned into `-`, and
`-1`, `-2`, ... added to repeats.
"""

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SYSTEM_ROOTS = {"usr", "bin", "sbin", "etc", "dev", "proc", "sys", "lib", "lib64"}
NOT_PATHS = {"v1", "health", "reset", "exit"}
PLACEHOLDER = re.compile(r"/path/to(/|$)")

ABSOLUTE = re.compile(r"(?:^|[\s(\[=\"',:]|(?:^|(?<=[\s(\[]))`)(/[A-Za-z0-9_.~-][^\s`\"')\]]*)")
FENCE = re.compile(r"^(\s*)(```|~~~)")
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s+.*)?$")
SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")


def tracked_markdown() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "*.md"], cwd=ROOT, capture_output=True, text=True)
    if out.returncode != 0:
        pytest.skip(f"not a git checkout: {out.stderr.strip()}")
    return [ROOT / name for name in out.stdout.splitlines() if (ROOT / name).is_file()]


def machine_paths(text: str) -> list[tuple[int, str]]:
    """(line, path) for every absolute path in `text` that is neither a system location, a placeholder nor a
    route or command (the rule in the module docstring)."""
    found = []
    for number, line in enumerate(text.splitlines(), 1):
        for match in ABSOLUTE.finditer(line):
            path = match.group(1).rstrip(".,;:")
            first = path[1:].split("/")[0]
            if first in SYSTEM_ROOTS or first in NOT_PATHS or PLACEHOLDER.match(path):
                continue
            found.append((number, path))
    return found


def outside_code_blocks(text: str) -> list[tuple[int, str]]:
    """(line number, line) for the lines outside fenced code blocks."""
    lines, fence = [], None
    for number, line in enumerate(text.splitlines(), 1):
        opened = FENCE.match(line)
        if opened and (fence is None or opened.group(2) == fence):
            fence = None if fence else opened.group(2)
        elif fence is None:
            lines.append((number, line))
    return lines


def prose_lines(text: str) -> list[tuple[int, str]]:
    """The lines outside fenced code blocks, with inline code spans blanked."""
    return [(number, re.sub(r"(`+)(?:(?!\1).)+?\1", "``", line)) for number, line in outside_code_blocks(text)]


def slug(heading: str) -> str:
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # links: their text
    text = re.sub(r"<[^>]+>", "", text)  # inline HTML
    text = text.replace("`", "").replace("*", "")
    text = re.sub(r"(?<!\w)_+|_+(?!\w)", "", text)  # _emphasis_, not snake_case
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for heading in headings(path.read_text(encoding="utf-8")):
        base = slug(heading)
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    for name in re.findall(r"<a\s+(?:name|id)=\"([^\"]+)\"", path.read_text(encoding="utf-8")):
        out.add(name)
    return out


def headings(text: str) -> list[str]:
    """The text of every ATX heading outside fenced code, the closing #s removed."""
    found = (re.match(r"^ {0,3}#{1,6}\s+(.*?)(?:\s+#+)?\s*$", line) for _, line in outside_code_blocks(text))
    return [heading.group(1) for heading in found if heading]


def broken_links(path: Path, root: Path = ROOT) -> list[str]:
    problems = []
    for number, line in prose_lines(path.read_text(encoding="utf-8")):
        targets = [m.group(1) for m in LINK.finditer(line)]
        reference = REFERENCE.match(line)
        if reference:
            targets.append(reference.group(1))
        for target in targets:
            if SCHEME.match(target):
                continue
            where, _, anchor = target.partition("#")
            file = path if not where else (root / where.lstrip("/") if where.startswith("/")
                                           else path.parent / where.replace("%20", " "))
            name = f"{path.relative_to(root)}:{number}: {target}"
            if not file.exists():
                problems.append(f"{name}: no such file")
            elif root.resolve() not in [file.resolve(), *file.resolve().parents]:
                problems.append(f"{name}: outside the repository")
            elif anchor and file.suffix == ".md" and anchor not in anchors(file):
                problems.append(f"{name}: no heading #{anchor} in {file.resolve().relative_to(root.resolve())}")
    return problems


def test_no_tracked_markdown_names_a_machine_path():
    problems = [f"{path.relative_to(ROOT)}:{line}: {found}" for path in tracked_markdown()
                for line, found in machine_paths(path.read_text(encoding="utf-8"))]
    assert problems == [], "absolute paths of one machine (use relative paths, ${models}, ../shared/realdata):\n" \
        + "\n".join(problems)


def test_every_relative_link_resolves():
    problems = [problem for path in tracked_markdown() for problem in broken_links(path)]
    assert problems == [], "\n".join(problems)


def test_the_path_rule():
    text = ("YUNSHAN_MODELS=/work/models yunshan pref training.output_dir=/tmp/x\n"
            "`/models/pangu-pi-7b` and (/home/me/data) or --out /data/heldout.txt, written to /tmp.\n"
            "/usr/bin/time -v yunshan run; `/dev/null`; GET /v1/models and `/health`; /reset, /exit\n"
            "https://huggingface.co/HuggingFaceTB/SmolLM2-135M-Instruct ../shared/realdata ~/runs/x runs/a/b\n"
            "${models}/smollm2-135m $YUNSHAN_MODELS/x /path/to/your/corpus.jsonl a .zip`/parquet file\n")
    assert machine_paths(text) == [(1, "/work/models"), (1, "/tmp/x"), (2, "/models/pangu-pi-7b"),
                                   (2, "/home/me/data"), (2, "/data/heldout.txt"), (2, "/tmp")]


def test_the_link_rule(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs/guide.md").write_text("# Guide\n\n## Set-up (`make venv`)\n\n## Set-up (`make venv`)\n")
    (tmp_path / "README.md").write_text(
        "# Top\n\n[ok](docs/guide.md) [ok](docs/guide.md#set-up-make-venv) [ok](docs/guide.md#set-up-make-venv-1)\n"
        "[ok](#top) [ok](docs/) [ok](/docs/guide.md) [ok](https://example.org/x.md#nowhere) [ok](mailto:a@b.c)\n"
        "`[code](missing.md)`\n```\n[code](missing.md)\n```\n"
        "[gone](missing.md) [no anchor](docs/guide.md#set-up) [no anchor](#nowhere) [out](../elsewhere.md)\n"
        "[ref]: docs/nothing.md\n")
    (tmp_path.parent / "elsewhere.md").write_text("# x\n")
    problems = broken_links(tmp_path / "README.md", tmp_path)
    assert [p.split(": ", 1)[1] for p in problems] == [
        "missing.md: no such file", "docs/guide.md#set-up: no heading #set-up in docs/guide.md",
        "#nowhere: no heading #nowhere in README.md", "../elsewhere.md: outside the repository",
        "docs/nothing.md: no such file"], problems


def test_github_slugs():
    assert slug("The demo (`make demo`)") == "the-demo-make-demo"
    assert slug("LoRA's variants on SmolLM2's CPT (`lora_variants.py`)") == "loras-variants-on-smollm2s-cpt-lora_variantspy"
    assert slug("Vocabulary extension on a real model (`extension_cost.py`)") == \
        "vocabulary-extension-on-a-real-model-extension_costpy"
    assert slug("PanGu-π as built") == "pangu-π-as-built"
    assert slug("GGUF for llama.cpp and Ollama") == "gguf-for-llamacpp-and-ollama"
    assert slug("The knowledge base (`facts.py`)") == "the-knowledge-base-factspy"
    assert slug("A *legal* specialist: **real** data, 1 : 1") == "a-legal-specialist-real-data-1--1"
