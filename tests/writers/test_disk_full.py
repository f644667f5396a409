"""A full disk while writing: a typed error naming the folder and the bytes needed, and no
complete orphan shards left behind without an index (the writer removes what it wrote)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

import streaming.util.atomic
import writers.shard_publish
from streaming.errors import DiskFullError, StreamingError
from writers.mds import MDSWriter


def _fill_disk_after(monkeypatch, module, name: str, successes: int) -> None:
    real = getattr(module, name)
    calls = {"n": 0}

    def write(handle, data):
        calls["n"] += 1
        if calls["n"] > successes:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real(handle, data)

    monkeypatch.setattr(module, name, write)


def _write(out: Path, count: int = 400) -> None:
    with MDSWriter(columns={"id": "int", "blob": "bytes"}, out=out, size_limit=2000,
                   max_workers=2) as writer:
        for i in range(count):
            writer.write({"id": i, "blob": bytes(100)})


def test_disk_full_while_writing_shards(tmp_path, monkeypatch):
    _fill_disk_after(monkeypatch, writers.shard_publish, "write_sliced", 3)
    out = tmp_path / "out"
    with pytest.raises(DiskFullError) as caught:
        _write(out)
    error = caught.value
    assert isinstance(error, OSError) and isinstance(error, StreamingError)
    assert error.errno == errno.ENOSPC
    assert str(out) in str(error) and "bytes" in str(error)
    assert sorted(p.name for p in out.iterdir()) == []


def test_disk_full_while_writing_the_index(tmp_path, monkeypatch):
    _fill_disk_after(monkeypatch, streaming.util.atomic, "write_sliced", 0)
    out = tmp_path / "out"
    with pytest.raises(DiskFullError, match=r"index\.json"):
        _write(out, 50)
    assert sorted(p.name for p in out.iterdir()) == []
