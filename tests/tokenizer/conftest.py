"""Session fixtures of the tokenizer tests: corpora, the base tokenizers (tokenizer_fixtures.py) and extensions."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from tokenizer_fixtures import (  # noqa: E402
    KINDS,
    build_byte_level,
    build_metaspace,
    build_sentencepiece,
    extend,
    write_corpora,
)


@pytest.fixture(scope="session")
def corpus(tmp_path_factory) -> dict[str, Path]:
    return write_corpora(tmp_path_factory.mktemp("corpus"))


@pytest.fixture(scope="session")
def bases(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("bases")
    sp_model = build_sentencepiece(root / "sentencepiece")
    return {
        "byte_level_llama3": build_byte_level(root / "byte_level_llama3", "llama3"),
        "byte_level_gpt2": build_byte_level(root / "byte_level_gpt2", "gpt2"),
        "metaspace": build_metaspace(root / "metaspace", sp_model),
        "sentencepiece": sp_model,
    }


@pytest.fixture(scope="session")
def extended(bases, corpus, tmp_path_factory) -> dict[str, tuple[Path, dict]]:
    """kind -> (extended folder, extension report)."""
    root = tmp_path_factory.mktemp("extended")
    return {kind: (root / kind, extend(bases[kind], corpus, root / kind)) for kind in KINDS}
