"""(Lab 06) The seed articles' claims, each tested as written and entered in the register.

`build` takes what this run knows (measured MFU and tokens/s, the price table, modelled serving
throughputs) and returns a `Register` with one entry per claim in `SEED_CLAIM_IDS`. Checkable
claims get a verdict from their inputs; the rest say what would be needed to test them.
"""
from __future__ import annotations

from typing import Sequence

from labkit.cost.prices import H100, V5E, V5P, Price, prices as price_rows
from labkit.cost.register import (Entry, Input, Register, decide, discount_at_least, in_range,
                                  over_cases, sourced, untestable)
from labkit.runtime import hardware

_NODE_URL = "https://pricegpu.pages.dev/blog/h100-vs-a100-cloud-price"

SEED_CLAIM_IDS = (
    "h100_node_12_15_per_h", "v5p8_slice_8_11_per_h", "v5p_spot_70pct", "mfu_h100_52_tpu_58",
    "tpu_cheaper_at_19pct_mfu", "tpu_serving_2_4x_cheaper", "h100_12_vs_tpu_10_per_h",
    "v5p8_3672_tflops_760gb", "hbm_80_141gb", "h100_3800_tok_s", "v5p_3450_tok_s",
    "v6e_4x_price_perf", "v5p_2_8x_v4", "tpu_60_65pct_less_power", "midjourney_65pct",
    "anthropic_52pct_tco", "tpu_4_10x_cheaper_training", "v5e_2_5x_per_dollar_v4",
    "b200_3x_h100", "h100_140_tok_s_per_user", "ttft_70b_0_3_0_76s", "trillium_2_8x",
    "hybrid_latency_1_6_2x", "tpu_2_8x_tensorflow", "tpu_better_per_dollar_compatible",
    "tpu_inference_2_5x_cheaper", "trillium_disagg_3_7x",
)


def node_price(rows: Sequence[Price], lo: float = 12.0, hi: float = 15.0) -> Entry:
    """(Lab 06) Article: an 8x H100 node rents for $12-15/h. Each sourced price x 8, in range?"""
    cases = [(f"{p.cloud} {p.pricing} ${8 * p.usd_per_chip_hour:.2f}",
              in_range(8 * p.usd_per_chip_hour, lo, hi) == "inside") for p in rows]
    inputs = [sourced(p) for p in rows] + [
        Input("8x H100 node, typical on-demand range early 2026", "$20-32/h", "sourced",
              f"{_NODE_URL} (page undated, read 2026-11-24; third-party)")]
    cases.append(("pricegpu range $20-32", False))   # the whole published range lies above $15
    v = over_cases(cases)
    inside = [c for c, h in cases if h] or ["none"]
    return decide("h100_node_12_15_per_h", "distributed", f"An 8x H100 node costs ${lo:g}-{hi:g} "
                  "per hour", "8 x each published $/GPU-h for H100 SXM, against the range", inputs,
                  v, f"inside: {', '.join(inside)}; {len(cases) - len(inside)} of {len(cases)} "
                  "outside (depends on provider and term)" if v == "depends" else
                  f"{len(inside)} of {len(cases)} inside")


def slice_price(rows: Sequence[Price], chips: int = 4, lo: float = 8.0, hi: float = 11.0) -> Entry:
    """(Lab 06) Article: a TPU v5p-8 slice (4 chips) rents for $8-11/h; check published prices."""
    cases = [(f"${chips * p.usd_per_chip_hour:.2f} ({p.site})",
              in_range(chips * p.usd_per_chip_hour, lo, hi) == "inside") for p in rows]
    v = over_cases(cases) if cases else "not testable here"
    return decide("v5p8_slice_8_11_per_h", "distributed", f"A TPU v5p-8 slice costs ${lo:g}-{hi:g} "
                  "per hour", f"v5p-8 = {chips} chips x each published on-demand $/chip-h",
                  [sourced(p) for p in rows] or [Input("claim", "$8-11/h", "article", "article")],
                  v, "; ".join(f"{c}: {'inside' if h else 'outside'}" for c, h in cases)
                  or "needs a published v5p price")


