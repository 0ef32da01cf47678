"""(Lab 01) A register-level systolic-array simulator and its closed-form cycle model.

An R x C grid of processing elements (PEs). Every cycle each moving operand steps one PE
over (right or down) and every PE does one multiply-accumulate (MAC). The dataflow decides
what stays put in the PEs:

- "os" output-stationary: PE (i, j) keeps the running sum of C[i, j]; A flows right, B down.
- "ws" weight-stationary: PE (i, j) keeps B[k=i, n=j]; A flows right, partial sums flow down.
- "is" input-stationary:  PE (i, j) keeps A[m=j, k=i]; B flows right, partial sums flow down.

A GEMM (M, K) @ (K, N) is mapped as (Sr, Sc, T) = (M, N, K) for OS, (K, N, M) for WS and
(K, M, N) for IS: Sr x Sc is cut into R x C folds, and T values stream through each fold.
What both the simulator and the closed form `cycles` assume:

- a fold always uses the whole physical array: a partial fold is padded with zeros, so its
  wavefront still crosses all R rows and C columns (this is where padding cliffs come from);
- operands enter skewed (lane i is i cycles late), so after T streaming cycles the last
  wavefront needs R + C - 2 more cycles to reach PE (R-1, C-1);
- WS/IS first preload the stationary tile from the top edge, one row per cycle (R cycles);
  their results leave the bottom edge while streaming, so they need no drain;
- folds run one after another (no double-buffered preload) unless `pipelined=True` (closed
  form only): then the next tile loads while the current one streams, so only the first fold
  pays the preload and only the last the skew -- how a TPU's MXU runs (labkit.matmul.mxu).

Two timing conventions (`convention=`), which differ only where SCALE-Sim differs:

- "drain" (labkit's default): OS also shifts its finished sums out of the bottom edge, R
  cycles per fold, so every dataflow costs 2R + C + T - 2 cycles per fold. A count of cycles.
- "scalesim": SCALE-Sim 3.0's figure. OS charges no output drain, R + C + T - 2 per fold
  (WS/IS as above), and the total is the 0-based index of the last cycle: count - 1.

Operand traffic (`operand_reads`), in real matrix elements (padding zeros are made at the
edge, not read): "A", "B" read into the array; "psum" partial sums read back to be added to
(WS/IS, K folds after the first); "out" results written out (partial or final).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from numbers import Integral  # int and numpy integers
from typing import Callable, Mapping, Sequence

import numpy as np

_DATAFLOWS = {"os": "os", "output_stationary": "os", "ws": "ws", "weight_stationary": "ws",
              "is": "is", "input_stationary": "is"}
CONVENTIONS = ("drain", "scalesim")  # labkit's count with OS output drain; SCALE-Sim 3.0's figure


def canonical_dataflow(name: str) -> str:
    """(Lab 01) Turn 'os' / 'output_stationary' (and ws, is) into the short name."""
    key = str(name).strip().lower().replace("-", "_")
    if key not in _DATAFLOWS:
        valid = ", ".join(repr(k) for k in _DATAFLOWS)
        raise ValueError(f"unknown dataflow {name!r}: use one of {valid}")
    return _DATAFLOWS[key]


def _check_convention(convention: str) -> str:
    if convention not in CONVENTIONS:
        raise ValueError(f"unknown convention {convention!r}: use 'drain' (labkit's count, OS "
                         "drains its sums) or 'scalesim' (SCALE-Sim 3.0's last-cycle index)")
    return convention


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
    skew_drain: int                # cycles per fold: skew R + C - 2, plus R drain for OS ("drain")
    cycles: int                    # the figure in `convention`: count, or count - 1 ("scalesim")
    macs: int                      # useful multiply-accumulates, M * K * N
    utilization: float             # macs / (count * R * C)
    convention: str = "drain"
    pipelined: bool = False        # next tile loads while this one streams
    count: int = 0                 # cycles that elapse, first to last

    @property
    def per_fold(self) -> int:
        """(Lab 01) Cycles one fold takes run on its own: fill + stream + skew_drain."""
        return self.fill + self.stream + self.skew_drain


def cycles(M: int, K: int, N: int, rows: int, cols: int, dataflow: str, *,
           convention: str = "drain", pipelined: bool = False) -> CycleModel:
    """(Lab 01) Exact cycle count of the simulator, in closed form (any size), in a convention."""
    df = canonical_dataflow(dataflow)
    _check_convention(convention)
    _check_positive(M=M, K=K, N=N, rows=rows, cols=cols)
    if pipelined and convention == "scalesim":
        raise ValueError("SCALE-Sim runs folds one after another: pipelined=True needs "
                         "convention='drain'")
    M, K, N, rows, cols = (int(v) for v in (M, K, N, rows, cols))  # Python ints: no overflow
    sr, sc, t = mapping(M, K, N, df)
    folds = _ceil_div(sr, rows) * _ceil_div(sc, cols)
    fill = 0 if df == "os" else rows
    skew_drain = rows + cols - 2 + (rows if df == "os" and convention == "drain" else 0)
    if pipelined:  # a tile loads in R cycles behind the stream: folds start max(T, R) apart
        count = fill + (folds - 1) * max(t, rows) + t + skew_drain
    else:
        count = folds * (fill + t + skew_drain)
    return CycleModel(df, rows, cols, (sr, sc, t), folds, fill, t, skew_drain,
                      count - 1 if convention == "scalesim" else count, M * K * N,
                      M * K * N / (count * rows * cols), convention, pipelined, count)


def scalesim_cycles(M: int, K: int, N: int, rows: int, cols: int, dataflow: str) -> int:
    """(Lab 01) SCALE-Sim 3.0's figure: folds * (fill + T + R + C - 2) - 1; fill R, OS 0."""
    _check_positive(M=M, K=K, N=N, rows=rows, cols=cols)
    sr, sc, t = mapping(int(M), int(K), int(N), dataflow)
    fill = 0 if canonical_dataflow(dataflow) == "os" else rows  # OS: no preload, no drain
    return _ceil_div(sr, rows) * _ceil_div(sc, cols) * (fill + t + rows + cols - 2) - 1


