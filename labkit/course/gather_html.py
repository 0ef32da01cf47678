"""The gathered page: one self-contained HTML file comparing chips across many runs (course).

Everything comes from the merge :func:`labkit.course.gather.merged` returns (the same dict as
``gathered.json``), so the page can be redrawn from that file alone. Plots are matplotlib PNGs
embedded as base64; each title states its takeaway, computed from the numbers it shows.
"""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path
from typing import Any

PEAK_MEASURED, PEAK_SPEC = "matmul peak measured (TFLOP/s)", "matmul peak spec (lab) (TFLOP/s)"
MFU = ("MFU JAX (fraction)", "MFU torch (fraction)")
COST = ("cost per M training tokens per 1B params (USD)", "cost per M serving tokens per 1B params (USD)")

_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f3f3f3}.bad{color:#b00020;font-weight:bold}.ok{color:#17702a;font-weight:bold}
.note{color:#555;font-size:90%}img{max-width:100%;border:1px solid #eee;margin:6px 0}
h2{border-bottom:1px solid #ddd;padding-bottom:4px}td.num{text-align:right;font-variant-numeric:tabular-nums}
"""


def _esc(x: Any) -> str:
    return html.escape(str(x))


def fmt(value: float, unit: str) -> str:
    """One number in the unit its label names: percent, dollars, thousands separators (course)."""
    if "fraction" in unit:
        return f"{value:.1%}"
    if "USD" in unit:
        return f"${value:.3g}"
    if "tokens/s" in unit or "count" in unit or abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def fmt_spread(s: dict[str, Any], label: str) -> str:
    """Median, and the range over runs when the chip ran more than once (course)."""
    unit = label.rsplit("(", 1)[-1]
    text = fmt(s["median"], unit)
    if s["n"] > 1:
        text += f" <span class='note'>({fmt(s['min'], unit)}–{fmt(s['max'], unit)}, n={s['n']})</span>"
    return text


def _series(numbers: dict[str, Any], label: str) -> dict[str, dict[str, Any]]:
    """{chip column: spread} of one key number, whichever lab recorded it."""
    return next((rows[label] for rows in numbers.values() if label in rows), {})


def _png(fig: Any) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode()


def _short(col: str) -> str:
    return col.replace(" · ", "\n")


def peak_title(numbers: dict[str, Any]) -> str:
    """The peak plot's takeaway: which chip gets closest to its spec, and how close (course)."""
    measured, spec = _series(numbers, PEAK_MEASURED), _series(numbers, PEAK_SPEC)
    fractions = {c: measured[c]["median"] / spec[c]["median"] for c in measured if c in spec and spec[c]["median"]}
    if not fractions:
        return "Measured matmul peak per chip (no chip here has a spec figure to compare with)"
    best = max(fractions, key=fractions.get)
    worst = min(fractions, key=fractions.get)
    tail = f"; lowest {worst.split(' · ')[0]} at {fractions[worst]:.0%}" if worst != best else ""
    return f"{best.split(' · ')[0]} reaches {fractions[best]:.0%} of its spec matmul peak{tail}"


def plot_peaks(numbers: dict[str, Any]) -> str | None:
    """Measured (median, min-max bar) vs spec matmul peak per chip, log scale; base64 PNG (course)."""
    measured, spec = _series(numbers, PEAK_MEASURED), _series(numbers, PEAK_SPEC)
    if not measured:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cols = sorted(measured)
    fig, ax = plt.subplots(figsize=(max(5, 2.2 * len(cols)), 4))
    x = range(len(cols))
    med = [measured[c]["median"] for c in cols]
    err = [[m - measured[c]["min"] for m, c in zip(med, cols)], [measured[c]["max"] - m for m, c in zip(med, cols)]]
    ax.bar([i - 0.2 for i in x], med, 0.4, yerr=err, capsize=4, label="measured (median, min–max)")
    ax.bar([i + 0.2 for i in x], [spec[c]["median"] if c in spec else 0 for c in cols], 0.4,
           label="spec (chip table)", color="C1")
    for i, c in enumerate(cols):
        if c not in spec:
            ax.text(i + 0.2, med[i], "no spec", ha="center", va="bottom", fontsize=8, rotation=90)
    ax.set_xticks(list(x), [_short(c) for c in cols], fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("matmul TFLOP/s (log scale)")
    ax.set_title(peak_title(numbers), fontsize=10)
    ax.legend(fontsize=8)
    return _png(fig)


def mfu_title(numbers: dict[str, Any], peaks: dict[str, str]) -> str:
    """The MFU plot's takeaway: the best framework and chip, and which peak it is a fraction of (course)."""
    best = max(((s["median"], fw, c) for fw, label in zip(("JAX", "torch"), MFU)
                for c, s in _series(numbers, label).items()), default=None)
    if best is None:
        return "MFU per chip (no run recorded one)"
    of = "of the measured peak" if peaks.get(best[2], "").startswith("measured") else "of the spec peak"
    return f"Highest MFU: {best[1]} at {best[0]:.0%} {of} on {best[2].split(' · ')[0]}"


def plot_mfu(numbers: dict[str, Any], peaks: dict[str, str]) -> str | None:
    """Lab 02's MFU per chip, JAX beside torch, with the spread across runs; base64 PNG (course)."""
    jax_s, torch_s = (_series(numbers, label) for label in MFU)
    cols = sorted(set(jax_s) | set(torch_s))
    if not cols:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(5, 2.2 * len(cols)), 4))
    for shift, name, s in ((-0.2, "JAX", jax_s), (0.2, "torch", torch_s)):
        med = [100 * s[c]["median"] if c in s else 0 for c in cols]
        lo = [m - 100 * s[c]["min"] if c in s else 0 for m, c in zip(med, cols)]
        hi = [100 * s[c]["max"] - m if c in s else 0 for m, c in zip(med, cols)]
        ax.bar([i + shift for i in range(len(cols))], med, 0.4, yerr=[lo, hi], capsize=4, label=name)
    labels = [_short(c) + ("\n(of measured peak)" if peaks.get(c, "").startswith("measured") else "") for c in cols]
    ax.set_xticks(range(len(cols)), labels, fontsize=8)
    ax.set_ylabel("MFU (% of peak)")
    ax.set_title(mfu_title(numbers, peaks), fontsize=10)
    ax.legend(fontsize=8)
    return _png(fig)


def cost_title(numbers: dict[str, Any]) -> str:
    """The cost plot's takeaway: where a training and a serving token cost least (course)."""
    parts = []
    for what, label in zip(("training", "serving"), COST):
        s = _series(numbers, label)
        if s:
            c = min(s, key=lambda k: s[k]["median"])
            # "USD", not "$": matplotlib reads a pair of dollar signs as mathtext
            parts.append(f"{what} on {c.split(' · ')[0]} (USD {s[c]['median']:.3g})")
    if not parts:
        return "Cost per token per chip (no run recorded one)"
    return "Cheapest per M tokens per 1B params: " + ", ".join(parts)


def plot_cost(numbers: dict[str, Any]) -> str | None:
    """Lab 06's USD per million tokens per 1B parameters per chip, training and serving; base64 PNG (course)."""
    train, serve = (_series(numbers, label) for label in COST)
    cols = sorted(set(train) | set(serve))
    if not cols:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(max(5, 2.2 * len(cols)), 4))
    for shift, name, s in ((-0.2, "training", train), (0.2, "serving", serve)):
        ax.bar([i + shift for i in range(len(cols))], [s[c]["median"] if c in s else 0 for c in cols], 0.4,
               label=name)
    ax.set_xticks(range(len(cols)), [_short(c) for c in cols], fontsize=8)
    ax.set_yscale("log")
    ax.set_ylabel("USD per M tokens per 1B params (log)")
    ax.set_title(cost_title(numbers), fontsize=10)
    ax.legend(fontsize=8)
    return _png(fig)


def _chips_section(data: dict[str, Any]) -> list[str]:
    out = ["<h2 id='chips'>Per chip</h2><table><tr><th>chip · profile</th><th>in the chip table</th>"
           "<th>platform</th><th>runs</th><th>stopped early</th><th>labs ok</th><th>labs failed</th></tr>"]
    for col, s in sorted(data["chips"].items()):
        out.append(f"<tr><td>{_esc(col)}</td><td>{'yes' if s['known'] else '<span class=bad>no</span>'}</td>"
                   f"<td>{_esc(s['platform'])}</td><td class=num>{s['runs']}</td>"
                   f"<td class='num{' bad' if s.get('runs_stopped') else ''}'>{s.get('runs_stopped', 0)}</td><td class='num ok'>{s['labs_ok']}</td>"
                   f"<td class='num{' bad' if s['labs_failed'] else ''}'>{s['labs_failed']}</td></tr>")
    out.append("</table>")
    fails = [(col, f) for col, s in sorted(data["chips"].items()) for f in s["failures"]]
    if fails:
        out.append("<h3>Failures, grouped by lab, cell and error</h3><table><tr><th>chip · profile</th>"
                   "<th>lab</th><th>cell</th><th>error</th><th>runs</th></tr>")
        out += [f"<tr><td>{_esc(c)}</td><td>{_esc(f['lab'])}</td><td>{_esc(f['cell'])}</td>"
                f"<td class=bad>{_esc(f['error'])}</td><td class=num title='{_esc(', '.join(f['reports']))}'>"
                f"{f['count']}</td></tr>" for c, f in fails]
        out.append("</table>")
    return out


def _numbers_section(data: dict[str, Any]) -> list[str]:
    out = ["<h2 id='numbers'>Per lab: the key numbers side by side</h2>"
           "<p class=note>Median over the runs of each chip and profile; the range and run count follow "
           "when a chip ran more than once. Smoke and full profiles size the work differently: compare "
           "columns of the same profile.</p>"]
    cols = sorted(data["chips"])
    for lab, rows in data["numbers"].items():
        out.append(f"<h3>{_esc(lab)}</h3><table><tr><th>number</th>" + "".join(f"<th>{_esc(c)}</th>" for c in cols)
                   + "</tr>")
        for label, by_col in rows.items():
            out.append(f"<tr><td>{_esc(label)}</td>" + "".join(
                f"<td class=num>{fmt_spread(by_col[c], label) if c in by_col else '—'}</td>" for c in cols) + "</tr>")
        out.append("</table>")
        if lab.startswith("02") and data.get("mfu_peak"):
            out.append("<p class=note>MFU is a fraction of: " + "; ".join(
                f"{_esc(c)}: {_esc(p)}" for c, p in sorted(data["mfu_peak"].items())) + "</p>")
    return out


def _checks_section(data: dict[str, Any]) -> list[str]:
    out = ["<h2 id='table'>Numbers the chip table disagrees with</h2>"]
    if not data["disagreements"]:
        out.append("<p class=ok>None: every chip is in the table and no measurement exceeds its spec.</p>")
    else:
        out.append("<table><tr><th>what</th><th>chip</th><th>detail</th><th>report</th></tr>")
        out += [f"<tr><td class=bad>{_esc(d['kind'])}</td><td>{_esc(d['chip'])}</td><td>{_esc(d['detail'])}</td>"
                f"<td>{_esc(d['report'])}</td></tr>" for d in data["disagreements"]]
        out.append("</table>")
    return out


def _inputs_section(data: dict[str, Any]) -> list[str]:
    out = [f"<h2 id='inputs'>Reports: {len(data['runs'])} gathered, {len(data['skipped'])} skipped</h2>"]
    if data["skipped"]:
        out.append("<table><tr><th>skipped file</th><th>reason</th></tr>")
        out += [f"<tr><td>{_esc(s['path'])}</td><td class=bad>{_esc(s['reason'])}</td></tr>" for s in data["skipped"]]
        out.append("</table>")
    out.append("<table><tr><th>gathered file</th><th>device reported</th><th>profile</th><th>course version</th>"
               "<th>started</th><th>labs</th><th>stopped early</th><th>left out as duplicates</th></tr>")
    for r in data["runs"]:
        out.append(f"<tr><td>{_esc(r['path'])}</td><td>{_esc(r['device'])}</td><td>{_esc(r['profile'])}</td>"
                   f"<td>{_esc(r['version'])}</td><td>{_esc(r['started'])}</td><td>{_esc(', '.join(r['labs']))}</td>"
                   f"<td class=bad>{_esc(r.get('stopped') or '')}</td><td>{_esc('; '.join(r['dropped']))}</td></tr>")
    out.append("</table>")
    if any(r["version"] == "unrecorded" for r in data["runs"]):
        out.append("<p class=note>'unrecorded': the report predates the runner's course-version stamp, so "
                   "its version could not be checked.</p>")
    return out


def render(data: dict[str, Any]) -> str:
    """The gathered page as one HTML string (course)."""
    n_runs, n_chips = len(data["runs"]), len(data["chips"])
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>Accelerator Labs: across chips</title>",
             f"<style>{_CSS}</style></head><body><h1>Accelerator Labs: what the course measured, across chips</h1>",
             f"<p>{n_runs} run(s) on {n_chips} chip/profile column(s); {len(data['skipped'])} file(s) skipped. "
             f"Course version {_esc(data['course_version'])}, gathered {_esc(data['gathered_at'])} by "
             "<code>labkit gather</code>. <a href='#chips'>chips</a> · <a href='#plots'>plots</a> · "
             "<a href='#numbers'>numbers</a> · <a href='#table'>chip table</a> · <a href='#inputs'>reports</a></p>"]
    parts += _chips_section(data)
    parts.append("<h2 id='plots'>Plots</h2>")
    for png in (plot_peaks(data["numbers"]), plot_mfu(data["numbers"], data.get("mfu_peak", {})),
                plot_cost(data["numbers"])):
        if png:
            parts.append(f"<img src='data:image/png;base64,{png}'>")
    parts += _numbers_section(data) + _checks_section(data) + _inputs_section(data)
    parts.append("</body></html>")
    return "\n".join(parts)


def write_page(data: dict[str, Any], path: str | Path) -> Path:
    """Write :func:`render` to ``path`` (course)."""
    p = Path(path)
    p.write_text(render(data), encoding="utf-8")
    return p


def from_json(gathered_json: str | Path, path: str | Path) -> Path:
    """Redraw the page from a gathered.json (course)."""
    return write_page(json.loads(Path(gathered_json).read_text()), path)
