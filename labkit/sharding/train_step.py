"""The course GPT's training step, sharded by a strategy preset (Lab 03).

The step is written once, as a pure function of a flat parameter dict, and jitted with the
layouts of :mod:`labkit.sharding.layouts`: the same program becomes an N-device program by annotation
alone. It is the GPT of ``labkit.gpt.config`` (FlaxGPT / TorchGPT: same maths, same weights via
:func:`flat_from_params`; the tests check the losses agree) with weights in a sharding-friendly
layout: Linear weights are ``(in, out)`` and the fused q/k/v weight is ``(d_model, 3, d_model)``,
so splitting its last dimension splits attention *heads*, Megatron-style.

``python -m labkit.sharding.train_step`` is the per-process entry that :mod:`labkit.sharding.launch` starts for
the multi-process run (``jax.distributed`` with gloo CPU collectives).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

from labkit.sharding import layouts as sharding
from labkit.sharding.layouts import to_numpy  # noqa: F401  (st.to_numpy, as the lab calls it)
from labkit.gpt.config import GPTConfig

Params = dict  # {name: array}; names like "wte", "blocks.0.w_qkv" (see params_from_flat)


def params_from_flat(flat: dict[str, np.ndarray], cfg: GPTConfig) -> dict[str, np.ndarray]:
    """Canonical (PyTorch-layout) weights -> this module's flat layout, exactly (Lab 03)."""
    d = cfg.d_model
    out = {"wte": flat["wte.weight"], "wpe": flat["wpe.weight"]}  # (vocab, d), (seq_len, d)
    for i in range(cfg.n_layer):
        c = p = f"blocks.{i}."  # same prefix, canonical names (c) and ours (p)
        qkv = flat[c + "attn.qkv.weight"].reshape(3, d, d)  # (which, d_out, d_in)
        out.update({
            p + "ln1_g": flat[c + "ln1.weight"], p + "ln1_b": flat[c + "ln1.bias"],
            p + "w_qkv": np.ascontiguousarray(qkv.transpose(2, 0, 1)),  # (d_in, 3, d_out)
            p + "w_proj": flat[c + "attn.proj.weight"].T.copy(),  # (d, d) in -> out
            p + "ln2_g": flat[c + "ln2.weight"], p + "ln2_b": flat[c + "ln2.bias"],
            p + "w_fc": flat[c + "mlp.fc.weight"].T.copy(),  # (d, d_ff)
            p + "w_out": flat[c + "mlp.proj.weight"].T.copy(),  # (d_ff, d)
        })
    out.update({"lnf_g": flat["ln_f.weight"], "lnf_b": flat["ln_f.bias"]})
    return {k: np.asarray(v, np.float32) for k, v in out.items()}


def init_params(cfg: GPTConfig, seed: int = 0) -> dict[str, np.ndarray]:
    """GPT-2 init in numpy (N(0, 0.02), residual writes / sqrt(2 n_layer)), this layout (Lab 03).

    Same distribution as FlaxGPT / TorchGPT, without building either: fast, and identical in
    every process of a multi-process run.
    """
    from labkit.gpt.config import param_shapes as canonical_shapes

    rng = np.random.default_rng(seed)
    resid = 0.02 / np.sqrt(2 * cfg.n_layer)
    flat = {}
    for name, shape in canonical_shapes(cfg).items():
        if len(shape) == 2:
            std = resid if name.endswith("proj.weight") else 0.02
            flat[name] = (rng.standard_normal(shape) * std).astype(np.float32)
        else:  # LayerNorm: scale 1, bias 0
            flat[name] = np.full(shape, 1.0 if name.endswith("weight") else 0.0, np.float32)
    return params_from_flat(flat, cfg)


