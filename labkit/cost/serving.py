"""(Lab 06) Decode throughput of a served model: weights, KV cache, memory capacity and bandwidth.

One decode step makes one new token for each of `batch` sequences. It must

- fit: weights + batch x context x (KV bytes per token) <= the chips' memory (capacity caps batch);
- read: every weight once and every cached K/V once (bandwidth);
- compute: 2 x parameters FLOPs per token for the matmuls + 4 x layers x d_model x context for
  attention (QK^T and AV, 2 FLOPs per multiply-add);
- talk: with n chips in tensor parallel, 2 all-reduces of the activations per layer (ring).

Step time = max(compute, memory) + communication: the roofline of Lab 00 plus the interconnect
term of Lab 03. Every chip is modelled with the same formula; only the spec figures change.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from labkit.cost.prices import check_fraction, positive
from labkit.runtime.hardware import ChipSpec



@dataclass(frozen=True)
class ServedModel:
    """(Lab 06) The shape figures a decode step depends on (a dense decoder)."""
    name: str
    n_params: float          # parameters (all matmul weights; embeddings included)
    n_layers: int
    d_model: int
    n_kv_heads: int          # grouped-query attention: K/V heads, not query heads
    head_dim: int
    bytes_per_param: int = 2  # bf16 weights
    bytes_per_kv: int = 2     # bf16 cache


# Llama-3-8B shape (Meta's model card / config.json: 32 layers, d_model 4096, 8 KV heads of 128).
LLAMA3_8B = ServedModel("Llama-3-8B", 8.03e9, 32, 4096, 8, 128)


def kv_bytes_per_token(m: ServedModel) -> int:
    """(Lab 06) Bytes of K and V cached per token: 2 (K, V) x layers x KV heads x head_dim x bytes."""
    return 2 * m.n_layers * m.n_kv_heads * m.head_dim * m.bytes_per_kv


def weight_bytes(m: ServedModel) -> float:
    """(Lab 06) Bytes of weights read by every decode step."""
    return m.n_params * m.bytes_per_param


def memory_gb(spec: ChipSpec) -> float:
    """(Lab 06) A chip's memory in GB (1e9 bytes), reading the table's figure in its source's unit."""
    return spec.memory_bytes / 1e9  # the table keeps the vendor's number and unit ("80 GB", "95 GiB")


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


def decode_step(m: ServedModel, batch: int, context: int, n_chips: int, peak_flops: float,
                bandwidth_gbs: float, *, mfu: float = 0.5, bw_eff: float = 0.8,
                link_gbs: float | None = None) -> DecodeStep:
    """(Lab 06) Roofline time of one decode step, KV reads and tensor-parallel all-reduces included."""
    for what, n in (("batch", batch), ("n_chips", n_chips)):   # whole numbers of sequences and chips
        if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1:
            raise ValueError(f"{what} must be a whole number >= 1, got {n!r}")
    mfu, bw_eff = check_fraction(mfu, "mfu"), check_fraction(bw_eff, "bw_eff")
    flops = batch * (2 * m.n_params + 4 * m.n_layers * m.d_model * context)   # FLOPs per step
    read = weight_bytes(m) + batch * context * kv_bytes_per_token(m)          # bytes per step
    compute = flops / (mfu * n_chips * positive(peak_flops, "peak_flops (FLOP/s)"))
    memory = read / (bw_eff * n_chips * positive(bandwidth_gbs, "bandwidth_gbs") * 1e9)
    comm = 0.0
    if n_chips > 1:
        if link_gbs is None:
            raise ValueError("n_chips > 1 needs link_gbs (chip-to-chip GB/s) for the all-reduces")
        act = batch * m.d_model * m.bytes_per_param                  # bytes all-reduced per call
        ring = 2 * (n_chips - 1) / n_chips * act / (link_gbs * 1e9)  # s per ring all-reduce
        comm = 2 * m.n_layers * ring                                 # 2 per layer (attn, MLP)
    step = max(compute, memory) + comm
    return DecodeStep(batch, n_chips, compute, memory, comm, step,
                      "compute" if compute >= memory else "memory", batch / step)


__all__ = ["memory_gb", "ServedModel", "LLAMA3_8B", "kv_bytes_per_token", "weight_bytes", "max_batch",
           "chips_to_fit", "DecodeStep", "decode_step"]
