"""`yunshan model merge`: merge back what continual pretraining cost, across an extended vocabulary.

    yunshan model merge runs/x/cpt models/smollm2-135m out/merged --method linear --weight 0.5
    yunshan model merge CPT INSTRUCT OUT --method chat-vector --base BASE --weight 1.0
    yunshan model merge CPT INSTRUCT OUT --method ties --weight 0.5 --density 0.5
    yunshan model merge CPT INSTRUCT OUT --weight 0.5 --refit-new-rows 10     # then refit the new rows (below)

Continual pretraining of an instruct checkpoint erodes its chat behaviour; the usual repair is a merge with the
instruct model. MODEL is the continually pretrained model (its tokenizer and vocabulary are the output's), INSTRUCT
the model merged back, `--weight` w how much of it comes back:

- `linear`: OUT = (1 - w) MODEL + w INSTRUCT.
- `chat-vector` (Huang et al. 2023, "Chat Vector"): OUT = MODEL + w (INSTRUCT - BASE), BASE the model INSTRUCT was
  tuned from (`--base`, required). When MODEL was trained from INSTRUCT itself, `--base MODEL` gives the linear merge.
- `ties` (Yadav et al. 2023), `dare-ties`, `dare-linear` (Yu et al. 2023): with `--base`, the task vectors
  MODEL - BASE (weight 1 - w) and INSTRUCT - BASE (weight w), each sparsified to `--density` of its entries (TIES:
  the largest magnitudes; DARE: a random draw, the kept entries rescaled to the vector's L1 norm), TIES with the sign
  election, added to BASE (TIES: the weighted mean over the vectors that agree in sign). Without `--base` the
  instruct model is the base: OUT = INSTRUCT + (1 - w) sparsify(MODEL - INSTRUCT), the linear merge with the
  continual pretraining's change sparsified.

The vocabulary rule: tokens are matched by their string, and OUT has MODEL's tokenizer. A row of a token that only
MODEL has (the vocabulary extension's new rows, input embeddings and output head alike) is taken from MODEL unchanged;
a shared token's rows are merged like every other weight; a token only INSTRUCT (or BASE) has is left out (counted in
the report). A tied model stays tied: the output head is the embedding matrix, written once. `yunshan_merge.json`
beside the weights records the method, the formula, the inputs and the token counts.

The new rows were trained together with MODEL's body; once the merge moves the body back toward INSTRUCT they no
longer fit it (README, "Merging back": on SmolLM2 every plain merge lost domain gain and chat-format bits/char alike).
`--refit-new-rows N` repairs that: after the merge, N optimizer steps (`--refit-batch-size` sequences of
`--refit-seq-len` tokens, Adam at `--refit-learning-rate`, the embedding warm-up's 1e-3) train only those rows, input
embeddings and output head (one matrix when tied), every other weight frozen and every shared row's gradient zeroed,
on `--refit-data` or, by default, the continual pretraining's own mixture (the sources of MODEL's recipe.yaml, which
`yunshan cpt` writes beside its weights). The body and the shared rows stay exactly the merge's; the report records
the steps, the losses and the data (yunshan.training.embedding_warmup.train_new_rows).

Built on mergekit (Arcee AI, LGPL-3.0, PyPI `mergekit`): its pins (torch >= 2.0, transformers >= 5.0 < 6, peft >=
0.18, accelerate, safetensors) hold with yunshan's, and its tokenizer handling does the vocabulary rule above (a
token present in one model takes that model's row; `tokenizer.source` = MODEL keeps MODEL's merges, so the new
tokens stay BPE tokens, not added tokens). yunshan adds the one-line checks before anything is read (folders,
architectures, shapes, tied or not, the methods' arguments), MODEL's own config and generation config in the
output, the chat template, the report, and the atomic write (the folder appears only when the merge succeeded).
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path

REPORT = "yunshan_merge.json"
METHODS = ("linear", "chat-vector", "ties", "dare-ties", "dare-linear")
# yunshan's method -> mergekit's merge_method
_MERGEKIT = {"linear": "linear", "chat-vector": "task_arithmetic", "ties": "ties", "dare-ties": "dare_ties",
             "dare-linear": "dare_linear"}
# Config fields that fix the shapes of the weights: two models that differ in one cannot be merged.
SHAPE_FIELDS = ("hidden_size", "num_hidden_layers", "intermediate_size", "num_attention_heads",
                "num_key_value_heads", "head_dim")
FORMULAS = {
    "linear": "OUT = (1 - w) MODEL + w INSTRUCT",
    "chat-vector": "OUT = MODEL + w (INSTRUCT - BASE)",
    "ties": "OUT = BASE + TIES(density; (1 - w)(MODEL - BASE), w (INSTRUCT - BASE))",
    "dare-ties": "OUT = BASE + DARE-TIES(density; (1 - w)(MODEL - BASE), w (INSTRUCT - BASE))",
    "dare-linear": "OUT = BASE + DARE(density; (1 - w)(MODEL - BASE)) + DARE(density; w (INSTRUCT - BASE))",
}
FORMULAS_NO_BASE = {
    "ties": "OUT = INSTRUCT + (1 - w) TIES-trim(density; MODEL - INSTRUCT)",
    "dare-ties": "OUT = INSTRUCT + (1 - w) DARE(density; MODEL - INSTRUCT)",
    "dare-linear": "OUT = INSTRUCT + (1 - w) DARE(density; MODEL - INSTRUCT)",
}


@dataclass
class MergeArgs:
    """Arguments of `yunshan model merge` (yunshan.merging.merge.merge_models)."""

    model: str = field(metadata={"path": True,
        "help": "the continually pretrained model folder (its tokenizer, vocabulary and config are the output's)"})
    instruct: str = field(metadata={"path": True, "help": "the model folder merged back (the instruct / chat model)"})
    out: str = field(metadata={"path": True, "help": "output folder (written only when the whole merge succeeded)"})
    method: str = field(default="linear", metadata={"help": f"one of {', '.join(METHODS)}"})
    weight: float = field(default=0.5, metadata={"range": "[-4, 4]",
        "help": "w: how much of INSTRUCT comes back (linear, ties, dare: 0..1; chat-vector: the chat vector's "
                "scale, 1.0 as in the paper)"})
    base: str | None = field(default=None, metadata={"path": True,
        "help": "the model INSTRUCT was tuned from (required by chat-vector; ties/dare without it use INSTRUCT as "
                "the base)"})
    density: float = field(default=0.5, metadata={"range": "(0, 1]",
        "help": "ties/dare: the share of each task vector's entries kept (0 < density <= 1)"})
    seed: int = field(default=0, metadata={"range": "[0, 4294967295]", "help": "seed of DARE's random drop"})
    dtype: str = field(default="float32", metadata={"help": "dtype of the merge and of the written weights"})
    overwrite: bool = field(default=False, metadata={
        "help": "replace OUT if an earlier merge wrote it (its yunshan_merge.json lists its files)"})
    refit_new_rows: int = field(default=0, metadata={"range": ">= 0",
        "help": "after the merge, train only the rows of the tokens only MODEL has (input and output) for this many "
                "steps, every other weight frozen, so that they fit the merged body (0: off)"})
    refit_data: list[str] = field(default_factory=list, metadata={"path": True,
        "help": "corpus files of the refit, mixed in equal token shares (default: the sources of MODEL's "
                "recipe.yaml, the continual pretraining's own mixture)"})
    refit_batch_size: int = field(default=4, metadata={"range": ">= 1", "help": "sequences per refit step"})
    refit_seq_len: int = field(default=512, metadata={"range": ">= 8", "help": "tokens per refit sequence"})
    refit_learning_rate: float = field(default=1e-3, metadata={"range": "> 0",
        "help": "Adam learning rate of the refit (the embedding warm-up's default)"})

    def __post_init__(self):
        from yunshan.arguments.field_rules import check_fields

        check_fields(self)


def _weights_present(folder: Path) -> bool:
    return any(folder.glob("*.safetensors")) or any(folder.glob("pytorch_model*.bin"))


def _check_inputs(args: MergeArgs) -> dict[str, tuple[Path, dict]]:
    """Each input folder and its config.json; every problem one line naming the flag."""
    from yunshan.io.folders import check_model_folder

    if args.method not in METHODS:
        raise ValueError(f"--method {args.method!r} is not a merge method; valid: {', '.join(METHODS)}")
    if args.method == "chat-vector" and not args.base:
        raise ValueError("--method chat-vector needs --base: the model INSTRUCT was tuned from (the chat vector is "
                         "INSTRUCT - BASE)")
    if args.method == "chat-vector":
        if not -4.0 <= args.weight <= 4.0:
            raise ValueError(f"--weight {args.weight} is outside -4..4 for chat-vector (1.0 adds the whole vector)")
    elif not 0.0 <= args.weight <= 1.0:
        raise ValueError(f"--weight {args.weight} must be within 0..1 for {args.method} (the share of INSTRUCT)")
    if args.method in ("ties", "dare-ties", "dare-linear") and not 0.0 < args.density <= 1.0:
        raise ValueError(f"--density {args.density} must be within (0, 1] (the share of each task vector kept)")
    found = {}
    for flag, path in (("MODEL", args.model), ("INSTRUCT", args.instruct), ("--base", args.base)):
        if path is None:
            continue
        folder = check_model_folder(path, flag)
        config_file = folder / "config.json"
        if not config_file.is_file():
            raise FileNotFoundError(f"{flag}: {folder} has no config.json; give a model folder written by "
                                    "save_pretrained")
        if not _weights_present(folder):
            raise FileNotFoundError(f"{flag}: {folder} has no weights (*.safetensors or pytorch_model*.bin)")
        found[flag] = (folder, _load_config(config_file, flag))
    _check_same_architecture(found)
    return found


def _load_config(config_file: Path, flag: str):
    """The folder's config as transformers reads it (class defaults filled in: tie_word_embeddings above all)."""
    from transformers import AutoConfig

    try:
        json.loads(config_file.read_text(encoding="utf-8"))
        return AutoConfig.from_pretrained(config_file.parent)
    except (OSError, ValueError, KeyError) as err:
        raise ValueError(f"{flag}: {config_file}: not a config transformers reads ({' '.join(str(err).split())})"
                         ) from None


