"""This process's mappings of node cache tables: one per table and process, shared by the
process's threads (a forked child maps the table again under its own pid)."""

from __future__ import annotations

import os
from collections.abc import Callable

from streaming.cache.table.node_table import CacheTable
from streaming.util.fork_safe_lock import ForkSafeLock

_tables: dict[tuple[int, str], CacheTable] = {}
_tables_lock = ForkSafeLock()


def shared_table(token: str, num_shards: int,
                 init: Callable[[CacheTable], None]) -> CacheTable:
    """This process's mapping of the node table `token`, opened (or created, then filled by
    `init`) on first use.

    Args:
        token: the table's name (see `CacheTable.open`).
        num_shards: the shards the table describes.
        init: fills a table this call creates.
    """
    key = (os.getpid(), token)
    with _tables_lock:
        table = _tables.get(key)
        if table is None:
            table = _tables[key] = CacheTable.open(token, num_shards, init=init)
        return table


def drop_table(token: str) -> None:
    """Unmap this process's table `token`, and remove it from shared memory when no other
    process maps it (the next reader then creates it again from what is on disk). Called
    under the table's file lock.

    Args:
        token: the table's name.
    """
    # No _tables_lock here: shared_table takes the two locks the other way round.
    table = _tables.pop((os.getpid(), token), None)
    if table is not None:
        table.close()


def forget_table(token: str, table: CacheTable) -> None:
    """Unmap `table`, this process's mapping of `token`, found removed from the node (the
    next `shared_table` maps the node's table again); a mapping already replaced is left to
    whoever replaced it.

    Args:
        token: the table's name.
        table: the mapping found removed.
    """
    with _tables_lock:
        key = (os.getpid(), token)
        if _tables.get(key) is not table:
            return
        del _tables[key]
    table.close()
