"""Matrix units: how a TPU's systolic array and a GPU's SMs multiply matrices (Lab 01).

Modules:

- ``systolic``       a register-level systolic-array simulator and its closed-form cycle model
- ``simt``           a first-order model of a tiled GEMM on a GPU: tiles, waves, padding, alignment
- ``pallas_kernel``  a blocked matmul as a Pallas kernel, TPU style (MXU-aligned blocks)
- ``triton_kernel``  the same blocked matmul as a Triton kernel, GPU style (tensor-core tiles)
"""
