"""How many bytes does each device hold, per strategy? A model vs the compiler (Lab 03).

Per device, a training step with Adam holds: parameters, gradients, two Adam moments (the
optimizer state), the batch, and the activations saved for the backward pass — plus, under
FSDP, the weights it all-gathers just before use. :func:`estimate` predicts each from the
layouts alone; :func:`check` compares with ``compiled.memory_analysis()``:

- *state* (parameters + optimizer state + batch) is what the compiled program takes as
  arguments: the model must match ``argument_size_in_bytes`` within ``STATE_RTOL`` (1 %).
- *peak* = state + the updated parameters and Adam state it returns (the step does not donate
  its inputs) + temporaries (gradients, activations, gathered weights). The compiler fuses ops
  (a GELU output need not be stored), keeps intermediates the count leaves out, and reuses
  buffers, so the peak is checked against ``argument + output + temp - alias`` only within
  ``PEAK_BOUNDS``: a factor 1.5 either way. It ranks strategies; it is not exact. Without
  donation the peak holds the state twice (inputs and returned copies); a step jitted with
  ``donate_argnums`` would let the outputs reuse the inputs' buffers.

:func:`zero_bytes` is the closed form the compiled figures are checked against: ZeRO's stages
(Rajbhandari et al., "ZeRO", 2020) from Ψ, the fp32 parameter bytes, and N devices;
:func:`zero_check` sets a compiled step beside it. Both checks are exact only on an unpadded layout
(XLA:CPU): XLA:TPU tiles arrays to (8, 128), so there the ratios are printed, not asserted.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Mapping

from labkit.sharding import layouts as sharding
from labkit.gpt.config import GPTConfig

STATE_RTOL = 0.01  # parameters + optimizer state + batch vs argument_size_in_bytes
PEAK_BOUNDS = (2 / 3, 3 / 2)  # compiled peak / modelled peak
ADAM_MOMENTS = 2  # mu and nu, fp32, one each per parameter
ZERO_STAGES = ("DP", "ZeRO-1", "ZeRO-2", "ZeRO-3")


@dataclass(frozen=True)
class MemoryEstimate:
    """Modelled bytes per device of one training step (Lab 03)."""

    strategy: str
    params: int  # bytes: this device's parameter shards
    grads: int  # bytes: gradients as the optimizer sees them (same layout as params)
    opt_state: int  # bytes: Adam mu + nu (+ step count)
    batch: int  # bytes: this device's tokens x and y (int32)
    activations: int  # bytes: tensors saved for the backward pass
    gathered: int  # bytes: FSDP's all-gathered full weights (transient), else 0

    @property
    def state(self) -> int:
        """Bytes that persist between steps plus the batch: the step's arguments (Lab 03)."""
        return self.params + self.opt_state + self.batch

    @property
    def temporaries(self) -> int:
        """Bytes the step allocates and frees: grads, activations, gathered weights (Lab 03)."""
        return self.grads + self.activations + self.gathered

    @property
    def outputs(self) -> int:
        """Bytes of the updated parameters and Adam state the step returns (Lab 03)."""
        return self.params + self.opt_state

    @property
    def peak(self) -> int:
        """Modelled peak bytes per device: inputs, outputs and temporaries together (Lab 03)."""
        return self.state + self.outputs + self.temporaries

    def row(self) -> dict[str, Any]:
        """Table row in MiB (Lab 03)."""
        mib = {k: v / 2**20 for k, v in asdict(self).items() if k != "strategy"}
        return {"strategy": self.strategy, **{f"{k} MiB": v for k, v in mib.items()},
                "peak MiB": self.peak / 2**20}


def _axis(mesh: Any, name: str) -> int:
    return int(dict(mesh.shape).get(name, 1)) if mesh is not None else 1


def activation_bytes(cfg: GPTConfig, batch: int, data: int = 1, model: int = 1,
                     itemsize: int = 4) -> int:
    """Bytes of activations one device saves for backward (Megatron-style count) (Lab 03).

    Per layer (elements, b = batch / data): 6·b·t·d that every "model" device holds whole — the
    block input, both LayerNorm outputs, the residual, and the attention and MLP outputs after
    their all-reduce — plus, split over "model": q, k, v and the attention output 4·b·t·d, the
    MLP's pre- and post-GELU 2·b·t·d_ff, and 4·b·heads·t² for XLA's plain attention (scores,
    masked scores, exponentials, probabilities; a flash-attention kernel keeps none of them).
    Plus the embedding output and final LayerNorm 2·b·t·d, logits + log-probs 2·b·t·vocab.
    """
    _check_split(batch, data, model, itemsize)
    b, t, d, f, h = batch // data, cfg.seq_len, cfg.d_model, cfg.d_ff, cfg.n_head
    per_layer = 6 * b * t * d + (4 * b * t * d + 2 * b * t * f + 4 * b * h * t * t) // model
    rest = 2 * b * t * d + 2 * b * t * cfg.vocab_size // model
    return itemsize * (cfg.n_layer * per_layer + rest)


