"""Tests for labkit.cost.register (Lab 06): input kinds, each verdict kind, evidence rule."""
from __future__ import annotations

import pytest

from labkit.cost import register as R
from labkit.cost.prices import Price
from labkit.cost.register import Input

MEAS = Input("tok/s", 100.0, "measured", "benchmarks/x/report.json")
MODEL = Input("tok/s", 100.0, "modelled", "batch / step_s")
ART = Input("claim", "2-4x", "article", "the article")


@pytest.mark.parametrize("verdict", R.VERDICTS)
def test_every_verdict_kind_on_synthetic_inputs(verdict: str) -> None:
    e = R.decide("x", "gpu+tpu", "c", "t", [MEAS], verdict, "why")
    assert e.verdict == verdict and e.evidence == "measured"
    assert set(e.as_dict()) >= {"id", "article", "claim", "inputs", "verdict", "why"}


@pytest.mark.parametrize("verdict", ["holds", "fails"])
def test_modelled_only_cannot_hold_or_fail(verdict: str) -> None:
    with pytest.raises(ValueError, match="cannot rest on modelled"):
        R.Entry("x", "a", "c", "t", (MODEL, ART), verdict, "why")
    e = R.decide("x", "gpu+tpu", "c", "t", [MODEL, ART], verdict, "why")
    assert e.verdict == "depends" and "model alone" in e.why
    assert R.decide("x", "gpu+tpu", "c", "t", [MODEL, MEAS], verdict, "w").verdict == verdict


def test_bad_kinds_and_verdicts_refused() -> None:
    with pytest.raises(ValueError):
        Input("a", 1, "recalled", "memory")
    with pytest.raises(ValueError):
        R.Entry("x", "a", "c", "t", (MEAS,), "true", "why")


def test_range_cases_and_discount_without_epsilon() -> None:
    assert [R.in_range(x, 2, 4) for x in (1.99, 2, 4, 4.01)] == ["below", "inside", "inside", "above"]
    assert R.over_cases([("a", True), ("b", True)]) == "holds"
    assert R.over_cases([("a", True), ("b", False)]) == "depends"
    assert R.over_cases([("a", False)]) == "fails"
    with pytest.raises(ValueError, match="not testable"):
        R.over_cases([])   # no case is not "holds in every case"
    assert R.discount_at_least(4.00, 1.20, 70)          # exactly 70%: in cents, no float edge
    assert not R.discount_at_least(4.00, 1.21, 70)
    assert R.discount_at_least(10.0, 3.0, 70) and not R.discount_at_least(10.0, 3.01, 70)


def test_register_counts_and_rows() -> None:
    reg = R.Register((R.decide("a", "gpu+tpu", "c", "t", [MEAS], "holds", "w"),
                      R.untestable("b", "replace", "c", "a TPU run")))
    assert reg.counts() == {"holds": 1, "fails": 0, "depends": 0, "not testable here": 1}
    assert reg.rows()[1]["evidence"] == "article" and reg.ids() == ["a", "b"]
    # Each row cites its article by title and date (the entry had it; the table once dropped it).
    assert reg.rows()[0]["article"] == "'Gpu + Tpu is the answer' (2025-12-01)"
    assert reg.rows()[1]["article"] == R.ARTICLES["replace"] and "November 2025" in reg.rows()[1]["article"]


def test_range_rule_depends_only_when_a_case_is_inside() -> None:
    assert R.over_range([("a", "inside"), ("b", "inside")]) == "holds"
    assert R.over_range([("a", "below"), ("b", "below")]) == "fails"
    assert R.over_range([("a", "above")]) == "fails"
    # Straddling with none inside fails (it was "depends": a price between them nobody publishes is no case).
    assert R.over_range([("a", "below"), ("b", "above")]) == "fails"
    assert R.straddles([("a", "below"), ("b", "above")])
    assert not R.straddles([("a", "below"), ("b", "inside"), ("c", "above")])
    assert R.over_range([("a", "inside"), ("b", "above")]) == "depends"
    assert R.over_range([("a", "below"), ("b", "inside"), ("c", "above")]) == "depends"
    with pytest.raises(ValueError, match="over_range needs cases"):
        R.over_range([("a", True)])
    with pytest.raises(ValueError, match="over_range needs cases"):
        R.over_range([])


def test_committed_report_does_not_depend_on_the_working_directory(tmp_path, monkeypatch) -> None:
    # The lab once read "../benchmarks/...", which exists only when the notebook runs from labs/.
    monkeypatch.chdir(tmp_path)
    path = R.committed_report("nvidia-h100-80gb-hbm3")
    assert path.is_absolute() and path == R.ROOT / "benchmarks" / "nvidia-h100-80gb-hbm3" / "report.json"
    assert (R.ROOT / "labkit" / "cost" / "register.py").exists()
    if path.exists():   # the committed H100 report: Lab 02 recorded a measured MFU in (0, 1]
        assert 0 < R.committed_metrics("nvidia-h100-80gb-hbm3")["02"]["mfu_torch"] <= 1
    assert R.committed_metrics("no-such-device") == {}


