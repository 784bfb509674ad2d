"""The ``binlog-cdc`` data source: :mod:`.datasource` (Spark's callbacks), :mod:`.options`,
:mod:`.planning` (pure batch planning), :mod:`.driver` (the driver's server queries),
:mod:`.schema_history`, :mod:`.snapshot`, :mod:`.batches` (Arrow batches), :mod:`.bounded`,
:mod:`.flat_reader`, :mod:`.storage` (archived files on object stores).

:class:`BinlogCdcDataSource` loads on first use: ``streaming.source.options`` imports without
PySpark."""

from __future__ import annotations

__all__ = ["BinlogCdcDataSource"]


def __getattr__(name: str):
    if name == "BinlogCdcDataSource":
        from streaming.source.datasource import BinlogCdcDataSource
        return BinlogCdcDataSource
    raise AttributeError(f"module 'streaming.source' has no attribute {name!r}")
