"""(Lab 06) The seed articles' claims, each tested as written and entered in the register.

`build` takes what this run knows (measured MFU and tokens/s, the price table, modelled serving
throughputs) and returns a `Register` with one entry per claim in `SEED_CLAIM_IDS`. Checkable
claims get a verdict from their inputs; the rest say what would be needed to test them.
"""
from __future__ import annotations

from typing import Sequence

from labkit.cost.mfu_claims import (H100_MFU_ANCHORS, TPU_MFU_ANCHORS, flip_price, low_mfu, mfu_gap,
                                    mfu_input, train_cost_ratio, train_ratio)
from labkit.cost.prices import H100, PRICING_KINDS, V5E, V5P, Price, primary, prices as price_rows
from labkit.cost.register import (ABOUT, Entry, Input, Register, about, about_band, both, by_source,
                                  cheapest_first, decide, discount_at_least, in_range, merge, over_range,
                                  range_ends, sourced, straddles, tally, untestable)
from labkit.cost.serving import DecodeStep, memory_gb
from labkit.runtime import hardware

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


def range_claim(id: str, article: str, claim: str, test: str, inputs: Sequence[Input],
                cases: Sequence[tuple[str, str]], extra: str = "") -> Entry:
    """(Lab 06) A claim that a figure lies in a range, tested over every case by RANGE_RULE."""
    v = over_range(cases)
    sides = " (published prices straddle the range, none inside)" if straddles(cases) else ""
    return decide(id, article, claim, test, inputs, v, tally(cases) + sides + (f"; {extra}" if extra else ""))


def node_price(rows: Sequence[Price], lo: float = 12.0, hi: float = 15.0) -> Entry:
    """(Lab 06) Article: an 8x H100 node rents for $12-15/h, by the hour: judged on on-demand prices x 8."""
    claim = f"An 8x H100 node rents for ${lo:g}-{hi:g} per hour"
    od = [p for p in rows if p.pricing == "on_demand"]
    if not od:
        return untestable("h100_node_12_15_per_h", "distributed", claim, "a published H100 on-demand price")
    # The article quotes an hourly rental with no commitment: the on-demand term. Reservations, commitments
    # and spot are other offers: each term's count is shown, and none enters the verdict.
    where = lambda ps: [in_range(8 * p.usd_per_chip_hour, lo, hi) for p in ps]  # noqa: E731
    terms = sorted({p.pricing for p in rows}, key=PRICING_KINDS.index)
    by_term = "; ".join(f"{t} {sum(w == 'inside' for w in where([p for p in rows if p.pricing == t]))} of "
                        f"{sum(p.pricing == t for p in rows)} inside" for t in terms)
    cases = [(f"{p.cloud} ${8 * p.usd_per_chip_hour:.2f}", w) for p, w in zip(od, where(od))]
    return range_claim("h100_node_12_15_per_h", "distributed", claim, "8 x each published on-demand $/GPU-h "
                       "for H100 SXM (the article's hourly rental), against the range", [sourced(p) for p in od],
                       cases, f"judged on on-demand prices only; by pricing term: {by_term}" + range_ends(od))


def slice_price(rows: Sequence[Price], chips: int = 4, lo: float = 8.0, hi: float = 11.0) -> Entry:
    """(Lab 06) Article: a TPU v5p-8 slice (4 chips) rents for $8-11/h; check published prices."""
    claim = f"A TPU v5p-8 slice costs ${lo:g}-{hi:g} per hour"
    if not rows:
        return untestable("v5p8_slice_8_11_per_h", "distributed", claim, "a published v5p price")
    cases = [(f"${chips * p.usd_per_chip_hour:.2f} ({p.site})", in_range(chips * p.usd_per_chip_hour, lo, hi))
             for p in rows]
    return range_claim("v5p8_slice_8_11_per_h", "distributed", claim, f"v5p-8 = {chips} chips x each "
                       "published on-demand $/chip-h", [sourced(p) for p in rows], cases)


def spot_v5p(on_demand: Price | None, spot: Price | None, percent: int = 70) -> Entry:
    """(Lab 06) Article: TPU v5p is 70% cheaper on spot. Needs the vendor's own on-demand and spot prices."""
    claim = f"TPU v5p on spot is {percent}% cheaper than on-demand"
    if on_demand is None or spot is None:
        return untestable("v5p_spot_70pct", "distributed", claim, "a published v5p on-demand and spot price pair")
    disc = 1 - spot.usd_per_chip_hour / on_demand.usd_per_chip_hour
    said = f"${spot.usd_per_chip_hour:.2f} vs ${on_demand.usd_per_chip_hour:.2f}: {disc:.0%} off"
    inputs = [sourced(on_demand), sourced(spot)]
    # A discount is the seller's policy: a summary page quoting it (often as its own example of the
    # very claim) repeats the claim, it does not test it. Only the seller's page (or your bill) can.
    if not (primary(on_demand) and primary(spot)):
        return decide("v5p_spot_70pct", "distributed", claim, "spot / on-demand from the vendor's own page",
                      inputs, "not testable here", f"secondary sources only: {said} on "
                      f"{spot.site}, a third-party page; needs Google's own v5p on-demand and spot prices", disc)
    ok = discount_at_least(on_demand.usd_per_chip_hour, spot.usd_per_chip_hour, percent)
    return decide("v5p_spot_70pct", "distributed", claim, "spot / on-demand from the vendor's own page, "
                  "in whole cents", inputs, "holds" if ok else "fails",
                  f"{said}; before any time lost to preemption", disc)


