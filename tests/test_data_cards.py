"""data_cards/: every card is a valid Hugging Face dataset card with yunshan's required fields and sections, every
command it gives parses with yunshan's own CLI, bundled-sample cards state exactly what manifest.json says, and every
card a recipe names exists."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest
import yaml
from huggingface_hub import DatasetCard

from yunshan.cli import build_parser
from yunshan.data.conversations import SFT_FORMATS, SftSourceArgs
from yunshan.data.preference import PrefSourceArgs
from yunshan.data.sources import SourceArgs
from yunshan.arguments.recipe import load_recipe

ROOT = Path(__file__).resolve().parents[1]
CARDS = ROOT / "data_cards"
RECIPES = ROOT / "recipes"
MANIFEST = json.loads((ROOT / "yunshan/samples/data/manifest.json").read_text(encoding="utf-8"))["files"]

ROLES = {"cpt", "sft", "preference", "eval", "heldout"}
FORMATS = {"jsonl", "txt", "alpaca", "messages", "sharegpt", "ceval", "cmmlu", "lawbench", "jecqa", "cflue",
           "self_instruct", "pairs", "ultrafeedback", "kto"}  # the last three: preference data (yunshan.data.preference)
REQUIRED = ("role", "format", "size_in_paper", "source_url", "license_source", "convert")
SECTIONS = ("## Source", "## License", "## Format", "## Convert", "## Caveats")
# Licence ids the Hub accepts that these cards use; anything else must be "other" with a name and a link.
LICENSES = {"apache-2.0", "mit", "cc-by-4.0", "cc-by-sa-4.0", "cc-by-nc-4.0", "cc-by-nc-sa-4.0", "other"}
SIZE_CATEGORIES = ["n<1K", "1K<n<10K", "10K<n<100K", "100K<n<1M", "1M<n<10M", "10M<n<100M", "100M<n<1B",
                   "1B<n<10B", "10B<n<100B", "100B<n<1T", "n>1T"]
TASKS = {"text-generation", "fill-mask", "question-answering", "multiple-choice", "text-classification"}
# The datasets the PanGu-π paper names for YunShan (section 6) plus C-Eval and CMMLU (section 5).
PAPER_CARDS = {"fincorpus", "tushare", "pile-of-law", "lexfiles", "pkulaw", "china-judgments-online", "jec-qa",
               "chatlaw", "lawyer-llama", "lawgpt-zh", "financeiq", "fineval", "lawbench", "ceval", "cmmlu"}


def card_paths() -> list[Path]:
    return sorted(p for p in CARDS.glob("*.md") if p.name != "README.md")


def front_matter(path: Path) -> dict:
    return yaml.safe_load(path.read_text(encoding="utf-8").split("---\n")[1])


def commands(text: str) -> list[str]:
    """Every `yunshan ...` command of a text: whole `yunshan ...` strings and lines of code blocks, with backslash
    line continuations joined and `&&` chains split."""
    joined = re.sub(r"\\\n\s*", " ", text)
    found = []
    for line in joined.splitlines():
        for part in line.split("&&"):
            part = part.strip().strip("`")
            if part.startswith("yunshan "):
                found.append(part)
    return found


def parse_cli(command: str) -> None:
    argv = shlex.split(command)
    assert argv[0] == "yunshan"
    try:
        build_parser().parse_args(argv[1:])
    except SystemExit as err:
        pytest.fail(f"not a valid yunshan command ({err}): {command}")


@pytest.fixture(scope="module")
def parser():
    return build_parser()


def test_every_dataset_the_paper_names_and_every_sample_has_a_card():
    ids = {p.stem for p in card_paths()}
    assert PAPER_CARDS <= ids, f"missing cards: {sorted(PAPER_CARDS - ids)}"
    for cid in ids:
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", cid), f"{cid}: card ids are lowercase words joined by '-'"


@pytest.mark.parametrize("path", card_paths(), ids=lambda p: p.stem)
def test_card_is_a_valid_dataset_card_with_required_fields(path):
    card = DatasetCard.load(path)  # front matter must parse as DatasetCardData
    data = card.data.to_dict()
    where = f"{path.relative_to(ROOT)}"
    assert data.get("pretty_name"), f"{where}: pretty_name missing"
    assert data.get("license") in LICENSES, f"{where}: license {data.get('license')!r} not one of {sorted(LICENSES)}"
    if data["license"] == "other":
        assert data.get("license_name") and str(data.get("license_link", "")).startswith("http"), \
            f"{where}: license other needs license_name and an http(s) license_link"
    langs = data.get("language")
    assert isinstance(langs, list) and langs and all(re.fullmatch(r"[a-z]{2}", x) for x in langs), \
        f"{where}: language must be a list of ISO 639-1 codes, got {langs!r}"
    for size in data.get("size_categories") or []:
        assert size in SIZE_CATEGORIES, f"{where}: size_categories {size!r} is not a Hub value"
    assert set(data.get("task_categories") or []) <= TASKS, f"{where}: unknown task_categories"
    assert set(data.get("source_datasets") or []) <= {"original", "extended"}, f"{where}: source_datasets"

    ys = data.get("yunshan")
    assert isinstance(ys, dict), f"{where}: no yunshan block in the front matter"
    for key in REQUIRED:
        assert ys.get(key), f"{where}: yunshan.{key} is required"
        assert key == "role" or isinstance(ys[key], str) and ys[key].strip(), f"{where}: yunshan.{key} is text"
    roles = [ys["role"]] if isinstance(ys["role"], str) else ys["role"]
    assert roles and set(roles) <= ROLES, f"{where}: yunshan.role {ys['role']!r} not in {sorted(ROLES)}"
    assert ys["format"] in FORMATS, f"{where}: yunshan.format {ys['format']!r} not in {sorted(FORMATS)}"
    if ys["format"] == "jsonl":
        assert ys.get("text_field"), f"{where}: a jsonl card names its text_field"
    assert ys["source_url"].startswith(("http", "yunshan/samples/")), f"{where}: source_url"
    if ys["convert"].startswith("none"):
        assert ys.get("recipe_source") or ys.get("eval_command"), \
            f"{where}: a card without a conversion shows the recipe source or the eval command instead"

    body = card.text
    positions = [body.find(s + "\n") for s in SECTIONS]
    assert all(p >= 0 for p in positions), f"{where}: body needs sections {SECTIONS}"
    assert positions == sorted(positions), f"{where}: sections out of order"
    for i, section in enumerate(SECTIONS):
        end = positions[i + 1] if i + 1 < len(SECTIONS) else len(body)
        assert len(body[positions[i] + len(section):end].strip()) > 40, f"{where}: {section} is empty"


@pytest.mark.parametrize("path", card_paths(), ids=lambda p: p.stem)
def test_every_command_and_recipe_entry_of_a_card_is_valid(path):
    """The exact commands parse with yunshan's own CLI; recipe entries build the recipe dataclasses."""
    ys = front_matter(path)["yunshan"]
    text = path.read_text(encoding="utf-8")
    found = commands(text) + commands(ys["convert"]) + commands(ys.get("eval_command", ""))
    if not ys["convert"].startswith("none"):
        assert commands(ys["convert"]), f"{path.name}: convert is neither 'none: ...' nor a yunshan command"
    for command in found:
        parse_cli(command)
    source = ys.get("recipe_source")
    if source:
        assert source.get("card") == path.stem, f"{path.name}: recipe_source.card must be {path.stem!r}"
        # A recipe entry, built as the recipe loader builds it (its ${samples} and ${data} replaced first).
        if ys["role"] == "preference":
            load_recipe(PrefSourceArgs, data=source)
        else:
            load_recipe(SftSourceArgs if source.get("format") in SFT_FORMATS else SourceArgs, data=source)


