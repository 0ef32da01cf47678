"""Lab 02's pictures: timing mistakes, MFU sweeps, where the step's time goes, and the training curves.

One function per picture; each takes the numbers its cell measured and returns the Figure. The
cell keeps the assertions of what the picture shows.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from labkit.measure.breakdown import BY_LAUNCHER, OpBreakdown
from labkit.measure.mfu import Utilization
from labkit.measure.steptime import no_winner, spread_tolerance


FRAMEWORK_COLORS = {"jax": "tab:blue", "torch": "tab:orange"}  # one colour per framework in every Lab 02 picture
NEAR = 0.2  # a reported time within ±20% of the correct one is drawn grey: noise-sized, not a mistake's effect


def plot_timing_mistakes(reported: Mapping[tuple[str, str], float], step_s: Mapping[str, float],
                         near: float | Mapping[str, float] = NEAR) -> Figure:
    """Reported seconds per step for each (framework, way of timing), each framework's true step dotted (Lab 02)."""
    # near: the share within which a reported time counts as noise (grey): one figure for every bar, or one per
    # framework (Lab 02: steptime.spread_tolerance of each real step, the band its printed verdicts use too)
    fig, ax = plt.subplots(figsize=(8.5, 3.8))
    labels = [f"{fw}: {how}" for fw, how in reported]
    ratio = [s / step_s[fw] for (fw, _), s in reported.items()]  # x the correct step
    band = dict(near) if isinstance(near, Mapping) else dict.fromkeys(step_s, near)  # framework -> tolerance
    tols = [band[fw] for fw, _ in reported]
    near = [abs(r - 1) <= t for r, t in zip(ratio, tols)]
    correct = [how.startswith("correct") for _, how in reported]
    colors = [FRAMEWORK_COLORS.get(fw, "tab:purple") if c or not n else "lightgray"
              for (fw, _), n, c in zip(reported, near, correct)]
    bars = ax.barh(labels, [s * 1e3 for s in reported.values()], color=colors, edgecolor="k", linewidth=0.4)  # ms
    for bar, c in zip(bars, correct):
        bar.set_hatch("//" if c else "")  # the correct measurement, hatched
    ax.bar_label(bars, [f"x{r:.2g}" for r in ratio], fontsize=7, padding=2)
    ax.set_xscale("log")
    ax.invert_yaxis()
    ax.margins(x=0.15)  # room for the "x correct" labels
    ax.set_xlabel("reported time per step (ms, log scale); label: x the correct step")
    wrong = [(r, t) for r, t, c in zip(ratio, tols, correct) if not c]
    fast = sum(r < 1 - t for r, t in wrong)
    slow = sum(r > 1 + t for r, t in wrong)
    ok = len(wrong) - fast - slow
    within = (f"±{next(iter(band.values())):.0%}" if len(set(band.values())) == 1 else
              "each step's noise, " + ", ".join(f"{fw} ±{t:.0%}" for fw, t in band.items()))
    ax.set_title(f"Timing mistakes: {fast} report too fast, {slow} too slow, {ok} within {within} (grey)",
                 fontsize=10)
    for fw in step_s:  # each framework's correct step, in its colour
        ax.axvline(step_s[fw] * 1e3, color=FRAMEWORK_COLORS.get(fw, "tab:purple"), lw=1, ls=":",
                   label=f"{fw}: correct step ({step_s[fw] * 1e3:.3g} ms)")
    # Below the axes: inside, it covered the last bar's "x correct" label.
    ax.legend(fontsize=7, ncol=len(step_s), loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False)
    fig.tight_layout()
    return fig


def _ms(u: Utilization) -> str:
    return f"{u.step_time_s * 1e3:.3g} ms"


def _bars(ax: Axes, labels: Sequence[str], us: Sequence[Utilization], color: Any) -> None:
    """MFU bars, each labelled with the step time and tokens/s it came from."""
    bars = ax.bar(list(labels), [u.value * 100 for u in us], color=color)
    tok = lambda u: f"\n{u.tokens_per_s / 1e3:,.3g}k tok/s" if u.tokens_per_s else ""  # noqa: E731
    ax.bar_label(bars, [f"{_ms(u)}/step{tok(u)}" for u in us], fontsize=7, padding=2)
    ax.margins(y=0.25)  # room for the labels


