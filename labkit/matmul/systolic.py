"""(Lab 01) A register-level systolic-array simulator and its closed-form cycle model.

An R x C grid of processing elements (PEs). Every cycle each moving operand steps one PE
over (right or down) and every PE does one multiply-accumulate (MAC). The dataflow decides
what stays put in the PEs:

- "os" output-stationary: PE (i, j) keeps the running sum of C[i, j]; A flows right, B down.
- "ws" weight-stationary: PE (i, j) keeps B[k=i, n=j]; A flows right, partial sums flow down.
- "is" input-stationary:  PE (i, j) keeps A[m=j, k=i]; B flows right, partial sums flow down.

A GEMM (M, K) @ (K, N) is mapped as (Sr, Sc, T) = (M, N, K) for OS, (K, N, M) for WS and
(K, M, N) for IS: Sr x Sc is cut into R x C folds, and T values stream through each fold.
Timing convention (ours; the simulator counts it and `cycles` reproduces it exactly):

- a fold always uses the whole physical array: a partial fold is padded with zeros, so its
  wavefront still crosses all R rows and C columns (this is where padding cliffs come from);
- folds run one after another, no overlap (no double-buffered preload);
- operands enter skewed (lane i is i cycles late), so after T streaming cycles the last
  wavefront needs R + C - 2 more cycles to reach PE (R-1, C-1);
- WS/IS first preload the stationary tile from the top edge, one row per cycle (R cycles);
  their results leave the bottom edge while streaming, so they need no drain;
- OS needs no preload, but drains its accumulators out of the bottom edge (R cycles).

So every fold costs 2R + C + T - 2 cycles for all three dataflows: the SCALE-Sim figure
(`scalesim_cycles`), with the R "fill" cycles paid before streaming for WS/IS and after it
(as output drain) for OS.

Operand traffic (`operand_reads`), in real matrix elements (padding zeros are made at the
edge, not read): "A", "B" read into the array; "psum" partial sums read back to be added to
(WS/IS, K folds after the first); "out" results written out (partial or final).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from numbers import Integral  # int and numpy integers
from typing import Mapping, Sequence

import numpy as np

_DATAFLOWS = {"os": "os", "output_stationary": "os", "ws": "ws", "weight_stationary": "ws",
              "is": "is", "input_stationary": "is"}


def canonical_dataflow(name: str) -> str:
    """(Lab 01) Turn 'os' / 'output_stationary' (and ws, is) into the short name."""
    key = str(name).strip().lower().replace("-", "_")
    if key not in _DATAFLOWS:
        valid = ", ".join(repr(k) for k in _DATAFLOWS)
        raise ValueError(f"unknown dataflow {name!r}: use one of {valid}")
    return _DATAFLOWS[key]


def mapping(M: int, K: int, N: int, dataflow: str) -> tuple[int, int, int]:
    """(Lab 01) The SCALE-Sim mapping (Sr, Sc, T) of an (M, K) @ (K, N) GEMM for a dataflow."""
    return {"os": (M, N, K), "ws": (K, N, M), "is": (K, M, N)}[canonical_dataflow(dataflow)]


def _check_positive(**sizes: int) -> None:
    for name, value in sizes.items():
        if isinstance(value, bool) or not isinstance(value, Integral) or value <= 0:
            raise ValueError(f"{name} must be a positive integer, got {value!r}: "
                             "GEMM sizes and array dimensions start at 1")


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class CycleModel:
    """(Lab 01) Closed-form cycle count of a GEMM on an R x C systolic array."""
    dataflow: str
    rows: int
    cols: int
    mapping: tuple[int, int, int]  # (Sr, Sc, T)
    folds: int                     # ceil(Sr / R) * ceil(Sc / C)
    fill: int                      # cycles per fold preloading the stationary tile: R, OS 0
    stream: int                    # cycles per fold injecting new operands: T
    skew_drain: int                # cycles per fold: skew R + C - 2, plus R output drain for OS
    cycles: int                    # total over all folds
    macs: int                      # useful multiply-accumulates, M * K * N
    utilization: float             # macs / (cycles * R * C)

    @property
    def per_fold(self) -> int:
        """(Lab 01) Cycles one fold takes: fill + stream + skew_drain."""
        return self.fill + self.stream + self.skew_drain


def cycles(M: int, K: int, N: int, rows: int, cols: int, dataflow: str) -> CycleModel:
    """(Lab 01) Exact cycle count of the simulator's convention, in closed form (any size)."""
    df = canonical_dataflow(dataflow)
    _check_positive(M=M, K=K, N=N, rows=rows, cols=cols)
    M, K, N, rows, cols = (int(v) for v in (M, K, N, rows, cols))  # Python ints: no overflow
    sr, sc, t = mapping(M, K, N, df)
    folds = _ceil_div(sr, rows) * _ceil_div(sc, cols)
    fill = 0 if df == "os" else rows
    skew_drain = rows + cols - 2 + (rows if df == "os" else 0)
    total = folds * (fill + t + skew_drain)
    return CycleModel(df, rows, cols, (sr, sc, t), folds, fill, t, skew_drain, total,
                      M * K * N, M * K * N / (total * rows * cols))


