"""(Lab 06) Decode throughput of a served model: weights, KV cache, memory capacity and bandwidth.

One decode step makes one new token for each of `batch` sequences. It must

- fit: weights + batch x context x (KV bytes per token) <= the chips' memory (capacity caps batch);
- read: every matmul weight once and every cached K/V once (bandwidth); the input embedding is a
  table lookup (batch rows of it, negligible), so it is held in memory but not read in full;
- compute: 2 x matmul parameters FLOPs per token + 4 x layers x d_model x context for attention
  (QK^T and AV, 2 FLOPs per multiply-add);
- talk: with n chips in tensor parallel, 2 all-reduces of the activations per layer (ring), each
  ring step sending in ONE direction at half the chip's bidirectional link figure. Bandwidth only by
  default: a fixed cost per all-reduce (launch, synchronisation, hop latency) is `allreduce_latency_s`,
  0 unless given, so small-batch tensor-parallel steps (tiny messages, where that cost dominates)
  come out optimistic.

Step time = max(compute, memory) + communication: the roofline of Lab 00 plus the interconnect
term of Lab 03. Every chip is modelled with the same formula; only the spec figures change.

What it is checked against: its arithmetic, by hand (tests/cost/test_serving.py). What it is NOT
checked against: any measured decode run of the served model. Its 50% MFU and 80% of spec
bandwidth are assumptions, and it leaves out prefill (a $/token from it is decode only), idle time
(the chips are busy 100% of the time), scheduling, paging and launch overheads.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass
from typing import Any

from labkit.cost.model import non_negative
from labkit.cost.prices import check_fraction, positive
from labkit.gpt.data import check_count, check_real
from labkit.runtime import hardware
from labkit.runtime.hardware import ChipSpec

# Unit plausibility: bounds no real chip crosses, so a figure in the wrong unit is refused, not used.
# Peak: the slowest chip in labkit.runtime.hardware (T4 fp32) does ~8e12 FLOP/s, a CPU core ~1e10-1e11;
# below 1e9 FLOP/s (1 GFLOP/s) the figure is TFLOP/s (989) or GFLOP/s, not FLOP/s.
MIN_PEAK_FLOPS = 1e9
# Memory bandwidth: HBM3e chips read ~8e3 GB/s. Above 1e6 GB/s (1 PB/s per chip) the figure is bytes/s
# (3350e9). No lower bound: a measured CPU figure can be a few GB/s, so TB/s (3.35) cannot be told apart.
MAX_BANDWIDTH_GBS = 1e6
# Memory per chip: the largest today holds a few hundred GB (B300 288 GB, GH200 624 GB with its CPU's);
# above 1e4 GB (10 TB) the figure is bytes (80e9) or MB (80000), not GB.
MAX_MEMORY_GB = 1e4


def _check_model(m: Any) -> ServedModel:
    """m if it is a ServedModel; else a TypeError saying what to pass."""
    if not isinstance(m, ServedModel):
        raise TypeError(f"pass a ServedModel (e.g. serving.LLAMA3_8B, or ServedModel('mine', 1e9, 16, 2048, 8, "
                        f"128)), got {m!r} ({type(m).__name__})")
    return m


def _check_memory_gb(x: Any) -> float:
    """x (GB per chip) if it is a plausible figure in GB; a ValueError naming the unit otherwise."""
    gb = positive(x, "memory_gb (GB per chip)")
    if gb > MAX_MEMORY_GB:
        raise ValueError(f"memory_gb is GB per chip (e.g. 80 for an H100), not bytes or MB: got {x!r}, over "
                         f"{MAX_MEMORY_GB:g} GB on one chip; use memory_gb={gb / 1e9:g} if {x!r} is bytes")
    return gb


def _check_reserve(x: Any) -> float:
    """x, the share of memory held back, if it lies in [0, 1)."""
    return check_real(x, "reserve", 0.0, 1.0, closed="low",
                      hint="; the share of each chip's memory held back (0.1 = 10%), below 1")


@dataclass(frozen=True)
class ServedModel:
    """(Lab 06) The shape figures a decode step depends on (a dense decoder)."""
    name: str
    n_params: float          # all parameters held in memory (input embedding and output head included)
    n_layers: int
    d_model: int
    n_kv_heads: int          # grouped-query attention: K/V heads, not query heads
    head_dim: int
    bytes_per_param: int = 2  # bf16 weights
    bytes_per_kv: int = 2     # bf16 cache
    n_lookup_params: float = 0.0  # input embedding (vocab x d_model): a lookup, not read in full per step

    def __post_init__(self) -> None:
        if not isinstance(self.name, str):
            raise TypeError(f"ServedModel.name must be a str, e.g. 'Llama-3-8B', got {self.name!r}")
        positive(self.n_params, f"ServedModel {self.name!r}: n_params (parameters held in memory)")
        for what, n, eg in (("n_layers", self.n_layers, 32), ("d_model", self.d_model, 4096),
                            ("n_kv_heads", self.n_kv_heads, 8), ("head_dim", self.head_dim, 128)):
            try:
                check_count(n, what, 1, eg)  # counts: whole numbers >= 1
            except (TypeError, ValueError) as e:
                raise type(e)(f"ServedModel {self.name!r}: {e}") from None
        positive(self.bytes_per_param, f"ServedModel {self.name!r}: bytes_per_param (2 for bf16, 0.5 for int4)")
        positive(self.bytes_per_kv, f"ServedModel {self.name!r}: bytes_per_kv (2 for a bf16 cache)")
        non_negative(self.n_lookup_params, f"ServedModel {self.name!r}: n_lookup_params")
        if not 0 <= self.n_lookup_params < self.n_params:
            raise ValueError(f"{self.name}: n_lookup_params must be in [0, n_params={self.n_params:g}) "
                             f"(the input-embedding table), got {self.n_lookup_params!r}")

    @property
    def matmul_params(self) -> float:
        """(Lab 06) Parameters a decode step reads and multiplies: all but the embedding lookup table."""
        return self.n_params - self.n_lookup_params


# Llama-3-8B shape (Meta's model card / config.json: 32 layers, d_model 4096, 8 KV heads of 128,
# vocabulary 128256, untied output head). The 8.03e9 parameters include the 128256 x 4096 input
# embedding: resident in memory, but a decode step only looks up `batch` rows of it. The output
# head (the same size) is a matmul and is read every step.
LLAMA3_8B = ServedModel("Llama-3-8B", 8.03e9, 32, 4096, 8, 128, n_lookup_params=128256 * 4096)


def kv_bytes_per_token(m: ServedModel) -> int:
    """(Lab 06) Bytes of K and V cached per token: 2 (K, V) x layers x KV heads x head_dim x bytes."""
    m = _check_model(m)
    return 2 * m.n_layers * m.n_kv_heads * m.head_dim * m.bytes_per_kv


def weight_bytes(m: ServedModel) -> float:
    """(Lab 06) Bytes of weights held in memory (every parameter): what must fit on the chips."""
    return _check_model(m).n_params * m.bytes_per_param


def step_weight_bytes(m: ServedModel) -> float:
    """(Lab 06) Bytes of weights one decode step reads: every matmul weight, not the embedding table."""
    return _check_model(m).matmul_params * m.bytes_per_param


def memory_gb(spec: ChipSpec | str) -> float:
    """(Lab 06) A chip's memory in GB (1e9 bytes), reading the table's figure in its source's unit."""
    if isinstance(spec, str):  # a chip name: look it up ("TPU v5 lite" works; "H100" is ambiguous)
        name, spec = spec, hardware.lookup(spec)
        if spec is None:
            raise hardware.unknown_chip(name, "pass a ChipSpec, e.g. memory_gb(hardware.lookup('NVIDIA H100 SXM'))")
    if not isinstance(spec, ChipSpec):
        raise TypeError(f"memory_gb needs a ChipSpec or a chip name, e.g. memory_gb('NVIDIA H100 SXM'), got "
                        f"{spec!r} ({type(spec).__name__}); hardware.lookup returns None for a name it does not know")
    return spec.memory_bytes / 1e9  # the table keeps the vendor's number and unit ("80 GB", "32 GiB")


