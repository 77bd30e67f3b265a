"""PanGu-π as transformers model classes (see docs/pangu-pi.md and modeling_pangu_pi.py)."""

from .configuration_pangu_pi import PANGU_PI_PRESETS, SIAF_ACTIVATIONS, PanguPiConfig
from .modeling_pangu_pi import PanguPiForCausalLM, PanguPiModel, PanguPiPreTrainedModel

# LoRA targets for PanGu-π: every attention and MLP projection (the augmented shortcuts' fc1/fc2 and the SIAF
# parameters are left to `modules_to_save` when a user wants them trained).
PANGU_PI_LORA_TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]

__all__ = [
    "PANGU_PI_LORA_TARGETS",
    "PANGU_PI_PRESETS",
    "SIAF_ACTIVATIONS",
    "PanguPiConfig",
    "PanguPiForCausalLM",
    "PanguPiModel",
    "PanguPiPreTrainedModel",
]
