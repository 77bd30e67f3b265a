"""Test-wide settings: offline HF (set before any HF import), deterministic torch, 2 CPU threads."""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))  # tests/fixtures.py

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # see yunshan/__init__.py; before torch loads
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import pytest  # noqa: E402
import torch  # noqa: E402

torch.set_num_threads(2)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)
    yield