def _check_same_architecture(found: dict) -> None:
    """The models must have the same architecture and weight shapes (the vocabulary aside) and agree on tying."""
    (ref_flag, (ref_folder, ref)), *others = found.items()
    ref_arch = (ref.architectures or [None])[0]
    for flag, (folder, config) in others:
        arch = (config.architectures or [None])[0]
        if arch != ref_arch or config.model_type != ref.model_type:
            raise ValueError(f"mismatched architectures: {ref_flag} {ref_folder} is {ref_arch} ({ref.model_type}), "
                             f"{flag} {folder} is {arch} ({config.model_type}); only models of one architecture "
                             "merge")
        a, b = ref.get_text_config(), config.get_text_config()
        for key in SHAPE_FIELDS:
            if getattr(a, key, None) != getattr(b, key, None):
                raise ValueError(f"mismatched architectures: {key} is {getattr(a, key, None)} in {ref_flag} "
                                 f"{ref_folder} and {getattr(b, key, None)} in {flag} {folder}; only models of the "
                                 "same shapes merge")
        if bool(ref.tie_word_embeddings) != bool(config.tie_word_embeddings):
            raise ValueError(f"mismatched architectures: tie_word_embeddings is {ref.tie_word_embeddings} in "
                             f"{ref_flag} {ref_folder} and {config.tie_word_embeddings} in {flag} {folder}; a tied "
                             "and an untied model do not merge")


