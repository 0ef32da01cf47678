"""(Lab 06) The spot-discount claim under preemption: the arithmetic behind exercise 5.3.

The seed articles' claims, each tested as written, live in `labkit.cost.seeds` (the register);
this module keeps the one check the exercise builds on: a spot discount per *useful* hour once
time lost to preemption is counted, returned as a `ClaimResult` that states its assumptions.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from labkit.cost.prices import PRICES, Price, hourly_usd


@dataclass(frozen=True)
class ClaimResult:
    """(Lab 06) Whether a claim holds under stated assumptions, with the numbers behind it."""
    claim: str
    holds: bool
    under: str                  # the assumptions it was evaluated under
    detail: str                 # the arithmetic
    value: float | None = None  # the quantity the claim is about: the discount per useful hour


def check_spot_discount(on_demand: float | Price, spot: float | Price, claimed: float = 0.70,
                        tol: float = 0.05, lost_fraction: float = 0.0) -> ClaimResult:
    """(Lab 06) "Spot is 70% cheaper": discount per useful hour after time lost to preemption."""
    od, sp = hourly_usd(on_demand), hourly_usd(spot)
    if not 0 <= lost_fraction < 1:
        raise ValueError(f"lost_fraction (share of spot time redone after preemption) must be in "
                         f"[0, 1), got {lost_fraction!r}")
    useful = sp / (1 - lost_fraction)  # $ per useful hour on spot
    disc = 1 - useful / od
    what = f"{spot.chip} on {spot.cloud}: " if isinstance(spot, Price) else ""
    return ClaimResult(
        f"Spot is {claimed:.0%} cheaper", disc >= claimed - tol,
        f"{what}on-demand ${od:.4g}/h, spot ${sp:.4g}/h, {lost_fraction:.0%} of spot time lost to "
        f"preemption (restart + redo since checkpoint); tolerance {tol * 100:g} percentage points, one-sided "
        f"(holds at a discount of {claimed - tol:.0%} or more)",
        f"${sp:.4g} / (1 - {lost_fraction:g}) = ${useful:.4g} per useful hour -> "
        f"{disc:.1%} cheaper than on-demand", disc)


def spot_discounts(table: Sequence[Price] | None = None, **kw: Any) -> list[ClaimResult]:
    """(Lab 06) Check the spot claim for every chip/cloud that lists both spot and on-demand."""
    rows = PRICES if table is None else table
    # pair each spot price with an on-demand price read on the same page (same chip, cloud)
    return [check_spot_discount(od, sp, **kw) for sp in rows if sp.pricing == "spot"
            for od in rows if od.pricing == "on_demand" and (od.chip, od.cloud, od.source)
            == (sp.chip, sp.cloud, sp.source)]


__all__ = ["ClaimResult", "check_spot_discount", "spot_discounts"]
