"""The chunked loss (yunshan.training.chunked_loss) against transformers' own: the same loss and the same gradient of
every trainable parameter to float32 precision (relative 1e-5) on tiny models (Llama, a tied Llama, PanGu-π, OTCE,
Gemma-3 with final-logit softcapping), with ignored labels, gradient accumulation (num_items_in_batch), LoRA, the
new vocabulary rows (rows and indices) and gradient hooks; as accurate as the plain path under bf16 autocast; no
(tokens, vocabulary) tensor ever made; models it cannot reproduce trained plain under auto and refused under chunked;
`yunshan cpt` and `yunshan sft` logging the same losses either way."""

import json

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from test_cpt import recipe_dict, setup  # noqa: F401  (the module fixture of the cpt runs)
from yunshan.training.arguments import LoraArgs
from yunshan.training.chunked_loss import chunked_loss_for
from yunshan.training.models import apply_lora

VOCAB = 300
REL = 1e-5


def tiny(kind: str, vocab: int = VOCAB, **extra):
    """A tiny causal LM of `kind`, seeded."""
    from transformers import Gemma3ForCausalLM, Gemma3TextConfig, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    shape = dict(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                 num_key_value_heads=2)
    if kind in ("llama", "tied"):
        return LlamaForCausalLM(LlamaConfig(**shape, tie_word_embeddings=kind == "tied", **extra))
    if kind == "pangu":
        from yunshan.models.pangu_pi import PanguPiConfig, PanguPiForCausalLM

        return PanguPiForCausalLM(PanguPiConfig(**shape, aug_reduction=4, **extra))
    if kind == "otce":
        from yunshan.models import preset_config
        from yunshan.models.otce import OtceForCausalLM

        return OtceForCausalLM(preset_config("otce-tiny", vocab_size=vocab, **extra))
    if kind == "gemma3":  # tied, and with the softcapping Gemma-2 uses (Gemma-3's config can set it)
        return Gemma3ForCausalLM(Gemma3TextConfig(**shape, head_dim=8, final_logit_softcapping=3.0, **extra))
    raise ValueError(kind)


def batches(vocab: int = VOCAB, seed: int = 1):
    """Two micro-batches of one optimizer step, with ignored labels (a prompt, padding, a whole ignored row)."""
    g = torch.Generator().manual_seed(seed)
    out = []
    for rows, length in ((3, 19), (2, 23)):
        ids = torch.randint(0, vocab, (rows, length), generator=g)
        labels = ids.clone()
        labels[0, :6] = -100
        labels[1, -4:] = -100
        if rows == 3:
            labels[2] = -100
        out.append((ids, labels))
    return out


def step(model, micro, chunked=None, autocast=False, accumulate=True):
    """Loss per micro-batch and the accumulated gradients of one optimizer step, as the Trainer computes them:
    each micro-batch's summed loss over the step's num_items_in_batch (or the batch mean without accumulation)."""
    model.zero_grad(set_to_none=True)
    items = sum(int((labels[:, 1:] != -100).sum()) for _, labels in micro) if accumulate else None
    losses = []
    for ids, labels in micro:
        kwargs = {"num_items_in_batch": torch.tensor(items)} if items is not None else {}
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            if chunked is None:
                loss = model(input_ids=ids, labels=labels, **kwargs).loss
            else:
                with chunked.computing(labels):
                    loss = model(input_ids=ids, labels=labels, **kwargs).loss
        loss.backward()
        losses.append(loss.item())
    grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.requires_grad}
    return losses, grads


def assert_equal_steps(plain, chunked, rel=REL):
    assert chunked[0] == pytest.approx(plain[0], rel=rel)
    assert plain[1].keys() == chunked[1].keys() and plain[1]
    for name, ref in plain[1].items():
        scale = ref.abs().max().item() or 1.0
        worst = (chunked[1][name] - ref).abs().max().item()
        assert worst <= rel * scale, (name, worst, scale)


