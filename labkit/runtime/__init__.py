"""The runtime: what this machine is and what the course may do on it (every lab; Lab 00 teaches it).

The only package that knows runtimes (cpu/gpu/tpu, chip, device count, bf16, simulated CPU
devices, torch / torch-xla devices). It imports nothing else of labkit.

Modules:

- ``device``      detect the runtime, simulate CPU devices, pick torch / torch-xla devices, sync
- ``hardware``    the chip spec table, every figure with its source
- ``systems``     chips joined by links: TPU tori and GPU switch nodes (Lab 03)
- ``distributed`` join a multi-process JAX job on this machine's CPUs (Lab 03)
- ``versions``    versions of the stack, read from package metadata without importing
- ``install``     Colab/Kaggle bootstrap: add missing companions, never touch the runtime's torch/jax
- ``bootstrap``   `labkit.setup()`, the first cell of every lab
- ``doctor``      `labkit doctor`: where this runtime stands against the supported ranges
- ``emulate``     `LABKIT_EMULATE=t4`: a smaller GPU's memory cap, bf16 and specs on a bigger GPU
- ``memory``      peak memory of this process per device (JAX, torch, host)
- ``caches``      the host CPU's last-level cache size, from sysfs (what a bandwidth probe must outgrow)
- ``processes``   process trees: everything a run started, ended together and checked gone
- ``compile_options`` XLA options that differ by backend (CPU drops optimization barriers early)
- ``matmul_precision`` torch's fp32 matmul level on every device, torch-xla's own switch included
- ``attention``   which attention kernel JAX models trace (cuDNN's fused one, or XLA's for FLOP counting)
- ``embedding``   how JAX models sum the embedding's gradient (a one-hot matmul on a GPU, else XLA's scatter)
"""
