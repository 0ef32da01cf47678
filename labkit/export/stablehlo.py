"""The StableHLO path: one serialized program that runs on CPU, CUDA and TPU (Lab 05).

``jax.export`` lowers a jitted function to **StableHLO** (MLIR's portable, versioned dialect
of XLA's ops) for several platforms at once, with **symbolic** dimensions such as the batch
size, and serializes it to bytes. A fresh process with only ``jax`` installed — no Flax, no
labkit, no model code — deserializes and runs it on whichever of those platforms it has.

The exported functions take the weights as an *input* (the canonical flat dict, the same
names and layout as the safetensors file of ``labkit.export.weights``): the artifact is the
program, the safetensors file the state. Because shapes alone do not pin a model (n_head=2 and
n_head=4 give the same tensors), each program is exported under a name that carries its config's
digest (``bundle.program_tag``); the bundle loader refuses a program whose tag is not its weights'.
Programs travel, and are loaded, only inside a bundle (``labkit.export.bundle``).

- ``export_forward``: ``(flat, tokens (b, t) int32) -> logits (b, t, vocab)``, the FlaxGPT
  forward pass, symbolic ``b`` and ``t <= seq_len``.
- ``export_step``: the KV-cache decode step of ``labkit.export.kv_cache.jax_step_fn`` for serving.

Both export under ``jax.default_matmul_precision(precision)``, "highest" by default: the precision is
written into every ``dot_general`` of the artifact (``precision = [HIGHEST, HIGHEST]``), so the file
computes true fp32 matmuls on every platform it runs on. Without it a TPU runs an fp32 matmul as one
bf16 pass (DEFAULT): 8 significant bits, not fp32 rounding, and the lab's fp32 parity check would fail.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import asdict
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

import numpy as np

from labkit.export import bundle
from labkit.export.kv_cache import flax_from_flat_fn, jax_step_fn
from labkit.gpt.config import GPTConfig, param_shapes

PLATFORMS = ("cpu", "cuda", "tpu")  # lowered for all three at once; the runner picks its own
PRECISIONS = ("highest", "high", "default")  # jax.default_matmul_precision names; "highest" = true fp32


def _precision(precision: str) -> str:
    """precision checked against PRECISIONS, so a typo is refused before minutes of exporting."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS} ('highest': fp32 matmuls on every platform), "
                         f"got {precision!r}")
    return precision


def forward_fn(cfg: GPTConfig) -> Callable[[dict[str, Any], Any], Any]:
    """Pure fn(flat, tokens) -> logits (batch, seq, vocab): the FlaxGPT forward on given weights (Lab 05)."""
    build = flax_from_flat_fn(cfg)
    return lambda flat, tokens: build(flat)(tokens)


def _tagged(fn: Callable[..., Any], cfg: GPTConfig, kind: str) -> Callable[..., Any]:
    """fn renamed to bundle.program_tag(cfg, kind): the name jax.export stores in the artifact."""
    def tagged(*args: Any) -> Any:
        return fn(*args)
    tagged.__name__ = tagged.__qualname__ = bundle.program_tag(asdict(cfg), kind)
    return tagged


def weight_specs(cfg: GPTConfig) -> dict[str, Any]:
    """Shape/dtype stand-ins for the canonical fp32 weights: what export and lowering need (Lab 05)."""
    import jax
    import jax.numpy as jnp

    return {k: jax.ShapeDtypeStruct(v, jnp.float32) for k, v in param_shapes(cfg).items()}


@contextlib.contextmanager
def _file_names_only() -> Any:
    """Source locations written into the artifact keep file names, not this machine's folders (Lab 05).

    An artifact carries a debug location for every op; by default that is the absolute path of the
    source file, so an export on a laptop ships ``/home/<user>/...`` to whoever runs it.
    """
    import jax

    key = "jax_hlo_source_file_canonicalization_regex"  # re.sub(regex, "", path) on every source path
    before = getattr(jax.config, key)
    jax.config.update(key, r".*/")  # "/home/alice/labkit/gpt/flax_model.py" -> "flax_model.py"
    try:
        yield
    finally:
        jax.config.update(key, before)


