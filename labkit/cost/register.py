"""(Lab 06) The claims register: every quantitative claim of the five seed articles, with evidence.

Each entry names its article (title, date), paraphrases the claim, says what would test it, lists
its inputs, each labelled by kind, and gives a verdict:

- inputs: ``measured`` (this runtime or a committed run report, named), ``sourced`` (a published
  figure: URL, the page's date or "undated", the date read), ``modelled`` (a formula's output,
  with its inputs) or ``article`` (the article's own figure, the thing under test);
- verdicts: ``holds``, ``fails``, ``depends`` (on what, with the flip point) or
  ``not testable here`` (what would be needed).

A verdict of holds or fails needs at least one measured or sourced input: `Entry` refuses
anything else, and `decide` turns such a verdict into ``depends``.

One rule for every claim tested over several cases (prices, price pairs, published figures):
CASE_RULE, applied by `over_cases`; a claim that a figure lies in a range follows RANGE_RULE
(`over_range`): *depends* only when some published case actually falls inside. A figure the
article gives as "about X" is the range X +- ABOUT (relative), the same everywhere (`about`).
A verdict resting on prices is also judged on each price source alone (`by_source`): where pages
disagree, the why leads with which page gives which verdict.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

from labkit.cost.prices import Price
from labkit.measure import committed

KINDS = ("measured", "sourced", "modelled", "article")
VERDICTS = ("holds", "fails", "depends", "not testable here")
EVIDENCE = ("measured", "sourced")  # the kinds a holds / fails verdict may rest on
CASE_RULE = ("a claim tested over several cases holds if it holds in every case, fails if it holds in "
             "none, and depends (on which case you are in, with the flip points) otherwise")
RANGE_RULE = ("a claim that a figure lies in a range holds if every case is inside it, depends if some "
              "but not all are, and fails if none is: all on one side, or published cases straddling the "
              "range with none inside (a price between them that nobody publishes is not a case)")
# "About X" in an article: within +-10% of X. One relative tolerance for every such figure ($12/h,
# 52% MFU): wide enough for a figure rounded to a round number ($11-13 reads as "about $12"), narrow
# enough that the article's two MFUs (about 52% vs 58%, 10% apart) stay distinguishable.
ABOUT = 0.10
# The course checkout: labkit/cost/register.py -> parents[2]. Not the working directory, which is
# wherever the notebook runs (Colab clones the course into a sub-folder).
ROOT = committed.ROOT  # the course repository (a test points it elsewhere)

# The five seed articles (../shared/seeds/README.md): title and date as shown; an untitled one by its
# opening words (a few, quoted) and "undated", as that README asks, never by a description of it.
ARTICLES = {
    "gpu+tpu": "'Gpu + Tpu is the answer' (2025-12-01)",
    "replace": "'TPU在LLM訓練和推理中全麵替代GPU嗎?' [translated: 'Do TPUs fully replace GPUs in LLM training and "
               "inference?'] (as of November 2025)",
    "distributed": "untitled article opening 'Training a model like GPT-4 or Gemini...' (undated)",
    "whitepaper": "untitled white paper opening 'This white paper examines the evolution...' (undated)",
    "unpacking": "'Unpacking GPU vs TPU Performance in Training Large AI Models' (2025-08-25)",
}


@dataclass(frozen=True)
class Input:
    """(Lab 06) One number a verdict uses, with its kind and where it came from."""
    name: str
    value: Any
    kind: str        # one of KINDS
    source: str      # report name / URL + page date + read date / formula + inputs / article
    publisher: str = ""  # a price's publisher ("vendor", "third-party", "yours"); "" for anything else

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"input kind must be one of {KINDS}, got {self.kind!r}")
        if not str(self.source).strip():
            raise ValueError(f"input {self.name!r} needs a source")


def sourced(p: Price, name: str | None = None) -> Input:
    """(Lab 06) A Price as a sourced input: URL, the page's date, the date it was read."""
    return Input(name or f"{p.chip} {p.cloud} {p.pricing} $/chip-h", round(p.usd_per_chip_hour, 4),
                 "sourced", f"{p.source} (page {p.page_date}, read {p.read_date}; {p.publisher})", p.publisher)


def has_evidence(inputs: Sequence[Input]) -> bool:
    """(Lab 06) Whether any input is measured or sourced (not only modelled or the article's own)."""
    return any(i.kind in EVIDENCE for i in inputs)


