"""labkit.measure.flops: closed forms == hand count per variant; compiler counts == analytic on the matmuls (Lab 02)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from labkit.measure import flops
from labkit.gpt.config import GPTConfig, get_config, n_params
from labkit.gpt.train import JaxTrainer

from tests.conftest import run_python

CFG = get_config("test")  # 2 layers, 2 heads, d_model 32, vocab 256, 32 positions
B, T = 2, CFG.seq_len


@st.composite
def configs(draw: st.DrawFn) -> tuple[GPTConfig, int]:
    heads = draw(st.integers(1, 8))
    cfg = GPTConfig(vocab_size=draw(st.integers(2, 5000)), seq_len=draw(st.integers(1, 512)),
                    n_layer=draw(st.integers(1, 12)), n_head=heads, d_model=heads * draw(st.integers(1, 64)),
                    d_ff=draw(st.integers(1, 1024)))
    return cfg, draw(st.integers(1, cfg.seq_len))


@pytest.mark.parametrize("variant", list(flops.VARIANTS))
@pytest.mark.parametrize("seq", [1, 7, T])
def test_closed_form_equals_hand_count(variant: str, seq: int) -> None:
    assert flops.flops_per_token(CFG, seq, variant) == flops.hand_count_per_token(CFG, seq, variant)


@settings(max_examples=60, deadline=None)
@given(configs())
def test_closed_form_equals_hand_count_random_configs(case: tuple[GPTConfig, int]) -> None:
    cfg, seq = case
    for v in flops.VARIANTS:
        assert flops.flops_per_token(cfg, seq, v) == flops.hand_count_per_token(cfg, seq, v)


def test_variants_are_the_published_formulas() -> None:
    L, H, Q, d, V = CFG.n_layer, CFG.n_head, CFG.head_dim, CFG.d_model, CFG.vocab_size
    att = 12 * L * H * Q * T
    assert flops.flops_per_token(CFG, T, "palm") == 6 * n_params(CFG) + att  # PaLM App. B, N = all params
    assert flops.flops_per_token(CFG, T, "no_embed") == 6 * n_params(CFG, embeddings=False) + att  # torchtitan
    matmul = flops.flops_per_token(CFG, T, "matmul")
    assert flops.flops_per_token(CFG, T, "causal") == matmul - att // 2  # MaxText halves attention
    # The tied head's 2·d·V per token forward is in the 6N only when the embedding is counted.
    ln = 4 * L * d + 2 * d
    assert matmul - flops.flops_per_token(CFG, T, "no_embed") == 6 * (V * d - ln)
    assert flops.flops_per_step(CFG, B, T, "palm") == B * T * flops.flops_per_token(CFG, T, "palm")
    # nanoGPT's N leaves out wpe only (the tied wte is also the head): 6·wpe below palm, per token.
    assert flops.flops_per_token(CFG, T, "palm") - flops.flops_per_token(CFG, T, "nanogpt") == 6 * CFG.seq_len * d


def test_nanogpt_variant_is_get_num_params_of_the_real_module() -> None:
    """nanoGPT's estimate_mfu: N = get_num_params() = every parameter tensor minus wpe (model.py)."""
    from labkit.gpt.torch_model import TorchGPT

    model = TorchGPT(CFG)
    get_num_params = sum(p.numel() for p in model.parameters()) - model.wpe.weight.numel()
    L, H, Q = CFG.n_layer, CFG.n_head, CFG.head_dim
    assert flops.param_count(CFG, "no_wpe") == get_num_params
    assert flops.flops_per_token(CFG, T, "nanogpt") == 6 * get_num_params + 12 * L * H * Q * T
    assert sum(p.numel() for p in model.parameters()) == flops.param_count(CFG, "all")  # palm: every tensor
    assert "nanoGPT" not in flops.VARIANTS["palm"].source  # each convention under its own name


def test_hand_count_rows_are_the_forward_matmuls() -> None:
    rows = flops.hand_count(CFG, T, "matmul")
    assert len(rows) == 7 and all(r.flops == 2 * r.m * r.k * r.n * r.count for r in rows)
    assert not any("head" in r.name for r in flops.hand_count(CFG, T, "no_embed") if "(no matmul)" not in r.name)


