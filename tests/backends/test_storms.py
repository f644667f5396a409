"""Throttling storms on every object store (S3, GCS, Azure, HTTP): for a few seconds every
request is refused (503 with and without Retry-After, 429, reset connections). The epoch still
returns exactly the local samples, the node sends no more requests per second during the storm
than before it, and no request comes back sooner than the Retry-After it was given."""

from __future__ import annotations

from itertools import pairwise
from pathlib import Path

import pytest

from streaming import StreamingDataset
from tests.support.datasets import write_dataset
from tests.support.epochs import loader_epoch, whole_sample
from tests.support.faultproxy import FaultProxy, Storm

pytestmark = pytest.mark.slow

SAMPLES = 400
STORMS = {"503-retry-after": ("503", 1.0), "503": ("503", None), "429": ("429", 0.5),
          "reset": ("reset", None)}
CONFIG = dict(batch_size=8, shuffle=True, shuffle_seed=2, num_canonical_nodes=1)


@pytest.fixture(scope="session")
def storm_source(tmp_path_factory) -> Path:
    """A zstd dataset of ~25 small shards."""
    folder = tmp_path_factory.mktemp("storm-src") / "d"
    write_dataset(folder, SAMPLES, size_limit=6_000)
    return folder


@pytest.fixture(scope="session")
def storm_epoch(storm_source) -> list:
    """The samples of one epoch read locally."""
    return loader_epoch(StreamingDataset(local=str(storm_source), **CONFIG), 2, whole_sample)


@pytest.fixture(scope="session")
def storm_space(store, storm_source) -> str:
    space = store.space()
    store.put_dir(space, "d", storm_source)
    return space


def _rates(proxy: FaultProxy, storm: Storm) -> tuple[float, float]:
    """Requests per second from the first shard request to the storm, and during the storm."""
    start, end = storm.window()
    first = min(r.at for r in proxy.log if storm.keys in r.path)
    return (proxy.requests_between(first, start) / (start - first),
            proxy.requests_between(start, end) / storm.seconds)


def _early_returns(proxy: FaultProxy, retry_after: float) -> list[tuple[str, float]]:
    """(path, gap) of every request that came sooner than `retry_after` after a refusal of the
    same object that carried that Retry-After."""
    by_path: dict[str, list] = {}
    for request in proxy.log:
        by_path.setdefault(request.path, []).append(request)
    return [(path, b.at - a.at) for path, requests in by_path.items()
            for a, b in pairwise(requests)
            if a.fault in ("503", "429") and b.at - a.at < retry_after - 0.02]


@pytest.mark.parametrize("kind", STORMS)
def test_a_storm_changes_no_sample_and_slows_the_node_down(store_env, storm_space, storm_epoch,
                                                           proxy_for, tmp_path, kind):
    fault, retry_after = STORMS[kind]
    storm = Storm(after=10, seconds=1.0, fault=fault, keys="shard.")
    proxy = proxy_for(storm=storm, retry_after=retry_after, delay=0.02)
    remote = StreamingDataset(remote=store_env.url(storm_space, "d", via=proxy),
                              local=str(tmp_path / "cache"), **CONFIG)
    got = loader_epoch(remote, 2, whole_sample)
    assert got == storm_epoch and len(got) == SAMPLES
    assert proxy.injected[fault] > 0, proxy.injected
    before, during = _rates(proxy, storm)
    assert during <= before, (before, during, proxy.injected)
    if retry_after is not None:
        assert _early_returns(proxy, retry_after) == []
