"""Spark Structured Streaming (and batch) source for MySQL/MariaDB change data capture, and the
sinks that apply its changes.

``spark.readStream.format("binlog-cdc")`` (a live server) and ``spark.read.format("binlog-cdc")``
(archived binlog files). The source is registered automatically through the top-level module
:mod:`pyspark_binlog_cdc`; :class:`BinlogCdcDataSource` can also be registered by hand with
``spark.dataSource.register(BinlogCdcDataSource)``.

The layers (``python -m tools.check_layout`` keeps them):

- :mod:`streaming.contract`: what the source emits and every sink consumes (the envelope, its
  Spark types, the flat layout, table definitions from ``information_schema``);
- :mod:`streaming.source`: the data source (Spark's callbacks, options, planning, the driver's
  server queries, snapshot, Arrow batches, storage of archived files);
- :mod:`streaming.sinks`: what applies changes to a table (the upsert plan shared by every sink,
  the delta-rs upserter);
- :mod:`streaming.apps`: the job runner, the demo, AutoCDC pipelines, local Spark sessions;
- :mod:`streaming.metrics`: Prometheus metrics.

The names below load on first use, so the Spark-free modules import without PySpark.
"""

from __future__ import annotations

__all__ = ["BinlogCdcDataSource", "DeltaUpserter", "auto_cdc_flows", "start_metrics"]

_LAZY = {
    "BinlogCdcDataSource": "streaming.source.datasource",
    "DeltaUpserter": "streaming.sinks.delta.upserter",
    "auto_cdc_flows": "streaming.apps.pipelines",
    "start_metrics": "streaming.metrics",
}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'streaming' has no attribute {name!r}")
