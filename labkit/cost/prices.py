"""(Lab 06) A price table with provenance: $ per chip-hour by chip, cloud and pricing kind.

PRICES MOVE. Every figure in PRICES was read on a published page (URL), with the date the page
shows ("undated" where it shows none), the date it was read, the region and the term. Many are
third-party summaries (`publisher`), not the vendor's own page: the note says so. `warnings`
flags entries older than 12 months (or undated) at run time; a row that a later one replaces
carries `superseded` (why), stays in the table and enters no verdict (`left_out`, `current`).
The two ends of one range a page quotes are two rows marked `range_end`. Pass your own
`Price(...)` (see `my_price`) before deciding. The input checks every Lab 06 module shares (`positive`,
`check_fraction`, `hourly_usd`) live here.
"""
from __future__ import annotations

import datetime as dt
import math
import re
import warnings as _warnings
from dataclasses import dataclass
from typing import Any, Sequence

from labkit.runtime import hardware

PRICE_WARNING = ("Prices were read on the pages named in `source` on `read_date`; they move often "
                 "and differ by region and term. Check the page and override with your own Price.")
PRICING_KINDS = ("on_demand", "spot", "reserved", "committed_1y", "committed_3y")
READ = "2026-11-24"   # the date most of this table's pages were read
RECHECK = "2026-11-26"  # pages read again (units checked) or added on this date
TPU_RECHECK = "2026-11-29"  # the TPU pages read against each other: a dated per-chip page added
READ_DATES = (READ, RECHECK, TPU_RECHECK)
STALE_DAYS = 365      # a price older than this at run time gets a warning
_DATE = re.compile(r"^(19|20)\d\d-(0[1-9]|1[0-2])(-(0[1-9]|[12]\d|3[01]))?$")  # YYYY-MM[-DD]


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


# hardware's error for an unknown chip (a LookupError and a ValueError), its did-you-mean included
UnknownChipError, unknown_chip = hardware.UnknownChipError, hardware.unknown_chip


def _chip_name(chip: Any, example: str) -> str:
    """chip stripped, if it is a non-empty str; else a TypeError / ValueError showing `example`."""
    if not isinstance(chip, str):
        raise TypeError(f"chip must be a chip name (str), e.g. {example}, got {chip!r} ({type(chip).__name__})")
    if not chip.strip():
        raise ValueError(f"chip must be a chip name, e.g. {example}, got the empty name {chip!r}")
    return chip.strip()


def check_price(p: Any, what: str = "p") -> Price:
    """(Lab 06) p if it is a Price, else a TypeError saying how to make one."""
    if not isinstance(p, Price):
        raise TypeError(f"{what} must be a Price (a row of PRICES, or my_price('TPU v5e', 1.20) for your own "
                        f"quote), got {p!r} ({type(p).__name__})")
    return p


def check_table(table: Any) -> tuple[Price, ...]:
    """(Lab 06) The price table to use: PRICES for None, else a list / tuple of Price rows (TypeError if not)."""
    if table is None:
        return PRICES
    if isinstance(table, (str, bytes)) or not isinstance(table, Sequence):
        raise TypeError(f"table must be a list or tuple of Price rows, e.g. with_override(my_price('TPU v5e', "
                        f"1.20)), got {table!r} ({type(table).__name__})")
    for i, p in enumerate(table):
        check_price(p, f"table[{i}]")
    return tuple(table)


def _day(d: str) -> dt.date:
    """A 'YYYY-MM' or 'YYYY-MM-DD' string as a date (a month counts from its first day)."""
    return dt.date.fromisoformat(d if len(d) == 10 else d + "-01")