@dataclass(frozen=True)
class Entry:
    """(Lab 06) One claim in the register: article, claim, test, inputs, verdict and why."""
    id: str
    article: str
    claim: str
    test: str                 # what would test it
    inputs: tuple[Input, ...]
    verdict: str
    why: str
    value: float | None = None  # the quantity the verdict turned on, if any
    per_source: tuple[tuple[str, str], ...] = ()  # (price source and its prices, verdict on them alone)

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")
        if self.verdict in ("holds", "fails") and not has_evidence(self.inputs):
            raise ValueError(f"{self.id}: a {self.verdict!r} verdict cannot rest on modelled or "
                             f"article figures alone; add a measured or sourced input")

    @property
    def evidence(self) -> str:
        """(Lab 06) The kinds of input behind the verdict, strongest first ("measured+sourced")."""
        return "+".join(k for k in KINDS if any(i.kind == k for i in self.inputs)) or "none"

    @property
    def prices(self) -> str:
        """(Lab 06) "third-party only" if every price behind the verdict is a third-party page's ("" if none)."""
        pubs = {i.publisher for i in self.inputs if i.publisher}
        if not pubs:
            return ""
        return "third-party only" if pubs == {"third-party"} else "incl. seller's own"

    def as_dict(self) -> dict[str, Any]:
        """(Lab 06) The entry as the dict `labkit.record("claims", ...)` stores."""
        return {"id": self.id, "article": self.article, "claim": self.claim, "test": self.test,
                "inputs": [vars(i) for i in self.inputs], "verdict": self.verdict, "why": self.why,
                "per_source": [list(s) for s in self.per_source], "prices": self.prices}


def decide(id: str, article: str, claim: str, test: str, inputs: Sequence[Input],
           verdict: str, why: str, value: float | None = None) -> Entry:
    """(Lab 06) An Entry; holds/fails on modelled-only inputs becomes depends, saying why."""
    if verdict in ("holds", "fails") and not has_evidence(inputs):
        why = f"would {verdict.rstrip('s')} on the model alone, so it depends on the model: {why}"
        verdict = "depends"
    return Entry(id, ARTICLES.get(article, article), claim, test, tuple(inputs), verdict, why, value)


def in_range(x: float, lo: float, hi: float) -> str:
    """(Lab 06) "inside", "below" or "above" [lo, hi] (exact comparison: no epsilon)."""
    return "below" if x < lo else ("above" if x > hi else "inside")


def about_band(target: float, rel: float = ABOUT) -> tuple[float, float]:
    """(Lab 06) The range "about target" stands for: target x (1 -+ rel), rounded off float noise."""
    return round(target * (1 - rel), 9), round(target * (1 + rel), 9)


def about(x: float, target: float, rel: float = ABOUT) -> str:
    """(Lab 06) Where x lies against "about target" (ABOUT, relative): "inside", "below" or "above"."""
    return in_range(x, *about_band(target, rel))


def over_cases(cases: Sequence[tuple[str, bool]]) -> str:
    """(Lab 06) CASE_RULE: holds if every case holds, fails if none does, depends otherwise."""
    if not cases:
        raise ValueError("over_cases needs at least one case; with none the claim is not testable here")
    ok = [c for c, h in cases if h]
    return "holds" if len(ok) == len(cases) else ("fails" if not ok else "depends")


def over_range(cases: Sequence[tuple[str, str]]) -> str:
    """(Lab 06) RANGE_RULE over (label, in_range result) cases: depends only if some case is inside."""
    sides = {w for _, w in cases}
    if not cases or not sides <= {"inside", "below", "above"}:
        raise ValueError(f"over_range needs cases of (label, 'inside' | 'below' | 'above') from in_range, "
                         f"got {list(cases)!r}")
    return "holds" if sides == {"inside"} else ("depends" if "inside" in sides else "fails")


def straddles(cases: Sequence[tuple[str, str]]) -> bool:
    """(Lab 06) Whether cases lie both below and above a range with none inside (a fail, said so)."""
    return {w for _, w in cases} == {"below", "above"}


def both(*verdicts: str) -> str:
    """(Lab 06) A claim of several parts, each judged: fails if any fails, holds if all hold, else depends."""
    if not verdicts or not set(verdicts) <= {"holds", "fails", "depends"}:
        raise ValueError(f"both needs one or more verdicts of 'holds' | 'fails' | 'depends', got {list(verdicts)!r}")
    return "fails" if "fails" in verdicts else ("holds" if set(verdicts) == {"holds"} else "depends")


def merge(*verdicts: str) -> str:
    """(Lab 06) One claim judged on several groups of cases: their verdict if all agree, else depends."""
    if not verdicts or not set(verdicts) <= {"holds", "fails", "depends"}:
        raise ValueError(f"merge needs one or more verdicts of 'holds' | 'fails' | 'depends', got {list(verdicts)!r}")
    return verdicts[0] if len(set(verdicts)) == 1 else "depends"


