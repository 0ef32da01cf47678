"""A small generation server loop and its benchmark: TTFT, per-token latency, tokens/s (Lab 05).

One loop, five *decoders* (the same KV-cache step, run different ways):

- ``TorchDecoder(model, "eager")`` — PyTorch, op by op (CUDA or CPU);
- ``TorchDecoder(model, "compile")`` — ``torch.compile`` (Inductor, default mode) of the step; skipped
  on a CPU (its C++ compile outlasts the run). On a GPU the sweep measures whether it pays: a small
  decode step is launch-bound and default-mode Inductor still launches kernel by kernel (an H100 had it
  at 0.74-0.86x eager's tokens/s, an H200 1.2-1.5x); a CUDA graph (``labkit.export.cuda_graph``) removes that;
- ``TorchDecoder(model, "export")`` — the ``torch.export`` program of ``labkit.export.routes``;
- ``JaxDecoder.native(cfg, flat)`` — the JAX step, ``jax.jit``-ed;
- ``JaxDecoder.from_exported(exported, flat)`` — the deserialized StableHLO artifact.

**Batches of prompts of different lengths are left-padded** (:func:`left_pad`): row r gets
``pad[r]`` pad tokens in front, masked out of attention and skipped by its position ids (see
``labkit.export.kv_cache``), so every row generates exactly what it would alone (tested). Empty
prompts and prompts that leave no room for ``max_new_tokens`` in the context are refused.

Timing: every step ends by copying the chosen tokens to the host (a server must, to stream
them), which also waits for the device; so the clock sees finished work. **TTFT** (time to
first token) = prefill + first token; **TPOT** (time per output token) = each later step;
tokens/s = batch * new_tokens / (TTFT + (new_tokens - 1) * mean TPOT).
"""

from __future__ import annotations

import math
import numbers
import time
from dataclasses import asdict, dataclass
from typing import Any, Sequence

import numpy as np

from labkit.export.kv_cache import jax_new_cache, jax_step_fn, torch_new_cache, torch_step, torch_step_module
from labkit.export.load import _is_int, _is_real  # one rule for numbers in labkit.export
from labkit.export.ranking import FASTEST_MARGIN, best_path, fastest, torch_over_jax  # noqa: F401  (were here)
from labkit.gpt.config import GPTConfig
from labkit.gpt.data import ByteTokenizer


def _count(name: str, x: Any, least: int = 1) -> int:
    """x as an int >= least; numpy integers count (np.int64 from a sweep), bool and floats do not."""
    if not _is_int(x) or x < least:
        want = "a positive integer" if least == 1 else f"an integer >= {least}"
        raise ValueError(f"{name} must be {want}, got {x!r}")
    return int(x)


def _seconds(name: str, x: Any, positive: bool) -> float:
    """x as finite seconds (> 0 if positive, else >= 0); numpy floats count."""
    if not (_is_real(x) and math.isfinite(x) and (x > 0 if positive else x >= 0)):
        raise ValueError(f"{name} must be a finite number of seconds {'> 0' if positive else '>= 0'}, got {x!r}")
    return float(x)


def _row(i: int, p: Any) -> np.ndarray:
    """Prompt i as int64 token ids (L,): text is byte-encoded; floats, NaN and bytes are refused."""
    if isinstance(p, str):
        return ByteTokenizer().encode(p)
    if isinstance(p, (bytes, bytearray)):
        raise ValueError(f"prompt {i} is bytes {bytes(p)[:20]!r}: pass text (p.decode()) or a list of token ids")
    r = np.atleast_1d(p)  # one token id (a scalar) is a 1-token prompt
    if r.ndim > 1:  # a (rows, L) array would silently become one long prompt
        raise ValueError(f"prompt {i} must be 1-D token ids, got shape {r.shape}; pass one prompt per row: list(batch)")
    if r.size and r.dtype.kind not in "iu":  # 1.7 would silently become token 1
        raise ValueError(f"prompt {i} must hold integer token ids, got dtype {r.dtype} ({r[:4]}); "
                         "tokenize text with ByteTokenizer().encode(text)")
    return r.astype(np.int64)


