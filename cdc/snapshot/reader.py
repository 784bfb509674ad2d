"""Reading one snapshot chunk: the rows of ``after < key <= upto`` under a consistent snapshot
of their own, with the binlog position that snapshot corresponds to.

Each chunk is one short transaction (``START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY``
... ``COMMIT``): no lock, no transaction held across chunks, only SELECT needed. The position:

* MariaDB reports where the snapshot stands in the binlog (``binlog_snapshot_file`` /
  ``binlog_snapshot_position``): the chunk holds exactly the transactions committed before it
  (``exact``);
* elsewhere the binlog end read just before the transaction starts: the chunk holds every
  transaction before it and maybe a few after it (not ``exact``).

Rows arrive as the server stores them (no client conversion) and are converted by
:func:`cdc.snapshot.values.row_converter` into the values the binlog decoder gives.

Two client libraries can read them (:func:`connect_for_snapshot`): ``mysqlclient`` (C; about
twice as fast, PyMySQL's pure-Python row parsing being most of a chunk's read time) when it is
importable and the connection has no TLS options (its TLS settings are not mapped), else PyMySQL.
Both get the same bytes from the server and the same converter, so the values are identical.
``BINLOG_CDC_SNAPSHOT_CLIENT=pymysql`` (or ``mysqlclient``) forces one.
"""

from __future__ import annotations

import os
from typing import Iterator, NamedTuple, Sequence

from cdc.errors import CdcError, ConfigurationError
from cdc.positions import Position
from cdc.replica.config import ReplicaConfig
from cdc.replica.server import server_of
from cdc.replica.sql import binlog_status, connect, mysql_error
from cdc.snapshot.plan import SnapshotTable, quote_name, range_condition
from cdc.snapshot.values import SESSION_SQL, raw_connect_kwargs, row_converter, select_list

__all__ = ["ChunkPosition", "SnapshotChunkReader", "connect_for_snapshot", "snapshot_client",
           "CLIENTS"]

CLIENTS = ("mysqlclient", "pymysql")
CLIENT_ENV = "BINLOG_CDC_SNAPSHOT_CLIENT"


class ChunkPosition(NamedTuple):
    """The binlog position a chunk's snapshot corresponds to."""

    position: Position
    exact: bool          # True: exactly the transactions before it; False: those and maybe more


def _mysqlclient():
    try:
        import MySQLdb
        import MySQLdb.converters
        import MySQLdb.cursors
    except ImportError:
        return None
    return MySQLdb


def snapshot_client(config: ReplicaConfig, client: str | None = None) -> str:
    """The client library that reads chunks: *client* (or the environment's
    ``BINLOG_CDC_SNAPSHOT_CLIENT``) when given, else ``mysqlclient`` when importable and no
    TLS option is set, else ``pymysql``."""
    want = (client or os.environ.get(CLIENT_ENV) or "").strip().lower() or None
    if want is not None and want not in CLIENTS:
        raise ConfigurationError(f"{CLIENT_ENV} must be one of {', '.join(CLIENTS)}, not "
                                 f"{want!r}")
    if want == "mysqlclient" and _mysqlclient() is None:
        raise ConfigurationError(f"{CLIENT_ENV}=mysqlclient, but mysqlclient is not installed "
                                 f"(pip install mysqlclient; it needs libmariadb-dev and "
                                 f"pkg-config to build)")
    if want is not None:
        return want
    if _mysqlclient() is not None and config.ssl in (None, False):
        return "mysqlclient"
    return "pymysql"


def _connect_mysqlclient(config: ReplicaConfig):
    MySQLdb = _mysqlclient()
    # encoders only (Python types): every value comes back as the bytes the server sent
    conv = {k: v for k, v in MySQLdb.converters.conversions.items() if not isinstance(k, int)}
    timeout = int(max(config.connect_timeout, 30.0))
    try:
        # TCP as PyMySQL does (MySQLdb takes "localhost" for the Unix socket); no TLS, as
        # PyMySQL without ssl options
        return MySQLdb.connect(
            host="127.0.0.1" if config.host == "localhost" else config.host, port=config.port,
            user=config.user, password=config.password.get(),
            connect_timeout=max(1, int(config.connect_timeout)), read_timeout=timeout,
            write_timeout=timeout, charset="utf8mb4", use_unicode=False, conv=conv,
            autocommit=True, cursorclass=MySQLdb.cursors.SSCursor, ssl_mode="DISABLED")
    except MySQLdb.MySQLError as e:
        raise mysql_error(e, config) from e


