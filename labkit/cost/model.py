"""(Lab 06) What a token costs: $ per million tokens for training and serving, on-prem $/hour,
sensitivity, and break-even between two options.

The dated price table lives in `labkit.cost.prices` (PRICES MOVE: see PRICE_WARNING) and is
re-exported here, so `cost.PRICES` and `cost.price(...)` work; the seed articles' claims are
tested in `labkit.cost.seeds` (the register of `labkit.cost.register`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from labkit.runtime import hardware
from labkit.cost.prices import (PRICE_WARNING, PRICES, PRICING_KINDS, Price, check_fraction,
                                check_price_chip, check_pricing, hourly_usd, positive, price, prices,
                                with_override)

HOURS_PER_YEAR = 8760.0
_UTIL = "utilization (fraction of reserved time doing useful work)"


def check_chips(n_chips: Any) -> None:
    """(Lab 06) Raise a ValueError unless n_chips is an integer >= 1."""
    if isinstance(n_chips, bool) or not isinstance(n_chips, int) or n_chips < 1:
        raise ValueError(f"n_chips must be an integer >= 1, got {n_chips!r}")


def non_negative(x: Any, what: str) -> float:
    """(Lab 06) x as a float if it is a finite number >= 0, else a ValueError naming `what`."""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x < 0:
        raise ValueError(f"{what} must be a finite number >= 0, got {x!r}")
    return float(x)


def finite(x: Any, what: str) -> float:
    """(Lab 06) x as a float if it is a finite number, else a ValueError naming `what`."""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x):
        raise ValueError(f"{what} must be a finite number, got {x!r}")
    return float(x)


# ---------------------------------------------------------------- $ per million tokens
@dataclass(frozen=True)
class CostResult:
    """(Lab 06) Cost per million tokens, with the inputs and the arithmetic in `why`."""
    phase: str                  # "train" | "serve"
    tokens_per_s: float         # tokens/s of the whole job (all n_chips) while working
    n_chips: int
    usd_per_chip_hour: float    # $/chip-hour
    utilization: float          # fraction of reserved time doing useful work
    usd_per_hour: float         # $/hour for all reserved chips
    usd_per_mtok: float         # $ per 1e6 tokens
    chip: str | None = None
    mfu: float | None = None    # given, or implied by tokens/s x FLOPs/token / peak
    flops_per_token: float | None = None
    why: str = ""


def _result(phase: str, tps: float, n_chips: int, rate: float, util: float, prefix: str = "",
            **extra: Any) -> CostResult:
    usd_h = rate * n_chips                           # $/hour for the reservation
    tok_h = tps * 3600.0 * util                      # useful tokens per reserved hour
    mtok = usd_h / tok_h * 1e6                       # $/Mtok
    why = (f"{prefix}{n_chips} chip(s) x ${rate:.4g}/chip-h = ${usd_h:.4g}/h; {tps:,.6g} tok/s x "
           f"3600 s/h x {util:.3g} utilization = {tok_h / 1e6:,.6g} Mtok/h; "
           f"${usd_h:.4g}/h / {tok_h / 1e6:,.6g} Mtok/h = ${mtok:.4g}/Mtok")
    return CostResult(phase, tps, n_chips, rate, util, usd_h, mtok, why=why, **extra)


def _peak_flops(chip: str | None, dtype: str, peak_tflops: float | None) -> float:
    """Peak FLOP/s per chip: explicit override, else the labkit.runtime.hardware spec for dtype."""
    if peak_tflops is not None:
        return positive(peak_tflops, "peak_tflops (TFLOP/s per chip)") * 1e12
    if chip is None:
        raise ValueError("MFU-derived throughput needs chip= (a known chip) or peak_tflops=")
    spec = hardware.lookup(chip)
    if spec is None:
        raise ValueError(f"unknown chip {chip!r}: pass peak_tflops=<TFLOP/s per chip> for it, "
                         f"or use a known chip: {', '.join(hardware.CHIPS)}")
    peak = spec.peak(dtype)  # FLOP/s; raises ValueError for an unknown dtype name
    if peak is None:
        raise ValueError(f"{spec.name} has no native {dtype} peak; use dtype= one of "
                         f"{spec.supported()} or pass peak_tflops=")
    return float(peak)


def train_cost_per_mtok(tokens_per_s: float | None = None, *, flops_per_token: float | None = None,
                        chip: str | None = None, mfu: float | None = None, n_chips: int = 1,
                        usd_per_chip_hour: float | Price, utilization: float = 1.0,
                        dtype: str = "bf16", peak_tflops: float | None = None) -> CostResult:
    """(Lab 06) Training $/Mtok from measured tokens/s, or MFU x chips x peak / FLOPs per token."""
    rate = hourly_usd(usd_per_chip_hour)
    chip = check_price_chip(usd_per_chip_hour, chip)  # a Price's chip; refused if chip= names another
    check_chips(n_chips)
    util = check_fraction(utilization, _UTIL)
    if (tokens_per_s is None) == (mfu is None):
        raise ValueError("give exactly one of tokens_per_s (measured, whole job) or mfu= "
                         "(with flops_per_token= and chip= or peak_tflops=)")
    prefix = ""
    if mfu is not None:
        mfu = check_fraction(mfu, "mfu")
        fpt = positive(flops_per_token, "flops_per_token (FLOPs per token)")
        peak = _peak_flops(chip, dtype, peak_tflops)  # FLOP/s per chip
        tps = mfu * n_chips * peak / fpt              # tokens/s
        prefix = (f"tokens/s = MFU {mfu:.3g} x {n_chips} chip(s) x {peak / 1e12:.4g} TFLOP/s "
                  f"/ {fpt:.4g} FLOPs/token = {tps:,.6g} tok/s; ")
    else:
        tps = positive(tokens_per_s, "tokens_per_s (tokens/s)")
        if flops_per_token is not None and (chip is not None or peak_tflops is not None):
            fpt = positive(flops_per_token, "flops_per_token (FLOPs per token)")
            peak = _peak_flops(chip, dtype, peak_tflops)  # FLOP/s per chip
            mfu = tps * fpt / (n_chips * peak)  # implied MFU
            if mfu > 1:  # more useful FLOP/s than the peak: the inputs disagree (units, chips, peak)
                raise ValueError(
                    f"tokens_per_s={tokens_per_s!r} x flops_per_token={flops_per_token!r} = "
                    f"{tps * fpt:.4g} FLOP/s is {mfu:,.4g}x the peak of {n_chips} chip(s) x "
                    f"{peak / 1e12:.4g} TFLOP/s: an implied MFU above 1 is impossible. Check that "
                    f"tokens_per_s is for the whole job (all n_chips), flops_per_token is per token "
                    f"(about 6 x parameters for training), n_chips, and peak_tflops (in TFLOP/s).")
    return _result("train", tps, n_chips, rate, util, prefix, chip=chip, mfu=mfu,
                   flops_per_token=flops_per_token)


def serve_cost_per_mtok(tokens_per_s: float, usd_per_chip_hour: float | Price, n_chips: int = 1,
                        utilization: float = 1.0, *, chip: str | None = None) -> CostResult:
    """(Lab 06) Serving $/Mtok from the deployment's tokens/s (all n_chips together); chip= must match a Price's."""
    tps = positive(tokens_per_s, "tokens_per_s (tokens/s)")
    check_chips(n_chips)
    util = check_fraction(utilization, _UTIL)
    chip = check_price_chip(usd_per_chip_hour, chip)  # a Price's chip; refused if chip= names another
    return _result("serve", tps, n_chips, hourly_usd(usd_per_chip_hour), util, chip=chip)


def onprem_usd_per_hour(capex_usd: float, years: float, power_w: float, usd_per_kwh: float,
                        pue: float = 1.0, opex_usd_per_year: float = 0.0) -> float:
    """(Lab 06) On-prem $/chip-hour: straight-line capex + power x PUE + opex, per chip."""
    capex = positive(capex_usd, "capex_usd ($ per chip incl. its share of host/network)")
    life_h = positive(years, "years (amortisation period)") * HOURS_PER_YEAR  # hours
    power_w = non_negative(power_w, "power_w (W per chip)")
    usd_per_kwh = non_negative(usd_per_kwh, "usd_per_kwh ($ per kWh)")
    opex_usd_per_year = non_negative(opex_usd_per_year, "opex_usd_per_year ($ per chip per year)")
    if finite(pue, "pue (facility power / IT power)") < 1:
        raise ValueError(f"pue (facility power / IT power) must be >= 1, got {pue!r}; 1.0 is a "
                         f"perfect facility, 1.1-1.6 is typical")
    energy = power_w / 1000.0 * pue * usd_per_kwh     # $/h: kW x PUE x $/kWh
    return capex / life_h + energy + opex_usd_per_year / HOURS_PER_YEAR


# ---------------------------------------------------------------- sensitivity and break-even
def _mtok(r: Any) -> float:
    """$/Mtok from a CostResult or a plain number."""
    return float(r.usd_per_mtok if isinstance(r, CostResult) else r)


def sensitivity(fn: Callable[..., Any], base_kwargs: Mapping[str, Any], param: str,
                values: Sequence[float]) -> list[tuple[float, float]]:
    """(Lab 06) (value, $/Mtok) pairs as one parameter of a cost function varies, for plotting."""
    if not isinstance(param, str):
        raise TypeError(f"param must be the name of a keyword argument of fn, got {param!r}")
    return [(v, _mtok(fn(**{**base_kwargs, param: v}))) for v in values]


@dataclass(frozen=True)
class BreakEven:
    """(Lab 06) Where two options cost the same per token; value is None when they never cross."""
    param: str
    value: float | None            # the parameter value where $/Mtok(A) == $/Mtok(B)
    usd_per_mtok: float | None     # the common cost there
    method: str                    # "closed form (linear in x)", "... (linear in 1/x)", "bisection"
    reason: str

    def __bool__(self) -> bool:
        return self.value is not None


Option = tuple[Callable[..., Any], Mapping[str, Any]]  # (cost function, its keyword arguments)


def _affine_root(xs: list[float], ds: list[float]) -> tuple[bool, float | None]:
    """(True, root or None if parallel) when ds is affine in xs to rounding; else (False, None)."""
    slope = (ds[-1] - ds[0]) / (xs[-1] - xs[0])
    scale = max(abs(d) for d in ds) or 1.0
    if any(abs(ds[0] + slope * (x - xs[0]) - d) > 1e-9 * scale for x, d in zip(xs, ds)):
        return False, None
    return True, (None if abs(slope) <= 1e-15 * scale else xs[0] - ds[0] / slope)


def break_even(option_a: Option, option_b: Option, param: str, lo: float, hi: float,
               *, vary: str = "both", tol: float = 1e-10) -> BreakEven:
    """(Lab 06) Where $/Mtok(A) == $/Mtok(B) for param in [lo, hi]; closed form if linear."""
    lo, hi = finite(lo, f"lo (lower end of the {param} range)"), finite(hi, f"hi (upper end of the {param} range)")
    if not lo < hi:
        raise ValueError(f"need lo < hi, got lo={lo!r}, hi={hi!r}")
    if positive(tol, "tol (bisection tolerance)") >= 1:
        raise ValueError(f"tol is a relative tolerance and must be < 1, got {tol!r}; the default is 1e-10")
    if vary not in ("a", "b", "both"):
        raise ValueError(f"vary must be 'a', 'b' or 'both', got {vary!r}")

    def cost(opt: Option, x: float, varies: bool) -> float:
        fn, kw = opt
        return _mtok(fn(**({**kw, param: x} if varies else kw)))

    def diff(x: float) -> float:  # $/Mtok(A) - $/Mtok(B)
        return cost(option_a, x, vary != "b") - cost(option_b, x, vary != "a")

    xs = [lo + (hi - lo) * i / 4 for i in range(5)]  # 5 samples decide linear or not
    ds = [diff(x) for x in xs]
    found = None
    for name, t in (("x", lambda x: x), ("1/x", lambda x: 1.0 / x)):
        if name == "1/x" and lo <= 0:
            continue
        linear, root = _affine_root([t(x) for x in xs], ds)
        if linear:
            method = f"closed form (cost difference is linear in {name})"
            if root is not None and name == "1/x":
                root = 1.0 / root if root != 0 else None  # u = 1/x = 0 means x = infinity
            if root is not None and lo - tol <= root <= hi + tol:
                found = min(max(root, lo), hi)
            break
    else:
        method = "bisection (cost difference is not linear in x or 1/x)"
        grid = [lo + (hi - lo) * i / 64 for i in range(65)]
        vals = [diff(x) for x in grid]
        for a, b, fa, fb in zip(grid, grid[1:], vals, vals[1:]):
            if fa * fb <= 0:  # first bracket with a sign change (or an exact zero)
                for _ in range(200):
                    m = 0.5 * (a + b)
                    if b - a <= tol * (1 + abs(m)):
                        break
                    fm = diff(m)
                    if fa * fm <= 0:
                        b = m
                    else:
                        a, fa = m, fm
                found = 0.5 * (a + b)
                break
    if found is None:
        ca, cb = cost(option_a, lo, vary != "b"), cost(option_b, lo, vary != "a")
        if max(abs(d) for d in ds) == 0:
            why = f"A and B cost the same (${ca:.4g}/Mtok) for every {param} in [{lo}, {hi}]"
        else:
            cheaper = "A" if ca < cb else "B"
            why = (f"no crossing for {param} in [{lo}, {hi}]: {cheaper} is cheaper throughout "
                   f"(at {param}={lo}: A ${ca:.4g}/Mtok, B ${cb:.4g}/Mtok)"
                   + ("; searched a 65-point grid" if method.startswith("bisection") else ""))
        return BreakEven(param, None, None, method, why)
    usd = cost(option_a, found, vary != "b")
    return BreakEven(param, found, usd, method,
                     f"A and B both cost ${usd:.4g}/Mtok at {param}={found:.6g}")


__all__ = [
    # cost model (this module)
    "HOURS_PER_YEAR", "CostResult", "train_cost_per_mtok", "serve_cost_per_mtok",
    "onprem_usd_per_hour", "sensitivity", "BreakEven", "Option", "break_even", "check_chips",
    "non_negative", "finite",
    # re-exported from labkit.cost.prices
    "PRICE_WARNING", "PRICING_KINDS", "PRICES", "Price", "price", "prices", "with_override",
    "positive", "check_fraction", "check_pricing", "hourly_usd",
]
