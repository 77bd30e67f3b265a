"""yunshan: turn a general LLM into a finance and legal specialist the way PanGu-π built YunShan.

Importing yunshan registers its architectures (PanGu-π, OTCE) with transformers' Auto classes; nothing else happens
at import time.
"""

__version__ = "0.1.0"

import os as _os

# OpenMP threads that spin while waiting make every small op stall whenever another process holds a core (measured
# here: a tiny model's training step 0.4 s with passive waiting, 5 s with spinning, on 2 shared cores). Must be set
# before torch loads libgomp; an explicit value in the environment wins.
_os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from .models import (  # noqa: E402  (registers the Auto classes)
    OtceConfig,
    OtceForCausalLM,
    OtceModel,
    PanguPiConfig,
    PanguPiForCausalLM,
    PanguPiModel,
)

__all__ = [
    "OtceConfig", "OtceForCausalLM", "OtceModel", "PanguPiConfig", "PanguPiForCausalLM", "PanguPiModel", "__version__",
]