def max_batch(m: ServedModel, context: int, memory_gb: float, n_chips: int = 1,
              reserve: float = 0.1) -> int:
    """(Lab 06) Largest batch whose KV cache fits beside the weights (0: the weights do not fit)."""
    m, context = _check_model(m), check_count(context, "context", 1, 1024)   # tokens per sequence
    n_chips, reserve = check_count(n_chips, "n_chips", 1, 1), _check_reserve(reserve)
    usable = _check_memory_gb(memory_gb) * 1e9 * n_chips * (1 - reserve)  # bytes
    free = usable - weight_bytes(m)                    # bytes left for the cache
    per_seq = kv_bytes_per_token(m) * context          # bytes per sequence
    return max(0, math.floor(free / per_seq))


# Chips in a slice Google rents, smallest first: a TPU is rented by the slice, not by the chip. v5e: the
# 2D shapes 1x1 to 16x16 (Cloud TPU v5e docs, "Configurations"); v5p: the common shapes of the v5p docs'
# table, 2x2x1 (v5p-8 = 4 chips) to 16x16x24 ("most but not all": a slice between two is rounded up).
# A chip not listed here (a GPU) is rented one at a time.
SLICE_CHIPS: dict[str, tuple[int, ...]] = {
    "TPU v5e": (1, 4, 8, 16, 32, 64, 128, 256),
    "TPU v5p": (4, 8, 32, 64, 128, 256, 512, 1024, 2048, 4096, 6144),
}


