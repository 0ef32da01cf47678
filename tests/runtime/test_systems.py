"""labkit.runtime.systems: chips joined by links agree with the chip table and cite sources."""
from labkit.runtime import hardware as hw
from labkit.runtime import systems


def test_topologies_agree_with_the_chip_table_and_cite_sources() -> None:
    # (Lab 03) A torus link carries the chip's bidirectional ICI figure / 2 directions / its links.
    tops = systems.TOPOLOGIES
    assert tops["TPU v5e-8"].link_gbs * 2 * 4 == hw.CHIPS["TPU v5e"].link_gbs  # 2-D: 4 links
    assert tops["TPU v5p-512"].link_gbs * 2 * 6 == hw.CHIPS["TPU v5p"].link_gbs  # 3-D: 6 links
    assert tops["8x H100 SXM"].link_gbs * 2 == hw.CHIPS["NVIDIA H100 SXM"].link_gbs  # NVLink, one way
    assert tops["TPU v5e-8"].wraparound == (False, False) and all(tops["TPU v5e-256"].wraparound)
    assert tops["256x H100 SXM"].chips == 256 and tops["256x H100 SXM"].network_gbs == 400 / 8
    for t in tops.values():
        assert "wraparound" in t.sources or t.kind == "switch", t.name
        assert any(c.isdigit() for c in t.sources["link"]), t.name
