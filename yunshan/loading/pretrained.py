"""Loading a causal LM and its tokenizer from a folder or Hub id: the one path training, evaluation and chat share.

    from yunshan.loading.pretrained import context_length, load_causal_lm, load_tokenizer, resolve_model_folder
    folder = resolve_model_folder("Qwen/Qwen2.5-0.5B", "main", field="--model")  # a folder; a Hub id -> the HF cache
    tokenizer = load_tokenizer(folder, opt_in="--trust-remote-code")
    model = load_causal_lm(folder, opt_in="--trust-remote-code", dtype=torch.float32)

Every load goes the same way: the reference is resolved once to a local folder (yunshan.loading.hub_download: a Hub id
to its HF cache snapshot, downloaded unless HF_HUB_OFFLINE=1), the folder is checked (yunshan.io.folders: a missing
folder or a damaged JSON file is one line naming the file), and transformers' `from_pretrained` is called with
`trust_remote_code` given explicitly and `local_files_only` (the folder is local by then); its refusal to run a
folder's own code becomes one line naming the opt-in of the command that loads (yunshan.loading.remote_code). Importing
yunshan registers PanGu-π and OTCE with the Auto classes, so their folders load without remote code.

What differs between the callers stays with them: `yunshan cpt`/`sft` build a model from a preset or load one in
training precision (yunshan.training.models), `yunshan eval` wraps it for scoring (yunshan.eval.loading), `yunshan
chat` loads an adapter's base and the folder's own code on request (yunshan.serve.chat).
"""

from __future__ import annotations

import contextlib
import os


def resolve_model_folder(ref: str | os.PathLike, revision: str | None = None, *, field: str,
                         what: str = "model") -> str:
    """The existing local folder `ref` names: `ref` itself, or the HF cache folder of a Hub id at `revision`
    (`what`: "model" fetches the weights, "tokenizer" only config and tokenizer). Errors are one line naming
    `field`, the flag or recipe field that gave `ref`."""
    from yunshan.io.folders import check_model_folder
    from yunshan.loading.hub_download import resolve_pretrained

    folder = resolve_pretrained(ref, revision, what=what, field=field)
    check_model_folder(folder, field)
    return folder


def load_tokenizer(folder: str | os.PathLike, *, opt_in: str, trust_remote_code: bool = False,
                   name: str | os.PathLike | None = None):
    """AutoTokenizer of a local folder. `opt_in` is what allows a folder's own code (named when it is refused);
    `name` is how the refusal names the model (default: the folder)."""
    from transformers import AutoTokenizer

    from yunshan.io.folders import readable_by_transformers
    from yunshan.loading.remote_code import refuse_remote_code

    with refuse_remote_code(name or folder, opt_in), readable_by_transformers(folder, "tokenizer"):
        return AutoTokenizer.from_pretrained(str(folder), local_files_only=True, trust_remote_code=trust_remote_code)


def load_causal_lm(folder: str | os.PathLike, *, opt_in: str, dtype=None, trust_remote_code: bool = False,
                   attn_implementation: str | None = None, name: str | os.PathLike | None = None):
    """AutoModelForCausalLM of a local folder with its weights in `dtype` (a torch dtype; default float32).
    `attn_implementation` as transformers takes it (None: transformers' choice); `opt_in` and `name` as in
    load_tokenizer."""
    import torch
    from transformers import AutoModelForCausalLM

    import yunshan  # noqa: F401  (registers PanGu-π and OTCE with the Auto classes)
    from yunshan.io.folders import readable_by_transformers
    from yunshan.loading.remote_code import refuse_remote_code

    with refuse_remote_code(name or folder, opt_in), readable_by_transformers(folder, "model"):
        return AutoModelForCausalLM.from_pretrained(
            str(folder), dtype=torch.float32 if dtype is None else dtype, local_files_only=True,
            trust_remote_code=trust_remote_code, attn_implementation=attn_implementation)


def context_length(model, tokenizer) -> int:
    """Longest sequence the model accepts: its config's max_position_embeddings (or the other names configs use),
    else the tokenizer's model_max_length when that is a real limit, else 2048."""
    config = model.config
    for field in ("max_position_embeddings", "n_positions", "max_sequence_length", "seq_length"):
        value = getattr(config, field, None)
        if isinstance(value, int) and value > 0:
            return value
    value = getattr(tokenizer, "model_max_length", None)
    return value if isinstance(value, int) and 0 < value < 10**7 else 2048


@contextlib.contextmanager
def activation_checkpointing_alias():
    """Inside the block, the names transformers 5 deprecated for activation checkpointing are the current ones:
    `model.is_gradient_checkpointing` is `model.is_activation_checkpointing`, `gradient_checkpointing_enable(kwargs)`
    and `gradient_checkpointing_disable()` are `activation_checkpointing_enable(kwargs)` and
    `activation_checkpointing_disable()`: the same work, without the deprecation warning. Put back after.

    transformers warns (FutureWarning) on every use of the old names, and libraries still use them: PEFT (0.21.2, and
    its main branch as of August 2026) reads `is_gradient_checkpointing` when it wraps a model (get_peft_model,
    PeftModel.from_pretrained), so every LoRA run and adapter load printed "`is_gradient_checkpointing` is
    deprecated"; TRL's DPO and KTO trainers read it around every reference pass and, with gradient checkpointing on,
    switch it off and on again by the old names. yunshan runs those calls inside this block. Nothing is filtered: any
    other warning shows as before, and once transformers drops the old names (v6) or the libraries use the new ones
    this does nothing."""
    from transformers import PreTrainedModel

    old = {name: PreTrainedModel.__dict__.get(name) for name in
           ("is_gradient_checkpointing", "gradient_checkpointing_enable", "gradient_checkpointing_disable")}
    current = {name: PreTrainedModel.__dict__.get(name) for name in
               ("is_activation_checkpointing", "activation_checkpointing_enable", "activation_checkpointing_disable")}
    if None in old.values() or None in current.values():
        yield
        return

    def enable(self, gradient_checkpointing_kwargs=None, **kwargs):
        return self.activation_checkpointing_enable(activation_checkpointing_kwargs=gradient_checkpointing_kwargs,
                                                    **kwargs)

    def disable(self):
        return self.activation_checkpointing_disable()

    PreTrainedModel.is_gradient_checkpointing = current["is_activation_checkpointing"]
    PreTrainedModel.gradient_checkpointing_enable = enable
    PreTrainedModel.gradient_checkpointing_disable = disable
    try:
        yield
    finally:
        for name, attribute in old.items():
            setattr(PreTrainedModel, name, attribute)
