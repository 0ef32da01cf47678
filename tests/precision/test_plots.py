"""labkit.precision.plots (Lab 04): each picture carries the numbers it was given, with units."""

from __future__ import annotations

import math

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from labkit.precision import noise, plots  # noqa: E402


@pytest.fixture(autouse=True)
def _close() -> None:
    yield
    plt.close("all")


def test_number_lines_titles_come_from_the_formats() -> None:
    fig = plots.plot_number_lines_and_gaps()
    top, bot = fig.axes
    assert "8 or 4 values per power of two" in top.get_title() and "448 / 57344" in top.get_title()
    assert "2^-7" in bot.get_title() and "65504" in bot.get_title()
    assert len(bot.get_lines()) == len(plots.FORMAT_STYLES)


def test_accumulation_error_title_states_the_measured_errors() -> None:
    acc = [{"method": "sequential bf16 accumulator", "n": n, "rel error": e} for n, e in ((256, 0.01), (65536, 0.93))]
    acc += [{"method": "jax dot, preferred_element_type=fp32", "n": n, "rel error": 2e-7} for n in (256, 65536)]
    ax = plots.plot_accumulation_error(acc).axes[0]
    assert "93%" in ax.get_title() and "at most 2.0e-07" in ax.get_title()
    assert ax.get_xlabel() == "dot-product length n" and "float64" in ax.get_ylabel()
    assert len(ax.get_lines()) == 3  # two methods + the unit-roundoff line


def test_loss_scale_window_names_the_best_scale() -> None:
    sweep = [{"loss scale": 2.0**k, "finite": k < 40, "rel error vs fp32": 10.0 ** -(k / 8 + 1),
              "zeroed (underflow) fraction": max(0.0, 0.5 - k / 40)} for k in (0, 8, 16, 24, 32, 40)]
    ax = plots.plot_loss_scale_window(sweep).axes[0]
    assert "best here 2^32 (within 5%" in ax.get_title() and ax.get_xlabel() == "log2(loss scale)"
    flat = [dict(r, **{"rel error vs fp32": 3.56e-4 if 8 <= math.log2(r["loss scale"]) <= 32 else 1e-2}) for r in sweep]
    flat[3]["rel error vs fp32"] = 3.57e-4  # 2^24: a fourth-digit wobble, not a worse scale
    assert "best here 2^8-2^32 (within 5%" in plots.plot_loss_scale_window(flat).axes[0].get_title()


def test_dynamic_loss_scale_says_whether_frameworks_agree() -> None:
    good = [True, True, False, True]
    same = plots.plot_dynamic_loss_scale(good, [8.0, 8.0, 4.0, 4.0], [8.0, 8.0, 4.0, 4.0], 3).axes[0]
    assert "double after 3 good steps (both frameworks)" in same.get_title()
    differ = plots.plot_dynamic_loss_scale(good, [8.0, 8.0, 4.0, 4.0], [8.0, 8.0, 8.0, 8.0], 3).axes[0]
    assert "DISAGREE" in differ.get_title()


def test_dynamic_loss_scale_marks_an_overflow_at_the_scale_that_overflowed() -> None:
    """Cold read: the red dot sat at the halved scale (2^11) of a step that ran at 2^12, on half-integer ticks."""
    good = [True, True, True, False, True]
    after = [16.0, 16.0, 32.0, 16.0, 16.0]  # grows after step 3, backs off at step 4 (which ran at 2^5)
    ax = plots.plot_dynamic_loss_scale(good, after, after, 3, init_scale=16.0).axes[0]
    dots = ax.collections[0].get_offsets()
    assert dots.tolist() == [[4.0, 5.0]] and ax.get_ylabel() == "log2(loss scale used)"
    assert list(ax.get_lines()[1].get_ydata()) == [4.0, 4.0, 4.0, 5.0, 4.0]  # step 1 used init_scale
    assert all(float(t).is_integer() for t in ax.get_yticks())
    old = plots.plot_dynamic_loss_scale(good, after, after, 3).axes[0]  # without init_scale: after the update
    assert old.collections[0].get_offsets().tolist() == [[4.0, 4.0]] and "after" in old.get_ylabel()


