"""The shipped Shakespeare corpus, a byte tokenizer, and batches for JAX and PyTorch (Lab 02).

Everything here is numpy first: batches are ``np.int32`` arrays of shape (batch, seq), and
``to_jax`` / ``to_torch`` move them to a framework at the last moment, so the JAX and PyTorch
training steps of a lab see the very same tokens.
"""

from __future__ import annotations

import hashlib
import math
import numbers
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import numpy as np

DATASETS_ENV = "LABKIT_DATASETS"  # override: a directory that holds shakespeare/shakespeare.txt
CORPUS_REL = Path("shakespeare") / "shakespeare.txt"  # relative to a datasets/ directory
CHECKSUMS = "SHA256SUMS"  # `sha256sum` format, next to the corpus
REBUILD = "python datasets/shakespeare/build.py"


class CorpusError(RuntimeError):
    """The corpus file is missing, empty, or not the file its checksum names (Lab 02)."""


def _candidates() -> list[Path]:
    """Where the default corpus may be: the env override, else datasets/ above labkit or the CWD."""
    env = os.environ.get(DATASETS_ENV)
    if env:  # an explicit override is the only place looked: no silent fallback
        return [Path(env).expanduser() / CORPUS_REL]
    roots = [Path(__file__).resolve().parent, Path.cwd().resolve()]
    seen, out = set(), []
    for root in roots:
        for d in (root, *root.parents):
            p = d / "datasets" / CORPUS_REL
            if p not in seen:
                seen.add(p)
                out.append(p)
    return out


def default_corpus_path() -> Path:
    """The shipped corpus file, found as _candidates() describes; CorpusError if absent (Lab 02)."""
    cands = _candidates()
    for p in cands:
        if p.is_file():
            return p
    looked = "\n  ".join(str(p) for p in cands[:12])
    raise CorpusError(
        f"Shakespeare corpus not found. Looked in:\n  {looked}\n"
        f"Fix: run from the course repository (or a folder below it), set {DATASETS_ENV} to a "
        f"directory containing {CORPUS_REL}, pass load_corpus(path=...), or rebuild it with "
        f"`{REBUILD}`."
    )


def expected_sha256(path: Path) -> str:
    """The SHA-256 that the SHA256SUMS file next to `path` records for it (Lab 02)."""
    sums = path.parent / CHECKSUMS
    if not sums.is_file():
        raise CorpusError(f"no checksum file {sums} for {path}; pass verify=False to skip the "
                          f"check for your own text, or rebuild with `{REBUILD}`")
    for line in sums.read_text(encoding="utf-8").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("*") == path.name:
            return parts[0].lower()
    raise CorpusError(f"{sums} has no entry for {path.name}")


def load_corpus(path: str | Path | None = None, verify: bool = True) -> str:
    """The corpus text, its SHA-256 checked against SHA256SUMS; CorpusError otherwise (Lab 02)."""
    p = Path(path).expanduser() if path is not None else default_corpus_path()
    if not p.is_file():
        raise CorpusError(f"corpus file {p} does not exist (or is not a file). Pass an existing "
                          f"path, or omit it to use the shipped corpus; rebuild with `{REBUILD}`.")
    data = p.read_bytes()
    if not data:
        raise CorpusError(f"corpus file {p} is empty (0 bytes); rebuild it with `{REBUILD}`")
    if verify:
        want, got = expected_sha256(p), hashlib.sha256(data).hexdigest()
        if got != want:
            raise CorpusError(
                f"checksum mismatch for {p}: expected sha256 {want} ({CHECKSUMS}), got {got} "
                f"({len(data)} bytes). The file was modified or corrupted; restore it "
                f"(git checkout -- {p.name}) or rebuild it with `{REBUILD}`.")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CorpusError(
            f"corpus file {p} is not UTF-8 text: byte {data[e.start]:#04x} at offset {e.start} "
            f"({e.reason}){' although its checksum matches SHA256SUMS' if verify else ''}. Re-save it "
            f"as UTF-8 (e.g. iconv -f latin1 -t utf-8), or rebuild the shipped corpus with `{REBUILD}`."
        ) from None


