"""labkit.export.slots: continuous batching (requests joining and leaving rows between decode steps,
the slot counter wrapping) gives each request the tokens it gets decoded alone, greedy, in torch and JAX."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from labkit.export import load, serve, slots
from labkit.gpt.config import get_config
from labkit.gpt.convert import flat_params_numpy
from labkit.gpt.torch_model import TorchGPT

CFG = get_config("test")  # seq_len 32: the cache has 64 slots and wraps every 32 steps


@pytest.fixture(scope="module")
def model() -> torch.nn.Module:
    torch.manual_seed(0)
    m = TorchGPT(CFG).eval()
    with torch.no_grad():  # sharper logits: varied greedy tokens, so a wrong row or slot shows
        for p in m.parameters():
            if p.dim() > 1:
                p.mul_(6)
    return m


@pytest.fixture(scope="module")
def requests_alone(model) -> tuple[list[load.Request], list[np.ndarray]]:
    reqs = load.poisson_requests(12, 200.0, (1, 14), (1, 12), CFG.vocab_size, seed=5)
    one = serve.TorchDecoder(model, "eager", device="cpu")
    alone = [serve.generate(one, serve.left_pad([r.prompt], CFG, r.output_len), r.output_len).tokens[0]
             for r in reqs]
    assert len({tuple(a) for a in alone}) >= 9  # varied outputs: a mixed-up row would show
    return reqs, alone


@pytest.fixture(scope="module")
def engines(model) -> list:
    # shared by both policies: an engine serves run after run (every row is free at the end), and
    # JAX compiles its prefill buckets and decode step once
    return [slots.TorchSlots(model, 2, device="cpu"), slots.JaxSlots(CFG, flat_params_numpy(model), 2)]


@pytest.mark.parametrize("policy", load.POLICIES)
def test_batched_tokens_equal_one_at_a_time_greedy(engines, requests_alone, policy) -> None:
    reqs, alone = requests_alone
    for engine in engines:
        shifts = engine.shifts
        traces = load.serve_open_loop(reqs, engine, policy)
        for t, a in zip(traces, alone):
            assert np.array_equal(np.array(t.tokens), a), f"{engine.name} {policy}: request {t.id}"
        assert engine.shifts > shifts  # the counter wrapped mid-run, with rows live
        assert max(t.token_s[-1] for t in traces) > 0


def test_jax_slots_donating_their_caches_as_on_an_accelerator(model, requests_alone, monkeypatch) -> None:
    # Real runtime behaviour: on a GPU or TPU JaxSlots donates the caches to its prefill, decode and
    # shift programs (XLA updates them in place and deletes the arrays passed in); a use-after-donate
    # fails there only ("Array has been deleted"). XLA:CPU honours donation on this jax, so with
    # default_backend -> "gpu" the accelerator's path runs here, the slot counter wrapping (shift) included.
    import jax

    reqs, alone = requests_alone
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    engine = slots.JaxSlots(CFG, flat_params_numpy(model), 2)  # built after the patch: its programs donate
    k0 = engine.k
    traces = load.serve_open_loop(reqs, engine, "continuous")
    assert k0.is_deleted(), "the caches were not donated"
    assert engine.shifts > 0  # the counter passed max_len with rows live: the donated shift ran
    for t, a in zip(traces, alone):
        assert np.array_equal(np.array(t.tokens), a), f"request {t.id}"


def test_graph_capture_path_same_tokens(model, requests_alone) -> None:
    reqs, alone = requests_alone
    count = []
    engine = slots.TorchSlots(model, 4, device="cpu", graphs=True, capture=lambda fn: count.append(1) or fn)
    assert engine.name == "torch eager + CUDA-graph decode"
    traces = load.serve_open_loop(reqs, engine, "continuous")
    assert all(np.array_equal(np.array(t.tokens), a) for t, a in zip(traces, alone))
    assert count == [1]  # one decode graph for the whole run: rows join and leave, the shape stays


def test_bucket() -> None:
    assert [slots.bucket(n, 32) for n in (1, 2, 3, 4, 5, 17, 32, 40)] == [1, 2, 4, 4, 8, 32, 32, 32]


def test_bad_admit(model) -> None:
    for engine in (slots.TorchSlots(model, 2, device="cpu"), slots.JaxSlots(CFG, flat_params_numpy(model), 2)):
        with pytest.raises(ValueError, match=r"slot 2 outside \[0, 2\)"):
            engine.admit(2, np.array([1]))
        with pytest.raises(ValueError, match=r"prompt of 0 tokens: need 1 .. 32"):
            engine.admit(0, np.array([], dtype=np.int64))
        with pytest.raises(ValueError, match=r"one prompt per row and distinct rows, got rows \[0, 0\] for 2"):
            engine.admit_batch([0, 0], [np.array([1]), np.array([2])])
        with pytest.raises(ValueError, match=r"got rows \[\] for 0 prompts"):
            engine.admit_batch([], [])
        with pytest.raises(ValueError, match=r"slot 3 outside \[0, 2\)"):
            engine.admit_batch([3], [np.array([1])])
    with pytest.raises(ValueError, match="slots must be a positive integer, got 0"):
        slots.TorchSlots(model, 0, device="cpu")


def test_one_padded_prefill_equals_row_by_row(model) -> None:
    # Rows 1 and 2 of 3 admitted in one call (prompts of 3 and 9 tokens, left-padded to the longest, or
    # to JAX's bucket of 16) give the first tokens and the next steps' tokens of one admit per row; row 0,
    # busy, keeps its own stream through the batch prefill (JAX computes it, then keeps the old cache).
    rng = np.random.default_rng(7)
    p0, p1, p2 = (rng.integers(0, CFG.vocab_size, n) for n in (5, 3, 9))
    for make in (lambda: slots.TorchSlots(model, 3, device="cpu"),
                 lambda: slots.JaxSlots(CFG, flat_params_numpy(model), 3)):
        one, batch = make(), make()
        for e in (one, batch):
            e.admit(0, p0)
            e.step()
        firsts = [one.admit(1, p1), one.admit(2, p2)]
        assert batch.admit_batch([1, 2], [p1, p2]) == firsts, batch.name
        for _ in range(4):
            assert np.array_equal(one.step(), batch.step()), batch.name


def _most_in_flight(traces: list[load.Trace]) -> int:
    """Most requests between their first and last token at any one token time: rows busy at once."""
    times = sorted({t for tr in traces for t in tr.token_s})
    return max(sum(tr.token_s[0] <= x <= tr.token_s[-1] for tr in traces) for x in times)


@pytest.mark.parametrize("policy", load.POLICIES)
def test_a_burst_shares_every_row_and_still_gives_each_request_its_tokens(engines, requests_alone, policy) -> None:
    # All 12 requests at t = 0: both rows are busy together (the batch is really shared, not one row at a
    # time), never more than the engine has, and every request still gets exactly its tokens-alone.
    reqs, alone = requests_alone
    burst = [load.Request(r.id, 0.0, r.prompt, r.output_len) for r in reqs]
    for engine in engines:
        traces = load.serve_open_loop(burst, engine, policy)
        assert all(np.array_equal(np.array(t.tokens), a) for t, a in zip(traces, alone)), f"{engine.name} {policy}"
        assert _most_in_flight(traces) == 2, f"{engine.name} {policy}: rows busy at once"
    one_at_a_time = load.alone(burst)  # arrivals spread out: never two in flight
    assert _most_in_flight(load.serve_open_loop(one_at_a_time, engines[0], policy)) == 1
