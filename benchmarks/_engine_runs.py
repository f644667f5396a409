"""One timed JSONL -> MDS conversion on each distributed engine (Ray Data, Dask, Spark), for
benchmarks/convert.py. Each engine reads the same corpus split into files (its natural input
for parallel reads); the cluster is started before the clock and stopped after it."""

from __future__ import annotations

import json
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path

COLUMNS = {"id": "int", "text": "str", "tokens": "ndarray:int32"}
FILES = 8  # input files: enough blocks/partitions for two workers to balance


def split_corpus(src: Path) -> Path:
    """`src` as FILES JSONL files of whole lines in a folder beside it (made once)."""
    folder = src.with_suffix(".split")
    if folder.is_dir() and len(list(folder.glob("*.jsonl"))) == FILES:
        return folder
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    lines = src.read_bytes().splitlines(keepends=True)
    step = -(-len(lines) // FILES)
    for k in range(FILES):
        (folder / f"part-{k}.jsonl").write_bytes(b"".join(lines[k * step:(k + 1) * step]))
    return folder


def _timed(run: Callable[[], dict], out: Path) -> float:
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    result = run()
    seconds = time.perf_counter() - start
    assert result["samples"] > 0
    return seconds


def ray_seconds(folder: Path, out: Path, workers: int) -> float:
    import ray

    from writers.convert import ray_to_mds

    ray.init(num_cpus=workers, include_dashboard=False, log_to_driver=False,
             object_store_memory=512 << 20)
    try:
        ray.data.DataContext.get_current().enable_progress_bars = False
        ray.data.range(workers).materialize()  # start the workers before the clock
        return _timed(lambda: ray_to_mds(ray.data.read_json(str(folder)), out, COLUMNS), out)
    finally:
        ray.shutdown()


def dask_seconds(folder: Path, out: Path, workers: int) -> float:
    import dask.bag as db
    from distributed import Client, LocalCluster

    from writers.convert import dask_to_mds

    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True,
                      dashboard_address=None) as cluster, Client(cluster):
        bag = db.read_text(str(folder / "*.jsonl")).map(json.loads)
        return _timed(lambda: dask_to_mds(bag, out, COLUMNS), out)


def spark_seconds(folder: Path, out: Path, workers: int) -> float:
    from pyspark.sql import SparkSession

    from writers.convert import dataframe_to_mds

    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (SparkSession.builder.master(f"local[{workers}]").appName("mds-bench")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    try:
        session.range(workers).collect()
        return _timed(lambda: dataframe_to_mds(session.read.json(str(folder)), out, COLUMNS),
                      out)
    finally:
        session.stop()


ENGINES = {"ray": ray_seconds, "dask": dask_seconds, "spark": spark_seconds}
