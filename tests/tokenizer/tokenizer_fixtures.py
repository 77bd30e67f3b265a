"""Builders for the tokenizer tests: base tokenizers of every supported kind, built in-process (no downloads).

- byte_level_llama3: `tokenizers` BPE with Llama-3's split regex + ByteLevel, ignore_merges, specials at ids 0-1
  inside the model vocabulary and added tokens (two special, one not) after it, chat template;
- byte_level_gpt2: GPT-2 style ByteLevel(use_regex) BPE, <|endoftext|> inside the vocabulary, one added token after;
- metaspace: a SentencePiece BPE model (byte fallback) converted by transformers' LlamaTokenizer and saved as
  tokenizer.json (Metaspace pre-tokeniser, byte fallback: the Llama-2 layout);
- sentencepiece: that SentencePiece .model file itself.
All are trained on general text only (with sentences full of numbers, so that each learns its own digit convention:
GPT-2's regex keeps runs of digits, Llama-3's groups of up to 3, the SentencePiece model splits every digit), so
finance and legal text is what the extension has to learn.
"""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from tokenizer_corpora import texts  # noqa: E402

KINDS = ("byte_level_llama3", "byte_level_gpt2", "metaspace", "sentencepiece")
LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
CHAT_TEMPLATE = ("{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
                 "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")
WORDS = "资产负债表\n\n民事诉讼法\n资产负债表\n# a comment\nindemnification\nbalance sheet\n  违约责任  \n"
NEW_TOKENS = 200


def build_byte_level(folder: Path, style: str) -> Path:
    from tokenizers import AddedToken, Regex, Tokenizer, decoders, pre_tokenizers, trainers
    from tokenizers.models import BPE
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(BPE(ignore_merges=style == "llama3"))
    if style == "llama3":
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(LLAMA3_SPLIT), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        specials = ["<|begin_of_text|>", "<|end_of_text|>"]
    else:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        specials = ["<|endoftext|>"]
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=800, special_tokens=specials, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts("general", 400) + texts("numbers", 300), trainer)
    if style == "llama3":
        tok.add_special_tokens(["<|im_start|>", "<|im_end|>"])
        tok.add_tokens([AddedToken("<think>", special=False, normalized=False)])
        fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=specials[0], eos_token=specials[1],
                                       chat_template=CHAT_TEMPLATE)
    else:
        tok.add_special_tokens(["<|pad|>"])
        fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=specials[0], eos_token=specials[0],
                                       pad_token="<|pad|>")
    fast.save_pretrained(str(folder))
    return folder


def build_sentencepiece(folder: Path) -> Path:
    import sentencepiece as spm

    buffer = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(texts("general", 400) + texts("numbers", 300)), model_writer=buffer, vocab_size=700, model_type="bpe",
        byte_fallback=True, character_coverage=0.9995, normalization_rule_name="identity", add_dummy_prefix=True,
        remove_extra_whitespaces=False, allow_whitespace_only_pieces=True, split_digits=True, hard_vocab_limit=False,
        unk_id=0, bos_id=1, eos_id=2, pad_id=-1, minloglevel=2, num_threads=1)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tokenizer.model").write_bytes(buffer.getvalue())
    return folder / "tokenizer.model"


def build_metaspace(folder: Path, sp_model: Path) -> Path:
    from transformers import LlamaTokenizer

    tok = LlamaTokenizer.from_pretrained(str(sp_model.parent))
    tok.chat_template = "{% for m in messages %}[INST] {{ m['content'] }} [/INST]{% endfor %}"
    tok.save_pretrained(str(folder))
    return folder


def write_corpora(folder: Path) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = {"domain": folder / "domain.jsonl", "general": folder / "general.txt",
             "heldout": folder / "heldout_domain.txt", "words": folder / "words.txt"}
    with open(paths["domain"], "w", encoding="utf-8") as f:
        for i, text in enumerate(texts("finance", 300) + texts("legal", 300)):
            f.write(json.dumps({"id": i, "text": text}, ensure_ascii=False) + "\n")
    paths["general"].write_text("\n".join(texts("general", 200, seed=7)) + "\n", encoding="utf-8")
    paths["heldout"].write_text("\n".join(texts("finance", 100, seed=7) + texts("legal", 100, seed=7)) + "\n",
                                encoding="utf-8")
    paths["words"].write_text(WORDS, encoding="utf-8")
    return paths


def extend(base: Path, corpus: dict[str, Path], out: Path, **overrides) -> dict:
    from yunshan.tokenizer import ExtendArgs, extend_tokenizer

    fields = dict(base=str(base), corpus=[str(corpus["domain"])], words=[str(corpus["words"])],
                  new_tokens=NEW_TOKENS, out=str(out))
    fields.update(overrides)
    return extend_tokenizer(ExtendArgs(**fields), log=lambda *a: None)


def base_folder(base: Path) -> Path:
    return base if base.is_dir() else base.parent
