"""Collectives timed on this runtime's devices and fitted to latency + bytes / bandwidth (Lab 03).

Section 3a prices a collective by bandwidth alone. A real one also pays a fixed cost per call
(launch, synchronisation, and the algorithm's hops, each with its own latency: a ring all-reduce
has 2(n-1) of them, so this per-call alpha is not Hockney's per-message alpha): with S the bytes
each device sends (:func:`labkit.sharding.collectives.bytes_sent`), t = alpha + S / B. :func:`measure` times an
all-gather or an all-reduce of growing arrays over every device of a 1-D mesh (median repeat,
``labkit.measure.bench.TIMING_RULE``), :func:`fit` finds alpha and B by least squares, and
:func:`compare` puts each measured time beside the named topology's bandwidth-only prediction.
Each timed program holds one collective, so alpha also holds launching that program on every
device; :func:`floor` times the same program without the collective, and
:attr:`Fit.in_step_alpha_s` (alpha less that floor) estimates what a collective inside a step costs.

On simulated CPU devices there is no interconnect: a "collective" is memory copies between threads
of one process on this host's cores, so alpha is the host's dispatch and rendezvous cost and B its
memory bandwidth shared by every simulated device. On 8 real chips (a TPU v5e-8, an 8-GPU node)
the same calls measure the real links.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

import numpy as np

from labkit.measure import bench
from labkit.runtime import systems
from labkit.sharding import collectives as coll
from labkit.sharding import layouts
from labkit.sharding import topology

KINDS = ("all-gather", "all-reduce")
ITEMSIZE = 4  # bytes: the arrays are float32
BUSBW_FALL = 0.10  # t = alpha + S/B makes busbw = S/t rise with S: a fall by more than this contradicts the model
MAX_RESIDUAL = 0.25  # worst |measured - fitted| / measured of a fit the data accept
MIN_POINTS = 3  # a line through two points always fits: accepting alpha and B takes a third
FALL_SIGMAS = 2.0  # a larger call counts as faster, and a fixed cost as resolved, only beyond this many SE
SE_MEDIAN = 0.93  # standard error of a median ~ 1.2533 sigma / sqrt(n), sigma ~ IQR / 1.349 (normal noise)


@dataclass(frozen=True)
class Point:
    """One collective, timed (Lab 03)."""

    kind: str  # "all-gather" | "all-reduce"
    n: int  # devices taking part
    array_bytes: int  # D: the full array (the all-gather's result, the all-reduce's operand on each device)
    sent_bytes: float  # bytes each device sends for it (collectives.bytes_sent)
    seconds: float  # median repeat
    spread: float  # IQR / median of the repeats
    repeats: int = 1  # timed repeats behind the median


@dataclass(frozen=True)
class Fit:
    """t = alpha + S / B fitted to measured points (Lab 03)."""

    kind: str
    alpha_s: float  # fixed cost per call, seconds (may come out <= 0 when it is below the noise)
    gbs: float | None  # B, GB/s: ring-model bytes each device sends per second; None if time did not grow
    points: int
    max_rel_residual: float = 0.0  # worst |measured - fitted| / measured over the points
    floor_s: float = 0.0  # seconds a program with no collective takes on the same mesh (:func:`floor`)
    dropped: int = 0  # largest points left out of the fit: their busbw fell (:func:`consistent`)

    @property
    def accepted(self) -> bool:
        """Do the data support t = alpha + S / B: 3+ points, bandwidth resolved, worst residual <= MAX_RESIDUAL? (Lab 03)."""
        return self.points >= MIN_POINTS and self.gbs is not None and self.max_rel_residual <= MAX_RESIDUAL

    @property
    def in_step_alpha_s(self) -> float:
        """alpha less launching a program: the fixed cost a collective adds inside a compiled step (Lab 03).

        alpha is fitted on one standalone program per collective, so it includes dispatching that
        program to every device; a collective inside a step skips that. <= 0: below what this
        runtime can separate from the launch.
        """
        return self.alpha_s - self.floor_s

    def seconds(self, sent_bytes: float) -> float:
        """Fitted time for a collective in which each device sends ``sent_bytes`` (Lab 03)."""
        return self.alpha_s + (sent_bytes / (self.gbs * 1e9) if self.gbs else 0.0)

    def latency_bound_below(self, in_step: bool = False) -> float | None:
        """Bytes sent per device under which the fixed cost (in_step: less the launch) is over half the time (Lab 03)."""
        alpha = self.in_step_alpha_s if in_step else self.alpha_s
        return alpha * self.gbs * 1e9 if self.gbs and alpha > 0 else None


def _check(kind: str, sizes: Sequence[int], n: int) -> list[int]:
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    out = []
    for s in sizes:
        if isinstance(s, bool) or not isinstance(s, (int, np.integer)) or s <= 0 or s % (n * ITEMSIZE):
            raise ValueError(f"array size {s!r} bytes: each must be a positive int divisible by "
                             f"{n * ITEMSIZE} ({n} devices x {ITEMSIZE}-byte floats)")
        out.append(int(s))
    if len(out) < 2:
        raise ValueError(f"need at least 2 array sizes to fit latency and bandwidth, got {list(sizes)}")
    return out


def collective(kind: str, mesh: Any) -> Any:
    """Jitted one-collective program over the mesh's first axis (Lab 03).

    all-gather: (D,) split n ways -> (D,) whole on every device. all-reduce: (n, D/4) with one row
    per device -> the sum of the rows on every device (rows differ, so nothing can be folded away).
    """
    import jax
    from jax.sharding import PartitionSpec as P

    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    axis = mesh.axis_names[0]
    if kind == "all-gather":
        body = lambda x: jax.lax.all_gather(x, axis, tiled=True)  # noqa: E731  (D/n,) -> (D,)
    else:
        body = lambda x: jax.lax.psum(x, axis)  # noqa: E731  (1, D/4) per device, summed over devices
    # check_vma=False: the result is the same on every device, which jax cannot infer for all_gather
    return jax.jit(jax.shard_map(body, mesh=mesh, in_specs=P(axis), out_specs=P(), check_vma=False))


def no_collective(mesh: Any) -> Any:
    """Jitted program shaped like :func:`collective` with no collective: each device doubles its shard (Lab 03)."""
    import jax
    from jax.sharding import PartitionSpec as P

    axis = mesh.axis_names[0]
    return jax.jit(jax.shard_map(lambda x: x * 2.0, mesh=mesh, in_specs=P(axis), out_specs=P(axis)))


def floor(mesh: Any, array_bytes: int = 2**15, repeats: int = 10) -> float:
    """Median seconds of :func:`no_collective` on a D-byte array: launching a program on the mesh (Lab 03).

    What a standalone collective's time holds besides the collective; :attr:`Fit.in_step_alpha_s`
    subtracts it. The compiled program is checked to hold no collective.
    """
    return floor_timing(mesh, array_bytes, repeats).median_s


def floor_timing(mesh: Any, array_bytes: int = 2**15, repeats: int = 10) -> bench.Timing:
    """(Lab 03) :func:`floor`'s repeats, for its spread: launching a program with no collective on the mesh."""
    n = int(mesh.devices.size)
    size = _check("all-gather", [array_bytes, 2 * array_bytes], n)[0]  # the same rule as the collectives' sizes
    repeats = layouts.check_int(repeats, "repeats", fix="time at least one repeat")
    return _timed(no_collective(mesh), mesh, None, size, repeats)


