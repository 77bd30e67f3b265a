"""Memory per device and compute of one training stage, from the model's shape: the formulas of docs/plan.md.

    from yunshan.plan.estimate import ModelShape, StageSetup, estimate_memory
    shape = ModelShape.from_config(preset_config("pangu-pi-7b"))
    estimate_memory(shape, StageSetup(micro_batch=2, seq_len=4096, gradient_checkpointing=True), "zero3", devices=8)

Everything is in bytes and counts; nothing is allocated (the model is built on the meta device). The figures are
model states (weights, gradients, optimizer states, each as the engine holds them), activations (what autograd saves
for the backward pass, counted from transformers' LLaMA code: docs/plan.md), the loss's own buffers, and the peak of
a training step, which is the larger of "all activations held, optimizer states and the head's gradient present"
(the start of the backward pass) and "all gradients present, activations freed" (the optimizer step).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

GiB = 1024 ** 3
ENGINES = ("single", "ddp", "zero2", "zero3", "fsdp2")
ENGINE_NAMES = {"single": "one process", "ddp": "DDP", "zero2": "DeepSpeed ZeRO-2", "zero3": "DeepSpeed ZeRO-3",
                "fsdp2": "FSDP2"}


# ---------------------------------------------------------------- the model's shape


@dataclass(frozen=True)
class ModelShape:
    """What the estimator needs of a causal LM, read from its config on the meta device."""

    model_type: str
    parameters: int                 # unique parameters (a tied head counted once)
    embedding: int                  # the input embedding (vocab x hidden)
    head: int                       # the output head when untied (0 when tied)
    vocab_size: int
    hidden_size: int
    intermediate_size: int
    num_layers: int
    num_heads: int
    num_kv_heads: int
    head_dim: int
    tied: bool
    largest_module: int             # parameters of the largest single module (DeepSpeed's largest_layer_params)
    layer_parameters: int           # parameters of one decoder layer (the largest)
    layer_linears: tuple = ()       # (name within a layer, in_features, out_features) of every linear in one layer
    layer_linear_parameters: int = 0  # weights of those linears (what 4-bit quantization stores in 4 bits)

    @classmethod
    def from_config(cls, config) -> "ModelShape":
        import torch
        from transformers import AutoModelForCausalLM

        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
        inner = model.get_decoder() if hasattr(model, "get_decoder") else model.model
        layers = list(getattr(inner, "layers", []))
        if not layers:
            raise ValueError(f"{type(model).__name__}: no decoder layers found (model.layers); yunshan plan reads "
                             "LLaMA-family decoders")
        embed = model.get_input_embeddings().weight
        head = model.get_output_embeddings()
        tied = head is not None and head.weight is embed
        largest = 0
        for module in model.modules():
            largest = max(largest, sum(p.numel() for p in module.parameters(recurse=False)))
        sizes = [sum(p.numel() for p in layer.parameters()) for layer in layers]
        biggest = layers[sizes.index(max(sizes))]
        linears = tuple((name, m.in_features, m.out_features) for name, m in biggest.named_modules()
                        if isinstance(m, torch.nn.Linear))
        text = config.get_text_config() if hasattr(config, "get_text_config") else config
        heads = text.num_attention_heads
        head_dim = getattr(text, "head_dim", None) or text.hidden_size // heads
        return cls(
            model_type=config.model_type,
            parameters=sum(p.numel() for p in model.parameters()),
            embedding=embed.numel(),
            head=0 if tied or head is None else head.weight.numel(),
            vocab_size=embed.shape[0],
            hidden_size=text.hidden_size,
            intermediate_size=getattr(text, "intermediate_size", 4 * text.hidden_size),
            num_layers=len(layers),
            num_heads=heads,
            num_kv_heads=getattr(text, "num_key_value_heads", None) or heads,
            head_dim=head_dim,
            tied=tied,
            largest_module=largest,
            layer_parameters=max(sizes),
            layer_linears=linears,
            layer_linear_parameters=sum(i * o for _, i, o in linears),
        )

    def with_vocab(self, vocab: int) -> "ModelShape":
        """The shape after the embedding (and an untied head) grow or shrink to `vocab` rows."""
        extra = (vocab - self.vocab_size) * self.hidden_size
        heads = 0 if self.tied else 1
        return replace(self, vocab_size=vocab, embedding=self.embedding + extra, head=self.head + heads * extra,
                       parameters=self.parameters + (1 + heads) * extra,
                       largest_module=max(self.largest_module, vocab * self.hidden_size))

    @property
    def matmul_parameters(self) -> int:
        """N of 6·N·D: every parameter a token's forward pass multiplies with, that is all but the input embedding
        (a lookup); a tied head multiplies, so its one copy counts."""
        return self.parameters - (0 if self.tied else self.embedding)

    def to_dict(self) -> dict:
        d = asdict(self)
        d["layer_linears"] = [list(x) for x in self.layer_linears]
        return d


# ---------------------------------------------------------------- one stage's setting


@dataclass(frozen=True)
class StageSetup:
    """How a stage trains, as far as memory and compute go."""

    micro_batch: int = 1                    # sequences per device per micro-step (per_device_batch_size)
    seq_len: int = 2048                     # tokens per sequence
    sequences_per_sample: int = 1           # DPO/ORPO/SimPO: 2 (chosen and rejected in one batch)
    gradient_checkpointing: bool = False
    lora: bool = False
    lora_r: int = 16
    lora_targets: tuple | None = None       # module names (last part); None: every linear in the layers
    lora_dropout: float = 0.0
    new_rows: int = 0                       # new vocabulary rows (already in the shape's vocab)
    new_row_training: str = "none"          # LoRA: rows (whole embed/head trained), indices (new rows only), none
    quantization_bits: int | None = None    # QLoRA: the frozen linears in 4 or 8 bits
    model_dtype: str = "float32"            # model.dtype: what single/DDP/FSDP keep the weights in
    precision: str = "bfloat16"             # compute precision (bf16 autocast on GPUs)
    loss: str = "chunked"                   # chunked (yunshan's: no full logits) or plain (the model's own)
    loss_chunk_tokens: int | None = None
    attention: str = "sdpa"                 # sdpa (no s x s matrix kept) or eager
    reference_copy: bool = False            # a frozen reference model in memory (DPO/KTO full fine-tuning, copy)
    reference_forward: bool = False         # a reference forward pass per sample (DPO, IPO, KTO)

    @property
    def tokens_per_micro_step(self) -> int:
        return self.micro_batch * self.seq_len * self.sequences_per_sample


def lora_parameters(shape: ModelShape, setup: StageSetup) -> int:
    """LoRA's A and B matrices: r x (in + out) for every adapted linear of every layer."""
    targets = setup.lora_targets
    total = 0
    for name, n_in, n_out in shape.layer_linears:
        if targets is None or any(name == t or name.endswith("." + t) for t in targets):
            total += setup.lora_r * (n_in + n_out)
    return total * shape.num_layers


