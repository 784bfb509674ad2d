"""Spark Structured Streaming (and batch) source for MySQL/MariaDB change data capture.

``spark.readStream.format("binlog-cdc")`` (a live server) and ``spark.read.format("binlog-cdc")``
(archived binlog files). The source is registered automatically through the top-level module
:mod:`pyspark_binlog_cdc`; :class:`BinlogCdcDataSource` can also be registered by hand with
``spark.dataSource.register(BinlogCdcDataSource)``.

The library: :mod:`streaming.source` (the Spark callbacks), :mod:`streaming.planning` (pure
batch planning), :mod:`streaming.driver` (the driver's server queries), :mod:`streaming.options`,
:mod:`streaming.offsets`, :mod:`streaming.schema` (Spark types), :mod:`streaming.catalog`
(information_schema), :mod:`streaming.batches` (Arrow batches), :mod:`streaming.delta` (Delta
upserts), :mod:`streaming.metrics` (Prometheus). The applications: :mod:`streaming.apps`.

``BinlogCdcDataSource`` is loaded on first use, so the Spark-free modules (options, planning,
offsets) import without PySpark.
"""

from __future__ import annotations

__all__ = ["BinlogCdcDataSource"]


def __getattr__(name: str):
    if name == "BinlogCdcDataSource":
        from streaming.source import BinlogCdcDataSource
        return BinlogCdcDataSource
    raise AttributeError(f"module 'streaming' has no attribute {name!r}")
