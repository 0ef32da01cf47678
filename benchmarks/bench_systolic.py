"""(Lab 01) How fast does labkit.matmul.systolic simulate? Cycles and PE-MACs per second, one core.

Run from the repository root:  python benchmarks/bench_systolic.py
Prints a table and writes benchmarks/results/systolic_<hostname>.json. The goal in the
issue: a 32 x 32 array on a 128 x 128 x 128 GEMM in under 2 s on one CPU core.
"""
from __future__ import annotations

import json
import os
import platform
import socket
import sys
import time
from pathlib import Path

# One core: set before numpy loads, so its BLAS (used by the A @ B check) starts one thread.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # run from a checkout without installing labkit
from labkit.matmul import systolic  # noqa: E402

# (rows, cols, M, K, N, dtype): the lab's reference point, the target, bigger arrays.
CASES = [(8, 8, 64, 32, 48, "int"), (16, 16, 128, 128, 128, "int"),
         (32, 32, 128, 128, 128, "int"), (32, 32, 128, 128, 128, "float"),
         (64, 64, 256, 256, 256, "float"), (128, 128, 256, 256, 256, "float")]
TARGET_S = 2.0  # s, 32 x 32 array on 128^3


def pin_to_one_core() -> bool:
    """(Lab 01) Run this process on a single CPU core where the OS allows it."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        return True
    return False


def time_case(rows: int, cols: int, M: int, K: int, N: int, dtype: str, dataflow: str,
              repeats: int = 3) -> dict:
    """(Lab 01) Best-of-`repeats` wall time of one simulate() call, with activity recorded."""
    rng = np.random.default_rng(0)
    if dtype == "int":
        A, B = rng.integers(-128, 128, (M, K)), rng.integers(-128, 128, (K, N))
    else:
        A, B = rng.standard_normal((M, K)), rng.standard_normal((K, N))
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        res = systolic.simulate(A, B, rows, cols, dataflow)
        best = min(best, time.perf_counter() - start)  # s
    assert np.allclose(res.product, A @ B) and res.cycles == systolic.cycles(
        M, K, N, rows, cols, dataflow).cycles
    return {"rows": rows, "cols": cols, "M": M, "K": K, "N": N, "dtype": dtype,
            "dataflow": dataflow, "cycles": res.cycles, "seconds": best,
            "cycles_per_s": res.cycles / best,
            "pe_macs_per_s": res.cycles * rows * cols / best,  # every PE steps every cycle
            "useful_macs_per_s": M * K * N / best, "utilization": res.utilization}


def main() -> None:
    """(Lab 01) Time every case for every dataflow, print a table, write the JSON."""
    pinned = pin_to_one_core()
    rows = [time_case(*case, dataflow=df) for case in CASES for df in ("os", "ws", "is")]
    print(f"{'array':>8} {'GEMM MxKxN':>12} {'dtype':>5} {'flow':>4} {'cycles':>7} "
          f"{'seconds':>8} {'cycles/s':>9} {'PE-MACs/s':>10} {'util':>5}")
    for r in rows:
        array, gemm = f"{r['rows']}x{r['cols']}", f"{r['M']}x{r['K']}x{r['N']}"
        print(f"{array:>8} {gemm:>12} {r['dtype']:>5} "
              f"{r['dataflow']:>4} {r['cycles']:>7} {r['seconds']:>8.3f} "
              f"{r['cycles_per_s']:>9.3g} {r['pe_macs_per_s']:>10.3g} {r['utilization']:>5.2f}")
    target = [r for r in rows if (r["rows"], r["M"]) == (32, 128)]
    worst = max(r["seconds"] for r in target)
    print(f"32x32 array on 128^3: slowest {worst:.3f} s (target < {TARGET_S} s): "
          f"{'OK' if worst < TARGET_S else 'TOO SLOW'}")
    machine = {"hostname": socket.gethostname(), "platform": platform.platform(),
               "processor": platform.processor() or platform.machine(),
               "cpu_count": os.cpu_count(), "pinned_to_one_core": pinned,
               "python": platform.python_version(), "numpy": np.__version__}
    out = ROOT / "benchmarks" / "results" / f"systolic_{socket.gethostname()}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": machine, "target_s": TARGET_S,
                               "target_worst_s": worst, "results": rows}, indent=2) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
