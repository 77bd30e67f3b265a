"""PanGu-π model classes: numbers against references (HF Llama, hand-built equivalents), not just shapes."""

import json
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM, DynamicCache, LlamaConfig, LlamaForCausalLM

import yunshan  # noqa: F401  (registers the Auto classes)
from yunshan.models.pangu_pi import PANGU_PI_PRESETS, PanguPiConfig, PanguPiForCausalLM, PanguPiModel
from yunshan.models.info import count_parameters_by_part
from yunshan.models.pangu_pi.convert import from_llama

VOCAB = 97


def tiny_config(**overrides) -> PanguPiConfig:
    fields = dict(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, aug_reduction=4, max_position_embeddings=128, pad_token_id=0,
    )
    fields.update(overrides)
    return PanguPiConfig(**fields)


def perturb_new_parts(model):
    """Give the PanGu-π parts non-trivial values so tests exercise them (fresh init is near-identity)."""
    with torch.no_grad():
        for layer in model.model.layers:
            layer.mlp.act_fn.weight.normal_(1.0, 0.3)
            layer.mlp.act_fn.bias.normal_(0.0, 0.3)
            if layer.mlp.neighbor_conv is not None:
                layer.mlp.neighbor_conv.weight.normal_(0.0, 0.5)
            if layer.aug_shortcut is not None:
                layer.aug_shortcut.fc2.weight.normal_(0.0, 0.2)
    return model


def build(**overrides):
    return perturb_new_parts(PanguPiForCausalLM(tiny_config(**overrides))).eval()


# ---------------------------------------------------------------- config validation


@pytest.mark.parametrize(
    "overrides, field",
    [
        (dict(siaf_terms=0), "siaf_terms"),
        (dict(hidden_size=30), "hidden_size"),
        (dict(num_key_value_heads=3), "num_key_value_heads"),
        (dict(aug_reduction=64), "aug_reduction"),
        (dict(aug_reduction=0), "aug_reduction"),
        (dict(siaf_activations=["silu", "swish_typo"]), "siaf_activations"),
        (dict(siaf_terms=3, siaf_activations=["silu", "gelu"]), "siaf_activations"),
        (dict(siaf_neighbor_kernel=2), "siaf_neighbor_kernel"),
        (dict(siaf_neighbor_kernel=0), "siaf_neighbor_kernel"),
        (dict(aug_shortcuts=-1), "aug_shortcuts"),
        (dict(hidden_act="swiglu"), "hidden_act"),
        (dict(num_hidden_layers=0), "num_hidden_layers"),
    ],
)
def test_every_invalid_field_raises_naming_it(overrides, field):
    with pytest.raises(ValueError) as err:
        tiny_config(**overrides)
    message = str(err.value)
    assert f"PanguPiConfig.{field}=" in message
    assert "must" in message  # says what is valid


def test_presets_match_paper_table_1():
    big = PanguPiConfig.from_preset("pangu-pi-7b")
    small = PanguPiConfig.from_preset("pangu-pi-1b")
    assert (big.hidden_size, big.num_attention_heads, big.num_hidden_layers) == (4096, 32, 29)
    assert (small.hidden_size, small.num_attention_heads, small.num_hidden_layers) == (2048, 16, 12)
    assert big.vocab_size == small.vocab_size == 100883
    assert (big.siaf_terms, big.aug_shortcuts, big.aug_reduction) == (2, 1, 32)
    with pytest.raises(ValueError, match="valid presets"):
        PanguPiConfig.from_preset("pangu-pi-3b")


