"""Tests for labkit.course.exercises.lab02: right answers pass, plausible wrong ones get their specific hint."""

from __future__ import annotations

from typing import Any, Callable

import pytest

from labkit.course.check import MODE_ENV, CheckFailed, CheckResult, NotDoneYet, your_turn
from labkit.course.exercises import lab02
from labkit.gpt.config import GPTConfig

# ---------------------------------------------------------------- 1. FLOPs per token


def fpt_ref(cfg: GPTConfig, seq: int) -> float:
    """The lab's solution."""
    d, L = cfg.d_model, cfg.n_layer
    n = L * (3 * d * d + d * d + 2 * d * cfg.d_ff) + cfg.vocab_size * d
    return 6 * n + 12 * L * cfg.n_head * cfg.head_dim * seq


def fpt_alt(cfg: GPTConfig, seq: int) -> float:
    """Correct, written differently: forward matmuls per token, times 3."""
    d = cfg.d_model
    per_layer = 2 * (d * 3 * d) + 2 * seq * d + 2 * seq * d + 2 * d * d + 2 * d * cfg.d_ff * 2  # qkv, qk, pv, o, mlp
    return 3 * (cfg.n_layer * per_layer + 2 * d * cfg.vocab_size)


def _n(c: GPTConfig) -> int:
    return c.n_layer * (4 * c.d_model**2 + 2 * c.d_model * c.d_ff) + c.vocab_size * c.d_model


def _att(c: GPTConfig, t: int) -> int:
    return 12 * c.n_layer * c.d_model * t


def _ln(c: GPTConfig) -> int:
    return (4 * c.n_layer + 2) * c.d_model  # LayerNorm gains and biases: two norms per layer and the final one


FPT_WRONG: list[tuple[Callable[..., float], str]] = [
    (lambda c, t: 2 * _n(c) + _att(c, t) / 3, "forward pass only"),
    (lambda c, t: 2 * _n(c) + _att(c, t), "forward + backward"),
    (lambda c, t: 6 * _n(c), "forgot the attention term"),
    (lambda c, t: 6 * _n(c) + _att(c, t) / 2, "halved the attention term"),
    (lambda c, t: 6 * _n(c) + _att(c, c.seq_len), "not the model's maximum cfg.seq_len"),
    (lambda c, t: 6 * (_n(c) + c.seq_len * c.d_model + 4 * c.n_layer * c.d_model + 2 * c.d_model) + _att(c, t),
     "counted the embeddings"),
    (lambda c, t: 6 * (_n(c) - c.vocab_size * c.d_model) + _att(c, t), "left out the output head"),
    (lambda c, t: 6 * (c.n_layer * 12 * c.d_model**2 + c.vocab_size * c.d_model) + _att(c, t), "cfg.d_ff"),
    (lambda c, t: 6 * (_n(c) - 2 * c.n_layer * c.d_model**2) + _att(c, t), "three d×d projections"),
    # att = 3·d·d: q, k, v but not c_proj (a wrong-answer probe got only "wrong on 20 of 20 cases")
    (lambda c, t: 6 * (_n(c) - c.n_layer * c.d_model**2) + _att(c, t), "left out attention's output projection"),
    # N without wpe (nanoGPT) and without wte and wpe (torchtitan): LayerNorm's 2·d per norm, 2 per layer + a final one
    (lambda c, t: 6 * (_n(c) + _ln(c)) + _att(c, t), "nanoGPT's N"),
    (lambda c, t: 6 * (_n(c) - c.vocab_size * c.d_model + _ln(c)) + _att(c, t), "torchtitan's non-embedding N"),
    (lambda c, t: 6 * _n(c) + _att(c, t) * t, "already per token"),  # 12·L·d·T²: per sequence
    (lambda c, t: 6 * _n(c) + 12 * c.n_layer * c.n_head * c.d_model * t, "Q is the head dimension"),  # H·d_model
]

# ---------------------------------------------------------------- 2. MFU from step time


def mfu_ref(fpt: float, batch: int, seq: int, step: float, peak: float, recomputed: float) -> float:
    """The lab's solution."""
    return fpt * batch * seq / step / (peak * 1e12)


def mfu_alt(fpt: float, batch: int, seq: int, step: float, peak: float, recomputed: float) -> float:
    """Correct, written differently: tokens per second over the peak's tokens per second."""
    tokens_per_s = batch * seq / step
    peak_tokens_per_s = peak * 1e12 / fpt
    return tokens_per_s / peak_tokens_per_s


MFU_WRONG: list[tuple[Callable[..., float], str]] = [
    (lambda f, b, s, t, p, r: f * (1 + r / 3) * b * s / t / (p * 1e12), "that is HFU"),
    (lambda f, b, s, t, p, r: f / t / (p * 1e12), "that is per token"),
    (lambda f, b, s, t, p, r: f * s / t / (p * 1e12), "you forgot the batch"),
    (lambda f, b, s, t, p, r: f * b / t / (p * 1e12), "you forgot the sequence length"),
    (lambda f, b, s, t, p, r: 100 * f * b * s / t / (p * 1e12), "not a percentage"),
    (lambda f, b, s, t, p, r: f * b * s / t / p, "units: peak_tflops is in TFLOP/s"),
    (lambda f, b, s, t, p, r: t * p * 1e12 / (f * b * s), "upside down"),
]

