"""Training engines (one process, DDP, DeepSpeed ZeRO-2/3, FSDP2) and the parameters outside them.

    accelerate launch --config_file recipes/accelerate/deepspeed_zero3_cpu.yaml -m yunshan.cli cpt --config RECIPE.yaml

`yunshan cpt` and `yunshan sft` run on transformers' Trainer, which takes its engine from `accelerate launch`
(recipes/accelerate/). Inside a training step the engine owns the weights; outside it (growing the embeddings for an
extended tokenizer and initialising the new rows, the embedding warm-up's output-row fit and its new-row masking,
the forgetting monitor, merging LoRA, saving) yunshan reads and writes them itself, and what it finds there depends
on the engine:

- **one process, DDP, DeepSpeed ZeRO-1/2**: every process holds every whole tensor. ZeRO-2 shards only the optimizer
  state and the gradients.
- **DeepSpeed ZeRO-3**: cpt.py and sft.py build the TrainingArguments before the model, so transformers loads it
  inside `deepspeed.zero.Init` (a 7B model never exists whole in one process). Every rank's parameter then has local
  shape (0,) (its full shape is `param.ds_shape`); reading it gives nothing and writing it writes garbage that the
  engine never sees. `gathered` makes the tensors whole for a block (a collective: every rank enters it) and, when
  the block writes, copies rank 0's values back into every rank's partition. The forward passes of the engine's
  module gather on their own once training runs (DeepSpeed's hooks); before that (the step-0 cost, the fit) the
  whole model is gathered for them: one full copy per device, before any optimizer state exists.
- **FSDP2**: accelerate shards the model inside `Trainer.train` (`fully_shard`), so everything before training sees
  whole tensors. With `fsdp_cpu_ram_efficient_loading` only rank 0 loads the weights (the other ranks hold meta
  tensors until accelerate broadcasts rank 0's state dict when it shards), so work on weights before training is
  done where `holds_weights` is true, and the result travels with rank 0's state dict. After sharding, parameters
  are DTensors; forward passes are collectives every rank runs (the monitor runs on every rank).

After training, `final_model` gathers the full state dict (DeepSpeed's 16-bit consolidated state dict under ZeRO-3,
torch's full state dict under FSDP2) and loads it into a plain copy of the model on the main process, where LoRA is
merged, the model saved and the SFT generations produced. Written by hand: the engines provide the gathering, no
library decides where a training script needs it.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import asdict, dataclass

import torch


@dataclass(frozen=True)
class Engine:
    """The engine a run trains with, as recorded in the data report."""

    name: str                    # single, ddp, deepspeed, fsdp
    processes: int
    zero_stage: int | None = None
    zero_init: bool = False      # the model was built inside deepspeed.zero.Init (its parameters partitioned)
    fsdp_version: int | None = None

    @property
    def shards_weights(self) -> bool:
        """Whether no process holds the whole model once training runs (ZeRO-3, FSDP)."""
        return self.zero_stage == 3 or self.name == "fsdp"

    def to_dict(self) -> dict:
        return {**asdict(self), "shards_weights": self.shards_weights}


def _env_flag(name: str) -> bool:
    return os.environ.get(name, "false").lower() == "true"


def check_lora_rows_of_tied_model(tied: bool, mode: str) -> None:
    """Stop with the way out when an FSDP launch with RAM-efficient loading meets LoRA training the new rows of a
    tied model: accelerate then re-ties the model with transformers' `tie_weights`, which cannot reach through
    PEFT's wrappers of embed_tokens and lm_head (modules_to_save: "attribute 'weight' already exists"; trainable
    token indices: "`model.embed_tokens.weight` is neither a parameter, buffer, nor extra state"), with accelerate
    1.15, transformers 5.24 and PEFT 0.21."""
    if tied and mode in ("rows", "indices") and _env_flag("ACCELERATE_USE_FSDP") and \
            _env_flag("FSDP_CPU_RAM_EFFICIENT_LOADING"):
        raise ValueError(
            f"lora.new_token_training: {mode} on a model with tied embeddings cannot be prepared by FSDP with "
            "fsdp_cpu_ram_efficient_loading (accelerate re-ties the weights through PEFT's wrappers and fails): set "
            "fsdp_cpu_ram_efficient_loading: false in the launch config (every process then loads the whole model "
            "once), train the new rows with full fine-tuning (lora.enabled: false), or launch with DeepSpeed")


def engine_of(accelerator, model=None) -> Engine:
    """The engine of a Trainer's accelerator; `model` (the loaded model) tells whether zero.Init partitioned it.

    Raises ValueError when the launch asked for FSDP and accelerate set up something else: accelerate enables FSDP
    only on GPUs and other accelerators (on a CPU-only machine its process group is MULTI_CPU, for which
    AcceleratorState never sets FSDP), and training would silently replicate the whole model in every process."""
    from accelerate.utils import DistributedType

    kind = accelerator.distributed_type
    if _env_flag("ACCELERATE_USE_FSDP") and kind != DistributedType.FSDP:
        raise ValueError(
            f"the launch config asks for FSDP but accelerate set up {kind.value}: accelerate enables FSDP only on "
            "GPUs and other accelerators, so here every process would hold and train the whole model; on a machine "
            "without GPUs launch with recipes/accelerate/ddp_cpu.yaml, deepspeed_zero2_cpu.yaml or "
            "deepspeed_zero3_cpu.yaml")
    processes = accelerator.num_processes
    if kind == DistributedType.DEEPSPEED:
        stage = accelerator.state.deepspeed_plugin.zero_stage
        partitioned = model is not None and any(is_partitioned(p) for p in model.parameters())
        return Engine("deepspeed", processes, zero_stage=stage, zero_init=partitioned)
    if kind == DistributedType.FSDP:
        return Engine("fsdp", processes, fsdp_version=2 if accelerator.is_fsdp2 else 1)
    return Engine("ddp" if processes > 1 else "single", processes)


def is_partitioned(param: torch.Tensor) -> bool:
    """A DeepSpeed ZeRO-3 parameter (its local tensor holds at most one slice of it)."""
    return hasattr(param, "ds_id")


def full_shape(param: torch.Tensor) -> torch.Size:
    """The shape of the whole parameter: `ds_shape` for a ZeRO-3 partition (whose local shape is (0,)), else its
    shape (a DTensor's shape is already the global one)."""
    return param.ds_shape if is_partitioned(param) else param.shape


def holds_weights(model) -> bool:
    """Whether this process holds the values of the model's weights (not meta tensors: FSDP's RAM-efficient loading
    gives them to rank 0 only). A ZeRO-3 partition counts: `gathered` fetches the values."""
    return not any(p.is_meta for p in model.parameters())


def named_parameters(model) -> dict[str, torch.nn.Parameter]:
    """The model's parameters by name as the engine holds them between steps. FSDP2 modules are resharded first:
    after a forward (the forgetting monitor's, say) a module that does not reshard after forward lists its temporary
    whole tensors, whose `requires_grad` FSDP overwrites from the sharded parameter at the next all-gather."""
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:  # a torch without FSDP2
        FSDPModule = ()
    for module in model.modules():
        if isinstance(module, FSDPModule):
            module.reshard()
    return dict(model.named_parameters())


@contextlib.contextmanager
def gathered(params, modify: bool = False):
    """Inside the block, every ZeRO-3 partition among `params` is the whole tensor (a no-op for other tensors).

    A collective under ZeRO-3: every rank must enter the block with the same parameters. `modify=True` when the
    block writes them: on exit rank 0's values are copied into every rank's partition (so every rank should compute
    the same values, and rank 0's are the ones kept)."""
    params = [p for p in params if is_partitioned(p)]
    if not params:
        yield
        return
    import deepspeed

    with deepspeed.zero.GatheredParameters(params, modifier_rank=0 if modify else None):
        yield


@contextlib.contextmanager
def without_zero_init():
    """Build models as plain whole tensors while a ZeRO-3 config is active (transformers and PEFT would otherwise
    partition them, or run collectives that only the main process reaches)."""
    from transformers.integrations import deepspeed as hf_deepspeed

    ref = hf_deepspeed._hf_deepspeed_config_weak_ref
    config = ref() if ref is not None else None
    if config is None:
        yield
        return
    hf_deepspeed.unset_hf_deepspeed_config()
    try:
        yield
    finally:
        hf_deepspeed.set_hf_deepspeed_config(config)


def final_model(trainer):
    """The trained model with whole tensors on the main process (None on the others): the engine's own module when
    every process holds it whole, else a plain copy loaded with the gathered full state dict. A collective: every
    process must call it."""
    accelerator = trainer.accelerator
    model = accelerator.unwrap_model(trainer.model)
    engine = engine_of(accelerator)
    if not engine.shards_weights:
        return model if accelerator.is_main_process else None
    wrapped = trainer.model_wrapped if engine.name == "deepspeed" else trainer.model
    state = accelerator.get_state_dict(wrapped)
    if not accelerator.is_main_process:
        return None
    plain = plain_copy(model)
    plain.load_state_dict(state, strict=True)
    plain.eval()
    return plain


def plain_copy(model):
    """A freshly built model of the same class, config and (for PEFT) adapter layout, with ordinary tensors."""
    peft_config = getattr(model, "peft_config", None)
    base = model.get_base_model() if peft_config else model
    dtype = next((p.dtype for p in model.parameters() if p.is_floating_point()), torch.float32)
    with without_zero_init():
        plain = type(base)(base.config).to(dtype)
        if peft_config:
            from peft import get_peft_model

            from yunshan.loading.pretrained import activation_checkpointing_alias

            name = next(iter(peft_config))
            with activation_checkpointing_alias():
                plain = get_peft_model(plain, peft_config[name], adapter_name=name)
    return plain


def reset_optimizer_state(optimizer, groups: list[int]) -> None:
    """Forget the optimizer state (Adam's moments and step) of the param groups `groups`, so that each of their
    parameters starts it afresh at its next step, as torch's optimizers do for a parameter seen for the first time.

    `optimizer` is the Trainer's (accelerate's wrapper around DeepSpeed's or torch's). DeepSpeed's ZeRO optimizers
    keep the state of flat float32 partitions: ZeRO-1/2 one per group, listed in the group's params; ZeRO-3 one per
    sub-group (`fp32_partitioned_groups_flat`, each sub-group's group in `sub_group_to_group_id`), and its groups list
    no params between steps."""
    chain = [optimizer]
    while hasattr(chain[-1], "optimizer"):
        chain.append(chain[-1].optimizer)
    torch_optimizer = chain[-1]
    zero3 = next((o for o in chain if hasattr(o, "fp32_partitioned_groups_flat")), None)
    if zero3 is not None:
        tensors = [flat for sub, flat in enumerate(zero3.fp32_partitioned_groups_flat)
                   if zero3.sub_group_to_group_id[sub] in groups]
    else:
        tensors = [p for i in groups for p in torch_optimizer.param_groups[i]["params"]]
    for tensor in tensors:
        torch_optimizer.state.pop(tensor, None)
