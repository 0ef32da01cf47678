"""labkit.runtime.matmul_precision: torch's and torch-xla's fp32 matmul switches, set and restored."""

from __future__ import annotations

import sys

import pytest

from labkit.runtime import matmul_precision


class _FakeXlaBackends:
    """torch_xla.backends as torch-xla 2.8+ ships it: get/set_mat_mul_precision, a warning on every set."""

    def __init__(self, start: str = "default") -> None:
        self.level, self.sets = start, []

    def get_mat_mul_precision(self) -> str:
        return self.level

    def set_mat_mul_precision(self, precision: str) -> None:
        if precision not in ("default", "high", "highest"):
            raise ValueError(f"Invalid precision: {precision}")
        self.sets.append(precision)  # the real one logs "Setting mat mul precision multiple times is not recommended"
        self.level = precision


def _fake_xla_device(monkeypatch: pytest.MonkeyPatch, backends: object) -> None:
    import types

    import torch

    module = types.ModuleType("torch_xla.backends")
    module.__dict__.update({k: getattr(backends, k) for k in dir(backends) if k.endswith("mat_mul_precision")})
    monkeypatch.setitem(sys.modules, "torch_xla.backends", module)
    real = torch.device  # only "xla" is faked: this host has no torch-xla device
    monkeypatch.setattr(torch, "device", lambda d: types.SimpleNamespace(type="xla") if d == "xla" else real(d))


def test_fp32_matmul_precision_sets_torch_xla_and_restores(monkeypatch: pytest.MonkeyPatch) -> None:
    import torch

    fake = _FakeXlaBackends("default")  # a TPU's default: one bf16 pass
    real_device = torch.device
    _fake_xla_device(monkeypatch, fake)
    with matmul_precision.fp32_matmul_precision("highest", "xla"):
        assert fake.level == "highest" and torch.get_float32_matmul_precision() == "highest"
    assert fake.level == "default" and fake.sets == ["highest", "default"]  # restored
    with matmul_precision.fp32_matmul_precision("medium", "xla"):  # already torch-xla's level: no set, no warning
        assert fake.level == "default"
    assert fake.sets == ["highest", "default"]
    monkeypatch.setattr(torch, "device", real_device)
    with matmul_precision.fp32_matmul_precision("high", "cpu"):  # not XLA: torch's own switch only
        assert torch.get_float32_matmul_precision() == "high"
    assert fake.sets == ["highest", "default"] and torch.get_float32_matmul_precision() == "highest"


def test_fp32_matmul_precision_refuses_old_torch_xla_and_bad_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    class Old:  # torch-xla before 2.8: no torch_xla.backends precision switch
        pass

    _fake_xla_device(monkeypatch, Old())
    with pytest.raises(RuntimeError, match="added in 2.8"):
        with matmul_precision.fp32_matmul_precision("highest", "xla"):
            pass
    with pytest.raises(ValueError, match="'fastest'"):
        with matmul_precision.fp32_matmul_precision("fastest", "cpu"):
            pass
