"""Issue 48 item 8: a zstd shard re-encoded with one sample changed, its index entry's size
updated but its digests kept, is refused by every remote kind alike (HashMismatchError), with
the default config: a filesystem remote's shard decompressed in place is checked against the
index's digest as a download of it would be, so no wrong sample is ever returned."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from streaming.errors import HashMismatchError
from streaming.format.compression import compress, decompress
from tests.security.conftest import Tree, clean_dataset, read_epoch


def _tamper(folder: Path) -> None:
    """Change sample 1's payload inside shard 0, re-encode the shard, fix the zip's size."""
    document = json.loads((folder / "index.json").read_text())
    entry = document["shards"][0]
    zipped = folder / entry["zip_data"]["basename"]
    raw = bytearray(decompress("zstd", zipped.read_bytes()))
    one = np.full(3, 1, np.int32).tobytes()
    at = bytes(raw).index(one)
    raw[at:at + 4] = np.int32(7).tobytes()
    body = compress("zstd", bytes(raw))
    zipped.write_bytes(body)
    entry["zip_data"]["bytes"] = len(body)
    (folder / "index.json").write_text(json.dumps(document))


def test_a_re_encoded_shard_is_refused_by_every_remote_kind(tree: Tree, publish) -> None:
    source = clean_dataset(tree.root / "source")
    _tamper(source)
    remote = publish(source)
    before = tree.before()
    with pytest.raises(HashMismatchError, match="xxh64"):
        read_epoch(remote, tree.local)
    tree.assert_untouched(before)


def test_a_re_encoded_shard_is_refused_with_workers(tree: Tree) -> None:
    from streaming import StreamingDataLoader, StreamingDataset

    source = clean_dataset(tree.root / "source")
    _tamper(source)
    ds = StreamingDataset(remote=str(source), local=str(tree.local), batch_size=4)
    try:
        with pytest.raises(HashMismatchError, match="xxh64"):
            list(StreamingDataLoader(ds, batch_size=4, num_workers=2))
    finally:
        ds.close()
