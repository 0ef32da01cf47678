"""One training step of the course GPT in JAX (optax, jitted) and in PyTorch (eager or compiled) (Lab 02).

Both steps do the same thing with the same hyper-parameters, so their losses can be compared:
cross-entropy -> gradients -> clip the global gradient norm to ``clip`` -> AdamW
(decoupled weight decay on the 2-D weights only, as nanoGPT does). Mixed precision follows
the models' convention: weights stay fp32, ``dtype="bf16"`` runs the activations and matmuls
in bf16 (Flax: the model's compute ``dtype``; PyTorch: ``torch.autocast``).

- :class:`JaxTrainer` keeps ``(params, opt_state)`` as plain pytrees and calls one
  ``jax.jit``-ed pure function per step (buffers donated, no Python graph walk per call), so
  the very same function can be lowered for ``cost_analysis()`` (labkit.measure.flops).
- :class:`TorchTrainer` compiles the model's forward with ``torch.compile`` when asked
  (AOTAutograd then compiles the backward too); the optimizer step stays eager.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from labkit.gpt.config import GPTConfig

DTYPES = ("fp32", "bf16")  # compute dtypes a step can run in; weights are always fp32


@dataclass(frozen=True)
class OptConfig:
    """AdamW + gradient clipping, shared by the JAX and PyTorch steps (Lab 02)."""

    lr: float = 1e-3
    betas: tuple[float, float] = (0.9, 0.95)  # GPT-style: a short second-moment memory
    eps: float = 1e-8
    weight_decay: float = 0.1  # decoupled; on 2-D weights only (not LayerNorm)
    clip: float = 1.0  # max global gradient L2 norm
    warmup_steps: int = 0  # linear warm-up of the lr over this many updates (warmup_lr); 0: a constant lr

    def __post_init__(self) -> None:
        w = self.warmup_steps
        if isinstance(w, bool) or not isinstance(w, int) or w < 0:
            raise ValueError(f"warmup_steps must be an int >= 0 (0: no warm-up), got {w!r}")


def warmup_lr(opt: OptConfig, update: Any) -> Any:
    """The lr of update ``update`` (0-based): opt.lr x min(1, (update + 1) / warmup_steps) (Lab 02).

    One formula for both frameworks: optax calls it with its update count (a traced int), torch's
    trainer with a Python int. The first update already moves the weights (lr / warmup_steps).
    """
    if opt.warmup_steps == 0:
        return opt.lr
    if isinstance(update, int):  # torch: the trainer's own count
        return opt.lr * min(1.0, (update + 1) / opt.warmup_steps)
    import jax.numpy as jnp

    return opt.lr * jnp.minimum(1.0, (update + 1) / opt.warmup_steps)  # optax: its traced count


def _check_dtype(dtype: str) -> None:
    if dtype not in DTYPES:
        raise ValueError(f"dtype must be one of {DTYPES}, got {dtype!r}")


# --------------------------------------------------------------------------------------
# JAX / Flax NNX
# --------------------------------------------------------------------------------------


def jax_optimizer(opt: OptConfig) -> Any:
    """optax chain: clip the global norm, then AdamW with decay on 2-D weights (Lab 02)."""
    import jax
    import optax

    decay_mask = lambda params: jax.tree.map(lambda p: p.ndim == 2, params)  # noqa: E731
    return optax.chain(
        optax.clip_by_global_norm(opt.clip),
        optax.adamw(opt.lr if opt.warmup_steps == 0 else lambda count: warmup_lr(opt, count),
                    b1=opt.betas[0], b2=opt.betas[1], eps=opt.eps,
                    weight_decay=opt.weight_decay, mask=decay_mask),
    )


class JaxTrainer:
    """A FlaxGPT, its optax state, and a jitted ``step(x, y) -> loss`` (Lab 02)."""

    def __init__(self, model: Any, opt: OptConfig = OptConfig(), dtype: str = "fp32",
                 donate: bool = True) -> None:
        import jax
        import jax.numpy as jnp
        from flax import nnx

        from labkit.gpt.flax_model import FlaxGPT, flax_loss

        _check_dtype(dtype)
        self.cfg: GPTConfig = model.cfg
        self.dtype = dtype
        if dtype == "bf16":  # same fp32 weights, a model whose compute dtype is bf16
            shell = nnx.eval_shape(lambda: FlaxGPT(self.cfg, rngs=nnx.Rngs(0), dtype=jnp.bfloat16))
            nnx.update(shell, nnx.state(model, nnx.Param))
            model = shell
        self.graphdef, _ = nnx.split(model, nnx.Param)
        self.tx = jax_optimizer(opt)
        self._init_fn: Callable[[Any], Any] | None = None
        self.reset(model)
        graphdef, tx = self.graphdef, self.tx

        def loss_fn(params: Any, x: jax.Array, y: jax.Array) -> jax.Array:
            return flax_loss(nnx.merge(graphdef, params), x, y)

        def make_step(loss_of: Callable[..., Any]) -> Callable[..., Any]:
            def step(params: Any, opt_state: Any, x: jax.Array, y: jax.Array) -> tuple[Any, Any, jax.Array]:
                import optax

                loss, grads = jax.value_and_grad(loss_of)(params, x, y)  # fwd + bwd
                updates, opt_state = tx.update(grads, opt_state, params)  # clip + AdamW
                return optax.apply_updates(params, updates), opt_state, loss
            return step

        step = make_step(loss_fn)
        self.loss_fn = loss_fn  # pure (params, x, y) -> loss: for forward/backward timing splits
        self._step = step  # the un-jitted step, re-traced by lower(xla_attention=True)
        # Full rematerialization: the backward recomputes the whole forward instead of reading saved activations
        # (HFU's extra forward, Lab 02): un-jitted, lowered for counting and by `labkit lower`, never trained.
        self.remat_step = make_step(jax.checkpoint(loss_fn))
        # Donating params/opt_state lets XLA update the weights in place (no second copy).
        self.step_fn = jax.jit(step, donate_argnums=(0, 1) if donate else ())

    def reset(self, model: Any) -> None:
        """Take fresh weights from a FlaxGPT of the same config and restart AdamW; no recompile (Lab 02)."""
        import jax
        import jax.numpy as jnp
        from flax import nnx

        if model.cfg != self.cfg:
            raise ValueError(f"reset needs a model with {self.cfg}, got {model.cfg}")
        # A private fp32 copy (the step donates its buffers, which must not delete `model`'s arrays)
        # and a fresh AdamW state, made in one jitted call rather than one tiny compile per leaf.
        if self._init_fn is None:
            self._init_fn = jax.jit(lambda p: (jax.tree.map(jnp.copy, p), self.tx.init(p)))
        self.params, self.opt_state = self._init_fn(nnx.state(model, nnx.Param))

    def step(self, x: Any, y: Any) -> Any:
        """One optimizer step on tokens x, targets y (batch, seq); returns the (async) loss (Lab 02)."""
        self.params, self.opt_state, loss = self.step_fn(self.params, self.opt_state, x, y)
        return loss  # a jax.Array: not waited on, so a timer must block_until_ready

    def lower(self, x: Any, y: Any, xla_attention: bool = False, remat: bool = False) -> Any:
        """The step lowered for these input shapes: ``.compile().cost_analysis()`` (Lab 02).

        ``xla_attention=True`` re-traces the same step with XLA's attention instead of cuDNN's
        fused kernel (Ampere+ GPUs in bf16/fp16; elsewhere nothing changes), so that FLOP
        counting sees the attention matmuls as HLO dots. It compiles a second program.
        ``remat=True`` lowers the step with its loss under ``jax.checkpoint`` (full rematerialization).
        """
        import contextlib

        import jax

        if not (xla_attention or remat):
            return self.step_fn.lower(self.params, self.opt_state, x, y)
        from labkit.runtime import attention

        step = self.remat_step if remat else self._step
        with attention.xla_attention() if xla_attention else contextlib.nullcontext():
            # a new function object: a fresh trace, not jit's cached one
            return jax.jit(lambda *a: step(*a)).lower(self.params, self.opt_state, x, y)

    def model(self) -> Any:
        """The current weights as a FlaxGPT; shares arrays the next step donates, so use it before stepping (Lab 02)."""
        from flax import nnx

        return nnx.merge(self.graphdef, self.params)


# --------------------------------------------------------------------------------------
# PyTorch
# --------------------------------------------------------------------------------------


def torch_optimizer(model: Any, opt: OptConfig) -> Any:
    """torch AdamW with decay on 2-D weights only, fused on CUDA (Lab 02)."""
    import torch

    params = [p for p in model.parameters() if p.requires_grad]
    groups = [{"params": [p for p in params if p.dim() == 2], "weight_decay": opt.weight_decay},
              {"params": [p for p in params if p.dim() != 2], "weight_decay": 0.0}]
    fused = {"fused": True} if next(model.parameters()).device.type == "cuda" else {}
    return torch.optim.AdamW(groups, lr=opt.lr, betas=opt.betas, eps=opt.eps, **fused)


def autocast(device: Any, dtype: str) -> Any:
    """``torch.autocast`` for bf16, a no-op context for fp32 (Lab 02)."""
    import torch

    _check_dtype(dtype)
    if dtype == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device_type=torch.device(device).type, dtype=torch.bfloat16)


class TorchTrainer:
    """A TorchGPT, its AdamW, and ``step(x, y) -> loss``; ``compile=True`` uses torch.compile (Lab 02)."""

    def __init__(self, model: Any, opt: OptConfig = OptConfig(), dtype: str = "fp32",
                 compile: bool = False, device: Any = None) -> None:
        import torch

        from labkit.gpt.torch_model import cross_entropy_torch

        _check_dtype(dtype)
        self.device = torch.device(device) if device is not None else next(model.parameters()).device
        self.model = model.to(self.device)
        self.cfg: GPTConfig = model.cfg
        self.dtype, self.compiled, self.opt = dtype, compile, opt
        self.optimizer = torch_optimizer(self.model, opt)
        self.updates = 0  # optimizer steps taken: the warm-up's position
        self.forward: Callable[[Any], Any] = torch.compile(self.model) if compile else self.model

        def loss_fn(x: Any, y: Any) -> Any:
            with autocast(self.device, dtype):
                logits = self.forward(x)  # (batch, seq, vocab), bf16 under autocast
            return cross_entropy_torch(logits, y)  # fp32 loss

        self.loss_fn = loss_fn

    def step(self, x: Any, y: Any) -> Any:
        """One optimizer step on tokens x, targets y (batch, seq); returns the loss tensor (Lab 02)."""
        import torch

        loss = self.loss_fn(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.opt.clip)  # no host sync
        if self.opt.warmup_steps:  # a Python float per group: no recompile, no sync
            for group in self.optimizer.param_groups:
                group["lr"] = warmup_lr(self.opt, self.updates)
        self.optimizer.step()
        self.updates += 1
        self.optimizer.zero_grad(set_to_none=True)
        return loss.detach()  # on CUDA still queued: a timer must synchronize


# --------------------------------------------------------------------------------------
# Sampling
# --------------------------------------------------------------------------------------


def _pick(logits: np.ndarray, temperature: float, rng: np.random.Generator) -> np.ndarray:
    """Next token per row from (batch, vocab) logits: argmax, or a softmax(logits / T) draw."""
    if temperature == 0.0:
        return logits.argmax(-1)
    z = logits.astype(np.float64) / temperature
    p = np.exp(z - z.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)  # (batch, vocab)
    return np.array([rng.choice(len(row), p=row) for row in p])


def generate(model: Any, prompt: Any, n_new: int, temperature: float = 0.0, seed: int = 0) -> np.ndarray:
    """Extend (batch, n) int prompts by n_new tokens with a FlaxGPT or TorchGPT; greedy at T=0 (Lab 02).

    No KV cache (nanoGPT's teaching choice): every new token re-reads a window of the last
    ``cfg.seq_len`` tokens, right-padded to exactly ``seq_len`` so JAX compiles once. The
    model is causal, so padding after the last real token cannot change its logits.
    """
    from labkit.gpt.config import is_torch_module

    if temperature < 0:
        raise ValueError(f"temperature must be >= 0 (0 = greedy), got {temperature}")
    toks = np.atleast_2d(np.asarray(prompt, dtype=np.int32))  # (batch, n)
    if toks.shape[1] == 0:
        raise ValueError("prompt must hold at least one token per row")
    t_max = model.cfg.seq_len
    rng = np.random.default_rng(seed)
    logits_at = _torch_logits_fn(model) if is_torch_module(model) else _jax_logits_fn(model)
    for _ in range(n_new):
        window = toks[:, -t_max:]  # (batch, <= seq_len): crop to the model's context
        n = window.shape[1]
        padded = np.zeros((toks.shape[0], t_max), np.int32)
        padded[:, :n] = window
        nxt = _pick(logits_at(padded, n - 1), temperature, rng)  # (batch,)
        toks = np.concatenate([toks, nxt[:, None].astype(np.int32)], axis=1)
    return toks


def _jax_logits_fn(model: Any) -> Callable[[np.ndarray, int], np.ndarray]:
    import jax
    import jax.numpy as jnp
    from flax import nnx

    graphdef, params = nnx.split(model)
    fwd = jax.jit(lambda p, x, i: nnx.merge(graphdef, p)(x)[:, i].astype(jnp.float32))
    return lambda x, i: np.asarray(fwd(params, jnp.asarray(x), i))  # (batch, vocab)


def _torch_logits_fn(model: Any) -> Callable[[np.ndarray, int], np.ndarray]:
    import torch

    dev = next(model.parameters()).device

    @torch.no_grad()
    def f(x: np.ndarray, i: int) -> np.ndarray:
        return model(torch.from_numpy(x).to(dev, torch.long))[:, i].float().cpu().numpy()

    return f

