"""`yunshan model merge`: linear, chat vector, TIES and DARE across an extended vocabulary, against tensors computed
here by hand; the new rows (only on the continually pretrained side) come from that model unchanged, a tied model
stays tied, the output has that model's tokenizer, and bad inputs are one-line errors."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file

from fixtures import three_source_corpora, train_tokenizer
from yunshan.merging.merge import MergeArgs, merge_models

EMBED, HEAD = "model.embed_tokens.weight", "lm_head.weight"


def _noisy(folder_in, folder_out, scale: float, seed: int, tokenizer_from=None):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    model = AutoModelForCausalLM.from_pretrained(folder_in)
    if tokenizer_from is not None:
        from yunshan.tokenizer import resize_embeddings

        resize_embeddings(model, str(folder_in), str(tokenizer_from))
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(torch.randn(p.shape, generator=gen) * scale)
    model.save_pretrained(folder_out)
    AutoTokenizer.from_pretrained(tokenizer_from or folder_in).save_pretrained(folder_out)
    return folder_out


@pytest.fixture(scope="module", params=[True, False], ids=["tied", "untied"])
def family(request, tmp_path_factory):
    """BASE, INSTRUCT (BASE + noise) and CPT (INSTRUCT with an extended vocabulary + noise), tied or untied."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from yunshan.tokenizer import ExtendArgs, extend_tokenizer

    root = tmp_path_factory.mktemp("merge")
    files = three_source_corpora(root / "corpora")
    tokenizer = train_tokenizer(root / "tok", vocab_size=300)
    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2,
                                 tie_word_embeddings=request.param)).save_pretrained(root / "base")
    tokenizer.save_pretrained(root / "base")
    instruct = _noisy(root / "base", root / "instruct", 0.02, 1)
    extend_tokenizer(ExtendArgs(base=str(instruct), corpus=[str(files["long"]), str(files["mid"])], new_tokens=30,
                                out=str(root / "tok_ext")), log=lambda *_: None)
    cpt = _noisy(instruct, root / "cpt", 0.02, 2, tokenizer_from=root / "tok_ext")
    return {"base": root / "base", "instruct": instruct, "cpt": cpt, "tied": request.param, "n": len(tokenizer),
            "corpora": [files["long"], files["mid"]]}


def _weights(folder) -> dict[str, torch.Tensor]:
    return load_file(folder / "model.safetensors")


def _full(tensors: dict, cpt: dict, tied: bool) -> dict:
    """A model's tensors with the rows it lacks filled from CPT (the vocabulary rule), the head named when tied."""
    out = dict(tensors)
    for key in (EMBED, HEAD):
        if key not in cpt:
            continue
        if key in out and out[key].shape[0] < cpt[key].shape[0]:
            out[key] = torch.cat([out[key], cpt[key][out[key].shape[0]:]])
    return out


def _merge(family, tmp_path, method, **kw):
    out = tmp_path / method
    report = merge_models(MergeArgs(model=str(family["cpt"]), instruct=str(family["instruct"]), out=str(out),
                                    method=method, **kw), log=lambda *_: None)
    return out, report


def _check_vocabulary_and_tying(family, out, cpt, merged, report):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    n = family["n"]
    rows = cpt[EMBED].shape[0]
    assert rows > n + 5, "the fixture must add new tokens"
    assert merged[EMBED].shape == cpt[EMBED].shape
    # The rule: the new rows (input and output) are CPT's, bit for bit.
    assert torch.equal(merged[EMBED][n:], cpt[EMBED][n:])
    if family["tied"]:
        assert HEAD not in merged
        model = AutoModelForCausalLM.from_pretrained(out)
        assert model.config.tie_word_embeddings
        assert model.get_output_embeddings().weight.data_ptr() == model.get_input_embeddings().weight.data_ptr()
    else:
        assert torch.equal(merged[HEAD][n:], cpt[HEAD][n:])
    assert AutoTokenizer.from_pretrained(out).get_vocab() == AutoTokenizer.from_pretrained(family["cpt"]).get_vocab()
    assert report["tokens"] == {"output": rows, "shared": n, "only_in_model": rows - n,
                                "left_out": {"INSTRUCT": 0, **({"--base": 0} if "--base" in report["inputs"] else {})}}
    assert json.loads((out / "config.json").read_text())["vocab_size"] == rows
    assert report["tied"] is family["tied"]


def test_linear_is_the_weighted_mean_and_the_new_rows_are_the_cpt_models(family, tmp_path):
    out, report = _merge(family, tmp_path, "linear", weight=0.25)
    cpt, inst, merged = _weights(family["cpt"]), _weights(family["instruct"]), _weights(out)
    full = _full(inst, cpt, family["tied"])
    for key, value in merged.items():
        assert torch.allclose(value, 0.75 * cpt[key] + 0.25 * full[key], atol=1e-6), key
    _check_vocabulary_and_tying(family, out, cpt, merged, report)


