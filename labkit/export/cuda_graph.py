"""Serving with CUDA graphs: a static KV cache and a decode step captured once, replayed per token (Lab 05).

A small model's decode step is *launch-bound* on a GPU: each of its ~20 ops per layer is a
kernel of a few microseconds, and PyTorch spends more time launching them from Python than
the GPU spends running them (torch.compile in its default mode fuses some, but still launches
each fused kernel from Python every step). A **CUDA graph** records the whole step's kernels
once and replays them with a single launch. Replay re-runs the recorded kernels on the *same
memory*, so every input must live in a preallocated buffer that the caller overwrites:

- the KV cache is allocated once per batch size (``max_len`` slots) and zeroed on each prefill;
- the tokens and the start slot share one device buffer ``inp`` (batch * t + 1,) int64, filled
  by one host-to-device copy per step (the start slot is a tensor, never a Python int, so the
  graph does not bake in the step's position);
- the outputs (logits, argmax) are the graph's own tensors, overwritten by the next replay:
  copy them out (``to_numpy``) before the next step, as a server streaming tokens does anyway.

One graph per input shape (batch, t): the prefill of a prompt length and the decode step (t = 1)
of each batch size. ``compiled=True`` compiles the *decode* step with ``torch.compile`` (fixed
shapes) inside the graph: Inductor's fused kernels, launched by one replay; prefill stays
eager ops (graphed on CUDA), so a new prompt length costs a capture, not a recompile.

On a CPU the same static-buffer path runs without graphs (there is nothing to capture) and
gives the same tokens as ``serve.TorchDecoder`` (tested); that is what the course can check
everywhere, and the speed claim is measured by ``benchmarks/bench_serve.py`` on a GPU.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from labkit.export.kv_cache import torch_new_cache, torch_step, torch_step_module

WARMUP = 2  # eager runs before capture: lazy cuBLAS/cuDNN setup, and torch.compile's compile


def capture_cuda_graph(fn: Callable[[], Any], warmup: int = WARMUP) -> Callable[[], Any]:
    """Record fn() (no arguments, static buffers) as a CUDA graph; returns replay -> fn's outputs (Lab 05)."""
    import torch

    # Warm-up on a side stream, as torch's CUDA-graph recipe asks: the first calls allocate
    # workspaces and pick kernels, which must not happen inside the capture. The warm-up runs
    # compute the step for real; a KV-cache step is idempotent (it rewrites the same slots with
    # the same values), so running it again on replay changes nothing.
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side), torch.no_grad():
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph), torch.no_grad():
        out = fn()  # recorded, not run: `out` are the graph's static output tensors

    def replay() -> Any:
        graph.replay()
        return out

    replay.graph = graph  # keep the graph (and its memory pool) alive with the closure
    return replay


def _no_graph(fn: Callable[[], Any]) -> Callable[[], Any]:
    return fn  # the CPU path: the same static buffers, each call runs the ops


