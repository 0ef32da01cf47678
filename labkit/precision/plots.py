"""Lab 04's pictures: number lines, accumulation error, loss scaling, training curves, speed and memory.

One function per picture; each takes the numbers its cell computed and returns the Figure. The
cell keeps the assertions of what the picture shows.
"""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from labkit.precision import formats, loss_scale, noise, speed

# fp32 and TF32 share fp32's range; the rest are the formats Lab 04 compares, in bits order.
FORMAT_STYLES = {"fp32": "-", "tf32": "--", "bf16": "-", "fp16": "-", "fp8_e4m3": "-", "fp8_e5m2": "-"}
PRECISION_COLORS = {"fp32": "C0", "bf16": "C1", "fp16_scaled": "C2", "tf32": "C3", "fp32_default": "C4"}


def plot_number_lines_and_gaps(styles: Mapping[str, str] = FORMAT_STYLES) -> Figure:
    """fp8's number lines, and every format's relative gap between neighbours against |x| (Lab 04)."""
    fig, (top, bot) = plt.subplots(2, 1, figsize=(8, 6.5), gridspec_kw={"height_ratios": [1, 2.4]})
    for y, name in enumerate(("fp8_e4m3", "fp8_e5m2")):
        v = formats.representable(name)[1:]  # every positive value (skip 0 on a log axis)
        top.vlines(v, y - 0.35, y + 0.35, lw=0.8, color=f"C{4 + y}")
    top.set_xscale("log"); top.set_yticks([0, 1], ["e4m3", "e5m2"]); top.set_xlim(1e-6, 1e5)
    top.set_xlabel("value (one tick per representable number)")
    e4, e5 = formats.format_info("fp8_e4m3"), formats.format_info("fp8_e5m2")
    top.set_title(f"fp8 number lines: {2 ** e4.mantissa_bits} or {2 ** e5.mantissa_bits} values per power of two, "
                  f"nothing beyond {e4.max:g} / {e5.max:g}")
    for name in styles:
        f = formats.format_info(name)
        # relative gap at each power of two from the smallest subnormal to the max (a sawtooth between)
        xs = 2.0 ** np.arange(math.log2(f.smallest_subnormal), math.floor(math.log2(f.max)) + 1)
        bot.loglog(xs, formats.spacing(name, xs) / xs, styles[name], lw=2,
                   label=f"{name}: eps 2^-{f.mantissa_bits}, max {f.max:.3g}")
    bot.annotate("subnormals: precision\nruns out", xy=(2.0**-20, 2.0**-4), xytext=(1e-30, 1e-5), fontsize=8,
                 arrowprops={"arrowstyle": "->"})
    bot.set_xlabel("value |x|  (each line ends at the format's max)")
    bot.set_ylabel("relative gap to the next value")
    bf, fp = formats.format_info("bf16"), formats.format_info("fp16")
    bot.set_title(f"bf16 spans fp32's range with 2^-{bf.mantissa_bits} steps; fp16 is finer but ends at {fp.max:g}")
    # in the empty band between tf32's 1e-3 and fp32's 1e-7 lines, clear of every line's right end
    bot.legend(fontsize=7, loc="center right", bbox_to_anchor=(1.0, 0.3))
    fig.tight_layout()
    return fig


def plot_accumulation_error(acc: Sequence[Mapping[str, Any]]) -> Figure:
    """Relative error of a dot product against its length n, per accumulation method (Lab 04)."""
    methods = list(dict.fromkeys(r["method"] for r in acc))
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for i, m in enumerate(methods):
        pts = [r for r in acc if r["method"] == m]
        style = {"marker": "o", "ms": 9, "mfc": "none", "ls": "-"} if "jax" in m else {"marker": "s", "ms": 4, "ls": "--"}
        ax.loglog([r["n"] for r in pts], [max(r["rel error"], 1e-10) for r in pts], label=m, color=f"C{i}", **style)
    ax.axhline(2.0**-8, color="k", ls=":", lw=1, label="bf16 unit roundoff 2^-8 (one rounding)")
    ax.set_xlabel("dot-product length n")
    ax.set_ylabel("mean relative error vs float64")
    worst = {m: max(r["rel error"] for r in acc if r["method"] == m) for m in methods}
    bf16_sum = max((m for m in methods if "sequential" in m), key=worst.get, default=None)
    fp32_acc = [worst[m] for m in methods if "fp32" in m]
    if bf16_sum and fp32_acc:
        ax.set_title(f"Accumulate in fp32: a bf16 running sum reaches {worst[bf16_sum]:.0%} error, "
                     f"fp32 accumulators at most {max(fp32_acc):.1e}")
    else:
        ax.set_title("Relative error of a dot product against its length")
    ax.legend(fontsize=7, loc="center", bbox_to_anchor=(0.5, 0.36),
              title="JAX and torch overlap where they compute the same thing", title_fontsize=7)
    return fig