def spot_v5p(on_demand: Price | None, spot: Price | None, percent: int = 70) -> Entry:
    """(Lab 06) Article: TPU v5p is 70% cheaper on spot. Same page's on-demand vs spot, in cents."""
    if on_demand is None or spot is None:
        return untestable("v5p_spot_70pct", "distributed", "TPU v5p spot is 70% cheaper",
                          "a published v5p on-demand and spot price pair")
    ok = discount_at_least(on_demand.usd_per_chip_hour, spot.usd_per_chip_hour, percent)
    disc = 1 - spot.usd_per_chip_hour / on_demand.usd_per_chip_hour
    return decide("v5p_spot_70pct", "distributed", f"TPU v5p on spot is {percent}% cheaper than "
                  "on-demand", "spot / on-demand from one page, in whole cents",
                  [sourced(on_demand), sourced(spot)], "holds" if ok else "fails",
                  f"${spot.usd_per_chip_hour:.2f} vs ${on_demand.usd_per_chip_hour:.2f}: "
                  f"{disc:.0%} off; before any time lost to preemption", disc)


def mfu_gap(h100_mfu: Input, tpu_mfu: Input | None, tol_points: int = 5) -> Entry:
    """(Lab 06) Article: H100 ~52% MFU, TPU ~58%. Measured MFUs, in whole points, +-tol_points."""
    g = round(100 * h100_mfu.value)                       # whole percentage points
    g_ok = abs(g - 52) <= tol_points
    if tpu_mfu is None:
        # The claim is both halves at once: a measured H100 outside its half already fails it.
        return decide("mfu_h100_52_tpu_58", "distributed", "H100s reach about 52% MFU, TPUs about "
                      "58%", "Lab 02 MFU measured on an H100 and on a TPU v5p", [h100_mfu],
                      "not testable here" if g_ok else "fails", f"H100 measured {g}% on this course's "
                      f"GPT step ({'within' if g_ok else 'outside'} {tol_points} points of 52%); the TPU "
                      "half needs a committed TPU Lab 02 run", g / 100)
    t = round(100 * tpu_mfu.value)
    ok = g_ok and abs(t - 58) <= tol_points
    return decide("mfu_h100_52_tpu_58", "distributed", "H100s reach about 52% MFU, TPUs about 58%",
                  "Lab 02 MFU measured on an H100 and on a TPU", [h100_mfu, tpu_mfu],
                  "holds" if ok else "fails", f"H100 {g}%, TPU {t}%; tolerance {tol_points} points",
                  (t - g) / 100)


def train_cost_ratio(tpu: str, tpu_mfu: float, gpu_mfu: Input, tpu_price: Price,
                     gpu_prices: Sequence[Price]) -> tuple[list[tuple[str, bool]], float]:
    """(Lab 06) Per GPU price: is TPU $/token lower? And the GPU $/h where they tie (flip point)."""
    tp, gp = hardware.lookup(tpu).peak("bf16"), hardware.lookup(H100).peak("bf16")   # FLOP/s
    tpu_cost = tpu_price.usd_per_chip_hour / (tpu_mfu * tp)   # $/h per useful FLOP/s
    flip = tpu_cost * gpu_mfu.value * gp                       # GPU $/h at equal $/token
    return [(f"{p.cloud} ${p.usd_per_chip_hour:.2f}", p.usd_per_chip_hour > flip)
            for p in gpu_prices], flip


def low_mfu(gpu_mfu: Input, tpu_price: Price, gpu_prices: Sequence[Price], mfu: float = 0.19,
            tpu: str = V5P) -> Entry:
    """(Lab 06) Article: even at 19% MFU TPUs are cheaper. TPU at 19% vs H100 at its measured MFU."""
    cases, flip = train_cost_ratio(tpu, mfu, gpu_mfu, tpu_price, gpu_prices)
    v = over_cases(cases)
    return decide("tpu_cheaper_at_19pct_mfu", "distributed", f"Even at {mfu:.0%} MFU a TPU trains "
                  "cheaper than NVIDIA", f"{tpu} at {mfu:.0%} MFU vs H100 at the measured MFU: $/h "
                  "/ (MFU x spec peak)", [gpu_mfu, sourced(tpu_price)] + [sourced(p) for p in gpu_prices]
                  + [Input("MFU under test", mfu, "article", "the article's own figure")], v,
                  f"TPU cheaper while the H100 costs more than ${flip:.2f}/h (flip point); "
                  + ", ".join(f"{c}: {'TPU cheaper' if h else 'H100 cheaper'}" for c, h in cases),
                  flip)


