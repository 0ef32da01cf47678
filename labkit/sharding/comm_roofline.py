"""The communication roofline: a step's collectives against its compute, per system (Lab 03).

Communication alone says nothing about whether a layout pays: what decides is its time against
the compute time of the same step (and whether the two overlap). Per strategy and system:

- compute: the step's FLOPs per device (``compiled.cost_analysis()``, which counts per device on
  sharded code) over the chip's peak — the spec peak, and a measured one where we have it;
- communication: the compiled step's collectives priced on the system's topology
  (:func:`labkit.sharding.topology.table_time`), arrays at ``itemsize`` bytes per element (bf16: the
  fp32 arrays compiled here scaled by 2/4, as a bf16 step on that chip would send them);
- ratio = communication / compute: above 1 the step waits on the links unless they overlap.

The data-parallel break-even (How to Scale Your Model, Austin et al., Google DeepMind, "Training"
chapter): the backward pass does 4 FLOPs per parameter per token (T_math = 4·b·N / C over b tokens per
device at C FLOP/s) while the gradient all-reduce sends 2(n-1)/n · p·N bytes at W bytes/s
(T_comm, p bytes per parameter). Compute-bound when b > 2(n-1)/n · p/4 · C/W: with bf16 (p = 2) and
large n, **b > C / W** — the scaling book's B/X > C/W_ici with W the bidirectional bandwidth.
``cost_analysis()`` counts the whole step instead (forward + backward, :func:`train_flops_per_token`:
6N plus attention), so the roofline table's ratio breaks even at a smaller b.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Iterable

from labkit.gpt.data import check_count, check_real
from labkit.runtime import hardware
from labkit.sharding import topology
from labkit.sharding.collectives import DTYPE_BYTES, Collective, check_table
from labkit.sharding.hlo_text import is_lowered

SYSTEMS = {"v5e8": "TPU v5e-8", "h100x8": "8x H100 SXM"}  # record key -> topology name
# Best large bf16 matmul measured on one chip, FLOP/s: Lab 00's full profile on one H100 80GB HBM3, as
# committed in benchmarks/nvidia-h100-80gb-hbm3/report.json (matmul_tflops_measured; a test keeps the two
# equal). No TPU v5e figure measured for this course yet.
MEASURED_PEAK = {"NVIDIA H100 SXM": 744e12}
MEASURED_PEAK_SOURCE = "Lab 00 on an H100"  # a reference measurement, not this run: the table column says so
FLOAT_TYPES = ("f32", "bf16", "f16", "f64")


@dataclass(frozen=True)
class Roofline:
    """One strategy on one system: compute and communication seconds per step, per device (Lab 03)."""

    strategy: str
    system: str  # topology name
    flops: float  # per device per step
    compute_s: float  # flops / spec peak
    compute_measured_s: float | None  # flops / measured peak, where one exists
    comm_s: float  # the step's collectives on the topology, bandwidth only

    @property
    def ratio(self) -> float:
        """Communication over compute (spec peak): > 1 means the links, not the chip, set the pace (Lab 03)."""
        return self.comm_s / self.compute_s

    def row(self) -> dict[str, Any]:
        """Table row in µs (Lab 03)."""
        d = asdict(self)
        return {"strategy": d["strategy"], "system": d["system"], "GFLOP/device": self.flops / 1e9,
                "compute µs (spec)": self.compute_s * 1e6,
                f"compute µs (reference peak, {MEASURED_PEAK_SOURCE})": None if self.compute_measured_s is None
                else self.compute_measured_s * 1e6,
                "comm µs": self.comm_s * 1e6, "comm / compute": self.ratio,
                "overlapped µs": max(self.comm_s, self.compute_s) * 1e6,
                "serial µs": (self.comm_s + self.compute_s) * 1e6}


def array_scale(table: Iterable[Collective], itemsize: int) -> float:
    """Factor from the compiled float arrays to itemsize bytes per element (one dtype only) (Lab 03)."""
    itemsize = check_count(itemsize, "itemsize (bytes per element)", example=2)
    sizes = {DTYPE_BYTES[c.dtype] for c in check_table(table) if c.dtype in FLOAT_TYPES}
    if len(sizes) > 1:
        raise ValueError(f"collectives in several float widths {sorted(sizes)}: price them one by one")
    return itemsize / sizes.pop() if sizes else 1.0


def flops_per_device(compiled: Any) -> float:
    """FLOPs one device runs per step, from the compiled program's cost analysis (Lab 03)."""
    if is_lowered(compiled) or not callable(getattr(compiled, "cost_analysis", None)):  # a Lowered: unpartitioned
        then = ": call .compile() first" if hasattr(compiled, "compile") else ""
        raise TypeError(f"flops_per_device: pass f.lower(args).compile() (a Compiled), got {repr(compiled)[:60]} "
                        f"({type(compiled).__name__}){then}")
    cost = compiled.cost_analysis()
    cost = cost[0] if isinstance(cost, (list, tuple)) else cost
    if not cost or "flops" not in cost:
        raise RuntimeError("this backend's compiled program reports no cost_analysis() flops")
    return float(cost["flops"])