@dataclass(frozen=True)
class Price:
    """(Lab 06) One published price: $ per chip-hour, where it was read, when, and on what terms."""
    chip: str                  # canonical name from labkit.runtime.hardware, e.g. "TPU v5e"
    cloud: str                 # "GCP", "AWS", "Lambda", "RunPod", "CoreWeave", "yours", ...
    pricing: str               # one of PRICING_KINDS
    usd_per_chip_hour: float   # $/chip-hour (a node price divided by its chips)
    source: str                # the page's URL (or "your own quote")
    page_date: str             # the date the page shows, "YYYY-MM[-DD]", or "undated"
    read_date: str = READ      # when it was read, "YYYY-MM-DD"
    region: str = "not stated"
    term: str = "hourly, no commitment"
    publisher: str = "third-party"  # "vendor" (the seller's own page), "third-party", "yours"
    note: str = ""             # what the figure includes, how it was derived
    superseded: str = ""       # why a later row replaces this one ("" = still in force); kept, shown
    range_end: str = ""        # "low" / "high": one end of a range the page quotes (two rows, one page)

    def __post_init__(self) -> None:
        check_pricing(self.pricing)
        if self.range_end not in ("", "low", "high"):
            raise ValueError(f"range_end must be '', 'low' or 'high' (an end of a range the page quotes), "
                             f"got {self.range_end!r}")
        positive(self.usd_per_chip_hour, "usd_per_chip_hour ($/chip-hour)")
        for what, d in (("page_date", self.page_date), ("read_date", self.read_date)):
            if not (_DATE.match(str(d)) or (what == "page_date" and d == "undated")):
                raise ValueError(f"{what} must be 'YYYY-MM' or 'YYYY-MM-DD'"
                                 f"{' or undated' if what == 'page_date' else ''}, got {d!r}")
        if not str(self.source).strip():
            raise ValueError("every Price needs a source (a URL, or 'your own quote')")

    @property
    def site(self) -> str:
        """(Lab 06) Where it was read, short: the URL's host ("deploybase.ai"), or the source as given."""
        return self.source.split("/")[2] if "://" in self.source else self.source

    @property
    def as_of(self) -> str:
        """(Lab 06) The price's date: the page's own date, else the date it was read."""
        return self.read_date if self.page_date == "undated" else self.page_date


def age_days(p: Price, today: dt.date | str | None = None) -> int | None:
    """(Lab 06) Days from the page's own date to today; None for an undated page."""
    if check_price(p).page_date == "undated":
        return None
    now = _day(today) if isinstance(today, str) else (today or dt.date.today())
    return (now - _day(p.page_date)).days


def warnings(table: Sequence[Price] | None = None, today: dt.date | str | None = None) -> list[str]:
    """(Lab 06) One line per price older than STALE_DAYS at `today` (or undated): check it first."""
    out = []
    for p in check_table(table):
        age = age_days(p, today)
        if age is None:
            out.append(f"{p.chip} {p.cloud} {p.pricing} ${p.usd_per_chip_hour:.4g}/h: page undated "
                       f"(read {p.read_date}); its age is unknown")
        elif age > STALE_DAYS:
            out.append(f"{p.chip} {p.cloud} {p.pricing} ${p.usd_per_chip_hour:.4g}/h: STALE, page "
                       f"dated {p.page_date}, {age // 30} months old")
    return out


def left_out(p: Price) -> str | None:
    """(Lab 06) Why a price enters no verdict (superseded, or stale when read); None if it may."""
    if check_price(p).superseded:
        return f"superseded: {p.superseded}"
    age = age_days(p, p.read_date)   # None: undated, its age unknown; kept, and warned about
    if age is not None and age > STALE_DAYS:
        return f"stale: the page was dated {p.page_date}, {age // 30} months before it was read"
    return None


def current(p: Price) -> bool:
    """(Lab 06) Whether a price may enter a verdict: not superseded, and not stale when read."""
    return left_out(p) is None


def primary(p: Price) -> bool:
    """(Lab 06) Whether a price comes from the seller's own page (or your quote), not a summary."""
    return check_price(p).publisher in ("vendor", "yours")


