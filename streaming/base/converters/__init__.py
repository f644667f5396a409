"""Compatibility path `streaming.base.converters`: Spark conversion with the reference's
argument names (`mds_kwargs`, `merge_index`, `udf_iterable`): writers/convert/spark_compat.py."""

from writers.convert.spark_compat import dataframe_to_mds

__all__ = ["dataframe_to_mds"]