def utilization_sweep(sizes: Sequence[int], rows: int, cols: int, dataflow: str, *,
                      vary: str = "M", fixed: Mapping[str, int] | None = None,
                      pipelined: bool = False) -> np.ndarray:
    """(Lab 01) Predicted utilization as one of M, K, N takes each value in `sizes`."""
    dims = {"M": 4096, "K": 4096, "N": 4096, **(fixed or {})}
    if vary not in dims or set(dims) != {"M", "K", "N"}:
        raise ValueError(f"vary must be 'M', 'K' or 'N' and fixed may only name those, "
                         f"got vary={vary!r}, fixed={dict(fixed or {})}")
    out = [cycles(**{**dims, vary: s}, rows=rows, cols=cols, dataflow=dataflow,
                  pipelined=pipelined).utilization for s in sizes]
    return np.array(out, dtype=np.float64)


# ------------------------------------------------------------------ the simulator
@dataclass(frozen=True)
class SimResult:
    """(Lab 01) What one simulated GEMM produced and what it cost."""
    product: np.ndarray                # (M, N): int64 for integer input, float64 otherwise
    cycles: int                        # the figure in `convention` (see the module docstring)
    folds: int
    activity: np.ndarray | None        # (count, rows, cols) bool: PE did a useful MAC
    utilization: float                 # M*N*K / (count * rows * cols)
    operand_reads: dict[str, int]      # elements: "A", "B", "psum" reads, "out" writes
    dataflow: str
    mapping: tuple[int, int, int]      # (Sr, Sc, T)
    rows: int
    cols: int
    snapshots: dict[int, dict[str, np.ndarray]] = field(default_factory=dict)
    convention: str = "drain"
    count: int = 0                     # cycles that elapsed, all folds


def _shift_in(reg: np.ndarray, edge: np.ndarray | float, axis: int) -> None:
    """Every register takes its left (axis=-1) or upper (axis=-2) neighbour's value; `edge` enters."""
    if axis == -1:
        reg[..., 1:] = reg[..., :-1]  # numpy copes with the overlap: a one-PE hop to the right
        reg[..., 0] = edge
    else:
        reg[..., 1:, :] = reg[..., :-1, :]
        reg[..., 0, :] = edge


def _lane_valid(n_lanes: int, t: int, step: int) -> np.ndarray:
    """(n_lanes,) bool: does lane i (i cycles late) inject one of its t elements at `step`?"""
    k = step - np.arange(n_lanes)
    return (k >= 0) & (k < t)


