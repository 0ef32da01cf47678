"""labkit.course.tables: text and HTML renderings agree with the rows."""

import pytest

from labkit.course import tables
from labkit.course.tables import Table, show, to_text


def test_text_and_html() -> None:
    rows = [{"chip": "TPU v5e", "bf16": 197.0, "fp16": None}, {"chip": "T4", "bf16": None, "fp16": 65.0}]
    text = to_text(rows)
    lines = text.splitlines()
    assert lines[0].split() == ["chip", "bf16", "fp16"]
    assert "197" in lines[2] and "—" in lines[2] and "65" in lines[3]
    t = Table(rows, title="chips")
    assert "<caption>chips</caption>" in t._repr_html_()
    assert t._repr_html_().count("<tr>") == 3
    assert repr(t).startswith("chips")
    assert to_text([]) == "(no rows)"


def test_show_prints_now_outside_ipython(capsys: pytest.CaptureFixture[str]) -> None:
    # A table shown mid-cell (an assert after it) must still appear: show displays, it does not return.
    assert show([{"chip": "H100", "TFLOP/s": 989.0}], title="peaks") is None
    out = capsys.readouterr().out
    assert out.startswith("peaks") and "H100" in out and "989" in out


def test_show_displays_in_a_kernel(monkeypatch: pytest.MonkeyPatch) -> None:
    shown = []
    import IPython
    import IPython.display
    monkeypatch.setattr(IPython, "get_ipython", lambda: object())
    monkeypatch.setattr(IPython.display, "display", shown.append)
    show([{"a": 1}], title="t")
    assert len(shown) == 1 and isinstance(shown[0], Table) and shown[0].title == "t"


@pytest.mark.parametrize(("rows", "match"), [
    (None, r"rows must be a list of row dicts, e.g. show\(\[\{'chip': 'H100', 'TFLOP/s': 989.0\}\]\), "
           r"got NoneType None"),
    ({"a": 1}, r"got one dict \{'a': 1\}: pass \[row\] for one row"),
    ([1, 2], r"row 0 is int 1, not a dict"),
    ([{"a": 1}, "b"], r"row 1 is str 'b', not a dict"),
    ("abc", r"rows must be a list of row dicts.*got str 'abc'"),
    (5, r"rows must be a list of row dicts.*got int 5"),
])
def test_bad_rows_say_what_show_accepts(rows, match: str, capsys: pytest.CaptureFixture[str]) -> None:
    # once raw errors from to_text: 'NoneType' object is not iterable, 'str' object has no attribute 'get'
    for call in (show, Table, to_text):
        with pytest.raises(TypeError, match=match):
            call(rows)
    assert capsys.readouterr().out == ""  # nothing half-printed
    show(({"n": i} for i in range(2)))  # any iterable of dicts is fine, a tuple too
    assert to_text(({"n": 1},)).splitlines()[2].strip() == "1" and "n" in capsys.readouterr().out


def test_long_values_are_cut_in_text() -> None:
    text = to_text([{"metric": "claims_checked", "value": {f"claim_{i}": "holds" for i in range(40)}}])
    widths = {len(line) for line in text.splitlines()}
    assert max(widths) <= len("claims_checked") + 2 + tables.TEXT_CELL_CHARS
    assert "…" in text


def test_numbers_read_at_a_glance() -> None:
    text = to_text([{"int": 1856516, "small int": 1024, "flops": 417331072.0, "ms": 16031.7, "x": 0.49729999899864197,
                     "by dtype": {"torch.float16": 0.49729999899864197, "n": 262144}, "flag": True}])
    row = text.splitlines()[2]
    assert "1,856,516" in row and " 1024 " in row and "417,331,072" in row and "16,030" in row
    assert "0.4973" in row and "{torch.float16: 0.4973, n: 262,144}" in row and "True" in row
    assert tables._cell(3.0e20, 4) == "3e+20" and tables._cell(float("nan"), 4) == "nan"