def flat_from_params(params: dict[str, Any], cfg: GPTConfig) -> dict[str, np.ndarray]:
    """This layout -> canonical PyTorch-layout weights (for TorchGPT / FlaxGPT), exactly (Lab 03)."""
    d = cfg.d_model
    p = {k: np.asarray(v, np.float32) for k, v in params.items()}
    flat = {"wte.weight": p["wte"], "wpe.weight": p["wpe"]}
    for i in range(cfg.n_layer):
        c = q = f"blocks.{i}."  # same prefix, canonical names (c) and ours (q)
        flat.update({
            c + "ln1.weight": p[q + "ln1_g"], c + "ln1.bias": p[q + "ln1_b"],
            c + "attn.qkv.weight": np.ascontiguousarray(p[q + "w_qkv"].transpose(1, 2, 0).reshape(3 * d, d)),
            c + "attn.proj.weight": p[q + "w_proj"].T.copy(),
            c + "ln2.weight": p[q + "ln2_g"], c + "ln2.bias": p[q + "ln2_b"],
            c + "mlp.fc.weight": p[q + "w_fc"].T.copy(), c + "mlp.proj.weight": p[q + "w_out"].T.copy(),
        })
    flat.update({"ln_f.weight": p["lnf_g"], "ln_f.bias": p["lnf_b"]})
    return flat


def param_shapes(cfg: GPTConfig) -> dict[str, tuple[int, ...]]:
    """{name: shape} of this layout, without building the model (Lab 03)."""
    d, f = cfg.d_model, cfg.d_ff
    shapes = {"wte": (cfg.vocab_size, d), "wpe": (cfg.seq_len, d)}
    for i in range(cfg.n_layer):
        p = f"blocks.{i}."
        shapes.update({p + "ln1_g": (d,), p + "ln1_b": (d,), p + "w_qkv": (d, 3, d),
                       p + "w_proj": (d, d), p + "ln2_g": (d,), p + "ln2_b": (d,),
                       p + "w_fc": (d, f), p + "w_out": (f, d)})
    shapes.update({"lnf_g": (d,), "lnf_b": (d,)})
    return shapes


def _layernorm(x: Any, g: Any, b: Any, eps: float) -> Any:
    import jax.numpy as jnp

    mu = x.mean(-1, keepdims=True)
    var = jnp.square(x - mu).mean(-1, keepdims=True)
    return (x - mu) * (1.0 / jnp.sqrt(var + eps)) * g + b  # (batch, seq, d_model)


def use_weight(fn: Any, x: Any, w: Any) -> Any:
    """``fn(x, w)``: how a matmul uses its weight; labkit.sharding.fsdp_schedule swaps it (Lab 03)."""
    return fn(x, w)


def _einsum_qkv(a: Any, w: Any) -> Any:
    import jax.numpy as jnp

    return jnp.einsum("btd,dke->btke", a, w)  # (b, t, d) x (d, 3, d) -> (b, t, 3, d)


def _matmul(a: Any, w: Any) -> Any:
    return a @ w


def _head(a: Any, w: Any) -> Any:
    return a @ w.T  # tied head: (b, t, d) x (vocab, d)^T


def gpt_logits(params: Params, tokens: Any, cfg: GPTConfig, use: Any = use_weight) -> Any:
    """Logits (batch, seq, vocab) of the course GPT for int tokens (batch, seq) (Lab 03)."""
    import jax
    import jax.numpy as jnp

    b, t = tokens.shape
    h, hd = cfg.n_head, cfg.head_dim
    x = jnp.take(params["wte"], tokens, axis=0) + params["wpe"][:t][None]  # (b, t, d)
    for i in range(cfg.n_layer):
        p = lambda k: params[f"blocks.{i}.{k}"]  # noqa: E731
        a = _layernorm(x, p("ln1_g"), p("ln1_b"), cfg.ln_eps)
        qkv = use(_einsum_qkv, a, p("w_qkv"))  # (b, t, 3, d): q, k, v
        q, k, v = (qkv[:, :, j].reshape(b, t, h, hd) for j in range(3))  # (b, t, heads, hd)
        y = jax.nn.dot_product_attention(q, k, v, is_causal=True).reshape(b, t, h * hd)
        x = x + use(_matmul, y, p("w_proj"))
        a = _layernorm(x, p("ln2_g"), p("ln2_b"), cfg.ln_eps)
        x = x + use(_matmul, jax.nn.gelu(use(_matmul, a, p("w_fc")), approximate=True), p("w_out"))
    x = _layernorm(x, params["lnf_g"], params["lnf_b"], cfg.ln_eps)
    return use(_head, x, params["wte"])  # tied head -> (b, t, vocab)


