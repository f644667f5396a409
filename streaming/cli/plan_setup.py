"""The configuration `streaming plan` reads: streams (local folders or remotes), weights, plan
settings and topology from a YAML file, with every stream's index.json, as a `Setup`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from streaming.cli._common import UserError
from streaming.cli.plan_tokens import ConfigStream, mix_weights
from streaming.errors import require

if TYPE_CHECKING:
    from streaming.format.index import DatasetIndex
    from streaming.plan import PlanConfig, World

_STREAM_KEYS = {"local", "path", "remote", "name", "proportion", "repeat", "choose", "split",
                "format", "columns"}
_PLAN_KEYS = {"batch_size", "batching_method", "epoch_size", "shuffle", "shuffle_algo",
              "shuffle_seed", "shuffle_block_size", "num_canonical_nodes", "partition_algo",
              "sampling_method", "sampling_granularity"}
_MIX_KEYS = {"mix_unit", "lengths_column"}  # proportions as token shares (plan_tokens)
_TOPOLOGY_KEYS = {"nodes", "ranks_per_node", "workers_per_rank", "replication"}
# what a cost prediction needs beyond the plan (packing: the sample lengths read at start-up)
_RUN_KEYS = {"cache_limit", "predownload", "packing", "packing_column"}


@dataclass
class Setup:
    """A parsed plan configuration: the stream names and indexes, the plan and the world."""

    names: list[str]
    indexes: list[DatasetIndex]
    cfg: PlanConfig
    world: World
    remotes: list[str | None]
    run: dict[str, Any]
    index_bytes: list[int]


def _mapping(value: Any, where: str, allowed: set[str]) -> dict:
    if not isinstance(value, dict):
        raise UserError(f"{where} must be a mapping, got {type(value).__name__}")
    unknown = set(value) - allowed
    if unknown:
        raise UserError(f"{where}: unknown keys {sorted(unknown)} (allowed: {sorted(allowed)})")
    return value


def load_setup(path: Path) -> Setup:
    """Read the YAML config, every stream's index.json, and build PlanConfig + World."""
    yaml = require("yaml", feature="plan configs", extra="yaml", package="pyyaml")
    from streaming.plan import PlanConfig, StreamWeights, World

    if not path.is_file():
        raise UserError(f"config file {path} does not exist")
    try:
        raw = yaml.safe_load(path.read_text())
    except yaml.YAMLError as exc:
        raise UserError(f"{path}: not valid YAML: {exc}") from exc
    config = _mapping(raw, str(path), _PLAN_KEYS | _RUN_KEYS | _MIX_KEYS | {"streams", "topology"})
    streams = config.get("streams")
    if not isinstance(streams, list) or not streams:
        raise UserError(f"{path}: 'streams' must be a non-empty list")
    names, indexes, weights, remotes, index_bytes, mixed = [], [], [], [], [], []
    for i, stream in enumerate(streams):
        stream = _mapping(stream, f"{path}: streams[{i}]", _STREAM_KEYS)
        local, remote = stream.get("local", stream.get("path")), stream.get("remote")
        if not local and not remote:
            raise UserError(f"{path}: streams[{i}] needs 'local' (a dataset folder) or 'remote'")
        split = str(stream.get("split") or "")
        folder = (path.parent / str(local or "")) / split
        found = _stream_index(stream, f"{path}: streams[{i}]", folder, split)
        indexes.append(found.index)
        index_bytes.append(found.nbytes)
        names.append(str(stream.get("name") or local or remote))
        remotes.append(None if remote is None else str(remote))
        weights.append(StreamWeights(**{k: stream[k] for k in ("proportion", "repeat", "choose")
                                        if stream.get(k) is not None}))
        mixed.append(ConfigStream(names[-1], None if remote else folder, remotes[-1], split,
                                  stream.get("proportion")))
    if config.get("mix_unit") == "tokens" and any(s.get("format") == "parquet" for s in streams):
        raise UserError(f"{path}: mix_unit: tokens is not predicted for a Parquet stream; "
                        "plan it by samples")
    topology = _mapping(config.get("topology") or {}, f"{path}: topology", _TOPOLOGY_KEYS)
    world = World(num_nodes=int(topology.get("nodes", 1)),
                  ranks_per_node=int(topology.get("ranks_per_node", 1)),
                  workers_per_rank=int(topology.get("workers_per_rank", 1)),
                  replication=int(topology.get("replication", 1)))
    plan_keys = {k: config[k] for k in _PLAN_KEYS if k in config}
    weights = mix_weights(config, path, mixed, indexes, weights, plan_keys)
    weighted = any(w != StreamWeights() for w in weights)
    cfg = PlanConfig(
        samples_per_shard=np.concatenate([ix.samples_per_shard for ix in indexes]),
        shards_per_stream=np.array([ix.num_shards for ix in indexes], np.int64),
        weights=tuple(weights) if weighted else (),
        **plan_keys,
    )
    run = {k: config[k] for k in _RUN_KEYS | _MIX_KEYS if k in config}
    return Setup(names, indexes, cfg, world, remotes, run, index_bytes)


@dataclass(frozen=True)
class _StreamIndex:
    """A config stream's index, and the bytes of its index.json."""

    index: DatasetIndex
    nbytes: int


def _stream_index(stream: dict, where: str, folder: Path, split: str) -> _StreamIndex:
    """The index of config `stream` (named `where`): derived from the footers of its Parquet
    files, read from its dataset `folder`, or fetched from its remote."""
    from streaming.cli.parquet_location import footers_index_json
    from streaming.format.index import parse_index, read_index
    from streaming.storage.schemes import join

    local, remote = stream.get("local", stream.get("path")), stream.get("remote")
    index_file = folder / "index.json"
    parquet = _parquet_columns(stream, where)
    if parquet is not None:
        location = str(folder) if not remote else join(str(remote), split) if split \
            else str(remote)
        data = footers_index_json(location, parquet.columns)
        return _StreamIndex(parse_index(data, source=f"{location} (Parquet footers)"), len(data))
    if (local and index_file.is_file()) or not remote:
        return _StreamIndex(read_index(index_file), index_file.stat().st_size)  # names a missing
    data = remote_index_json(str(remote), split)
    return _StreamIndex(parse_index(data, source=f"{remote} index.json"), len(data))


@dataclass(frozen=True)
class _ParquetColumns:
    """A config stream's `format: parquet`, with its `columns` (None: every column)."""

    columns: list[str] | None


def _parquet_columns(stream: dict, where: str) -> _ParquetColumns | None:
    """The stream's Parquet projection when its `format` is parquet, None for MDS (UserError
    naming `where` for any other format, or `columns` that are not a list of names or are
    given to an MDS stream)."""
    fmt = stream.get("format", "mds")
    columns = stream.get("columns")
    if fmt not in ("mds", "parquet"):
        raise UserError(f"{where}: format must be mds or parquet, got {fmt!r}")
    if columns is not None and (fmt != "parquet" or not isinstance(columns, list) or not columns
                                or not all(isinstance(c, str) for c in columns)):
        raise UserError(f"{where}: columns must be a list of column names, for a Parquet "
                        f"stream (format: parquet); got {columns!r}")
    return _ParquetColumns(columns) if fmt == "parquet" else None


def remote_index_json(remote: str, split: str) -> bytes:
    """A stream's index.json fetched straight from its remote (no cache folder is touched)."""
    from streaming.storage.schemes import backend_for, join

    backend, path = backend_for(join(remote, split, "index.json") if split
                                else join(remote, "index.json"))
    return backend.get(path)
