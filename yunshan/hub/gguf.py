"""GGUF export: a model folder -> one `.gguf` file that llama.cpp and Ollama load and tokenise exactly as the HF
tokenizer does, extended vocabularies included (`yunshan export RUN --out DIR --gguf [--quant Q] [--ollama]`).

    from yunshan.hub.gguf import write_gguf
    report = write_gguf(Path("runs/demo/05_sft"), Path("out/model.Q8_0.gguf"), "q8_0", name="demo")

Built on the `gguf` package, llama.cpp's own Python library: `GGUFWriter` writes the file (header, metadata, tensor
infos, then each tensor streamed, so only one tensor is in memory), `TensorNameMap` names the tensors
(model.layers.0.self_attn.q_proj.weight -> blk.0.attn_q.weight), `SpecialVocab` reads the merges, special ids and
chat template, and its numpy quantisers write f32, f16, bf16, q8_0, q4_0, q4_1, q5_0 and q5_1. The k-quants
(q4_k_m, q5_k_m, q6_k, ...) have no quantiser in `gguf`; they are made by llama.cpp's own `llama_model_quantize`
from an f16 file when llama-cpp-python is installed, and refused with that reason otherwise. Written here only what
no library does for an arbitrary folder: the choice of architecture keys, the Llama q/k row order, and the
tokenizer's description below.

Layouts: LlamaForCausalLM (and Mistral without sliding window: llama.cpp's `llama`), Qwen2ForCausalLM (`qwen2`), and
a PanGu-π whose settings make it exactly a Llama (with `as_llama`, written as the Llama yunshan.models.pangu_pi.convert
makes of it). Anything else is refused naming what llama.cpp would not reproduce.

The tokenizer. llama.cpp tokenises a BPE vocabulary in two steps: a pre-tokeniser regex chosen by the name in
`tokenizer.ggml.pre`, then the merges in `tokenizer.ggml.merges` by rank. llama.cpp's converter chooses that name by
hashing the token ids of a fixed probe text and looking the hash up in a table of known tokenizers
(convert_hf_to_gguf.py's get_vocab_base_pre); a tokenizer whose vocabulary was extended encodes the probe with its
new merges, its hash is in no table, and the converter stops (llama.cpp issues 8649 and 9927). The split, however,
is not a property of the vocabulary but of the tokenizer.json pre-tokeniser, which `yunshan tokenizer extend`
never changes (it appends ids and merges after the base's). So the name is chosen here from the pre-tokeniser
itself: the GPT-2 byte-level regex (`gpt-2`), a digit-by-digit pass before it (SmolLM, StarCoder: `smollm`), and
the Llama-3 and Qwen2 split regexes (`llama-bpe`, `qwen2`), each compared with the regex llama.cpp runs for that
name (src/llama-vocab.cpp); any other pre-tokeniser, a normaliser, byte fallback, dropout, or added tokens with
lstrip / rstrip / single-word matching are refused with the reason, since llama.cpp would cut such text
differently. Every id keeps its string: the model vocabulary as NORMAL tokens, special added tokens as CONTROL,
other added tokens as USER_DEFINED (both matched whole before the split, as the HF tokenizer does), ids the
tokenizer lacks up to the embedding size as UNUSED [PAD{id}]. BOS/EOS/UNK/PAD ids, whether BOS or EOS is added (by
encoding a probe, so it is what the tokenizer does, not what a config claims), the chat template and the template's
end-of-turn token (`tokenizer.ggml.eot_token_id`, so llama.cpp ends a turn there) complete it. `make test-gguf`
checks the result with llama.cpp itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

# --quant names -> gguf's numpy quantiser (GGMLQuantizationType name) and the file type llama.cpp records.
NUMPY_QUANTS = {"f32": ("F32", "ALL_F32"), "f16": ("F16", "MOSTLY_F16"), "bf16": ("BF16", "MOSTLY_BF16"),
                "q8_0": ("Q8_0", "MOSTLY_Q8_0"), "q4_0": ("Q4_0", "MOSTLY_Q4_0"), "q4_1": ("Q4_1", "MOSTLY_Q4_1"),
                "q5_0": ("Q5_0", "MOSTLY_Q5_0"), "q5_1": ("Q5_1", "MOSTLY_Q5_1")}
# --quant names made by llama.cpp's quantiser (llama-cpp-python) from an f16 file -> llama_ftype name.
LLAMA_CPP_QUANTS = {"q2_k": "MOSTLY_Q2_K", "q3_k_s": "MOSTLY_Q3_K_S", "q3_k_m": "MOSTLY_Q3_K_M",
                    "q3_k_l": "MOSTLY_Q3_K_L", "q4_k_s": "MOSTLY_Q4_K_S", "q4_k_m": "MOSTLY_Q4_K_M",
                    "q5_k_s": "MOSTLY_Q5_K_S", "q5_k_m": "MOSTLY_Q5_K_M", "q6_k": "MOSTLY_Q6_K"}
QUANTS = (*NUMPY_QUANTS, *LLAMA_CPP_QUANTS)

# HF architecture -> (GGUF architecture, whether q/k rows are reordered for llama.cpp's rotary layout)
ARCHITECTURES = {"LlamaForCausalLM": ("llama", True), "MistralForCausalLM": ("llama", True),
                 "Qwen2ForCausalLM": ("qwen2", False)}

# The split regexes of tokenizer.json pre-tokenisers llama.cpp knows, as the HF tokenizers of those families write
# them, and the `tokenizer.ggml.pre` name whose regex in llama.cpp (src/llama-vocab.cpp) cuts text the same way.
_LLAMA3_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                 r"\s*[\r\n]+|\s+(?!\S)|\s+")
_QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                r"\s*[\r\n]+|\s+(?!\S)|\s+")
SPLIT_PRE_TOKENIZERS = {_LLAMA3_SPLIT: "llama-bpe", _QWEN2_SPLIT: "qwen2"}
# llama.cpp applies Llama-3's merges ignoring merges for words that are whole tokens (ignore_merges), as HF does.
IGNORE_MERGES = {"llama-bpe": True}


class GgufRefused(ValueError):
    """What the model or its tokenizer holds that llama.cpp would not reproduce (one line, with the reason)."""


@dataclass
class GgufReport:
    path: str
    quant: str
    architecture: str
    tokenizer_pre: str
    tensors: int
    parameters: int
    bytes: int
    vocab: int
    added_tokens: int  # CONTROL + USER_DEFINED
    eot_token_id: int | None
    chat_template: bool
    notes: list[str] = field(default_factory=list)


# ---------------------------------------------------------------- the tokenizer


def pre_tokenizer_name(tokenizer_json: dict, where: str) -> str:
    """llama.cpp's `tokenizer.ggml.pre` for a byte-level BPE tokenizer.json, or GgufRefused naming the reason."""
    model = tokenizer_json.get("model") or {}
    if model.get("type") != "BPE":
        raise GgufRefused(f"{where}: tokenizer model {model.get('type')!r}; the GGUF export writes byte-level BPE "
                          "vocabularies (GPT-2, Llama-3, Qwen2, SmolLM families) only")
    if model.get("byte_fallback") or model.get("dropout") or model.get("continuing_subword_prefix") or model.get(
            "end_of_word_suffix"):
        raise GgufRefused(f"{where}: BPE with byte_fallback / dropout / subword affixes (a SentencePiece-style "
                          "tokenizer); llama.cpp's byte-level BPE does not reproduce it")
    normalizer = tokenizer_json.get("normalizer")
    pre = tokenizer_json.get("pre_tokenizer") or {}
    steps = pre.get("pretokenizers") if pre.get("type") == "Sequence" else [pre]
    kinds = [s.get("type") for s in steps]
    name = None
    if kinds == ["ByteLevel"] and steps[0].get("use_regex", True) and not steps[0].get("add_prefix_space"):
        name = "gpt-2"
    elif (kinds == ["Digits", "ByteLevel"] and steps[0].get("individual_digits")
          and steps[1].get("use_regex", True) and not steps[1].get("add_prefix_space")):
        name = "smollm"  # llama.cpp: \p{N}, then GPT-2's regex (StarCoder, SmolLM, ...)
    elif kinds == ["Split", "ByteLevel"] and not steps[1].get("use_regex", True) and not steps[1].get(
            "add_prefix_space"):
        split = steps[0]
        regex = (split.get("pattern") or {}).get("Regex")
        if split.get("behavior") == "Isolated" and not split.get("invert") and regex in SPLIT_PRE_TOKENIZERS:
            name = SPLIT_PRE_TOKENIZERS[regex]
    if name is None:
        raise GgufRefused(f"{where}: pre_tokenizer {json.dumps(pre, ensure_ascii=False)[:200]} is not one llama.cpp "
                          "splits the same way (known: GPT-2 ByteLevel, Digits + ByteLevel, the Llama-3 and Qwen2 "
                          "split regexes)")
    # Qwen2's tokenizer.json normalises to NFC; llama.cpp does not, which changes nothing on NFC text (as typed).
    if normalizer is not None and not (name == "qwen2" and normalizer.get("type") == "NFC"):
        raise GgufRefused(f"{where}: normalizer {normalizer.get('type')!r}; llama.cpp's BPE tokeniser does not "
                          "normalise text, so it would cut it differently")
    if bool(model.get("ignore_merges")) != IGNORE_MERGES.get(name, False):
        raise GgufRefused(f"{where}: ignore_merges={model.get('ignore_merges')} with pre-tokeniser {name!r}; "
                          f"llama.cpp applies {'no ' if not IGNORE_MERGES.get(name) else ''}ignore_merges there")
    return name


