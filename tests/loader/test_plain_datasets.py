"""StreamingDataLoader over datasets that are not ours: a map-style torch dataset, a plain
iterable one. The loader finds none of its protocols on them and loads them as torch's
DataLoader does, with DataLoader's arguments passed by position or by name."""

from __future__ import annotations

import torch
from torch.utils.data import (
    DataLoader,
    IterableDataset,
    RandomSampler,
    TensorDataset,
    default_collate,
)

from streaming import StreamingDataLoader
from streaming.loader.dataset_protocols import (
    BatchSource,
    PackedDataset,
    ResumableDataset,
    planned_by,
)


class Numbers(IterableDataset):
    """0..n-1, one tensor each."""

    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self):
        return iter(torch.arange(self.n))


def _stacked(batches) -> list[list[int]]:
    return [b[0].tolist() if isinstance(b, (list, tuple)) else b.tolist() for b in batches]


def test_a_map_style_dataset_loads_as_torch_loads_it() -> None:
    data = TensorDataset(torch.arange(10))
    assert not isinstance(data, (BatchSource, PackedDataset, ResumableDataset))
    assert planned_by(data) is data
    # by position, collate_fn the seventh: torch's, so both batch alike
    ours = StreamingDataLoader(data, 4, False, None, None, 0, default_collate, False, True)
    theirs = DataLoader(data, 4, False, None, None, 0, default_collate, False, True)
    assert ours.collate_fn is default_collate
    assert _stacked(ours) == _stacked(theirs) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert ours.state_dict() is None and ours.drop_last is True and len(ours) == 2


def test_a_sampler_a_generator_and_a_collate_fn_reach_torch() -> None:
    data = TensorDataset(torch.arange(12))
    sampled = [StreamingDataLoader(data, batch_size=3, generator=torch.Generator().manual_seed(5),
                                   sampler=RandomSampler(data,
                                                         generator=torch.Generator().manual_seed(5)),
                                   collate_fn=lambda rows: [int(r[0]) for r in rows])
               for _ in range(2)]
    first, again = (list(loader) for loader in sampled)
    assert first == again and sorted(n for batch in first for n in batch) == list(range(12))
    assert first != [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9, 10, 11]]  # the sampler shuffled


def test_a_plain_iterable_dataset_and_its_metrics() -> None:
    loader = StreamingDataLoader(Numbers(7), batch_size=3)
    assert _stacked(loader) == [[0, 1, 2], [3, 4, 5], [6]]
    metrics = loader.metrics()
    assert not any(key.startswith(("cache/", "disk/", "stream/")) for key in metrics)


def test_a_streaming_dataset_has_every_protocol_the_loader_checks(tmp_path) -> None:
    """The protocols are structural: a StreamingDataset that lost one of these methods would
    silently lose what the loader does with it (resume, fast path, metrics)."""
    from streaming import StreamingDataset
    from streaming.loader.dataset_protocols import BatchPlannedDataset, DataParallelDataset
    from streaming.observe.counters import CacheCounted, ReadCounted
    from writers import MDSWriter

    with MDSWriter(columns={"id": "int"}, out=str(tmp_path / "d")) as writer:
        for i in range(8):
            writer.write({"id": i})
    dataset = StreamingDataset(local=str(tmp_path / "d"), batch_size=2)
    for protocol in (ResumableDataset, DataParallelDataset, BatchPlannedDataset, BatchSource,
                     CacheCounted, ReadCounted):
        assert isinstance(dataset, protocol), protocol.__name__
    assert not isinstance(dataset, PackedDataset)
