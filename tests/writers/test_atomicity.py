"""A failed or killed writer never leaves an index.json naming a missing or partial shard."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

import writers.mds
from streaming.dataset.local_dataset import LocalDataset
from streaming.errors import DeadlineExceeded
from writers.mds import MDSWriter

REPO = Path(__file__).resolve().parents[2]
COLUMNS = {"id": "int", "blob": "bytes"}


def _samples(count: int, size: int = 300):
    return ({"id": i, "blob": bytes([i % 251]) * size} for i in range(count))


def _assert_index_consistent(out: Path) -> int:
    """Every shard the index names exists with the recorded size; returns the sample count."""
    index = json.loads((out / "index.json").read_text())
    for shard in index["shards"]:
        info = shard["zip_data"] or shard["raw_data"]
        assert (out / info["basename"]).stat().st_size == info["bytes"]
    return len(LocalDataset(out))


class Boom(RuntimeError):
    pass


def test_error_in_with_block_writes_no_index(tmp_path: Path):
    out = tmp_path / "ds"
    with MDSWriter(columns=COLUMNS, out=out, size_limit=2048) as writer:
        for sample in _samples(50):
            writer.write(sample)
    assert _assert_index_consistent(out) == 50
    with pytest.raises(Boom), MDSWriter(
        columns=COLUMNS, out=out, size_limit=2048, exist_ok=True
    ) as writer:
        for sample in _samples(100):
            writer.write(sample)
        raise Boom
    assert not (out / "index.json").exists()
    assert list(out.glob(".*tmp")) == []


def test_worker_error_surfaces_and_blocks_the_index(tmp_path: Path, monkeypatch):
    real = writers.mds.write_shard
    calls = []

    def flaky(directory, basename, *args):
        calls.append(basename)
        if basename == "shard.00002.mds":
            raise OSError(28, "No space left on device")
        return real(directory, basename, *args)

    monkeypatch.setattr(writers.mds, "write_shard", flaky)
    out = tmp_path / "ds"
    writer = MDSWriter(columns=COLUMNS, out=out, size_limit=1024, max_workers=1)
    with pytest.raises(OSError, match="No space"):
        for sample in _samples(10_000):
            writer.write(sample)
    assert 3 <= len(calls) < 40  # surfaced at a write soon after the failure, not at the end
    with pytest.raises(OSError, match="No space"):
        writer.finish()
    assert not (out / "index.json").exists()


def test_worker_error_surfaces_at_finish(tmp_path: Path, monkeypatch):
    def broken(*args):
        raise OSError(5, "I/O error")

    monkeypatch.setattr(writers.mds, "write_shard", broken)
    writer = MDSWriter(columns=COLUMNS, out=tmp_path / "ds")
    writer.write({"id": 1, "blob": b""})
    with pytest.raises(OSError, match="I/O error"):
        writer.finish()
    assert not (tmp_path / "ds" / "index.json").exists()


_LOOP = textwrap.dedent(
    """
    import sys
    import time
    from writers.mds import MDSWriter
    out, rounds = sys.argv[1], 0
    while True:
        rounds += 1
        with MDSWriter(columns={"id": "int", "blob": "bytes"}, out=out, size_limit=4096,
                       exist_ok=True, compression="zstd" if rounds % 2 else None) as w:
            for i in range(200 + 37 * (rounds % 5)):
                w.write({"id": i, "blob": bytes([i % 251]) * (i % 700)})
        print(rounds, flush=True)
        time.sleep(0.02)  # so a kill often lands while a complete index is published
    """
)


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.3, 0.7, 1.1, 1.6])
def test_sigkill_never_leaves_a_dangling_index(tmp_path: Path, delay: float):
    out = tmp_path / "ds"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-c", _LOOP, str(out)], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "1", "writer subprocess did not start"
        time.sleep(delay)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    if (out / "index.json").exists():
        assert _assert_index_consistent(out) in {200 + 37 * (r % 5) for r in range(5)}


def test_a_hung_shard_thread_hits_the_deadline(tmp_path: Path, monkeypatch):
    release = threading.Event()

    def hang(*args):
        release.wait(30)
        raise OSError("stuck disk")

    monkeypatch.setattr(writers.mds, "write_shard", hang)
    writer = MDSWriter(columns=COLUMNS, out=tmp_path / "ds", timeout=0.5)
    writer.write({"id": 1, "blob": b"x"})
    start = time.monotonic()
    try:
        with pytest.raises(DeadlineExceeded, match="not all written"):
            writer.finish()
        assert time.monotonic() - start < 5
    finally:
        release.set()
    assert not (tmp_path / "ds" / "index.json").exists()
