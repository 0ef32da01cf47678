"""labkit.export.load: the open-loop scheduler and vLLM's serving metrics, on a fake clock and a fake
engine (prefill 1 s, decode step 1 s) so every number below is worked out by hand in the comments."""

from __future__ import annotations

import math

import numpy as np
import pytest

from labkit.export import load
from labkit.export.load import SLO, FakeClock, FakeEngine, Request


def _req(i: int, arrival: float, first: int, n: int) -> Request:
    return Request(i, arrival, np.array([first]), n)


class RowByRow(FakeEngine):
    """An engine of the minimal contract: no admit_batch, so a static batch is prefilled one row per call."""

    admit_batch = None


def _serve(requests: list[Request], policy: str, slots: int = 2, batched: bool = True,
           **cost) -> tuple[list[load.Trace], FakeEngine]:
    clock = FakeClock()
    engine = (FakeEngine if batched else RowByRow)(slots, clock, **cost)
    return load.serve_open_loop(requests, engine, policy, clock=clock), engine


# A (out 3) and B (out 1) arrive at 0, C (out 2) at 0.5; 2 rows, prefill 1 s, step 1 s.
ABC = [_req(0, 0.0, 10, 3), _req(1, 0.0, 20, 1), _req(2, 0.5, 30, 2)]


def test_continuous_batching_timeline_and_metrics_by_hand() -> None:
    traces, engine = _serve(ABC, "continuous")
    # t=1 A's prefill -> A1; t=2 B's prefill -> B1 (B done, row 1 free); C arrived at 0.5 and
    # joins row 1: t=3 C1; step t=4 -> A2, C2 (C done); step t=5 -> A3.
    assert [t.token_s for t in traces] == [(1.0, 4.0, 5.0), (2.0,), (3.0, 4.0)]
    assert [t.tokens for t in traces] == [(11, 12, 13), (21,), (31, 32)]  # fake tokens: +1 per step, per row
    a, b, c = traces
    assert (a.ttft_s, a.e2e_s, a.itl_s, a.tpot_s) == (1.0, 5.0, (3.0, 1.0), 2.0)  # TPOT (5 - 1) / 2
    assert (b.ttft_s, b.e2e_s, b.itl_s, b.tpot_s) == (2.0, 2.0, (), None)  # one token: no TPOT
    assert (c.ttft_s, c.e2e_s, c.itl_s, c.tpot_s) == (2.5, 3.5, (1.0,), 1.0)
    assert engine.steps == 2

    s = load.load_stats(traces, SLO(ttft_s=2.0, tpot_s=1.5), "continuous", 1.0)
    assert s.duration_s == 5.0 and s.completed == 3
    assert s.request_throughput == pytest.approx(3 / 5) and s.output_throughput == pytest.approx(6 / 5)
    # np.percentile (linear), as vLLM: TTFT [1, 2, 2.5] -> p50 2, p95 at rank 1.9 -> 2 + 0.9 * 0.5
    assert s.ms("ttft", 50) == pytest.approx(2000) and s.ms("ttft", 95) == pytest.approx(2450)
    assert s.ms("ttft", 99) == pytest.approx(2490)
    assert s.ms("tpot", 50) == pytest.approx(1500) and s.ms("tpot", 99) == pytest.approx(1990)  # [1, 2]
    assert s.ms("itl", 50) == pytest.approx(1000) and s.ms("itl", 95) == pytest.approx(2800)  # [1, 1, 3]
    assert s.ms("e2e", 50) == pytest.approx(3500)  # [2, 3.5, 5]
    # Goodput: A misses TPOT (2 > 1.5), C misses TTFT (2.5 > 2); B meets both (TTFT 2 <= 2, TPOT 0)
    assert s.goodput == pytest.approx(1 / 5)
    assert s.row()["ttft_p99_ms"] == pytest.approx(2490) and s.row()["slo_tpot_s"] == 1.5
    assert s.arrival_rate == pytest.approx(2 / 0.5)  # 3 arrivals over 0.5 s: 2 gaps -> 4 requests/s
    assert math.isnan(load.load_stats(traces[:2], SLO()).arrival_rate)  # A and B together: no span