def _input(kind: str, array_bytes: int, n: int) -> np.ndarray:
    elems = array_bytes // ITEMSIZE
    rng = np.random.default_rng(array_bytes)
    shape = (elems,) if kind == "all-gather" else (n, elems)
    return rng.standard_normal(shape, dtype=np.float32)


def _timed(fn: Any, mesh: Any, kind: str | None, array_bytes: int, repeats: int) -> bench.Timing:
    """Time ``fn`` on a D-byte input split over the mesh's first axis, once its compiled program is checked.

    kind: the collective the program must hold; None: it must hold none (:func:`floor`'s program).
    """
    import jax
    from jax.sharding import NamedSharding, PartitionSpec as P

    n = int(mesh.devices.size)
    x = jax.device_put(_input(kind or "all-gather", array_bytes, n), NamedSharding(mesh, P(mesh.axis_names[0])))
    found = coll.kinds(coll.collectives(fn.lower(x).compile()))
    if kind is None and found:
        raise RuntimeError(f"the no-collective program compiled with collectives {found}: it cannot be a floor")
    if kind is not None and kind not in found:
        raise RuntimeError(f"the compiled {kind} program holds {found or 'no collective'}, not a {kind}")
    return bench.time_jax(fn, lambda i: (x,), warmup=2, repeats=repeats, calls=1,
                          label=f"{kind or 'no collective'} {array_bytes} B")


