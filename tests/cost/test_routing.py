"""Tests for labkit.cost.routing (Lab 06): placements vs brute force, infeasibility, simulation."""
from __future__ import annotations

import itertools
import math
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labkit.cost import routing
from labkit.cost.routing import STAGES, Pool


def _pool(name: str, kind: str, usd: float, thr: dict, lat: dict) -> Pool:
    return Pool(name, kind, usd, thr, lat)


def _three_pools() -> list[Pool]:
    """CPU cannot run the LLM; GPU is fastest; TPU is cheapest for the LLM."""
    return [
        _pool("cpu", "cpu", 0.05, {"preprocess": 200, "embed": 20, "postprocess": 300},
              {"preprocess": 0.002, "embed": 0.030, "postprocess": 0.001}),
        _pool("gpu", "gpu", 3.0, dict(zip(STAGES, (2000, 3000, 20, 2000))),
              dict(zip(STAGES, (0.001, 0.004, 0.400, 0.001)))),
        _pool("tpu", "tpu", 1.2, dict(zip(STAGES, (500, 4000, 30, 500))),
              dict(zip(STAGES, (0.003, 0.003, 0.500, 0.003)))),
    ]


def test_gpu_only_hand_computed() -> None:
    pools = _three_pools()
    res = routing.route(pools, target_s=1.0, transfer_s=0.002)
    g = res.gpu_only
    # latency: 1 + 4 + 400 + 1 ms, no transfers (all one kind)
    assert g.latency_s == pytest.approx(0.406)
    # $/request: $3/h / 3600 s/h x (1/2000 + 1/3000 + 1/20 + 1/2000) s of chip time
    chip_s = 1 / 2000 + 1 / 3000 + 1 / 20 + 1 / 2000
    assert g.usd_per_request == pytest.approx(3.0 / 3600 * chip_s)
    assert g.usd_per_1k == pytest.approx(1000 * g.usd_per_request)
    assert res.tpu_only.pools == ("tpu",) * 4
    # hybrid: cpu pre/post, tpu embed + llm: 2 + 3 + 500 + 1 ms + 2 transfers x 2 ms
    assert res.best.pools == ("cpu", "tpu", "tpu", "cpu")
    assert res.best.latency_s == pytest.approx(0.510)
    assert res.best.usd_per_request < min(g.usd_per_request, res.tpu_only.usd_per_request)
    assert res.n_placements == 3 * 3 * 2 * 3 and "exhaustive" in res.method


def test_81_placements_when_every_pool_runs_every_stage() -> None:
    pools = [_pool(k, k, 1.0 + i, dict.fromkeys(STAGES, 10.0), dict.fromkeys(STAGES, 0.01))
             for i, k in enumerate(routing.KINDS)]
    res = routing.route(pools, target_s=1.0)
    assert res.n_placements == 81 and "81 placements" in res.method
    assert res.best.pools == ("cpu",) * 4  # cheapest pool everywhere, no transfers needed


def test_transfer_by_kind_pair() -> None:
    pools = _three_pools()
    p = routing.evaluate([pools[0], pools[2], pools[2], pools[0]],
                         transfer_s={("cpu", "tpu"): 0.010})
    assert p.transfer_s == (0.010, 0.0, 0.010)
    assert p.latency_s == pytest.approx(0.002 + 0.003 + 0.500 + 0.001 + 0.020)
    with pytest.raises(ValueError, match="no entry for cpu->gpu"):
        routing.evaluate([pools[0], pools[1], pools[1], pools[1]], transfer_s={("cpu", "tpu"): 1})


def test_infeasible_is_reported_clearly() -> None:
    pools = _three_pools()
    res = routing.route(pools, target_s=0.3)
    assert not res.feasible and res.best is None
    assert res.message.startswith("infeasible") and "300.00 ms" in res.message
    assert res.fastest.latency_s == pytest.approx(0.406) and "406.00 ms" in res.message
    assert res.gpu_only is not None and not res.gpu_only.meets_target  # still reported
    with pytest.raises(routing.InfeasibleError, match="fastest achievable is 406.00 ms"):
        routing.route(pools, target_s=0.3, raise_if_infeasible=True)


def _random_pools(seed: int) -> list[Pool]:
    rng = random.Random(seed)
    pools = []
    for kind, (lo, hi) in zip(routing.KINDS, ((0.01, 0.3), (1.0, 12.0), (0.5, 5.0))):
        stages = [s for s in STAGES if not (kind == "cpu" and s == "llm" and rng.random() < 0.7)]
        thr = {s: 10 ** rng.uniform(0, 3.7) for s in stages}       # req/s per chip
        lat = {s: 10 ** rng.uniform(-3.3, 0) for s in stages}      # s per request
        pools.append(Pool(kind, kind, rng.uniform(lo, hi), thr, lat))
    return pools


def _brute(pools: list[Pool], target: float, hop: float) -> tuple[float | None, float]:
    """Independent brute force: (cheapest $/request meeting target or None, fastest s)."""
    best, fastest = None, math.inf
    for combo in itertools.product(*[[p for p in pools if s in p.throughput] for s in STAGES]):
        lat = sum(p.latency[s] for p, s in zip(combo, STAGES)) + sum(
            hop for a, b in zip(combo, combo[1:]) if a.kind != b.kind)
        usd = sum(p.usd_per_chip_hour / 3600 / p.throughput[s] for p, s in zip(combo, STAGES))
        fastest = min(fastest, lat)
        if lat <= target and (best is None or usd < best):
            best = usd
    return best, fastest


