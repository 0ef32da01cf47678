"""labkit.sharding.comm_bench: the latency-bandwidth fit against closed forms, the lookup of this
runtime's topology, bad input, and the two collectives timed on 8 simulated devices (own process):
right values, right collective in the HLO, right bytes."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from labkit.measure import bench  # noqa: E402
from labkit.sharding import collectives as coll  # noqa: E402
from labkit.sharding import comm_bench as cb  # noqa: E402
from labkit.sharding import plots, topology  # noqa: E402
from tests.conftest import run_result  # noqa: E402


def points(kind: str, alpha: float, gbs: float, sizes=(2**15, 2**17, 2**19, 2**21), n: int = 8) -> list:
    """Exact points of t = alpha + S / B (S from the ring closed form)."""
    out = []
    for d in sizes:
        s = coll.bytes_sent(kind, d, n)
        out.append(cb.Point(kind, n, d, s, alpha + s / (gbs * 1e9), 0.0))
    return out


@pytest.mark.parametrize("kind", cb.KINDS)
def test_fit_recovers_alpha_and_bandwidth(kind: str) -> None:
    f = cb.fit(points(kind, 20e-6, 90.0))
    assert f.kind == kind and f.points == 4 and f.max_rel_residual < 1e-9
    assert f.alpha_s == pytest.approx(20e-6, rel=1e-6) and f.gbs == pytest.approx(90.0, rel=1e-6)
    assert f.seconds(1e9) == pytest.approx(20e-6 + 1e9 / 90e9)
    # alpha = S / B at S = alpha * B: 20 µs x 90 GB/s = 1.8 MB
    assert f.latency_bound_below() == pytest.approx(1.8e6)


def test_in_step_alpha_subtracts_the_launch_of_a_program() -> None:
    # 300 µs per standalone collective, of which 120 µs any program takes to launch on the mesh: 180 µs in a step.
    f = cb.fit(points("all-reduce", 300e-6, 1.0), floor_s=120e-6)
    assert f.alpha_s == pytest.approx(300e-6) and f.floor_s == 120e-6
    assert f.in_step_alpha_s == pytest.approx(180e-6)
    assert f.latency_bound_below(in_step=True) == pytest.approx(180e-6 * 1e9) and f.latency_bound_below() == pytest.approx(3e5)
    assert cb.fit(points("all-reduce", 300e-6, 1.0)).in_step_alpha_s == pytest.approx(300e-6)  # no floor given
    under = cb.fit(points("all-reduce", 100e-6, 1.0), floor_s=150e-6)  # the launch is all of it
    assert under.in_step_alpha_s < 0 and under.latency_bound_below(in_step=True) is None
    for bad in (-1e-6, float("nan"), float("inf"), "1e-4", True):
        with pytest.raises(ValueError, match="floor_s must be seconds >= 0"):
            cb.fit(points("all-reduce", 1e-5, 1.0), floor_s=bad)


def test_rows_as_nccl_tests_report_them() -> None:
    pts = points("all-reduce", 0.0, 50.0)
    for p, r in zip(pts, cb.rows(pts)):
        assert r["busbw GB/s"] == pytest.approx(50.0)  # no fixed cost: bus bandwidth is B itself
        assert r["algbw GB/s"] == pytest.approx(50.0 * 8 / (2 * 7))  # busbw = algbw x 2(n-1)/n
    bad = points("all-gather", 1e-5, 10.0)
    bad[1] = cb.Point(**{**bad[1].__dict__, "seconds": bad[1].seconds * 1.5})
    assert cb.fit(bad).max_rel_residual > 0.1


def test_fit_when_time_does_not_grow() -> None:
    flat = [cb.Point("all-gather", 8, d, coll.bytes_sent("all-gather", d, 8), 1e-3 - d * 1e-12, 0.0)
            for d in (2**15, 2**20)]
    f = cb.fit(flat)
    assert f.gbs is None and f.latency_bound_below() is None and f.seconds(1e6) == f.alpha_s


def test_fit_refuses_mixed_kinds_and_one_size() -> None:
    with pytest.raises(ValueError, match="one kind"):
        cb.fit(points("all-gather", 1e-5, 10) + points("all-reduce", 1e-5, 10))
    with pytest.raises(ValueError, match="2\\+ sizes"):
        cb.fit(points("all-reduce", 1e-5, 10, sizes=(2**15, 2**15)))


@pytest.mark.parametrize("kind, sizes, match", [
    ("broadcast", [2**15, 2**16], "kind must be one of"),
    ("all-gather", [2**15], "at least 2 array sizes"),
    ("all-gather", [2**15, 100], "divisible by 32"),
    ("all-reduce", [2**15, -64], "positive int"),
    ("all-reduce", [2**15, 64.0], "positive int"),
    ("all-reduce", [2**15, True], "positive int"),
])
def test_bad_sizes_and_kinds(kind: str, sizes: list, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        cb._check(kind, sizes, 8)


def test_topology_of_this_runtime() -> None:
    assert cb.for_runtime("TPU v5e", 8) == "TPU v5e-8"
    assert cb.for_runtime("NVIDIA H100 SXM", 8) == "8x H100 SXM"
    assert cb.for_runtime("NVIDIA H100 SXM", 256) == "256x H100 SXM"
    assert cb.for_runtime("TPU v5e", 4) is None and cb.for_runtime("AMD EPYC", 8) is None


def test_compare_against_the_closed_form() -> None:
    pts = points("all-reduce", 30e-6, 40.0)
    rows = cb.compare(pts, "TPU v5e-8")
    # v5e-8: a ring snaking through the 2x4 grid, both directions: 100 GB/s per device
    for p, r in zip(pts, rows):
        pred = 2 * 7 / 8 * p.array_bytes / 100e9
        assert r["predicted µs"] == pytest.approx(pred * 1e6)
        assert r["measured / predicted"] == pytest.approx(p.seconds / pred)
        assert r["predicted µs"] == pytest.approx(topology.collective_time("all-reduce", p.array_bytes, 8, "TPU v5e-8") * 1e6)


def test_plot_title_from_the_numbers() -> None:
    pts = {"all-gather": points("all-gather", 300e-6, 1.0), "all-reduce": points("all-reduce", 300e-6, 1.0)}
    fig = plots.plot_collective_fit(pts, {k: cb.fit(p) for k, p in pts.items()}, where="8 simulated CPU devices")
    title = fig.axes[0].get_title()
    grow = pts["all-reduce"][-1].seconds / pts["all-reduce"][0].seconds
    assert f"64x the bytes took {grow:.0f}x the time" in title and "fixed cost" in title
    bw = {"all-gather": points("all-gather", 1e-9, 1.0), "all-reduce": points("all-reduce", 1e-9, 1.0)}
    fig = plots.plot_collective_fit(bw, {k: cb.fit(p) for k, p in bw.items()},
                                    {k: [p.seconds for p in v] for k, v in bw.items()}, where="x")
    assert "bandwidth-bound throughout" in fig.axes[0].get_title()
    # With the fixed-cost verdicts, a flat growth whose fixed cost is not resolved says so instead.
    floor_t = bench.Timing(tuple([300e-6] * 10), warmup=1)  # the launch is all of alpha: nothing beyond it
    pts = {k: [cb.Point(**{**q.__dict__, "spread": 0.05, "repeats": 10}) for q in p] for k, p in pts.items()}  # 5 % noise
    fixed = {k: cb.fixed_cost(p, floor_t) for k, p in pts.items()}
    assert not any(f.resolved for f in fixed.values())
    title = plots.plot_collective_fit(pts, {k: cb.fit(p) for k, p in pts.items()}, fixed=fixed).axes[0].get_title()
    assert title.endswith("time grows slower than the bytes, but no fixed cost per call is resolved from the noise")
    assert len(fig.axes[0].get_legend().get_texts()) == 6  # measured, fit and prediction per kind
    plt.close("all")


def test_plot_title_rests_on_the_better_fit_and_flags_noisy_points() -> None:
    # The all-gather's largest point stalled (8x its time, repeats spread 1.2): that series grew the most,
    # but its fit is the worse one; the title must read the all-reduce and flag the stalled point.
    ar = points("all-reduce", 300e-6, 1.0)
    ag = points("all-gather", 300e-6, 1.0)
    ag[-1] = cb.Point(**{**ag[-1].__dict__, "seconds": ag[-1].seconds * 8, "spread": 1.2})
    pts = {"all-gather": ag, "all-reduce": ar}
    fits = {k: cb.fit(p) for k, p in pts.items()}
    assert fits["all-reduce"].max_rel_residual < fits["all-gather"].max_rel_residual
    title = plots.plot_collective_fit(pts, fits, where="x").axes[0].get_title()
    grow = ar[-1].seconds / ar[0].seconds
    assert f"took {grow:.0f}x the time (all-reduce, the better fit; 1 noisy point marked x)" in title, title
    plt.close("all")


def test_plot_title_ratio_skips_the_noisy_points_of_its_series() -> None:
    # The better fit's largest point is noisy (repeats spread 0.8): the ratio runs to the largest steady point,
    # 2**19 bytes, 16x the smallest, not to the noisy 2**21 (64x) -- and the title says so.
    ar = points("all-reduce", 300e-6, 1.0)
    ar[-1] = cb.Point(**{**ar[-1].__dict__, "spread": 0.8})
    ag = points("all-gather", 300e-6, 1.0)
    ag[1] = cb.Point(**{**ag[1].__dict__, "seconds": ag[1].seconds * 3})  # a worse fit, all steady
    pts = {"all-gather": ag, "all-reduce": ar}
    fits = {k: cb.fit(p) for k, p in pts.items()}
    assert cb.best_kind(fits, pts) == "all-reduce"
    title = plots.plot_collective_fit(pts, fits, where="x").axes[0].get_title()
    grow = ar[-2].seconds / ar[0].seconds
    assert f"16x the bytes took {grow:.0f}x the time (all-reduce steady points, the better fit; 1 noisy point" in title, title
    # Fewer than two steady points: every point sets the ratio, and the title says the noisy ones are in it.
    for i in range(1, 4):
        ar[i] = cb.Point(**{**ar[i].__dict__, "spread": 0.8})
    title = plots.plot_collective_fit(pts, fits, where="x").axes[0].get_title()
    assert "64x the bytes" in title and "(all-reduce all points, noisy ones included, the better fit; 3 noisy" in title, title
    plt.close("all")


SCRIPT = r"""
import json
import labkit
labkit.setup(cpu_devices=8, quiet=True)
import jax, numpy as np
from jax.sharding import NamedSharding, PartitionSpec as P
from labkit.sharding import collectives as coll, comm_bench as cb, layouts as sharding
mesh = sharding.make_mesh((8,), ("data",), "auto", sharding.mesh_devices(8))
out = {}
for kind in cb.KINDS:
    x = cb._input(kind, 2**12, 8)
    y = np.asarray(cb.collective(kind, mesh)(jax.device_put(x, NamedSharding(mesh, P("data")))))
    want = x if kind == "all-gather" else x.sum(0, keepdims=True)
    pts = cb.measure(kind, mesh, [2**12, 2**14], repeats=2)
    out["floor"] = cb.floor(mesh, 2**12, repeats=2)
    out["floor_hlo"] = coll.kinds(coll.collectives(cb.no_collective(mesh).lower(
        jax.device_put(cb._input("all-gather", 2**12, 8), NamedSharding(mesh, P("data")))).compile()))
    try:
        cb.floor(mesh, 100)
    except ValueError as e:
        out["floor_bad"] = str(e)
    out[kind] = {"err": float(np.max(np.abs(y - want))), "shape": list(y.shape),
                 "sent": [p.sent_bytes for p in pts], "n": [p.n for p in pts], "t": [p.seconds for p in pts],
                 "hlo": coll.kinds(coll.collectives(cb.collective(kind, mesh).lower(
                     jax.device_put(x, NamedSharding(mesh, P("data")))).compile()))}