@dataclass(frozen=True)
class Prompts:
    """A left-padded batch: tokens (batch, t) int32 and pad (batch,) pad tokens per row (Lab 05)."""

    tokens: np.ndarray
    pad: np.ndarray

    @property
    def lengths(self) -> np.ndarray:
        """Real (unpadded) tokens per row (Lab 05)."""
        return self.tokens.shape[1] - self.pad


def left_pad(prompts: Sequence[Any], cfg: GPTConfig, max_new_tokens: int, pad_id: int = 0,
             max_len: int | None = None) -> Prompts:
    """Validate prompts (str or token ids) and left-pad them into one batch (Lab 05)."""
    if not isinstance(cfg, GPTConfig):
        raise TypeError(f"cfg must be a GPTConfig (e.g. get_config('test')), got {cfg!r}")
    max_len = cfg.seq_len if max_len is None else max_len
    if not (_is_int(max_len) and 1 <= max_len <= cfg.seq_len):
        raise ValueError(f"max_len must be in 1..cfg.seq_len={cfg.seq_len} (None: seq_len), got {max_len!r}")
    if not (_is_int(pad_id) and 0 <= pad_id < cfg.vocab_size):
        raise ValueError(f"pad_id must be a token id in [0, {cfg.vocab_size}), got {pad_id!r}")
    if isinstance(prompts, (str, bytes)) or (isinstance(prompts, np.ndarray) and prompts.ndim == 1):
        raise ValueError("pass a list of prompts (one per batch row), e.g. [text] for a single prompt")
    if len(prompts) == 0:
        raise ValueError("no prompts: pass at least one")
    max_new_tokens = _count("max_new_tokens", max_new_tokens)
    if max_new_tokens >= max_len:  # no room for even a 1-token prompt: "keep the last -68 tokens" would follow
        raise ValueError(f"max_new_tokens={max_new_tokens} plus a prompt of at least 1 token exceeds the "
                         f"{max_len}-token context; use max_new_tokens <= {max_len - 1}")
    rows = [_row(i, p) for i, p in enumerate(prompts)]
    for i, r in enumerate(rows):
        if r.size == 0:
            raise ValueError(f"prompt {i} is empty: generation needs at least one token to condition "
                             "on (the byte tokenizer has no start-of-text token)")
        if r.min() < 0 or r.max() >= cfg.vocab_size:
            raise ValueError(f"prompt {i} has token ids outside [0, {cfg.vocab_size})")
        if r.size + max_new_tokens > max_len:
            keep = max_len - max_new_tokens  # >= 1: checked above
            raise ValueError(f"prompt {i} has {r.size} tokens; with max_new_tokens={max_new_tokens} it needs "
                             f"{r.size + max_new_tokens} positions, but the context holds {max_len}. Keep its last "
                             f"{keep} tokens (prompt[-{keep}:]) or generate fewer.")
    t = max(r.size for r in rows)
    tokens = np.full((len(rows), t), pad_id, dtype=np.int32)  # (batch, t)
    for i, r in enumerate(rows):
        tokens[i, t - r.size:] = r  # right-aligned: every row's next token goes to slot t
    return Prompts(tokens, np.array([t - r.size for r in rows], dtype=np.int32))


