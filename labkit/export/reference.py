"""A shipped reference any runtime checks itself against, and bf16 judged as serving teams judge it (Lab 05).

``datasets/lab05_reference/`` (built by its ``build.py``, checksummed in ``SHA256SUMS``) holds a small
trained GPT as a bundle (``bundle/``: its weights and its exported StableHLO forward program, lowered
for CPU, CUDA and TPU) and, computed on a CPU in fp32 by that program, the logits on fixed prompts and
their greedy continuations (``reference.npz``). A runtime — a GPU, a TPU, this laptop — loads those
weights, runs them through its own route and compares:

- **logits** within a stated tolerance (fp32: :func:`fp32_tol`, 1e-4 on a CPU and a GPU with TF32
  off, 1e-3 on a TPU, whose fp32 matmuls are several bf16 passes that round differently);
- **greedy tokens** identical, except where the reference's top-2 logits are closer than twice the
  tolerance: there a correct runtime may pick either (such near-ties are counted and shown). Greedy
  decoding runs free: a runtime that takes the other token at a near-tie continues from another
  prefix, so that row's later tokens answer another question and are not compared (counted too).

**An artifact from another JAX.** The shipped program was exported by the jaxlib its ``bundle.json``
names (``exported_with``: self-reported, vouched for only by a signature). What decides whether
another JAX runs it is how far apart the two jaxlib *builds* are (about 6 months backward, 3 weeks
forward). :func:`shipped_forward` loads and runs it with the JAX installed here: inside the window it
runs (and must match the reference); outside it this JAX refuses it, and the route then runs the same
weights exported here. The real fix is the producer's: ``build.py --reexport`` exports again with a
newer jaxlib and proves the logits did not move.

**Which route crossed devices.** The reference was computed on a CPU; a route that ran on the CPU
again proves the route, not the move. :func:`routes_off_host` picks the routes whose device is not
the host CPU (a GPU: JAX and torch; a TPU: the JAX/StableHLO route, torch staying on the host), and
:func:`cross_device` reports the figure from those routes only.

**Lower precision** (bf16 serving) is not judged by logits within fp32 rounding but by what users
see: *top-1 agreement* (the share of positions whose argmax equals the fp32 reference's) and the
mean *KL divergence* KL(p_fp32 || p_bf16) in nats per token — the measures llama.cpp's
``llama-perplexity --kl-divergence`` reports for quantized models. Thresholds here:
``BF16_TOP1_MIN`` and ``BF16_KL_MAX`` (this course's, stated, not an industry standard). The KL bar
sits between what bf16 does and what a broken conversion does: bf16 serving of the shipped model gives
KL ~4e-5 (CPU, and CUDA on an H100 and an H200: 3.9e-5), while its weights rounded to fp8 e4m3 give
2.1e-3 and 5% multiplicative weight noise 3.4e-3 (both must fail: tested, and shown in the lab).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np

from labkit.gpt.config import GPTConfig

REFERENCE_REL = Path("lab05_reference")  # inside a datasets/ directory
BUNDLE = "bundle"  # a Lab 05 bundle: weights, the exported forward program (cpu/cuda/tpu), bundle.json
FILES = (f"{BUNDLE}/bundle.json", f"{BUNDLE}/weights.safetensors", f"{BUNDLE}/forward.jaxexport", "reference.npz")
BF16_TOP1_MIN = 0.97  # share of positions whose argmax matches fp32
BF16_KL_MAX = 1e-3  # nats/token, mean KL(p_fp32 || p_low): ~25x bf16's, under half fp8 e4m3's
REBUILD = "python datasets/lab05_reference/build.py"
FP32_TOL = {"cpu": 1e-4, "gpu": 1e-4, "tpu": 1e-3}  # max |Δlogit|; an H100 and an H200 stayed within 1.5e-5


def fp32_tol(platform: str) -> float:
    """(Lab 05) The fp32 logit tolerance on ``platform`` ("cpu", "gpu" or "tpu"): see the module docstring."""
    if platform not in FP32_TOL:
        raise ValueError(f"platform must be one of {', '.join(FP32_TOL)} (labkit.setup().platform), got {platform!r}")
    return FP32_TOL[platform]


class ReferenceError(RuntimeError):
    """The shipped reference is missing or not the files its checksums name (Lab 05)."""


@dataclass(frozen=True)
class Reference:
    """The shipped model's weights file and its CPU fp32 outputs on fixed prompts (Lab 05)."""

    bundle: Path           # the shipped bundle folder: weights + the program that computed `logits`
    weights: Path          # its labkit safetensors file (with manifest and config)
    tokens: np.ndarray     # (n, t) int32 prompts
    logits: np.ndarray     # (n, t, vocab) float32, from the exported program on a CPU
    prompt_len: int        # greedy decoding starts after this many tokens of each prompt
    greedy: np.ndarray     # (n, new) int64 greedy continuation of tokens[:, :prompt_len]
    margin: np.ndarray     # (n, new) float32 top-1 minus top-2 logit behind each greedy token


