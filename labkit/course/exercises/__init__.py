"""Self-checking exercises, one module per lab (Labs 00-06): ``from labkit.course.exercises import lab00``.

- ``lab00``  ridge point, matmul intensity, roofline time
- ``lab01``  systolic cycle count, Pallas block choice, padding cliff, Stream-K share
- ``lab02``  FLOPs per token, MFU from a step time, days to train
- ``lab03``  predict the collectives of a layout (and w's shape); fix a layout that all-gathers
- ``lab04``  a format's max from its bits, rounding to a mantissa width, the loss-scale rule
- ``lab05``  a torch weight in Flax layout, KV-cache bytes, tokens/s from latencies
- ``lab06``  $ per million tokens, break-even utilization, spot discount after preemption

Each ``check_*`` runs the learner's function on random cases against a reference and names the
mistake it recognises (:mod:`labkit.course.check`).
"""
