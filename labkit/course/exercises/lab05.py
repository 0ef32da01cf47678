"""Lab 05 exercises: a torch weight in Flax layout, KV-cache bytes, tokens/s from latencies.

Each check runs the learner's function and labkit's reference (``labkit.gpt.flax_model``,
``labkit.export.kv_cache``, ``labkit.export.serve``) on random inputs and, when they disagree, names the
recognisable mistake.
"""

from __future__ import annotations

import math
import re
from functools import lru_cache
from typing import Any, Callable

import numpy as np

from labkit.course.check import CheckResult, Hint, check_function, ratio_is
from labkit.export.kv_cache import kv_cache_bytes
from labkit.gpt.config import GPTConfig, param_shapes
from labkit.export.serve import tokens_per_s

N_CASES = 20  # random cases per check: a memorised number cannot pass


def _rng() -> np.random.Generator:
    return np.random.default_rng()  # fresh entropy every call: property-based, not a fixed answer


def _is(f: Callable[..., float]) -> Callable[[Any, Any, tuple], bool]:
    """Hint predicate: the answer equals f(*args), a specific wrong formula."""
    def when(got: Any, expected: Any, args: tuple) -> bool:
        return math.isclose(float(got), float(f(*args)), rel_tol=1e-6)
    return when


# ---------------------------------------------------------------- 1. torch weight -> Flax layout
@lru_cache(maxsize=8)
def _transposed(cfg: GPTConfig) -> frozenset[str]:
    """Canonical names whose Flax variable is the transpose, read from labkit.gpt.flax_model."""
    from labkit.gpt.flax_model import canonical_vars, abstract_flax_gpt

    return frozenset(name for name, _, t in canonical_vars(abstract_flax_gpt(cfg)) if t)


_CFG = GPTConfig(vocab_size=40, seq_len=24, n_layer=2, n_head=2, d_model=12, d_ff=20)  # all shapes differ


def flax_layout(name: str, weight: np.ndarray) -> np.ndarray:
    """(Lab 05) The known answer to exercise 1: a canonical weight in the FlaxGPT's layout, any depth."""
    layer0 = re.sub(r"^blocks\.\d+\.", "blocks.0.", name)  # the layout depends on the kind of weight, not its layer
    return weight.T if layer0 in _transposed(_CFG) else weight


def _flax_layout(name: str, weight: np.ndarray) -> list:
    return flax_layout(name, weight).tolist()


def check_torch_to_flax(fn: Callable[[str, np.ndarray], Any]) -> CheckResult:
    """(Lab 05) ``fn(name, weight)``: a canonical (PyTorch-layout) weight -> the FlaxGPT array."""
    __tracebackhide__ = True  # IPython: a failed check shows the learner's cell and the message, not labkit
    rng = _rng()
    shapes = param_shapes(_CFG)
    names = list(shapes)
    cases = [(str(n), rng.standard_normal(shapes[n]).astype(np.float32))  # str: np.str_('...') reads badly
             for n in rng.choice(names, N_CASES - 4, replace=False)]
    cases += [(n, rng.standard_normal(shapes[n]).astype(np.float32))
              for n in ("wte.weight", "wpe.weight", "blocks.0.attn.qkv.weight", "blocks.1.mlp.fc.weight")]
    linear = _transposed(_CFG)

    def same(got: Any, ref: np.ndarray) -> bool:
        g = np.asarray(got)
        return g.shape == ref.shape and np.array_equal(g, ref)

    hints = [
        Hint(lambda g, e, a: g is None, "your function returned None for this weight (a `return` only inside an "
             "`if`?): every weight needs one — the ones that keep their layout (embeddings, LayerNorm) are "
             "returned unchanged."),
        Hint(lambda g, e, a: a[0] in linear and same(g, a[1]),
             "forgot the transpose: torch's nn.Linear weight is (out, in) and computes x @ W.T; Flax's "
             "nnx.Linear kernel is (in, out) and computes x @ kernel, so kernel = weight.T."),
        Hint(lambda g, e, a: a[0] not in linear and a[1].ndim == 2 and same(g, a[1].T),
             "you transposed an embedding table: nn.Embedding and nnx.Embed both store (rows, d_model) "
             "— only Linear weights change layout."),
        Hint(lambda g, e, a: a[0] in linear and same(g, a[1].reshape(a[1].shape[::-1])),
             "reshape is not a transpose: it keeps the elements in memory order and only relabels the "
             "dimensions, so rows do not become columns. Use weight.T (or np.transpose)."),
        Hint(lambda g, e, a: np.asarray(g).shape == np.shape(e) and not np.array_equal(g, e)
             and np.allclose(g, e, rtol=1e-2, atol=1e-2), "the right layout, but the values changed "
             "slightly: a layout change must be bit-exact — keep the dtype (float32), no cast."),
    ]
    wrapped = lambda name, w: np.asarray(fn(name, w.copy())).tolist()  # noqa: E731 (compare as nested lists)
    return check_function("torch -> flax layout", wrapped, _flax_layout, cases, hints=hints,
                          describe=lambda a: f"weight {a[0]!r} of shape {a[1].shape}",  # which weight failed
                          explain="Transposes are exact, so the conversion is bit-exact both ways.")