def my_price(chip: str, usd_per_chip_hour: float, cloud: str = "yours", pricing: str = "on_demand",
             note: str = "") -> Price:
    """(Lab 06) The learner's own quote as a Price, dated today (chip: a name hardware.lookup knows, canonicalised)."""
    name = _chip_name(chip, "my_price('TPU v5e', 1.20)")
    spec = hardware.lookup(name)  # reported names too: "TPU v5 lite" -> "TPU v5e"
    if spec is not None:
        name = spec.name
    elif hits := hardware.variants(name):  # part of listed names ("v5e", "H100"): the override would replace nothing
        raise unknown_chip(name, f"see hardware.CHIPS, e.g. my_price({hits[0]!r}, {usd_per_chip_hour!r}): "
                                 f"a quote under a shorthand replaces no published row")
    elif "did you mean" in str(hardware.unknown_chip(name, "")):
        # Close to a listed name ("TPU v9"), but real unlisted chips are close too ("NVIDIA B200" ~ "H200"), and
        # Lab 06 passes this runtime's own chip name here when labkit does not list it: kept as given, said aloud.
        _warnings.warn(str(unknown_chip(name, f"keep it if labkit does not list that chip: the quote keeps the "
                                              f"name {name!r} and replaces no published row")), stacklevel=2)
    # A name nothing resembles ("Intel(R) Xeon(R) Processor", this CPU): your own hardware, kept as given.
    today = dt.date.today().isoformat()
    return Price(name, cloud, pricing, usd_per_chip_hour, "your own quote", today, today,
                 publisher="yours", note=note)


def hourly_usd(usd_per_chip_hour: float | Price) -> float:
    """(Lab 06) $/chip-hour from a float or a Price (so a Price works wherever a price is needed)."""
    if isinstance(usd_per_chip_hour, Price):
        return usd_per_chip_hour.usd_per_chip_hour
    return positive(usd_per_chip_hour, "usd_per_chip_hour ($/chip-hour)")


def check_price_chip(usd_per_chip_hour: float | Price, chip: str | None) -> str | None:
    """(Lab 06) The chip a cost is for: chip, else the Price's; a ValueError if a Price is for another chip."""
    if not isinstance(p := usd_per_chip_hour, Price):
        return chip
    if chip is None:
        return p.chip
    same = [hardware.describe(c) if hardware.lookup(c) else " ".join(str(c).split()) for c in (chip, p.chip)]
    if same[0] != same[1]:
        raise ValueError(f"usd_per_chip_hour is a price for {p.chip!r}, but chip={chip!r}: that would cost {chip} "
                         f"hours at {p.chip}'s $/h. Pass that chip's price (e.g. price({chip!r})), or "
                         f"chip={p.chip!r}, or leave chip= out")
    return chip


H100, V5E, V5P = "NVIDIA H100 SXM", "TPU v5e", "TPU v5p"
_SPEC = "https://computespec.pages.dev/learn/pricing/cloud-gpu-pricing-explained"
_Q1 = "https://digiterialabs.com/ai/insights/cloud-gpu-pricing-q1-2026"
_CB = "http://sibshop.uat.jiralog.com/ec2/capacityblocks/pricing"
_TB = "https://techbytes.app/posts/serverless-gpu-pricing-matrix-modal-replicate-lambda-2026/"
_8X = "https://techplained.aptechsolutions.io/runpod-vs-vast-ai"
_SPH = "https://www.spheron.network/blog/runpod-h100-pricing-2026/"
_CW = "https://gridstackhub.ai/learn/reserved-vs-spot-vs-on-demand-gpu"
_DB = "https://deploybase.ai/articles/google-cloud-tpu-pricing"
_EC = "https://blog.easecloud.io/ai-cloud/llm-throughput-with-google-tpu-v5p"
_PG = "https://pricegpu.pages.dev/blog/h100-vs-a100-cloud-price"
_AW = "https://artificial-intelligence-wiki.com/ai-development/ai-hardware-infrastructure/tpu-v5-guide"
# deploybase's per-core figures against the dated per-chip page: why its rows enter no verdict.
_DB_LOW = ("undated per-core figures that make v5e $0.32 and v5p $0.96 per chip-hour, about 4x below the "
           "per-chip figures ($1.2, $4.2) of a page dated 2026-01-27 (artificial-intelligence-wiki.com); "
           "read again on " + TPU_RECHECK)
