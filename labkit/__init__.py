"""labkit: the helper package of Accelerator Labs, a hands-on course on GPU vs TPU for AI.

Labs import it as ``import labkit``; the first cell calls :func:`labkit.setup`. Importing
labkit never initialises JAX, so device simulation can still be set up.

Packages, lowest layer first (each imports only the layers below it; a test enforces it):

- ``runtime``    device detection and simulation, chip specs, versions, install, doctor (all labs)
- ``gpt``        the shared GPT: config, Flax and PyTorch models, data, trainers (Lab 02 on)
- ``measure``    timing, roofline, FLOP counting, MFU (Labs 00 and 02)
- ``matmul``     systolic array, SIMT model, Pallas and Triton kernels (Lab 01)
- ``sharding``   meshes, layouts, collectives, memory, multi-process (Lab 03)
- ``precision``  formats, matmul precision, fp8, loss scaling, mixed-precision training (Lab 04)
- ``export``     StableHLO, safetensors weights, KV cache, serving (Lab 05)
- ``cost``       cost per token, prices, claims, routing (Lab 06)
- ``course``     runner, reports, exercise checks, student copies, lowering check, CLI
"""

from labkit.course.profile import resolve_profile
from labkit.course.report import record, recorded
from labkit.course.source import VERSION as __version__
from labkit.course.source import COURSE, check_source
from labkit.runtime.bootstrap import setup

# `labkit.runtime` is the runtime package; the Runtime found by setup() is what setup() returns.
__all__ = ["setup", "resolve_profile", "record", "recorded", "check_source"]
# COURSE marks this package apart from unrelated ones named labkit (the first cell checks it).