def test_hardware_flops_full_remat_is_four_thirds() -> None:
    model = flops.flops_per_token(CFG, T, "palm")
    assert flops.hardware_flops_per_token(CFG, T, "palm", recompute=0.0) == model
    assert 3 * flops.hardware_flops_per_token(CFG, T, "palm", recompute=1.0) == 4 * model  # 8N + 16LHQT
    with pytest.raises(ValueError, match="recompute"):
        flops.hardware_flops_per_token(CFG, T, recompute=1.5)


def test_bad_input_is_refused_clearly() -> None:
    with pytest.raises(ValueError, match="unknown FLOPs variant 'kaplan'.*palm, nanogpt, no_embed, causal, matmul"):
        flops.flops_per_token(CFG, T, "kaplan")
    with pytest.raises(ValueError, match="seq must be in 1..cfg.seq_len=32"):
        flops.flops_per_token(CFG, 33)
    with pytest.raises(ValueError, match="batch must be >= 1, got 0"):
        flops.flops_per_step(CFG, 0, T)
    with pytest.raises(TypeError, match=r"batch must be a whole number >= 1, got 2.5 \(float\)"):
        flops.flops_per_step(CFG, 2.5, T)  # it returned a float FLOP count
    with pytest.raises(TypeError, match=r"recompute .* must be a finite number in \[0, 1\], got '1' \(str\)"):
        flops.hardware_flops_per_token(CFG, T, recompute="1")
    with pytest.raises(ValueError, match="params rule"):
        flops.param_count(CFG, "some")


def test_cost_dict_handles_every_return_shape() -> None:
    assert flops.cost_dict({"flops": 3.0}) == {"flops": 3.0}
    assert flops.cost_dict([{"flops": 3.0}]) == {"flops": 3.0}  # jax < 0.4.30 returned a list
    assert flops.cost_dict(None) == {} and flops.cost_dict([]) == {}


def test_hlo_dot_flops_counts_plain_and_batched_dots() -> None:
    a, b = jnp.ones((3, 5, 7)), jnp.ones((3, 7, 11))
    lowered = jax.jit(lambda a, b, c: (jnp.einsum("bik,bkj->bij", a, b), c @ c)).lower(a, b, jnp.ones((4, 4)))
    assert flops.hlo_dot_flops(lowered.as_text(dialect="hlo")) == 2 * 3 * 5 * 7 * 11 + 2 * 4 * 4 * 4
    text = "  x.1 = bf16[8,16]{1,0} parameter(0)\n  w.2 = bf16[16,4]{1,0} parameter(1)\n" \
           "  ROOT dot.3 = bf16[8,4]{1,0} dot(x.1, w.2), lhs_contracting_dims={1}, rhs_contracting_dims={0}"
    assert flops.hlo_dot_flops(text) == 2 * 8 * 16 * 4


@pytest.fixture(scope="module")
def xla() -> flops.XlaCount:
    from labkit.gpt.torch_model import TorchGPT
    from labkit.gpt.convert import torch_to_flax

    trainer = JaxTrainer(torch_to_flax(TorchGPT(CFG).state_dict(), CFG))
    x = jnp.zeros((B, T), jnp.int32)
    return flops.xla_count(trainer.lower(x, x))


def test_xla_matmul_count_equals_analytic(xla: flops.XlaCount) -> None:
    analytic = flops.flops_per_step(CFG, B, T, "matmul")
    assert abs(xla.matmul_flops / analytic - 1) < flops.MATMUL_RTOL
    assert xla.matmul_flops == analytic  # in practice exact: the HLO holds exactly the hand-counted dots
    # cost_analysis counts every op (LayerNorm, GELU, softmax, AdamW) on top of the matmuls; for this
    # tiny model (d_model 32) those add about 15%, less as d_model grows.
    assert xla.n_devices == 1 and analytic <= xla.flops_total <= 1.3 * analytic
    # Before optimisation the same ops are counted (every backend: dots are still dots); CPU keeps
    # its dots, so both counts agree here and the compiled program calls no matmul library.
    assert analytic <= xla.flops_program <= 1.3 * analytic
    assert abs(xla.flops_program / xla.flops_total - 1) < 0.05
    assert not any("gemm" in c or "matmul" in c for c in xla.library_calls), xla.library_calls