# TensorCores per chip (Cloud TPU docs): a per-core price times these is a per-chip price.
CORES_PER_CHIP = {V5E: 1, V5P: 2}
_NODE = "8-GPU node price / 8"

PRICES: tuple[Price, ...] = (  # $/chip-hour, every row read on READ; see PRICE_WARNING
    Price(H100, "AWS", "on_demand", 98.32 / 8, _SPEC, "undated", note="p5.48xlarge $98.32/h; " + _NODE,
          superseded="p5.48xlarge's $98.32/h is its price before the cut that the Q1 2026 page "
          "(digiterialabs.com) dates 15 January; that page's $80.62/h ($10.08/GPU) replaces it"),
    Price(H100, "AWS", "on_demand", 80.62 / 8, _Q1, "undated", region="not stated",
          note="p5.48xlarge after a cut the page dates 15 January (title: Q1 2026); " + _NODE),
    Price(H100, "AWS", "reserved", 4.916, _CB, "2024-12", region="US East (N. Virginia)",
          term="EC2 Capacity Block, paid up front",
          note="a copy of AWS's Capacity Blocks page on a non-AWS host (sibshop.uat.jiralog.com), so "
          "third-party, not AWS's own; rates 'to be updated on January 1, 2025'"),
    Price(H100, "Lambda", "on_demand", 3.78, _TB, "2026-05-07", note="1x H100 SXM instance"),
    Price("NVIDIA H100 PCIe", "Lambda", "on_demand", 2.86, _TB, "2026-05-07",
          note="1x H100 PCIe instance"),
    Price(H100, "Lambda", "reserved", 14.80 / 8, _8X, "2026-04", term="reservation",
          note="8x H100 SXM with InfiniBand $14.80/h; " + _NODE),
    Price(H100, "RunPod", "on_demand", 22.32 / 8, _8X, "2026-04", note="Secure Cloud 8x H100 "
          "$22.32/h; " + _NODE),
    Price(H100, "RunPod", "on_demand", 2.69, _SPH, "2026-05-22", note="Secure Cloud H100 SXM5"),
    Price(H100, "Vast.ai", "spot", 12.16 / 8, _8X, "2026-04", term="interruptible marketplace",
          note="14-day spot median floor, 8x H100 $12.16/h; " + _NODE),
    Price(H100, "CoreWeave", "on_demand", 2.23, _CW, "undated", note="heading says 2026"),
    Price(H100, "CoreWeave", "committed_1y", 1.79, _CW, "undated", term="1-year reservation",
          note="heading says 2026"),
    # deploybase quotes per TensorCore: "$0.32/core/hour" (v5e), "$0.48/core/hour" (v5p); read again
    # on RECHECK for the unit. Per chip = per core x CORES_PER_CHIP; its slice prices agree. Kept and
    # shown, but superseded (_DB_LOW): a dated page puts both chips about 4x higher per chip-hour.
    Price(V5E, "GCP", "on_demand", 0.32 * CORES_PER_CHIP[V5E], _DB, "undated", RECHECK,
          note="$0.32/core-h x 1 core per v5e chip (v5e-8 = 8 chips at $2.56/h); third-party summary",
          superseded=_DB_LOW),
    Price(V5E, "GCP", "committed_1y", 1.79 / 8, _DB, "undated", RECHECK, term="1-year commitment",
          note="v5e-8 $1.79/h / 8 chips; third-party summary",
          superseded="a discount on the same page's v5e-8 on-demand price, which is " + _DB_LOW),
    Price(V5E, "GCP", "committed_3y", 1.41 / 8, _DB, "undated", RECHECK, term="3-year commitment",
          note="v5e-8 $1.41/h / 8 chips; third-party summary",
          superseded="a discount on the same page's v5e-8 on-demand price, which is " + _DB_LOW),
    Price(V5P, "GCP", "on_demand", 0.48 * CORES_PER_CHIP[V5P], _DB, "undated", RECHECK,
          note="$0.48/core-h x 2 cores per v5p chip (v5p-8 = 8 cores = 4 chips at $3.84/h); "
          "third-party summary", superseded=_DB_LOW),
    Price(V5E, "GCP", "on_demand", 1.20, _AW, "2026-01-27", TPU_RECHECK,
          note="'$1.2/chip/hour', per chip as the page states; third-party summary (Google's own page is not "
          "in this table)"),
    Price(V5P, "GCP", "on_demand", 4.20, _AW, "2026-01-27", TPU_RECHECK,
          note="'$4.2/chip/hour', per chip as the page states; third-party summary (Google's own page is not "
          "in this table)"),
    Price(V5E, "GCP", "on_demand", 1.60, _EC, "undated", note="unit not stated, read as per chip-hour;"
          " title says 2026"),
    Price(V5P, "GCP", "on_demand", 4.00, _EC, "undated", note="the page's spot example: "
          "$4.00/h on-demand; chip not named on a v5p page; title says 2026"),
    Price(V5P, "GCP", "spot", 1.20, _EC, "undated", term="spot (preemptible)", note="the page's "
          "spot example: $1.20/h; chip not named on a v5p page; title says 2026"),
    Price(H100, "various", "on_demand", 2.49, _PG, "undated", RECHECK, note="low end of the page's "
          "'typical on-demand range' for H100 SXM 80GB, early 2026 ($2.49-3.99/h per GPU)", range_end="low"),
    Price(H100, "various", "on_demand", 3.99, _PG, "undated", RECHECK, note="high end of the same "
          "range; the page puts an 8x H100 node at $20-32/h", range_end="high"),
)

