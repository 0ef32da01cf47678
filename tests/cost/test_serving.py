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


# ---------------------------------------------------------------- bad input: a clear error, never a wrong number
def test_figures_in_the_wrong_unit_are_refused_with_the_fix() -> None:
    # 989 (TFLOP/s) as FLOP/s gave a 2.5e8 s step; 3350e9 (bytes/s) as GB/s a 6e-12 s one.
    with pytest.raises(ValueError, match=r"peak_flops=989 is in FLOP/s.*did you pass TFLOP/s\? use 989e12"):
        S.decode_step(M, 8, 1024, 1, 989, 3350)
    with pytest.raises(ValueError, match=r"bandwidth_gbs is GB/s .*bytes/s: got 3350000000000\.0.*bandwidth_gbs=3350"):
        S.decode_step(M, 8, 1024, 1, 989e12, 3350e9)
    with pytest.raises(ValueError, match=r"link_gbs is GB/s .*got 900000000000\.0; use 900"):
        S.decode_step(M, 8, 1024, 2, 989e12, 3350, link_gbs=900e9)
    with pytest.raises(ValueError, match=r"memory_gb is GB per chip .*not bytes.*got 80000000000\.0.*memory_gb=80"):
        S.max_batch(M, 1024, 80e9)
    with pytest.raises(ValueError, match=r"memory_gb is GB per chip .*got 80000000000\.0"):
        S.chips_to_fit(M, 1024, 8, 80e9)
    # the bounds sit far from every chip in the table: each one's own figures pass
    from labkit.runtime import hardware
    for spec in hardware.CHIPS.values():
        peak = max(p for p in spec.peak_tflops.values() if p) * 1e12
        S.decode_step(M, 1, 1024, 2, peak, spec.bandwidth_gbs, link_gbs=spec.link_gbs or 32.0)
        assert S.chips_to_fit(M, 1024, 1, S.memory_gb(spec)) >= 1
    assert S.MIN_PEAK_FLOPS < 1e12 and S.MAX_BANDWIDTH_GBS > 1e4 and S.MAX_MEMORY_GB > 1e3


