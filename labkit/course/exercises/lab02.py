"""Lab 02 exercises: FLOPs per token, MFU from a step time, days to train — checked on random inputs."""

from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from labkit.measure import flops
from labkit.course.check import CheckResult, Hint, check_function, ratio_is
from labkit.gpt.config import GPTConfig

N_CASES = 20  # random cases per check: a memorised number cannot pass


def _rng() -> np.random.Generator:
    return np.random.default_rng()  # fresh entropy every call: property-based, not a fixed answer


def random_config(rng: np.random.Generator) -> GPTConfig:
    """A random valid GPTConfig: heads divide d_model, d_ff not always 4·d (Lab 02)."""
    n_head = int(rng.choice([1, 2, 4, 6, 8, 12, 16]))
    d_model = n_head * int(rng.choice([16, 32, 64, 128]))
    d_ff = int(rng.choice([4 * d_model, 3 * d_model, int(rng.integers(1, 9)) * 128]))
    return GPTConfig(vocab_size=int(rng.choice([256, 1000, 32000, 50304])),
                     seq_len=int(rng.choice([64, 256, 1024, 4096])), n_layer=int(rng.integers(1, 49)),
                     n_head=n_head, d_model=d_model, d_ff=d_ff)


def _cfg_cases(rng: np.random.Generator) -> list[tuple[GPTConfig, int]]:
    cases = []
    for _ in range(N_CASES):
        cfg = random_config(rng)
        cases.append((cfg, int(rng.integers(1, cfg.seq_len + 1))))  # a batch shorter than seq_len
    return cases


def _is(f: Callable[..., float]) -> Callable[[Any, Any, tuple], bool]:
    return lambda g, e, a: math.isclose(float(g), float(f(*a)), rel_tol=1e-9)


def _att(cfg: GPTConfig, seq: int) -> int:
    return flops.attention_flops_per_token(cfg, seq)  # 12·L·H·Q·T, training


def _n(cfg: GPTConfig, rule: str = "matmul") -> int:
    return flops.param_count(cfg, rule)


def _reference_fpt(cfg: GPTConfig, seq: int) -> int:
    return flops.flops_per_token(cfg, seq, "matmul")