def scalesim_cycles(M: int, K: int, N: int, rows: int, cols: int, dataflow: str) -> int:
    """(Lab 01) SCALE-Sim's count: folds * (fill + T + R + C - 2), with fill = R cycles."""
    _check_positive(M=M, K=K, N=N, rows=rows, cols=cols)
    sr, sc, t = mapping(int(M), int(K), int(N), dataflow)
    fill = rows  # R cycles to move a stationary R x C tile in (or, for OS, results out)
    return _ceil_div(sr, rows) * _ceil_div(sc, cols) * (fill + t + rows + cols - 2)


def utilization_sweep(sizes: Sequence[int], rows: int, cols: int, dataflow: str, *,
                      vary: str = "M", fixed: Mapping[str, int] | None = None) -> np.ndarray:
    """(Lab 01) Predicted utilization as one of M, K, N takes each value in `sizes`."""
    dims = {"M": 4096, "K": 4096, "N": 4096, **(fixed or {})}
    if vary not in dims or set(dims) != {"M", "K", "N"}:
        raise ValueError(f"vary must be 'M', 'K' or 'N' and fixed may only name those, "
                         f"got vary={vary!r}, fixed={dict(fixed or {})}")
    out = [cycles(**{**dims, vary: s}, rows=rows, cols=cols, dataflow=dataflow).utilization
           for s in sizes]
    return np.array(out, dtype=np.float64)


# ------------------------------------------------------------------ the simulator
@dataclass(frozen=True)
class SimResult:
    """(Lab 01) What one simulated GEMM produced and what it cost."""
    product: np.ndarray                # (M, N): int64 for integer input, float64 otherwise
    cycles: int                        # total cycles, all folds
    folds: int
    activity: np.ndarray | None        # (cycles, rows, cols) bool: PE did a useful MAC
    utilization: float                 # M*N*K / (cycles * rows * cols)
    operand_reads: dict[str, int]      # elements: "A", "B", "psum" reads, "out" writes
    dataflow: str
    mapping: tuple[int, int, int]      # (Sr, Sc, T)
    rows: int
    cols: int
    snapshots: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)


class _Recorder:
    """Counts cycles; keeps per-cycle activity and the register snapshots asked for."""

    def __init__(self, rows: int, cols: int, record_activity: bool, wanted: set[int]):
        self.cycle = 0
        self.activity: list[np.ndarray] | None = [] if record_activity else None
        self.wanted = wanted
        self.snapshots: dict[int, dict[str, np.ndarray]] = {}
        self._idle = np.zeros((rows, cols), dtype=bool)  # preload / drain cycles: no MACs

    def tick(self, busy: np.ndarray | None, registers: dict[str, np.ndarray]) -> None:
        if self.activity is not None:
            self.activity.append(self._idle if busy is None else busy)
        if self.cycle in self.wanted:
            self.snapshots[self.cycle] = {k: v.copy() for k, v in registers.items()}
        self.cycle += 1


def _shift_in(reg: np.ndarray, edge: np.ndarray | float, axis: int) -> None:
    """Every register takes its left (axis=1) or upper (axis=0) neighbour's value; `edge` enters."""
    if axis == 1:
        reg[:, 1:] = reg[:, :-1]  # numpy copes with the overlap: a one-PE hop to the right
        reg[:, 0] = edge
    else:
        reg[1:] = reg[:-1]
        reg[0] = edge


def _skew(lanes: np.ndarray, n_lanes: int) -> tuple[np.ndarray, np.ndarray]:
    """Edge feeder: lane i of `lanes` (used, T) delayed by i cycles, zero lanes up to n_lanes.
    Values and an 'element enters' mask, (n_lanes, T + n_lanes - 1): column t enters at step t.
    """
    used, t = lanes.shape
    step = np.arange(t + n_lanes - 1)[None, :] - np.arange(n_lanes)[:, None]  # element index
    valid = (step >= 0) & (step < t)
    padded = np.zeros((n_lanes, t), dtype=lanes.dtype)
    padded[:used] = lanes
    values = np.take_along_axis(padded, np.clip(step, 0, t - 1), axis=1) * valid
    return values, valid


