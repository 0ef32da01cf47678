"""labkit.runtime.versions: version strings read as numbers, compared as the doctor and the bootstrap compare them."""

from __future__ import annotations

from labkit.runtime import versions


def test_release_parses_local_and_pre_release_versions() -> None:
    assert versions.release("2.9.0+cu126") == (2, 9, 0)
    assert versions.release("0.8.5rc1") == (0, 8, 5)
    assert versions.release("0.2.4") > versions.release("0.2")
    assert versions.release("0.12.1") < versions.release("0.12.2") < versions.release("0.13")  # a patch floor
    assert versions.release("2.10.0") >= versions.release("2.10")  # an upper bound excludes its own .0


def test_in_range_by_full_release() -> None:
    assert versions.in_range("0.12.2", "0.12.2") and not versions.in_range("0.12.1", "0.12.2")
    assert versions.in_range("2.9.1", "2.9", "2.10") and not versions.in_range("2.10.0", "2.9", "2.10")


def test_major_minor() -> None:
    assert versions.major_minor("2.9.0+cu126") == (2, 9) and versions.major_minor("3") == (3, 0)
    assert versions.major_minor(None) is None and versions.major_minor("dev") is None
