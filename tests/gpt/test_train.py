"""labkit.gpt.train: both steps learn, agree with each other step by step, and generate deterministically (Lab 02)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
import torch

from labkit.gpt import data
from labkit.gpt.torch_model import TorchGPT
from labkit.gpt.convert import flat_params_numpy, load_flat_params, torch_to_flax
from labkit.gpt.config import get_config
from labkit.gpt.train import JaxTrainer, OptConfig, TorchTrainer, generate, warmup_lr

CFG = get_config("test")
OPT = OptConfig(lr=3e-3)
LOSS_TOL = 1e-4  # fp32, same weights and batches: JAX and torch losses agree to this (max abs, nats)


@pytest.fixture(scope="module")
def init() -> dict[str, np.ndarray]:
    torch.manual_seed(0)
    return flat_params_numpy(TorchGPT(CFG))


@pytest.fixture(scope="module")
def batches() -> list[tuple[np.ndarray, np.ndarray]]:
    stream = data.Batcher(data.synthetic_tokens(20_000), 8, CFG.seq_len, seed=0)
    return [next(stream) for _ in range(25)]


@pytest.fixture(scope="module")
def trained(init: dict, batches: list) -> dict[str, np.ndarray]:
    """Per-step losses of both frameworks from the same init on the same batches (fp32)."""
    jt = JaxTrainer(torch_to_flax(init, CFG), OPT)
    tt = TorchTrainer(load_flat_params(TorchGPT(CFG), init), OPT)
    lj = [float(jt.step(jnp.asarray(x), jnp.asarray(y))) for x, y in batches]
    lt = [float(tt.step(data.to_torch(x), data.to_torch(y))) for x, y in batches]
    return {"jax": np.array(lj), "torch": np.array(lt), "jt": jt,  # jt is reused (reset) by a later test
            "params_jax": flat_params_numpy(jt.model()), "params_torch": flat_params_numpy(tt.model)}


def test_both_frameworks_learn(trained: dict) -> None:
    for fw in ("jax", "torch"):
        losses = trained[fw]
        assert losses[0] == pytest.approx(np.log(256), abs=0.1)  # untrained: about a uniform guess
        assert losses[-3:].mean() < losses[:3].mean() - 0.5, f"{fw}: {losses}"


def test_jax_and_torch_agree_step_by_step(trained: dict) -> None:
    # Same weights (lossless converter), same batches, same AdamW + clipping: the same losses, and
    # the same weights after 25 optimizer steps.
    assert np.abs(trained["jax"] - trained["torch"]).max() < LOSS_TOL
    pj, pt = trained["params_jax"], trained["params_torch"]
    assert max(np.abs(pj[k] - pt[k]).max() for k in pj) < 1e-3


def test_warmup_lr_is_one_formula_for_both_frameworks() -> None:
    opt = OptConfig(lr=1e-3, warmup_steps=4)
    want = [2.5e-4, 5e-4, 7.5e-4, 1e-3, 1e-3, 1e-3]  # update 0 already moves the weights: lr / warmup_steps
    assert [warmup_lr(opt, i) for i in range(6)] == pytest.approx(want, rel=1e-12)  # torch's Python count
    assert [float(warmup_lr(opt, jnp.int32(i))) for i in range(6)] == pytest.approx(want, rel=1e-6)  # optax's count
    assert warmup_lr(OptConfig(lr=3e-3), 0) == 3e-3  # no warm-up: the constant lr
    for bad in (-1, 2.5, True, "10"):
        with pytest.raises(ValueError, match="warmup_steps must be an int >= 0"):
            OptConfig(warmup_steps=bad)  # type: ignore[arg-type]


def test_warmup_scales_the_first_update_in_both_frameworks(init: dict, batches: list) -> None:
    # AdamW's update is lr x (its direction + decay x weight): with a warm-up of W steps the first update is
    # exactly 1/W of the constant-lr one, in JAX and in torch; and both frameworks still agree step by step.
    x, y = batches[0]
    w = 4
    first = {}
    for warm in (0, w):
        opt = OptConfig(lr=3e-3, warmup_steps=warm)
        jt = JaxTrainer(torch_to_flax(init, CFG), opt)
        tt = TorchTrainer(load_flat_params(TorchGPT(CFG), init), opt)
        lj = [float(jt.step(jnp.asarray(a), jnp.asarray(b))) for a, b in batches[:6]]
        lt = [float(tt.step(data.to_torch(a), data.to_torch(b))) for a, b in batches[:6]]
        assert np.abs(np.array(lj) - np.array(lt)).max() < LOSS_TOL, (warm, lj, lt)
        one_j = JaxTrainer(torch_to_flax(init, CFG), opt)
        one_j.step(jnp.asarray(x), jnp.asarray(y))
        one_t = TorchTrainer(load_flat_params(TorchGPT(CFG), init), opt)
        one_t.step(data.to_torch(x), data.to_torch(y))
        first[warm] = {"jax": flat_params_numpy(one_j.model()), "torch": flat_params_numpy(one_t.model)}
    for fw in ("jax", "torch"):
        for k, p0 in init.items():
            np.testing.assert_allclose(first[w][fw][k] - p0, (first[0][fw][k] - p0) / w, rtol=2e-3, atol=1e-8,
                                       err_msg=f"{fw} {k}")


def test_bf16_steps_run_close_to_fp32(init: dict, batches: list) -> None:
    x, y = batches[0]
    lj = float(JaxTrainer(torch_to_flax(init, CFG), OPT, dtype="bf16").step(jnp.asarray(x), jnp.asarray(y)))
    lt = float(TorchTrainer(load_flat_params(TorchGPT(CFG), init), OPT, dtype="bf16").step(
        data.to_torch(x), data.to_torch(y)))
    assert lj == pytest.approx(np.log(256), abs=0.1) and lt == pytest.approx(lj, abs=0.02)


def test_reset_restarts_without_recompiling_or_touching_the_model(init: dict, batches: list, trained: dict) -> None:
    model = torch_to_flax(init, CFG)
    jt = trained["jt"]  # already trained 25 steps
    x, y = (jnp.asarray(a) for a in batches[0])
    jt.reset(model)
    assert float(jt.step(x, y)) == trained["jax"][0]  # back at the initial weights and a fresh AdamW
    jt.step(x, y)
    jt.reset(model)  # donated buffers were copies: `model` is still intact
    assert float(jt.step(x, y)) == trained["jax"][0]
    assert jt.step_fn._cache_size() == 1  # same shapes, same program: no recompile
    with pytest.raises(ValueError, match="reset needs a model"):
        jt.reset(torch_to_flax(flat_params_numpy(TorchGPT(get_config("test", n_layer=1))), get_config("test", n_layer=1)))


def test_lowered_step_is_the_jitted_step(init: dict) -> None:
    jt = JaxTrainer(torch_to_flax(init, CFG), OPT)
    x = jnp.zeros((2, CFG.seq_len), jnp.int32)
    assert "dot(" in jt.lower(x, x).as_text(dialect="hlo")


@pytest.mark.parametrize("dtype", ["fp32", "bf16"])
def test_the_rematerialized_step_does_one_more_forward(init: dict, dtype: str) -> None:
    """XLA's own dots of the step under jax.checkpoint are HFU's numerator: 8N + 16LHQT, 4/3 of the plain step."""
    from labkit.measure import flops

    jt = JaxTrainer(torch_to_flax(init, CFG), OPT, dtype=dtype)
    x = jnp.zeros((2, CFG.seq_len), jnp.int32)
    plain, remat = (flops.hlo_dot_flops(jt.lower(x, x, xla_attention=True, remat=r).as_text(dialect="hlo"))
                    for r in (False, True))
    tokens = 2 * CFG.seq_len
    assert plain == flops.flops_per_token(CFG, CFG.seq_len, "matmul") * tokens
    assert remat == flops.hardware_flops_per_token(CFG, CFG.seq_len, "matmul", recompute=1.0) * tokens
    assert 3 * remat == 4 * plain


def test_bad_dtype_is_refused(init: dict) -> None:
    with pytest.raises(ValueError, match="dtype must be one of"):
        JaxTrainer(torch_to_flax(init, CFG), dtype="fp16")
    with pytest.raises(ValueError, match="dtype must be one of"):
        TorchTrainer(TorchGPT(CFG), dtype="int8")


def test_generate_shape_and_determinism(init: dict) -> None:
    tm = load_flat_params(TorchGPT(CFG), init)
    fm = torch_to_flax(init, CFG)
    prompt = np.array([[1, 2, 3], [4, 5, 6]])
    g = generate(tm, prompt, 10)
    assert g.shape == (2, 13) and (g[:, :3] == prompt).all() and g.dtype == np.int32
    assert (generate(tm, prompt, 10) == g).all()  # greedy: deterministic
    assert (generate(fm, prompt, 10) == g).all()  # same weights in JAX: same greedy tokens
    s1, s2 = generate(fm, prompt, 10, temperature=1.0, seed=7), generate(fm, prompt, 10, temperature=1.0, seed=7)
    assert (s1 == s2).all() and s1.shape == (2, 13)
    long = generate(tm, np.arange(CFG.seq_len + 5)[None] % 256, 3)  # longer than the context: cropped
    assert long.shape == (1, CFG.seq_len + 8)
    with pytest.raises(ValueError, match="temperature"):
        generate(tm, prompt, 1, temperature=-1.0)
    with pytest.raises(ValueError, match="at least one token"):
        generate(tm, np.zeros((1, 0), np.int32), 1)



def test_torch_optimizer_is_fused_on_cuda_only(monkeypatch: pytest.MonkeyPatch) -> None:
    # On CUDA TorchTrainer asks for torch's fused AdamW (one kernel for all parameters, as nanoGPT does);
    # elsewhere the default. Parameters stand in for CUDA ones here: this machine has no GPU.
    from types import SimpleNamespace

    from labkit.gpt.train import OptConfig, torch_optimizer

    seen = []
    monkeypatch.setattr(torch.optim, "AdamW", lambda groups, **kw: seen.append((groups, kw)) or "adamw")

    def model_on(kind: str) -> SimpleNamespace:
        ps = [SimpleNamespace(device=torch.device(kind), requires_grad=True, dim=lambda d=d: d) for d in (2, 1, 2)]
        return SimpleNamespace(parameters=lambda: iter(ps))

    opt = OptConfig()
    assert torch_optimizer(model_on("cuda"), opt) == torch_optimizer(model_on("cpu"), opt) == "adamw"
    (cuda_groups, cuda_kw), (_, cpu_kw) = seen
    assert cuda_kw.get("fused") is True and "fused" not in cpu_kw
    assert [len(g["params"]) for g in cuda_groups] == [2, 1]  # decay on the two 2-D weights, none on the 1-D
    assert [g["weight_decay"] for g in cuda_groups] == [opt.weight_decay, 0.0]
