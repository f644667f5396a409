"""Folders filled from a remote carry the cache marker; source folders never do."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from streaming.cache.folder.cache_marker import is_cache
from streaming.cache.folder.file_names import CACHE_MARKER
from streaming.dataset.streaming_dataset import StreamingDataset
from writers.mds import MDSWriter


def _write(out: Path, count: int = 40) -> None:
    with MDSWriter(columns={"id": "int", "x": "ndarray:int32"}, out=out, compression="zstd",
                   size_limit="1kb") as writer:
        for i in range(count):
            writer.write({"id": i, "x": np.arange(i % 7 + 1, dtype=np.int32)})


def test_remote_fills_a_marked_cache_and_sources_stay_unmarked(tmp_path: Path):
    source, cache = tmp_path / "source", tmp_path / "cache"
    _write(source)
    remote = StreamingDataset(remote=source.as_uri(), local=str(cache))
    assert [remote[i]["id"] for i in range(3)] == [0, 1, 2]
    assert is_cache(cache) and not is_cache(source)
    remote.close()

    in_place = StreamingDataset(local=str(source))
    assert in_place[5]["id"] == 5
    assert not (source / CACHE_MARKER).exists()
    in_place.close()

    cli = [sys.executable, "-m", "streaming.cli", "cache", "clear"]
    refused = subprocess.run([*cli, str(source)], capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and "marker" in refused.stderr
    cleared = subprocess.run([*cli, str(cache)], capture_output=True, text=True, timeout=60)
    assert cleared.returncode == 0, cleared.stderr
    assert not list(cache.glob("shard.*")) and list(source.glob("shard.*"))
