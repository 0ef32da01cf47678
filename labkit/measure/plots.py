"""Lab 02's pictures: timing mistakes, MFU sweeps, where the step's time goes, and the training curves.

One function per picture; each takes the numbers its cell measured and returns the Figure. The
cell keeps the assertions of what the picture shows.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure


def plot_timing_mistakes(reported: Mapping[tuple[str, str], float], step_s: Mapping[str, float]) -> Figure:
    """Reported seconds per step for each (framework, way of timing), true step dotted (Lab 02)."""
    fig, ax = plt.subplots(figsize=(8, 3.6))
    labels = [f"{fw}: {how}" for fw, how in reported]
    colors = ["tab:green" if how.startswith("correct") else "tab:red" for _, how in reported]
    ax.barh(labels, [s * 1e3 for s in reported.values()], color=colors)  # ms
    ax.set_xscale("log")
    ax.invert_yaxis()
    ax.set_xlabel("reported time per step (ms, log scale)")
    fast = [how for (fw, how), s in reported.items() if s < 0.5 * step_s[fw]]
    slow = [how for (fw, how), s in reported.items() if s > 1.5 * step_s[fw]]
    ax.set_title(f"Timing mistakes: {len(fast)} report too fast, {len(slow)} too slow (dotted: the correct step)")
    for fw in step_s:
        ax.axvline(step_s[fw] * 1e3, color="k", lw=0.6, ls=":")
    fig.tight_layout()
    return fig


def plot_mfu_sweeps(batches: Sequence[int], sweep_batch: Mapping[str, Sequence[float]], seqs: Sequence[int],
                    sweep_seq: Mapping[str, Sequence[float]], precision: Mapping[tuple[str, str], float],
                    compiled: Mapping[str, float], peak_note: str, suptitle: str) -> Figure:
    """MFU against batch and sequence length, per precision and per compilation mode (Lab 02)."""
    fig, axs = plt.subplots(2, 2, figsize=(10, 7))
    for fw, m in {"jax": "o-", "torch": "s--"}.items():
        axs[0, 0].plot(batches, [v * 100 for v in sweep_batch[fw]], m, label=fw)
        axs[0, 1].plot(seqs, [v * 100 for v in sweep_seq[fw]], m, label=fw)
    gain = {fw: s[-1] / s[0] for fw, s in sweep_batch.items()}
    seq_gain = {fw: s[-1] / s[0] for fw, s in sweep_seq.items()}
    axs[0, 0].set(xscale="log", xlabel="batch size (sequences per step)", ylabel=f"MFU % ({peak_note})",
                  title=f"Bigger batches amortize overhead: MFU x{min(gain.values()):.1f} or more")
    axs[0, 1].set(xscale="log", xlabel="sequence length (tokens)", ylabel=f"MFU % ({peak_note})",
                  title="Longer sequences: MFU " + ", ".join(f"x{g:.1f} ({fw})" for fw, g in seq_gain.items()))
    for ax, xs in ((axs[0, 0], batches), (axs[0, 1], seqs)):
        ax.minorticks_off()
        ax.set_xticks(xs, [str(v) for v in xs])
    axs[1, 0].bar([f"{fw}\n{dt}" for fw, dt in precision], [v * 100 for v in precision.values()],
                  color=["tab:blue", "tab:orange"] * 2)
    axs[1, 0].set(ylabel="MFU % (vs the peak of that dtype)", title="Precision: each dtype against its own peak")
    axs[1, 1].bar(list(compiled), [v * 100 for v in compiled.values()], color="tab:purple")
    if "torch.compile" in compiled:
        cmp_title = f"Compilation: torch.compile x{compiled['torch.compile'] / compiled['torch eager']:.1f} vs eager"
    else:
        cmp_title = "jit (XLA) vs eager; torch.compile: full profile"
    axs[1, 1].set(ylabel=f"MFU % ({peak_note})", title=cmp_title)
    for ax in axs.flat:
        ax.grid(alpha=0.3)
    axs[0, 0].legend()
    axs[0, 1].legend()
    fig.suptitle(suptitle)
    fig.tight_layout()
    return fig


def plot_training_curves(losses_jax: Sequence[float], losses_torch: Sequence[float], val: float,
                         torch_label: str, vocab_size: int = 256) -> Figure:
    """Loss per step of the same GPT trained in JAX and PyTorch, and torch's validation loss (Lab 02)."""
    fig, ax = plt.subplots(figsize=(7, 3.8))
    ax.plot(losses_jax, label="JAX (Flax NNX, jit)", lw=1)
    ax.plot(losses_torch, label=f"PyTorch ({torch_label})", lw=1, ls="--")
    uniform = np.log(vocab_size)  # nats: the loss of a uniform guess over the vocabulary
    ax.axhline(uniform, color="grey", ls=":", lw=0.8)
    ax.annotate(f"uniform guess ln {vocab_size}", (0, uniform), textcoords="offset points", xytext=(5, 3), fontsize=8)
    ax.plot([len(losses_torch) - 1], [val], "k*", ms=10, label=f"validation (torch): {val:.2f}")
    end = float(np.mean(losses_jax[-10:]))
    ax.set(xlabel="training step", ylabel="cross-entropy (nats per byte)",
           title=f"Same init, same data: both frameworks learn ({losses_jax[0]:.1f} -> {end:.1f} nats)")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def plot_step_time_breakdown(ops: Sequence[Mapping[str, float | str]], phases: Mapping[str, Mapping[str, float]],
                             matmul_categories: Sequence[str] = ("matmul", "attention (SDPA)")) -> Figure:
    """Step time per op category (torch profiler) and per phase, JAX vs PyTorch (Lab 02)."""
    # ops: rows of mfu.torch_op_breakdown, {"category", "ms per step", "share" (fraction of the step)};
    # phases: {framework: {"forward"|"backward"|"optimizer": seconds per step}}; phases["torch"] is required.
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.8), gridspec_kw={"width_ratios": [3, 2]})
    ax1.barh([r["category"] for r in ops], [r["ms per step"] for r in ops], color="tab:blue")
    ax1.invert_yaxis()
    ax1.set_xlabel("self time per step (ms)")
    mm_share = sum(r["share"] for r in ops if r["category"] in matmul_categories)  # fraction of the step's time
    ax1.set_title(f"torch: matmul + attention do all the FLOPs, {mm_share:.0%} of the time")
    left = np.zeros(len(phases))  # ms, where each framework's next stacked segment starts
    for ph, c in zip(("forward", "backward", "optimizer"), ("tab:green", "tab:orange", "tab:gray")):
        # A phase found by subtraction (JAX: step - forward+backward) can come out below 0 in noise: draw it as 0.
        v = np.array([max(phases[fw][ph], 0) * 1e3 for fw in phases])  # ms
        ax2.barh(list(phases), v, left=left, color=c, label=ph)
        left += v
    ax2.set_xlabel("time per step (ms)")
    ratio = phases["torch"]["backward"] / phases["torch"]["forward"]
    ax2.set_title(f"backward = {ratio:.1f}x forward (FLOPs: 2x)")
    ax2.legend(fontsize=8)
    fig.tight_layout()
    return fig