def slices(chip: str) -> tuple[int, ...] | None:
    """(Lab 06) The chip counts a slice of `chip` can be rented in (SLICE_CHIPS), None where any count can."""
    spec = hardware.lookup(chip)  # reported names too: "TPU v5 lite" -> "TPU v5e"
    return SLICE_CHIPS.get(spec.name if spec else chip)


def chips_to_fit(m: ServedModel, context: int, batch: int, memory_gb: float,
                 reserve: float = 0.1, slice_sizes: tuple[int, ...] | None = None) -> int:
    """(Lab 06) Fewest chips whose memory holds the weights and `batch` sequences of KV cache.

    ``slice_sizes``: the chip counts one can rent (``slices(chip)``); the answer is then the smallest of them
    that holds it, so a v5p is never one chip (its smallest slice is 4)."""
    m, context, batch = _check_model(m), check_count(context, "context", 1, 1024), check_count(batch, "batch", 1, 8)
    gb, reserve = _check_memory_gb(memory_gb), _check_reserve(reserve)
    need = weight_bytes(m) + batch * context * kv_bytes_per_token(m)   # bytes
    n = max(1, math.ceil(need / (gb * 1e9 * (1 - reserve))))
    if slice_sizes is None:
        return n
    if not slice_sizes or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in slice_sizes):
        raise ValueError(f"slice_sizes must be chip counts >= 1, e.g. slices('TPU v5e'), got {slice_sizes!r}")
    fits = [k for k in sorted(slice_sizes) if k >= n]
    if not fits:
        raise ValueError(f"{n} chips are needed for batch {batch} x {context} tokens, more than the largest slice "
                         f"({max(slice_sizes)} chips): lower the batch or the context")
    return fits[0]


@dataclass(frozen=True)
class DecodeStep:
    """(Lab 06) One decode step's time and what bounds it, in seconds."""
    batch: int
    n_chips: int
    compute_s: float
    memory_s: float
    comm_s: float
    step_s: float
    bound: str               # "compute" | "memory"
    tokens_per_s: float      # batch / step_s, all chips together
    context: int = 0         # tokens cached per sequence
    model: str = ""          # the ServedModel's name
    mfu: float = 0.5         # the assumed share of peak FLOP/s this step was modelled at
    bw_eff: float = 0.8      # the assumed share of spec bandwidth it was modelled at
    allreduces: int = 0      # tensor-parallel all-reduces per step (0 on one chip)
    allreduce_latency_s: float = 0.0  # fixed s per all-reduce it was modelled with (0: bandwidth only)

    @property
    def tokens_per_s_per_chip(self) -> float:
        """(Lab 06) tokens_per_s shared over the chips: what one chip-hour's price buys."""
        return self.tokens_per_s / self.n_chips

    @property
    def workload(self) -> tuple[str, int, int]:
        """(Lab 06) (model, batch, context): two steps compare only if these are equal."""
        return (self.model, self.batch, self.context)


