"""Spark finds this module at session start (a top-level module named ``pyspark_*`` exposing
``DefaultSource``) and registers the ``binlog-cdc`` data source: no manual registration needed.
"""

from streaming.source.datasource import BinlogCdcDataSource as DefaultSource

__all__ = ["DefaultSource"]
