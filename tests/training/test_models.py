"""Loading for training (yunshan.training.models): LoRA target modules are checked against the model."""

import pytest
import torch


def test_a_lora_target_that_matches_nothing_is_an_error_listing_the_linear_modules():
    from transformers import LlamaConfig, LlamaForCausalLM

    from yunshan.training.arguments import LoraArgs
    from yunshan.training.models import apply_lora

    def llama():
        torch.manual_seed(0)
        return LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                            num_attention_heads=4, num_key_value_heads=2))

    with pytest.raises(ValueError) as err:
        apply_lora(llama(), LoraArgs(enabled=True, target_modules=["q_proj", "v_prj"]), [], seed=0)
    message = str(err.value)
    assert "\n" not in message and "lora.target_modules: 'v_prj' matches no module of LlamaForCausalLM" in message
    assert "linear modules: down_proj, gate_proj, k_proj, lm_head, o_proj, q_proj, up_proj, v_proj" in message
    # Names PEFT matches (a module name or its last parts, as here "self_attn.q_proj") are accepted.
    model = apply_lora(llama(), LoraArgs(enabled=True, target_modules=["self_attn.q_proj", "v_proj"]), [], seed=0)
    adapted = {name.split(".")[-4] for name, _ in model.named_parameters() if "lora_A" in name}
    assert adapted == {"q_proj", "v_proj"}
