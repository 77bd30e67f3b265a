"""Model architectures yunshan ships as transformers classes (PanGu-π, OTCE), and their registration with the Auto
classes."""

from transformers import AutoConfig, AutoModel, AutoModelForCausalLM

from .otce import OTCE_LORA_TARGETS, OtceConfig, OtceForCausalLM, OtceModel
from .pangu_pi import PANGU_PI_LORA_TARGETS, PanguPiConfig, PanguPiForCausalLM, PanguPiModel


def register(model_type, config_cls, base_cls, lm_cls, lora_targets) -> None:
    """Register one architecture with transformers' Auto classes and PEFT's default LoRA targets (idempotent).

    `register_for_auto_class` makes `save_pretrained` write `auto_map` and copy the modeling code next to the
    weights, so the folder loads with `trust_remote_code=True` where yunshan is not installed.
    """
    try:
        AutoConfig.register(model_type, config_cls)
    except ValueError:  # already registered
        pass
    for auto, cls in ((AutoModel, base_cls), (AutoModelForCausalLM, lm_cls)):
        try:
            auto.register(config_cls, cls)
        except ValueError:
            pass
    config_cls.register_for_auto_class("AutoConfig")
    base_cls.register_for_auto_class("AutoModel")
    lm_cls.register_for_auto_class("AutoModelForCausalLM")
    from peft.utils.constants import TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING as lora_defaults

    lora_defaults.setdefault(model_type, list(lora_targets))


register("pangu_pi", PanguPiConfig, PanguPiModel, PanguPiForCausalLM, PANGU_PI_LORA_TARGETS)
register("otce", OtceConfig, OtceModel, OtceForCausalLM, OTCE_LORA_TARGETS)

__all__ = [
    "OtceConfig", "OtceForCausalLM", "OtceModel", "PanguPiConfig", "PanguPiForCausalLM", "PanguPiModel", "register",
]