class StaticTorchDecoder:
    """KV-cache decoding over static buffers, replayed as CUDA graphs on CUDA (Lab 05)."""

    def __init__(self, model: Any, compiled: bool = False, graphs: bool | None = None,
                 max_len: int | None = None, device: Any = None, max_graphs: int = 32,
                 capture: Callable[[Callable[[], Any]], Callable[[], Any]] | None = None) -> None:
        import torch

        from labkit.runtime import device as dev_mod

        if device is None:  # the GPU if torch sees one, else the CPU (not torch-xla: see serving_device)
            device = dev_mod.serving_device()
        self.device = torch.device(device)
        on_cuda = self.device.type == "cuda"
        graphs = on_cuda if graphs is None else graphs
        if graphs and not on_cuda and capture is None:
            raise ValueError(f"CUDA graphs need a CUDA device, got {self.device}; pass graphs=False "
                             "(or leave it None: graphs on CUDA only)")
        if not isinstance(max_graphs, int) or max_graphs < 0:
            raise ValueError(f"max_graphs must be an integer >= 0, got {max_graphs!r}")
        self.cfg, self.max_len, self.compiled = model.cfg, max_len or model.cfg.seq_len, compiled
        self.capture = (capture or capture_cuda_graph) if graphs else _no_graph
        self.graphs, self.max_graphs = graphs, max_graphs
        self.name = ("torch.compile" if compiled else "torch eager") + (" + CUDA graph" if graphs else " static")
        self.model = model.to(self.device).eval()
        # dynamic=False: one specialised program per batch size (decode only), as a graph needs.
        self._decode_step = torch.compile(torch_step_module(self.model), dynamic=False) if compiled else None
        self._caches: dict[int, tuple[Any, Any, Any]] = {}  # batch -> (k, v, pad), allocated once
        self._runs: dict[tuple[int, int], tuple[Any, Callable[[], Any]]] = {}  # (batch, t) -> (inp, run)
        self.captured = 0  # graphs recorded so far (each holds its own memory pool)
        self.batch = 0
        self.pos = 0

    def prefill(self, tokens: np.ndarray, pad: np.ndarray) -> tuple[Any, Any]:
        """Zero this batch size's cache, run the prompt; (logits (batch, vocab), argmax), static (Lab 05)."""
        import torch

        b = tokens.shape[0]
        if b not in self._caches:
            k, v = torch_new_cache(self.cfg, b, self.max_len, device=self.device)
            self._caches[b] = (k, v, torch.zeros(b, dtype=torch.long, device=self.device))
        k, v, pad_buf = self._caches[b]
        # In place: captured graphs hold these addresses. Zeroing makes the state equal to a fresh
        # cache (stale slots are masked anyway, but equal state means equal arithmetic).
        k.zero_()
        v.zero_()
        pad_buf.copy_(torch.as_tensor(np.asarray(pad), dtype=torch.long))
        self.batch, self.pos = b, 0
        return self._run(np.asarray(tokens))

    def decode(self, tok: np.ndarray) -> tuple[Any, Any]:
        """One new token per row, tok (batch,) -> (logits, argmax), valid until the next step (Lab 05)."""
        return self._run(np.asarray(tok).reshape(-1, 1))

    def _run(self, tokens: np.ndarray) -> tuple[Any, Any]:
        import torch

        b, t = tokens.shape
        if b != self.batch:
            raise ValueError(f"decode got {b} rows but the last prefill had {self.batch}: prefill first")
        host = np.empty(b * t + 1, dtype=np.int64)  # tokens, then the start slot: one copy per step
        host[:-1] = tokens.reshape(-1)
        host[-1] = self.pos
        key = (b, t)
        if key in self._runs:
            inp, run = self._runs[key]
            inp.copy_(torch.from_numpy(host))
        else:
            inp = torch.from_numpy(host).to(self.device)  # filled before capture: warm-up sees real inputs
            run = self._make_run(inp, b, t)
            self._runs[key] = (inp, run)
        with torch.no_grad():
            logits, best = run()
        self.pos += t
        return logits, best

    def _make_run(self, inp: Any, b: int, t: int) -> Callable[[], Any]:
        k, v, pad = self._caches[b]
        tok, start = inp[:b * t].view(b, t), inp[b * t]  # views: fixed addresses inside inp
        step = self._decode_step if (t == 1 and self._decode_step is not None) else (
            lambda *a: torch_step(self.model, *a))

        def fn() -> tuple[Any, Any]:
            logits = step(tok, k, v, start, pad)  # (batch, vocab)
            return logits, logits.argmax(-1)  # argmax inside the graph: one replay per token

        if self.graphs and self.captured >= self.max_graphs:
            return fn  # past the budget of graphs: still correct, launched op by op
        self.captured += self.graphs
        return self.capture(fn)

    @staticmethod
    def to_numpy(x: Any) -> np.ndarray:
        """Device tensor -> numpy (copies to the host, so it also waits for the device) (Lab 05)."""
        return x.detach().cpu().numpy()