def plot_mfu_sweeps(batches: Sequence[int], sweep_batch: Mapping[str, Sequence[Utilization]], seqs: Sequence[int],
                    sweep_seq: Mapping[str, Sequence[Utilization]], precision: Mapping[tuple[str, str], Utilization],
                    compiled: Mapping[str, Utilization], peak_note: str, suptitle: str,
                    precision_note: str = "vs the peak of that dtype") -> Figure:
    """MFU against batch and sequence length, per precision and per compilation mode, step times beside (Lab 02)."""
    # precision_note: what the precision bars are against (Lab 02 on a CPU: each framework's own best matmul)
    fig, axs = plt.subplots(2, 2, figsize=(11, 7.5))
    for fw, m in {"jax": "o-", "torch": "s--"}.items():
        if fw not in sweep_batch:  # torch on a TPU host's CPU (no torch-xla): the lab leaves it out
            continue
        for ax, xs, pts in ((axs[0, 0], batches, sweep_batch[fw]), (axs[0, 1], seqs, sweep_seq[fw])):
            ax.plot(xs, [u.value * 100 for u in pts], m, label=fw, color=FRAMEWORK_COLORS[fw])
            for i, (x, u) in enumerate(zip(xs, pts)):  # the step time each MFU came from
                last = i == len(xs) - 1  # the last point's label goes left, inside the frame
                ax.annotate(_ms(u), (x, u.value * 100), textcoords="offset points", xytext=(-4 if last else 4, 4),
                            ha="right" if last else "left", fontsize=7)
    gain = {fw: s[-1].value / s[0].value for fw, s in sweep_batch.items()}
    seq_gain = {fw: s[-1].value / s[0].value for fw, s in sweep_seq.items()}
    axs[0, 0].set(xscale="log", xlabel="batch size (sequences per step)", ylabel=f"MFU % ({peak_note})",
                  title=("Bigger batches amortize overhead: MFU " if min(gain.values()) > 1 else "Batch size: MFU ")
                  + ", ".join(f"x{g:.2f} ({fw})" for fw, g in gain.items()))
    axs[0, 1].set(xscale="log", xlabel="sequence length (tokens)", ylabel=f"MFU % ({peak_note})",
                  title="Longer sequences: MFU " + ", ".join(f"x{g:.1f} ({fw})" for fw, g in seq_gain.items())
                  + f"\n(and x{seqs[-1] / seqs[0]:.0f} tokens per step)")
    for ax, xs in ((axs[0, 0], batches), (axs[0, 1], seqs)):
        ax.margins(y=0.12)  # room above the top point's label
        ax.minorticks_off()
        ax.set_xticks(xs, [str(v) for v in xs])
    _bars(axs[1, 0], [f"{fw}\n{dt}" for fw, dt in precision], list(precision.values()),
          [FRAMEWORK_COLORS.get(fw, "tab:purple") for fw, _ in precision])  # one colour per framework
    dts = list(dict.fromkeys(dt for _, dt in precision))
    if len(dts) == 2:  # the verdict is the step time: each MFU is against its own dtype's peak
        def faster(fw: str) -> str:  # which dtype's step is shorter, and by how much; a gap in the noise: no winner
            ua, ub = (precision[(fw, dt)] for dt in dts)
            a, b = ua.step_time_s, ub.step_time_s  # the lab's own rule (steptime.no_winner), so plot and print agree
            apart = f"x{max(a, b) / min(a, b):.2f}"
            if no_winner(ua, ub):
                return f"no winner, {apart} within ±{spread_tolerance(ua.spread or 0.0, ub.spread or 0.0):.0%} ({fw})"
            return f"{dts[0] if a < b else dts[1]} {apart} ({fw})"
        verdicts = [faster(fw) for fw in dict.fromkeys(fw for fw, _ in precision)]
        prec_title = "Faster step: " + ", ".join(verdicts)
        if len(prec_title) > 60:  # wider than the panel: one framework per line
            prec_title = "Faster step: " + ",\n".join(verdicts)
    else:
        prec_title = f"Precision: {dts[0]} only on this chip"
    axs[1, 0].set(ylabel=f"MFU % ({precision_note})", title=prec_title)
    # One colour per framework: "jax jit" and "torch eager" are two frameworks, not two modes of one.
    _bars(axs[1, 1], list(compiled), list(compiled.values()),
          [FRAMEWORK_COLORS.get(k.split()[0].split(".")[0], "tab:purple") for k in compiled])
    if "torch.compile" in compiled:
        x = compiled["torch eager"].step_time_s / compiled["torch.compile"].step_time_s
        cmp_title = f"Compilation: torch.compile step x{max(x, 1 / x):.2f} {'faster' if x > 1 else 'slower'} than eager"
    elif "torch eager" in compiled:
        cmp_title = "jax jit vs torch eager: two frameworks, not two modes\n(torch.compile vs eager: full profile)"
    else:
        cmp_title = "jax jit only (torch is not on this chip)"
    axs[1, 1].set(ylabel=f"MFU % ({peak_note})", title=cmp_title)
    for ax in axs.flat:
        ax.grid(alpha=0.3)
    axs[0, 0].legend()
    axs[0, 1].legend()
    fig.suptitle(suptitle)
    fig.tight_layout()
    return fig