def test_context_batch_chips_and_reserve_are_checked() -> None:
    # A negative context made a faster step; reserve=-1 let 1072 sequences "fit" where 416 do; n_chips=0 said
    # "the weights do not fit"; reserve=1.0 raised ZeroDivisionError.
    with pytest.raises(ValueError, match=r"context must be >= 0, got -1024"):
        S.decode_step(M, 8, -1024, 1, 989e12, 3350)
    with pytest.raises(TypeError, match=r"context must be a whole number >= 0, got 1\.5"):
        S.decode_step(M, 8, 1.5, 1, 989e12, 3350)
    assert S.decode_step(M, 8, 0, 1, 989e12, 3350).context == 0     # an empty cache is a valid step
    for bad in (-1, 1.5, 1.0):
        with pytest.raises(ValueError, match=rf"reserve must be a finite number in \[0, 1\), got {bad}"):
            S.max_batch(M, 1024, 80, reserve=bad)
        with pytest.raises(ValueError, match=rf"reserve must be a finite number in \[0, 1\), got {bad}"):
            S.chips_to_fit(M, 1024, 256, 80, reserve=bad)
    assert S.max_batch(M, 1024, 80, reserve=0) == int((80e9 - 16.06e9) // (1024 * 131072))  # 0: hold nothing back
    for bad in (0, -2):
        with pytest.raises(ValueError, match=rf"n_chips must be >= 1, got {bad}"):
            S.max_batch(M, 1024, 80, n_chips=bad)
    with pytest.raises(TypeError, match=r"n_chips must be a whole number >= 1, got 2\.0"):
        S.max_batch(M, 1024, 80, n_chips=2.0)
    with pytest.raises(ValueError, match=r"batch must be >= 1, got -256"):
        S.chips_to_fit(M, 1024, -256, 80)
    with pytest.raises(ValueError, match=r"context must be >= 1, got 0"):
        S.chips_to_fit(M, 0, 8, 80)
    with pytest.raises(ValueError, match=r"context must be >= 1, got -1024"):
        S.max_batch(M, -1024, 80)


def test_a_served_model_checks_its_shape() -> None:
    with pytest.raises(ValueError, match=r"ServedModel 'x': n_layers must be >= 1, got 0"):
        S.ServedModel("x", 8e9, 0, 4096, 8, 128)
    with pytest.raises(ValueError, match=r"ServedModel 'x': n_kv_heads must be >= 1, got -8"):
        S.ServedModel("x", 8e9, 32, 4096, -8, 128)
    with pytest.raises(TypeError, match=r"ServedModel 'x': head_dim must be a whole number >= 1, got 128\.5"):
        S.ServedModel("x", 8e9, 32, 4096, 8, 128.5)
    with pytest.raises(ValueError, match=r"ServedModel 'x': bytes_per_param .* > 0, got 0"):
        S.ServedModel("x", 8e9, 32, 4096, 8, 128, bytes_per_param=0)
    with pytest.raises(ValueError, match=r"ServedModel 'x': bytes_per_kv .* > 0, got -2"):
        S.ServedModel("x", 8e9, 32, 4096, 8, 128, bytes_per_kv=-2)
    with pytest.raises(ValueError, match=r"ServedModel 'x': n_params .* > 0, got 0"):
        S.ServedModel("x", 0, 32, 4096, 8, 128)
    assert S.weight_bytes(S.ServedModel("int4", 8e9, 32, 4096, 8, 128, bytes_per_param=0.5)) == 4e9  # 4-bit weights


def test_a_name_where_an_object_is_needed() -> None:
    from labkit.runtime import hardware
    # hardware.lookup("H100") is None (ambiguous): memory_gb(None) was an AttributeError deep inside
    with pytest.raises(TypeError, match=r"memory_gb needs a ChipSpec or a chip name.*got None"):
        S.memory_gb(hardware.lookup("H100"))
    with pytest.raises(ValueError, match=r"chip 'H100' is ambiguous: did you mean 'NVIDIA H100 SXM'"):
        S.memory_gb("H100")
    with pytest.raises(hardware.UnknownChipError, match=r"did you mean 'TPU v5e'"):   # hardware's error too
        S.memory_gb("v5e")
    assert S.memory_gb("NVIDIA H100 SXM") == 80.0 and S.memory_gb("TPU v5 lite") == 16.0  # a name is looked up
    for call in (lambda: S.kv_bytes_per_token("Llama-3-8B"), lambda: S.weight_bytes("Llama-3-8B"),
                 lambda: S.max_batch("Llama-3-8B", 1024, 80), lambda: S.chips_to_fit("Llama-3-8B", 1024, 8, 80),
                 lambda: S.decode_step("Llama-3-8B", 8, 1024, 1, 989e12, 3350)):
        with pytest.raises(TypeError, match=r"pass a ServedModel \(e\.g\. serving\.LLAMA3_8B.*got 'Llama-3-8B'"):
            call()


def test_a_tpu_is_rented_by_the_slice() -> None:
    # Llama-3-8B + 256 x 1024 tokens of cache: 16.06e9 + 34.4e9 bytes; a v5e chip holds 14.4e9 usable -> 4 chips,
    # a v5p (95 GB -> 85.5e9 usable) holds it on one chip, but its smallest slice is v5p-8 = 4 chips.
    assert S.chips_to_fit(M, 1024, 256, 16, slice_sizes=S.slices("TPU v5e")) == 4
    assert S.chips_to_fit(M, 1024, 256, 95) == 1
    assert S.chips_to_fit(M, 1024, 256, 95, slice_sizes=S.slices("TPU v5p")) == 4
    assert S.chips_to_fit(M, 1024, 64, 16) == 2 and S.chips_to_fit(M, 1024, 64, 16, slice_sizes=(1, 4, 8)) == 4
    assert S.slices("TPU v5 lite") == S.SLICE_CHIPS["TPU v5e"] and S.slices("NVIDIA H100 SXM") is None
    with pytest.raises(ValueError, match="more than the largest slice \\(8 chips\\)"):
        S.chips_to_fit(M, 1024, 4000, 16, slice_sizes=(1, 4, 8))
    with pytest.raises(ValueError, match="slice_sizes must be chip counts >= 1"):
        S.chips_to_fit(M, 1024, 8, 16, slice_sizes=(0, 4))
