"""labkit.runtime.embedding: a one-hot matmul for the embedding's gradient on a GPU, XLA's scatter elsewhere."""

from __future__ import annotations

import pytest

from labkit.runtime import attention, embedding


@pytest.fixture
def on_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make jax.default_backend() say "gpu", as it does on a CUDA runtime."""
    import jax

    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")


def test_cpu_keeps_xla_scatter() -> None:
    # This suite runs on a CPU: XLA's scatter, whatever the vocabulary.
    assert embedding.jax_embedding_gradient(256) == embedding.SCATTER
    assert embedding.jax_embedding_gradient(50304) == embedding.SCATTER


def test_gpu_uses_one_hot_for_a_small_vocabulary_only(on_gpu: None) -> None:
    assert embedding.jax_embedding_gradient(256) == embedding.ONE_HOT  # bytes: the course's GPTs
    assert embedding.jax_embedding_gradient(embedding.ONE_HOT_MAX_VOCAB) == embedding.ONE_HOT
    assert embedding.jax_embedding_gradient(embedding.ONE_HOT_MAX_VOCAB + 1) == embedding.SCATTER
    assert embedding.jax_embedding_gradient(50304) == embedding.SCATTER  # GPT-2's: a 1.6 GB one-hot matrix


def test_flop_counting_traces_keep_the_scatter_on_a_gpu(on_gpu: None) -> None:
    # Inside xla_attention() FLOP counting must see only the model's matmuls: no one-hot product.
    with attention.xla_attention():
        assert attention.xla_kernels_only()
        assert embedding.jax_embedding_gradient(256) == embedding.SCATTER
    assert not attention.xla_kernels_only()
    assert embedding.jax_embedding_gradient(256) == embedding.ONE_HOT


@pytest.mark.parametrize("bad", [0, -3, 2.5, "256", True, None])
def test_bad_vocab_size_is_refused_with_its_value(bad: object) -> None:
    with pytest.raises(ValueError, match="vocab_size must be a positive int"):
        embedding.jax_embedding_gradient(bad)  # type: ignore[arg-type]