def test_loss_curves_title_is_the_largest_gap_in_floors() -> None:
    steps = 20
    ref = [5.0 - 0.1 * i for i in range(steps)]
    losses = {("jax", "fp32"): ref, ("jax", "bf16"): [v + 0.05 for v in ref], ("torch", "fp32"): ref,
              ("torch", "bf16"): [v + 0.2 for v in ref]}
    other = {"jax": [v + 0.1 for v in ref], "torch": [v - 0.1 for v in ref]}
    judged = {(fw, "bf16"): noise.judge(losses[(fw, "bf16")], ref, other[fw], start=5) for fw in ("jax", "torch")}
    ax, dx = plots.plot_loss_curves(losses, other, judged).axes
    assert "torch bf16 0.2 nats = 2x" in dx.get_title() and "within noise" in dx.get_title()
    assert "nats / token" in ax.get_ylabel() and len(ax.get_lines()) == 6  # 4 runs + 2 other-seed runs
    assert dx.get_yscale() == "symlog" and "symlog, linear within ±0.001" in dx.get_ylabel()  # floor 0.1 / 100
    # Both bounds drawn and named: the whole-run band (k x the stricter floor) and the end gap's (k x its yardstick).
    legend = dx.get_legend()
    assert legend.get_bbox_to_anchor().x0 > dx.get_window_extent().x1  # beside the axes: it hid crossings below 0
    labels = [t.get_text() for t in legend.get_texts()]
    assert "±2 x floor (0.100, the stricter framework's): the bound on the mean |gap|" in labels
    end = [c for c in dx.collections if c.get_label().endswith("the end gap's bound")]
    assert len(end) == 1 and "±2 x 0.100 (the larger of the floor and the inits' end distance)" in end[0].get_label()
    assert sorted(seg[0][1] for seg in end[0].get_segments()) == pytest.approx([-0.2, 0.2])
    judged[("torch", "bf16")] = noise.judge([v + 0.3 for v in ref], ref, other["torch"], start=5)
    assert "NOT within noise" in plots.plot_loss_curves(losses, other, judged).axes[1].get_title()
    assert "below fp32" not in plots.plot_loss_curves(losses, other, judged).axes[1].get_title()
    judged[("jax", "bf16")] = noise.judge([v - 0.15 for v in ref], ref, other["jax"], start=5)  # 1.5 floors below
    assert ("jax bf16 ends below fp32 (mostly one-signed): a leak or an earlier plateau exit"
            in plots.plot_loss_curves(losses, other, judged).axes[1].get_title())


def test_loss_curves_draw_each_plateau_in_view() -> None:
    ref = [5.0 - 0.1 * i for i in range(20)]  # ends at 3.1: above the bigram line below
    losses = {("jax", "fp32"): ref, ("jax", "bf16"): [v + 0.01 for v in ref]}
    judged = {("jax", "bf16"): noise.judge(losses[("jax", "bf16")], ref, [v + 0.1 for v in ref], start=5)}
    ax = plots.plot_loss_curves(losses, {"jax": [v + 0.1 for v in ref]}, judged,
                                levels={"unigram": 3.339, "bigram": 2.476}).axes[0]
    flat = [ln for ln in ax.get_lines() if len(set(ln.get_ydata())) == 1]  # axhline: one y value
    assert sorted(ln.get_ydata()[0] for ln in flat) == [2.476, 3.339] and len(ax.get_lines()) == 5
    assert {ln.get_label() for ln in flat} == {"unigram entropy of the corpus 3.339", "bigram entropy of the corpus 2.476"}
    assert ax.get_ylim()[0] < 2.476  # a level below every loss is still drawn inside the axes


