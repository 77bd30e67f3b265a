"""`yunshan export --gguf` read by llama.cpp itself (llama-cpp-python; `make test-gguf` installs it, compiling
llama.cpp, and runs these tests, which `make test` leaves out), on a tiny model per pre-tokeniser and on the real
SmolLM2-135M with +5,000 tokens that `yunshan tokenizer extend` learned on real Chinese law text:
- llama.cpp's token ids of finance, legal and general texts (the real Civil Code, FinEval and CMMLU questions when
  ../shared/realdata is there, the bundled corpora, edge cases) equal the HF tokenizer's, new tokens included;
- the logits of an f32 export equal transformers' within 1e-3: the file holds the model exactly;
- f16 exports within 1e-2 on the tiny models (the issue's bound); on SmolLM2 within REAL_F16_LOGITS, because rounding
  SmolLM2's weights to f16 alone moves transformers' own logits by 0.04 (measured here) and llama.cpp's f16 matrix
  products round the activations to f16 as well. transformers computing what llama.cpp computes (f16_products: f16
  weights, every product's input rounded to f16) is the closer reference, but not within 1e-2 on SmolLM2: rounding
  activations to f16 turns the last-bit differences of two f32 summation orders into whole f16 steps, so the same
  reference with its sums in float64 moves by about as much (both figures printed; docs/export.md);
- q8_0: the file's tensors are byte for byte what llama.cpp's own quantiser makes of the f32 export, so its logits are
  llama.cpp's q8_0 of this model; their distance from transformers' is bounded (Q8_0_LOGITS) and reported;
- greedy generations of f32 and f16 exports equal transformers' for 32 tokens (q8_0's common prefix is reported);
- `yunshan model import-gguf` of the f16 export gives back the weights rounded to f16 and the tokenizer.
llama.cpp runs with an f32 KV cache and no flash attention here: its default f16 cache alone moves SmolLM2's logits by
0.05 with the f32 file. The figures are printed (make test-gguf shows them) and docs/export.md reports them."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.gguf

from yunshan.hub.export import export_model  # noqa: E402

from .test_gguf_export import ADDED, ADDED_TEXTS, PROBES, byte_bpe, imported, the_gguf, tiny_llama  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
F32_LOGITS = 1e-3  # an f32 file: only the order of floating-point operations differs
F16_LOGITS = 1e-2  # the bound for f16 exports (tiny models)
# SmolLM2-135M's logits span about -31..40: f16 weights alone move transformers' logits by 0.041, llama.cpp's f16
# products (activations rounded to f16) add to that: 0.079 measured.
REAL_F16_LOGITS = 0.15
# q8_0 rounds every weight to 8 bits per block of 32 and llama.cpp quantises the activations to 8 bits for its q8_0
# dot products: 0.05-0.13 measured on the tiny models; 3.9 on SmolLM2 (whose q8_0 weights alone move transformers'
# logits by 1.3; 94% of the argmax tokens agree).
Q8_0_LOGITS = {"tiny": 0.25, "real": 6.0}
Q8_0_ARGMAX = {"tiny": 0.9, "real": 0.85}
GREEDY = 32
GGML_TYPE_F32 = 0


@pytest.fixture(scope="module", autouse=True)
def _needs_llama_cpp():
    # Here, not at import: make test deselects this module and must not report it as skipped; and before the
    # module's fixtures, which extend a real tokenizer.
    pytest.importorskip("llama_cpp")


def realdata(*parts: str) -> Path | None:
    import os

    root = Path(os.environ.get("YUNSHAN_REALDATA") or ROOT.parent / "shared" / "realdata")
    path = root.joinpath(*parts)
    return path if path.exists() else None


def domain_texts() -> list[str]:
    """Finance, legal and general texts: the real releases when they are beside the checkout (the Civil Code,
    FinEval and CMMLU questions), the bundled samples otherwise, and the edge cases of PROBES."""
    import csv

    from yunshan.samples import sample_data_dir

    texts = list(PROBES) + ["  leading spaces, trailing  ", "emoji 🚀🦙 and ～全角～ ＡＢＣ１２３", "a\r\nb\n\n\nc",
                            "3333333 3.3 3..3 I'll 'RE", "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\n"]
    code = realdata("laws", "civil_code.txt")
    if code is not None:
        lines = [line for line in code.read_text(encoding="utf-8").splitlines() if len(line) > 30]
        texts += lines[100:140]
    for folder, column in (("fineval", "question"), ("cmmlu", "Question")):
        base = realdata(folder)
        if base is None:
            continue
        files = sorted(base.glob("*/*.csv"))[:3]
        for path in files:
            with open(path, encoding="utf-8") as handle:
                texts += [row[column] for row in list(csv.DictReader(handle))[:8] if row.get(column)]
    samples = Path(sample_data_dir()) / "corpora"
    for domain in ("finance", "legal", "general"):
        texts += [json.loads(line)["text"] for line in
                  (samples / domain / "train.jsonl").read_text(encoding="utf-8").splitlines()[:10]]
    return texts


def load(path: Path, vocab_only: bool = False):
    import llama_cpp
    return llama_cpp.Llama(model_path=str(path), n_ctx=512, logits_all=not vocab_only, vocab_only=vocab_only,
                           n_threads=2, n_batch=512, verbose=False, seed=0, flash_attn=False,
                           type_k=GGML_TYPE_F32, type_v=GGML_TYPE_F32)


def llama_cpp_ids(llm, text: str) -> list[int]:
    # special=True: special tokens written in the text are matched, as the HF tokenizer matches them by default.
    return llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)


def llama_cpp_logits(llm, ids: list[int]) -> np.ndarray:
    llm.reset()
    llm.eval(ids)
    return np.array(llm.scores[: len(ids)], dtype=np.float32)


def llama_cpp_greedy(llm, ids: list[int], stop: set[int], n: int = GREEDY) -> list[int]:
    out = []
    for token in llm.generate(ids, top_k=1, top_p=1.0, min_p=0.0, temp=0.0, repeat_penalty=1.0, reset=True):
        out.append(int(token))
        if token in stop or len(out) == n:
            break
    return out


def hf_greedy(model, ids: list[int], stop: set[int], n: int = GREEDY) -> list[int]:
    x = torch.tensor([ids])
    with torch.no_grad():
        out = model.generate(input_ids=x, attention_mask=torch.ones_like(x), max_new_tokens=n, do_sample=False,
                             eos_token_id=sorted(stop), pad_token_id=sorted(stop)[0])
    return out[0, len(ids):].tolist()


def f16_products(model, ids: list[int], accumulate: torch.dtype = torch.float32) -> np.ndarray:
    """transformers' logits computed the way llama.cpp computes an f16 file: the weights rounded to f16 (norms kept
    f32, as the export writes them) and the input of every matrix product rounded to f16, because ggml's CPU f16
    product converts the f32 activations to the weight's type before its dot products (ggml_compute_forward_mul_mat:
    vec_dot_type of F16 is F16), products summed in f32; attention over the f32 KV cache stays f32. With
    accumulate=torch.float64 the same roundings with the sums in float64: how much the order and precision of the sums
    alone move this reference."""
    import copy
    import types

    import torch.nn.functional as F

    def forward(self, x):
        bias = None if self.bias is None else self.bias.to(accumulate)
        return F.linear(x.half().to(accumulate), self.weight.to(accumulate), bias).float()

    emulated = copy.deepcopy(model)  # keeps a tied head tied
    with torch.no_grad():
        for p in emulated.parameters():
            if p.dim() > 1:
                p.copy_(p.half().float())
        for module in emulated.modules():
            if isinstance(module, torch.nn.Linear):
                module.forward = types.MethodType(forward, module)
        logits = emulated(torch.tensor([ids])).logits[0].numpy()
    del emulated
    return logits


def common_prefix(a: list[int], b: list[int]) -> int:
    return next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))


def llama_cpp_q8_0(f32: Path, out: Path) -> Path:
    """llama.cpp's own quantiser (llama_model_quantize, as its llama-quantize tool) making q8_0 of an f32 file."""
    import llama_cpp

    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0
    assert llama_cpp.llama_model_quantize(str(f32).encode(), str(out).encode(), params) == 0
    return out


