"""labkit.measure.roofline: closed forms, measured points vs numpy, and the plot."""

from __future__ import annotations

import numpy as np
import pytest

from labkit.measure import roofline
from labkit.measure.bench import Timing


def test_matmul_flops_and_bytes_closed_form() -> None:
    # Count MACs by brute force for a tiny case: every (i, j, l) triple is one multiply + one add.
    m, n, k = 3, 5, 7
    macs = sum(1 for _ in np.ndindex(m, n, k))
    assert roofline.matmul_flops(m, n, k) == 2 * macs
    assert roofline.matmul_bytes(m, n, k, 2) == 2 * (m * k + k * n + m * n)


def test_ridge_and_attainable() -> None:
    peak, bw = 989e12, 3.35e12  # H100 SXM bf16, bytes/s
    r = roofline.ridge_point(peak, bw)
    assert r == pytest.approx(295.2, rel=1e-3)
    assert roofline.attainable(r / 10, peak, bw) == pytest.approx(peak / 10)
    assert roofline.attainable(r * 10, peak, bw) == pytest.approx(peak)
    with pytest.raises(ValueError, match="positive"):
        roofline.ridge_point(0, bw)


def test_square_matmul_intensity_approaches_n_over_3_for_bf16() -> None:
    for n in (1024, 8192):
        ai = roofline.matmul_flops(n, n, n) / roofline.matmul_bytes(n, n, n, 2)
        assert ai == pytest.approx(n / 3)


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_measured_matmul_points(dtype: str) -> None:
    pj = roofline.matmul_jax(64, 48, 32, dtype, repeats=2)
    pt = roofline.matmul_torch(64, 48, 32, dtype, repeats=2)
    for p in (pj, pt):
        assert p.flops == 2 * 64 * 48 * 32
        assert p.bytes == (64 * 32 + 32 * 48 + 64 * 48) * roofline.BYTES[dtype]
        assert p.intensity == pytest.approx(p.flops / p.bytes)
        assert p.flops_per_s == pytest.approx(p.flops / p.timing.median_s)


def test_stream_counts_read_plus_write() -> None:
    n = 1 << 16
    for p in (roofline.stream_jax(n, repeats=2), roofline.stream_jax(n, repeats=2, in_place=True),
              roofline.stream_torch(n, repeats=2)):
        assert p.bytes == 2 * 4 * n
        assert p.bytes_per_s == pytest.approx(p.bytes / p.timing.median_s)


@pytest.mark.parametrize("calls", [1, 5])
def test_in_place_probes_survive_back_to_back_calls(monkeypatch: pytest.MonkeyPatch, calls: int) -> None:
    # On a GPU/TPU _calls_jax() returns None: many calls per repeat, alternating two input sets. A
    # donated input is deleted after one use, so feeding the same set twice would raise; the wrapper
    # must feed back its last output instead. calls=5 reproduces that path on the CPU.
    monkeypatch.setattr(roofline, "_calls_jax", lambda: calls)
    n = 1 << 12
    for p in (roofline.stream_jax(n, repeats=3, in_place=True), roofline.add_jax(n, repeats=3),
              roofline.softmax_jax(8, 64, repeats=3)):
        assert p.timing.meta["calls"] == calls, p.name  # every probe follows the same back-to-back rule
    assert roofline.add_jax(n, repeats=2).bytes == 12 * n  # read x, read y, write y


def test_in_place_writes_into_the_donated_buffer() -> None:
    import jax
    import jax.numpy as jnp

    step = roofline._in_place(jax.jit(lambda x: x + 1, donate_argnums=0), 0)
    first, other = jnp.zeros(4), jnp.full(4, 100.0)
    out = step(first)
    assert first.is_deleted()  # donated: XLA may reuse its buffer for the result
    out = step(other)  # the harness's other input set is ignored: the last output is fed back
    assert not other.is_deleted() and np.array_equal(np.asarray(out), np.full(4, 2.0))


def test_bandwidth_probes_count_bytes_as_moved() -> None:
    n = 1 << 16
    probes = roofline.bandwidth_probes(n, "fp32", torch_device="cpu", repeats=2)
    by_kind = {(p.framework, roofline.probe_kind(p)): p for p in probes}
    assert set(by_kind) == {("jax", "read"), ("jax", "stream"), ("jax", "stream in place"), ("jax", "add in place"),
                            ("torch", "read"), ("torch", "stream"), ("torch", "copy")}
    moved = {"read": 1, "stream": 2, "stream in place": 2, "copy": 2, "add in place": 3}  # arrays read + written
    for (fw, kind), p in by_kind.items():
        assert p.bytes == moved[kind] * 4 * n, (fw, kind)  # a read has no store; an add reads two
    assert roofline.measured_bandwidth(probes) == max(p.bytes_per_s for p in probes)
    bf16 = roofline.bandwidth_probes(n, "bf16", repeats=2)
    assert len(bf16) == 4 and [p.bytes for p in bf16] == [2 * n, 4 * n, 4 * n, 6 * n]  # no torch device: JAX only
    with pytest.raises(ValueError, match="bandwidth_probes"):
        roofline.measured_bandwidth([])


