"""Tables written with Spark's own MERGE, on the executors: :mod:`.merge`
(:class:`SparkMerge`, for ``foreachBatch``: Delta through delta-spark, Iceberg through its Spark
runtime), :mod:`.targets` (the target tables and their formats' writes), :mod:`.values` (row
images as Spark columns of the target's types)."""

from __future__ import annotations

__all__ = ["SparkMerge"]


def __getattr__(name: str):
    if name == "SparkMerge":
        from streaming.sinks.spark.merge import SparkMerge
        return SparkMerge
    raise AttributeError(f"module 'streaming.sinks.spark' has no attribute {name!r}")
