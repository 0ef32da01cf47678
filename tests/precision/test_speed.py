"""labkit.precision.speed (Lab 04): variants per runtime, the memory formula against a hand count, speed-up ratios."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from labkit.gpt.config import get_config, n_params
from labkit.precision import speed


def test_variants_name_why_tf32_is_missing() -> None:
    v, why = speed.variants_for("gpu", True)
    assert v == ["fp32", "tf32", "bf16"] and list(why) == ["fp32_default"] and "TF32" in why["fp32_default"]
    v, why = speed.variants_for("gpu", False)
    assert v == ["fp32", "fp16_scaled"] and "Ampere" in why["tf32"] and "bf16" in why
    assert "TF32" in speed.variants_for("cpu", False)[1]["tf32"] and "TF32" in speed.variants_for("tpu", True)[1]["tf32"]
    assert speed.VARIANTS["fp32"] == ("fp32", "highest") and speed.VARIANTS["tf32"] == ("fp32", "tf32")


def test_a_tpu_times_bf16_against_its_default_fp32_too() -> None:
    """TPU-only branch, forced on the CPU: DEFAULT fp32 (one bf16 pass there) is the TPU's TF32-like baseline."""
    v, why = speed.variants_for("tpu", True)
    assert v == ["fp32", "fp32_default", "bf16"] and "fp32_default" not in why and "one bf16 pass" in why["tf32"]
    assert speed.VARIANTS["fp32_default"] == ("fp32", "default") and speed.ACT_BYTES["fp32_default"] == 4
    ms = {("jax", "fp32"): 60.0, ("jax", "fp32_default"): 15.0, ("jax", "bf16"): 10.0}
    sp = speed.speedups(ms)
    assert sp == {"bf16_vs_fp32_jax": 6.0, "bf16_vs_tf32_jax": None, "bf16_vs_fp32_default_jax": 1.5}
    text = speed.takeaway(sp, "tpu", "bf16", why)
    assert text.startswith("TPU: bf16 step speed-up bf16 vs fp32 jax 6.00x, bf16 vs fp32 default jax 1.50x.")
    times = {k: [t * 0.9, t, t * 1.1] for k, t in ms.items()}
    assert speed.speedup_ranges(times)["bf16_vs_fp32_default_jax"] == pytest.approx((14.25 / 10.5, 15.75 / 9.5))  # interquartile
    mem = {"params_fp32": 4, "grads_fp32": 4, "adam_state_fp32": 8, "xla_temp": 4}
    runs = {k: SimpleNamespace(step_time_s=t / 1e3, memory=mem) for k, t in ms.items()}
    est = {x: speed.memory_estimate(get_config("test"), 8, 32, speed.ACT_BYTES[x]) for x in v}
    rows = speed.rows(runs, 256, est)
    assert [(r["variant"], r["matmuls"]) for r in rows] == [("fp32", "highest"), ("fp32_default", "default"),
                                                            ("bf16", "default")]
    assert rows[1]["estimated MB"] == rows[0]["estimated MB"] > rows[2]["estimated MB"]  # 4-byte activations


def test_memory_estimate_by_hand_and_the_full_profile_fits_16gb() -> None:
    cfg = get_config("test")  # 2 layers, d 32, 2 heads, seq 32, vocab 256
    e = speed.memory_estimate(cfg, batch=8, seq=32, act_bytes=2)
    assert e["activations"] == 2 * 32 * 8 * 32 * (34 + 5 * 2 * 32 / 32)  # L s b h (34 + 5 a s / h)
    assert e["weights_grads_adam"] == 16 * n_params(cfg) and e["logits"] == 2 * 8 * 32 * 256 * 4
    assert e["total"] == pytest.approx(sum(v for k, v in e.items() if k != "total"))
    assert speed.memory_estimate(cfg, 8, 32, 4)["activations"] == 2 * e["activations"]
    full = get_config("gpt2-small", vocab_size=256, seq_len=512)  # Lab 04's full timing model
    assert speed.memory_estimate(full, 16, 512, 4)["total"] < speed.GB16 < speed.memory_estimate(full, 16, 1024, 4)["total"]


