"""(Lab 06) The seed articles' claims, each tested as written and entered in the register.

`build` takes what this run knows (measured MFU and tokens/s, the price table, modelled serving
throughputs) and returns a `Register` with one entry per claim in `SEED_CLAIM_IDS`. Checkable
claims get a verdict from their inputs; the rest say what would be needed to test them.
"""
from __future__ import annotations

from typing import Sequence

from labkit.cost.prices import (H100, PRICING_KINDS, V5E, V5P, Price, check_fraction, primary,
                                prices as price_rows)
from labkit.cost.register import (ABOUT, Entry, Input, Register, about, about_band, both, by_source, decide,
                                  discount_at_least, in_range, merge, over_cases, over_range, sourced,
                                  straddles, untestable)
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


def mfu_input(name: str, value: float | None, source: str, assumed: float = 0.4) -> Input:
    """(Lab 06) A measured MFU as an Input; None (not measured) is a stated modelled assumption, never 0."""
    if value is None:   # no MFU was measured: say so, and label the stand-in as modelled
        return Input(f"{name}: not measured, assumed {assumed:.0%}", check_fraction(assumed, "assumed MFU"),
                     "modelled", f"not measured ({source}); assumed {assumed:.0%}")
    return Input(name, check_fraction(value, f"{name} (a measured MFU)"), "measured", source)


def tally(cases: Sequence[tuple[str, str]], listed: int = 4) -> str:
    """(Lab 06) "k of n inside (which); b below (which)..." for (label, in_range result) cases."""
    def part(k: str) -> str:
        hits = [c for c, w in cases if w == k]
        return f"{len(hits)} {k}" + (f" ({', '.join(hits)})" if 0 < len(hits) <= listed else "")
    head = f"{sum(w == 'inside' for _, w in cases)} of {len(cases)} inside"
    inside = [c for c, w in cases if w == "inside"]
    head += f" ({', '.join(inside)})" if 0 < len(inside) <= listed else ""
    return head + "".join(f"; {part(k)}" for k in ("below", "above") if any(w == k for _, w in cases))


def range_ends(rows: Sequence[Price]) -> str:
    """(Lab 06) "; ..." naming pages whose range's two ends are two rows (one page, two cases); "" if none."""
    sites = sorted({p.site for p in rows if p.range_end})
    return (f"; flagged: {', '.join(sites)} quotes a range, entered as its two ends, so that one page "
            f"counts as two cases here" if sites else "")


def range_claim(id: str, article: str, claim: str, test: str, inputs: Sequence[Input],
                cases: Sequence[tuple[str, str]], extra: str = "") -> Entry:
    """(Lab 06) A claim that a figure lies in a range, tested over every case by RANGE_RULE."""
    v = over_range(cases)
    sides = " (published prices straddle the range, none inside)" if straddles(cases) else ""
    return decide(id, article, claim, test, inputs, v, tally(cases) + sides + (f"; {extra}" if extra else ""))


def node_price(rows: Sequence[Price], lo: float = 12.0, hi: float = 15.0) -> Entry:
    """(Lab 06) Article: an 8x H100 node rents for $12-15/h. Each sourced price x 8, in range?"""
    if not rows:
        return untestable("h100_node_12_15_per_h", "distributed", f"An 8x H100 node costs ${lo:g}-{hi:g} "
                          "per hour", "a published H100 price")
    cases = [(f"{p.cloud} {p.pricing} ${8 * p.usd_per_chip_hour:.2f}", in_range(8 * p.usd_per_chip_hour, lo, hi))
             for p in rows]
    # On-demand, committed, reserved and spot are different offers: say how each term fares.
    terms = sorted({p.pricing for p in rows}, key=PRICING_KINDS.index)
    by_term = "; ".join(f"{t} {sum(w == 'inside' for (_, w), p in zip(cases, rows) if p.pricing == t)} of "
                        f"{sum(p.pricing == t for p in rows)} inside" for t in terms)
    return range_claim("h100_node_12_15_per_h", "distributed", f"An 8x H100 node costs ${lo:g}-{hi:g} "
                       "per hour", "8 x each published $/GPU-h for H100 SXM, against the range",
                       [sourced(p) for p in rows], cases, f"by pricing term: {by_term}" + range_ends(rows))


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


# Published H100 MFUs at scale (each Input names its source), beside this
# course's own small-model measurement: the article's 52% is about large-scale training.
H100_MFU_ANCHORS = (
    Input("H100 MFU, Megatron-LM on H100 clusters ('up to')", 0.47, "sourced", "Megatron-LM README"),
    Input("H100 MFU, torchtitan Llama 3.1 405B on 128 H100, bf16", 0.29, "sourced",
          "torchtitan docs/performance.md"),
)


