"""yunshan.training.heap: with the mmap threshold fixed, memory freed between steps goes back to the system."""

import os
import platform
import subprocess
import sys

import pytest

# 200 blocks of 1.5 MiB from glibc's malloc itself, every other one freed while its neighbours stay: without a fixed
# threshold glibc serves them from the heap after the first free (its threshold rises), carved one after the other
# from its top, and a freed block between two live ones cannot go back; with the threshold at 1 MiB each is its own
# mmap, unmapped on free.
PROBE = """
import ctypes, sys
from yunshan.training.heap import cap_heap_growth

libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]

def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096

print("set" if (sys.argv[1] == "cap" and cap_heap_growth()) else "unset")
libc.free(libc.malloc(3 << 20))  # an mmapped block freed: glibc raises its threshold above 1.5 MiB
blocks = [libc.malloc(3 << 19) for _ in range(200)]
for block in blocks:
    ctypes.memset(block, 1, 3 << 19)  # resident
held = rss()
for block in blocks[::2]:
    libc.free(block)
print((held - rss()) >> 20)  # MiB given back of the 150 freed
"""

pytestmark = pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                                reason="glibc's mallopt only")


def _probe(mode: str, env: dict | None = None) -> tuple[str, int]:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True,
                         env={**os.environ, **(env or {})}).stdout.split()
    return out[0], int(out[1])


def test_freed_blocks_go_back_with_the_threshold_fixed():
    state, returned_mib = _probe("cap")
    assert state == "set" and returned_mib > 140  # of 150 MiB freed
    state, returned_mib = _probe("default")
    assert state == "unset" and returned_mib < 10  # glibc's own rule: held by the heap


def test_a_threshold_from_the_environment_is_left_alone():
    state, _ = _probe("cap", {"MALLOC_MMAP_THRESHOLD_": "65536"})
    assert state == "unset"
