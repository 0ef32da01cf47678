"""Every public entry point's numeric arguments, swept with invalid values (issue 20 §4).

Each invalid value — 0 where 0 is meaningless, negative, NaN, infinity, a float where a count
is needed, a string — must raise a ValueError or TypeError (or the module's own subclass of
one) whose message names the argument: never a silent default, a truncation, a wrong result
or a raw error from deep inside. Valid neighbours are checked too, so the sweep cannot pass by
refusing everything. Only pure functions are called: nothing starts JAX or a process.
"""

from __future__ import annotations

import math
import sys
from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labkit.cost import model as cost
from labkit.cost import serving
from labkit.course import runner
from labkit.gpt import config, data
from labkit.sharding import launch, layouts, memory_model

NAN, INF = math.nan, math.inf
# kinds of argument -> invalid values
BAD = {
    "count": [0, -1, NAN, INF, 2.5, "8"],  # a whole number >= 1
    "size": [-1, NAN, INF, 2.5, "8"],  # a whole number >= 0
    "positive": [0, -1, NAN, INF, -INF, "1"],  # a finite real > 0
    "fraction": [0, -0.5, 1.5, NAN, INF, "0.5"],  # in (0, 1]
    "open_fraction": [0, 1, -0.5, NAN, INF, "0.1"],  # in (0, 1)
    "non_negative": [-1, NAN, INF, "1"],  # a finite real >= 0
    "finite": [NAN, INF, -INF, "1"],  # any finite real
    "port": [-1, 65536, NAN, 1.5, "80"],  # 0..65535 or None
    "eps": [0, -1, NAN, INF, "1e-5"],
}


class _Mesh:
    shape = {"data": 2, "model": 4}


_FAKE_DEVICES = [object()] * 8  # strategy_mesh checks its numbers before it touches a device
TOKENS = data.synthetic_tokens(200)


def _tpu_option(**kw: Any) -> Any:
    return cost.serve_cost_per_mtok(**{"tokens_per_s": 1000.0, "usd_per_chip_hour": 1.0, **kw})


# (entry point, call(**kwargs), valid kwargs, {argument: kind}, the name its message uses)
Case = tuple[str, Callable[..., Any], dict[str, Any], dict[str, str]]
CASES: list[Case] = [
    ("GPTConfig", lambda **k: config.GPTConfig(**k), {},
     {"vocab_size": "count", "seq_len": "count", "n_layer": "count", "n_head": "count",
      "d_model": "count", "d_ff": "size", "ln_eps": "eps"}),
    ("get_batch", lambda **k: data.get_batch(TOKENS, rng=np.random.default_rng(0), **k), {"batch": 2, "seq": 8},
     {"batch": "count", "seq": "count"}),
    ("Batcher", lambda **k: data.Batcher(TOKENS, **k), {"batch": 2, "seq": 8}, {"batch": "count", "seq": "count"}),
    ("split", lambda **k: data.split(TOKENS, **k), {"val_fraction": 0.1}, {"val_fraction": "open_fraction"}),
    ("synthetic_tokens", lambda **k: data.synthetic_tokens(**k), {"n": 64},
     {"n": "count", "n_patterns": "count", "pattern_len": "count"}),
    ("mesh_shape", lambda **k: layouts.get_strategy("dp_tp").mesh_shape(**k), {"n_devices": 8},
     {"n_devices": "count", "model": "count"}),
    ("strategy_mesh", lambda **k: layouts.strategy_mesh("dp_tp", devices=_FAKE_DEVICES, **k), {"n_devices": 8},
     {"n_devices": "count", "model": "count"}),
    ("make_mesh", lambda shape: layouts.make_mesh((shape, 2), ("data", "model")), {"shape": 4}, {"shape": "count"}),
    ("shard_bytes", lambda dim, itemsize: layouts.shard_bytes((8, dim), itemsize, (None, "model"), _Mesh()),
     {"dim": 16, "itemsize": 4}, {"dim": "size", "itemsize": "count"}),
    ("activation_bytes", lambda **k: memory_model.activation_bytes(config.CONFIGS["test"], **k), {"batch": 8},
     {"batch": "count", "data": "count", "model": "count", "itemsize": "count"}),
    ("launch", lambda **k: launch.check_launch_args(**k), {"nproc": 2, "devices_per_proc": 4, "timeout_s": 10, "port": 0},
     {"nproc": "count", "devices_per_proc": "count", "timeout_s": "positive", "port": "port"}),
    ("run", lambda **k: runner.check_timeout(**k), {"timeout_s": 15}, {"timeout_s": "positive"}),
    ("train_cost_per_mtok", lambda **k: cost.train_cost_per_mtok(**k),
     {"tokens_per_s": 1000.0, "usd_per_chip_hour": 2.0, "flops_per_token": 6e9, "peak_tflops": 100.0},
     {"tokens_per_s": "positive", "usd_per_chip_hour": "positive", "n_chips": "count", "utilization": "fraction",
      "flops_per_token": "positive", "peak_tflops": "positive"}),
    ("train_cost_per_mtok(mfu=)", lambda **k: cost.train_cost_per_mtok(**k),
     {"mfu": 0.4, "flops_per_token": 6e9, "peak_tflops": 100.0, "usd_per_chip_hour": 2.0}, {"mfu": "fraction"}),
    ("serve_cost_per_mtok", lambda **k: cost.serve_cost_per_mtok(**k), {"tokens_per_s": 1000.0, "usd_per_chip_hour": 2.0},
     {"tokens_per_s": "positive", "usd_per_chip_hour": "positive", "n_chips": "count", "utilization": "fraction"}),
    ("onprem_usd_per_hour", lambda **k: cost.onprem_usd_per_hour(**k),
     {"capex_usd": 30000, "years": 4, "power_w": 700, "usd_per_kwh": 0.1},
     {"capex_usd": "positive", "years": "positive", "power_w": "non_negative", "usd_per_kwh": "non_negative",
      "opex_usd_per_year": "non_negative", "pue": "finite"}),
    ("break_even", lambda **k: cost.break_even((_tpu_option, {}), (_tpu_option, {"usd_per_chip_hour": 3.0}),
                                                "tokens_per_s", **k), {"lo": 100.0, "hi": 5000.0},
     {"lo": "finite", "hi": "finite", "tol": "positive"}),
    ("decode_step", lambda **k: serving.decode_step(serving.LLAMA3_8B, **k),
     {"batch": 8, "context": 1024, "n_chips": 2, "peak_flops": 1e15, "bandwidth_gbs": 3000.0, "link_gbs": 450.0},
     {"batch": "count", "n_chips": "count", "peak_flops": "positive", "bandwidth_gbs": "positive",
      "mfu": "fraction", "bw_eff": "fraction"}),
    ("max_batch", lambda **k: serving.max_batch(serving.LLAMA3_8B, **k), {"context": 1024, "memory_gb": 80.0},
     {"context": "positive", "memory_gb": "positive"}),
]
SWEEP = [(name, call, base, arg, bad) for name, call, base, args in CASES
         for arg, kind in args.items() for bad in BAD[kind]]
