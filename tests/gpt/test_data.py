"""labkit.gpt.data and datasets/shakespeare: checksum, errors, tokenizer, split, batches (Lab 02)."""

from __future__ import annotations

import hashlib
import math
import importlib.util
import shutil
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest
import torch

from labkit.gpt import data as D

SHIPPED = Path(__file__).resolve().parents[2] / "datasets" / "shakespeare"


@pytest.fixture(scope="module")
def corpus() -> str:
    return D.load_corpus()


def _copy_corpus(tmp_path: Path) -> Path:
    """A copy of the shipped corpus + SHA256SUMS under tmp_path/shakespeare/."""
    d = tmp_path / "shakespeare"
    d.mkdir()
    for name in ("shakespeare.txt", "SHA256SUMS"):
        shutil.copy(SHIPPED / name, d / name)
    return d / "shakespeare.txt"


def test_shipped_corpus_checksum_verified(corpus: str) -> None:
    path = D.default_corpus_path()
    assert path.resolve() == (SHIPPED / "shakespeare.txt").resolve()
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    assert D.expected_sha256(path) == digest
    assert corpus.encode("utf-8") == path.read_bytes()


def test_corpus_facts(corpus: str) -> None:
    n = len(corpus.encode("utf-8"))
    assert 0.9e6 < n < 1.2e6  # "about 1 MB"
    assert "\r" not in corpus and corpus.endswith("\n")
    assert corpus.startswith("ALL'S WELL THAT ENDS WELL")
    assert corpus.count("by William Shakespeare") == 8  # one title block per play
    assert "To be, or not to be" in corpus  # Hamlet made the cut


def test_no_gutenberg_boilerplate(corpus: str) -> None:
    low = corpus.lower()
    for marker in ("gutenberg", "*** start of", "*** end of", "small print", "*end*",
                   "end of the project", "etext", "ebook", "www.", "http"):
        if marker == "etext":  # "pretext" is Shakespeare's; only the word itself is banned
            assert " etext" not in low and "\netext" not in low
        else:
            assert marker not in low, marker


def test_corrupted_copy_refused(tmp_path: Path) -> None:
    path = _copy_corpus(tmp_path)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01  # flip one bit of one byte
    path.write_bytes(bytes(data))
    want = D.expected_sha256(path)
    got = hashlib.sha256(bytes(data)).hexdigest()
    with pytest.raises(D.CorpusError, match="checksum mismatch") as e:
        D.load_corpus(path)
    msg = str(e.value)
    assert str(path) in msg and want in msg and got in msg and "build.py" in msg
    assert D.load_corpus(path, verify=False)  # an explicit opt-out still reads it


