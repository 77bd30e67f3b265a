"""Keep glibc's heap from growing with every training step: a fixed mmap threshold for large allocations.

    from yunshan.training.heap import cap_heap_growth
    cap_heap_growth()   # every training stage calls it as it starts (training/setup.py start_run)

glibc serves an allocation above its mmap threshold with its own mmap, returned to the system on free; below it, from
heaps (one arena per thread) that are returned only from their top. The threshold starts at 128 KiB and rises to the
size of every mmapped block freed, up to 32 MiB, so after the first step of a PyTorch run on CPU nearly every
activation and gradient (1-10 MB for SmolLM2 at 512 tokens) comes from the arenas, and with sequence lengths changing
every micro-step the freed blocks fit the next ones badly: the resident set climbs step after step. Measured on
`yunshan pref --config recipes/smollm2-135m_pref_lora.yaml` (30 steps of 1 pair x 4 micro-steps): resident set
1.3 GB at the first step, 3.4 GB by the last, peak 4.50 GB; with the threshold fixed at 1 MiB (mallopt
M_MMAP_THRESHOLD, which also stops its rise) 2.4 GB by the last step, peak 3.56 GB, the same metrics to the last digit,
at the price of page faults (system CPU 143 -> 384 s, 1,090 -> 1,319 CPU s in all; benchmarks/README.md).

Nothing is written by hand that a library does: this is one `mallopt` call through ctypes. A value the user put in
`MALLOC_MMAP_THRESHOLD_` (glibc reads it when the process starts) is left alone; on a C library without mallopt
(macOS) or one that ignores it (musl) nothing happens.
"""

from __future__ import annotations

import ctypes
import gc
import os

M_MMAP_THRESHOLD = -3  # glibc's malloc.h
MMAP_THRESHOLD = 1 << 20


def _libc(name: str):
    """The C library's function `name`, or None where it has none (macOS, musl)."""
    try:
        return getattr(ctypes.CDLL(None), name)
    except (OSError, AttributeError):
        return None


def cap_heap_growth(threshold: int = MMAP_THRESHOLD) -> bool:
    """Fix glibc's mmap threshold at `threshold` bytes for the rest of the process. Returns True when it was set,
    False when the environment sets it already (MALLOC_MMAP_THRESHOLD_) or the C library has no mallopt."""
    if "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    mallopt = _libc("mallopt")
    if mallopt is None:
        return False
    mallopt.argtypes, mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
    return mallopt(M_MMAP_THRESHOLD, threshold) == 1


def release_memory() -> bool:
    """Between the stages of one process (yunshan run): collect the finished stage's reference cycles (a Trainer, its
    callbacks and its model refer to one another, so the model outlives the stage until a collection) and hand the
    heap's free pages back to the system (glibc malloc_trim), so the next stage starts from what it holds, not from
    the peak of the stages before it. Returns True when the heap was trimmed (False without glibc's malloc_trim)."""
    gc.collect()
    trim = _libc("malloc_trim")
    if trim is None:
        return False
    trim.argtypes, trim.restype = [ctypes.c_size_t], ctypes.c_int
    trim(0)
    return True