@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 10**6), log_target=st.floats(-2.5, 0.5), hop=st.floats(0.0, 0.05))
def test_route_matches_brute_force_and_never_violates_target(seed: int, log_target: float,
                                                             hop: float) -> None:
    pools, target = _random_pools(seed), 10 ** log_target  # s, 3 ms .. 3 s
    res = routing.route(pools, target_s=target, transfer_s=hop)
    best, fastest = _brute(pools, target, hop)
    assert res.fastest.latency_s == pytest.approx(fastest)
    assert res.feasible == (best is not None)
    if best is None:
        assert "infeasible" in res.message and res.best is None
    else:
        assert res.best.latency_s <= target and res.best.meets_target
        assert res.best.usd_per_request == pytest.approx(best, rel=1e-12)
        for only in (res.gpu_only, res.tpu_only):  # a single-kind placement is never cheaper
            if only is not None and only.meets_target:
                assert only.usd_per_request >= res.best.usd_per_request


def test_simulation_is_deterministic_and_matches_no_load_latency() -> None:
    pools = _three_pools()
    best = routing.route(pools, target_s=0.6).best
    a = routing.simulate(best, pools, rate_rps=5, seed=1)
    assert a == routing.simulate(best, pools, rate_rps=5, seed=1)
    assert a != routing.simulate(best, pools, rate_rps=5, seed=2)
    assert a.stable and a.no_queue_s == pytest.approx(best.latency_s)
    assert best.latency_s - 1e-12 <= a.p50_s <= a.p95_s
    assert a.p50_s == pytest.approx(best.latency_s, rel=0.02)  # light load: almost no queueing
    # default chips: ceil(rate / (throughput x 0.7)) -> llm on TPU: ceil(5 / 21) = 1
    assert a.chips["llm"] == 1 and a.load["llm"] == pytest.approx(5 / 30)
    usd_h = 0.05 + 1.2 + 1.2 + 0.05  # one chip per stage, $/h
    assert a.usd_per_request == pytest.approx(usd_h / 3600 / 5)


def test_simulation_reports_overload() -> None:
    pools = _three_pools()
    best = routing.route(pools, target_s=0.6).best
    ok = routing.simulate(best, pools, rate_rps=50, seed=0)
    over = routing.simulate(best, pools, rate_rps=50, seed=0, chips={"llm": 1})  # 50 > 30 req/s
    assert ok.stable and not over.stable and over.load["llm"] == pytest.approx(50 / 30)
    assert "unstable" in over.note and over.p95_s > 10 * ok.p95_s


@pytest.mark.parametrize("args, match", [
    (("p", "fpga", 1.0, {"llm": 1}, {"llm": 1}), "kind must be one of"),
    (("p", "gpu", -1.0, {"llm": 1}, {"llm": 1}), r"usd_per_chip_hour.*> 0"),
    (("p", "gpu", 1.0, {"llm": 0}, {"llm": 1}), r"throughput\['llm'\].*> 0"),
    (("p", "gpu", 1.0, {"llm": 1}, {"llm": -0.1}), r"latency\['llm'\].*> 0"),
    (("p", "gpu", 1.0, {"llm": 1}, {"embed": 1}), "same stages"),
])
def test_bad_pools(args: tuple, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Pool(*args)


def test_bad_route_inputs() -> None:
    pools = _three_pools()
    with pytest.raises(ValueError, match="target_s"):
        routing.route(pools, target_s=0)
    with pytest.raises(ValueError, match="utilization"):
        routing.route(pools, target_s=1, utilization=1.5)
    with pytest.raises(ValueError, match="no pool can run stage 'llm'"):
        routing.route(pools[:1], target_s=1)
    with pytest.raises(ValueError, match="rate_rps"):
        routing.simulate(routing.route(pools, 1).best, pools, rate_rps=0)


def test_nan_inf_and_wrong_types_are_refused() -> None:
    pools = _three_pools()
    four = [pools[0], pools[2], pools[2], pools[0]]
    with pytest.raises(ValueError, match=r"target_s \(latency target, s\) must be a number > 0 \(math.inf for none\), got nan"):
        routing.evaluate(four, target_s=float("nan"))
    with pytest.raises(ValueError, match=r"transfer_s \(s per hop.*got nan"):
        routing.evaluate(four, transfer_s=float("nan"))
    with pytest.raises(ValueError, match=r"transfer_s\[\('cpu', 'tpu'\)\].*got -1"):
        routing.route(pools, 1, transfer_s={("cpu", "tpu"): -1})
    with pytest.raises(ValueError, match="one pool per stage: 3 pool"):
        routing.evaluate(four[:3])
    with pytest.raises(ValueError, match=r"target_s .*inf"):
        routing.route(pools, target_s=float("inf"))
    best = routing.route(pools, 1).best
    with pytest.raises(ValueError, match=r"n_requests must be a whole number >= 1, got nan"):
        routing.simulate(best, pools, rate_rps=10, n_requests=float("nan"))
    with pytest.raises(ValueError, match=r"n_requests .* got 0"):
        routing.simulate(best, pools, rate_rps=10, n_requests=0)
    with pytest.raises(ValueError, match=r"chips\['llm'\] must be a whole number >= 1, got 0.5"):
        routing.simulate(best, pools, rate_rps=10, chips={"llm": 0.5})
    with pytest.raises(TypeError, match="seed must be an int"):
        routing.simulate(best, pools, rate_rps=10, seed=1.5)
    with pytest.raises(ValueError, match="rate_rps"):
        routing.simulate(best, pools, rate_rps=float("inf"))
