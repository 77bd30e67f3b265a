"""`precision: auto` decides by hardware: bf16 on CPUs with AMX or AVX-512 BF16 and on CUDA GPUs with bf16, fp32
elsewhere (both branches tested with the checks patched, whatever this machine is); bf16 training follows fp32."""

from __future__ import annotations

import pytest
import torch

from yunshan.training import models


@pytest.fixture
def cpu(monkeypatch):
    """Pretend to be a CPU-only machine with the given instruction sets."""

    def set_caps(amx: bool, avx512_bf16: bool, mkldnn: bool = True):
        monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
        monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx)
        monkeypatch.setattr(torch.cpu, "_is_avx512_bf16_supported", lambda: avx512_bf16)
        monkeypatch.setattr(torch.backends.mkldnn, "is_available", lambda: mkldnn)

    return set_caps


@pytest.mark.parametrize("amx, avx512_bf16, expected", [
    (True, False, "bf16"),    # Intel Xeon (Sapphire Rapids and newer)
    (False, True, "bf16"),    # AMD Zen 4 / Zen 5, Intel Cooper Lake
    (True, True, "bf16"),
    (False, False, "fp32"),   # AMD Zen 3, older Intel: bf16 would be emulated
])
def test_auto_on_cpus(cpu, amx, avx512_bf16, expected):
    cpu(amx, avx512_bf16)
    precision, reason = models.choose_precision("auto")
    assert precision == expected and reason.startswith("auto: CPU")
    if expected == "bf16":
        assert ("AMX" in reason) if amx else ("AVX-512 BF16" in reason)
    else:
        assert "emulated" in reason


def test_auto_without_onednn_is_fp32(cpu):
    cpu(amx=True, avx512_bf16=True, mkldnn=False)
    assert models.choose_precision("auto")[0] == "fp32"


def test_auto_on_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "GPU")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)
    assert models.choose_precision("auto")[0] == "bf16"
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: False)
    assert models.choose_precision("auto")[0] == "fp32"


def test_explicit_precision_is_kept_and_junk_rejected(cpu):
    cpu(amx=False, avx512_bf16=False)
    assert models.choose_precision("bf16") == ("bf16", "set in the recipe")
    assert models.choose_precision("fp32")[0] == "fp32"
    with pytest.raises(ValueError, match="auto, fp32, bf16 or fp16"):
        models.choose_precision("int8")