def tensor_bytes(path: Path) -> dict:
    import gguf

    return {t.name: (t.tensor_type.name, np.asarray(t.data).tobytes()) for t in gguf.GGUFReader(str(path)).tensors}


def check_with_llama_cpp(folder: Path, model, tok, out: Path, texts: list[str], prompt: str, kind: str) -> dict:
    """Export f32, f16 and q8_0, then compare llama.cpp with transformers (module docstring); returns the figures."""
    from yunshan.hub.gguf import stop_ids_of

    model = model.float().eval()
    stop = set(stop_ids_of(folder))
    ids = tok(prompt, add_special_tokens=False)["input_ids"]
    with torch.no_grad():
        want = model(torch.tensor([ids])).logits[0].numpy()
    hf_tokens = hf_greedy(model, ids, stop)
    measured = {"texts": len(texts), "prompt_tokens": len(ids), "logit_range": [float(want.min()), float(want.max())]}
    emulated, emulated64 = f16_products(model, ids), f16_products(model, ids, torch.float64)
    for quant in ("f32", "f16", "q8_0"):
        export_model(folder, out / quant, gguf=True, quant=quant, name="m")
        path = the_gguf(out / quant)
        if quant == "q8_0":  # the same bytes as llama.cpp's quantiser gives
            ours, theirs = tensor_bytes(path), tensor_bytes(llama_cpp_q8_0(the_gguf(out / "f32"), out / "ref.gguf"))
            assert ours.keys() == theirs.keys()
            assert [n for n in ours if ours[n] != theirs[n]] == []
        llm = load(path)
        if quant == "f32":
            tokens = 0
            for text in texts:  # token ids: llama.cpp's tokenizer over the file's metadata vs the HF tokenizer
                hf_ids = tok(text, add_special_tokens=False)["input_ids"]
                assert llama_cpp_ids(llm, text) == hf_ids, text[:60]
                tokens += len(hf_ids)
            measured["tokens_compared"] = tokens
            # BOS (and EOS) added exactly when the HF tokenizer adds them
            assert llm.tokenize("银行 x".encode(), add_bos=True, special=True) == tok("银行 x")["input_ids"]
        got = llama_cpp_logits(llm, ids)[:, : want.shape[1]]
        generated = llama_cpp_greedy(llm, ids, stop)
        llm.close()
        measured[quant] = {"max_abs": float(np.abs(got - want).max()),
                           "argmax_agree": float((got.argmax(1) == want.argmax(1)).mean()),
                           "greedy_prefix": common_prefix(generated, hf_tokens), "greedy_len": len(hf_tokens)}
        if quant == "f16":
            measured[quant]["vs_f16_products"] = float(np.abs(got - emulated).max())
            measured[quant]["f16_products_f32_vs_f64_sums"] = float(np.abs(emulated - emulated64).max())
            # llama.cpp's f16 arithmetic is the one emulated: closer to it than to the fp32 model, and no farther than
            # twice the distance the emulation moves by when only its sums change precision (0.5-1.2 times measured)
            assert measured[quant]["vs_f16_products"] < measured[quant]["max_abs"]
            assert measured[quant]["vs_f16_products"] <= 2 * measured[quant]["f16_products_f32_vs_f64_sums"]
        print(kind, quant, measured[quant], flush=True)
        if quant == "f32":
            assert measured[quant]["max_abs"] <= F32_LOGITS
        elif quant == "f16":
            assert measured[quant]["max_abs"] <= (REAL_F16_LOGITS if kind == "real" else F16_LOGITS)
        else:
            assert measured[quant]["max_abs"] <= Q8_0_LOGITS[kind]
            assert measured[quant]["argmax_agree"] >= Q8_0_ARGMAX[kind]
        if quant != "q8_0":
            assert generated == hf_tokens and (len(hf_tokens) == GREEDY or hf_tokens[-1] in stop)
        if quant == "f16":
            back, back_tok = imported(path, out / "imported")
            for name, weight in model.state_dict().items():  # 2-D weights rounded to f16, norms kept in f32
                expected = weight if weight.dim() == 1 else weight.half().float()
                assert torch.equal(back.state_dict()[name], expected), name
            for text in texts:
                assert back_tok(text, add_special_tokens=False)["input_ids"] == tok(text, add_special_tokens=False)[
                    "input_ids"], text[:60]
            del back
    return measured