class TorchDecoder:
    """KV-cache decoding of a TorchGPT: mode "eager", "compile" or "export" (Lab 05)."""

    def __init__(self, model: Any, mode: str = "eager", max_len: int | None = None, device: Any = None,
                 program: Any = None) -> None:
        import torch

        from labkit.runtime import device as dev_mod

        if mode not in ("eager", "compile", "export"):
            raise ValueError(f"mode must be 'eager', 'compile' or 'export', got {mode!r}")
        device = dev_mod.serving_device() if device is None else device  # the GPU if torch sees one, else the CPU
        self.cfg, self.device, self.mode = model.cfg, torch.device(device), mode
        self.max_len = max_len or self.cfg.seq_len
        self.name = {"eager": "torch eager", "compile": "torch.compile", "export": "torch.export"}[mode]
        model = model.to(self.device).eval()
        if mode == "eager":
            self.fn = lambda *a: torch_step(model, *a)
        elif mode == "compile":
            # dynamic=True: one graph serves every batch size and prompt length (sizes 1 are
            # still specialized), which bounds compile time to a few graphs per run.
            self.fn = torch.compile(torch_step_module(model), dynamic=True)
        else:
            from labkit.export.routes import export_torch_step

            # Pass the ExportedProgram you already made (it must be on this device) to skip re-exporting.
            self.fn = (program or export_torch_step(model, self.max_len)).module()
        self.k = self.v = self.pad = None
        self.pos = 0

    def prefill(self, tokens: np.ndarray, pad: np.ndarray) -> tuple[Any, Any]:
        """Fresh cache, run the prompt; returns (logits (batch, vocab), argmax) on the device (Lab 05)."""
        import torch

        b, t = tokens.shape
        self.k, self.v = torch_new_cache(self.cfg, b, self.max_len, device=self.device)
        self.pad = torch.as_tensor(pad, dtype=torch.long, device=self.device)
        self.pos = 0
        return self._run(torch.as_tensor(tokens, dtype=torch.long, device=self.device))

    def decode(self, tok: np.ndarray) -> tuple[Any, Any]:
        """One new token per row, tok (batch,) -> (logits, argmax) (Lab 05)."""
        import torch

        return self._run(torch.as_tensor(tok, dtype=torch.long, device=self.device).view(-1, 1))

    def _run(self, tokens: Any) -> tuple[Any, Any]:
        import torch

        with torch.no_grad():
            logits = self.fn(tokens, self.k, self.v, torch.tensor(self.pos, device=self.device), self.pad)
        self.pos += tokens.shape[1]
        return logits, logits.argmax(-1)

    @staticmethod
    def to_numpy(x: Any) -> np.ndarray:
        """Device tensor -> numpy (copies to the host, so it also waits for the device) (Lab 05)."""
        return x.detach().cpu().numpy()


class JaxDecoder:
    """KV-cache decoding with the JAX step: jitted natively or from a StableHLO artifact (Lab 05)."""

    def __init__(self, cfg: GPTConfig, flat: dict[str, np.ndarray], step: Any, name: str,
                 max_len: int | None = None, precision: str | None = "highest") -> None:
        import jax
        import jax.numpy as jnp

        self.cfg, self.name, self.max_len = cfg, name, max_len or cfg.seq_len
        # "highest": true fp32 matmuls, as torch does by default (TF32 off), so every path
        # computes the same function. An exported artifact keeps the precision it was exported with.
        self.precision = precision
        self.flat = {k: jnp.asarray(v) for k, v in flat.items()}  # weights on the default device

        def step_argmax(flat: Any, tokens: Any, k: Any, v: Any, start: Any, pad: Any) -> Any:
            logits, k, v = step(flat, tokens, k, v, start, pad)
            return logits, jnp.argmax(logits, axis=-1), k, v  # argmax on the device, in the same program

        # Donate the caches (arguments 2, 3): XLA updates them in place instead of copying.
        donate = (2, 3) if jax.default_backend() != "cpu" else ()
        self.fn = jax.jit(step_argmax, donate_argnums=donate)
        self.k = self.v = self.pad = None
        self.pos = 0

    @classmethod
    def native(cls, cfg: GPTConfig, flat: dict[str, np.ndarray], max_len: int | None = None,
               precision: str | None = "highest") -> "JaxDecoder":
        """The JAX KV-cache step of labkit.export.kv_cache, jitted (Lab 05)."""
        return cls(cfg, flat, jax_step_fn(cfg), "JAX jit", max_len, precision)

    @classmethod
    def from_exported(cls, exported: Any, cfg: GPTConfig, flat: dict[str, np.ndarray]) -> "JaxDecoder":
        """A deserialized jax.export step artifact (labkit.export.stablehlo.export_step) (Lab 05)."""
        max_len = int(exported.in_avals[-4].shape[2])  # k_cache (n_layer, b, max_len, heads, hd)
        return cls(cfg, flat, exported.call, "StableHLO", max_len, None)

    def prefill(self, tokens: np.ndarray, pad: np.ndarray) -> tuple[Any, Any]:
        """Fresh cache, run the prompt; returns (logits (batch, vocab), argmax) on the device (Lab 05)."""
        import jax.numpy as jnp

        self.k, self.v = jax_new_cache(self.cfg, tokens.shape[0], self.max_len)
        self.pad = jnp.asarray(pad, dtype=jnp.int32)
        self.pos = 0
        return self._run(np.asarray(tokens, dtype=np.int32))

    def decode(self, tok: np.ndarray) -> tuple[Any, Any]:
        """One new token per row, tok (batch,) -> (logits, argmax) (Lab 05)."""
        return self._run(np.asarray(tok, dtype=np.int32).reshape(-1, 1))

    def _run(self, tokens: np.ndarray) -> tuple[Any, Any]:
        import jax

        with jax.default_matmul_precision(self.precision):
            logits, best, self.k, self.v = self.fn(self.flat, tokens, self.k, self.v, np.int32(self.pos), self.pad)
        self.pos += tokens.shape[1]
        return logits, best

    @staticmethod
    def to_numpy(x: Any) -> np.ndarray:
        """Device array -> numpy (waits for the device) (Lab 05)."""
        return np.asarray(x)


