"""The StatefulDataLoader the torchdata resume tests build, in the test and in the resuming
process alike."""

from __future__ import annotations

from typing import Any


def make_loader(data: str, workers: int, persistent: bool, batch_size: int,
                packing: bool = False) -> Any:
    """A torchdata StatefulDataLoader over a shuffled StreamingDataset of `data` (with
    `packing`, a PackedStreamingDataset yielding batches of 2 packs of 256 tokens)."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    from streaming import PackedStreamingDataset, StreamingDataset

    persistent = persistent and workers > 0
    if packing:
        dataset = PackedStreamingDataset(local=data, shuffle=True, packing_length=256,
                                         packs_per_batch=2)
        return StatefulDataLoader(dataset, batch_size=None, num_workers=workers,
                                  persistent_workers=persistent)
    dataset = StreamingDataset(local=data, shuffle=True, batch_size=batch_size)
    return StatefulDataLoader(dataset, batch_size=batch_size, num_workers=workers,
                              persistent_workers=persistent)


def batch_ids(batch: Any) -> list[int]:
    """The sample ids of a batch (of samples, or of packs)."""
    return (batch["sample_ids"] if "sample_ids" in batch else batch["id"]).tolist()