def test_program_flops_counts_the_matmul_and_the_elementwise_work() -> None:
    a, w = jnp.ones((64, 128)), jnp.ones((128, 256))
    lowered = jax.jit(lambda a, w: jax.nn.relu(a @ w)).lower(a, w)
    counted = flops.program_flops(lowered)
    assert counted is not None and counted >= 2 * 64 * 128 * 256  # the dot, plus one max per output
    assert counted <= 2 * 64 * 128 * 256 + 4 * 64 * 256


def test_library_calls_are_read_from_hlo_text() -> None:
    hlo = ('%c = f32[8,8] custom-call(%a, %b), custom_call_target="__cublas$gemm"\n'
           '%d = f32[8,8] custom-call(%c), custom_call_target="__cudnn$fmhaSoftmax"\n'
           '%e = f32[8,8] custom-call(%c, %b), custom_call_target="__cublas$gemm"')
    assert flops.library_calls(hlo) == ("__cublas$gemm", "__cudnn$fmhaSoftmax")
    assert flops.library_calls("%x = f32[2] add(%a, %b)") == ()


def test_torch_count_and_the_sdpa_blind_spot() -> None:
    cpu = flops.torch_step_count(CFG, B, T, device="cpu")
    analytic = flops.flops_per_step(CFG, B, T, "matmul")
    attention = B * T * flops.attention_flops_per_token(CFG, T)
    assert cpu.flops == analytic  # SDPA on its math path: bmm + softmax, counted
    assert cpu.raw_flops == analytic - attention == cpu.flops - cpu.sdpa_missed  # CPU flash kernel: 0 FLOPs
    assert set(cpu.by_op) == {"aten.mm", "aten.bmm"}
    meta = flops.torch_step_count(CFG, B, T, device="meta")  # shapes only: no compute, no blind spot
    assert meta.flops == meta.raw_flops == analytic


def test_comparison_table(xla: flops.XlaCount) -> None:
    tc = flops.torch_step_count(CFG, B, T, device="meta")
    rows = {r["variant"]: r for r in flops.comparison(CFG, B, T, xla, tc)}
    assert list(rows) == list(flops.VARIANTS)
    assert rows["matmul"]["XLA matmul / analytic"] == rows["matmul"]["torch / analytic"] == 1.0
    assert rows["causal"]["XLA matmul / analytic"] > 1 > rows["palm"]["XLA matmul / analytic"]