def adapted_linears(shape: ModelShape, setup: StageSetup) -> list[tuple[str, int, int]]:
    targets = setup.lora_targets
    return [x for x in shape.layer_linears
            if targets is None or any(x[0] == t or x[0].endswith("." + t) for t in targets)]


def trainable_parameters(shape: ModelShape, setup: StageSetup) -> int:
    """Parameters the optimizer holds states for."""
    if not setup.lora:
        return shape.parameters
    rows = 0
    if setup.new_row_training == "rows":        # PEFT's modules_to_save: a trained copy of embed_tokens and lm_head
        rows = shape.embedding + shape.head
    elif setup.new_row_training == "indices":   # PEFT's trainable_token_indices: only the new rows
        rows = setup.new_rows * shape.hidden_size * (1 if shape.tied else 2)
    return lora_parameters(shape, setup) + rows


# ---------------------------------------------------------------- memory


DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
# bitsandbytes' 4-bit blocks: 64 weights share one absmax; double quantization stores the absmaxes in 8 bits with
# one float32 per 256 of them (Dettmers et al. 2023, QLoRA section 3): 0.5 + 1/64 + 4/(64*256) bytes per weight.
QUANT_BYTES = {4: 0.5 + 1 / 64 + 4 / (64 * 256), 8: 1.0 + 4 / 4096}


