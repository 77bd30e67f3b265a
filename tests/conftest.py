"""Test-wide settings: offline HF (set before any HF import), deterministic torch, 2 CPU threads."""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # tests/fixtures.py

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see yunshan/__init__.py; before torch loads
# make test runs two pytest-xdist workers on the two cores: each worker and the processes it starts then take one
# thread (two workers of two threads each would contend for the cores).
_XDIST = "PYTEST_XDIST_WORKER" in os.environ
if _XDIST:
    os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
# DeepSpeed's compiled CPU ops live in the venv (as the Makefile sets it), never in a cache shared with other checkouts.
os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(Path(sys.prefix) / "torch_extensions"))

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(1 if _XDIST else 2)


def _remove_stale_build_locks(root: Path, older_than_s: float = 600.0) -> None:
    """torch's extension builder waits forever on a `lock` file that a killed build left behind.

    Every DeepSpeed process takes that lock for a moment (a no-op ninja run) and a first build takes about 1.5
    minutes here, so a lock older than 10 minutes was left by a process that no longer runs.
    """
    import time

    for lock in root.glob("*/lock"):
        try:
            if time.time() - lock.stat().st_mtime > older_than_s:
                lock.unlink()
        except FileNotFoundError:
            pass


_remove_stale_build_locks(Path(os.environ["TORCH_EXTENSIONS_DIR"]))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield
