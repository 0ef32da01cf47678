"""The shared GPT: one model in Flax and PyTorch, its data and its trainers (Lab 02; used by Labs 03-06).

Modules:

- ``config``       GPTConfig, named sizes, parameter count, the canonical flat weight names
- ``flax_model``   the GPT in Flax NNX and its loss
- ``torch_model``  the GPT in PyTorch and its loss
- ``convert``      weights between Flax and PyTorch, bit-exactly
- ``data``         the shipped Shakespeare corpus, a byte tokenizer, batches for both frameworks
- ``train``        one training step in JAX (optax, jit) and PyTorch (eager or compiled); greedy generation
"""