def test_about_is_one_relative_tolerance() -> None:
    assert R.ABOUT == 0.10 and R.about_band(12) == (10.8, 13.2) and R.about_band(52) == (46.8, 57.2)
    assert [R.about(x, 12) for x in (10.79, 10.8, 13.2, 13.21)] == ["below", "inside", "inside", "above"]
    assert R.about(47, 52) == "inside" and R.about(46, 52) == "below"      # was 52 +- 5 points: 47 edge
    assert R.about(3, 2, rel=0.5) == "inside" and R.about(3.01, 2, rel=0.5) == "above"


def test_merge_groups_of_cases() -> None:
    assert R.merge("fails", "fails") == "fails" and R.merge("holds") == "holds"
    assert R.merge("holds", "fails") == R.merge("depends", "fails") == "depends"
    with pytest.raises(ValueError, match="merge needs"):
        R.merge("holds", "not testable here")


def _price(usd: float, site: str) -> Price:
    return Price("TPU v5e", "GCP", "on_demand", usd, f"https://{site}/p", "undated")


def test_by_source_says_which_page_gives_which_verdict() -> None:
    # A claim "the price is at most $1": holds on page a's prices, fails on page b's, depends over both.
    judge = lambda ps: R.decide("x", "gpu+tpu", "c", "t", [R.sourced(p) for p in ps],  # noqa: E731
                                R.over_cases([(str(p), p.usd_per_chip_hour <= 1) for p in ps]), "pairs")
    e = R.by_source(judge, [_price(4.0, "b.example"), _price(0.5, "a.example")])
    assert e.verdict == "depends" and e.per_source == (("a.example's $0.50", "holds"), ("b.example's $4.00", "fails"))
    assert e.why.startswith("depends on which published TPU price: with a.example's $0.50 it holds; "
                            "with b.example's $4.00 it fails; pairs")
    same = R.by_source(judge, [_price(0.5, "a.example"), _price(0.9, "b.example")])
    assert same.verdict == "holds" and "each TPU price source alone gives the same verdict" in same.why
    one = R.by_source(judge, [_price(0.5, "a.example"), _price(0.7, "a.example")])
    assert "rests on one published TPU price source (a.example's $0.50/$0.70)" in one.why
    assert R.by_source(judge, [_price(0.5, "a.example")]).as_dict()["per_source"] == [["a.example's $0.50", "holds"]]


def test_both_parts_of_a_claim() -> None:
    assert R.both("holds", "holds") == "holds"
    assert R.both("holds", "fails") == "fails" and R.both("depends", "fails") == "fails"  # one failing part fails it
    assert R.both("holds", "depends") == "depends"
    assert R.both(R.over_range([("a", "inside")]), R.over_range([("b", "above")])) == "fails"
    with pytest.raises(ValueError, match="both needs one or more verdicts"):
        R.both()
    with pytest.raises(ValueError, match="both needs one or more verdicts"):
        R.both("holds", "not testable here")


def test_a_verdict_on_third_party_prices_only_says_so() -> None:
    from labkit.cost.prices import Price
    tp = Price("TPU v5e", "X", "on_demand", 1.0, "https://a.example", "2026-01")
    own = Price("TPU v5e", "GCP", "on_demand", 1.2, "https://cloud.google.com/x", "2026-01", publisher="vendor")
    e = lambda *ps: R.decide("x", "replace", "c", "t", [R.sourced(p) for p in ps], "holds", "w")  # noqa: E731
    assert e(tp).prices == "third-party only" and e(tp, own).prices == "incl. seller's own"
    assert R.untestable("y", "replace", "c", "n").prices == ""
    assert e(tp).as_dict()["prices"] == "third-party only"


def test_committed_run_names_its_commit_and_run(tmp_path, monkeypatch) -> None:
    import json
    rep = {"runtime": {"memory_bytes": 85e9}, "labs": [{"name": "06_x", "status": "ok", "commit": "abc",
                                                         "metrics": {"train_tokens_per_s": 1.0}}],
           "history": [{"run": "run A", "commit": "old", "name": "06_x", "status": "ok"},
                       {"run": "run B (shared)", "commit": "abc", "name": "06_x", "status": "ok"}]}
    (tmp_path / "benchmarks" / "dev").mkdir(parents=True)
    (tmp_path / "benchmarks" / "dev" / "report.json").write_text(json.dumps(rep))
    monkeypatch.setattr(R, "ROOT", tmp_path)
    run = R.committed_run("dev", "06")
    assert run["run"] == "run B (shared)" and run["commit"] == "abc" and run["metrics"]["train_tokens_per_s"] == 1.0
    assert run["runtime"]["memory_bytes"] == 85e9
    assert R.committed_run("dev", "05") == {} and R.committed_run("nope", "06") == {}
