"""FLOPs of a GPT training step: from the config, by hand, and as the compilers count them (Lab 02).

PaLM (Appendix B) gives the training FLOPs per token of a decoder-only transformer as

    6·N + 12·L·H·Q·T        N parameters, L layers, H heads, Q head dim, T sequence length

6·N: every weight is used in one multiply-add (2 FLOPs) per token in the forward pass and two
in the backward pass (gradient w.r.t. the input and w.r.t. the weight). 12·L·H·Q·T: the two
attention matmuls (scores q·kᵀ and probabilities·v) cost 2·2·T·(H·Q) per token per layer
forward, times 3 for forward + backward. Codebases differ in *which* N and whether the causal
mask halves the attention term, so every number here carries its :class:`Variant` name.

Compiler counts (:func:`xla_count`, :func:`torch_count`) have blind spots, handled here:
``cost_analysis()`` returns a dict or a one-element list depending on the JAX version, counts
*per device* on a sharded program, and includes elementwise/optimizer FLOPs. On a GPU the
*compiled* program's count leaves out the matmuls XLA handed to cuBLAS (custom calls it cannot
see into: measured on an H100, 0.1% of a pure-matmul program and 0.25-0.34x a GPT step), so the
all-ops figure taught is the *pre-optimisation* count (``Lowered.cost_analysis``), which every
backend computes the same way. torch's ``FlopCounterMode`` has no formula for the CPU
flash-attention kernel and counts SDPA as 0; on CUDA it counts the flash/memory-efficient
kernels *with* their backward pass's recomputation of the scores (one extra attention matmul).
"""

from __future__ import annotations

import math
import numbers
import re
from dataclasses import dataclass, field
from typing import Any, Callable

from labkit.gpt.config import GPTConfig, n_params
from labkit.gpt.data import check_count, check_real

MATMUL_RTOL = 0.01  # compiler matmul FLOPs vs the "matmul" variant: agree within 1% (exact in practice)


@dataclass(frozen=True)
class Variant:
    """One named convention for 6N + 12LHQT: which N, and full or causal attention (Lab 02)."""

    name: str
    params: str  # "all" | "no_wpe" | "non_embedding" | "matmul": which parameters N counts
    causal: bool  # True: attention term halved (the masked upper triangle is skipped)
    source: str  # who uses this convention
    note: str  # what it over- or under-counts for this (tied-head) model


VARIANTS: dict[str, Variant] = {v.name: v for v in (
    Variant("palm", "all", False, "PaLM Appendix B's 6N + 12LHQT, N = every parameter",
            "embeddings in N: the tied wte's 6·V·d is exactly the head's logits matmul; wpe and "
            "LayerNorm parameters add 6·(seq_len·d + 4·L·d + 2·d) FLOPs no matmul performs"),
    Variant("nanogpt", "no_wpe", False, "nanoGPT estimate_mfu (N = get_num_params(): all but wpe)",
            "N = every parameter but the position embedding wpe: 6·seq_len·d per token below palm; "
            "the tied wte stays in N because it is also the head; estimate_mfu uses T = block_size"),
    Variant("no_embed", "non_embedding", False, "torchtitan (N excludes the embeddings)",
            "wte and wpe out of N (LayerNorms stay in); with a tied head this also drops the "
            "logits matmul, 2·d·V per token forward (torchtitan's head is untied, so it keeps it)"),
    Variant("causal", "matmul", True, "MaxText (causal attention halved)",
            "N = matmul weights incl. the head; attention counted for half the T×T scores, "
            "as causal flash kernels skip the masked tiles (MaxText since its PR #1988, July 2025; "
            "MFUs it published before then do not halve attention)"),
    Variant("matmul", "matmul", False, "every matmul of the XLA / math-attention program",
            "N = matmul weights (layers + tied head), full T×T attention: what XLA's dots "
            "and torch's FlopCounterMode (math attention) count; a causal flash kernel skips "
            "masked tiles and recomputes q·kᵀ in its backward, so it runs other counts"),
)}


def get_variant(name: str | Variant) -> Variant:
    """The Variant called ``name``; ValueError listing the known names otherwise (Lab 02)."""
    if isinstance(name, Variant):
        return name
    if name not in VARIANTS:
        raise ValueError(f"unknown FLOPs variant {name!r}; known variants: {', '.join(VARIANTS)} "
                         f"({'; '.join(f'{v.name}: {v.source}' for v in VARIANTS.values())})")
    return VARIANTS[name]


