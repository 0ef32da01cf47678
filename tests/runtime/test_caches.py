"""labkit.runtime.caches: the last-level cache from a recorded sysfs tree, and on this machine."""

from __future__ import annotations

from pathlib import Path

from labkit.runtime import caches


def _cache(root: Path, index: int, level: object, kind: str, size: str) -> None:
    d = root / f"index{index}"
    d.mkdir(parents=True)
    for name, text in (("level", level), ("type", kind), ("size", size)):
        (d / name).write_text(f"{text}\n")


def test_the_highest_data_or_unified_level_wins(tmp_path: Path) -> None:
    # This 2-core VM's cpu0 as its sysfs read on 2026-11-27 (a Xeon guest; L3 the host's, shared with it).
    for i, (level, kind, size) in enumerate([(1, "Data", "48K"), (1, "Instruction", "64K"), (2, "Unified", "2048K"),
                                             (3, "Unified", "491520K")]):
        _cache(tmp_path, i, level, kind, size)
    assert caches.last_level_cache_bytes(tmp_path) == 480 * 2**20
    _cache(tmp_path, 4, 4, "Instruction", "1G")  # an instruction cache never holds data, however large
    _cache(tmp_path, 5, "x", "Unified", "9G")  # unreadable level: skipped, not a crash
    (tmp_path / "index6").mkdir()  # no files at all
    assert caches.last_level_cache_bytes(tmp_path) == 480 * 2**20


def test_no_sysfs_says_none(tmp_path: Path) -> None:
    assert caches.last_level_cache_bytes(tmp_path / "missing") is None
    assert caches.last_level_cache_bytes(str(tmp_path / "missing")) is None  # a str path too
    _cache(tmp_path, 0, 2, "Unified", "lots")  # a size sysfs would never write
    assert caches.last_level_cache_bytes(tmp_path) is None


def test_this_machine() -> None:
    got = caches.last_level_cache_bytes()
    assert got is None or 2**16 <= got <= 2**34  # 64 KiB to 16 GiB: a real cache, where Linux reports one