def test_speed_and_memory_ratios_come_from_the_inputs() -> None:
    ms = {("jax", "fp32"): 10.0, ("jax", "bf16"): 4.0, ("torch", "fp32"): 9.0, ("torch", "bf16"): 3.0}
    mb = {("jax", "fp32"): 8.0, ("jax", "bf16"): 4.0, ("torch", "fp32"): 9.0, ("torch", "bf16"): 3.0}
    a1, a2 = plots.plot_speed_and_memory(ms, mb, "bf16", "gpu").axes
    assert "bf16 speed-up on GPU vs fp32: jax 2.50x, torch 3.00x" == a1.get_title()
    ms[("jax", "tf32")], mb[("jax", "tf32")] = 6.0, 8.0
    assert plots.plot_speed_and_memory(ms, mb, "bf16", "gpu").axes[0].get_title().endswith(";\nvs tf32: jax 1.50x")
    tpu = {("jax", "fp32"): 12.0, ("jax", "fp32_default"): 6.0, ("jax", "bf16"): 4.0}  # a TPU's three variants
    t1 = plots.plot_speed_and_memory(tpu, {k: 1.0 for k in tpu}, "bf16", "tpu").axes[0]
    assert t1.get_title() == "bf16 speed-up on TPU vs fp32: jax 3.00x;\nvs fp32_default: jax 1.50x"
    assert len({p.get_facecolor() for p in t1.patches}) == 3  # one colour per variant
    assert a2.get_title() == "bf16 saves 0.50x (jax) / 0.33x (torch) of fp32's activation bytes; weights stay fp32"
    assert "(ms)" in a1.get_ylabel() and "(MB)" in a2.get_ylabel()
    assert len(a1.patches) == 4
    assert plots.plot_speed_and_memory({("jax", "fp32"): 1.0}, {("jax", "fp32"): 1.0}, "bf16", "cpu").axes[1].get_title() \
        == "activations saved for backward"  # no low-precision run to compare


def test_fp8_recipes_titles_name_the_best_and_worst() -> None:
    errors = {"N(0, 1)": {"current": 0.037, "delayed": 0.037, "block": 0.038},
              "outliers": {"current": 0.14, "delayed": 0.16, "block": 0.037}}
    acc = [{"K": 256, "narrow": 2e-4, "promoted": 1e-4, "fp32": 2e-7}, {"K": 4096, "narrow": 3e-3, "promoted": 1e-4, "fp32": 3e-7}]
    ref = [1.0 - 0.01 * i for i in range(30)]
    judged = {r: noise.judge([v + d for v in ref], ref, [v + 0.05 for v in ref], start=3)
              for r, d in (("current", 0.01), ("delayed", 0.03), ("block", 0.02))}
    a1, a2, a3 = plots.plot_fp8_recipes(errors, acc, judged).axes
    assert a1.get_title() == "outliers: block 0.037 vs delayed 0.160" and len(a1.patches) == 6
    assert "model, K=4096: narrow accumulator 3.0e-03, promoted 1.0e-04" == a2.get_title()
    assert "worst delayed at 0.60x the floor" in a3.get_title() and "float64" in a1.get_ylabel()
    assert a3.get_yscale() == "linear" and len(a2.get_lines()) == 3  # no round-to-nearest column in acc here
    ctl = noise.judge([v + 2.0 for v in ref], ref, [v + 0.05 for v in ref], start=3)  # 40 floors worse
    acc = [dict(r, **{"narrow, round-to-nearest": r["narrow"] / 4}) for r in acc]
    _, a2, a3 = plots.plot_fp8_recipes(errors, acc, judged, control=("unscaled", ctl)).axes
    assert a3.get_yscale() == "log" and a3.get_title().endswith("control unscaled 40x") and len(a3.patches) == 4
    assert [ln.get_label() for ln in a2.get_lines()] == ["narrow", "narrow, round-to-nearest", "promoted", "fp32"]