def param_count(cfg: GPTConfig, params: str) -> int:
    """N for a variant's rule: "all", "no_wpe", "non_embedding" or "matmul" (weights that multiply) (Lab 02)."""
    if params == "all":
        return n_params(cfg, embeddings=True)
    if params == "no_wpe":  # nanoGPT's get_num_params(non_embedding=True): subtracts wpe only
        return n_params(cfg, embeddings=True) - cfg.seq_len * cfg.d_model  # wpe is (seq_len, d)
    if params == "non_embedding":
        return n_params(cfg, embeddings=False)  # still holds the LayerNorm parameters
    if params == "matmul":
        d, f = cfg.d_model, cfg.d_ff
        return cfg.n_layer * (4 * d * d + 2 * d * f) + cfg.vocab_size * d  # + tied head (V, d)
    raise ValueError(f"params rule must be 'all', 'no_wpe', 'non_embedding' or 'matmul', got {params!r}")


def _seq(cfg: GPTConfig, seq: int | None) -> int:
    t = cfg.seq_len if seq is None else seq
    if isinstance(t, bool) or not isinstance(t, numbers.Integral):  # '64' or 64.0: '<' between str and int
        raise TypeError(f"seq must be a whole number of tokens in 1..cfg.seq_len={cfg.seq_len}, got {t!r}")
    if not 0 < t <= cfg.seq_len:
        raise ValueError(f"seq must be in 1..cfg.seq_len={cfg.seq_len}, got {t}")
    return t


def attention_flops_per_token(cfg: GPTConfig, seq: int | None = None, causal: bool = False) -> int:
    """Training (fwd+bwd) attention FLOPs per token: 12·L·H·Q·T, halved if causal (Lab 02)."""
    t = _seq(cfg, seq)
    full = 12 * cfg.n_layer * cfg.n_head * cfg.head_dim * t  # H·Q = d_model
    return full // 2 if causal else full


def flops_per_token(cfg: GPTConfig, seq: int | None = None, variant: str | Variant = "palm") -> int:
    """Training FLOPs per token, 6·N + 12·L·H·Q·T under the named variant (Lab 02)."""
    v = get_variant(variant)
    return 6 * param_count(cfg, v.params) + attention_flops_per_token(cfg, seq, v.causal)


def flops_per_step(cfg: GPTConfig, batch: int, seq: int | None = None,
                   variant: str | Variant = "palm") -> int:
    """Training FLOPs of one step on a (batch, seq) token batch (Lab 02)."""
    batch = check_count(batch, "batch", 1)  # sequences per step: 2.5 or "8" is a mistake, not a count
    t = _seq(cfg, seq)
    return batch * t * flops_per_token(cfg, t, variant)


