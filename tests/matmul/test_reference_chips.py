"""Tests for labkit.matmul.reference_chips (Lab 01): the four chips answer through their own model."""
from __future__ import annotations

import numpy as np
import pytest

from labkit.matmul import reference_chips as rc
from labkit.matmul import simt, systolic

MXU128, MXU256, H100, T4 = rc.MODELS


def test_models_are_the_two_mxus_then_the_two_gpus():
    assert rc.MODELS == [*rc.MXUS, *rc.GPUS] and len(rc.MODELS) == 4
    assert rc.MXUS[MXU128] == (128, 128) and rc.MXUS[MXU256] == (256, 256)


def test_an_mxu_is_the_weight_stationary_cycle_model_at_its_array_size():
    assert rc.at(MXU128, "N", 129) / rc.at(MXU128, "N", 128) == pytest.approx(129 / 256, rel=1e-3)
    assert rc.at(MXU256, "K", 300) == systolic.cycles(rc.BIG, 300, rc.BIG, 256, 256, "ws").utilization
    assert rc.square(MXU128, 4097) == systolic.cycles(4097, 4097, 4097, 128, 128, "ws").utilization


def test_a_gpu_is_the_simt_model_of_its_spec():
    chip, dtype = rc.GPUS[H100]
    got = rc.predicted(H100, [1, 1024, 1025], "M")
    want = [simt.predict(m, rc.BIG, rc.BIG, chip, dtype).fraction_of_peak for m in (1, 1024, 1025)]
    np.testing.assert_allclose(got, want, rtol=0, atol=0)
    assert rc.at(T4, "N", 1025) == simt.predict(rc.BIG, 1025, rc.BIG, *rc.GPUS[T4]).fraction_of_peak
    assert rc.square(T4, 640) == simt.predict(640, 640, 640, *rc.GPUS[T4]).fraction_of_peak


def test_cliff_table_has_a_row_per_model_with_both_sides_of_each_cliff():
    rows = rc.cliff_table([MXU128, T4])
    assert [r["model"] for r in rows] == [MXU128, T4]
    assert rows[0]["N=129"] < 0.6 * rows[0]["N=128"]            # the padding cliff
    assert rows[1]["M=641"] < rows[1]["M=640"]                  # the T4's wave cliff
    assert rows[1]["square 4097"] < rows[1]["square 4096"]
    assert len(rc.cliff_table()) == 4


def test_unknown_models_and_dimensions_are_named():
    with pytest.raises(ValueError, match="unknown model 'TPU v9'"):
        rc.at("TPU v9", "N", 128)
    with pytest.raises(ValueError, match="unknown model"):
        rc.square("A100", 128)
    with pytest.raises(ValueError, match="vary must be"):
        rc.predicted(MXU128, [128], "B")
