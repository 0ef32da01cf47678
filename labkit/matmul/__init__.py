"""Matrix units: how a TPU's systolic array and a GPU's SMs multiply matrices (Lab 01).

Modules:

- ``systolic``       a register-level systolic-array simulator and its closed-form cycle model
- ``scalesim_reference`` what the real SCALE-Sim 3.0 printed for a set of GEMMs, with its provenance
- ``mxu``            a TPU's MXU as the chip runs it: pipelined weight loads under an HBM roof
- ``simt``           a first-order model of a tiled GEMM on a GPU: tiles, waves, padding, alignment
- ``pallas_kernel``  a blocked matmul as a Pallas kernel, TPU style (MXU-aligned blocks)
- ``triton_kernel``  the same blocked matmul as a Triton kernel, GPU style (tensor-core tiles)
- ``kernel_check``   judging a hand-written matmul kernel: seeded operands, error vs float64, speed vs the library
- ``sweep_rounds``   a measured shape sweep in interleaved rounds, the spread a ratio must beat, floors and cliffs
- ``reference_chips`` the four chips of the predicted sweeps (two MXUs, two GPUs): fraction of peak by name
- ``plots``          the lab's pictures: the array at work, its utilization, predicted and measured shape sweeps
"""
