"""Cost: what a token costs where, and which debate claims hold (Lab 06).

Modules:

- ``model``    $ per million tokens for training and serving, on-prem $/hour, sensitivity, break-even
- ``prices``   a dated price table: $ per chip-hour by chip, cloud and pricing kind, with sources
- ``claims``   common GPU-vs-TPU claims, each checked against the cost model
- ``routing``  route a multi-stage inference pipeline across CPU / GPU / TPU pools
- ``plots``    the lab's pictures: cost vs batch, chips, claims, sensitivity, routing, worksheet
"""
