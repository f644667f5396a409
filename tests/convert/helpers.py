"""Shared pieces of the Ray and Dask conversion tests: the rows, a transform that kills its
worker process once, and comparisons against a single-process MDSWriter."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np

from streaming.format.index import read_index
from streaming.format.shard import ShardReader
from writers.mds import MDSWriter

COLUMNS = {"id": "int", "text": "str", "tokens": "ndarray:int32"}


def rows(start: int, n: int) -> list[dict]:
    return [{"id": i, "text": f"row {i} " * (i % 5 + 1),
             "tokens": list(range(i % 7 + 1))} for i in range(start, start + n)]


def sample_bytes(folder: Path) -> list[bytes]:
    """Every sample's encoded bytes, in index order (uncompressed datasets)."""
    index = read_index(folder)
    out = []
    for shard in range(index.num_shards):
        with ShardReader(index.raw_path(shard)) as reader:
            out += [bytes(reader.sample_bytes(i)) for i in range(len(reader))]
    return out


def single_writer(folder: Path, samples: list[dict], **options) -> Path:
    """The same samples through one MDSWriter in this process."""
    with MDSWriter(out=folder, columns=COLUMNS, **options) as writer:
        for sample in samples:
            writer.write({**sample, "tokens": np.asarray(sample["tokens"], np.int32)})
    return folder


def named_files(folder: Path) -> set[str]:
    """What the root index names, plus each part's own index.json."""
    index = json.loads((folder / "index.json").read_text())
    names = {"index.json"}
    for shard in index["shards"]:
        for key in ("raw_data", "zip_data"):
            if shard.get(key):
                names.add(shard[key]["basename"])
                names.add(shard[key]["basename"].split("/")[0] + "/index.json")
    return names


def on_disk(folder: Path) -> set[str]:
    return {p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()}


class DieOnce:
    """A transform that ends its worker process at sample `at`, the first time only (a marker
    file remembers), after the earlier samples of the task were written as shards."""

    def __init__(self, marker: Path, at: int) -> None:
        self.marker, self.at = str(marker), at

    def __call__(self, record: dict) -> dict:
        if record["id"] == self.at and not os.path.exists(self.marker):
            with open(self.marker, "w") as handle:
                handle.write(str(os.getpid()))
            os._exit(17)
        return record


class FailAt:
    """A transform that raises at sample `at`, every time."""

    def __init__(self, at: int) -> None:
        self.at = at

    def __call__(self, record: dict) -> dict:
        if record["id"] == self.at:
            raise ValueError(f"bad record {self.at}")
        return record
