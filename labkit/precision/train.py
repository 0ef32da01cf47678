"""Train the course GPT in fp32, bf16 and fp16 + loss scaling, in JAX and PyTorch (Lab 04).

Mixed precision here means **fp32 master weights, low-precision compute**: the parameters
and the AdamW state stay fp32; JAX runs the model with ``FlaxGPT(cfg, dtype=bf16|fp16)``
(weights cast on use), PyTorch inside ``torch.autocast``. The loss and LayerNorm statistics
stay fp32 in both. fp16 adds dynamic loss scaling (:mod:`labkit.precision.loss_scale`): skipped steps
keep the old weights *and* optimizer state. The recipe, identical in both: AdamW with a linear
learning-rate warm-up (:func:`lr_at`) and the global gradient norm clipped after unscaling.

Both frameworks start from the same weights (:func:`init_flat`, loaded with
``labkit.gpt.convert.load_flat_params``) and read the same batches, so their curves differ only by
precision and kernel rounding. Kept separate from the MFU lab's training code on purpose: this
loop exposes the scale / unscale / check / skip steps that the lab teaches. This module holds
the shared parts and PyTorch; the JAX loop is :mod:`labkit.precision.train_jax` (re-exported
here as ``train_jax``).
"""

from __future__ import annotations

import contextlib
import statistics
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from labkit.precision import loss_scale as ls
from labkit.precision import master
from labkit.gpt.data import Batcher, check_count, check_real
from labkit.gpt.config import GPTConfig, n_params
from labkit.runtime.matmul_precision import fp32_matmul_precision

PRECISIONS = ("fp32", "bf16", "fp16_scaled", "fp16")  # "fp16": no loss scaling (a demo)
_COMPUTE = {"fp32": "float32", "bf16": "bfloat16", "fp16_scaled": "float16", "fp16": "float16"}


def compute_dtype(precision: str) -> str:
    """(Lab 04) The dtype a run's matmuls and activations use: "float32", "bfloat16" or "float16"."""
    return _COMPUTE[check_precision(precision)]


def check_precision(name: str) -> str:
    """(Lab 04) Return ``name`` if it is a training precision, else raise listing the valid ones."""
    if name not in PRECISIONS:
        raise ValueError(f"unknown training precision {name!r}; valid: {', '.join(PRECISIONS)}")
    return name


def plan(platform: str, bf16: bool, chip: str = "") -> tuple[list[str], str]:
    """(Lab 04) Precisions to train on this runtime and why (no bf16 -> fp16 + loss scaling)."""
    if platform == "gpu" and not bf16:
        return ["fp32", "fp16_scaled"], (
            f"{chip or 'this GPU'} has no native bf16 (pre-Ampere): the bf16 run is replaced by "
            "fp16 with dynamic loss scaling, which its tensor cores do run natively.")
    bf16_here = ("its bf16 instructions (AVX512-BF16/AMX) help only the large matmuls a kernel hands them" if bf16
                 else "it has no bf16 instructions, so every bf16 op is converted in software")
    note = {"tpu": "TPUs have no fp16 matrix units: the fp16 run is emulated by XLA (numerics "
                   "shown, its step time is not meaningful).",
            "cpu": f"CPU: {bf16_here}, and fp16 is mostly emulated. The rounding and the memory carry over to "
                   "accelerators; step times do not, and how a short loss curve ends varies run to run."}.get(platform, "")
    return ["fp32", "bf16", "fp16_scaled"], note


