"""Training entry points (cpt, sft) on transformers' Trainer, and the pieces they share (models, checkpoints,
monitoring, the embedding warm-up, engines: what DDP, DeepSpeed ZeRO-2/3 and FSDP2 ask of code outside the step)."""
