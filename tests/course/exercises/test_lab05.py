"""Tests for labkit.course.exercises.lab05: right answers pass, plausible wrong ones get their hint."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

from labkit.course.check import CheckResult
from labkit.course.exercises import lab05
from tests import exercise_contract as contract
from tests.course.exercises.seeds import over_seeds

# ---------------------------------------------------------------- 1. torch weight -> Flax layout
LINEAR = ("attn.qkv.weight", "attn.proj.weight", "mlp.fc.weight", "mlp.proj.weight")


def flax_ref(name: str, weight: np.ndarray) -> np.ndarray:
    """The lab's solution."""
    return weight.T if name.endswith(LINEAR) else weight


def flax_alt(name: str, weight: Any) -> Any:
    """Correct, written differently: swap the axes of 2-D weights that are not embeddings."""
    if weight.ndim == 2 and name not in ("wte.weight", "wpe.weight"):
        return np.swapaxes(weight, 0, 1).copy()
    return np.array(weight)


FLAX_WRONG: list[tuple[Callable[..., Any], str]] = [
    (lambda n, w: w, "forgot the transpose"),
    (lambda n, w: w.T, "you transposed an embedding table"),
    (lambda n, w: w.T if w.ndim == 2 else w, "you transposed an embedding table"),
    (lambda n, w: w.T if n.endswith("qkv.weight") else w, "forgot the transpose"),
]

# ---------------------------------------------------------------- 2. KV-cache bytes


def kv_ref(L: int, H: int, hd: int, b: int, s: int, e: int) -> int:
    """The lab's solution."""
    return L * b * s * 2 * H * hd * e


def kv_alt(L: int, H: int, hd: int, b: int, s: int, e: int) -> float:
    """Correct, written differently: per-layer K and V tensors (batch, heads, seq, head_dim)."""
    one_tensor = float(np.prod([b, H, s, hd])) * e
    return sum(2 * one_tensor for _ in range(L))


KV_WRONG: list[tuple[Callable[..., float], str]] = [
    (lambda L, H, hd, b, s, e: L * b * s * H * hd * e, "off by 2"),
    (lambda L, H, hd, b, s, e: b * s * 2 * H * hd * e, "forgot the layers"),
    (lambda L, H, hd, b, s, e: L * b * s * 2 * H * hd, "that is a count of elements"),
    (lambda L, H, hd, b, s, e: L * b * s * 2 * H * hd * e * 8, "bits, not bytes"),
    (lambda L, H, hd, b, s, e: L * b * s * 2 * hd * e, "forgot the heads"),
]

# ---------------------------------------------------------------- 3. tokens/s from latencies


def tps_ref(b: int, n: int, ttft: float, tpot: float) -> float:
    """The lab's solution."""
    return b * n / (ttft + (n - 1) * tpot)


def tps_alt(b: int, n: int, ttft: float, tpot: float) -> float:
    """Correct, written differently: time per token of one row, then scale by the batch."""
    per_token = (ttft + sum(tpot for _ in range(n - 1))) / n
    return b / per_token


TPS_WRONG: list[tuple[Callable[..., float], str]] = [
    (lambda b, n, t0, tp: n / (t0 + (n - 1) * tp), "forgot the batch"),
    (lambda b, n, t0, tp: b * n / (t0 + n * tp), "n decode steps?"),
    (lambda b, n, t0, tp: b / tp, "you left out the time to first token"),
    (lambda b, n, t0, tp: (t0 + (n - 1) * tp) / (b * n), "upside down"),
    (lambda b, n, t0, tp: b * n / (1000 * (t0 + (n - 1) * tp)), "units: the latencies are given in seconds"),
]

CHECKS: list[tuple[Callable[[Callable[..., Any]], CheckResult], Callable[..., Any],
                   Callable[..., Any], list[tuple[Callable[..., Any], str]]]] = [
    (lab05.check_torch_to_flax, flax_ref, flax_alt, FLAX_WRONG),
    (lab05.check_kv_cache_bytes, kv_ref, kv_alt, KV_WRONG),
    (lab05.check_tokens_per_s, tps_ref, tps_alt, TPS_WRONG),
]
IDS = ["torch_to_flax", "kv_cache_bytes", "tokens_per_s"]

# The six tests every exercise check must pass (tests/exercise_contract.py).
globals().update(contract.standard_tests(CHECKS, IDS, unrecognised=lambda check: (lambda n, w: np.zeros((1, 1))) if check is lab05.check_torch_to_flax else (lambda *a: 42.0)))