@dataclass(frozen=True)
class Generation:
    """New tokens (batch, n) and the wall-clock of each step, seconds (Lab 05)."""

    tokens: np.ndarray
    ttft_s: float  # prompt in -> first new token on the host
    step_s: tuple[float, ...]  # each later token, seconds


def sample(logits: np.ndarray, temperature: float, rng: np.random.Generator) -> np.ndarray:
    """Tokens (batch,) from logits (batch, vocab) at `temperature` > 0, seeded (Gumbel-max) (Lab 05)."""
    # argmax(logits / T + Gumbel noise) is an exact sample of softmax(logits / T), and only
    # needs numpy's seeded rng: the same seed gives the same tokens in every framework.
    if not (isinstance(temperature, numbers.Real) and math.isfinite(temperature) and temperature > 0):
        raise ValueError(f"temperature must be a finite number > 0, got {temperature!r}; for greedy "
                         "decoding use argmax (generate(..., temperature=0.0))")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator, got {type(rng).__name__}: pass np.random.default_rng(seed)")
    logits = np.asarray(logits, dtype=np.float64)
    g = rng.gumbel(size=logits.shape)
    return np.argmax(logits / temperature + g, axis=-1)


def generate(decoder: Any, prompts: Prompts, max_new_tokens: int, temperature: float = 0.0,
             seed: int = 0) -> Generation:
    """Greedy (temperature 0) or sampled generation with timings; batch rows in parallel (Lab 05)."""
    if not isinstance(prompts, Prompts):
        raise TypeError(f"prompts must be a Prompts batch, got {type(prompts).__name__}: pass left_pad(texts, cfg, n)")
    max_new_tokens = _count("max_new_tokens", max_new_tokens)
    if not (isinstance(temperature, numbers.Real) and temperature >= 0.0 and np.isfinite(temperature)):
        raise ValueError(f"temperature must be a finite number >= 0 (0: greedy), got {temperature!r}")
    if prompts.tokens.shape[1] + max_new_tokens > decoder.max_len:
        raise ValueError(f"{prompts.tokens.shape[1]} prompt + {max_new_tokens} new tokens exceed the "
                         f"decoder's cache of {decoder.max_len} slots")
    rng = np.random.default_rng(_count("seed", seed, least=0))  # numpy's own error names no argument

    def pick(out: tuple[Any, Any]) -> np.ndarray:
        if temperature == 0.0:
            return decoder.to_numpy(out[1])  # greedy: argmax computed on the device
        return sample(decoder.to_numpy(out[0]), temperature, rng)

    t0 = time.perf_counter()
    tok = pick(decoder.prefill(prompts.tokens, prompts.pad))
    ttft = time.perf_counter() - t0
    out, steps = [tok], []
    for _ in range(max_new_tokens - 1):
        t1 = time.perf_counter()
        tok = pick(decoder.decode(tok))
        steps.append(time.perf_counter() - t1)
        out.append(tok)
    return Generation(np.stack(out, axis=1).astype(np.int64), ttft, tuple(steps))


