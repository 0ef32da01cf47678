"""Meshes, layouts and the sharding strategies of the course GPT (Lab 03).

A *mesh* names the devices' axes (``("data", "model")``); a *layout* (``PartitionSpec``) says
which array dimension is split over which mesh axis. The partitioner (Shardy in JAX, GSPMD in
PyTorch/XLA) propagates the layouts you annotate to every op and inserts the collectives that
make the per-device programs agree. This module builds meshes with clear errors and holds the
strategy presets Lab 03 compares: data parallel, FSDP, tensor parallel and 2-D (data x model).

Axis types (jax >= 0.9): ``Explicit`` axes put shardings in the array *types* — ambiguous ops
(a matmul over a sharded contracting dimension) then need ``out_sharding=``; ``Auto`` axes leave
the choice to the partitioner. The GPT steps use ``Auto``: they annotate inputs and outputs and
let propagation do the rest, the way GSPMD was designed.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping, Sequence

from labkit.runtime import device

AXIS_TYPES = ("auto", "explicit")


class ShardingError(ValueError):
    """A mesh or layout that cannot work: wrong device count, non-divisible dimension (Lab 03)."""


def check_int(value: Any, name: str, minimum: int = 1, fix: str = "") -> int:
    """``value`` as an int >= minimum; TypeError / ShardingError (a ValueError) naming it otherwise (Lab 03)."""
    import numbers

    # A float such as 8.9 is refused, not truncated: a mesh of 8 would silently be a different run.
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be a whole number >= {minimum}, got {value!r} "
                        f"({type(value).__name__}){fix and '; ' + fix}")
    if value < minimum:
        raise ShardingError(f"{name} must be >= {minimum}, got {value}{fix and '; ' + fix}")
    return int(value)


def _jax() -> Any:
    import jax  # lazy: importing labkit.sharding.layouts must not initialise JAX (simulate_devices first)

    return jax


def simulate(n: int = device.DEFAULT_CPU_DEVICES) -> int:
    """Simulate ``n`` CPU devices before JAX starts; clear RuntimeError if it is too late (Lab 03)."""
    return device.simulate_devices(n)


def make_mesh(shape: Sequence[int], names: Sequence[str], axis_type: str = "auto",
              devices: Sequence[Any] | None = None) -> Any:
    """``jax.make_mesh`` with checked shape, names and ``axis_type`` "auto" | "explicit" (Lab 03).

    Without ``devices``: the default backend's devices, or the simulated CPU devices when only
    they match the mesh size (one GPU or a single-chip TPU with 8 simulated CPUs).
    """
    for arg, what, eg in (("shape", shape, "(8,) or (2, 4)"), ("names", names, "('data',) or ('data', 'model')")):
        if isinstance(what, (str, bytes)) or not isinstance(what, Sequence):
            raise TypeError(f"mesh {arg} must be a tuple like {eg}, got {what!r} ({type(what).__name__}); "
                            "e.g. make_mesh((2, 4), ('data', 'model'))")
        if not what:
            raise ShardingError(f"mesh {arg} is empty; a mesh has at least one axis, e.g. {arg}={eg.split(' or ')[0]}")
    shape = tuple(check_int(s, f"mesh axis size (shape[{i}] of {tuple(shape)})",
                            fix="mesh axes hold whole devices, e.g. (8,) or (2, 4)") for i, s in enumerate(shape))
    names = tuple(names)
    if not all(isinstance(a, str) and a for a in names):
        raise TypeError(f"mesh axis names must be non-empty strings like ('data', 'model'), got {names!r}")
    jax = _jax()
    from jax.sharding import AxisType

    if len(shape) != len(names):
        raise ShardingError(f"mesh shape {shape} has {len(shape)} axes but {len(names)} names {names}")
    if len(set(names)) != len(names):
        raise ShardingError(f"mesh axis names must be unique, got {names}")
    if any(s < 1 for s in shape):
        raise ShardingError(f"mesh axis sizes must be >= 1, got {shape}")
    if axis_type not in AXIS_TYPES:
        raise ShardingError(f"axis_type must be one of {AXIS_TYPES}, got {axis_type!r}")
    need = math.prod(shape)
    if devices is None:  # the default backend's devices, else the simulated CPUs if they fit
        devs = jax.devices() if len(jax.devices()) == need or len(jax.devices("cpu")) != need \
            else jax.devices("cpu")
    elif isinstance(devices, (str, bytes)) or not isinstance(devices, Iterable):
        raise TypeError(f"devices must be a list of JAX devices (e.g. mesh_devices({need})) or None, got {devices!r}")
    else:
        devs = list(devices)
    if not devs:
        raise ShardingError(f"devices is empty: mesh {dict(zip(names, shape))} needs {need}; pass "
                            f"mesh_devices({need}), or devices=None for the default backend's devices")
    if need != len(devs):
        kind = getattr(devs[0], "platform", "?")
        fits = [f"({a}, {len(devs) // a})" for a in range(1, len(devs) + 1) if len(devs) % a == 0]
        raise ShardingError(
            f"mesh {dict(zip(names, shape))} needs {need} devices but {len(devs)} {kind} device(s) "
            f"are available. Use a shape whose product is {len(devs)} (2-D options: "
            f"{', '.join(fits)}), or restart and simulate {need} CPU devices with "
            f"labkit.setup(cpu_devices={need}) before any JAX code.")
    types = (AxisType.Auto if axis_type == "auto" else AxisType.Explicit,) * len(shape)
    return jax.make_mesh(shape, names, axis_types=types, devices=devs)


def spec_of(*axes: Any) -> Any:
    """``PartitionSpec(*axes)``: None = replicated dim, "data" = split over that mesh axis (Lab 03)."""
    from jax.sharding import PartitionSpec

    return PartitionSpec(*axes)


def _axis_size(mesh: Any, entry: Any) -> int:
    names = entry if isinstance(entry, tuple) else (entry,)
    return math.prod(mesh.shape[n] for n in names)


def _check_axes(name: str, spec: Any, mesh: Any) -> list[Any]:
    """spec's entries (UNCONSTRAINED ones as None); ShardingError if one names an axis the mesh lacks."""
    # (no jax import: shard_bytes is pure arithmetic; a spec holding UNCONSTRAINED means jax is loaded)
    free = getattr(getattr(sys.modules.get("jax.sharding"), "PartitionSpec", None), "UNCONSTRAINED", None)
    entries = [None if e is free else e for e in spec]
    for n in (n for e in entries if e is not None for n in (e if isinstance(e, tuple) else (e,))):
        if n not in mesh.shape:
            raise ShardingError(f"{name}: layout {spec} names mesh axis {n!r}, but the mesh "
                                f"has axes {tuple(mesh.shape)}")
    return entries