def hardware_flops_per_token(cfg: GPTConfig, seq: int | None = None, variant: str | Variant = "palm",
                             recompute: float = 0.0) -> int:
    """FLOPs the chip really does per token when ``recompute`` of the forward is redone: HFU's numerator (Lab 02).

    Full rematerialization (recompute=1) runs the forward twice: (6+2)·N + (12+4)·LHQT.
    """
    recompute = check_real(recompute, "recompute (the recomputed fraction of the forward)", 0.0, 1.0, "both",
                           "; 0 = none, 1 = full rematerialization")
    model = flops_per_token(cfg, seq, variant)
    return model + round(recompute * (model // 3))  # forward = 1/3 of fwd + bwd (exact: both terms are 3k)


# --------------------------------------------------------------------------------------
# Hand count: every matmul of the forward pass, with its shape
# --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MatmulCount:
    """One matmul of the forward pass of one sequence: ``count`` × (m, k) @ (k, n) (Lab 02)."""

    name: str
    count: int  # how many times per sequence (layers × heads)
    m: int
    k: int
    n: int
    scale: float = 1.0  # fraction counted (0.5: causal variants skip the masked half)

    @property
    def flops(self) -> int:
        """2·m·k·n FLOPs per matmul (multiply + add) × count × scale (Lab 02)."""
        return round(2 * self.m * self.k * self.n * self.count * self.scale)


def hand_count(cfg: GPTConfig, seq: int | None = None, variant: str | Variant = "matmul") -> list[MatmulCount]:
    """Every matmul of one sequence's forward pass, adjusted as ``variant`` counts (Lab 02)."""
    v = get_variant(variant)
    t, d, f, L, H, Q, V = _seq(cfg, seq), cfg.d_model, cfg.d_ff, cfg.n_layer, cfg.n_head, cfg.head_dim, cfg.vocab_size
    att = 0.5 if v.causal else 1.0
    rows = [
        MatmulCount("qkv projection  x·W_qkv", L, t, d, 3 * d),  # (T, d) @ (d, 3d)
        MatmulCount("attention scores  q·kᵀ", L * H, t, Q, t, att),  # per head (T, Q) @ (Q, T)
        MatmulCount("attention output  p·v", L * H, t, t, Q, att),  # per head (T, T) @ (T, Q)
        MatmulCount("out projection  y·W_o", L, t, d, d),  # (T, d) @ (d, d)
        MatmulCount("MLP up  x·W_fc", L, t, d, f),  # (T, d) @ (d, d_ff)
        MatmulCount("MLP down  h·W_proj", L, t, f, d),  # (T, d_ff) @ (d_ff, d)
    ]
    if v.params != "non_embedding":  # the tied head is a matmul by wte, an embedding weight
        rows.append(MatmulCount("tied head  x·wteᵀ", 1, t, d, V))  # (T, d) @ (d, V)
    # 6N also charges parameters that never multiply: LayerNorms (and wpe when embeddings are in N).
    ln = 4 * L * d + 2 * d  # (ln1, ln2) scale + bias per layer, + ln_f
    if v.params == "all":
        rows.append(MatmulCount("(no matmul) wpe + LayerNorm params in N", 1, t, cfg.seq_len * d + ln, 1))
    elif v.params in ("non_embedding", "no_wpe"):
        rows.append(MatmulCount("(no matmul) LayerNorm params in N", 1, t, ln, 1))
    return rows


def hand_count_per_token(cfg: GPTConfig, seq: int | None = None, variant: str | Variant = "matmul") -> int:
    """Training FLOPs per token from the hand count: 3 × forward matmuls / T (Lab 02)."""
    t = _seq(cfg, seq)
    fwd = sum(r.flops for r in hand_count(cfg, t, variant))  # one sequence, forward
    assert (3 * fwd) % t == 0, "every row has m = T, so the per-token count is an integer"
    return 3 * fwd // t


# --------------------------------------------------------------------------------------
# Compiler counts
# --------------------------------------------------------------------------------------


def cost_dict(cost: Any) -> dict[str, float]:
    """``cost_analysis()`` as a dict: JAX returns a dict, older versions [dict] or None (Lab 02)."""
    if cost is None:
        return {}
    if isinstance(cost, (list, tuple)):  # jax < 0.4.30: one dict per executable in a list
        return dict(cost[0]) if cost else {}
    return dict(cost)


_DEF = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*\w+\[([\d,]*)\]")
_DOT = re.compile(r"=\s*\w+\[([\d,]*)\][^ ]*\s+dot\(%?([\w.\-]+),.*?lhs_contracting_dims=\{([\d,]*)\}")


def hlo_dot_flops(hlo_text: str) -> int:
    """Sum of 2·(output elements)·(contracted size) over every ``dot`` in HLO text (Lab 02)."""
    shapes: dict[str, list[int]] = {}
    total = 0
    for line in hlo_text.splitlines():
        m = _DEF.match(line)
        if m:
            shapes[m.group(1)] = [int(s) for s in m.group(2).split(",") if s]
        d = _DOT.search(line)
        if d:
            out = [int(s) for s in d.group(1).split(",") if s]
            lhs = shapes[d.group(2)]
            contracted = 1
            for i in (int(s) for s in d.group(3).split(",") if s):
                contracted *= lhs[i]
            n_out = 1
            for s in out:
                n_out *= s
            total += 2 * n_out * contracted
    return total


_CUSTOM_CALL = re.compile(r'custom_call_target="([^"]+)"')


@dataclass(frozen=True)
class XlaCount:
    """XLA's view of a jitted program's FLOPs (Lab 02)."""

    flops_per_device: float  # compiled cost_analysis()["flops"]: all ops, ONE device's share
    n_devices: int  # devices the program is partitioned over
    matmul_flops: int  # dots of the un-partitioned HLO: the whole program, matmuls only
    flops_program: float = float("nan")  # Lowered.cost_analysis(): whole program, all ops, pre-optimisation
    library_calls: tuple[str, ...] = ()  # custom-call targets of the compiled program (cuBLAS, cuDNN, ...)

    @property
    def flops_total(self) -> float:
        """Per-device count × devices: exact for evenly split (data-parallel) work (Lab 02)."""
        return self.flops_per_device * self.n_devices

    @property
    def matmul_flop_share(self) -> float | None:
        """Matmul FLOPs over all-op FLOPs before optimisation; None where this JAX cannot count all ops (Lab 02)."""
        if not (math.isfinite(self.flops_program) and self.flops_program > 0):
            return None  # program_flops said "unknown" (no backend count, no CPU fallback): no share to judge
        return self.matmul_flops / self.flops_program


def program_flops(lowered: Any) -> float | None:
    """All-op FLOPs of a ``jax.jit(f).lower(...)`` program before XLA optimises it (Lab 02, Lab 06).

    Backend-independent: dots are still dots here, so a GPU's cuBLAS calls are counted. Whole
    program (not per device). None where this JAX cannot say.
    """
    try:
        flops = cost_dict(lowered.cost_analysis()).get("flops")
    except (NotImplementedError, AttributeError):  # some PJRT plugins (CUDA, TPU) raise
        flops = None
    if flops is None:  # jax 0.11's CUDA plugin returns None (or {}) instead: same fallback
        flops = _cpu_cost_flops(lowered)
    return None if flops is None else float(flops)


def _cpu_cost_flops(lowered: Any) -> float | None:
    """The analysis ``Lowered.cost_analysis`` runs, on the CPU client: it only reads the HLO."""
    try:
        import jax
        from jax._src.lib import _jax  # private; the function Lowered.cost_analysis itself calls

        module = lowered.compiler_ir("hlo").as_hlo_module()
        cost = _jax.hlo_module_cost_analysis(jax.devices("cpu")[0].client, module)
    except Exception:  # noqa: BLE001 -- a private API that moves between releases: say "unknown"
        return None
    return cost_dict(cost).get("flops")


def library_calls(hlo_text: str) -> tuple[str, ...]:
    """Sorted distinct custom-call targets (cuBLAS gemms, cuDNN attention, ...) in HLO text (Lab 02)."""
    return tuple(sorted(set(_CUSTOM_CALL.findall(hlo_text))))


def xla_count(lowered: Any) -> XlaCount:
    """Count a ``jax.jit(f).lower(...)`` program: compiled and pre-optimisation cost + HLO dots (Lab 02)."""
    import jax

    compiled = lowered.compile()
    try:
        flops = cost_dict(compiled.cost_analysis()).get("flops", float("nan"))
    except (NotImplementedError, AttributeError):  # a plugin without a compiled-cost analysis: unknown, not a crash
        flops = float("nan")
    shardings = [s for s in jax.tree.leaves(compiled.input_shardings) if hasattr(s, "device_set")]
    n_dev = max((len(s.device_set) for s in shardings), default=1)
    program = program_flops(lowered)
    return XlaCount(float(flops), n_dev, hlo_dot_flops(lowered.as_text(dialect="hlo")),
                    float("nan") if program is None else program,
                    library_calls(compiled.as_text() or ""))


@dataclass(frozen=True)
class TorchCount:
    """torch FlopCounterMode's count of a function, with the SDPA blind spot corrected (Lab 02)."""

    flops: int  # counted with SDPA forced onto its math path (bmm + softmax): attention included
    raw_flops: int  # default SDPA kernel: attention 0 on CPU; 7/6 of it on CUDA (backward recomputes q·kᵀ)
    by_op: dict[str, int] = field(default_factory=dict)  # corrected count per aten op

    @property
    def sdpa_missed(self) -> int:
        """FLOPs the default kernel path hid from the counter; negative where it counted extra (Lab 02)."""
        return self.flops - self.raw_flops


def torch_count(fn: Callable[[], Any]) -> TorchCount:
    """Run ``fn()`` twice under FlopCounterMode: default SDPA, then the math SDPA path (Lab 02).

    ``fn`` must be safe to run twice (e.g. forward + ``loss.backward()``; zero grads after).
    """
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode

    with FlopCounterMode(display=False) as raw:
        fn()
    # The math path expresses attention as bmm + softmax, which the counter has formulas for.
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as fixed:
        fn()
    by_op = {str(k): int(v) for k, v in fixed.get_flop_counts().get("Global", {}).items()}
    return TorchCount(int(fixed.get_total_flops()), int(raw.get_total_flops()), by_op)


def torch_step_count(cfg: GPTConfig, batch: int, seq: int | None = None, device: Any = "cpu") -> TorchCount:
    """FlopCounterMode count of forward + backward of TorchGPT on a (batch, seq) batch (Lab 02).

    ``device="meta"`` counts without computing anything (shapes only): use it for big models.
    """
    import torch

    from labkit.gpt.torch_model import TorchGPT, torch_loss

    t = _seq(cfg, seq)
    with torch.device(device):
        model = TorchGPT(cfg)
        x = torch.zeros((batch, t), dtype=torch.long)

    def fwd_bwd() -> None:
        torch_loss(model, x, x).backward()
        model.zero_grad(set_to_none=True)

    return torch_count(fwd_bwd)


def comparison(cfg: GPTConfig, batch: int, seq: int | None, xla: XlaCount | None = None,
               torch: TorchCount | None = None) -> list[dict[str, Any]]:
    """Rows (variant, analytic, XLA, torch, ratios) for one step: the analytic-vs-compiler table (Lab 02)."""
    rows = []
    for v in VARIANTS.values():
        a = flops_per_step(cfg, batch, seq, v)
        rows.append({
            "variant": v.name, "analytic FLOPs": a,
            "XLA matmul": xla.matmul_flops if xla else None,
            "XLA all ops": xla.flops_program if xla else None,
            "torch": torch.flops if torch else None,
            "XLA matmul / analytic": xla.matmul_flops / a if xla else None,
            "torch / analytic": torch.flops / a if torch else None,
            "convention": v.source,
        })
    return rows
