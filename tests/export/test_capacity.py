"""labkit.export.capacity: an engine timed under load, and the capacity estimate's miss by term, worked
out by hand on load's fake clock and fake engine (prefill 1 s, decode step 1 s unless said)."""

from __future__ import annotations

import numpy as np
import pytest

from labkit.export import capacity as cap
from labkit.export import load
from labkit.export.load import FakeClock, FakeEngine, Request


def _req(i: int, arrival: float, first: int, n: int) -> Request:
    return Request(i, arrival, np.array([first]), n)


# A (out 3) and B (out 1) arrive at 0, C (out 2) at 0.5; 2 rows (tests/export/test_load.py's timeline).
ABC = [_req(0, 0.0, 10, 3), _req(1, 0.0, 20, 1), _req(2, 0.5, 30, 2)]


def _timed_run(requests: list[Request], policy: str = "continuous", slots: int = 2, **cost):
    clock = FakeClock()
    timed = cap.TimedEngine(FakeEngine(slots, clock, **cost), clock=clock)
    traces = load.serve_open_loop(requests, timed, policy, clock=clock)
    return timed, traces


def test_timed_engine_times_every_call_and_counts_busy_rows_by_hand() -> None:
    timed, traces = _timed_run(ABC)
    # t=1 A's prefill, t=2 B's (B done, its row freed), t=3 C's; steps at t=4 (A, C) and t=5 (A).
    assert timed.admit_s == [1.0, 1.0, 1.0] and timed.step_s == [1.0, 1.0] and timed.rows == [2, 1]
    assert timed.slots == 2 and timed.engine.steps == 2  # the engine's own attributes show through
    clock = FakeClock()
    plain = load.serve_open_loop(ABC, FakeEngine(2, clock), "continuous", clock=clock)
    assert [t.token_s for t in traces] == [t.token_s for t in plain]  # the wrapper changes nothing served


def test_loaded_terms_add_up_to_the_duration_by_hand() -> None:
    timed, traces = _timed_run(ABC)
    run = cap.loaded_terms(timed, traces)
    # 3 requests in 5 s: prefill 1 s, (2 + 0 + 1) / 3 = 1 later token per request, step 1 s over 1.5 rows, no idle
    assert (run.prefill_s, run.step_s, run.decode_tokens, run.rows, run.idle_s) == (1.0, 1.0, 1.0, 1.5, 0.0)
    assert run.per_request_s == pytest.approx(5 / 3) and run.req_per_s == pytest.approx(
        load.load_stats(traces, load.SLO()).request_throughput)


def test_idle_time_and_row_dependent_steps_are_terms_too() -> None:
    # One request at 10 s (out 3): the server waits 10 s, prefills (1 s), then 2 steps of 0.5 + 0.25 x 1 busy row.
    timed, traces = _timed_run([_req(0, 10.0, 1, 3)], step_s=(0.5, 0.25))
    run = cap.loaded_terms(timed, traces)
    assert run.idle_s == pytest.approx(10.0) and run.step_s == pytest.approx(0.75) and run.rows == 1.0
    assert run.per_request_s == pytest.approx(traces[0].token_s[-1])  # 10 + 1 + 2 x 0.75 = 12.5 s


def test_a_wrong_row_count_breaks_the_sum() -> None:
    # The notebook asserts the terms add up to the duration: that holds only if the busy rows were counted right.
    timed, traces = _timed_run(ABC)
    timed.rows[:] = [2, 2]  # as if the freed row had still counted as busy
    assert cap.loaded_terms(timed, traces).per_request_s != pytest.approx(5 / 3)


def test_the_capacity_estimate_by_hand() -> None:
    est = cap.estimate_terms(ABC, 1.0, 1.0, 2)
    # mean output_len - 1 = (2 + 0 + 1) / 3 = 1; per request 1 + 1 x 1 / 2 = 1.5 s
    assert (est.decode_tokens, est.rows, est.idle_s) == (1.0, 2.0, 0.0) and est.per_request_s == 1.5
    assert est.req_per_s == pytest.approx(1 / 1.5)
    # Lab 05's idle-server numbers: mean decode steps (4 + 8) / 2 = 6; 1 / (0.01 + 6 * 0.002 / 4) = 1 / 0.013
    two = [Request(7, 0.0, np.arange(3), 5), Request(8, 0.1, np.arange(2), 9)]
    assert cap.estimate_terms(two, 0.01, 0.002, 4).req_per_s == pytest.approx(1 / 0.013)
    with pytest.raises(ValueError, match="slots >= 1"):
        cap.estimate_terms(ABC, 1.0, 1.0, 0)
    with pytest.raises(ValueError, match="need requests"):
        cap.estimate_terms([], 1.0, 1.0, 2)


def test_explain_by_hand_and_the_parts_sum_to_the_miss() -> None:
    timed, traces = _timed_run(ABC)
    parts = cap.explain(cap.estimate_terms(ABC, 1.0, 1.0, 2), cap.loaded_terms(timed, traces))
    # Only the rows differ: 1 token x 1 s x (1 / 1.5 - 1 / 2) = 1/6 s per request, the whole miss (5/3 - 1.5).
    assert parts == pytest.approx({"prefill": 0, "decode step": 0, "rows per step": 1 / 6, "decode tokens": 0,
                                   "idle": 0})
    assert set(parts) == set(cap.TERMS)
    rng = np.random.default_rng(0)
    for _ in range(20):  # any two sets of terms: the parts add up to the difference, whichever way it went
        e, r = (cap.Terms(*rng.uniform(0.1, 2.0, 4), idle_s=rng.uniform(0, 1)) for _ in range(2))
        assert sum(cap.explain(e, r).values()) == pytest.approx(r.per_request_s - e.per_request_s)


