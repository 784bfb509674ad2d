"""Where the sinks get a source table's definition and where they put its target: a
:data:`ColumnSource` (``(db, table) -> TableInfo``; :class:`ServerColumns` asks the source
server) and :func:`default_table_path`."""

from __future__ import annotations

import os
from typing import Callable, NamedTuple

from cdc.replica.config import ReplicaConfig
from cdc.replica.server import primary_key
from cdc.replica.sql import SqlSession, connect, fetch_rows
from cdc.values.types import ColumnDef

from streaming.contract.tables import columns_from_server

__all__ = ["TableInfo", "ColumnSource", "ServerColumns", "server_columns",
           "table_info_from_server", "default_table_path"]


class TableInfo(NamedTuple):
    """What a sink needs to know about one source table."""

    columns: list[ColumnDef]
    primary_key: list[str]


ColumnSource = Callable[[str, str], TableInfo]
"""``(db, table) -> TableInfo``: where a sink gets table definitions."""


def table_info_from_server(conn, db: str, table: str) -> TableInfo:
    """Columns (``information_schema.COLUMNS``) and primary key of ``db.table``."""
    columns = columns_from_server(conn, db, table)
    pk = primary_key(lambda sql, args: fetch_rows(conn, sql, args), db, table)
    for c in columns:
        c.primary_key = c.name in pk
    return TableInfo(columns, pk)


class ServerColumns:
    """A :data:`ColumnSource` asking the server of *config* (one lazily opened PyMySQL
    connection, with the config's TLS settings)."""

    def __init__(self, config: ReplicaConfig):
        self.config = config
        self._sql = SqlSession(lambda: connect(self.config))

    def __call__(self, db: str, table: str) -> TableInfo:
        return self._sql.run(lambda conn: table_info_from_server(conn, db, table))

    def close(self) -> None:
        self._sql.close()


def server_columns(who: str, host, port, user, password, ssl, config) -> ServerColumns:
    """The :class:`ServerColumns` of a sink's arguments (*config*, else *host*... ):
    :class:`~cdc.errors.ConfigurationError` naming *who* when neither is given."""
    from cdc.errors import ConfigurationError
    if config is None:
        if not host or not user:
            raise ConfigurationError(f"{who}: give config= (the source's ReplicaConfig), or "
                                     f"host and user (and password) of the source server, or a "
                                     f"columns=(db, table) -> TableInfo function")
        config = ReplicaConfig(host, port, user, password or "", ssl=ssl)
    return ServerColumns(config)


def default_table_path(root: str, db: str, table: str) -> str:
    """``<root>/<db>/<table>`` (a URI root such as ``s3://bucket/cdc`` is joined with ``/``)."""
    if "://" in root:
        return root.rstrip("/") + "/" + db + "/" + table
    return os.path.join(root, db, table)