@pytest.mark.parametrize("weight", [0.5, 1.0])
def test_the_chat_vector_is_added_to_the_cpt_model(family, tmp_path, weight):
    out, report = _merge(family, tmp_path, "chat-vector", weight=weight, base=str(family["base"]))
    cpt, inst, base, merged = (_weights(family["cpt"]), _weights(family["instruct"]), _weights(family["base"]),
                               _weights(out))
    # By hand: CPT + w (INSTRUCT - BASE) on the shared rows; the new rows are CPT's (no chat vector exists there).
    for key, value in merged.items():
        expected = cpt[key].clone()
        rows = inst[key].shape[0] if key in (EMBED, HEAD) else None
        expected[:rows] += weight * (inst[key] - base[key])
        assert torch.allclose(value, expected, atol=1e-6), key
    _check_vocabulary_and_tying(family, out, cpt, merged, report)
    assert report["formula"] == "OUT = MODEL + w (INSTRUCT - BASE)"


def _trim(delta: torch.Tensor, density: float) -> torch.Tensor:
    """TIES's trim by hand: the largest `density` share of the entries by magnitude kept, the rest zeroed."""
    k = max(1, int(density * delta.numel()))
    flat = delta.flatten()
    keep = torch.zeros_like(flat)
    keep[flat.abs().argsort(descending=True)[:k]] = 1
    return (flat * keep).reshape(delta.shape)


def test_ties_with_a_base_elects_signs_and_averages_the_agreeing_vectors(family, tmp_path):
    w, density = 0.4, 0.3
    out, report = _merge(family, tmp_path, "ties", weight=w, density=density, base=str(family["base"]))
    cpt = _weights(family["cpt"])
    inst, base = _full(_weights(family["instruct"]), cpt, family["tied"]), _full(_weights(family["base"]), cpt,
                                                                               family["tied"])
    merged = _weights(out)
    for key, value in merged.items():
        deltas = torch.stack([(1 - w) * _trim(cpt[key] - base[key], density),
                              w * _trim(inst[key] - base[key], density)])
        weights = torch.tensor([1 - w, w]).reshape(2, *[1] * (deltas.dim() - 1))
        sign = torch.where(deltas.sum(0) >= 0, 1.0, -1.0)
        agree = deltas.sign() == sign
        divisor = (weights * agree).sum(0)
        divisor[divisor == 0] = 1
        expected = base[key] + (deltas * agree).sum(0) / divisor
        assert torch.allclose(value, expected, atol=1e-6), key
    _check_vocabulary_and_tying(family, out, cpt, merged, report)


def test_ties_without_a_base_sparsifies_the_cpt_change_on_the_instruct_model(family, tmp_path):
    w, density = 0.5, 0.2
    out, report = _merge(family, tmp_path, "ties", weight=w, density=density)
    cpt, merged = _weights(family["cpt"]), _weights(out)
    inst = _full(_weights(family["instruct"]), cpt, family["tied"])
    for key, value in merged.items():
        assert torch.allclose(value, inst[key] + (1 - w) * _trim(cpt[key] - inst[key], density), atol=1e-6), key
    _check_vocabulary_and_tying(family, out, cpt, merged, report)
    assert report["formula"] == "OUT = INSTRUCT + (1 - w) TIES-trim(density; MODEL - INSTRUCT)"


def test_dare_drops_at_random_rescales_to_the_l1_norm_and_follows_its_seed(family, tmp_path):
    w, density = 0.5, 0.3
    out, report = _merge(family, tmp_path, "dare-linear", weight=w, density=density, seed=3)
    cpt, merged = _weights(family["cpt"]), _weights(out)
    inst = _full(_weights(family["instruct"]), cpt, family["tied"])
    kept = total = 0
    for key, value in merged.items():
        tau = cpt[key] - inst[key]
        change = value - inst[key]
        if tau.abs().sum() == 0:  # the new rows alone, or nothing moved
            continue
        # Each entry either dropped or kept and scaled by one factor per tensor; the L1 norm kept (mergekit's DARE).
        on = change != 0
        assert torch.all(tau[on] != 0), key
        scale = (change[on] * tau[on]).sum() / (tau[on] * tau[on]).sum()
        assert torch.allclose(change, scale * tau * on, atol=1e-6), key
        assert torch.isclose(change.abs().sum(), (1 - w) * tau.abs().sum(), rtol=1e-4), key
        kept += int(on.sum())
        total += int((tau != 0).sum())
    assert abs(kept / total - density) < 0.02
    _check_vocabulary_and_tying(family, out, cpt, merged, report)
    again, _ = _merge(family, tmp_path / "again", "dare-linear", weight=w, density=density, seed=3)
    other, _ = _merge(family, tmp_path / "other", "dare-linear", weight=w, density=density, seed=4)
    assert all(torch.equal(v, _weights(again)[k]) for k, v in merged.items())
    assert not all(torch.equal(v, _weights(other)[k]) for k, v in merged.items())