@dataclass(frozen=True)
class TrainConfig:
    """(Lab 04) One short training run: sizes, optimizer and the fp16 loss-scale settings."""

    steps: int = 40
    batch: int = 8
    seq: int = 32            # tokens per sequence (<= GPTConfig.seq_len)
    lr: float = 3e-3         # AdamW peak, betas (0.9, 0.95), no weight decay: same in both frameworks
    seed: int = 0            # init and batches
    # Linear warm-up over this many *applied* updates (skipped fp16 steps do not count), then
    # constant: Adam's first updates are ~lr per weight whatever the gradient, so a full lr on
    # step 1 spikes the loss. 0 = no warm-up.
    warmup: int = 10
    clip_norm: float | None = 1.0  # clip the global gradient norm (fp32, unscaled) to this; None = off
    loss_scale: ls.LossScaleConfig = field(
        default_factory=lambda: ls.LossScaleConfig(init_scale=2.0 ** 16, growth_interval=20))
    timed_from: int = 2      # steps before this are warm-up (compile) and not timed
    # fp32 matmuls: "default" = each framework's default (JAX: TF32 on Ampere+, 1 bf16 pass on
    # TPU; torch: true fp32), "highest" = true fp32 in both, "tf32" = TF32 allowed in both.
    fp32_matmul: str = "default"
    # JAX only: after training, trace this many more steps and charge their device time by HLO op
    # (labkit.measure.xla_breakdown) into TrainResult.device_time; 0 = no trace (bench_precision sets 3).
    trace_steps: int = 0
    # Keep the final fp32 master weights (canonical flat dict) in TrainResult.params, to evaluate the
    # trained model apart from its training losses (benchmarks/diag_bf16_loss.py); off: a copy per run.
    keep_params: bool = False
    # JAX only: the residual stream's dtype in a low-precision run. "compute": Flax's dtype casts it too
    # (bf16 / fp16 embeddings and x + block(x)); "fp32": torch.autocast's recipe, embeddings and residual
    # adds stay fp32 (labkit.gpt.flax_model.FlaxGPT's residual_dtype). torch always runs autocast's.
    jax_residual: str = "compute"

    def __post_init__(self) -> None:
        # Counts are whole numbers (steps=2.5 would train 3 steps), lr and clip_norm finite and > 0.
        checked = {f: check_count(getattr(self, f), f"TrainConfig.{f}", low, example=eg)
                   for f, low, eg in (("steps", 1, 40), ("batch", 1, 8), ("seq", 1, 32), ("seed", 0, 0),
                                      ("warmup", 0, 10), ("timed_from", 0, 2), ("trace_steps", 0, 0))}
        checked["lr"] = check_real(self.lr, "TrainConfig.lr", 0.0, hint="; e.g. lr=3e-3")
        if self.clip_norm is not None:
            checked["clip_norm"] = check_real(self.clip_norm, "TrainConfig.clip_norm", 0.0,
                                              hint="; e.g. clip_norm=1.0, or None for no clipping")
        check_residual(self.jax_residual, "TrainConfig.jax_residual")
        if not isinstance(self.keep_params, bool):
            raise TypeError(f"TrainConfig.keep_params must be True or False, got {self.keep_params!r}")
        if not isinstance(self.loss_scale, ls.LossScaleConfig):
            raise TypeError(f"TrainConfig.loss_scale must be a LossScaleConfig, got {self.loss_scale!r}; "
                            f"e.g. loss_scale.LossScaleConfig(init_scale=2.0 ** 16) or loss_scale.static(1024.0)")
        for k, v in checked.items():
            object.__setattr__(self, k, v)  # frozen: set through object
        check_fp32_matmul(self.fp32_matmul)


def lr_at(tc: TrainConfig, applied: int) -> float:
    """(Lab 04) Learning rate for the update after ``applied`` applied updates: linear warm-up, then flat."""
    return tc.lr * min(1.0, (applied + 1) / tc.warmup) if tc.warmup else tc.lr


JAX_RESIDUAL = ("compute", "fp32")  # TrainConfig.jax_residual: the residual stream's dtype in JAX

# fp32_matmul -> (jax.default_matmul_precision value, torch.set_float32_matmul_precision value)
_FP32_MATMUL = {"default": (None, None), "highest": ("highest", "highest"),
                "tf32": ("tensorfloat32", "high")}


def check_fp32_matmul(value: Any, note: str = "") -> str:
    """(Lab 04) ``value`` if it is an fp32_matmul setting (a key of _FP32_MATMUL); else a ValueError naming them."""
    if value not in _FP32_MATMUL:
        raise ValueError(f"fp32_matmul must be one of {', '.join(_FP32_MATMUL)}{note}, got {value!r}")
    return value


