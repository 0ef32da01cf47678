"""Cost: what a token costs where, and which debate claims hold (Lab 06).

Modules:

- ``model``    $ per million tokens for training and serving, on-prem $/hour, sensitivity, break-even
- ``prices``   $ per chip-hour with provenance (URL, page date, read date, term), staleness warnings
- ``serving``  decode throughput with KV-cache capacity and reads, and tensor-parallel all-reduces
- ``claims``   the spot discount per useful hour once preemption is counted (exercise 5.3)
- ``register`` the claims register: inputs labelled measured / sourced / modelled, and verdicts
- ``mfu_claims`` the seed claims that turn on MFU: measured and published MFUs, training $/token ratios
- ``seeds``    the five seed articles' claims, each tested as written, built into the register
- ``plots``    the lab's pictures: serving cost vs batch up to the KV cap, the 2-4x claim vs price pairs
"""