# ---------------------------------------------------------------- 3. days to train


def days_ref(fpt: float, tokens: float, n: int, peak: float, u: float) -> float:
    """The lab's solution."""
    return fpt * tokens / (n * peak * 1e12 * u) / 86400


def days_alt(fpt: float, tokens: float, n: int, peak: float, u: float) -> float:
    """Correct, written differently: seconds from the cluster's useful FLOP/s, then hours, then days."""
    useful = n * peak * 1e12 * u
    hours = fpt * tokens / useful / 3600
    return hours / 24


DAYS_WRONG: list[tuple[Callable[..., float], str]] = [
    (lambda f, d, n, p, u: f * d / (n * p * 1e12) / 86400, "divide by MFU as well"),
    (lambda f, d, n, p, u: f * d * u / (n * p * 1e12) / 86400, "multiplied by MFU instead"),
    (lambda f, d, n, p, u: f * d / (p * 1e12 * u) / 86400, "divide by their number"),
    (lambda f, d, n, p, u: f * d / (n * p * 1e12 * u), "that is seconds"),
    (lambda f, d, n, p, u: f * d / (n * p * 1e12 * u) / 3600, "that is hours"),
    (lambda f, d, n, p, u: f * d / (n * p * u) / 86400, "units: peak_tflops is in TFLOP/s"),
]

CHECKS: list[tuple[Callable[[Callable[..., Any]], CheckResult], Callable, Callable, list]] = [
    (lab02.check_flops_per_token, fpt_ref, fpt_alt, FPT_WRONG),
    (lab02.check_mfu, mfu_ref, mfu_alt, MFU_WRONG),
    (lab02.check_days_to_train, days_ref, days_alt, DAYS_WRONG),
]
IDS = ["flops_per_token", "mfu", "days_to_train"]



@pytest.mark.parametrize("check, ref, alt, wrong", CHECKS, ids=IDS)
def test_reference_and_alternative_pass(check: Callable, ref: Callable, alt: Callable, wrong: list) -> None:
    assert check(ref).passed
    assert check(alt).passed


@pytest.mark.parametrize("check, wrong, hint", [(c[0], w, h) for c in CHECKS for w, h in c[3]],
                         ids=[f"{i}-{h[:24]}" for i, c in zip(IDS, CHECKS) for _, h in c[3]])
def test_wrong_answers_get_the_specific_hint(report_mode: None, check: Callable, wrong: Callable, hint: str) -> None:
    for _ in range(3):  # random cases each call: the hint must be found every time
        result = check(wrong)
        assert result.status == "wrong" and hint in result.message, result.message


def test_the_hints_are_distinct() -> None:
    # A hint text must point at one mistake: the expected substrings don't collide across a check.
    for _, _, _, wrong in CHECKS:
        hints = [h for _, h in wrong]
        assert len(set(hints)) == len(hints)


@pytest.mark.parametrize("check", [c[0] for c in CHECKS], ids=IDS)
def test_not_done_in_report_mode(report_mode: None, check: Callable) -> None:
    def stub(*args: Any) -> float:
        your_turn("this exercise")  # raises NotDoneYet
        return 0.0

    result = check(stub)
    assert isinstance(result, CheckResult) and result.status == "not done" and "not done yet" in result.message


@pytest.mark.parametrize("check, wrong", [(c[0], c[3][0][0]) for c in CHECKS], ids=IDS)
def test_stop_mode_raises(monkeypatch: pytest.MonkeyPatch, check: Callable, wrong: Callable) -> None:
    monkeypatch.delenv(MODE_ENV, raising=False)  # the default mode is "stop"
    with pytest.raises(CheckFailed, match="hint"):
        check(wrong)
    with pytest.raises(NotDoneYet):
        check(lambda *a: your_turn())


def test_random_configs_are_valid() -> None:
    import numpy as np

    rng = np.random.default_rng(0)
    for _ in range(200):
        cfg = lab02.random_config(rng)
        assert cfg.d_model % cfg.n_head == 0 and cfg.d_ff > 0


def test_an_exception_in_the_answer_is_a_failed_check(monkeypatch: pytest.MonkeyPatch) -> None:
    def as_dict(cfg: GPTConfig, seq: int) -> float:  # a config read like a dict: TypeError
        return 6 * cfg["d_model"] * seq

    monkeypatch.setenv(MODE_ENV, "report")
    r = lab02.check_flops_per_token(as_dict)
    assert r.status == "wrong" and "your function raised TypeError on inputs (GPTConfig(" in r.message, r.message
    assert 'cfg["d_model"]' in r.message and len(r.message) < 700, r.message  # the line, and a bounded config
    monkeypatch.delenv(MODE_ENV)
    with pytest.raises(CheckFailed, match="raised TypeError"):
        lab02.check_flops_per_token(as_dict)