def roofline(strategy: str, table: list[Collective], flops: float, system: str,
             itemsize: int = 2, dtype: str = "bf16") -> Roofline:
    """Compute vs communication of one compiled step on one system, per device (Lab 03)."""
    topo = topology.get(system)
    flops = check_real(flops, "flops (per device per step)", 0, hint="; e.g. flops_per_device(compiled)")
    chip = hardware.CHIPS[topo.chip]
    peak = chip.peak(dtype)
    if peak is None:
        raise ValueError(f"{chip.name} has no {dtype} peak; price the step in one of {chip.supported()}")
    measured = MEASURED_PEAK.get(chip.name)
    comm = topology.table_time(table, topo, array_scale(table, itemsize))
    return Roofline(strategy, topo.name, flops, flops / peak,
                    None if measured is None else flops / measured, comm)


def dp_critical_batch(peak_flops: float, egress_bytes_s: float, n: int, bytes_per_param: float = 2,
                      flops_per_param_token: float = 4) -> float:
    """Tokens per device above which data parallelism is compute-bound: 2(n-1)/n·p/k · C/W (Lab 03).

    k = 4 counts the backward pass only (its all-reduce can hide behind it: the scaling book's
    convention); k = 6 counts the whole step.
    """
    peak_flops = check_real(peak_flops, "peak_flops", 0, hint=" FLOP/s; e.g. 197e12 for a TPU v5e (bf16)")
    egress_bytes_s = check_real(egress_bytes_s, "egress_bytes_s", 0, hint=" bytes/s; e.g. 100e9 (a TPU v5e-8)")
    bytes_per_param = check_real(bytes_per_param, "bytes_per_param", 0, hint="; e.g. 2 for bf16 gradients")
    k = check_real(flops_per_param_token, "flops_per_param_token", 0, hint="; 4 (backward pass) or 6 (whole step)")
    if check_count(n, "n", example=8) == 1:  # 2(n-1)/n = 0: one device all-reduces nothing
        return 0.0
    return 2 * (n - 1) / n * bytes_per_param / k * peak_flops / egress_bytes_s


def train_flops_per_token(n_params: int, n_layer: int, seq_len: int, d_model: int) -> float:
    """FLOPs of one training step (forward + backward) per token: 6N + 12·L·s·d (Lab 03)."""
    # Forward: a multiply-add (2 FLOPs) per weight per token, 2N; per layer QKᵀ and A·V, 2·s·d each
    # (the full s x s scores: a causal mask computes them too). Backward: twice the forward.
    for name, v, eg in (("n_params", n_params, 10**9), ("n_layer", n_layer, 12),
                        ("seq_len", seq_len, 1024), ("d_model", d_model, 768)):
        check_count(v, name, example=eg)  # all sizes >= 1: a negative one would still give a number
    return 6 * n_params + 12 * n_layer * seq_len * d_model


def system_intensity(system: str, n: int | None = None, dtype: str = "bf16") -> dict[str, float]:
    """C, W (bytes/s a device pushes into an all-reduce over n chips) and C / W (Lab 03)."""
    topo = topology.get(system)
    n = topo.chips if n is None else n
    peak = hardware.CHIPS[topo.chip].peak(dtype)
    gbs = max(g for a in topology.ALGORITHMS if (g := topology.egress_gbs(topo, n, a)) is not None)
    return {"C FLOP/s": peak, "W bytes/s": gbs * 1e9, "C / W FLOP/byte": peak / (gbs * 1e9)}


def compute_only_step_s(single_s: float, flops_single: float, flops_device: float, n_devices: int,
                        shared_cores: bool) -> float:
    """(Lab 03) Seconds a sharded step would take if it only computed: the unsharded step scaled by FLOPs.

    Real chips (``shared_cores`` False) compute side by side: each runs ``flops_device`` of the unsharded
    step's ``flops_single`` (both per device, ``flops_per_device``), so ideal scaling gives
    single_s x flops_device / flops_single: single_s / N where no work is repeated, more where a layout
    repeats some (tp's replicated LayerNorms). Simulated CPU devices share the cores the unsharded step
    ran on, so all N devices' FLOPs queue there: single_s x N x flops_device / flops_single. The
    measured step less this is what communication and everything else that does not scale cost.
    """
    single_s = check_real(single_s, "single_s", 0, hint=" s: the unsharded step's median time")
    flops_single = check_real(flops_single, "flops_single", 0, hint="; flops_per_device(the unsharded step)")
    flops_device = check_real(flops_device, "flops_device", 0, hint="; flops_per_device(the sharded step)")
    n = check_count(n_devices, "n_devices", example=8)
    if not isinstance(shared_cores, bool):
        raise TypeError(f"shared_cores must be True (simulated devices on one host's cores) or False (real chips), "
                        f"got {shared_cores!r}")
    return single_s * flops_device / flops_single * (n if shared_cores else 1)
