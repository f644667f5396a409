"""Spark DataFrames convert partition by partition (pyspark local mode; skipped without it)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from streaming.errors import OutputExistsError
from tests.convert._util import read_samples

pyspark = pytest.importorskip("pyspark")

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession

    # Python workers must run this interpreter and import this checkout.
    repo = str(Path(__file__).resolve().parents[2])
    saved = {k: os.environ.get(k) for k in ("PYSPARK_PYTHON", "PYTHONPATH")}
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [repo, saved["PYTHONPATH"]]))

    session = (SparkSession.builder.master("local[2]").appName("mds-convert-test")
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