def measure(kind: str, mesh: Any, sizes: Sequence[int], repeats: int = 5) -> list[Point]:
    """Time ``kind`` on every device of ``mesh`` for each array size D in bytes (Lab 03).

    Each compiled program is checked to hold the collective asked for, so the compiler cannot
    have folded it away. One call per repeat, synchronised (several queued collectives on
    simulated CPU devices can stall XLA's rendezvous).
    """
    n = int(mesh.devices.size)
    sizes = _check(kind, sizes, n)
    fn = collective(kind, mesh)
    out = []
    for size in sizes:
        t = _timed(fn, mesh, kind, size, repeats)
        out.append(Point(kind, n, size, coll.bytes_sent(kind, size, n), t.median_s, t.spread, repeats))
    return out


def fit(points: Sequence[Point], floor_s: float = 0.0) -> Fit:
    """Least-squares alpha and B of t = alpha + S / B over points of one kind (Lab 03).

    Residuals are relative (weights 1/t): the sizes span orders of magnitude, and an unweighted fit
    would let the largest decide alpha, which only the smallest can show. ``floor_s``: a
    no-collective program's seconds on the same mesh (:func:`floor`), kept for :attr:`Fit.in_step_alpha_s`.
    """
    if isinstance(floor_s, bool) or not isinstance(floor_s, (int, float)) or not 0 <= floor_s < float("inf"):
        raise ValueError(f"floor_s must be seconds >= 0 (comm_bench.floor(mesh)), got {floor_s!r}")
    kinds = {p.kind for p in points}
    if len(kinds) != 1 or len({p.sent_bytes for p in points}) < 2:
        raise ValueError(f"fit needs points of one kind at 2+ sizes, got kinds {sorted(kinds)} and "
                         f"{len({p.sent_bytes for p in points})} distinct sizes")
    s = np.array([p.sent_bytes for p in points], dtype=np.float64)
    t = np.array([p.seconds for p in points], dtype=np.float64)
    slope, alpha = np.polyfit(s, t, 1, w=1 / t)  # seconds per byte, seconds
    worst = float(np.max(np.abs(t - (alpha + slope * s)) / t))
    return Fit(kinds.pop(), float(alpha), float(1 / slope / 1e9) if slope > 0 else None, len(points), worst,
               float(floor_s))


def consistent(points: Sequence[Point]) -> list[Point]:
    """(Lab 03) The points before the first whose busbw falls over BUSBW_FALL below the best so far (at least 2).

    Under t = alpha + S / B, busbw = S / t rises with S towards B; where it falls (a cache or
    memory regime ends, the host runs out of cores) the data leave the model, and a line through
    those points would report an alpha and a B that describe neither regime.
    """
    best, out = 0.0, []
    for p in points:
        bw = p.sent_bytes / p.seconds
        if out and bw < (1 - BUSBW_FALL) * best:
            break
        best, out = max(best, bw), out + [p]
    return out if len(out) >= 2 else list(points[:2])


def fit_model(points: Sequence[Point], floor_s: float = 0.0) -> Fit:
    """(Lab 03) :func:`fit` on the :func:`consistent` points; ``dropped`` counts the larger ones left out."""
    kept = consistent(points)
    return replace(fit(kept, floor_s), dropped=len(points) - len(kept))


@dataclass(frozen=True)
class FixedCost:
    """The smallest collective's time beyond launching a program and beyond its bytes' share (Lab 03)."""

    kind: str
    excess_s: float  # t_small - floor - (S_small / S_large) (t_large - floor): alpha_in (1 - share) under the model
    se_s: float  # its standard error, from the three medians' spreads and repeats
    # A larger call that ran faster than the small one by more than FALL_SIGMAS standard errors of the two medians'
    # difference: under alpha + S / B time never falls with size, so the data leave the model there and the small
    # call's excess is no fixed cost (a CPU run: 32 KiB took 732 µs, 128 KiB 430 µs, 8 standard errors apart).
    small_bytes: int = 0  # D of the call the excess is read from (the smallest steady one)
    faster_bytes: int = 0  # D of the first larger call that ran significantly faster (0: none did)

    @property
    def falls(self) -> bool:
        """Did a larger call run significantly faster than the small one, i.e. leave the model? (Lab 03)."""
        return self.faster_bytes > 0

    @property
    def resolved(self) -> bool:
        """Is the fixed cost above two standard errors and do the times rise with size, i.e. measured? (Lab 03)."""
        return self.excess_s > FALL_SIGMAS * self.se_s and not self.falls

    def verdict(self) -> str:
        """(Lab 03) Why the fixed cost is or is not resolved, in words, from this run's numbers."""
        sig = f"{self.excess_s * 1e6:,.0f} ± {self.se_s * 1e6:,.0f} µs"
        if self.falls:
            return (f"not resolved: the {self.faster_bytes / 2**10:,.0f} KiB call ran faster than the "
                    f"{self.small_bytes / 2**10:,.0f} KiB one by more than {FALL_SIGMAS:g} standard errors, which "
                    "alpha + S/B forbids")
        if self.resolved:
            return f"a fixed cost per call, resolved ({sig}, over {FALL_SIGMAS:g} standard errors)"
        return f"not resolved: {sig} is within {FALL_SIGMAS:g} standard errors of zero"



