"""(Lab 06) Route a multi-stage inference pipeline across CPU / GPU / TPU pools.

Each stage (pre-process -> embed -> LLM -> post-process) runs on one pool. A placement's
latency is the sum of its stage latencies plus a transfer whenever consecutive stages sit on
pools of different kinds; its cost per request is the sum over stages of
$/chip-hour / 3600 / (requests/s per chip), i.e. chips are billed only for the time they work
(divide by `utilization` for idle reserved time). `route` searches every placement exactly
(3 pools ^ 4 stages = 81 combinations), so its answer is the true optimum, not a heuristic.
`simulate` adds queueing: a seeded Poisson arrival stream through the chosen placement.
"""
from __future__ import annotations

import heapq
import itertools
import math
import random
from dataclasses import dataclass
from typing import Mapping, Sequence

from labkit.cost.model import check_fraction, hourly_usd, non_negative, positive  # shared validation (labkit.cost.prices

STAGES = ("preprocess", "embed", "llm", "postprocess")
KINDS = ("cpu", "gpu", "tpu")
Transfer = float | Mapping[tuple[str, str], float]  # s per hop; mapping keyed by (kind, kind)


class InfeasibleError(ValueError):
    """(Lab 06) No placement meets the latency target; the message gives the fastest one."""


@dataclass(frozen=True)
class Pool:
    """(Lab 06) A pool of one chip kind: price, and per-stage throughput and latency."""
    name: str
    kind: str                            # "cpu" | "gpu" | "tpu"
    usd_per_chip_hour: float             # $/chip-hour (a cost.Price is accepted too)
    throughput: Mapping[str, float]      # stage -> requests/s per chip
    latency: Mapping[str, float]         # stage -> s per request, without queueing

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"pool {self.name!r}: kind must be one of {KINDS}, got {self.kind!r}")
        rate = hourly_usd(self.usd_per_chip_hour)  # validates > 0 and unwraps a Price
        object.__setattr__(self, "usd_per_chip_hour", rate)
        if set(self.throughput) != set(self.latency):
            raise ValueError(f"pool {self.name!r}: throughput and latency must name the same "
                             f"stages, got {sorted(self.throughput)} vs {sorted(self.latency)}")
        for stage in self.throughput:
            positive(self.throughput[stage], f"pool {self.name!r} throughput[{stage!r}] (req/s)")
            positive(self.latency[stage], f"pool {self.name!r} latency[{stage!r}] (s)")

    def runs(self, stage: str) -> bool:
        """(Lab 06) Whether this pool can run the stage at all."""
        return stage in self.throughput


@dataclass(frozen=True)
class Placement:
    """(Lab 06) One pool per stage, with its end-to-end latency and cost per request."""
    stages: tuple[str, ...]
    pools: tuple[str, ...]               # pool name per stage
    stage_latency_s: tuple[float, ...]   # s per stage
    transfer_s: tuple[float, ...]        # s per hop between stage i and i+1
    latency_s: float                     # s end to end, no queueing
    usd_per_request: float               # $ per request
    meets_target: bool

    @property
    def usd_per_1k(self) -> float:
        """(Lab 06) $ per 1000 requests."""
        return 1000.0 * self.usd_per_request

    def describe(self) -> str:
        """(Lab 06) One line: stage@pool chain, latency in ms, $ per 1k requests."""
        chain = " -> ".join(f"{s}@{p}" for s, p in zip(self.stages, self.pools))
        return f"{chain}: {self.latency_s * 1e3:.2f} ms, ${self.usd_per_1k:.4g} per 1k requests"


@dataclass(frozen=True)
class RoutingResult:
    """(Lab 06) Cheapest placement meeting the target, plus GPU-only, TPU-only and fastest."""
    target_s: float
    feasible: bool
    best: Placement | None          # cheapest placement meeting the target; None if infeasible
    fastest: Placement              # lowest latency of all placements
    gpu_only: Placement | None      # best all-GPU placement (None if GPUs cannot run a stage)
    tpu_only: Placement | None
    n_placements: int               # how many placements the exhaustive search evaluated
    method: str
    message: str


def _check_transfer(transfer_s: Transfer) -> None:
    """Transfer latencies are finite numbers of seconds >= 0 (one, or one per pair of kinds)."""
    if isinstance(transfer_s, Mapping):
        for key, v in transfer_s.items():
            non_negative(v, f"transfer_s[{key!r}] (s per hop)")
    else:
        non_negative(transfer_s, "transfer_s (s per hop between pools of different kinds)")


