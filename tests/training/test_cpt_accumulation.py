"""Gradient accumulation is the same update: per_device_batch_size 4 x 1 micro-step and 2 x 2 micro-steps train the
same tokens in the same order, so their losses and gradient norms agree to float summation order (a loss scaled by
the micro-steps twice or not at all would show in the gradient norm: Adam's step itself does not see a constant
scale), and their weights to what Adam makes of that order over 8 steps at lr 3e-3."""

import json

import pytest
import torch
from safetensors.torch import load_file

from test_cpt import recipe_dict, setup  # noqa: F401  (the module fixture)
from yunshan.arguments.recipe import load_recipe
from yunshan.training.cpt import CptArgs, run_cpt


def _logged(out, key):
    log = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    return [r[key] for r in log if r.get("event") == "train" and key in r]


@pytest.mark.parametrize("lora", [False, True])
def test_two_micro_steps_of_two_equal_one_step_of_four(setup, tmp_path, lora):  # noqa: F811
    runs = {}
    for name, split in (("one", {"per_device_batch_size": 4}),
                        ("two", {"per_device_batch_size": 2, "gradient_accumulation_steps": 2})):
        out = tmp_path / name
        data = recipe_dict(setup, out, max_steps=8, save_steps=8, **split)
        data["monitor"] = {"every_steps": 0}
        if lora:
            data["lora"] = {"enabled": True, "r": 4, "alpha": 8, "dropout": 0.0}
        run_cpt(load_recipe(CptArgs, data=data))
        runs[name] = out
    for key in ("loss", "grad_norm"):
        one, two = _logged(runs["one"], key), _logged(runs["two"], key)
        assert len(one) == len(two) > 0
        assert two == pytest.approx(one, rel=1e-3), key
    a, b = load_file(runs["one"] / "model.safetensors"), load_file(runs["two"] / "model.safetensors")
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(b[key], a[key], rtol=0, atol=2e-3, msg=key)
