"""What a node fetches once, before its first batch, to learn the sample lengths a packed
dataset (or a token mix) needs: per stream, the side files its index records for the column,
or, when none do, every shard (scanned for the column). Pure: an index and shard sizes in,
bytes out; `streaming plan` adds them to its egress prediction."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from streaming.dataset.lengths import recorded_spec
from streaming.format.index import LENGTHS_DTYPE, DatasetIndex

LENGTH_BYTES = np.dtype(LENGTHS_DTYPE).itemsize  # per sample, in a side file or a scan's result


@dataclass(frozen=True)
class LengthsTraffic:
    """One stream's lengths traffic on one node.

    Args:
        fetched_bytes: bytes the node downloads for them (0 for a stream read in place).
        kept_bytes: bytes they leave in the stream's cache folder (the side files, or the
            scan's result), which count against `cache_limit` as the folder's other files.
        scanned: no side file records the column, so every shard is read to measure it.
    """

    fetched_bytes: int
    kept_bytes: int
    scanned: bool


def lengths_traffic(index: DatasetIndex, column: str, shard_fetch_bytes: np.ndarray,
                    downloaded: bool) -> LengthsTraffic:
    """The lengths traffic of one stream for `column`.

    Args:
        index: the stream's index.
        column: the column whose lengths the run reads (`packing_column`, `lengths_column`).
        shard_fetch_bytes: bytes a download of each of its shards moves.
        downloaded: whether the stream is read from a remote (else in place: nothing fetched,
            nothing kept in a cache folder).
    """
    spec = _spec_for(index, column)
    if not downloaded:
        return LengthsTraffic(0, 0, spec is None)
    kept = LENGTH_BYTES * int(index.num_samples)
    if spec is None:
        fetched = int(np.asarray(shard_fetch_bytes, np.int64)[index.samples_per_shard > 0].sum())
    else:
        fetched = sum(int(entry["bytes"]) for entry in spec["files"])
    return LengthsTraffic(fetched, kept, spec is None)


def records_lengths(index: DatasetIndex, column: str) -> bool:
    """Whether `index` lists side files holding the lengths of `column` (else they are scanned).

    Args:
        index: a stream's index.
        column: the column whose lengths are wanted.
    """
    return _spec_for(index, column) is not None


def _spec_for(index: DatasetIndex, column: str) -> dict | None:
    """The index's recorded lengths (validated) when they are those of `column`."""
    spec = recorded_spec(index)
    return spec if spec is not None and spec.get("column") == column else None
