"""`--format parquet` of `streaming inspect` and `streaming validate`: a folder, prefix or glob of
Parquet files indexed from their footers into a scratch folder, and each row group fetched and
decoded whole."""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from streaming.dataset.catalog import Catalog
from streaming.errors import StreamingError
from streaming.format.index import DatasetIndex, read_index
from streaming.stream import Stream


def add_parquet_options(parser) -> None:
    """The `--format` and `--columns` options of a command that reads Parquet files too."""
    parser.add_argument("--format", choices=("mds", "parquet"), default="mds",
                        help="mds (an index.json), or parquet: a folder, prefix or glob of "
                             "Parquet files, indexed from their footers")
    parser.add_argument("--columns", type=lambda text: text.split(","), default=None,
                        help="Parquet only: the columns to read, comma separated (default all)")


def parquet_stream(location: str, columns: Sequence[str] | None, scratch: Path) -> Stream:
    """A Parquet stream over `location` cached in `scratch`.

    Args:
        location: a folder, prefix or glob of Parquet files (path or URL).
        columns: the projection (None: every column).
        scratch: an empty folder.
    """
    return Stream(remote=location, local=scratch / "cache", format="parquet", columns=columns,
                  download_retry=0)


def parquet_index(location: str, columns: Sequence[str] | None, scratch: Path
                  ) -> DatasetIndex:
    """The index of the Parquet files at `location`, from their footers alone (see
    `parquet_stream` for the arguments)."""
    return read_index(parquet_stream(location, columns, scratch).index_file())


def footers_index_json(location: str, columns: Sequence[str] | None) -> bytes:
    """The derived index.json of the Parquet files at `location`, from their footers alone,
    built in a scratch folder removed after (see `parquet_stream` for the arguments)."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="streaming-parquet-") as scratch:
        return parquet_stream(location, columns, Path(scratch)).index_file().read_bytes()


def check_row_groups(location: str, columns: Sequence[str] | None, scratch: Path,
                     workers: int) -> tuple[DatasetIndex, dict[str, str]]:
    """The index of the Parquet files at `location` and what is wrong with each bad row group
    (`{"<file> row group <n>": problem}`): every row group is fetched and decoded whole.

    Args:
        location: a folder, prefix or glob of Parquet files.
        columns: the projection (None: every column).
        scratch: an empty folder.
        workers: row groups checked at once.
    """
    stream = parquet_stream(location, columns, scratch)
    catalog = Catalog.open([stream])
    index = read_index(stream.local_dir / "index.json")

    def check(shard: int) -> str | None:
        try:
            path = catalog.preparer.prepare(shard)
            try:
                with catalog.open_file(shard, path) as reader:
                    reader.get_many(np.arange(len(reader)))
            finally:
                catalog.preparer.remove_files(shard)
                catalog.preparer.forget(shard)
        except StreamingError as exc:
            return f"{type(exc).__name__}: {exc}"
        return None

    with ThreadPoolExecutor(max(1, workers)) as pool:
        problems = list(pool.map(check, range(index.num_shards)))
    bad = {f"{entry['file']} row group {entry['row_group']}": problem
           for entry, problem in zip(index.shards, problems) if problem is not None}
    return index, bad