def _os_fold(a: np.ndarray, b: np.ndarray, rows: int, cols: int, rec: _Recorder) -> np.ndarray:
    """One output-stationary fold: a (m_used, K) flows right, b (K, n_used) down; returns a @ b."""
    k = a.shape[1]
    feed_a, ok_a = _skew(a, rows)    # (rows, K + rows - 1): left edge, row i is i cycles late
    feed_b, ok_b = _skew(b.T, cols)  # (cols, K + cols - 1): top edge, column j is j cycles late
    a_reg = np.zeros((rows, cols), a.dtype)  # (rows, cols) A values moving right
    b_reg = np.zeros((rows, cols), a.dtype)  # (rows, cols) B values moving down
    a_ok = np.zeros((rows, cols), bool)      # an element (maybe a padding zero) is present
    b_ok = np.zeros((rows, cols), bool)
    acc = np.zeros((rows, cols), a.dtype)    # (rows, cols) accumulators: PE (i, j) owns C[i, j]
    macs = np.zeros((rows, cols), np.int64)  # MACs each PE has done in this fold
    used = np.zeros((rows, cols), bool)      # PEs that own a real output (the rest is padding)
    used[:a.shape[0], :b.shape[1]] = True
    step = 0
    while not (macs == k).all():  # until the last wavefront has reached PE (R-1, C-1)
        live_a, live_b = step < feed_a.shape[1], step < feed_b.shape[1]
        _shift_in(a_reg, feed_a[:, step] if live_a else 0, axis=1)
        _shift_in(a_ok, ok_a[:, step] if live_a else False, axis=1)
        _shift_in(b_reg, feed_b[:, step] if live_b else 0, axis=0)
        _shift_in(b_ok, ok_b[:, step] if live_b else False, axis=0)
        mac = a_ok & b_ok        # the skew makes A[i, k] and B[k, j] meet at PE (i, j)
        acc += a_reg * b_reg     # empty registers hold 0, so all PEs may add
        macs += mac
        rec.tick(mac & used, {"A": a_reg, "B": b_reg, "acc": acc})
        step += 1
    out = np.zeros((rows, cols), a.dtype)
    for d in range(rows):  # drain: the bottom row leaves, the others move down one row
        out[rows - 1 - d] = acc[-1]
        _shift_in(acc, 0, axis=0)
        rec.tick(None, {"A": a_reg, "B": b_reg, "acc": acc})
    return out[:a.shape[0], :b.shape[1]]


def _stationary_fold(stream: np.ndarray, tile: np.ndarray, rows: int, cols: int,
                     rec: _Recorder, names: tuple[str, str]) -> np.ndarray:
    """One WS/IS fold: `tile` (k_used, c_used) stays in the PEs, `stream` (T, k_used) flows
    right, partial sums flow down; returns stream @ tile, shape (T, c_used)."""
    t, k_used = stream.shape
    c_used = tile.shape[1]
    moving, fixed = names  # which matrix the moving / stationary registers hold
    padded = np.zeros((rows, cols), tile.dtype)
    padded[:k_used, :c_used] = tile
    held = np.zeros((rows, cols), tile.dtype)  # (rows, cols) stationary registers
    x = np.zeros((rows, cols), tile.dtype)     # (rows, cols) streamed values moving right
    x_ok = np.zeros((rows, cols), bool)
    psum = np.zeros((rows, cols), tile.dtype)  # (rows, cols) partial sums moving down
    regs = {moving: x, fixed: held, "psum": psum}
    for d in range(rows):  # preload from the top edge: tile row R-1 enters first
        _shift_in(held, padded[rows - 1 - d], axis=0)
        rec.tick(None, regs)
    feed, ok = _skew(stream.T, rows)  # (rows, T + rows - 1): row i is i cycles late
    used = np.zeros((rows, cols), bool)
    used[:k_used, :c_used] = True
    bottom: list[np.ndarray] = []  # (cols,) partial sums leaving the bottom edge, per step
    collected, step = 0, 0
    while collected < t * cols:  # until every column has emitted its T results
        live = step < feed.shape[1]
        _shift_in(x, feed[:, step] if live else 0, axis=1)
        _shift_in(x_ok, ok[:, step] if live else False, axis=1)
        _shift_in(psum, 0, axis=0)  # row 0 starts a new sum from zero
        psum += x * held            # the skew makes row m's psum meet row m's value
        bottom.append(psum[-1].copy())
        collected += int(x_ok[-1].sum())
        rec.tick(x_ok & used, regs)
        step += 1
    # De-skew: result (m, j) left the bottom of column j at step m + j + rows - 1.
    m, j = np.arange(t)[:, None], np.arange(c_used)[None, :]
    return np.stack(bottom)[m + j + rows - 1, j]