def check_divisible(name: str, shape: Sequence[int], spec: Any, mesh: Any) -> None:
    """Raise ShardingError naming array, dimension and mesh axis when a split is uneven (Lab 03)."""
    if len(spec) > len(shape):
        raise ShardingError(f"{name}: layout {spec} has {len(spec)} entries for a "
                            f"{len(shape)}-d array of shape {tuple(shape)}")
    for dim, entry in enumerate(_check_axes(name, spec, mesh)):
        if entry is None:
            continue
        k = _axis_size(mesh, entry)
        if shape[dim] % k:
            raise ShardingError(
                f"array {name!r} dim {dim} (size {shape[dim]}) is not divisible by mesh axis "
                f"{entry!r} (size {k}); pick sizes that are multiples of {k}, or leave dim {dim} "
                f"unsplit (None in the PartitionSpec)")


def _check_mesh_spec(mesh: Any, spec: Any) -> None:
    """TypeError unless mesh is a jax Mesh and spec a PartitionSpec, with the fix."""
    from jax.sharding import AbstractMesh, Mesh, PartitionSpec

    if not isinstance(mesh, (Mesh, AbstractMesh)):
        raise TypeError(f"mesh must be a jax Mesh, e.g. make_mesh((8,), ('data',)) or strategy_mesh('dp'), "
                        f"got {repr(mesh)[:60]} ({type(mesh).__name__})")
    if not isinstance(spec, PartitionSpec):
        eg = f"spec_of{tuple(spec)!r}" if isinstance(spec, (tuple, list)) else "spec_of('data', None)"
        raise TypeError(f"spec must be a PartitionSpec from spec_of(...), got {spec!r} ({type(spec).__name__}); "
                        f"e.g. {eg}")