def _check_target(target_s: float) -> float:
    """A latency target: a number > 0; math.inf means no target (NaN would make every test false)."""
    if isinstance(target_s, bool) or not isinstance(target_s, (int, float)) or math.isnan(target_s) or target_s <= 0:
        raise ValueError(f"target_s (latency target, s) must be a number > 0 (math.inf for none), got {target_s!r}")
    return float(target_s)


def _hop(a: Pool, b: Pool, transfer_s: Transfer) -> float:
    """Transfer latency in s between consecutive stages: zero on the same kind of pool."""
    if a.kind == b.kind:
        return 0.0
    if isinstance(transfer_s, Mapping):
        key = (a.kind, b.kind) if (a.kind, b.kind) in transfer_s else (b.kind, a.kind)
        if key not in transfer_s:
            raise ValueError(f"transfer_s has no entry for {a.kind}->{b.kind}")
        return float(transfer_s[key])
    return float(transfer_s)


def evaluate(pools: Sequence[Pool], stages: Sequence[str] = STAGES, *, target_s: float = math.inf,
             transfer_s: Transfer = 0.002, utilization: float = 1.0) -> Placement:
    """(Lab 06) Latency and $/request of one placement: pools[i] runs stages[i]."""
    util = check_fraction(utilization, "utilization (fraction of reserved chip time busy)")
    target_s = _check_target(target_s)
    _check_transfer(transfer_s)
    if len(pools) != len(stages):
        raise ValueError(f"need one pool per stage: {len(pools)} pool(s) for {len(stages)} stage(s) {tuple(stages)}")
    for p, s in zip(pools, stages):
        if not p.runs(s):
            raise ValueError(f"pool {p.name!r} cannot run stage {s!r}")
    lat = tuple(p.latency[s] for p, s in zip(pools, stages))                  # s
    hops = tuple(_hop(a, b, transfer_s) for a, b in zip(pools, pools[1:]))    # s
    usd = sum(p.usd_per_chip_hour / 3600.0 / p.throughput[s]                   # $/request
              for p, s in zip(pools, stages)) / util
    total = sum(lat) + sum(hops)
    return Placement(tuple(stages), tuple(p.name for p in pools), lat, hops, total, usd,
                     total <= target_s)


def _pick(cands: list[Placement]) -> Placement | None:
    """Cheapest placement that meets the target, else the fastest; ties -> faster, then name."""
    ok = [c for c in cands if c.meets_target]
    if ok:
        return min(ok, key=lambda c: (c.usd_per_request, c.latency_s, c.pools))
    return min(cands, key=lambda c: (c.latency_s, c.usd_per_request, c.pools)) if cands else None


def route(pools: Sequence[Pool], target_s: float, stages: Sequence[str] = STAGES, *,
          transfer_s: Transfer = 0.002, utilization: float = 1.0,
          raise_if_infeasible: bool = False) -> RoutingResult:
    """(Lab 06) Cheapest placement whose end-to-end latency meets target_s (exhaustive search)."""
    target = positive(target_s, "target_s (latency target, s)")
    _check_transfer(transfer_s)
    if len({p.name for p in pools}) != len(pools):
        raise ValueError("pool names must be unique")
    options = [[p for p in pools if p.runs(s)] for s in stages]
    for s, opts in zip(stages, options):
        if not opts:
            raise ValueError(f"no pool can run stage {s!r}")
    every = [evaluate(combo, stages, target_s=target, transfer_s=transfer_s,
                      utilization=utilization) for combo in itertools.product(*options)]
    by_kind = {p.name: p.kind for p in pools}
    only = {k: _pick([c for c in every if all(by_kind[n] == k for n in c.pools)])
            for k in ("gpu", "tpu")}
    best = _pick([c for c in every if c.meets_target])
    fastest = min(every, key=lambda c: (c.latency_s, c.usd_per_request, c.pools))
    method = (f"exhaustive search over all {len(every)} placements "
              f"({' x '.join(str(len(o)) for o in options)} pools per stage)")
    if best is None:
        msg = (f"infeasible: no placement meets the {target * 1e3:.2f} ms target; the fastest "
               f"achievable is {fastest.latency_s * 1e3:.2f} ms ({fastest.describe()})")
        if raise_if_infeasible:
            raise InfeasibleError(msg)
    else:
        msg = f"cheapest placement meeting {target * 1e3:.2f} ms: {best.describe()}"
    return RoutingResult(target, best is not None, best, fastest, only["gpu"], only["tpu"],
                         len(every), method, msg)


