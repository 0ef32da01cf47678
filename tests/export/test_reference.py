"""labkit.export.reference: the shipped reference checks a runtime, fails on a perturbed model; bf16 judged (Lab 05)."""

from __future__ import annotations

import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from labkit.export import reference as R, weights
from labkit.gpt.torch_model import TorchGPT


@pytest.fixture(scope="module")
def ref() -> R.Reference:
    return R.load_reference()


def _run(ref: R.Reference, model: torch.nn.Module) -> tuple[np.ndarray, np.ndarray]:
    with torch.no_grad():
        fn = lambda t: model(torch.from_numpy(t).long()).float().numpy()  # noqa: E731
        return fn(ref.tokens), R.greedy_tokens(fn, ref.tokens[:, :ref.prompt_len], ref.greedy.shape[1])


def _model(ref: R.Reference) -> torch.nn.Module:
    return weights.load_weights(ref.weights, TorchGPT(R.config_of(ref))).eval()


def test_shipped_reference_is_checksummed(ref: R.Reference, tmp_path: Path) -> None:
    assert ref.tokens.shape[0] == ref.logits.shape[0] == ref.greedy.shape[0] == ref.margin.shape[0]
    d = Path(shutil.copytree(ref.weights.parent, tmp_path / "ref"))
    raw = bytearray((d / "reference.npz").read_bytes())
    raw[100] ^= 1
    (d / "reference.npz").write_bytes(raw)
    with pytest.raises(R.ReferenceError, match="ref/reference.npz: sha256"):
        R.load_reference(d)


def test_cpu_torch_matches_and_a_perturbed_model_does_not(ref: R.Reference) -> None:
    result = R.check(ref, *_run(ref, _model(ref)), tol=1e-4)
    assert result.ok and result.max_abs_logit_diff < 1e-4, result
    bad = _model(ref)
    with torch.no_grad():
        bad.blocks[0].mlp.fc.weight[3, 4] += 0.05  # one weight, a small nudge
    result = R.check(ref, *_run(ref, bad), tol=1e-3)
    assert not result.ok and result.max_abs_logit_diff > 1e-3 and "DIFFERS FROM" in str(result)


def test_greedy_mismatch_fails_except_at_near_ties(ref: R.Reference) -> None:
    logits, greedy = ref.logits.copy(), ref.greedy.copy()
    greedy[0, 0] = (greedy[0, 0] + 1) % 256
    clear = ref.margin[0, 0] >= 2e-4
    assert R.check(ref, logits, greedy, tol=1e-4).ok is (not clear)
    wide = R.check(ref, logits, greedy, tol=float(ref.margin.max()))  # everything a near-tie
    assert wide.ok and wide.near_ties == ref.margin.size
    with pytest.raises(ValueError, match="shapes"):
        R.check(ref, logits[:1], greedy, tol=1e-4)


def test_bf16_judged_by_top1_and_kl(ref: R.Reference) -> None:
    low = _model(ref).to(torch.bfloat16)
    verdict = R.judge_low_precision(ref.logits, _run(ref, low)[0])
    assert verdict["ok"] and verdict["top1_agreement"] >= R.BF16_TOP1_MIN and verdict["kl_nats"] <= R.BF16_KL_MAX
    crude = _model(ref)
    with torch.no_grad():
        for p in crude.parameters():
            p.copy_((p * 8).round() / 8)  # weights on a 1/8 grid: a broken quantization
    assert not R.judge_low_precision(ref.logits, _run(ref, crude)[0])["ok"]


def test_metrics_against_hand_values() -> None:
    p = np.log(np.array([[0.5, 0.5], [0.9, 0.1]]))
    q = np.log(np.array([[0.9, 0.1], [0.9, 0.1]]))
    kl0 = 0.5 * np.log(0.5 / 0.9) + 0.5 * np.log(0.5 / 0.1)  # KL(p||q) at position 0; position 1 is 0
    assert R.kl_divergence(p, q) == pytest.approx(kl0 / 2)
    assert R.kl_divergence(p, p) == pytest.approx(0.0, abs=1e-12)
    assert R.top1_agreement(np.array([[0, 1.0], [1.0, 0]]), np.array([[0, 1.0], [0, 1.0]])) == 0.5
    assert R.top2_margin(np.array([1.0, 3.0, 2.5])) == pytest.approx(0.5)
