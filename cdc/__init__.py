"""binlog-cdc: MySQL/MariaDB change-data-capture from the binary log (no Spark in this package).

The layers, from the bytes up:

* :mod:`cdc.binlog` -- the sans-IO binlog format: parser, events, table maps, GTIDs, the
  transaction assembler, the file reader;
* :mod:`cdc.values` -- the one column type table, MySQL JSON, charsets, rendering;
* :mod:`cdc.rows` -- row images decoded with plans per table map (generated Python, optional C);
* :mod:`cdc.positions` -- positions in the binlog and where a stream starts;
* :mod:`cdc.replica` -- the MySQL client side: config, SQL, pre-flight checks, the replica client;
* :mod:`cdc.cli` -- the ``binlog-cdc`` command (decode, tail, lag).

The names below are importable from ``cdc`` directly (loaded on first use)::

    from cdc import ReplicaClient, ReplicaConfig, Start, read_events, assemble
"""

from __future__ import annotations

import importlib

#: the release (pyproject.toml reads it from here)
__version__ = "0.1.0"

_EXPORTS = {
    # reading binlogs (files and bytes)
    "BinlogParser": "cdc.binlog.parser", "iter_events": "cdc.binlog.parser",
    "BinlogFileReader": "cdc.binlog.files", "read_events": "cdc.binlog.files",
    "binlog_paths": "cdc.binlog.files",
    "TransactionAssembler": "cdc.binlog.transactions", "assemble": "cdc.binlog.transactions",
    "Transaction": "cdc.binlog.transactions", "RowChange": "cdc.binlog.transactions",
    "TableFilter": "cdc.binlog.transactions",
    "GtidSet": "cdc.binlog.gtid", "MariaGtidPosition": "cdc.binlog.gtid",
    # values
    "ABSENT": "cdc.values.kinds", "JSON_NULL": "cdc.values.kinds", "ColumnDef": "cdc.values.types",
    # positions
    "Position": "cdc.positions", "Start": "cdc.positions",
    # streaming from a server
    "ReplicaClient": "cdc.replica.client", "ReplicaConfig": "cdc.replica.config",
    "RetryPolicy": "cdc.replica.config", "SslOptions": "cdc.replica.config",
    "Secret": "cdc.replica.config",
    # errors
    "CdcError": "cdc.errors", "ParseError": "cdc.errors", "SchemaError": "cdc.errors",
    "ConfigurationError": "cdc.errors", "ReplicationError": "cdc.errors",
    "BinlogPurgedError": "cdc.errors",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str):
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'cdc' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__():
    return sorted(set(globals()) | set(_EXPORTS))
