"""The training loss without the full-vocabulary logits: the output head and cross-entropy applied a chunk of tokens
at a time, with the gradient computed chunk by chunk (`training.loss`: auto, chunked, plain).

    yunshan cpt --config recipes/smollm2-135m_laws.yaml training.loss=chunked training.loss_chunk_tokens=256
    .venv/bin/python benchmarks/chunked_loss.py     # peak RSS and tokens/s against the plain loss

The plain loss of a causal LM (transformers' `ForCausalLMLoss`) computes the logits of every token of the batch,
tokens x vocabulary in float32, keeps them (and the log-softmax) for the backward pass and then holds their gradient
as large again: for SmolLM2-135M (49,152 entries) 0.2 GB per 1,024 tokens each, for Gemma-3 (262,144) 1.1 GB. Here
the model's body runs once as usual; its head, called once as a module (so every engine's hooks see the call they
expect: DeepSpeed ZeRO-3 gathers the weight, FSDP2 holds it unsharded), computes instead of the logits, for the
tokens whose label is not -100 and `chunk_tokens` of them at a time: the chunk's logits, each token's loss (log-sum-exp
minus the label's logit), the gradient of the summed loss with respect to the logits (softmax minus one-hot) and from
it the gradients with respect to the hidden states and the head's weight (and bias), and then drops the chunk. The
backward pass only scales those gradients by its incoming gradient. So the memory the head takes is one chunk's
logits plus one weight-sized gradient, whatever the batch. This is what Liger Kernel's fused linear cross-entropy
(linkedin/Liger-Kernel, ops/fused_linear_cross_entropy.py) and Apple's Cut Cross-Entropy do on GPUs, in plain torch;
on a CUDA device with `liger_kernel` installed (an optional package, never required) Liger's kernel computes it.

Equal to the plain loss: the labels are shifted as `ForCausalLMLoss` shifts them (or `shift_labels` used as given),
-100 is ignored, and the sum is normalised by the model's own `loss_function` call: by `num_items_in_batch` when the
Trainer passes it (the tokens of every micro-step of an optimizer step), else by this batch's tokens. Under bf16
autocast the head's products run in bf16 and the loss in float32, as the plain path runs them; Gemma's
`final_logit_softcapping` is applied as the model applies it. The weight's gradient reaches the parameter through
autograd (it is an input of the Function), so gradient hooks (the embedding warm-up's row masks) and engines' gradient
reduction apply as before, and a tied head and embedding stay one parameter. tests/training/test_chunked_loss.py
holds the loss and every trainable gradient to the plain path's (Llama, tied Llama, LoRA, new vocabulary rows,
gradient accumulation, softcapping) and checks that no (tokens, vocabulary) tensor is ever made.

Which heads: an `nn.Linear` (with or without bias), PEFT's wrappers of it (modules_to_save: the trained copy of
`lora.new_token_training: rows`; trainable token indices), and yunshan's float32 head (yunshan.eval.loading). A model
that transforms its logits otherwise (a logit scale, a head LoRA adapts) or computes its loss without
`self.loss_function` is trained with the plain loss under `training.loss: auto` (said once) and refused under
`chunked`.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from dataclasses import dataclass

import torch

IGNORE_INDEX = -100
LOSS_MODES = ("auto", "chunked", "plain")
# Elements of one chunk's logits when training.loss_chunk_tokens is not set: 8 Mi (32 MB in float32; a chunk holds
# two or three such buffers at once), so a chunk is 170 tokens of SmolLM2's 49,152-entry vocabulary and 32 of
# Gemma-3's 262,144: small beside the activations, and products still large enough to run at full speed (Gemma's CPT
# ran faster chunked than plain: benchmarks/README.md, "The chunked loss"). Other sizes were not measured.
CHUNK_ELEMENTS = 1 << 23
# Config fields of models whose logits are scaled between the head and the loss (the list TRL's fused head reads):
# the chunked path does not reproduce them, so such a model trains with the plain loss.
LOGIT_SCALES = ("logit_scale", "output_multiplier", "lm_head_multiplier", "logits_scaling")


def chunk_tokens_for(vocab_size: int, chunk_tokens: int | None = None) -> int:
    """Tokens per chunk: `chunk_tokens` when given, else as many as make CHUNK_ELEMENTS logits (at least 1)."""
    return chunk_tokens if chunk_tokens else max(1, CHUNK_ELEMENTS // max(vocab_size, 1))


# ---------------------------------------------------------------------------------------------------- the kernel


class LinearCrossEntropy(torch.autograd.Function):
    """Summed cross-entropy of `linear(hidden, weight, bias)` against `targets`, chunk by chunk, the gradients
    computed in the forward pass (module docstring). Returns (summed loss, each token's loss): the second output is
    not differentiable (it is for logging).

    hidden: (N, H); weight: (V, H); bias: (V,) or None; targets: (N,) with IGNORE_INDEX where nothing is predicted.
    compute_dtype: the dtype of the head's products (bf16 under autocast, else the weight's); the loss itself is
    always float32, as `ForCausalLMLoss` upcasts the logits. softcap: Gemma's final_logit_softcapping or None."""

    @staticmethod
    def forward(ctx, hidden, weight, bias, targets, chunk_tokens: int, compute_dtype: torch.dtype,
                softcap: float | None):
        want_hidden, want_weight, want_bias = ctx.needs_input_grad[:3]
        valid = (targets != IGNORE_INDEX).nonzero().squeeze(1)
        rows, labels = hidden.index_select(0, valid), targets.index_select(0, valid)
        w = weight.to(compute_dtype)
        b = bias.to(compute_dtype) if bias is not None else None
        token_loss = torch.zeros(targets.shape[0], dtype=torch.float32, device=hidden.device)
        grad_hidden = torch.zeros_like(hidden) if want_hidden else None
        grad_weight = torch.zeros(weight.shape, dtype=torch.float32, device=weight.device) if want_weight else None
        grad_bias = torch.zeros(weight.shape[0], dtype=torch.float32, device=weight.device) if want_bias else None
        arange = torch.arange(min(chunk_tokens, max(rows.shape[0], 1)), device=hidden.device)
        for start in range(0, rows.shape[0], chunk_tokens):
            x = rows[start:start + chunk_tokens].to(compute_dtype)
            y = labels[start:start + chunk_tokens]
            n = x.shape[0]
            logits = torch.nn.functional.linear(x, w, b)  # (n, V) in the head's dtype, as the plain forward
            capped = None
            if softcap is not None:  # the model's own order: divide, tanh, multiply, in the logits' dtype
                capped = torch.tanh(logits / softcap)
                logits = capped * softcap
            z = logits.float()  # ForCausalLMLoss: logits.float()
            del logits
            lse = torch.logsumexp(z, dim=-1)
            losses = lse - z[arange[:n], y]
            token_loss[valid[start:start + n]] = losses
            if not (want_hidden or want_weight or want_bias):
                continue
            # d(sum of losses)/d(logits) = softmax - one-hot, made in place in the float32 logits
            grad = z.sub_(lse.unsqueeze(1)).exp_()
            grad[arange[:n], y] -= 1.0
            if capped is not None:  # through c * tanh(z / c): times 1 - tanh^2
                grad.mul_(1.0 - capped.float().square())
            grad = grad.to(compute_dtype)  # the plain backward casts the float32 gradient to the logits' dtype
            if want_hidden:
                grad_hidden[valid[start:start + n]] = (grad @ w).to(hidden.dtype)
            if want_weight:
                if compute_dtype == torch.float32:
                    grad_weight.addmm_(grad.t(), x)
                else:
                    grad_weight += (grad.t() @ x).float()
            if want_bias:
                grad_bias += grad.float().sum(0)
            del z, grad
        ctx.grads = (grad_hidden,
                     grad_weight.to(weight.dtype) if grad_weight is not None else None,
                     grad_bias.to(bias.dtype) if grad_bias is not None else None)
        ctx.mark_non_differentiable(token_loss)
        return token_loss.sum(), token_loss

    @staticmethod
    def backward(ctx, grad_loss, _grad_token_loss):
        # The saved gradients are of the summed loss: scale them by the incoming gradient (the model's normalisation,
        # 1 / tokens, and whatever the Trainer scales by). In place: a Function's backward runs once per forward.
        grads = [None if g is None else g.mul_(grad_loss.to(g.dtype)) for g in ctx.grads]
        ctx.grads = None
        return grads[0], grads[1], grads[2], None, None, None, None


