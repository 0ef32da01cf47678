"""labkit.precision.fp8_train (Lab 04): each fp8 recipe trains the MLP as well as fp32, up to the seed noise floor."""
from __future__ import annotations

import numpy as np
import pytest

from labkit.precision import fp8_train, noise, recipes

CFG = fp8_train.MLPConfig(steps=120)


@pytest.fixture(scope="module")
def fp32() -> tuple[list[float], list[float]]:
    return fp8_train.train_mlp(None, CFG), fp8_train.train_mlp(None, CFG, seed=1)


def test_fp32_learns_and_is_reproducible(fp32: tuple) -> None:
    ref, other = fp32
    assert ref[-1] < ref[0] / 5 and other[-1] < other[0] / 5
    assert fp8_train.train_mlp(None, CFG) == ref and ref != other


@pytest.mark.parametrize("recipe", recipes.RECIPES)
def test_each_recipe_trains_within_the_noise_floor(fp32: tuple, recipe: str) -> None:
    ref, other = fp32
    losses = fp8_train.train_mlp(recipe, CFG)
    j = noise.judge(losses, ref, other, start=20)
    assert j.within_noise, j.sentence(recipe)
    assert losses != ref  # the casts did change something
    assert np.all(np.isfinite(losses))
