"""Shared pieces of the conversion tests: for Ray and Dask, the rows, a transform that kills its
worker process once, and comparisons against a single-process MDSWriter; for Spark, a local-mode
session whose Python workers see a given environment.

The JVM that py4j starts for the first Spark session of a test process keeps the environment it
was started with, and later sessions reuse it; so the variables a test needs (interpreter,
checkout, emulator endpoints and credentials) are also passed per session as
`spark.executorEnv.*`, which Spark hands to the Python workers of that session."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from streaming.format.index import read_index
from streaming.format.shard import ShardReader
from writers.mds import MDSWriter

COLUMNS = {"id": "int", "text": "str", "tokens": "ndarray:int32"}
REPO = str(Path(__file__).resolve().parents[2])


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


@contextmanager
def local_spark(app: str, env: dict[str, str]) -> Iterator[object]:
    """A `local[2]` SparkSession whose workers run this interpreter on this checkout with `env`;
    stopped, and os.environ restored, on exit."""
    from pyspark.sql import SparkSession

    env = {"PYSPARK_PYTHON": sys.executable,
           "PYTHONPATH": os.pathsep.join(filter(None, [REPO, os.environ.get("PYTHONPATH")])),
           **env}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    builder = (SparkSession.builder.master("local[2]").appName(app)
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2"))
    for key, value in env.items():
        builder = builder.config(f"spark.executorEnv.{key}", value)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    try:
        yield session
    finally:
        session.stop()
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