def fp32_matmul_context(framework: str, setting: str, device: Any = "cpu") -> Any:
    """(Lab 04) A context that runs fp32 matmuls at ``setting`` in ``framework`` ("default": leaves them be)."""
    jax_prec, torch_prec = _FP32_MATMUL[check_fp32_matmul(setting)]
    if framework == "jax":
        import jax

        return jax.default_matmul_precision(jax_prec) if jax_prec else contextlib.nullcontext()
    return fp32_matmul_precision(torch_prec, device) if torch_prec else contextlib.nullcontext()  # restored after


def check_residual(value: Any, name: str = "residual") -> str:
    """(Lab 04) ``value`` if it is a JAX residual-stream setting (JAX_RESIDUAL); else a ValueError with the fix."""
    if value not in JAX_RESIDUAL:
        raise ValueError(f"{name} must be one of {', '.join(JAX_RESIDUAL)}, got {value!r}; "
                         "'fp32' keeps JAX's residual stream in fp32 as autocast does")
    return value


@dataclass
class TrainResult:
    """(Lab 04) Losses, timings, loss scales and memory of one run."""

    framework: str
    precision: str
    losses: list[float]          # nats/token, one per step
    step_times_s: list[float]    # seconds per step, first ``timed_from`` steps excluded
    scales: list[float]          # loss scale in effect at each step (1.0 = none)
    skipped: int                 # steps skipped for non-finite gradients
    memory: dict[str, int]       # bytes, see memory_model / saved_bytes_*
    # JAX with TrainConfig.trace_steps: an XlaBreakdown of that many extra steps (device time by op)
    device_time: Any = None
    # With TrainConfig.keep_params: the final fp32 master weights, {canonical name: numpy array}
    params: dict[str, np.ndarray] | None = None
    # Measured at the end: bytes by dtype of the real params / optimizer state (torch: grads too), master.py
    state: dict[str, dict[str, int]] = field(default_factory=dict)

    @property
    def step_time_s(self) -> float:
        """(Lab 04) Median seconds per training step."""
        return statistics.median(self.step_times_s) if self.step_times_s else float("nan")

    def final_loss(self, last: int = 5) -> float:
        """(Lab 04) Mean loss over the last ``last`` steps (less noisy than the final batch)."""
        return float(np.mean(self.losses[-last:]))


def memory_model(cfg: GPTConfig) -> dict[str, int]:
    """(Lab 04) Bytes of fp32 master weights, fp32 grads and AdamW state (m, v): same for all."""
    n = n_params(cfg)
    return {"params_fp32": 4 * n, "grads_fp32": 4 * n, "adam_state_fp32": 8 * n}


def init_flat(cfg: GPTConfig, seed: int = 0) -> dict[str, np.ndarray]:
    """(Lab 04) Canonical fp32 start weights for every run (TorchGPT's GPT-2 init, seeded).

    FlaxGPT draws from the same distribution; torch's eager init just costs no JAX compile.
    torch's global RNG is left as it was.
    """
    import torch

    from labkit.gpt.torch_model import TorchGPT, torch_flat_params

    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return torch_flat_params(TorchGPT(cfg))


# --------------------------------------------------------------------------- PyTorch


def _torch_dtype(precision: str) -> Any:
    import torch

    return getattr(torch, compute_dtype(precision))


def saved_tensors_torch(model: Any, precision: str, x: Any) -> list[tuple[str, tuple[int, ...], int]]:
    """(Lab 04) (dtype, shape, bytes) per storage autograd saves for backward under autocast (deduped)."""
    import torch

    from labkit.gpt.torch_model import torch_loss

    storages: dict[int, tuple[str, tuple[int, ...], int]] = {}

    def pack(t: torch.Tensor) -> torch.Tensor:
        s = t.untyped_storage()  # one storage may be saved by several ops: counted once
        storages.setdefault(s.data_ptr(), (str(t.dtype).replace("torch.", ""), tuple(t.shape), s.nbytes()))
        return t

    dev, dt = x.device.type, _torch_dtype(precision)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        with torch.autocast(dev, dtype=dt, enabled=dt != torch.float32):
            torch_loss(model, x, x)
    return list(storages.values())