def reference_dir() -> Path:
    """datasets/lab05_reference above labkit or the working directory (Lab 05)."""
    for root in (Path(__file__).resolve().parent, Path.cwd().resolve()):
        for d in (root, *root.parents):
            if (d / "datasets" / REFERENCE_REL / "SHA256SUMS").is_file():
                return d / "datasets" / REFERENCE_REL
    raise ReferenceError(f"datasets/{REFERENCE_REL} not found: run from the course repository, or rebuild "
                         f"it with `{REBUILD}`")


def load_reference(path: str | Path | None = None) -> Reference:
    """The shipped reference, after its files' SHA-256 match SHA256SUMS (Lab 05)."""
    d = Path(path) if path is not None else reference_dir()
    sums = dict(reversed(line.split(None, 1)) for line in (d / "SHA256SUMS").read_text().splitlines() if line)
    for name in FILES:
        got = hashlib.sha256((d / name).read_bytes()).hexdigest() if (d / name).is_file() else "missing"
        if sums.get(name) != got:
            raise ReferenceError(f"{d.name}/{name}: sha256 {got[:16]}, SHA256SUMS says {str(sums.get(name))[:16]}; "
                                 f"rebuild with `{REBUILD}`")
    with np.load(d / "reference.npz") as z:
        return Reference(d / BUNDLE, d / BUNDLE / "weights.safetensors", z["tokens"], z["logits"], int(z["prompt_len"]),
                         z["greedy"], z["margin"])


# Past the two reads, a JAX that refuses an artifact while compiling it says so with a deserialization or
# version error; any other failure (out of memory, a missing plugin, a bug) is raised as it is.
REFUSAL = re.compile(r"(?i)deserializ|serializ|portable artifact|stablehlo|version|expired|compatib")


@dataclass(frozen=True)
class Shipped:
    """The shipped bundle's forward program as this JAX ran it, or re-exported here if it refused (Lab 05)."""

    program: Any                 # jax.export.Exported: the shipped one, or this JAX's re-export when refused
    flat: dict[str, np.ndarray]  # the bundle's verified weights, the program's first input
    exported_with: dict[str, Any]  # bundle.json's record of the exporter: jax, jaxlib, stablehlo, calling convention
    running: dict[str, str]      # this process: jax and jaxlib versions
    refused: str | None = None   # why this JAX could not load or run the shipped program; None: it ran
    verified: Any = None         # the bundle.Verified it came from (summary(), manifest): verified once

    def sentence(self) -> str:
        """Which program the JAX route runs, and what that says about the compatibility window (Lab 05)."""
        from labkit.runtime.versions import release

        made, here = (f"jaxlib {d.get('jaxlib', 'unknown')}" for d in (self.exported_with, self.running))
        if self.refused is not None:
            return (f"{here} refused the shipped artifact exported by {made} ({self.refused}); the JAX route runs the "
                    "same weights exported here instead. The fix belongs to the producer: export again with a "
                    "newer jaxlib and republish (a serving host without the model code cannot)")
        if made == here:
            return (f"the JAX route runs the shipped artifact, exported by {made}, the jaxlib here: this run checks "
                    "the artifact, not the compatibility window (a different jaxlib would)")
        newer = release(self.running.get("jaxlib", "")) > release(self.exported_with.get("jaxlib", ""))
        side = ("a newer jaxlib than the exporter's (backward compatibility: about 6 months between the two builds)"
                if newer else "an older jaxlib than the exporter's (forward compatibility: about 3 weeks)")
        return f"the JAX route runs the shipped artifact, exported by {made}, here on {here}: {side} loaded and ran it"


