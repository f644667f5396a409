"""`Stream(name=...)`: the name keys the stream's metrics; unnamed streams keep their position;
two streams of one dataset cannot share a key."""

from __future__ import annotations

from pathlib import Path

import pytest

from streaming import Stream, StreamingDataLoader, StreamingDataset
from streaming.errors import PlanError
from tests.support.datasets import write_ids

SECOND = 10_000


@pytest.fixture(scope="module")
def two_folders(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("names")
    return write_ids(root / "a", 200), write_ids(root / "b", 100, start=SECOND)


def test_named_streams_key_the_loader_metrics(two_folders):
    a, b = two_folders
    ds = StreamingDataset(streams=[Stream(local=a, proportion=0.75, name="web"),
                                   Stream(local=b, proportion=0.25, name="code")],
                          epoch_size=200, batch_size=10, shuffle=True)
    loader = StreamingDataLoader(ds, batch_size=10, num_workers=0)
    ids = [i for batch in loader for i in batch["id"].tolist()]
    m = loader.metrics()
    assert m["stream/web/samples"] == sum(i < SECOND for i in ids)
    assert m["stream/code/samples"] == sum(i >= SECOND for i in ids)
    assert m["stream/code/target_share"] == pytest.approx(0.25)
    assert not any(key.startswith(("stream/0/", "stream/1/")) for key in m)


def test_unnamed_streams_keep_their_position_beside_named_ones(two_folders):
    a, b = two_folders
    ds = StreamingDataset(streams=[Stream(local=a), Stream(local=b, name="code")])
    for _ in ds:
        pass
    m = ds.metrics()
    assert m["stream/0/samples"] == 200 and m["stream/code/samples"] == 100


@pytest.mark.parametrize("names", [("web", "web"), ("1", None)])
def test_two_streams_with_one_key_are_refused(two_folders, names):
    a, b = two_folders
    with pytest.raises(PlanError, match="both named"):
        StreamingDataset(streams=[Stream(local=a, name=names[0]), Stream(local=b, name=names[1])])


@pytest.mark.parametrize("name", ["", "  ", 3])
def test_a_name_must_be_a_non_empty_string(two_folders, name):
    with pytest.raises(PlanError, match="`name` must be a non-empty string"):
        Stream(local=two_folders[0], name=name)