def test_the_command_line_merges_and_the_result_loads_and_runs(family, tmp_path, capsys):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from yunshan.cli import main

    out = tmp_path / "cli"
    assert main(["model", "merge", str(family["cpt"]), str(family["instruct"]), str(out), "--method", "linear",
                 "--weight", "0.5"]) == 0
    assert "only in MODEL (taken from it)" in capsys.readouterr().out
    report = json.loads((out / "yunshan_merge.json").read_text())
    assert set(report["files"]) == {p.name for p in out.iterdir()}
    model, tok = AutoModelForCausalLM.from_pretrained(out), AutoTokenizer.from_pretrained(out)
    ids = tok("court contract market", return_tensors="pt")["input_ids"]
    assert torch.isfinite(model(ids).logits).all()
    # An earlier merge is replaced only with --overwrite.
    assert main(["model", "merge", str(family["cpt"]), str(family["instruct"]), str(out)]) == 1
    assert "exists and is not empty" in capsys.readouterr().err
    assert main(["model", "merge", str(family["cpt"]), str(family["instruct"]), str(out), "--overwrite",
                 "--weight", "1.0"]) == 0


def test_a_merged_folder_has_the_users_umask(family, tmp_path):
    """safetensors writes its file 0600: the merged model.safetensors gets the mode every other file gets."""
    from fixtures import file_modes, umask

    from yunshan.cli import main

    with umask(0o027):
        assert main(["model", "merge", str(family["cpt"]), str(family["instruct"]), str(tmp_path / "out")]) == 0
    modes = file_modes(tmp_path / "out")
    assert "model.safetensors" in modes and set(modes.values()) == {0o640}, modes


def test_the_refit_trains_only_the_new_rows_and_fits_them_to_the_merged_body(family, tmp_path):
    """--refit-new-rows N: after the merge, N steps train the rows of the tokens only MODEL has (input and output)
    with every other weight frozen: every other tensor and every shared row is the plain merge's bit for bit, the
    new rows moved, the loss of the refit's own batches fell, and a tied model stays tied."""
    import shutil

    import yaml
    from transformers import AutoModelForCausalLM

    refit = {"refit_new_rows": 4, "refit_data": [str(p) for p in family["corpora"]], "refit_seq_len": 32,
             "refit_batch_size": 2, "refit_learning_rate": 1e-2}
    plain, _ = _merge(family, tmp_path / "plain", "linear", weight=0.5)
    out, report = _merge(family, tmp_path / "refit", "linear", weight=0.5, **refit)
    n, a, b = family["n"], _weights(plain), _weights(out)
    # The batches the refit trained on (the same stream, read again).
    from yunshan.merging.merge import _refit_batches

    first, rest, _ = _refit_batches(MergeArgs(model=str(family["cpt"]), instruct=str(family["instruct"]),
                                              out=str(tmp_path / "unused"), **refit), family["cpt"], list(range(n, 10**6)))
    batches = [first] + [next(rest) for _ in range(3)]
    seen = torch.zeros(b[EMBED].shape[0], dtype=torch.bool)
    seen[torch.cat(batches)[:, :-1].flatten()] = True  # the last position has no target: no gradient
    assert a.keys() == b.keys()
    for key in a:
        if key in (EMBED, HEAD):
            assert torch.equal(a[key][:n], b[key][:n]), key
            moved = (a[key][n:] != b[key][n:]).any(1)
            # Every output row has a gradient (the softmax); an untied input row only where its token occurred.
            expected = seen[n:] if key == EMBED and not family["tied"] else torch.ones_like(moved)
            assert torch.equal(moved, expected), key
        else:
            assert torch.equal(a[key], b[key]), key
    _check_vocabulary_and_tying(family, out, _weights(family["cpt"]), a, report)
    assert (out / "config.json").read_text() == (plain / "config.json").read_text()
    assert {p.name for p in out.iterdir()} == {p.name for p in plain.iterdir()}
    assert set(report["files"]) == {p.name for p in out.iterdir()}
    assert report["refit_new_rows"]["steps"] == 4 and report["refit_new_rows"]["rows"] == b[EMBED].shape[0] - n
    # The refit's batches, scored by the plain merge and by the refitted one.
    with torch.no_grad():
        losses = [sum(AutoModelForCausalLM.from_pretrained(folder)(input_ids=x, labels=x).loss.item()
                      for x in batches) for folder in (plain, out)]
    assert losses[1] < losses[0] - 0.01, losses

    # Without --refit-data the corpora of MODEL's recipe.yaml (the cpt stage's resolved recipe) are used.
    cpt = tmp_path / "cpt_with_recipe"
    shutil.copytree(family["cpt"], cpt)
    (cpt / "recipe.yaml").write_text(yaml.safe_dump({"data": {"seq_len": 2048, "sources": [
        {"name": "long", "path": refit["refit_data"][0]}, {"name": "mid", "path": refit["refit_data"][1]}]}}))
    again = tmp_path / "from_recipe"
    merge_models(MergeArgs(model=str(cpt), instruct=str(family["instruct"]), out=str(again), method="linear",
                           weight=0.5, **{**refit, "refit_data": []}), log=lambda *_: None)
    assert all(torch.equal(v, _weights(again)[k]) for k, v in b.items())
    assert json.loads((again / "yunshan_merge.json").read_text())["refit_new_rows"]["data"] == str(cpt / "recipe.yaml")