def _schedule(df: str, t: int, rows: int, cols: int) -> np.ndarray:
    """Control path of one fold: valid bits march with the operands, one PE per cycle.
    Returns (steps, rows, cols) bool, PEs that MAC at each streaming step; every fold shares
    it, because a partial fold's padding lanes carry (valid) zeros."""
    a_ok = np.zeros((rows, cols), bool)  # an element (maybe a padding zero) is present
    b_ok = np.zeros((rows, cols), bool)
    macs = np.zeros((rows, cols), np.int64)  # OS: MACs each PE has done
    masks, collected, step = [], 0, 0
    while (df == "os" and not (macs == t).all()) or (df != "os" and collected < t * cols):
        _shift_in(a_ok, _lane_valid(rows, t, step), axis=-1)     # A (OS) / streamed (WS, IS)
        if df == "os":                                           # B enters at the top edge
            _shift_in(b_ok, _lane_valid(cols, t, step), axis=-2)
            mac = a_ok & b_ok  # the skew makes A[i, k] and B[k, j] meet at PE (i, j)
            macs += mac
        else:                  # the stationary operand is always there: a value = a MAC
            mac = a_ok.copy()
            collected += int(a_ok[-1].sum())  # values leaving the bottom row: finished sums
        masks.append(mac)
        step += 1
    return np.stack(masks)


def _tape(lanes: np.ndarray, pad: int, length: int) -> np.ndarray:
    """Shift register as a sliding window: lanes (..., n_lanes, T) skewed (lane i, i late) after
    `pad` zeros, zero after. Register j away from the edge at step s is tape[..., s + pad - j]."""
    n_lanes, t = lanes.shape[-2:]
    k = np.arange(length)[None, :] - pad - np.arange(n_lanes)[:, None]  # (lanes, length) element
    valid = (k >= 0) & (k < t)
    idx = np.broadcast_to(np.clip(k, 0, t - 1), lanes.shape[:-1] + (length,))
    return np.take_along_axis(lanes, idx, axis=-1) * valid


def _blocks(x: np.ndarray, rows: int, cols: int) -> np.ndarray:
    """(Sr, Sc) zero-padded to whole folds, as (Sr/R folds, Sc/C folds, R, C) tiles."""
    fr, fc = _ceil_div(x.shape[0], rows), _ceil_div(x.shape[1], cols)
    padded = np.zeros((fr * rows, fc * cols), x.dtype)
    padded[:x.shape[0], :x.shape[1]] = x
    return padded.reshape(fr, rows, fc, cols).swapaxes(1, 2)


def _snap(snaps: dict, wanted: dict[int, list[tuple[int, int, int]]], step: int,
          regs: dict[str, Callable[[int, int], np.ndarray]]) -> None:
    """Copy fold (r, c)'s registers at this step for every cycle asked for."""
    for cycle, r, c in wanted.get(step, ()):
        snaps[cycle] = {name: np.array(get(r, c)) for name, get in regs.items()}


def _run_os(A: np.ndarray, B: np.ndarray, rows: int, cols: int, steps: int, drain: bool,
            wanted: dict) -> tuple[np.ndarray, dict]:
    """All OS folds at once: A rows flow right, B columns down, each fold's sums stay put."""
    M, K = A.shape
    a_lanes = _blocks(A, rows, K)[:, 0]        # (Fr, R, K): fold row r's rows of A
    b_lanes = _blocks(B.T, cols, K)[:, 0]      # (Fc, C, K): fold column c's columns of B
    ta = _tape(a_lanes, cols - 1, steps + cols - 1)  # (Fr, R, L) moving right
    tb = _tape(b_lanes, rows - 1, steps + rows - 1).swapaxes(1, 2)  # (Fc, L, C) moving down
    acc = np.zeros((len(ta), len(tb), rows, cols), A.dtype)  # (Fr, Fc, R, C) accumulators
    tmp = np.empty_like(acc)
    snaps: dict = {}
    for s in range(steps):
        a = ta[:, :, s:s + cols][:, :, ::-1]   # (Fr, R, C) A registers at this step
        b = tb[:, s:s + rows][:, ::-1]         # (Fc, R, C) B registers
        np.multiply(a[:, None], b[None], out=tmp)
        acc += tmp                             # empty registers hold 0, so all PEs may add
        _snap(snaps, wanted, s, {"A": lambda r, c: a[r], "B": lambda r, c: b[c],
                                 "acc": lambda r, c: acc[r, c]})
    out = acc.copy()
    if drain:  # the bottom row leaves, the others move down one row: R cycles
        empty = np.zeros_like(a[0])  # every operand has left the array: the registers hold nothing
        for d in range(rows):
            out[..., rows - 1 - d, :] = acc[..., -1, :]
            _shift_in(acc, 0, axis=-2)
            _snap(snaps, wanted, steps + d, {"A": lambda r, c: empty, "B": lambda r, c: empty,
                                             "acc": lambda r, c: acc[r, c]})
    C = out.swapaxes(1, 2).reshape(len(ta) * rows, len(tb) * cols)
    return C[:M, :B.shape[1]], snaps