def committed_report(device: str) -> Path:
    """(Lab 06) The committed run report of a device, found from labkit's own location."""
    return ROOT / "benchmarks" / device / "report.json"


def committed_metrics(device: str) -> dict[str, dict[str, Any]]:
    """(Lab 06) Lab number ("02") -> recorded metrics of a committed report; {} if it is absent."""
    path = committed_report(device)
    if not path.exists():
        return {}
    return {lab["name"][:2]: lab.get("metrics") or {} for lab in json.loads(path.read_text())["labs"]}


def committed_run(device: str, lab: str) -> dict[str, Any]:
    """(Lab 06) One lab's entry in a committed report: run (label, date), commit, metrics, runtime; {} if absent."""
    path = committed_report(device)
    return committed.lab_run(json.loads(path.read_text()), lab) if path.exists() else {}


def discount_at_least(on_demand: float, spot: float, percent: int) -> bool:
    """(Lab 06) spot <= (1 - percent/100) x on-demand, in integer cents (no float edge)."""
    od, sp = round(on_demand * 100), round(spot * 100)   # cents per hour
    return sp * 100 <= (100 - percent) * od


def untestable(id: str, article: str, claim: str, needs: str) -> Entry:
    """(Lab 06) A register entry this course cannot test: `needs` says what would be needed."""
    return decide(id, article, claim, needs, (Input("claim", claim, "article", ARTICLES[article]),),
                  "not testable here", f"needs {needs}")


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


def cheapest_first(prices: Price | Sequence[Price]) -> list[Price]:
    """(Lab 06) One Price or several as a list, cheapest first."""
    rows = [prices] if isinstance(prices, Price) else list(prices)
    return sorted(rows, key=lambda t: t.usd_per_chip_hour)


def by_source(judge: Callable[[Sequence[Price]], Entry], rows: Sequence[Price]) -> Entry:
    """(Lab 06) judge(every price), also judged on each source's prices alone; the why says where pages disagree."""
    whole = judge(rows)
    if whole.verdict == "not testable here" or not rows:
        return whole
    sites = list(dict.fromkeys(p.site for p in sorted(rows, key=lambda p: p.usd_per_chip_hour)))
    per = []
    for site in sites:          # cheapest page first; "blog.easecloud.io's $1.60/$4.00" names its prices
        mine = [p for p in rows if p.site == site]
        per.append((f"{site}'s " + "/".join(f"${p.usd_per_chip_hour:.2f}" for p in mine), judge(mine).verdict))
    said = "; ".join(f"with {label} it {v}" for label, v in per)
    if len(per) == 1:
        why = f"{whole.why}; rests on one published TPU price source ({per[0][0]}): no second page to check it"
    elif len({v for _, v in per}) > 1:
        why = f"depends on which published TPU price: {said}; {whole.why}"
    else:
        why = f"{whole.why}; each TPU price source alone gives the same verdict ({said})"
    return replace(whole, why=why, per_source=tuple(per))


@dataclass(frozen=True)
class Register:
    """(Lab 06) The entries, with counts and the dicts to record."""
    entries: tuple[Entry, ...] = field(default_factory=tuple)

    def counts(self) -> dict[str, int]:
        """(Lab 06) Number of entries per verdict, in VERDICTS order."""
        return {v: sum(e.verdict == v for e in self.entries) for v in VERDICTS}

    def ids(self) -> list[str]:
        """(Lab 06) The entry ids in order."""
        return [e.id for e in self.entries]

    def records(self) -> list[dict[str, Any]]:
        """(Lab 06) One dict per entry (id, article, claim, inputs, verdict, why)."""
        return [e.as_dict() for e in self.entries]

    def rows(self) -> list[dict[str, Any]]:
        """(Lab 06) One short row per claim for a table: id, article (title, date), claim, verdict, evidence, why."""
        return [{"id": e.id, "article": e.article, "claim": e.claim, "verdict": e.verdict,
                 "evidence": e.evidence, "prices": e.prices, "why": e.why} for e in self.entries]


Builder = Callable[..., Entry]

__all__ = ["tally", "range_ends", "cheapest_first",
           "KINDS", "VERDICTS", "EVIDENCE", "CASE_RULE", "RANGE_RULE", "ABOUT", "about", "about_band",
           "over_range", "straddles", "both", "merge", "by_source", "ROOT",
           "committed_report", "committed_metrics", "committed_run",
           "ARTICLES", "Input", "sourced", "has_evidence",
           "Entry", "decide", "in_range", "over_cases", "discount_at_least", "untestable",
           "Register", "Builder"]
