"""Start-up of packed and token-weighted datasets over remote streams (real moto S3 on loopback,
behind a proxy that answers each request after a delay, as a distant store does): the
sample-length side files (one per shard) are fetched at once, in a bounded number of threads,
each stream's index once, and a missing side file is a typed error that names it."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

from streaming import StreamingDataset
from streaming.dataset import lengths as lengths_module
from streaming.dataset.lengths import load_lengths
from streaming.errors import ObjectNotFoundError
from streaming.stream import Stream
from tests.support.datasets import upload_dir, write_tokens

STREAMS = 3
SAMPLES = 40
DELAY = 1.0  # seconds the proxy waits before answering each request


@pytest.fixture(scope="module")
def bucket(s3_server, tmp_path_factory) -> tuple[str, Path, list[np.ndarray]]:
    """(bucket, local root, lengths): streams `t0/`.. of SAMPLES token samples in several
    shards, each shard with its side file; `gone/` is `t0/` without its second side file."""
    root = tmp_path_factory.mktemp("tokens")
    client = s3_server.client()
    name = s3_server.make_bucket()
    sizes = []
    for k in range(STREAMS):
        sizes.append(write_tokens(root / f"t{k}", SAMPLES, start=1000 * k, seed=k,
                                  size_limit=1 << 13))
        upload_dir(client, name, f"t{k}", root / f"t{k}")
    upload_dir(client, name, "gone", root / "t0")
    client.delete_object(Bucket=name, Key="gone/shard.00001.mds.lengths")
    return name, root, sizes


def _gets(proxy, suffix: str) -> dict[str, list[float]]:
    """Arrival times of the GETs whose path ends with `suffix`, by path."""
    out: dict[str, list[float]] = {}
    for r in proxy.log:
        if r.method == "GET" and r.path.endswith(suffix):
            out.setdefault(r.path, []).append(r.at)
    return out


def _shards(root: Path) -> int:
    return len(list(root.glob("shard.*.mds.lengths")))


def test_side_files_are_fetched_at_once(s3_env, bucket, fault_proxy, tmp_path,
                                        monkeypatch) -> None:
    name, root, sizes = bucket
    assert _shards(root / "t0") >= 3
    proxy = fault_proxy(delay=DELAY)
    monkeypatch.setenv("S3_ENDPOINT_URL", proxy.endpoint)
    ds = StreamingDataset(remote=f"s3://{name}/t0", local=str(tmp_path / "c"), batch_size=4)
    np.testing.assert_array_equal(load_lengths(ds, "tokens"), sizes[0])
    gets = _gets(proxy, ".lengths")
    assert len(gets) == _shards(root / "t0")
    assert all(len(at) == 1 for at in gets.values()), gets
    arrivals = sorted(at[0] for at in gets.values())
    # One after the other, the last would arrive (shards - 1) * DELAY after the first.
    assert arrivals[-1] - arrivals[0] < DELAY, arrivals
    # Fetched now, they are read from the cache folder the next time.
    np.testing.assert_array_equal(load_lengths(ds, "tokens"), sizes[0])
    assert sum(len(at) for at in _gets(proxy, ".lengths").values()) == len(gets)


def test_the_side_fetches_in_flight_are_bounded(s3_env, bucket, fault_proxy, tmp_path,
                                                monkeypatch) -> None:
    name, _, sizes = bucket
    proxy = fault_proxy(delay=DELAY)
    monkeypatch.setenv("S3_ENDPOINT_URL", proxy.endpoint)
    monkeypatch.setattr(lengths_module, "SIDE_FETCHES", 2)
    ds = StreamingDataset(remote=f"s3://{name}/t0", local=str(tmp_path / "c"), batch_size=4)
    np.testing.assert_array_equal(load_lengths(ds, "tokens"), sizes[0])
    arrivals = sorted(at[0] for at in _gets(proxy, ".lengths").values())
    # Two at once: the third request waits for one of the first two answers.
    assert arrivals[1] - arrivals[0] < DELAY, arrivals
    assert arrivals[2] - arrivals[0] >= DELAY * 0.9, arrivals


def test_a_token_mix_fetches_each_index_once_and_everything_at_once(
        s3_env, bucket, fault_proxy, tmp_path, monkeypatch) -> None:
    name, root, _ = bucket
    proxy = fault_proxy(delay=DELAY)
    monkeypatch.setenv("S3_ENDPOINT_URL", proxy.endpoint)
    shares = [0.5, 0.3, 0.2]
    remote = StreamingDataset(
        streams=[Stream(remote=f"s3://{name}/t{k}", local=str(tmp_path / f"c{k}"),
                        proportion=shares[k]) for k in range(STREAMS)],
        mix_unit="tokens", epoch_size=90, batch_size=4)
    indexes = _gets(proxy, "index.json")
    assert sorted(indexes) == [f"/{name}/t{k}/index.json" for k in range(STREAMS)]
    assert all(len(at) == 1 for at in indexes.values()), indexes
    assert max(at[0] for at in indexes.values()) - min(at[0] for at in indexes.values()) < DELAY
    sides = _gets(proxy, ".lengths")
    assert len(sides) == sum(_shards(root / f"t{k}") for k in range(STREAMS))
    assert max(at[0] for at in sides.values()) - min(at[0] for at in sides.values()) < DELAY
    # The same mix as the same streams read in place.
    local = StreamingDataset(
        streams=[Stream(local=str(root / f"t{k}"), proportion=shares[k])
                 for k in range(STREAMS)], mix_unit="tokens", epoch_size=90, batch_size=4)
    assert [s.choose for s in remote.streams] == [s.choose for s in local.streams]
    assert [int(s["id"]) for s in remote] == [int(s["id"]) for s in local]


def test_a_missing_side_file_is_named_without_waiting_for_a_stalled_one(
        s3_env, bucket, fault_proxy, tmp_path, monkeypatch) -> None:
    name, _, _ = bucket
    proxy = fault_proxy(fail_keys=[f"/{name}/gone/shard.00002.mds.lengths"],
                        fail_with="stall", stall_seconds=20.0)
    monkeypatch.setenv("S3_ENDPOINT_URL", proxy.endpoint)
    ds = StreamingDataset(remote=f"s3://{name}/gone", local=str(tmp_path / "c"), batch_size=4)
    started = time.monotonic()
    with pytest.raises(ObjectNotFoundError, match=r"gone/shard\.00001\.mds\.lengths"):
        load_lengths(ds, "tokens")
    assert time.monotonic() - started < 10.0
    assert proxy.count("GET", f"/{name}/gone/shard.00002.mds.lengths") == 1  # under way
    assert not list((tmp_path / "c").glob("shard.00001.mds.lengths*"))
    proxy.close()  # the stalled fetch fails now: no thread of this test outlives it
    for thread in threading.enumerate():
        if thread.name.startswith("streaming-lengths"):
            thread.join(60)
            assert not thread.is_alive()
