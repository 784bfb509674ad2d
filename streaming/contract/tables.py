"""Column definitions of a table read from the server's ``information_schema`` (a stream's typed
mode): each column as the :class:`~cdc.values.types.ColumnDef` the binlog's TABLE_MAP would
describe, so that :func:`streaming.contract.spark_schema.spark_column` types it the same way."""

from __future__ import annotations

from cdc.errors import ConfigurationError, SchemaError
from cdc.replica.metadata import read_columns
from cdc.replica.server import check_table_select
from cdc.values.types import ColumnDef


def columns_from_server(conn, db: str, table: str) -> list[ColumnDef]:
    """The columns of ``db.table`` as :class:`~cdc.values.types.ColumnDef` (from
    :func:`cdc.replica.metadata.read_columns`: information_schema, ENUM/SET members it garbles
    read from rows)."""
    def query(sql, args):
        with conn.cursor() as cur:
            cur.execute(sql, args)
            return cur.fetchall()
    server = read_columns(query, db, table)
    if not server:
        check_table_select(query, db, table, user=conn.user, where=f"{conn.host}:{conn.port}")
        raise ConfigurationError(f"option table: {db}.{table} does not exist on the server (or "
                                 f"the user cannot see it in information_schema)")
    out = []
    for i, s in enumerate(server):
        col = s.column_def(i)
        if col is None:
            raise SchemaError(f"column {s.name} has type {s.column_type}, which typed mode cannot "
                              f"map to a Spark type; read the table without option table (JSON "
                              f"images)")
        out.append(col)
    return out
