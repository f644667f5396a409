"""Spark (local mode) writes straight to GCS and Azure, like it does to S3
(tests/convert/test_spark.py): each partition uploads its part, the driver publishes the merged
index last, and the dataset reads back in order."""

from __future__ import annotations

import pytest

from streaming import StreamingDataset
from tests.backends._stores import AzureStore, GCSStore
from tests.support.spark import local_spark

pyspark = pytest.importorskip("pyspark")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def spark(gcs_server, azurite_server):
    with local_spark("mds-backends-test", {**gcs_server.env(), **azurite_server.env()}) as session:
        yield session


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
