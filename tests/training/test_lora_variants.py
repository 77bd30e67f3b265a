"""LoRA's variants as PEFT implements them, in `lora:` (DoRA, rsLoRA, PiSSA / OLoRA initialisation, LoRA+ and
`target_modules: all-linear`): each trains the new rows of an extended vocabulary on a tied model, its saved adapter
on the unchanged base gives the merged model, it exports, and a run stopped at a checkpoint resumes to the weights of
an uninterrupted run; LoRA+ gives the B matrices their own learning rate; bad settings are one-line errors."""

import json
import shutil

import pytest
import torch
from safetensors.torch import load_file

from test_cpt import recipe_dict, setup, tied_llama  # noqa: F401 (module fixtures)
from test_sft import recipe as sft_recipe, task  # noqa: F401 (module fixture)
from yunshan.arguments.recipe import RecipeError, load_recipe
from yunshan.training.cpt import CptArgs, run_cpt

# variant -> (lora settings, how the new rows train)
VARIANTS = {
    "dora": ({"use_dora": True}, "indices"),
    "rslora+all-linear": ({"use_rslora": True, "target_modules": "all-linear"}, "rows"),
    "pissa": ({"init_lora_weights": "pissa"}, "rows"),
    "olora": ({"init_lora_weights": "olora"}, "indices"),
    "loraplus": ({"loraplus_lr_ratio": 16}, "indices"),
}


def _data(setup, tied_llama, out, lora: dict, mode: str, warmup: bool = False, **training) -> dict:
    base, tok_ext = tied_llama
    data = recipe_dict(setup, out, max_steps=4, save_steps=2, save_total_limit=10, **training)
    data["model"] = {"name_or_path": str(base)}
    data["tokenizer"] = {"path": str(tok_ext)}
    data["monitor"]["every_steps"] = 0
    # Without the warm-up the adapter's base is the grown model as resize_embeddings rebuilds it below.
    data["warmup"] = {"steps": 2, "fit_sequences": 4, "until_base_bpc": False} if warmup else {"enabled": False}
    data["lora"] = {"enabled": True, "r": 4, "alpha": 8, "dropout": 0.0, "new_token_training": mode, **lora}
    return data


class GroupRates:
    """A callback noting, at every step, the learning rate of the param groups holding lora_A and lora_B matrices."""

    def __new__(cls):
        from transformers import TrainerCallback

        class Callback(TrainerCallback):
            def __init__(self):
                self.rates = []

            def on_step_end(self, args, state, control, model=None, optimizer=None, **kwargs):
                names = {id(p): n for n, p in model.named_parameters()}
                found = {}
                for group in optimizer.param_groups:
                    for p in group["params"]:
                        kind = "A" if "lora_A" in names.get(id(p), "") else "B" if "lora_B" in names.get(
                            id(p), "") else None
                        if kind:
                            found.setdefault(kind, set()).add(group["lr"])
                self.rates.append(found)

        return Callback()


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_a_variant_trains_the_new_rows_of_a_tied_model_and_its_adapter_rebuilds_the_merged_model(
        setup, tied_llama, tmp_path, variant):
    from peft import PeftModel
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from yunshan.hub.export import export_model
    from yunshan.tokenizer import resize_embeddings

    lora, mode = VARIANTS[variant]
    base, tok_ext = tied_llama
    run = tmp_path / "run"
    rates = GroupRates()
    run_cpt(load_recipe(CptArgs, data=_data(setup, tied_llama, run, lora, mode)), callbacks=[rates])
    config = json.loads((run / "adapter/adapter_config.json").read_text())
    adapter = load_file(run / "adapter/adapter_model.safetensors")
    if variant == "dora":
        assert config["use_dora"] and any("lora_magnitude_vector" in k for k in adapter)
    if variant.startswith("rslora"):
        adapted = {name.rsplit(".", 1)[-1] for name in config["target_modules"]}
        assert config["use_rslora"] and {"q_proj", "o_proj", "gate_proj", "down_proj"} <= adapted
    if variant in ("pissa", "olora"):
        # Converted against the initial adapter: a plain LoRA adapter of rank 2r for the unchanged base.
        assert config["init_lora_weights"] is True and config["r"] == 8 and config["lora_alpha"] == 16
        assert (run / "checkpoints/initial_adapter/adapter_model.safetensors").is_file()
    if variant == "loraplus":
        assert all(r["B"] == {16 * a for a in r["A"]} and len(r["A"]) == 1 for r in rates.rates if r)
        assert any(r["A"] != {0.0} for r in rates.rates)
    else:
        assert all(r["A"] == r["B"] for r in rates.rates if r)
    merged = AutoModelForCausalLM.from_pretrained(run).eval()
    assert merged.lm_head.weight is merged.model.embed_tokens.weight  # still one matrix
    fresh = AutoModelForCausalLM.from_pretrained(base)
    resize_embeddings(fresh, str(base), str(tok_ext))
    n_base = len(AutoTokenizer.from_pretrained(base))
    grown = fresh.get_input_embeddings().weight.detach().clone()
    assert not torch.equal(merged.get_input_embeddings().weight[n_base:], grown[n_base:])  # the new rows trained
    # The adapter as saved, on the grown base as it was before training, is the merged model.
    rebuilt = PeftModel.from_pretrained(fresh, run / "adapter").merge_and_unload().eval()
    n_new = len(AutoTokenizer.from_pretrained(tok_ext))
    ids = torch.tensor([[1, 5, 9, n_base, n_new - 1, 7, n_base + 1]])
    with torch.no_grad():
        torch.testing.assert_close(rebuilt(ids).logits, merged(ids).logits, atol=1e-4, rtol=1e-4)
    out = tmp_path / "export"
    export_model(run, out)
    exported = load_file(out / "model.safetensors")
    assert "lm_head.weight" not in exported and json.loads((out / "config.json").read_text())["tie_word_embeddings"]
    card = (out / "README.md").read_text()
    assert "| LoRA | r=" in card and ("DoRA" in card) == (variant == "dora")