def test_call_overhead_is_a_positive_time() -> None:
    t = roofline.call_overhead_jax(repeats=3)
    assert len(t.times_s) == 3 and 0 < t.median_s < 0.1  # a no-work call on a CPU: microseconds


def test_roofline_time_is_the_slower_of_math_and_memory() -> None:
    assert roofline.roofline_time(1e12, 1e6, 1e14, 1e12) == pytest.approx(1e-2)  # compute: 1e12 / 1e14
    assert roofline.roofline_time(1e6, 1e10, 1e14, 1e12) == pytest.approx(1e-2)  # memory: 1e10 / 1e12


def test_bound_by_names_the_overhead_bound_matmul_of_the_h100_run() -> None:
    # The H100 full run: 256^3 bf16 matmul, ~50 us per call, on a roof of 750 TFLOP/s and 2,479 GB/s
    # (ridge ~300 FLOP/B). Its intensity (85 FLOP/B) says "memory"; its roofline time (0.13 us) is
    # far under the fixed cost of a call, so it is overhead-bound.
    peak, bw = 750e12, 2479e9
    flops, nbytes = roofline.matmul_flops(256, 256, 256), roofline.matmul_bytes(256, 256, 256, 2)
    assert roofline.roofline_time(flops, nbytes, peak, bw) < 1e-6
    assert roofline.bound_by(flops, nbytes, peak, bw) == "memory"  # intensity alone, no overhead known
    assert roofline.bound_by(flops, nbytes, peak, bw, overhead_s=10e-6) == "overhead"
    big = roofline.matmul_flops(8192, 8192, 8192), roofline.matmul_bytes(8192, 8192, 8192, 2)
    assert roofline.bound_by(*big, peak, bw, overhead_s=10e-6) == "compute"  # 1.5 ms of work
    add = 1 << 28, 12 * (1 << 28)  # 1 GiB fp32 add: 1 FLOP per 12 bytes
    assert roofline.bound_by(*add, peak, bw, overhead_s=10e-6) == "memory"
    with pytest.raises(ValueError, match="bytes > 0"):
        roofline.bound_by(1.0, 0.0, peak, bw)


def test_ops_intensities() -> None:
    add = roofline.add_jax(1000, repeats=2)
    sm = roofline.softmax_jax(8, 16, repeats=2)
    assert add.intensity == pytest.approx(1 / 12)
    assert sm.intensity == pytest.approx(5 / 8)


def test_best_and_errors() -> None:
    pts = roofline.matmul_sweep("jax", [16, 64], "fp32", repeats=2)
    assert roofline.best(pts) is max(pts, key=lambda p: p.flops_per_s)
    with pytest.raises(ValueError, match="no measurements"):
        roofline.best([])
    with pytest.raises(ValueError, match="framework"):
        roofline.matmul_sweep("tensorflow", [16], "fp32")
    with pytest.raises(ValueError, match="fp32, bf16, fp16"):
        roofline.matmul_jax(8, 8, 8, "fp8")
    with pytest.raises(ValueError, match="fp32, bf16, fp16"):
        roofline.matmul_torch(8, 8, 8, "int4")


def test_probe_kind() -> None:
    t = lambda s: Timing((s,) * 3, 1)  # noqa: E731
    pts = [roofline.OpPoint(f"{k} 1 MiB" + sfx, "jax", "fp32", 1, 2**20, t(1e-3))
           for k, sfx in (("read", ""), ("stream", ", new output"), ("stream", " in place"), ("add", " in place"),
                          ("copy", ""))]
    assert [roofline.probe_kind(p) for p in pts] == ["read", "stream", "stream in place", "add in place", "copy"]
    with pytest.raises(ValueError, match="not a bandwidth probe"):
        roofline.probe_kind(roofline.OpPoint("softmax", "jax", "fp32", 1, 8, t(1e-3)))


