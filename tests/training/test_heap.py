"""yunshan.training.heap: with the mmap threshold fixed, memory freed between steps goes back to the system."""

import os
import platform
import subprocess
import sys

import pytest

# Blocks of 1.5 MiB freed while small objects allocated between them stay: without a fixed threshold glibc serves the
# big blocks from the heap after the first free (its threshold rises) and cannot return them past the small ones.
PROBE = """
import sys
from yunshan.training.heap import cap_heap_growth

def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096

print("set" if (sys.argv[1] == "cap" and cap_heap_growth()) else "unset")
first = bytearray(3 << 20)
del first                     # an mmapped block freed: glibc raises its threshold above 1.5 MiB
before = rss()
big, small = [], []
for _ in range(200):
    big.append(bytearray(3 << 19))
    small.append(bytearray(200))
del big
print((rss() - before) >> 20)
"""

pytestmark = pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                                reason="glibc's mallopt only")


def _probe(mode: str, env: dict | None = None) -> tuple[str, int]:
    out = subprocess.run([sys.executable, "-c", PROBE, mode], capture_output=True, text=True, check=True,
                         env={**os.environ, **(env or {})}).stdout.split()
    return out[0], int(out[1])


def test_freed_blocks_go_back_with_the_threshold_fixed():
    state, kept_mib = _probe("cap")
    assert state == "set" and kept_mib < 20  # 300 MiB allocated, freed, returned
    state, kept_mib = _probe("default")
    assert state == "unset" and kept_mib > 200  # glibc's own rule: held by the heap


def test_a_threshold_from_the_environment_is_left_alone():
    state, _ = _probe("cap", {"MALLOC_MMAP_THRESHOLD_": "65536"})
    assert state == "unset"
