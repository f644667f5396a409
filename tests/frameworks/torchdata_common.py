"""The StatefulDataLoader the torchdata resume tests build, in the test and in the resuming
process alike."""

from __future__ import annotations

from typing import Any


def make_loader(data: str, workers: int, persistent: bool, batch_size: int) -> Any:
    """A torchdata StatefulDataLoader over a shuffled StreamingDataset of `data`."""
    from torchdata.stateful_dataloader import StatefulDataLoader

    from streaming import StreamingDataset

    dataset = StreamingDataset(local=data, shuffle=True, batch_size=batch_size)
    return StatefulDataLoader(dataset, batch_size=batch_size, num_workers=workers,
                              persistent_workers=persistent and workers > 0)
