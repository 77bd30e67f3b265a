"""Which floating-point precision to compute in, decided by the hardware: `training.precision: auto` and
`yunshan eval --dtype auto`.

    from yunshan.precision import choose_precision, eval_autocast
    precision, reason = choose_precision("auto")     # ("bf16", "auto: CPU with AMX tiles ...") or ("fp32", ...)

bf16 autocast keeps float32 master weights and runs matrix products in bfloat16. It pays only where the hardware
multiplies bf16 natively: measured on 2 cores, bf16 `torch.mm` ran 5.4x faster than float32 on an Intel Xeon with
AMX (2,250 vs 417 GFLOP/s) and 4.4x on an AMD Zen 4/5 with AVX-512 BF16, but ~100x slower on an AMD Zen 3, which
emulates it. So the choice comes from the checks torch exposes, never from an assumption about the machine.
"""

from __future__ import annotations

import torch

PRECISIONS = ("auto", "fp32", "bf16", "fp16")
EVAL_DTYPES = ("auto", "float32", "bfloat16", "float16")


def fast_bf16() -> tuple[bool, str]:
    """Whether this machine runs bfloat16 matrix products faster than float32, and the reason.

    CUDA: a GPU that supports bf16. CPU: AMX tiles (Intel Sapphire Rapids and newer) or AVX-512 BF16 (Intel Cooper
    Lake, AMD Zen 4 and newer), the instructions oneDNN uses for bf16 matmuls; measured here, bf16 matmuls ran 4.4x
    (AMD Zen 5, AVX-512 BF16) to 5.4x (Intel Xeon, AMX) faster than float32. Without them bf16 is emulated and about
    100x slower (AMD Zen 3), so the answer comes from the hardware checks torch exposes, never from an assumption.
    """
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
    """(precision, reason): `auto` -> bf16 where the hardware has fast bf16 (`fast_bf16`), else fp32; any other
    value is kept as asked."""
    if precision not in ("auto", "fp32", "bf16", "fp16"):
        raise ValueError(f"training.precision must be auto, fp32, bf16 or fp16, got {precision!r}")
    if precision != "auto":
        return precision, "set in the recipe"
    fast, why = fast_bf16()
    return ("bf16" if fast else "fp32"), f"auto: {why}"


def resolve_precision(precision: str) -> str:
    """The precision `training.precision` resolves to on this machine (`choose_precision`)."""
    return choose_precision(precision)[0]


def eval_autocast(dtype: str) -> tuple[str, bool, str]:
    """(dtype to load the weights in, whether to run under bf16 autocast, reason) for `yunshan eval --dtype`.

    `auto` loads float32 weights and runs bf16 autocast where the hardware has fast bf16 (`fast_bf16`), plain
    float32 elsewhere; the other values load the weights in that dtype and use no autocast."""
    if dtype not in EVAL_DTYPES:
        raise ValueError(f"--dtype {dtype!r} is not valid; use {', '.join(EVAL_DTYPES)}")
    if dtype != "auto":
        return dtype, False, "set by --dtype"
    fast, why = fast_bf16()
    return "float32", fast, f"auto: {why}"
