"""Where llama.cpp's logits of an f16 GGUF export part from transformers', layer by layer.

    python benchmarks/gguf_f16_layers.py --model models/smollm2-135m      # needs llama-cpp-python (.[gguf])

The model is exported with `yunshan export --gguf --quant f16` and run once by llama.cpp (llama-cpp-python, f32 KV
cache, no flash attention, as tests/hub/test_gguf_llama_cpp.py runs it), whose own intermediate tensors are read
through its eval callback (`cb_eval`: attn_norm-N, kqv_out-N the attention output before o_proj, ffn_swiglu-N the
input of down_proj, ffn_out-N, l_out-N the residual stream after layer N). transformers computes the same prompt four ways, its tensors read by hooks:
- fp32: the model as trained;
- f16 weights: the export's weights (2-D weights rounded to f16, norms f32);
- f16 products: f16 weights, and the input of every matrix product rounded to f16, as ggml's CPU f16 product does
  before its dot products (the vec_dot type of F16 is F16), sums in f32;
- f16 products, f64 sums: the same roundings, the products summed in float64.
Printed: the largest absolute difference from llama.cpp per tensor and layer for each reference, and on the logits,
plus the f16-products reference against itself with f64 sums. Writes benchmarks/results/gguf_f16_layers.json.
What it shows is in docs/export.md ("Checked with llama.cpp").
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import tempfile
import types
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
TENSORS = ("attn_norm", "kqv_out", "ffn_norm", "ffn_swiglu", "ffn_out", "l_out")
PROMPT = "根据《民法典》，借款合同的利率有什么限制？请简要回答。"


class _TensorHead(ctypes.Structure):  # the first fields of ggml.h's struct ggml_tensor
    _fields_ = [("type", ctypes.c_int), ("buffer", ctypes.c_void_p), ("ne", ctypes.c_int64 * 4),
                ("nb", ctypes.c_size_t * 4)]


def llama_cpp_tensors(gguf: Path, ids: list[int]) -> tuple[dict, np.ndarray]:
    """llama.cpp's named f32 tensors of one evaluation of `ids` (rows = tokens), and its logits."""
    import llama_cpp
    import llama_cpp.llama_cpp as lc

    lib = ctypes.CDLL(str(Path(llama_cpp.__file__).parent / "lib" / "libggml-base.so"))
    lib.ggml_get_name.restype, lib.ggml_get_name.argtypes = ctypes.c_char_p, [ctypes.c_void_p]
    lib.ggml_nbytes.restype, lib.ggml_nbytes.argtypes = ctypes.c_size_t, [ctypes.c_void_p]
    lib.ggml_backend_tensor_get.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t]
    captured: dict[str, np.ndarray] = {}

    def callback(tensor, ask, _):
        name = lib.ggml_get_name(tensor).decode()
        if ask or name.rsplit("-", 1)[0] not in TENSORS:
            return True
        head = _TensorHead.from_address(tensor)
        size = lib.ggml_nbytes(tensor)
        if head.type != 0 or size != 4 * head.ne[0] * head.ne[1] * head.ne[2] * head.ne[3]:
            return True  # not a plain f32 tensor (views, other types)
        buf = (ctypes.c_char * size)()
        lib.ggml_backend_tensor_get(tensor, buf, 0, size)
        captured[name] = np.frombuffer(buf, dtype=np.float32).reshape(len(ids), -1).copy()
        return True

    hook = lc.ggml_backend_sched_eval_callback(callback)
    defaults = lc.llama_context_default_params

    def with_callback():
        params = defaults()
        params.cb_eval = hook
        return params

    lc.llama_context_default_params = with_callback  # Llama() reads its context parameters from here
    try:
        llm = llama_cpp.Llama(model_path=str(gguf), n_ctx=512, logits_all=True, n_threads=2, n_batch=512,
                              verbose=False, seed=0, flash_attn=False, type_k=0, type_v=0)
        llm.reset()
        llm.eval(ids)
        logits = np.array(llm.scores[: len(ids)], dtype=np.float32)
        llm.close()
    finally:
        lc.llama_context_default_params = defaults
    return captured, logits


