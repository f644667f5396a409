"""The node's shared cache table: its named words (the node's limit and download count are the
smallest that live readers ask for) and a foreign layout refused."""

from __future__ import annotations

import uuid

from streaming.cache import table as tb


def test_the_node_limit_and_downloads_are_the_smallest_live_asks():
    table = tb.CacheTable.open(uuid.uuid4().hex[:12], 8, slots=4)
    try:
        assert table.node_limit is None and table.node_downloads is None
        with table.locked():
            a = table.claim_slot(lambda shard: None)
            b = table.claim_slot(lambda shard: None)
            table.ask(a, 5000, 0)  # 0: no wish
            table.ask(b, 3000, 6)
        assert (table.node_limit, table.node_downloads) == (3000, 6)
        assert table.slots[b, tb.ASKED_LIMIT] == 3000 and table.horizon_versions[b] == 0
        with table.locked():
            table.free_slot(b)  # its wishes leave with it
        assert (table.node_limit, table.node_downloads) == (5000, None)
        table.other_bytes = 77
        assert table.used() == 77 and int(table.segment.array[tb.OTHER_BYTES]) == 77
    finally:
        table.close()
