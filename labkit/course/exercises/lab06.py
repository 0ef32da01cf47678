"""Lab 06 exercises: $ per million tokens, break-even utilization, spot discount after preemption.

Each check runs the learner's function and labkit's reference (`labkit.cost.model`, `labkit.cost.claims`)
on random inputs and, when they disagree, names the recognisable mistake.
"""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from labkit.cost import claims, model as cost
from labkit.course.check import CheckResult, Hint, check_function, ratio_is

N_CASES = 20  # random cases per check: a memorised number cannot pass


def _rng() -> np.random.Generator:
    return np.random.default_rng()  # fresh entropy every call: property-based, not a fixed answer


def _is(f: Callable[..., float]) -> Callable[[Any, Any, tuple], bool]:
    """Hint predicate: the answer equals f(*args), a specific wrong formula."""
    def when(got: Any, expected: Any, args: tuple) -> bool:
        try:
            return math.isclose(float(got), float(f(*args)), rel_tol=1e-6)
        except (TypeError, ValueError, ZeroDivisionError):
            return False
    return when


def _inverse(got: Any, expected: Any, args: tuple) -> bool:
    """Hint predicate: the answer is 1 / the right one (a ratio written upside down)."""
    try:
        return math.isclose(float(got) * float(expected), 1.0, rel_tol=1e-6)
    except (TypeError, ValueError):
        return False


# ---------------------------------------------------------------- 1. $ per million tokens
def _cost_per_mtok(usd_per_hour: float, tokens_per_s: float, utilization: float) -> float:
    return cost.serve_cost_per_mtok(tokens_per_s, usd_per_hour, utilization=utilization).usd_per_mtok


def check_cost_per_mtok(fn: Callable[[float, float, float], float]) -> CheckResult:
    """(Lab 06) ``fn(usd_per_hour, tokens_per_s, utilization)`` must return $ per million tokens."""
    __tracebackhide__ = True  # IPython: a failed check shows the learner's cell and the message, not labkit
    rng = _rng()
    cases = [(float(10 ** rng.uniform(-1, 1.3)), float(10 ** rng.uniform(1, 5)),
              float(rng.uniform(0.1, 0.95))) for _ in range(N_CASES)]
    ref = _cost_per_mtok
    hints = [
        Hint(ratio_is(3600), "forgot 3600: tokens/s x 3600 s/h gives tokens per hour, which is "
             "what a $/hour price pays for."),
        Hint(ratio_is(1e-6), "forgot the 1e6: that is $ per token; multiply by 1e6 for $ per "
             "million tokens."),
        Hint(ratio_is(1e-3), "that is $ per thousand tokens; a Mtok is 1e6 tokens."),
        Hint(ratio_is(3600 * 1e-6), "forgot both 3600 (s/h) and 1e6 (tokens per Mtok)."),
        Hint(ratio_is(1 / 3600), "divided by 3600 where you should multiply: tokens per hour = "
             "tokens/s x 3600."),
        Hint(ratio_is(60), "x 60 is seconds per minute: an hour has 3600 s, so tokens per hour = tokens/s x 3600."),
        Hint(_is(lambda p, t, u: ref(p, t, u) * u * u), "utilization multiplied instead of "
             "divided: idle reserved time still costs money, so useful tokens per hour are "
             "tokens/s x 3600 x utilization and the cost per token goes *up* as utilization drops."),
        Hint(_is(lambda p, t, u: ref(p, t, u) * u), "utilization left out: you pay for every "
             "reserved hour but only a fraction `utilization` of it produces tokens."),
        Hint(_inverse, "upside down: that is million tokens per $. "
             "Cost per token is $/hour divided by tokens/hour."),
    ]
    return check_function("cost per million tokens", fn, ref, cases, hints=hints,
                          explain="$/Mtok = $/h / (tokens/s x 3600 x utilization) x 1e6.")


# ---------------------------------------------------------------- 2. break-even utilization
def _break_even_utilization(usd_reserved: float, tps_reserved: float, usd_on_demand: float,
                            tps_on_demand: float) -> float:
    reserved = (cost.serve_cost_per_mtok, {"tokens_per_s": tps_reserved,
                                           "usd_per_chip_hour": usd_reserved})
    on_demand = (cost.serve_cost_per_mtok, {"tokens_per_s": tps_on_demand,
                                            "usd_per_chip_hour": usd_on_demand})
    be = cost.break_even(reserved, on_demand, "utilization", 1e-9, 1.0, vary="a")
    if be.value is not None:
        return be.value
    # No crossing in (0, 1]: the reservation costs more per token even fully used, so it never pays. The
    # answer is then the u > 1 that would tie (reserved $/token at u = 1, over on-demand's): above 1 = never.
    full = cost.serve_cost_per_mtok(tps_reserved, usd_reserved).usd_per_mtok        # $/Mtok at u = 1
    if full <= cost.serve_cost_per_mtok(tps_on_demand, usd_on_demand).usd_per_mtok:
        raise ValueError(be.reason)
    return full / cost.serve_cost_per_mtok(tps_on_demand, usd_on_demand).usd_per_mtok