def test_references_are_labkit() -> None:
    from labkit.export.kv_cache import kv_cache_bytes
    from labkit.gpt.config import get_config
    from labkit.export.serve import tokens_per_s

    cfg = get_config("gpt2-small")
    assert lab05._kv_bytes(cfg.n_layer, cfg.n_head, cfg.head_dim, 8, 1024, 2) == kv_cache_bytes(cfg, 8, 1024, 2)
    assert tokens_per_s(2, 3, 1.0, 0.5) == pytest.approx(3.0)


def test_flax_layout_is_the_known_answer_at_every_depth() -> None:
    from labkit.gpt.config import get_config, param_shapes

    rng = np.random.default_rng(0)
    for name, shape in param_shapes(get_config("gpt2-small")).items():  # 12 layers; the check's model has 2
        w = rng.standard_normal(shape).astype(np.float32)
        assert np.array_equal(lab05.flax_layout(name, w), flax_ref(name, w)), name


# ------------------------------------------------- hints only when they explain the answer



@pytest.mark.parametrize("fn, hint", [
    (lambda L, H, hd, b, s, e: 2 * L * H * hd * s * e, "forgot the batch"),
    (lambda L, H, hd, b, s, e: 2 * L * H * hd * b * e, "forgot the sequence length"),
    (lambda L, H, hd, b, s, e: kv_ref(L, H, hd, b, s, e) / 1e9, "that is GB (1e9 bytes)"),
    (lambda L, H, hd, b, s, e: kv_ref(L, H, hd, b, s, e) / 2**30, "that is GiB (2**30 bytes)"),
], ids=["no_batch", "no_seq", "GB", "GiB"])
def test_kv_cache_missing_factor_gets_its_own_hint(monkeypatch: pytest.MonkeyPatch, fn: Callable[..., float],
                                                   hint: str) -> None:
    # A batch of 2, L or H used to make "forgot the batch" read as "off by 2" / "forgot the layers" / "... heads".
    for _ in over_seeds(monkeypatch, lab05):
        r = lab05.check_kv_cache_bytes(fn)
        assert r.status == "wrong" and hint in r.message, r.message
        others = [h for _, h in KV_WRONG] + ["forgot the batch", "forgot the sequence length"]
        assert not any(h in r.message for h in others if h != hint), r.message


def test_kv_cases_avoid_coincidences() -> None:
    for seed in range(40):
        for L, H, hd, b, s, e in lab05.kv_cases(np.random.default_rng(seed)):
            assert len({L, H, hd, b, s}) == 5 and not {L, H, hd, b, s} & {2, 4, 8}


def test_torch_to_flax_none_is_short_and_says_return(report_mode: None) -> None:
    r = lab05.check_torch_to_flax(lambda n, w: None)
    assert "did you forget `return`" in r.message and len(r.message) < 300, r.message


def test_torch_to_flax_shows_bounded_values_and_names_the_weight(report_mode: None) -> None:
    r = lab05.check_torch_to_flax(lambda n, w: np.zeros((1, 1)))  # no hint: expected vs got
    assert r.message.startswith("wrong on ") and "; the smallest: for inputs weight '" in r.message, r.message
    assert "of shape (" in r.message, r.message
    assert len(r.message) < 700 and "np.str_" not in r.message, r.message
    r = lab05.check_torch_to_flax(lambda n, w: w.reshape(w.shape[::-1]) if n.endswith(LINEAR) else w)
    assert "reshape is not a transpose" in r.message and "Wrong for weight 'blocks." in r.message, r.message
    assert len(r.message) < 700, len(r.message)


def test_torch_to_flax_accepts_other_array_types(report_mode: None) -> None:
    torch = pytest.importorskip("torch")
    assert lab05.check_torch_to_flax(lambda n, w: torch.from_numpy(flax_ref(n, w).copy())).passed
    r = lab05.check_torch_to_flax(lambda n, w: flax_ref(n, w).astype(np.float16))
    assert "values changed slightly" in r.message, r.message


def test_torch_to_flax_none_for_some_weights_says_which(report_mode: None) -> None:
    # A probe's answer transposed the Linear weights and fell off the end for the rest: it got a dump of floats.
    r = lab05.check_torch_to_flax(lambda n, w: w.T if n.endswith(LINEAR) else None)
    assert r.status == "wrong" and "returned None for this weight" in r.message, r.message
    assert "Wrong for weight '" in r.message and len(r.message) < 500, r.message
