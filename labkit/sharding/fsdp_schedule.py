"""FSDP as compiled vs FSDP as taught: when are the weights gathered, and what does it cost? (Lab 03).

Under the "fsdp" layout the partitioner inserts the all-gathers itself, and XLA keeps each
gathered weight alive from its forward use into the backward pass that needs it again
(``"kept"``). ZeRO-3 as taught frees the gathered weight after its forward use and gathers it
*again* in the backward pass (``"regather"``): more bytes sent, fewer bytes held.

The re-gather is written with ``jax.custom_vjp`` around each matmul's use of its weight: the forward
saves only this device's shard (not the gathered weight) for the backward pass, and the backward
gathers again behind an ``optimization_barrier`` with the incoming cotangent — without that
barrier XLA is free to hoist the second gather up into the forward pass, which would be the "kept"
schedule again, with two copies alive. XLA's CPU pipeline deletes barriers *before* it schedules
(its GPU pipeline after), so both schedules are compiled with
:func:`labkit.runtime.compile_options.compile_keeping_barriers`, and :func:`gathers_in_backward`
reads from the compiled schedule where the second gathers actually run. Same maths, so the
gradients are the same.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from labkit.gpt.config import GPTConfig
from labkit.gpt.data import check_count
from labkit.runtime import compile_options
from labkit.sharding import collectives as coll
from labkit.sharding import layouts as sharding
from labkit.sharding import memory_model as mm
from labkit.sharding import train_step as st

SCHEDULES = ("kept", "regather")


def zero3_use(mesh: Any) -> Any:
    """A ``use(fn, x, w)`` that gathers w for the forward and again for the backward (Lab 03)."""
    import jax

    whole = sharding.named(mesh, sharding.spec_of())

    def gather(w: Any) -> Any:  # the FSDP shard -> the whole weight on every device: an all-gather
        return jax.lax.with_sharding_constraint(w, whole)

    def backward(fn: Any, res: tuple, g: Any) -> tuple:
        x, w = res  # x: the matmul input; w: this device's shard (global shape, FSDP layout)
        w, g = jax.lax.optimization_barrier((w, g))  # gather again only once the cotangent exists
        _, vjp = jax.vjp(fn, x, gather(w))
        return vjp(g)  # (dx, dw): dw whole here; the step's layout reduce-scatters it

    bound: dict[Any, Any] = {}  # one custom_vjp per matmul kind (fn is a module-level function)

    def call(fn: Any, x: Any, w: Any) -> Any:
        if fn not in bound:
            f = jax.custom_vjp(lambda x, w: fn(x, gather(w)))
            # forward: save the input and the shard, not the gathered weight
            f.defvjp(lambda x, w: (fn(x, gather(w)), (x, w)), lambda res, g: backward(fn, res, g))
            bound[fn] = f
        return bound[fn](x, w)

    return call


def grad_step(cfg: GPTConfig, schedule: str = "kept", mesh: Any = None) -> tuple[Any, Any]:
    """Jitted (params, x, y) -> (loss, grads) under the FSDP layout, and its mesh (Lab 03)."""
    import jax

    if schedule not in SCHEDULES:
        raise ValueError(f"schedule must be one of {SCHEDULES}, got {schedule!r}")
    s = sharding.get_strategy("fsdp")
    mesh = mesh if mesh is not None else sharding.strategy_mesh(s)
    specs = s.param_specs(st.param_shapes(cfg), mesh, n_head=cfg.n_head)
    p_sh = {k: sharding.named(mesh, v) for k, v in specs.items()}
    rows = sharding.named(mesh, sharding.spec_of(*s.batch_spec))
    use = st.use_weight if schedule == "kept" else zero3_use(mesh)

    def step(params: Any, x: Any, y: Any) -> tuple:
        with jax.default_matmul_precision("highest"):  # fp32 both ways: the two schedules compare exactly
            return jax.value_and_grad(st.gpt_loss)(params, x, y, cfg, use)

    # Gradients come out in the parameters' layout: a reduce-scatter in both schedules.
    fn = jax.jit(step, in_shardings=(p_sh, rows, rows),
                 out_shardings=(sharding.named(mesh, sharding.spec_of()), p_sh))
    return fn, mesh


def measure(cfg: GPTConfig, batch: int, schedule: str, mesh: Any = None, fast: bool = True,
            seed: int = 0, keep_barriers: bool = True) -> dict[str, Any]:
    """Compile one schedule and read its all-gathers, bytes sent and peak memory; run it once (Lab 03).

    ``keep_barriers=False`` compiles with the backend's own pipeline, which on some XLA CPU
    versions deletes the barriers before scheduling (labkit.runtime.compile_options).
    """
    fn, mesh = grad_step(cfg, schedule, mesh)
    params, (x, y) = st.init_params(cfg, seed), st.demo_batch(cfg, batch, seed)
    lowered = fn.lower(params, x, y)
    platform = mesh.devices.flat[0].platform
    base = st.FAST_COMPILE if fast else None
    if keep_barriers:
        compiled, barriers_kept = compile_options.compile_keeping_barriers(lowered, platform, base)
    else:
        compiled, barriers_kept = lowered.compile(base), False
    table = coll.collectives(compiled)
    loss, grads = compiled(params, x, y)
    in_backward, from_backward = gathers_in_backward(compiled, table)
    regathered = sum(c.array_bytes for c in table if _is_regather(c))
    label = schedule if keep_barriers else f"{schedule}, {platform} default pipeline"
    return {"schedule": label, "compiled": compiled, "table": table, "loss": float(loss),
            "grads": {k: np.asarray(v) for k, v in grads.items()}, "barriers kept": barriers_kept,
            "all-gathers": coll.kinds(table).get("all-gather", 0),
            "backward gathers": from_backward, "backward gathers run in backward": in_backward,
            "re-gathered bytes": regathered,
            "all-gather bytes sent": coll.sent_bytes(table, "all-gather"),
            "bytes sent": coll.sent_bytes(table), "peak bytes": mm.compiled_peak(compiled)}


def zero3_bytes(cfg: GPTConfig, n: int = 8) -> dict[str, float]:
    """Bytes one device sends per FSDP gradient step, kept vs regather, counted per parameter (Lab 03).

    ZeRO's 1.5x = 3Ψ / 2Ψ (Ψ the parameter bytes) gathers and reduce-scatters every parameter once
    per use; each of those sends Ψ' = (n-1)/n Ψ per device in a ring ("psi_sent"). Two things of
    this GPT move it: the tied ``wte`` is used twice (lookup and head), so "kept" gathers it twice
    and reduce-scatters its two gradient contributions separately, while "regather" shares one
    forward gather between the two uses; and "regather" gathers again only the matmul weights,
    the ones :func:`zero3_use` wraps (this lab's choice: DeepSpeed ZeRO-3 and PyTorch FSDP re-gather
    every parameter of a wrapped module). Left out of the count: ``wpe``, whose gradient is the
    incoming gradient summed over the batch and needs no weight, and the LayerNorm gains, which the
    backward pass needs (dx depends on them) and which both schedules gather for it: 1-D, a few KiB.
    Every sent figure is (n-1)/n times a byte count, so "ratio" does not depend on n; n = 1 (nothing
    sharded) sends 0 bytes in both schedules and keeps that ratio.
    """
    if not isinstance(cfg, GPTConfig):
        raise TypeError(f"cfg must be a GPTConfig (e.g. labkit.gpt.config.CONFIGS['test']), got {repr(cfg)[:60]} "
                        f"({type(cfg).__name__})")
    n = check_count(n, "n", example=8)  # devices the parameters are sharded over
    shapes = st.param_shapes(cfg)
    nbytes = {k: 4 * int(np.prod(s)) for k, s in shapes.items()}  # fp32 bytes per parameter
    share = (n - 1) / n  # ring all-gather / reduce-scatter: each device sends (n-1)/n of the array
    param_bytes = sum(nbytes.values())  # ZeRO's Ψ
    wte_b = nbytes["wte"]  # the tied embedding
    matmul_b = sum(v for k, v in nbytes.items() if len(shapes[k]) >= 2 and k != "wpe")  # the re-gathered weights
    kept = 2 * param_bytes + 2 * wte_b  # gather + reduce-scatter Ψ; wte: a 2nd gather (head) and reduce-scatter
    regather = 2 * param_bytes + wte_b + matmul_b  # one shared wte gather, its 2nd reduce-scatter, the re-gathers
    return {"param_bytes": param_bytes, "psi_sent": share * param_bytes,  # Ψ' : one gather of every parameter, as sent
            "wte": share * wte_b, "matmul": share * matmul_b, "kept": share * kept, "regather": share * regather,
            "ratio": regather / kept}


def _is_regather(c: coll.Collective) -> bool:
    # a matrix (>= 2-D: a matmul weight; LayerNorm gains are 1-D) gathered for the backward pass
    # (c.phase reads this array's part of an op_name a collective combiner merged, e.g. on a GPU)
    return c.kind == "all-gather" and c.phase == "backward" and len(c.shape) >= 2


def gathers_in_backward(compiled: Any, table: list[coll.Collective] | None = None) -> tuple[int, int]:
    """(weight re-gathers that run after the forward pass's last matmul, all weight re-gathers) (Lab 03).

    A re-gather is an all-gather of a matrix (>= 2-D: a matmul weight; LayerNorm gains are 1-D)
    that the backward pass asked for (``transpose(`` in its JAX op_name: :attr:`Collective.phase`); where it
    sits comes from the compiled schedule (the order buffer assignment, hence the peak, is computed for). Every
    forward matmul feeds the loss (nothing is rematerialised here), so the last one marks where
    the forward pass ends. ``table``: the program's :func:`collectives`, if already read.
    """
    seq = coll.schedule(compiled)
    at = {name: i for i, (name, _, _) in enumerate(seq)}
    forward_dots = [i for i, (_, op, name) in enumerate(seq) if "jvp(" in name and "transpose(" not in name
                    and not op.startswith("all-gather") and name.endswith("dot_general")]
    end = forward_dots[-1] if forward_dots else -1
    table = coll.collectives(compiled) if table is None else coll.check_table(table)
    regathers = [at[c.name] for c in table if _is_regather(c) and c.name in at]
    return sum(i > end for i in regathers), len(regathers)


def gathers_per_param(compiled: Any, table: list[coll.Collective] | None = None) -> dict[str, list[str]]:
    """(Lab 03) {parameter: the origin of each all-gather of it}, traced from the HLO; "?" if one is not traced.

    A weight's all-gather reads the step's argument (through bitcasts, copies, transposes), whose
    metadata names it ``params['wte']``; a combined all-gather (a GPU combiner's) reads several.
    """
    from labkit.sharding import hlo_text

    text = coll.hlo_of(compiled, "gathers_per_param")
    instrs, _, _ = hlo_text.parse_module(text)
    out: dict[str, list[str]] = {}
    for c in coll.collectives(text) if table is None else coll.check_table(table):
        if c.kind == "all-gather":
            for o in instrs[c.name]["operands"]:
                out.setdefault(hlo_text.source_parameter(o, instrs) or "?", []).append(c.origin)
    return out


def row(m: dict[str, Any]) -> dict[str, Any]:
    """Table row of a :func:`measure` result, in KiB / MiB (Lab 03)."""
    return {"schedule": m["schedule"], "all-gathers": m["all-gathers"],
            "weight re-gathers": m["backward gathers"],
            "re-gathers run after the forward": m["backward gathers run in backward"],
            "all-gather KiB sent": m["all-gather bytes sent"] / 2**10,
            "KiB sent (all collectives)": m["bytes sent"] / 2**10, "peak MiB": m["peak bytes"] / 2**20}
