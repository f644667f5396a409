"""The files of the shards a cache holds, as the node table sees them: where each one lies, how
messages name it, which complete ones a new table adopts from disk, and clearing what a failed
or abandoned preparation left behind."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from streaming.cache.folder import disk_files as disk
from streaming.cache.prepare.preparer import ShardPreparer
from streaming.cache.table import node_table as tb
from streaming.util.confine import remove


class ShardFiles:
    """The cached shards' files on this node.

    Args:
        preparer: what fetches, decompresses and verifies each shard (and knows its paths).
        cached: mask of the shards this cache holds (the others are local-only data).
        dirs: the cache folders of the streams with a remote.
    """

    def __init__(self, preparer: ShardPreparer, cached: np.ndarray, dirs: list[str]) -> None:
        self.preparer = preparer
        self.cached = cached
        self.dirs = dirs

    def paths(self, shard: int) -> tuple[Path, Path | None]:
        """The shard's raw file and its compressed file (None: it is stored raw).

        Args:
            shard: global shard index.
        """
        return self.preparer.raw_path(shard), self.preparer.zip_path(shard)

    def bytes_on_disk(self, shard: int) -> int:
        """What the shard's raw and compressed files occupy now.

        Args:
            shard: global shard index.
        """
        raw, zipped = self.paths(shard)
        return disk.size(raw) + (disk.size(zipped) if zipped else 0)

    def describe(self, shard: int) -> str:
        """`shard 3 (s3://bucket/ds/shard.00003.mds.zstd)`, for messages.

        Args:
            shard: global shard index.
        """
        facts = self.preparer.facts
        stream = self.preparer.streams[int(facts.stream_of_shard[shard])]
        name = facts.zip_basenames[shard] or facts.basenames[shard]
        where = stream.remote_dir or stream.local_dir
        return f"shard {shard} ({str(where).rstrip('/')}/{name})"

    def scan(self, table: tb.CacheTable) -> None:
        """Fill a new node table from disk: adopt complete shards, drop orphans, and count every
        other file in the folders against the limit.

        Args:
            table: the table just created (nobody else sees it yet).
        """
        facts = self.preparer.facts
        by_folder: dict[Path, list[int]] = {}
        for shard in np.flatnonzero(self.cached).tolist():  # part folders: `0/shard...` etc.
            by_folder.setdefault(self.preparer.raw_path(shard).parent, []).append(shard)
        for folder, shards in by_folder.items():
            files = disk.listing(folder)
            leaf = {s: (Path(facts.basenames[s]).name,
                        Path(facts.zip_basenames[s]).name if facts.zip_basenames[s] else None)
                    for s in shards}
            root = self.preparer.root(shards[0])
            for name in disk.sweep_orphans(root, folder, files, dict(leaf.values())):
                files.pop(name, None)
            for shard in shards:
                raw_name, zip_name = leaf[shard]
                raw = files.get(raw_name, (-1, 0.0))[0]
                if raw == int(facts.raw_bytes[shard]):
                    table.state[shard] = tb.PRESENT
                    table.disk[shard] = raw + (files.get(zip_name, (0, 0.0))[0] if zip_name
                                               else 0)
                elif zip_name and zip_name in files:
                    remove(root, folder / zip_name)
        table.other_bytes = (max(disk.folder_bytes(self.dirs) - int(table.disk.sum()), 0)
                             + sum(stream.side_bytes_to_come()
                                   for stream in self.preparer.streams))

    def recover(self, table: tb.CacheTable, shard: int) -> None:
        """Put a shard whose preparation failed or whose preparer died back to absent, with its
        reservation returned and its temp files removed (caller holds the table's lock).

        Args:
            table: the node table.
            shard: global shard index.
        """
        table.state[shard] = tb.ABSENT
        table.reserved[shard] = 0
        table.owner[shard] = 0
        disk.remove_leftovers(self.preparer.root(shard), filter(None, self.paths(shard)),
                              stale_only=False)

    def unwritten(self, table: tb.CacheTable) -> int:
        """Bytes the preparations in flight reserved and have not written yet (their temp
        files hold the rest, which the disk's free space already shows).

        Args:
            table: the node table (caller holds its lock).
        """
        busy = np.flatnonzero(table.reserved > 0)
        written = sum(disk.temp_bytes(*self.paths(int(k))) for k in busy.tolist())
        return max(int(table.reserved[busy].sum()) - written, 0)