@dataclass
class Memory:
    """Bytes per device of one stage on one engine."""

    engine: str
    devices: int
    weights: float
    gradients: float
    optimizer: float
    activations: float              # with the setup's gradient checkpointing
    activations_other: float        # with it switched the other way
    loss_buffers: float             # the loss's transient buffers at the start of the backward pass
    gathered: float                 # ZeRO-3 / FSDP2: the unsharded layers in flight
    transient: float                # the optimizer step's temporaries (torch's foreach AdamW)
    peak: float
    detail: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def activation_bytes_per_token(shape: ModelShape, setup: StageSetup, compute: int, residual: int,
                               checkpointing: bool) -> float:
    """Bytes autograd saves per token for the backward pass (docs/plan.md, "Activations").

    Per decoder layer of a LLaMA-family model, counted from transformers' code and checked with autograd's
    saved-tensor hooks (tests/plan/test_estimate.py): the two RMSNorms each keep their input in float32 and the
    normalised value in the residual dtype; the matmul side keeps the q/k/v input, the rotated q and k and v for
    SDPA, SDPA's output (o_proj's input), the MLP input, and gate, SiLU(gate), up and their product
    (4 x intermediate). Eager attention adds the softmax (float32, and its cast) of every head.
    With checkpointing every layer keeps only its input, and one layer's activations exist during its recompute."""
    h, kv, inter = shape.hidden_size, shape.num_kv_heads * shape.head_dim, shape.intermediate_size
    attn = shape.num_heads * shape.head_dim
    # A norm keeps its normalised value only to compute its weight's gradient: LoRA freezes the norms.
    normalised = 0 if setup.lora else residual
    norms = 2 * (4 + normalised) * h
    matmul = compute * (h + attn + 2 * kv + attn + h + 4 * inter)
    if setup.attention == "eager":
        matmul += shape.num_heads * setup.seq_len * (4 + compute)
    if setup.lora:
        for _, n_in, _ in adapted_linears(shape, setup):
            matmul += compute * setup.lora_r          # lora_B's input, A(x)
            if setup.lora_dropout > 0:
                matmul += compute * n_in + n_in       # the dropped-out copy of x and its mask
    layer = norms + matmul
    body = shape.num_layers * (residual * h) + layer if checkpointing else shape.num_layers * layer
    # The final norm, and the head's input where the head is trained (the chunked loss keeps its own, loss_bytes).
    head_trained = not setup.lora or setup.new_row_training == "rows"
    return body + (4 + normalised) * h + (compute * h if head_trained else 0)


