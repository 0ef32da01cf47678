"""labkit.course.gather_html: plot titles state the takeaway from the numbers; the page shows every section."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from labkit.course import gather_html as gh


def sp(*values: float) -> dict:
    v = sorted(values)
    return {"n": len(v), "median": v[len(v) // 2] if len(v) % 2 else (v[len(v) // 2 - 1] + v[len(v) // 2]) / 2,
            "min": v[0], "max": v[-1], "values": list(values)}


H, T, C = "NVIDIA H100 SXM · full", "TPU v5e · full", "Intel(R) Xeon(R) · smoke"
NUMBERS = {
    "00_know_your_accelerator": {
        gh.PEAK_MEASURED: {H: sp(700.0, 760.0), T: sp(180.0), C: sp(0.1)},
        gh.PEAK_SPEC: {H: sp(989.0, 989.0), T: sp(197.0)},
    },
    "02_mfu": {gh.MFU[0]: {H: sp(0.30), T: sp(0.45), C: sp(0.9)}, gh.MFU[1]: {H: sp(0.37)}},
    "06_cost_per_token": {gh.COST[0]: {H: sp(0.03), T: sp(0.007)}, gh.COST[1]: {H: sp(0.01), T: sp(0.02)}},
}
PEAKS = {H: "spec bf16 matmul peak 989", T: "spec bf16 197", C: "measured fp32 matmul peak 0.1 TFLOP/s"}


def data(numbers: dict = NUMBERS) -> dict:
    chips = {c: {"chip": c.split(" · ")[0], "known": c != C, "platform": "gpu", "runs": 1, "labs_ok": 3,
                 "labs_failed": 0, "failures": []} for c in (H, T, C)}
    chips[H]["failures"] = [{"lab": "04_mixed_precision", "cell": 18, "error": "AssertionError: loss", "count": 2,
                             "reports": ["a", "b"]}]
    return {"course_version": "0.1.0", "gathered_at": "now", "chips": chips, "numbers": numbers, "mfu_peak": PEAKS,
            "runs": [{"path": "a/report.json", "device": "H100", "profile": "full", "version": "unrecorded",
                      "started": "", "labs": ["00"], "dropped": ["02_mfu (the same run as in b)"]}],
            "skipped": [{"path": "z/report.json", "reason": "truncated or invalid JSON (x)"}],
            "disagreements": [{"kind": "unknown chip", "chip": "Intel(R) Xeon(R)", "report": "c", "detail": "a CPU"}]}


def test_titles_state_the_takeaway_from_the_numbers() -> None:
    # H100 730/989 = 74%, v5e 180/197 = 91%: the v5e is closest to its spec
    assert gh.peak_title(NUMBERS) == "TPU v5e reaches 91% of its spec matmul peak; lowest NVIDIA H100 SXM at 74%"
    # the CPU's 90% is of its measured peak, and the title says so rather than comparing it silently
    assert gh.mfu_title(NUMBERS, PEAKS) == "Highest MFU: JAX at 90% of the measured peak on Intel(R) Xeon(R)"
    no_cpu = {"02_mfu": {gh.MFU[0]: {H: sp(0.30)}, gh.MFU[1]: {H: sp(0.37)}}}
    assert gh.mfu_title(no_cpu, PEAKS) == "Highest MFU: torch at 37% of the spec peak on NVIDIA H100 SXM"
    assert gh.cost_title(NUMBERS) == ("Cheapest per M tokens per 1B params: training on TPU v5e (USD 0.007), "
                                      "serving on NVIDIA H100 SXM (USD 0.01)")
    assert "no chip here has a spec" in gh.peak_title({"00": {gh.PEAK_MEASURED: {C: sp(0.1)}}})


@pytest.mark.parametrize("plot", [gh.plot_peaks, gh.plot_cost, lambda n: gh.plot_mfu(n, PEAKS)])
def test_plots_are_pngs_and_absent_without_numbers(plot) -> None:
    png = base64.b64decode(plot(NUMBERS))
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert plot({}) is None


def test_formats_and_spread() -> None:
    assert gh.fmt(0.3012, "fraction)") == "30.1%"
    assert gh.fmt(0.00796, "USD)") == "$0.00796"
    assert gh.fmt(22541.6, "tokens/s)") == "22,542"
    assert gh.fmt(2116.4, "GB/s)") == "2,116"
    assert gh.fmt_spread(sp(700.0), "x (TFLOP/s)") == "700"
    assert gh.fmt_spread(sp(700.0, 760.0), "x (TFLOP/s)") == "730 <span class='note'>(700–760, n=2)</span>"


def test_page_has_every_section_and_redraws_from_json(tmp_path: Path) -> None:
    page = gh.render(data())
    for needle in ("Per chip", "Failures, grouped", "AssertionError: loss", "Plots", "Per lab", "730 ",
                   "Numbers the chip table disagrees with", "unknown chip", "truncated or invalid JSON",
                   "02_mfu (the same run as in b)", "'unrecorded'", "MFU is a fraction of"):
        assert needle in page, needle
    assert page.count("data:image/png;base64,") == 3
    (tmp_path / "g.json").write_text(json.dumps(data()))
    assert gh.from_json(tmp_path / "g.json", tmp_path / "p.html").read_text().count("<h2") == page.count("<h2")
    clean = data()
    clean["disagreements"] = []
    assert "None: every chip is in the table" in gh.render(clean)