def saved_bytes_torch(model: Any, precision: str, x: Any) -> int:
    """(Lab 04) Bytes autograd saves for backward under autocast (saved_tensors_hooks, deduped)."""
    return int(sum(b for _, _, b in saved_tensors_torch(model, precision, x)))


def saved_breakdown(framework: str, cfg: GPTConfig, precision: str, x: np.ndarray, flat: dict[str, np.ndarray],
                    device: Any = "cpu") -> list[dict[str, Any]]:
    """(Lab 04) What one step keeps for backward, by dtype and shape: rows {dtype, shape, count, MB}, largest first.

    The same count as the run's ``memory["saved_for_backward"]`` (JAX: the vjp's residuals; torch: the
    storages autograd saved), for ``x`` (batch, seq) at the training shape.
    """
    if framework == "jax":
        import importlib

        items = importlib.import_module(_LAZY["saved_tensors_jax"]).saved_tensors_jax(cfg, precision, x, flat)
    elif framework == "torch":
        import torch

        from labkit.gpt.convert import load_flat_params
        from labkit.gpt.data import to_torch
        from labkit.gpt.torch_model import TorchGPT

        dev = torch.device(device)
        items = saved_tensors_torch(load_flat_params(TorchGPT(cfg), flat).to(dev), precision, to_torch(x, dev))
    else:
        raise ValueError(f"framework must be 'jax' or 'torch', got {framework!r}")
    groups: dict[tuple[str, tuple[int, ...]], list[int]] = {}
    for dtype, shape, nbytes in items:
        groups.setdefault((dtype, shape), []).append(nbytes)
    rows = [{"dtype": d, "shape": sh, "count": len(b), "MB": sum(b) / 1e6} for (d, sh), b in groups.items()]
    return sorted(rows, key=lambda r: -r["MB"])


def train_torch(cfg: GPTConfig, precision: str, tokens: np.ndarray, tc: TrainConfig,
                flat: dict[str, np.ndarray] | None = None, device: Any = "cpu") -> TrainResult:
    """(Lab 04) Train TorchGPT: fp32 master weights, autocast(``precision``), GradScaler for fp16."""
    import torch

    from labkit.gpt.data import to_torch
    from labkit.gpt.convert import load_flat_params
    from labkit.gpt.torch_model import TorchGPT, torch_flat_params

    flat = init_flat(cfg, tc.seed) if flat is None else flat
    dev = torch.device(device)
    base = _cuda_baseline(dev)  # bytes already allocated before this run: not its own
    model = load_flat_params(TorchGPT(cfg), flat).to(dev)  # fp32 master weights
    opt = torch.optim.AdamW(model.parameters(), lr=tc.lr, betas=(0.9, 0.95), eps=1e-8,
                            weight_decay=0.0)
    dt = _torch_dtype(precision)
    scaler = ls.torch_grad_scaler(tc.loss_scale, dev) if precision == "fp16_scaled" else None
    batches = Batcher(tokens, tc.batch, tc.seq, seed=tc.seed)
    x0 = to_torch(next(Batcher(tokens, tc.batch, tc.seq, seed=tc.seed))[0], dev)
    with fp32_matmul_context("torch", tc.fp32_matmul, dev):  # "default": leave the runtime's default
        losses, times, scales, skipped = _torch_loop(model, opt, scaler, dt, batches, dev, tc)
    # The training loop's peak, read before saved_bytes_torch runs one more forward to count.
    peak = int(torch.cuda.max_memory_allocated(dev)) - base if dev.type == "cuda" else None
    memory = {**memory_model(cfg), "saved_for_backward": saved_bytes_torch(model, precision, x0)}
    if peak is not None:
        memory["cuda_peak_allocated"] = peak
    kept = torch_flat_params(model) if tc.keep_params else None
    return TrainResult("torch", precision, losses, times, scales, int(skipped), memory, params=kept,
                       state=master.torch_state(model, opt))