def export_forward(cfg: GPTConfig, platforms: tuple[str, ...] = PLATFORMS, precision: str = "highest") -> Any:
    """jax.export of the forward pass for `platforms`, batch `b` and length `t` symbolic, at `precision` (Lab 05)."""
    import jax
    import jax.numpy as jnp

    # The constraint lets FlaxGPT's `t > seq_len` check resolve at export time (to False).
    b, t = jax.export.symbolic_shape("b, t", constraints=(f"t <= {cfg.seq_len}",))
    tokens = jax.ShapeDtypeStruct((b, t), jnp.int32)
    fn = _tagged(forward_fn(cfg), cfg, "forward")
    with jax.default_matmul_precision(_precision(precision)), _file_names_only():  # precision: in every dot_general
        return jax.export.export(jax.jit(fn), platforms=platforms)(weight_specs(cfg), tokens)


def export_step(cfg: GPTConfig, max_len: int | None = None, platforms: tuple[str, ...] = PLATFORMS,
                precision: str = "highest") -> Any:
    """jax.export of the KV-cache step (flat, tokens, k, v, start, pad), batch and t symbolic (Lab 05)."""
    import jax
    import jax.numpy as jnp

    precision = _precision(precision)
    max_len = max_len or cfg.seq_len
    b, t = jax.export.symbolic_shape("b, t", constraints=(f"t <= {max_len}",))
    cache = jax.ShapeDtypeStruct((cfg.n_layer, b, max_len, cfg.n_head, cfg.head_dim), jnp.float32)
    args = (weight_specs(cfg), jax.ShapeDtypeStruct((b, t), jnp.int32), cache, cache,
            jax.ShapeDtypeStruct((), jnp.int32), jax.ShapeDtypeStruct((b,), jnp.int32))
    with jax.default_matmul_precision(precision), _file_names_only():  # precision: in every dot_general
        return jax.export.export(jax.jit(_tagged(jax_step_fn(cfg), cfg, "step")), platforms=platforms)(*args)


def matmul_precisions(exported: Any) -> dict[str, int]:
    """How many dot_generals of an artifact carry each precision, e.g. {"HIGHEST": 39} (Lab 05)."""
    counts: dict[str, int] = {}
    for line in exported.mlir_module().splitlines():
        if "stablehlo.dot_general" in line:
            m = re.search(r"precision = \[(\w+), (\w+)\]", line)
            # no attribute: DEFAULT, the backend's choice (one bf16 pass for fp32 on a TPU)
            key = "DEFAULT" if m is None else (m[1] if m[1] == m[2] else f"{m[1]},{m[2]}")
            counts[key] = counts.get(key, 0) + 1
    return counts


def artifact_facts(exported: Any) -> dict[str, Any]:
    """(Lab 05) What decides where an artifact runs: versions, platforms, custom calls, disabled safety checks.

    ``stablehlo``: the StableHLO version the module was serialized at (JAX writes one some weeks older
    than its own, for forward compatibility). ``calling_convention`` beside the range this JAX can run.
    ``custom_calls``: every custom-call target in the module (each must be on JAX's list of targets with
    compatibility guarantees unless the exporter disabled that check). ``disabled_safety_checks``:
    checks the exporter switched off (platform, custom calls): empty for an artifact to trust.
    """
    import jax

    m = re.search(rb"StableHLO_v([\d.]+)", bytes(exported.mlir_module_serialized))
    return {
        "stablehlo": m.group(1).decode() if m else None,
        "calling_convention": exported.calling_convention_version,
        "calling_conventions_supported_here": (jax.export.minimum_supported_calling_convention_version,
                                               jax.export.maximum_supported_calling_convention_version),
        "platforms": list(exported.platforms),
        "devices": exported.nr_devices,
        "custom_calls": sorted(set(bundle.custom_call_targets(exported.mlir_module()))),  # the loader's own reading
        "disabled_safety_checks": [str(c) for c in exported.disabled_safety_checks],
    }


