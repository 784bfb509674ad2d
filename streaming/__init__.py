"""Spark Structured Streaming (and batch) source for MySQL/MariaDB change data capture.

``spark.readStream.format("binlog-cdc")`` (a live server) and ``spark.read.format("binlog-cdc")``
(archived binlog files). The source is registered automatically through the top-level module
:mod:`pyspark_binlog_cdc`; :class:`BinlogCdcDataSource` can also be registered by hand with
``spark.dataSource.register(BinlogCdcDataSource)``.

See :mod:`streaming.source` (how it works), :mod:`streaming.schema` (the schema) and
:mod:`streaming.options` (the options).
"""

from streaming.source import BinlogCdcDataSource

__all__ = ["BinlogCdcDataSource"]