def _vocab(folder: Path, flag: str) -> dict[str, int]:
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(folder).get_vocab()
    except (OSError, ValueError) as err:
        raise ValueError(f"{flag}: {folder}: its tokenizer does not load ({' '.join(str(err).split())})") from None


def build_merge_config(args: MergeArgs, folders: dict[str, Path]) -> dict:
    """The mergekit configuration (a dict for mergekit.config.MergeConfiguration) of `args`."""
    model, instruct, base = str(folders["MODEL"]), str(folders["INSTRUCT"]), folders.get("--base")
    w = args.weight
    config = {"merge_method": _MERGEKIT[args.method], "dtype": args.dtype, "tokenizer": {"source": model}}
    if args.method == "linear":
        config["models"] = [{"model": model, "parameters": {"weight": 1.0 - w}},
                            {"model": instruct, "parameters": {"weight": w}}]
        config["parameters"] = {"normalize": False}
    elif args.method == "chat-vector":
        config["base_model"] = str(base)
        config["models"] = [{"model": model, "parameters": {"weight": 1.0}},
                            {"model": instruct, "parameters": {"weight": w}}]
        config["parameters"] = {"normalize": False}
    elif base is not None:
        config["base_model"] = str(base)
        config["models"] = [{"model": model, "parameters": {"weight": 1.0 - w, "density": args.density}},
                            {"model": instruct, "parameters": {"weight": w, "density": args.density}}]
        config["parameters"] = {"normalize": args.method == "ties"}
    else:
        config["base_model"] = instruct
        config["models"] = [{"model": model, "parameters": {"weight": 1.0 - w, "density": args.density}}]
        config["parameters"] = {"normalize": False}
    return config


