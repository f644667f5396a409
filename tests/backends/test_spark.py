"""Spark (local mode) writes straight to GCS and Azure, like it does to S3
(tests/convert/test_spark.py): each partition uploads its part, the driver publishes the merged
index last, and the dataset reads back in order."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from streaming import StreamingDataset
from tests.backends._stores import AzureStore, GCSStore

pyspark = pytest.importorskip("pyspark")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def spark(gcs_server, azurite_server):
    from pyspark.sql import SparkSession

    # The JVM hands its environment to the Python workers it starts: this interpreter, this
    # checkout, and both emulators' settings.
    repo = str(Path(__file__).resolve().parents[2])
    env = {"PYSPARK_PYTHON": sys.executable,
           "PYTHONPATH": os.pathsep.join(filter(None, [repo, os.environ.get("PYTHONPATH")])),
           **gcs_server.env(), **azurite_server.env()}
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    session = (SparkSession.builder.master("local[2]").appName("mds-backends-test")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value


@pytest.mark.parametrize("kind", ["gcs", "azure"])
def test_dataframe_to_mds_straight_to_the_store(spark, kind, gcs_server, azurite_server,
                                                tmp_path):
    from pyspark.sql import types as T

    from writers.convert import dataframe_to_mds

    store = GCSStore(gcs_server) if kind == "gcs" else AzureStore(azurite_server)
    space = store.space()
    schema = T.StructType([T.StructField("id", T.LongType()),
                           T.StructField("text", T.StringType())])
    rows = [(i, f"row {i}") for i in range(300)]
    df = spark.createDataFrame(spark.sparkContext.parallelize(rows, 3), schema)
    url = store.url(space, "spark-out")
    result = dataframe_to_mds(df, url, compression="zstd", size_limit="2kb")
    assert result["parts"] == 3 and result["samples"] == 300
    assert result["index"] == f"{url}/index.json"
    assert {name.split("/")[0] for name in store.read_dir(space, "spark-out")} == {
        "index.json", "part-00000", "part-00001", "part-00002"}
    ds = StreamingDataset(remote=url, local=str(tmp_path / "cache"))
    try:
        got = [ds[i] for i in range(ds.num_samples)]
    finally:
        ds.close()
    assert [(int(g["id"]), g["text"]) for g in got] == rows
