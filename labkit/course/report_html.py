"""report.html: one self-contained page per run — status, time, metrics, plots, errors (Lab 00)."""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

from labkit.course.report import stopped_note

MAX_PLOTS_PER_LAB = 6  # enough to see what a lab showed without a 50 MB page

_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}
.ok{color:#17702a;font-weight:bold}.failed,.timeout{color:#b00020;font-weight:bold}
pre{background:#f6f6f6;padding:8px;overflow-x:auto;font-size:12px}img{max-width:100%;border:1px solid #eee;margin:4px 0}
h2{border-bottom:1px solid #ddd;padding-bottom:4px}
"""


def _esc(x: Any) -> str:
    return html.escape(str(x))


def _plots(executed: Path) -> list[str]:
    """Base64 PNGs from an executed notebook's outputs, in cell order (Lab 00)."""
    if not executed.exists():
        return []
    nb = json.loads(executed.read_text())
    pngs = []
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []):
            png = out.get("data", {}).get("image/png")
            if png:
                pngs.append("".join(png) if isinstance(png, list) else png)
    return pngs[:MAX_PLOTS_PER_LAB]


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, (dict, list)):
        return json.dumps(v)[:300]
    return str(v)


def render(report: dict[str, Any], out_dir: Path) -> str:
    """The report as an HTML string; plots come from the executed notebooks (Lab 00)."""
    labs = report.get("labs", [])
    rt = report.get("runtime", {})
    parts = [
        "<!doctype html><html><head><meta charset='utf-8'><title>Accelerator Labs run report</title>",
        f"<style>{_CSS}</style></head><body><h1>Accelerator Labs run report</h1>",
        f"<p><b>device</b> {_esc(report.get('device'))} &middot; <b>platform</b> {_esc(rt.get('platform'))}"
        f" &middot; <b>devices</b> {_esc(rt.get('device_count'))} &middot; <b>host</b> {_esc(rt.get('host'))}"
        f" &middot; <b>profile</b> {_esc(report.get('profile'))} &middot; <b>started</b> {_esc(report.get('started'))}</p>",
        "<table><tr><th>lab</th><th>status</th><th>seconds</th><th>metrics</th></tr>",
    ]
    stopped = stopped_note(report, none="none")
    if stopped is not None:  # written by a run cut short by Ctrl-C / SIGTERM: say so above the table
        parts.insert(-1, f"<p class=failed><b>stopped early</b> by {_esc(stopped)}. "
                         "The labs below finished before the stop.</p>")
    for lab in labs:
        n_metrics = len(lab.get("metrics", {}))
        parts.append(
            f"<tr><td><a href='#{_esc(lab['name'])}'>{_esc(lab['name'])}</a></td>"
            f"<td class='{_esc(lab['status'])}'>{_esc(lab['status'])}</td>"
            f"<td>{lab['seconds']:.1f}</td><td>{n_metrics}</td></tr>"
        )
    parts.append("</table>")
    versions = report.get("versions", {})
    parts.append("<p><b>versions</b> " + ", ".join(f"{_esc(k)} {_esc(v)}" for k, v in versions.items() if v) + "</p>")
    for lab in labs:
        parts.append(f"<h2 id='{_esc(lab['name'])}'>{_esc(lab['name'])} "
                     f"<span class='{_esc(lab['status'])}'>{_esc(lab['status'])}</span></h2>")
        metrics = lab.get("metrics", {})
        if metrics:
            parts.append("<table><tr><th>metric</th><th>value</th></tr>")
            parts += [f"<tr><td>{_esc(k)}</td><td>{_esc(_fmt(v))}</td></tr>" for k, v in metrics.items()]
            parts.append("</table>")
        err = lab.get("error")
        if err:
            parts.append(f"<p><b>failing cell</b> {_esc(err.get('cell', '?'))}: "
                         f"{_esc(err.get('ename', ''))}: {_esc(err.get('evalue', ''))}</p>")
            if err.get("source"):
                parts.append(f"<pre>{_esc(err['source'])}</pre>")
            parts.append(f"<pre>{_esc(err.get('traceback') or err.get('log_tail', ''))}</pre>")
        for png in _plots(out_dir / lab.get("notebook", "")):
            parts.append(f"<img src='data:image/png;base64,{png}'>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_html(report: dict[str, Any], path: Path, out_dir: Path) -> Path:
    """Write :func:`render` to ``path`` (Lab 00)."""
    path.write_text(render(report, out_dir), encoding="utf-8")
    return path