def decode_step(m: ServedModel, batch: int, context: int, n_chips: int, peak_flops: float,
                bandwidth_gbs: float, *, mfu: float = 0.5, bw_eff: float = 0.8,
                link_gbs: float | None = None, allreduce_latency_s: float = 0.0) -> DecodeStep:
    """(Lab 06) Roofline time of one decode step, KV reads and tensor-parallel all-reduces included."""
    m = _check_model(m)
    for what, n in (("batch", batch), ("n_chips", n_chips)):   # whole numbers of sequences and chips
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
            raise ValueError(f"{what} must be a whole number >= 1, got {n!r}")
    context = check_count(context, "context", 0, 1024)          # tokens cached per sequence
    mfu, bw_eff = check_fraction(mfu, "mfu"), check_fraction(bw_eff, "bw_eff")
    peak, bw = positive(peak_flops, "peak_flops (FLOP/s)"), positive(bandwidth_gbs, "bandwidth_gbs")
    if peak < MIN_PEAK_FLOPS:   # see MIN_PEAK_FLOPS: no chip is this slow
        raise ValueError(f"peak_flops={peak_flops!r} is in FLOP/s, and below {MIN_PEAK_FLOPS:g} no chip is that slow "
                         f"(did you pass TFLOP/s? use {peak:g}e12, or ChipSpec.peak('bf16'))")
    if bw > MAX_BANDWIDTH_GBS:   # see MAX_BANDWIDTH_GBS: no chip reads this fast
        raise ValueError(f"bandwidth_gbs is GB/s (e.g. 3350 for an H100), not bytes/s: got {bandwidth_gbs!r}, over "
                         f"{MAX_BANDWIDTH_GBS:g} GB/s; use bandwidth_gbs={bw / 1e9:g}")
    flops = batch * (2 * m.matmul_params + 4 * m.n_layers * m.d_model * context)  # FLOPs per step
    read = step_weight_bytes(m) + batch * context * kv_bytes_per_token(m)        # bytes per step
    compute = flops / (mfu * n_chips * peak)
    memory = read / (bw_eff * n_chips * bw * 1e9)
    comm, calls = 0.0, 0
    lat = non_negative(allreduce_latency_s, "allreduce_latency_s")  # s per all-reduce, fixed
    if n_chips > 1:
        if link_gbs is None:
            raise ValueError("n_chips > 1 needs link_gbs (chip-to-chip GB/s) for the all-reduces")
        act = batch * m.d_model * m.bytes_per_param                  # bytes all-reduced per call
        # link_gbs is the chip's bidirectional figure (labkit.runtime.hardware); a ring sends one way,
        # so each step of it moves data at half of that.
        link = positive(link_gbs, "link_gbs (bidirectional GB/s per chip)")
        if link > MAX_BANDWIDTH_GBS:  # NVLink 5 is 1800 GB/s: this is bytes/s
            raise ValueError(f"link_gbs is GB/s (e.g. 900 for an H100's NVLink), not bytes/s: got {link_gbs!r}; "
                             f"use {link / 1e9:g}")
        one_way = link / 2 * 1e9                                     # bytes/s
        ring = 2 * (n_chips - 1) / n_chips * act / one_way           # s per ring all-reduce
        calls = 2 * m.n_layers                                       # 2 per layer (attn, MLP)
        comm = calls * (ring + lat)                                  # s per step
    step = max(compute, memory) + comm
    return DecodeStep(batch, n_chips, compute, memory, comm, step,
                      "compute" if compute >= memory else "memory", batch / step, context, m.name,
                      mfu, bw_eff, calls, float(lat))


__all__ = ["memory_gb", "ServedModel", "LLAMA3_8B", "kv_bytes_per_token", "weight_bytes",
           "step_weight_bytes", "max_batch",
           "chips_to_fit", "SLICE_CHIPS", "slices", "DecodeStep", "decode_step"]