@pytest.mark.parametrize("kind", ["llama", "tied", "pangu", "otce", "gemma3"])
@pytest.mark.parametrize("accumulate", [True, False])
def test_loss_and_every_gradient_equal_the_plain_loss(kind, accumulate):
    model = tiny(kind)
    chunked, line = chunked_loss_for(model, "auto", chunk_tokens=7)  # chunks that split rows and batches
    assert chunked is not None, line
    micro = batches()
    plain = step(model, micro, accumulate=accumulate)
    assert_equal_steps(plain, step(model, micro, chunked, accumulate=accumulate))
    if kind == "gemma3":
        assert chunked.softcap == 3.0


@pytest.mark.parametrize("kind", ["llama", "tied"])
@pytest.mark.parametrize("mode", ["none", "rows", "indices"])
def test_lora_and_the_new_vocabulary_rows_get_the_plain_gradients(kind, mode):
    """LoRA through PEFT as yunshan applies it (yunshan.training.models.apply_lora): a frozen head (none), the
    trained copy of the head (rows: modules_to_save, tied to the embedding's copy on a tied model), the trained rows
    (indices: trainable token indices). A tied model stays tied: the one trained matrix gets both gradients."""
    model = tiny(kind)
    new_ids = list(range(VOCAB - 12, VOCAB))
    lora = LoraArgs(enabled=True, r=4, alpha=8, dropout=0.0, new_token_training=mode,
                    target_modules=["q_proj", "v_proj", "down_proj"])
    model = apply_lora(model, lora, new_ids if mode != "none" else [], seed=0)
    chunked, line = chunked_loss_for(model, "chunked", chunk_tokens=16)
    micro = batches()
    plain = step(model, micro)
    trained = step(model, micro, chunked)
    assert_equal_steps(plain, trained)
    names = list(trained[1])
    if mode == "rows":
        assert any("lm_head.modules_to_save" in n or "embed_tokens.modules_to_save" in n for n in names)
    if mode == "indices":
        assert any("trainable_tokens_delta" in n for n in names)
    if kind == "tied" and mode == "rows":
        base = model.get_base_model()
        head = base.get_output_embeddings().modules_to_save["default"].weight
        assert head is base.get_input_embeddings().modules_to_save["default"].weight


def test_a_gradient_hook_on_the_head_applies_as_in_the_plain_path():
    """The embedding warm-up masks the base rows' gradient with a hook on the weight (yunshan.training.
    embedding_warmup): the weight is an input of the chunked Function, so the hook sees its gradient."""
    model = tiny("tied")
    weight = model.get_output_embeddings().weight
    rows = VOCAB - 20
    handle = weight.register_hook(lambda grad: torch.cat([torch.zeros_like(grad[:rows]), grad[rows:]]))
    chunked, _ = chunked_loss_for(model, "chunked", chunk_tokens=5)
    micro = batches()
    plain, ours = step(model, micro), step(model, micro, chunked)
    handle.remove()
    assert_equal_steps(plain, ours)
    name = "model.embed_tokens.weight"
    assert torch.count_nonzero(ours[1][name][:rows]) == 0 and torch.count_nonzero(ours[1][name][rows:]) > 0


@pytest.mark.parametrize("kind", ["tied", "gemma3"])
def test_under_bf16_autocast_as_accurate_as_the_plain_loss(kind):
    """Under bf16 autocast the head's products run in bf16 in both paths and the loss in float32: the same loss and
    gradients as far from float32's as the plain path's are (bf16 rounds at 2^-9; a different summation order of
    the weight's gradient moves individual entries by that much)."""
    model = tiny(kind)
    chunked, _ = chunked_loss_for(model, "chunked", chunk_tokens=7)
    micro = batches()
    exact = step(model, micro)
    plain, ours = step(model, micro, autocast=True), step(model, micro, chunked, autocast=True)
    assert ours[0] == pytest.approx(plain[0], rel=1e-5)
    for name, ref in exact[1].items():
        error = lambda g: ((g[name] - ref).norm() / ref.norm()).item()  # noqa: E731
        assert error(ours[1]) <= 1.5 * error(plain[1]) + 1e-6, (name, error(ours[1]), error(plain[1]))


