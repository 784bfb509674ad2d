"""The Spark driver's view of the source server: one cached SQL session (binlog end, file list,
GTID state at a position) and the transaction boundaries found after the last offset.

Created lazily by the stream reader on the driver and never pickled (see
:class:`streaming.source.BinlogStreamReader`).
"""

from __future__ import annotations

import logging

from cdc.errors import BinlogPurgedError
from cdc.positions import Position, parse_gtid_state, purged_error
from cdc.replica.client import ReplicaClient
from cdc.replica.server import ServerInfo, server_of
from cdc.replica.sql import SqlSession, binary_logs, binlog_status, connect

from streaming.options import SourceOptions
from streaming.planning import Boundary, Key
from streaming.schema_history import StreamHistory

log = logging.getLogger("binlog_cdc.spark")


def replica_client(opts: SourceOptions, start, server_id: int) -> ReplicaClient:
    """A non-blocking replica client of the source's config from *start*."""
    return ReplicaClient(opts.replica_config(server_id), start=start, blocking=False)


class Driver:
    """Driver-side state: a cached query connection and the boundaries found after the anchor
    (the start of the next batch)."""

    def __init__(self, opts: SourceOptions):
        self.opts = opts
        # The same bounded, configurable budget as the tasks' connections (TASK_RETRY): a
        # restart of the source must not fail the query in latestOffset.
        config = self.config = opts.replica_config()
        self.sql = SqlSession(lambda: connect(config), retry=config.retry, where=opts.describe())
        self._server: ServerInfo | None = None
        self.anchor: Position | None = None
        self.boundaries: list[Boundary] = []
        self.scanned_to: Key | None = None   # the server end fully scanned
        self.server_end: Position | None = None
        self.available_now_end: Key | None = None
        self.snapshot_tables: dict = {}      # db.table -> SnapshotTable (streaming.snapshot)
        self.snapshot_progress = None        # cdc.snapshot.progress.SnapshotProgress, in memory
        # the stream's schema history (streaming.schema_history): in the offsets once in use
        self.schema = StreamHistory(opts, self.query)

    @property
    def where(self) -> str:
        return self.opts.describe()

    def query(self, sql: str, args=None) -> list[tuple]:
        return self.sql.query(sql, args)

    @property
    def server(self) -> ServerInfo:
        """The server's flavour and version (from the connection's handshake, once)."""
        if self._server is None:
            self._server = self.sql.run(server_of)
        return self._server

    def is_mariadb(self) -> bool:
        return self.server.is_mariadb

    def offset(self, d) -> Position:
        """A Spark offset back into a position, its GTID text read in the server's flavour."""
        return Position.from_offset(d, mariadb=self.is_mariadb())

    def close(self) -> None:
        self.sql.close()

    def binary_logs(self) -> list[tuple[str, int]]:
        return self.sql.ask(binary_logs, self.config)

    def master_status(self) -> Position:
        """The end of the binlog now (on MySQL with the executed GTID set there)."""
        end = self.sql.ask(binlog_status, self.config)
        self.server_end = Position(end.file, end.pos)
        return end

    def gtid_at(self, file: str, pos: int, mysql_set=None):
        """The GTID state at *file*:*pos*: MariaDB's ``BINLOG_GTID_POS`` there; on MySQL the
        set the caller knows (*mysql_set*)."""
        if not self.is_mariadb():
            return mysql_set
        try:
            rows = self.query("SELECT BINLOG_GTID_POS(%s, %s)", (file, pos))
        except Exception as e:  # noqa: BLE001
            log.warning("BINLOG_GTID_POS(%s, %d) failed (%s): offsets carry no GTID", file, pos, e)
            return None
        text = str(rows[0][0]) if rows and rows[0][0] is not None else None
        return parse_gtid_state(text, mariadb=True)

    def gtid_at_oldest(self, file: str):
        """The GTID state at position 4 of *file*, the oldest binlog the server has: MariaDB's
        BINLOG_GTID_POS there; MySQL's ``gtid_purged`` (the PREVIOUS_GTIDS of the oldest binlog:
        every transaction before it)."""
        purged = None
        if not self.is_mariadb():
            rows = self.query("SELECT @@GLOBAL.gtid_purged")
            purged = parse_gtid_state(str(rows[0][0] or ""), mariadb=False) if rows else None
        return self.gtid_at(file, 4, purged)

    def purged(self, file: str, logs, context: str = "") -> BinlogPurgedError:
        """The error for a purged *file*, with the Spark-side remedies."""
        return purged_error(file, logs, self.where, context=context, fix=(
            "Restart the query from a new snapshot and a new checkpoint, or set "
            "failOnDataLoss=false to skip the purged range"))
