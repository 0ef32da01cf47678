"""labkit.course.report: record() reaches the runner's metrics file; bad values are refused."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from labkit.course import report


def test_record_writes_metrics_file(tmp_path, monkeypatch) -> None:
    f = tmp_path / "m.json"
    monkeypatch.setenv(report.METRICS_ENV, str(f))
    assert report.record("mfu_jax", np.float32(0.5)) is None  # a cell ending in record() echoes nothing
    assert report.recorded()["mfu_jax"] == 0.5
    report.record("chip", "TPU v5 lite")
    report.record("peak_tflops_spec", None)
    data = json.loads(f.read_text())
    assert data == {"mfu_jax": 0.5, "chip": "TPU v5 lite", "peak_tflops_spec": None}
    assert report.read_metrics(f) == data
    assert report.recorded()["chip"] == "TPU v5 lite"


def test_record_without_runner_keeps_in_memory(monkeypatch) -> None:
    monkeypatch.delenv(report.METRICS_ENV, raising=False)
    report.record("x_value", 3)
    assert report.recorded()["x_value"] == 3


@pytest.mark.parametrize("bad", [math.nan, math.inf])
def test_non_finite_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="not finite"):
        report.record("v", bad)


def test_non_json_refused() -> None:
    with pytest.raises(TypeError, match="not JSON-serialisable"):
        report.record("v", object())


def test_bad_key_refused() -> None:
    with pytest.raises(ValueError, match="identifier"):
        report.record("has space", 1)


def test_read_metrics_missing_file(tmp_path) -> None:
    assert report.read_metrics(tmp_path / "none.json") == {}


def test_the_runner_variable_is_the_one_bench_reads_as_headless() -> None:
    # measure may not import course (layers), so bench names the variable itself: the two must agree.
    from labkit.measure import bench

    assert bench.HEADLESS_ENV == report.METRICS_ENV
