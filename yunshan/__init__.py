"""yunshan: turn a general LLM into a finance and legal specialist the way PanGu-π built YunShan.

Importing yunshan registers its architectures (PanGu-π) with transformers' Auto classes; nothing else happens
at import time.
"""

__version__ = "0.1.0"

from .models import PanguPiConfig, PanguPiForCausalLM, PanguPiModel  # noqa: E402  (registers the Auto classes)

__all__ = ["PanguPiConfig", "PanguPiForCausalLM", "PanguPiModel", "__version__"]
