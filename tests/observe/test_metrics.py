"""Loader metrics on known runs: per-stream counts equal the streams of the samples the loop
took, data wait is large when reads are slow and small when the loop is the bottleneck, the
summary is logged every N steps, and every rank's metrics gather on rank 0."""

from __future__ import annotations

import logging
import pickle
import time
from pathlib import Path

import numpy as np
import pytest

from streaming import Stream, StreamingDataLoader, StreamingDataset
from streaming.observe.metrics import gather_metrics
from tests.support.datasets import write_ids

SECOND = 10_000  # ids of the second stream start here


@pytest.fixture(scope="module")
def two_streams(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("metrics")
    return write_ids(root / "a", 600), write_ids(root / "b", 300, start=SECOND)


def _dataset(two_streams, **kwargs) -> StreamingDataset:
    a, b = two_streams
    return StreamingDataset(streams=[Stream(local=a, proportion=0.7),
                                     Stream(local=b, proportion=0.3)],
                            epoch_size=500, batch_size=10, shuffle=True, **kwargs)


def _by_stream(ids: list[int]) -> tuple[float, float]:
    second = sum(i >= SECOND for i in ids)
    return float(len(ids) - second), float(second)


def test_per_stream_counts_are_the_streams_of_the_samples_taken(two_streams):
    loader = StreamingDataLoader(_dataset(two_streams), batch_size=10, num_workers=2)
    taken: list[int] = []
    for batch in loader:  # a whole epoch, then part of the next
        taken += batch["id"].tolist()
    for k, batch in enumerate(loader):
        taken += batch["id"].tolist()
        if k == 12:
            break
    m = loader.metrics()
    assert (m["stream/0/samples"], m["stream/1/samples"]) == _by_stream(taken)
    assert m["samples"] == len(taken) == 630 and m["batches"] == 63
    assert m["stream/0/target_share"] == pytest.approx(0.7)
    assert m["first_batch_s"] > 0 and m["samples_per_s"] > 0
    assert m["cache/misses"] == m["cache/needed_evictions"] == 0  # local streams: no cache


def test_a_dataset_iterated_directly_counts_its_streams(two_streams):
    ds = _dataset(two_streams)
    taken = [int(s["id"]) for s in ds]
    it = iter(ds)
    taken += [int(next(it)["id"]) for _ in range(37)]
    m = ds.metrics()
    assert (m["stream/0/samples"], m["stream/1/samples"]) == _by_stream(taken)
    assert m["stream/0/samples"] + m["stream/1/samples"] == 537


def test_a_dataset_iterated_directly_still_pickles_without_its_metrics(two_streams):
    """Handing it afterwards to spawned DataLoader workers pickles it: this process's metrics
    stay here, and the copy starts counting from zero."""
    ds = _dataset(two_streams)
    assert sum(1 for _ in ds) == 500
    copy = pickle.loads(pickle.dumps(ds))
    assert ds.metrics()["samples"] == 500 and copy.metrics()["samples"] == 0


class SlowRead(StreamingDataset):
    """Every sample takes a millisecond to read (a slow disk or remote)."""

    def get_item(self, sample_id: int):
        time.sleep(0.001)
        return super().get_item(sample_id)


def test_data_wait_is_most_of_the_time_when_reads_are_slow(two_streams):
    a, b = two_streams
    ds = SlowRead(streams=[Stream(local=a), Stream(local=b)], batch_size=10)
    loader = StreamingDataLoader(ds, batch_size=10, num_workers=2)
    for _ in loader:
        pass
    m = loader.metrics()
    # 900 reads of 1 ms over 2 workers: the loop, doing nothing else, waits at least 0.45 s.
    assert m["data_wait_s"] > 0.4 and m["data_wait_fraction"] > 0.5, m


def test_data_wait_is_small_when_the_loop_is_the_bottleneck(two_streams):
    a, b = two_streams
    ds = StreamingDataset(streams=[Stream(local=a), Stream(local=b)], batch_size=36)
    loader = StreamingDataLoader(ds, batch_size=36, num_workers=2)
    started = {}
    for step, _ in enumerate(loader):  # 25 steps of 60 ms of "training", batches made in ~1 ms
        if step == 2:  # the first batch came from this process, the next two as the workers
            started = loader.metrics()  # started (a wait that grows with the machine's load)
        time.sleep(0.06)
    m = loader.metrics()
    # From then on the loop hardly waits: under 10% of the wall time.
    waited = m["data_wait_s"] - started["data_wait_s"]
    assert m["batches"] == 25 and waited < 0.1 * (m["elapsed_s"] - started["elapsed_s"]), m


def test_a_summary_is_logged_every_n_steps(two_streams, monkeypatch, caplog):
    monkeypatch.setenv("STREAMING_METRICS_EVERY", "20")
    loader = StreamingDataLoader(_dataset(two_streams), batch_size=10, num_workers=0)
    with caplog.at_level(logging.INFO, logger="streaming.metrics"):
        for _ in loader:
            pass
    lines = [r.getMessage() for r in caplog.records if r.name == "streaming.metrics"]
    assert len(lines) == 50 // 20 and lines[0].startswith("loader: 20 batches")


def test_metrics_asked_between_any_two_batches_count_every_batch_so_far(
        two_streams, monkeypatch, caplog):
    """The loop counts its batches itself and tells the meter every few batches; a
    `metrics()` between two batches still counts all of them, and asking often logs no extra
    summary."""
    monkeypatch.setenv("STREAMING_METRICS_EVERY", "20")
    loader = StreamingDataLoader(_dataset(two_streams), batch_size=10, num_workers=0)
    taken: list[int] = []
    waited = 0.0
    with caplog.at_level(logging.INFO, logger="streaming.metrics"):
        for k, batch in enumerate(loader):
            taken += batch["id"].tolist()
            m = loader.metrics()
            assert (m["batches"], m["samples"]) == (k + 1, len(taken))
            assert (m["stream/0/samples"], m["stream/1/samples"]) == _by_stream(taken)
            assert m["data_wait_s"] > waited or (k == 0 and m["data_wait_s"] > 0)
            waited = m["data_wait_s"]
    assert m["recent_batches_per_s"] > 0
    lines = [r.getMessage() for r in caplog.records if r.name == "streaming.metrics"]
    assert [line.split(" batches")[0] for line in lines] == ["loader: 20", "loader: 40"]


def test_a_bad_metrics_every_is_refused(two_streams, monkeypatch):
    monkeypatch.setenv("STREAMING_METRICS_EVERY", "often")
    with pytest.raises(ValueError, match="STREAMING_METRICS_EVERY"):
        StreamingDataLoader(_dataset(two_streams), batch_size=10)


def test_metrics_gather_on_rank_zero(tmp_path):
    import torch.distributed as dist

    mine = {"samples": 3.0}
    assert gather_metrics(mine) == [mine]  # no process group
    dist.init_process_group("gloo", store=dist.FileStore(str(tmp_path / "store"), 1), rank=0,
                            world_size=1)
    try:
        assert gather_metrics(mine) == [mine]
    finally:
        dist.destroy_process_group()
    assert np.isfinite(mine["samples"])
