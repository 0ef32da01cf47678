"""(Lab 01) What the real SCALE-Sim 3.0 printed for a set of GEMMs: the reference for systolic's "scalesim" convention.

SCALE-Sim (Samajdar et al., "A Systematic Methodology for Characterizing Scalability of DNN Accelerators
using SCALE-Sim", ISPASS 2020; the pip package `scalesim`) is the usual reference simulator of a systolic
array. These figures were not computed by labkit: each is the 'Total Cycles' column of SCALE-Sim 3.0's
COMPUTE_REPORT.csv for one GEMM (M, K, N) on a rows x cols array in one dataflow,
copied from its runs (SOURCE says how they were made). Lab 01 checks its simulator's "scalesim"
convention against them; tests/matmul/scalesim_3_0_cycles.json holds the same runs as recorded
(with the wall times benchmarks/bench_systolic.py compares against).
"""
from __future__ import annotations

from typing import Mapping

from labkit.matmul.systolic import canonical_dataflow

SOURCE = ("SCALE-Sim 3.0.0 (pip install scalesim==3.0.0, numpy 1.26.4), GEMM mode (-i gemm), InterfaceBandwidth "
          "CALC, 6144/6144/2048 kB SRAMs, default layout; 'Total Cycles' column of COMPUTE_REPORT.csv (the 0-based "
          "index of the last cycle). Run 2026-11-25 on a 2-core CPU VM.")
# (M, K, N, rows, cols, dataflow) -> SCALE-Sim 3.0's 'Total Cycles'. The first line is Lab 01's GEMM.
TOTAL_CYCLES: Mapping[tuple[int, int, int, int, int, str], int] = {
    (64, 32, 48, 8, 8, "os"): 2207, (64, 32, 48, 8, 8, "ws"): 2063, (64, 32, 48, 8, 8, "is"): 2239,
    (9, 9, 9, 8, 8, "os"): 91, (9, 9, 9, 8, 8, "ws"): 123, (9, 9, 9, 8, 8, "is"): 123,
    (17, 5, 3, 4, 4, "os"): 54, (17, 5, 3, 4, 4, "ws"): 53, (17, 5, 3, 4, 4, "is"): 129,
    (5, 17, 9, 4, 2, "os"): 209, (5, 17, 9, 4, 2, "ws"): 324, (5, 17, 9, 4, 2, "is"): 254,
    (33, 20, 7, 8, 4, "os"): 299, (33, 20, 7, 8, 4, "ws"): 305, (33, 20, 7, 8, 4, "is"): 674,
    (100, 60, 130, 16, 16, "os"): 5669, (100, 60, 130, 16, 16, "ws"): 5255, (100, 60, 130, 16, 16, "is"): 4927,
    (128, 129, 128, 32, 32, "os"): 3055, (128, 129, 128, 32, 32, "ws"): 4439, (128, 129, 128, 32, 32, "is"): 4439,
    (12, 16, 12, 16, 2, "os"): 191, (12, 16, 12, 16, 2, "ws"): 263, (12, 16, 12, 16, 2, "is"): 263,
    (39, 3, 7, 16, 16, "os"): 98, (39, 3, 7, 16, 16, "ws"): 84, (39, 3, 7, 16, 16, "is"): 158,
    (12, 9, 5, 4, 4, "os"): 89, (12, 9, 5, 4, 4, "ws"): 131, (12, 9, 5, 4, 4, "is"): 134,
    (25, 2, 4, 2, 8, "os"): 129, (25, 2, 4, 2, 8, "ws"): 34, (25, 2, 4, 2, 8, "is"): 55,
    (16, 10, 8, 4, 4, "os"): 127, (16, 10, 8, 4, 4, "ws"): 155, (16, 10, 8, 4, 4, "is"): 215,
    (20, 6, 26, 4, 8, "os"): 319, (20, 6, 26, 4, 8, "ws"): 271, (20, 6, 26, 4, 8, "is"): 239,
    (52, 19, 22, 16, 16, "os"): 391, (52, 19, 22, 16, 16, "ws"): 391, (52, 19, 22, 16, 16, "is"): 543,
}


def total_cycles(M: int, K: int, N: int, rows: int, cols: int, dataflow: str) -> int:
    """(Lab 01) SCALE-Sim 3.0's printed 'Total Cycles' for this GEMM, array and dataflow ("os", "ws", "is")."""
    key = (M, K, N, rows, cols, canonical_dataflow(dataflow))  # "weight_stationary" -> "ws"; a typo is named
    if key not in TOTAL_CYCLES:
        have = ", ".join(f"{k[0]}x{k[1]}x{k[2]} on {k[3]}x{k[4]}" for k in dict.fromkeys(k[:5] for k in TOTAL_CYCLES))
        raise ValueError(f"SCALE-Sim 3.0 was not run on (M, K, N, rows, cols, dataflow) = {key!r}: these are "
                         f"figures it printed, not a model. Runs kept: {have}, each in 'os', 'ws' and 'is'; "
                         "for any other shape use labkit.matmul.systolic.scalesim_cycles (its closed form)")
    return TOTAL_CYCLES[key]