def plot_loss_scale_window(sweep: Sequence[Mapping[str, Any]]) -> Figure:
    """fp16 gradient error and underflow against the loss scale, overflowing scales shaded (Lab 04)."""
    fig, ax = plt.subplots(figsize=(7, 3.8))
    ok = [r for r in sweep if r["finite"]]
    log2s = [math.log2(r["loss scale"]) for r in ok]
    ax.semilogy(log2s, [r["rel error vs fp32"] for r in ok], "o-", label="rel. error of fp16 gradients")
    ax.semilogy(log2s, [max(r["zeroed (underflow) fraction"], 1e-6) for r in ok], "s--",
                label="fraction flushed to 0 (floored at 1e-6)")
    for r in sweep:
        if not r["finite"]:
            ax.axvspan(math.log2(r["loss scale"]) - 2, math.log2(r["loss scale"]) + 2, color="r", alpha=0.15)
    ax.plot([], [], color="r", alpha=0.3, lw=8, label="overflow: inf gradients (step skipped)")
    ax.set_xlabel("log2(loss scale)")
    ax.set_ylabel("relative error / fraction")
    best = [math.log2(s) for s in loss_scale.best_scales(list(sweep))]
    span = f"2^{best[0]:.0f}" if len(best) == 1 else f"2^{best[0]:.0f}-2^{best[-1]:.0f}"
    where = f"; best here {span} (within {loss_scale.BEST_TOL:.0%} of the lowest error)" if best else ""
    ax.set_title(f"Loss scaling: too small underflows, too large overflows{where}")
    ax.legend(fontsize=8)
    return fig


def plot_dynamic_loss_scale(good: Sequence[bool], torch_scales: Sequence[float],
                            jax_scales: Sequence[float], growth_interval: int,
                            init_scale: float | None = None) -> Figure:
    """The dynamic loss scale step by step in torch's GradScaler and labkit's JAX rule (Lab 04).

    ``*_scales``: the scale after each step's update (what ``get_scale()`` returns then). With
    ``init_scale`` the plot shows the scale each step *used* -- the previous step's update, the first
    step ``init_scale`` -- and marks an overflow at the scale that overflowed, not at the halved one.
    """
    fig, ax = plt.subplots(figsize=(7, 3))
    steps = np.arange(1, len(good) + 1)
    bad = ~np.asarray(good, bool)
    used = init_scale is not None
    shown = {name: np.log2([init_scale, *s[:-1]] if used else s) for name, s in
             (("torch", list(torch_scales)), ("jax", list(jax_scales)))}
    where = "post" if not used else "mid"  # used: one value per step, centred on it; after: held until the next
    ax.step(steps, shown["torch"], where=where, lw=3, alpha=0.5, label="torch.amp.GradScaler")
    ax.step(steps, shown["jax"], where=where, ls="--", color="k", label="labkit.precision.loss_scale (JAX)")
    ax.scatter(steps[bad], shown["jax"][bad], color="r", zorder=3,
               label="overflow at this scale: skipped" if used else "overflow: skipped (scale after the backoff)")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # the scale is always a power of two
    ax.set_xlabel("step")
    ax.set_ylabel("log2(loss scale used)" if used else "log2(scale after the step)")
    agree = "both frameworks" if list(torch_scales) == list(jax_scales) else "the frameworks DISAGREE"
    ax.set_title(f"Dynamic loss scale: halve on overflow, double after {growth_interval} good steps ({agree})")
    ax.legend(fontsize=8)
    return fig


