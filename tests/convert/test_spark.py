"""Spark DataFrames convert partition by partition (pyspark local mode; skipped without it),
locally and straight to S3, GCS and Azure: each partition uploads its part, the driver
publishes the merged index last, and the dataset reads back in order. One Spark session serves
the module (starting one is most of a test's cost)."""

from __future__ import annotations

from pathlib import Path

import pytest

from streaming import StreamingDataset
from streaming.errors import OutputExistsError
from tests.convert.helpers import local_spark
from tests.support.converted import read_samples
from tests.support.stores import AzureStore, GCSStore

pyspark = pytest.importorskip("pyspark")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def spark(s3_server, gcs_server, azurite_server):
    env = {**s3_server.env(), **gcs_server.env(), **azurite_server.env()}
    with local_spark("mds-convert-test", env) as session:
        yield session


def test_dataframe_to_mds_keeps_order_and_types(spark, tmp_path: Path):
    from pyspark.sql import types as T

    from writers.convert import dataframe_to_mds

    schema = T.StructType([
        T.StructField("id", T.LongType()), T.StructField("text", T.StringType()),
        T.StructField("tokens", T.ArrayType(T.IntegerType())),
        T.StructField("score", T.DoubleType()), T.StructField("flag", T.BooleanType()),
        T.StructField("blob", T.BinaryType()),
    ])
    rows = [(i, f"row {i} ✓", list(range(i % 6 + 1)), i / 4, i % 2 == 0, bytes([i % 256]))
            for i in range(500)]
    df = spark.createDataFrame(spark.sparkContext.parallelize(rows, 4), schema)
    result = dataframe_to_mds(df, tmp_path / "out", compression="zstd", size_limit="8kb")
    assert result["parts"] == 4 and result["samples"] == 500
    assert result["columns"]["tokens"] == "ndarray:int32"
    got = read_samples(tmp_path / "out")
    assert [g["id"] for g in got] == list(range(500))
    assert got[7] == {"id": 7, "text": "row 7 ✓", "tokens": ["int32", [0, 1]], "score": 1.75,
                      "flag": False, "blob": bytes([7])}
    assert sorted(p.name for p in (tmp_path / "out").glob("part-*")) == [
        f"part-{i:05d}" for i in range(4)]
    with pytest.raises(OutputExistsError):
        dataframe_to_mds(df, tmp_path / "out")


def test_dataframe_to_mds_with_transform_and_override(spark, tmp_path: Path):
    from writers.convert import dataframe_to_mds

    df = spark.createDataFrame(spark.sparkContext.parallelize(
        [(i, "ab" * (i % 3)) for i in range(60)], 2), ["id", "text"])
    result = dataframe_to_mds(
        df, tmp_path / "out", {"id": "int", "n": "int32"},
        transform=lambda r: {"id": r["id"], "n": len(r["text"])} if r["text"] else None,
        compression=None,
    )
    got = read_samples(tmp_path / "out")
    assert result["samples"] == 40 == len(got)
    assert {(g["id"], g["n"]) for g in got} == {(i, 2 * (i % 3)) for i in range(60) if i % 3}


def test_dataframe_to_mds_straight_to_s3(spark, s3_server, tmp_path: Path):
    from pyspark.sql import types as T

    from streaming.storage import fetch
    from writers.convert import dataframe_to_mds

    bucket = s3_server.make_bucket()
    schema = T.StructType([T.StructField("id", T.LongType()),
                           T.StructField("text", T.StringType())])
    rows = [(i, f"row {i}") for i in range(300)]
    df = spark.createDataFrame(spark.sparkContext.parallelize(rows, 3), schema)
    url = f"s3://{bucket}/spark-out"
    result = dataframe_to_mds(df, url, compression="zstd", size_limit="2kb")
    assert result["parts"] == 3 and result["samples"] == 300
    assert result["index"] == f"{url}/index.json"

    # Every object the root index names is in the bucket; the dataset reads back in order.
    keys = {o["Key"] for o in s3_server.client().list_objects_v2(Bucket=bucket)["Contents"]}
    assert "spark-out/index.json" in keys
    local = tmp_path / "copy"
    for key in keys:
        fetch(f"s3://{bucket}/{key}", local / key.removeprefix("spark-out/"))
    got = read_samples(local)
    assert [g["id"] for g in got] == list(range(300))
    assert got[7]["text"] == "row 7"
    with pytest.raises(OutputExistsError, match=r"index\.json"):
        dataframe_to_mds(df, url)


def test_reference_calling_convention(spark, tmp_path: Path):
    from streaming.base.converters import dataframe_to_mds

    df = spark.createDataFrame(spark.sparkContext.parallelize(
        [(i, f"t{i}") for i in range(30)], 3), ["id", "text"])
    out = str(tmp_path / "out")
    assert dataframe_to_mds(df, merge_index=True,
                            mds_kwargs={"out": out, "columns": {"id": "int", "text": "str"},
                                        "keep_local": True}) == (out, "")
    assert [g["id"] for g in read_samples(tmp_path / "out")] == list(range(30))
    plain = str(tmp_path / "parts")
    dataframe_to_mds(df, merge_index=False, mds_kwargs={"out": plain, "columns": {"id": "int"}},
                     udf_iterable=lambda pdf, k: [{"id": int(r["id"]) * k}
                                                  for r in pdf.to_dict("records")],
                     udf_kwargs={"k": 2})
    assert not (tmp_path / "parts" / "index.json").exists()
    parts = sorted((tmp_path / "parts").glob("part-*/index.json"))
    assert len(parts) == 3
    got = [g["id"] for p in parts for g in read_samples(p.parent)]
    assert got == [2 * i for i in range(30)]
    with pytest.raises(ValueError, match="out"):
        dataframe_to_mds(df, mds_kwargs={"columns": {"id": "int"}})


def test_dataframe_to_mds_appends_and_overwrites(spark, tmp_path: Path):
    from streaming.errors import DatasetMismatchError
    from writers.convert import dataframe_to_mds

    def frame(start: int, n: int):
        return spark.createDataFrame(spark.sparkContext.parallelize(
            [(i, f"t{i}") for i in range(start, start + n)], 2), ["id", "text"])

    out = tmp_path / "out"
    dataframe_to_mds(frame(0, 20), out)
    old = (out / "part-00000" / "index.json").read_bytes()
    result = dataframe_to_mds(frame(20, 10), out, mode="append")
    assert result["parts"] == 2 and (out / "part-00000" / "index.json").read_bytes() == old
    assert [g["id"] for g in read_samples(out)] == list(range(30))
    with pytest.raises(DatasetMismatchError, match="compression"):
        dataframe_to_mds(frame(0, 4), out, compression=None, mode="append")
    dataframe_to_mds(frame(100, 6), out, mode="overwrite")
    assert [g["id"] for g in read_samples(out)] == list(range(100, 106))
    assert sorted(p.name for p in out.iterdir()) == ["index.json", "part-00004", "part-00005"]


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
