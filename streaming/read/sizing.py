"""How many rows one vectorised read takes: the one place that decides it, from the mean sample
size, the batch size, the cache limit and the readers taking turns along the node's order."""

from __future__ import annotations

from dataclasses import dataclass

READ_BYTES = 16 << 20  # sample bytes decoded per vectorised read (bounds the copies held)
MAX_READ = 1024  # rows per read: enough that a shuffled read still has many rows per shard
FIRST_READ = 64  # rows of a pass's first read, so its first samples come quickly


@dataclass(frozen=True)
class ReadSize:
    """Rows per vectorised read of one pass.

    Args:
        rows: rows of every read after the first.
        first: rows of the first read (at most `rows`).
    """

    rows: int = MAX_READ
    first: int = FIRST_READ


DEFAULT_SIZE = ReadSize()  # reads of MAX_READ rows, the first of FIRST_READ


def rows_per_read(mean_sample_bytes: float, multiple: int = 1, *, pinned: bool = False,
                  read_shard: int = 0, readers: int = 1) -> int:
    """Rows per vectorised read: about READ_BYTES of samples, at most MAX_READ, rounded down to
    a multiple of `multiple` (at least one `multiple`).

    When shards are cached under the node's cache limit (`pinned`), each read pins every shard
    it touches once. When the limit holds the shuffle (`read_shard` > 0, the samples of a
    typical shard), a read takes at most half a shard per reader (`readers` take turns along
    the node's order), so the shards one read touches stay few; when it does not (`read_shard`
    0), the MAX_READ cap is lifted: fewer, larger reads mean fewer shards evicted and fetched
    again.

    Args:
        mean_sample_bytes: the dataset's mean raw bytes per sample.
        multiple: the batch size reads are a multiple of.
        pinned: whether reads pin the shards they touch (a cache limit is in force).
        read_shard: samples of a typical shard when the limit holds the shuffle, else 0.
        readers: the node's readers (ranks times workers) taking turns along its order.
    """
    rows = int(READ_BYTES // max(mean_sample_bytes, 1))
    if not pinned or read_shard:
        rows = min(rows, MAX_READ)
    if pinned and read_shard:
        rows = min(rows, max(read_shard // (2 * max(readers, 1)), 1))
    return max(rows // multiple, 1) * multiple


def read_size(mean_sample_bytes: float, multiple: int = 1, *, first: int = FIRST_READ,
              pinned: bool = False, read_shard: int = 0, readers: int = 1) -> ReadSize:
    """The `ReadSize` of a pass: `rows_per_read`'s rows, and a first read of `first` rows.

    Args:
        mean_sample_bytes: as in `rows_per_read`.
        multiple: as in `rows_per_read`.
        first: rows of the first read (one batch, for a quick first batch).
        pinned: as in `rows_per_read`.
        read_shard: as in `rows_per_read`.
        readers: as in `rows_per_read`.
    """
    rows = rows_per_read(mean_sample_bytes, multiple, pinned=pinned, read_shard=read_shard,
                         readers=readers)
    return ReadSize(rows, first)
