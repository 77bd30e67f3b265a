"""OTCE as transformers model classes (see docs/otce.md and modeling_otce.py)."""

from .configuration_otce import EXPERT_TYPES, OTCE_ACTIVATIONS, OTCE_PRESETS, OtceConfig, parse_layer_pattern
from .modeling_otce import OtceForCausalLM, OtceModel, OtcePreTrainedModel

# Default LoRA targets for OTCE (used when a LoraConfig names none): attention, the SSM's input and output
# projections, and every feed-forward projection, which includes each routed expert's gate/up/down_proj, the
# expansive shared FFN and the cohesive shared V (shared_up_proj). Routers, x_proj/dt_proj and the Expresser's
# dense/projection are left to `modules_to_save` or explicit targets.
OTCE_LORA_TARGETS = [
    "q_proj", "k_proj", "v_proj", "o_proj", "in_proj", "out_proj", "gate_proj", "up_proj", "down_proj",
    "shared_up_proj",
]

__all__ = [
    "EXPERT_TYPES",
    "OTCE_ACTIVATIONS",
    "OTCE_LORA_TARGETS",
    "OTCE_PRESETS",
    "OtceConfig",
    "OtceForCausalLM",
    "OtceModel",
    "OtcePreTrainedModel",
    "parse_layer_pattern",
]
