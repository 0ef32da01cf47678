"""Cost: what a token costs where, and which debate claims hold (Lab 06).

Modules:

- ``model``    $ per million tokens for training and serving, on-prem $/hour, sensitivity, break-even
- ``prices``   $ per chip-hour with provenance (URL, page date, read date, term), staleness warnings
- ``serving``  decode throughput with KV-cache capacity and reads, and tensor-parallel all-reduces
- ``claims``   common GPU-vs-TPU claims, each checked against the cost model
- ``register`` the claims register: inputs labelled measured / sourced / modelled, and verdicts
- ``seeds``    the five seed articles' claims, each tested as written, built into the register
- ``routing``  route a multi-stage inference pipeline across CPU / GPU / TPU pools
- ``plots``    the lab's pictures: cost vs batch, chips, claims, sensitivity, routing, worksheet
"""