@dataclass(frozen=True)
class SimResult:
    """(Lab 06) Queueing simulation of one placement at a request rate."""
    rate_rps: float                 # offered load, requests/s
    n_requests: int
    seed: int
    chips: Mapping[str, int]        # stage -> chips given to it
    load: Mapping[str, float]       # stage -> rate / capacity (>= 1 means the queue grows)
    p50_s: float                    # end-to-end latency percentiles, s
    p95_s: float
    mean_s: float
    no_queue_s: float               # the placement's latency without queueing
    usd_per_request: float          # $ per request with these chip counts at this rate
    stable: bool
    note: str


def _pct(xs: list[float], q: float) -> float:
    """Nearest-rank percentile of sorted xs."""
    return xs[max(0, math.ceil(q * len(xs)) - 1)]


def simulate(placement: Placement, pools: Sequence[Pool], rate_rps: float, *,
             n_requests: int = 2000, seed: int = 0, chips: Mapping[str, int] | None = None,
             target_load: float = 0.7) -> SimResult:
    """(Lab 06) Seeded Poisson arrivals through a placement; p50/p95 latency and $/request."""
    rate = positive(rate_rps, "rate_rps (requests/s)")
    check_fraction(target_load, "target_load (planned busy fraction per chip)")
    if isinstance(n_requests, bool) or not isinstance(n_requests, int) or n_requests < 1:
        raise ValueError(f"n_requests must be a whole number >= 1, got {n_requests!r}; e.g. n_requests=2000")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int, got {seed!r} ({type(seed).__name__})")
    for s, c in (chips or {}).items():
        if isinstance(c, bool) or not isinstance(c, int) or c < 1:
            raise ValueError(f"chips[{s!r}] must be a whole number >= 1, got {c!r}; or leave the stage "
                             f"out of chips to size it for target_load")
    by_name = {p.name: p for p in pools}
    stage_pools = [by_name[n] for n in placement.pools]
    thr = [p.throughput[s] for p, s in zip(stage_pools, placement.stages)]  # req/s per chip
    n_chips = dict(chips or {})
    for s, cap in zip(placement.stages, thr):  # default: enough chips for target_load busy
        n_chips.setdefault(s, max(1, math.ceil(rate / (cap * target_load))))
        if n_chips[s] < 1:
            raise ValueError(f"chips[{s!r}] must be >= 1")
    rng = random.Random(seed)
    t, arrivals = 0.0, []
    for _ in range(n_requests):  # Poisson process: exponential gaps, mean 1/rate s
        t += rng.expovariate(rate)
        arrivals.append(t)
    times = list(arrivals)
    hops = placement.transfer_s + (0.0,)
    for i, s in enumerate(placement.stages):
        # Each chip admits one request every 1/throughput s (its capacity) and each request
        # takes `latency` s (pipelined/batched chip). FIFO keeps request order, so one pass works.
        free = [0.0] * n_chips[s]  # when each chip can admit its next request, s
        out = []
        for a in times:
            start = max(a, heapq.heappop(free))
            heapq.heappush(free, start + 1.0 / thr[i])
            out.append(start + placement.stage_latency_s[i] + hops[i])
        times = out
    lat = sorted(d - a for a, d in zip(arrivals, times))
    load = {s: rate / (n_chips[s] * cap) for s, cap in zip(placement.stages, thr)}
    stable = all(v < 1 for v in load.values())
    usd_h = sum(n_chips[s] * p.usd_per_chip_hour for s, p in zip(placement.stages, stage_pools))
    note = ("stable: every stage has spare capacity" if stable else
            "unstable: a stage gets more requests/s than its chips can take; the queue and "
            "p95 grow with n_requests: add chips")
    return SimResult(rate, n_requests, seed, n_chips, load, _pct(lat, 0.50), _pct(lat, 0.95),
                     sum(lat) / len(lat), placement.latency_s, usd_h / 3600.0 / rate, stable, note)


__all__ = ["STAGES", "KINDS", "InfeasibleError", "Pool", "Placement", "RoutingResult",
           "SimResult", "evaluate", "route", "simulate"]
