"""A dataset of several remote streams fetches their index.json files at once (real moto S3 on
loopback, behind a proxy that answers each request after a delay, as a distant store does), in
a bounded number of threads, and still raises the failure of the first stream in order."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from streaming import StreamingDataset
from streaming.dataset import catalog
from streaming.errors import ObjectNotFoundError
from streaming.stream import Stream
from tests.support.datasets import upload_dir, write_ids

STREAMS = 4
PER_STREAM = 30
DELAY = 1.0  # seconds the proxy waits before answering each request


@pytest.fixture(scope="module")
def bucket(s3_server, tmp_path_factory) -> str:
    """A bucket with STREAMS small datasets `s0/`..: stream k holds ids 1000 k + 0..29."""
    root = tmp_path_factory.mktemp("streams")
    client = s3_server.client()
    name = s3_server.make_bucket()
    for k in range(STREAMS):
        write_ids(root / f"s{k}", PER_STREAM, start=1000 * k)
        upload_dir(client, name, f"s{k}", root / f"s{k}")
    return name


def _streams(name: str, tmp_path: Path, prefixes: list[str]) -> list[Stream]:
    return [Stream(remote=f"s3://{name}/{p}", local=str(tmp_path / p)) for p in prefixes]


def _index_gets(proxy, name: str, prefixes: list[str]) -> list[float]:
    return sorted(r.at for r in proxy.log
                  if r.method == "GET" and r.path in {f"/{name}/{p}/index.json" for p in prefixes})


def test_remote_streams_fetch_their_indexes_at_once(s3_env, bucket, fault_proxy, tmp_path,
                                                    monkeypatch) -> None:
    proxy = fault_proxy(delay=DELAY)
    monkeypatch.setenv("S3_ENDPOINT_URL", proxy.endpoint)
    prefixes = [f"s{k}" for k in range(STREAMS)]
    ds = StreamingDataset(streams=_streams(bucket, tmp_path, prefixes), batch_size=4)
    arrivals = _index_gets(proxy, bucket, prefixes)
    assert len(arrivals) == STREAMS
    # One after the other, the last would arrive (STREAMS - 1) * DELAY after the first.
    assert arrivals[-1] - arrivals[0] < DELAY, arrivals
    ids = np.sort([int(s["id"]) for s in ds])
    assert ids.tolist() == sorted(1000 * k + i for k in range(STREAMS) for i in range(PER_STREAM))


def test_the_threads_in_flight_are_bounded(s3_env, bucket, fault_proxy, tmp_path,
                                           monkeypatch) -> None:
    proxy = fault_proxy(delay=DELAY)
    monkeypatch.setenv("S3_ENDPOINT_URL", proxy.endpoint)
    monkeypatch.setattr(catalog, "INDEX_FETCHES", 2)
    prefixes = [f"s{k}" for k in range(STREAMS)]
    StreamingDataset(streams=_streams(bucket, tmp_path, prefixes), batch_size=4)
    arrivals = _index_gets(proxy, bucket, prefixes)
    assert len(arrivals) == STREAMS
    # Two at once: the third request waits for one of the first two answers.
    assert arrivals[1] - arrivals[0] < DELAY, arrivals
    assert arrivals[2] - arrivals[0] >= DELAY * 0.9, arrivals


def test_the_first_failing_stream_in_order_is_raised(s3_env, bucket, tmp_path) -> None:
    prefixes = ["s0", "missing-a", "s1", "missing-b", "s2"]
    with pytest.raises(ObjectNotFoundError, match=r"missing-a/index\.json"):
        StreamingDataset(streams=_streams(bucket, tmp_path, prefixes), batch_size=4)


def test_a_failure_is_raised_without_waiting_for_a_stalled_fetch(s3_env, bucket, fault_proxy,
                                                                tmp_path, monkeypatch) -> None:
    proxy = fault_proxy(fail_keys=[f"/{bucket}/s0/index.json"], fail_with="stall",
                        stall_seconds=20.0)
    monkeypatch.setenv("S3_ENDPOINT_URL", proxy.endpoint)
    started = time.monotonic()
    with pytest.raises(ObjectNotFoundError, match=r"missing-a/index\.json"):
        StreamingDataset(streams=_streams(bucket, tmp_path, ["missing-a", "s0"]), batch_size=4)
    assert time.monotonic() - started < 10.0
    assert proxy.count("GET", f"/{bucket}/s0/index.json") == 1  # under way when it was raised


def test_one_at_a_time_reads_the_same_indexes(s3_env, bucket, tmp_path) -> None:
    prefixes = [f"s{k}" for k in range(STREAMS)]
    together = catalog.read_indexes(_streams(bucket, tmp_path / "a", prefixes))
    alone = catalog.read_indexes(_streams(bucket, tmp_path / "b", prefixes), at_once=1)
    assert [ix.num_samples for ix in together] == [ix.num_samples for ix in alone] \
        == [PER_STREAM] * STREAMS
    assert [ix.samples_per_shard.tolist() for ix in together] == \
        [ix.samples_per_shard.tolist() for ix in alone]


def test_indexes_copied_from_local_folders_are_read_in_the_calling_thread(tmp_path,
                                                                          monkeypatch):
    """Copying an index from a local folder is work for the CPU alone: threads would only
    contend for it (one at a time measured about twice as fast at 64 streams)."""
    folders = [write_ids(tmp_path / f"src{k}", PER_STREAM, start=1000 * k) for k in range(3)]
    threads = []
    real = Stream.index_file

    def recorded(self):
        threads.append(threading.current_thread().name)
        return real(self)

    monkeypatch.setattr(Stream, "index_file", recorded)
    streams = [Stream(remote=str(f), local=str(tmp_path / f"c{k}")) for k, f in enumerate(folders)]
    streams.append(Stream(remote=f"file://{folders[0]}", local=str(tmp_path / "file")))
    ds = StreamingDataset(streams=streams, batch_size=6)
    assert threads == [threading.main_thread().name] * 4
    assert len(ds) == 4 * PER_STREAM


def test_a_stream_resolves_its_folders_again_when_they_change(tmp_path):
    stream = Stream(remote=str(tmp_path / "a"), local=str(tmp_path / "b"), split="train")
    assert stream.remote_dir == str(tmp_path / "a" / "train")
    assert stream.local_dir == tmp_path / "b" / "train"
    stream.local = str(tmp_path / "a")  # remote == local: read in place
    assert stream.remote_dir is None
    assert stream.local_dir == tmp_path / "a" / "train"
    stream.remote, stream.split = "s3://bucket/x", None
    assert stream.remote_dir == "s3://bucket/x"
    assert stream.local_dir == tmp_path / "a"