def test_speedups_and_rows() -> None:
    ms = {("jax", "fp32"): 30.0, ("jax", "tf32"): 12.0, ("jax", "bf16"): 6.0, ("torch", "fp32"): 20.0, ("torch", "bf16"): 10.0}
    sp = speed.speedups(ms)
    assert sp == {"bf16_vs_fp32_jax": 5.0, "bf16_vs_fp32_torch": 2.0, "bf16_vs_tf32_jax": 2.0, "bf16_vs_tf32_torch": None,
                  "bf16_vs_fp32_default_jax": None, "bf16_vs_fp32_default_torch": None}
    cpu = speed.takeaway(sp, "cpu", "bf16", {"tf32": "CPUs have no TF32"})
    assert cpu.startswith("CPU: bf16 vs fp32 jax 5.00x") and "CPUs have no TF32" in cpu
    assert "where present" in cpu and "Compare each framework with itself" in cpu  # bf16 support not given
    assert "no bf16 instructions, so every bf16 op is converted in software" in speed.takeaway(sp, "cpu", "bf16", {},
                                                                                                bf16_native=False)
    assert "this CPU's bf16 instructions" in speed.takeaway(sp, "cpu", "bf16", {}, bf16_native=True)
    assert speed.takeaway(sp, "gpu", "bf16", {}).endswith("bf16 vs tf32 jax 2.00x.")


def test_a_speed_up_inside_the_steps_spread_is_called_noise() -> None:
    times = {("jax", "fp32"): [3.0, 3.1, 3.2, 3.3, 9.0], ("jax", "bf16"): [2.9, 3.0, 3.3, 3.4, 3.5],
             ("torch", "fp32"): [4.0, 4.1, 4.2, 4.3, 4.4], ("torch", "bf16"): [8.0, 8.5, 9.0, 9.1, 9.5]}
    spread = speed.speedup_ranges(times)
    # jax: q25(fp32) 3.1 / q75(bf16) 3.4, q75(fp32) 3.3 / q25(bf16) 3.0 -> 0.91-1.1x, holds 1.0
    assert spread["bf16_vs_fp32_jax"] == pytest.approx((3.1 / 3.4, 3.3 / 3.0))
    assert spread["bf16_vs_tf32_jax"] is None
    sp = speed.speedups({k: float(np.median(v)) for k, v in times.items()})
    text = speed.takeaway(sp, "cpu", "bf16", {}, spread)
    assert "jax 0.97x (steps' interquartile range 0.91-1.10x: within noise)" in text
    assert "torch 0.47x (steps' interquartile range 0.45-0.51x: slower)" in text and "()" not in text
    mem = {"params_fp32": 4, "grads_fp32": 4, "adam_state_fp32": 8}
    runs = {("jax", "bf16"): SimpleNamespace(step_time_s=0.5, memory={**mem, "xla_temp": 84}),
            ("torch", "bf16"): SimpleNamespace(step_time_s=0.25, memory={**mem, "cuda_peak_allocated": 7e6}),
            ("torch", "fp32"): SimpleNamespace(step_time_s=0.25, memory=mem)}
    est = {v: {"total": 2e6} for v in ("bf16", "fp32")}
    r = speed.rows(runs, 1000, est)
    assert [x["tokens/s"] for x in r] == [2000, 4000, 4000] and r[0]["measured MB"] == 96 / 1e6  # temp (grads inside) + weights + moments
    assert r[1]["measured MB"] == 7.0 and r[2]["measured MB"] is None and r[0]["estimated MB"] == 2.0