# ------------------------------------------------------------------------------------------- bundled samples


def sample_cards() -> list[Path]:
    return [p for p in card_paths() if p.stem.startswith("yunshan-sample-")]


def test_sample_cards_cover_every_bundled_file_exactly_once():
    covered: dict[str, str] = {}
    for path in sample_cards():
        for name in front_matter(path)["yunshan"]["files"]:
            assert name not in covered, f"{name} is on two cards: {covered[name]} and {path.name}"
            covered[name] = path.name
    assert set(covered) == set(MANIFEST), (
        f"bundled files without a card: {sorted(set(MANIFEST) - set(covered))}; "
        f"card files not in manifest.json: {sorted(set(covered) - set(MANIFEST))}")


@pytest.mark.parametrize("path", sample_cards(), ids=lambda p: p.stem)
def test_sample_card_sizes_match_the_manifest(path):
    front = front_matter(path)
    files = front["yunshan"]["files"]
    for name, stated in files.items():
        actual = {k: MANIFEST[name][k] for k in ("records", "chars", "bytes")}
        assert stated == actual, f"{path.name}: {name} states {stated}, manifest.json has {actual}"
    # The body's size table says the same, row by row and in total.
    text = path.read_text(encoding="utf-8")
    rows = dict((m.group(1), tuple(int(x.replace(",", "")) for x in m.groups()[1:]))
                for m in re.finditer(r"^\| `([^`]+)` \| ([\d,]+) \| ([\d,]+) \| ([\d,]+) \|$", text, re.M))
    assert rows == {n: (v["records"], v["chars"], v["bytes"]) for n, v in files.items()}, f"{path.name}: size table"
    total = tuple(sum(v[k] for v in files.values()) for k in ("records", "chars", "bytes"))
    assert f"| **total** | **{total[0]:,}** | **{total[1]:,}** | **{total[2]:,}** |" in text
    # size_categories agrees with the record count.
    n = total[0]
    bounds = [(0, 1e3), (1e3, 1e4), (1e4, 1e5), (1e5, 1e6)]
    expected = SIZE_CATEGORIES[next(i for i, (lo, hi) in enumerate(bounds) if lo <= n < hi)]
    assert front["size_categories"] == [expected], f"{path.name}: {n} records is {expected}"