@pytest.mark.parametrize("probe", [lambda: roofline.stream_torch(0), lambda: roofline.copy_torch(0),
                                   lambda: roofline.read_torch(-3), lambda: roofline.read_jax(0),
                                   lambda: roofline.stream_jax(2.5), lambda: roofline.add_jax(0),
                                   lambda: roofline.softmax_jax(0, 8), lambda: roofline.matmul_jax(-8, 8, 8),
                                   lambda: roofline.matmul_torch(-1, 8, 8, "fp32"),
                                   lambda: roofline.matmul_torch("8", 8, 8, "fp32")])
def test_probes_refuse_empty_or_negative_sizes_before_timing(probe) -> None:
    # Issue #19: 0 elements gave 0-byte points (ZeroDivisionError later); -8 gave XLA's MLIRError, '8' torch's dump.
    with pytest.raises((ValueError, TypeError), match=r"need (n_elements|rows|m) >= 1 \(a whole number\)"):
        probe()


def test_torch_probes_name_the_device_to_use_for_gpu_and_tpu() -> None:
    for probe in (lambda: roofline.matmul_torch(8, 8, 8, "fp32", device="gpu"),
                  lambda: roofline.stream_torch(8, device="tpu")):
        with pytest.raises(ValueError, match="use 'cuda' for a GPU, 'xla' \\(torch-xla\\) for a TPU"):
            probe()


def test_torch_probes_draw_their_inputs_on_the_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """On CUDA the random inputs are drawn on the GPU (an 8192² host randn idles it ~0.5 s); on a CPU on the host."""
    import torch

    class Drawn(Exception):
        pass

    class FakeTensor:  # what the faked randn returns: records where it is moved
        def to(self, device: object = None, dtype: object = None) -> "FakeTensor":
            moves.append(str(device))
            return self

        def copy_(self, src: object) -> None:  # copy_torch times out.copy_
            raise AssertionError("not called: time_torch is faked")

    def fake_time_torch(fn: object, make: object, **kwargs: object) -> None:
        make(0)  # the probe's own input maker, once
        raise Drawn

    for where, gpu in (("cuda:0", True), ("cpu", False)):
        draws, gens, moves = [], [], []
        monkeypatch.setattr(roofline, "torch_kind", lambda d: torch.device(d).type)  # no GPU check on this host
        monkeypatch.setattr(torch, "Generator", lambda device: gens.append(device) or torch.default_generator)
        monkeypatch.setattr(torch, "randn", lambda *s, device=None, **k: draws.append(str(device)) or FakeTensor())
        monkeypatch.setattr(torch, "empty", lambda *s, **k: FakeTensor())  # the probes' preallocated outputs
        monkeypatch.setattr(roofline, "time_torch", fake_time_torch)
        for probe in (lambda: roofline.matmul_torch(64, 64, 64, "bf16", device=where),
                      lambda: roofline.stream_torch(1024, device=where), lambda: roofline.read_torch(1024, device=where),
                      lambda: roofline.copy_torch(1024, device=where)):
            with pytest.raises(Drawn):
                probe()
        assert gens == (["cuda"] if gpu else ["cpu"])  # matmul_torch's seeded generator lives where it draws
        assert draws == [where] * 5 and moves == [where] * 5  # two matmul operands, one vector per probe
        monkeypatch.undo()


@pytest.mark.parametrize("bad", [64, [], "1024"])
def test_matmul_sweep_wants_a_list_of_sizes(bad) -> None:
    with pytest.raises(TypeError, match=r"sizes must be a non-empty list of matrix sizes, e.g. \[1024, 2048\]"):
        roofline.matmul_sweep("jax", bad, "fp32")


def test_probe_inputs_are_new_each_repeat_and_cheap_to_make() -> None:
    # A bandwidth probe's repeat must not read the buffer (or the values) of the one before it; drawing each
    # repeat's 128 MiB anew with threefry cost ~0.8 s a draw on 2 cores, so one draw is shifted per repeat.
    import jax.numpy as jnp

    make = roofline.vectors_jax(4096, jnp.float32, count=2)
    (x0, y0), (x1, y1) = make(0), make(1)
    assert x0.shape == (4096,) and x0.dtype == jnp.float32
    assert 0.9 < float(jnp.std(x0)) < 1.1 and not jnp.array_equal(x0, y0)  # normal draws, a different one per vector
    assert jnp.allclose(x1 - x0, 1.0) and jnp.allclose(y1 - y0, 1.0)  # repeat i: new values (base + i)
    assert x1.unsafe_buffer_pointer() != x0.unsafe_buffer_pointer()  # and a new buffer
    assert jnp.array_equal(make(0)[0], x0)  # the same repeat, the same inputs
