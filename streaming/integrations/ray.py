"""MDS datasets as Ray Datasets (extra `ray`): `read_mds(path_or_url)`, shard by shard.

Each read task fetches its shards (any URL the storage layer serves, or a local path),
decompresses them in memory and turns each shard into one Arrow table. Columns whose encoding
has an Arrow type keep it (integers, floats, `str`, `bytes`, one-dimensional `ndarray`
columns as lists); every other encoding (`json`, `pkl`, images, `str_int`, `str_decimal`,
multi-dimensional fixed arrays) arrives as the column's encoded bytes.

Inside Ray Train's `TorchTrainer` workers a `StreamingDataset` needs no extra arguments: Ray
Train sets RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE and NODE_RANK and initialises
torch.distributed before the training function runs, and `streaming.coord.world_detect` reads both.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from streaming.errors import FormatError, require
from streaming.format.compression import decompress
from streaming.format.encodings import encoding_size
from streaming.format.encodings.encoding import FileBytes
from streaming.format.index import parse_index
from streaming.format.index_bounds import max_index_bytes
from streaming.format.sample import SampleCodec
from streaming.format.shard import ShardReader
from streaming.storage import backend_for, fetch, join

_SCALAR = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
           "float16", "float32", "float64")


def arrow_type(encoding: str) -> Any:
    """The Arrow type a column of `encoding` reads as, or None (its encoded bytes)."""
    import pyarrow as pa

    if encoding == "int":
        return pa.int64()
    if encoding in _SCALAR:
        return pa.from_numpy_dtype(np.dtype(encoding))
    if encoding == "str_float":
        return pa.float64()
    if encoding == "str":
        return pa.string()
    if encoding == "bytes":
        return pa.binary()
    parts = encoding.split(":")
    if parts[0] == "ndarray" and len(parts) >= 2 and (len(parts) == 2 or "," not in parts[2]):
        return pa.list_(pa.from_numpy_dtype(np.dtype(parts[1])))
    return None


def _read_codec(names: list[str], encodings: list[str]) -> SampleCodec:
    """A codec that decodes mapped columns and hands var-size unmapped ones over as bytes."""
    read = [e if arrow_type(e) is not None or encoding_size(e) is not None else "bytes"
            for e in encodings]
    return SampleCodec(names, read, allow_unsafe_types=False)


def _column(values: Any, encoding: str, name: str) -> Any:
    import pyarrow as pa

    kind = arrow_type(encoding)
    if kind is None:
        return pa.array([v if isinstance(v, bytes) else np.asarray(v).tobytes() for v in values],
                        pa.binary())
    if pa.types.is_list(kind):
        bad = next((v.shape for v in values if np.ndim(v) != 1), None)
        if bad is not None:
            raise FormatError(f"column {name!r} ({encoding}) holds an array of shape {bad}; "
                              "read_mds maps only one-dimensional arrays to Arrow lists")
        return pa.array(list(values), kind)
    if encoding in _SCALAR:
        return pa.array(np.asarray(values, dtype=encoding), kind)
    return pa.array(list(values), kind)


def shard_table(location: str, shard: dict[str, Any]) -> Any:
    """One shard of the dataset at `location` as an Arrow table (fetched to a temp folder)."""
    import pyarrow as pa

    names, encodings = shard["column_names"], shard["column_encodings"]
    entry = shard.get("zip_data") or shard["raw_data"]
    with tempfile.TemporaryDirectory(prefix="mds-ray-read-") as tmp:
        path = fetch(join(location, entry["basename"]), Path(tmp, "shard"),
                     expected_size=int(entry["bytes"]))
        data = path.read_bytes()
        if shard.get("zip_data"):
            data = decompress(shard["compression"], data, source=path)
            path.write_bytes(data)
        # Validated with the dataset's own codec, then decoded with the reading one.
        codec = SampleCodec(names, encodings, allow_unsafe_types=True)
        with ShardReader(path, codec, expected_samples=int(shard["samples"])) as reader:
            starts, ends = reader.spans(np.arange(len(reader)))
    columns = _read_codec(names, encodings).decode_columns(FileBytes(data), starts, ends)
    return pa.table({name: _column(values, enc, name)
                     for name, enc, values in zip(names, encodings, columns)})


def _read_shards(location: str, shards: list[dict[str, Any]]) -> Iterator[Any]:
    for shard in shards:
        yield shard_table(location, shard)


def mds_datasource(path_or_url: str | os.PathLike) -> Any:
    """A Ray `Datasource` over the MDS dataset at `path_or_url` (one block per shard)."""
    require("ray.data", feature="Ray Data reading", extra="ray", package="ray[data]")
    from ray.data.block import BlockMetadata
    from ray.data.datasource import Datasource, ReadTask

    location = os.fspath(path_or_url).rstrip("/")
    backend, key = backend_for(join(location, "index.json"))
    index = parse_index(backend.get(key, max_size=max_index_bytes()),
                        source=join(location, "index.json"), root=Path("/"))
    shards = [s for s in index.shards if s["samples"]]

    class MDSDatasource(Datasource):  # Ray's extension point is subclassing Datasource
        def get_name(self) -> str:
            return "MDS"

        def estimate_inmemory_data_size(self) -> int:
            return sum(int(s["raw_data"]["bytes"]) for s in shards)

        def get_read_tasks(self, parallelism: int, per_task_row_limit: int | None = None,
                           data_context: Any = None) -> list[Any]:
            groups = np.array_split(np.arange(len(shards)), max(1, min(parallelism,
                                                                       len(shards))))
            tasks = []
            for group in groups:
                if not len(group):
                    continue
                mine = [shards[i] for i in group]
                meta = BlockMetadata(
                    num_rows=sum(int(s["samples"]) for s in mine),
                    size_bytes=sum(int(s["raw_data"]["bytes"]) for s in mine),
                    input_files=None, exec_stats=None)
                tasks.append(ReadTask(lambda mine=mine: _read_shards(location, mine), meta,
                                      per_task_row_limit=per_task_row_limit))
            return tasks

    return MDSDatasource()


def read_mds(path_or_url: str | os.PathLike, *, override_num_blocks: int | None = None,
             preserve_order: bool = True) -> Any:
    """The MDS dataset at `path_or_url` as a `ray.data.Dataset`, in index order.

    Args:
        path_or_url: the dataset folder (holding index.json) or its URL (s3://, gs://, ...).
        override_num_blocks: read tasks to use (Ray picks when None); at most one per shard.
        preserve_order: keep the blocks in index order through this dataset's pipeline (Ray's
            `execution_options.preserve_order`, set on this dataset's own context only); False
            lets Ray hand blocks on as its tasks finish, in any order.
    """
    import ray.data

    ds = ray.data.read_datasource(mds_datasource(path_or_url),
                                  override_num_blocks=override_num_blocks)
    if preserve_order:
        ds.context.execution_options.preserve_order = True
    return ds
