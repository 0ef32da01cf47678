"""Show a list of row dicts as a table: HTML in a notebook, aligned text elsewhere (Lab 00)."""

from __future__ import annotations

import html
import math
from typing import Any, Iterable, Mapping, Sequence


def _number(v: float, digits: int) -> str:
    """A float to `digits` significant figures; from 10,000 up, plain digits with separators (Lab 00)."""
    if not math.isfinite(v) or v == 0 or abs(v) < 1e4 or abs(v) >= 1e15:
        return f"{v:.{digits}g}"
    if v.is_integer():                             # an exact count held in a float: every digit
        return f"{int(v):,}"                       # 417331072.0 -> 417,331,072
    rounded = float(f"{v:.{digits}g}")            # a measurement: only its significant figures
    return f"{round(rounded):,}"                   # 16031.7 -> 16,030 at 4 digits


def _cell(v: Any, digits: int) -> str:
    if v is None:
        return "—"
    if isinstance(v, bool):
        return str(v)
    if isinstance(v, int):
        return f"{v:,}" if abs(v) >= 10_000 else str(v)   # 1856516 -> 1,856,516; 1024 stays
    if isinstance(v, float):
        return _number(v, digits)
    if isinstance(v, dict):  # a recorded dict: its numbers as short as the table's
        return "{" + ", ".join(f"{k}: {_cell(x, digits)}" for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)) and len(v) <= 8:
        return "[" + ", ".join(_cell(x, digits) for x in v) + "]"
    return str(v)


TEXT_CELL_CHARS = 100  # a longer value (a dict, a URL list) is cut in text tables so the columns stay readable


def _short(text: str, limit: int = TEXT_CELL_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _check_rows(rows: Any) -> list[Mapping[str, Any]]:
    """``rows`` as a list of row dicts; None, one dict or a list of non-dicts is refused with the fix (Lab 00)."""
    eg = "e.g. show([{'chip': 'H100', 'TFLOP/s': 989.0}])"
    if isinstance(rows, Mapping):
        raise TypeError(f"rows must be a list of row dicts, {eg}, got one dict {rows!r:.60}: pass [row] for one row, "
                        "or [{'metric': k, 'value': v} for k, v in d.items()] for a dict of values")
    if rows is None or isinstance(rows, (str, bytes)) or not isinstance(rows, Iterable):
        raise TypeError(f"rows must be a list of row dicts, {eg}, got {type(rows).__name__} {rows!r:.60}")
    rows = list(rows)
    bad = next((i for i, r in enumerate(rows) if not isinstance(r, Mapping)), None)
    if bad is not None:
        raise TypeError(f"rows must be a list of row dicts, {eg}; row {bad} is {type(rows[bad]).__name__} "
                        f"{rows[bad]!r:.60}, not a dict")
    return rows


def to_text(rows: Sequence[dict[str, Any]], digits: int = 4) -> str:
    """Aligned plain-text table of ``rows`` (all rows share the first row's keys) (Lab 00)."""
    rows = _check_rows(rows)
    if not rows:
        return "(no rows)"
    cols = list(rows[0])
    cells = [[_short(_cell(r.get(c), digits)) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    line = lambda xs: "  ".join(x.ljust(w) for x, w in zip(xs, widths))  # noqa: E731
    return "\n".join([line(cols), line(["-" * w for w in widths])] + [line(r) for r in cells])


class Table:
    """Rows that render as HTML in Jupyter and as text in a terminal (Lab 00)."""

    def __init__(self, rows: Sequence[dict[str, Any]], digits: int = 4, title: str = "") -> None:
        self.rows, self.digits, self.title = _check_rows(rows), digits, title

    def __repr__(self) -> str:
        return (self.title + "\n" if self.title else "") + to_text(self.rows, self.digits)

    def _repr_html_(self) -> str:
        if not self.rows:
            return "<p>(no rows)</p>"
        cols = list(self.rows[0])
        head = "".join(f"<th>{html.escape(str(c))}</th>" for c in cols)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(_cell(r.get(c), self.digits))}</td>" for c in cols) + "</tr>"
            for r in self.rows
        )
        cap = f"<caption>{html.escape(self.title)}</caption>" if self.title else ""
        return f"<table>{cap}<tr>{head}</tr>{body}</table>"


def show(rows: Sequence[dict[str, Any]], digits: int = 4, title: str = "") -> None:
    """Display ``rows`` as a table now, wherever it sits in a cell (HTML in Jupyter, text elsewhere) (Lab 00)."""
    # Displayed here rather than returned: a returned table shows only as a cell's last expression, and
    # cells that assert after their table (Labs 00, 02, 06) would otherwise hide it.
    table = Table(rows, digits, title)
    try:
        from IPython import get_ipython
        from IPython.display import display
    except ImportError:  # plain Python without IPython
        get_ipython = None  # type: ignore[assignment]
    if get_ipython is not None and get_ipython() is not None:
        display(table)
    else:
        print(repr(table))
