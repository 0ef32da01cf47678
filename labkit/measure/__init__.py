"""Measurement: timing, rooflines, FLOP counting and MFU (Lab 00 and Lab 02).

Used by every lab topic; imports only the runtime and the shared GPT.

Modules:

- ``bench``     timing asynchronous accelerator work: warm-up, repeats, one reporting rule
- ``roofline``  measured matmul peak, memory bandwidth and per-call overhead; what bounds each op
- ``timed_check``  the matmul functions the sweep times, checked against float64 in each dtype timed
- ``roofline_model``  the roofline in closed form: matmul FLOPs and bytes, ridge, ceiling, time, bound
- ``sweep_level``  has the matmul sweep levelled off? its top step against the points' own spread
- ``roofline_plots``  Lab 00's pictures: the matmul sweep, this device's roofline, measured vs spec, chips
- ``flops``     FLOPs of a GPT step: closed form and as XLA and torch count them
- ``mfu``       model FLOPs utilization over a named peak, with the step time and tokens/s beside it
- ``steptime``  one step timer for every step time Lab 02 reports; when two measurements of a step agree
- ``breakdown``  where a step's time goes: GPU kernels charged to the op that launched them, CPU self time
- ``xla_breakdown``  the same for a jitted JAX step: traced ops charged by what the compiled HLO says they are
- ``plots``     Lab 02's pictures: timing mistakes, MFU sweeps, where the step's time goes, training curves
- ``committed`` the run reports committed under benchmarks/<device>/, read by the labs that quote them
"""
