"""Fixtures of the cache engine tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.datasets import write_dataset

EGRESS_SAMPLES = 12_000  # ~34 zstd shards of 128 KiB raw per stream


@pytest.fixture(scope="session")
def egress_sources(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    """Two dataset folders ("a", "b") of `EGRESS_SAMPLES` samples each in zstd shards of
    128 KiB raw, the remotes of the real-run egress tests."""
    root = tmp_path_factory.mktemp("egress")
    out = []
    for name in ("a", "b"):
        write_dataset(root / name, EGRESS_SAMPLES, size_limit=128 << 10)
        out.append(root / name)
    return out