def gpt_loss(params: Params, x: Any, y: Any, cfg: GPTConfig, use: Any = use_weight) -> Any:
    """Mean next-token cross-entropy in nats, as labkit.gpt.flax_model.flax_loss (Lab 03)."""
    import jax
    import jax.numpy as jnp

    # Same maths as labkit.gpt.flax_model.cross_entropy_jax, without importing flax in every worker.
    logp = jax.nn.log_softmax(gpt_logits(params, x, cfg, use).astype(jnp.float32), axis=-1)  # (b, t, vocab)
    return -jnp.take_along_axis(logp, y[..., None].astype(jnp.int32), axis=-1).mean()


LR = 1e-3  # Adam learning rate of the course's one-step comparisons: its first step moves a weight by ~lr
GRAD_PREFIX = "grad."  # an .npz of a launched step: "loss", each weight by name, each gradient as GRAD_PREFIX + name


def make_optimizer(lr: float = LR) -> Any:
    """Adam: two fp32 moments per parameter, the optimizer state FSDP shards (Lab 03)."""
    import optax

    return optax.adam(lr)


FAST_COMPILE = {"xla_backend_optimization_level": 0}  # CPU smoke runs: LLVM -O0, same HLO


@dataclass
class ShardedStep:
    """A jitted GPT train step with the layouts of one strategy (mesh None = one device) (Lab 03)."""

    cfg: GPTConfig
    strategy: str  # "single" or a labkit.sharding.layouts.STRATEGIES key
    mesh: Any
    param_specs: dict[str, Any]  # {name: PartitionSpec}; empty for "single"
    batch_spec: Any  # PartitionSpec of the (batch, seq) tokens
    fn: Any  # jitted (params, opt_state, x, y) -> (params, opt_state, loss)
    optimizer: Any
    device: Any = None  # the one device of "single"

    def _put(self, a: np.ndarray, spec: Any, name: str) -> Any:
        import jax

        if self.mesh is None:
            return jax.device_put(a, self.device)
        sharding.check_divisible(name, a.shape, spec, self.mesh)
        # Each process builds only the shards its own devices hold, from the same global numpy
        # array: one code path for one process and for many (jax.distributed).
        return jax.make_array_from_callback(a.shape, sharding.named(self.mesh, spec),
                                            lambda idx: a[idx])

    def _check_devices(self, what: str) -> None:
        from jax.sharding import AbstractMesh

        if isinstance(self.mesh, AbstractMesh):
            raise sharding.ShardingError(
                f"this {self.strategy} step is laid out on an abstract mesh {dict(self.mesh.shape)} (no devices), "
                f"so it cannot {what}: lower it with jax.export.export(step.fn, platforms=('tpu',))("
                f"*step.abstract_args(batch)), or build_step on a real mesh (strategy_mesh) to run it")

    def place(self, params: dict[str, np.ndarray], x: np.ndarray, y: np.ndarray) -> tuple:
        """Params (sharded), fresh Adam state (same layouts) and the batch, on devices (Lab 03)."""
        import jax

        self._check_devices("hold arrays")

        p = {k: self._put(v, self.param_specs.get(k), k) for k, v in params.items()}
        xs, ys = self._put(x, self.batch_spec, "tokens x"), self._put(y, self.batch_spec, "tokens y")
        if self.mesh is None:
            return p, jax.jit(self.optimizer.init)(p), xs, ys
        # Adam's moments in their parameter's layout, made where they live. Without out_shardings, jit returns
        # them whole on one device (zeros depend on no input's data): a full copy of the state on device 0.
        _, opt_sh, _ = _layouts(self.optimizer, self.cfg, self.mesh, self.param_specs)
        return p, jax.jit(self.optimizer.init, out_shardings=opt_sh)(p), xs, ys

    def abstract_args(self, batch: int) -> tuple:
        """(params, Adam state, x, y) as shapes, dtypes and this step's layouts, no data: for lowering (Lab 03)."""
        import jax
        import jax.numpy as jnp

        batch = sharding.check_int(batch, "batch (sequences per step)",
                                   fix="e.g. batch=16, a multiple of the 'data' axis")
        shapes = param_shapes_struct(self.cfg)
        opt = jax.eval_shape(self.optimizer.init, shapes)  # Adam's moments: ShapeDtypeStructs like params
        if self.mesh is None:
            p_sh, tok_sh = {k: None for k in shapes}, None
        else:  # the weights' splits were checked when build_step chose them; the batch's is checked here
            sharding.check_divisible("tokens x", (batch, self.cfg.seq_len), self.batch_spec, self.mesh)
            p_sh, opt_sh, _ = _layouts(self.optimizer, self.cfg, self.mesh, self.param_specs)
            tok_sh = sharding.named(self.mesh, self.batch_spec)
        with_sh = lambda a, sh: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sh)  # noqa: E731
        params = {k: with_sh(v, p_sh[k]) for k, v in shapes.items()}
        if self.mesh is not None:
            opt = jax.tree.map(with_sh, opt, opt_sh)
        tokens = jax.ShapeDtypeStruct((batch, self.cfg.seq_len), jnp.int32, sharding=tok_sh)
        return params, opt, tokens, tokens

    def compile(self, *args: Any, fast: bool = False) -> Any:
        """The compiled executable: call it, or read ``.as_text()`` / ``.memory_analysis()`` (Lab 03)."""
        self._check_devices("compile for this machine")
        lowered = self.fn.lower(*args)
        return lowered.compile(FAST_COMPILE) if fast else lowered.compile()


