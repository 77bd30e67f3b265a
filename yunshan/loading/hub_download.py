"""Model and tokenizer references: a local folder, or a Hugging Face Hub id resolved to a folder of the HF cache.

    yunshan eval --model Qwen/Qwen2.5-0.5B --revision main --tasks bpc
    yunshan cpt --config RECIPE.yaml model.name_or_path=Qwen/Qwen2.5-0.5B model.revision=v1.0
    yunshan tokenizer extend --base Qwen/Qwen2.5-0.5B --corpus finance.jsonl --out tok

Everywhere yunshan accepts a model or tokenizer folder it accepts a Hub id (ORG/NAME, optionally with a revision:
branch, tag or commit), the way transformers' `from_pretrained` does. The id is resolved here, once, to the cached
snapshot folder (huggingface_hub's `snapshot_download`), because yunshan reads the folder itself (tokenizer files for
the vocabulary extension, config.json, sha256 of the weights, the base model's card) and not only through
`from_pretrained`. Only what a causal LM needs is fetched: config, tokenizer, chat template, code, card and the
safetensors weights (pytorch_model*.bin only when the repository has no safetensors); never `original/`
checkpoints, GGUF or ONNX files. A tokenizer alone fetches no weights.

Offline (HF_HUB_OFFLINE=1: the test suite and `make demo` set it), a cached id still resolves; an id that is not
cached is one line naming it and the `hf download` command that fetches it. Nothing here sets HF_HUB_OFFLINE: a
user's shell decides whether yunshan may download.
"""

from __future__ import annotations

import os
from pathlib import Path

# What a causal LM folder needs; fnmatch-style, matched against paths in the repository.
_COMMON = ["config.json", "generation_config.json", "*.py", "README.md", "tokenizer*", "special_tokens_map.json",
           "added_tokens.json", "vocab.json", "vocab.txt", "merges.txt", "*.model", "*.tiktoken", "chat_template*",
           "additional_chat_templates/*", "preprocessor_config.json"]
_SAFETENSORS = ["*.safetensors", "model.safetensors.index.json"]
_BIN = ["pytorch_model*.bin", "pytorch_model.bin.index.json"]
# Never needed, sometimes huge (Meta's original/consolidated checkpoints ship beside the HF weights).
_IGNORE = ["original/*", "*.gguf", "*.onnx", "*.onnx_data", "*.h5", "*.msgpack", "*.ot", "*.pth", "*.ckpt"]


def is_hub_id(ref: str) -> bool:
    """Whether `ref` is spelled like a Hub model id (NAME or ORG/NAME), whatever the Hub holds."""
    from huggingface_hub.utils import HFValidationError, validate_repo_id

    if not ref or ref.startswith((".", "/", "~")) or ref.count("/") > 1:
        return False
    try:
        validate_repo_id(ref)
    except HFValidationError:
        return False
    return True


def offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def download_command(ref: str, revision: str | None) -> str:
    return f"hf download {ref}" + (f" --revision {revision}" if revision else "")


def resolve_pretrained(ref: str | os.PathLike, revision: str | None = None, *, what: str = "model",
                       field: str = "model.name_or_path") -> str:
    """The local folder `ref` names: `ref` itself when it exists on disk, else the HF cache snapshot of the Hub id
    `ref` at `revision` (default: the repository's default branch), downloaded when the Hub may be reached.

    Args:
        ref: a folder (or file) on disk, or a Hub id ORG/NAME.
        revision: branch, tag or commit of a Hub id; an error with a local folder (it has no revisions).
        what: "model" (weights, config and tokenizer) or "tokenizer" (no weights).
        field: the recipe field or flag that named `ref`, for the messages.
    Raises:
        FileNotFoundError / ValueError with one line naming `field`, the id and what to do.
    """
    ref = os.fspath(ref)
    if os.path.exists(ref):
        if revision:
            raise ValueError(f"{field}: {ref} is a local folder; a revision ({revision!r}) applies only to a Hub id")
        return ref
    if not is_hub_id(ref):
        raise FileNotFoundError(f"{field}: {ref}: no such folder (and not a Hub id ORG/NAME)")
    folder = _snapshot(ref, revision, what, field, _SAFETENSORS if what == "model" else [])
    if what == "model" and not _has_weights(folder):
        # An older repository with PyTorch pickles only.
        folder = _snapshot(ref, revision, what, field, _BIN)
    return folder


def _has_weights(folder: str) -> bool:
    path = Path(folder)
    return any(path.glob("*.safetensors")) or any(path.glob("pytorch_model*.bin"))


def _snapshot(ref: str, revision: str | None, what: str, field: str, weights: list[str]) -> str:
    from huggingface_hub import constants, snapshot_download
    from huggingface_hub.errors import (
        GatedRepoError, HfHubHTTPError, IncompleteSnapshotError, LocalEntryNotFoundError, RepositoryNotFoundError,
        RevisionNotFoundError)

    at = f" at revision {revision}" if revision else ""
    fetch = download_command(ref, revision)
    try:
        return snapshot_download(ref, revision=revision, allow_patterns=_COMMON + weights, ignore_patterns=_IGNORE,
                                 endpoint=constants.ENDPOINT)
    except IncompleteSnapshotError:
        raise FileNotFoundError(f"{field}: {ref}{at} is only partly in the Hugging Face cache and downloads are off "
                                f"(HF_HUB_OFFLINE=1): run `{fetch}` (or unset HF_HUB_OFFLINE)") from None
    except LocalEntryNotFoundError as err:
        if offline():
            raise FileNotFoundError(f"{field}: {ref}{at} is not a local folder and not in the Hugging Face cache, "
                                    f"and downloads are off (HF_HUB_OFFLINE=1): run `{fetch}` (or unset "
                                    "HF_HUB_OFFLINE)") from None
        raise FileNotFoundError(f"{field}: {ref}{at} is not a local folder, not in the Hugging Face cache, and the "
                                f"Hub ({constants.ENDPOINT}) could not be reached ({_cause(err)}); run `{fetch}` "
                                "where it can be, or give a local folder") from None
    except RevisionNotFoundError:
        raise FileNotFoundError(f"{field}: the Hub model {ref} has no revision {revision!r} (a branch, tag or commit "
                                "of the repository)") from None
    except GatedRepoError:
        raise FileNotFoundError(f"{field}: {ref} is gated on the Hub: accept its terms on its page, then log in "
                                "(hf auth login or HF_TOKEN)") from None
    except RepositoryNotFoundError:
        raise FileNotFoundError(f"{field}: {ref}: no such folder, and no {what} {ref} on the Hub (if it is "
                                "private, log in: hf auth login or HF_TOKEN)") from None
    except HfHubHTTPError as err:
        status = err.response.status_code if err.response is not None else "?"
        raise FileNotFoundError(f"{field}: downloading {ref}{at} failed with HTTP {status}; run `{fetch}` to "
                                "see the Hub's answer") from None


def _cause(err: BaseException) -> str:
    cause = err.__cause__ or err
    return f"{type(cause).__name__}: {str(cause).splitlines()[0] if str(cause) else ''}".rstrip(": ")