def _run_stationary(stream: np.ndarray, tile: np.ndarray, rows: int, cols: int, steps: int,
                    names: tuple[str, str], wanted: dict) -> tuple[np.ndarray, dict]:
    """All WS/IS folds at once: `tile` (Sr, Sc) stays, `stream` (T, Sr) flows right, partial
    sums flow down. Returns the (Fr, T, Fc * C) per-K-fold partial products, and snapshots."""
    moving, fixed = names  # which matrix the moving / stationary registers hold
    t = stream.shape[0]
    tiles = _blocks(tile, rows, cols)              # (Fr, Fc, R, C)
    fr, fc = tiles.shape[:2]
    held = np.zeros_like(tiles)                    # (Fr, Fc, R, C) stationary registers
    idle = np.zeros((fr, rows, cols), tiles.dtype)
    psum_q = np.zeros((fr, fc, steps + rows - 1, cols), tiles.dtype)  # partial sums by packet
    snaps: dict = {}
    for d in range(rows):  # preload from the top edge: tile row R-1 enters first
        _shift_in(held, tiles[:, :, rows - 1 - d], axis=-2)
        _snap(snaps, wanted, d, {moving: lambda r, c: idle[r], fixed: lambda r, c: held[r, c],
                                 "psum": lambda r, c: idle[r]})
    x_lanes = _blocks(stream.T, rows, t)[:, 0]     # (Fr, R, T): lane i streams k = i
    tx = _tape(x_lanes, cols - 1, steps + cols - 1)  # (Fr, R, L) moving right
    tmp = np.empty_like(held)
    for s in range(steps):
        x = tx[:, :, s:s + cols][:, :, ::-1]       # (Fr, R, C) streamed values at this step
        psum = psum_q[:, :, s:s + rows][:, :, ::-1]  # (Fr, Fc, R, C) a view: row i holds packet
        np.multiply(x[:, None], held, out=tmp)       # s - i, which moved down from row i - 1
        psum += tmp                                  # (row 0 starts a new packet from zero)
        _snap(snaps, wanted, rows + s, {moving: lambda r, c: x[r], fixed: lambda r, c: held[r, c],
                                        "psum": lambda r, c: psum[r, c]})
    # De-skew: result (m, j) left the bottom of column j at step m + j + R - 1: packet m + j + R - 1.
    m, j = np.arange(t)[:, None], np.arange(cols)[None, :]
    parts = psum_q[:, :, m + j + rows - 1, j]      # (Fr, Fc, T, C)
    return parts.swapaxes(1, 2).reshape(fr, t, fc * cols), snaps


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
    if exact:  # int64 sums wrap silently: bound every partial sum with Python's unbounded ints
        big = [max(abs(int(m.max())), abs(int(m.min()))) for m in mats]
        bound = mats[0].shape[1] * big[0] * big[1]  # K * max|A| * max|B| >= any |partial sum|
        if max(big) > 2**63 - 1 or bound > 2**63 - 1:
            raise ValueError(f"integer operands can overflow int64: K * max|A| * max|B| = {bound} > 2**63 - 1; "
                             "use smaller values, or float operands (exact only up to 2**53)")
    dtype = np.int64 if exact else np.float64
    return mats[0].astype(dtype), mats[1].astype(dtype)


