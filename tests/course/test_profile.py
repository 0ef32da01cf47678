"""labkit.course.profile: "auto" picks the sizes a chip fits, from injected runtimes, and says why."""

from __future__ import annotations

import pytest

from labkit.course import profile
from labkit.runtime import emulate
from labkit.runtime.device import Runtime


def _rt(platform: str, chip: str, memory: int | None) -> Runtime:
    return Runtime(platform=platform, chip=chip, device_count=1, memory_bytes=memory, bf16=True, simulated=False,
                   host="colab", torch_device="cuda", cpu_devices=8)


def test_profile_for_chips() -> None:
    assert profile.profile_for(_rt("cpu", "AMD EPYC", 24 * 2**30))[0] == "smoke"
    full, why = profile.profile_for(_rt("gpu", "NVIDIA H100 80GB HBM3", 85_045_395_456))
    assert full == "full" and "85 GB >= 40 GB" in why
    small, why = profile.profile_for(_rt("tpu", "TPU v5 lite", 16_900_000_000))
    assert small == "smoke" and "17 GB < the 40 GB" in why and 'PROFILE = "full"' in why
    assert profile.profile_for(_rt("gpu", "NVIDIA A100-SXM4-40GB", 42_298_834_944))[0] == "full"
    assert profile.profile_for(_rt("gpu", "some GPU", None))[0] == "full"


def test_emulated_t4_gets_the_t4_profile() -> None:
    rt = emulate.apply(_rt("gpu", "NVIDIA H100 80GB HBM3", 85_045_395_456), {emulate.EMULATE_ENV: "t4"})
    choice, why = profile.profile_for(rt)
    assert choice == "smoke" and why.startswith("NVIDIA T4 (emulated on NVIDIA H100 80GB HBM3): 16 GB")


def test_bad_profile_is_named() -> None:
    with pytest.raises(ValueError, match="'medium'"):
        profile.resolve_profile("medium")