def serving_ratio(gpu_tps: Input, tpu_tps: Input, tpu_prices: Price | Sequence[Price],
                  gpu_prices: Sequence[Price], lo: float = 2.0, hi: float = 4.0) -> Entry:
    """(Lab 06) Article: TPU serving is 2-4x cheaper per token. Every TPU x GPU price pair; flip points."""
    tpus = [tpu_prices] if isinstance(tpu_prices, Price) else list(tpu_prices)
    if not tpus or not gpu_prices:
        return untestable("tpu_serving_2_4x_cheaper", "gpu+tpu", f"TPU serving is {lo:g}-{hi:g}x "
                          "cheaper per token", "a published TPU and a published H100 price")
    # ratio = (GPU $/h / GPU tok/s) / (TPU $/h / TPU tok/s): GPU $ per token over TPU $ per token
    ratios = [g.usd_per_chip_hour / gpu_tps.value / (t.usd_per_chip_hour / tpu_tps.value)
              for t in tpus for g in gpu_prices]
    where = [in_range(r, lo, hi) for r in ratios]
    # All inside: holds. All on one side: fails (by too little, or TPU cheaper by more than claimed).
    # Inside for some pairs, or below for some and above for others: the answer turns on the prices.
    v = "holds" if set(where) == {"inside"} else ("fails" if len(set(where)) == 1 else "depends")
    flips = "; ".join(f"with the TPU at ${t.usd_per_chip_hour:.2f}/h, {lo:g}x needs the H100 at "
                      f"${lo * t.usd_per_chip_hour / tpu_tps.value * gpu_tps.value:.2f}/h and {hi:g}x "
                      f"at ${hi * t.usd_per_chip_hour / tpu_tps.value * gpu_tps.value:.2f}/h"
                      for t in sorted({t.usd_per_chip_hour: t for t in tpus}.values(),
                                      key=lambda t: t.usd_per_chip_hour))
    ratios.sort()
    side = {"below": "TPU cheaper by less than claimed (or dearer)",
            "above": "TPU cheaper by more than claimed"}
    summary = (f"{len(ratios)} price pairs give {ratios[0]:.2f}x-{ratios[-1]:.2f}x: "
               + ", ".join(f"{where.count(k)} {k}" for k in ("below", "inside", "above") if k in where))
    why = f"{summary}; {flips}" if v != "fails" else f"{summary} ({side[where[0]]}); {flips}"
    return decide("tpu_serving_2_4x_cheaper", "gpu+tpu", f"TPU serving is {lo:g}-{hi:g}x cheaper "
                  "per token", "GPU $/token / TPU $/token at the same workload, for every pair of "
                  "published TPU and H100 prices", [gpu_tps, tpu_tps] + [sourced(t) for t in tpus]
                  + [sourced(g) for g in gpu_prices], v, why, ratios[len(ratios) // 2])


def hourly_12_vs_10(gpu_prices: Sequence[Price], tpu_prices: Sequence[Price]) -> Entry:
    """(Lab 06) Article: about $12/h for an H100 against $10/h for a TPU: per-chip prices found."""
    g = sorted(p.usd_per_chip_hour for p in gpu_prices)
    t = sorted(p.usd_per_chip_hour for p in tpu_prices)
    v = "holds" if g[0] > t[-1] else ("fails" if g[-1] < t[0] else "depends")
    # The figures themselves: is each inside the published range of its chip's per-chip prices?
    where = (f"; the claimed $12 is {in_range(12.0, g[0], g[-1])} the H100 range and $10 "
             f"{in_range(10.0, t[0], t[-1])} the TPU range")
    return decide("h100_12_vs_tpu_10_per_h", "distributed", "An H100 rents for about $12/h "
                  "against about $10/h for a TPU", "published per-chip prices of each",
                  [sourced(p) for p in (*gpu_prices, *tpu_prices)], v,
                  (f"H100 ${g[0]:.2f}-{g[-1]:.2f}/h, TPU ${t[0]:.2f}-{t[-1]:.2f}/h: which is dearer "
                   "depends on the provider" if v == "depends" else f"H100 ${g[0]:.2f}-{g[-1]:.2f}"
                   f", TPU ${t[0]:.2f}-{t[-1]:.2f}") + where)


def spec_claims() -> list[Entry]:
    """(Lab 06) Claims about spec figures, against labkit's chip table (itself sourced)."""
    v5p, h100, h200 = (hardware.lookup(c) for c in (V5P, H100, "NVIDIA H200 SXM"))
    tf, gb = 8 * v5p.peak_tflops["bf16"], 8 * v5p.memory_gb
    src = lambda s, k: s.sources.get(k, "labkit.runtime.hardware")  # noqa: E731
    return [
        decide("v5p8_3672_tflops_760gb", "distributed", "An 8-chip v5p slice has 3,672 TFLOP/s and "
               "760 GB", "8 x per-chip spec", [Input("v5p bf16 TFLOP/s", v5p.peak_tflops["bf16"],
               "sourced", src(v5p, "peak_tflops")), Input("v5p GB", v5p.memory_gb, "sourced",
               src(v5p, "memory_gb"))], "holds" if (tf, gb) == (3672, 760) else "fails",
               f"8 chips: {tf:g} TFLOP/s, {gb:g} GB (Google's v5p-8 names 8 cores = 4 chips)"),
        decide("hbm_80_141gb", "distributed", "H100/H200 carry 80-141 GB of HBM per chip",
               "the spec table", [Input("H100 GB", h100.memory_gb, "sourced", src(h100, "memory_gb")),
               Input("H200 GB", h200.memory_gb, "sourced", src(h200, "memory_gb"))],
               "holds" if (h100.memory_gb, h200.memory_gb) == (80, 141) else "fails",
               f"H100 {h100.memory_gb:g} GB, H200 {h200.memory_gb:g} GB"),
    ]


def untestables() -> list[Entry]:
    """(Lab 06) The claims this course cannot test, each with what would be needed."""
    u = untestable
    return [
        u("h100_3800_tok_s", "distributed", "An H100 produces about 3,800 tokens/s", "the model, "
          "phase and batch behind the figure (Lab 05 serves a different model)"),
        u("v5p_3450_tok_s", "distributed", "A v5p chip produces about 3,450 tokens/s", "a TPU v5p run "
          "and the figure's model"),
        u("v6e_4x_price_perf", "distributed", "TPU v6e has up to 4x the price-performance of an "
          "H100", "a published v6e price and a v6e throughput run (pass my_price to try)"),
        u("v5p_2_8x_v4", "distributed", "v5p trains 2.8x faster than v4 and is 2.1x better value",
          "TPU v4 and v5p runs and prices"),
        u("tpu_60_65pct_less_power", "gpu+tpu", "TPU serving draws 60-65% less power", "power "
          "measured on both chips under the same load"),
        u("midjourney_65pct", "gpu+tpu", "Midjourney cut inference cost 65% moving to TPUs",
          "the company's own bills"),
        u("anthropic_52pct_tco", "distributed", "Anthropic cut TCO per PFLOP 52% moving from GB300 "
          "NVL72 to TPUs", "GB300 and TPU contract prices"),
        u("tpu_4_10x_cheaper_training", "replace", "TPUs are 4-10x cheaper per token for 70B+ "
          "training", "70B-scale MFU on both chips; see tpu_cheaper_at_19pct_mfu for the ratio"),
        u("v5e_2_5x_per_dollar_v4", "replace", "v5e gives 2.5x throughput per dollar and 1.7x speed "
          "over v4 for LLMs", "v4 and v5e runs and v4 prices"),
        u("b200_3x_h100", "replace", "B200 trains 3x faster than H100", "a B200 run of Lab 02"),
        u("h100_140_tok_s_per_user", "replace", "H100/H200 sustain ~140 tokens/s with TensorRT-LLM "
          "at 50+ users", "TensorRT-LLM and the figure's model"),
        u("ttft_70b_0_3_0_76s", "replace", "TPUs reach 0.3-0.76 s time to first token on 70B models",
          "a 70B model served on TPU"),
        u("trillium_2_8x", "replace", "Trillium brings 2.8x performance and 2.1x performance per "
          "watt", "Trillium and v5e runs with power"),
        u("tpu_inference_2_5x_cheaper", "replace", "TPU inference is up to 2.5x cheaper at scale",
          "the workload, scale and prices behind the figure; see tpu_serving_2_4x_cheaper for pairs"),
        u("trillium_disagg_3_7x", "replace", "Disaggregated prefill/decode serving on Trillium is "
          "3-7x faster", "a Trillium run of prefill and decode on separate slices"),
        u("hybrid_latency_1_6_2x", "gpu+tpu", "Routing stages across CPU/GPU/TPU cuts latency "
          "1.6-2x", "a measured multi-stage pipeline across CPU, GPU and TPU"),
        u("tpu_2_8x_tensorflow", "unpacking", "The latest TPUs are up to 2.8x more efficient than "
          "some GPUs on TensorFlow tasks", "which GPUs and tasks; a TensorFlow run on both"),
    ]


def build(*, h100_mfu: Input, tpu_mfu: Input | None, gpu_tps: Input, tpu_tps: Input,
          table: Sequence[Price] | None = None, tpu_train_price: Price | None = None,
          tpu_serve_price: Price | Sequence[Price] | None = None) -> Register:
    """(Lab 06) The full register from this run's measured and modelled inputs and a price table."""
    rows = price_rows(table=table)
    h100_od = [p for p in rows if p.chip == H100 and p.pricing == "on_demand"]
    h100_all = [p for p in rows if p.chip == H100]
    v5p = [p for p in rows if p.chip == V5P]
    tpus = [p for p in rows if p.chip.startswith("TPU") and p.pricing == "on_demand"]
    pair = [(o, s) for s in v5p if s.pricing == "spot" for o in v5p
            if o.pricing == "on_demand" and o.source == s.source]
    v5p_od = [p for p in v5p if p.pricing == "on_demand"]
    train_p = tpu_train_price or (min(v5p_od, key=lambda p: p.usd_per_chip_hour) if v5p_od else None)
    # Serving is tested on every published v5e on-demand price (they differ five-fold between pages).
    serve_p = tpu_serve_price or [p for p in tpus if p.chip == V5E]
    entries = [node_price(h100_all), slice_price(v5p_od), spot_v5p(*(pair[0] if pair else (None, None))),
               mfu_gap(h100_mfu, tpu_mfu),
               low_mfu(h100_mfu, train_p, h100_od) if train_p else untestable(
                   "tpu_cheaper_at_19pct_mfu", "distributed", "Even at 19% MFU TPUs are cheaper",
                   "a published v5p price"),
               serving_ratio(gpu_tps, tpu_tps, serve_p, h100_od), hourly_12_vs_10(h100_od, tpus),
               *spec_claims(), *untestables()]
    # The white paper names no MFU, chip or price: the 19%-MFU test above is not its claim.
    entries.append(untestable("tpu_better_per_dollar_compatible", "whitepaper", "TPUs often give "
                              "better throughput per dollar for models that suit them", "a named model, "
                              "its measured throughput on both chips and their prices"))
    reg = Register(tuple(sorted(entries, key=lambda e: SEED_CLAIM_IDS.index(e.id))))
    assert reg.ids() == list(SEED_CLAIM_IDS), "the register must cover every seed claim once"
    return reg


__all__ = ["SEED_CLAIM_IDS", "node_price", "slice_price", "spot_v5p", "mfu_gap", "low_mfu",
           "train_cost_ratio", "serving_ratio", "hourly_12_vs_10", "spec_claims", "untestables",
           "build"]
