"""A read over many row groups decodes each one as soon as it is ready: a row group still on its
way (a slow fetch) holds back only its own decoding, not the others' (they were all opened, in
shard order, before any was decoded)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from streaming import StreamingDataset
from streaming.format.parquet_shard import ParquetShardReader
from streaming.read.chunk_copy import PassReaders, decode, fetch
from streaming.stream import Stream
from tests.parquet.helpers import write_files

pytestmark = pytest.mark.timeout(60)
SLOW = 0.5  # seconds the lowest-numbered row group takes to be ready


def test_row_groups_are_decoded_while_another_is_still_coming(tmp_path: Path,
                                                              monkeypatch) -> None:
    write_files(tmp_path / "pq", files=1, rows=100, row_group=20)  # 5 row groups
    ds = StreamingDataset(streams=[Stream(remote=tmp_path / "pq", local=tmp_path / "c",
                                          format="parquet")], batch_size=10)
    rows = ds.rows
    ready: dict[int, float] = {}
    decoding: dict[str, float] = {}
    lock = threading.Lock()
    open_prepared = rows.open_prepared

    def slow_open(shard: int):
        if shard == 0:
            time.sleep(SLOW)
        reader = open_prepared(shard)
        with lock:
            ready[shard] = time.monotonic()
        return reader

    decode_group = ParquetShardReader.decode

    def timed_decode(reader: ParquetShardReader) -> None:
        with lock:
            decoding.setdefault(reader.path.name, time.monotonic())
        decode_group(reader)

    monkeypatch.setattr(rows, "open_prepared", slow_open)
    monkeypatch.setattr(ParquetShardReader, "decode", timed_decode)
    shards = np.array([1, 2, 3, 4, 0])  # row group 0 used last: its rows come after the others'
    places = np.zeros(5, np.int64)
    values = decode(fetch(shards, places, PassReaders(rows)), columns=True)
    assert values[0] == [20, 40, 60, 80, 0]  # the ids, in the order asked
    others = [t for name, t in decoding.items() if not name.endswith("rg00000")]
    assert len(others) == 4
    assert min(others) < ready[0] - SLOW / 2, (decoding, ready)
    ds.close()
