"""Train a byte-level BPE tokenizer from scratch: the stand-in base of the demo, where no base model can be
downloaded (`base:` in a `yunshan run` recipe).

    from yunshan.tokenizer.train import train_bpe_tokenizer
    train_bpe_tokenizer(["general.jsonl"], 3000, "runs/demo/base_tokenizer")

GPT-2 / Llama-3 style: byte-level pre-tokenisation (every byte has a token, nothing is unknown), special tokens
<pad>, <s>, </s>; trained by the `tokenizers` library on the documents `corpus.read_corpus` reads (as `yunshan cpt`
reads them).
"""

from __future__ import annotations

from pathlib import Path

from .corpus import read_corpus


def train_bpe_tokenizer(corpus: list[str], vocab_size: int, out: str | Path) -> None:
    """Train a `vocab_size` byte-level BPE on the corpus (files, folders or globs in any format `yunshan cpt` reads)
    and save it as a transformers tokenizer folder `out`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    texts = list(read_corpus(corpus, what="base.tokenizer_corpus"))
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<pad>", "<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(texts, trainer=trainer)
    PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>",
                            eos_token="</s>").save_pretrained(out)
