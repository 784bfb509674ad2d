"""Spark Declarative Pipelines: one AutoCDC flow per table of a MySQL/MariaDB server.

In a pipeline's transformations file (``spark-pipelines run``; ``spark`` is the pipeline's
session)::

    from streaming.apps.pipelines import auto_cdc_flows

    auto_cdc_flows(spark, tables="shop.*", scd_type=1,
                   host="db.example", port=3306, user="cdc", passwordFile="/run/secrets/cdc",
                   startingPosition="snapshot")

For each table matching *tables* (``db.table`` globs, comma-separated) that has a primary key,
:func:`auto_cdc_flows` defines

* a temporary streaming view ``<db>_<table>_changes``: ``readStream.format("binlog-cdc")`` with
  ``table=db.t`` and ``layout=flat`` (:mod:`streaming.contract.flat`), truncate rows left out;
* a streaming table ``<db>_<table>`` (in the pipeline's catalog and database);
* ``dp.create_auto_cdc_flow`` into it: ``keys`` the primary key, ``sequence_by="_cdc_seq"``,
  ``apply_as_deletes="_cdc_op = 'd'"``, ``except_column_list`` the ``_cdc_*`` columns, SCD type
  1 (the table as it is) or 2 (history: ``__START_AT``/``__END_AT`` are ``_cdc_seq`` values).

The keys are read from the server's ``information_schema`` when the pipeline is defined.
AutoCDC needs PySpark 4.2 (SCD type 2: 4.3), and a target whose connector implements Spark's
row-level operations (docs/pipelines.md: parquet and delta-spark 4.4's Delta tables do not).
Each view's stream gets its own ``serverId`` range: ``serverId + 1025 * i`` when *serverId* is
given, else a random one per stream.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from cdc.errors import ConfigurationError
from cdc.replica.server import read_primary_keys, system_schemas_sql
from cdc.replica.sql import connect, fetch_rows
from cdc.snapshot.plan import list_tables

from streaming.contract.flat import META_COLUMNS
from streaming.source.options import SourceOptions

log = logging.getLogger("binlog_cdc.pipelines")

#: one serverId range per stream (the source uses serverId .. serverId + 1024)
SERVER_ID_STRIDE = 1025


@dataclass(frozen=True)
class TableFlow:
    """What :func:`auto_cdc_flows` defined for one table."""

    db: str
    table: str
    keys: tuple
    view: str
    target: str


def primary_keys(opts: SourceOptions, tables: str) -> dict[tuple[str, str], list[str]]:
    """``{(db, table): [key columns in key order]}`` of the base tables matching *tables* (globs)
    that have a primary key; tables without one are logged and left out."""
    filt = SourceOptions.parse({"includeTables": tables}).table_filter()
    conn = connect(opts.replica_config())
    try:
        def query(sql, args=None):
            return fetch_rows(conn, sql, args)
        names = set(list_tables(query, filt))
        pks = read_primary_keys(query, f"s.TABLE_SCHEMA NOT IN ({system_schemas_sql()})")
    finally:
        conn.close()
    keys = {(db, table): cols for (db, table), cols in pks.items() if f"{db}.{table}" in names}
    for name in sorted(names - {f"{db}.{table}" for db, table in keys}):
        log.warning("%s has no primary key: no AutoCDC flow for it", name)
    return keys


def auto_cdc_flows(spark, tables: str = "*.*", scd_type: int = 1, *,
                   target: str = "{db}_{table}", view: str = "{db}_{table}_changes",
                   target_format: str | None = None, **source_options) -> list[TableFlow]:
    """Define a streaming view, a streaming table and an AutoCDC flow for each table matching
    *tables* (see the module docstring); *source_options* are the ``binlog-cdc`` options
    (host, port, user, passwordFile, startingPosition, ...; not ``table``, ``includeTables`` or
    ``layout``). *target*/*view* name the datasets (``{db}``, ``{table}`` are replaced).
    Returns what was defined."""
    from pyspark.sql.functions import expr

    from streaming._compat import pipelines

    if scd_type not in (1, 2, "1", "2"):
        raise ConfigurationError(f"auto_cdc_flows: scd_type must be 1 or 2, not {scd_type!r}")
    dp = pipelines(int(scd_type))
    opts_in = {k: str(v) for k, v in source_options.items()}
    for reserved in ("table", "includeTables", "excludeTables", "layout"):
        if any(k.lower() == reserved.lower() for k in opts_in):
            raise ConfigurationError(f"auto_cdc_flows: option {reserved} is set per table; use "
                                     f"tables= (globs) to choose the tables")
    opts = SourceOptions.parse(opts_in)
    opts.check_connection()
    keys = primary_keys(opts, tables)
    if not keys:
        raise ConfigurationError(f"auto_cdc_flows: no table with a primary key matches {tables!r} "
                                 f"on {opts.describe()}")
    base_id = next((int(v) for k, v in opts_in.items() if k.lower() == "serverid"), None)
    flows = []
    for i, ((db, table), pk) in enumerate(sorted(keys.items())):
        options = dict(opts_in, table=f"{db}.{table}", layout="flat")
        if base_id is not None:
            options = {k: v for k, v in options.items() if k.lower() != "serverid"}
            options["serverId"] = str(base_id + SERVER_ID_STRIDE * i)
        flow = TableFlow(db, table, tuple(pk), view.format(db=db, table=table),
                         target.format(db=db, table=table))
        _define(dp, expr, spark, flow, options, int(scd_type), target_format)
        flows.append(flow)
        log.info("AutoCDC flow %s.%s -> %s (keys %s, SCD %s)", db, table, flow.target,
                 ", ".join(pk), scd_type)
    return flows


def _define(dp, expr, spark, flow: TableFlow, options: dict, scd_type: int, target_format):
    def changes():
        return (spark.readStream.format("binlog-cdc").options(**options).load()
                .where("_cdc_op <> 't'"))    # AutoCDC (OSS) has no truncate
    changes.__name__ = flow.view
    dp.temporary_view(name=flow.view,
                      comment=f"row changes of {flow.db}.{flow.table} (binlog-cdc, layout=flat)")(
        changes)
    dp.create_streaming_table(flow.target, format=target_format,
                              comment=f"{flow.db}.{flow.table} from the binlog (AutoCDC, SCD "
                                      f"{scd_type})")
    dp.create_auto_cdc_flow(target=flow.target, source=flow.view, keys=list(flow.keys),
                            sequence_by="_cdc_seq", apply_as_deletes=expr("_cdc_op = 'd'"),
                            except_column_list=list(META_COLUMNS), stored_as_scd_type=scd_type,
                            name=f"{flow.target}_auto_cdc")
