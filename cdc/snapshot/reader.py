"""Reading one snapshot chunk: the rows of ``after < key <= upto`` under a consistent snapshot
of their own, with the binlog position that snapshot corresponds to.

Each chunk is one short transaction (``START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY``
... ``COMMIT``): no lock, no transaction held across chunks, only SELECT needed. The position:

* MariaDB reports where the snapshot stands in the binlog (``binlog_snapshot_file`` /
  ``binlog_snapshot_position``): the chunk holds exactly the transactions before it (``exact``);
* MySQL reports nothing of the kind; the snapshot is bracketed instead (:meth:`_bracketed`):

  1. ``E`` = the binlog end (:func:`~cdc.replica.sql.binlog_status`);
  2. every transaction written to the binlog before ``E`` has committed in the engine: a
     transaction owns its GTID (``@@GLOBAL.gtid_owned``; anonymous ones are counted in
     ``Ongoing_anonymous_transaction_count``) from before it is written to the binlog until
     after its engine commit, so once none of the owners seen after reading ``E`` owns any
     more, everything before ``E`` is visible to a snapshot taken from then on;
  3. ``START TRANSACTION WITH CONSISTENT SNAPSHOT``: it sees every transaction before ``E``
     (2.) and none that is not in the binlog yet (engines commit after the binlog write);
  4. the binlog end again: still ``E`` means nothing was written in between, so the snapshot
     holds exactly the transactions before ``E`` (``exact``).

  A write between 1. and 4. (a busy server) makes it try again, up to :data:`ATTEMPTS` times;
  then the chunk keeps ``E`` of its last try, not exact: it holds every transaction before
  ``E`` and maybe some after it. An owner that keeps its GTID longer than
  :data:`SETTLE_SECONDS` (a session with ``SET GTID_NEXT`` and an open transaction), or a server
  without ``gtid_owned``, gives that position with 2. unproven (logged).

A position that is not exact (2. proven) loses and duplicates nothing: the stream applies the
changes from the snapshot's start ``P0`` (``<= E``) after the snapshot rows, and a change the
chunk already holds writes the same image again. With 2. unproven, a transaction still
committing when the chunk started could be missing from it, and from the stream too if it was
written before ``P0``, read well before any chunk starts. An exact position makes a snapshot
row's ``seq`` sort after every change it holds and before every change it does not
(``source.pos`` says what the row holds).

Rows arrive as the server stores them (no client conversion) and are converted by
:func:`cdc.snapshot.values.row_converter` into the values the binlog decoder gives.

Two client libraries can read them (:func:`connect_for_snapshot`): ``mysqlclient`` (C; about
twice as fast, PyMySQL's pure-Python row parsing being most of a chunk's read time) when it is
importable and the connection has no TLS options (its TLS settings are not mapped), else PyMySQL.
Both get the same bytes from the server and the same converter, so the values are identical.
``BINLOG_CDC_SNAPSHOT_CLIENT=pymysql`` (or ``mysqlclient``) forces one.
"""

from __future__ import annotations

import logging
import os
import random
import re
import time
from typing import Iterator, NamedTuple, Sequence

from cdc.errors import CdcError, ConfigurationError
from cdc.positions import Position
from cdc.replica.config import ReplicaConfig
from cdc.replica.server import server_of
from cdc.replica.sql import binlog_status, connect, mysql_error
from cdc.snapshot.plan import SnapshotTable, quote_name, range_condition
from cdc.snapshot.textrows import pymysql_batches
from cdc.snapshot.values import SESSION_SQL, raw_connect_kwargs, row_converter, select_list

__all__ = ["ChunkPosition", "SnapshotChunkReader", "chunk_select", "connect_for_snapshot",
           "snapshot_client", "owned_gtids", "CLIENTS"]

log = logging.getLogger("cdc.snapshot")

CLIENTS = ("mysqlclient", "pymysql")
CLIENT_ENV = "BINLOG_CDC_SNAPSHOT_CLIENT"

ATTEMPTS = 20            # tries of the bracketed snapshot before a position that is not exact
SETTLE_SECONDS = 1.0     # how long a chunk waits for the binlog's transactions to commit

_UNKNOWN_SYSTEM_VARIABLE = 1193
_START = "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"


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


_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")


def owned_gtids(text: str) -> set:
    """``{(uuid, tag, gno)}`` of ``@@GLOBAL.gtid_owned`` (``uuid[:tag]:gno#thread:gno#thread``
    per source; MySQL 9.7 writes the sources one after the other without a separator, so they
    are found by their UUIDs)."""
    marks = list(_UUID.finditer(text))
    out = set()
    for i, m in enumerate(marks):
        body = text[m.end():marks[i + 1].start() if i + 1 < len(marks) else len(text)]
        tag = ""
        for part in body.split(":"):
            part = part.strip(", \n")
            if "#" in part:
                out.add((m.group().lower(), tag, part.partition("#")[0]))
            elif part:
                tag = part
    return out


def _client_errors() -> tuple:
    import pymysql
    MySQLdb = _mysqlclient()
    return (pymysql.err.MySQLError,) + ((MySQLdb.MySQLError,) if MySQLdb is not None else ())