@pytest.mark.parametrize("kind", ["gpt-2", "smollm", "llama-bpe", "qwen2"])
def test_a_tiny_model_in_llama_cpp(tmp_path, kind):
    tok = byte_bpe(tmp_path / "tok", kind)
    model = tiny_llama(tmp_path / "model", tok, arch="qwen2" if kind == "qwen2" else "llama", tied=kind == "smollm")
    # Scaled down so the f16 rounding of weights stays far below the bound on logits.
    with torch.no_grad():
        for p in model.parameters():
            if p.dim() > 1:
                p.mul_(0.2)
    model.save_pretrained(tmp_path / "model")
    measured = check_with_llama_cpp(tmp_path / "model", model, tok, tmp_path / "out", domain_texts(),
                                    "根据刑法第二百六十四条，盗窃公私财物，数额较大的，The answer is B. 2023年", "tiny")
    print(kind, json.dumps(measured))


def test_plain_added_tokens_in_llama_cpp(tmp_path):
    """Tokens added by tokenizer.add_tokens (not special; CJK ones outside the byte alphabet): llama.cpp's ids equal
    the HF tokenizer's, the added tokens matched whole."""
    tok = byte_bpe(tmp_path / "tok")
    tok.add_tokens(ADDED)
    tiny_llama(tmp_path / "model", tok)
    export_model(tmp_path / "model", tmp_path / "out", gguf=True, quant="f32", name="m")
    llm = load(the_gguf(tmp_path / "out"), vocab_only=True)
    for text in ADDED_TEXTS + domain_texts():
        assert llama_cpp_ids(llm, text) == tok(text, add_special_tokens=False)["input_ids"], text
    assert tok.convert_tokens_to_ids("民法典") in llama_cpp_ids(llm, ADDED_TEXTS[0])