# The name a message uses for an argument, where it differs from the keyword.
SPOKEN = {"shape": "mesh axis size", "dim": "shape[1]"}


@pytest.mark.parametrize(("name", "call", "base", "arg", "bad"), SWEEP,
                         ids=[f"{s[0]}-{s[3]}={s[4]!r}" for s in SWEEP])
def test_invalid_value_is_refused_naming_the_argument(name: str, call: Callable[..., Any], base: dict,
                                                      arg: str, bad: Any) -> None:
    with pytest.raises((ValueError, TypeError)) as e:
        call(**{**base, arg: bad})
    msg = str(e.value)
    assert SPOKEN.get(arg, arg) in msg, f"{name}({arg}={bad!r}) raised without naming {arg!r}: {msg}"
    shown = repr(bad) if not isinstance(bad, float) or math.isfinite(bad) else str(bad)
    assert shown.strip("'") in msg or str(bad) in msg, f"{name}({arg}={bad!r}): the value is not named: {msg}"


NEEDS_DEVICES = {"strategy_mesh", "make_mesh"}  # valid calls build a real mesh: tests/sharding covers them


@pytest.mark.parametrize(("name", "call", "base"), [(c[0], c[1], c[2]) for c in CASES if c[0] not in NEEDS_DEVICES],
                         ids=[c[0] for c in CASES if c[0] not in NEEDS_DEVICES])
def test_valid_values_still_work(name: str, call: Callable[..., Any], base: dict) -> None:
    call(**base)


def test_the_sweep_covers_every_kind() -> None:
    assert {kind for c in CASES for kind in c[3].values()} == set(BAD)
    assert len(SWEEP) > 200


# Property: any number outside the valid range, drawn at random, is refused.
not_a_count = st.one_of(st.integers(max_value=0), st.floats(allow_nan=True, allow_infinity=True))  # a float is never a count
not_positive = st.one_of(st.floats(max_value=0.0), st.just(NAN), st.just(INF), st.integers(max_value=0))


@settings(max_examples=60, deadline=None)
@given(st.sampled_from(["n_layer", "n_head", "d_model", "seq_len", "vocab_size"]), not_a_count)
def test_gpt_config_counts_property(field: str, bad: Any) -> None:
    with pytest.raises(ValueError, match=field):
        config.GPTConfig(**{field: bad})


@settings(max_examples=60, deadline=None)
@given(not_positive)
def test_timeouts_property(bad: float) -> None:
    with pytest.raises(ValueError, match="timeout_s"):
        runner.check_timeout(bad)
    with pytest.raises(ValueError, match="timeout_s"):
        launch.check_launch_args(2, 4, bad, None)


@settings(max_examples=60, deadline=None)
@given(st.one_of(st.integers(max_value=0), st.floats(allow_nan=True, allow_infinity=True)))
def test_mesh_numbers_property(bad: Any) -> None:
    with pytest.raises((ValueError, TypeError), match="n_devices|model"):
        layouts.get_strategy("dp_tp").mesh_shape(8 if isinstance(bad, float) else bad, model=bad)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__, "-q"]))
