"""The row groups a process keeps decoded: the last ones decoded, by file identity, up to
`decoded_room()` bytes of Arrow memory (512 MiB unless STREAMING_PARQUET_DECODED_BYTES says
otherwise). A shuffled read takes rows of many row groups at once, and a row group is decoded
whole, so the plan's shuffle is fitted to this room (`streaming.cache.policy.plan_fit`)."""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Sequence

from streaming.format.parquet_values import Column
from streaming.util.quantities import byte_setting

DECODED_BYTES = 512 << 20  # decoded row groups a process keeps, by their Arrow size
DECODED_SETTING = "STREAMING_PARQUET_DECODED_BYTES"


def decoded_room() -> int:
    """Bytes of decoded row groups each reading process keeps (their Arrow size): the setting
    STREAMING_PARQUET_DECODED_BYTES ('2gb', or a byte count), else DECODED_BYTES. Every
    process of a job must see the same, since the plan's shuffle is fitted to it.

    Raises:
        ArgumentError: the setting is not a positive number of bytes.
    """
    return byte_setting(DECODED_SETTING, DECODED_BYTES)


class DecodedGroups:
    """The row groups this process decoded last, by file identity, up to `limit` bytes (None:
    `decoded_room()` at each addition)."""

    def __init__(self, limit: int | None = None) -> None:
        self._limit = limit
        self._groups: OrderedDict[tuple, tuple[list[Column], int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: tuple) -> list[Column] | None:
        with self._lock:
            found = self._groups.get(key)
            if found is not None:
                self._groups.move_to_end(key)
            return None if found is None else found[0]

    def below(self, folder: str | os.PathLike) -> list[tuple]:
        """The keys of the row groups cached below `folder`."""
        prefix = os.path.join(os.path.abspath(folder), "")
        with self._lock:
            return [key for key in self._groups if os.path.abspath(key[0]).startswith(prefix)]

    def nbytes(self, keys: Sequence[tuple]) -> int:
        """The decoded bytes of `keys` (those still held)."""
        with self._lock:
            return sum(self._groups[key][1] for key in keys if key in self._groups)

    def forget(self, keys: Sequence[tuple]) -> None:
        """Drop `keys` (those still held)."""
        with self._lock:
            for key in keys:
                found = self._groups.pop(key, None)
                if found is not None:
                    self._bytes -= found[1]

    def put(self, key: tuple, columns: list[Column], nbytes: int) -> None:
        with self._lock:
            if key in self._groups:
                return
            self._groups[key] = (columns, nbytes)
            self._bytes += nbytes
            limit = decoded_room() if self._limit is None else self._limit
            while self._bytes > limit and len(self._groups) > 1:
                _, (_, old) = self._groups.popitem(last=False)
                self._bytes -= old


DECODED = DecodedGroups()


def decoded_bytes(folder: str | os.PathLike) -> int:
    """Bytes of the row groups cached below `folder` that this process keeps decoded.

    Args:
        folder: a stream's cache folder.
    """
    return DECODED.nbytes(DECODED.below(folder))


def forget_decoded(folder: str | os.PathLike) -> None:
    """Drop this process's decoded row groups cached below `folder` (a closed stream's: a
    later read decodes again).

    Args:
        folder: a stream's cache folder.
    """
    DECODED.forget(DECODED.below(folder))
