"""Line-shared encoding (eval/line_encoding.py) gives exactly the tokenizer's own ids, for every accepted tokenizer
kind, on the bundled benchmark prompts and on adversarial text built around the cut rule."""

from __future__ import annotations

import random

import pytest

from yunshan.eval.line_encoding import SAFE_SPLIT_REGEXES, LineSplitter, common_prefix_length, encode_texts

LLAMA3, QWEN2, QWEN35 = sorted(SAFE_SPLIT_REGEXES, key=lambda p: ("{1,3}" not in p, r"\p{M}" in p))

ADDED = ["<|im_start|>", "<|im_end|>", "\n\n<sep>", "答案：", "<x>"]  # one spans a newline, one is ordinary text

# Pieces that sit on both sides of the rule: newlines before letters, white space of several kinds, contractions,
# digits, marks, compatibility characters (U+00A8 becomes " \u0308" under NFKC), Hangul jamo, added tokens.
ATOMS = ["\n", "\n", "\n", "\r\n", " ", "  ", "\t", "\u3000", "\u00a0", "\u2028", "\u0085", "'s", "'S", "'ll",
         "A", "B.", "b", "c ", "答", "案", "：", "。", "1", "23", "4567", "\u0301", "e\u0301", "\u00a8", "Ａ", "ﬁ",
         "가", "\u1161", "\u11a8", "€", "😀", "-", "<", "|", "<|im_start|>", "<|im_end|>", "\n\n<sep>", "答案：",
         "<s>", "D. 以上都对\n答案：D\n\n", "＜x＞", "＜x＞\nA", "\n\n＜sep＞"]  # NFKC("＜x＞") == "<x>"


def _sample_prompts() -> list[str]:
    from yunshan.eval import ceval, cmmlu
    from yunshan.samples import sample_data_dir

    root = sample_data_dir() / "eval"
    prompts = []
    for subject in ceval.load_ceval(root / "fineval", "val", shots=5)[:3]:
        prompts += [ceval.render_prompt(subject.chinese, subject.dev, q) for q in subject.questions[:6]]
    for subject in cmmlu.load_cmmlu(root / "financeiq", "test", shots=5)[:2]:
        prompts += [cmmlu.render_prompt(subject.name, subject.dev, q) for q in subject.questions[:6]]
    return prompts + [p + o for p in prompts[:8] for o in "ABCD"] + [p + " A" for p in prompts[:3]]


def _adversarial(seed: int) -> list[str]:
    rng = random.Random(seed)
    heads = ["".join(rng.choice(ATOMS) for _ in range(rng.randint(5, 60))) for _ in range(12)]
    texts = []
    for _ in range(240):  # texts share heads, so the reuse of a previous text's cuts and ids is exercised
        text = rng.choice(heads) + "".join(rng.choice(ATOMS) for _ in range(rng.randint(0, 30)))
        texts += [text, text + rng.choice(["A", " B", "\n", "\nC", "'s", "<|im_end|>"])]
    return texts + ["", "\n", "A", "\nA", "A\n", "\n\n\n"]


def _tokenizer(kind: str, corpus: list[str]):
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    split = {"llama3": LLAMA3, "qwen2": QWEN2, "qwen35": QWEN35}.get(kind)
    if split:
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(split), "isolated"), byte_level])
    elif kind == "metaspace":
        tok.pre_tokenizer = pre_tokenizers.Metaspace()
    else:
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=kind == "gpt2_prefix_space")
    tok.normalizer = {"qwen2": normalizers.NFC(), "qwen35": normalizers.Sequence([normalizers.NFKC()])}.get(kind)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=3000, special_tokens=["<pad>", "<s>", "</s>"], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    fast.add_special_tokens({"additional_special_tokens": ADDED[:2]})
    fast.add_tokens(ADDED[2:])
    return fast


@pytest.fixture(scope="module")
def corpus() -> list[str]:
    return _sample_prompts()[:20] + _adversarial(99) * 3


@pytest.mark.parametrize("kind", ["gpt2", "llama3", "qwen2", "qwen35"])
def test_equals_the_tokenizer_for_accepted_kinds(kind, corpus):
    tok = _tokenizer(kind, corpus)
    splitter = LineSplitter.for_tokenizer(tok)
    assert splitter is not None
    for texts in (_sample_prompts(), _adversarial(1), _adversarial(2)):
        expected = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
        assert encode_texts(tok, texts) == expected
        assert sum(len(splitter.cuts(t)) for t in texts) > len(texts) // 5  # the cuts really happen


@pytest.mark.parametrize("kind", ["metaspace", "gpt2_prefix_space"])
def test_other_tokenizers_take_the_ordinary_call(kind, corpus):
    tok = _tokenizer(kind, corpus)
    assert LineSplitter.for_tokenizer(tok) is None
    texts = _adversarial(3)[:50]
    assert encode_texts(tok, texts) == [tok(t, add_special_tokens=False)["input_ids"] for t in texts]


def test_cuts_by_hand(corpus):
    splitter = LineSplitter.for_tokenizer(_tokenizer("gpt2", corpus))
    text = "ab\n\ncd\n 1\n\t2\n(x\nzz"
    # "c" follows a newline: cut at 4; " 1" and "\t2" start with white space: no cut; "(" is punctuation: cut
    # at 13; "z": cut at 16.
    assert splitter.cuts(text) == [4, 13, 16]
    assert splitter.cuts(text, start=5) == [13, 16]
    assert splitter.cuts("a\n\u0301b\n\u3000c\n€") == [len("a\n\u0301b\n\u3000c\n")]  # a mark, a space: no cut
    added = "x\n<|im_start|>y\nabcdefghijklmnopq\nz"
    # "<|im_start|>" (the longest added token, 12 characters) blocks cuts within 12 characters of it
    assert splitter.cuts(added) == [len(added) - 1]
    assert splitter.cuts("<s>\nA" + "b" * 12 + "\nC") == [len("<s>\nA" + "b" * 12 + "\n")]


def test_common_prefix_length():
    assert common_prefix_length("abcdef", "abcxyz") == 3
    assert common_prefix_length([1, 2, 3], [1, 2, 3, 4]) == 3
    assert common_prefix_length("", "abc") == 0
    assert common_prefix_length("abc", "abc") == 3
