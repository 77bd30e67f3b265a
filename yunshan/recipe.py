"""Recipes: YAML files loaded into dataclasses, with dotted command-line overrides.

    yunshan cpt --config recipes/pangu-pi-1b_cpt_full.yaml training.learning_rate=1e-4 data.seq_len=2048

A recipe is a tree of `*Args` dataclasses. Loading checks every key against the dataclass fields: an unknown key
is rejected by its full dotted path with the file and line and the valid keys listed; a value of the wrong type
names the path, line, expected type and the value. Overrides use the same dotted paths; list items are addressed
by index (`data.sources.0.weight=0.3`) or, for lists of named items, by name (`data.sources.finance.weight=0.3`).
The resolved recipe (after overrides and defaults) is saved beside every run's weights.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from pathlib import Path
from typing import Any

import yaml


class RecipeError(ValueError):
    """A recipe problem, with file, line and dotted path in the message."""


# ---------------------------------------------------------------- YAML with line numbers


def _compose_with_lines(text: str, filename: str) -> tuple[Any, dict[str, int]]:
    """Parse YAML and record the line of every dotted path (1-based)."""
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"{filename}:{mark.line + 1}" if mark else filename
        raise RecipeError(f"{where}: invalid YAML: {getattr(err, 'problem', err)}") from None
    lines: dict[str, int] = {}

    def walk(n, path):
        if n is None:
            return None
        lines[path] = n.start_mark.line + 1
        if isinstance(n, yaml.MappingNode):
            out = {}
            for key_node, value_node in n.value:
                key = key_node.value
                if key in out:
                    raise RecipeError(f"{filename}:{key_node.start_mark.line + 1}: duplicate key {_join(path, key)!r}")
                out[key] = walk(value_node, _join(path, key))
                lines[_join(path, key)] = key_node.start_mark.line + 1
            return out
        if isinstance(n, yaml.SequenceNode):
            return [walk(v, _join(path, str(i))) for i, v in enumerate(n.value)]
        return _scalar(n)

    return walk(node, ""), lines


def _scalar(node):
    loader = yaml.SafeLoader("")
    try:
        return loader.construct_object(node, deep=True)
    finally:
        loader.dispose()


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else str(key)


# ---------------------------------------------------------------- building dataclasses


def _type_name(tp) -> str:
    if tp is type(None):
        return "null"
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(tp))
    if origin is list:
        args = typing.get_args(tp)
        return f"list of {_type_name(args[0])}" if args else "list"
    if origin is dict:
        return "mapping"
    if origin is typing.Literal:
        return " | ".join(repr(a) for a in typing.get_args(tp))
    return getattr(tp, "__name__", str(tp))


class _Builder:
    def __init__(self, filename: str, lines: dict[str, int]):
        self.filename = filename
        self.lines = lines

    def where(self, path: str) -> str:
        # The closest recorded line: the path itself, or its nearest parent (0 = from the command line).
        p = path
        while p and p not in self.lines:
            p = p.rsplit(".", 1)[0] if "." in p else ""
        line = self.lines.get(p)
        if line == 0:
            return "command-line override"
        return f"{self.filename}:{line}" if line else self.filename

    def fail(self, path: str, message: str):
        raise RecipeError(f"{self.where(path)}: {path or '(top level)'}: {message}")

    def build(self, cls, data, path: str):
        if data is None:
            data = {}
        if not isinstance(data, dict):
            self.fail(path, f"expected a mapping of {cls.__name__} fields, got {type(data).__name__}")
        hints = typing.get_type_hints(cls)
        fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
        unknown = [k for k in data if k not in fields]
        if unknown:
            key = unknown[0]
            self.fail(_join(path, key), f"unknown key; valid keys here: {', '.join(fields)}")
        kwargs = {}
        for name, value in data.items():
            kwargs[name] = self.convert(hints[name], value, _join(path, name))
        missing = [
            n for n, f in fields.items()
            if n not in kwargs and f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        ]
        if missing:
            self.fail(_join(path, missing[0]), "required key is missing")
        try:
            return cls(**kwargs)
        except (ValueError, TypeError) as err:
            self.fail(path, str(err))

    def convert(self, tp, value, path: str):
        origin = typing.get_origin(tp)
        if origin in (typing.Union, types.UnionType):
            options = typing.get_args(tp)
            if value is None and type(None) in options:
                return None
            errors = []
            for option in options:
                if option is type(None):
                    continue
                try:
                    return self.convert(option, value, path)
                except RecipeError as err:
                    errors.append(err)
            if len(errors) == 1:
                raise errors[0]
            self.fail(path, f"expected {_type_name(tp)}, got {value!r}")
        if origin is typing.Literal:
            if value not in typing.get_args(tp):
                self.fail(path, f"must be one of {', '.join(map(repr, typing.get_args(tp)))}, got {value!r}")
            return value
        if dataclasses.is_dataclass(tp):
            return self.build(tp, value, path)
        if origin is list:
            if not isinstance(value, list):
                self.fail(path, f"expected {_type_name(tp)}, got {value!r}")
            (item,) = typing.get_args(tp) or (Any,)
            return [self.convert(item, v, _join(path, str(i))) for i, v in enumerate(value)]
        if origin is dict:
            if not isinstance(value, dict):
                self.fail(path, f"expected a mapping, got {value!r}")
            return dict(value)
        if tp is Any:
            return value
        if tp is bool:
            if isinstance(value, bool):
                return value
            if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no"):
                return value.lower() in ("true", "yes")
            self.fail(path, f"expected true or false, got {value!r}")
        if tp is int:
            if isinstance(value, bool) or not isinstance(value, (int, str)):
                self.fail(path, f"expected an integer, got {value!r}")
            try:
                return int(value)
            except ValueError:
                self.fail(path, f"expected an integer, got {value!r}")
        if tp is float:
            if isinstance(value, bool):
                self.fail(path, f"expected a number, got {value!r}")
            try:
                return float(value)  # also accepts "1e-4", which YAML 1.1 reads as a string
            except (TypeError, ValueError):
                self.fail(path, f"expected a number, got {value!r}")
        if tp is str:
            if isinstance(value, (dict, list)) or value is None:
                self.fail(path, f"expected a string, got {value!r}")
            return str(value)
        return value


# ---------------------------------------------------------------- overrides


def apply_override(data: dict, dotted: str, raw_value: str) -> None:
    """Set `dotted` (e.g. training.learning_rate or data.sources.finance.weight) in the raw recipe dict."""
    value = yaml.safe_load(raw_value) if raw_value != "" else ""
    keys = dotted.split(".")
    node = data
    for i, key in enumerate(keys):
        last = i == len(keys) - 1
        if isinstance(node, list):
            index = _list_index(node, key, ".".join(keys[: i + 1]))
            if last:
                node[index] = value
            else:
                node = node[index]
            continue
        if not isinstance(node, dict):
            raise RecipeError(f"override {dotted}: {'.'.join(keys[:i])} is not a mapping or list")
        if last:
            node[key] = value
        else:
            if node.get(key) is None:
                node[key] = {}
            node = node[key]


def _list_index(items: list, key: str, path: str) -> int:
    if key.lstrip("-").isdigit():
        index = int(key)
        if not -len(items) <= index < len(items):
            raise RecipeError(f"override {path}: index {index} out of range (the list has {len(items)} items)")
        return index
    for i, item in enumerate(items):
        if isinstance(item, dict) and item.get("name") == key:
            return i
    names = [item.get("name") for item in items if isinstance(item, dict) and "name" in item]
    raise RecipeError(f"override {path}: no item named {key!r}; names: {', '.join(map(str, names)) or 'none'}")


def parse_overrides(pairs: list[str]) -> list[tuple[str, str]]:
    out = []
    for pair in pairs:
        if "=" not in pair:
            raise RecipeError(f"override {pair!r}: expected key=value (for example training.learning_rate=1e-4)")
        key, value = pair.split("=", 1)
        out.append((key.strip(), value))
    return out


# ---------------------------------------------------------------- entry points


def load_recipe(cls, path: str | Path | None = None, overrides: list[str] | None = None, data: dict | None = None):
    """Build recipe dataclass `cls` from a YAML file (or a dict) plus `key=value` overrides."""
    lines: dict[str, int] = {}
    filename = str(path) if path is not None else "<recipe>"
    if path is not None:
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"recipe {path} does not exist")
        data, lines = _compose_with_lines(path.read_text(encoding="utf-8"), filename)
    data = data if data is not None else {}
    if not isinstance(data, dict):
        raise RecipeError(f"{filename}: a recipe must be a mapping at the top level")
    for key, value in parse_overrides(overrides or []):
        apply_override(data, key, value)
        lines[key] = 0  # an overridden value comes from the command line, not the file
    builder = _Builder(filename, lines)
    data = expand_variables(data, path_variables(Path(path).parent if path is not None else Path.cwd()), builder)
    return builder.build(cls, data, "")


def path_variables(recipe_dir: Path) -> dict[str, str]:
    """${...} variables usable in recipe strings."""
    import os

    from yunshan.samples import sample_data_dir

    return {
        "samples": str(sample_data_dir()),
        "data": os.environ.get("YUNSHAN_DATA", "data"),
        "models": os.environ.get("YUNSHAN_MODELS", "models"),
        "recipe_dir": str(recipe_dir.resolve()),
    }


def expand_variables(data, variables: dict[str, str], builder=None, path: str = ""):
    """Replace ${name} in every string of the raw recipe; an unknown name is an error naming the key."""
    import re

    if isinstance(data, dict):
        return {k: expand_variables(v, variables, builder, _join(path, k)) for k, v in data.items()}
    if isinstance(data, list):
        return [expand_variables(v, variables, builder, _join(path, str(i))) for i, v in enumerate(data)]
    if isinstance(data, str) and "${" in data:
        def replace(match):
            name = match.group(1)
            if name not in variables:
                message = f"unknown variable ${{{name}}}; known: {', '.join('${' + v + '}' for v in variables)}"
                if builder is not None:
                    builder.fail(path, message)
                raise RecipeError(f"{path}: {message}")
            return variables[name]

        return re.sub(r"\$\{([A-Za-z_]+)\}", replace, data)
    return data


def recipe_to_dict(recipe) -> dict:
    return dataclasses.asdict(recipe)


def save_recipe(recipe, path: str | Path, header: str | None = None) -> None:
    """Write the resolved recipe (every field, defaults included) as YAML."""
    text = yaml.safe_dump(recipe_to_dict(recipe), sort_keys=False, allow_unicode=True)
    Path(path).write_text((f"# {header}\n" if header else "") + text, encoding="utf-8")


def describe(cls, prefix: str = "") -> list[tuple[str, str, str]]:
    """(dotted key, type, help) for every field: for `--help-recipe` listings and docs."""
    rows = []
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        tp = hints[f.name]
        key = _join(prefix, f.name)
        if dataclasses.is_dataclass(tp):
            rows.extend(describe(tp, key))
            continue
        args = [a for a in typing.get_args(tp) if dataclasses.is_dataclass(a)]
        rows.append((key, _type_name(tp), f.metadata.get("help", "")))
        if typing.get_origin(tp) is list and args:
            rows.extend(describe(args[0], key + ".N"))
    return rows


# ================================================================ recipe schema
# Sections shared by the stages. `*Args` are recipe sections (saved as YAML beside the weights); `*Config` names
# are kept for objects saved with weights.

from dataclasses import dataclass, field  # noqa: E402

from .data.sources import SourceArgs  # noqa: E402


@dataclass
class ModelArgs:
    """The model to train."""

    name_or_path: str | None = field(
        default=None, metadata={"help": "folder of any HF causal LM (save_pretrained); offline, nothing downloads"})
    preset: str | None = field(
        default=None, metadata={"help": "instead of a folder: build a PanGu-π from a preset (pangu-pi-1b, tiny, ...)"})
    config_overrides: dict | None = field(
        default=None, metadata={"help": "config fields to change when building from a preset"})
    init_seed: int = field(default=0, metadata={"help": "seed for the initial weights of a preset model"})
    dtype: str = field(default="float32", metadata={"help": "dtype to load weights in: float32, bfloat16, float16, auto"})
    attn_implementation: str = field(default="sdpa", metadata={"help": "eager or sdpa (or any transformers backend)"})
    trust_remote_code: bool = field(default=False, metadata={"help": "allow a model folder's own modeling code"})

    def __post_init__(self):
        if (self.name_or_path is None) == (self.preset is None):
            raise ValueError("give exactly one of model.name_or_path or model.preset")
        if self.dtype not in ("float32", "bfloat16", "float16", "auto"):
            raise ValueError(f"model.dtype must be float32, bfloat16, float16 or auto, got {self.dtype!r}")


@dataclass
class TokenizerArgs:
    path: str | None = field(default=None, metadata={"help": "tokenizer folder (default: the model folder)"})
    base_path: str | None = field(
        default=None,
        metadata={"help": "the model's original tokenizer, for subword-mean initialisation of new rows "
                          "(default: the model folder when it holds a tokenizer)"})
    new_row_init: str = field(default="subword_mean", metadata={
        "help": "first value of each new embedding row: subword_mean (the mean of its pieces' rows, FVT), mean, "
                "random (tokenizer/README.md has the measured comparison)"})

    def __post_init__(self):
        if self.new_row_init not in ("subword_mean", "mean", "random"):
            raise ValueError(f"tokenizer.new_row_init must be subword_mean, mean or random, got {self.new_row_init!r}")


@dataclass
class CptDataArgs:
    """The mixture: sources with token weights, packed into fixed-length sequences."""

    sources: list[SourceArgs] = field(default_factory=list, metadata={"help": "corpus sources with weights"})
    seq_len: int = field(default=2048, metadata={"help": "tokens per packed training sequence"})
    document_mask: bool = field(
        default=False, metadata={"help": "restart positions per document and keep attention inside documents"})
    chunk_tokens: int | None = field(
        default=None, metadata={"help": "longest piece taken from one source at a time (default seq_len / 4); "
                                        "the token ratio holds to within 2 * chunk_tokens over any stretch"})
    block_size: int = field(default=1024, metadata={"help": "documents read, tokenised and shuffled together"})
    on_bad_record: str = field(default="fail", metadata={"help": "fail (stop with file, line, field) or skip (count)"})
    dedup: bool = field(default=False, metadata={"help": "drop exact duplicate documents (content hash), counted"})
    add_bos: str = field(default="auto", metadata={"help": "BOS before each document: auto (if the tokenizer "
                                                           "adds one by default), true or false"})
    seed: int = field(default=0, metadata={"help": "seed of the data order (shuffles, mixing)"})

    def __post_init__(self):
        if self.on_bad_record not in ("fail", "skip"):
            raise ValueError(f"data.on_bad_record must be fail or skip, got {self.on_bad_record!r}")
        if self.seq_len < 8:
            raise ValueError(f"data.seq_len must be >= 8, got {self.seq_len}")
        if self.add_bos not in ("auto", "true", "false", True, False):
            raise ValueError(f"data.add_bos must be auto, true or false, got {self.add_bos!r}")


@dataclass
class TrainArgs:
    """Optimisation, schedule, checkpoints and logging (transformers' Trainer underneath)."""

    output_dir: str = field(default="runs/cpt", metadata={"help": "run folder: model, logs, checkpoints"})
    max_steps: int = field(default=1000, metadata={"help": "optimizer steps"})
    per_device_batch_size: int = field(default=8, metadata={"help": "sequences per process per micro-step"})
    gradient_accumulation_steps: int = field(default=1, metadata={"help": "micro-steps per optimizer step"})
    learning_rate: float = field(default=1e-4, metadata={"help": "peak learning rate"})
    min_lr_ratio: float = field(default=0.1, metadata={"help": "cosine decays to learning_rate * min_lr_ratio"})
    lr_scheduler: str = field(default="cosine", metadata={"help": "cosine (to min_lr_ratio), linear or constant"})
    warmup_steps: int = field(default=0, metadata={"help": "linear warm-up steps"})
    adam_beta1: float = field(default=0.9, metadata={"help": "AdamW beta1 (paper: 0.9)"})
    adam_beta2: float = field(default=0.95, metadata={"help": "AdamW beta2 (paper: 0.95)"})
    adam_epsilon: float = field(default=1e-8, metadata={"help": "AdamW epsilon"})
    weight_decay: float = field(default=0.1, metadata={"help": "AdamW weight decay"})
    max_grad_norm: float = field(default=1.0, metadata={"help": "gradient clipping norm"})
    gradient_checkpointing: bool = field(default=False, metadata={"help": "recompute activations to save memory"})
    precision: str = field(default="auto", metadata={"help": "auto (bf16 where the hardware has it), fp32, bf16, fp16"})
    logging_steps: int = field(default=10, metadata={"help": "log every N steps"})
    save_steps: int = field(default=500, metadata={"help": "checkpoint every N steps"})
    save_total_limit: int = field(default=2, metadata={"help": "complete checkpoints to keep"})
    resume: str = field(default="auto", metadata={"help": "auto (newest complete checkpoint, if any), never, or a path"})
    seed: int = field(default=42, metadata={"help": "seed of the model-side randomness (dropout, LoRA init)"})
    tensorboard: bool = field(default=False, metadata={"help": "also log to TensorBoard (output_dir/tensorboard)"})
    epochs: float | None = field(
        default=None, metadata={"help": "SFT only: passes over the data; when set, max_steps is computed from it"})
    neftune_noise_alpha: float | None = field(
        default=None, metadata={"help": "SFT only: NEFTune noise on the input embeddings (e.g. 5)"})
    deepspeed: str | None = field(default=None, metadata={"help": "DeepSpeed JSON config (with accelerate launch)"})
    fsdp: str | None = field(default=None, metadata={"help": "FSDP options for transformers (e.g. 'full_shard auto_wrap')"})
    fsdp_config: dict | None = field(default=None, metadata={"help": "FSDP config mapping for transformers"})

    def __post_init__(self):
        if self.lr_scheduler not in ("cosine", "linear", "constant"):
            raise ValueError(f"training.lr_scheduler must be cosine, linear or constant, got {self.lr_scheduler!r}")
        for name in ("max_steps", "per_device_batch_size", "gradient_accumulation_steps", "logging_steps", "save_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"training.{name} must be >= 1, got {getattr(self, name)}")
        if self.precision not in ("auto", "fp32", "bf16", "fp16"):
            raise ValueError(f"training.precision must be auto, fp32, bf16 or fp16, got {self.precision!r}")


@dataclass
class LoraArgs:
    enabled: bool = field(default=False, metadata={"help": "train LoRA adapters instead of all weights"})
    r: int = field(default=16, metadata={"help": "LoRA rank"})
    alpha: int = field(default=32, metadata={"help": "LoRA alpha"})
    dropout: float = field(default=0.05, metadata={"help": "LoRA dropout"})
    target_modules: list[str] | None = field(
        default=None, metadata={"help": "module names to adapt (default: every linear layer but lm_head)"})
    new_token_training: str = field(
        default="auto", metadata={"help": "for an extended vocabulary: auto, rows (whole embed_tokens/lm_head), "
                                          "indices (only the new rows), none"})
    indices_threshold: int = field(default=512, metadata={"help": "auto: up to this many new tokens -> indices"})

    def __post_init__(self):
        if self.new_token_training not in ("auto", "rows", "indices", "none"):
            raise ValueError(f"lora.new_token_training must be auto, rows, indices or none, got "
                             f"{self.new_token_training!r}")


@dataclass
class MonitorArgs:
    """The forgetting monitor: held-out bits per character during training."""

    every_steps: int = field(default=100, metadata={"help": "measure every N steps (0 = only at start and end)"})
    general: list[str] = field(default_factory=list, metadata={"help": "held-out general text files"})
    domain: list[str] = field(default_factory=list, metadata={"help": "held-out domain text files"})
    max_chars: int = field(default=20000, metadata={"help": "characters of each held-out set to score"})
    max_length: int | None = field(default=None, metadata={"help": "scoring window (default data.seq_len)"})


from .training.embedding_warmup import EmbeddingWarmupArgs  # noqa: E402


@dataclass
class CptRecipe:
    """Continual pretraining: `yunshan cpt --config RECIPE.yaml [key=value ...]`."""

    model: ModelArgs = field(default_factory=lambda: ModelArgs(preset="tiny"))
    tokenizer: TokenizerArgs = field(default_factory=TokenizerArgs)
    data: CptDataArgs = field(default_factory=CptDataArgs)
    training: TrainArgs = field(default_factory=TrainArgs)
    lora: LoraArgs = field(default_factory=LoraArgs)
    monitor: MonitorArgs = field(default_factory=MonitorArgs)
    warmup: EmbeddingWarmupArgs = field(default_factory=EmbeddingWarmupArgs)


from .data.conversations import SftSourceArgs  # noqa: E402


@dataclass
class SftDataArgs:
    """The SFT mixture: instruction sources shuffled into one training set."""

    sources: list[SftSourceArgs] = field(default_factory=list, metadata={"help": "instruction sources"})
    max_length: int = field(default=2048, metadata={"help": "tokens per sample (per packed row with packing)"})
    overlong: str = field(
        default="truncate_prompt",
        metadata={"help": "a sample longer than max_length: truncate_prompt (drop the oldest turns; never cut "
                          "inside a trained answer) or drop; both counted"})
    packing: bool = field(default=False, metadata={"help": "best-fit pack whole samples into max_length rows"})
    on_bad_record: str = field(default="fail", metadata={"help": "fail (file, line, field) or skip (count)"})
    seed: int = field(default=0, metadata={"help": "seed of sampling, shuffling and packing"})
    max_new_tokens: int = field(default=128, metadata={"help": "tokens generated for each held-out prompt at the end"})

    def __post_init__(self):
        if self.overlong not in ("truncate_prompt", "drop"):
            raise ValueError(f"data.overlong must be truncate_prompt or drop, got {self.overlong!r}")
        if self.on_bad_record not in ("fail", "skip"):
            raise ValueError(f"data.on_bad_record must be fail or skip, got {self.on_bad_record!r}")


@dataclass
class SftRecipe:
    """Single-stage mixed SFT: `yunshan sft --config RECIPE.yaml [key=value ...]`."""

    model: ModelArgs = field(default_factory=lambda: ModelArgs(preset="tiny"))
    tokenizer: TokenizerArgs = field(default_factory=TokenizerArgs)
    data: SftDataArgs = field(default_factory=SftDataArgs)
    training: TrainArgs = field(default_factory=lambda: TrainArgs(output_dir="runs/sft", learning_rate=2e-5,
                                                                  weight_decay=0.0))
    lora: LoraArgs = field(default_factory=LoraArgs)


# ================================================================ the whole pipeline: `yunshan run RECIPE.yaml`



@dataclass
class BaseStageArgs:
    """Stand-in base model for machines that cannot download one (the demo): a BPE tokenizer trained on general
    text and a small PanGu-π pretrained on it. Real recipes leave this off and name a downloaded base model."""

    enabled: bool = field(default=False, metadata={"help": "build the stand-in base (instead of model.name_or_path)"})
    tokenizer_corpus: list[str] = field(default_factory=list, metadata={"help": "text for the base tokenizer"})
    vocab_size: int = field(default=4000, metadata={"help": "base tokenizer vocabulary (byte-level BPE)"})
    model: ModelArgs = field(default_factory=lambda: ModelArgs(preset="tiny"))
    data: CptDataArgs = field(default_factory=CptDataArgs)
    training: TrainArgs = field(default_factory=TrainArgs)


@dataclass
class TokenizerStageArgs:
    """Vocabulary extension (yunshan.tokenizer): continued BPE on domain text plus curated word lists."""

    enabled: bool = field(default=True, metadata={"help": "extend the base tokenizer"})
    corpus: list[str] = field(default_factory=list, metadata={"help": "domain corpus files for the domain BPE"})
    words: list[str] = field(default_factory=lambda: ["builtin:finance", "builtin:legal"],
                             metadata={"help": "word lists (files or builtin:finance / builtin:legal)"})
    new_tokens: int = field(default=1000, metadata={"help": "tokens to add"})
    min_frequency: int = field(default=2, metadata={"help": "minimum pair frequency for a merge"})
    report_texts: list[str] = field(default_factory=list, metadata={"help": "texts for the compression report"})


@dataclass
class EvalStageArgs:
    """Evaluation before (base model) and after (final model), through `yunshan eval`."""

    enabled: bool = field(default=True, metadata={"help": "evaluate before and after"})
    tasks: list[str] = field(default_factory=lambda: ["bpc", "fineval", "financeiq"],
                             metadata={"help": "yunshan eval tasks (NAME or NAME=PATH)"})
    heldout: list[str] = field(default_factory=list, metadata={"help": "LABEL=FILE held-out texts for bpc "
                                                                       "(label general = the forgetting column)"})
    text: list[str] = field(default_factory=list, metadata={"help": "texts for the compression task"})
    data_dir: str | None = field(default=None, metadata={"help": "benchmark folder (default: the bundled samples)"})
    limit: int | None = field(default=None, metadata={"help": "questions per subject / records per task"})
    shots: int = field(default=5, metadata={"help": "k-shot for multiple choice"})
    mode: str = field(default="loglik", metadata={"help": "loglik (answer-only) or generate"})
    max_length: int | None = field(default=None, metadata={"help": "bpc window (default: the model's context)"})
    batch_size: int = field(default=16, metadata={"help": "sequences per forward pass"})
    dtype: str = field(default="float32", metadata={
        "help": "float32 (the reference numbers) or auto (bf16 autocast where the hardware multiplies bf16 fast, "
                "float32 elsewhere), bfloat16, float16: yunshan eval --dtype"})


@dataclass
class CptStageArgs:
    enabled: bool = field(default=True, metadata={"help": "run continual pretraining"})
    data: CptDataArgs = field(default_factory=CptDataArgs)
    training: TrainArgs = field(default_factory=TrainArgs)
    lora: LoraArgs = field(default_factory=LoraArgs)
    monitor: MonitorArgs = field(default_factory=MonitorArgs)
    warmup: EmbeddingWarmupArgs = field(default_factory=EmbeddingWarmupArgs)


@dataclass
class SftStageArgs:
    enabled: bool = field(default=True, metadata={"help": "run the mixed SFT"})
    data: SftDataArgs = field(default_factory=SftDataArgs)
    training: TrainArgs = field(default_factory=lambda: TrainArgs(learning_rate=2e-5, weight_decay=0.0))
    lora: LoraArgs = field(default_factory=LoraArgs)


@dataclass
class ExportStageArgs:
    enabled: bool = field(default=True, metadata={"help": "export the final model with a model card"})
    license: str | None = field(default=None, metadata={
        "help": "license in the model card (default: the base model card's, else unknown)"})
    language: list[str] = field(default_factory=lambda: ["zh", "en"], metadata={"help": "languages in the card"})
    adapter: bool = field(default=False, metadata={"help": "export the LoRA adapter instead of merged weights"})


@dataclass
class PushStageArgs:
    enabled: bool = field(default=False, metadata={"help": "push the export to the Hugging Face Hub"})
    repo_id: str | None = field(default=None, metadata={"help": "ORG/NAME"})
    private: bool = field(default=True, metadata={"help": "create the repository private"})
    revision: str | None = field(default=None, metadata={"help": "branch to push to"})
    create_pr: bool = field(default=False, metadata={"help": "open a pull request instead of committing"})


@dataclass
class PipelineRecipe:
    """The YunShan pipeline: `yunshan run RECIPE.yaml [--from STAGE] [--dry-run] [key=value ...]`.

    Paths may use ${samples} (the bundled sample data), ${data} (env YUNSHAN_DATA, default ./data),
    ${models} (env YUNSHAN_MODELS, default ./models) and ${recipe_dir}."""

    name: str = field(default="yunshan", metadata={"help": "run name (used in reports and the model card)"})
    output_dir: str = field(default="runs/yunshan", metadata={"help": "run folder: one subfolder per stage"})
    model: ModelArgs | None = field(default=None, metadata={"help": "the base model (unless base.enabled)"})
    tokenizer: TokenizerArgs = field(default_factory=TokenizerArgs)
    base: BaseStageArgs = field(default_factory=BaseStageArgs)
    tokenizer_extension: TokenizerStageArgs = field(default_factory=TokenizerStageArgs)
    eval: EvalStageArgs = field(default_factory=EvalStageArgs)
    cpt: CptStageArgs = field(default_factory=CptStageArgs)
    sft: SftStageArgs = field(default_factory=SftStageArgs)
    export: ExportStageArgs = field(default_factory=ExportStageArgs)
    push: PushStageArgs = field(default_factory=PushStageArgs)

    def __post_init__(self):
        if self.base.enabled == (self.model is not None):
            raise ValueError("give exactly one of model (a downloaded base) or base.enabled: true (stand-in base)")