def check_count(value: Any, name: str, minimum: int = 1, example: Any = None, message: str | None = None) -> int:
    """``value`` as an int >= minimum; TypeError / ValueError naming the argument (or saying ``message``) (Lab 02)."""
    eg = max(minimum, 8) if example is None else example
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):  # np.int64 is Integral
        raise TypeError(message or f"{name} must be a whole number >= {minimum}, got {value!r} "
                                   f"({type(value).__name__}); e.g. {name}={eg}")
    if value < minimum:
        raise ValueError(message or f"{name} must be >= {minimum}, got {value}; e.g. {name}={eg}")
    return int(value)


def check_real(value: Any, name: str, low: float | None = None, high: float | None = None,
               closed: str = "", hint: str = "") -> float:
    """``value`` as a finite float in (low, high) (``closed``: "low"/"high"/"both" ends included) (Lab 02)."""
    lo_in, hi_in = closed in ("low", "both"), closed in ("high", "both")
    where = (f" in {'[' if lo_in else '('}{low:g}, {high:g}{']' if hi_in else ')'}" if low is not None and high is not None
             else f" {'>=' if lo_in else '>'} {low:g}" if low is not None
             else f" {'<=' if hi_in else '<'} {high:g}" if high is not None else "")
    if isinstance(value, bool) or not isinstance(value, numbers.Real):  # np.float32 is Real
        raise TypeError(f"{name} must be a finite number{where}, got {value!r} ({type(value).__name__}){hint}")
    v = float(value)
    out = not math.isfinite(v) or (low is not None and (v < low or (v == low and not lo_in))) or (
        high is not None and (v > high or (v == high and not hi_in)))
    if out:
        raise ValueError(f"{name} must be a finite number{where}, got {value!r}{hint}")
    return v


def check_tokens(tokens: Any, name: str = "tokens") -> np.ndarray:
    """``tokens`` as a 1-D integer numpy array; TypeError saying what was passed otherwise (Lab 02)."""
    arr = None if isinstance(tokens, (str, bytes)) else np.asarray(tokens)
    if arr is None or arr.ndim != 1 or not np.issubdtype(arr.dtype, np.integer):
        got = type(tokens).__name__ if arr is None else f"an array of dtype {arr.dtype}, shape {arr.shape}"
        raise TypeError(f"{name} must be a 1-D integer array (e.g. ByteTokenizer().encode(text)), got {got}")
    return arr


def check_rng(rng: Any) -> np.random.Generator:
    """``rng`` if it is a numpy Generator; TypeError with the fix otherwise (Lab 02)."""
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy Generator, e.g. np.random.default_rng(seed), got {rng!r} "
                        f"({type(rng).__name__})")
    return rng


@dataclass(frozen=True)
class ByteTokenizer:
    """UTF-8 bytes as tokens: vocab 256, no unknown token, lossless for any text (Lab 02)."""

    vocab_size: int = 256

    def __post_init__(self) -> None:
        v = self.vocab_size  # a model's vocab may exceed 256 (padded); below 256 some bytes would have no id
        v = check_count(v, "vocab_size", 256, message=f"vocab_size must be an integer >= 256 (one id per byte), "
                                                      f"got {v!r}; e.g. ByteTokenizer() (vocab_size=256)")
        object.__setattr__(self, "vocab_size", v)  # frozen: np.int64(256) -> 256

    def encode(self, text: str) -> np.ndarray:
        """str -> (n_bytes,) int32 token ids in [0, 256) (Lab 02)."""
        if not isinstance(text, str):
            fix = "; decode bytes first: encode(data.decode('utf-8'))" if isinstance(text, (bytes, bytearray)) else ""
            raise TypeError(f"encode takes text (str), got {type(text).__name__}{fix}")
        return np.frombuffer(text.encode("utf-8"), dtype=np.uint8).astype(np.int32)

    def decode(self, ids: Any) -> str:
        """Token ids -> str; bytes that are not valid UTF-8 (model samples) become U+FFFD (Lab 02)."""
        if isinstance(ids, (str, bytes)):
            raise TypeError(f"decode takes integer token ids (e.g. encode(text)), got {type(ids).__name__} {ids!r:.40}")
        arr = np.asarray(ids).reshape(-1)
        if arr.size and not np.issubdtype(arr.dtype, np.integer):
            raise TypeError(f"decode takes integer token ids, got {arr.dtype} values such as {arr[0]!r}; "
                            "round model outputs explicitly (e.g. logits.argmax(-1))")
        if arr.size and (arr.min() < 0 or arr.max() > 255):
            raise ValueError(f"byte token ids must be in [0, 256), got [{arr.min()}, {arr.max()}]")
        return arr.astype(np.uint8).tobytes().decode("utf-8", errors="replace")