@pytest.mark.parametrize("lora, mode, warmup", [
    ({"use_dora": True, "use_rslora": True, "init_lora_weights": "pissa_niter_2", "loraplus_lr_ratio": 4},
     "indices", True),
    ({"init_lora_weights": "olora", "target_modules": "all-linear"}, "rows", False),
], ids=["dora+rslora+pissa+loraplus+warmup", "olora"])
def test_a_variant_resumed_from_a_checkpoint_equals_an_uninterrupted_run(setup, tied_llama, tmp_path, lora, mode,
                                                                         warmup):
    runs = {name: load_recipe(CptArgs, data=_data(setup, tied_llama, tmp_path / name, lora, mode, warmup=warmup))
            for name in ("a", "b")}
    run_cpt(runs["a"])
    run_cpt(runs["b"])
    b = tmp_path / "b"
    last = max(int(p.name.split("-")[1]) for p in (b / "checkpoints").glob("checkpoint-*"))
    for step in range(4, last + 1, 2):  # a kill right after checkpoint 2: later checkpoints and the outputs are gone
        shutil.rmtree(b / f"checkpoints/checkpoint-{step}")
    for name in ("model.safetensors", "data_report.json"):
        (b / name).unlink()
    shutil.rmtree(b / "adapter")
    run_cpt(runs["b"])
    for name in ("model.safetensors", "adapter/adapter_model.safetensors"):
        wa, wb = load_file(tmp_path / "a" / name), load_file(b / name)
        assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa), name


@pytest.mark.parametrize("lora, message", [
    ({"init_lora_weights": "svd"}, "lora.init_lora_weights 'svd' is not one of default, gaussian, pissa"),
    ({"init_lora_weights": "pissa_niter_x"}, "lora.init_lora_weights 'pissa_niter_x'"),
    ({"target_modules": "q_proj"}, "lora.target_modules 'q_proj': give a list of module names ([q_proj]) or all-linear"),
    ({"target_modules": ["all-linear", "q_proj"]}, "all-linear already takes every linear layer"),
    ({"loraplus_lr_ratio": 0.5}, "lora.loraplus_lr_ratio: must be >= 1, got 0.5"),
    ({"use_dora": "maybe"}, "lora.use_dora: expected true or false"),
])
def test_bad_variant_settings_are_one_line_errors(setup, tmp_path, lora, message):
    data = recipe_dict(setup, tmp_path / "run")
    data["lora"] = {"enabled": True, **lora}
    with pytest.raises(RecipeError) as err:
        load_recipe(CptArgs, data=data)
    assert message in str(err.value) and "\n" not in str(err.value)


def test_sft_with_variants_on_pangu_pi_saves_an_adapter_that_rebuilds_the_merged_model(task, tmp_path):
    """The same variants in `yunshan sft`, on a PanGu-π (its own linear layers adapted through all-linear)."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    from yunshan.training.models import load_model
    from yunshan.training.sft import run_sft

    root, _ = task
    r = sft_recipe(root, tmp_path / "lora")
    r.lora.enabled, r.lora.r, r.lora.alpha, r.lora.dropout = True, 4, 8, 0.0
    r.lora.use_dora, r.lora.init_lora_weights, r.lora.loraplus_lr_ratio = True, "pissa_niter_2", 8.0
    r.training.max_steps = 6
    run_sft(r)
    config = json.loads((tmp_path / "lora/adapter/adapter_config.json").read_text())
    assert config["use_dora"] and config["r"] == 8
    ids = torch.randint(3, 200, (2, 12))
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "lora").eval()
    base = load_model(r.model, vocab_size=merged.config.vocab_size)  # the same initial weights (init_seed)
    rebuilt = PeftModel.from_pretrained(base, tmp_path / "lora/adapter").eval()
    with torch.no_grad():
        torch.testing.assert_close(rebuilt(input_ids=ids).logits, merged(input_ids=ids).logits, atol=1e-4, rtol=1e-4)
