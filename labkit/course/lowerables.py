"""The course's compiled functions, registered for `labkit lower` with small example shapes.

One entry per lab function that learners run compiled on a GPU or TPU. Factories import
their lab module lazily, so listing the registry costs nothing.
"""

from __future__ import annotations

from typing import Any, Callable

from labkit.course.registry import register


def _spec(tree: Any) -> Any:
    import jax

    return jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype), tree)


@register("lab00.matmul_bf16", "00_know_your_accelerator")
def _matmul() -> tuple[Callable[..., Any], tuple[Any, ...]]:
    import jax
    import jax.numpy as jnp

    a = jax.ShapeDtypeStruct((256, 256), jnp.bfloat16)
    return jax.jit(lambda x, y: jnp.matmul(x, y)), (a, a)


@register("lab01.pallas_matmul", "01_systolic_vs_cuda_cores", platforms=("tpu",))
def _pallas() -> tuple[Callable[..., Any], tuple[Any, ...]]:
    import functools

    import jax
    import jax.numpy as jnp

    from labkit.matmul import pallas_kernel as kernels_pallas

    a = jax.ShapeDtypeStruct((256, 256), jnp.bfloat16)
    # interpret=False: the Mosaic (TPU) lowering, the one that breaks on unaligned blocks.
    return jax.jit(functools.partial(kernels_pallas.matmul, bm=128, bn=128, bk=128, interpret=False)), (a, a)


def _gpt() -> tuple[Any, Any, Any]:
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from labkit.gpt.flax_model import FlaxGPT

    from labkit.gpt.config import get_config

    cfg = get_config("test")
    graphdef, state = nnx.split(FlaxGPT(cfg))
    tokens = jax.ShapeDtypeStruct((2, cfg.seq_len), jnp.int32)  # (batch, seq)
    return graphdef, state, tokens


@register("lab02.gpt_forward", "02_mfu")
def _forward() -> tuple[Callable[..., Any], tuple[Any, ...]]:
    import jax
    from flax import nnx

    graphdef, state, tokens = _gpt()
    return jax.jit(lambda s, t: nnx.merge(graphdef, s)(t)), (_spec(state), tokens)


def _trainer() -> tuple[Any, Any]:
    from labkit.gpt.flax_model import FlaxGPT
    from labkit.gpt.config import get_config
    from labkit.gpt.train import JaxTrainer

    _, _, tokens = _gpt()
    return JaxTrainer(FlaxGPT(get_config("test"))), tokens  # Lab 02's own AdamW step


@register("lab02.gpt_train_step", "02_mfu")
def _train_step() -> tuple[Callable[..., Any], tuple[Any, ...]]:
    t, tokens = _trainer()
    return t.step_fn, (_spec(t.params), _spec(t.opt_state), tokens, tokens)


@register("lab02.gpt_train_step_remat", "02_mfu")
def _train_step_remat() -> tuple[Callable[..., Any], tuple[Any, ...]]:
    import jax

    t, tokens = _trainer()  # the step HFU counts: its loss under jax.checkpoint
    return jax.jit(t.remat_step), (_spec(t.params), _spec(t.opt_state), tokens, tokens)


LAB03_DEVICES, LAB03_BATCH = 8, 16  # Lab 03's mesh (a TPU v5e-8, an 8-GPU node) and global batch, sequences


def lab03_config() -> Any:
    """Lab 03's smoke GPT: n_head 8, so "tp" splits its heads over an 8-way axis (Lab 03)."""
    from labkit.gpt.config import GPTConfig

    return GPTConfig(vocab_size=256, seq_len=32, n_layer=2, n_head=8, d_model=128)


def _sharded_step(strategy: str) -> tuple[Callable[..., Any], tuple[Any, ...]]:
    from labkit.sharding import layouts, train_step

    # On a mesh of devices that need not exist: the program is laid out, and lowered, for 8 chips on any machine.
    step = train_step.build_step(lab03_config(), strategy, mesh=layouts.abstract_mesh(strategy, LAB03_DEVICES))
    return step.fn, step.abstract_args(LAB03_BATCH)


for _name in ("dp", "fsdp", "tp", "dp_tp"):  # labkit.sharding.layouts.STRATEGIES, without importing JAX here
    register(f"lab03.sharded_train_step_{_name}", "03_gspmd_sharding")(
        lambda _s=_name: _sharded_step(_s))


@register("lab05.exported_forward", "05_train_tpu_serve_gpu")
def _exported_forward() -> tuple[Callable[..., Any], tuple[Any, ...]]:
    import jax
    import jax.numpy as jnp

    from labkit.export.stablehlo import weight_specs, forward_fn
    from labkit.gpt.config import get_config

    cfg = get_config("test")
    tokens = jax.ShapeDtypeStruct((2, cfg.seq_len), jnp.int32)  # (batch, seq)
    return jax.jit(forward_fn(cfg)), (weight_specs(cfg), tokens)


@register("lab04.fp8_matmul_grad", "04_mixed_precision")
def _fp8_grad() -> tuple[Callable[..., Any], tuple[Any, ...]]:
    import jax
    import jax.numpy as jnp

    from labkit.precision import fp8

    # Lab 04's scaled fp8 matmul and its custom VJP: e4m3 operands forward, e5m2 gradients back
    x, w = jax.ShapeDtypeStruct((64, 128), jnp.float32), jax.ShapeDtypeStruct((128, 64), jnp.float32)
    return jax.jit(jax.grad(lambda a, b: fp8.fp8_matmul(a, b).sum(), argnums=(0, 1))), (x, w)


@register("lab04.bf16_grad", "04_mixed_precision")
def _bf16_grad() -> tuple[Callable[..., Any], tuple[Any, ...]]:
    import jax
    import jax.numpy as jnp
    from flax import nnx

    from labkit.gpt.config import get_config
    from labkit.gpt.flax_model import flax_loss
    from labkit.precision.train import init_flat
    from labkit.precision.train_jax import jax_parts

    cfg = get_config("test")
    graphdef, params, rest = jax_parts(cfg, "bf16", init_flat(cfg))  # bf16 compute, fp32 master weights
    tokens = jax.ShapeDtypeStruct((2, cfg.seq_len), jnp.int32)  # (batch, seq)

    def grads(p: Any, x: Any, y: Any) -> Any:
        return jax.grad(lambda q: flax_loss(nnx.merge(graphdef, q, rest), x, y))(p)
    return jax.jit(grads), (_spec(params), tokens, tokens)
