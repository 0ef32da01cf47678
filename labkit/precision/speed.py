"""Speed and memory of a training step: bf16 against TF32 and against true fp32 (Lab 04).

Two baselines, because "fp32" means two things on an Ampere-or-later GPU: **true fp32** matmuls
(JAX ``precision="highest"``, torch ``set_float32_matmul_precision("highest")``, torch's default)
and **TF32** (fp32 storage, 10-bit mantissa inside the tensor cores: JAX's default on these GPUs,
torch's ``"high"`` / ``torch.backends.cuda.matmul.allow_tf32 = True``). bf16 is compared with
both, in both frameworks, with step time, tokens/s and memory.

A TPU has no TF32, but its own cheap "fp32": JAX's DEFAULT precision there is **one bf16 pass**
over fp32 operands (HIGHEST, the true-fp32 baseline, takes six). That DEFAULT plays TF32's role
-- the fast fp32 a user gets without asking -- so on a TPU bf16 is also timed against it, as the
variant ``fp32_default`` (``fp32_matmul="default"``: each framework's own default).

The step must be **compute-bound** for precision to show in its time: with small matmuls the GPU
waits on kernel launches and memory traffic, which fp32 and bf16 share. The memory a step needs is
estimated before running it (:func:`memory_estimate`) so the full profile can be sized to fit a
16 GB T4 or TPU v5e; the estimate is checked against what the run really allocated.

A CPU shared with other work stalls now and then for milliseconds, so one median can fall on
either side of another by chance: :func:`speedup_ranges` gives each speed-up's spread across
steps, and :func:`takeaway` calls a difference inside it noise.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from labkit.gpt.config import GPTConfig, check_config, n_params
from labkit.gpt.data import check_count

# variant -> (training precision, fp32_matmul setting of labkit.precision.train.TrainConfig)
VARIANTS = {"fp32": ("fp32", "highest"), "tf32": ("fp32", "tf32"), "fp32_default": ("fp32", "default"),
            "bf16": ("bf16", "default"), "fp16_scaled": ("fp16_scaled", "default")}
ACT_BYTES = {"fp32": 4, "tf32": 4, "fp32_default": 4, "bf16": 2, "fp16_scaled": 2}  # bytes per stored activation
BASES = ("fp32", "tf32", "fp32_default")  # the baselines a low precision is timed against (where run)
GB16 = 16e9  # bytes: a T4's and a TPU v5e's memory (labkit.runtime.hardware)


def variants_for(platform: str, bf16: bool) -> tuple[list[str], dict[str, str]]:
    """(Lab 04) The variants this runtime can time, and why each missing one is missing."""
    is_bool = isinstance(bf16, (bool, np.bool_))
    if platform not in ("cpu", "gpu", "tpu") or not is_bool:  # "cuda" was timed as a CPU, "yes" counted as bf16
        raise (ValueError if isinstance(platform, str) and is_bool else TypeError)(
            f"platform must be 'cpu', 'gpu' or 'tpu' (rt.platform), bf16 a bool (rt.bf16); got platform={platform!r}, "
            f"bf16={bf16!r}")
    if platform == "gpu" and bf16:
        return ["fp32", "tf32", "bf16"], {"fp32_default": "JAX's DEFAULT fp32 on this GPU is TF32: the tf32 variant"}
    if platform == "gpu":
        return ["fp32", "fp16_scaled"], {
            "tf32": "GPUs before Ampere (T4, V100) have no TF32",
            "fp32_default": "no TF32 before Ampere: DEFAULT is true fp32",
            "bf16": "no native bf16 before Ampere: fp16 with loss scaling is the low precision here"}
    if platform == "tpu":  # DEFAULT fp32 = one bf16 pass: the TPU's fast fp32, in TF32's role
        return ["fp32", "fp32_default", "bf16"], {
            "tf32": "TPUs have no TF32 (JAX's 'tensorfloat32' there means 3 bf16 passes); "
                    "fp32_default (one bf16 pass) is the fast fp32 here"}
    return ["fp32", "bf16"], {"tf32": "CPUs have no TF32: XLA:CPU and torch compute fp32 dots in fp32 at every setting",
                              "fp32_default": "DEFAULT is true fp32 on a CPU"}


def memory_estimate(cfg: GPTConfig, batch: int, seq: int, act_bytes: int) -> dict[str, float]:
    """(Lab 04) Bytes a training step needs: fp32 weights + grads + AdamW, activations, logits.

    Activations per layer: ``s·b·h·(34 + 5·a·s/h)`` bytes with 2-byte activations (Korthikanti et
    al. 2022, "Reducing Activation Recomputation in Large Transformer Models", no recomputation),
    scaled by ``act_bytes / 2``. An estimate, not a bound, and it errs both ways: it counts
    dropout masks, which the course GPT (no dropout) does not keep, but not what XLA adds in its
    temporary buffer: intermediates the formula leaves out (the softmax of the logits beside its
    gradient, low-precision copies of the weights), the gradients and AdamW's update terms made
    inside the jitted step, and buffers XLA's scheduler keeps live at the same time. For a small
    model those extras outweigh the activations, so the measured MB (``rows``) can exceed it. The
    ``5·a·s/h`` term is the (s, s) attention scores and softmax of every head: a fused attention
    kernel (flash / cuDNN, torch's SDPA) never stores them, so there the measured MB falls below it
    (on an H100 at s = 512: torch 0.50x, JAX's bf16 with cuDNN 0.66x, JAX's fp32 with XLA's 0.89x).
    """
    cfg = check_config(cfg)
    batch, seq = check_count(batch, "batch", example=8), check_count(seq, "seq", example=cfg.seq_len)
    act_bytes = check_count(act_bytes, "act_bytes", message=f"act_bytes is bytes per activation, a whole number "
                            f">= 1, e.g. speed.ACT_BYTES['bf16'] (= 2); got {act_bytes!r}")  # 'bf16' * n: a str
    s, b, h, a, L = seq, batch, cfg.d_model, cfg.n_head, cfg.n_layer
    n = n_params(cfg)
    act = L * s * b * h * (34 + 5 * a * s / h) * act_bytes / 2
    logits = 2 * b * s * cfg.vocab_size * 4  # fp32 logits and their gradient
    states = 16 * n  # fp32 weights (4) + grads (4) + AdamW m and v (8) per parameter
    return {"weights_grads_adam": states, "activations": act, "logits": logits, "total": states + act + logits}


def speedups(step_ms: Mapping[tuple[str, str], float], low: str = "bf16") -> dict[str, float | None]:
    """(Lab 04) {"<low>_vs_<base>_<fw>": t(base) / t(low)} for each base in BASES (None if not timed)."""
    fws = sorted({fw for fw, _ in step_ms})
    return {f"{low}_vs_{base}_{fw}": (step_ms[(fw, base)] / step_ms[(fw, low)]
                                      if (fw, base) in step_ms and (fw, low) in step_ms else None)
            for base in BASES for fw in fws}


def speedup_ranges(step_times: Mapping[tuple[str, str], Sequence[float]],
                   low: str = "bf16") -> dict[str, tuple[float, float] | None]:
    """(Lab 04) Each speed-up's spread: (q25(base) / q75(low), q75(base) / q25(low)) of the step times."""
    fws = sorted({fw for fw, _ in step_times})
    q = {k: np.percentile(v, [25, 75]) for k, v in step_times.items() if len(v)}
    # Interquartile ratios: where this interval holds 1.0, the middle half of the steps of the two
    # variants overlap, and the order of their medians is not a measurement.
    out: dict[str, tuple[float, float] | None] = {}
    for base in BASES:
        for fw in fws:
            b, lo = q.get((fw, base)), q.get((fw, low))
            out[f"{low}_vs_{base}_{fw}"] = None if b is None or lo is None else (float(b[0] / lo[1]), float(b[1] / lo[0]))
    return out


def measured_bytes(memory: Mapping[str, int]) -> int | None:
    """(Lab 04) A run's measured device memory: torch's CUDA peak, or XLA's temp + fp32 states; None on CPU torch.

    JAX's step is one jitted call: the gradients are intermediates inside it, so XLA's temp buffer
    already holds them; what lives beside temp is the step's arguments, the fp32 weights and AdamW
    moments (donated, so the updated ones reuse their buffers).
    """
    if "cuda_peak_allocated" in memory:
        return int(memory["cuda_peak_allocated"])
    if "xla_temp" in memory:
        return int(memory["xla_temp"] + memory["params_fp32"] + memory["adam_state_fp32"])
    return None


def rows(runs: Mapping[tuple[str, str], Any], tokens_per_step: int,
         estimates: Mapping[str, Mapping[str, float]]) -> list[dict[str, Any]]:
    """(Lab 04) One table row per (framework, variant): step ms, tokens/s, estimated and measured MB."""
    out = []
    for (fw, v), r in runs.items():
        got = measured_bytes(r.memory)
        out.append({"framework": fw, "variant": v, "matmuls": VARIANTS[v][1], "step ms": r.step_time_s * 1e3,
                    "tokens/s": tokens_per_step / r.step_time_s, "estimated MB": estimates[v]["total"] / 1e6,
                    "measured MB": None if got is None else got / 1e6})
    return out


def saved_versus_fp32(low: Sequence[Mapping[str, Any]], fp32: Sequence[Mapping[str, Any]], seq: int) -> dict[str, Any]:
    """(Lab 04) A run's saved-for-backward rows (``train.saved_breakdown``) against fp32's: the 2-byte bound, and why below it.

    ``bound``: what fp32's own tensors would take with every float32 one in 2 bytes, as a fraction of fp32's
    bytes (its int and bool tensors do not shrink) -- the least a run that saves the *same* tensors keeps.
    Only a run that saves fewer numbers (``elements`` < 1) goes below it: e.g. cuDNN's fused attention
    recomputes the (batch, heads, seq, seq) scores in the backward pass (``scores``: such tensors, (low, fp32)).
    """
    seq = check_count(seq, "seq", example=64)
    mb = lambda rows, dtype=None: sum(r["MB"] for r in rows if dtype in (None, r["dtype"]))  # noqa: E731
    numbers = lambda rows: sum(r["count"] * int(np.prod(r["shape"])) for r in rows)  # noqa: E731 -- elements saved
    scores = lambda rows: sum(r["count"] for r in rows if len(r["shape"]) >= 4 and tuple(r["shape"][-2:]) == (seq, seq))  # noqa: E731
    if not mb(fp32) > 0 or not mb(low) > 0:
        raise ValueError("both runs must save something (rows of train.saved_breakdown with MB > 0); got an empty count")
    return {"kept": mb(low) / mb(fp32), "bound": 1 - mb(fp32, "float32") / mb(fp32) / 2,
            "elements": numbers(low) / numbers(fp32), "scores": (scores(low), scores(fp32)),
            "by_dtype": {d: mb(low, d) for d in sorted({r["dtype"] for r in low})},
            "float32_share": mb(low, "float32") / mb(low)}


def _verdict(v: float, spread: tuple[float, float] | None) -> str:
    if spread is None:
        return f"{v:.2f}x"
    lo, hi = spread
    word = "within noise" if lo <= 1.0 <= hi else ("faster" if lo > 1.0 else "slower")
    return f"{v:.2f}x (steps' interquartile range {lo:.2f}-{hi:.2f}x: {word})"


def takeaway(sp: Mapping[str, float | None], platform: str, low: str, why_missing: Mapping[str, str],
             spread: Mapping[str, tuple[float, float] | None] | None = None, bf16_native: bool | None = None) -> str:
    """(Lab 04) The speed conclusion of this run, from its numbers, with what the runtime explains.

    ``bf16_native``: on a CPU, whether it has bf16 instructions (labkit.runtime's ``bf16``); None: not known.
    """
    spread = spread or {}
    got = ", ".join(f"{k.replace('_vs_', ' vs ').replace('_', ' ')} {_verdict(v, spread.get(k))}"
                    for k, v in sp.items() if v is not None)
    missing = "; ".join(f"{k}: {v}" for k, v in why_missing.items())
    if platform == "cpu":
        bf16 = {True: "this CPU's bf16 instructions (AVX512-BF16 / AMX) speed up only the large matmuls a kernel "
                      "hands them", False: "this CPU has no bf16 instructions, so every bf16 op is converted in software",
                None: "bf16 instructions (AVX512-BF16 / AMX, where present) speed up only the large matmuls a kernel "
                      "hands them"}[bf16_native]
        return (f"CPU: {got}. Not a lesson about accelerators: {bf16}, and a small model's step is mostly "
                "overhead and casts between bf16 and fp32, so bf16 may even be slower. Compare each framework with "
                "itself: their CPU kernels and thread counts differ." + (f" ({missing})" if missing else ""))
    return f"{platform.upper()}: {low} step speed-up {got}." + (f" ({missing})" if missing else "")
