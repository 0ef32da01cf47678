"""labkit.sharding.memory_model.zero_bytes: ZeRO's stages in closed form (Lab 03).

The model-vs-compiler checks of memory_model run in tests/sharding/test_layouts.py (a subprocess with 8 devices).
"""

from __future__ import annotations

import pytest

from labkit.sharding import memory_model as mm


def test_zero_stages_from_psi_and_n() -> None:
    z = mm.zero_bytes(1.0, 8)
    assert [z[s]["total"] for s in mm.ZERO_STAGES] == pytest.approx([4, 2 + 2 / 8, 1 + 3 / 8, 4 / 8])
    assert z["ZeRO-2"] == {"params": 1.0, "grads": 1 / 8, "adam": 2 / 8, "total": 1.375}
    assert all(v["total"] == 4.0 for v in mm.zero_bytes(1.0, 1).values())  # one device: nothing to split


@pytest.mark.parametrize("psi, n, err", [(0, 8, ValueError), (1.0, 0, ValueError), (1.0, 2.5, TypeError),
                                         (True, 8, ValueError)])
def test_zero_bytes_refuses_bad_input(psi: object, n: object, err: type) -> None:
    with pytest.raises(err):
        mm.zero_bytes(psi, n)
