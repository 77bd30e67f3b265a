"""yunshan.hub: a trained model out to the Hugging Face Hub: `yunshan export` and `yunshan push`.

    yunshan export runs/demo_tiny --out exports/yunshan-demo --license apache-2.0 --repo-id my-org/yunshan-demo
    yunshan push exports/yunshan-demo --repo-id my-org/yunshan-demo --private

    from yunshan.hub import export_model, push_folder
    export_model("runs/demo_tiny", "exports/yunshan-demo", license="apache-2.0")

`export.py` (the command and `export_model`: config, modeling code, tokenizer, checks, the folder swapped into
place), `weights.py` (safetensors re-sharded and converted one shard at a time), `provenance.py` (how the model was
made, read from the run's typed records), `card.py` (the model card rendered from that), `push.py` (`yunshan push`,
one commit through huggingface_hub). Turning a model reference into a local folder (the download side of the Hub)
is yunshan.loading.hub_download, which training, evaluation and the tokenizer tools use as well.

The names below are importable from `yunshan.hub` itself; each is loaded from its module on first use, so importing
one command's module does not load the others.
"""

from __future__ import annotations

import importlib

# name -> the module of this package that defines it
_NAMES = {
    "ExportArgs": "export", "EXPORT_MARKER": "export", "export_model": "export",
    "PushArgs": "push", "PushError": "push", "push_folder": "push",
    "CardOptions": "card", "ExportFacts": "card", "build_model_card": "card", "validate_card": "card",
    "Provenance": "provenance", "collect_provenance": "provenance", "hub_id_of": "provenance",
    "parse_size": "weights", "write_weights": "weights",
}
__all__ = sorted(_NAMES)


def __getattr__(name: str):
    if name not in _NAMES:
        raise AttributeError(f"module 'yunshan.hub' has no attribute {name!r}")
    return getattr(importlib.import_module(f"yunshan.hub.{_NAMES[name]}"), name)