def shipped_forward(ref: Reference) -> Shipped:
    """(Lab 05) The shipped bundle, verified; its forward program loaded and run once, or re-exported if refused.

    A JAX outside the artifact's compatibility window refuses it when deserializing the container or
    the StableHLO inside (any error there counts: the bytes are verified), or, rarely, when compiling
    it (a version or serialization error). Each is kept as the reason; other errors are raised.
    """
    import jax
    import jaxlib

    from labkit.export import bundle, stablehlo

    v = bundle.verify(ref.bundle)  # digests and the config binding, before anything is deserialized
    made = dict(v.manifest.get("exported_with") or {})
    here = {"jax": jax.__version__, "jaxlib": jaxlib.__version__}
    flat = v.tensors()
    try:  # the bytes are verified, so a failure to read them is this JAX's refusal, whatever its wording
        exp = v.program("forward")  # BundleError: a jax.export container this jax cannot read
        try:
            exp.mlir_module()  # this jaxlib's StableHLO reader: an artifact outside its window fails here
        except Exception as e:  # noqa: BLE001
            raise bundle.BundleError(f"this jaxlib cannot read its StableHLO ({_first_line(e)})") from None
        np.asarray(exp.call(flat, ref.tokens[:1]))  # compiles and runs it: only here can other failures occur
        return Shipped(exp, flat, made, here, verified=v)
    except Exception as e:  # noqa: BLE001  a refusal by this JAX is reported and the route re-exported
        if not (isinstance(e, bundle.BundleError) or REFUSAL.search(_first_line(e))):
            raise  # not about versions (out of memory, a missing plugin): a re-export would not fix it
        return Shipped(stablehlo.export_forward(config_of(ref)), flat, made, here, _first_line(e), v)


def _first_line(e: BaseException) -> str:
    """'TypeName: first line of the message', at most 200 characters of message."""
    text = str(e).splitlines()[0][:200] if str(e) else ""
    return f"{type(e).__name__}: {text}"


def greedy_tokens(logits_fn: Callable[[np.ndarray], Any], prompts: np.ndarray, new_tokens: int) -> np.ndarray:
    """Greedy continuation (n, new) by full recomputation; logits_fn: tokens (n, T) -> (n, T, vocab) (Lab 05)."""
    buf = np.concatenate([prompts, np.zeros((len(prompts), new_tokens), prompts.dtype)], axis=1)
    t = prompts.shape[1]
    for cur in range(t, t + new_tokens):  # causal model: the zeros after `cur` do not change position cur - 1
        buf[:, cur] = np.argmax(np.asarray(logits_fn(buf), dtype=np.float32)[:, cur - 1], axis=-1)
    return buf[:, t:].astype(np.int64)


@dataclass(frozen=True)
class Check:
    """How one runtime's outputs compare with the reference (Lab 05)."""

    max_abs_logit_diff: float
    tol: float
    greedy_mismatches: int      # positions where tokens differ and the reference has a clear winner
    near_ties: int              # compared greedy positions whose reference top-2 logits are within 2 * tol
    positions: int
    after_tie: int = 0          # positions not compared: after a near-tie the runtime resolved the other way

    @property
    def ok(self) -> bool:
        """Logits within tol and no greedy token differs at a clear-winner position (Lab 05)."""
        return self.max_abs_logit_diff <= self.tol and self.greedy_mismatches == 0

    def __str__(self) -> str:
        verdict = "MATCHES" if self.ok else "DIFFERS FROM"
        return (f"{verdict} the reference: max |logit diff| {self.max_abs_logit_diff:.2e} (tol {self.tol:.0e}), "
                f"greedy mismatches {self.greedy_mismatches} of {self.positions} (near-ties excused: {self.near_ties}"
                + (f"; {self.after_tie} tokens after a near-tie taken the other way not compared)" if self.after_tie
                   else ")"))


def check(ref: Reference, logits: np.ndarray, greedy: np.ndarray, tol: float) -> Check:
    """Compare a runtime's logits on ref.tokens and its greedy tokens with the reference (Lab 05)."""
    logits = np.asarray(logits, dtype=np.float64)
    if logits.shape != ref.logits.shape or np.shape(greedy) != ref.greedy.shape:
        raise ValueError(f"shapes {logits.shape}, {np.shape(greedy)} vs the reference's "
                         f"{ref.logits.shape}, {ref.greedy.shape}")
    diff = float(np.max(np.abs(logits - ref.logits)))
    differs = np.asarray(greedy) != ref.greedy  # (n, new)
    tie = ref.margin < 2 * tol  # top-2 closer than two tolerances: either token is a correct answer
    # Greedy decoding runs free: once a row took the other token at a near-tie, its later tokens follow
    # another prefix than the reference's, and comparing them would fail a correct runtime.
    taken_other_way = differs & tie
    after = (np.cumsum(taken_other_way, axis=1) - taken_other_way) > 0  # strictly after the first such tie
    compared = ~after
    return Check(diff, tol, int(np.sum(differs & ~tie & compared)), int(np.sum(tie & compared)), int(differs.size),
                 int(np.sum(after)))