@dataclass
class GgufVocab:
    model: str
    pre: str
    tokens: list[str]
    types: list[int]
    merges: list[str]
    special_ids: dict[str, int]
    add_bos: bool
    add_eos: bool
    chat_template: str | None
    eot_id: int | None


def load_tokenizer(folder: Path):
    """The folder's HF tokenizer (loaded once per export: a 50k-token vocabulary takes seconds)."""
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(folder), local_files_only=True)


def read_vocab(folder: Path, n_vocab: int, stop_ids: list[int] | None = None, tokenizer=None) -> GgufVocab:
    """The tokenizer of `folder` as llama.cpp's metadata describes it (module docstring). `n_vocab` is the number
    of embedding rows (tokens beyond the tokenizer's are written UNUSED); `tokenizer` the folder's, if loaded."""
    import gguf

    tokenizer_file = folder / "tokenizer.json"
    if not tokenizer_file.is_file():
        raise GgufRefused(f"{folder}: no tokenizer.json; the GGUF export needs the fast tokenizer's file")
    data = json.loads(tokenizer_file.read_text(encoding="utf-8"))
    pre = pre_tokenizer_name(data, str(tokenizer_file))
    tok = tokenizer if tokenizer is not None else load_tokenizer(folder)
    if len(tok) > n_vocab:
        raise GgufRefused(f"{folder}: the tokenizer has {len(tok)} tokens but the model only {n_vocab} embedding rows")
    added = {t["id"]: t for t in data.get("added_tokens") or []}
    for token in added.values():
        flags = [f for f in ("lstrip", "rstrip", "single_word") if token.get(f)]
        if flags:
            raise GgufRefused(f"{tokenizer_file}: added token {token['content']!r} (id {token['id']}) has "
                              f"{'/'.join(flags)} matching, which llama.cpp does not apply")
    byte_level = {v: k for k, v in tok.get_vocab().items()}
    tokens, types = [], []
    for i in range(n_vocab):
        if i in added:
            token = added[i]
            tokens.append(token["content"])
            types.append(gguf.TokenType.CONTROL if token.get("special") else gguf.TokenType.USER_DEFINED)
        elif i in byte_level:
            tokens.append(byte_level[i])  # the vocabulary's own (byte-level) string, as merges refer to it
            types.append(gguf.TokenType.NORMAL)
        else:
            tokens.append(f"[PAD{i}]")
            types.append(gguf.TokenType.UNUSED)
    # Non-special added tokens are matched in the raw text by HF; llama.cpp compares USER_DEFINED tokens with the
    # raw text too, so their strings are written as typed (not byte-level encoded), which is what `content` holds.
    special = gguf.SpecialVocab(folder, load_merges=True, n_vocab=n_vocab)
    if not special.merges:
        raise GgufRefused(f"{tokenizer_file}: no merges")
    probe = "yunshan"
    with_special = tok(probe)["input_ids"]
    bare = tok(probe, add_special_tokens=False)["input_ids"]
    start = with_special.index(bare[0]) if bare and bare[0] in with_special else 0
    add_bos = start > 0 and tok.bos_token_id is not None and with_special[start - 1] == tok.bos_token_id
    add_eos = len(with_special) > start + len(bare) and with_special[-1] == tok.eos_token_id
    if with_special[:start] not in ([], [tok.bos_token_id]) or with_special[start + len(bare):] not in (
            [], [tok.eos_token_id]):
        raise GgufRefused(f"{folder}: the tokenizer adds {with_special[:start]} before and "
                          f"{with_special[start + len(bare):]} after a text; llama.cpp adds only BOS and EOS")
    ids = {name: getattr(tok, f"{name}_token_id", None) for name in ("bos", "eos", "unk", "pad")}
    ids = {k: v for k, v in ids.items() if v is not None}
    eot = None
    for stop in stop_ids or []:
        if stop != tok.eos_token_id:
            eot = stop
            break
    return GgufVocab(model="gpt2", pre=pre, tokens=tokens, types=[int(t) for t in types], merges=special.merges,
                     special_ids=ids, add_bos=add_bos, add_eos=add_eos,
                     chat_template=tok.chat_template if isinstance(tok.chat_template, str) else None, eot_id=eot)