def mfu_gap(h100_mfu: Input, tpu_mfu: Input | None,
            anchors: Sequence[Input] = H100_MFU_ANCHORS) -> Entry:
    """(Lab 06) Article: H100 ~52% MFU, TPU ~58%. Each MFU in whole points against "about" (ABOUT), by RANGE_RULE."""
    claim = "H100s reach about 52% MFU, TPUs about 58%"
    pts = lambda i: round(100 * i.value)                  # noqa: E731  whole percentage points
    (h_lo, h_hi), (t_lo, t_hi) = about_band(52), about_band(58)   # percent
    cases = [(f"{pts(i)}% ({i.name.removeprefix('H100 MFU, ')})", about(pts(i), 52)) for i in (h100_mfu, *anchors)]
    h = over_range(cases)                                 # the H100 half over every H100 figure
    said = f"about 52% = {h_lo:g}-{h_hi:g}% (+-{ABOUT:.0%}): " + "; ".join(f"{c} {w}" for c, w in cases)
    if tpu_mfu is None:
        # Both halves at once: an H100 half that fails fails the claim; otherwise the TPU half is missing.
        v = {"fails": "fails", "depends": "depends", "holds": "not testable here"}[h]
        return decide("mfu_h100_52_tpu_58", "distributed", claim, "MFU on an H100 (measured, and published "
                      "at scale) and on a TPU", [h100_mfu, *anchors], v, f"H100 {said}" + (
                          "; depends on model scale and software stack" if h == "depends" else "")
                      + "; the TPU half needs a committed TPU Lab 02 run", pts(h100_mfu) / 100)
    t = pts(tpu_mfu)
    # Two halves, each by RANGE_RULE; the claim needs both: one failing half fails it.
    tw = about(t, 58)
    v = both(h, over_range([("TPU", tw)]))
    return decide("mfu_h100_52_tpu_58", "distributed", claim, "MFU on an H100 and on a TPU",
                  [h100_mfu, *anchors, tpu_mfu], v, f"H100 {said}; TPU {t}% ({tw} {t_lo:g}-{t_hi:g}%)",
                  (t - pts(h100_mfu)) / 100)


def flip_price(tpu: str, tpu_mfu: float, gpu_mfu: Input, tpu_price: Price) -> float:
    """(Lab 06) The H100 $/h at which it trains at the TPU's $/token: above it, the TPU is cheaper."""
    tp, gp = hardware.lookup(tpu).peak("bf16"), hardware.lookup(H100).peak("bf16")   # FLOP/s
    tpu_cost = tpu_price.usd_per_chip_hour / (tpu_mfu * tp)   # $/h per useful FLOP/s
    return tpu_cost * gpu_mfu.value * gp                       # GPU $/h at equal $/token


def train_cost_ratio(tpu: str, tpu_mfu: float, gpu_mfu: Input, tpu_price: Price,
                     gpu_prices: Sequence[Price]) -> tuple[list[tuple[str, bool]], float]:
    """(Lab 06) Per GPU price: is TPU $/token lower? And the GPU $/h where they tie (flip point)."""
    flip = flip_price(tpu, tpu_mfu, gpu_mfu, tpu_price)
    return [(f"{p.cloud} ${p.usd_per_chip_hour:.2f}", p.usd_per_chip_hour > flip)
            for p in gpu_prices], flip


def _tpus(tpu_prices: Price | Sequence[Price]) -> list[Price]:
    """One Price or several as a list, cheapest first."""
    rows = [tpu_prices] if isinstance(tpu_prices, Price) else list(tpu_prices)
    return sorted(rows, key=lambda t: t.usd_per_chip_hour)


