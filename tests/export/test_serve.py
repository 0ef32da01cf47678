"""labkit.export.kv_cache / labkit.export.serve: cached decoding == full recomputation, same tokens in JAX and
torch, left-padding, seeded sampling, bad prompts, and the benchmark's numbers."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch
from flax import nnx

from labkit.export import stablehlo as export_hlo, kv_cache, serve
from labkit.gpt.flax_model import FlaxGPT
from labkit.gpt.convert import flax_to_torch, flat_params_numpy, load_flat_params
from labkit.gpt.torch_model import TorchGPT
from labkit.gpt.config import get_config

CFG = get_config("test")
PROMPTS = ["ROMEO:", "O Romeo, Romeo, wherefore", "x"]  # mixed lengths: 6, 25, 1 bytes
NEW = 6


@pytest.fixture(scope="module")
def models() -> tuple[FlaxGPT, torch.nn.Module, dict[str, np.ndarray]]:
    fm = FlaxGPT(CFG, rngs=nnx.Rngs(2))
    return fm, flax_to_torch(fm).eval(), flat_params_numpy(fm)


@pytest.fixture(scope="module")
def decoders(models) -> list:
    fm, tm, flat = models
    step = jax.export.deserialize(export_hlo.export_step(CFG).serialize())
    return [serve.TorchDecoder(tm, "eager", device="cpu"), serve.JaxDecoder.native(CFG, flat),
            serve.JaxDecoder.from_exported(step, CFG, flat)]


def test_torch_kv_cache_equals_full_recomputation(models) -> None:
    tm = models[1]
    seq = torch.from_numpy(np.random.default_rng(0).integers(0, 256, (3, 5)))
    k, v = kv_cache.torch_new_cache(CFG, 3, CFG.seq_len)
    pad = torch.zeros(3, dtype=torch.long)
    with torch.no_grad():
        logits = kv_cache.torch_step(tm, seq, k, v, torch.tensor(0), pad)
        for _ in range(8):
            assert (logits - tm(seq)[:, -1]).abs().max() < 1e-5
            nxt = logits.argmax(-1, keepdim=True)
            logits = kv_cache.torch_step(tm, nxt, k, v, torch.tensor(seq.shape[1]), pad)
            seq = torch.cat([seq, nxt], dim=1)


def test_jax_kv_cache_equals_full_recomputation(models) -> None:
    fm, _, flat = models
    step = jax.jit(kv_cache.jax_step_fn(CFG))
    flat = {n: jnp.asarray(a) for n, a in flat.items()}
    seq = jnp.asarray(np.random.default_rng(1).integers(0, 256, (2, 4)), jnp.int32)
    k, v = kv_cache.jax_new_cache(CFG, 2, CFG.seq_len)
    pad = jnp.zeros(2, jnp.int32)
    logits, k, v = step(flat, seq, k, v, jnp.int32(0), pad)
    cached = []
    for _ in range(6):
        cached.append(logits)
        nxt = jnp.argmax(logits, -1).astype(jnp.int32)[:, None]
        logits, k, v = step(flat, nxt, k, v, jnp.int32(seq.shape[1]), pad)
        seq = jnp.concatenate([seq, nxt], axis=1)
    # One full pass over the final sequence: causal, so position i saw exactly what step i saw.
    full = np.asarray(fm(seq))  # (2, 10, vocab)
    for i, c in enumerate(cached):
        assert float(np.abs(np.asarray(c) - full[:, 3 + i]).max()) < 1e-5


def test_greedy_tokens_identical_in_jax_and_torch(models) -> None:
    # Weights x6 (as test_slots): the untrained model's greedy tokens are nearly constant ("58 58 58 ..."), so a
    # decoder that dropped its cache updates still matched; these continuations vary, so a broken cache shows.
    flat = {k: v * 6 if v.ndim > 1 else v for k, v in models[2].items()}
    tm = load_flat_params(TorchGPT(CFG), flat).eval()
    step = jax.export.deserialize(export_hlo.export_step(CFG).serialize())
    # Token-exact is a CPU fact (both frameworks in true fp32): on a GPU, TF32 matmuls may resolve a near-tie the
    # other way, which Lab 05's reference check excuses (labkit.export.reference). So JAX runs here on the CPU too.
    cpu = jax.devices("cpu")[0]
    with jax.default_device(cpu):  # the decoders place their weights on the default device when built
        decs = [serve.TorchDecoder(tm, "eager", device="cpu"), serve.JaxDecoder.native(CFG, flat),
                serve.JaxDecoder.from_exported(step, CFG, flat)]
    # Equal-length prompts: the full-recomputation reference (the torch model, no cache) has no padding.
    p = serve.left_pad(["ROMEO:", "JULIET", "Romeo!"], CFG, NEW)
    assert p.pad.tolist() == [0, 0, 0]
    with torch.no_grad():
        ref = serve.greedy_reference(lambda t: tm(torch.from_numpy(t).long()).numpy(), p.tokens, NEW)
    assert len({tuple(r) for r in ref}) == 3 and min(len(set(r)) for r in ref) >= 3, ref  # varied, per row
    with jax.default_device(cpu):
        for d in decs:
            assert np.array_equal(serve.generate(d, p, NEW).tokens, ref), d.name


def test_jax_decoder_donating_its_caches_as_on_an_accelerator(models, decoders, monkeypatch) -> None:
    # Real runtime behaviour: on a GPU or TPU JaxDecoder jits its step with donate_argnums=(2, 3), so XLA
    # writes the KV caches in place and deletes the arrays passed in; reading one again fails there only
    # ("Array has been deleted"). XLA:CPU honours donation on this jax, so with default_backend -> "gpu"
    # the accelerator's path runs here: built after the patch, the decoders donate.
    flat = models[2]
    p = serve.left_pad(PROMPTS, CFG, NEW)
    new = CFG.seq_len - p.tokens.shape[1]  # fill the cache to its last slot: every step reuses a donated cache
    ref = serve.generate(decoders[1], p, new).tokens  # the default CPU path: no donation
    step = jax.export.deserialize(export_hlo.export_step(CFG).serialize())
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    for d in (serve.JaxDecoder.native(CFG, flat), serve.JaxDecoder.from_exported(step, CFG, flat)):
        first = d.prefill(p.tokens, p.pad)[1]
        k0, v0 = d.k, d.v
        d.decode(np.asarray(first))
        assert k0.is_deleted() and v0.is_deleted(), f"{d.name}: the caches were not donated"
        assert np.array_equal(serve.generate(d, p, new).tokens, ref), d.name


def test_left_padded_batch_equals_each_prompt_alone(decoders) -> None:
    batch = serve.left_pad(PROMPTS, CFG, NEW)
    assert batch.pad.tolist() == [19, 0, 24] and batch.lengths.tolist() == [6, 25, 1]
    assert batch.tokens[0, :19].tolist() == [0] * 19 and batch.tokens[2, -1] == ord("x")
    alone = np.concatenate([serve.generate(decoders[0], serve.left_pad([q], CFG, NEW), NEW).tokens
                            for q in PROMPTS])
    for d in decoders:
        assert np.array_equal(serve.generate(d, batch, NEW).tokens, alone), d.name


def test_seeded_sampling(decoders) -> None:
    batch = serve.left_pad(PROMPTS, CFG, NEW)  # the shapes test_left_padded_batch compiled
    a = [serve.generate(d, batch, NEW, temperature=1.0, seed=3).tokens for d in decoders]
    assert all(np.array_equal(x, a[0]) for x in a), "same seed, same tokens on every path"
    assert np.array_equal(serve.generate(decoders[0], batch, NEW, temperature=1.0, seed=3).tokens, a[0])
    others = [serve.generate(decoders[0], batch, NEW, temperature=1.0, seed=s).tokens for s in range(4, 8)]
    assert any(not np.array_equal(o, a[0]) for o in others)
    greedy = serve.generate(decoders[0], batch, NEW).tokens
    cold = serve.generate(decoders[0], batch, NEW, temperature=1e-6, seed=1).tokens
    assert np.array_equal(greedy, cold)  # T -> 0 is greedy
    logits = np.log(np.array([[0.7, 0.2, 0.1]]))  # the sampler follows softmax(logits / T)
    rng = np.random.default_rng(0)
    freq = np.bincount([int(serve.sample(logits, 1.0, rng)[0]) for _ in range(4000)], minlength=3) / 4000
    assert np.allclose(freq, [0.7, 0.2, 0.1], atol=0.03)


@pytest.mark.parametrize("prompts, new, match", [
    (["a" * CFG.seq_len], 1, r"prompt 0 has 32 tokens; with max_new_tokens=1 it needs 33 positions, "
                             r"but the context holds 32"),
    (["ok", "b" * 30], 5, r"prompt 1 has 30 tokens.*Keep its last 27 tokens"),
    (["hello", ""], 4, r"prompt 1 is empty"),
    ([[]], 4, r"prompt 0 is empty"),
    ([], 4, r"no prompts"),
    ("hello", 4, r"pass a list of prompts"),
    ([[1, 2, 300]], 4, r"outside \[0, 256\)"),
    (["hi"], 0, r"max_new_tokens must be a positive integer"),
    (["hi"], 2.5, r"max_new_tokens must be a positive integer, got 2.5"),
    ([[1.7, 2.2]], 4, r"prompt 0 must hold integer token ids, got dtype float64"),  # once silently [1, 2]
    ([[1, float("nan")]], 4, r"prompt 0 must hold integer token ids"),
    ([b"hi"], 4, r"prompt 0 is bytes b'hi': pass text"),
    ([np.array([[1, 2], [3, 4]])], 4, r"prompt 0 must be 1-D token ids, got shape \(2, 2\)"),  # once [[1, 2, 3, 4]]
    (["ok", [[5, 6]]], 4, r"prompt 1 must be 1-D token ids, got shape \(1, 2\)"),
    # once "Keep its last -68 tokens (prompt[--68:])"
    (["hi"], 100, r"max_new_tokens=100 plus a prompt of at least 1 token exceeds the 32-token context; "
                  r"use max_new_tokens <= 31"),
    (["hi"], CFG.seq_len, r"max_new_tokens=32 .*exceeds the 32-token context; use max_new_tokens <= 31"),
])
def test_bad_prompts_refused(prompts, new, match) -> None:
    with pytest.raises(ValueError, match=match):
        serve.left_pad(prompts, CFG, new)


@pytest.mark.parametrize("kwargs, match", [
    ({"max_len": 0}, r"max_len must be in 1..cfg.seq_len=32 \(None: seq_len\), got 0"),  # once "the default"
    ({"max_len": 1000}, r"max_len must be in 1..cfg.seq_len=32"),  # once past the position table
    ({"max_len": -5}, r"max_len must be in 1..cfg.seq_len=32 .*got -5"),
    ({"pad_id": 999}, r"pad_id must be a token id in \[0, 256\), got 999"),  # once clamped by JAX's gather
    ({"pad_id": -1}, r"pad_id must be a token id in \[0, 256\), got -1"),
    ({"max_len": 8, "max_new_tokens": 8}, r"max_new_tokens=8 .*the 8-token context; use max_new_tokens <= 7"),
])
def test_left_pad_max_len_and_pad_id_checked(kwargs, match) -> None:
    with pytest.raises(ValueError, match=match):
        serve.left_pad(["hi"], CFG, **{"max_new_tokens": 4, **kwargs})


def test_left_pad_accepts_numpy_integers() -> None:
    p = serve.left_pad(["hi"], CFG, np.int64(4), pad_id=np.int32(1), max_len=np.int64(16))
    assert p.tokens.tolist() == serve.left_pad(["hi"], CFG, 4, pad_id=1, max_len=16).tokens.tolist()
    edge = serve.left_pad([np.int64(5), "x"], CFG, CFG.seq_len - 1)  # a lone id is a 1-token prompt; 1 + 31 fit
    assert edge.tokens.tolist() == [[5], [ord("x")]]


class _NeverRun:
    """A decoder the argument checks must stop before: any call fails the test."""
    cfg, max_len, name = CFG, CFG.seq_len, "never"

    def prefill(self, *a):
        raise AssertionError("generation started despite a bad argument")


@pytest.mark.parametrize("call, match", [
    (lambda d, p: serve.generate(d, p, 0), r"max_new_tokens must be a positive integer, got 0"),  # once 1 token
    (lambda d, p: serve.generate(d, p, -3), r"max_new_tokens must be a positive integer, got -3"),
    (lambda d, p: serve.generate(d, p, 2.5), r"max_new_tokens must be a positive integer, got 2.5"),
    (lambda d, p: serve.generate(d, p.tokens, 2), r"prompts must be a Prompts batch.*left_pad"),
    (lambda d, p: serve.benchmark(d, 0, 8, 4), r"batch must be a positive integer, got 0"),
    (lambda d, p: serve.benchmark(d, -2, 8, 4), r"batch must be a positive integer, got -2"),
    (lambda d, p: serve.benchmark(d, 2, 0, 4), r"prompt_len must be a positive integer, got 0"),
    (lambda d, p: serve.benchmark(d, 2, 8, 4, warmup=-1), r"warmup must be an integer >= 0, got -1"),
    (lambda d, p: serve.generate(d, p, 2, seed=-1), r"seed must be an integer >= 0, got -1"),  # once numpy's, unnamed
    (lambda d, p: serve.generate(d, p, 2, temperature=0.8, seed=1.5), r"seed must be an integer >= 0, got 1.5"),
    (lambda d, p: serve.benchmark(d, 2, 8, 4, seed="7"), r"seed must be an integer >= 0, got '7'"),
    (lambda d, p: serve.sample(np.zeros((1, 3)), 0.0, np.random.default_rng(0)), r"temperature must be .*> 0, got 0.0"),
    (lambda d, p: serve.sample(np.zeros((1, 3)), -1.0, np.random.default_rng(0)), r"temperature .*got -1.0"),
    (lambda d, p: serve.sample(np.zeros((1, 3)), 1.0, 0), r"rng must be a numpy Generator, got int"),
    (lambda d, p: serve.tokens_per_s(4, 10, -1.0, 0.01), r"ttft_s must be a finite number of seconds > 0, got -1.0"),
    (lambda d, p: serve.tokens_per_s(4, 1, 0.0, 0.0), r"ttft_s must be .*> 0, got 0.0"),  # once ZeroDivisionError
    (lambda d, p: serve.tokens_per_s(0, 10, 1.0, 0.01), r"batch must be a positive integer, got 0"),
    (lambda d, p: serve.tokens_per_s(4, 10, 1.0, -0.01), r"tpot_s must be a finite number of seconds >= 0"),
])
def test_bad_counts_refused_before_generating(call, match) -> None:
    with pytest.raises((ValueError, TypeError), match=match):
        call(_NeverRun(), serve.left_pad(["hi"], CFG, 4))
    assert serve.tokens_per_s(np.int64(4), 11, np.float32(0.5), 0.05) == pytest.approx(44.0)


def test_bad_generation_arguments(decoders) -> None:
    p = serve.left_pad(["hi"], CFG, 4)
    with pytest.raises(ValueError, match="temperature"):
        serve.generate(decoders[0], p, 4, temperature=-1.0)
    with pytest.raises(ValueError, match="exceed the decoder's cache"):
        serve.generate(decoders[0], p, CFG.seq_len)
    with pytest.raises(ValueError, match="new_tokens >= 2"):
        serve.benchmark(decoders[0], 1, 4, 1)


def test_benchmark_numbers_are_consistent(decoders) -> None:
    # batch 3 x 6 prompt tokens: shapes the greedy test already compiled (no new JAX compiles)
    stats = serve.sweep(decoders[:2], (3,), prompt_len=6, new_tokens=5, repeats=2)
    want = [("torch eager", 3), ("JAX jit", 3)]
    assert [(s.path, s.batch) for s in stats] == want
    for s in stats:
        assert 0 < s.ttft_p50_ms <= s.ttft_p95_ms and 0 < s.tpot_p50_ms <= s.tpot_p95_ms
        # throughput is the p50 latencies' tokens/s, so a host stall in one repeat cannot inflate it
        assert s.tokens_per_s == pytest.approx(serve.tokens_per_s(s.batch, s.new_tokens, s.ttft_p50_ms / 1e3,
                                                                  s.tpot_p50_ms / 1e3))
        assert set(s.row()) >= {"path", "batch", "tokens_per_s", "ttft_p95_ms", "tpot_p95_ms"}
    assert serve.tokens_per_s(4, 11, 0.5, 0.05) == pytest.approx(44 / 1.0)


def test_kv_cache_bytes_matches_the_allocated_cache() -> None:
    k, v = kv_cache.torch_new_cache(CFG, 3, 20)
    assert kv_cache.kv_cache_bytes(CFG, 3, 20) == k.numel() * 4 + v.numel() * 4
    kj, vj = kv_cache.jax_new_cache(CFG, 3, 20)
    assert kv_cache.kv_cache_bytes(CFG, 3, 20, 4) == kj.nbytes + vj.nbytes


def test_torch_over_jax_picks_the_fastest_torch_path_and_divides_by_jax_jit() -> None:
    def st(path: str, batch: int, tps: float) -> serve.ServeStats:
        return serve.ServeStats(path, batch, 4, 4, 1.0, 1.0, 1.0, 1.0, tps, 1)

    stats = [st("torch eager", 1, 100.0), st("torch eager + CUDA graph", 1, 300.0), st("JAX jit", 1, 200.0),
             st("StableHLO", 1, 900.0), st("torch eager", 8, 50.0)]
    cmp = serve.torch_over_jax(stats, 1)
    assert cmp["best_torch_path"] == "torch eager + CUDA graph" and cmp["best_torch_over_jax"] == 1.5
    assert cmp["by_path"] == {"torch eager": 0.5, "torch eager + CUDA graph": 1.5}  # StableHLO is not torch
    assert cmp["jax_jit_tokens_per_s"] == 200.0 and cmp["best_torch_tokens_per_s"] == 300.0
    assert serve.torch_over_jax(stats, 8) is None  # no JAX jit row at batch 8


def test_best_path_records_a_tie_by_the_plots_10_percent_rule() -> None:
    def st(path: str, batch: int, tps: float) -> serve.ServeStats:
        return serve.ServeStats(path, batch, 4, 4, 1.0, 1.0, 1.0, 1.0, tps, 1)

    # the Lab 05 smoke run: StableHLO 19,635 vs JAX jit 18,390 tokens/s (+7%) is a tie, not a winner
    stats = [st("StableHLO", 8, 19635.0), st("JAX jit", 8, 18390.0), st("torch eager", 8, 9000.0),
             st("torch eager", 1, 1000.0), st("JAX jit", 1, 1200.0)]
    assert serve.best_path(stats, 8) == "StableHLO ≈ JAX jit"
    assert serve.best_path(stats, 1) == "JAX jit"  # 1.2x > 1.1x: a clear winner
    assert serve.best_path(stats[:1], 8) == "StableHLO"  # one path: named
    assert serve.fastest({"a": 110.0, "b": 100.0}) == ("a", "b")  # exactly 10% is still a tie
    with pytest.raises(ValueError, match="no stats at batch 32; batches measured: \\[1, 8\\]"):
        serve.best_path(stats, 32)
    with pytest.raises(ValueError, match="no paths to rank"):
        serve.fastest({})


@pytest.mark.parametrize("runtime, asked", [("cuda", "cuda"), ("xla", "cpu")])
def test_engines_given_no_device_serve_on_serving_devices_choice(monkeypatch: pytest.MonkeyPatch, runtime: str,
                                                                 asked: str) -> None:
    """device=None: every torch engine asks runtime.device for the GPU on a CUDA runtime, the host on a TPU one."""
    from labkit.export import cuda_graph, slots
    from labkit.runtime import device as dev_mod

    kinds = []  # what each engine asked torch_device for; the engine then gets the host (this machine has no GPU)
    monkeypatch.setattr(dev_mod, "torch_device_kind", lambda prefer_xla=False: runtime)
    monkeypatch.setattr(dev_mod, "torch_device", lambda kind=None: kinds.append(kind) or torch.device("cpu"))
    tm = TorchGPT(CFG)
    engines = [serve.TorchDecoder(tm), cuda_graph.StaticTorchDecoder(tm, graphs=False), slots.TorchSlots(tm, 2, graphs=False)]
    assert kinds == [asked] * 3 and all(e.device == torch.device("cpu") for e in engines)


def test_every_lab_decoder_says_it_runs_on_this_cpu(decoders) -> None:
    from labkit.export import batching

    assert [batching.on_cpu(d) for d in decoders] == [True, True, True]  # the bar Lab 05 then asks: 1.5x
