"""How a JAX model sums its token embedding's gradient: XLA's scatter, or a one-hot matmul on a GPU (Lab 02).

The gradient of a lookup ``table[tokens]`` adds each token's (d_model,) gradient row onto its table
row: a scatter-add. XLA:GPU runs it with atomic adds, and a small vocabulary makes them collide: with
bytes as tokens, thousands of a batch's 16,384 tokens are spaces or 'e', all adding onto one row. On
an H100 that one op took 10.9 ms of the 93.9 ms gpt2-medium Flax step (bench_mfu's trace,
benchmarks/nvidia-h100-80gb-hbm3/mfu_gpt2-medium.json), where torch's embedding backward sorts the
tokens instead. The same sum is a matmul, ``one_hot(tokens)ᵀ @ grad``: (vocab, tokens) x (tokens,
d_model), 2·vocab·d_model FLOPs per token on the tensor cores, a few microseconds, with fp32
accumulation. It is chosen on a GPU for a vocabulary whose one-hot matrix stays small; CPUs and
TPUs keep the scatter, and so does every trace inside ``attention.xla_attention()``: FLOP counting
must see only the model's matmuls (the one-hot product is not model work, like the attention kernel's
skipped half).
"""

from __future__ import annotations

from labkit.runtime import attention

# Largest vocabulary summed by a one-hot matmul: its (tokens, vocab) one-hot matrix for 16,384 tokens
# is 32 MiB in bf16 at 1,024 and 128 MiB at 4,096; GPT-2's 50,304 would be 1.6 GB, and its rows rarely collide.
ONE_HOT_MAX_VOCAB = 4096
ONE_HOT, SCATTER = "one_hot", "scatter"


def jax_embedding_gradient(vocab_size: int) -> str:
    """``ONE_HOT`` on a GPU for a vocabulary of at most ONE_HOT_MAX_VOCAB rows, else ``SCATTER`` (Lab 02)."""
    import jax

    if isinstance(vocab_size, bool) or not isinstance(vocab_size, int) or vocab_size < 1:
        raise ValueError(f"vocab_size must be a positive int (the embedding table's rows), got {vocab_size!r}")
    if attention.xla_kernels_only() or jax.default_backend() != "gpu" or vocab_size > ONE_HOT_MAX_VOCAB:
        return SCATTER
    return ONE_HOT
