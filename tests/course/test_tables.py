"""labkit.course.tables: text and HTML renderings agree with the rows."""

from labkit.course.tables import show, to_text


def test_text_and_html() -> None:
    rows = [{"chip": "TPU v5e", "bf16": 197.0, "fp16": None}, {"chip": "T4", "bf16": None, "fp16": 65.0}]
    text = to_text(rows)
    lines = text.splitlines()
    assert lines[0].split() == ["chip", "bf16", "fp16"]
    assert "197" in lines[2] and "—" in lines[2] and "65" in lines[3]
    t = show(rows, title="chips")
    assert "<caption>chips</caption>" in t._repr_html_()
    assert t._repr_html_().count("<tr>") == 3
    assert repr(t).startswith("chips")
    assert to_text([]) == "(no rows)"