def check_flops_per_token(fn: Callable[[GPTConfig, int], float]) -> CheckResult:
    """(Lab 02) ``fn(cfg, seq)``: training FLOPs per token, every matmul once, full T×T attention."""
    __tracebackhide__ = True  # IPython: a failed check shows the learner's cell and the message, not labkit
    d = lambda c: c.d_model  # noqa: E731
    hints = [
        Hint(_is(lambda c, t: 2 * _n(c) + _att(c, t) / 3), "that is the forward pass only: training "
             "also runs the backward pass, which costs twice the forward — 6·N, not 2·N (and 12·L·H·Q·T, not 4·)."),
        Hint(_is(lambda c, t: 2 * _n(c) + _att(c, t)), "2·N is the forward pass; a training step does forward + "
             "backward (grad w.r.t. inputs and w.r.t. weights): 6 FLOPs per weight per token."),
        Hint(_is(lambda c, t: 6 * _n(c)), "you forgot the attention term: q·kᵀ and p·v have no weights, but they "
             "cost 12·L·H·Q·T FLOPs per token (fwd + bwd), growing with the sequence length."),
        Hint(_is(lambda c, t: 6 * _n(c) + _att(c, t) // 2), "you halved the attention term (causal saving, "
             "MaxText's variant); this exercise counts the full T×T scores, as PaLM's 12·L·H·Q·T does."),
        Hint(_is(lambda c, t: 6 * _n(c) + 12 * c.n_layer * d(c) * c.seq_len), "the attention term uses the "
             "sequence length of the batch, `seq`, not the model's maximum cfg.seq_len."),
        Hint(_is(lambda c, t: 6 * _n(c, "all") + _att(c, t)), "you counted the embeddings' parameters: the "
             "position embedding (and LayerNorm weights) are in N but never multiply — count matmul weights only "
             "(the tied head's V·d stays in: it multiplies by wte)."),
        Hint(_is(lambda c, t: 6 * _n(c, "no_wpe") + _att(c, t)), "that is nanoGPT's N (get_num_params(): every "
             "parameter but the position embedding wpe): its LayerNorm gains and biases never multiply either — "
             "count the matmul weights only (q/k/v, output projection, MLP, the tied head)."),
        Hint(_is(lambda c, t: 6 * _n(c, "non_embedding") + _att(c, t)), "that is torchtitan's non-embedding N: "
             "it drops wte, but here wte is also the tied head (logits = x·wteᵀ, a (d, V) matmul per token), so it "
             "stays; and it keeps the LayerNorm weights, which never multiply. Count the matmul weights only."),
        Hint(_is(lambda c, t: 6 * _n(c) + _att(c, t) * t), "12·L·H·Q·T is already per token: each token's q·kᵀ "
             "and p·v run over the T positions once (T appears once); multiplying by T again gives the FLOPs of a "
             "whole sequence."),
        Hint(_is(lambda c, t: 6 * _n(c) + 12 * c.n_layer * c.n_head * d(c) * t), "Q is the head dimension, "
             "cfg.head_dim = d_model / n_head, so H·Q = d_model: you multiplied n_head by d_model instead.",
             applies=lambda a: a[0].n_head > 1),  # one head: H·d_model is H·Q, the right answer
        Hint(_is(lambda c, t: 6 * (_n(c) - c.vocab_size * d(c)) + _att(c, t)), "you left out the output "
             "head: logits = x·wteᵀ is a (d, V) matmul per token even though its weight is the tied embedding."),
        Hint(_is(lambda c, t: 6 * (_n(c) - c.vocab_size * d(c) + c.n_layer * (8 * d(c) ** 2 - 2 * d(c) * c.d_ff))
                 + _att(c, t) + 6 * c.vocab_size * d(c)), "the MLP width is cfg.d_ff, which need not be 4·d_model."),
        Hint(_is(lambda c, t: 6 * (_n(c) - 2 * c.n_layer * d(c) ** 2) + _att(c, t)), "q, k and v are three "
             "d×d projections (3·d² weights), plus d² for the output projection: 4·d² per layer for attention."),
        Hint(_is(lambda c, t: 6 * (_n(c) - c.n_layer * d(c) ** 2) + _att(c, t)), "you left out attention's "
             "output projection: after q, k and v (3·d²), the heads' outputs go through one more d×d matmul "
             "(c_proj): 4·d² weights per layer for attention."),
    ]
    return check_function("FLOPs per token", fn, _reference_fpt, _cfg_cases(_rng()), hints=hints, rtol=1e-9,
                          explain="6·N + 12·L·H·Q·T with N = matmul weights: labkit.measure.flops calls this the "
                                  "'matmul' variant; XLA's dots and torch's counter (SDPA "
                                  "on its math path) count exactly this.")


def _reference_mfu(fpt: float, batch: int, seq: int, step_time_s: float, peak_tflops: float,
                   recomputed: float) -> float:
    return fpt * batch * seq / (step_time_s * peak_tflops * 1e12)  # recomputation is not model FLOPs


def check_mfu(fn: Callable[[float, int, int, float, float, float], float]) -> CheckResult:
    """(Lab 02) ``fn(flops_per_token, batch, seq, step_time_s, peak_tflops, recomputed_fraction)`` -> MFU in [0, 1]."""
    __tracebackhide__ = True  # IPython: a failed check shows the learner's cell and the message, not labkit
    rng = _rng()
    cases = []
    for _ in range(N_CASES):
        fpt = float(10 ** rng.uniform(6, 11))
        batch, seq = int(rng.integers(2, 257)), int(rng.choice([128, 512, 1024, 2048, 4096]))
        peak = float(rng.choice([65.0, 197.0, 312.0, 459.0, 918.0, 989.0]))
        mfu = float(rng.uniform(0.1, 0.7))
        step = fpt * batch * seq / (mfu * peak * 1e12)
        cases.append((fpt, batch, seq, step, peak, float(rng.choice([0.0, 0.5, 1.0]))))
    cases.append((1e9, 8, 1024, 0.05, 312.0, 1.0))  # full remat: HFU would differ by 4/3

    hints = [
        Hint(lambda g, e, a: a[5] > 0 and math.isclose(float(g), e * (1 + a[5] / 3), rel_tol=1e-6),
             "you counted the recomputed forward pass: that is HFU (hardware FLOPs). MFU counts the model's "
             "FLOPs only, so rematerialization makes MFU go *down* for the same work, never up."),
        Hint(lambda g, e, a: math.isclose(float(g), e / (a[1] * a[2]), rel_tol=1e-6), "that is per token: a step "
             "processes batch × seq tokens, so multiply flops_per_token by both."),
        Hint(lambda g, e, a: math.isclose(float(g), e / a[1], rel_tol=1e-6), "you forgot the batch: a step "
             "processes batch × seq tokens."),
        Hint(lambda g, e, a: math.isclose(float(g), e / a[2], rel_tol=1e-6), "you forgot the sequence length: "
             "a step processes batch × seq tokens."),
        Hint(ratio_is(100), "MFU as a fraction in [0, 1], not a percentage."),
        Hint(lambda g, e, a: any(ratio_is(f)(g, e, a) for f in (1e12, 1e-12, 1e9, 1e-9, 1e3, 1e-3)),
             "units: peak_tflops is in TFLOP/s — multiply by 1e12 to get FLOP/s before dividing."),
        Hint(lambda g, e, a: math.isclose(float(g), 1 / e, rel_tol=1e-6), "upside down: MFU = achieved FLOP/s "
             "/ peak FLOP/s, and achieved = FLOPs per step / step time."),
    ]
    return check_function("MFU from step time", fn, _reference_mfu, cases, hints=hints,
                          explain="Same as labkit.measure.mfu.mfu(flops_per_step, step_time_s, peak_tflops=...).value.")


def _reference_days(fpt: float, tokens: float, n_chips: int, peak_tflops: float, mfu: float) -> float:
    return fpt * tokens / (n_chips * peak_tflops * 1e12 * mfu) / 86400


def check_days_to_train(fn: Callable[[float, float, int, float, float], float]) -> CheckResult:
    """(Lab 02) ``fn(flops_per_token, tokens, n_chips, peak_tflops, mfu)`` -> wall-clock days."""
    __tracebackhide__ = True  # IPython: a failed check shows the learner's cell and the message, not labkit
    rng = _rng()
    cases = [(float(10 ** rng.uniform(8, 12)), float(10 ** rng.uniform(9, 13)), int(rng.choice([1, 8, 64, 256, 2048])),
              float(rng.choice([197.0, 312.0, 459.0, 918.0, 989.0])), float(rng.uniform(0.2, 0.7)))
             for _ in range(N_CASES)]
    hints = [
        Hint(lambda g, e, a: math.isclose(float(g), e * a[4], rel_tol=1e-6), "you assumed the chips run at "
             "their peak: divide by MFU as well — at 40% MFU training takes 2.5× longer than at 100%."),
        Hint(lambda g, e, a: math.isclose(float(g), e * a[4] ** 2, rel_tol=1e-6), "multiplied by MFU instead "
             "of dividing: a lower MFU must make training take *longer*."),
        Hint(lambda g, e, a: math.isclose(float(g), e * a[2], rel_tol=1e-6), "the work is shared by n_chips "
             "chips: divide by their number."),
        Hint(ratio_is(86400), "that is seconds: divide by 86 400 for days."),
        Hint(ratio_is(24), "that is hours: divide by 24 once more for days."),
        Hint(lambda g, e, a: any(ratio_is(f)(g, e, a) for f in (1e12, 1e-12, 1e9, 1e-9)),
             "units: peak_tflops is in TFLOP/s — multiply by 1e12 for FLOP/s."),
    ]
    return check_function("days to train", fn, _reference_days, cases, hints=hints,
                          explain="days = total FLOPs / (chips × peak × MFU) / 86 400: MFU is a budget line.")
