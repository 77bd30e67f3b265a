"""Training entry points (cpt, sft) on transformers' Trainer, and the pieces they share (models, checkpoints,
monitoring)."""
