"""Converters: JSONL, CSV/TSV, Parquet, Hugging Face datasets, Spark, Ray, Dask and Python
iterables -> MDS."""

from writers.convert.api import convert, detect_format
from writers.convert.dask import dask_to_mds
from writers.convert.infer import infer_columns
from writers.convert.ray_datasink import ray_to_mds
from writers.convert.spark import dataframe_to_mds
from writers.convert.transforms import tokenize

__all__ = ["convert", "dask_to_mds", "dataframe_to_mds", "detect_format", "infer_columns",
           "ray_to_mds", "tokenize"]
