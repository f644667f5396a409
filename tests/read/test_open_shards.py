"""OpenShards keeps at most `capacity` readers open, least recently used closed first, and
turns running out of descriptors into a TooManyOpenFilesError naming the limit."""

from __future__ import annotations

import errno
from types import SimpleNamespace

import pytest

from streaming.errors import TooManyOpenFilesError
from streaming.format.shard import ShardReader
from streaming.read.open_shards import OpenShards, default_capacity, open_file_limit
from writers.mds import MDSWriter


def test_capacity_bounds_open_readers(tmp_path):
    with MDSWriter(columns={"id": "int"}, out=tmp_path, size_limit=60) as writer:
        for i in range(40):
            writer.write({"id": i})
    paths = sorted(tmp_path.glob("shard.*.mds"))
    opened: list[ShardReader] = []

    def open_reader(shard: int) -> ShardReader:
        opened.append(ShardReader(paths[shard]))
        return opened[-1]

    shards = OpenShards(SimpleNamespace(open_prepared=open_reader), capacity=3)
    for shard in [0, 1, 2, 0, 3, 4]:
        assert shards.get(shard).path == paths[shard]
    assert len(shards) == 3 and 0 in shards and 1 not in shards and 2 not in shards
    assert len(opened) == 5  # 0 was still open when asked again
    first = opened[1]
    assert first.get(0) is not None  # a closed reader re-opens by itself when still used
    shards.close()
    assert len(shards) == 0


def test_running_out_of_descriptors_names_the_limit():
    def no_more(shard: int) -> ShardReader:
        raise OSError(errno.EMFILE, "Too many open files")

    with pytest.raises(TooManyOpenFilesError, match=rf"{open_file_limit()}.*ulimit -n"):
        OpenShards(SimpleNamespace(open_prepared=no_more)).get(7)


def test_default_capacity_leaves_room():
    assert 32 <= default_capacity() <= open_file_limit()


@pytest.fixture
def small_groups(monkeypatch):
    """Chunk reads grouped two shards at a time (as under a tiny open-file limit)."""
    import streaming.read.chunk_copy as chunk_copy

    monkeypatch.setattr(chunk_copy, "MIN_CAPACITY", 1)
    monkeypatch.setattr(chunk_copy, "default_capacity", lambda: 4)


def _texts(out, count: int = 120) -> list[str]:
    texts = [f"sample {i} " + "é" * (i % 7) for i in range(count)]
    with MDSWriter(columns={"id": "int", "text": "str"}, out=out, size_limit=300) as writer:
        for i, text in enumerate(texts):
            writer.write({"id": i, "text": text})
    return texts


def test_grouped_chunk_reads_return_the_plan_order(tmp_path, small_groups):
    from streaming import StreamingDataset

    texts = _texts(tmp_path / "ds")
    dataset = StreamingDataset(local=str(tmp_path / "ds"), batch_size=10, shuffle=True)
    try:
        batches = list(dataset.iter_batches(10))
        planned = dataset.worker_sample_ids(0, 0)
    finally:
        dataset.close()
    ids = [int(i) for batch in batches for i in batch["id"]]
    assert ids == [int(i) for i in planned if i >= 0] and sorted(ids) == list(range(len(texts)))
    assert [t for batch in batches for t in batch["text"]] == [texts[i] for i in ids]


def test_grouped_chunk_read_explains_a_corrupt_sample(tmp_path, small_groups):
    from streaming import StreamingDataset
    from streaming.errors import ShardCorruptError

    _texts(tmp_path / "ds")
    shard = tmp_path / "ds" / "shard.00003.mds"
    data = bytearray(shard.read_bytes())
    at = data.index("é".encode())
    data[at] = 0xFF  # no longer UTF-8
    shard.write_bytes(bytes(data))
    dataset = StreamingDataset(local=str(tmp_path / "ds"), batch_size=10, shuffle=True)
    try:
        with pytest.raises(ShardCorruptError, match=r"shard\.00003\.mds"):
            list(dataset.iter_batches(10))
    finally:
        dataset.close()