def test_yunshans_float32_head_runs_in_float32_under_autocast_in_both_paths():
    """yunshan.eval.loading.float32_head (the head with autocast off on a float32 input, as the forgetting monitor
    and yunshan eval use it): the chunked loss computes that head's products in float32 too."""
    from yunshan.eval.loading import float32_head

    model = tiny("tied")
    assert float32_head(model)
    chunked, _ = chunked_loss_for(model, "chunked", chunk_tokens=7)
    micro = batches()
    assert_equal_steps(step(model, micro, autocast=True), step(model, micro, chunked, autocast=True))


class LargestTensor(TorchDispatchMode):
    """The largest tensor any operator returns while the mode is on."""

    def __init__(self):
        super().__init__()
        self.largest = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else [out]:
            if isinstance(t, torch.Tensor):
                self.largest = max(self.largest, t.numel())
        return out


def test_no_tensor_of_tokens_by_vocabulary_is_made():
    """The plain path makes (tokens, vocabulary) logits, their log-softmax and gradient; the chunked path never more
    than a chunk's (plus the weight-sized gradient), measured on every operator's output in forward and backward."""
    vocab = 4096
    model = tiny("llama", vocab=vocab)
    ids = torch.randint(0, vocab, (2, 128))
    tokens = ids.numel()
    chunked, _ = chunked_loss_for(model, "chunked", chunk_tokens=16)
    sizes = {}
    for name, loss_of in (("plain", None), ("chunked", chunked)):
        with LargestTensor() as mode:
            step(model, [(ids, ids)], loss_of)
        sizes[name] = mode.largest
    assert sizes["plain"] >= tokens * vocab
    # the largest: the head's weight and its gradient (vocabulary x 32), then a chunk's logits (16 x vocabulary)
    assert sizes["chunked"] <= vocab * 32 < tokens * vocab / 4


def test_models_it_cannot_reproduce_train_plain_under_auto_and_are_refused_under_chunked():
    from transformers import CohereConfig, CohereForCausalLM

    cohere = CohereForCausalLM(CohereConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                                            num_hidden_layers=1, num_attention_heads=4, num_key_value_heads=2,
                                            logit_scale=0.5))
    chunked, line = chunked_loss_for(cohere, "auto")
    assert chunked is None and "logit_scale" in line and line.startswith("loss: plain")
    with pytest.raises(ValueError, match="training.loss: chunked cannot train CohereForCausalLM: .*logit_scale"):
        chunked_loss_for(cohere, "chunked")
    lora_head = apply_lora(tiny("llama"), LoraArgs(enabled=True, r=4, target_modules=["q_proj", "lm_head"]), [], 0)
    chunked, line = chunked_loss_for(lora_head, "auto")
    assert chunked is None and "not a linear layer" in line
    assert chunked_loss_for(tiny("llama"), "plain")[0] is None
    with pytest.raises(ValueError, match="training.loss must be one of auto, chunked, plain"):
        chunked_loss_for(tiny("llama"), "fused")


# ------------------------------------------------------------------------- the training commands


def _logged(out, key="loss"):
    rows = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    return [r[key] for r in rows if r.get("event") == "train" and key in r]


def count_chunked_passes(monkeypatch) -> list:
    """Count the forward passes the chunked Function computes (one per training micro-step when it is used)."""
    from yunshan.training import chunked_loss

    calls = []
    apply = chunked_loss.LinearCrossEntropy.apply
    monkeypatch.setattr(chunked_loss.LinearCrossEntropy, "apply", lambda *a: calls.append(1) or apply(*a))
    return calls