FORWARD_NAMES = (("flat", "tokens"), ("logits",))  # (input names, output names)
STEP_NAMES = (("flat", "tokens", "k_cache", "v_cache", "start", "pad"), ("logits", "k_cache", "v_cache"))


def _named_avals(tree: Any, avals: tuple, names: tuple[str, ...]) -> list[tuple[str, str, str]]:
    """[(name, shape, dtype)] of a flattened signature; names[i] replaces the i-th argument's path."""
    import jax

    structured = jax.tree.unflatten(tree, list(avals))
    if isinstance(structured, tuple) and len(structured) == 2 and isinstance(structured[1], dict):
        structured = structured[0]  # in_tree is (args, kwargs); drop the (empty) kwargs
    if not isinstance(structured, (tuple, list)):
        structured = (structured,)
    out = []
    for i, arg in enumerate(structured):
        label = names[i] if i < len(names) else f"arg{i}"
        for path, aval in jax.tree_util.tree_flatten_with_path(arg)[0]:
            shape = "(" + ", ".join(str(d) for d in aval.shape) + ")"
            out.append((label + jax.tree_util.keystr(path), shape, str(aval.dtype)))
    return out


def describe(exported: Any, names: tuple[tuple[str, ...], tuple[str, ...]] = FORWARD_NAMES,
             max_weights: int = 2) -> dict[str, Any]:
    """Platforms, input/output names, shapes (symbolic dims by name) and dtypes of an Exported (Lab 05)."""
    ins = _named_avals(exported.in_tree, exported.in_avals, names[0])
    outs = _named_avals(exported.out_tree, exported.out_avals, names[1])
    weights = [i for i in ins if i[0].startswith("flat[")]
    shown = weights[:max_weights] + ([(f"... {len(weights) - max_weights} more weights", "", "")]
                                     if len(weights) > max_weights else []) + [i for i in ins if i not in weights]
    return {
        "platforms": list(exported.platforms),
        "inputs": [f"{n} {s} {d}".strip() for n, s, d in shown],
        "outputs": [f"{n} {s} {d}" for n, s, d in outs],
        "n_weight_inputs": len(weights),
        "calling_convention_version": exported.calling_convention_version,
        "stablehlo_lines": len(exported.mlir_module().splitlines()),
        "op_counts": op_counts(exported),
    }


def op_counts(exported: Any, top: int = 8) -> dict[str, int]:
    """The most frequent StableHLO ops of an artifact, e.g. {"stablehlo.dot_general": 12} (Lab 05)."""
    counts: dict[str, int] = {}
    for op in re.findall(r"= (stablehlo\.[a-z_]+)", exported.mlir_module()):
        counts[op] = counts.get(op, 0) + 1
    return dict(sorted(counts.items(), key=lambda kv: -kv[1])[:top])


def stablehlo_excerpt(exported: Any, n_ops: int = 12) -> str:
    """The main function's signature (one argument per line) and its first ops, without locations (Lab 05)."""
    text = exported.mlir_module()
    lines = [re.sub(r" loc\(.*\)$", "", ln) for ln in text.splitlines() if not ln.startswith("#loc")]
    start = next((i for i, ln in enumerate(lines) if "func.func public @main" in ln), 0)
    sig = re.sub(r" loc\([^)]*\)", "", lines[start])
    head, _, rest = sig.partition("(")
    args = [a.strip() for a in re.split(r",\s*(?=%arg)", rest.rsplit(") ->", 1)[0])]
    result = "-> " + rest.rsplit(") ->", 1)[1].rstrip(" {") if ") ->" in rest else ""
    keep = args[:3] + ([f"... {len(args) - 5} more arguments ..."] if len(args) > 5 else args[3:-2]) + args[-2:]
    body = [ln.rstrip()[:150] for ln in lines[start + 1:] if ln.strip()][:n_ops]
    return "\n".join([head.strip() + "(", ",\n".join("    " + a for a in keep), ") " + result[:150]] + body)