def test_static_batching_timeline_by_hand() -> None:
    traces, _ = _serve(ABC, "static")
    # Batch {A, B}: one padded prefill call ends at t=1 and the batch's first tokens leave together:
    # A1, B1 (B done; its row idles); C waits for the batch: steps t=2 A2, t=3 A3; then batch {C}:
    # t=4 C1, t=5 C2.
    assert [t.token_s for t in traces] == [(1.0, 2.0, 3.0), (1.0,), (4.0, 5.0)]
    assert traces[0].itl_s == (1.0, 1.0) and traces[0].tpot_s == 1.0
    s = load.load_stats(traces, SLO(ttft_s=2.0, tpot_s=1.5), "static", 1.0)
    assert s.duration_s == 5.0
    assert s.goodput == pytest.approx(2 / 5)  # A (TTFT 1, TPOT 1) and B meet it; C's TTFT is 3.5


def test_static_batching_row_by_row_without_admit_batch() -> None:
    traces, _ = _serve(ABC, "static", batched=False)
    # Batch {A, B}: prefills end at t=1 and t=2, and the batch's first tokens leave together at
    # t=2: A1, B1; steps t=3 A2, t=4 A3; then batch {C}: t=5 C1, t=6 C2.
    assert [t.token_s for t in traces] == [(2.0, 3.0, 4.0), (2.0,), (5.0, 6.0)]
    # the prefill gap does not land inside A's stream: its tokens come a step apart (ITL 1, 1)
    assert traces[0].itl_s == (1.0, 1.0) and traces[0].tpot_s == 1.0
    s = load.load_stats(traces, SLO(ttft_s=2.0, tpot_s=1.5), "static", 1.0)
    assert s.duration_s == 6.0
    assert s.goodput == pytest.approx(2 / 6)  # A (TTFT 2, TPOT 1) and B meet it; C's TTFT is 4.5


def test_one_padded_call_costs_its_rows_times_the_longest_prompt() -> None:
    # prefill 0.5 + 0.25 * tokens: prompts of 2 and 4 tokens -> one call of 2 rows x 4 = 8 tokens, 2.5 s
    # (row by row: 0.5 + 0.5, then 0.5 + 1.0: 2.5 s too, but the first row's token would wait for both)
    reqs = [Request(0, 0.0, np.array([1, 2]), 2), Request(1, 0.0, np.array([5, 6, 7, 8]), 1)]
    traces, engine = _serve(reqs, "static", prefill_s=(0.5, 0.25), step_s=(0.1, 0.2))
    assert [t.token_s[0] for t in traces] == [2.5, 2.5] and [t.tokens[0] for t in traces] == [3, 9]
    assert traces[0].token_s[1] == pytest.approx(2.5 + 0.1 + 0.2 * 1)  # B left at prefill: one busy row
    assert engine.busy == set()


def test_static_vs_continuous_head_of_line_blocking() -> None:
    # One long request (5 tokens) and three 1-token ones, all at 0, two rows.
    reqs = [_req(0, 0.0, 10, 5)] + [_req(i, 0.0, 10 * (i + 1), 1) for i in (1, 2, 3)]
    static, _ = _serve(reqs, "static")
    cont, _ = _serve(reqs, "continuous")
    # static: batch {R0, R1}: one prefill call ends at 1 -> R0@1, R1@1; R0's 4 steps end at 5; then
    # {R2, R3}: one call -> both @6.
    assert [t.ttft_s for t in static] == [1.0, 1.0, 6.0, 6.0]
    # continuous: R2 and R3 take R1's freed row at once: @3, @4; R0's steps then run 5..8.
    assert [t.ttft_s for t in cont] == [1.0, 2.0, 3.0, 4.0]
    assert static[0].e2e_s == 5.0 and cont[0].e2e_s == 8.0  # the price: R0 waits for their prefills
    a, b = (load.load_stats(t, SLO(ttft_s=4.0)) for t in (static, cont))
    assert a.ms("ttft", 50) == pytest.approx(3500) and b.ms("ttft", 50) == pytest.approx(2500)
    assert a.goodput == pytest.approx(2 / 6) and b.goodput == pytest.approx(4 / 8)  # durations 6 s and 8 s


