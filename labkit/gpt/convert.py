"""Move the course GPT's weights between Flax and PyTorch, bit-exactly (Lab 05).

Both implementations read and write the canonical flat dict of :func:`labkit.gpt.config.param_shapes`
(PyTorch layout). JAX and torch are imported only inside the function that needs them, so a
Flax-only runtime never pays for torch, and the other way round.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from labkit.gpt.config import GPTConfig, check_flat, is_torch_module


def flat_params_numpy(model: Any) -> dict[str, np.ndarray]:
    """Canonical {name: fp32 numpy array} of a FlaxGPT or TorchGPT, PyTorch layout (Lab 05)."""
    if is_torch_module(model):
        from labkit.gpt.torch_model import torch_flat_params
        return torch_flat_params(model)
    from labkit.gpt.flax_model import flax_flat_params
    return flax_flat_params(model)


def load_flat_params(model: Any, flat: dict[str, np.ndarray]) -> Any:
    """Copy a canonical flat dict into a FlaxGPT or TorchGPT in place, exactly; returns it (Lab 05)."""
    check_flat(flat, model.cfg)
    if is_torch_module(model):
        from labkit.gpt.torch_model import torch_load_flat
        return torch_load_flat(model, flat)
    from labkit.gpt.flax_model import flax_load_flat
    return flax_load_flat(model, flat)


def flax_to_torch_state(flax_model: Any) -> dict[str, Any]:
    """FlaxGPT -> a PyTorch state_dict for TorchGPT(cfg).load_state_dict (Lab 05)."""
    import torch

    return {k: torch.from_numpy(v) for k, v in flat_params_numpy(flax_model).items()}


def torch_to_flax(state_dict: dict[str, Any], cfg: GPTConfig, model: Any = None,
                  dtype: Any = None) -> Any:
    """A PyTorch state_dict -> a FlaxGPT (new, or `model` updated in place) (Lab 05)."""
    from labkit.gpt.flax_model import FlaxGPT, abstract_flax_gpt

    flat = {k: v.detach().cpu().numpy() if hasattr(v, "detach") else np.asarray(v)
            for k, v in state_dict.items()}
    if model is None:  # no random init: build the structure abstractly, then fill it
        model = abstract_flax_gpt(cfg, dtype=dtype)
    elif not isinstance(model, FlaxGPT) or model.cfg != cfg:
        raise ValueError(f"model must be a FlaxGPT built with {cfg}")
    return load_flat_params(model, flat)


def flax_to_torch(flax_model: Any) -> Any:
    """A FlaxGPT -> an equal TorchGPT (fp32, CPU) (Lab 05)."""
    from labkit.gpt.torch_model import TorchGPT

    model = TorchGPT(flax_model.cfg)
    model.load_state_dict(flax_to_torch_state(flax_model), strict=True)
    return model