def transformers_tensors(model, ids: list[int], mode: str) -> tuple[dict, np.ndarray]:
    import copy

    model = copy.deepcopy(model)
    accumulate = torch.float64 if mode == "f16 products, f64 sums" else torch.float32

    def forward(self, x):
        bias = None if self.bias is None else self.bias.to(accumulate)
        return F.linear(x.half().to(accumulate), self.weight.to(accumulate), bias).float()

    with torch.no_grad():
        if mode != "fp32":
            for p in model.parameters():
                if p.dim() > 1:
                    p.copy_(p.half().float())
        if mode.startswith("f16 products"):
            for module in model.modules():
                if isinstance(module, torch.nn.Linear):
                    module.forward = types.MethodType(forward, module)
    found: dict[str, np.ndarray] = {}

    def output(name):
        return lambda m, i, o: found.__setitem__(name, (o[0] if isinstance(o, tuple) else o)[0].numpy())

    def first_input(name):
        return lambda m, i: found.__setitem__(name, i[0][0].numpy())

    for n, layer in enumerate(model.model.layers):
        layer.input_layernorm.register_forward_hook(output(f"attn_norm-{n}"))
        layer.self_attn.o_proj.register_forward_pre_hook(first_input(f"kqv_out-{n}"))
        layer.post_attention_layernorm.register_forward_hook(output(f"ffn_norm-{n}"))
        layer.mlp.down_proj.register_forward_pre_hook(first_input(f"ffn_swiglu-{n}"))
        layer.mlp.register_forward_hook(output(f"ffn_out-{n}"))
        layer.register_forward_hook(output(f"l_out-{n}"))
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0].numpy()
    return found, logits


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default=str(ROOT / "models/smollm2-135m"), help="model folder (make real-model)")
    parser.add_argument("--gguf", default=None, help="its f16 export (default: exported into a temporary folder)")
    parser.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "gguf_f16_layers.json"))
    args = parser.parse_args()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from yunshan.hub.export import export_model

    tok = AutoTokenizer.from_pretrained(args.model)
    prompt = tok.apply_chat_template([{"role": "user", "content": PROMPT}], tokenize=False, add_generation_prompt=True)
    ids = tok(prompt, add_special_tokens=False)["input_ids"]
    with tempfile.TemporaryDirectory() as tmp:
        gguf = Path(args.gguf) if args.gguf else None
        if gguf is None:
            export_model(args.model, Path(tmp) / "f16", gguf=True, quant="f16", name="m")
            gguf = next((Path(tmp) / "f16").glob("*.gguf"))
        theirs, their_logits = llama_cpp_tensors(gguf, ids)
    model = AutoModelForCausalLM.from_pretrained(args.model, dtype=torch.float32).eval()
    modes = ("fp32", "f16 weights", "f16 products", "f16 products, f64 sums")
    ours = {mode: transformers_tensors(model, ids, mode) for mode in modes}
    layers = len(model.model.layers)
    table = {mode: {name: [float(np.abs(theirs[f"{name}-{n}"] - found[f"{name}-{n}"]).max()) for n in range(layers)]
                    for name in TENSORS} for mode, (found, _) in ours.items()}
    logits = {mode: float(np.abs(their_logits[:, : lg.shape[1]] - lg).max()) for mode, (_, lg) in ours.items()}
    self_diff = float(np.abs(ours["f16 products"][1] - ours["f16 products, f64 sums"][1]).max())
    scale = {name: [float(np.abs(ours["fp32"][0][f"{name}-{n}"]).max()) for n in range(layers)] for name in TENSORS}

    print(f"\n{args.model}: {len(ids)} prompt tokens, logits {ours['fp32'][1].min():.1f} .. {ours['fp32'][1].max():.1f}")
    print("largest |llama.cpp f16 - reference| per layer (kqv_out: attention output before o_proj; l_out: residual)\n")
    for name in ("kqv_out", "ffn_swiglu", "ffn_out", "l_out"):
        print(f"| {name} layer | largest value | " + " | ".join(modes) + " |")
        print("|---:|---:|" + "---:|" * len(modes))
        peak = max(range(layers), key=lambda n: scale[name][n])
        for n in sorted({0, 1, 2, 3, peak, layers // 2, layers - 1}):
            print(f"| {n} | {scale[name][n]:.3g} | " + " | ".join(f"{table[m][name][n]:.2e}" for m in modes) + " |")
        print()
    print("| logits | " + " | ".join(modes) + " |\n|---|" + "---:|" * len(modes))
    print("| llama.cpp f16 | " + " | ".join(f"{logits[m]:.4f}" for m in modes) + " |")
    print(f"\nf16 products, f32 sums vs f64 sums (transformers alone): {self_diff:.4f}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"model": args.model, "prompt_tokens": len(ids), "gguf": str(gguf), "logits": logits,
                               "f16_products_f32_vs_f64_sums": self_diff, "layers": table, "largest_value": scale},
                              indent=2), encoding="utf-8")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