def linear_cross_entropy(hidden, weight, bias, targets, chunk_tokens: int, softcap: float | None = None,
                         float32: bool = False, token_losses: bool = False):
    """(summed loss, per-token losses or None) of the head (`weight`, `bias`) over `hidden` (N, H) against `targets`
    (N,), chunked (LinearCrossEntropy). `float32`: the head runs in float32 with autocast off (yunshan's float32
    head); else in the autocast dtype when autocast is on, as an `nn.Linear` would. On a CUDA device with
    liger_kernel installed, and no per-token losses asked for, Liger's fused kernel computes it."""
    device = hidden.device.type
    if float32:
        hidden = hidden.float()
        compute_dtype = torch.float32
    elif torch.is_autocast_enabled(device):
        compute_dtype = torch.get_autocast_dtype(device)
    else:
        compute_dtype = weight.dtype
    if device == "cuda" and not token_losses and not float32:
        liger = _liger()
        if liger is not None:
            # reduction="sum": the normalisation is the model's loss_function's (module docstring)
            return liger(hidden, weight, targets, bias=bias, ignore_index=IGNORE_INDEX, reduction="sum",
                         softcap=softcap), None
    with torch.autocast(device, enabled=False):  # the dtypes are chosen above, as autocast would choose them
        total, per_token = LinearCrossEntropy.apply(hidden, weight, bias, targets, chunk_tokens, compute_dtype,
                                                    softcap)
    return total, (per_token if token_losses else None)