print("RESULT" + json.dumps(out))
"""


@pytest.fixture(scope="module")
def measured() -> dict:
    return run_result(SCRIPT, timeout=300)


def test_collectives_compute_what_they_say(measured: dict) -> None:
    assert measured["all-gather"]["err"] == 0 and measured["all-gather"]["shape"] == [1024]
    assert measured["all-reduce"]["err"] < 1e-5 and measured["all-reduce"]["shape"] == [1, 1024]
    assert measured["all-gather"]["hlo"] == {"all-gather": 1} and measured["all-reduce"]["hlo"] == {"all-reduce": 1}


def test_measured_points_carry_the_ring_bytes(measured: dict) -> None:
    assert measured["all-gather"]["sent"] == [7 / 8 * 2**12, 7 / 8 * 2**14]
    assert measured["all-reduce"]["sent"] == [2 * 7 / 8 * 2**12, 2 * 7 / 8 * 2**14]
    assert all(n == 8 for k in cb.KINDS for n in measured[k]["n"])
    assert all(t > 0 for k in cb.KINDS for t in measured[k]["t"])


def test_fixed_cost_is_resolved_only_above_its_noise() -> None:
    floor_t = bench.Timing(tuple([100e-6] * 10), warmup=1)  # a launch of 100 µs, no spread
    pts = points("all-reduce", 300e-6, 1.0, sizes=(2**15, 2**23))  # alpha 300 µs: 200 µs beyond the launch
    c = cb.fixed_cost(pts, floor_t)
    share = pts[0].sent_bytes / pts[1].sent_bytes
    assert c.excess_s == pytest.approx(200e-6 * (1 - share)) and c.se_s == 0 and c.resolved
    # The same points with the launch as their only fixed cost: nothing beyond it, so not resolved.
    flat = [cb.Point(**{**p.__dict__, "spread": 0.01, "repeats": 10})  # 1 % noise
            for p in points("all-reduce", 100e-6, 1.0, sizes=(2**15, 2**23))]
    c = cb.fixed_cost(flat, floor_t)
    assert c.excess_s == pytest.approx(0, abs=1e-12) and c.se_s > 0 and not c.resolved
    # A real 200 µs that the repeats' spread cannot tell from noise: not resolved either.
    noisy = [cb.Point(**{**p.__dict__, "spread": 1.0, "repeats": 5}) for p in pts]
    c = cb.fixed_cost(noisy, floor_t)
    assert c.se_s > 100e-6 and not c.resolved


def test_a_falling_busbw_rejects_the_model_for_the_points_after_it() -> None:
    pts = points("all-gather", 100e-6, 1.0, sizes=(2**15, 2**17, 2**19, 2**21, 2**23))
    assert cb.consistent(pts) == pts and cb.fit_model(pts).accepted and cb.fit_model(pts).dropped == 0
    slow = pts[:4] + [cb.Point(**{**pts[4].__dict__, "seconds": pts[4].seconds * 1.5})]  # busbw falls by a third
    f = cb.fit_model(slow)
    assert cb.consistent(slow) == pts[:4] and f.dropped == 1 and f.points == 4
    assert f.alpha_s == pytest.approx(100e-6) and f.gbs == pytest.approx(1.0) and f.accepted
    early = [pts[0], cb.Point(**{**pts[1].__dict__, "seconds": pts[1].seconds * 10})] + pts[2:]
    f = cb.fit_model(early)  # falls at the 2nd point: two points left, a line always fits them -- not accepted
    assert f.points == 2 and f.dropped == 3 and not f.accepted
    bent = points("all-gather", 100e-6, 1.0, sizes=(2**15, 2**17, 2**19))
    bent[1] = cb.Point(**{**bent[1].__dict__, "seconds": bent[1].seconds * 1.6})  # busbw still rises; the line misses it
    assert cb.fit_model(bent).max_rel_residual > cb.MAX_RESIDUAL and not cb.fit_model(bent).accepted


def test_the_floor_is_a_program_without_a_collective(measured: dict) -> None:
    assert measured["floor_hlo"] == {} and 0 < measured["floor"] < 1.0
    assert "divisible by 32" in measured["floor_bad"]


def test_best_kind_is_the_lowest_residual_and_growth_breaks_only_a_near_tie() -> None:
    ar, ag = points("all-reduce", 300e-6, 1.0), points("all-gather", 300e-6, 1.0)
    bad = ag[:-1] + [cb.Point(**{**ag[-1].__dict__, "seconds": ag[-1].seconds * 8})]  # a stall: grows most, fits worst
    pts = {"all-gather": bad, "all-reduce": ar}
    assert cb.best_kind({k: cb.fit(p) for k, p in pts.items()}, pts) == "all-reduce"
    near = {k: cb.Fit(k, 1e-4, 1.0, 4, r) for k, r in (("all-gather", 0.101), ("all-reduce", 0.099))}
    tie = {"all-gather": bad, "all-reduce": ar}  # residuals within 1 %: the series that grew more
    assert cb.best_kind(near, tie) == "all-gather"


def test_a_fixed_cost_needs_times_that_rise_with_size() -> None:
    """Cold read of a CPU run: 32 KiB took 1,356 µs and 128 KiB 838 µs, yet the fixed cost read 'resolved'."""
    floor_t = bench.Timing(tuple([100e-6] * 10), warmup=1)
    pts = points("all-reduce", 300e-6, 1.0, sizes=(2**15, 2**17, 2**23))
    assert cb.fixed_cost(pts, floor_t).resolved and not cb.fixed_cost(pts, floor_t).falls
    slow_small = [cb.Point(**{**pts[0].__dict__, "seconds": 2 * pts[1].seconds}), *pts[1:]]  # smaller, yet slower
    c = cb.fixed_cost(slow_small, floor_t)
    assert c.falls and c.excess_s > 2 * c.se_s and not c.resolved  # a big excess, but the model forbids the data
    # A noisy smallest point is passed over for the smallest steady one.
    noisy_first = [cb.Point(**{**pts[0].__dict__, "seconds": 10 * pts[0].seconds, "spread": 0.9}), *pts[1:]]
    c = cb.fixed_cost(noisy_first, floor_t)
    assert not c.falls and c.excess_s == pytest.approx(cb.fixed_cost(pts[1:], floor_t).excess_s)


def test_a_larger_call_counts_as_faster_only_beyond_two_standard_errors() -> None:
    """Cold read of a CPU run: 32 KiB took 485.7 µs (spread 0.097), 128 KiB 455.2 µs (0.221), 15 repeats each:
    30 µs apart, 1.1 standard errors of the difference. That within-noise inversion used to override a fixed
    cost 12.8 standard errors above zero; the verdict flipped from run to run."""
    floor_t = bench.Timing(tuple([188e-6] * 20), warmup=1)
    mk = lambda d, t, sp: cb.Point("all-gather", 8, d, coll.bytes_sent("all-gather", d, 8), t, sp, 15)  # noqa: E731
    pts = [mk(2**15, 485.7e-6, 0.097), mk(2**17, 455.2e-6, 0.221), mk(2**19, 768.2e-6, 0.349),
           mk(2**21, 2701e-6, 0.30), mk(2**23, 13880e-6, 0.48)]
    c = cb.fixed_cost(pts, floor_t)
    assert not c.falls and c.resolved and c.excess_s > 10 * c.se_s, c
    assert c.verdict().startswith("a fixed cost per call, resolved (")
    # The all-reduce of the same run: 32 KiB 732.5 µs (0.141), 128 KiB 430.1 µs (0.269): about 8 standard errors.
    ar = [cb.Point("all-reduce", 8, p.array_bytes, coll.bytes_sent("all-reduce", p.array_bytes, 8), t, sp, 15)
          for p, t, sp in zip(pts, (732.5e-6, 430.1e-6, 793.8e-6, 3728e-6, 19290e-6), (0.141, 0.269, 0.183, 0.4, 0.46))]
    c = cb.fixed_cost(ar, floor_t)
    assert c.falls and not c.resolved and c.faster_bytes == 2**17 and c.small_bytes == 2**15
    assert c.verdict() == ("not resolved: the 128 KiB call ran faster than the 32 KiB one by more than 2 standard "
                           "errors, which alpha + S/B forbids")
    # An excess inside its noise says so, by cause.
    flat = [cb.Point(**{**p.__dict__, "spread": 0.01, "repeats": 10}) for p in points("all-reduce", 188e-6, 1.0)]
    c = cb.fixed_cost(flat, floor_t)
    assert not c.resolved and not c.falls and "within 2 standard errors of zero" in c.verdict()


def test_best_kind_prefers_an_accepted_fit_to_a_two_point_line() -> None:
    # A two-point fit has no residual at all, yet it is not accepted: it must not outrank a good three-point fit.
    ag, ar = points("all-gather", 300e-6, 1.0), points("all-reduce", 300e-6, 1.0)
    fits = {"all-gather": cb.fit(ag[:2]), "all-reduce": cb.Fit("all-reduce", 3e-4, 1.0, 4, 0.05)}
    assert fits["all-gather"].max_rel_residual < 1e-9 and not fits["all-gather"].accepted
    assert cb.best_kind(fits, {"all-gather": ag, "all-reduce": ar}) == "all-reduce"