def routes_off_host(devices: Mapping[str, str]) -> tuple[tuple[str, ...], bool]:
    """(Lab 05) The routes whose device is not the host CPU, and True; if none left it, every route and False.

    ``devices`` maps a route to where it ran: a JAX platform ("cpu", "gpu", "tpu") or a torch device
    type ("cpu", "cuda", "xla", "mps"). On a TPU runtime torch usually stays on the host, so only the
    JAX (StableHLO) route crossed devices; on a GPU runtime both did; on a CPU none did.
    """
    if not devices:
        raise ValueError("devices is empty: pass {route: device}, e.g. {'JAX': 'tpu', 'PyTorch': 'cpu'}")
    bad = {r: d for r, d in devices.items() if not (isinstance(d, str) and d.strip())}
    if bad:
        raise ValueError(f"devices must be names such as 'cpu', 'gpu', 'tpu', 'cuda'; got {bad}")
    moved = tuple(r for r, d in devices.items() if d.strip().lower() != "cpu")
    return (moved, True) if moved else (tuple(devices), False)


def cross_device(checks: Mapping[str, Check], devices: Mapping[str, str]) -> dict[str, Any]:
    """(Lab 05) Max |logit diff| over the routes that left the CPU (all routes if none did), and which.

    Returns ``{"max_abs_logit_diff", "exercised", "routes", "by_route"}``; ``by_route`` gives every
    route's figure under "route on device", so a report shows where each number came from.
    """
    if set(checks) != set(devices):
        raise ValueError(f"checks and devices must name the same routes: {sorted(checks)} vs {sorted(devices)}")
    routes, exercised = routes_off_host(devices)
    return {"max_abs_logit_diff": max(checks[r].max_abs_logit_diff for r in routes), "exercised": exercised,
            "routes": [f"{r} on {devices[r]}" for r in routes],
            "by_route": {f"{r} on {devices[r]}": checks[r].max_abs_logit_diff for r in checks}}


def top2_margin(logits: np.ndarray) -> np.ndarray:
    """Top-1 minus top-2 logit at each position, (...,) (Lab 05)."""
    top2 = np.sort(np.asarray(logits, dtype=np.float64), axis=-1)[..., -2:]
    return top2[..., 1] - top2[..., 0]


def _log_softmax(x: np.ndarray) -> np.ndarray:
    x = np.asarray(x, dtype=np.float64)
    x = x - x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def top1_agreement(ref_logits: np.ndarray, logits: np.ndarray) -> float:
    """Share of positions whose argmax equals the reference's, 0..1 (Lab 05)."""
    return float(np.mean(np.argmax(ref_logits, -1) == np.argmax(np.asarray(logits, dtype=np.float32), -1)))


def kl_divergence(ref_logits: np.ndarray, logits: np.ndarray) -> float:
    """Mean over positions of KL(p_ref || p) in nats/token, from logits (..., vocab) (Lab 05)."""
    lp, lq = _log_softmax(ref_logits), _log_softmax(logits)
    return float(np.mean(np.sum(np.exp(lp) * (lp - lq), axis=-1)))


def judge_low_precision(ref_logits: np.ndarray, logits: np.ndarray, top1_min: float = BF16_TOP1_MIN,
                        kl_max: float = BF16_KL_MAX) -> dict[str, Any]:
    """Top-1 agreement and KL against the fp32 reference, with the thresholds and a verdict (Lab 05)."""
    top1, kl = top1_agreement(ref_logits, logits), kl_divergence(ref_logits, logits)
    return {"top1_agreement": top1, "kl_nats": kl, "top1_min": top1_min, "kl_max": kl_max,
            "ok": top1 >= top1_min and kl <= kl_max}


def config_of(ref: Reference) -> GPTConfig:
    """The GPTConfig recorded in the reference weights' manifest (Lab 05)."""
    from labkit.export.weights import read_manifest

    return GPTConfig(**read_manifest(ref.weights)["config"])
