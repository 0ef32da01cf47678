"""(Lab 06) Checks of common GPU-vs-TPU claims against the cost model (the register: `seeds`).

A claim is never simply true or false: it holds under some prices, MFUs, utilizations and
batch sizes and fails under others. Each checker takes the numbers (usually `CostResult`s from
`labkit.cost.model`) and returns a `ClaimResult` that states the assumptions and the arithmetic, so
a lab can sweep an assumption and show where the verdict flips.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

from labkit.cost.model import CostResult
from labkit.cost.prices import PRICES, Price, check_fraction, hourly_usd


@dataclass(frozen=True)
class ClaimResult:
    """(Lab 06) Whether a claim holds under stated assumptions, with the numbers behind it."""
    claim: str
    holds: bool
    under: str                  # the assumptions it was evaluated under
    detail: str                 # the arithmetic
    value: float | None = None  # the quantity the claim is about (ratio, MFU gap, discount)


@dataclass(frozen=True)
class Claim:
    """(Lab 06) A debate claim and the function that checks it against the cost model."""
    text: str
    evaluate: Callable[..., ClaimResult]

    def __call__(self, *args: Any, **kwargs: Any) -> ClaimResult:
        return self.evaluate(*args, **kwargs)


def check_tpu_serving_cheaper(gpu: CostResult, tpu: CostResult, lo: float = 2.0,
                              hi: float = 4.0) -> ClaimResult:
    """(Lab 06) "TPU serving is 2-4x cheaper per token": ratio of GPU to TPU serving $/Mtok."""
    ratio = gpu.usd_per_mtok / tpu.usd_per_mtok
    need = tpu.tokens_per_s * lo / ratio  # TPU tokens/s at which TPU is exactly lo x cheaper
    where = "inside" if ratio <= hi else "above"
    verdict = f"{where} the claimed {lo:g}-{hi:g}x" if ratio >= lo else f"below {lo:g}x"
    return ClaimResult(
        f"TPU serving is {lo:g}-{hi:g}x cheaper per token", ratio >= lo,
        f"GPU {gpu.tokens_per_s:,.4g} tok/s at ${gpu.usd_per_hour:.4g}/h, "
        f"util {gpu.utilization:g}; "
        f"TPU {tpu.tokens_per_s:,.4g} tok/s at ${tpu.usd_per_hour:.4g}/h, util {tpu.utilization:g}",
        f"GPU ${gpu.usd_per_mtok:.4g}/Mtok / TPU ${tpu.usd_per_mtok:.4g}/Mtok = {ratio:.3g}x "
        f"({verdict}); TPU needs >= {need:,.4g} tok/s for {lo:g}x", ratio)


def check_mfu_gap(gpu_mfu: float, tpu_mfu: float, claimed_gpu: float = 0.52,
                  claimed_tpu: float = 0.58, tol: float = 0.05) -> ClaimResult:
    """(Lab 06) "H100 ~52% MFU vs TPU ~58%": do measured MFUs match within tol (cost aside)."""
    g, t = check_fraction(gpu_mfu, "gpu_mfu"), check_fraction(tpu_mfu, "tpu_mfu")
    # compare in whole percentage points: exact integers, so no float edge and no epsilon
    pts = lambda x: round(100 * x)  # noqa: E731
    ok = (abs(pts(g) - pts(claimed_gpu)) <= pts(tol)
          and abs(pts(t) - pts(claimed_tpu)) <= pts(tol))
    return ClaimResult(
        f"GPU reaches ~{claimed_gpu:.0%} MFU while TPU reaches ~{claimed_tpu:.0%}", ok,
        f"MFU GPU {g:.1%}, TPU {t:.1%} (each against its own spec peak); tolerance +-{tol:.0%}",
        f"gap {t - g:+.1%} vs claimed {claimed_tpu - claimed_gpu:+.1%}. MFU alone does not set "
        f"cost: $/Mtok is proportional to price / (MFU x peak); compare with train_cost_per_mtok",
        t - g)


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
        f"preemption (restart + redo since checkpoint); tolerance {tol:.0%}",
        f"${sp:.4g} / (1 - {lost_fraction:g}) = ${useful:.4g} per useful hour -> "
        f"{disc:.1%} cheaper than on-demand", disc)


def check_low_mfu_cheaper(low: CostResult, high: CostResult) -> ClaimResult:
    """(Lab 06) "A low MFU can still be cheaper": lower-MFU option vs higher-MFU option, $/Mtok."""
    if low.mfu is None or high.mfu is None:
        raise ValueError("both results need an MFU: use train_cost_per_mtok(mfu=...) or pass "
                         "flops_per_token= and chip= with tokens_per_s")
    holds = low.mfu < high.mfu and low.usd_per_mtok < high.usd_per_mtok
    return ClaimResult(
        "A lower MFU can still be cheaper per token", holds,
        f"{low.chip or 'A'}: MFU {low.mfu:.1%} at ${low.usd_per_chip_hour:.4g}/chip-h; "
        f"{high.chip or 'B'}: MFU {high.mfu:.1%} at ${high.usd_per_chip_hour:.4g}/chip-h",
        f"${low.usd_per_mtok:.4g}/Mtok vs ${high.usd_per_mtok:.4g}/Mtok: cost follows "
        f"price / (MFU x peak), so a cheaper or faster chip can offset a lower MFU",
        low.usd_per_mtok / high.usd_per_mtok)


def spot_discounts(table: Sequence[Price] | None = None, **kw: Any) -> list[ClaimResult]:
    """(Lab 06) Check the spot claim for every chip/cloud that lists both spot and on-demand."""
    rows = PRICES if table is None else table
    # pair each spot price with an on-demand price read on the same page (same chip, cloud)
    return [check_spot_discount(od, sp, **kw) for sp in rows if sp.pricing == "spot"
            for od in rows if od.pricing == "on_demand" and (od.chip, od.cloud, od.source)
            == (sp.chip, sp.cloud, sp.source)]


CLAIMS: tuple[Claim, ...] = (
    Claim("TPU serving is 2-4x cheaper per token", check_tpu_serving_cheaper),
    Claim("An H100 reaches ~52% MFU while a TPU reaches ~58%", check_mfu_gap),
    Claim("Spot is 70% cheaper", check_spot_discount),
    Claim("A low MFU can still be cheaper", check_low_mfu_cheaper),
)

__all__ = ["ClaimResult", "Claim", "CLAIMS", "check_tpu_serving_cheaper", "check_mfu_gap",
           "check_spot_discount", "check_low_mfu_cheaper", "spot_discounts"]