def _as_operands(A: np.ndarray, B: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Check shapes and dtypes; return int64 copies (exact) or float64 copies."""
    mats = []
    for name, x in (("A", A), ("B", B)):
        arr = np.asarray(x)
        if arr.ndim != 2:
            raise ValueError(f"{name} must be a 2-D matrix, got shape {arr.shape}; "
                             f"reshape it, e.g. {name}.reshape(1, -1) for a single row")
        if 0 in arr.shape:
            raise ValueError(f"{name} has shape {arr.shape}: sizes must be positive")
        if arr.dtype.kind not in "biuf":
            raise ValueError(f"{name} must hold integers or real floats, got dtype {arr.dtype}")
        mats.append(arr)
    if mats[0].shape[1] != mats[1].shape[0]:
        raise ValueError(f"inner dimensions do not match: A has shape {mats[0].shape} and B has "
                         f"shape {mats[1].shape}; A's columns must equal B's rows — check "
                         "the operand order or transpose one of them")
    exact = all(m.dtype.kind in "biu" for m in mats)
    dtype = np.int64 if exact else np.float64
    return mats[0].astype(dtype), mats[1].astype(dtype)


def simulate(A: np.ndarray, B: np.ndarray, rows: int, cols: int, dataflow: str,
             record_activity: bool = True, snapshot_cycles: Sequence[int] = ()) -> SimResult:
    """(Lab 01) Run A @ B through an R x C systolic array, cycle by cycle, and report it.

    snapshot_cycles: cycle numbers (0-based, folds one after another) whose (rows, cols)
    registers to copy into result.snapshots: OS {"A", "B", "acc"}; WS {"A" moving, "B" held,
    "psum"}; IS {"B" moving, "A" held (PE (i, j) holds A[j, i] of the fold), "psum"}.
    """
    df = canonical_dataflow(dataflow)
    _check_positive(rows=rows, cols=cols)
    A, B = _as_operands(A, B)
    (M, K), N = A.shape, B.shape[1]
    expected = cycles(M, K, N, rows, cols, df).cycles
    bad = [c for c in snapshot_cycles if not 0 <= c < expected]
    if bad:
        raise ValueError(f"snapshot_cycles {bad} are outside this run's 0..{expected - 1}")
    rec = _Recorder(rows, cols, record_activity, set(snapshot_cycles))
    sr, sc, t = mapping(M, K, N, df)
    C = np.zeros((M, N), A.dtype)  # (M, N) results, accumulated over K folds for WS/IS
    reads = {"A": 0, "B": 0, "psum": 0, "out": 0}
    folds = 0
    for r0 in range(0, sr, rows):        # fold row: a block of Sr
        for c0 in range(0, sc, cols):    # fold column: a block of Sc
            folds += 1
            if df == "os":               # Sr = M, Sc = N: a block of C sits in the PEs
                a, b = A[r0:r0 + rows], B[:, c0:c0 + cols]
                part = _os_fold(a, b, rows, cols, rec)                          # (m, n)
                C[r0:r0 + rows, c0:c0 + cols] = part
            elif df == "ws":             # Sr = K, Sc = N: a B tile sits, A streams
                a, b = A[:, r0:r0 + rows], B[r0:r0 + rows, c0:c0 + cols]
                part = _stationary_fold(a, b, rows, cols, rec, ("A", "B"))      # (M, n)
                C[:, c0:c0 + cols] += part
            else:                        # Sr = K, Sc = M: an A^T tile sits, B^T streams
                a, b = A[c0:c0 + cols, r0:r0 + rows], B[r0:r0 + rows]
                part = _stationary_fold(b.T, a.T, rows, cols, rec, ("B", "A"))  # (N, m)
                C[c0:c0 + cols] += part.T
            reads["A"] += a.size         # each fold reads its blocks of A and B once
            reads["B"] += b.size
            reads["out"] += part.size    # OS: final results; WS/IS: partial sums per K fold
            if df != "os" and r0 > 0:    # a later K fold adds to the sum an earlier one wrote
                reads["psum"] += part.size
    activity = np.stack(rec.activity) if rec.activity is not None else None
    return SimResult(C, rec.cycle, folds, activity, M * N * K / (rec.cycle * rows * cols),
                     reads, df, (sr, sc, t), rows, cols, rec.snapshots)


def activity_over_time(result: SimResult | np.ndarray) -> np.ndarray:
    """(Lab 01) Fraction of PEs doing a useful MAC in each cycle, shape (cycles,)."""
    activity = result.activity if isinstance(result, SimResult) else np.asarray(result)
    if activity is None:
        raise ValueError("this result has no activity: run simulate(..., record_activity=True)")
    return activity.mean(axis=(1, 2))
