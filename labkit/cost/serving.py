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

from labkit.cost.model import non_negative
from labkit.cost.prices import check_fraction, positive
from labkit.runtime.hardware import ChipSpec



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
    return 2 * m.n_layers * m.n_kv_heads * m.head_dim * m.bytes_per_kv


def weight_bytes(m: ServedModel) -> float:
    """(Lab 06) Bytes of weights held in memory (every parameter): what must fit on the chips."""
    return m.n_params * m.bytes_per_param


def step_weight_bytes(m: ServedModel) -> float:
    """(Lab 06) Bytes of weights one decode step reads: every matmul weight, not the embedding table."""
    return m.matmul_params * m.bytes_per_param


def memory_gb(spec: ChipSpec) -> float:
    """(Lab 06) A chip's memory in GB (1e9 bytes), reading the table's figure in its source's unit."""
    return spec.memory_bytes / 1e9  # the table keeps the vendor's number and unit ("80 GB", "32 GiB")


def max_batch(m: ServedModel, context: int, memory_gb: float, n_chips: int = 1,
              reserve: float = 0.1) -> int:
    """(Lab 06) Largest batch whose KV cache fits beside the weights (0: the weights do not fit)."""
    usable = positive(memory_gb, "memory_gb (GB per chip)") * 1e9 * n_chips * (1 - reserve)  # bytes
    free = usable - weight_bytes(m)                    # bytes left for the cache
    per_seq = kv_bytes_per_token(m) * positive(context, "context (tokens)")  # bytes per sequence
    return max(0, math.floor(free / per_seq))


def chips_to_fit(m: ServedModel, context: int, batch: int, memory_gb: float,
                 reserve: float = 0.1) -> int:
    """(Lab 06) Fewest chips whose memory holds the weights and `batch` sequences of KV cache."""
    need = weight_bytes(m) + batch * context * kv_bytes_per_token(m)   # bytes
    return max(1, math.ceil(need / (positive(memory_gb, "memory_gb") * 1e9 * (1 - reserve))))


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
    for what, n in (("batch", batch), ("n_chips", n_chips)):   # whole numbers of sequences and chips
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
            raise ValueError(f"{what} must be a whole number >= 1, got {n!r}")
    mfu, bw_eff = check_fraction(mfu, "mfu"), check_fraction(bw_eff, "bw_eff")
    flops = batch * (2 * m.matmul_params + 4 * m.n_layers * m.d_model * context)  # FLOPs per step
    read = step_weight_bytes(m) + batch * context * kv_bytes_per_token(m)        # bytes per step
    compute = flops / (mfu * n_chips * positive(peak_flops, "peak_flops (FLOP/s)"))
    memory = read / (bw_eff * n_chips * positive(bandwidth_gbs, "bandwidth_gbs") * 1e9)
    comm, calls = 0.0, 0
    lat = non_negative(allreduce_latency_s, "allreduce_latency_s")  # s per all-reduce, fixed
    if n_chips > 1:
        if link_gbs is None:
            raise ValueError("n_chips > 1 needs link_gbs (chip-to-chip GB/s) for the all-reduces")
        act = batch * m.d_model * m.bytes_per_param                  # bytes all-reduced per call
        # link_gbs is the chip's bidirectional figure (labkit.runtime.hardware); a ring sends one way,
        # so each step of it moves data at half of that.
        one_way = positive(link_gbs, "link_gbs (bidirectional GB/s per chip)") / 2 * 1e9   # bytes/s
        ring = 2 * (n_chips - 1) / n_chips * act / one_way           # s per ring all-reduce
        calls = 2 * m.n_layers                                       # 2 per layer (attn, MLP)
        comm = calls * (ring + lat)                                  # s per step
    step = max(compute, memory) + comm
    return DecodeStep(batch, n_chips, compute, memory, comm, step,
                      "compute" if compute >= memory else "memory", batch / step, context, m.name,
                      mfu, bw_eff, calls, float(lat))


__all__ = ["memory_gb", "ServedModel", "LLAMA3_8B", "kv_bytes_per_token", "weight_bytes",
           "step_weight_bytes", "max_batch",
           "chips_to_fit", "DecodeStep", "decode_step"]
