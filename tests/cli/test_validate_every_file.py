"""`streaming validate` checks every file the index names: a corrupt compressed shard is reported
even when a sound decompressed copy sits beside it, with or without recorded hashes."""

from __future__ import annotations

from pathlib import Path

import pytest

from streaming.format.compression import decompress_file
from streaming.format.index import read_index
from tests.support.datasets import write_ids


@pytest.mark.parametrize("hashes", [["sha1"], None])
def test_a_corrupt_zstd_beside_a_sound_raw_copy_is_reported(cli, tmp_path: Path, hashes) -> None:
    out = write_ids(tmp_path / "ds", 200, compression="zstd", hashes=hashes)
    index = read_index(out / "index.json")
    for k in range(index.num_shards):  # what a reader leaves: raw copies beside the zips
        decompress_file(out / index.zip_basenames[k], out / index.basenames[k],
                        index.compression[k], expected_size=int(index.raw_bytes[k]))
    assert cli("validate", out).code == 0
    zipped = out / index.zip_basenames[1]
    data = bytearray(zipped.read_bytes())
    data[len(data) // 2] ^= 0xFF  # same size, other bytes
    zipped.write_bytes(bytes(data))
    ran = cli("validate", out)
    assert ran.code != 0, ran.out
    assert index.zip_basenames[1] in ran.out + ran.err
