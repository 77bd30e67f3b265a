"""`yunshan export --gguf` read by llama.cpp itself (llama-cpp-python; `make test-gguf` installs it, compiling
llama.cpp, and runs these tests, which `make test` leaves out): on a tiny model and on the real SmolLM2-135M with
+5,000 tokens that `yunshan tokenizer extend` learned on real Chinese law text, llama.cpp's token ids of finance,
legal and general texts equal the HF tokenizer's; the logits of an f16 export equal transformers' within 1e-2 (and
a q8_0 export's within the tolerance below); greedy generations are the same for 32 tokens; and `yunshan model
import-gguf` of the export gives back the weights (rounded to f16) and the tokenizer."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

pytestmark = pytest.mark.gguf

from yunshan.hub.export import export_model  # noqa: E402

from .test_gguf_export import PROBES, byte_bpe, imported, the_gguf, tiny_llama  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
F16_LOGITS = 1e-2  # the bound for f16 exports
# q8_0 rounds every weight to 8 bits per block of 32 (and llama.cpp quantises the activations to 8 bits for its q8_0
# dot products), so its logits differ more than f16's; the bound is set from the differences docs/export.md reports.
Q8_0_LOGITS = 0.25
GREEDY = 32


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
                           n_threads=2, n_batch=512, verbose=False, seed=0)


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


def check_with_llama_cpp(folder: Path, model, tok, out: Path, texts: list[str], prompt: str) -> dict:
    """Export f16 and q8_0, then compare llama.cpp with transformers; returns the measured differences."""
    from yunshan.hub.gguf import stop_ids_of

    model = model.float().eval()
    stop = set(stop_ids_of(folder))
    measured = {}
    for quant in ("f16", "q8_0"):
        export_model(folder, out / quant, gguf=True, quant=quant, name="m")
        path = the_gguf(out / quant)
        llm = load(path)
        if quant == "f16":
            for text in texts:  # token ids: llama.cpp's tokenizer over the file's metadata vs the HF tokenizer
                assert llama_cpp_ids(llm, text) == tok(text, add_special_tokens=False)["input_ids"], text[:60]
            # BOS (and EOS) added exactly when the HF tokenizer adds them
            assert llm.tokenize("银行 x".encode(), add_bos=True, special=True) == tok("银行 x")["input_ids"]
        ids = tok(prompt, add_special_tokens=False)["input_ids"]
        with torch.no_grad():
            want = model(torch.tensor([ids])).logits[0].numpy()
        got = llama_cpp_logits(llm, ids)
        measured[quant] = float(np.abs(got[:, : want.shape[1]] - want).max())
        bound = F16_LOGITS if quant == "f16" else Q8_0_LOGITS
        assert measured[quant] <= bound, (quant, measured[quant])
        if quant == "f16":
            assert llama_cpp_greedy(llm, ids, stop) == hf_greedy(model, ids, stop)
            back, back_tok = imported(path, out / "imported")
            for name, weight in model.state_dict().items():
                assert torch.equal(back.state_dict()[name], weight.half().float()), name
            for text in texts:
                assert back_tok(text, add_special_tokens=False)["input_ids"] == tok(text, add_special_tokens=False)[
                    "input_ids"], text[:60]
        llm.close()
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
                                    "根据刑法第二百六十四条，盗窃公私财物，数额较大的，The answer is B. 2023年")
    print(kind, measured)


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
    measured = check_with_llama_cpp(folder, model, tok, tmp_path / "out", texts, prompt)
    print("smollm2+5000", measured)