def test_cost_analysis_is_per_device_on_a_sharded_program() -> None:
    code = """
import jax, numpy as np
jax.config.update("jax_num_cpu_devices", 2)
from jax.sharding import NamedSharding, PartitionSpec as P
from labkit.measure import flops
mesh = jax.make_mesh((2,), ("data",), axis_types=(jax.sharding.AxisType.Auto,))
a = jax.device_put(np.ones((64, 32), np.float32), NamedSharding(mesh, P("data")))
w = jax.device_put(np.ones((32, 16), np.float32), NamedSharding(mesh, P()))
c = flops.xla_count(jax.jit(lambda a, w: a @ w).lower(a, w))
print(c.flops_per_device, c.n_devices, c.matmul_flops, c.flops_total)
"""
    out = run_python(code, timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    per_device, n, matmul, total = out.stdout.split()
    whole = 2 * 64 * 32 * 16
    assert float(per_device) == whole / 2 and int(n) == 2  # each device does half the rows
    assert int(matmul) == whole and float(total) == whole  # HLO dots are pre-partition: the whole program


def _plugin_lowered(lowered: object, answer: object) -> object:
    """A Lowered as a GPU/TPU runtime shows it to program_flops: cost_analysis raises or returns ``answer``."""

    class PluginLowered:
        def cost_analysis(self) -> object:
            if isinstance(answer, Exception):
                raise answer
            return answer

        def compiler_ir(self, dialect: str) -> object:
            return lowered.compiler_ir(dialect)

    return PluginLowered()


@pytest.mark.parametrize("answer", [
    NotImplementedError("Lowered.cost_analysis not implemented on platform 'cuda'"),  # jax 0.10 plugins
    None,  # jax 0.11.2's CUDA plugin (seen on an H100): returns None, raises nothing
    {},  # a plugin that analyses nothing
    [],  # the list shape of old JAX, empty
    [{}],  # ... holding an empty dict
], ids=["raises", "returns-None", "empty-dict", "empty-list", "list-of-empty-dict"])
def test_program_flops_falls_back_to_the_cpu_client_where_the_backend_cannot_say(answer: object) -> None:
    """Whatever shape the backend's 'I cannot say' takes, the same count comes from the CPU client."""
    lowered = jax.jit(lambda a, w: jax.nn.gelu(a @ w)).lower(jnp.ones((64, 128)), jnp.ones((128, 256)))
    assert flops.program_flops(_plugin_lowered(lowered, answer)) == flops.program_flops(lowered) >= 2 * 64 * 128 * 256


def test_program_flops_trusts_a_backend_that_answers() -> None:
    lowered = jax.jit(lambda a, w: a @ w).lower(jnp.ones((8, 8)), jnp.ones((8, 8)))
    assert flops.program_flops(_plugin_lowered(lowered, {"flops": 123.0})) == 123.0  # no fallback taken
    assert flops.program_flops(_plugin_lowered(lowered, [{"flops": 7.0}])) == 7.0


def test_program_flops_is_none_when_the_private_cpu_analysis_is_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    """The CPU fallback uses jax._src.lib._jax.hlo_module_cost_analysis (private): if a release drops it, say unknown."""
    from jax._src.lib import _jax

    lowered = jax.jit(lambda a, w: a @ w).lower(jnp.ones((8, 8)), jnp.ones((8, 8)))
    monkeypatch.delattr(_jax, "hlo_module_cost_analysis")
    assert flops.program_flops(_plugin_lowered(lowered, None)) is None  # "unknown", not a crash

def test_matmul_flop_share_is_none_where_all_ops_are_unknown() -> None:
    known = flops.XlaCount(flops_per_device=130.0, n_devices=1, matmul_flops=100, flops_program=125.0)
    assert known.matmul_flop_share == 100 / 125
    for unknown in (float("nan"), 0.0):  # program_flops said None (stored NaN), or a count of nothing
        assert flops.XlaCount(130.0, 1, 100, unknown).matmul_flop_share is None
    assert flops.XlaCount(130.0, 1, 100).matmul_flop_share is None  # the default: not counted


def _plugin_compiled(lowered: object, compiled_answer: object, program_answer: object) -> object:
    """A Lowered whose compiled program's cost_analysis raises or returns ``compiled_answer`` (a plugin's)."""
    outer = _plugin_lowered(lowered, program_answer)
    real = lowered.compile()

    class PluginCompiled:
        input_shardings = real.input_shardings

        def cost_analysis(self) -> object:
            if isinstance(compiled_answer, Exception):
                raise compiled_answer
            return compiled_answer

        def as_text(self) -> str:
            return real.as_text()

    outer.compile = lambda: PluginCompiled()  # type: ignore[attr-defined]
    outer.as_text = lowered.as_text  # type: ignore[attr-defined]
    return outer


@pytest.mark.parametrize("compiled_answer", [NotImplementedError("not on 'cuda'"), None, {}],
                         ids=["raises", "returns-None", "empty-dict"])
def test_xla_count_says_unknown_where_the_compiled_count_is_missing(compiled_answer: object) -> None:
    lowered = jax.jit(lambda a, w: a @ w).lower(jnp.ones((8, 16)), jnp.ones((16, 4)))
    c = flops.xla_count(_plugin_compiled(lowered, compiled_answer, None))  # program count: the CPU fallback
    assert math.isnan(c.flops_per_device) and c.matmul_flops == 2 * 8 * 16 * 4
    assert c.flops_program == 2 * 8 * 16 * 4 and c.matmul_flop_share == 1.0  # the pre-optimisation count still answers


def test_xla_count_without_any_all_op_count_gives_no_share(monkeypatch: pytest.MonkeyPatch) -> None:
    """Lab 02 skips its all-op checks (and says so) on a JAX where neither count exists: NaN, then None."""
    from jax._src.lib import _jax

    lowered = jax.jit(lambda a, w: a @ w).lower(jnp.ones((8, 16)), jnp.ones((16, 4)))
    monkeypatch.delattr(_jax, "hlo_module_cost_analysis")
    c = flops.xla_count(_plugin_compiled(lowered, None, None))
    assert math.isnan(c.flops_program) and c.matmul_flop_share is None and c.matmul_flops == 2 * 8 * 16 * 4


def test_seq_as_text_is_refused_by_name() -> None:
    from labkit.gpt.config import get_config

    with pytest.raises(TypeError, match=r"seq must be a whole number of tokens in 1..cfg.seq_len=\d+, got '64'"):
        flops.flops_per_token(get_config("smoke"), "64")