def named(mesh: Any, spec: Any) -> Any:
    """``NamedSharding(mesh, spec)``, spec's axes checked against the mesh like :func:`place` (Lab 03)."""
    from jax.sharding import NamedSharding

    _check_mesh_spec(mesh, spec)
    _check_axes("named", spec, mesh)
    return NamedSharding(mesh, spec)


def place(x: Any, mesh: Any, spec: Any, name: str = "array") -> Any:
    """``device_put`` x with layout ``spec`` on ``mesh`` after the divisibility check (Lab 03)."""
    if not (hasattr(x, "shape") and hasattr(x, "dtype")):  # a list would be put as a pytree of scalars
        raise TypeError(f"place: x ({name}) must be a numpy or jax array, got {repr(x)[:60]} ({type(x).__name__}); "
                        f"e.g. np.asarray(x)")
    _check_mesh_spec(mesh, spec)
    check_divisible(name, x.shape, spec, mesh)  # names the array in its message
    return _jax().device_put(x, named(mesh, spec))


def to_numpy(tree: dict[str, Any]) -> dict[str, Any]:
    """Global arrays -> numpy on this process, gathering other processes' shards (Lab 03)."""
    import jax
    import numpy as np

    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        return {k: np.asarray(v) for k, v in multihost_utils.process_allgather(tree, tiled=True).items()}
    return {k: np.asarray(v) for k, v in tree.items()}