# ---------------------------------------------------------------- the weights


def _hyperparameters(config: dict, where: str) -> dict:
    text = config.get("text_config") or config
    arch_name = (config.get("architectures") or ["?"])[0]
    if arch_name not in ARCHITECTURES:
        raise GgufRefused(f"{where}: architecture {arch_name}; the GGUF export writes "
                          f"{', '.join(sorted(ARCHITECTURES))} (and a Llama-equivalent PanGu-π with --as-llama)")
    if arch_name == "MistralForCausalLM" and text.get("sliding_window") and text["sliding_window"] < text.get(
            "max_position_embeddings", 0):
        raise GgufRefused(f"{where}: sliding_window {text['sliding_window']}; llama.cpp's llama architecture attends "
                          "to the whole context")
    if text.get("hidden_act", "silu") != "silu":
        raise GgufRefused(f"{where}: hidden_act {text.get('hidden_act')!r}; llama.cpp's {ARCHITECTURES[arch_name][0]} "
                          "uses silu")
    if text.get("mlp_bias"):
        raise GgufRefused(f"{where}: mlp_bias=true; llama.cpp's llama has no MLP biases")
    rope = text.get("rope_parameters") or text.get("rope_scaling") or {}
    rope_type = rope.get("rope_type") or rope.get("type") or "default"
    if rope_type not in ("default", "linear"):
        raise GgufRefused(f"{where}: rope type {rope_type!r}; the GGUF export writes default and linear RoPE")
    heads = text["num_attention_heads"]
    head_dim = text.get("head_dim") or text["hidden_size"] // heads
    return {"arch": ARCHITECTURES[arch_name][0], "permute": ARCHITECTURES[arch_name][1],
            "context": text.get("max_position_embeddings", 2048), "hidden": text["hidden_size"],
            "layers": text["num_hidden_layers"], "ffn": text["intermediate_size"], "heads": heads,
            "kv_heads": text.get("num_key_value_heads") or heads, "head_dim": head_dim,
            "rope_theta": float(rope.get("rope_theta") or text.get("rope_theta") or 10000.0),
            "rope_linear": float(rope["factor"]) if rope_type == "linear" else None,
            "eps": float(text.get("rms_norm_eps", 1e-6)), "vocab": text["vocab_size"],
            "tied": bool(config.get("tie_word_embeddings", text.get("tie_word_embeddings", False)))}


