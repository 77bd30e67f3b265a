"""Word lists: the shipped lists are clean and documented, cleaning is counted, and with the shipped lists every
term that the pre-tokeniser keeps whole encodes to one token (through merges, not as an added token)."""

from __future__ import annotations

import re

import pytest
from tokenizer_fixtures import extend
from transformers import AutoTokenizer

from yunshan.tokenizer.word_lists import BUILTIN_LISTS, WORDLIST_DIR, load_word_list, resolve_word_lists


@pytest.mark.parametrize("name", BUILTIN_LISTS)
def test_shipped_lists_are_clean_large_and_documented(name):
    path = WORDLIST_DIR / f"{name}.txt"
    words = load_word_list(path)
    assert len(words.terms) >= 300
    assert words.duplicates == 0 and words.blank_lines == 0
    assert all(not re.search(r"\s", t) for t in words.terms)  # one pre-tokenised word each: no spaces
    if name.endswith("_en"):
        assert all(re.fullmatch(r"[A-Za-z]+", t) for t in words.terms), [t for t in words.terms if "-" in t]
    else:
        assert all(re.search(r"[\u4e00-\u9fff]", t) for t in words.terms)
    readme = (WORDLIST_DIR / "README.md").read_text(encoding="utf-8")
    assert f"| `{name}.txt` | {len(words.terms)} |" in readme


def test_cleaning_is_counted_and_builtin_names_expand(tmp_path):
    path = tmp_path / "terms.txt"
    path.write_bytes("\ufeff资产负债表\n\n  资产负债表  \n# comment\nequity\r\nequity\n\n".encode("utf-8"))
    words = load_word_list(path)
    assert words.terms == ["资产负债表", "equity"]
    assert (words.lines, words.blank_lines, words.comment_lines, words.duplicates) == (7, 2, 1, 2)
    assert [p.name for p in resolve_word_lists(["builtin:finance", str(path), "builtin:legal_en"])] == \
        ["finance_zh.txt", "finance_en.txt", "terms.txt", "legal_en.txt"]
    assert len(resolve_word_lists(["builtin:all"])) == 4
    bad = tmp_path / "bad.txt"
    bad.write_bytes("资产\n".encode("utf-8") + b"\xff\xfe\n")
    with pytest.raises(ValueError, match=r"bad.txt: line 2: invalid UTF-8 at byte offset 7"):
        load_word_list(bad)


@pytest.mark.parametrize("kind", ["byte_level_llama3", "metaspace"])
def test_every_shipped_term_becomes_one_token(kind, bases, corpus, tmp_path):
    out = tmp_path / "out"
    report = extend(bases[kind], corpus, out, words=["builtin:all"], new_tokens=9000)
    terms = [t for name in BUILTIN_LISTS for t in load_word_list(WORDLIST_DIR / f"{name}.txt").terms]
    assert report["terms"]["total"] == len(set(terms))
    assert report["terms"]["not_added"] == []
    tok = AutoTokenizer.from_pretrained(str(out))
    added = set(tok.added_tokens_encoder)
    for term in terms:
        ids = tok.encode(term, add_special_tokens=False)
        assert len(ids) == 1, (term, tok.convert_ids_to_tokens(ids))
        assert tok.convert_ids_to_tokens(ids)[0] not in added  # a model token reached by merges
    assert report["new_tokens"]["from_word_lists"] > 1000
