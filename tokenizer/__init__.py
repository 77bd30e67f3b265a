"""yunshan.tokenizer: grow a tokenizer's vocabulary with finance and legal tokens without breaking it.

    yunshan tokenizer extend --base BASE --corpus domain.jsonl --words builtin:finance --new-tokens 3000 --out OUT
    yunshan tokenizer report --tokenizer BASE --tokenizer OUT --text heldout.txt

    from yunshan.tokenizer import ExtendArgs, extend_tokenizer, compression_report, resize_embeddings

Continued BPE on top of the base segmentation (no base id or merge rank changes, no dead tokens), word-list terms
reachable as single tokens through merge chains, compression reports as the PanGu-π paper defines them, and the
embedding resize that starts new rows from the pieces they replace. See README.md in this folder.
"""

from .base import BaseTokenizer, load_base_tokenizer
from .embeddings import resize_embeddings
from .extend import ExtendArgs, extend_tokenizer
from .report import compression_report, format_markdown
from .word_lists import load_word_list, resolve_word_lists

__all__ = [
    "BaseTokenizer", "ExtendArgs", "compression_report", "extend_tokenizer", "format_markdown", "load_base_tokenizer",
    "load_word_list", "resize_embeddings", "resolve_word_lists",
]
