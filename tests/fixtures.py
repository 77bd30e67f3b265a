"""Builders for hermetic tests: corpora written on the fly and a byte-level BPE tokenizer trained in-process; a umask
for a block and the modes of a folder's files."""

from __future__ import annotations

import contextlib
import json
import os
import random
import socket
import stat
from pathlib import Path

WORDS = (
    "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu nu xi omicron pi rho sigma tau upsilon "
    "资产 负债 利润 法院 合同 诉讼 天气 旅行 the of and market court contract weather"
).split()


def write_jsonl_corpus(path: Path, n_docs: int, min_words: int, max_words: int, seed: int, field: str = "text"):
    rng = random.Random(seed)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for i in range(n_docs):
            text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(min_words, max_words)))
            f.write(json.dumps({"id": i, field: text, "lang": "en" if i % 2 else "zh"}, ensure_ascii=False) + "\n")
    return path


def three_source_corpora(root: Path, scale: int = 1) -> dict[str, Path]:
    """Short, medium and long documents: very different lengths, as the token-ratio tests need."""
    return {
        "short": write_jsonl_corpus(root / "short.jsonl", 600 * scale, 3, 15, seed=1),
        "mid": write_jsonl_corpus(root / "mid.jsonl", 150 * scale, 40, 160, seed=2),
        "long": write_jsonl_corpus(root / "long.jsonl", 20 * scale, 400, 1500, seed=3),
    }


def train_tokenizer(folder: Path, texts: list[str] | None = None, vocab_size: int = 400):
    """A byte-level BPE tokenizer (pad/bos/eos specials) saved as an HF tokenizer folder."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    rng = random.Random(0)
    texts = texts or [" ".join(rng.choice(WORDS) for _ in range(30)) for _ in range(300)]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, special_tokens=["<pad>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>")
    fast.save_pretrained(folder)
    return fast


def free_port() -> int:
    """A free TCP port for an accelerate launch's rendezvous (another test run on the machine may hold 29500)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# The real benchmark releases shared beside the repository (../shared/realdata, its README lists sources and
# licences); YUNSHAN_REALDATA points elsewhere. Tests read them in place and never copy their text into the project.
REALDATA = Path(__file__).resolve().parents[1].parent / "shared" / "realdata"


def realdata(*parts: str) -> Path:
    """A path under the real-data folder; the calling test is skipped (with the reason) when it is absent."""
    import os

    import pytest

    root = Path(os.environ.get("YUNSHAN_REALDATA") or REALDATA)
    path = root.joinpath(*parts)
    if not path.exists():
        pytest.skip(f"{path} is absent: the real releases are not beside this checkout (set YUNSHAN_REALDATA)")
    return path


@contextlib.contextmanager
def umask(mask: int):
    """Run the block under `mask` (yunshan writes every file with the user's umask), then put the old one back."""
    old = os.umask(mask)
    try:
        yield
    finally:
        os.umask(old)


def file_modes(folder: Path) -> dict[str, int]:
    """Every file under `folder` (relative path) -> its permission bits."""
    return {p.relative_to(folder).as_posix(): stat.S_IMODE(p.stat().st_mode)
            for p in sorted(Path(folder).rglob("*")) if p.is_file() and not p.is_symlink()}