def plot_training_curves(losses_jax: Sequence[float], losses_torch: Sequence[float] | None, val: float,
                         torch_label: str, vocab_size: int = 256, val_of: str = "torch") -> Figure:
    """Loss per step of the GPT trained in JAX and PyTorch (or JAX alone), and a validation loss (Lab 02)."""
    # val_of: the framework whose model gave `val` (Lab 02: torch's where torch trains on the chip, else JAX's)
    fig, ax = plt.subplots(figsize=(7, 3.8))
    ax.plot(losses_jax, label="JAX (Flax NNX, jit)", lw=1)
    if losses_torch is not None:
        ax.plot(losses_torch, label=f"PyTorch ({torch_label})", lw=1, ls="--")
    uniform = np.log(vocab_size)  # nats: the loss of a uniform guess over the vocabulary
    ax.axhline(uniform, color="grey", ls=":", lw=0.8)
    ax.annotate(f"uniform guess ln {vocab_size}", (0, uniform), textcoords="offset points", xytext=(5, 3), fontsize=8)
    ax.plot([len(losses_jax) - 1], [val], "k*", ms=10, label=f"validation ({val_of}): {val:.2f}")
    end = float(np.mean(losses_jax[-10:]))
    ax.set(xlabel="training step", ylabel="cross-entropy (nats per byte)",
           title=(f"Same init, same data: both frameworks learn ({losses_jax[0]:.1f} -> {end:.1f} nats)"
                  if losses_torch is not None else f"JAX learns ({losses_jax[0]:.1f} -> {end:.1f} nats)"))
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def plot_step_time_breakdown(ops: OpBreakdown | None, phases: Mapping[str, Mapping[str, float]],
                             flop_share: float | None = None) -> Figure:
    """Step time per op category (torch profiler) and per phase, JAX vs PyTorch; the phases alone without ops (Lab 02)."""
    # ops: labkit.measure.breakdown.torch_op_breakdown's result (GPU: kernels by launching op; CPU: self time),
    # None where the profile held no kernels (NoKernelRecords) or torch is not on the chip; phases: {framework:
    # {"forward"|"backward"|"optimizer": seconds per step}}, at least one framework (the title reads torch's where
    # it is there, else JAX's). flop_share: matmul FLOPs / all-op FLOPs (XLA's count), or None.
    if not phases:
        raise ValueError("no phases to draw: pass {framework: {'forward', 'backward', 'optimizer'}} seconds per step")
    if ops is None:  # nothing to draw on the left: no zero-width bars that read as "no time"
        fig, ax2 = plt.subplots(figsize=(5, 3.8))
    else:
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 3.8), gridspec_kw={"width_ratios": [3, 2]})
        _draw_ops(ax1, ops, flop_share)
    left = np.zeros(len(phases))  # ms, where each framework's next stacked segment starts
    for ph, c in zip(("forward", "backward", "optimizer"), ("tab:green", "tab:orange", "tab:gray")):
        # A phase found by subtraction (JAX: step - forward+backward) can come out below 0 in noise: draw it as 0.
        v = np.array([max(phases[fw][ph], 0) * 1e3 for fw in phases])  # ms
        ax2.barh(list(phases), v, left=left, color=c, label=ph)
        left += v
    ax2.set_xlabel("time per step (ms)")
    fw = "torch" if "torch" in phases else next(iter(phases))
    ratio = phases[fw]["backward"] / phases[fw]["forward"]
    ax2.set_title(f"backward = {ratio:.1f}x forward" + ("" if fw == "torch" else f" ({fw})") + " (FLOPs: 2x)",
                  fontsize=11)  # smaller: clear of the left title
    # Below the axes: inside, the legend covered the top bar.
    ax2.legend(fontsize=8, ncol=3, loc="upper center", bbox_to_anchor=(0.5, -0.2), frameon=False)
    fig.tight_layout()
    return fig


def _draw_ops(ax: Axes, ops: OpBreakdown, flop_share: float | None) -> None:
    """The left panel: ms per step per op category, largest on top."""
    ax.barh([r["category"] for r in ops.rows], [r["ms per step"] for r in ops.rows], color="tab:blue")
    ax.invert_yaxis()
    gpu = ops.source == BY_LAUNCHER
    ax.set_xlabel(("device time per step (ms, kernels by launching op)" if gpu else "self CPU time per step (ms)")
                  + (f"; {ops.by_kernel_name:.0%} by kernel name" if ops.by_kernel_name else ""))
    flops = ("most of the FLOPs" if flop_share is None
             else f"{flop_share:.0%} of the FLOPs\n(XLA's count of the same model)")
    ax.set_title(f"torch: matmul + attention do {flops}, {ops.matmul_share:.0%} of the time", fontsize=11)
