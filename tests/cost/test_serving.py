"""Tests for labkit.cost.serving (Lab 06): KV-cache capacity and bandwidth terms by hand."""
from __future__ import annotations

import pytest

from labkit.cost import serving as S

M = S.LLAMA3_8B
EMBED = 128256 * 4096         # Llama-3-8B's input embedding: held in memory, looked up, not read in full


def test_kv_bytes_and_capacity_by_hand() -> None:
    assert S.kv_bytes_per_token(M) == 2 * 32 * 8 * 128 * 2 == 131072   # 128 KiB per token
    # 256 sequences x 1024 tokens x 128 KiB = 32 GiB of cache
    assert 256 * 1024 * S.kv_bytes_per_token(M) == 32 * 2 ** 30
    # H100 80 GB, 10% reserve: (72e9 - 16.06e9) / (1024 x 131072) = 416.8 -> 416
    assert S.max_batch(M, 1024, 80) == int((72e9 - 8.03e9 * 2) // (1024 * 131072)) == 416
    assert S.max_batch(M, 1024, 16) == 0                                  # v5e: weights do not fit
    assert S.chips_to_fit(M, 1024, 64, 16) == 2  # (16.06e9 + 8.59e9) / 14.4e9 = 1.71 -> 2


def test_decode_step_memory_and_compute_terms() -> None:
    st = S.decode_step(M, 64, 1024, 1, 989e12, 3350, mfu=0.5, bw_eff=0.8)
    read = (8.03e9 - EMBED) * 2 + 64 * 1024 * 131072          # matmul weights + KV reads, bytes
    flops = 64 * (2 * (8.03e9 - EMBED) + 4 * 32 * 4096 * 1024)  # matmuls + attention
    assert st.memory_s == pytest.approx(read / (0.8 * 3350e9))
    assert st.compute_s == pytest.approx(flops / (0.5 * 989e12))
    assert st.bound == "memory" and st.comm_s == 0
    assert st.tokens_per_s == pytest.approx(64 / max(st.memory_s, st.compute_s))
    assert st.workload == ("Llama-3-8B", 64, 1024) and (st.mfu, st.bw_eff) == (0.5, 0.8)


def test_the_embedding_table_is_held_but_not_read_per_step() -> None:
    assert S.weight_bytes(M) == 8.03e9 * 2                          # what must fit: every parameter
    assert S.step_weight_bytes(M) == pytest.approx((8.03e9 - EMBED) * 2)  # what a step reads: 525 M fewer
    assert S.max_batch(M, 1024, 80) == 416                          # capacity still counts the table
    with pytest.raises(ValueError, match=r"n_lookup_params must be in \[0, n_params"):
        S.ServedModel("x", 1e6, 1, 8, 1, 8, n_lookup_params=2e6)


def test_tensor_parallel_all_reduce_term() -> None:
    st = S.decode_step(M, 8, 1024, 4, 197e12, 819, link_gbs=400)
    # link_gbs is bidirectional (v5e: 400 GB/s); a ring sends one way, at 200 GB/s (it once used all 400)
    ring = 2 * 3 / 4 * (8 * 4096 * 2) / 200e9                # s per all-reduce
    assert st.comm_s == pytest.approx(2 * 32 * ring)
    assert st.tokens_per_s_per_chip == pytest.approx(st.tokens_per_s / 4)
    with pytest.raises(ValueError, match="link_gbs"):
        S.decode_step(M, 8, 1024, 4, 197e12, 819)


def test_memory_in_the_unit_the_source_names() -> None:
    from labkit.runtime import hardware
    v5p, h100 = hardware.lookup("TPU v5p"), hardware.lookup("NVIDIA H100 SXM")
    assert S.memory_gb(h100) == 80.0                           # "80 GB": GB as stated
    assert S.memory_gb(v5p) == 95.0                            # Google's v5p docs: "95GB"
    assert S.memory_gb(hardware.lookup("TPU v4")) == pytest.approx(32 * 2 ** 30 / 1e9)  # "32 GiB" = 34.4 GB
    # v5p cap by hand: (0.9 x 95e9 - 16.06e9) / (1024 x 131072) = 517 (564 while the table read GiB)
    assert S.max_batch(M, 1024, S.memory_gb(v5p)) == int((0.9 * 95e9 - 16.06e9) // (1024 * 131072)) == 517


def test_per_allreduce_latency_is_optional_and_counted_per_call() -> None:
    # Bandwidth only by default (optimistic for small messages); a fixed latency adds calls x latency.
    base = S.decode_step(M, 8, 1024, 4, 197e12, 819, link_gbs=400)
    slow = S.decode_step(M, 8, 1024, 4, 197e12, 819, link_gbs=400, allreduce_latency_s=10e-6)
    assert base.allreduces == slow.allreduces == 2 * 32 and base.allreduce_latency_s == 0
    assert slow.comm_s - base.comm_s == pytest.approx(64 * 10e-6) and slow.tokens_per_s < base.tokens_per_s
    one = S.decode_step(M, 8, 1024, 1, 197e12, 819, allreduce_latency_s=10e-6)   # one chip: no all-reduce
    assert one.allreduces == 0 and one.comm_s == 0
    with pytest.raises(ValueError, match="allreduce_latency_s must be a finite number >= 0"):
        S.decode_step(M, 8, 1024, 4, 197e12, 819, link_gbs=400, allreduce_latency_s=-1e-6)
