"""A worker-backed StreamingDataLoader reads an iteration's first batch in the training process
and hands the rest to its workers (streaming/loader/first_batch.py): the loop sees the batches
a loader without workers gives, its state resumes exactly, and nothing of the training
process's read is alive when the workers fork."""

from __future__ import annotations

import multiprocessing.context
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest

from streaming import Stream, StreamingDataLoader, StreamingDataset
from streaming.cache.table import reader_horizon as horizon
from streaming.errors import ObjectNotFoundError
from streaming.plan import World
from tests.support.datasets import write_ids

BATCH = 8


@pytest.fixture(scope="module")
def two_streams(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("first_batch")
    return (write_ids(root / "a", 150, size_limit=600),
            write_ids(root / "b", 90, start=1000, size_limit=600, compression="zstd"))


def dataset(folders: tuple[Path, ...], **options) -> StreamingDataset:
    """A dataset over `folders` read in place (with `streams=None`, as `options` say)."""
    options.setdefault("batch_size", BATCH)
    options.setdefault("streams", [Stream(local=str(f)) for f in folders])
    return StreamingDataset(**options)


def batches(loader: StreamingDataLoader, stop: int | None = None) -> list[list[int]]:
    """The ids of each batch of one pass (of its first `stop` batches)."""
    out = []
    for batch in loader:
        out.append(batch["id"].tolist())
        if len(out) == stop:
            break
    return out


def epochs(folders, workers: int, *, here: bool = True, drop_last: bool = False,
           state: dict | None = None, count: int = 2, **options) -> tuple[list, int]:
    """`count` passes of a loader over a fresh dataset, and the rows the training process
    read itself."""
    ds = dataset(folders, **options)
    try:
        if state is not None:
            ds.load_state_dict(state)
        loader = StreamingDataLoader(ds, batch_size=BATCH, num_workers=workers,
                                     drop_last=drop_last)
        loader.first_batch_in_process = here
        return [batches(loader) for _ in range(count)], ds.read_tally().rows
    finally:
        ds.close()


@pytest.mark.parametrize(("method", "shuffle", "drop_last"), [
    ("random", True, False), ("random", False, True), ("stratified", True, True),
    ("per_stream", True, False), ("device_per_stream", True, False)])
def test_the_loop_sees_the_batches_of_a_loader_without_workers(two_streams, method, shuffle,
                                                                drop_last) -> None:
    options = {"batching_method": method, "shuffle": shuffle, "drop_last": drop_last}
    solo, _ = epochs(two_streams, 0, **options)
    here, read_here = epochs(two_streams, 2, **options)
    assert here == solo
    assert read_here == 2 * BATCH  # the first batch of each epoch
    assert solo[0] != solo[1] or not shuffle


def test_one_worker_gets_the_same_batches_as_with_the_feature_off(two_streams) -> None:
    """One worker shares the training process's row of the epoch counter (its hand-over
    token tells them apart)."""
    here, read_here = epochs(two_streams, 1, shuffle=True)
    today, read_off = epochs(two_streams, 1, here=False, shuffle=True)
    assert here == today
    assert (read_here, read_off) == (2 * BATCH, 0)


@pytest.mark.parametrize("stop", [1, 5])
def test_a_state_after_some_batches_resumes_exactly_and_mid_epoch(two_streams, stop) -> None:
    solo, _ = epochs(two_streams, 0, shuffle=True)
    ds = dataset(two_streams, shuffle=True)
    loader = StreamingDataLoader(ds, batch_size=BATCH, num_workers=2)
    taken = batches(loader, stop)
    state = loader.state_dict()
    ds.close()
    assert taken == solo[0][:stop]
    # The resumed iteration starts mid-epoch, its first batch read in this process too.
    resumed, read_here = epochs(two_streams, 2, state=state, shuffle=True)
    assert resumed == [solo[0][stop:], solo[1]]
    assert read_here == 2 * BATCH


def test_a_state_at_the_end_of_an_epoch_starts_the_next(two_streams) -> None:
    solo, _ = epochs(two_streams, 0, shuffle=True)
    ds = dataset(two_streams, shuffle=True)
    loader = StreamingDataLoader(ds, batch_size=BATCH, num_workers=2)
    on_last = None
    for k, _ in enumerate(loader):
        if k + 1 == len(solo[0]):
            on_last = loader.state_dict()
    after = loader.state_dict()
    ds.close()
    assert on_last == after and (after["epoch"], after["sample_in_epoch"]) == (1, 0)
    resumed, _ = epochs(two_streams, 2, state=after, count=1, shuffle=True)
    assert resumed == [solo[1]]


def test_simulated_ranks_each_see_their_own_batches(two_streams) -> None:
    """Two ranks of one node in this process: each rank's batches with workers are those
    of its loader without workers."""
    for rank in range(2):
        world = World(1, 2, 1, 0, rank, 0, 1)
        solo, _ = epochs(two_streams, 0, shuffle=True, world=world)
        here, read_here = epochs(two_streams, 2, shuffle=True, world=world)
        assert here == solo and read_here == 2 * BATCH


@pytest.mark.parametrize("workers", [0, 2])
def test_pin_memory_gives_the_same_batches_and_resumes(two_streams, workers) -> None:
    """`pin_memory=True` (workers then send tensors through the pipe, not numpy through the
    ring; on a machine without an accelerator torch pins nothing and warns)."""
    solo, _ = epochs(two_streams, 0, shuffle=True)
    got, states = [], []
    for passes, stop in ((2, None), (1, 3)):
        ds = dataset(two_streams, shuffle=True)
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # torch: no accelerator to pin for
                loader = StreamingDataLoader(ds, batch_size=BATCH, num_workers=workers,
                                             pin_memory=True)
                got += [batches(loader, stop) for _ in range(passes)]
            states.append(loader.state_dict())
        finally:
            ds.close()
    assert got == [*solo, solo[0][:3]]
    resumed, _ = epochs(two_streams, workers, state=states[1], count=1, shuffle=True)
    assert resumed == [solo[0][3:]]


def _init_worker(worker: int) -> None:
    del worker


@pytest.mark.parametrize(("loader_options", "dataset_options", "read_here"), [
    ({"worker_init_fn": _init_worker}, {}, 0),  # it runs before any read
    ({}, {"epoch_size": BATCH}, 0),  # one batch: no worker would be needed first
    ({"drop_last": True}, {"epoch_size": 2 * BATCH - 1}, 0),  # one to keep
    ({}, {"batch_size": None}, 0),  # workers batch other samples than one process does
    ({"persistent_workers": True}, {}, BATCH),  # the second epoch's workers are alive
])
def test_where_the_workers_read_every_batch(two_streams, loader_options, dataset_options,
                                            read_here) -> None:
    """The batches of the feature's fallbacks are those of a loader without the feature."""
    ds = dataset(two_streams, shuffle=True, **dataset_options)
    off = dataset(two_streams, shuffle=True, **dataset_options)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # batch_size=None: the loader warns about resuming
            loader = StreamingDataLoader(ds, batch_size=BATCH, num_workers=2, **loader_options)
            today = StreamingDataLoader(off, batch_size=BATCH, num_workers=2, **loader_options)
        today.first_batch_in_process = False
        assert [batches(loader) for _ in range(2)] == [batches(today) for _ in range(2)]
        assert ds.read_tally().rows == read_here
    finally:
        ds.close()
        off.close()


class _Watched(multiprocessing.context.ForkProcess):
    """A forked DataLoader worker that notes the training process's live threads just before
    the fork."""

    threads_at_fork: list[set[str]] = []

    def start(self) -> None:
        self.threads_at_fork.append({t.name for t in threading.enumerate()})
        super().start()


class _WatchedFork(multiprocessing.context.ForkContext):
    Process = _Watched


def test_nothing_of_the_read_is_alive_or_pinned_when_the_workers_fork(tmp_path: Path) -> None:
    """A cache under a small limit: when the workers fork, the training process runs no thread
    it did not run before and its row of the node's cache table pins no shard; once every
    worker has delivered a batch, that row lists no future shard either (a stale horizon would
    keep shards the workers are done with from eviction)."""
    remote = write_ids(tmp_path / "remote", 400, size_limit=600, compression="zstd")
    options = {"remote": str(remote), "cache_limit": 24_000, "shuffle": True,
               "shuffle_block_size": 50}
    solo, _ = epochs((remote,), 0, count=1, streams=None, local=str(tmp_path / "solo"),
                     **options)
    ds = StreamingDataset(local=str(tmp_path / "cache"), batch_size=BATCH, **options)
    _Watched.threads_at_fork.clear()
    before = {t.name for t in threading.enumerate()}
    try:
        loader = StreamingDataLoader(ds, batch_size=BATCH, num_workers=2,
                                     multiprocessing_context=_WatchedFork())
        seen = []
        for batch in loader:
            seen.append(batch["id"].tolist())
            table, row = ds.cache.table, ds.cache.slot.index
            if len(seen) == 2:  # the workers run: the training process's read is over
                assert (table.pins[row] < 0).all()
            if len(seen) == 3:  # each of the 2 workers has published its own horizon
                assert (horizon.snapshot(table, np.array([row])).shards < 0).all()
        assert ds.read_tally().rows == BATCH
    finally:
        ds.close()
    assert seen == solo[0]
    assert _Watched.threads_at_fork == [before, before]


def _under_a_limit(tmp_path: Path, **options) -> tuple[Path, StreamingDataset]:
    """A zstd remote of 400 ids and a shuffled dataset over it whose cache holds a few shards."""
    remote = write_ids(tmp_path / "remote", 400, size_limit=600, compression="zstd")
    return remote, StreamingDataset(remote=str(remote), local=str(tmp_path / "cache"),
                                    batch_size=BATCH, cache_limit=24_000, shuffle=True,
                                    shuffle_block_size=50, **options)


def _listed(ds: StreamingDataset) -> np.ndarray:
    """The shards the training process's row of the node's cache table says it reads next."""
    shards = horizon.snapshot(ds.cache.table, np.array([ds.cache.slot.index])).shards
    return shards[shards >= 0]


def test_what_the_first_read_brought_stays_wanted_until_the_workers_take_over(
        tmp_path: Path) -> None:
    """Under a cache limit, the shards the training process's read brought (the first batch's
    and those prefetched after it) stay wanted in its row of the node's cache table until the
    workers have published what they read next. Withdrawn at once, they would be the first
    shards eviction takes while the workers start (another rank of the node making room), and
    would be downloaded again."""
    from streaming.cache.policy.eviction import NEVER
    from streaming.cache.table.node_table import PRESENT

    _, ds = _under_a_limit(tmp_path)
    try:
        loader = StreamingDataLoader(ds, batch_size=BATCH, num_workers=2)
        running = iter(loader)
        first = next(running)  # read here; no worker has started
        assert ds.read_tally().rows == len(first["id"]) == BATCH
        table, row = ds.cache.table, ds.cache.slot.index
        present = np.flatnonzero(table.state == PRESENT)
        wanted = horizon.snapshot(table, np.array([row])).next_use(len(table.state))
        assert len(present) > 1 and (wanted[present] < NEVER).all(), (present, wanted[present])
        assert next(running)["id"].tolist() != first["id"].tolist()
    finally:
        ds.close()


def test_a_loop_that_stops_after_the_first_batch_leaves_nothing_wanted(tmp_path: Path) -> None:
    """No worker starts, so none takes the read's shards over: leaving the iteration
    withdraws them."""
    _, ds = _under_a_limit(tmp_path)
    try:
        loader = StreamingDataLoader(ds, batch_size=BATCH, num_workers=2)
        running = iter(loader)
        next(running)
        assert len(_listed(ds))  # kept for the workers the next batch would start
        running.close()
        assert not len(_listed(ds))
    finally:
        ds.close()


def test_a_first_batch_that_fails_leaves_nothing_wanted(tmp_path: Path) -> None:
    """The read's error reaches the loop, and its horizon is withdrawn with it."""
    remote, ds = _under_a_limit(tmp_path, download_retry=0)
    try:
        for shard in remote.glob("*.mds.zstd"):
            shard.unlink()  # every shard is gone from the remote
        loader = StreamingDataLoader(ds, batch_size=BATCH, num_workers=2)
        with pytest.raises(ObjectNotFoundError, match=r"shard\.\d+\.mds\.zstd"):
            next(iter(loader))
        assert not len(_listed(ds))
    finally:
        ds.close()


def test_a_cache_under_a_limit_that_holds_shards_leaves_the_first_batch_to_the_workers(
        tmp_path: Path) -> None:
    """The first epoch starts on an empty cache and reads its first batch here; the second
    starts with the cache holding the first's shards, and its workers read every batch: a read
    here would make room before the node's other readers had said what they read next."""
    from streaming.cache.table.node_table import PRESENT

    _, ds = _under_a_limit(tmp_path)
    try:
        loader = StreamingDataLoader(ds, batch_size=BATCH, num_workers=2)
        first = batches(loader)
        assert ds.read_tally().rows == BATCH
        assert (ds.cache.table.state == PRESENT).any()  # what the first epoch left
        second = batches(loader)
        assert ds.read_tally().rows == BATCH  # none of the second epoch read here
        assert len(second) == len(first) and second != first
    finally:
        ds.close()