def _permute(weights, n_head: int, n_head_kv: int | None = None):
    """HF's rotate-half q/k rows -> the interleaved order llama.cpp's rotary embedding reads (and transformers'
    GGUF loader undoes with the reverse)."""
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (weights.reshape(n_head, 2, weights.shape[0] // n_head // 2, *weights.shape[1:])
            .swapaxes(1, 2).reshape(weights.shape))


def _tensor_qtype(gguf_name: str, qtype, tied: bool):
    """The type of one tensor at --quant `qtype`: the output head (output.weight, or the token embedding that serves
    as the head of a tied model) of a 4- or 5-bit export is written q8_0, as llama.cpp's quantiser does (it writes
    q6_k where the rows are a multiple of 256, else q8_0; `gguf` has no q6_k quantiser, so q8_0 here). A 4-bit head
    moves SmolLM2-135M's logits by 12.8 and its greedy answers after 10 tokens; at q8_0 the q4_1 export is byte for
    byte llama.cpp's own q4_1 file (docs/export.md)."""
    import gguf

    low_bit = {gguf.GGMLQuantizationType[t] for t in ("Q4_0", "Q4_1", "Q5_0", "Q5_1")}
    head = gguf_name == "output.weight" or (tied and gguf_name == "token_embd.weight")
    return gguf.GGMLQuantizationType.Q8_0 if head and qtype in low_bit else qtype


def _quantize(array: np.ndarray, name: str, qtype):
    """(data, ggml type) for one tensor: 1-D tensors (norms, biases) stay float32 as llama.cpp keeps them, and a
    row whose length is no multiple of the block size falls back to f16, as llama.cpp's converter does."""
    import gguf

    if array.ndim <= 1 or qtype == gguf.GGMLQuantizationType.F32:
        return array.astype(np.float32), gguf.GGMLQuantizationType.F32
    if qtype == gguf.GGMLQuantizationType.F16:
        return array.astype(np.float16), qtype
    try:
        return gguf.quants.quantize(array.astype(np.float32), qtype), qtype
    except gguf.quants.QuantError:
        return array.astype(np.float16), gguf.GGMLQuantizationType.F16


def write_gguf(model_dir: Path, path: Path, quant: str, *, name: str, as_llama: bool = False,
               stop_ids: list[int] | None = None, tokenizer=None) -> GgufReport:
    """Write the model of `model_dir` (safetensors, config.json, tokenizer.json) as one GGUF file at `path`.

    Args:
        quant: one of QUANTS (module docstring).
        name: general.name of the file.
        as_llama: write a Llama-equivalent PanGu-π as the Llama it is (yunshan.models.pangu_pi.convert.LlamaExport).
        stop_ids: the ids generation stops at (EOS and the chat template's end of turn), for the eot token.
        tokenizer: the folder's tokenizer, if already loaded.
    """
    import gguf
    from safetensors import safe_open

    from yunshan.hub.weights import _weight_files, read_layout
    from yunshan.io.progress import progress_bar

    if quant not in QUANTS:
        raise ValueError(f"--quant {quant!r}: choose one of {', '.join(QUANTS)}")
    if quant in LLAMA_CPP_QUANTS:
        return _llama_cpp_quantize(model_dir, path, quant, name=name, as_llama=as_llama, stop_ids=stop_ids)
    config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    sources = _weight_files(model_dir)
    layout, _ = read_layout(sources)
    convert = None
    if as_llama:
        from yunshan.models.pangu_pi.convert import LlamaExport

        def read(tensor_name):
            with safe_open(str(layout[tensor_name][0]), framework="pt") as handle:
                return handle.get_tensor(tensor_name)

        convert = LlamaExport(config, layout, read)
        config, layout = convert.llama_config(), convert.layout
    elif config.get("model_type") == "pangu_pi":
        raise GgufRefused(f"{model_dir / 'config.json'}: PanGu-π; llama.cpp runs it only as the Llama it equals "
                          "(add --as-llama; a PanGu-π with SIAF terms or augmented shortcuts has no llama.cpp form)")
    hp = _hyperparameters(config, str(model_dir / "config.json"))
    arch = gguf.MODEL_ARCH[hp["arch"].upper()]
    names = gguf.get_tensor_name_map(arch, hp["layers"])
    qtype = gguf.GGMLQuantizationType[NUMPY_QUANTS[quant][0]]
    vocab = read_vocab(model_dir, hp["vocab"], stop_ids, tokenizer)

    writer = gguf.GGUFWriter(str(path), hp["arch"])
    writer.add_name(name)
    writer.add_context_length(hp["context"])
    writer.add_embedding_length(hp["hidden"])
    writer.add_block_count(hp["layers"])
    writer.add_feed_forward_length(hp["ffn"])
    writer.add_head_count(hp["heads"])
    writer.add_head_count_kv(hp["kv_heads"])
    writer.add_rope_freq_base(hp["rope_theta"])
    writer.add_rope_dimension_count(hp["head_dim"])
    if hp["head_dim"] != hp["hidden"] // hp["heads"]:
        writer.add_key_length(hp["head_dim"])
        writer.add_value_length(hp["head_dim"])
    if hp["rope_linear"]:
        writer.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        writer.add_rope_scaling_factor(hp["rope_linear"])
    writer.add_layer_norm_rms_eps(hp["eps"])
    writer.add_vocab_size(hp["vocab"])
    writer.add_file_type(gguf.LlamaFileType[NUMPY_QUANTS[quant][1]])
    writer.add_quantization_version(gguf.GGML_QUANT_VERSION)
    writer.add_tokenizer_model(vocab.model)
    writer.add_tokenizer_pre(vocab.pre)
    writer.add_token_list(vocab.tokens)
    writer.add_token_types(vocab.types)
    writer.add_token_merges(vocab.merges)
    for kind, token_id in vocab.special_ids.items():
        getattr(writer, f"add_{kind}_token_id")(token_id)
    writer.add_add_bos_token(vocab.add_bos)
    writer.add_add_eos_token(vocab.add_eos)
    if vocab.chat_template:
        writer.add_chat_template(vocab.chat_template)
    if vocab.eot_id is not None:
        writer.add_eot_token_id(vocab.eot_id)

    # Plan every tensor (name, shape, type, bytes) first: the header lists them all before any data is written.
    plan = []
    for hf_name in layout:
        if hf_name == "lm_head.weight" and hp["tied"]:
            continue  # llama.cpp uses the token embedding when the file has no output.weight
        if hf_name.endswith("rotary_emb.inv_freq"):
            continue
        gguf_name = names.get_name(hf_name, try_suffixes=(".weight", ".bias"))
        if gguf_name is None:
            raise GgufRefused(f"{model_dir}: tensor {hf_name} has no GGUF name for architecture {hp['arch']}")
        shape = layout[hf_name][2]
        probe = np.zeros(shape, dtype=np.float32) if len(shape) <= 1 else np.zeros((1, shape[-1]), np.float32)
        _, kind = _quantize(probe, gguf_name, _tensor_qtype(gguf_name, qtype, hp["tied"]))
        byte_shape = gguf.quant_shape_to_byte_shape(shape, kind) if kind not in (
            gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.F16) else shape
        item = {gguf.GGMLQuantizationType.F32: 4, gguf.GGMLQuantizationType.F16: 2}.get(kind, 1)
        nbytes = int(np.prod(byte_shape)) * item
        plan.append((hf_name, gguf_name, kind))
        writer.add_tensor_info(gguf_name, byte_shape if item == 1 else shape,
                               np.dtype(np.uint8) if item == 1 else np.dtype({4: np.float32, 2: np.float16}[item]),
                               nbytes, raw_dtype=kind if item == 1 else None)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    parameters = 0
    bar = progress_bar(len(plan), f"GGUF {quant}: {path.name}", unit="tensor")
    try:
        for hf_name, gguf_name, kind in plan:
            source = layout[hf_name][0]
            if convert is not None:
                if source is None:
                    tensor = convert.tensor(hf_name, None)
                else:
                    with safe_open(str(source), framework="pt") as handle:
                        tensor = convert.tensor(hf_name, handle.get_tensor)
            else:
                with safe_open(str(source), framework="pt") as handle:
                    tensor = handle.get_tensor(hf_name)
            array = tensor.float().numpy()
            parameters += array.size
            if hp["permute"] and hf_name.endswith(("q_proj.weight", "q_proj.bias")):
                array = _permute(array, hp["heads"], hp["heads"])
            elif hp["permute"] and hf_name.endswith(("k_proj.weight", "k_proj.bias")):
                array = _permute(array, hp["heads"], hp["kv_heads"])
            data, got = _quantize(array, gguf_name, _tensor_qtype(gguf_name, qtype, hp["tied"]))
            assert got == kind, (gguf_name, got, kind)
            writer.write_tensor_data(np.ascontiguousarray(data))
            bar.update(1)
    finally:
        bar.close()
        writer.close()
    return GgufReport(path=str(path), quant=quant, architecture=hp["arch"], tokenizer_pre=vocab.pre,
                      tensors=len(plan), parameters=parameters, bytes=path.stat().st_size, vocab=len(vocab.tokens),
                      added_tokens=sum(t in (3, 4) for t in vocab.types), eot_token_id=vocab.eot_id,
                      chat_template=vocab.chat_template is not None)


def _llama_cpp_quantize(model_dir: Path, path: Path, quant: str, **kwargs) -> GgufReport:
    """A k-quant: an f16 GGUF written beside `path`, then llama.cpp's own quantiser (llama-cpp-python)."""
    try:
        import llama_cpp
    except ImportError:
        raise GgufRefused(f"--quant {quant}: the k-quants are made by llama.cpp's quantiser, which needs "
                          "llama-cpp-python (pip install llama-cpp-python, or make test-gguf, which installs it); "
                          f"without it choose one of {', '.join(NUMPY_QUANTS)}") from None
    f16 = path.with_name(path.stem + ".f16-tmp.gguf")
    try:
        report = write_gguf(model_dir, f16, "f16", **kwargs)
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = getattr(llama_cpp, f"LLAMA_FTYPE_{LLAMA_CPP_QUANTS[quant]}")
        params.nthread = 0
        code = llama_cpp.llama_model_quantize(str(f16).encode(), str(path).encode(), params)
        if code != 0:
            raise RuntimeError(f"llama.cpp's quantiser failed ({code}) making {quant} of {f16}")
    finally:
        f16.unlink(missing_ok=True)
    report.path, report.quant, report.bytes = str(path), quant, path.stat().st_size
    return report


def gguf_file_name(name: str, quant: str) -> str:
    """NAME-Q8_0.gguf, as GGUF files are named on the Hub (the name cut to characters safe in a file name)."""
    import re

    stem = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-.") or "model"
    return f"{stem}-{quant.upper()}.gguf"


def stop_ids_of(model_dir: Path, tokenizer=None) -> list[int]:
    """The ids generation stops at, as `yunshan chat` and `yunshan serve` find them: EOS of the tokenizer and of
    generation_config.json, and the token the chat template closes an assistant turn with."""
    from transformers import AutoTokenizer

    from yunshan.data.chat import TemplateError, encode_conversation

    tok = tokenizer if tokenizer is not None else load_tokenizer(model_dir)
    ids = {tok.eos_token_id} - {None}
    generation = model_dir / "generation_config.json"
    if generation.is_file():
        eos = json.loads(generation.read_text(encoding="utf-8")).get("eos_token_id")
        ids.update(eos if isinstance(eos, list) else [eos] if eos is not None else [])
    if tok.chat_template:
        try:
            ids.update(encode_conversation(tok, [{"role": "user", "content": "1"},
                                                 {"role": "assistant", "content": "2"}]).end_markers)
        except TemplateError:
            pass
    return sorted(ids)


# Texts the export's own check encodes with the source tokenizer and with the tokenizer read back from the file.
PROBES = ("根据《中华人民共和国民法典》第六百八十条，禁止高利放贷，借款的利率不得违反国家有关规定。",
          "2023年第三季度，该行净息差为1.73%，同比下降12个基点；不良贷款率1.62%。",
          "The court held that the 10-K filing's EBITDA of $1,234.5m was materially misstated.\n\n  Indented  line\t.",
          "你好！<|im_start|>user\nHello<|im_end|>", "   ", "x")


def gguf_tokenizer(path: Path, pre: str):
    """The tokenizer transformers builds from a GGUF file's metadata, with `yunshan model import-gguf`'s repairs of
    the digit pass and the added tokens (a `tokenizers.Tokenizer`)."""
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    from yunshan.models.gguf import _repair_pre_tokenizer, _restore_user_defined, user_defined_tokens

    back = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    data = json.loads(back.backend_tokenizer.to_str())
    _repair_pre_tokenizer(data, pre)
    _restore_user_defined(data, user_defined_tokens(path))
    return Tokenizer.from_str(json.dumps(data))


def tensor_count(path: Path) -> int:
    """The number of tensors a GGUF file's header announces (read from the fixed header, not by parsing it all)."""
    import struct

    with open(path, "rb") as handle:
        magic, version, tensors, _ = struct.unpack("<IIQQ", handle.read(24))
    if magic != 0x46554747:  # "GGUF"
        raise RuntimeError(f"{path}: not a GGUF file")
    return tensors


def check_gguf(path: Path, model_dir: Path, report: GgufReport, tokenizer=None) -> None:
    """The written file read back: its header announces every planned tensor, and the tokenizer transformers builds
    from its metadata (gguf_tokenizer) encodes PROBES as the source does. llama.cpp's own reading is what
    `make test-gguf` checks."""
    if tensor_count(path) != report.tensors:
        raise RuntimeError(f"GGUF check: {path.name} holds {tensor_count(path)} tensors, {report.tensors} written")
    source = tokenizer if tokenizer is not None else load_tokenizer(model_dir)
    rebuilt = gguf_tokenizer(path, report.tokenizer_pre)
    for probe in PROBES:
        want = source(probe, add_special_tokens=False)["input_ids"]
        got = rebuilt.encode(probe, add_special_tokens=False).ids
        if want != got:
            at = next((i for i, (a, b) in enumerate(zip(want, got)) if a != b), min(len(want), len(got)))
            raise RuntimeError(f"GGUF check: the tokenizer read back from {path.name} encodes {probe[:30]!r} as "
                               f"{got[at:at + 6]} from token {at} on, the source tokenizer as {want[at:at + 6]} "
                               f"({source.convert_ids_to_tokens(want[at:at + 6])})")