def greedy_reference(logits_fn: Any, tokens: np.ndarray, max_new_tokens: int) -> np.ndarray:
    """Greedy tokens (batch, n) by full recomputation: logits_fn(tokens (b, T)) -> (b, T, vocab) (Lab 05)."""
    b, t = np.shape(tokens)
    # One fixed-length buffer (b, t + n), filled as we go: the model is causal, so the zeros
    # after position `cur` cannot change the logits at `cur - 1`, and a jitted logits_fn
    # compiles once instead of once per length.
    buf = np.zeros((b, t + max_new_tokens), dtype=np.int32)
    buf[:, :t] = tokens
    for cur in range(t, t + max_new_tokens):
        buf[:, cur] = np.argmax(np.asarray(logits_fn(buf))[:, cur - 1], axis=-1)  # (batch,)
    return buf[:, t:].astype(np.int64)


def tokens_per_s(batch: int, new_tokens: int, ttft_s: float, tpot_s: float) -> float:
    """Generated tokens per second of a batch: batch * n / (TTFT + (n - 1) * TPOT) (Lab 05)."""
    batch, new_tokens = _count("batch", batch), _count("new_tokens", new_tokens)
    ttft_s = _seconds("ttft_s", ttft_s, positive=True)
    tpot_s = _seconds("tpot_s", tpot_s, positive=False) if new_tokens > 1 else 0.0  # unused for one token
    return batch * new_tokens / (ttft_s + (new_tokens - 1) * tpot_s)


@dataclass(frozen=True)
class ServeStats:
    """Latency percentiles (ms) and throughput (tokens/s) of one decoder at one batch size (Lab 05)."""

    path: str
    batch: int
    prompt_len: int
    new_tokens: int
    ttft_p50_ms: float
    ttft_p95_ms: float
    tpot_p50_ms: float  # a decode step of the whole batch, pooled over every step: nearer vLLM's ITL than its TPOT
    tpot_p95_ms: float  # (TPOT is a per-request mean, (e2e - ttft) / (n - 1), percentiled across requests)
    tokens_per_s: float  # tokens_per_s() of the p50 TTFT and p50 step: a host stall cannot inflate it
    repeats: int

    def row(self) -> dict[str, Any]:
        """A dict for labkit.course.tables.show / JSON (Lab 05)."""
        return asdict(self)


def benchmark(decoder: Any, batch: int, prompt_len: int, new_tokens: int, repeats: int = 5,
              warmup: int = 1, seed: int = 0) -> ServeStats:
    """Serve random prompts (batch, prompt_len) `repeats` times; latency and throughput (Lab 05)."""
    batch, prompt_len = _count("batch", batch), _count("prompt_len", prompt_len)
    repeats, warmup = _count("repeats", repeats), _count("warmup", warmup, least=0)
    if _count("new_tokens", new_tokens) < 2:
        raise ValueError(f"need new_tokens >= 2 (TPOT is measured from the 2nd token on), got {new_tokens!r}")
    rng = np.random.default_rng(_count("seed", seed, least=0))
    prompts = Prompts(rng.integers(0, decoder.cfg.vocab_size, (batch, prompt_len)).astype(np.int32),
                      np.zeros(batch, dtype=np.int32))
    for _ in range(warmup):  # compile every program (prefill and decode shapes) before timing
        generate(decoder, prompts, new_tokens)
    ttft, tpot = [], []
    for _ in range(repeats):
        g = generate(decoder, prompts, new_tokens)
        ttft.append(g.ttft_s)
        tpot.extend(g.step_s)
    ms = lambda xs, q: float(np.percentile(xs, q) * 1e3) if xs else float("nan")  # noqa: E731
    # Throughput from the typical (p50) step, not from total times: a few ms-long host stalls on a
    # 0.5 ms step inflate a run's total, and the median of totals then mixes clean and stalled runs.
    tps = tokens_per_s(batch, new_tokens, ms(ttft, 50) / 1e3, ms(tpot, 50) / 1e3)
    return ServeStats(decoder.name, batch, prompt_len, new_tokens, ms(ttft, 50), ms(ttft, 95),
                      ms(tpot, 50), ms(tpot, 95), tps, repeats)


def sweep(decoders: Sequence[Any], batches: Sequence[int], prompt_len: int, new_tokens: int,
          repeats: int = 5) -> list[ServeStats]:
    """benchmark() for every decoder and batch size (Lab 05)."""
    return [benchmark(d, b, prompt_len, new_tokens, repeats) for d in decoders for b in batches]