def low_mfu(gpu_mfu: Input, tpu_prices: Price | Sequence[Price], gpu_prices: Sequence[Price],
            mfu: float = 0.19, tpu: str = V5P, anchors: Sequence[Input] = H100_MFU_ANCHORS) -> Entry:
    """(Lab 06) Article: even at 19% MFU TPUs are cheaper. Every TPU x H100 price pair, with flip points."""
    claim = f"Even at {mfu:.0%} MFU a TPU trains cheaper than NVIDIA"
    tpus = _tpus(tpu_prices)
    if not tpus or not gpu_prices:
        return untestable("tpu_cheaper_at_19pct_mfu", "distributed", claim, f"a published {tpu} and H100 price")
    cases = []
    for t in tpus:
        c, _ = train_cost_ratio(tpu, mfu, gpu_mfu, t, gpu_prices)
        cases += [(f"TPU ${t.usd_per_chip_hour:.2f} vs {g}", h) for g, h in c]
    # The H100 $/h above which the TPU trains cheaper, for every H100 MFU the lab holds: the verdict
    # uses gpu_mfu; the published anchors at scale show how far the flip moves with the H100's MFU.
    flip = {i: [flip_price(tpu, mfu, i, t) for t in tpus] for i in (gpu_mfu, *anchors)}  # $/h, per TPU price
    flips = "; ".join(f"{i.value:.0%} ({i.name.removeprefix('H100 MFU, ')}, {i.kind}): " + ", ".join(
        f"${f:.2f} at TPU ${t.usd_per_chip_hour:.2f}/h" for f, t in zip(fs, tpus)) for i, fs in flip.items())
    setting = (f"a stand-in, not the article's setting (Anthropic moving from GB300 NVL72 to TPUs at scale; no "
               f"GB300 or contract price is on record): {tpu} at {mfu:.0%} MFU vs one H100 at rental prices")
    return decide("tpu_cheaper_at_19pct_mfu", "distributed", claim, f"{tpu} at {mfu:.0%} MFU vs H100 at "
                  "its MFU, every pair of published prices: $/h / (MFU x spec peak)",
                  [gpu_mfu, *anchors] + [sourced(t) for t in tpus] + [sourced(p) for p in gpu_prices]
                  + [Input("MFU under test", mfu, "article", "the article's own figure")], over_cases(cases),
                  f"{setting}; TPU cheaper in {sum(h for _, h in cases)} of {len(cases)} price pairs at the H100's "
                  f"{gpu_mfu.value:.0%} MFU; the H100 $/h above which the TPU trains cheaper, per H100 MFU: "
                  f"{flips}" + range_ends(gpu_prices), flip[gpu_mfu][0])


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
                  gpu_prices: Sequence[Price], lo: float = 2.0, hi: float = 4.0) -> Entry:
    """(Lab 06) Article: TPU serving is 2-4x cheaper per token. Every TPU x GPU price pair, by RANGE_RULE."""
    tpus = _tpus(tpu_prices)
    claim = f"TPU serving is {lo:g}-{hi:g}x cheaper per token"
    if not tpus or not gpu_prices:
        return untestable("tpu_serving_2_4x_cheaper", "gpu+tpu", claim, "a published TPU and a published H100 price")
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
    return decide("tpu_serving_2_4x_cheaper", "gpu+tpu", claim, "GPU $/token / TPU $/token at the same "
                  "workload, for every pair of published TPU and H100 prices",
                  [gpu_tps, tpu_tps] + [sourced(t) for t in tpus] + [sourced(g) for g in gpu_prices],
                  over_range(cases), f"{basis}{len(rs)} price pairs give {rs[0]:.2f}x-{rs[-1]:.2f}x: "
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
        u("tpu_4_10x_cheaper_training", "replace", "TPUs are 4-10x cheaper per token for 70B+ "
          "training", "70B-scale MFU on both chips; see tpu_cheaper_at_19pct_mfu for the ratio"),
        u("v5e_2_5x_per_dollar_v4", "replace", "For LLM work, v5e beats v4 by 2.5x on tokens per "
          "dollar and by 1.7x on speed", "v4 and v5e runs and v4 prices"),
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
    train_p = _tpus(tpu_train_price or v5p_od)
    serve_p = _tpus(tpu_serve_price or [p for p in tpus if p.chip == V5E])
    # Every TPU price here is a third-party page's, and the pages disagree several-fold: each verdict
    # that uses one is also judged on each page's prices alone (by_source), and says where they differ.
    entries = [node_price(h100_all), by_source(slice_price, v5p_od),
               spot_v5p(*(pair[0] if pair else (None, None))), mfu_gap(h100_mfu, tpu_mfu),
               by_source(lambda ps: low_mfu(h100_mfu, ps, h100_od), train_p),
               by_source(lambda ps: serving_ratio(gpu_tps, tpu_tps, ps, h100_od), serve_p),
               by_source(lambda ps: hourly_12_vs_10(h100_od, ps), tpus), *spec_claims(), *untestables()]
    # The white paper names no MFU, chip or price: the 19%-MFU test above is not its claim.
    entries.append(untestable("tpu_better_per_dollar_compatible", "whitepaper", "TPUs often give "
                              "better throughput per dollar for models that suit them", "a named model, "
                              "its measured throughput on both chips and their prices"))
    reg = Register(tuple(sorted(entries, key=lambda e: SEED_CLAIM_IDS.index(e.id))))
    assert reg.ids() == list(SEED_CLAIM_IDS), "the register must cover every seed claim once"
    return reg


__all__ = ["SEED_CLAIM_IDS", "H100_MFU_ANCHORS", "mfu_input", "tally",
           "range_ends", "range_claim", "node_price", "slice_price", "spot_v5p", "mfu_gap", "low_mfu",
           "flip_price", "train_cost_ratio", "serving_inputs", "serving_ratio", "hourly_12_vs_10", "spec_claims",
           "untestables", "build"]