def plot_loss_curves(losses: Mapping[tuple[str, str], Sequence[float]],
                     other_seed: Mapping[str, Sequence[float]],
                     judgements: Mapping[tuple[str, str], "noise.GapJudgement"],
                     levels: Mapping[str, float] | None = None) -> Figure:
    """Loss per step per (framework, precision), and each smoothed gap to fp32 beside the init-to-init floor (Lab 04).

    ``levels``: loss plateaus to draw, {name: nats/token} (``labkit.precision.plateau.levels``).
    """
    fig, (ax, dx) = plt.subplots(1, 2, figsize=(14.5, 4.2))  # wide: the gap panel's legend sits beside it
    j0 = next(iter(judgements.values()))
    start, w = j0.start, j0.window
    for (fw, prec), ls in losses.items():
        steps = np.arange(1, len(ls) + 1)
        style = "-" if fw == "jax" else "--"
        ax.plot(steps, ls, color=PRECISION_COLORS.get(prec), ls=style, label=f"{fw} {prec}", alpha=0.85)
        ref = losses.get((fw, "fp32"))
        if (fw, prec) in judgements and ref is not None:  # same weights and batches as its fp32 twin
            dx.plot(steps, noise.smooth(ls, w) - noise.smooth(ref, w), color=PRECISION_COLORS.get(prec),
                    ls=style, label=f"{fw} {prec} - fp32")
    for i, (fw, ls) in enumerate(other_seed.items()):  # the noise floor: fp32 against fp32, another seed
        steps = np.arange(1, len(ls) + 1)
        ax.plot(steps, ls, color="0.6", ls="-" if fw == "jax" else "--", lw=1, label=f"{fw} fp32, init seed 1")
        dx.plot(steps, noise.smooth(ls, w) - noise.smooth(losses[(fw, "fp32")], w), color="0.6",
                ls="-" if fw == "jax" else "--", lw=1, label=f"{fw} fp32 init 1 - init 0 (the floor)")
    tail = [v for ls in losses.values() for v in ls[start:]] + [v for ls in other_seed.values() for v in ls[start:]]
    lo, hi = min(tail + list((levels or {}).values())), max(tail)  # every plateau line stays in view
    ax.set_ylim(lo - 0.05 * (hi - lo), hi + 0.15 * (hi - lo))  # the warm-up's first losses may run off the top
    for i, (name, v) in enumerate((levels or {}).items()):
        ax.axhline(v, color="k", ls=(0, (1, 2 + 2 * i)), lw=1, label=f"{name} entropy of the corpus {v:.3f}")
    for a in (ax, dx):
        a.axvspan(0.5, start + 0.5, color="0.9", zorder=0)
        a.set_xlabel("step (grey band: warm-up, not judged)")
    ax.set_ylabel("training loss (nats / token)")
    ax.set_title("Training loss per precision and framework")
    ax.legend(fontsize=7, ncol=2, loc="upper right")  # curves fall from the upper left; the plateau lines run low
    dx.axhline(0, color="C0", lw=1)
    floor = min(j.floor for j in judgements.values())  # the strictest framework's floor
    dx.axhspan(-j0.k * floor, j0.k * floor, color="C2", alpha=0.08, zorder=0,
               label=f"±{j0.k:g} x floor ({floor:.3f}, the stricter framework's): the bound on the mean |gap|")
    # symlog: a precision gap of ~1e-4 nats and a floor of ~1e-2 both show; linear only within floor / 100
    dx.set_yscale("symlog", linthresh=floor / 100)
    dx.set_ylabel(f"smoothed loss minus fp32 ({w}-step mean, nats;\nsymlog, linear within ±{floor / 100:.1g})")
    worst_key = max(judgements, key=lambda k: judgements[k].ratio)
    worst = judgements[worst_key]
    verdict = "within noise" if all(j.within_noise for j in judgements.values()) else "NOT within noise"
    beats = [f"{fw} {p}" for (fw, p), j in judgements.items() if j.beats_fp32]
    verdict += f"; {', '.join(beats)} ends below fp32 (mostly one-signed): a leak or an earlier plateau exit" if beats else ""
    dx.axvspan(len(losses[worst_key]) - worst.tail + 0.5, len(losses[worst_key]) + 0.5, color="C1", alpha=0.06,
               zorder=0, label=f"last {worst.tail} steps: the end gap")
    end_by = min(j.end_divisor for j in judgements.values())  # the end gap's yardstick: floor or the inits' end distance
    dx.hlines([-worst.k * end_by, worst.k * end_by], len(losses[worst_key]) - worst.tail + 0.5,
              len(losses[worst_key]) + 0.5, colors="C1", linestyles=":", lw=1.5,
              label=f"±{worst.k:g} x {end_by:.3f} (the larger of the floor and the inits' end distance): the end gap's bound")
    dx.set_title(f"Largest gap: {worst_key[0]} {worst_key[1]} {worst.gap:.2g} nats = {worst.ratio:.2g}x the "
                 f"fp32 seed floor\n({verdict}, k = {worst.k:g})", fontsize=9)  # two lines: the verdict can be long
    # Outside the axes: inside it hid the lower half of the symlog axis, where curves cross below fp32.
    dx.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    fig.tight_layout()
    return fig