def test_describe_ranks_names_the_direction_and_drops_zeros() -> None:
    parts = {"prefill": -2e-4, "decode step": 3e-4, "rows per step": 1e-4, "decode tokens": 0.0, "idle": 1e-7}
    assert cap.describe(parts) == ("decode step +0.300 ms (slower), prefill -0.200 ms (faster), "
                                   "rows per step +0.100 ms (fewer)")
    assert cap.describe({"rows per step": -1e-3, "idle": 2e-3}) == ("idle +2.000 ms (more), "
                                                                   "rows per step -1.000 ms (more)")
    assert cap.describe(dict.fromkeys(cap.TERMS, 0.0)) == "no term moved"


def test_loaded_terms_refuse_a_wrapper_reused_across_runs() -> None:
    clock = FakeClock()
    timed = cap.TimedEngine(FakeEngine(2, clock), clock=clock)
    load.serve_open_loop(ABC, timed, "static", clock=clock)
    traces = load.serve_open_loop(ABC, timed, "static", clock=clock)
    with pytest.raises(ValueError, match="fresh TimedEngine for each run"):
        cap.loaded_terms(timed, traces)


def test_real_torch_engine_under_a_burst() -> None:
    # The lab's engine, timed by the real clock: every step runs all rows, and the terms still add up.
    import torch

    from labkit.export.slots import TorchSlots
    from labkit.gpt.config import get_config
    from labkit.gpt.torch_model import TorchGPT

    torch.manual_seed(0)
    cfg = get_config("test", seq_len=32, d_model=32, n_head=2)
    reqs = [Request(r.id, 0.0, r.prompt, r.output_len)
            for r in load.poisson_requests(12, 1.0, (2, 6), (2, 8), cfg.vocab_size, seed=1)]
    timed = cap.TimedEngine(TorchSlots(TorchGPT(cfg), 4, device="cpu"))
    traces = load.serve_open_loop(reqs, timed, "continuous")
    run = cap.loaded_terms(timed, traces)
    assert 1 <= min(timed.rows) and max(timed.rows) == 4 and sum(timed.rows) == sum(len(t.token_s) - 1 for t in traces)
    assert run.req_per_s == pytest.approx(load.load_stats(traces, load.SLO()).request_throughput, rel=1e-9)


def test_timed_engine_charges_a_batch_prefill_in_equal_shares_and_keeps_row_by_row_engines() -> None:
    clock = FakeClock()  # static {A, B}: one call of 1 s, half a second each; then {C}: 1 s
    timed = cap.TimedEngine(FakeEngine(2, clock), clock=clock)
    traces = load.serve_open_loop(ABC, timed, "static", clock=clock)
    assert timed.admit_s == [0.5, 0.5, 1.0] and sum(timed.admit_s) == 2.0  # the server time spent admitting
    run = cap.loaded_terms(timed, traces)
    assert run.per_request_s * 3 == pytest.approx(max(t.token_s[-1] for t in traces))  # still adds up: 5 s

    class RowByRow(FakeEngine):
        admit_batch = None

    clock = FakeClock()
    plain = cap.TimedEngine(RowByRow(2, clock), clock=clock)
    assert plain.admit_batch is None  # the scheduler falls back to one admit per row, each timed
    load.serve_open_loop(ABC, plain, "static", clock=clock)
    assert plain.admit_s == [1.0, 1.0, 1.0]


def test_machine_or_load_by_hand() -> None:
    # Every step 2 ms against a 1 ms idle step: slower all run, no stalls -> the machine.
    busy = cap.machine_or_load([2e-3] * 9, 1e-3)
    assert (busy.slow, busy.spread, busy.machine) == (2.0, 1.0, True)
    # Typical step as idle, a few 20 ms stalls: the mean moves, the median does not -> the load's stalls.
    stalls = cap.machine_or_load([1e-3] * 8 + [20e-3, 20e-3], 1e-3)
    assert stalls.slow == 1.0 and stalls.spread == pytest.approx(4.8 / 1.0) and not stalls.machine
    # Slower typical step but a wide spread: stalls, not a steady slowdown.
    mixed = cap.machine_or_load([2e-3] * 8 + [30e-3, 30e-3], 1e-3)
    assert mixed.slow == 2.0 and mixed.spread == pytest.approx(7.6 / 2) and not mixed.machine
    # At the thresholds: strictly above BUSIER, strictly within STEADY.
    assert not cap.machine_or_load([cap.BUSIER * 1e-3] * 3, 1e-3).machine
    assert cap.machine_or_load([1.31e-3] * 3, 1e-3).machine


@pytest.mark.parametrize("steps, idle", [([], 1e-3), ([1e-3, 0.0], 1e-3), ([1e-3], 0.0), ([1e-3], float("nan"))])
def test_machine_or_load_refuses_empty_or_non_positive_times(steps: list[float], idle: float) -> None:
    with pytest.raises(ValueError, match="TimedEngine.step_s"):
        cap.machine_or_load(steps, idle)