def build_step(cfg: GPTConfig, strategy: str = "dp", mesh: Any = None, lr: float = LR,
               model: int | None = None, device: Any = None) -> ShardedStep:
    """The GPT train step for ``strategy`` ("single": unsharded, on ``device``) (Lab 03).

    "single" runs on the first of :func:`labkit.sharding.layouts.mesh_devices` by default: the same
    kind of device as the meshes, so sharded and unsharded results compare like for like.
    """
    import jax
    import optax

    opt = make_optimizer(lr)
    shard_grads = strategy != "single" and sharding.get_strategy(strategy).shard_grads
    if strategy == "single":
        specs, batch_spec, one = {}, None, device or sharding.mesh_devices()[0]
        mesh = None
    else:
        s = sharding.get_strategy(strategy)
        mesh = mesh if mesh is not None else sharding.strategy_mesh(s, model=model)
        specs = s.param_specs(param_shapes(cfg), mesh, n_head=cfg.n_head)
        batch_spec, one = sharding.spec_of(*s.batch_spec), None

    def step(params: Params, opt_state: Any, x: Any, y: Any) -> tuple:
        # True fp32 matmuls everywhere (TPUs default to bf16 passes): sharded == unsharded.
        with jax.default_matmul_precision("highest"):
            loss, grads = jax.value_and_grad(gpt_loss)(params, x, y, cfg)
        if shard_grads:  # FSDP: keep only this device's slice of each gradient -> reduce-scatter
            grads = {k: jax.lax.with_sharding_constraint(g, sharding.named(mesh, specs[k]))
                     for k, g in grads.items()}
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    if mesh is None:
        return ShardedStep(cfg, "single", None, {}, None, jax.jit(step), opt, one)
    # Outputs keep the input layouts, so the next step starts where this one ended.
    fn = jax.jit(step, out_shardings=_layouts(opt, cfg, mesh, specs))
    return ShardedStep(cfg, strategy, mesh, specs, batch_spec, fn, opt)


def param_shapes_struct(cfg: GPTConfig) -> dict[str, Any]:
    """{name: jax.ShapeDtypeStruct} (fp32) for abstract init and lowering (Lab 03)."""
    import jax
    import jax.numpy as jnp

    return {k: jax.ShapeDtypeStruct(s, jnp.float32) for k, s in param_shapes(cfg).items()}


def _layouts(opt: Any, cfg: GPTConfig, mesh: Any, specs: dict[str, Any]) -> tuple[dict[str, Any], Any, Any]:
    """(weights' shardings, Adam state's, replicated): a step's three layouts, in its outputs' order."""
    p_sh = {k: sharding.named(mesh, sp) for k, sp in specs.items()}
    rep = sharding.named(mesh, sharding.spec_of())
    return p_sh, _opt_shardings(opt, cfg, p_sh, rep), rep


