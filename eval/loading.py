"""Load the models and tokenizers an evaluation compares and fingerprint them and the data files.

    from yunshan.eval.loading import load_model, sha256_model_dir
    lm = load_model("out/yunshan-tiny")        # any HF causal LM folder, PanGu-π included
    lm = load_model("Qwen/Qwen2.5-0.5B", revision="main")   # a Hub id: its HF cache folder (yunshan.loading)

Every JSON report records the model's and the data files' sha256, so a number can be traced to exact bytes.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
from dataclasses import dataclass
from pathlib import Path

from yunshan.data.files import sha256_file

OPT_IN = "--trust-remote-code (in a `yunshan run` recipe: eval.trust_remote_code: true)"

# Files that decide a model's outputs; optimizer states and logs do not.
_MODEL_FILE_SUFFIXES = (".json", ".safetensors", ".bin", ".model", ".txt", ".py", ".tiktoken")


@dataclass
class LoadedModel:
    """A causal LM ready for scoring: the model (eval mode), its tokenizer and where it came from."""

    name: str
    path: str
    model: object
    tokenizer: object
    sha256: str | None
    autocast: bool = False  # run the forward passes under bf16 autocast (`--dtype auto` on fast-bf16 hardware)
    precision: str = "float32"  # what the forward passes compute in, and why (saved in results.json)
    recheck_float32: bool = False  # under autocast, rescore multiple-choice close calls in float32 (--recheck-float32)

    def compute(self):
        """The context every forward pass of this model runs in: bf16 autocast or nothing."""
        import torch

        return torch.autocast(self.model.device.type if self.model is not None else "cpu", dtype=torch.bfloat16,
                              enabled=self.autocast)

    @property
    def max_length(self) -> int:
        """Longest sequence the model accepts (yunshan.loading.pretrained.context_length)."""
        from yunshan.loading.pretrained import context_length

        return context_length(self.model, self.tokenizer)


def sha256_model_dir(path: str | Path) -> str | None:
    """One digest over every file that decides the outputs (weights, config, tokenizer), in sorted order."""
    folder = Path(path)
    if not folder.is_dir():
        return None
    digest = hashlib.sha256()
    for file in sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix in _MODEL_FILE_SUFFIXES):
        digest.update(str(file.relative_to(folder)).encode())
        digest.update(sha256_file(file).encode())
    return digest.hexdigest()


def load_model(path: str, dtype: str = "float32", device: str = "cpu", hash_weights: bool = True,
               revision: str | None = None, trust_remote_code: bool = False) -> LoadedModel:
    """Load `path` with AutoModelForCausalLM / AutoTokenizer from a local folder.

    Args:
        path: a local folder saved by `save_pretrained` (any causal LM; PanGu-π works because importing yunshan
            registers it), or a Hub id ORG/NAME, resolved to its HF cache folder (downloaded unless
            HF_HUB_OFFLINE=1: yunshan.loading.hub_download); `LoadedModel.path` is that folder.
        dtype: "float32" (default), "auto" (float32 weights, bf16 autocast where the hardware multiplies bf16
            fast: yunshan.loading.precision), "bfloat16" or "float16" (weights in that dtype; ~100x slower than float32
            on CPUs without AMX or AVX-512 BF16).
        device: torch device string.
        hash_weights: record the sha256 of the model folder's files (slow only for multi-GB checkpoints).
        revision: branch, tag or commit of a Hub id.
        trust_remote_code: allow the folder's own code (auto_map); without it such a folder is refused
            (yunshan.loading.remote_code).
    """
    import torch

    from yunshan.loading.precision import eval_autocast
    from yunshan.loading.pretrained import load_causal_lm, load_tokenizer, resolve_model_folder

    dtype, autocast, reason = eval_autocast(dtype)
    folder = resolve_model_folder(path, revision, field="--model")
    tokenizer = load_tokenizer(folder, opt_in=OPT_IN, trust_remote_code=trust_remote_code, name=path)
    model = load_causal_lm(folder, opt_in=OPT_IN, dtype=getattr(torch, dtype), trust_remote_code=trust_remote_code,
                           name=path)
    model.to(device).eval()
    ensure_pad_token(tokenizer, model)
    head = autocast and float32_head(model)
    precision = f"{'bfloat16 autocast' if autocast else dtype} ({reason})" + (
        "; output head in float32" if head else "")
    return LoadedModel(name=_name(path), path=str(folder), model=model, tokenizer=tokenizer,
                       sha256=sha256_model_dir(folder) if hash_weights else None, autocast=autocast,
                       precision=precision)


def float32_head(model) -> bool:
    """Under bf16 autocast, compute the output projection (lm_head) in float32: True when the head was wrapped.

    Autocast returns the head's logits in bf16, whose 8 mantissa bits space them 0.125 apart from 16 to 32 and 0.25
    from 32 to 64 (SmolLM2-135M's logits reach 33): the log-likelihoods of the answer letters A-D then come in steps
    of 0.125-0.25 nats, and letters whose float32 scores differ by less tie exactly, the tie going to the first. On
    the real CMMLU (the first question of each of 67 subjects) SmolLM2's letters tied on 22 questions and 9 differed
    from float32's; with the head in float32 none tied and 2 differed (eval/README.md, "Precision"). Its input, the
    final norm's output, is float32 already, so a score then moves only by what the bf16 body moves it, at the cost
    of one float32 product per scored position (the vocabulary x hidden matrix; the scorers keep only the positions
    they read). Models without a settable output head are left as they are (False)."""
    import torch

    wrapper = float32_head_class()
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if isinstance(head, wrapper):
        return True
    if not isinstance(head, torch.nn.Module):
        return False
    model.set_output_embeddings(wrapper(head))
    return isinstance(model.get_output_embeddings(), wrapper)


@contextlib.contextmanager
def float32_head_while(model):
    """float32_head for the duration of a block, the model's own head put back after it: the forgetting monitor's
    measurements under a training run's autocast score as `yunshan eval` does and leave the trained model as it was."""
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    wrapped = not isinstance(head, float32_head_class()) and float32_head(model)  # False: nothing to put back
    try:
        yield
    finally:
        if wrapped:
            model.set_output_embeddings(head)


@functools.cache
def float32_head_class():
    """The wrapper class float32_head installs (made on first use: this module is imported without torch)."""
    import torch

    class Float32Head(torch.nn.Module):
        """An output head run with autocast off on a float32 input (float32_head); its weight is the head's own, so
        tied embeddings stay tied."""

        def __init__(self, head):
            super().__init__()
            self.head = head

        @property
        def weight(self):
            return self.head.weight

        def forward(self, hidden):
            with torch.autocast(hidden.device.type, enabled=False):
                return self.head(hidden.float())

    return Float32Head


def load_tokenizer_only(path: str, hash_files: bool = True, revision: str | None = None,
                        trust_remote_code: bool = False) -> LoadedModel:
    """Only the tokenizer of `path` (a folder or Hub id, as in load_model; no weights fetched): `model` is None."""
    from yunshan.loading.pretrained import load_tokenizer, resolve_model_folder

    folder = resolve_model_folder(path, revision, field="--model", what="tokenizer")
    tokenizer = load_tokenizer(folder, opt_in=OPT_IN, trust_remote_code=trust_remote_code, name=path)
    return LoadedModel(name=_name(path), path=str(folder), model=None, tokenizer=tokenizer,
                       sha256=sha256_model_dir(folder) if hash_files else None)


def ensure_pad_token(tokenizer, model=None) -> None:
    """Give a tokenizer without a pad token one, for batching. Padding positions are masked or ignored everywhere, so
    any id works: EOS (the usual choice), else UNK, else the model's own pad or EOS id, else id 0 (a tokenizer with
    none of these, such as a bare BPE, once failed in torch.full(..., None))."""
    if tokenizer.pad_token_id is not None:
        return
    for token in (tokenizer.eos_token, tokenizer.unk_token):
        if token is not None:
            tokenizer.pad_token = token
            return
    config = getattr(model, "generation_config", None) or getattr(model, "config", None)
    ids = [getattr(config, "pad_token_id", None), getattr(config, "eos_token_id", None), 0]
    pad_id = next(i[0] if isinstance(i, list) else i for i in ids if i is not None and i != [])
    tokenizer.pad_token = tokenizer.convert_ids_to_tokens(int(pad_id))


def _name(path: str) -> str:
    return Path(path).name or str(path)


def wrap_model(model, tokenizer, name: str = "model") -> LoadedModel:
    """Wrap an in-memory model and tokenizer (tests, notebooks) without saving them first."""
    model.eval()
    ensure_pad_token(tokenizer, model)
    return LoadedModel(name=name, path="<in memory>", model=model, tokenizer=tokenizer, sha256=None)