def loss_bytes(shape: ModelShape, setup: StageSetup, tokens: int, compute: int) -> tuple[float, float]:
    """(saved, transient) bytes of the next-token loss for `tokens` tokens.

    plain: transformers' ForCausalLMLoss upcasts the logits to float32 and keeps the log-softmax (4·V per token);
    the backward pass holds, beside it, its incoming gradient and the logits' gradient (8·V), and that gradient's
    cast back to 16 bits (compute·V) when the logits were 16-bit. chunked: the head's input gradient is kept
    (float32) and one chunk's logits, softmax and gradient exist at a time."""
    vocab = shape.vocab_size
    if setup.loss == "plain":
        return 4 * vocab * tokens, (8 + (compute if compute < 4 else 0)) * vocab * tokens
    chunk = setup.loss_chunk_tokens or max(1, (8 * 1024 * 1024) // vocab)
    return 4 * shape.hidden_size * tokens, 3 * 4 * vocab * min(chunk, tokens)


def estimate_memory(shape: ModelShape, setup: StageSetup, engine: str, devices: int = 1,
                    device: str = "gpu") -> Memory:
    """Bytes per device of one training step of `setup` on `engine` across `devices` processes.

    device="gpu": bf16 mixed precision as yunshan trains on GPUs (torch autocast over model.dtype weights for one
    process, DDP and FSDP2; DeepSpeed's bf16 mode for ZeRO); device="cpu": float32 throughout (the setting the
    benchmark checks on this machine)."""
    if engine not in ENGINES:
        raise ValueError(f"engine {engine!r}: valid engines are {', '.join(ENGINES)}")
    n = devices if engine != "single" else 1
    psi_t = trainable_parameters(shape, setup)
    full = not setup.lora
    frozen = 0 if full else shape.parameters
    # QLoRA: the decoder layers' linears are stored quantized; embeddings, head and norms stay in 16/32 bits.
    quantized = shape.layer_linear_parameters * shape.num_layers if setup.quantization_bits and not full else 0
    quant_bytes = quantized * QUANT_BYTES[setup.quantization_bits] if quantized else 0.0
    cpu = device == "cpu"
    deepspeed = engine in ("zero2", "zero3")
    p = 4 if cpu else (2 if deepspeed else DTYPE_BYTES[setup.model_dtype])
    compute = 4 if cpu or setup.precision == "float32" else 2
    residual = p if engine != "fsdp2" else compute
    if quantized:
        residual = compute
    detail: dict = {"trainable_parameters": psi_t, "frozen_parameters": frozen, "quantized_parameters": quantized,
                    "param_bytes": p, "compute_bytes": compute}
    gathered = transient = 0.0
    unquantized_frozen = frozen - quantized

    if engine in ("single", "ddp"):
        weights = p * (unquantized_frozen + psi_t) + quant_bytes
        gradients = p * psi_t * (2 if engine == "ddp" else 1)   # DDP's buckets hold a second copy of the gradients
        optimizer = 2 * p * psi_t                                # AdamW's exp_avg and exp_avg_sq in the param dtype
        if not cpu and p == 4 and compute == 2:
            # autocast keeps a bf16 copy of every weight it multiplies for the backward pass (not of 4-bit weights:
            # bitsandbytes' matmul keeps the packed weight and dequantizes again in the backward pass)
            weights += 2 * (shape.matmul_parameters - quantized + (psi_t if not full else 0))
        transient = 0 if cpu else p * psi_t                      # foreach AdamW: one temporary per state on GPUs
    elif engine == "zero2":
        # DeepSpeed's accounting (stage_1_and_2.py, estimate_zero2_model_states_mem_needs): 16-bit params whole;
        # per partition 16-bit grads 2, fp32 grads 4, fp32 master weights 4, Adam 8.
        weights = 2 * (unquantized_frozen + psi_t) + quant_bytes + 4 * psi_t / n
        gradients = 6 * psi_t / n
        optimizer = 8 * psi_t / n
    elif engine == "zero3":
        # stage3.py, estimate_zero3_model_states_mem_needs: 4 x the largest module (its 16-bit params and grads
        # gathered) + 18 bytes per parameter partitioned: 16-bit params 2, fp32 master 4, fp32 grads 4 (the 16-bit
        # gradients are reduced straight into the fp32 partition), Adam 8.
        gathered = 4 * shape.largest_module
        weights = (2 * (unquantized_frozen + psi_t) + quant_bytes + 4 * psi_t) / n
        gradients = 4 * psi_t / n
        optimizer = 8 * psi_t / n
    else:  # fsdp2: sharded params, grads and states in the model dtype; bf16 unsharded copies of the units in flight
        weights = (p * (unquantized_frozen + psi_t) + quant_bytes) / n
        gradients = p * psi_t / n
        optimizer = 2 * p * psi_t / n
        root = shape.embedding + shape.head
        gathered = compute * (root + 2 * shape.layer_parameters) + (4 * (root + shape.layer_parameters) if full else 0)
    if setup.reference_copy:
        ref = 2 if deepspeed else p
        weights += ref * shape.parameters / (n if engine in ("zero3", "fsdp2") else 1)

    tokens = setup.tokens_per_micro_step
    per_token = activation_bytes_per_token(shape, setup, compute, residual, setup.gradient_checkpointing)
    per_token_other = activation_bytes_per_token(shape, setup, compute, residual, not setup.gradient_checkpointing)
    loss_saved, loss_transient = loss_bytes(shape, setup, tokens, compute)
    activations = per_token * tokens + loss_saved
    activations_other = per_token_other * tokens + loss_saved
    # The head's weight gradient exists while the activations do (the chunked loss makes it in the forward pass,
    # the plain loss at the very start of the backward pass).
    head_trained = full or setup.new_row_training == "rows"
    grad_bytes = 2 if deepspeed else (compute if engine == "fsdp2" else p)   # as the gradient is first made, unsharded
    head_grad = grad_bytes * (shape.head or shape.embedding) if head_trained else 0.0
    start_of_backward = weights + optimizer + gathered + activations + loss_transient + head_grad
    optimizer_step = weights + optimizer + gradients + transient
    peak = max(start_of_backward, optimizer_step)
    detail.update(start_of_backward=start_of_backward, optimizer_step=optimizer_step,
                  activation_bytes_per_token=per_token, tokens_per_micro_step=tokens)
    return Memory(engine, n, weights, gradients, optimizer, activations, activations_other, loss_transient,
                  gathered, transient, peak, detail)


def usable_bytes(memory_gib: float) -> float:
    """What training can use of a device: 1 GiB for the CUDA context and NCCL, and 8% for the caching allocator's
    fragmentation (docs/plan.md)."""
    return memory_gib * GiB * 0.92 - GiB


def largest_micro_batch(shape: ModelShape, setup: StageSetup, engine: str, devices: int, limit: float,
                        cap: int = 4096) -> int:
    """The largest micro-batch whose peak fits in `limit` bytes (0: not even one sequence)."""
    lo, hi = 0, cap
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if estimate_memory(shape, replace(setup, micro_batch=mid), engine, devices).peak <= limit:
            lo = mid
        else:
            hi = mid - 1
    return lo


# ---------------------------------------------------------------- compute and time


def training_flops(shape: ModelShape, setup: StageSetup, tokens: int) -> dict:
    """FLOPs of training on `tokens` tokens (model FLOPs, as MFU counts them: recomputation left out).

    dense: 6·N·D for full fine-tuning (Kaplan et al. 2020; N = shape.matmul_parameters); with LoRA the frozen
    weights get no weight gradient: 4·N·D plus 6 per adapter parameter. attention: the score and value products,
    causal, 6·L·s·(heads·head_dim) per token (half of PaLM's 12·L·H·Q·T). reference: a DPO/KTO reference forward,
    2·N per token."""
    n = shape.matmul_parameters
    if setup.lora:
        dense = 4 * n * tokens + 6 * lora_parameters(shape, setup) * tokens
    else:
        dense = 6 * n * tokens
    attention = 6 * shape.num_layers * setup.seq_len * shape.num_heads * shape.head_dim * tokens
    reference = (2 * n + 2 * shape.num_layers * setup.seq_len * shape.num_heads * shape.head_dim) * tokens \
        if setup.reference_forward else 0
    return {"dense": dense, "attention": attention, "reference": reference, "total": dense + attention + reference}


def load_gpus() -> dict:
    """The accelerators of gpus.yaml, by name."""
    import yaml

    return yaml.safe_load((Path(__file__).with_name("gpus.yaml")).read_text(encoding="utf-8"))


def gpu_spec(name: str) -> dict:
    gpus = load_gpus()
    if name not in gpus:
        raise ValueError(f"--gpu {name!r} is not in yunshan/plan/gpus.yaml; valid: {', '.join(gpus)}")
    return {"key": name, **gpus[name]}


def seconds_for(flops: float, gpu: dict, devices: int, mfu: float) -> float:
    return flops / (devices * gpu["bf16_tflops"] * 1e12 * mfu)


def format_bytes(n: float) -> str:
    return f"{n / GiB:.1f}" if n >= 0.05 * GiB else f"{n / GiB:.2f}"


def format_duration(seconds: float) -> str:
    if not math.isfinite(seconds):
        return "?"
    if seconds >= 2 * 86400:
        return f"{seconds / 86400:.1f} d"
    if seconds >= 2 * 3600:
        return f"{seconds / 3600:.1f} h"
    if seconds >= 120:
        return f"{seconds / 60:.0f} min"
    return f"{seconds:.0f} s"
