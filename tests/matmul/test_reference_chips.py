"""Tests for labkit.matmul.reference_chips (Lab 01): the four chips answer through their own model."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from labkit.matmul import reference_chips as rc
from labkit.matmul import mxu, simt, systolic
from labkit.runtime import hardware

MXU128, MXU256, H100, T4 = rc.MODELS


def test_models_are_the_two_mxus_then_the_two_gpus():
    assert rc.MODELS == [*rc.MXUS, *rc.GPUS] and len(rc.MODELS) == 4
    assert rc.MXUS[MXU128] == "TPU v5e" and rc.MXUS[MXU256] == "TPU v6e"


def test_an_mxu_is_the_pipelined_weight_stationary_model_under_its_roof():
    # Compute-bound at BIG: the pipelined cycle model's utilization; fill and skew paid once, so
    # N = 129 keeps a little less than 129/256 (exact for the fold-by-fold count).
    assert rc.at(MXU128, "N", 129, roof=False) / rc.at(MXU128, "N", 128, roof=False) == pytest.approx(129 / 256, rel=3e-3)
    # Under the roof the cliff hides: N = 128 is only 120 FLOP/byte, below the v5e's 240, so both
    # sides are memory-bound and take about as long.
    assert mxu.predict(rc.BIG, rc.BIG, 128).bound == "memory"  # 129: padding doubles compute, just past the roof
    assert rc.at(MXU128, "N", 129) == pytest.approx(rc.at(MXU128, "N", 128), rel=0.01)
    assert rc.at(MXU256, "K", 300, roof=False) == systolic.cycles(rc.BIG, 300, rc.BIG, 256, 256, "ws", pipelined=True).utilization
    assert rc.square(MXU128, 4097) == mxu.predict(4097, 4097, 4097, "TPU v5e").fraction_of_peak
    # Small batches sit on the HBM roof: fraction of peak grows with M up to the compute-bound batch.
    m = mxu.compute_bound_batch(rc.BIG, rc.BIG, "TPU v5e")
    below, above = rc.predicted(MXU128, [m // 4, m // 2, m - 1], "M"), rc.at(MXU128, "M", 2 * m)
    on_roof = [mxu.predict(x, rc.BIG, rc.BIG).arithmetic_intensity * 819e9 / 197e12 for x in (m // 4, m // 2, m - 1)]
    np.testing.assert_allclose(below, on_roof, rtol=1e-12)  # FLOP/s = intensity x bandwidth
    assert np.all(np.diff(below) > 0) and above > 0.99


def test_a_gpu_is_the_simt_model_of_its_spec():
    chip, dtype = rc.GPUS[H100]
    got = rc.predicted(H100, [1, 1024, 1025], "M")
    want = [simt.predict(m, rc.BIG, rc.BIG, chip, dtype).fraction_of_peak for m in (1, 1024, 1025)]
    np.testing.assert_allclose(got, want, rtol=0, atol=0)
    assert rc.at(T4, "N", 1025) == simt.predict(rc.BIG, 1025, rc.BIG, *rc.GPUS[T4]).fraction_of_peak
    assert rc.square(T4, 640) == simt.predict(640, 640, 640, *rc.GPUS[T4]).fraction_of_peak


def test_cliff_table_has_a_row_per_model_with_both_sides_of_each_cliff():
    rows = rc.cliff_table([MXU128, T4])
    assert [r["model"] for r in rows] == [MXU128, T4]
    assert rows[0]["square 4097"] < 0.999 * rows[0]["square 4096"]  # the padding cliff, compute-bound
    assert rows[1]["M=641"] < rows[1]["M=640"]                  # the T4's row-block (padding) cliff
    assert rows[1]["square 4097"] < rows[1]["square 4096"]
    assert len(rc.cliff_table()) == 4


def test_unknown_models_and_dimensions_are_named():
    with pytest.raises(ValueError, match="unknown model 'TPU v9'"):
        rc.at("TPU v9", "N", 128)
    with pytest.raises(ValueError, match="unknown model"):
        rc.square("A100", 128)
    with pytest.raises(ValueError, match="always applies its memory roof"):
        rc.at(H100, "N", 128, roof=False)
    with pytest.raises(ValueError, match="vary must be"):
        rc.predicted(MXU128, [128], "B")


def test_predicted_refuses_a_fractional_size_for_every_model() -> None:
    # Issue #11: the MXU path cut 12.5 to 12 (int(s)) where the GPU path (simt.sweep) now refuses it.
    for model in (MXU128, H100):
        with pytest.raises(ValueError, match="must be a positive integer, got 12.5"):
            rc.predicted(model, [8, 12.5], "M")


def test_h100_cublas_figures_are_the_committed_sweep():
    # Lab 01 quotes them beside the model (its 1.0 is the 989 TFLOP/s spec; cuBLAS's best is ~0.76 of it),
    # read from the file and its best taken with max(), not from constants or a dict's order.
    import json
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / rc.H100_SOURCE
    sweeps = json.loads(path.read_text())["sweeps"]
    sweep = rc.h100_cublas()
    want = {(r["M"], r["N"], r["K"]): r["measured_tflops"] for rows in sweeps.values() for r in rows}
    assert sweep == pytest.approx(want)  # a shape timed in several sweeps keeps its last: 4096^3 the square sweep's
    best = max(sweep, key=sweep.get)
    assert best == (4096, 2048, 4096) and sweep[best] == pytest.approx(753.24, abs=0.01)
    assert sweep[(4096,) * 3] == pytest.approx(715.21, abs=0.01) and sweep[(5120,) * 3] == pytest.approx(704.98, abs=0.01)


def test_h100_cublas_reads_both_committed_runs():
    sweep, probe = rc.h100_cublas(), rc.h100_cublas(rc.H100_PROBE_SOURCE)
    assert len(sweep) == 49 and len(probe) == 19 and len(set(sweep) | set(probe)) == 57  # 68 timings, 57 shapes
    assert probe[(1025, 4096, 4096)] == pytest.approx(733.19, abs=0.01)  # torch's figure, not JAX's (564.2)


def test_l2_resident_flags_the_probe_points_that_test_no_dram_roof():
    # (4096, 128, 4096) bf16 is 35.7 MB: it fits an H100's 50 MB L2, so the probe's back-to-back calls on the
    # same inputs (343 TFLOP/s) beat the sweep's fresh inputs (218) at that shape; 4096^3 (101 MB) does not fit.
    probe, sweep = rc.h100_cublas(rc.H100_PROBE_SOURCE), rc.h100_cublas()
    shapes = list(probe)
    in_l2 = rc.l2_resident(shapes)
    memory = np.array([simt.predict(*s, *rc.GPUS[H100], schedule="stream-k").bound == "memory" for s in shapes])
    assert sorted(s for s, f in zip(shapes, in_l2 & memory) if f) == [
        (1, 4096, 4096), (16, 4096, 4096), (4096, 128, 4096), (4096, 136, 4096)]
    assert not rc.l2_resident([(4096, 4096, 4096)])[0] and rc.l2_resident([(4096, 4096, 4096)], l2_bytes=120e6)[0]
    assert probe[(4096, 128, 4096)] > 1.5 * sweep[(4096, 128, 4096)]
    # Lab 01 judges the Stream-K bound's tightness without them: the probe's tightest is then compute-bound.
    sk = rc.measured_over_model(probe, schedule="stream-k")
    assert shapes[int(np.argmax(sk))] == (4096, 128, 4096)  # all shapes: an L2-resident one is the tightest
    kept = np.where(in_l2 & memory, -np.inf, sk)
    assert shapes[int(np.argmax(kept))] == (1025, 4096, 4096) and kept.max() < sk.max()
    with pytest.raises(ValueError, match="l2_bytes must be a positive number"):
        rc.l2_resident(shapes, l2_bytes=0)


def test_h100_cublas_names_a_missing_file_and_an_unknown_source(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="unknown source 'shapes.json': use one of benchmarks/"):
        rc.h100_cublas("shapes.json")
    monkeypatch.setattr(rc, "ROOT", tmp_path)
    with pytest.raises(FileNotFoundError, match="shapes.json is missing: .*git clone"):
        rc.h100_cublas()


def test_measured_over_model_divides_by_the_schedules_prediction():
    shapes = {(1025, 4096, 4096): 733.2, (1, 4096, 4096): 2.296}
    for schedule in simt.SCHEDULES:
        want = [t / simt.predict(*s, *rc.GPUS[H100], schedule=schedule).predicted_tflops for s, t in shapes.items()]
        np.testing.assert_allclose(rc.measured_over_model(shapes, schedule=schedule), want, rtol=1e-12)
    # What Lab 01 teaches from both committed runs: cuBLAS beats the whole-tile model at some shapes
    # (so it bounds nothing), and reaches no more than the Stream-K model anywhere.
    for source in rc.H100_SOURCES:
        tiles, sk = (rc.measured_over_model(rc.h100_cublas(source), schedule=s) for s in simt.SCHEDULES)
        assert tiles.max() > 2 and sk.max() < 0.9, source


def test_measured_over_model_refuses_an_mxu_and_nothing_measured():
    with pytest.raises(ValueError, match="is not a GPU model"):
        rc.measured_over_model({(8, 8, 8): 1.0}, MXU128)
    with pytest.raises(ValueError, match="measured is empty"):
        rc.measured_over_model({})
    with pytest.raises(ValueError, match="unknown schedule"):
        rc.measured_over_model({(8, 8, 8): 1.0}, schedule="wave")
    with pytest.raises(ValueError, match=r"keys are \(M, N, K\) triples, got \(8, 8\)"):
        rc.measured_over_model({(8, 8): 1.0})
    for bad in (0.0, -1.0, float("nan"), "7", True):
        with pytest.raises(ValueError, match=r"TFLOP/s for \(8, 8, 8\) must be a positive number"):
            rc.measured_over_model({(8, 8, 8): bad})
    with pytest.raises(ValueError, match="M must be a positive integer, got 0"):
        rc.measured_over_model({(0, 8, 8): 1.0})


def test_measured_over_model_takes_any_gpu_as_a_chip_and_dtype_pair():
    shapes = {(1025, 4096, 4096): 733.2, (1, 4096, 4096): 2.296}
    spec = hardware.lookup("NVIDIA H100 SXM")
    for schedule in simt.SCHEDULES:
        by_key = rc.measured_over_model(shapes, H100, schedule)
        for model in ((spec, "bf16"), ("NVIDIA H100 SXM", "bf16")):  # a ChipSpec or its name: the same figures
            np.testing.assert_array_equal(rc.measured_over_model(shapes, model, schedule), by_key)
    with pytest.raises(ValueError, match="has no SMs"):  # a TPU: simt names the model that fits it
        rc.measured_over_model(shapes, ("TPU v5e", "bf16"))
    with pytest.raises(ValueError, match="NVIDIA T4 has no bf16 peak"):  # Turing: fp16 tensor cores only
        rc.measured_over_model(shapes, ("NVIDIA T4", "bf16"))
    for bad in ("H100", ("NVIDIA H100 SXM",), ["NVIDIA H100 SXM", "bf16"], None):
        with pytest.raises(ValueError, match="is not a GPU model"):
            rc.measured_over_model(shapes, bad)


def test_schedule_ratios_is_lab01s_bound_check_on_this_gpu():
    # What Lab 01's section 3 asserts on a CUDA GPU, fed the committed H100 runs as if this run had measured them.
    spec = hardware.lookup("NVIDIA H100 SXM")
    for source in rc.H100_SOURCES:
        measured = rc.h100_cublas(source)
        ratios, aligned = rc.schedule_ratios(measured, (spec, "bf16"))
        assert set(ratios) == set(simt.SCHEDULES) and all(len(r) == len(measured) for r in ratios.values())
        want = [simt.predict(*shape, spec, "bf16").aligned for shape in measured]
        np.testing.assert_array_equal(aligned, want)
        assert 0 < aligned.sum() < len(aligned), source  # both kinds present: the mask matters
        assert ratios["stream-k"][aligned].max() <= 1 < ratios["tiles"][aligned].max(), source
        # The check can fail: a spec table that halved this GPU's peak makes cuBLAS beat the Stream-K model.
        halved = dataclasses.replace(spec, peak_tflops={d: p / 2 if p else p for d, p in spec.peak_tflops.items()})
        assert rc.schedule_ratios(measured, (halved, "bf16"))[0]["stream-k"][aligned].max() > 1, source
    # A GPUS key gives the same answer as its pair.
    by_key, by_pair = rc.schedule_ratios(rc.h100_cublas(), H100), rc.schedule_ratios(rc.h100_cublas(), (spec, "bf16"))
    np.testing.assert_array_equal(by_key[1], by_pair[1])
    for s in simt.SCHEDULES:
        np.testing.assert_array_equal(by_key[0][s], by_pair[0][s])


def test_the_probe_sits_above_the_sweep_where_both_timed_a_shape():
    # Lab 01 says so (best of back-to-back calls vs the median of fresh inputs, the same GPU): checked here.
    sweep, probe = rc.h100_cublas(), rc.h100_cublas(rc.H100_PROBE_SOURCE)
    both = set(sweep) & set(probe)
    assert len(both) >= 10, sorted(both)
    assert all(probe[s] >= sweep[s] for s in both), {s: probe[s] / sweep[s] for s in both}


def test_drop_causes_tells_padding_from_waves():
    # Lab 01's two cliffs by hand: T4 M 640 -> 641 (a 6th row block of 1 row in 128: padding 83%, its waves 96%
    # full) and H100 M 1024 -> 1025 (144 tiles on 132 SMs: a second wave 9% full), the T4's 128 -> 129 (padding).
    assert rc.drop_causes("T4 (fp16)", [640, 641]) == {"padding": [641], "waves": [], "alignment": []}
    assert rc.drop_causes("T4 (fp16)", [128, 129])["padding"] == [129]
    assert rc.drop_causes("H100 (bf16)", [1024, 1025]) == {"padding": [], "waves": [1025], "alignment": []}
    assert rc.drop_causes("H100 (bf16)", [4096, 4097], "N")["alignment"] == [4097]
    # The plotted M grid: the H100's drops are all waves, the T4's first ones padding, later ones waves too.
    batch = np.unique(np.geomspace(1, 8192, 120).astype(int))
    h100, t4 = (rc.drop_causes(g, batch) for g in ("H100 (bf16)", "T4 (fp16)"))
    assert h100["waves"] and not h100["padding"]
    assert t4["padding"][0] < min(t4["waves"]) and t4["waves"]


def test_drop_causes_refuses_an_mxu_and_a_bad_keep():
    with pytest.raises(ValueError, match="is an MXU: .* use a GPU model"):
        rc.drop_causes("MXU 128x128 (TPU v5e)", [128, 129])
    with pytest.raises(ValueError, match=r"keep must be in \(0, 1\]"):
        rc.drop_causes("T4 (fp16)", [128, 129], keep=0)
    with pytest.raises(ValueError, match="vary must be 'M', 'N' or 'K'"):
        rc.drop_causes("T4 (fp16)", [128, 129], "B")


def test_h100_unaligned_ratios_are_what_unaligned_efficiency_is_the_median_of():
    r = rc.h100_unaligned_ratios()
    # 6 pairs each in the N and K sweeps (129 .. 4097), 2 in the square one (4097, 8193).
    assert len(r) == 14 and (4096, 129, 4096) in r and (8193, 8193, 8193) in r and (4096, 4096, 4097) in r
    sweep = rc.h100_cublas()  # (4096, 129, 4096) over (4096, 128, 4096): both only in the N sweep
    assert r[(4096, 129, 4096)] == pytest.approx(sweep[(4096, 129, 4096)] / sweep[(4096, 128, 4096)])
    v = np.array(list(r.values()))
    assert abs(np.median(v) - simt.UNALIGNED_EFFICIENCY) < 0.01 and 0.13 < v.min() < v.max() < 0.35
    with pytest.raises(ValueError, match="only the sweep"):
        rc.h100_unaligned_ratios(rc.H100_PROBE_SOURCE)
