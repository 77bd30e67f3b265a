"""The weights of an export: safetensors copied, re-sharded or converted one shard at a time, and checked.

    from yunshan.hub.weights import parse_size, write_weights
    result = write_weights(Path("runs/demo/05_sft"), Path("exports/tmp"), parse_size("2GB"), dtype=None)

Shards are planned exactly as transformers' `save_pretrained` plans them (huggingface_hub's splitter, in the order
of the model's state_dict, so a shard holds whole consecutive layers; model-00001-of-0000N.safetensors and
model.safetensors.index.json), and each is written from the source files' tensors while only that shard is in
memory; a source already laid out as planned is copied byte for byte. `--dtype` converts the floating-point
tensors; `--as-llama` writes a PanGu-π's tensors as LlamaForCausalLM's (yunshan.models.pangu_pi.convert).
`check_weights` reads the written headers back and compares every tensor's name, shape and dtype with the plan.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from yunshan.loading.precision import DTYPES

# --dtype (yunshan.loading.precision.DTYPES, torch's names) -> the safetensors dtype it writes
SAFETENSORS_DTYPES = dict(zip(DTYPES, ("F32", "BF16", "F16")))
_ITEMSIZE = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2, "I8": 1, "U8": 1, "BOOL": 1,
             "F8_E4M3": 1, "F8_E5M2": 1, "U16": 2, "U32": 4, "U64": 8}
_FLOAT = {"F64", "F32", "F16", "BF16"}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B)?\s*$", re.IGNORECASE)
_UNITS = {"KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}


def parse_size(value: str | int) -> int:
    """'2GB' -> 2_000_000_000 (decimal units as transformers uses them), '512MiB' -> 536_870_912, '1000' -> 1000."""
    if isinstance(value, int):
        return value
    match = _SIZE.match(str(value))
    if not match:
        raise ValueError(f"--max-shard-size {value!r}: use a number with KB, MB, GB (or KiB, MiB, GiB), e.g. 2GB")
    number, unit = float(match.group(1)), (match.group(2) or "").upper()
    size = int(number * _UNITS.get(unit, 1))
    if size <= 0:
        raise ValueError(f"--max-shard-size {value!r} must be positive")
    return size


def _natural(name: str) -> list:
    # model.layers.2 before model.layers.10, so shards hold whole consecutive layers
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", name)]


def module_order(model_dir: Path) -> dict[str, int]:
    """Position of every tensor in the model's state_dict, as save_pretrained orders (and so shards) them.

    The model is built on the meta device (no memory, no weights read) from its config, for transformers' and
    yunshan's architectures; an architecture that needs remote code gets {} (then names sort naturally)."""
    import logging

    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    import yunshan  # noqa: F401  (registers yunshan's architectures)

    level = logging.getLogger("transformers").level
    logging.getLogger("transformers").setLevel(logging.ERROR)
    try:
        config = AutoConfig.from_pretrained(str(model_dir), trust_remote_code=False)  # never runs a folder's code
        with torch.device("meta"):
            model = AutoModelForCausalLM.from_config(config)
        return {name: i for i, name in enumerate(model.state_dict())}
    except Exception:  # noqa: BLE001  (any failure only costs the natural order)
        return {}
    finally:
        logging.getLogger("transformers").setLevel(level)


def _weight_files(model_dir: Path) -> list[Path]:
    index = model_dir / "model.safetensors.index.json"
    if index.is_file():
        try:
            names = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        except (json.JSONDecodeError, KeyError) as err:
            raise ValueError(f"{index}: not a safetensors index (weight_map missing): {err}") from err
        missing = [n for n in names if not (model_dir / n).is_file()]
        if missing:
            raise FileNotFoundError(f"{index}: names {missing[0]} which does not exist in {model_dir}")
        return [model_dir / n for n in names]
    if (model_dir / "model.safetensors").is_file():
        return [model_dir / "model.safetensors"]
    if any(model_dir.glob("pytorch_model*.bin")):
        raise ValueError(f"{model_dir}: weights are pytorch_model.bin; yunshan exports safetensors only: load the "
                         "model with transformers and save_pretrained it once (that writes safetensors)")
    raise FileNotFoundError(f"{model_dir}: no model.safetensors or model.safetensors.index.json")


def read_layout(files: list[Path]) -> tuple[dict[str, tuple[Path, str, list[int]]], dict[str, str]]:
    """{tensor name: (file, safetensors dtype, shape)} from the file headers only, and the first file's metadata."""
    from safetensors import safe_open

    layout, metadata = {}, None
    for path in files:
        with safe_open(str(path), framework="pt") as handle:
            metadata = metadata if metadata is not None else (handle.metadata() or {})
            for name in handle.keys():
                piece = handle.get_slice(name)
                if name in layout:
                    raise ValueError(f"{path}: tensor {name} also in {layout[name][0].name}")
                layout[name] = (path, piece.get_dtype(), list(piece.get_shape()))
    return layout, metadata or {}


def _nbytes(dtype: str, shape: list[int]) -> int:
    n = 1
    for d in shape:
        n *= d
    return n * _ITEMSIZE[dtype]