# A serving process that needs only jax and numpy: it loads labkit's bundle verifier by file path
# (bundle.py imports nothing from labkit but its sibling manifest.py, loaded by path too). It runs isolated
# (python -I: no current folder, no user site, no PYTHON* variables) and a meta-path hook makes importing
# the model libraries fail, so it *cannot* lean on them, however the venv is set up; it reports both.
FORBIDDEN = ("flax", "labkit", "torch", "safetensors")
_FRESH = r"""
import importlib.util, json, sys, time
FORBIDDEN = @FORBIDDEN@
class Refuse:  # runs before any other finder: an import of these names fails, whoever asks for it
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in FORBIDDEN:
            raise ImportError(f"{name}: refused in this serving process (no model code here)")
sys.meta_path.insert(0, Refuse())
import numpy as np, jax
root, key, tokens_in, out, verifier, expected = sys.argv[1:7]
spec = importlib.util.spec_from_file_location("bundle_verifier", verifier)
B = sys.modules["bundle_verifier"] = importlib.util.module_from_spec(spec)  # dataclasses look it up
spec.loader.exec_module(B)
try:
    v = B.verify(root, key or None, json.loads(expected))  # signature, pin, digests: before deserializing
    exp, flat = v.program("forward"), v.tensors()
except B.BundleError as e:
    print(json.dumps({"refused": str(e)})); sys.exit(3)
tokens = np.load(tokens_in)
t0 = time.perf_counter()
logits = np.asarray(exp.call(flat, tokens))
np.save(out, logits)
def refused(m):  # the hook at work: each forbidden import must fail here
    try:
        importlib.import_module(m)
        return False
    except ImportError:
        return True
print(json.dumps({"platform": jax.devices()[0].platform, "jax": jax.__version__, "signature": v.signature,
                  "seconds": time.perf_counter() - t0, "isolated": bool(sys.flags.isolated),
                  "modules": sorted(m for m in FORBIDDEN if m in sys.modules),
                  "import_refused": sorted(m for m in FORBIDDEN if refused(m))}))
""".replace("@FORBIDDEN@", repr(FORBIDDEN))


def run_fresh_process(bundle_dir: str | Path, tokens: np.ndarray, key: str | Path | None = None,
                      platform: str | None = None, timeout_s: float = 300,
                      expected: dict[str, str] | None = None) -> tuple[np.ndarray, dict[str, Any]]:
    """Verify a bundle and run its forward program in a new Python process (jax only) -> (logits, info) (Lab 05).

    The child runs with ``python -I`` and refuses to import ``FORBIDDEN`` (flax, labkit, torch, safetensors):
    ``info["modules"]`` lists those it imported (none), ``info["import_refused"]`` those whose import failed.
    ``key`` is a key *file* (Ed25519 public key PEM, or an HMAC secret): with it the child refuses
    an unsigned or edited bundle; with ``expected`` (name, version), one that is not the pinned model.
    A refusal raises ``bundle.BundleError`` with the child's reason.
    ``platform`` (e.g. "cpu") sets the child's ``JAX_PLATFORMS``. By default the child uses what it
    finds, except next to a TPU: a TPU chip belongs to one process at a time, and this one already
    holds it, so the child then runs the artifact's CPU lowering.
    """
    import jax

    env = dict(os.environ)
    if platform is None and jax.default_backend() == "tpu":
        platform = "cpu"
    if platform:
        env["JAX_PLATFORMS"] = platform
    with tempfile.TemporaryDirectory() as d:
        tin, tout = Path(d) / "tokens.npy", Path(d) / "logits.npy"
        np.save(tin, np.asarray(tokens, dtype=np.int32))
        argv = [str(bundle_dir), str(key or ""), str(tin), str(tout), bundle.__file__, json.dumps(expected)]
        r = subprocess.run([sys.executable, "-I", "-c", _FRESH, *argv], capture_output=True, text=True,
                           timeout=timeout_s, env=env)
        last = (r.stdout.strip().splitlines() or ["{}"])[-1]
        if r.returncode == 3:
            raise bundle.BundleError(json.loads(last)["refused"])
        if r.returncode != 0:
            raise RuntimeError(f"the fresh process failed (exit {r.returncode}):\n{r.stderr[-3000:]}")
        return np.load(tout), json.loads(last)