def connect_for_snapshot(config: ReplicaConfig, client: str | None = None):
    """A connection for reading chunks (:func:`snapshot_client` picks the library): the source's
    settings (TLS, account), unbuffered rows, values unconverted."""
    if snapshot_client(config, client) == "mysqlclient":
        conn = _connect_mysqlclient(config)
    else:
        import pymysql.cursors
        conn = connect(config, cursorclass=pymysql.cursors.SSCursor, **raw_connect_kwargs())
    try:
        with conn.cursor() as cur:
            for sql in SESSION_SQL:
                cur.execute(sql)
            cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ")
    except Exception:
        conn.close()
        raise
    return conn


def _client_errors() -> tuple:
    import pymysql
    MySQLdb = _mysqlclient()
    return (pymysql.err.MySQLError,) + ((MySQLdb.MySQLError,) if MySQLdb is not None else ())


class SnapshotChunkReader:
    """``with SnapshotChunkReader(conn, table, after, upto) as r:`` -- :attr:`position` is where
    the chunk stands; :meth:`batches` yields lists of converted rows (table column order)."""

    def __init__(self, conn, table: SnapshotTable, after: Sequence | None,
                 upto: Sequence | None, *, config: ReplicaConfig | None = None):
        self.conn = conn
        self.table = table
        self.after = after
        self.upto = upto
        self.config = config
        self.position: ChunkPosition | None = None
        self.rows = 0
        self._open = False

    def _query(self, sql: str, args=None) -> list:
        """A statement's rows, text as str (the connection leaves values as bytes)."""
        with self.conn.cursor() as cur:
            cur.execute(sql, args)
            return [tuple(_text(v) if isinstance(v, (bytes, bytearray)) else v for v in r)
                    for r in cur.fetchall()]

    def __enter__(self) -> "SnapshotChunkReader":
        try:
            before = binlog_status(self._query, server_of(self.conn), self.config)
            self._query("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY")
            self._open = True
            status = dict(self._query("SHOW SESSION STATUS LIKE 'binlog_snapshot_%'"))
        except _client_errors() as e:
            raise self._error(e) from e
        file, pos = status.get("Binlog_snapshot_file"), status.get("Binlog_snapshot_position")
        if file and pos and pos.isdigit():
            self.position = ChunkPosition(Position(file, int(pos)), True)
        else:
            self.position = ChunkPosition(Position(before.file, before.pos), False)
        return self

    def batches(self, rows_per_batch: int = 8192) -> Iterator[list[tuple]]:
        t = self.table
        columns = t.column_defs()
        convert = row_converter(columns)
        where, args = range_condition(t.key, self.after, self.upto)
        order = (" ORDER BY " + ", ".join(quote_name(k) for k in t.key)) if t.key else ""
        sql = f"SELECT {select_list(columns)} FROM {t.sql_name} WHERE {where}{order}"
        try:
            with self.conn.cursor() as cur:
                cur.execute(sql, args)
                while True:
                    raw = cur.fetchmany(rows_per_batch)
                    if not raw:
                        return
                    self.rows += len(raw)
                    yield list(map(convert, raw))
        except _client_errors() as e:
            raise self._error(e) from e

    def __exit__(self, *exc) -> None:
        if self._open:
            self._open = False
            try:
                self._query("COMMIT")
            except Exception:  # noqa: BLE001 - the connection is closed by its owner anyway
                pass

    def _error(self, e) -> Exception:
        if self.config is not None:
            return mysql_error(e, self.config)
        return CdcError(f"snapshot of {self.table.name}: {e}")


def _text(v) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, (bytes, bytearray)) else str(v)
