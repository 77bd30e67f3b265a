"""Experiment tracking: transformers' own reporting integrations (TensorBoard, Weights & Biases, MLflow, SwanLab),
chosen by `training.report_to` in a recipe, with the run name, the resolved recipe as parameters and yunshan's own
metrics beside the Trainer's.

    yunshan cpt --config RECIPE.yaml 'training.report_to=[tensorboard,mlflow]' training.run_name=fin-cpt-1
    tensorboard --logdir runs/cpt/tensorboard

The Trainer logs loss, learning rate and gradient norm to every integration; yunshan adds its own numbers to the
same log calls, so every tracker shows them under the same step: per-source losses (SFT: `loss_<source>`), the
realised token share of every source (CPT: `token_share_<source>`) and held-out bits per character (the forgetting
monitor: `bpc_<set>`). At the start of training the resolved recipe goes to each tracker in the form it keeps
parameters in (TensorBoard: a text panel `yunshan/recipe`; MLflow: one parameter per dotted recipe key, prefixed
`recipe.`, plus the YAML as the artifact recipe.yaml; W&B and SwanLab: a `recipe` mapping in the run config).
Where each tracker writes is its own setting (MLFLOW_TRACKING_URI, WANDB_PROJECT / WANDB_MODE, SWANLAB_PROJECT /
SWANLAB_MODE); TensorBoard writes to OUTPUT_DIR/tensorboard unless TENSORBOARD_LOGGING_DIR says otherwise.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
from pathlib import Path

from transformers import TrainerCallback

# report_to name -> (importable module, pip requirement)
TRACKERS = {"tensorboard": ("tensorboard", "tensorboard"), "wandb": ("wandb", "wandb"),
            "mlflow": ("mlflow", "mlflow-skinny"), "swanlab": ("swanlab", "swanlab")}


def check_report_to(report_to: list[str]) -> list[str]:
    """The integrations to pass to TrainingArguments: `none` (or nothing) is []; each name must be a tracker
    yunshan supports and its package installed."""
    names = [n for n in report_to if n != "none"]  # names were checked when the recipe loaded (TrainArgs)
    for name in names:
        module, requirement = TRACKERS[name]
        if importlib.util.find_spec(module) is None:
            raise ValueError(f"training.report_to includes {name} but {module} is not installed: pip install "
                             f"'yunshan[{name}]' (or {requirement}), or remove it from training.report_to")
    return list(dict.fromkeys(names))


def flatten_recipe(recipe) -> dict[str, object]:
    """{dotted key: scalar} of a recipe dataclass (lists by index, None as the string "null")."""
    flat: dict[str, object] = {}

    def walk(value, path):
        if dataclasses.is_dataclass(value):
            value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        if isinstance(value, dict):
            for key, item in value.items():
                walk(item, f"{path}.{key}" if path else str(key))
        elif isinstance(value, (list, tuple)):
            if not value:
                flat[path] = "[]"
            for i, item in enumerate(value):
                walk(item, f"{path}.{i}")
        else:
            flat[path] = "null" if value is None else value

    walk(recipe, "")
    return flat


def recipe_as_dict(recipe) -> dict:
    return dataclasses.asdict(recipe)


def attach(trainer, recipe, out: Path) -> None:
    """Point the integrations of `trainer` at this run (TensorBoard: OUTPUT_DIR/tensorboard unless
    TENSORBOARD_LOGGING_DIR is set) and add the callback that gives each the resolved recipe."""
    from transformers.integrations import TensorBoardCallback

    for callback in trainer.callback_handler.callbacks:
        if isinstance(callback, TensorBoardCallback) and not os.environ.get("TENSORBOARD_LOGGING_DIR"):
            callback.logging_dir = str(out / "tensorboard")
    if trainer.args.report_to:
        trainer.add_callback(RecipeToTrackers(trainer, recipe))


class RecipeToTrackers(TrainerCallback):
    """At the start of training (after the integrations set up their runs), the resolved recipe to each tracker."""

    MLFLOW_MAX_VALUE = 6000  # MLflow's limit on a parameter value's length (longer values are left to the artifact)
    MLFLOW_BATCH = 100  # parameters per log_params call (MLflow's limit)

    def __init__(self, trainer, recipe):
        self.trainer = trainer
        self.recipe = recipe

    def on_train_begin(self, args, state, control, **kwargs):
        if not state.is_world_process_zero:
            return
        from transformers.integrations import MLflowCallback, TensorBoardCallback, WandbCallback
        from transformers.integrations.integration_utils import SwanLabCallback

        import yaml

        text = yaml.safe_dump(recipe_as_dict(self.recipe), sort_keys=False, allow_unicode=True)  # as recipe.yaml
        for callback in self.trainer.callback_handler.callbacks:
            if isinstance(callback, TensorBoardCallback) and callback.tb_writer is not None:
                # Markdown in TensorBoard's text panel: indented lines render as a code block.
                callback.tb_writer.add_text("yunshan/recipe", "".join(f"    {line}\n" for line in
                                                                      text.splitlines()), state.global_step)
                callback.tb_writer.flush()
            elif isinstance(callback, MLflowCallback) and getattr(callback, "_initialized", False):
                mlflow = callback._ml_flow
                if mlflow.active_run() is None:
                    continue
                params = {f"recipe.{k}": v for k, v in flatten_recipe(self.recipe).items()
                          if len(str(v)) <= self.MLFLOW_MAX_VALUE}
                items = list(params.items())
                for i in range(0, len(items), self.MLFLOW_BATCH):
                    mlflow.log_params(dict(items[i:i + self.MLFLOW_BATCH]))
                mlflow.log_text(text, "recipe.yaml")
            elif isinstance(callback, WandbCallback) and getattr(callback, "_initialized", False):
                callback._wandb.config.update({"recipe": recipe_as_dict(self.recipe)}, allow_val_change=True)
            elif isinstance(callback, SwanLabCallback) and getattr(callback, "_initialized", False):
                callback._swanlab.config.update({"recipe": recipe_as_dict(self.recipe)})