@pytest.mark.parametrize(("call", "err", "match"), [
    # 'cuda' (and any other string) was timed as a CPU; 'yes' was truthy
    (lambda: speed.variants_for("cuda", True), ValueError, r"platform must be 'cpu', 'gpu' or 'tpu' \(rt.platform\).*"
                                                           r"got platform='cuda'"),
    (lambda: speed.variants_for("gpu", "yes"), TypeError, r"bf16 a bool \(rt.bf16\); got platform='gpu', bf16='yes'"),
    (lambda: speed.variants_for(None, False), TypeError, "platform must be .*got platform=None"),
    # a negative batch gave a negative total; act_bytes 0 no activations; 'bf16' a raw "can't multiply sequence"
    (lambda: speed.memory_estimate(get_config("test"), -4, 32, 4), ValueError, "batch must be >= 1, got -4"),
    (lambda: speed.memory_estimate(get_config("test"), 4, 0, 4), ValueError, "seq must be >= 1, got 0"),
    (lambda: speed.memory_estimate(get_config("test"), 4, 32, 0), ValueError,
     r"act_bytes is bytes per activation.*speed.ACT_BYTES\['bf16'\] \(= 2\); got 0"),
    (lambda: speed.memory_estimate(get_config("test"), 4, 32, "bf16"), TypeError,
     r"act_bytes is bytes per activation.*ACT_BYTES\['bf16'\].*got 'bf16'"),
    (lambda: speed.memory_estimate(get_config("test"), 4, 32, 2.0), TypeError, "act_bytes .*got 2.0"),
    (lambda: speed.memory_estimate("test", 4, 32, 2), TypeError, "cfg must be a GPTConfig.*got str 'test'"),
])
def test_bad_runtime_and_sizes_are_refused_with_the_value(call, err: type, match: str) -> None:
    with pytest.raises(err, match=match):
        call()
    assert speed.variants_for("gpu", np.bool_(True))[0] == ["fp32", "tf32", "bf16"]  # numpy bools are bools
    assert speed.memory_estimate(get_config("test"), np.int64(8), 32, np.int64(2)) == \
        speed.memory_estimate(get_config("test"), 8, 32, speed.ACT_BYTES["bf16"])


def _rows(*parts: tuple[str, tuple[int, ...], int]) -> list[dict]:
    size = {"float32": 4, "bfloat16": 2, "bool": 1, "int32": 4}
    return [{"dtype": d, "shape": sh, "count": n, "MB": n * int(np.prod(sh)) * size[d] / 1e6} for d, sh, n in parts]


def test_saved_versus_fp32_gives_the_two_byte_bound_and_says_why_a_run_goes_below_it() -> None:
    """Review: "every tensor in 2 bytes would be 0.50x" read as a floor, but the H100's JAX bf16 run kept 0.44x:
    cuDNN's fused attention saved no (s, s) scores there. Known answers by hand (seq 64, 2 heads)."""
    fp32 = _rows(("float32", (8, 64, 32), 10), ("float32", (8, 2, 64, 64), 4), ("bool", (8, 2, 64, 64), 2))
    same = _rows(("bfloat16", (8, 64, 32), 10), ("bfloat16", (8, 2, 64, 64), 4), ("bool", (8, 2, 64, 64), 2))
    c = speed.saved_versus_fp32(same, fp32, seq=64)
    f32_mb, all_mb = 4 * (10 * 16384 + 4 * 65536) / 1e6, 4 * (10 * 16384 + 4 * 65536) / 1e6 + 2 * 65536 / 1e6
    assert c["bound"] == pytest.approx(1 - f32_mb / all_mb / 2) and c["kept"] == pytest.approx(c["bound"])
    assert c["elements"] == 1.0 and c["scores"] == (6, 6) and c["float32_share"] == 0.0
    fused = _rows(("bfloat16", (8, 64, 32), 10), ("float32", (8, 2, 64, 1), 4))  # no scores: softmax stats only
    c = speed.saved_versus_fp32(fused, fp32, seq=64)
    assert c["kept"] < c["bound"] and c["elements"] < 1 and c["scores"] == (0, 6)
    assert list(c["by_dtype"]) == ["bfloat16", "float32"]
    logits = _rows(("float32", (32, 256, 256), 1))  # (batch, seq, vocab) with vocab == seq: not a score tensor
    assert speed.saved_versus_fp32(logits, logits, seq=256)["scores"] == (0, 0)
    with pytest.raises(ValueError, match="both runs must save something"):
        speed.saved_versus_fp32([], fp32, seq=64)
