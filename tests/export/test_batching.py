"""labkit.export.batching: the bar batching must beat, by device, and where a decoder runs."""

from __future__ import annotations

import jax
import pytest
import torch

from labkit.export import batching


def test_gain_bar_by_hand() -> None:
    assert batching.gain_bar(32, cpu=False) == 8.0  # the H100 full profile: 32x the rows, tokens/s > 8x
    assert batching.gain_bar(8, cpu=False) == 2.0
    assert batching.gain_bar(4, cpu=False) == 1.5  # ratio / 4 = 1 would ask nothing: the floor holds
    assert batching.gain_bar(8, cpu=True) == batching.gain_bar(32, cpu=True) == 1.5


def test_gain_bar_fails_a_step_that_grows_as_fast_as_its_rows() -> None:
    # tokens/s gain = ratio / step growth: a step that grows with its rows gains 1x, under every bar
    for ratio in (2, 8, 32):
        for cpu in (True, False):
            assert not ratio / ratio > batching.gain_bar(ratio, cpu)
    # the CI run that failed the old CPU bar (ratio / 4 = 2x): 6505 -> 1.3e4 tokens/s clears 1.5x
    assert 13010 / 6505 > batching.gain_bar(8, cpu=True) and not 13010 / 6505 > 8 / 4


@pytest.mark.parametrize("ratio", [1, 1.5, 0, -8, float("nan"), True, "8", None])
def test_gain_bar_refuses_a_ratio_no_gain_can_beat(ratio) -> None:
    with pytest.raises(ValueError, match="ratio must be a number above 1.5"):
        batching.gain_bar(ratio, cpu=True)


class _Torch:
    def __init__(self, device: str) -> None:
        self.device = torch.device(device)


class _Jax:
    def __init__(self, flat: dict) -> None:
        self.flat = flat


def test_on_cpu_reads_torch_device_and_jax_weights() -> None:
    assert batching.on_cpu(_Torch("cpu"))
    assert not batching.on_cpu(_Torch("cuda"))  # a torch.device names CUDA without a GPU present
    assert not batching.on_cpu(_Torch("meta"))
    assert batching.on_cpu(_Jax({"w": jax.numpy.ones(2)}))  # this machine's JAX is the CPU


def test_on_cpu_reads_a_gpu_jax_array_by_its_platform() -> None:
    class Dev:
        platform = "gpu"

    class Arr:
        def devices(self) -> set:
            return {Dev()}

    assert not batching.on_cpu(_Jax({"w": Arr()}))


@pytest.mark.parametrize("bad", [object(), _Jax({}), _Jax(None)])
def test_on_cpu_refuses_what_is_not_a_decoder(bad) -> None:
    with pytest.raises(TypeError, match="neither .device"):
        batching.on_cpu(bad)