def test_readme_index_lists_every_card_with_its_role_licence_and_sample_size():
    readme = (CARDS / "README.md").read_text(encoding="utf-8")
    rows = {m.group(1): [c.strip() for c in m.group(0).strip("|").split("|")]
            for m in re.finditer(r"^\| \[`([a-z0-9-]+)`\]\(\1\.md\) \|.*\|$", readme, re.M)}
    assert set(rows) == {p.stem for p in card_paths()}, "README index and card files differ"
    for path in card_paths():
        front = front_matter(path)
        _, name, role, licence, size = rows[path.stem]
        ys = front["yunshan"]
        assert name == front["pretty_name"], f"README row {path.stem}: dataset name"
        assert role == (ys["role"] if isinstance(ys["role"], str) else ", ".join(ys["role"])), f"{path.stem}: role"
        expected = front["license"] if front["license"] != "other" else f"other ({front['license_name']})"
        assert licence == expected, f"README row {path.stem}: licence {licence!r}, card says {expected!r}"
        if "files" in ys:
            recs = sum(v["records"] for v in ys["files"].values())
            chars = sum(v["chars"] for v in ys["files"].values())
            assert size == f"{recs:,} records, {chars:,} chars", f"README row {path.stem}: size"


# ------------------------------------------------------------------------------------------- recipes


def recipe_files(recipes_dir: Path) -> list[Path]:
    """YAML recipes anywhere under recipes/, except the accelerate launch configs."""
    return sorted(p for p in recipes_dir.rglob("*") if p.suffix in (".yaml", ".yml")
                  and "accelerate" not in p.relative_to(recipes_dir).parts)


