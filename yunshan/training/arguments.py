"""The recipe sections `yunshan cpt` and `yunshan sft` share (model, tokenizer, training, lora), and transformers'
TrainingArguments built from the `training` section.

    yunshan cpt --config RECIPE.yaml model.name_or_path=models/base training.learning_rate=1e-4 lora.enabled=true

Each section is a dataclass with help on every field; the stage recipes (yunshan.training.cpt.CptArgs,
yunshan.training.sft.SftArgs) and the pipeline (yunshan.pipeline) are trees of these, loaded by
yunshan.arguments.recipe.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from yunshan.loading.precision import precision_name
from yunshan.arguments.field_rules import check_fields

# training.report_to: the trackers yunshan passes to transformers' Trainer (yunshan.training.tracking).
REPORT_TO = ("tensorboard", "wandb", "mlflow", "swanlab", "none")


@dataclass
class ModelArgs:
    """The model to train."""

    name_or_path: str | None = field(
        default=None, metadata={"path": True,
            "help": "any HF causal LM: a folder (save_pretrained) or a Hub id ORG/NAME (downloaded "
                                        "to the HF cache unless HF_HUB_OFFLINE=1; yunshan.loading.hub_download)"})
    revision: str | None = field(
        default=None, metadata={"help": "branch, tag or commit of a Hub id in name_or_path (default: its main branch)"})
    preset: str | None = field(
        default=None, metadata={"help": "instead of a folder: build a PanGu-π from a preset (pangu-pi-1b, tiny, ...)"})
    config_overrides: dict | None = field(
        default=None, metadata={"help": "config fields to change when building from a preset"})
    init_seed: int = field(default=0, metadata={"range": "[0, 4294967295]",
        "help": "seed for the initial weights of a preset model"})
    dtype: str = field(default="float32", metadata={
        "help": "dtype to load weights in: float32, bfloat16, float16 or auto (float32); yunshan.loading.precision"})
    attn_implementation: str = field(default="sdpa", metadata={"help": "eager or sdpa (or any transformers backend)"})
    trust_remote_code: bool = field(default=False, metadata={"help": "allow a model folder's own modeling code"})

    def __post_init__(self):
        check_fields(self)
        if (self.name_or_path is None) == (self.preset is None):
            raise ValueError("give exactly one of model.name_or_path or model.preset")
        self.dtype = precision_name(self.dtype, "model.dtype")

@dataclass
class TokenizerArgs:
    path: str | None = field(default=None, metadata={"path": True,
        "help": "tokenizer folder or Hub id (default: the model's)"})
    revision: str | None = field(default=None, metadata={"help": "branch, tag or commit of a Hub id in path"})
    base_path: str | None = field(
        default=None,
        metadata={"path": True,
            "help": "the model's original tokenizer (folder or Hub id), for subword-mean initialisation "
                          "of new rows (default: the model's when it has one)"})
    new_row_init: str = field(default="subword_mean", metadata={
        "help": "first value of each new embedding row: subword_mean (the mean of its pieces' rows, FVT), mean, "
                "random (tokenizer/README.md has the measured comparison)"})

    def __post_init__(self):
        check_fields(self)
        if self.new_row_init not in ("subword_mean", "mean", "random"):
            raise ValueError(f"tokenizer.new_row_init must be subword_mean, mean or random, got {self.new_row_init!r}")


@dataclass
class TrainArgs:
    """Optimisation, schedule, checkpoints and logging (transformers' Trainer underneath)."""

    output_dir: str = field(default="runs/cpt", metadata={"path": True, "help": "run folder: model, logs, checkpoints"})
    max_steps: int | None = field(default=None, metadata={"range": ">= 1",
        "help": "optimizer steps in all, the embedding warm-up of an extended vocabulary included (default 1000; "
                "for SFT with epochs, the steps those take). Given, it wins over epochs, as in transformers' Trainer"})
    per_device_batch_size: int = field(default=8, metadata={"range": ">= 1",
        "help": "sequences per process per micro-step"})
    gradient_accumulation_steps: int = field(default=1, metadata={"range": ">= 1",
        "help": "micro-steps per optimizer step"})
    learning_rate: float = field(default=1e-4, metadata={"range": ">= 0", "help": "peak learning rate"})
    min_lr_ratio: float = field(default=0.1, metadata={"range": "[0, 1]",
        "help": "cosine decays to learning_rate * min_lr_ratio"})
    lr_scheduler: str = field(default="cosine", metadata={"help": "cosine (to min_lr_ratio), linear or constant"})
    warmup_steps: int = field(default=0, metadata={"range": ">= 0", "help": "linear warm-up steps"})
    adam_beta1: float = field(default=0.9, metadata={"range": "[0, 1)", "help": "AdamW beta1 (paper: 0.9)"})
    adam_beta2: float = field(default=0.95, metadata={"range": "[0, 1)", "help": "AdamW beta2 (paper: 0.95)"})
    adam_epsilon: float = field(default=1e-8, metadata={"range": "> 0", "help": "AdamW epsilon"})
    weight_decay: float = field(default=0.1, metadata={"range": ">= 0", "help": "AdamW weight decay"})
    max_grad_norm: float = field(default=1.0, metadata={"range": ">= 0", "help": "gradient clipping norm"})
    gradient_checkpointing: bool = field(default=False, metadata={"help": "recompute activations to save memory"})
    loss: str = field(default="auto", metadata={
        "help": "how the next-token loss is computed: chunked (the output head and cross-entropy a chunk of tokens at "
                "a time, gradients included: the full-vocabulary logits are never made; the same loss and gradients), "
                "plain (the model's own: logits of every token), auto (chunked where yunshan reproduces the model's "
                "loss, plain elsewhere; the log says which); yunshan.training.chunked_loss. yunshan pref: DPO and "
                "KTO score through TRL's own chunked head whatever this says, ORPO and SimPO take plain"})
    loss_chunk_tokens: int | None = field(default=None, metadata={"range": ">= 1",
        "help": "tokens per chunk of the chunked loss (default: 8 Mi logits' worth, 170 tokens of a 49,152-entry "
                "vocabulary)"})
    precision: str = field(default="auto", metadata={
        "help": "auto (bfloat16 autocast where the hardware multiplies bf16 fast, else float32), float32, bfloat16 or "
                "float16 (fp32, bf16, fp16 mean the same); yunshan.loading.precision"})
    logging_steps: int = field(default=10, metadata={"range": ">= 1", "help": "log every N steps"})
    save_steps: int = field(default=500, metadata={"range": ">= 1", "help": "checkpoint every N steps"})
    save_total_limit: int = field(default=2, metadata={"range": ">= 1", "help": "complete checkpoints to keep"})
    resume: str = field(default="auto", metadata={"path": True,
        "help": "auto (newest complete checkpoint, if any), never, or a path"})
    seed: int = field(default=42, metadata={"range": "[0, 4294967295]",
        "help": "seed of the model-side randomness (dropout, LoRA init)"})
    report_to: list[str] = field(default_factory=list, metadata={
        "help": "experiment trackers, as transformers' report_to: tensorboard (output_dir/tensorboard), wandb, "
                "mlflow, swanlab, or none (the default); yunshan.training.tracking"})
    run_name: str | None = field(default=None, metadata={
        "help": "run name shown by the trackers (default: the output folder's name)"})
    epochs: float | None = field(
        default=None, metadata={"range": "> 0",
        "help": "SFT only: passes over the data; max_steps is computed from it unless "
                                        "max_steps is given (which wins)"})
    neftune_noise_alpha: float | None = field(
        default=None, metadata={"range": ">= 0", "help": "SFT only: NEFTune noise on the input embeddings (e.g. 5)"})
    deepspeed: str | None = field(default=None, metadata={"path": True,
        "help": "DeepSpeed JSON config (with accelerate launch)"})
    fsdp: str | None = field(default=None, metadata={"help": "FSDP options for transformers (e.g. 'full_shard auto_wrap')"})
    fsdp_config: dict | None = field(default=None, metadata={"help": "FSDP config mapping for transformers"})

    def __post_init__(self):
        check_fields(self)
        if self.lr_scheduler not in ("cosine", "linear", "constant"):
            raise ValueError(f"training.lr_scheduler must be cosine, linear or constant, got {self.lr_scheduler!r}")
        self.precision = precision_name(self.precision, "training.precision")
        if self.loss not in ("auto", "chunked", "plain"):
            raise ValueError(f"training.loss must be auto, chunked or plain, got {self.loss!r}")
        for name in self.report_to:
            if name not in REPORT_TO:
                raise ValueError(f"training.report_to: {name!r} is not a tracker yunshan supports; valid: "
                                 f"{', '.join(REPORT_TO)}")
        if "none" in self.report_to and len(set(self.report_to)) > 1:
            raise ValueError(f"training.report_to {self.report_to}: 'none' cannot be combined with trackers")


    def total_steps(self) -> int:
        """training.max_steps, or the default when it is not given (SFT with epochs counts its own: sft_steps)."""
        return self.max_steps if self.max_steps is not None else DEFAULT_MAX_STEPS


DEFAULT_MAX_STEPS = 1000


# lora.init_lora_weights: PEFT's initialisations that need no data or quantisation config (eva, corda and loftq do).
LORA_INITS = ("default", "gaussian", "pissa", "pissa_niter_N", "olora", "orthogonal")
# The initialisations that move part of each weight into the adapter (PiSSA, OLoRA): the base in memory is then the
# residual, so the adapter is saved converted to a plain LoRA adapter of the unchanged base (models.save_adapter).
MUTATING_INITS = ("pissa", "olora")


@dataclass
class LoraArgs:
    """LoRA adapters (PEFT) instead of full fine-tuning, with the new vocabulary rows trainable, and LoRA's variants
    as PEFT implements them: DoRA, rsLoRA, PiSSA / OLoRA initialisation, LoRA+."""

    enabled: bool = field(default=False, metadata={"help": "train LoRA adapters instead of all weights"})
    r: int = field(default=16, metadata={"range": ">= 1", "help": "LoRA rank"})
    alpha: int = field(default=32, metadata={"range": "> 0",
        "help": "LoRA alpha: the adapter is scaled by alpha / r (rsLoRA: alpha / sqrt(r))"})
    dropout: float = field(default=0.05, metadata={"range": "[0, 1)", "help": "LoRA dropout"})
    target_modules: list[str] | str | None = field(
        default=None, metadata={"help": "module names to adapt (a list, each the module's name or its last dotted "
                                        "parts), or all-linear: every linear layer but the output head (PEFT's rule; "
                                        "the default)"})
    use_dora: bool = field(default=False, metadata={
        "help": "DoRA (Liu et al. 2024, arXiv:2402.09353): each adapted weight is split into a magnitude vector, "
                "trained, and a direction that LoRA adapts; each step recomputes the weight's norm (slower), and it "
                "merges into plain weights like LoRA"})
    use_rslora: bool = field(default=False, metadata={
        "help": "rank-stabilised LoRA (Kalajdzievski 2023, arXiv:2312.03732): scale the adapter by alpha / sqrt(r) "
                "instead of alpha / r, so that large ranks keep learning"})
    init_lora_weights: str = field(default="default", metadata={
        "help": "how the adapter starts: default (A random, B zero: a no-op at step 0), gaussian, orthogonal, pissa "
                "(PiSSA, Meng et al. 2024, arXiv:2404.02948: the adapter takes each weight's r principal singular "
                "directions and the frozen base keeps the rest), pissa_niter_N (the same from N iterations of "
                "randomised SVD: much faster on large weights), olora (OLoRA, arXiv:2406.01775: an orthonormal QR basis "
                "of each weight). pissa and olora change the base weights in memory; the adapter is saved converted to "
                "a plain LoRA adapter of rank 2r for the unchanged base, and the merged model is exact either way"})
    loraplus_lr_ratio: float | None = field(default=None, metadata={"range": ">= 1",
        "help": "LoRA+ (Hayou et al. 2024, arXiv:2402.12354): the B matrices (and other 1-D trainable parameters, "
                "DoRA's magnitudes among them, as PEFT groups them) learn at this many times training.learning_rate, "
                "the A matrices and the new vocabulary rows at training.learning_rate (PEFT's "
                "create_loraplus_optimizer; the paper uses 16); unset: one learning rate for all"})
    new_token_training: str = field(
        default="auto", metadata={"help": "for an extended vocabulary: auto, rows (whole embed_tokens/lm_head), "
                                          "indices (only the new rows), none"})
    indices_threshold: int = field(default=512, metadata={"range": ">= 0",
        "help": "auto: up to this many new tokens -> indices"})

    def __post_init__(self):
        check_fields(self)
        import re

        if self.new_token_training not in ("auto", "rows", "indices", "none"):
            raise ValueError(f"lora.new_token_training must be auto, rows, indices or none, got "
                             f"{self.new_token_training!r}")
        if isinstance(self.target_modules, list) and "all-linear" in self.target_modules:
            if len(self.target_modules) > 1:
                raise ValueError(f"lora.target_modules {self.target_modules}: all-linear already takes every linear "
                                 "layer; give it alone or list module names")
            self.target_modules = "all-linear"
        if isinstance(self.target_modules, str) and self.target_modules != "all-linear":
            raise ValueError(f"lora.target_modules {self.target_modules!r}: give a list of module names "
                             f"([{self.target_modules}]) or all-linear")
        init = self.init_lora_weights
        if init not in LORA_INITS and not re.fullmatch(r"pissa_niter_\d+", str(init)):
            raise ValueError(f"lora.init_lora_weights {init!r} is not one of {', '.join(LORA_INITS)} "
                             "(N a whole number of SVD iterations)")

    @property
    def mutates_base(self) -> bool:
        """Whether the initialisation moves part of each base weight into the adapter (PiSSA, OLoRA)."""
        return str(self.init_lora_weights).startswith(MUTATING_INITS)

    def peft_init(self):
        """init_lora_weights as LoraConfig takes it (True for the default initialisation)."""
        return True if self.init_lora_weights == "default" else self.init_lora_weights


# ---------------------------------------------------------------- transformers' TrainingArguments


def resolve_resume(resume: str, ckpt_dir: Path) -> Path | None:
    """The checkpoint `training.resume` names: `auto` = the newest complete one (or none), `never` = none, else a
    path that must hold a complete checkpoint."""
    from yunshan.training.checkpoints import COMPLETE, latest_complete_checkpoint

    if resume == "auto":
        return latest_complete_checkpoint(ckpt_dir)
    if resume == "never":
        return None
    path = Path(resume)
    if not (path / COMPLETE).is_file():
        raise FileNotFoundError(f"training.resume={resume}: not a complete checkpoint folder")
    return path


def training_arguments(train, out: Path, ckpt_dir: Path, max_steps: int, precision: str, rank_zero: bool,
                       arguments_class=None, **extra):
    """TrainingArguments for the recipe's `training` section; `extra` adds the stage's own fields, and
    `arguments_class` is a subclass of TrainingArguments to build instead (TRL's DPOConfig, KTOConfig, ...)."""
    import torch
    from transformers import TrainingArguments

    from yunshan.training.tracking import check_report_to

    report_to = check_report_to(train.report_to)
    scheduler, scheduler_kwargs = {
        "cosine": ("cosine_with_min_lr", {"min_lr_rate": train.min_lr_ratio}),
        "linear": ("linear", {}),
        "constant": ("constant_with_warmup", {}),
    }[train.lr_scheduler]
    return (arguments_class or TrainingArguments)(
        output_dir=str(ckpt_dir),
        max_steps=max_steps,
        per_device_train_batch_size=train.per_device_batch_size,
        gradient_accumulation_steps=train.gradient_accumulation_steps,
        learning_rate=train.learning_rate,
        lr_scheduler_type=scheduler,
        lr_scheduler_kwargs=scheduler_kwargs,
        warmup_steps=train.warmup_steps,
        adam_beta1=train.adam_beta1,
        adam_beta2=train.adam_beta2,
        adam_epsilon=train.adam_epsilon,
        weight_decay=train.weight_decay,
        max_grad_norm=train.max_grad_norm,
        activation_checkpointing=train.gradient_checkpointing,
        bf16=precision == "bfloat16",
        fp16=precision == "float16",
        logging_steps=train.logging_steps,
        save_strategy="steps",
        save_steps=train.save_steps,
        save_total_limit=train.save_total_limit,
        seed=train.seed,
        report_to=report_to,
        run_name=train.run_name or out.resolve().name,
        use_cpu=not torch.cuda.is_available(),
        deepspeed=train.deepspeed,
        fsdp=train.fsdp or "",
        fsdp_config=train.fsdp_config,
        disable_tqdm=not rank_zero,
        use_cache=False,  # also lets transformers see packed documents in restarting position ids
        **extra,
    )
