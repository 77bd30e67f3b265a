"""Loading a model and tokenizer for training: any HF causal LM or a PanGu-π built from a preset; precision;
growing the embeddings for an extended tokenizer; LoRA (with the new embedding rows trainable).

Shared by continual pretraining and SFT (a stable piece, so shared rather than copied).
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

import torch

from yunshan.loading.precision import choose_precision, fast_bf16, resolve_precision  # noqa: F401  (re-exported)

logger = logging.getLogger("yunshan")

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "tokenizer.model", "vocab.json")


OPT_IN = "model.trust_remote_code=true (in the recipe or as an override)"


def has_tokenizer(path: str | os.PathLike) -> bool:
    return any((Path(path) / name).is_file() for name in TOKENIZER_FILES)


def resolve_sources(recipe, weights: bool = True):
    """(model args, tokenizer folder, base tokenizer folder or None) of a cpt/sft recipe with every Hub id resolved
    to a local folder (yunshan.loading.hub_download; the model's weights only when `weights`, so a dry run fetches
    none).

    The tokenizer is `tokenizer.path`, else the model's; the base tokenizer (for subword-mean rows) is
    `tokenizer.base_path`, else the model's own when it has one, and the model's own whenever it is larger than
    `base_path`'s (the model was trained with an extension already: its rows are kept). A Hub id in `base_path`
    that is the model's id takes the model's revision."""
    import dataclasses

    from yunshan.loading.hub_download import resolve_pretrained
    from yunshan.loading.pretrained import resolve_model_folder

    model_args = recipe.model
    model_dir = None
    if model_args.name_or_path:
        model_dir = resolve_model_folder(model_args.name_or_path, model_args.revision, field="model.name_or_path",
                                         what="model" if weights else "tokenizer")
        model_args = dataclasses.replace(model_args, name_or_path=model_dir, revision=None)
    tok = recipe.tokenizer
    if tok.path:
        tok_dir = resolve_pretrained(tok.path, tok.revision, what="tokenizer", field="tokenizer.path")
    elif model_dir is not None:
        tok_dir = model_dir
    else:
        raise ValueError("tokenizer.path is required when the model is built from a preset")
    base_dir = None
    if tok.base_path:
        same = tok.base_path == recipe.model.name_or_path
        base_dir = model_dir if same else resolve_pretrained(tok.base_path, None, what="tokenizer",
                                                              field="tokenizer.base_path")
    elif model_dir is not None and has_tokenizer(model_dir):
        base_dir = model_dir
    if base_dir is not None and model_dir is not None and base_dir != model_dir and has_tokenizer(model_dir):
        # A model saved by an earlier extended run (SFT after CPT, say) already has trained rows for the extension:
        # growing it again from the original tokenizer would reset those rows to their subword means and undo what
        # continual pretraining taught them. The model's own tokenizer is then the base: only ids past it are new.
        remote = recipe.model.trust_remote_code
        own, given = len(load_tokenizer(model_dir, remote)), len(load_tokenizer(base_dir, remote))
        if own > given:
            if int(os.environ.get("RANK", "0")) == 0:
                print(f"note: the model's own tokenizer ({model_dir}) already has {own:,} tokens, more than "
                      f"tokenizer.base_path's {given:,}: its rows for the extension are kept as trained (the model's "
                      "tokenizer is the base for growth)", flush=True)
            base_dir = model_dir
    return model_args, tok_dir, base_dir


def load_tokenizer(path: str | os.PathLike, trust_remote_code: bool = False):
    from yunshan.loading.pretrained import load_tokenizer as load

    if not Path(path).is_dir() or not has_tokenizer(path):
        found = "no such folder" if not Path(path).exists() else "not a folder" if not Path(path).is_dir() else (
            f"no tokenizer files ({', '.join(TOKENIZER_FILES)}) in this folder")
        raise FileNotFoundError(f"{path}: {found}; give a tokenizer folder written by save_pretrained or a Hub id "
                                "ORG/NAME")
    tokenizer = load(path, opt_in=OPT_IN, trust_remote_code=trust_remote_code)
    if tokenizer.eos_token_id is None:
        raise ValueError(f"{path}: the tokenizer has no eos_token; set one (documents are separated by EOS)")
    return tokenizer


def load_chat_tokenizers(recipe, tok_path, base_path):
    """The tokenizers of a chat stage (sft, preference): the run's own, given a chat template when it has none and
    EOS as its pad token when it has no pad, and the base model's (None when the model was not extended).
    Returns (tokenizer, whether a template was added, base tokenizer)."""
    from yunshan.data.chat import ensure_chat_template

    tokenizer = load_tokenizer(tok_path, recipe.model.trust_remote_code)
    added_template = ensure_chat_template(tokenizer)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    base_tokenizer = load_tokenizer(base_path, recipe.model.trust_remote_code) if base_path else None
    return tokenizer, added_template, base_tokenizer


def load_model(model_args, vocab_size: int | None = None):
    """A causal LM from `model.name_or_path` (any HF model folder; resolve_sources turns a Hub id into one) or
    `model.preset` (a PanGu-π preset, built from scratch with `config_overrides`; vocab_size defaults to the
    tokenizer's)."""
    from transformers import AutoModelForCausalLM

    import yunshan  # noqa: F401  (registers PanGu-π)

    dtype = {"auto": "auto", "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}[
        model_args.dtype
    ]
    if model_args.name_or_path:
        from yunshan.io.folders import check_model_folder
        from yunshan.loading.pretrained import load_causal_lm

        path = model_args.name_or_path
        check_model_folder(path, "model.name_or_path")
        if not (Path(path) / "config.json").is_file():
            raise FileNotFoundError(f"{path}: no config.json; expected a model folder written by save_pretrained")
        return load_causal_lm(path, opt_in=OPT_IN, dtype=torch.float32 if dtype == "auto" else dtype,
                              trust_remote_code=model_args.trust_remote_code,
                              attn_implementation=model_args.attn_implementation)
    config = preset_config(model_args, vocab_size)
    config._attn_implementation = model_args.attn_implementation
    torch.manual_seed(model_args.init_seed)
    return AutoModelForCausalLM.from_config(config)


def preset_config(model_args, vocab_size: int | None = None):
    """The config of the preset `model.preset` names (yunshan.models.presets: PanGu-π pangu-pi-7b, pangu-pi-1b,
    tiny; OTCE otce-1b, otce-281m, otce-tiny) with the recipe's overrides; vocab_size defaults to the tokenizer's."""
    from yunshan.models import preset_config as build
    from yunshan.models import presets

    if model_args.preset not in presets():
        raise ValueError(f"model.preset {model_args.preset!r} is not a preset; valid: {', '.join(presets())}")
    overrides = dict(model_args.config_overrides or {})
    if vocab_size is not None:
        overrides.setdefault("vocab_size", vocab_size)
    return build(model_args.preset, **overrides)


def describe_model(model_args, vocab_size: int | None = None) -> dict:
    """Class and parameter count of the model a recipe names, from its config only (meta device, no weights)."""
    from transformers import AutoConfig

    import yunshan  # noqa: F401
    from yunshan.models.info import count_parameters_by_part

    if model_args.name_or_path:
        path = Path(model_args.name_or_path)
        if not (path / "config.json").is_file():
            raise FileNotFoundError(f"{path}: no config.json; expected a model folder written by save_pretrained")
        from yunshan.loading.remote_code import refuse_remote_code

        with refuse_remote_code(path, OPT_IN):
            config = AutoConfig.from_pretrained(path, trust_remote_code=model_args.trust_remote_code)
    else:
        config = preset_config(model_args, vocab_size)
    parts = count_parameters_by_part(config)
    return {"model_type": config.model_type, "architectures": getattr(config, "architectures", None),
            "parameters": parts["total"], "vocab_size": config.vocab_size}


def grow_embeddings(model, base_tokenizer, tokenizer, init: str = "subword_mean") -> list[int]:
    """Give the model rows for the ids an extended tokenizer adds to the model's own (base) tokenizer.

    New rows start as the mean of the base-tokenizer pieces of their text (yunshan.tokenizer.resize_embeddings),
    also when the matrix was already padded past the new size. Returns the new token ids (empty if none).

    Under DeepSpeed ZeRO-3 (the model built inside zero.Init) the matrices are gathered whole for the new rows and
    rank 0's rows written back to every partition (yunshan.training.engines); every rank must call this."""
    from yunshan.training.engines import full_shape, gathered

    rows = full_shape(model.get_input_embeddings().weight)[0]
    if base_tokenizer is None:
        if len(tokenizer) <= rows:
            return []
        raise ValueError(
            f"the tokenizer has {len(tokenizer)} tokens but the model only {rows} embedding rows; subword-mean "
            "initialisation needs the model's original tokenizer: set tokenizer.base_path"
        )
    if len(tokenizer) <= len(base_tokenizer):
        return []
    from yunshan.tokenizer import resize_embeddings

    info = resize_embeddings(model, base_tokenizer, tokenizer, init=init, gathered=gathered)
    return list(range(info["base_size"], info["new_size"]))


def planned_new_ids(base_tokenizer, tokenizer) -> list[int]:
    """The ids `grow_embeddings` will add, known from the tokenizers alone (before the model is loaded)."""
    if base_tokenizer is None or len(tokenizer) <= len(base_tokenizer):
        return []
    return list(range(max(base_tokenizer.get_vocab().values()) + 1, max(tokenizer.get_vocab().values()) + 1))


def is_tied(model) -> bool:
    """Whether the output head shares its matrix with the input embeddings (SmolLM2, Qwen2.5-0.5B..3B, Gemma)."""
    head = model.get_output_embeddings()
    return head is not None and head.weight is model.get_input_embeddings().weight


def new_token_mode(lora_args, new_token_ids: list[int]) -> str:
    """How LoRA trains the new vocabulary rows: "rows", "indices" or "none" (`lora.new_token_training`)."""
    mode = lora_args.new_token_training
    if not new_token_ids:
        return "none"
    if mode == "auto":
        return "indices" if len(new_token_ids) <= lora_args.indices_threshold else "rows"
    return mode


def apply_lora(model, lora_args, new_token_ids: list[int], seed: int):
    """Wrap with PEFT LoRA, or one of its variants as `lora` asks (DoRA, rsLoRA, PiSSA / OLoRA / Gaussian /
    orthogonal initialisation: PEFT's LoraConfig fields of the same names). New vocabulary rows train too: all rows of
    embed_tokens/lm_head for a large extension (modules_to_save), only the new rows (trainable_token_indices) for a
    few tokens.

    A tied model stays tied in every mode, and its new rows train on both sides (they are one matrix): in "indices"
    mode PEFT ties the head's token adapter to the embedding's by itself; in "rows" mode both modules are saved and
    PEFT's `ensure_weight_tying` makes the head use the embedding's trained copy (with only embed_tokens saved, the
    head would keep the old matrix and the merged model would come out untied). `seed` seeds the adapter's initial
    weights."""
    from peft import LoraConfig, get_peft_model

    from yunshan.loading.pretrained import activation_checkpointing_alias
    from yunshan.training.engines import check_lora_rows_of_tied_model, gathered, is_partitioned, without_zero_init

    if isinstance(lora_args.target_modules, list) and lora_args.target_modules:
        check_target_modules(model, lora_args.target_modules)
    target = lora_args.target_modules or "all-linear"
    if (lora_args.use_dora or lora_args.mutates_base) and any(is_partitioned(p) for p in model.parameters()):
        raise ValueError(
            "lora: use_dora and init_lora_weights pissa/olora read every adapted weight when the adapter is built, "
            "and DeepSpeed ZeRO-3 holds the weights partitioned then; train these variants in one process, with DDP, "
            "ZeRO-2 or FSDP")
    embed_name = _module_name(model, model.get_input_embeddings())
    head = model.get_output_embeddings()
    head_name = _module_name(model, head) if head is not None else None
    tied = is_tied(model)
    extra = {}
    mode = new_token_mode(lora_args, new_token_ids)
    check_lora_rows_of_tied_model(tied, mode)
    if mode == "indices":
        indices = {embed_name: new_token_ids}
        if head_name and not tied:
            indices[head_name] = new_token_ids
        extra["trainable_token_indices"] = indices
    elif mode == "rows":
        extra["modules_to_save"] = [embed_name] + ([head_name] if head_name else [])
        if tied:
            extra["ensure_weight_tying"] = True
    config = LoraConfig(
        r=lora_args.r, lora_alpha=lora_args.alpha, lora_dropout=lora_args.dropout, target_modules=target,
        task_type="CAUSAL_LM", use_dora=lora_args.use_dora, use_rslora=lora_args.use_rslora,
        init_lora_weights=lora_args.peft_init(), **extra,
    )
    # Under DeepSpeed ZeRO-3 PEFT copies rows of partitioned matrices: the trained copy of modules_to_save, the
    # original values of trainable token indices (whose own ZeRO-3 path broadcasts from a CUDA device only). It reads
    # them here from the gathered whole matrices as ordinary tensors; the engine partitions the adapter's new
    # parameters when training starts.
    matrices = [model.get_input_embeddings().weight] + ([head.weight] if head is not None else [])
    # The adapter's initial weights depend on `seed` alone: loading inside zero.Init and growing the embeddings draw
    # other amounts of random numbers than one process does, and every engine must start from the same adapter.
    torch.manual_seed(seed)
    with gathered(matrices), without_zero_init(), activation_checkpointing_alias():
        return get_peft_model(model, config)


# Beside a PiSSA / OLoRA run's checkpoints: the adapter as initialised, which the final adapter is converted against.
INITIAL_ADAPTER = "initial_adapter"


def save_initial_adapter(model, lora_args, ckpt_dir: Path) -> Path | None:
    """PiSSA / OLoRA: save the adapter as initialised (before any step) into `ckpt_dir`/initial_adapter, once, when
    a run starts from step 0 (PEFT's recipe for path_initial_model_for_weight_conversion: its config says a plain
    initialisation, so that loading it does not decompose the residual base again). None for other inits."""
    if not lora_args.mutates_base:
        return None
    folder = Path(ckpt_dir) / INITIAL_ADAPTER
    config = model.peft_config["default"]
    init = config.init_lora_weights
    config.init_lora_weights = True
    try:
        model.save_pretrained(folder)
    finally:
        config.init_lora_weights = init
    return folder


def check_initial_adapter(model, lora_args, ckpt_dir: Path) -> str | None:
    """On a resumed PiSSA / OLoRA run: the initial adapter recomputed now (the decomposition of the same base, with
    the same seed) against the one saved when the run began, which the final save converts against. Returns a note
    when they differ (a decomposition computed with other threads or libraries: the residual base then differs by as
    much); raises when the saved one is missing."""
    if not lora_args.mutates_base:
        return None
    from peft import get_peft_model_state_dict
    from safetensors.torch import load_file

    path = Path(ckpt_dir) / INITIAL_ADAPTER / "adapter_model.safetensors"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing; a {lora_args.init_lora_weights} run saves its initial adapter when "
                                "it starts and converts the final adapter against it, so it cannot resume without "
                                "it; start afresh (training.resume: never)")
    saved = load_file(path)
    now = get_peft_model_state_dict(model)
    worst = max(((now[k].float() - v.float()).abs().max().item() for k, v in saved.items()
                 if "lora_" in k and k in now), default=0.0)
    if worst == 0.0:
        return None
    return (f"note: the {lora_args.init_lora_weights} decomposition recomputed on resuming differs from the one this "
            f"run began with by up to {worst:.3g}: the frozen residual weights differ by as much")


