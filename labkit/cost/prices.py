"""(Lab 06) A dated price table: $ per chip-hour by chip, cloud and pricing kind, each with a source.

PRICES MOVE. Every figure in PRICES is a public list price as recalled for its `as_of` month,
with the vendor page it came from. Clouds change prices (and by region) without notice: check
the source and pass your own `Price(...)` (or a plain $/chip-hour float) before deciding.
The input checks every Lab 06 module shares (`positive`, `check_fraction`, `hourly_usd`) live here.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Sequence

from labkit.runtime import hardware

PRICE_WARNING = ("Prices are list prices recalled for each entry's as_of month; they move often "
                 "and differ by region. Check the source URL and override with your own Price.")
PRICING_KINDS = ("on_demand", "spot", "committed_1y", "committed_3y")
_AS_OF = re.compile(r"^(19|20)\d\d-(0[1-9]|1[0-2])$")  # "YYYY-MM"


# ---------------------------------------------------------------- validation helpers
def positive(x: Any, what: str) -> float:
    """(Lab 06) x as a float if it is a finite number > 0, else a ValueError naming `what`."""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not math.isfinite(x) or x <= 0:
        raise ValueError(f"{what} must be a finite number > 0, got {x!r}")
    return float(x)


def check_fraction(x: Any, what: str) -> float:
    """(Lab 06) x as a float if it lies in (0, 1] (utilization, MFU), else a ValueError."""
    if isinstance(x, bool) or not isinstance(x, (int, float)) or not 0 < x <= 1:
        raise ValueError(f"{what} must be in (0, 1], got {x!r}")
    return float(x)


def check_pricing(kind: str) -> None:
    """(Lab 06) Raise a ValueError listing PRICING_KINDS unless kind is one of them."""
    if kind not in PRICING_KINDS:
        raise ValueError(f"unknown pricing kind {kind!r}; use one of {', '.join(PRICING_KINDS)}")


@dataclass(frozen=True)
class Price:
    """(Lab 06) One dated price: $ per chip-hour for a chip on a cloud under a pricing kind."""
    chip: str                  # canonical name from labkit.runtime.hardware, e.g. "TPU v5e"
    cloud: str                 # "GCP", "AWS", "Azure", "Lambda", "on-prem", ...
    pricing: str               # one of PRICING_KINDS
    usd_per_chip_hour: float   # $/chip-hour
    as_of: str                 # "YYYY-MM": the month the figure is believed valid
    source: str                # where it came from: text + URL
    region: str = ""
    note: str = ""             # what the figure includes (host VM or not), how sure we are

    def __post_init__(self) -> None:
        check_pricing(self.pricing)
        positive(self.usd_per_chip_hour, "usd_per_chip_hour ($/chip-hour)")
        if not _AS_OF.match(str(self.as_of)):
            raise ValueError(f"as_of must be a 'YYYY-MM' date string, got {self.as_of!r}")
        if not str(self.source).strip():
            raise ValueError("every Price needs a source (text + URL, or 'my quote, <date>')")


def hourly_usd(usd_per_chip_hour: float | Price) -> float:
    """(Lab 06) $/chip-hour from a float or a Price (so a Price works wherever a price is needed)."""
    if isinstance(usd_per_chip_hour, Price):
        return usd_per_chip_hour.usd_per_chip_hour
    return positive(usd_per_chip_hour, "usd_per_chip_hour ($/chip-hour)")


_TPU = "Google Cloud TPU pricing, https://cloud.google.com/tpu/pricing"
_GCE = "Google Compute Engine GPU pricing, https://cloud.google.com/compute/gpus-pricing"
_AWS = "Amazon EC2 On-Demand pricing, https://aws.amazon.com/ec2/pricing/on-demand/"
_AZ = ("Azure Linux VM pricing, "
       "https://azure.microsoft.com/en-us/pricing/details/virtual-machines/linux/")
_LAM = "Lambda GPU Cloud pricing, https://lambdalabs.com/service/gpu-cloud#pricing"
_VM = "whole-VM $/h / GPUs (vCPU, RAM included); recalled list price"
_SPOT = "spot prices float (can change monthly); low-confidence recalled figure"


def _tpu_rows(chip: str, on_demand: float, y1: float, y3: float, as_of: str,
              region: str = "US") -> tuple[Price, ...]:
    note = "per chip-hour, host VM included; recalled list price"
    return tuple(Price(chip, "GCP", kind, usd, as_of, _TPU, region, note) for kind, usd in
                 (("on_demand", on_demand), ("committed_1y", y1), ("committed_3y", y3)))


PRICES: tuple[Price, ...] = (  # $/chip-hour; see PRICE_WARNING
    *_tpu_rows("TPU v5e", 1.20, 0.84, 0.54, "2024-06"),
    *_tpu_rows("TPU v5p", 4.20, 2.94, 1.89, "2024-06"),
    *_tpu_rows("TPU v6e", 2.70, 1.89, 1.22, "2025-01"),
    *_tpu_rows("TPU v4", 3.22, 2.03, 1.45, "2024-06", "us-central2"),
    Price("NVIDIA T4", "GCP", "on_demand", 0.35, "2024-06", _GCE, "us-central1",
          "GPU only; the VM is billed on top; recalled list price"),
    Price("NVIDIA L4", "GCP", "on_demand", 0.71, "2024-06", _GCE, "us-central1",
          "g2-standard-4 (1 L4); " + _VM),
    Price("NVIDIA A100 SXM 40GB", "GCP", "on_demand", 3.67, "2024-06", _GCE, "us-central1",
          "a2-highgpu-1g; " + _VM),
    Price("NVIDIA A100 SXM 40GB", "GCP", "spot", 1.17, "2024-06", _GCE, "us-central1",
          "a2-highgpu; " + _SPOT),
    Price("NVIDIA A100 SXM 80GB", "GCP", "on_demand", 5.07, "2024-06", _GCE, "us-central1",
          "a2-ultragpu-1g; " + _VM),
    Price("NVIDIA H100 SXM", "GCP", "on_demand", 11.06, "2024-06", _GCE, "us-central1",
          "a3-highgpu-8g ~$88.5/h / 8; " + _VM),
    Price("NVIDIA H100 SXM", "GCP", "spot", 2.25, "2024-06", _GCE, "us-central1",
          "a3-highgpu; " + _SPOT),
    Price("NVIDIA H100 SXM", "AWS", "on_demand", 12.29, "2024-06", _AWS, "us-east-1",
          "p5.48xlarge $98.32/h / 8; " + _VM),
    Price("NVIDIA H100 SXM", "AWS", "on_demand", 6.88, "2025-06", _AWS, "us-east-1",
          "p5.48xlarge after AWS's June 2025 cut, ~$55/h / 8; " + _VM),
    Price("NVIDIA A100 SXM 40GB", "AWS", "on_demand", 4.10, "2024-06", _AWS, "us-east-1",
          "p4d.24xlarge $32.77/h / 8; " + _VM),
    Price("NVIDIA A100 SXM 80GB", "AWS", "on_demand", 5.12, "2024-06", _AWS, "us-east-1",
          "p4de.24xlarge $40.97/h / 8; " + _VM),
    Price("NVIDIA H100 SXM", "Azure", "on_demand", 12.29, "2024-06", _AZ, "East US",
          "ND96isr H100 v5 $98.32/h / 8; " + _VM),
    Price("NVIDIA A100 SXM 80GB", "Azure", "on_demand", 4.10, "2024-06", _AZ, "East US",
          "ND96amsr A100 v4 $32.77/h / 8; " + _VM),
    Price("NVIDIA H100 SXM", "Lambda", "on_demand", 2.99, "2025-01", _LAM, "",
          "8x H100 SXM instance, per GPU; recalled list price"),
    Price("NVIDIA H100 PCIe", "Lambda", "on_demand", 2.49, "2025-01", _LAM, "",
          "1x H100 PCIe instance; recalled list price"),
    Price("NVIDIA A100 SXM 40GB", "Lambda", "on_demand", 1.29, "2025-01", _LAM, "",
          "1x A100 SXM 40GB instance; recalled list price"),
    Price("NVIDIA A100 SXM 80GB", "Lambda", "on_demand", 1.79, "2025-01", _LAM, "",
          "8x A100 SXM 80GB instance, per GPU; recalled list price"),
)


# ---------------------------------------------------------------- lookups
def _canonical(chip: str) -> str:
    spec = hardware.lookup(chip)  # reported names too: "TPU v5 lite" -> "TPU v5e"
    return spec.name if spec is not None else chip


def prices(chip: str | None = None, cloud: str | None = None, pricing: str | None = None,
           *, table: Sequence[Price] | None = None) -> list[Price]:
    """(Lab 06) Price entries matching chip / cloud / pricing (None = any); see PRICE_WARNING."""
    if pricing is not None:
        check_pricing(pricing)
    want = _canonical(chip) if chip is not None else None
    rows = [p for p in (PRICES if table is None else table)
            if (want is None or p.chip == want)
            and (cloud is None or p.cloud.lower() == cloud.lower())
            and (pricing is None or p.pricing == pricing)]
    return sorted(rows, key=lambda p: (p.chip, p.cloud, p.pricing, p.as_of))


def price(chip: str, cloud: str | None = None, pricing: str = "on_demand",
          *, table: Sequence[Price] | None = None) -> Price:
    """(Lab 06) One Price: the newest entry per cloud, cheapest cloud if cloud is None."""
    rows = prices(chip, cloud, pricing, table=table)
    if not rows:
        have = sorted({p.chip for p in (PRICES if table is None else table)})
        where = f" on {cloud}" if cloud else ""
        raise ValueError(f"no {pricing} price for {chip!r}{where}; chips with prices: "
                         f"{', '.join(have)}. Pass your own Price(...) or $/chip-hour float.")
    newest: dict[tuple[str, str], Price] = {}
    for p in rows:  # rows are sorted by as_of, so the last one per (cloud, region) wins
        newest[(p.cloud, p.region)] = p
    return min(newest.values(), key=lambda p: p.usd_per_chip_hour)


def with_override(*overrides: Price, table: Sequence[Price] | None = None) -> tuple[Price, ...]:
    """(Lab 06) A new table where each override replaces same chip/cloud/region/pricing rows."""
    keys = {(o.chip, o.cloud, o.region, o.pricing) for o in overrides}
    kept = [p for p in (PRICES if table is None else table)
            if (p.chip, p.cloud, p.region, p.pricing) not in keys]
    return tuple(kept) + tuple(overrides)


__all__ = ["PRICE_WARNING", "PRICING_KINDS", "PRICES", "Price", "positive", "check_fraction",
           "check_pricing", "hourly_usd", "prices", "price", "with_override"]
