"""Precision: what fp32/tf32/bf16/fp16/fp8 do to range, error, speed and memory (Lab 04).

Modules:

- ``formats``     number formats: range, rounding, accumulation
- ``matmul``      what an "fp32" matmul really computes here, against float64
- ``fp8``         scaled fp8 matmuls: e4m3 forward, e5m2 gradients (JAX), which chips have fp8
- ``recipes``     fp8 scaling recipes: current, delayed (amax history), rowwise, per-block MXFP8; saturation, accumulation
- ``noise``       is a loss curve different from fp32's, or only as different as another seed?
- ``plateau``     the corpus's unigram / bigram entropies: where byte-level losses stall, when runs leave them
- ``causality``   does a run's training step (forward and backward) still see only the past? (a leak probe)
- ``fp8_train``   a short fp8 training run per recipe: a numpy MLP, every matmul through fp8
- ``residual``    where "bf16" rounds the residual stream: Flax's dtype= against torch.autocast
- ``amp``         PyTorch AMP: what autocast keeps in fp32, unscale_ before clipping, bf16 without a scaler
- ``speed``       bf16 against TF32 and true fp32: variants, memory estimate, speed-ups
- ``loss_scale``  static and dynamic loss scaling, JAX and PyTorch
- ``train``       train the course GPT in fp32, bf16, fp16 + loss scaling (PyTorch, and the runs of both)
- ``train_jax``   the JAX half of that training
- ``master``      master weights and optimizer state: bytes by dtype, read from each run's real trees
- ``reference_run`` the committed H100 run's Lab 04 figures, read from benchmarks/ with their commit and date
- ``plots``       Lab 04's pictures: number lines, accumulation, loss scaling, curves, speed
"""