@functools.cache
def _liger():
    """Liger Kernel's fused linear cross-entropy, or None when the package is not installed."""
    try:
        from liger_kernel.transformers.functional import liger_fused_linear_cross_entropy
    except ImportError:
        return None
    return liger_fused_linear_cross_entropy


# ---------------------------------------------------------------------------------------------------- the model


@dataclass
class _Head:
    """A module that computes the output projection (what is patched while a chunked loss is computed)."""

    module: torch.nn.Module
    kind: str  # linear (an nn.Linear), tokens (PEFT's trainable token indices over a linear head)
    float32: bool = False


@dataclass
class LossRequest:
    """One forward pass's chunked loss: the labels going in, the summed loss, its token count and the per-token
    losses coming out (`token_losses`: (batch, seq) float32, position t holding the loss of predicting t + 1, 0 where
    nothing is predicted; only when asked for)."""

    labels: torch.Tensor
    shift_labels: torch.Tensor | None
    keep_token_losses: bool
    total: torch.Tensor | None = None
    tokens: torch.Tensor | None = None
    token_losses: torch.Tensor | None = None
    normalised: bool = False


class ChunkedLoss:
    """The chunked loss installed on one model (`chunked_loss_for` builds it): `computing(labels)` around a forward
    pass that is given those labels makes the model's output `loss` the chunked loss."""

    def __init__(self, model, chunk_tokens: int, softcap: float | None):
        self.model = model  # the transformers model (inside any PEFT wrapper)
        self.chunk_tokens = chunk_tokens
        self.softcap = softcap

    @contextlib.contextmanager
    def computing(self, labels: torch.Tensor, shift_labels: torch.Tensor | None = None,
                  keep_token_losses: bool = False):
        """For the block: the model's head, when next called, computes the chunked loss of `labels` (returning empty
        logits), and the model's `loss_function` returns it normalised as `ForCausalLMLoss` would. Yields the
        LossRequest (its `token_losses` once the forward pass has run)."""
        heads = head_modules(self.model)
        request = LossRequest(labels=labels, shift_labels=shift_labels, keep_token_losses=keep_token_losses)
        model = self.model
        had_loss = "_loss_function" in model.__dict__
        previous = model.__dict__.get("_loss_function")
        for head in heads:
            head.module.forward = functools.partial(self._head_forward, head, request)
        model.loss_function = functools.partial(self._loss_function, request)
        try:
            yield request
        finally:
            for head in heads:
                del head.module.forward
            if had_loss:
                model.loss_function = previous
            else:
                del model._loss_function
        if request.total is not None and not request.normalised:
            raise RuntimeError(f"{type(model).__name__} computed its loss without self.loss_function: the chunked "
                               "loss cannot stand in for it; set training.loss: plain")

    def _head_forward(self, head: _Head, request: LossRequest, hidden: torch.Tensor, *args, **kwargs):
        module = head.module
        plain = functools.partial(type(module).forward, module)
        if request.total is not None:  # a second call of the head in one forward pass: the plain projection
            return plain(hidden, *args, **kwargs)
        if head.kind == "tokens":
            if module.disable_adapters or not module.active_adapters or module.merged:
                return plain(hidden, *args, **kwargs)  # PEFT calls its base layer (patched too)
            weight, bias = module.get_merged_weights(module.active_adapters), None
        else:
            weight, bias = module.weight, module.bias
        labels = request.labels
        if hidden.shape[:-1] != labels.shape:
            raise ValueError(f"the chunked loss got hidden states of shape {tuple(hidden.shape)} for labels of "
                             f"shape {tuple(labels.shape)} (logits_to_keep?); set training.loss: plain")
        if request.shift_labels is not None:
            targets = request.shift_labels
        else:  # ForCausalLMLoss's shift: position t predicts label t + 1, the last predicts nothing
            targets = torch.nn.functional.pad(labels, (0, 1), value=IGNORE_INDEX)[..., 1:]
        targets = targets.to(hidden.device).reshape(-1)
        total, per_token = linear_cross_entropy(
            hidden.reshape(-1, hidden.shape[-1]), weight, bias, targets, self.chunk_tokens, softcap=self.softcap,
            float32=head.float32, token_losses=request.keep_token_losses)
        request.total = total
        request.tokens = (targets != IGNORE_INDEX).sum()
        request.token_losses = per_token.view(labels.shape) if per_token is not None else None
        # Empty logits: nothing downstream of the head reads them in a training step (the loss is taken from the
        # request); a softcapping model divides and multiplies them at no cost. They are a view of the hidden states,
        # and the loss adds their (empty, so exactly zero) sum: the head's output stays on the backward path, so
        # DeepSpeed ZeRO-3 gathers the head's weight when the gradient reaches it, as in the plain path, before the
        # Function (created earlier, so run later by autograd) hands the weight its whole gradient; a weight left
        # partitioned (local shape (0,)) cannot take it.
        return hidden[..., :0]

    @staticmethod
    def _loss_function(request: LossRequest, logits=None, labels=None, vocab_size=None, num_items_in_batch=None,
                       ignore_index: int = IGNORE_INDEX, shift_labels=None, **kwargs):
        """The model's loss_function while the chunked loss is computed: the summed loss normalised as
        transformers' fixed_cross_entropy does (by num_items_in_batch when given, else the mean over the tokens)."""
        if request.total is None:
            raise RuntimeError("the model called its loss function before its output head; set training.loss: plain")
        if ignore_index != IGNORE_INDEX:
            raise ValueError(f"the chunked loss ignores label {IGNORE_INDEX}, the model asked for {ignore_index}")
        request.normalised = True
        if num_items_in_batch is None:
            loss = request.total / request.tokens
        else:
            if torch.is_tensor(num_items_in_batch):
                num_items_in_batch = num_items_in_batch.to(request.total.device)
            loss = request.total / num_items_in_batch
        if logits is not None and logits.requires_grad:  # the head's empty output on the backward path (above)
            loss = loss + logits.sum().to(loss.dtype)
        return loss