# ---------------------------------------------------------------- lookups
def _canonical(chip: Any, rows: Sequence[Price], example: str) -> str:
    """A chip query's name as the table spells it: hardware's canonical name, or a name some row carries."""
    name = _chip_name(chip, example)
    spec = hardware.lookup(name)  # reported names too: "TPU v5 lite" -> "TPU v5e"
    if spec is not None:
        return spec.name
    if any(p.chip == name for p in rows):  # a chip labkit does not list, quoted in this table (my_price)
        return name
    have = ", ".join(sorted({p.chip for p in rows}))
    raise unknown_chip(name, f"pick a chip priced in this table: {have}")


def _cloud(cloud: Any, rows: Sequence[Price]) -> str:
    """A cloud query, matched ignoring case and surrounding spaces; a ValueError listing the table's clouds."""
    if not isinstance(cloud, str):
        raise TypeError(f"cloud must be a cloud's name (str), e.g. cloud='GCP', got {cloud!r} ({type(cloud).__name__})")
    known = sorted({p.cloud for p in rows}, key=str.lower)
    if cloud.strip().lower() not in {c.lower() for c in known}:
        raise ValueError(f"unknown cloud {cloud!r}; clouds in this table: {', '.join(known)} (case and "
                         f"surrounding spaces are ignored), or None for any")
    return cloud.strip().lower()