def write_weights(model_dir: Path, out: Path, max_shard_size: int, dtype: str | None, as_llama: dict | None = None
                  ) -> dict:
    """Copy (or re-shard / convert) the safetensors weights of `model_dir` into `out`, one shard in memory at a time.

    With `as_llama` (the PanGu-π config.json) the tensors are written as LlamaForCausalLM's
    (yunshan.models.pangu_pi.convert.LlamaExport); the result then holds its "llama_config".
    Returns {"files": [...], "parameters": int, "dtype": str}. Shard names and the index follow transformers
    (model-00001-of-0000N.safetensors, model.safetensors.index.json), planned with huggingface_hub's splitter."""
    from huggingface_hub import split_state_dict_into_shards_factory
    from safetensors import safe_open
    from safetensors.torch import save_file

    sources = _weight_files(model_dir)
    layout, metadata = read_layout(sources)
    convert = None
    if as_llama is not None:
        from yunshan.models.pangu_pi.convert import LlamaExport

        def read(name):
            with safe_open(str(layout[name][0]), framework="pt") as handle:
                return handle.get_tensor(name)

        convert = LlamaExport(as_llama, layout, read)
        layout = convert.layout
    target = SAFETENSORS_DTYPES.get(dtype) if dtype else None
    out_dtype = {n: (target if target and d in _FLOAT else d) for n, (_, d, _) in layout.items()}
    order = convert.order() if convert is not None else module_order(model_dir)
    names = sorted(layout, key=lambda n: (order.get(n, len(order)), _natural(n)))
    sizes = {n: _nbytes(out_dtype[n], layout[n][2]) for n in names}
    split = split_state_dict_into_shards_factory(sizes, get_storage_size=lambda size: size,
                                                 filename_pattern="model{suffix}.safetensors",
                                                 max_shard_size=max_shard_size)
    same_layout = convert is None and target is None and all(out_dtype[n] == layout[n][1] for n in names) and {
        f: set(t) for f, t in split.filename_to_tensors.items()} == {
        p.name: {n for n, (src, _, _) in layout.items() if src == p} for p in sources}
    if same_layout:
        for path in sources:  # already laid out as planned: the exact bytes
            shutil.copyfile(path, out / path.name)
    else:
        import torch

        torch_dtype = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16}
        for filename, tensor_names in split.filename_to_tensors.items():
            tensors = {}
            by_source: dict[Path, list[str]] = {}
            for name in tensor_names:
                by_source.setdefault(layout[name][0], []).append(name)
            for src, src_names in by_source.items():
                # Opened per shard and closed at once, so no source stays memory-mapped across shards.
                with safe_open(str(src), framework="pt") if src is not None else _NoFile() as handle:
                    for name in src_names:
                        tensor = convert.tensor(name, handle.get_tensor) if convert else handle.get_tensor(name)
                        if out_dtype[name] != layout[name][1]:
                            tensor = tensor.to(torch_dtype[out_dtype[name]])
                        tensors[name] = tensor.contiguous()
            save_file({n: tensors[n] for n in tensor_names}, str(out / filename),
                      metadata={**metadata, "format": metadata.get("format", "pt")})
            del tensors
    written = sorted(split.filename_to_tensors)
    parameters = parameter_count(layout)
    if split.is_sharded:
        index = {"metadata": {"total_parameters": parameters, "total_size": sum(sizes.values())},
                 "weight_map": dict(sorted(split.tensor_to_filename.items()))}
        (out / "model.safetensors.index.json").write_text(json.dumps(index, indent=2) + "\n")
        written.append("model.safetensors.index.json")
    kinds = sorted({out_dtype[n] for n in names if out_dtype[n] in _FLOAT})
    return {"files": written, "parameters": parameters, "shards": len(split.filename_to_tensors),
            "dtype": dtype_label(kinds) or "none", "layout": layout,
            "out_dtype": out_dtype, "llama_config": convert.llama_config() if convert else None}


class _NoFile:
    """Stands for the source file of tensors an --as-llama export makes (new zero biases): nothing to read."""

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def get_tensor(self, name):
        raise KeyError(f"{name} is not in the source weights")


def check_weights(out: Path, expected: dict[str, tuple[Path, str, list[int]]], out_dtype: dict[str, str]) -> None:
    """The exported files hold exactly the source tensors (names, shapes, dtypes); the index names every one."""
    files = _weight_files(out)
    layout, _ = read_layout(files)
    if set(layout) != set(expected):
        missing, extra = sorted(set(expected) - set(layout)), sorted(set(layout) - set(expected))
        raise RuntimeError(f"export check: tensors missing {missing[:5]} / unexpected {extra[:5]}")
    for name, (_, dtype, shape) in layout.items():
        if shape != expected[name][2] or dtype != out_dtype[name]:
            raise RuntimeError(f"export check: {name} is {dtype}{shape}, expected {out_dtype[name]}{expected[name][2]}")


def parameter_count(layout: dict[str, tuple[Path, str, list[int]]]) -> int:
    """Parameters in a layout (read_layout): elements over every tensor."""
    return sum(_nbytes(d, s) // _ITEMSIZE[d] for _, d, s in layout.values())


def dtype_label(kinds: list[str]) -> str:
    """'float32' for ["F32"], 'bfloat16/float32' for two kinds: safetensors dtypes named as --dtype names them."""
    names = {v: k for k, v in SAFETENSORS_DTYPES.items()}
    return "/".join(names.get(k, k) for k in kinds)