def _cuda_baseline(dev: Any) -> int:
    """Bytes allocated on a CUDA ``dev`` before a run, its peak counter reset; 0 elsewhere (Lab 04).

    An earlier run's model and AdamW state can outlive it in a reference cycle until the garbage
    collector runs, and CUDA's peak counter is per process: on an H100 the torch fp32, TF32 and bf16
    runs in one cell read 10.7, 16.2 and 19.9 GB for the same model. Collecting first and counting
    from what is still allocated makes each run's peak its own.
    """
    import gc

    import torch

    if dev.type != "cuda":
        return 0
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats(dev)
    return int(torch.cuda.memory_allocated(dev))


def _torch_loop(model: Any, opt: Any, scaler: Any, dt: Any, batches: Batcher, dev: Any,
                tc: TrainConfig) -> tuple[list[float], list[float], list[float], int]:
    import torch

    from labkit.gpt.data import to_torch
    from labkit.runtime.device import torch_sync
    from labkit.gpt.torch_model import torch_loss

    sync = torch_sync(dev)
    losses, times, scales, skipped = [], [], [], 0
    params = [p for g in opt.param_groups for p in g["params"]]
    for i in range(tc.steps):
        xn, yn = next(batches)
        x, y = to_torch(xn, dev), to_torch(yn, dev)
        scales.append(scaler.get_scale() if scaler else 1.0)
        sync()
        t0 = time.perf_counter()
        with torch.autocast(dev.type, dtype=dt, enabled=dt != torch.float32):
            loss = torch_loss(model, x, y)  # logits in dt; cross-entropy in fp32
        opt.zero_grad(set_to_none=True)
        for g in opt.param_groups:  # warm-up counts applied updates, as optax's schedule does
            g["lr"] = lr_at(tc, i - skipped)
        if scaler is not None:
            scaler.scale(loss).backward()  # backward of loss * scale
            scaler.unscale_(opt)  # divide by the scale *before* clipping: the norm must be the true one
            if tc.clip_norm is not None:
                torch.nn.utils.clip_grad_norm_(params, tc.clip_norm)
            scaler.step(opt)  # checks the unscaled grads for inf/NaN, skips the step if any
            scaler.update()
            skipped += scaler.get_scale() < scales[-1]  # a backoff means a skipped step
        else:
            loss.backward()
            if tc.clip_norm is not None:
                torch.nn.utils.clip_grad_norm_(params, tc.clip_norm)
            opt.step()
        loss_v = float(loss.detach())  # .item() waits for the device
        sync()
        if i >= tc.timed_from:
            times.append(time.perf_counter() - t0)
        losses.append(loss_v)
    return losses, times, scales, int(skipped)


def train(framework: str, cfg: GPTConfig, precision: str, tokens: np.ndarray, tc: TrainConfig,
          flat: dict[str, np.ndarray] | None = None, device: Any = "cpu") -> TrainResult:
    """(Lab 04) One run in ``framework`` ("jax" or "torch"; ``device`` is torch's), same recipe in both."""
    if framework == "jax":
        import importlib  # by name, as __getattr__ below: train_jax imports this module

        return importlib.import_module(_LAZY["train_jax"]).train_jax(cfg, precision, tokens, tc, flat)
    if framework == "torch":
        return train_torch(cfg, precision, tokens, tc, flat, device=device)
    raise ValueError(f"framework must be 'jax' or 'torch', got {framework!r}")


# JAX half, lazily: `precision_train.train_jax` imports JAX only when used (as labkit.gpt.config does).
_LAZY = {"train_jax": "labkit.precision.train_jax", "saved_bytes_jax": "labkit.precision.train_jax",
         "saved_tensors_jax": "labkit.precision.train_jax"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'labkit.precision.train' has no attribute {name!r}")
