"""labkit.precision.matmul: emulated levels are ordered, and this CPU computes true fp32."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from labkit.precision import matmul as mp

ROOT = Path(__file__).resolve().parents[2]  # the repository: benchmarks/ holds the committed runs


@pytest.fixture(scope="module")
def ab() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.standard_normal((64, 512)).astype(np.float32), rng.standard_normal((512, 64)).astype(np.float32)


def test_emulated_levels_are_ordered_and_near_theory(ab: tuple[np.ndarray, np.ndarray]) -> None:
    lv = mp.emulated_errors(*ab)
    assert lv["fp32"] < lv["bf16x3"] < lv["tf32"] < lv["tf32 truncated"] < lv["bf16"]
    # chopping toward zero: errors of one sign, up to a whole tf32 step -- far enough from rounding to tell apart
    assert 2.0 < lv["tf32 truncated"] / lv["tf32"] < 3.5
    # one rounding of each input: relative error ~ unit roundoff (random signs: not much more)
    assert 2.0**-13 < lv["tf32"] < 2.0**-9 and 2.0**-10 < lv["bf16"] < 2.0**-6
    assert lv["fp32"] < 1e-6


def test_behaves_like_picks_the_nearest_level_in_log_scale() -> None:
    levels = {"fp32": 1e-7, "tf32": 3e-4, "bf16": 2e-3}
    assert mp.behaves_like(2e-7, levels) == "fp32"
    assert mp.behaves_like(0.0, levels) == "fp32"
    assert mp.behaves_like(6e-4, levels) == "tf32"  # a truncating tf32 is ~2x the rounding one
    assert mp.behaves_like(5e-3, levels) == "bf16"


def test_the_h100s_tf32_rounds_to_nearest() -> None:
    """The H100's JAX DEFAULT (2026-11-25, 1024x4096 @ 4096x1024): 2.942e-4 vs 2.941e-4 emulated round-to-nearest."""
    rng = np.random.default_rng(0)  # the lab's full-profile matrices: default_precision_table(1024, 4096, seed=0)
    a, b = rng.standard_normal((1024, 4096)).astype(np.float32), rng.standard_normal((4096, 1024)).astype(np.float32)
    lv = mp.emulated_errors(a, b)
    assert lv["tf32"] == pytest.approx(2.941e-4, rel=1e-3)
    assert mp.rounding_mode(2.942e-4, lv) == "round to nearest" and mp.behaves_like(2.942e-4, lv) == "tf32"
    assert mp.rounding_mode(lv["tf32 truncated"] * 1.01, lv) == "truncate"  # a truncating chip would show


def test_rel_error() -> None:
    ref = np.array([[3.0, 4.0]])
    assert mp.rel_error(ref, ref) == 0.0 and mp.rel_error(np.zeros((1, 2)), ref) == 1.0


def test_cpu_runs_true_fp32_in_both_frameworks(ab: tuple[np.ndarray, np.ndarray]) -> None:
    lv = mp.emulated_errors(*ab)
    for setting, err in mp.jax_errors(*ab).items():
        assert mp.behaves_like(err, lv) == "fp32", setting
    assert mp.behaves_like(mp.torch_errors(*ab)["highest"], lv) == "fp32"


def test_torch_setting_is_restored() -> None:
    before = torch.get_float32_matmul_precision()
    mp.torch_errors(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32))
    assert torch.get_float32_matmul_precision() == before


def test_table_rows_and_documented_behaviour() -> None:
    rows = mp.default_precision_table(32, 256, frameworks=("jax",))
    assert {r["setting"] for r in rows if r["framework"] == "jax"} == set(mp.JAX_SETTINGS)
    assert [r["default"] for r in rows if r["framework"] == "jax"] == [True, False, False]
    emulated = {r["setting"]: r["behaves like"] for r in rows if r["framework"] == "emulated"}
    assert emulated == {"inputs rounded to fp32": "fp32", "inputs rounded to bf16x3": "bf16x3",
                        "inputs rounded to tf32": "tf32", "inputs truncated to tf32": "tf32 truncated",
                        "inputs rounded to bf16": "bf16"}
    assert "TF32" in mp.expected("gpu", True, "NVIDIA A100")["jax"]
    assert "bf16 pass" in mp.expected("tpu", True)["jax"]
    assert "no TF32" in mp.expected("gpu", False, "Tesla T4")["jax"]


def test_documented_level_is_what_each_runtime_measured() -> None:
    levels = set(mp.emulated_errors(np.ones((2, 2), np.float32), np.ones((2, 2), np.float32)))
    want = {("tpu", True): "bf16", ("gpu", True): "tf32", ("gpu", False): "fp32", ("cpu", False): "fp32",
            ("cpu", True): "fp32"}  # a bf16-capable CPU still computes fp32 dots in fp32 (XLA:CPU)
    for (platform, bf16), level in want.items():
        assert mp.documented_level(platform, bf16) == level and level in levels
    # This CPU, measured: JAX's DEFAULT row behaves like the documented level.
    rows = mp.default_precision_table(32, 256, frameworks=("jax",))
    got = next(r["behaves like"] for r in rows if r["framework"] == "jax" and r["setting"] == "DEFAULT")
    assert got == mp.documented_level("cpu", False)
    # The committed H100 run (Lab 04, full profile) measured TF32, as documented for an Ampere+ GPU.
    report = json.loads((ROOT / "benchmarks" / "nvidia-h100-80gb-hbm3" / "report.json").read_text())
    m = next(e for e in report["labs"] if e["name"] == "04_mixed_precision")["metrics"]
    assert m["jax_default_matmul_behaves_like"] == mp.documented_level("gpu", True)
    with pytest.raises(ValueError, match="platform must be 'cpu', 'gpu' or 'tpu'.*got 'cuda'"):
        mp.documented_level("cuda", True)
