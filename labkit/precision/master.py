"""Master weights and optimizer state, read from a run's real trees rather than a formula (Lab 04).

Mixed precision promises fp32 *master* weights and optimizer state whatever the compute dtype. The
byte formula (``train.memory_model``: 4 B weights + 4 B gradients + 8 B AdamW moments = 16 B per
parameter) only restates that promise, so a check against it cannot fail. These functions read what a
run really ends with -- JAX: the params ``nnx.State`` and the optax state pytree of the trainer; torch:
each ``p.dtype``, ``p.grad`` and ``optimizer.state`` -- and count bytes per dtype, so a recipe that kept
bf16 weights or moments shows up as a ``bfloat16`` entry.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

FLOATING = ("float", "bfloat", "complex")  # dtype-name prefixes of floating types (float8_* included)


def dtype_and_bytes(array: Any) -> tuple[str, int]:
    """(Lab 04) (dtype name, bytes) of a numpy, JAX or torch array, e.g. ("float32", 4096)."""
    if hasattr(array, "element_size") and hasattr(array, "numel"):  # torch.Tensor
        return str(array.dtype).removeprefix("torch."), int(array.element_size() * array.numel())
    if hasattr(array, "dtype") and hasattr(array, "nbytes"):  # numpy / JAX
        return str(array.dtype), int(array.nbytes)
    raise TypeError(f"expected a numpy, JAX or torch array, got {type(array).__name__}: {array!r:.60}")


def bytes_by_dtype(arrays: Iterable[Any]) -> dict[str, int]:
    """(Lab 04) Bytes per dtype name over ``arrays``, e.g. {"float32": 136448, "int32": 4}."""
    out: dict[str, int] = {}
    for a in arrays:
        name, nbytes = dtype_and_bytes(a)
        out[name] = out.get(name, 0) + nbytes
    return out


def jax_state(params: Any, opt_state: Any) -> dict[str, dict[str, int]]:
    """(Lab 04) Bytes by dtype of a JAX run's params pytree and optax state: {"params": {...}, "optimizer": {...}}."""
    import jax

    leaves = lambda tree: [x for x in jax.tree_util.tree_leaves(tree) if hasattr(x, "dtype")]  # noqa: E731
    return {"params": bytes_by_dtype(leaves(params)), "optimizer": bytes_by_dtype(leaves(opt_state))}


def torch_state(model: Any, optimizer: Any) -> dict[str, dict[str, int]]:
    """(Lab 04) Bytes by dtype of a torch run's parameters, their ``.grad`` and ``optimizer.state`` tensors."""
    import torch

    params = list(model.parameters())
    state = [v for s in optimizer.state.values() for v in s.values() if isinstance(v, torch.Tensor)]
    return {"params": bytes_by_dtype(params), "grads": bytes_by_dtype(p.grad for p in params if p.grad is not None),
            "optimizer": bytes_by_dtype(state)}


def not_fp32(state: Mapping[str, Mapping[str, int]]) -> list[str]:
    """(Lab 04) "part: dtype" for every floating dtype other than float32 in ``state`` ([]: all fp32)."""
    return [f"{part}: {d}" for part, by in state.items() for d in by if d.startswith(FLOATING) and d != "float32"]


def per_param(state: Mapping[str, Mapping[str, int]], n_params: int) -> dict[str, float]:
    """(Lab 04) Floating-point bytes per model parameter of each part, e.g. {"params": 4.0, "optimizer": 8.0}."""
    if not isinstance(n_params, int) or n_params < 1:
        raise ValueError(f"n_params must be a positive int (labkit.gpt.config.n_params(cfg)), got {n_params!r}")
    return {part: sum(b for d, b in by.items() if d.startswith(FLOATING)) / n_params for part, by in state.items()}