def plot_speed_and_memory(step_ms: Mapping[tuple[str, str], float], saved_mb: Mapping[tuple[str, str], float],
                          low: str, platform: str) -> Figure:
    """Median step time and activation memory per (framework, variant), speed-ups vs fp32 and TF32 (Lab 04)."""
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 3.8))
    keys = list(step_ms)
    labels = [f"{fw}\n{p}" for fw, p in keys]
    colors = [PRECISION_COLORS.get(p, "C3") for _, p in keys]
    a1.bar(labels, [step_ms[k] for k in keys], color=colors)
    a1.set_ylabel("median step time (ms)")
    fws = sorted({fw for fw, _ in keys})
    parts = [f"vs {base}: " + ", ".join(f"{fw} {step_ms[(fw, base)] / step_ms[(fw, low)]:.2f}x" for fw in fws
                                        if (fw, base) in step_ms and (fw, low) in step_ms)
             for base in speed.BASES if any((fw, base) in step_ms for fw in fws)]  # fp32_default: TPUs only
    a1.set_title(f"{low} speed-up on {platform.upper()} " + ";\n".join(parts), fontsize=9)  # a line per baseline
    a2.bar(labels, [saved_mb[k] for k in keys], color=colors)
    a2.set_ylabel("activations saved for backward (MB)")
    kept = {fw: saved_mb[(fw, low)] / saved_mb[(fw, "fp32")] for fw in fws if (fw, "fp32") in saved_mb and (fw, low) in saved_mb}
    a2.set_title(f"{low} saves " + " / ".join(f"{v:.2f}x ({fw})" for fw, v in kept.items())
                 + " of fp32's activation bytes; weights stay fp32" if kept else "activations saved for backward",
                 fontsize=9)
    for a in (a1, a2):
        a.tick_params(axis="x", labelsize=8)
    fig.tight_layout()
    return fig


def plot_fp8_recipes(errors: Mapping[str, Mapping[str, float]], acc: Sequence[Mapping[str, Any]],
                     train_gaps: Mapping[str, "noise.GapJudgement"],
                     control: tuple[str, "noise.GapJudgement"] | None = None) -> Figure:
    """fp8 recipes: matmul error per case, narrow vs promoted accumulation against K, training gap in floors (Lab 04).

    ``control``: (label, judgement) of a run the judge must flag, drawn beside the recipes on a log axis.
    """
    fig, (a1, a2, a3) = plt.subplots(1, 3, figsize=(15, 4.2), gridspec_kw={"width_ratios": (1.5, 1, 1)})
    cases, recipes = list(errors), list(next(iter(errors.values())))
    width = 0.8 / len(recipes)
    for i, r in enumerate(recipes):
        a1.bar(np.arange(len(cases)) + i * width, [errors[c][r] for c in cases], width, label=r, color=f"C{i + 3}")
    ticks = [c.replace(" (", "\n(") for c in cases]  # "outlier tokens\n(ordinary rows)": two short lines
    a1.set_xticks(np.arange(len(cases)) + width * (len(recipes) - 1) / 2, ticks, fontsize=8)
    a1.set_ylabel("rel. error of x @ w vs float64")
    out = cases[-1]
    best, worst = min(recipes, key=errors[out].get), max(recipes, key=errors[out].get)
    a1.set_title(f"{out}: {best} {errors[out][best]:.3f} vs {worst} {errors[out][worst]:.3f}", fontsize=9)
    a1.legend(fontsize=8, loc="upper left")  # the outlier cases' tall bars sit on the right
    ks = [r["K"] for r in acc]
    for key, style in (("narrow", "o-"), ("narrow, round-to-nearest", "o:"), ("promoted", "s--"), ("fp32", "^:")):
        if key in acc[0]:
            a2.loglog(ks, [r[key] for r in acc], style, label=key)
    a2.set_xticks(ks, [str(k) for k in ks])
    a2.minorticks_off()
    a2.set_xlabel("K (products summed per output)")
    a2.set_ylabel("rel. error vs float64")
    a2.set_title(f"model, K={ks[-1]}: narrow accumulator {acc[-1]['narrow']:.1e}, promoted {acc[-1]['promoted']:.1e}",
                 fontsize=9)
    a2.legend(fontsize=8)
    names = list(train_gaps)
    a3.bar(names, [train_gaps[n].ratio for n in names], color=[f"C{i + 3}" for i in range(len(names))])
    k = next(iter(train_gaps.values())).k
    a3.axhline(k, color="k", ls=":", label=f"k = {k:g} (within noise below)")
    a3.set_ylabel("training-loss gap to fp32 / fp32 seed floor")
    worst_t = max(names, key=lambda n: train_gaps[n].ratio)
    said = f"MLP training: worst {worst_t} at {train_gaps[worst_t].ratio:.2f}x the floor"
    if control is not None:  # the run the judge must flag: far above the recipes, so a log axis shows both
        label, j = control
        a3.bar([label], [j.ratio], color="0.6", hatch="//", label="negative control (must be flagged)")
        a3.set_yscale("log")
        a3.tick_params(axis="x", labelsize=7)
        said += f";\ncontrol {' '.join(label.split())} {j.ratio:.2g}x"  # the bar's label may break lines
    a3.set_title(said, fontsize=9)
    a3.legend(fontsize=8)
    fig.tight_layout()
    return fig
