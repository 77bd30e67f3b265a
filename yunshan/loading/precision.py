"""Which floating-point precision to compute in, decided by the hardware: `training.precision: auto` and
`yunshan eval --dtype auto`; and the one vocabulary every precision setting takes.

    from yunshan.loading.precision import choose_precision, eval_autocast, precision_name
    precision, reason = choose_precision("auto")     # ("bfloat16", "auto: CPU with AMX tiles ...") or ("float32", ...)
    precision_name("bf16", "training.precision")     # "bfloat16": the short names are read as the names they stand for

The vocabulary is torch's: float32, bfloat16, float16 (and auto where the hardware decides), the names transformers'
`dtype`, config.json and torch itself use. `model.dtype`, `training.precision`, `eval.dtype` and the `--dtype` of
`yunshan eval`, `yunshan chat` and `yunshan export` take these, defined once here (PRECISIONS). The short names
fp32, bf16 and fp16, which accelerate's `mixed_precision` and DeepSpeed use and recipes already write for
`training.precision`, are accepted wherever a precision is given and read as float32, bfloat16 and float16; reports
use torch's names.

bf16 autocast keeps float32 master weights and runs matrix products in bfloat16. It pays only where the hardware
multiplies bf16 natively: measured on 2 cores, bf16 `torch.mm` ran 5.4x faster than float32 on an Intel Xeon with
AMX (2,250 vs 417 GFLOP/s) and 4.4x on an AMD Zen 4/5 with AVX-512 BF16, but ~100x slower on an AMD Zen 3, which
emulates it. So the choice comes from the checks torch exposes, never from an assumption about the machine.
"""

from __future__ import annotations

# torch is imported where the hardware is asked, so the vocabulary is light to import (recipes, --help).
DTYPES = ("float32", "bfloat16", "float16")
PRECISIONS = ("auto", *DTYPES)  # auto: bfloat16 where the hardware multiplies it fast, else float32
SHORT_NAMES = {"fp32": "float32", "bf16": "bfloat16", "fp16": "float16"}
# Every spelling a setting accepts, with auto (yunshan chat --dtype) and without (yunshan export --dtype): the
# argparse choices of those flags.
CHOICES = (*PRECISIONS, *SHORT_NAMES)
DTYPE_CHOICES = (*DTYPES, *SHORT_NAMES)


def precision_name(value: str, field: str, auto: bool = True) -> str:
    """`value` in the one vocabulary: torch's name as given, a short name (fp32, bf16, fp16) as the torch name it
    stands for. Anything else (and `auto` where not `auto`) is a ValueError naming `field` and what is valid."""
    allowed = PRECISIONS if auto else DTYPES
    name = SHORT_NAMES.get(value, value) if isinstance(value, str) else value
    if name not in allowed:
        raise ValueError(f"{field} {value!r} is not valid; use {', '.join(allowed)} (or "
                         f"{', '.join(k for k, v in SHORT_NAMES.items() if v in allowed)})")
    return name


def fast_bf16() -> tuple[bool, str]:
    """Whether this machine runs bfloat16 matrix products faster than float32, and the reason.

    CUDA: a GPU that supports bf16. CPU: AMX tiles (Intel Sapphire Rapids and newer) or AVX-512 BF16 (Intel Cooper
    Lake, AMD Zen 4 and newer), the instructions oneDNN uses for bf16 matmuls; measured here, bf16 matmuls ran 4.4x
    (AMD Zen 5, AVX-512 BF16) to 5.4x (Intel Xeon, AMX) faster than float32. Without them bf16 is emulated and about
    100x slower (AMD Zen 3), so the answer comes from the hardware checks torch exposes, never from an assumption.
    """
    import torch

    if torch.cuda.is_available():
        if torch.cuda.is_bf16_supported():
            return True, f"CUDA GPU {torch.cuda.get_device_name()} supports bf16"
        return False, f"CUDA GPU {torch.cuda.get_device_name()} has no bf16 support"
    cpu = getattr(torch, "cpu", None)
    amx = bool(getattr(cpu, "_is_amx_tile_supported", lambda: False)())
    avx512_bf16 = bool(getattr(cpu, "_is_avx512_bf16_supported", lambda: False)())
    if not torch.backends.mkldnn.is_available():
        return False, "CPU without oneDNN in this torch build: bf16 would be emulated"
    if amx:
        return True, "CPU with AMX tiles (bf16 matmuls in hardware)"
    if avx512_bf16:
        return True, "CPU with AVX-512 BF16 (bf16 dot products in hardware)"
    return False, "CPU without AMX or AVX-512 BF16: bf16 would be emulated, far slower than fp32"


def choose_precision(precision: str) -> tuple[str, str]:
    """(precision, reason): `auto` -> bfloat16 where the hardware has fast bf16 (`fast_bf16`), else float32; any
    other value is kept as asked (a short name as the name it stands for)."""
    precision = precision_name(precision, "training.precision")
    if precision != "auto":
        return precision, "set in the recipe"
    fast, why = fast_bf16()
    return ("bfloat16" if fast else "float32"), f"auto: {why}"


def resolve_precision(precision: str) -> str:
    """The precision `training.precision` resolves to on this machine (`choose_precision`)."""
    return choose_precision(precision)[0]


def eval_autocast(dtype: str) -> tuple[str, bool, str]:
    """(dtype to load the weights in, whether to run under bf16 autocast, reason) for `yunshan eval --dtype`.

    `auto` loads float32 weights and runs bf16 autocast where the hardware has fast bf16 (`fast_bf16`), plain
    float32 elsewhere; the other values load the weights in that dtype and use no autocast."""
    dtype = precision_name(dtype, "--dtype")
    if dtype != "auto":
        return dtype, False, "set by --dtype"
    fast, why = fast_bf16()
    return "float32", fast, f"auto: {why}"
