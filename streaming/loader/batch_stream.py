"""BatchStream: a dataset's collated batches as the iterable DataLoader workers read, so they
hand over whole batches (through shared-memory rings when they send numpy batches)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from torch.utils.data import IterableDataset

from streaming.coord.world_detect import worker_slot
from streaming.loader import worker_ring as transport
from streaming.loader.dataset_protocols import BatchSource


class BatchStream(IterableDataset):
    """A dataset's `iter_batches(batch_size, drop_last)` as an iterable of ready batches, so
    DataLoader workers hand over whole collated batches. Attributes (state_dict, len...) are
    the wrapped dataset's."""

    def __init__(self, dataset: BatchSource, batch_size: int, drop_last: bool) -> None:
        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.numpy = False  # numpy batches (set by the loader when workers send them)
        # the shared-memory rings workers send batches through (set by the loader)
        self.ring: transport.RingAddress | None = None

    def __iter__(self) -> Iterator[Any]:
        info = worker_slot()
        if not (self.numpy and self.ring and info is not None):
            return self.dataset.iter_batches(self.batch_size, self.drop_last, numpy=self.numpy)
        # The sender copies every batch into its ring (or pickles it) before the next is read.
        batches = self.dataset.iter_batches(self.batch_size, self.drop_last, numpy=True,
                                            views=True)
        ring = self.ring
        return map(transport.sender_for(ring.token, info.id, ring.slots, ring.reader).pack,
                   batches)

    def __len__(self) -> int:
        return len(self.dataset)  # type: ignore[arg-type]  # as DataLoader asks: may raise

    def __getattr__(self, name: str) -> Any:
        if name == "dataset":  # not set yet (unpickling)
            raise AttributeError(name)
        return getattr(self.dataset, name)