def _real_model() -> Path:
    for candidate in (ROOT / "models" / "smollm2-135m", ROOT.parent / "models" / "smollm2-135m"):
        if (candidate / "config.json").is_file():
            return candidate
    pytest.skip("no SmolLM2-135M folder (make real-model writes models/smollm2-135m)")


@pytest.fixture(scope="module")
def smollm2_extended(tmp_path_factory):
    """SmolLM2-135M with +5,000 tokens learned by `yunshan tokenizer extend` on the real laws corpus (a 5 M-character
    sample) or, without the real data, on the bundled finance and legal corpora; new rows initialised as the mean
    of their base pieces (what yunshan cpt does)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from yunshan.samples import sample_data_dir
    from yunshan.tokenizer import ExtendArgs, extend_tokenizer, resize_embeddings

    real = _real_model()
    root = tmp_path_factory.mktemp("smollm2")
    laws = realdata("laws", "laws.jsonl.zst")
    samples = Path(sample_data_dir()) / "corpora"
    corpus = [str(laws)] if laws else [str(samples / "finance/train.jsonl"), str(samples / "legal/train.jsonl")]
    extend_tokenizer(ExtendArgs(base=str(real), corpus=corpus, new_tokens=5000, min_frequency=2,
                                sample_chars=5_000_000, out=str(root / "tokenizer")), log=lambda *a: None)
    tok = AutoTokenizer.from_pretrained(root / "tokenizer")
    model = AutoModelForCausalLM.from_pretrained(real, dtype=torch.float32)
    resize_embeddings(model, str(real), str(root / "tokenizer"), init="subword_mean")
    model.save_pretrained(root / "model")
    tok.save_pretrained(root / "model")
    for name in ("generation_config.json",):
        if (real / name).is_file():
            shutil.copy(real / name, root / "model" / name)
    return root / "model", model, tok, len(AutoTokenizer.from_pretrained(real))


def test_smollm2_with_5000_new_tokens_in_llama_cpp(tmp_path, smollm2_extended):
    folder, model, tok, base_size = smollm2_extended
    assert len(tok) - base_size >= 4000
    texts = domain_texts()
    used = sum(i >= base_size for t in texts for i in tok(t, add_special_tokens=False)["input_ids"])
    assert used > 200  # the texts go through the new tokens
    prompt = tok.apply_chat_template([{"role": "user", "content": "根据《民法典》，借款合同的利率有什么限制？请简要回答。"}],
                                     tokenize=False, add_generation_prompt=True)
    measured = check_with_llama_cpp(folder, model, tok, tmp_path / "out", texts, prompt, "real")
    measured.update(new_tokens=len(tok) - base_size, new_token_uses=used)
    print("smollm2+5000", json.dumps(measured))


def test_a_k_quant_is_made_by_llama_cpps_quantiser(tmp_path):
    """--quant q4_k_m: an f16 file quantised by llama.cpp's llama_model_quantize (types it falls back to where rows
    are no multiple of 256, as here), recorded as Q4_K_M, read by llama.cpp with the same token ids."""
    import gguf

    tok = byte_bpe(tmp_path / "tok", "smollm")
    tiny_llama(tmp_path / "model", tok, tied=True)
    result = export_model(tmp_path / "model", tmp_path / "out", gguf=True, quant="q4_k_m", name="kq")
    path = the_gguf(tmp_path / "out")
    assert path.name == "kq-Q4_K_M.gguf" and result["gguf"]["quant"] == "q4_k_m"
    assert sorted(p.name for p in (tmp_path / "out").iterdir() if p.suffix == ".gguf") == [path.name]  # no f16 left
    reader = gguf.GGUFReader(str(path))
    assert reader.fields["general.file_type"].contents() == gguf.LlamaFileType.MOSTLY_Q4_K_M
    llm = load(path)
    for text in PROBES:
        assert llama_cpp_ids(llm, text) == tok(text, add_special_tokens=False)["input_ids"], text
    llm.close()
