"""Sharding: how one program becomes N device programs (propagation, then XLA's SPMD partitioner), and what that costs (Lab 03).

Modules:

- ``layouts``       meshes, layouts and the strategy presets of the course GPT
- ``partitioner``   the program after Shardy's propagation and after XLA's SPMD partitioner
- ``collectives``   the collectives in the compiled HLO, and bytes sent (one definition)
- ``op_names``      which JAX op (forward or backward) asked for each array of a collective call
- ``hlo_text``      reading compiled HLO text: instructions, users, what a device slices
- ``topology``      one collective's time on a real topology: ring, bidirectional ring, torus, switch
- ``comm_roofline`` a step's communication against its compute, per strategy and system
- ``comm_bench``    collectives timed on this runtime's devices, fitted to latency + bytes / bandwidth
- ``fsdp_schedule`` FSDP as XLA compiles it (gather once, keep) vs ZeRO-3 (re-gather in backward)
- ``memory_model``  bytes per device per strategy: a model, and ZeRO's closed form, against the compiler
- ``step_check``    is a sharded step the unsharded one: gradients before Adam, weights within Adam's bound
- ``train_step``    the course GPT's training step, sharded by a preset
- ``torch_spmd``    the PyTorch side: torch-xla SPMD layouts and torchrun DDP
- ``launch``        start N processes of one program on this machine, watch them, tear them down
- ``plots``         pictures: which device holds which tile; each strategy's memory, traffic, time
"""