def card_references(node, path: str = "") -> list[tuple[str, str]]:
    """(dotted path, card id) of every `card:` value in a YAML tree (data sources, SFT sources, eval entries)."""
    found = []
    if isinstance(node, dict):
        for key, value in node.items():
            where = f"{path}.{key}" if path else str(key)
            if key == "card":
                values = value if isinstance(value, list) else [value]
                found += [(where, str(v)) for v in values]
            else:
                found += card_references(value, where)
    elif isinstance(node, list):
        for i, item in enumerate(node):
            found += card_references(item, f"{path}.{i}")
    return found


def sources_without_card(node, path: str = "") -> list[str]:
    """Dotted paths of entries of a `sources` list that name no card."""
    missing = []
    if isinstance(node, dict):
        for key, value in node.items():
            where = f"{path}.{key}" if path else str(key)
            if key == "sources" and isinstance(value, list):
                missing += [f"{where}.{i} ({item.get('name', '?')})" for i, item in enumerate(value)
                            if isinstance(item, dict) and not item.get("card")]
            missing += sources_without_card(value, where)
    elif isinstance(node, list):
        for i, item in enumerate(node):
            missing += sources_without_card(item, f"{path}.{i}")
    return missing


def recipe_card_problems(recipes_dir: Path, cards_dir: Path) -> list[str]:
    known = {p.stem for p in cards_dir.glob("*.md") if p.name != "README.md"}
    problems = []
    for recipe in recipe_files(recipes_dir):
        tree = yaml.safe_load(recipe.read_text(encoding="utf-8"))
        for where, cid in card_references(tree):
            if cid not in known:
                problems.append(f"{recipe}: {where}: card {cid!r} has no data_cards/{cid}.md")
        for where in sources_without_card(tree):
            problems.append(f"{recipe}: {where}: this source names no card (add `card: <id>` and a data card)")
    return problems


def test_every_card_a_recipe_names_exists():
    problems = recipe_card_problems(RECIPES, CARDS)
    assert not problems, "\n".join(problems)


def test_a_missing_card_is_reported_with_the_recipe_file_and_card_id(tmp_path):
    recipes = tmp_path / "recipes"
    (recipes / "sub").mkdir(parents=True)
    (recipes / "accelerate").mkdir()
    (recipes / "sub" / "x_cpt_full.yaml").write_text(yaml.safe_dump({
        "cpt": {"data": {"sources": [{"name": "fin", "path": "f.jsonl", "card": "fincorpus"},
                                     {"name": "law", "path": "l.jsonl", "card": "no-such-card"}]}},
        "sft": {"data": {"sources": [{"name": "j", "path": "j", "format": "jecqa"}]}},
        "eval": {"tasks": [{"name": "fineval", "card": "fineval"}, {"name": "x", "card": "missing-eval-card"}]},
    }), encoding="utf-8")
    # Files under recipes/accelerate/ are launch configs, never recipes.
    (recipes / "accelerate" / "ddp.yaml").write_text("card: not-a-recipe\n", encoding="utf-8")
    problems = recipe_card_problems(recipes, CARDS)
    recipe = recipes / "sub" / "x_cpt_full.yaml"
    assert problems == [
        f"{recipe}: cpt.data.sources.1.card: card 'no-such-card' has no data_cards/no-such-card.md",
        f"{recipe}: eval.tasks.1.card: card 'missing-eval-card' has no data_cards/missing-eval-card.md",
        f"{recipe}: sft.data.sources.0 (j): this source names no card (add `card: <id>` and a data card)",
    ]
    (recipe).write_text(yaml.safe_dump({"cpt": {"data": {"sources": [
        {"name": "fin", "path": "f.jsonl", "card": "fincorpus"}]}}}), encoding="utf-8")
    assert recipe_card_problems(recipes, CARDS) == []