def _reads(M: int, K: int, N: int, rows: int, cols: int, df: str) -> dict[str, int]:
    """Elements each fold reads (its blocks of A and B) and writes, summed over the folds."""
    sr, sc, _ = mapping(M, K, N, df)
    reads = {"A": 0, "B": 0, "psum": 0, "out": 0}
    for r0 in range(0, sr, rows):
        for c0 in range(0, sc, cols):
            r, c = min(rows, sr - r0), min(cols, sc - c0)  # the fold's real rows and columns
            a, b, out = {"os": (r * K, K * c, r * c), "ws": (M * r, r * c, M * c),
                         "is": (c * r, r * N, N * c)}[df]
            reads["A"] += a
            reads["B"] += b
            reads["out"] += out    # OS: final results; WS/IS: partial sums per K fold
            if df != "os" and r0 > 0:  # a later K fold adds to the sum an earlier one wrote
                reads["psum"] += out
    return reads


def simulate(A: np.ndarray, B: np.ndarray, rows: int, cols: int, dataflow: str,
             record_activity: bool = True, snapshot_cycles: Sequence[int] = (), *,
             convention: str = "drain") -> SimResult:
    """(Lab 01) Run A @ B through an R x C systolic array, cycle by cycle, and report it.

    Folds run one after another on the clock; the simulator steps all of them at once (a
    leading fold axis of every register array), as they share one schedule. Registers are
    shift registers read as sliding windows of a tape (`_tape`): a one-PE hop per cycle.
    snapshot_cycles: cycle numbers (0-based, folds one after another) whose (rows, cols)
    registers to copy into result.snapshots: OS {"A", "B", "acc"}; WS {"A" moving, "B" held,
    "psum"}; IS {"B" moving, "A" held (PE (i, j) holds A[j, i] of the fold), "psum"}.
    """
    df = canonical_dataflow(dataflow)
    _check_convention(convention)
    _check_positive(rows=rows, cols=cols)
    A, B = _as_operands(A, B)
    (M, K), N = A.shape, B.shape[1]
    sr, sc, t = mapping(M, K, N, df)
    fr, fc = _ceil_div(sr, rows), _ceil_div(sc, cols)
    mask = _schedule(df, t, rows, cols)          # (steps, R, C): the timing, from valid bits
    steps = len(mask)
    drain = df == "os" and convention == "drain"
    head, tail = (0, rows if drain else 0) if df == "os" else (rows, 0)  # preload, drain
    per_fold = head + steps + tail
    count = fr * fc * per_fold
    bad = [c for c in snapshot_cycles if not 0 <= c < count]
    if bad:
        raise ValueError(f"snapshot_cycles {bad} are outside this run's 0..{count - 1}")
    wanted: dict[int, list[tuple[int, int, int]]] = {}  # step in the fold -> (cycle, r, c)
    for c in snapshot_cycles:
        f, step = divmod(c, per_fold)
        wanted.setdefault(step, []).append((c, *divmod(f, fc)))
    if df == "os":
        C, snaps = _run_os(A, B, rows, cols, steps, drain, wanted)
    else:
        names = ("A", "B") if df == "ws" else ("B", "A")
        stream, tile = (A, B) if df == "ws" else (B.T, A.T)  # (T, K) streamed, (K, Sc) held
        parts, snaps = _run_stationary(stream, tile, rows, cols, steps, names, wanted)
        C = np.zeros((t, fc * cols), A.dtype)
        for part in parts:                       # K folds one after another: sums in order
            C += part
        C = C[:, :sc] if df == "ws" else C[:, :sc].T
    activity = None
    if record_activity:  # a PE is busy when its operands meet at a real (unpadded) output
        used = np.zeros((fr * rows, fc * cols), bool)
        used[:sr, :sc] = True
        used = used.reshape(fr, rows, fc, cols).swapaxes(1, 2).reshape(fr * fc, 1, rows, cols)
        activity = np.zeros((fr * fc, per_fold, rows, cols), bool)
        np.logical_and(mask[None], used, out=activity[:, head:head + steps])
        activity = activity.reshape(count, rows, cols)
    return SimResult(C, count - 1 if convention == "scalesim" else count, fr * fc, activity,
                     M * N * K / (count * rows * cols), _reads(M, K, N, rows, cols, df), df,
                     (sr, sc, t), rows, cols, snaps, convention, count)


def activity_over_time(result: SimResult | np.ndarray) -> np.ndarray:
    """(Lab 01) Fraction of PEs doing a useful MAC in each cycle, shape (count,)."""
    activity = result.activity if isinstance(result, SimResult) else np.asarray(result)
    if activity is None:
        raise ValueError("this result has no activity: run simulate(..., record_activity=True)")
    return activity.mean(axis=(1, 2))