def save_adapter(model, lora_args, folder: Path, ckpt_dir: Path) -> None:
    """The trained adapter. After PiSSA / OLoRA it is converted against the initial adapter into a plain LoRA
    adapter of rank 2r (alpha scaled to keep alpha / r, or alpha / sqrt(r) under rsLoRA) that applies to the unchanged
    base, as PEFT documents (`path_initial_model_for_weight_conversion`)."""
    if not lora_args.mutates_base:
        model.save_pretrained(folder)
        return
    import tempfile

    from safetensors.torch import load_file, save_file

    folder = Path(folder)
    model.save_pretrained(folder, path_initial_model_for_weight_conversion=str(Path(ckpt_dir) / INITIAL_ADAPTER))
    # PEFT 0.21's conversion (LoraModel.subtract_mutated_init) returns the lora_A / lora_B matrices only: the other
    # trained tensors of the adapter (the new vocabulary rows of modules_to_save or trainable_token_indices, DoRA's
    # magnitude vectors) would be lost. They are the same before and after the conversion (the conversion changes
    # only how the low-rank update is written: W + (BA - B0A0) = W_res + BA), so they are put back as PEFT saves them.
    path = folder / "adapter_model.safetensors"
    converted = load_file(path)
    with tempfile.TemporaryDirectory(dir=folder.parent) as tmp:
        model.save_pretrained(tmp)
        plain = load_file(Path(tmp) / "adapter_model.safetensors")
    kept = {k: v for k, v in plain.items() if "lora_A" not in k and "lora_B" not in k and k not in converted}
    save_file({**converted, **kept}, path, metadata={"format": "pt"})