def test_parameter_counts_by_part_match_formulas():
    c = PanguPiConfig.from_preset("pangu-pi-7b")
    parts = count_parameters_by_part(c)
    d, i, L, V = c.hidden_size, c.intermediate_size, c.num_hidden_layers, c.vocab_size
    assert parts["embeddings"] == parts["lm_head"] == V * d
    assert parts["attention"] == L * 4 * d * d  # 32 heads, no GQA in the preset
    assert parts["ffn"] == L * 3 * d * i
    assert parts["siaf"] == L * 2 * 2 * i  # n = 2 terms, a and b per channel
    assert parts["shortcuts"] == L * 2 * d * (d // 32)
    assert parts["norms"] == (2 * L + 1) * d
    assert 6.5e9 < parts["total"] < 7.0e9
    tied = count_parameters_by_part(tiny_config(tie_word_embeddings=True))
    assert tied["lm_head"] == 0


# ---------------------------------------------------------------- forward semantics


@pytest.mark.parametrize("kernel", [1, 3])
def test_causality(kernel):
    model = build(siaf_neighbor_kernel=kernel)
    ids = torch.randint(1, VOCAB, (2, 14))
    changed = ids.clone()
    changed[:, 9] = (changed[:, 9] % (VOCAB - 1)) + 1
    a, b = model(ids).logits, model(changed).logits
    assert torch.equal(a[:, :9], b[:, :9])
    assert (a[:, 9:] - b[:, 9:]).abs().max() > 1e-4


@pytest.mark.parametrize("attn", ["eager", "sdpa"])
@pytest.mark.parametrize("kernel", [1, 3, 5])
def test_cached_decoding_equals_full_forward(attn, kernel):
    model = build(siaf_neighbor_kernel=kernel)
    model.config._attn_implementation = attn
    ids = torch.randint(1, VOCAB, (2, 13))
    full = model(ids).logits
    out = model(ids[:, :4], past_key_values=DynamicCache(config=model.config), use_cache=True)
    steps = [out.logits]
    for t in range(4, 13):
        out = model(ids[:, t : t + 1], past_key_values=out.past_key_values, use_cache=True)
        steps.append(out.logits)
    torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("kernel", [1, 3])
def test_left_padded_batch_equals_unpadded_sequences(kernel):
    model = build(siaf_neighbor_kernel=kernel)
    long_seq = torch.randint(1, VOCAB, (11,))
    short_seq = torch.randint(1, VOCAB, (6,))
    batch = torch.stack([long_seq, torch.cat([torch.zeros(5, dtype=torch.long), short_seq])])
    mask = torch.ones_like(batch)
    mask[1, :5] = 0
    logits = model(batch, attention_mask=mask).logits
    torch.testing.assert_close(logits[1, 5:], model(short_seq[None]).logits[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(logits[0], model(long_seq[None]).logits[0], atol=1e-5, rtol=1e-5)
    # Batched greedy generation with left padding gives each sequence's own continuation.
    generated = model.generate(batch, attention_mask=mask, max_new_tokens=6, do_sample=False, pad_token_id=0)
    alone_long = model.generate(long_seq[None], max_new_tokens=6, do_sample=False, pad_token_id=0)
    alone_short = model.generate(short_seq[None], max_new_tokens=6, do_sample=False, pad_token_id=0)
    assert torch.equal(generated[0, 11:], alone_long[0, 11:])
    assert torch.equal(generated[1, 11:], alone_short[0, 6:])


def test_sampling_is_reproducible_and_varies_with_seed():
    model = build()
    ids = torch.randint(1, VOCAB, (1, 5))
    kwargs = dict(max_new_tokens=8, do_sample=True, temperature=1.5, top_k=0, pad_token_id=0)
    torch.manual_seed(1)
    first = model.generate(ids, **kwargs)
    torch.manual_seed(1)
    again = model.generate(ids, **kwargs)
    outs = set()
    for seed in range(5):
        torch.manual_seed(seed)
        outs.add(tuple(model.generate(ids, **kwargs)[0].tolist()))
    assert torch.equal(first, again) and len(outs) > 1


def test_siaf_with_one_term_is_silu():
    model = PanguPiForCausalLM(tiny_config(siaf_terms=1)).eval()
    siaf = model.model.layers[0].mlp.act_fn
    assert torch.equal(siaf.weight, torch.ones_like(siaf.weight))
    assert torch.equal(siaf.bias, torch.zeros_like(siaf.bias))
    u = torch.randn(3, 7, 64) * 4
    assert torch.equal(siaf(u), torch.nn.functional.silu(u))


def test_siaf_matches_hand_computation():
    model = build(siaf_terms=3, siaf_activations=["silu", "gelu", "tanh"], siaf_scale_by_n=True)
    siaf = model.model.layers[1].mlp.act_fn
    u = torch.randn(2, 5, 64)
    a, b = siaf.weight, siaf.bias
    expected = (
        torch.nn.functional.silu(a[0] * u + b[0])
        + torch.nn.functional.gelu(a[1] * u + b[1])
        + torch.tanh(a[2] * u + b[2])
    ) / 3
    torch.testing.assert_close(siaf(u), expected)
    # Fresh init: distinct b_i evenly spaced in [-0.5, 0.5] so the terms do not stay equal by symmetry.
    fresh = PanguPiForCausalLM(tiny_config(siaf_terms=3)).model.layers[0].mlp.act_fn
    assert torch.allclose(fresh.bias[:, 0], torch.tensor([-0.5, 0.0, 0.5]))


@pytest.mark.parametrize("names", [["silu", "silu"], ["silu", "gelu", "gelu_tanh"], ["relu", "identity"]])
def test_siaf_hand_written_backward_equals_autograd(names):
    """Training with n > 1 uses a hand-written backward; its gradients must equal autograd's, in float64."""
    from yunshan.models.pangu_pi.modeling_pangu_pi import SIAF_FUNCTIONS

    model = build(siaf_terms=len(names), siaf_activations=names).double()
    siaf = model.model.layers[0].mlp.act_fn
    assert siaf.fused_backward
    with torch.no_grad():
        siaf.weight.normal_(1.0, 0.3)
        siaf.bias.normal_(0.0, 0.5)
    u = (torch.randn(2, 5, 64, dtype=torch.float64) * 2).requires_grad_()
    out = siaf(u)
    probe = torch.randn_like(out)
    grads = torch.autograd.grad((out * probe).sum(), (u, siaf.weight, siaf.bias))
    u_ref = u.detach().clone().requires_grad_()
    ref = sum(SIAF_FUNCTIONS[n](siaf.weight[i] * u_ref + siaf.bias[i]) for i, n in enumerate(names))
    ref_grads = torch.autograd.grad((ref * probe).sum(), (u_ref, siaf.weight, siaf.bias))
    torch.testing.assert_close(out, ref, rtol=0, atol=1e-12)
    for got, want in zip(grads, ref_grads):
        torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-10)
    # The input alone, or the parameters alone, may need gradients (frozen SIAF under LoRA, frozen inputs).
    siaf.requires_grad_(False)
    (g_u,) = torch.autograd.grad((siaf(u) * probe).sum(), (u,))
    torch.testing.assert_close(g_u, ref_grads[0], rtol=1e-10, atol=1e-10)


def test_shortcut_zero_init_leaves_logits_unchanged():
    with_shortcut = PanguPiForCausalLM(tiny_config(aug_shortcuts=2, aug_zero_init=True)).eval()
    without = PanguPiForCausalLM(tiny_config(aug_shortcuts=0)).eval()
    missing, unexpected = without.load_state_dict(with_shortcut.state_dict(), strict=False)
    assert not missing and all(".aug_shortcut." in k for k in unexpected) and unexpected
    assert torch.equal(with_shortcut.model.layers[0].aug_shortcut.fc2.weight, torch.zeros(32, 2 * 8))
    ids = torch.randint(1, VOCAB, (2, 9))
    assert torch.equal(with_shortcut(ids).logits, without(ids).logits)


def test_shortcut_is_parallel_to_attention_on_the_normalised_input():
    model = build()
    layer = model.model.layers[0]
    x = torch.randn(1, 6, 32)
    pos = torch.arange(6)[None]
    emb = model.model.rotary_emb(x, pos)
    normed = layer.input_layernorm(x)
    attn, _ = layer.self_attn(normed, emb, attention_mask=None)
    w1, w2 = layer.aug_shortcut.fc1.weight, layer.aug_shortcut.fc2.weight
    h = x + attn + torch.nn.functional.gelu(normed @ w1.T) @ w2.T
    expected = h + layer.mlp(layer.post_attention_layernorm(h))
    out = layer(x, attention_mask=None, position_ids=pos, position_embeddings=emb)
    torch.testing.assert_close(out, expected)


def test_packed_documents_with_restarting_positions_equal_separate_runs():
    model = build(siaf_neighbor_kernel=3)
    a, b = torch.randint(1, VOCAB, (7,)), torch.randint(1, VOCAB, (5,))
    packed = torch.cat([a, b])[None]
    positions = torch.cat([torch.arange(7), torch.arange(5)])[None]
    # use_cache=False: transformers detects packing from restarting positions only without a cache (as for Llama).
    logits = model(packed, position_ids=positions, use_cache=False).logits[0]
    torch.testing.assert_close(logits[:7], model(a[None]).logits[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(logits[7:], model(b[None]).logits[0], atol=1e-5, rtol=1e-5)


def test_hidden_states_and_attentions_are_returned():
    model = build()
    model.config._attn_implementation = "eager"
    out = model(torch.randint(1, VOCAB, (1, 6)), output_hidden_states=True, output_attentions=True)
    assert len(out.hidden_states) == 3 and len(out.attentions) == 2
    assert torch.allclose(out.attentions[0].sum(-1), torch.ones(1, 4, 6))


# ---------------------------------------------------------------- LLaMA parity and upcycling


def llama_config(**overrides):
    fields = dict(
        vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=128,
    )
    fields.update(overrides)
    return LlamaConfig(**fields)


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"tie_word_embeddings": True, "num_key_value_heads": 4},
        {"rope_parameters": {"rope_type": "linear", "factor": 2.0, "rope_theta": 500.0}},
        {"rope_parameters": {"rope_type": "dynamic", "factor": 2.0, "rope_theta": 10000.0}},
        {"attention_bias": True, "mlp_bias": True},
    ],
)
@pytest.mark.parametrize("attn", ["eager", "sdpa"])
def test_llama_parity_with_one_term_and_no_shortcut(overrides, attn):
    llama = LlamaForCausalLM(llama_config(**overrides)).eval()
    llama.config._attn_implementation = attn
    pangu = from_llama(llama, siaf_terms=1, aug_shortcuts=0).eval()
    pangu.config._attn_implementation = attn
    assert pangu.config.siaf_terms == 1 and pangu.config.aug_shortcuts == 0
    ids = torch.randint(0, VOCAB, (2, 40))
    mask = torch.ones_like(ids)
    mask[1, :3] = 0
    diff = (pangu(ids, attention_mask=mask).logits - llama(ids, attention_mask=mask).logits).abs().max()
    assert diff <= 1e-5


def test_llama_parity_by_state_dict_copy():
    llama = LlamaForCausalLM(llama_config()).eval()
    pangu = PanguPiForCausalLM(tiny_config(siaf_terms=1, aug_shortcuts=0, pad_token_id=None)).eval()
    missing, unexpected = pangu.load_state_dict(llama.state_dict(), strict=False)
    assert not unexpected and missing and all(".act_fn." in k for k in missing)
    ids = torch.randint(0, VOCAB, (2, 20))
    assert (pangu(ids).logits - llama(ids).logits).abs().max() <= 1e-5


def test_upcycling_keeps_logits_and_new_parameters_learn(tmp_path):
    llama = LlamaForCausalLM(llama_config()).eval()
    llama.save_pretrained(tmp_path / "llama")
    model = from_llama(tmp_path / "llama", siaf_terms=2, aug_shortcuts=2, aug_reduction=8, siaf_neighbor_kernel=3)
    ids = torch.randint(0, VOCAB, (2, 24))
    model.eval()
    assert (model(ids).logits - llama(ids).logits).abs().max() <= 1e-5
    model.train()
    model(ids, labels=ids).loss.backward()
    for layer in model.model.layers:
        siaf = layer.mlp.act_fn
        assert siaf.weight.grad[1].abs().sum() > 0 and siaf.bias.grad[1].abs().sum() > 0  # the added term
        assert layer.aug_shortcut.fc2.weight.grad.abs().sum() > 0
        assert layer.mlp.neighbor_conv.weight.grad.abs().sum() > 0
        # W1 sees W2 = 0, so its gradient is exactly zero at step 0 ...
        assert layer.aug_shortcut.fc1.weight.grad.abs().sum() == 0
    torch.optim.SGD(model.parameters(), lr=0.1).step()
    model.zero_grad()
    model(ids, labels=ids).loss.backward()
    for layer in model.model.layers:  # ... and non-zero once W2 has moved.
        assert layer.aug_shortcut.fc1.weight.grad.abs().sum() > 0


def test_upcycle_rejects_non_llama_and_scaled_series(tmp_path):
    with pytest.raises(ValueError, match="LlamaForCausalLM"):
        from_llama(PanguPiForCausalLM(tiny_config()))
    with pytest.raises(FileNotFoundError, match="config.json"):
        from_llama(tmp_path)
    with pytest.raises(ValueError, match="siaf_scale_by_n"):
        from_llama(LlamaForCausalLM(llama_config()), siaf_scale_by_n=True)


# ---------------------------------------------------------------- saving, Auto classes, remote code


def test_auto_classes_and_save_load_round_trip(tmp_path):
    model = build(siaf_neighbor_kernel=3, tie_word_embeddings=True)
    model.save_pretrained(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["model_type"] == "pangu_pi"
    assert config["auto_map"]["AutoModelForCausalLM"] == "modeling_pangu_pi.PanguPiForCausalLM"
    assert (tmp_path / "modeling_pangu_pi.py").is_file() and (tmp_path / "configuration_pangu_pi.py").is_file()
    assert isinstance(AutoConfig.from_pretrained(tmp_path), PanguPiConfig)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert type(loaded) is PanguPiForCausalLM
    assert loaded.lm_head.weight.data_ptr() == loaded.model.embed_tokens.weight.data_ptr()
    ids = torch.randint(1, VOCAB, (2, 10))
    assert torch.equal(loaded(ids).logits, model(ids).logits)


def test_remote_code_loads_where_yunshan_is_not_importable(tmp_path):
    model = build(siaf_neighbor_kernel=3)
    model.save_pretrained(tmp_path / "model")
    ids = torch.randint(1, VOCAB, (2, 10))
    torch.save({"ids": ids, "logits": model(ids).logits}, tmp_path / "ref.pt")
    script = textwrap.dedent(
        f"""
        import sys
        sys.modules["yunshan"] = None  # any `import yunshan` now raises ImportError
        import torch
        from transformers import AutoModelForCausalLM
        model = AutoModelForCausalLM.from_pretrained({str(tmp_path / "model")!r}, trust_remote_code=True).eval()
        assert "yunshan" not in type(model).__module__, type(model).__module__
        ref = torch.load({str(tmp_path / "ref.pt")!r}, weights_only=True)
        print("MAXDIFF", (model(ref["ids"]).logits - ref["logits"]).abs().max().item())
        out = model.generate(ref["ids"][:1, :4], max_new_tokens=3, do_sample=False, pad_token_id=0)
        print("GENERATED", out.shape[1])
        """
    )
    env = {**os.environ, "HF_MODULES_CACHE": str(tmp_path / "modules"), "PYTHONPATH": ""}
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "MAXDIFF 0.0" in result.stdout and "GENERATED 7" in result.stdout


# ---------------------------------------------------------------- training, PEFT, embeddings, dtypes


def test_training_steps_lower_the_loss_and_update_every_parameter():
    model = PanguPiForCausalLM(tiny_config(siaf_neighbor_kernel=3)).train()
    before = {name: p.detach().clone() for name, p in model.named_parameters()}
    ids = torch.randint(1, VOCAB, (4, 24))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95))
    losses = []
    for _ in range(30):
        loss = model(ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    assert all(map(torch.isfinite, map(torch.tensor, losses)))
    assert losses[-1] < 0.5 * losses[0]
    unchanged = [n for n, p in model.named_parameters() if torch.equal(p, before[n])]
    assert unchanged == []


def test_gradient_checkpointing_gives_the_same_gradients():
    model = build(siaf_neighbor_kernel=3).train()
    ids = torch.randint(1, VOCAB, (2, 12))
    model(ids, labels=ids).loss.backward()
    reference = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad()
    model.activation_checkpointing_enable({"use_reentrant": False})
    assert model.model.layers[0].gradient_checkpointing
    model(ids, labels=ids).loss.backward()
    for name, p in model.named_parameters():
        torch.testing.assert_close(p.grad, reference[name], atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("tied", [False, True])
def test_resize_token_embeddings_keeps_old_logits(tied):
    model = build(tie_word_embeddings=tied)
    ids = torch.randint(1, VOCAB, (2, 8))
    before = model(ids).logits
    model.resize_token_embeddings(VOCAB + 13, pad_to_multiple_of=8)
    assert model.config.vocab_size == 112 and model.lm_head.weight.shape[0] == 112
    after = model(ids).logits
    torch.testing.assert_close(after[..., :VOCAB], before)
    assert (model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()) == tied


def test_half_precision_dtypes_run_close_to_float32():
    model = build()
    ids = torch.randint(1, VOCAB, (1, 8))
    ref = model(ids).logits
    for dtype in (torch.bfloat16, torch.float16):
        low = PanguPiForCausalLM(model.config).to(dtype).eval()
        low.load_state_dict(model.state_dict())
        out = low(ids).logits.float()
        assert out.dtype == torch.float32 and (out - ref).abs().max() < 0.1


def test_lora_trains_saves_reloads_and_merges(tmp_path):
    from peft import LoraConfig, PeftModel, get_peft_model

    base = build()
    base_state = {k: v.clone() for k, v in base.state_dict().items()}
    # No target_modules: PanGu-π's defaults were registered with PEFT by importing yunshan.
    peft_model = get_peft_model(base, LoraConfig(r=4, lora_alpha=8, lora_dropout=0.0))
    targets = {n.split(".")[-4] for n, _ in peft_model.named_parameters() if "lora_A" in n}
    assert targets == {"q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"}
    ids = torch.randint(1, VOCAB, (4, 16))
    optimizer = torch.optim.AdamW([p for p in peft_model.parameters() if p.requires_grad], lr=1e-2)
    first = None
    for _ in range(15):
        loss = peft_model(input_ids=ids, labels=ids).loss
        first = first if first is not None else loss.item()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    assert loss.item() < first
    peft_model.eval()
    tuned = peft_model(input_ids=ids).logits
    peft_model.save_pretrained(tmp_path / "adapter")

    fresh = PanguPiForCausalLM(base.config).eval()
    fresh.load_state_dict(base_state)
    reloaded = PeftModel.from_pretrained(fresh, tmp_path / "adapter").eval()
    torch.testing.assert_close(reloaded(input_ids=ids).logits, tuned, atol=1e-5, rtol=1e-5)
    merged = reloaded.merge_and_unload()
    assert type(merged) is PanguPiForCausalLM
    torch.testing.assert_close(merged(ids).logits, tuned, atol=1e-4, rtol=1e-4)


def test_base_model_class_is_registered():
    from transformers import AutoModel

    model = AutoModel.from_config(tiny_config())
    assert type(model) is PanguPiModel


def test_tiny_preset_builds():
    model = PanguPiForCausalLM(PanguPiConfig.from_preset("tiny"))
    assert model.config.vocab_size == PANGU_PI_PRESETS["tiny"]["vocab_size"]


def test_upcycle_command_writes_a_folder_with_unchanged_logits(tmp_path):
    llama = LlamaForCausalLM(llama_config()).eval()
    llama.save_pretrained(tmp_path / "llama")
    exe = os.path.join(os.path.dirname(sys.executable), "yunshan")
    result = subprocess.run([exe, "model", "upcycle", str(tmp_path / "llama"), str(tmp_path / "pangu"),
                             "--siaf-terms", "2", "--aug-shortcuts", "1", "--aug-reduction", "8"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "pangu").eval()
    assert model.config.siaf_terms == 2 and model.config.aug_shortcuts == 1
    ids = torch.randint(0, VOCAB, (2, 12))
    assert (model(ids).logits - llama(ids).logits).abs().max() <= 1e-5
