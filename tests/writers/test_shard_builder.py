"""ShardBuilder: exact raw shard bytes whatever the header gap, buffer growth and reuse."""

from __future__ import annotations

import struct

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from writers.shard_builder import ShardBuilder

CONFIG = b'{"format": "mds"}'


def _expected(samples: list[bytes]) -> bytes:
    """The raw shard layout written out the obvious way."""
    header_len = 4 + 4 * (len(samples) + 1) + len(CONFIG)
    ends = np.cumsum([0, *map(len, samples)]) + header_len
    return struct.pack(f"<{len(samples) + 2}I", len(samples), *ends) + CONFIG + b"".join(samples)


def _samples(count: int, seed: int) -> list[bytes]:
    rng = np.random.default_rng(seed)
    return [rng.bytes(int(n)) for n in rng.integers(0, 40, count)]


@settings(max_examples=20)
@given(
    # Past ~1,030 samples the header outgrows the builder's initial gap (the copy path).
    counts=st.lists(st.integers(0, 2500), min_size=1, max_size=4),
    seed=st.integers(0, 1000),
    grow_sample=st.integers(0, 3),
)
def test_take_gives_exact_shards_across_reuse(counts: list[int], seed: int, grow_sample: int):
    shards = [_samples(count, seed + i) for i, count in enumerate(counts)]
    builder = ShardBuilder(CONFIG, None)
    builder._capacity = 256  # force the grow path too
    builder._start_shard()
    for number, samples in enumerate(shards):
        if grow_sample == number:
            samples = [*samples, bytes([number]) * 5000]
        for sample in samples:
            builder.add(sample)
        assert builder.samples == len(samples)
        raw, buf, count = builder.take()
        assert count == len(samples) and bytes(raw) == _expected(samples)
        assert builder.samples == 0
        raw.release()
        builder.recycle(buf)


def test_running_size_and_fits():
    builder = ShardBuilder(CONFIG, 100)
    assert builder.size == 8 + len(CONFIG)
    room = 100 - builder.size - 4
    assert builder.fits(room) and not builder.fits(room + 1)
    builder.add(b"x" * room)
    assert builder.size == 100 and not builder.fits(0)
    raw, _, _ = builder.take()
    assert len(raw) == 100