def _se(seconds: float, spread: float, repeats: int) -> float:
    return SE_MEDIAN * spread * seconds / max(repeats, 1) ** 0.5  # seconds


def _point_se(p: Point) -> float:
    return _se(p.seconds, p.spread, p.repeats)


def fixed_cost(points: Sequence[Point], floor_t: bench.Timing) -> FixedCost:
    """(Lab 03) Measured, no fit: does the smallest call cost more than a launch plus its bytes' share of the largest?

    The share (S_small / S_large)(t_large - floor) is at least the small call's byte time under
    alpha + S / B, and more where the large one is slower than the model: the test leans against
    finding a fixed cost. It can fail: on a runtime whose collective adds nothing beyond the launch,
    the excess is noise. The small call is the smallest *steady* one (spread at most bench.NOISY_SPREAD, if
    two are), and ``falls`` records a larger call that ran faster than it by more than FALL_SIGMAS standard
    errors of the difference, which the model forbids (a difference within the noise is no evidence).
    """
    steady = [p for p in points if p.spread <= bench.NOISY_SPREAD]
    small, big = (steady[0] if len(steady) >= 2 else points[0]), points[-1]
    share = small.sent_bytes / big.sent_bytes
    fl = floor_t.median_s
    excess = small.seconds - fl - share * (big.seconds - fl)
    se_floor = _se(fl, floor_t.spread, len(floor_t.times_s))
    se = (_point_se(small) ** 2 + ((1 - share) * se_floor) ** 2 + (share * _point_se(big)) ** 2) ** 0.5
    faster = [p for p in points if p.sent_bytes > small.sent_bytes
              and small.seconds - p.seconds > FALL_SIGMAS * (_point_se(small) ** 2 + _point_se(p) ** 2) ** 0.5]
    return FixedCost(small.kind, float(excess), float(se), small_bytes=small.array_bytes,
                     faster_bytes=faster[0].array_bytes if faster else 0)


def rows(points: Sequence[Point]) -> list[dict[str, Any]]:
    """Table rows as nccl-tests reports them: algbw = D / t, busbw = S / t, in GB/s (Lab 03)."""
    return [{"kind": p.kind, "array KiB": p.array_bytes / 2**10, "median µs": p.seconds * 1e6,
             "spread (IQR/median)": p.spread, "algbw GB/s": p.array_bytes / p.seconds / 1e9,
             "busbw GB/s": p.sent_bytes / p.seconds / 1e9} for p in points]


def best_kind(fits: Mapping[str, Fit], points: Mapping[str, Sequence[Point]]) -> str:
    """(Lab 03) The kind whose own fit describes its points best: the one a takeaway or a price rests on.

    An accepted fit first; then the lowest worst residual, not the series that grew most (one stalled
    point can make a series grow most); growth only breaks a tie within 1 % of residual.
    """
    growth = {k: pts[-1].seconds / pts[0].seconds for k, pts in points.items()}
    # an accepted fit before a rejected one: a two-point line fits with residual 0, yet the data refused the model
    return min(points, key=lambda k: (not fits[k].accepted, round(fits[k].max_rel_residual, 2), -growth[k]))


def for_runtime(chip: str, n: int) -> str | None:
    """The named topology of ``n`` chips of this runtime's ``chip``, if the table has one (Lab 03)."""
    for name, topo in systems.TOPOLOGIES.items():
        if topo.chip == chip and topo.chips == n:
            return name
    return None


def predicted(points: Sequence[Point], topo: str) -> list[float | None]:
    """Seconds the topology predicts (bandwidth only) for each point's collective (Lab 03)."""
    return [topology.collective_time(p.kind, p.array_bytes, p.n, topo) for p in points]


def compare(points: Sequence[Point], topo: str) -> list[dict[str, Any]]:
    """Table rows: each measured collective beside the topology's bandwidth-only prediction (Lab 03)."""
    out = []
    for p, pred in zip(points, predicted(points, topo)):
        out.append({"kind": p.kind, "array KiB": p.array_bytes / 2**10, "KiB sent": p.sent_bytes / 2**10,
                     "measured µs": p.seconds * 1e6, "predicted µs": pred * 1e6 if pred else None,
                     "measured / predicted": p.seconds / pred if pred else None})
    return out