def shard_shape(shape: Sequence[int], spec: Any, mesh: Any) -> tuple[int, ...]:
    """(Lab 03) The block one device holds of an array with this layout (evenly divisible): each dim / its axes' size."""
    shape = tuple(check_int(d, f"shape[{i}] of {tuple(shape)}", 0) for i, d in enumerate(shape))
    check_divisible("shard_shape array", shape, spec, mesh)  # an uneven split has no single answer
    entries = tuple(spec) + (None,) * (len(shape) - len(tuple(spec)))  # a short spec leaves the rest whole
    return tuple(d if e is None else d // _axis_size(mesh, e) for d, e in zip(shape, entries))


def shard_bytes(shape: Sequence[int], itemsize: int, spec: Any, mesh: Any) -> int:
    """Bytes one device holds of an array with this layout (evenly divisible) (Lab 03)."""
    shape = tuple(check_int(d, f"shape[{i}] of {tuple(shape)}", 0) for i, d in enumerate(shape))
    itemsize = check_int(itemsize, "itemsize (bytes per element)", fix="e.g. 4 for float32")
    check_divisible("shard_bytes array", shape, spec, mesh)  # an uneven split has no single answer
    n = math.prod(shape) * itemsize  # bytes of the whole (global) array
    for entry in spec:
        if entry is not None:
            n //= _axis_size(mesh, entry)
    return n


# --------------------------------------------------------------------------------------
# Strategy presets for the GPT training step
# --------------------------------------------------------------------------------------

ParamRule = Callable[[str, tuple[int, ...], Mapping[str, int]], Any]


def _replicated(name: str, shape: tuple[int, ...], axes: Mapping[str, int]) -> Any:
    return spec_of()


def _fsdp(name: str, shape: tuple[int, ...], axes: Mapping[str, int]) -> Any:
    # ZeRO-3 / FSDP: split every weight over "data" along its largest divisible dimension.
    n = axes["data"]
    dims = [d for d in sorted(range(len(shape)), key=lambda d: -shape[d]) if shape[d] % n == 0]
    if not dims:
        return spec_of()  # too small to split evenly: replicate (costs little)
    return spec_of(*("data" if d == dims[0] else None for d in range(len(shape))))


def _megatron(name: str, shape: tuple[int, ...], axes: Mapping[str, int]) -> Any:
    # Megatron-LM: column-parallel first matmul, row-parallel second, so each MLP / attention
    # block needs one all-reduce forward and one backward; vocab-parallel embedding.
    leaf = name.rsplit(".", 1)[-1]
    return {
        "w_qkv": spec_of(None, None, "model"),  # (d_model, 3, d_model): split heads
        "w_proj": spec_of("model", None),  # (d_model, d_model): split the input (heads)
        "w_fc": spec_of(None, "model"),  # (d_model, d_ff): split d_ff
        "w_out": spec_of("model", None),  # (d_ff, d_model): split d_ff
        "wte": spec_of("model", None),  # (vocab, d_model): split the vocabulary
    }.get(leaf, spec_of())  # LayerNorms and positions: small, replicated


@dataclass(frozen=True)
class Strategy:
    """A named layout of the GPT step: mesh axes, batch layout, parameter rule (Lab 03)."""

    name: str
    axes: tuple[str, ...]  # mesh axis names, e.g. ("data", "model")
    batch_spec: tuple[Any, ...]  # layout of the (batch, seq) token arrays
    param_rule: ParamRule  # (param name, shape, {axis: size}) -> PartitionSpec
    summary: str
    shard_grads: bool = False  # constrain gradients to the parameter layout (reduce-scatter)

    def mesh_shape(self, n_devices: int, model: int | None = None) -> tuple[int, ...]:
        """Mesh shape over n_devices: 1-D uses all; 2-D gives ``model`` (default 4) to "model" (Lab 03)."""
        n_devices = check_int(n_devices, "n_devices", fix="e.g. n_devices=8")
        if model is not None:
            model = check_int(model, "model (size of the 'model' mesh axis)",
                              fix=f"pass a divisor of {n_devices}, or model=None for min(4, {n_devices})")
        if len(self.axes) == 1:
            return (n_devices,)
        m = model if model is not None else min(4, n_devices)
        if n_devices % m:
            ok = [k for k in range(1, n_devices + 1) if n_devices % k == 0]
            raise ShardingError(f"{self.name}: model axis {m} does not divide {n_devices} devices; "
                                f"use model= one of {ok}")
        return (n_devices // m, m)

    def param_specs(self, shapes: Mapping[str, tuple[int, ...]], mesh: Any,
                    n_head: int | None = None) -> dict[str, Any]:
        """{param name: PartitionSpec}, checked for divisibility on ``mesh`` (Lab 03)."""
        axes = dict(mesh.shape)
        if n_head is not None and "model" in axes and n_head % axes["model"]:
            raise ShardingError(
                f"{self.name} splits attention heads over mesh axis 'model' (size "
                f"{axes['model']}) but the model has n_head={n_head}; use n_head a multiple of "
                f"{axes['model']} or a smaller model axis (e.g. strategy 'dp_tp')")
        specs = {k: self.param_rule(k, tuple(s), axes) for k, s in shapes.items()}
        for k, s in shapes.items():
            check_divisible(k, s, specs[k], mesh)
        return specs


STRATEGIES: dict[str, Strategy] = {s.name: s for s in (
    Strategy("dp", ("data",), ("data", None), _replicated,
             "data parallel: batch split, every device holds all weights; grads all-reduced"),
    Strategy("fsdp", ("data",), ("data", None), _fsdp,
             "FSDP / ZeRO-3: batch split and weights, grads, Adam state split over the same "
             "axis; weights all-gathered when used, grads reduce-scattered", shard_grads=True),
    Strategy("tp", ("model",), (None, None), _megatron,
             "tensor parallel (Megatron): every device sees the whole batch; heads, d_ff and "
             "vocab split; activations all-reduced after row-parallel matmuls"),
    Strategy("dp_tp", ("data", "model"), ("data", None), _megatron,
             "2-D: batch split over 'data', Megatron weights split over 'model'"),
)}


def get_strategy(name: str | Strategy) -> Strategy:
    """The preset called ``name``; ShardingError listing the valid names otherwise (Lab 03)."""
    if isinstance(name, Strategy):
        return name
    if name not in STRATEGIES:
        raise ShardingError(f"unknown sharding strategy {name!r}; valid: {', '.join(STRATEGIES)}")
    return STRATEGIES[name]


def mesh_devices(n: int | None = None) -> list[Any]:
    """Devices for the lab's meshes: the accelerator's if it has n, else simulated CPUs (Lab 03).

    A single-chip Colab TPU or one GPU cannot hold an 8-device mesh, so the sharding labs fall
    back to the simulated CPU devices of labkit.setup(); a TPU v5e-8 uses its 8 chips.
    """
    n = device.requested_cpu_devices() if n is None else check_int(n, "n (devices for the mesh)",
                                                                   fix="or None for the course default")
    jax = _jax()
    devs = jax.devices()
    if len(devs) >= n:
        return list(devs[:n])
    cpus = jax.devices("cpu")
    if len(cpus) >= n:
        return list(cpus[:n])
    raise ShardingError(
        f"need {n} devices for the mesh but this runtime has {len(devs)} {devs[0].platform} and "
        f"{len(cpus)} CPU device(s). Restart and call labkit.setup(cpu_devices={n}) before any "
        f"JAX code (simulated CPU devices must be set up before JAX starts).")


def strategy_mesh(strategy: str | Strategy, n_devices: int | None = None,
                  devices: Sequence[Any] | None = None, model: int | None = None) -> Any:
    """An Auto-axis mesh for a strategy over n_devices (default: :func:`mesh_devices`) (Lab 03)."""
    s = get_strategy(strategy)
    if n_devices is not None:  # 0 is an error, not "all of them"
        n_devices = check_int(n_devices, "n_devices", fix="or None for every device of mesh_devices()")
    devs = list(devices) if devices is not None else mesh_devices(n_devices)
    n = n_devices if n_devices is not None else len(devs)
    if n > len(devs):
        raise ShardingError(f"{s.name}: asked for {n} devices, only {len(devs)} given")
    return make_mesh(s.mesh_shape(n, model), s.axes, "auto", devs[:n])


def abstract_mesh(strategy: str | Strategy, n_devices: int, model: int | None = None) -> Any:
    """The strategy's mesh over ``n_devices`` that need not exist: to lower for a TPU pod on a laptop (Lab 03).

    A ``jax.sharding.AbstractMesh`` has axis names and sizes and no devices, so ``jax.export``
    lowers a program laid out on it for any platform and device count (``labkit lower``).
    """
    from jax.sharding import AbstractMesh, AxisType

    s = get_strategy(strategy)
    shape = s.mesh_shape(n_devices, model)
    return AbstractMesh(shape, s.axes, axis_types=(AxisType.Auto,) * len(shape))


# --------------------------------------------------------------------------------------
# One collective by hand: the data-parallel gradient, reduce-scattered (FSDP's backward)
# --------------------------------------------------------------------------------------


def linear_grad(x: Any, y: Any, w: Any) -> Any:
    """Gradient of the mean squared error ||x w - y||^2 / (2 batch) w.r.t. w: (d_in, d_out) (Lab 03)."""
    return x.T @ (x @ w - y) / x.shape[0]


def grad_reduce_scatter(mesh: Any, manual: bool) -> Any:
    """Jitted (x, y, w) -> grad split over "data": by the partitioner or by shard_map (Lab 03).

    x, y are split over "data" by rows (the batch), w is replicated, the gradient comes out
    split by rows over "data" (FSDP layout). Automatic: the partitioner inserts the collective.
    Manual: each device computes its partial gradient and calls ``psum_scatter`` itself.
    """
    jax = _jax()
    row, rep = spec_of("data", None), spec_of()
    if not manual:
        return jax.jit(linear_grad, in_shardings=(named(mesh, row), named(mesh, row), named(mesh, rep)),
                       out_shardings=named(mesh, row))

    def per_device(x: Any, y: Any, w: Any) -> Any:  # x: (batch / n, d_in) on this device
        partial = x.T @ (x @ w - y)  # (d_in, d_out): this device's share of the sum
        # Sum over devices and keep rows [i * d_in / n, (i + 1) * d_in / n): one reduce-scatter.
        return jax.lax.psum_scatter(partial, "data", scatter_dimension=0, tiled=True) / (
            x.shape[0] * mesh.shape["data"])

    return jax.jit(jax.shard_map(per_device, mesh=mesh, in_specs=(row, row, rep), out_specs=row))