def merge_models(args: MergeArgs, log=print) -> dict:
    """Merge `args.instruct` back into `args.model` into `args.out` (see the module docstring); returns the report."""
    import hashlib

    from yunshan.io.folder_lock import folder_lock
    from yunshan.io.folders import check_output_folder, check_replaceable, staged_folder

    found = _check_inputs(args)
    folders = {flag: folder for flag, (folder, _) in found.items()}
    out = check_output_folder(args.out, "OUT")
    for flag, folder in folders.items():
        if folder.resolve() == out.resolve():
            raise ValueError(f"OUT {out} is the {flag} folder; write the merge to another folder")
    if out.exists() and any(out.iterdir()):
        if not args.overwrite:
            raise ValueError(f"OUT {out} exists and is not empty; choose another folder, or --overwrite to replace "
                             "an earlier merge")
        check_replaceable(out, REPORT, "yunshan model merge", "OUT")
    vocabs = {flag: _vocab(folder, flag) for flag, folder in folders.items()}
    model_vocab = vocabs["MODEL"]
    others = [v for flag, v in vocabs.items() if flag != "MODEL"]
    shared = sum(1 for t in model_vocab if all(t in v for v in others))
    if shared < 0.5 * min(len(v) for v in vocabs.values()):
        raise ValueError(f"the tokenizers share {shared:,} of MODEL's {len(model_vocab):,} tokens: the models are "
                         "not of one family (a merge needs the same vocabulary, extended on one side at most)")
    tokens = {"output": len(model_vocab), "shared": shared, "only_in_model": len(model_vocab) - shared,
              "left_out": {flag: sum(1 for t in v if t not in model_vocab) for flag, v in vocabs.items()
                           if flag != "MODEL"}}
    new_ids = sorted(i for t, i in model_vocab.items() if not all(t in v for v in others))
    # The refit's data is read before the merge: a missing corpus is one line now, not after the merge's minutes.
    refit = _refit_batches(args, folders["MODEL"], new_ids) if args.refit_new_rows else None
    mk_config = build_merge_config(args, folders)
    # Another merge (or any yunshan command) writing OUT stops here in one line (yunshan.io.folder_lock).
    with folder_lock(out, "OUT"), staged_folder(out) as tmp:
        _run_mergekit(mk_config, tmp, args.seed)
        model_folder = folders["MODEL"]
        written = json.loads((tmp / "config.json").read_text(encoding="utf-8"))
        # MODEL's own config.json (its special token ids, rope, yunshan's fields), with the merge's vocabulary size.
        config = json.loads((model_folder / "config.json").read_text(encoding="utf-8"))
        config["vocab_size"] = written.get("vocab_size", config.get("vocab_size"))
        config["dtype"] = args.dtype
        (tmp / "config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        tied = bool(found["MODEL"][1].tie_word_embeddings)
        refit_report = _refit(tmp, new_ids, refit, args, log) if refit is not None else None
        # The generation config, the chat template and a remote-code architecture's own files (PanGu-π, OTCE).
        for path in [*(model_folder / n for n in ("generation_config.json", "chat_template.jinja",
                                                  "chat_template.json")), *model_folder.glob("*.py")]:
            if path.is_file() and not (tmp / path.name).is_file():
                shutil.copy2(path, tmp / path.name)
        for name in ("README.md",):  # mergekit's card names paths of this machine; `yunshan export` writes the card
            (tmp / name).unlink(missing_ok=True)
        _check_output(tmp, tied, len(model_vocab))
        report = {
            "method": args.method, "formula": (FORMULAS_NO_BASE.get(args.method) if args.base is None else None)
            or FORMULAS[args.method], "weight": args.weight,
            "density": args.density if args.method in ("ties", "dare-ties", "dare-linear") else None,
            "seed": args.seed if args.method.startswith("dare") else None, "dtype": args.dtype,
            "inputs": {flag: str(folder.resolve()) for flag, folder in folders.items()},
            "tokens": tokens,
            "vocabulary_rule": "rows of tokens only MODEL has are MODEL's; shared tokens' rows are merged; tokens "
                               "MODEL lacks are left out",
            "tied": tied,
            "refit_new_rows": refit_report,
            "mergekit": _mergekit_version(), "mergekit_config": mk_config,
        }
        weights = sorted(p for p in tmp.glob("*.safetensors"))
        report["sha256"] = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in weights}
        report["files"] = sorted([*(p.relative_to(tmp).as_posix() for p in tmp.rglob("*") if p.is_file()), REPORT])
        (tmp / REPORT).write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    log(f"wrote {out}: {args.method} ({report['formula']}, w={args.weight}); vocabulary {tokens['output']:,} tokens, "
        f"{tokens['only_in_model']:,} only in MODEL ("
        + (f"refitted for {args.refit_new_rows} steps" if refit_report else "taken from it")
        + f"), {tokens['shared']:,} merged"
        + "".join(f", {n:,} of {flag} left out" for flag, n in tokens["left_out"].items() if n))
    return report


