"""Deterministic synthetic corpora shared by the benchmarks, cached as .npy files in bench-data/.

`token_corpus`: LLM-style samples {id: int, text: str, tokens: int32 array of lognormal length}.
`blob_corpus`: samples {id: int, blob: bytes of ~100 KB, half random and half repetitive}.
Both are pure functions of their arguments and seed, so every run measures the same bytes.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

_DEFAULT_DATA = Path(__file__).resolve().parent.parent / "bench-data"
BENCH_DATA = Path(os.environ.get("BENCH_DATA", _DEFAULT_DATA))
TOKEN_COLUMNS = {"id": "int", "text": "str", "tokens": "ndarray:int32"}
BLOB_COLUMNS = {"id": "int", "blob": "bytes"}
_WORDS = np.array(
    str.split(
        "the of and to in is was for on that with as by at from his her it an were are which this "
        "be or has had first one their its new after who they two her she been other when there "
        "during into school time may years more most only over city some world would where later "
        "such used many can state about national out known university united then made all up"
    )
)
_CHUNK = 1 << 24  # values generated per step, so generation memory stays ~100 MB


@dataclass
class Corpus:
    """Samples stored as one flat value array plus per-sample offsets (views, no copies)."""

    columns: dict[str, str]
    values: np.ndarray  # flat tokens (int32) or bytes (uint8), memory-mapped
    offsets: np.ndarray  # int64, len(samples) + 1
    texts: list[str] | None = None
    folder: Path | None = None  # where the cached .npy files live (for out-of-process readers)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def nbytes(self) -> int:
        """Payload bytes of the token or blob column (the MB in the MB/s figures)."""
        return int(self.offsets[-1]) * self.values.itemsize

    def sample(self, i: int) -> dict:
        """Sample `i` as the writer expects it."""
        chunk = self.values[self.offsets[i] : self.offsets[i + 1]]
        if self.texts is None:
            return {"id": i, "blob": chunk.tobytes()}
        return {"id": i, "text": self.texts[i], "tokens": chunk}

    def __iter__(self) -> Iterator[dict]:
        return (self.sample(i) for i in range(len(self)))

    def samples_in_memory(self) -> list[dict]:
        """Every sample as a dict, built up front (arrays are plain ndarray views, not memmaps)."""
        values = np.asarray(self.values)
        if self.texts is None:
            return [{"id": i, "blob": values[a:b].tobytes()} for i, (a, b) in self._spans()]
        return [
            {"id": i, "text": self.texts[i], "tokens": values[a:b]} for i, (a, b) in self._spans()
        ]

    def _spans(self):
        return enumerate(zip(self.offsets[:-1].tolist(), self.offsets[1:].tolist()))


def _layout(
    rng: np.random.Generator, n: int, mean: float, sigma: float, low: int, dtype: type
) -> tuple[np.ndarray, np.ndarray]:
    """Offsets of `n` lognormal lengths with the given mean, and an empty value array to fill."""
    mu = np.log(mean) - sigma**2 / 2  # E[X] = exp(mu + sigma^2 / 2)
    lengths = np.maximum(rng.lognormal(mu, sigma, n).astype(np.int64), low)
    offsets = np.concatenate(([0], np.cumsum(lengths))).astype(np.int64)
    return offsets, np.empty(int(offsets[-1]), dtype=dtype)


def _fill_tokens(rng: np.random.Generator, out: np.ndarray, vocab: int) -> None:
    # Skewed towards small ids like real token streams, so compression ratios are realistic.
    for start in range(0, len(out), _CHUNK):
        part = rng.random(min(_CHUNK, len(out) - start), dtype=np.float32)
        out[start : start + len(part)] = (part**3 * vocab).astype(np.int32)


def _fill_blobs(rng: np.random.Generator, out: np.ndarray, offsets: np.ndarray) -> None:
    # First half of each blob random bytes, second half a repeated 64-byte motif.
    for i in range(len(offsets) - 1):
        lo, hi = int(offsets[i]), int(offsets[i + 1])
        mid = lo + (hi - lo) // 2
        out[lo:mid] = rng.integers(0, 256, mid - lo, dtype=np.uint8)
        motif = rng.integers(0, 256, 64, dtype=np.uint8)
        out[mid:hi] = np.resize(motif, hi - mid)


def _folder(name: str) -> Path:
    return BENCH_DATA / "corpus" / name


def _cached(name: str, build) -> tuple[np.ndarray, np.ndarray, list[str] | None]:
    folder = _folder(name)
    done = folder / "done.json"
    if not done.exists():
        folder.mkdir(parents=True, exist_ok=True)
        values, offsets, texts = build()
        np.save(folder / "values.npy", values)
        np.save(folder / "offsets.npy", offsets)
        (folder / "texts.json").write_text(json.dumps(texts))
        done.write_text("{}")
    values = np.load(folder / "values.npy", mmap_mode="r")
    offsets = np.load(folder / "offsets.npy")
    return values, offsets, json.loads((folder / "texts.json").read_text())


def token_corpus(
    samples: int = 250_000, mean_tokens: int = 1000, vocab: int = 50_257, seed: int = 0
) -> Corpus:
    """~4 * samples * mean_tokens bytes of int32 tokens plus a short text and an id per sample."""

    def build():
        rng = np.random.default_rng(seed)
        offsets, tokens = _layout(rng, samples, mean_tokens, 0.6, 16, np.int32)
        _fill_tokens(rng, tokens, vocab)
        picks = rng.integers(0, len(_WORDS), (samples, 8))
        texts = [" ".join(row) for row in _WORDS[picks].tolist()]
        return tokens, offsets, texts

    name = f"tokens-{samples}-{mean_tokens}-{vocab}-{seed}"
    values, offsets, texts = _cached(name, build)
    return Corpus(TOKEN_COLUMNS, values, offsets, texts, _folder(name))


def blob_corpus(samples: int = 10_000, mean_bytes: int = 100_000, seed: int = 0) -> Corpus:
    """~samples * mean_bytes bytes of blobs (half incompressible) plus an id per sample."""

    def build():
        rng = np.random.default_rng(seed)
        offsets, blobs = _layout(rng, samples, mean_bytes, 0.3, 1, np.uint8)
        _fill_blobs(rng, blobs, offsets)
        return blobs, offsets, None

    name = f"blobs-{samples}-{mean_bytes}-{seed}"
    values, offsets, _ = _cached(name, build)
    return Corpus(BLOB_COLUMNS, values, offsets, None, _folder(name))