def estimate(strategy: str, cfg: GPTConfig, batch: int, mesh: Any = None,
             specs: Mapping[str, Any] | None = None, seq: int | None = None) -> MemoryEstimate:
    """Modelled bytes per device for the GPT step under ``strategy`` ("single" = 1 device) (Lab 03)."""
    from labkit.sharding.train_step import param_shapes

    if not isinstance(cfg, GPTConfig):
        raise TypeError(f"cfg must be a GPTConfig, got {type(cfg).__name__}")
    sharding.check_int(batch, "batch (global batch size)", fix="e.g. batch=8")
    if seq is not None:
        sharding.check_int(seq, "seq (tokens per sequence)", fix="or None for cfg.seq_len")
    shapes = param_shapes(cfg)
    if strategy == "single" or mesh is None:
        params = sum(4 * _numel(s) for s in shapes.values())
        data = model = 1
    else:
        s = sharding.get_strategy(strategy)
        specs = specs if specs is not None else s.param_specs(shapes, mesh, n_head=cfg.n_head)
        params = sum(sharding.shard_bytes(shp, 4, specs[k], mesh) for k, shp in shapes.items())
        data, model = _axis(mesh, "data"), _axis(mesh, "model")
    full = sum(4 * _numel(s) for s in shapes.values())  # bytes of all weights, unsplit
    t = seq or cfg.seq_len
    act_cfg = cfg if t == cfg.seq_len else _with_seq(cfg, t)
    # FSDP: each device first computes a full-size gradient from its batch shard, then
    # reduce-scatters it; the full weights are all-gathered before use.
    fsdp = strategy == "fsdp"
    return MemoryEstimate(
        strategy=strategy, params=params, grads=full if fsdp else params,
        opt_state=ADAM_MOMENTS * params + 4,  # + the int32 step count
        batch=2 * 4 * (batch // data) * t,  # x and y, int32 (batch, seq) shards
        activations=activation_bytes(act_cfg, batch, data, model),
        gathered=full - params if fsdp else 0)


def _check_split(batch: int, data: int, model: int, itemsize: int) -> None:
    """Whole numbers >= 1, and a batch that splits evenly over the "data" axis."""
    sharding.check_int(batch, "batch (global batch size)", fix="e.g. batch=8")
    sharding.check_int(data, "data (size of the 'data' mesh axis)", fix="1 when unsplit")
    sharding.check_int(model, "model (size of the 'model' mesh axis)", fix="1 when unsplit")
    sharding.check_int(itemsize, "itemsize (bytes per element)", fix="e.g. 4 for float32")
    if batch % data:
        raise sharding.ShardingError(f"batch {batch} does not split evenly over the 'data' axis of "
                                     f"size {data}; use a batch that is a multiple of {data}")


def _numel(shape: tuple[int, ...]) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def _with_seq(cfg: GPTConfig, seq: int) -> GPTConfig:
    from dataclasses import replace

    return replace(cfg, seq_len=seq)


def zero_bytes(psi: float, n: int) -> dict[str, dict[str, float]]:
    """(Lab 03) {stage: {params, grads, adam, total}} bytes per device of fp32 Adam training under DP and ZeRO-1/2/3.

    Convention: Rajbhandari et al., "ZeRO" (2020), Fig. 1, adapted to fp32 Adam: the paper's
    mixed-precision count is 2Ψ' + 2Ψ' + 12Ψ' for Ψ' parameters (fp16 weights and grads, fp32
    master weights + m + v); here weights, gradients and both moments are fp32, Ψ bytes each,
    so DP holds 4Ψ. Stage 1 splits the moments over N, stage 2 the gradients too, stage 3
    the weights too: 2Ψ + 2Ψ/N, Ψ + 3Ψ/N, 4Ψ/N. Activations, the batch and Adam's step count
    are left out.
    """
    if isinstance(psi, bool) or not isinstance(psi, (int, float)) or not 0 < psi < float("inf"):
        raise ValueError(f"psi must be the parameters' fp32 bytes (> 0), got {psi!r}")
    n = sharding.check_int(n, "n (devices the state is split over)", fix="e.g. n=8")
    split = {"DP": 0, "ZeRO-1": 1, "ZeRO-2": 2, "ZeRO-3": 3}  # how many of adam, grads, params are split
    out = {}
    for stage, k in split.items():
        adam = ADAM_MOMENTS * psi / (n if k >= 1 else 1)  # m and v
        grads = psi / (n if k >= 2 else 1)
        params = psi / (n if k >= 3 else 1)
        out[stage] = {"params": params, "grads": grads, "adam": adam, "total": params + grads + adam}
    return out


def compiled_memory(compiled: Any) -> dict[str, int]:
    """argument / output / temp / alias bytes per device from memory_analysis() (Lab 03)."""
    m = compiled.memory_analysis()
    if m is None:
        raise RuntimeError("this backend's compiled program reports no memory_analysis()")
    return {"argument": int(m.argument_size_in_bytes), "output": int(m.output_size_in_bytes),
            "temp": int(m.temp_size_in_bytes), "alias": int(m.alias_size_in_bytes)}


def compiled_peak(compiled: Any) -> int:
    """Peak bytes per device the compiler plans: argument + output + temp - alias (Lab 03)."""
    m = compiled_memory(compiled)
    return m["argument"] + m["output"] + m["temp"] - m["alias"]


def check(est: MemoryEstimate, compiled: Any) -> dict[str, Any]:
    """Model vs memory_analysis(): ratios and whether each is within its tolerance (Lab 03)."""
    got = compiled_memory(compiled)
    state_ratio = got["argument"] / est.state
    peak_ratio = compiled_peak(compiled) / est.peak
    return {"strategy": est.strategy, "state model MiB": est.state / 2**20,
            "arguments MiB": got["argument"] / 2**20, "state ratio": state_ratio,
            "state ok": abs(state_ratio - 1) <= STATE_RTOL,
            "peak model MiB": est.peak / 2**20, "compiled peak MiB": compiled_peak(compiled) / 2**20,
            "peak ratio": peak_ratio, "peak ok": PEAK_BOUNDS[0] <= peak_ratio <= PEAK_BOUNDS[1]}


# Where the 1 % state checks hold: XLA:CPU lays every array out unpadded. XLA:TPU tiles the two minor dimensions of
# an f32 array to (8, 128) (a (256, 3, 256) w_qkv pads its 3 to 8), so its memory_analysis() counts more than the
# closed form; other backends are not calibrated here. Elsewhere the ratio is printed, with UNCHECKED_WHY's reason.
STATE_CHECKED_ON = ("cpu",)
UNCHECKED_WHY = {"tpu": "XLA:TPU pads each array's two minor dims to (8, 128) tiles: the compiler counts padded bytes",
                 "gpu": "not calibrated on XLA:GPU (the 1 % tolerance was set on XLA:CPU)"}


def unchecked_why(platform: str) -> str:
    """(Lab 03) Why the memory checks are only printed on ``platform``; "" where they are asserted (STATE_CHECKED_ON)."""
    return "" if platform in STATE_CHECKED_ON else UNCHECKED_WHY.get(platform, f"not calibrated on {platform}")


def zero_check(compiled: Any, stage: str, psi: float, n: int, batch_bytes: int, platform: str) -> dict[str, Any]:
    """(Lab 03) A step's compiled arguments and outputs vs ZeRO's closed form; ``asserted`` only where unpadded.

    The step's arguments are the stage's state less its gradients (made and freed inside the step), plus
    this device's ``batch_bytes`` and Adam's int32 step count; it returns the same state. ``ok``: both
    within STATE_RTOL. ``asserted``: whether this platform's layout is unpadded (STATE_CHECKED_ON), so a
    miss is an error; elsewhere ``why`` says why the ratio is only printed.
    """
    if stage not in ZERO_STAGES:
        raise ValueError(f"stage must be one of {ZERO_STAGES}, got {stage!r}")
    if isinstance(batch_bytes, bool) or not isinstance(batch_bytes, int) or batch_bytes < 0:
        raise ValueError(f"batch_bytes must be this device's x and y bytes, an int >= 0, got {batch_bytes!r}")
    if not isinstance(platform, str):
        raise TypeError(f"platform must be a jax platform name such as 'cpu', got {platform!r}")
    z = zero_bytes(psi, n)[stage]
    kept = z["total"] - z["grads"]  # bytes per device
    want = {"argument": kept + batch_bytes + 4, "output": kept}
    got = compiled_memory(compiled)
    ratio = {k: got[k] / v for k, v in want.items()}
    asserted = platform in STATE_CHECKED_ON
    return {"stage": stage, "arguments B": got["argument"], "ZeRO arguments B": want["argument"],
            "argument ratio": ratio["argument"], "returned B": got["output"], "ZeRO returned B": want["output"],
            "returned ratio": ratio["output"], "ok": all(abs(r - 1) <= STATE_RTOL for r in ratio.values()),
            "asserted": asserted, "why": unchecked_why(platform)}
