"""OpenShards keeps at most `capacity` readers open, least recently used closed first, and
turns running out of descriptors into a TooManyOpenFilesError naming the limit."""

from __future__ import annotations

import errno

import pytest

from streaming.errors import TooManyOpenFilesError
from streaming.format.shard import ShardReader
from streaming.open_shards import OpenShards, default_capacity, open_file_limit
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

    shards = OpenShards(open_reader, capacity=3)
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
        OpenShards(no_more).get(7)


def test_default_capacity_leaves_room():
    assert 32 <= default_capacity() <= open_file_limit()
