"""Batch slots for continuous batching: requests join and leave a fixed-shape decode step (Lab 05).

An engine holds ``slots`` rows of one static KV cache and a shared *slot counter* ``cur``: every
decode step writes all rows' new keys and values at slot ``cur``, then ``cur += 1``. A request
joins a free row between steps by a prefill of that row alone, written at the slots just before
``cur`` (``cur - L .. cur - 1`` for an L-token prompt); the row's ``pad`` = ``cur - L`` marks
where its sequence starts. That is the left-padding rule of ``labkit.export.kv_cache`` (position
= slot - pad, keys before pad masked), so rows that started at different times share one step,
and each generates exactly what it would alone (tested). A free row gets ``pad = max_len``: it
attends to itself only and its output is ignored; the step keeps its shape, as a captured CUDA
graph (or a server padding to its captured batch sizes) needs.

The cache has ``2 * seq_len`` slots and ``cur`` starts at ``seq_len``, so a prompt always fits
before it. When ``cur`` reaches the end, the upper half is copied onto the lower half and every
pad moves down by ``seq_len``: a live row spans at most ``seq_len`` slots, so none is cut.

Engines: ``TorchSlots`` (eager, or the decode step as a CUDA graph on CUDA) and ``JaxSlots``
(jitted; prompts left-padded to power-of-two buckets so few prefill programs compile). Both
implement the engine contract of ``labkit.export.load``: ``slots``, ``max_tokens``,
``admit(slot, prompt) -> first token``, ``step() -> next token of every slot``, ``release(slot)``,
and ``admit_batch(rows, prompts) -> first tokens``: several free rows prefilled in one call, the
prompts left-padded to the longest (a static batch's one padded prefill). Torch runs it on those rows
only; JAX runs every row, keeping the admitted ones, so one program per bucket serves any batch.
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from labkit.export.kv_cache import jax_new_cache, jax_step_fn, torch_new_cache, torch_step
from labkit.gpt.config import GPTConfig


def _check_admit(engine: Any, slot: int, prompt: np.ndarray) -> np.ndarray:
    prompt = np.asarray(prompt, dtype=np.int64).reshape(-1)
    if not 0 <= slot < engine.slots:
        raise ValueError(f"slot {slot} outside [0, {engine.slots})")
    if prompt.size == 0 or prompt.size > engine.max_tokens:
        raise ValueError(f"prompt of {prompt.size} tokens: need 1 .. {engine.max_tokens} (the model's context)")
    return prompt


def _check_batch(engine: Any, rows: Sequence[int], prompts: Sequence[np.ndarray]) -> tuple[list[int], list[np.ndarray]]:
    rows = [int(r) for r in rows]
    if not rows or len(rows) != len(prompts) or len(set(rows)) != len(rows):
        raise ValueError(f"admit_batch needs one prompt per row and distinct rows, got rows {rows} for "
                         f"{len(prompts)} prompts")
    return rows, [_check_admit(engine, r, p) for r, p in zip(rows, prompts)]


def _left_padded(prompts: Sequence[np.ndarray], width: int, rows: int | None = None,
                 at: Sequence[int] | None = None) -> np.ndarray:
    """Prompts right-aligned in a (rows, width) zero array (the zeros are masked out by each row's pad)."""
    tok = np.zeros((rows or len(prompts), width), dtype=np.int64)
    for i, p in zip(at if at is not None else range(len(prompts)), prompts):
        tok[i, width - p.size:] = p
    return tok


def bucket(n: int, cap: int) -> int:
    """The power of two >= n, at most cap: prompt lengths that share one prefill program (Lab 05)."""
    return min(1 << max(0, int(n) - 1).bit_length(), cap)


class TorchSlots:
    """Continuous-batching engine over a TorchGPT; the decode step is a CUDA graph on CUDA (Lab 05)."""

    def __init__(self, model: Any, slots: int, device: Any = None, graphs: bool | None = None,
                 capture: Callable[[Callable[[], Any]], Callable[[], Any]] | None = None) -> None:
        import torch

        from labkit.export.cuda_graph import capture_cuda_graph
        from labkit.runtime import device as dev_mod

        if not isinstance(slots, int) or slots < 1:
            raise ValueError(f"slots must be a positive integer, got {slots!r}")
        if device is None:
            device = dev_mod.serving_device()
        self.device = torch.device(device)
        graphs = self.device.type == "cuda" if graphs is None else graphs
        self.model = model.to(self.device).eval()
        self.cfg, self.slots = model.cfg, slots
        self.max_tokens = s = self.cfg.seq_len
        self.max_len = 2 * s
        self.k, self.v = torch_new_cache(self.cfg, slots, self.max_len, device=self.device)
        self.pad = torch.full((slots,), self.max_len, dtype=torch.long, device=self.device)  # all free
        self.inp = torch.zeros(slots + 1, dtype=torch.long, device=self.device)  # tokens, then cur
        self.cur, self.shifts = s, 0
        self.last = np.zeros(slots, dtype=np.int64)  # each row's latest token, fed by the next step
        self.name = "torch eager" + (" + CUDA-graph decode" if graphs else "")  # prefill runs op by op
        self._capture = (capture or capture_cuda_graph) if graphs else (lambda fn: fn)
        self._run: Callable[[], Any] | None = None  # captured at the first step (real inputs in inp)

    def admit(self, slot: int, prompt: np.ndarray) -> int:
        """Prefill `prompt` into row `slot` at the slots before cur; returns its first token (Lab 05)."""
        import torch

        prompt = _check_admit(self, slot, prompt)
        start = self.cur - prompt.size
        self.pad[slot] = start
        row = slice(slot, slot + 1)  # views: the step writes the row's k/v in place in the shared cache
        with torch.no_grad():
            logits = torch_step(self.model, torch.as_tensor(prompt, device=self.device)[None], self.k[:, row],
                                self.v[:, row], torch.tensor(start, device=self.device), self.pad[row])
        self.last[slot] = int(logits.argmax(-1)[0])  # to the host: the first token is streamed now
        return int(self.last[slot])

    def admit_batch(self, rows: Sequence[int], prompts: Sequence[np.ndarray]) -> list[int]:
        """Prefill several rows in one call, prompts left-padded to the longest; their first tokens (Lab 05)."""
        import torch

        rows, prompts = _check_batch(self, rows, prompts)
        n = max(p.size for p in prompts)
        idx = torch.as_tensor(rows, device=self.device)
        self.pad[idx] = torch.as_tensor([self.cur - p.size for p in prompts], device=self.device)
        k, v = self.k[:, idx], self.v[:, idx]  # copies of those rows (advanced indexing): written back below
        with torch.no_grad():
            logits = torch_step(self.model, torch.as_tensor(_left_padded(prompts, n), device=self.device), k, v,
                                torch.tensor(self.cur - n, device=self.device), self.pad[idx])
        self.k[:, idx], self.v[:, idx] = k, v  # in place: a captured decode graph keeps the cache's address
        best = logits.argmax(-1).cpu().numpy().astype(np.int64)  # to the host: the first tokens leave now
        self.last[rows] = best
        return [int(b) for b in best]

    def step(self) -> np.ndarray:
        """One decode step of every row at slot cur; returns the next tokens (slots,) (Lab 05)."""
        import torch

        if self.cur == self.max_len:
            self._shift()
        self.inp.copy_(torch.from_numpy(np.append(self.last, self.cur)))
        if self._run is None:
            tok, start = self.inp[:self.slots].view(self.slots, 1), self.inp[self.slots]

            def fn() -> Any:
                return torch_step(self.model, tok, self.k, self.v, start, self.pad).argmax(-1)  # (slots,)

            self._run = self._capture(fn)
        with torch.no_grad():
            best = self._run()
        self.cur += 1
        self.last = best.cpu().numpy().astype(np.int64)
        return self.last.copy()

    def release(self, slot: int) -> None:
        """Free row `slot`: it attends to itself only until a new request joins (Lab 05)."""
        self.pad[slot] = self.max_len

    def _shift(self) -> None:
        s = self.max_tokens
        self.k[..., :s, :].copy_(self.k[..., s:, :])  # (n_layer, slots, heads, 2s, hd): upper half down
        self.v[..., :s, :].copy_(self.v[..., s:, :])
        busy = self.pad < self.max_len
        self.pad.copy_(self.pad - s * busy)
        self.cur -= s
        self.shifts += 1


class JaxSlots:
    """Continuous-batching engine over the JAX KV-cache step, jitted (Lab 05)."""

    def __init__(self, cfg: GPTConfig, flat: dict[str, np.ndarray], slots: int,
                 precision: str | None = "highest") -> None:
        import jax
        import jax.numpy as jnp

        if not isinstance(slots, int) or slots < 1:
            raise ValueError(f"slots must be a positive integer, got {slots!r}")
        self.cfg, self.slots, self.precision, self.name = cfg, slots, precision, "JAX jit"
        self.max_tokens = s = cfg.seq_len
        self.max_len = 2 * s
        self.flat = {n: jnp.asarray(a) for n, a in flat.items()}
        self.k, self.v = jax_new_cache(cfg, slots, self.max_len)
        self.pad = np.full(slots, self.max_len, dtype=np.int32)  # host copy, sent with each call
        self.cur, self.shifts = s, 0
        self.last = np.zeros(slots, dtype=np.int32)
        step = jax_step_fn(cfg)
        zero = jnp.zeros((), jnp.int32)

        def decode(flat: Any, tok: Any, k: Any, v: Any, cur: Any, pad: Any) -> Any:
            logits, k, v = step(flat, tok, k, v, cur, pad)
            return jnp.argmax(logits, -1), k, v

        def prefill(flat: Any, tok: Any, k: Any, v: Any, start: Any, pad: Any, r: Any) -> Any:
            # one row (slot r) of the caches (n_layer, slots, max_len, heads, hd), then written back
            at = (zero, r, zero, zero, zero)
            kr = jax.lax.dynamic_slice_in_dim(k, r, 1, axis=1)
            vr = jax.lax.dynamic_slice_in_dim(v, r, 1, axis=1)
            logits, kr, vr = step(flat, tok, kr, vr, start, pad)
            return jnp.argmax(logits, -1), jax.lax.dynamic_update_slice(k, kr, at), \
                jax.lax.dynamic_update_slice(v, vr, at)

        def prefill_rows(flat: Any, tok: Any, k: Any, v: Any, start: Any, pad: Any, keep: Any) -> Any:
            # every row at slots start .. cur - 1 (a fixed shape: one program per bucket); only `keep` rows kept
            best, k2, v2 = decode(flat, tok, k, v, start, pad)
            m = keep[None, :, None, None, None]  # (slots,) -> the caches' (n_layer, slots, max_len, heads, hd)
            return best, jnp.where(m, k2, k), jnp.where(m, v2, v)

        def shift(k: Any) -> Any:
            return k.at[:, :, :s].set(k[:, :, s:])

        donate = jax.default_backend() != "cpu"  # update the caches in place on an accelerator
        self._decode = jax.jit(decode, donate_argnums=(2, 3) if donate else ())
        self._prefill = jax.jit(prefill, donate_argnums=(2, 3) if donate else ())
        self._prefill_rows = jax.jit(prefill_rows, donate_argnums=(2, 3) if donate else ())
        self._shift_fn = jax.jit(shift, donate_argnums=(0,) if donate else ())

    def admit(self, slot: int, prompt: np.ndarray) -> int:
        """Prefill `prompt` into row `slot`, left-padded to a bucket; returns its first token (Lab 05)."""
        import jax

        prompt = _check_admit(self, slot, prompt)
        n = prompt.size
        b = bucket(n, self.max_tokens)
        tok = np.zeros((1, b), dtype=np.int32)
        tok[0, b - n:] = prompt  # bucket pad in front: masked out by pad = cur - n
        self.pad[slot] = self.cur - n
        with jax.default_matmul_precision(self.precision):
            best, self.k, self.v = self._prefill(self.flat, tok, self.k, self.v, np.int32(self.cur - b),
                                                 self.pad[slot:slot + 1], np.int32(slot))
        self.last[slot] = int(np.asarray(best)[0])
        return int(self.last[slot])

    def admit_batch(self, rows: Sequence[int], prompts: Sequence[np.ndarray]) -> list[int]:
        """Prefill several rows in one call, prompts left-padded to a shared bucket; their first tokens (Lab 05)."""
        import jax

        rows, prompts = _check_batch(self, rows, prompts)
        b = bucket(max(p.size for p in prompts), self.max_tokens)
        for r, p in zip(rows, prompts):
            self.pad[r] = self.cur - p.size
        keep = np.zeros(self.slots, dtype=bool)
        keep[rows] = True
        tok = _left_padded(prompts, b, self.slots, rows).astype(np.int32)
        with jax.default_matmul_precision(self.precision):
            best, self.k, self.v = self._prefill_rows(self.flat, tok, self.k, self.v, np.int32(self.cur - b),
                                                      self.pad, keep)
        self.last[rows] = np.asarray(best)[rows]
        return [int(self.last[r]) for r in rows]

    def step(self) -> np.ndarray:
        """One decode step of every row at slot cur; returns the next tokens (slots,) (Lab 05)."""
        import jax

        if self.cur == self.max_len:
            self.k, self.v = self._shift_fn(self.k), self._shift_fn(self.v)
            self.pad = np.where(self.pad < self.max_len, self.pad - self.max_tokens, self.pad).astype(np.int32)
            self.cur -= self.max_tokens
            self.shifts += 1
        with jax.default_matmul_precision(self.precision):
            best, self.k, self.v = self._decode(self.flat, self.last[:, None], self.k, self.v,
                                                np.int32(self.cur), self.pad)
        self.cur += 1
        self.last = np.asarray(best).astype(np.int32)  # to the host (waits for the device)
        return self.last.astype(np.int64)

    def release(self, slot: int) -> None:
        """Free row `slot`: it attends to itself only until a new request joins (Lab 05)."""
        self.pad[slot] = self.max_len