def _opt_shardings(opt: Any, cfg: GPTConfig, p_sh: dict[str, Any], rep: Any) -> Any:
    import jax
    import optax

    abstract = jax.eval_shape(opt.init, param_shapes_struct(cfg))
    # Each Adam moment (mu, nu) is a dict like params -> the parameter's sharding; the step
    # count (a scalar) is replicated.
    return optax.tree_map_params(opt, lambda _, s: s, abstract, p_sh,
                                 transform_non_params=lambda _: rep)


def save_step(path: str, loss: float, weights: dict[str, np.ndarray], grads: dict[str, np.ndarray]) -> None:
    """(Lab 03) A launched step's result as one .npz: "loss", each weight by name, each gradient as GRAD_PREFIX + name."""
    np.savez(path, loss=np.float32(loss), **weights, **{GRAD_PREFIX + k: g for k, g in grads.items()})


def load_step(path: str) -> tuple[float, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """(Lab 03) :func:`save_step`'s file read back whole and closed: (loss, weights, gradients), by name."""
    with np.load(path) as f:
        arrays = {k: f[k] for k in f.files}
    loss = float(arrays.pop("loss"))
    grads = {k[len(GRAD_PREFIX):]: arrays.pop(k) for k in list(arrays) if k.startswith(GRAD_PREFIX)}
    return loss, arrays, grads


def max_abs_diff(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> float:
    """Largest |a - b| over all parameters of two flat dicts (Lab 03)."""
    if a.keys() != b.keys():
        raise ValueError(f"different parameter names: {sorted(a.keys() ^ b.keys())[:5]}")
    return max(float(np.max(np.abs(np.asarray(a[k], np.float64) - np.asarray(b[k], np.float64))))
               for k in a)


def demo_batch(cfg: GPTConfig, batch: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A reproducible (x, y) token batch, (batch, seq_len) int32, from labkit.gpt.data (Lab 03)."""
    from labkit.gpt.data import get_batch, synthetic_tokens

    toks = synthetic_tokens(64 * batch * cfg.seq_len, vocab=cfg.vocab_size, seed=seed)
    return get_batch(toks, batch, cfg.seq_len, np.random.default_rng(seed))


# --------------------------------------------------------------------------------------
# One process of a multi-process run: python -m labkit.sharding.train_step (started by launch)
# --------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """(Lab 03) Per-process entry: join the job, run one sharded step, process 0 writes results."""
    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--strategy", default="dp")
    ap.add_argument("--config", required=True, help="GPTConfig fields as JSON")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True, help="process 0 writes loss, params and gradients here (.npz)")
    ap.add_argument("--fast-compile", action="store_true", help="LLVM -O0 (CPU smoke runs)")
    args = ap.parse_args(argv)
    from labkit.runtime import distributed
    from labkit.sharding import step_check
    pid, n = distributed.init_distributed()  # before any other JAX call
    import jax

    cfg = GPTConfig(**json.loads(args.config))
    # Same seeds on every process -> the same global numpy arrays; each process then places
    # only its own devices' shards (make_array_from_callback in ShardedStep.place).
    params, (x, y) = init_params(cfg, args.seed), demo_batch(cfg, args.batch, args.seed)
    devs = jax.devices()  # all processes' devices: the global mesh
    step = build_step(cfg, args.strategy, sharding.strategy_mesh(args.strategy, len(devs), devs))
    args_on_devices = step.place(params, x, y)
    new_params, opt_state, loss = step.compile(*args_on_devices, fast=args.fast_compile)(*args_on_devices)
    flat = to_numpy(new_params)  # a collective: every process must call it
    grads = step_check.adam_grads(opt_state)  # mu / (1 - b1): the gradients the step applied (a collective too)
    loss_value = float(np.asarray(loss.addressable_data(0)))
    print(f"process {pid}/{n}: {jax.local_device_count()} local of {jax.device_count()} devices, "
          f"loss {loss_value:.6f}", flush=True)
    if pid == 0:  # one writer: the other processes hold the same replicated values
        save_step(args.out, loss_value, flat, grads)
    jax.distributed.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
