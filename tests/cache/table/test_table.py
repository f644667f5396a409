"""The node's shared cache table: its named words (the node's limit and download count are the
smallest that live readers ask for), and which readers count as running."""

from __future__ import annotations

import multiprocessing
import os
import time
import uuid

from streaming.cache.table import node_table as tb


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


def _claim_and_die(token: str) -> None:
    table = tb.CacheTable.open(token, 8, slots=4)
    with table.locked():
        table.claim_slot(lambda shard: None)
    os._exit(0)  # never gives the slot back


def test_a_holder_seen_running_recently_counts_as_running_until_the_look_is_old():
    token = uuid.uuid4().hex[:12]
    table = tb.CacheTable.open(token, 8, slots=4)
    try:
        with table.locked():
            mine = table.claim_slot(lambda shard: None)
        child = multiprocessing.get_context("fork").Process(target=_claim_and_die, args=(token,))
        child.start()
        child.join(30)
        dead = next(s for s in range(4) if s != mine and table.slots[s, 0] != 0)
        table.slots[dead, tb.SEEN_ALIVE] = time.monotonic_ns()  # as if just seen running
        assert table.live_slots(recent=True)[[mine, dead]].tolist() == [True, True]
        assert table.live_slots()[[mine, dead]].tolist() == [True, False]  # a look, always
        for stamp in (time.monotonic_ns() - 2 * tb.SEEN_ALIVE_NS,  # an old look
                      time.monotonic_ns() + 60 * 10**9):  # a clock that is not ours
            table.slots[dead, tb.SEEN_ALIVE] = stamp
            assert table.live_slots(recent=True)[[mine, dead]].tolist() == [True, False]
        # A look that finds the holder running is shared with every process of the node.
        table.slots[mine, tb.SEEN_ALIVE] = 0
        before = time.monotonic_ns()
        table.live_slots(recent=True)
        assert table.slots[mine, tb.SEEN_ALIVE] >= before
    finally:
        table.close()