def _refit_data(args: MergeArgs, model_folder: Path):
    """The data section of the refit: --refit-data as sources of equal token weight, else the sources (and data seed)
    of MODEL's recipe.yaml, the continual pretraining's mixture; either way packed to --refit-seq-len tokens."""
    from yunshan.data.sources import SourceArgs
    from yunshan.training.cpt import CptArgs, CptDataArgs

    if args.refit_data:
        stems = [Path(p).name.split(".")[0] for p in args.refit_data]
        names = [stem if stems.count(stem) == 1 else f"{stem}{i}" for i, stem in enumerate(stems)]
        sources = [SourceArgs(name=name, path=p) for name, p in zip(names, args.refit_data)]
        return CptDataArgs(sources=sources, seq_len=args.refit_seq_len), "--refit-data"
    recipe_file = model_folder / "recipe.yaml"
    if not recipe_file.is_file():
        raise ValueError(f"--refit-new-rows needs --refit-data: MODEL {model_folder} has no recipe.yaml (the corpora "
                         "the new rows are refitted on: the continual pretraining's, domain and general)")
    from yunshan.arguments.recipe import load_recipe

    try:
        recipe = load_recipe(CptArgs, recipe_file)
    except (ValueError, TypeError, KeyError) as err:
        raise ValueError(f"--refit-new-rows: {recipe_file} is not a cpt stage's recipe ({' '.join(str(err).split())});"
                         " give --refit-data") from None
    if not recipe.data.sources:
        raise ValueError(f"--refit-new-rows: {recipe_file} names no data sources; give --refit-data")
    return dataclasses.replace(recipe.data, seq_len=args.refit_seq_len), str(recipe_file)


