"""Converters: JSONL, CSV/TSV, Parquet, Hugging Face datasets, Spark and Python iterables -> MDS."""

from writers.convert.api import convert, detect_format
from writers.convert.infer import infer_columns
from writers.convert.spark import dataframe_to_mds
from writers.convert.transforms import tokenize

__all__ = ["convert", "dataframe_to_mds", "detect_format", "infer_columns", "tokenize"]
