"""What StreamingDataLoader uses of a dataset beyond torch's `Dataset`, one protocol per
capability. The loader checks each with `isinstance` and uses it where the dataset has it; a
plain torch dataset has none and is loaded as torch's DataLoader loads it.

StreamingDataset is `ResumableDataset`, `DataParallelDataset`, `BatchPlannedDataset` and
`BatchSource`; PackedStreamingDataset is `ResumableDataset` and `PackedDataset`, the rest being
its source's (`planned_by`). The metrics' own protocols (a cache's counters, a read tally) are in
`streaming.observe.counters`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from streaming.packing.pack_stats import PackCounts, PackFill


@runtime_checkable
class ResumableDataset(Protocol):
    """A dataset whose place in its epoch the loader checkpoints: `state_dict()` of the loader
    is the dataset's after the samples the loop consumed."""

    def state_dict(self, num_samples: int | None = None, from_beginning: bool = False
                   ) -> dict[str, Any]:
        """The state after `num_samples` global samples of the current epoch."""

    def load_state_dict(self, obj: dict[str, Any], strict: bool = True) -> None:
        """Continue from `obj` at the next iteration."""


@runtime_checkable
class DataParallelDataset(Protocol):
    """A dataset that knows how many data-parallel ranks consume a step's samples each (the
    loader counts global samples as its own times that)."""

    @property
    def data_parallel_ranks(self) -> int:
        """Ranks that each consume their own samples every step."""


@runtime_checkable
class BatchPlannedDataset(Protocol):
    """A dataset that planned its epoch for a per-device `batch_size` (None: for none)."""

    batch_size: int | None


@runtime_checkable
class BatchSource(Protocol):
    """A dataset that reads whole collated batches itself (StreamingDataset's
    `iter_batches`): the loader's fast path, where its workers hand over batches."""

    def batches_supported(self) -> bool:
        """Whether `iter_batches` reads what iterating the dataset would."""

    def iter_batches(self, batch_size: int, drop_last: bool = False, *, numpy: bool = False,
                     views: bool = False, handed_on: bool = False
                     ) -> Iterator[dict[str, Any]]:
        """This worker's share of the epoch as collated batches."""


@runtime_checkable
class PackedDataset(Protocol):
    """A dataset whose batches are packs of a `source` dataset's samples: the loader reports
    pack fill instead of samples per stream, and takes the source's planned batch size, data
    parallelism, cache counters and read tally for the packed dataset's.

    Args:
        source: the dataset whose samples are packed.
    """

    source: object

    def pack_counts(self) -> PackCounts:
        """Fresh counts of pack fill."""

    def fill_from_start(self) -> Callable[[int], PackFill]:
        """The fill of the rank's first n packs of the running iteration."""


@runtime_checkable
class CacheCheckedDataset(Protocol):
    """A dataset whose cache limit depends on how many DataLoader workers read it: checked
    again once the loader knows its workers."""

    def check_cache_for_workers(self, num_workers: int) -> None:
        """Refuse a cache limit the plan cannot run in with `num_workers` readers per rank."""


def planned_by(dataset: object) -> object:
    """The dataset whose plan and reads `dataset`'s batches come from: a packed dataset's
    source, else `dataset` itself.

    Args:
        dataset: the loader's dataset.
    """
    return dataset.source if isinstance(dataset, PackedDataset) else dataset