def test_copy_with_sums_loads_and_env_override(tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    path = _copy_corpus(tmp_path)
    assert D.load_corpus(path) == D.load_corpus()
    monkeypatch.setenv(D.DATASETS_ENV, str(tmp_path))
    assert D.default_corpus_path() == path


def test_missing_file_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(D.CorpusError, match="does not exist"):
        D.load_corpus(tmp_path / "nope.txt")
    monkeypatch.setenv(D.DATASETS_ENV, str(tmp_path))  # override dir without the corpus
    with pytest.raises(D.CorpusError, match="not found. Looked in") as e:
        D.load_corpus()
    assert str(tmp_path / "shakespeare" / "shakespeare.txt") in str(e.value)
    assert D.DATASETS_ENV in str(e.value) and "build.py" in str(e.value)


def test_empty_file_and_missing_checksum(tmp_path: Path) -> None:
    empty = tmp_path / "empty.txt"
    empty.write_bytes(b"")
    with pytest.raises(D.CorpusError, match=r"empty \(0 bytes\)"):
        D.load_corpus(empty)
    text = tmp_path / "mine.txt"
    text.write_text("to be or not\n", encoding="utf-8")
    with pytest.raises(D.CorpusError, match="no checksum file"):
        D.load_corpus(text)
    assert D.load_corpus(text, verify=False) == "to be or not\n"


def test_tokenizer_round_trip(corpus: str) -> None:
    tok = D.ByteTokenizer()
    ids = tok.encode(corpus)
    assert ids.dtype == np.int32 and ids.shape == (len(corpus.encode("utf-8")),)
    assert 0 <= ids.min() and ids.max() < tok.vocab_size == 256
    assert tok.decode(ids) == corpus
    s = "naïve café — ✓ 🎭"
    assert tok.decode(tok.encode(s)) == s
    assert tok.decode(np.array([0xFF, 65])) == "\ufffdA"  # invalid UTF-8 never crashes
    with pytest.raises(ValueError, match="in \\[0, 256\\)"):
        tok.decode([300])


def test_split_deterministic_and_disjoint() -> None:
    tokens = np.arange(1000, dtype=np.int32)
    train, val = D.split(tokens)
    train2, val2 = D.split(tokens)
    assert np.array_equal(train, train2) and np.array_equal(val, val2)
    assert len(val) == 100 and len(train) == 900
    assert np.array_equal(np.concatenate([train, val]), tokens)  # last 10%, in order
    assert not set(train.tolist()) & set(val.tolist())
    for bad in (0.0, 1.0, -0.1):
        with pytest.raises(ValueError, match="val_fraction"):
            D.split(tokens, bad)


def test_batches_shifted_and_reproducible() -> None:
    tokens = np.arange(5000, dtype=np.int32)  # token value == its position: easy to check
    x, y = D.get_batch(tokens, 4, 16, np.random.default_rng(0))
    assert x.shape == y.shape == (4, 16) and x.dtype == y.dtype == np.int32
    assert np.array_equal(y, x + 1)  # y is x shifted by one position
    assert np.array_equal(np.diff(x, axis=1), np.ones((4, 15)))  # contiguous windows
    x2, _ = D.get_batch(tokens, 4, 16, np.random.default_rng(0))
    assert np.array_equal(x, x2)
    b1, b2 = D.Batcher(tokens, 2, 8, seed=3), D.Batcher(tokens, 2, 8, seed=3)
    for _ in range(3):
        (xa, ya), (xb, yb) = next(b1), next(b2)
        assert np.array_equal(xa, xb) and np.array_equal(ya[:, :-1], xa[:, 1:])
    with pytest.raises(ValueError, match="seq \\+ 1"):
        D.get_batch(tokens[:8], 1, 8, np.random.default_rng(0))


def test_framework_adapters() -> None:
    x = np.arange(6, dtype=np.int32).reshape(2, 3)
    t = D.to_torch(x, "cpu")
    assert t.dtype == torch.long and t.tolist() == x.tolist()
    j = D.to_jax(x)
    assert j.dtype == jnp.int32 and np.array_equal(np.asarray(j), x)


def test_synthetic_tokens() -> None:
    a = D.synthetic_tokens(1000, vocab=50, seed=1)
    assert a.shape == (1000,) and a.dtype == np.int32 and 0 <= a.min() and a.max() < 50
    assert np.array_equal(a, D.synthetic_tokens(1000, vocab=50, seed=1))
    assert not np.array_equal(a, D.synthetic_tokens(1000, vocab=50, seed=2))
    # Structure: few distinct 8-grams at word boundaries (16 patterns), not 125 random ones.
    words = {tuple(w) for w in a[: 1000 // 8 * 8].reshape(-1, 8)}
    assert len(words) <= 16


def _build_module():
    spec = importlib.util.spec_from_file_location("shk_build", SHIPPED / "build.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_build_strips_markers_and_fails_loudly() -> None:
    b = _build_module()
    text = ("The Project Gutenberg EBook of X\n\n*** START OF THE PROJECT GUTENBERG EBOOK X ***\n"
            "O, that this too too solid flesh would melt\n"
            "*** END OF THE PROJECT GUTENBERG EBOOK X ***\nlicence...\n")
    assert b.strip_gutenberg("x", text).strip() == "O, that this too too solid flesh would melt"
    with pytest.raises(b.BuildError, match="start marker .* but not its partner"):
        b.strip_gutenberg("x", text.split("*** END")[0])
    with pytest.raises(b.BuildError, match="boilerplate left at line 2"):
        b.strip_gutenberg("x", "Hamlet\nThis etext was prepared by someone\n")
    assert b.normalise("a  \r\nb\r\n\r\n") == "a\nb"
    # The shipped checksum file is what build.py writes for the shipped corpus.
    assert (SHIPPED / "SHA256SUMS").read_text() == (
        f"{hashlib.sha256((SHIPPED / 'shakespeare.txt').read_bytes()).hexdigest()}  shakespeare.txt\n")


def test_non_utf8_corpus_with_a_matching_checksum(tmp_path: Path) -> None:
    path = tmp_path / "latin1.txt"
    path.write_bytes("Fair Verona, où nous plaçons notre scène\n".encode("latin-1"))
    (tmp_path / "SHA256SUMS").write_text(f"{hashlib.sha256(path.read_bytes()).hexdigest()}  latin1.txt\n")
    with pytest.raises(D.CorpusError, match=r"not UTF-8 text: byte 0xf9 at offset 14.*checksum matches.*iconv") as e:
        D.load_corpus(path)
    assert str(path) in str(e.value)
    with pytest.raises(D.CorpusError, match="not UTF-8"):
        D.load_corpus(path, verify=False)


@pytest.mark.parametrize(("kwargs", "err", "match"), [
    ({"seq": -3}, ValueError, r"seq must be >= 1, got -3"),
    ({"seq": 0}, ValueError, r"seq must be >= 1, got 0"),
    ({"batch": 0}, ValueError, r"batch must be >= 1, got 0"),
    ({"batch": -2}, ValueError, r"batch must be >= 1, got -2"),
    ({"seq": 2.5}, TypeError, r"seq must be a whole number"),
    ({"batch": float("nan")}, TypeError, r"batch must be a whole number.*nan"),
    ({"seq": True}, TypeError, r"seq"),
])
def test_get_batch_refuses_bad_sizes(kwargs: dict, err: type, match: str) -> None:
    tokens = D.synthetic_tokens(100)
    args = {"batch": 2, "seq": 8, **kwargs}
    with pytest.raises(err, match=match):
        D.get_batch(tokens, args["batch"], args["seq"], np.random.default_rng(0))
    with pytest.raises(err, match=match):
        D.Batcher(tokens, args["batch"], args["seq"])
    x, y = D.get_batch(tokens, np.int64(2), 8, np.random.default_rng(0))  # numpy ints are fine
    assert x.shape == y.shape == (2, 8)


TEXT = "to be or not to be, that is the question " * 4


@pytest.mark.parametrize(("call", "err", "match"), [
    (lambda: D.get_batch(TEXT, 2, 4, np.random.default_rng(0)), TypeError,
     r"tokens must be a 1-D integer array \(e.g. ByteTokenizer\(\).encode\(text\)\), got str"),
    (lambda: D.split(TEXT, 0.1), TypeError, "tokens must be a 1-D integer array.*got str"),
    (lambda: D.Batcher(TEXT, 2, 4), TypeError, "tokens must be a 1-D integer array.*got str"),
    (lambda: D.get_batch(np.linspace(0, 1, 100), 2, 4, np.random.default_rng(0)), TypeError, "dtype float64"),
    (lambda: D.get_batch(np.zeros((10, 10), np.int32), 2, 4, np.random.default_rng(0)), TypeError, r"shape \(10, 10\)"),
    (lambda: D.get_batch(D.synthetic_tokens(50), 2, 4, 0), TypeError,
     r"rng must be a numpy Generator, e.g. np.random.default_rng\(seed\), got 0"),
    (lambda: D.synthetic_tokens(10, vocab=2**40), ValueError, r"vocab must be <= 2\*\*31"),
    (lambda: D.synthetic_tokens(10, seed=math.nan), TypeError, "seed must be a whole number >= 0, got nan"),
    (lambda: D.Batcher(D.synthetic_tokens(50), 2, 4, seed=1.5), TypeError, "seed must be a whole number"),
    (lambda: D.ByteTokenizer().encode(b"hi"), TypeError, r"encode takes text \(str\), got bytes.*decode\('utf-8'\)"),
    (lambda: D.ByteTokenizer().decode([104.7]), TypeError, "decode takes integer token ids, got float64"),
    (lambda: D.ByteTokenizer().decode("hi"), TypeError, "decode takes integer token ids.*got str"),
    (lambda: D.split(np.arange(100), "0.1"), TypeError, "val_fraction must be a finite number in"),
    # once accepted: ByteTokenizer(100).encode('hello ~') gave ids >= 100
    (lambda: D.ByteTokenizer(100), ValueError, r"vocab_size must be an integer >= 256 \(one id per byte\), got 100"),
    (lambda: D.ByteTokenizer(-1), ValueError, "vocab_size must be an integer >= 256 .*got -1"),
    (lambda: D.ByteTokenizer("256"), TypeError, "vocab_size must be an integer >= 256 .*got '256'"),
    (lambda: D.ByteTokenizer(256.0), TypeError, "vocab_size must be an integer >= 256 .*got 256.0"),
    (lambda: D.ByteTokenizer(True), TypeError, "vocab_size must be an integer >= 256 .*got True"),
])
def test_text_or_floats_instead_of_tokens_are_refused_with_the_fix(call, err: type, match: str) -> None:
    """Issue #20: these were an IndexError, a silent all-zero batch, or a split into two strings."""
    with pytest.raises(err, match=match):
        call()


def test_numpy_scalars_and_lists_still_work() -> None:
    """Issue #13: np.float32 fractions and numpy ints come from sweeps; a list of ints is tokens too."""
    train, val = D.split(np.arange(100), np.float32(0.1))
    assert (len(train), len(val)) == (90, 10)
    x, _ = D.get_batch(list(range(50)), 2, 4, np.random.default_rng(0))
    assert x.dtype == np.int32 and x.shape == (2, 4)
    assert D.synthetic_tokens(np.int64(16), vocab=np.int64(2**31), seed=np.int64(3)).max() < 2**31
    tok = D.ByteTokenizer(np.int64(50304))  # a padded model vocab holds the 256 byte ids
    assert tok.vocab_size == 50304 and type(tok.vocab_size) is int and tok.decode(tok.encode("hi")) == "hi"