def _error(capsys, argv) -> str:
    from yunshan.cli import main

    assert main(["model", "merge", *argv]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_bad_inputs_are_one_line_errors(family, tmp_path, capsys):
    from transformers import LlamaConfig, LlamaForCausalLM

    cpt, inst, out = str(family["cpt"]), str(family["instruct"]), str(tmp_path / "out")
    assert "INSTRUCT: " in _error(capsys, [cpt, str(tmp_path / "missing"), out]) and "does not exist" in \
        _error(capsys, [cpt, str(tmp_path / "missing"), out])
    (tmp_path / "empty").mkdir()
    assert "has no config.json" in _error(capsys, [str(tmp_path / "empty"), inst, out])
    wide = tmp_path / "wide"
    LlamaForCausalLM(LlamaConfig(vocab_size=family["n"], hidden_size=64, intermediate_size=64, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2,
                                 tie_word_embeddings=family["tied"])).save_pretrained(wide)
    capsys.readouterr()  # save_pretrained's progress bar
    err = _error(capsys, [cpt, str(wide), out])
    assert "mismatched architectures: hidden_size is 32" in err and "64" in err
    other = tmp_path / "other_tying"
    LlamaForCausalLM(LlamaConfig(vocab_size=family["n"], hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                 num_attention_heads=4, num_key_value_heads=2,
                                 tie_word_embeddings=not family["tied"])).save_pretrained(other)
    capsys.readouterr()
    assert "tie_word_embeddings" in _error(capsys, [cpt, str(other), out])
    assert "needs --base" in _error(capsys, [cpt, inst, out, "--method", "chat-vector"])
    assert "must be within 0..1" in _error(capsys, [cpt, inst, out, "--weight", "1.5"])
    assert "--density: must be in (0, 1], got 0.0" in _error(capsys, [cpt, inst, out, "--method", "ties",
                                                                      "--density", "0"])
    assert "is the MODEL folder" in _error(capsys, [cpt, inst, cpt])
    assert "--refit-new-rows needs --refit-data: MODEL" in _error(capsys, [cpt, inst, out, "--refit-new-rows", "2"])
    missing = str(tmp_path / "missing.jsonl")
    assert "missing.jsonl" in _error(capsys, [cpt, inst, out, "--refit-new-rows", "2", "--refit-data", missing])
    assert "there are no new rows" in _error(capsys, [inst, str(family["base"]), out, "--refit-new-rows", "2",
                                                      "--refit-data", str(family["corpora"][0])])
    assert "--refit-new-rows: must be >= 0" in _error(capsys, [cpt, inst, out, "--refit-new-rows", "-1"])
    assert not (tmp_path / "out").exists()


def test_a_pangu_pi_model_merges_and_keeps_its_architecture(tmp_path):
    from transformers import AutoModelForCausalLM

    from yunshan.models import register_architectures
    from yunshan.models.pangu_pi import PanguPiConfig, PanguPiForCausalLM

    register_architectures()
    tokenizer = train_tokenizer(tmp_path / "tok")
    for name, seed in (("a", 0), ("b", 1)):
        torch.manual_seed(seed)
        PanguPiForCausalLM(PanguPiConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                         aug_reduction=4)).save_pretrained(tmp_path / name)
        tokenizer.save_pretrained(tmp_path / name)
    merge_models(MergeArgs(model=str(tmp_path / "a"), instruct=str(tmp_path / "b"), out=str(tmp_path / "out"),
                           weight=0.5), log=lambda *_: None)
    a, b, merged = (_weights(tmp_path / n) for n in ("a", "b", "out"))
    assert set(merged) == set(a)
    for key, value in merged.items():
        assert torch.allclose(value, (a[key] + b[key]) / 2, atol=1e-6), key
    assert type(AutoModelForCausalLM.from_pretrained(tmp_path / "out")).__name__ == "PanguPiForCausalLM"