def head_modules(model) -> list[_Head]:
    """The modules that compute `model`'s output projection, to be patched for a chunked loss; a ValueError saying
    why when the head is of a kind the chunked loss does not reproduce."""
    from peft.utils.other import ModulesToSaveWrapper, TrainableTokensWrapper

    from yunshan.eval.loading import float32_head_class

    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else None
    if head is None:
        raise ValueError(f"{type(model).__name__} has no output embeddings (get_output_embeddings)")
    float32 = isinstance(head, float32_head_class())
    if float32:
        head = head.head
    # isinstance, not class names: FSDP2 makes each module it shards an instance of a subclass (FSDPLinear, ...)
    if isinstance(head, ModulesToSaveWrapper):  # PEFT: the frozen original (adapters off) and the trained copies
        found = [_Head(m, "linear", float32) for m in (head.original_module, *head.modules_to_save.values())]
    elif isinstance(head, TrainableTokensWrapper):  # PEFT: the base head plus the trained rows (token indices)
        layer = head.token_adapter
        found = [_Head(layer, "tokens", float32), _Head(layer.base_layer, "linear", float32)]
    else:
        found = [_Head(head, "linear", float32)]
    for item in found:
        module = item.module
        if item.kind == "linear" and type(module).forward is not torch.nn.Linear.forward:
            raise ValueError(f"its output head is a {type(module).__name__}, not a linear layer (a LoRA-adapted or "
                             "quantised head)")
        if item.kind == "tokens" and not isinstance(module.base_layer, torch.nn.Linear):
            raise ValueError(f"its output head's trainable tokens wrap a {type(module.base_layer).__name__}")
        if "forward" in module.__dict__:
            raise ValueError(f"its output head's forward is replaced already ({type(module).__name__})")
    return found


