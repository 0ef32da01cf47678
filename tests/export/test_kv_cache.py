"""labkit.export.kv_cache (Lab 05): kv_cache_bytes refuses bad sizes by name (the cached steps: test_serve.py)."""

from __future__ import annotations

import numpy as np
import pytest

from labkit.export import kv_cache
from labkit.gpt.config import get_config

CFG = get_config("test")  # 2 layers, d_model 32


def test_kv_cache_bytes_by_hand() -> None:
    assert kv_cache.kv_cache_bytes(CFG, 4, 32, 2) == 2 * 2 * 4 * 32 * 32 * 2  # K and V, layers, batch, seq, d, bytes
    assert kv_cache.kv_cache_bytes(CFG, np.int64(4), np.int32(32), np.int64(2)) == 2 * 2 * 4 * 32 * 32 * 2
    assert type(kv_cache.kv_cache_bytes(CFG, np.int64(4), 32, np.int64(2))) is int


@pytest.mark.parametrize(("call", "err", "match"), [
    # a str bytes_per_element was repeated: 'bf16' * n, a huge string
    (lambda: kv_cache.kv_cache_bytes(CFG, 4, 32, bytes_per_element="bf16"), TypeError,
     r"bytes_per_element is bytes per number \(2 for bf16.*got 'bf16'"),
    (lambda: kv_cache.kv_cache_bytes(CFG, 4, 32, 0), ValueError, "bytes_per_element is bytes per number.*got 0"),
    (lambda: kv_cache.kv_cache_bytes(CFG, 4, 32, 2.5), TypeError, "bytes_per_element .*got 2.5"),
    (lambda: kv_cache.kv_cache_bytes(CFG, 4, 32, True), TypeError, "bytes_per_element .*got True"),
    (lambda: kv_cache.kv_cache_bytes(CFG, -1, 32), ValueError, "batch must be >= 1, got -1"),  # was -16384 bytes
    (lambda: kv_cache.kv_cache_bytes(CFG, 0, 32), ValueError, "batch must be >= 1, got 0"),
    (lambda: kv_cache.kv_cache_bytes(CFG, 4.5, 32), TypeError, "batch must be a whole number >= 1, got 4.5"),
    (lambda: kv_cache.kv_cache_bytes(CFG, True, 32), TypeError, "batch must be a whole number >= 1, got True"),
    (lambda: kv_cache.kv_cache_bytes(CFG, 4, 0), ValueError, "seq must be >= 1, got 0"),
    (lambda: kv_cache.kv_cache_bytes(CFG, 4, "32"), TypeError, "seq must be a whole number >= 1, got '32'"),
    (lambda: kv_cache.kv_cache_bytes("test", 4, 32), TypeError, "cfg must be a GPTConfig.*got str 'test'"),
])
def test_bad_sizes_are_refused_with_the_value(call, err: type, match: str) -> None:
    with pytest.raises(err, match=match):
        call()