def test_kept_up_is_p50_ttft_within_the_slo() -> None:
    # The head-of-line case above: p50 TTFT static 3.5 s, continuous 2.5 s; at the boundary it still counts.
    reqs = [_req(0, 0.0, 10, 5)] + [_req(i, 0.0, 10 * (i + 1), 1) for i in (1, 2, 3)]
    static, cont = (load.load_stats(_serve(reqs, p)[0], SLO(ttft_s=2.5)) for p in ("static", "continuous"))
    assert cont.kept_up() and not static.kept_up()
    assert not load.load_stats(_serve(reqs, "continuous")[0], SLO(tpot_s=1.0)).kept_up()  # no TTFT objective


def test_idle_server_jumps_to_the_next_arrival_and_cost_terms_count() -> None:
    # prefill 0.5 + 0.25 * L s, step 0.1 + 0.2 * busy rows s
    reqs = [Request(0, 0.0, np.array([1, 2]), 2), Request(1, 10.0, np.array([5, 6, 7, 8]), 1)]
    traces, _ = _serve(reqs, "continuous", prefill_s=(0.5, 0.25), step_s=(0.1, 0.2))
    assert traces[0].token_s == pytest.approx((1.0, 1.3))  # 0.5 + 0.5; then 0.1 + 0.2 * 1
    assert traces[1].token_s == pytest.approx((11.5,))  # idle until 10, then 0.5 + 1.0
    assert traces[1].ttft_s == pytest.approx(1.5)


def test_poisson_requests_are_seeded_scaled_and_mixed() -> None:
    a = load.poisson_requests(4000, 10.0, (2, 9), (1, 5), 256, seed=3)
    assert a[0].arrival_s == 0.0  # the first is sent at once
    gaps = np.diff([r.arrival_s for r in a])
    assert gaps.mean() == pytest.approx(0.1, rel=0.05) and (gaps >= 0).all()
    assert np.std(gaps) == pytest.approx(0.1, rel=0.1)  # exponential: std == mean
    assert {r.prompt.size for r in a} == set(range(2, 10)) and {r.output_len for r in a} == set(range(1, 6))
    b = load.poisson_requests(4000, 20.0, (2, 9), (1, 5), 256, seed=3)
    assert [2 * y.arrival_s for y in b] == pytest.approx([x.arrival_s for x in a])  # same draw, twice the rate
    assert all(np.array_equal(x.prompt, y.prompt) and x.output_len == y.output_len for x, y in zip(a, b))
    c = load.poisson_requests(50, 10.0, (2, 9), (1, 5), 256, seed=4)
    assert [r.arrival_s for r in c] != [r.arrival_s for r in a[:50]]
    assert all(r.arrival_s == 0.0 for r in load.poisson_requests(5, math.inf, (1, 2), (1, 2), 256))


def test_sweep_rates_labels_every_point() -> None:
    clock = FakeClock()
    out = load.sweep_rates(FakeEngine(2, clock), [0.5, 4.0], 6, (1, 3), (1, 4), SLO(ttft_s=1.5), clock=clock)
    assert [(s.policy, s.rate) for s in out] == [("static", 0.5), ("continuous", 0.5),
                                                 ("static", 4.0), ("continuous", 4.0)]
    assert all(s.completed == 6 and s.goodput <= s.request_throughput for s in out)


@pytest.mark.parametrize("rate", [0, -1.0, float("nan")])
def test_bad_rate_named(rate) -> None:
    with pytest.raises(ValueError, match=rf"rate must be > 0 requests/s.*got {rate!r}"):
        load.poisson_requests(3, rate, (1, 2), (1, 2), 256)