def _never_pays_clamped(got: Any, expected: Any, args: tuple) -> bool:
    """Hint predicate: a case that never pays (u* > 1) answered 1, inf or None instead of u*."""
    if float(expected) <= 1:
        return False
    try:
        return float(got) == 1.0 or math.isinf(float(got))
    except (TypeError, ValueError):
        return got is None


def check_break_even_utilization(fn: Callable[[float, float, float, float], float]) -> CheckResult:
    """(Lab 06) ``fn(usd_reserved, tps_reserved, usd_on_demand, tps_on_demand)``: break-even u."""
    __tracebackhide__ = True  # IPython: a failed check shows the learner's cell and the message, not labkit
    rng = _rng()
    cases = []
    for i in range(N_CASES):
        usd_od = float(rng.uniform(1, 10))                   # $/h, billed only while used
        tps_od = float(10 ** rng.uniform(2, 4))              # tokens/s
        tps_res = float(tps_od * rng.uniform(0.5, 2.0))      # reserved may be another chip
        # where they cross; the first two cases never pay (u* > 1: dearer per token even at full use)
        u_star = float(rng.uniform(1.1, 2.5) if i < 2 else rng.uniform(0.05, 0.95))
        usd_res = u_star * usd_od * tps_res / tps_od         # $/h, billed around the clock
        cases.append((usd_res, tps_res, usd_od, tps_od))
    hints = [
        Hint(_is(lambda a, ta, b, tb: a / b), "you compared prices only: the two options may run "
             "at different tokens/s, so compare $ per token, not $ per hour."),
        Hint(_is(lambda a, ta, b, tb: a * ta / (b * tb)), "throughputs the wrong "
             "way round: the faster option spreads its price over more tokens, so its tokens/s "
             "goes in the denominator of its cost."),
        Hint(_inverse, "upside down: at break-even, "
             "usd_reserved / (tps_reserved x u) = usd_on_demand / tps_on_demand; solve for u."),
        Hint(ratio_is(100), "a fraction in (0, 1], not a percentage."),
        Hint(_never_pays_clamped, "this reservation never pays: return the "
             "formula's value even above 1 (no utilization up to 100% reaches it), not 1, inf or None."),
    ]
    return check_function("break-even utilization", fn, _break_even_utilization, cases,
                          hints=hints, explain="Below this utilization, paying only while you "
                          "use it (on-demand) is cheaper per token than a reservation;"
                          " above 1, the reservation never pays.")


# ---------------------------------------------------------------- 3. spot after preemption
def _spot_discount(usd_on_demand: float, usd_spot: float, lost_fraction: float) -> float:
    value = claims.check_spot_discount(usd_on_demand, usd_spot, lost_fraction=lost_fraction).value
    assert value is not None
    return value


def check_spot_discount(fn: Callable[[float, float, float], float]) -> CheckResult:
    """(Lab 06) ``fn(usd_on_demand, usd_spot, lost_fraction)``: spot discount per useful hour."""
    __tracebackhide__ = True  # IPython: a failed check shows the learner's cell and the message, not labkit
    rng = _rng()
    cases = []
    for _ in range(N_CASES):
        od = float(rng.uniform(1, 12))                        # $/h on-demand
        cases.append((od, float(od * rng.uniform(0.15, 0.6)),   # $/h spot
                      float(rng.uniform(0.02, 0.35))))          # share of spot time redone
    hints = [
        Hint(_is(lambda od, sp, f: 1 - sp / od), "preemption ignored: a fraction lost_fraction of "
             "the spot hours you pay for is redone work, so a useful hour costs sp / (1 - f)."),
        Hint(_is(lambda od, sp, f: 1 - sp * (1 - f) / od), "multiplied by (1 - f) instead of "
             "dividing: lost time makes each useful hour *more* expensive."),
        Hint(_is(lambda od, sp, f: 1 - sp * (1 + f) / od), "sp x (1 + f) is only a first-order "
             "approximation: $1 of spot time buys (1 - f) useful hours, so divide by (1 - f)."),
        Hint(_is(lambda od, sp, f: 1 - sp / od - f), "subtracting f from the discount mixes a share "
             "of time with a share of price: convert the loss into $ per useful hour first."),
        Hint(_is(lambda od, sp, f: sp / (1 - f) / od), "that is the price ratio (spot per useful "
             "hour / on-demand); the discount is 1 minus it."),
        Hint(ratio_is(100), "a fraction (0.7 = 70% cheaper), not a percentage."),
    ]
    return check_function("spot discount after preemption", fn, _spot_discount, cases,
                          hints=hints, explain=spot_explain())


def spot_explain(list_discount: float = 0.70, lost_fraction: float = 0.10) -> str:
    """(Lab 06) The spot formula, with one worked case computed (never a fixed verdict on the claim)."""
    sp = 1 - list_discount                                   # spot $/h per $1/h on-demand
    d = _spot_discount(1.0, sp, lost_fraction)
    return (f"discount = 1 - (spot / (1 - lost)) / on-demand; e.g. a {list_discount:.0%} list discount with "
            f"{lost_fraction:.0%} of spot time lost: 1 - {sp:.2g} / {1 - lost_fraction:.2g} = {d:.1%} per useful hour.")