def check_model(model) -> float | None:
    """Raise ValueError saying why `model` (a transformers causal LM, not a PEFT wrapper) cannot train with the chunked
    loss; else return its final_logit_softcapping (None without)."""
    config = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    for name in LOGIT_SCALES:
        if getattr(config, name, None) not in (None, 1, 1.0):
            raise ValueError(f"its config scales the logits ({name} = {getattr(config, name)})")
    try:
        source = inspect.getsource(type(model).forward)
    except (OSError, TypeError):
        raise ValueError(f"the source of {type(model).__name__}.forward is not readable") from None
    if "self.loss_function(" not in source:
        raise ValueError(f"{type(model).__name__}.forward computes its loss without self.loss_function")
    head_modules(model)
    return getattr(config, "final_logit_softcapping", None)


def chunked_loss_for(model, mode: str, chunk_tokens: int | None = None) -> tuple[ChunkedLoss | None, str]:
    """The chunked loss for `model` (a causal LM, LoRA-wrapped or not) as `training.loss` asks: auto (chunked where
    this module reproduces the model's loss, else plain), chunked (else a ValueError naming why), plain. Returns
    (ChunkedLoss or None, a line saying which loss and why)."""
    if mode not in LOSS_MODES:
        raise ValueError(f"training.loss must be one of {', '.join(LOSS_MODES)}, got {mode!r}")
    if mode == "plain":
        return None, "loss: plain (training.loss), full-vocabulary logits"
    base = model.get_base_model() if hasattr(model, "peft_config") else model
    try:
        softcap = check_model(base)
    except ValueError as err:
        if mode == "chunked":
            raise ValueError(f"training.loss: chunked cannot train {type(base).__name__}: {err}; set training.loss: "
                             "plain (or auto)") from None
        return None, f"loss: plain (training.loss auto: {err})"
    from yunshan.training.engines import full_shape

    vocab = full_shape(head_modules(base)[-1].module.weight)[0]
    tokens = chunk_tokens_for(vocab, chunk_tokens)
    return ChunkedLoss(base, tokens, softcap), (f"loss: chunked, {tokens} tokens x {vocab:,} logits at a time "
                                                 f"(training.loss {mode})")
