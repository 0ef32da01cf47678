"""labkit.export.ranking (Lab 05): a path is named fastest only beyond this run's own noise."""

from __future__ import annotations

import pytest

from labkit.export import ranking, serve


def _st(path: str, batch: int, tps: float) -> serve.ServeStats:
    return serve.ServeStats(path, batch, 4, 4, 1.0, 1.0, 1.0, 1.0, tps, 1)


# Lab 05's smoke sweep on the 2-core CPU (2026-11-29): tokens/s per path at batch 1 and 8.
CPU_RUN = [_st("torch eager", 1, 1550.0), _st("torch eager", 8, 14900.0), _st("torch.export", 1, 1650.0),
           _st("torch.export", 8, 10800.0), _st("JAX jit", 1, 5160.0), _st("JAX jit", 8, 15400.0),
           _st("StableHLO", 1, 6530.0), _st("StableHLO", 8, 19100.0)]


def test_the_same_program_run_two_ways_sets_the_margin() -> None:
    # StableHLO is the jit step serialized: 6530 / 5160 = 1.27x at batch 1, 19100 / 15400 = 1.24x at batch 8
    assert ranking.noise_margin(CPU_RUN) == pytest.approx(6530 / 5160)
    # The run named "fastest StableHLO" at both ends by the fixed 10% rule; its own spread says it cannot tell
    assert ranking.best_path(CPU_RUN, 1, margin=ranking.FASTEST_MARGIN) == "StableHLO"
    assert ranking.best_path(CPU_RUN, 1) == "StableHLO ≈ JAX jit"
    assert ranking.best_path(CPU_RUN, 8) == "StableHLO ≈ JAX jit"  # 1.24x < 1.27x; torch eager 14,900 is 3rd
    # A lead beyond that spread is still named: the H200's CUDA graph at 1.83x JAX jit
    gpu = [_st("torch eager + CUDA graph", 32, 42700.0), _st("JAX jit", 32, 23300.0), _st("StableHLO", 32, 19900.0)]
    assert ranking.noise_margin(gpu) == pytest.approx(23300 / 19900)
    assert ranking.best_path(gpu, 32) == "torch eager + CUDA graph"


def test_without_both_same_program_rows_the_margin_is_ten_percent() -> None:
    assert ranking.noise_margin([_st("JAX jit", 1, 100.0), _st("torch eager", 1, 50.0)]) == ranking.FASTEST_MARGIN
    close = [_st("JAX jit", 8, 1000.0), _st("StableHLO", 8, 1050.0)]  # 5% apart: under 10%, the floor holds
    assert ranking.noise_margin(close) == ranking.FASTEST_MARGIN
    with pytest.raises(ValueError, match="margin must be a factor >= 1"):
        ranking.fastest({"a": 1.0}, 0.9)
