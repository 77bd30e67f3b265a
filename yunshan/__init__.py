"""yunshan: turn a general LLM into a finance and legal specialist the way PanGu-π built YunShan.

Importing yunshan registers its architectures (PanGu-π, OTCE) with transformers' Auto classes: at once when
transformers is already imported, else the moment it is (yunshan.models.register_on_transformers_import), so
`import yunshan` itself loads neither transformers nor torch and the `yunshan` command starts fast. The model
classes are imported on first use (`yunshan.PanguPiConfig`). Nothing else happens at import time.
"""

__version__ = "0.1.0"

import os as _os

# OpenMP threads that spin while waiting make every small op stall whenever another process holds a core (measured
# here: a tiny model's training step 0.4 s with passive waiting, 5 s with spinning, on 2 shared cores). Must be set
# before torch loads libgomp; an explicit value in the environment wins.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from .models import register_on_transformers_import as _register  # noqa: E402

_register()

_MODEL_CLASSES = ("OtceConfig", "OtceForCausalLM", "OtceModel", "PanguPiConfig", "PanguPiForCausalLM", "PanguPiModel")


def __getattr__(name: str):
    if name in _MODEL_CLASSES:
        from . import models

        return getattr(models, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [*_MODEL_CLASSES, "__version__"]