def split(tokens: np.ndarray, val_fraction: float = 0.1) -> tuple[np.ndarray, np.ndarray]:
    """(train, val): the last val_fraction of the tokens is validation; no shuffle (Lab 02)."""
    tokens = check_tokens(tokens)
    val_fraction = check_real(val_fraction, "val_fraction", 0.0, 1.0, hint="; e.g. val_fraction=0.1")
    n_val = int(len(tokens) * val_fraction)
    if n_val == 0 or n_val == len(tokens):
        raise ValueError(f"{len(tokens)} tokens are too few for val_fraction={val_fraction}")
    # A contiguous tail, not a random sample: neighbouring text is near-duplicate, so a
    # shuffled split would leak training text into validation.
    return tokens[: len(tokens) - n_val], tokens[len(tokens) - n_val:]


def get_batch(tokens: np.ndarray, batch: int, seq: int,
              rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Random windows: x (batch, seq) int32 and y = x shifted left by one token (Lab 02)."""
    tokens, rng = check_tokens(tokens), check_rng(rng)
    batch, seq = check_count(batch, "batch"), check_count(seq, "seq")
    if len(tokens) < seq + 1:
        raise ValueError(f"need at least seq + 1 = {seq + 1} tokens, got {len(tokens)}")
    starts = rng.integers(0, len(tokens) - seq, size=batch)  # (batch,)
    idx = starts[:, None] + np.arange(seq)[None, :]  # (batch, seq)
    return tokens[idx].astype(np.int32), tokens[idx + 1].astype(np.int32)


@dataclass
class Batcher:
    """Endless reproducible stream of get_batch(tokens, batch, seq) from a seeded rng (Lab 02)."""

    tokens: np.ndarray
    batch: int
    seq: int
    seed: int = 0
    rng: np.random.Generator = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self.tokens = check_tokens(self.tokens)  # refused here, not at the first next()
        self.batch, self.seq = check_count(self.batch, "batch"), check_count(self.seq, "seq")
        self.rng = np.random.default_rng(check_count(self.seed, "seed", 0, example=0))

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        return self

    def __next__(self) -> tuple[np.ndarray, np.ndarray]:
        return get_batch(self.tokens, self.batch, self.seq, self.rng)


def to_torch(x: np.ndarray, device: Any = "cpu") -> Any:
    """numpy tokens -> torch int64 tensor on `device` (embedding/loss index dtype) (Lab 02)."""
    import torch  # lazy: JAX-only runtimes need not import torch

    return torch.from_numpy(np.ascontiguousarray(x)).to(device=device, dtype=torch.long)


def to_jax(x: np.ndarray, sharding: Any = None) -> Any:
    """numpy -> jax.Array, optionally placed with a sharding (Lab 03 shards the batch) (Lab 02)."""
    import jax  # lazy, as in to_torch

    return jax.device_put(x, sharding) if sharding is not None else jax.numpy.asarray(x)


def synthetic_tokens(n: int, vocab: int = 256, seed: int = 0, n_patterns: int = 16,
                     pattern_len: int = 8) -> np.ndarray:
    """(n,) int32 tokens made of repeated random n-grams: learnable in a few steps (tests, Lab 02)."""
    n, vocab = check_count(n, "n"), check_count(vocab, "vocab", 2)
    n_patterns, pattern_len = check_count(n_patterns, "n_patterns"), check_count(pattern_len, "pattern_len")
    if vocab > 2**31:  # ids are int32: vocab - 1 must fit
        raise ValueError(f"vocab must be <= 2**31 (token ids are int32), got {vocab}; e.g. vocab=256")
    rng = np.random.default_rng(check_count(seed, "seed", 0, example=0))
    patterns = rng.integers(0, vocab, size=(n_patterns, pattern_len))  # the "words"
    # Which word comes next is random, but inside a word every token is predictable, so the
    # loss can fall from ln(vocab) towards ln(n_patterns) / pattern_len per token.
    order = rng.integers(0, n_patterns, size=n // pattern_len + 1)
    return patterns[order].reshape(-1)[:n].astype(np.int32)