@pytest.mark.parametrize("kwargs, match", [
    (dict(ttft_s=-0.1), r"SLO ttft_s must be .* got -0.1"),
    (dict(tpot_s=float("nan")), r"SLO tpot_s .* got nan"),
    (dict(e2e_s=-5), r"SLO e2e_s .* got -5"),
])
def test_bad_slo_named(kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        SLO(**kwargs)


def test_bad_requests_and_policy() -> None:
    clock = FakeClock()
    engine = FakeEngine(2, clock, max_tokens=8)
    with pytest.raises(ValueError, match="no requests"):
        load.serve_open_loop([], engine, clock=clock)
    with pytest.raises(ValueError, match="policy must be one of"):
        load.serve_open_loop(ABC, engine, "fifo", clock=clock)
    with pytest.raises(ValueError, match=r"request 0 needs 6 prompt \+ 3 output = 9 positions; .* holds 8"):
        load.serve_open_loop([Request(0, 0.0, np.arange(6), 3)], engine, clock=clock)
    with pytest.raises(ValueError, match="request 4: needs a non-empty prompt and output_len >= 1.*output_len=0"):
        load.serve_open_loop([Request(4, 0.0, np.arange(2), 0)], engine, clock=clock)
    with pytest.raises(ValueError, match=r"request 1: arrival_s .* got -1.0"):
        load.serve_open_loop([Request(1, -1.0, np.arange(2), 1)], engine, clock=clock)
    with pytest.raises(ValueError, match=r"prompt_len must be \(lo, hi\).*got \(3, 2\)"):
        load.poisson_requests(3, 1.0, (3, 2), (1, 2), 256)
    with pytest.raises(ValueError, match="no traces"):
        load.load_stats([], SLO())
    assert SLO(ttft_s=0.2, tpot_s=0.05).describe() == "TTFT <= 200 ms, TPOT <= 50 ms"
    assert SLO(e2e_s=0.00363662).describe() == "E2E <= 3.64 ms"


@pytest.mark.parametrize("slots", [0, -1, 2.5, True])
def test_engine_without_rows_refused_instead_of_hanging(slots) -> None:
    # slots=0 once spun forever: no free row, so no request was ever admitted.
    with pytest.raises(ValueError, match=rf"slots must be a positive integer \(rows served at once\), got {slots!r}"):
        FakeEngine(slots, FakeClock())

    class NoRows:  # any engine: serve_open_loop checks before its loop starts
        pass

    NoRows.slots = slots
    with pytest.raises(ValueError, match=rf"engine.slots must be a positive integer .*got {slots!r}"):
        load.serve_open_loop(ABC, NoRows(), "static")


def test_numpy_scalars_accepted_where_numbers_are() -> None:
    reqs = load.poisson_requests(np.int64(3), np.float32(2.0), (np.int64(1), 3), (1, 2), np.int64(256))
    assert len(reqs) == 3 and reqs == load.poisson_requests(3, 2.0, (1, 3), (1, 2), 256)
    assert SLO(ttft_s=np.float64(0.5)).ttft_s == 0.5
    with pytest.raises(ValueError, match=r"prompt_len must be \(lo, hi\) integers .*got 4; for one fixed length n"):
        load.poisson_requests(5, 1.0, 4, (1, 3), 256)
    with pytest.raises(ValueError, match=r"vocab_size must be a positive integer .*got 0"):
        load.poisson_requests(5, 1.0, (1, 2), (1, 3), 0)


def test_a_str_where_a_list_is_expected_and_bad_traces() -> None:
    with pytest.raises(TypeError, match=r"policies must be a list, got 'static': pass \['static'\]"):
        load.sweep_rates(FakeEngine(1, FakeClock()), [1.0], 2, (1, 2), (1, 2), SLO(), policies="static")
    with pytest.raises(TypeError, match=r"slo must be an SLO \(SLO\(\) for none\), got None"):
        load.load_stats([load.Trace(0, 0.0, 3, (1.0,), (1,))], None)
    with pytest.raises(ValueError, match="trace 0: no token times"):
        load.Trace(0, 0.0, 3, (), ())
    with pytest.raises(ValueError, match=r"trace 0: token times must be >= its arrival \(5.0\)"):
        load.Trace(0, 5.0, 3, (1.0,), (1,))  # once a TTFT of -4 s that met every SLO


def test_alone_spaces_requests_out() -> None:
    """Lab 05 and bench_serve_load share this: an idle server's requests (each served alone)."""
    reqs = [Request(7, 0.0, np.arange(3), 5), Request(8, 0.1, np.arange(2), 9)]
    calm = load.alone(reqs)
    assert [(r.id, r.arrival_s, r.output_len) for r in calm] == [(7, 0.0, 5), (8, 1e6, 9)]
    assert calm[1].prompt is reqs[1].prompt


def test_a_negative_seed_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="seed must be a whole number >= 0 .* got -1"):
        load.poisson_requests(4, 10.0, (2, 9), (1, 5), 256, seed=-1)