def test_cpt_logs_the_same_losses_with_the_chunked_loss(setup, tmp_path, monkeypatch):  # noqa: F811
    from yunshan.arguments.recipe import load_recipe
    from yunshan.training.cpt import CptArgs, run_cpt

    calls = count_chunked_passes(monkeypatch)
    runs = {}
    for loss in ("plain", "chunked"):
        out = tmp_path / loss
        data = recipe_dict(setup, out, max_steps=4, save_steps=4, logging_steps=1, per_device_batch_size=2,
                           gradient_accumulation_steps=2, loss=loss, loss_chunk_tokens=24,
                           precision="float32")
        data["monitor"] = {"every_steps": 0}
        run_cpt(load_recipe(CptArgs, data=data))
        report = json.loads((out / "data_report.json").read_text())
        assert report["loss"]["value"] == loss
        runs[loss] = _logged(out), _logged(out, "grad_norm")
        assert len(calls) == (0 if loss == "plain" else 4 * 2)  # 4 steps of 2 micro-steps
    assert len(runs["plain"][0]) == 4
    assert runs["chunked"][0] == pytest.approx(runs["plain"][0], rel=1e-5)
    assert runs["chunked"][1] == pytest.approx(runs["plain"][1], rel=1e-4)


def test_sft_logs_the_same_losses_per_source_with_the_chunked_loss(tmp_path, monkeypatch):
    from test_sft import domain_task, recipe
    from fixtures import train_tokenizer
    from yunshan.training.sft import run_sft

    root = tmp_path / "task"
    root.mkdir()
    train = domain_task(80, 0)
    (root / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in train))
    chat = [{"messages": [{"role": "user", "content": f"Which domain?\n{r['input']}"},
                          {"role": "assistant", "content": r["output"]}]} for r in domain_task(30, 1)]
    (root / "chat.jsonl").write_text("".join(json.dumps(r) + "\n" for r in chat))
    train_tokenizer(root / "tok", [f"{r['instruction']}\n{r['input']}\n{r['output']}" for r in train], vocab_size=300)
    calls = count_chunked_passes(monkeypatch)
    logs = {}
    for loss in ("plain", "chunked"):
        out = tmp_path / loss
        r = recipe(root, out)
        r.training.max_steps, r.training.logging_steps, r.training.save_steps = 3, 1, 3
        r.training.per_device_batch_size, r.training.loss, r.training.loss_chunk_tokens = 8, loss, 20
        r.training.precision = "float32"  # bf16 autocast rounds both paths alike (test_under_bf16_autocast_...)
        run_sft(r)
        assert json.loads((out / "data_report.json").read_text())["loss"]["value"] == loss
        logs[loss] = {key: _logged(out, key) for key in ("loss", "loss_alpaca", "loss_chat")}
        assert len(calls) == (0 if loss == "plain" else 3)
    for key, values in logs["plain"].items():
        assert len(values) == 3, key
        assert logs["chunked"][key] == pytest.approx(values, rel=1e-5), key



def test_pref_records_how_its_method_scores_and_refuses_chunked_where_trl_scores_full_logits():
    """TRL 1.16's DPOTrainer and KTOTrainer score through their own fused LM head (trl add_fused_lm_head); its ORPO
    and CPO (SimPO) trainers take the full logits, so `training.loss: chunked` is refused there."""
    from yunshan.training.arguments import TrainArgs
    from yunshan.training.preference import PrefArgs, pref_loss

    assert pref_loss(PrefArgs(method="dpo"))["value"] == "chunked"
    assert pref_loss(PrefArgs(method="simpo", beta=2.0))["value"] == "plain"
    with pytest.raises(ValueError, match="training.loss: chunked: method orpo trains with TRL's ORPOTrainer"):
        PrefArgs(method="orpo", training=TrainArgs(loss="chunked"))
    PrefArgs(method="kto", training=TrainArgs(loss="chunked"))
