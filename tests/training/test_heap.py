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
LIBC = """
import ctypes, sys

libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]

def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096
"""
FREE_HALF = """
libc.free(libc.malloc(3 << 20))  # an mmapped block freed: glibc raises its threshold above 1.5 MiB
blocks = [libc.malloc(3 << 19) for _ in range(200)]
for block in blocks:
    ctypes.memset(block, 1, 3 << 19)  # resident
held = rss()
for block in blocks[::2]:
    libc.free(block)
print((held - rss()) >> 20)  # MiB given back of the 150 freed
"""
PROBE = LIBC + """
from yunshan.training.heap import cap_heap_growth

print("set" if (sys.argv[1] == "cap" and cap_heap_growth()) else "unset")
""" + FREE_HALF

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


# A reference cycle holding 64 MiB of tensor (as a Trainer and its model hold each other) and 150 MiB of glibc heap
# blocks below the mmap threshold, freed while a block above them stays: neither goes back by itself (the cycle waits
# for a collection, the heap returns only its top); release_memory collects the one and trims the other.
RELEASE_PROBE = """
import ctypes, gc, weakref
import torch
from yunshan.training.heap import release_memory

gc.disable()  # no automatic collection between the measurements
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]

def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096

class Stage:
    pass

stage = Stage()
stage.me, stage.weights = stage, torch.ones(16 << 20)  # a cycle and 64 MiB
alive = weakref.ref(stage)
del stage
blocks = [libc.malloc(64 << 10) for _ in range(2400)]  # 150 MiB, each below glibc's 128 KiB mmap threshold
for block in blocks:
    ctypes.memset(block, 1, 64 << 10)
top = libc.malloc(64 << 10)  # keeps the heap's top in use
for block in blocks:
    libc.free(block)
held = rss()
print(alive() is not None, (held - rss()) >> 20)
release_memory()
print(alive() is None, (held - rss()) >> 20)
"""


def test_release_memory_collects_cycles_and_trims_the_heap():
    out = subprocess.run([sys.executable, "-c", RELEASE_PROBE], capture_output=True, text=True, check=True).stdout
    (still_alive, before), (collected, after) = [line.split() for line in out.splitlines()]
    assert still_alive == "True" and int(before) < 10  # freed, yet resident: nothing went back by itself
    assert collected == "True" and int(after) > 200  # of 64 MiB of tensor + 150 MiB of heap


# A training stage's start: `python -c START KIND run|dry FOLDER DATA` runs start_run on a one-step recipe.
START = """
import sys
from yunshan.arguments.recipe import load_recipe
from yunshan.training.cpt import CptArgs
from yunshan.training.sft import SftArgs
from yunshan.training.setup import start_run

kind, dry, folder, data = sys.argv[1], sys.argv[2] == "dry", sys.argv[3], sys.argv[4]
cls = {"cpt": CptArgs, "sft": SftArgs}[kind]
source = {"name": "d", "path": data} if kind == "cpt" else {"name": "d", "path": data, "format": "alpaca"}
recipe = load_recipe(cls, data={"model": {"preset": "tiny"}, "data": {"sources": [source]},
                                "training": {"output_dir": folder, "max_steps": 1}})
start_run(recipe, kind, dry)
"""
# Every training stage caps the heap as it starts (training/setup.py start_run): the same freed blocks go back after
# a stage's start_run, and not after a dry run's (which trains nothing and leaves the process as it was).
STAGE_PROBE = LIBC + START + FREE_HALF


@pytest.mark.parametrize("kind", ["cpt", "sft"])
def test_a_training_stage_caps_the_heap_as_it_starts_and_a_dry_run_does_not(kind, tmp_path):
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "x", "instruction": "q", "output": "a"}\n')
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_MMAP_THRESHOLD_"}

    def returned(mode: str) -> int:
        out = subprocess.run([sys.executable, "-c", STAGE_PROBE, kind, mode, str(tmp_path / mode), str(data)],
                             capture_output=True, text=True, env=env)
        assert out.returncode == 0, out.stderr[-2000:]
        return int(out.stdout.split()[-1])

    assert returned("run") > 140  # of 150 MiB freed
    assert returned("dry") < 10


DEEPSPEED_PROBE = START + """
from deepspeed.accelerator import get_accelerator
print(get_accelerator().device_name())
"""


def test_a_cpu_run_tells_deepspeed_its_device_so_it_does_not_warn(tmp_path):
    """issue 47: every CPU run printed DeepSpeed's "Setting accelerator to CPU ... unable to detect it" (transformers
    imports DeepSpeed when it is installed); start_run gives it torch's answer, so nothing is printed."""
    pytest.importorskip("deepspeed")
    import torch

    if torch.cuda.is_available():
        pytest.skip("a CUDA device: DeepSpeed detects it")
    data = tmp_path / "d.jsonl"
    data.write_text('{"text": "x"}\n')
    env = {k: v for k, v in os.environ.items() if k != "DS_ACCELERATOR"}
    out = subprocess.run([sys.executable, "-c", DEEPSPEED_PROBE, "cpt", "run", str(tmp_path / "run"), str(data)],
                         capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split()[-1] == "cpu"
    assert "Setting accelerator to CPU" not in out.stderr + out.stdout