def check_target_modules(model, targets: list[str]) -> None:
    """Every name in lora.target_modules must select at least one module, as PEFT matches a list: the module's full
    name or its last dotted parts (PEFT itself would train the others and drop an unmatched name silently)."""
    names = [name for name, _ in model.named_modules() if name]
    for target in targets:
        if not any(name == target or name.endswith("." + target) for name in names):
            linear = sorted({name.rsplit(".", 1)[-1] for name, module in model.named_modules()
                             if isinstance(module, torch.nn.Linear)})
            raise ValueError(f"lora.target_modules: {target!r} matches no module of {type(model).__name__}; its "
                             f"linear modules: {', '.join(linear)}")


def _module_name(model, module) -> str:
    for name, m in model.named_modules():
        if m is module:
            return name.split(".")[-1]
    raise ValueError("module not found in model")


def training_loss(model, train_args) -> tuple[object | None, dict]:
    """The chunked loss `training.loss` asks for on `model` (after LoRA), or None for the plain loss, and what the
    data report records of it (yunshan.training.chunked_loss)."""
    from yunshan.training.chunked_loss import chunked_loss_for

    chunked, line = chunked_loss_for(model, train_args.loss, train_args.loss_chunk_tokens)
    return chunked, {"value": "chunked" if chunked is not None else "plain",
                     "chunk_tokens": chunked.chunk_tokens if chunked is not None else None, "reason": line}


def trainable_summary(model) -> str:
    from yunshan.training.engines import full_shape

    sizes = [(full_shape(p).numel(), p.requires_grad) for p in model.parameters()]  # whole sizes, also under ZeRO-3
    trainable = sum(n for n, grad in sizes if grad)
    total = sum(n for n, _ in sizes)
    return f"{trainable:,} trainable of {total:,} parameters ({100 * trainable / max(total, 1):.2f}%)"