def prices(chip: str | None = None, cloud: str | None = None, pricing: str | None = None,
           *, table: Sequence[Price] | None = None, current_only: bool = False) -> list[Price]:
    """(Lab 06) Price entries matching chip / cloud / pricing (None = any); current_only: only `current` ones.

    A chip hardware.lookup knows but the table has no price for gives []; a name it does not know (and
    no row carries) is refused with a did-you-mean. cloud ignores case and surrounding spaces; one not in
    the table is refused, listing those that are. See PRICE_WARNING.
    """
    rows = check_table(table)
    if pricing is not None:
        check_pricing(pricing)
    want = _canonical(chip, rows, "prices('TPU v5e')") if chip is not None else None
    where = _cloud(cloud, rows) if cloud is not None else None
    rows = [p for p in rows
            if (want is None or p.chip == want)
            and (where is None or p.cloud.lower() == where)
            and (pricing is None or p.pricing == pricing)]
    rows = sorted(rows, key=lambda p: (p.chip, p.cloud, p.pricing, p.as_of))
    return [p for p in rows if current(p)] if current_only else rows


def price(chip: str, cloud: str | None = None, pricing: str = "on_demand",
          *, table: Sequence[Price] | None = None) -> Price:
    """(Lab 06) One current Price: the newest entry per cloud, cheapest cloud if cloud is None."""
    if chip is None:  # prices(None) means every chip: the cheapest of them all is no chip's price
        raise TypeError("price needs one chip's name, e.g. price('TPU v5e'), got None")
    rows = prices(chip, cloud, pricing, table=table, current_only=True)
    if not rows:
        have = sorted({p.chip for p in check_table(table)})
        where = f" on {cloud}" if cloud else ""
        raise ValueError(f"no current {pricing} price for {chip!r}{where}; chips with prices: "
                         f"{', '.join(have)}. Pass your own Price(...) or $/chip-hour float.")
    newest: dict[tuple[str, str], Price] = {}
    for p in rows:  # rows are sorted by date, so the last one per (cloud, region, source) wins
        newest[(p.cloud, p.region, p.source)] = p
    return min(newest.values(), key=lambda p: p.usd_per_chip_hour)


def price_range(chip: str, pricing: str = "on_demand", *,
                table: Sequence[Price] | None = None) -> tuple[Price, Price] | None:
    """(Lab 06) The cheapest and the dearest current published price of a chip (None if it has none)."""
    if chip is None:  # prices(None) means every chip: a range across chips compares nothing
        raise TypeError("price_range needs one chip's name, e.g. price_range('TPU v5e'), got None")
    rows = prices(chip, pricing=pricing, table=table, current_only=True)
    if not rows:
        return None
    by_usd = sorted(rows, key=lambda p: p.usd_per_chip_hour)
    return by_usd[0], by_usd[-1]


def replaced(*overrides: Price, table: Sequence[Price] | None = None) -> list[Price]:
    """(Lab 06) The rows `with_override` drops: same chip, cloud, region and pricing as an override."""
    for i, o in enumerate(overrides):
        if not isinstance(o, Price):
            raise TypeError(f"pass Price objects, e.g. with_override(my_price('TPU v5e', 1.20)); override {i + 1} "
                            f"is {o!r} ({type(o).__name__})")
    keys = {(o.chip, o.cloud, o.region, o.pricing) for o in overrides}
    return [p for p in check_table(table) if (p.chip, p.cloud, p.region, p.pricing) in keys]


def with_override(*overrides: Price, table: Sequence[Price] | None = None) -> tuple[Price, ...]:
    """(Lab 06) A new table where each override REPLACES every same chip/cloud/region/pricing row."""
    gone = replaced(*overrides, table=table)  # checks overrides and table
    return tuple(p for p in check_table(table) if p not in gone) + tuple(overrides)


__all__ = ["PRICE_WARNING", "PRICING_KINDS", "PRICES", "READ", "RECHECK", "READ_DATES",
           "TPU_RECHECK", "STALE_DAYS", "CORES_PER_CHIP", "current", "left_out", "primary", "price_range", "Price", "positive",
           "check_fraction", "check_pricing", "hourly_usd", "prices", "price", "with_override", "replaced",
           "age_days", "warnings", "my_price", "H100", "V5E", "V5P", "UnknownChipError", "unknown_chip", "check_price",
           "check_table", "check_price_chip"]