# ---------------------------------------------------------------- 2. KV-cache bytes
def _kv_bytes(n_layer: int, n_head: int, head_dim: int, batch: int, seq: int, bytes_per_element: int) -> int:
    cfg = GPTConfig(n_layer=n_layer, n_head=n_head, d_model=n_head * head_dim, seq_len=max(seq, 1))
    return kv_cache_bytes(cfg, batch, seq, bytes_per_element)


def kv_cases(rng: np.random.Generator) -> list[tuple[int, int, int, int, int, int]]:
    """(Lab 05) Random (n_layer, n_head, head_dim, batch, seq, bytes_per_element) cases for the KV-cache check.

    The sizes are distinct and none is 2, 4 or 8: an answer missing a factor (say the batch)
    then never equals one missing another (the layers, or the 2 of keys and values) by chance.
    """
    cases: list[tuple[int, int, int, int, int, int]] = []
    while len(cases) < N_CASES:
        L, H, hd = int(rng.integers(3, 49)), int(rng.integers(3, 41)), int(rng.choice([32, 64, 80, 128]))
        b, s = int(rng.integers(1, 65)), int(rng.integers(16, 4097))
        if len({L, H, hd, b, s} | {2, 4, 8}) == 8:
            cases.append((L, H, hd, b, s, int(rng.choice([2, 4]))))
    return cases


def check_kv_cache_bytes(fn: Callable[[int, int, int, int, int, int], float]) -> CheckResult:
    """(Lab 05) ``fn(n_layer, n_head, head_dim, batch, seq, bytes_per_element)``: KV-cache size in bytes."""
    __tracebackhide__ = True  # IPython: a failed check shows the learner's cell and the message, not labkit
    cases = kv_cases(_rng())
    hints = [
        Hint(ratio_is(0.5), "off by 2: the cache holds keys *and* values, one of each per token per layer."),
        Hint(_is(lambda L, H, hd, b, s, e: 2 * H * hd * b * s * e), "forgot the layers: every layer "
             "has its own keys and values (multiply by n_layer)."),
        Hint(_is(lambda L, H, hd, b, s, e: 2 * L * H * hd * b * s), "that is a count of elements: multiply "
             "by bytes_per_element (fp32 = 4, bf16 = 2) for bytes."),
        Hint(ratio_is(8), "bits, not bytes: bytes_per_element already is bytes (bf16 = 2)."),
        Hint(_is(lambda L, H, hd, b, s, e: 2 * L * hd * b * s * e), "forgot the heads: one token's key "
             "is n_head * head_dim = d_model numbers."),
        Hint(_is(lambda L, H, hd, b, s, e: 2 * L * H * hd * s * e), "forgot the batch: every sequence in "
             "the batch keeps its own keys and values (multiply by batch)."),
        Hint(_is(lambda L, H, hd, b, s, e: 2 * L * H * hd * b * e), "forgot the sequence length: the cache "
             "holds a key and a value for every token so far (multiply by seq)."),
        Hint(ratio_is(1e-9), "that is GB (1e9 bytes): the check wants plain bytes — convert only when "
             "you print."),
        Hint(ratio_is(2.0 ** -30), "that is GiB (2**30 bytes): the check wants plain bytes — convert only when "
             "you print."),
    ]
    return check_function("KV-cache bytes", fn, _kv_bytes, cases, hints=hints,
                          explain="It grows with batch x sequence: at long contexts the cache, not the "
                                  "weights, fills the GPU — and decode reads all of it every token.")


# ---------------------------------------------------------------- 3. tokens/s from latencies
def check_tokens_per_s(fn: Callable[[int, int, float, float], float]) -> CheckResult:
    """(Lab 05) ``fn(batch, new_tokens, ttft_s, tpot_s)``: generated tokens per second of the batch."""
    __tracebackhide__ = True  # IPython: a failed check shows the learner's cell and the message, not labkit
    rng = _rng()
    cases = [(int(rng.integers(2, 65)), int(rng.integers(2, 513)), float(rng.uniform(0.01, 2.0)),
              float(rng.uniform(0.002, 0.1))) for _ in range(N_CASES)]
    hints = [
        Hint(lambda g, e, a: math.isclose(float(g) * a[0], float(e), rel_tol=1e-6),
             "forgot the batch: every step produces one token for *each* of the batch's sequences."),
        Hint(_is(lambda b, n, t0, tp: b * n / (t0 + n * tp)), "n decode steps? The first token comes out "
             "of the prefill (that is TTFT); only the other n - 1 tokens take a TPOT each."),
        Hint(_is(lambda b, n, t0, tp: b / tp), "you left out the time to first token: the prefill is part "
             "of the time the batch takes."),
        Hint(_is(lambda b, n, t0, tp: b * n / (n * tp)), "you left out the time to first token: the "
             "prefill is part of the time the batch takes."),
        Hint(lambda g, e, a: math.isclose(float(g) * float(e), 1.0, rel_tol=1e-6),
             "upside down: tokens per second is tokens divided by seconds."),
        Hint(ratio_is(1e-3), "units: the latencies are given in seconds, not milliseconds."),
    ]
    return check_function("tokens/s", fn, tokens_per_s, cases, hints=hints,
                          explain="A decode step launches the same kernels and reads every weight once whatever its "
                                  "rows; only its arithmetic grows with them. Where launches and weight reads dominate "
                                  "(a small batch on a GPU), tokens/s grows almost as fast as the batch; where the "
                                  "arithmetic does (a CPU's few cores), less: the serving sweep measured how much.")