def _refit_batches(args: MergeArgs, model_folder: Path, new_ids: list[int]):
    """(the first batch, an iterator over the next ones, where the data came from): read before the merge."""
    import types

    import torch
    from transformers import AutoTokenizer

    from yunshan.training.cpt import build_stream

    if not new_ids:
        raise ValueError("--refit-new-rows: MODEL has no token that INSTRUCT lacks; there are no new rows to refit")
    data, origin = _refit_data(args, model_folder)
    stream = iter(build_stream(types.SimpleNamespace(data=data), AutoTokenizer.from_pretrained(model_folder)))

    def batches():
        while True:
            yield torch.stack([next(stream)["input_ids"] for _ in range(args.refit_batch_size)])

    it = batches()
    return next(it), it, {"data": origin, "sources": [s.name if origin != "--refit-data" else str(s.path)
                                                      for s in data.sources]}


def _refit(folder: Path, new_ids: list[int], refit, args: MergeArgs, log) -> dict:
    """Train the new rows of the merged model in `folder` (yunshan.training.embedding_warmup.train_new_rows) and
    write its weights back; MODEL's config.json, already in `folder`, stays."""
    import itertools

    import torch
    from transformers import AutoModelForCausalLM

    from yunshan.models import register_architectures
    from yunshan.loading.precision import choose_precision
    from yunshan.training.embedding_warmup import train_new_rows

    register_architectures()
    first, rest, origin = refit
    config_text = (folder / "config.json").read_text(encoding="utf-8")
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32)
    precision, _ = choose_precision("auto")
    steps = itertools.islice(itertools.chain([first], rest), args.refit_new_rows)
    # One sequence per forward pass, the step's gradients accumulated: 4 x 512 tokens of SmolLM2-135M at once
    # peaked above 6 GB resident, one at a time keeps only one sequence's activations.
    report = train_new_rows(model, new_ids, steps, lr=args.refit_learning_rate, autocast=precision == "bfloat16",
                            micro_batch_size=1, log=log)
    before = {p.name for p in folder.iterdir()}
    for path in [*folder.glob("*.safetensors"), *folder.glob("*.safetensors.index.json")]:
        path.unlink()
    model.to(getattr(torch, args.dtype)).save_pretrained(folder)
    (folder / "config.json").write_text(config_text, encoding="utf-8")
    for path in folder.iterdir():  # save_pretrained's own generation config: MODEL's is copied in afterwards
        if path.name not in before and not path.name.endswith(".safetensors") and \
                not path.name.endswith(".safetensors.index.json"):
            path.unlink()
    return {**report, **origin, "batch_size": args.refit_batch_size, "seq_len": args.refit_seq_len,
            "precision": precision}


def _mergekit_version() -> str:
    from importlib.metadata import version

    return version("mergekit")


def _run_mergekit(config: dict, out: Path, seed: int) -> None:
    import logging

    from mergekit.config import MergeConfiguration
    from mergekit.merge import run_merge
    from mergekit.options import MergeOptions

    # mergekit logs its architecture inference and every tensor plan as warnings on the root logger; the command
    # prints its own one-line summary and yunshan_merge.json records the rest. Its progress bars stay (quiet=False):
    # loading the models, then one step per tensor operation with an ETA (minutes for a 7B on a CPU).
    logging.disable(logging.WARNING)
    try:
        run_merge(MergeConfiguration.model_validate(config), str(out),
                  MergeOptions(quiet=False, lazy_unpickle=False, copy_tokenizer=True, random_seed=seed,
                               trust_remote_code=False, safe_serialization=True))
    finally:
        logging.disable(logging.NOTSET)


def _check_output(folder: Path, tied: bool, vocab_size: int) -> None:
    """The merge wrote one row per token of MODEL's vocabulary, and a tied model's head is not written apart."""
    from safetensors import safe_open

    shapes = {}
    for path in folder.glob("*.safetensors"):
        with safe_open(str(path), "pt") as f:
            shapes.update({k: f.get_slice(k).get_shape() for k in f.keys()})
    embed = next((shape for key, shape in shapes.items() if key.endswith("embed_tokens.weight")), None)
    if embed is not None and embed[0] < vocab_size:
        raise RuntimeError(f"the merged embedding has {embed[0]} rows for {vocab_size} tokens")
    if tied and any(k.endswith("lm_head.weight") for k in shapes):
        raise RuntimeError("the merge wrote lm_head.weight for a tied model")