def _as_pymysql(e: Exception) -> Exception:
    """A mysqlclient error as the PyMySQL error of the same class and arguments."""
    import pymysql
    if isinstance(e, pymysql.err.MySQLError):
        return e
    return getattr(pymysql.err, type(e).__name__, pymysql.err.OperationalError)(*e.args)


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
        self.attempts = 0     # tries of the bracketed snapshot (0: the server reported it)
        self._open = False

    def _query(self, sql: str, args=None) -> list:
        """A statement's rows, text as str (the connection leaves values as bytes); errors as
        PyMySQL's (what :func:`~cdc.replica.sql.binlog_status` maps)."""
        try:
            with self.conn.cursor() as cur:
                cur.execute(sql, args)
                return [tuple(_text(v) if isinstance(v, (bytes, bytearray)) else v for v in r)
                        for r in cur.fetchall()]
        except _client_errors() as e:
            raise _as_pymysql(e) from e

    def __enter__(self) -> "SnapshotChunkReader":
        try:
            self.position = self._reported() or self._bracketed()
        except _client_errors() as e:
            raise self._error(e) from e
        return self

    def _start(self) -> None:
        self._query(_START)
        self._open = True

    def _rollback(self) -> None:
        self._open = False
        self._query("ROLLBACK")

    def _reported(self) -> ChunkPosition | None:
        """The snapshot with the position the server reports for it (MariaDB), else None (and
        no transaction open)."""
        self._start()
        status = dict(self._query("SHOW SESSION STATUS LIKE 'binlog_snapshot_%'"))
        file, pos = status.get("Binlog_snapshot_file"), status.get("Binlog_snapshot_position")
        if file and pos and pos.isdigit():
            return ChunkPosition(Position(file, int(pos)), True)
        self._rollback()
        return None

    def _end(self) -> Position:
        end = binlog_status(self._query, server_of(self.conn), self.config)
        return Position(end.file, end.pos)

    def _bracketed(self) -> ChunkPosition:
        """The snapshot between two equal binlog ends (see the module docstring)."""
        deadline = time.monotonic() + SETTLE_SECONDS
        self.attempts = 0
        while True:
            self.attempts += 1
            end = self._end()
            settled = self._settled(deadline)
            self._start()
            if settled and self._end() == end:
                return ChunkPosition(end, True)
            if not settled or self.attempts >= ATTEMPTS:
                log.info("snapshot of %s: position %s is not exact (%s)", self.table.name, end,
                         f"GTIDs still owned after {SETTLE_SECONDS:g} s" if not settled
                         else f"the binlog grew during each of {self.attempts} tries")
                return ChunkPosition(end, False)
            self._rollback()
            time.sleep(random.uniform(0, 0.001 * self.attempts))   # out of step with writers

    def _owners(self) -> set | None:
        """The GTIDs owned now (:func:`owned_gtids`), and ``"anonymous"`` while anonymous
        transactions are under way; None: the server cannot tell."""
        import pymysql
        try:
            owned, mode = self._query("SELECT @@GLOBAL.gtid_owned, @@GLOBAL.gtid_mode")[0]
        except pymysql.err.MySQLError as e:
            if e.args and e.args[0] == _UNKNOWN_SYSTEM_VARIABLE:
                return None
            raise
        out: set = owned_gtids(str(owned or ""))
        if str(mode).upper() != "ON":
            rows = self._query("SHOW GLOBAL STATUS LIKE 'Ongoing_anonymous_transaction_count'")
            if not rows:
                return None
            if int(rows[0][1]) > 0:
                out.add("anonymous")
        return out

    def _settled(self, deadline: float) -> bool:
        """Every transaction written to the binlog so far has committed in the engine: none of
        the GTID owners seen now owns it still (by *deadline*)."""
        owners = self._owners()
        while owners:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.0005)
            now = self._owners()
            owners = owners & now if now is not None else None
        return owners is not None

    def batches(self, rows_per_batch: int = 8192) -> Iterator[list[tuple]]:
        convert = row_converter(self.table.column_defs())
        for raw in self.raw_batches(rows_per_batch):
            yield list(map(convert, raw))

    def raw_batches(self, rows_per_batch: int = 8192) -> Iterator[list[tuple]]:
        """The chunk's rows as the client returns them (tuples of the server's ``bytes``, None
        for NULL, in :meth:`SnapshotTable.column_defs` order, selected with
        :func:`~cdc.snapshot.values.select_list`); :meth:`batches` converts them."""
        sql, args = chunk_select(self.table, self.after, self.upto)
        try:
            with self.conn.cursor() as cur:
                cur.execute(sql, args)
                fetched = pymysql_batches(cur, rows_per_batch) if _pymysql(self.conn) else None
                if fetched is None:
                    fetched = iter(lambda: cur.fetchmany(rows_per_batch), [])
                for raw in fetched:
                    if not raw:
                        return
                    self.rows += len(raw)
                    yield raw
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


def chunk_select(table: SnapshotTable, after: Sequence | None,
                 upto: Sequence | None) -> tuple[str, list]:
    """The statement (and its parameters) that reads the rows ``after < key <= upto`` of
    *table* in key order, columns as :func:`~cdc.snapshot.values.select_list` selects them."""
    where, args = range_condition(table.key, after, upto)
    order = (" ORDER BY " + ", ".join(quote_name(k) for k in table.key)) if table.key else ""
    return (f"SELECT {select_list(table.column_defs())} FROM {table.sql_name} "
            f"WHERE {where}{order}", args)


def _pymysql(conn) -> bool:
    """A PyMySQL connection (its unbuffered rows are read by :mod:`cdc.snapshot.textrows`)."""
    import pymysql
    return isinstance(conn, pymysql.connections.Connection)


def _text(v) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, (bytes, bytearray)) else str(v)
