"""Checks every extended tokenizer must pass before it is written: base ids and added tokens unchanged, no dead tokens.

    yunshan tokenizer extend --base BASE --corpus C.jsonl --new-tokens N --out OUT   # runs them before writing OUT

Run by `extend.py` on the finished tokenizer.json (loaded back with the `tokenizers` library, exactly as
transformers loads it) before anything reaches `--out`; the tests run them again through `AutoTokenizer`.
"""

from __future__ import annotations


def _flags(token) -> tuple:
    return (token.content, token.special, token.lstrip, token.rstrip, token.normalized, token.single_word)


def check_base_preserved(tokenizer, base) -> list[str]:
    """Problems found (empty when every base id maps to the same string and every added token kept id and flags)."""
    problems = []
    for idx, token in enumerate(base.id_to_token):
        if token is not None and tokenizer.id_to_token(idx) != token:
            problems.append(f"base id {idx} was {token!r}, now {tokenizer.id_to_token(idx)!r}")
    before = {i: _flags(t) for i, t in base.backend.get_added_tokens_decoder().items()}
    after = {i: _flags(t) for i, t in tokenizer.get_added_tokens_decoder().items()}
    for idx, flags in before.items():
        if after.get(idx) != flags:
            problems.append(f"added token {flags[0]!r} (id {idx}) changed: {after.get(idx)}")
    return problems


def find_dead_tokens(tokenizer, base, new_tokens: list[tuple[int, str]]) -> list[int]:
    """Ids of new tokens the encoder never emits for their own text.

    Each new token must come out of the BPE model when its model-space string is one word (this covers tokens that
    only occur inside words, e.g. part of a UTF-8 character or a SentencePiece piece without "▁"); when a text exists
    whose encoding alone should be the token (`base.text_of`), the full pipeline must encode that text to it too.
    """
    dead = []
    texts: list[tuple[int, str]] = []
    for idx, string in new_tokens:
        if [t.id for t in tokenizer.model.tokenize(string)] != [idx]:
            dead.append(idx)
            continue
        text = base.text_of(string)
        if text is not None:
            texts.append((idx, text))
    encodings = tokenizer.encode_batch([text for _, text in texts], add_special_tokens=False)
    dead += [idx for (idx, _), enc in zip(texts, encodings) if enc.ids != [idx]]
    return sorted(dead)