def serving_inputs(gpu: DecodeStep, tpu: DecodeStep, gpu_chip: str = H100,
                   tpu_chip: str = V5E) -> tuple[Input, Input]:
    """(Lab 06) Per-chip tok/s of two modelled decode steps as Inputs; refused unless both serve one workload."""
    if gpu.workload != tpu.workload:
        raise ValueError(f"{gpu_chip} serves {gpu.workload} and {tpu_chip} {tpu.workload} (model, batch, "
                         "context): a $/token ratio needs the SAME workload on both; size each chip's slice "
                         "to it, e.g. serving.chips_to_fit(model, context, batch, memory_gb) chips")
    def one(chip: str, st: DecodeStep) -> Input:
        """One chip's per-chip tok/s, its workload and chip count in the name."""
        return Input(f"{chip} tok/s per chip: {st.model}, batch {st.batch} x {st.context} tokens on "
                     f"{st.n_chips} chip(s)", st.tokens_per_s_per_chip, "modelled",
                     f"serving.decode_step at an assumed {st.mfu:.0%} MFU and {st.bw_eff:.0%} of spec "
                     "bandwidth; not a measured run")
    return one(gpu_chip, gpu), one(tpu_chip, tpu)


def serving_ratio(gpu_tps: Input, tpu_tps: Input, tpu_prices: Price | Sequence[Price],
                  gpu_prices: Sequence[Price], lo: float = 2.0, hi: float = 4.0, *,
                  id: str = "tpu_serving_2_4x_cheaper", article: str = "gpu+tpu", claim: str = "",
                  setting: str = "") -> Entry:
    """(Lab 06) Article: TPU serving is 2-4x cheaper per token. Every TPU x GPU price pair, by RANGE_RULE."""
    tpus = cheapest_first(tpu_prices)
    claim = claim or f"TPU serving is {lo:g}-{hi:g}x cheaper per token"
    if not tpus or not gpu_prices:
        return untestable(id, article, claim, "a published TPU and a published H100 price")
    # ratio = (GPU $/h / GPU tok/s) / (TPU $/h / TPU tok/s): GPU $ per token over TPU $ per token
    ratio = lambda t, g: g.usd_per_chip_hour / gpu_tps.value / (t.usd_per_chip_hour / tpu_tps.value)  # noqa: E731
    cases = [(f"{ratio(t, g):.2f}x", in_range(ratio(t, g), lo, hi)) for t in tpus for g in gpu_prices]
    flips = "; ".join(f"with the TPU at ${t.usd_per_chip_hour:.2f}/h, {lo:g}x needs the H100 at "
                      f"${lo * t.usd_per_chip_hour / tpu_tps.value * gpu_tps.value:.2f}/h and {hi:g}x "
                      f"at ${hi * t.usd_per_chip_hour / tpu_tps.value * gpu_tps.value:.2f}/h"
                      for t in sorted({t.usd_per_chip_hour: t for t in tpus}.values(),
                                      key=lambda t: t.usd_per_chip_hour))
    rs = sorted(ratio(t, g) for t in tpus for g in gpu_prices)
    sides = (" (below: TPU cheaper by less than claimed, or dearer; above: cheaper by more than claimed)"
             if any(w != "inside" for _, w in cases) else "")
    # The prices are sourced; the throughputs may not be: a verdict on modelled tok/s says so first.
    modelled = [w for w, i in (("GPU", gpu_tps), ("TPU", tpu_tps)) if i.kind == "modelled"]
    basis = {0: "", 1: f"the {''.join(modelled)} throughput is modelled, not measured: ",
             2: f"on modelled throughputs only ({gpu_tps.source}): "}[len(modelled)]
    return decide(id, article, claim, "GPU $/token / TPU $/token at the same "
                  "workload, for every pair of published TPU and H100 prices",
                  [gpu_tps, tpu_tps] + [sourced(t) for t in tpus] + [sourced(g) for g in gpu_prices],
                  over_range(cases), f"{setting}{basis}{len(rs)} price pairs give {rs[0]:.2f}x-{rs[-1]:.2f}x: "
                  f"{tally(cases)}{sides}; {flips}" + range_ends(gpu_prices), rs[len(rs) // 2])


def hourly_12_vs_10(gpu_prices: Sequence[Price], tpu_prices: Sequence[Price]) -> Entry:
    """(Lab 06) Article: about $12/h for an H100 vs about $10/h for a TPU, read per chip and per node/slice."""
    claim = "An H100 rents for about $12/h against about $10/h for a TPU"
    if not gpu_prices or not tpu_prices:
        return untestable("h100_12_vs_tpu_10_per_h", "distributed", claim, "published H100 and TPU prices")
    # The article puts these figures right after its 8-GPU node ($12-15/h) and v5p-8 slice ($8-11/h): they
    # may mean a chip or that node and slice. Test both readings. Each published price is a case; a
    # figure holds for the prices "about" it (ABOUT), by RANGE_RULE; the claim needs both figures.
    slices = [p for p in tpu_prices if p.chip == V5P]
    node, slice_chips = 8, 4  # an 8-GPU node; Google's v5p-8 names 8 TensorCores = 4 chips

    def half(who: str, usd: float, rows: Sequence[Price], n: int) -> tuple[str, str]:
        cases = [(f"${n * p.usd_per_chip_hour:.2f} ({p.site})", about(n * p.usd_per_chip_hour, usd)) for p in rows]
        lo, hi = about_band(usd)
        return over_range(cases), f"{who} about ${usd:g} (${lo:.2f}-{hi:.2f}): {tally(cases, 2)}"
    readings = {"per chip": (half("H100", 12.0, gpu_prices, 1), half("TPU", 10.0, tpu_prices, 1))}
    if slices:   # Google's v5p-8 names 8 TensorCores = 4 chips
        readings[f"per {node}-GPU node / v5p-8 slice ({slice_chips} chips)"] = (
            half(f"{node}x H100", 12.0, gpu_prices, node), half("v5p-8", 10.0, slices, slice_chips))
    verdicts = {r: both(g[0], t[0]) for r, (g, t) in readings.items()}
    said = "; ".join(f"{r}: {verdicts[r]} ({g[1]}; {t[1]})" for r, (g, t) in readings.items())
    return decide("h100_12_vs_tpu_10_per_h", "distributed", claim, "each claimed figure against every published "
                  f"price, within +-{ABOUT:.0%} ('about'), read per chip and per node/slice",
                  [sourced(p) for p in (*gpu_prices, *tpu_prices)]
                  + [Input("claimed H100 and TPU $/h", "12 and 10", "article", "the article's own figures")],
                  merge(*verdicts.values()), said + range_ends(gpu_prices))


def spec_claims() -> list[Entry]:
    """(Lab 06) Claims about spec figures, against labkit's chip table (itself sourced)."""
    v5p, h100, h200 = (hardware.lookup(c) for c in (V5P, H100, "NVIDIA H200 SXM"))
    tf, gb = 8 * v5p.peak_tflops["bf16"], 8 * memory_gb(v5p)    # TFLOP/s; GB of 1e9 bytes
    unit = v5p.memory_unit                                          # Google's v5p docs say "95GB"
    src = lambda s, k: s.sources.get(k, "labkit.runtime.hardware")  # noqa: E731
    return [
        decide("v5p8_3672_tflops_760gb", "distributed", "An 8-chip v5p slice has 3,672 TFLOP/s and "
               "760 GB", "8 x per-chip spec", [Input("v5p bf16 TFLOP/s", v5p.peak_tflops["bf16"],
               "sourced", src(v5p, "peak_tflops")), Input(f"v5p {unit}", v5p.memory_gb, "sourced",
               src(v5p, "memory"))], "holds" if (tf, round(gb)) == (3672, 760) else "fails",
               f"8 chips: {tf:g} TFLOP/s and 8 x {v5p.memory_gb:g} {unit} = {gb:.0f} GB (1e9 bytes); "
               "note Google's 'v5p-8' names 8 TensorCores = 4 chips, not 8"),
        decide("hbm_80_141gb", "distributed", "H100/H200 carry 80-141 GB of HBM per chip",
               "the spec table", [Input("H100 GB", h100.memory_gb, "sourced", src(h100, "memory")),
               Input("H200 GB", h200.memory_gb, "sourced", src(h200, "memory"))],
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
        u("v5e_2_5x_per_dollar_v4", "replace", "For LLM work, v5e beats v4 by 2.5x on tokens per "
          "dollar and by 1.7x on speed", "v4 and v5e runs and v4 prices"),
        u("b200_3x_h100", "replace", "B200 trains 3x faster than H100", "a B200 run of Lab 02"),
        u("h100_140_tok_s_per_user", "replace", "H100/H200 sustain ~140 tokens/s with TensorRT-LLM "
          "at 50+ users", "TensorRT-LLM and the figure's model"),
        u("ttft_70b_0_3_0_76s", "replace", "TPUs reach 0.3-0.76 s time to first token on 70B models",
          "a 70B model served on TPU"),
        u("trillium_2_8x", "replace", "Trillium brings 2.8x performance and 2.1x performance per "
          "watt", "Trillium and v5e runs with power"),
        u("trillium_disagg_3_7x", "replace", "Disaggregated prefill/decode serving on Trillium is "
          "3-7x faster", "a Trillium run of prefill and decode on separate slices"),
        u("hybrid_latency_1_6_2x", "gpu+tpu", "Routing stages across CPU/GPU/TPU cuts latency "
          "1.6-2x", "a measured multi-stage pipeline across CPU, GPU and TPU"),
        u("tpu_2_8x_tensorflow", "unpacking", "On TensorFlow work, the newest TPUs beat some unnamed "
          "GPUs on efficiency by as much as 2.8x", "which GPUs and tasks; a TensorFlow run on both"),
    ]


def build(*, h100_mfu: Input, tpu_mfu: Input | None, gpu_tps: Input, tpu_tps: Input,
          table: Sequence[Price] | None = None, tpu_train_price: Price | Sequence[Price] | None = None,
          tpu_serve_price: Price | Sequence[Price] | None = None) -> Register:
    """(Lab 06) The full register from this run's measured and modelled inputs and a price table."""
    # A price whose page was already stale when read stays in the table (with its warning) but
    # enters no verdict; undated pages do, with theirs.
    rows = price_rows(table=table, current_only=True)
    h100_od = [p for p in rows if p.chip == H100 and p.pricing == "on_demand"]
    h100_all = [p for p in rows if p.chip == H100]
    v5p = [p for p in rows if p.chip == V5P]
    tpus = [p for p in rows if p.chip.startswith("TPU") and p.pricing == "on_demand"]
    pair = [(o, s) for s in v5p if s.pricing == "spot" for o in v5p
            if o.pricing == "on_demand" and o.source == s.source]
    v5p_od = [p for p in v5p if p.pricing == "on_demand"]
    # Training and serving are each tested on every published price of their TPU, never one pick.
    train_p = cheapest_first(tpu_train_price or v5p_od)
    serve_p = cheapest_first(tpu_serve_price or [p for p in tpus if p.chip == V5E])
    # "Up to 2.5x cheaper": the TPU cheaper (ratio above 1) by no more than 2.5x; at the same stand-in
    # workload as the 2-4x claim, since the article names no model, batch or scale.
    up_to = dict(id="tpu_inference_2_5x_cheaper", article="replace", claim="TPU inference costs up to 2.5x less "
                 "per token at scale", setting="a stand-in at the 2-4x claim's modelled workload (the article names "
                 "no model or scale): ")
    # Every TPU price here is a third-party page's, and the pages disagree several-fold: each verdict
    # that uses one is also judged on each page's prices alone (by_source), and says where they differ.
    entries = [node_price(h100_all), by_source(slice_price, v5p_od),
               spot_v5p(*(pair[0] if pair else (None, None))), mfu_gap(h100_mfu, tpu_mfu),
               by_source(lambda ps: low_mfu(h100_mfu, ps, h100_od), train_p),
               by_source(lambda ps: serving_ratio(gpu_tps, tpu_tps, ps, h100_od), serve_p),
               by_source(lambda ps: serving_ratio(gpu_tps, tpu_tps, ps, h100_od, 1.0, 2.5, **up_to), serve_p),
               by_source(lambda ps: train_ratio(ps, h100_od), train_p),
               by_source(lambda ps: hourly_12_vs_10(h100_od, ps), tpus), *spec_claims(), *untestables()]
    # The white paper names no MFU, chip or price: the 19%-MFU test above is not its claim.
    entries.append(untestable("tpu_better_per_dollar_compatible", "whitepaper", "TPUs often give "
                              "better throughput per dollar for models that suit them", "a named model, "
                              "its measured throughput on both chips and their prices"))
    reg = Register(tuple(sorted(entries, key=lambda e: SEED_CLAIM_IDS.index(e.id))))
    assert reg.ids() == list(SEED_CLAIM_IDS), "the register must cover every seed claim once"
    return reg


__all__ = ["SEED_CLAIM_IDS", "H100_MFU_ANCHORS", "TPU_MFU_ANCHORS", "mfu_input", "tally", "train_ratio",
           "range_ends", "range_claim", "node_price", "slice_price", "spot_v5p", "mfu_gap", "low_mfu",
           "flip_price", "train_cost_ratio", "serving_inputs", "serving_ratio", "hourly_12_vs_10", "spec_claims",
           "untestables", "build"]
