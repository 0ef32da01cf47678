"""labkit.export.cuda_graph: the static-buffer decoder gives the same tokens as serve.TorchDecoder on the
CPU; with a stand-in for graph capture (replay = run the recorded closure again on the same buffers, which
is what a CUDA graph replay does) it captures once per shape and keeps giving the same tokens."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from labkit.export import cuda_graph, serve
from labkit.gpt.config import get_config
from labkit.gpt.torch_model import TorchGPT

CFG = get_config("test")
PROMPTS = ["ROMEO:", "O Romeo, Romeo", "x"]  # mixed lengths: left-padded
NEW = 8


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
def reference(model) -> np.ndarray:
    return serve.generate(serve.TorchDecoder(model, "eager", device="cpu"), serve.left_pad(PROMPTS, CFG, NEW), NEW).tokens


class FakeCapture:
    """Counts captures; replay runs the recorded closure again, reading the same static buffers."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, fn):
        self.count += 1
        return fn


def test_static_path_on_cpu_gives_the_same_tokens(model, reference) -> None:
    assert len({tuple(r) for r in reference}) == 3 and len(set(reference[1])) > 1  # rows differ, tokens vary
    d = cuda_graph.StaticTorchDecoder(model, device="cpu")
    assert d.name == "torch eager static" and not d.graphs
    batch = serve.left_pad(PROMPTS, CFG, NEW)
    assert np.array_equal(serve.generate(d, batch, NEW).tokens, reference)
    one = serve.left_pad(PROMPTS[1:2], CFG, NEW)  # another batch size, then back: caches kept per size
    assert np.array_equal(serve.generate(d, one, NEW).tokens, reference[1:2])
    assert np.array_equal(serve.generate(d, batch, NEW).tokens, reference)  # prefill re-zeroes the cache
    sampled = serve.generate(d, batch, NEW, temperature=1.0, seed=3).tokens
    ref = serve.generate(serve.TorchDecoder(model, "eager", device="cpu"), batch, NEW, temperature=1.0, seed=3)
    assert np.array_equal(sampled, ref.tokens)  # logits, not only the argmax, are the same


def test_captured_once_per_shape_then_replayed(model, reference) -> None:
    cap = FakeCapture()
    d = cuda_graph.StaticTorchDecoder(model, graphs=True, device="cpu", capture=cap)
    assert d.name == "torch eager + CUDA graph"
    batch = serve.left_pad(PROMPTS, CFG, NEW)
    for _ in range(3):
        assert np.array_equal(serve.generate(d, batch, NEW).tokens, reference)
    assert cap.count == 2 and d.captured == 2  # prefill (3, 14) and decode (3, 1), captured once each
    serve.generate(d, serve.left_pad(["ab"], CFG, NEW), NEW)
    assert cap.count == 4


def test_graph_budget_is_kept_and_still_correct(model, reference) -> None:
    cap = FakeCapture()
    d = cuda_graph.StaticTorchDecoder(model, graphs=True, device="cpu", capture=cap, max_graphs=1)
    assert np.array_equal(serve.generate(d, serve.left_pad(PROMPTS, CFG, NEW), NEW).tokens, reference)
    assert cap.count == 1  # the decode step ran op by op, past the budget


def test_bad_arguments(model) -> None:
    with pytest.raises(ValueError, match="CUDA graphs need a CUDA device, got cpu"):
        cuda_graph.StaticTorchDecoder(model, graphs=True, device="cpu")
    with pytest.raises(ValueError, match="max_graphs must be an integer >= 0, got -1"):
        cuda_graph.StaticTorchDecoder(model, device="cpu", max_graphs=-1)
    d = cuda_graph.StaticTorchDecoder(model, device="cpu")
    d.prefill(np.array([[1, 2]]), np.array([0]))
    with pytest.raises(ValueError, match="decode got 2 rows but the last prefill had 1"):
        d.decode(np.array([3, 4]))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_cuda_graph_on_gpu_gives_the_cpu_tokens(model, reference) -> None:
    d = cuda_graph.StaticTorchDecoder(model, device="cuda")
    assert d.graphs
    assert np.array_equal(serve.generate(d, serve.left_pad(PROMPTS, CFG, NEW), NEW).tokens, reference)


def test_capture_follows_torchs_cuda_graph_recipe(monkeypatch: pytest.MonkeyPatch) -> None:
    # torch.cuda as a GPU runtime shows it, recorded: the warm-up runs on a side stream that first waits for
    # the current one, the current stream waits for it before capture, fn runs once inside torch.cuda.graph,
    # and every replay() replays that graph and returns the outputs recorded at capture (static buffers).
    import contextlib

    log: list[str] = []

    class Stream:
        def __init__(self, name: str = "side") -> None:
            self.name = name

        def wait_stream(self, other: "Stream") -> None:
            log.append(f"{self.name} waits {other.name}")

    class Graph:
        def replay(self) -> None:
            log.append("replay")

    main = Stream("main")
    where = ["main"]  # the stream fn runs on

    @contextlib.contextmanager
    def on(ctx: str):
        where.append(ctx)
        yield
        where.pop()

    fake = {"Stream": Stream, "current_stream": lambda: main, "CUDAGraph": Graph,
            "stream": lambda s: on(s.name), "graph": lambda g: on("capture")}
    for name, value in fake.items():
        monkeypatch.setattr(torch.cuda, name, value, raising=False)
    calls = []

    def fn():
        calls.append(where[-1])
        return f"out{len(calls)}"

    replay = cuda_graph.capture_cuda_graph(fn, warmup=2)
    assert calls == ["side", "side", "capture"] and log == ["side waits main", "main waits side"]
    assert replay() == replay() == "out3" and log[-2:] == ["replay", "replay"] and len(calls) == 3
    assert isinstance(replay.graph, Graph)  # kept alive with the closure
