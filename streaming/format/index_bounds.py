"""How large an `index.json` this library reads: at most `max_index_bytes()` bytes, 256 MiB
unless the environment variable STREAMING_MAX_INDEX_BYTES raises (or lowers) it. An index is
read whole into memory and parsed, so its size bounds what a remote can make a reader hold
before a single shard is fetched; 256 MiB is roughly 800,000 shard entries, some 50 TB of
64 MiB shards."""

from __future__ import annotations

from streaming.util.quantities import byte_setting

DEFAULT_MAX_INDEX_BYTES = 256 << 20
MAX_INDEX_SETTING = "STREAMING_MAX_INDEX_BYTES"


def max_index_bytes() -> int:
    """The largest index.json accepted, in bytes (the setting, else the default).

    Raises:
        ArgumentError: the setting is not a positive number of bytes.
    """
    return byte_setting(MAX_INDEX_SETTING, DEFAULT_MAX_INDEX_BYTES)


def too_big(source: str, size: int | None = None) -> str:
    """Why an index of `size` bytes (None: more than accepted) at `source` is refused.

    Args:
        source: the index's path or URL.
        size: its size, when known.
    """
    what = f"is {size:,} bytes" if size is not None else "is larger"
    return (f"{source}: index.json {what}, more than the {max_index_bytes():,} accepted "
            f"(set {MAX_INDEX_SETTING} to a larger byte count to read it)")
