"""yunshan: turn a general LLM into a finance and legal specialist the way PanGu-π built YunShan.

Importing yunshan registers its architectures (PanGu-π, OTCE) with transformers' Auto classes; nothing else happens
at import time.
"""

__version__ = "0.1.0"

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
