"""The Spark driver's view of the source server: one cached SQL session (binlog end, file list,
GTID state at a position) and the transaction boundaries found after the last offset.

Offsets from another server (failover): an offset names a file and position of the server it
was read from. One this driver did not make itself is checked once: the server must have
executed every transaction of its GTID state (else :class:`~cdc.errors.DivergedServerError`),
and a GTID dump from that state must begin at the offset's file position; when it begins
elsewhere (another server: other file names, positions, local transactions), the stream resumes
where the dump begins, never at the offset's file position (:meth:`Driver.offset`).

Created lazily by the stream reader on the driver and never pickled (see
:class:`streaming.source.BinlogStreamReader`).
"""

from __future__ import annotations

import logging

import json

from cdc.errors import BinlogPurgedError
from cdc.positions import Position, Start, parse_gtid_state, purged_error
from cdc.replica.client import ReplicaClient
from cdc.replica.failover import check_contained, mysql_state_at
from cdc.replica.server import ServerInfo, server_of
from cdc.replica.sql import SqlSession, binary_logs, binlog_status, connect

from streaming.source.options import SourceOptions
from streaming.source.planning import Boundary, Key
from streaming.source.schema_history import StreamHistory

log = logging.getLogger("binlog_cdc.spark")


#: What a query whose binlog was purged can do (a task meets it too: restarted, a query with
#: onDataLoss=resnapshot re-snapshots).
DATA_LOSS_FIX = ("Restart the query with onDataLoss=resnapshot (re-reads the captured tables "
                 "from the binlog end) or onDataLoss=skip (failOnDataLoss=false: skips the "
                 "purged range), or from a new snapshot and a new checkpoint")


def preflight(opts: SourceOptions, *, snapshot: bool, binlog: bool = True) -> None:
    """The checks of ``binlog-cdc check`` (:mod:`cdc.check`) before a query or a snapshot
    starts: the first FAIL is raised (a server that cannot be reached, binlog_format not ROW,
    missing privileges, includeTables naming a table the server does not have, binlogs kept for
    less than a snapshot batch takes...), WARNs are logged. Only before a snapshot does it read
    when the oldest binlog begins (a restarted stream reads nothing before its offset)."""
    from cdc.check import WARN, require, run_checks     # the driver's alone: not on a task's path
    f = opts.table_filter()
    for finding in require(run_checks(opts.replica_config(), include=f.include if f else (),
                                      exclude=f.exclude if f else (), snapshot=snapshot,
                                      binlog=binlog, batch_rows=opts.snapshot_batch_rows(),
                                      oldest=snapshot)):
        if finding.status == WARN:
            log.warning("%s: %s", finding.check, finding.message)


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
        self.snapshot_tables: dict = {}      # db.table -> SnapshotTable (streaming.source.snapshot)
        self.snapshot_progress = None        # cdc.snapshot.progress.SnapshotProgress, in memory
        self.lost: Position | None = None    # a replayed batch's purged start (onDataLoss)
        # the stream's schema history (streaming.source.schema_history): in the offsets once in use
        self.schema = StreamHistory(opts, self.query)
        # offset JSON -> the position on this server it resumes at (Driver.offset)
        self._resumes: dict[str, Position] = {}
        self._moved: set[str] = set()    # of those, the ones resumed by GTID elsewhere

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
        """A Spark offset back into a position on this server, its GTID text read in the
        server's flavour; one with a GTID state that this driver did not make is checked once
        (see the module): it resumes where a GTID dump from its state begins."""
        p = Position.from_offset(d, mariadb=self.is_mariadb())
        if p.gtid is None:
            return p
        key = _key(p)
        here = self._resumes.get(key)
        if here is None:
            here = self._resumes[key] = self._resume_point(p, d)
            if not here.same_place(p):
                self._moved.add(_key(here))
        return here

    def known(self, p: Position) -> Position:
        """*p*, an offset this driver made on this server (not checked again)."""
        self._resumes.setdefault(_key(p), p)
        return p

    def moved(self, p: Position) -> bool:
        """Whether *p* is where an offset from another server resumes here by GTID."""
        return _key(p) in self._moved

    def _resume_point(self, p: Position, offset: dict) -> Position:
        check_contained(self.query, p.gtid, mariadb=self.is_mariadb(), where=self.where)
        try:
            first = self.gtid_start(Position(None, None, p.gtid).to_start(), offset)
        except BinlogPurgedError:
            return p        # the stream's purged-binlog handling (failOnDataLoss) decides
        if first.same_place(p):
            return p
        if self._next_file_continues(p, first):
            log.info("offset %s is at the end of its binlog file; continuing at %s:%s", p,
                     first.file, first.pos)
        else:
            log.warning("offset %s is not where this server's binlog continues its GTID state "
                        "(another server: a failover); resuming by GTID at %s:%s", p,
                        first.file, first.pos)
        return Position(first.file, first.pos, p.gtid, prepared=p.prepared)

    def _next_file_continues(self, p: Position, first: Position) -> bool:
        """Whether only the rotation follows *p* in its binlog file and *first* is in the file
        after it (a rotation while the stream was idle, not another server's binlog)."""
        logs = [name for name, _ in self.binary_logs()]
        if p.file not in logs or logs.index(p.file) + 1 >= len(logs) \
                or logs[logs.index(p.file) + 1] != first.file:
            return False
        try:
            rest = self.query("SHOW BINLOG EVENTS IN %s FROM %s LIMIT 3", (p.file, int(p.pos)))
        except Exception:  # noqa: BLE001 -- no answer: keep the failover warning
            return False
        kinds = {str(r[2].decode() if isinstance(r[2], bytes) else r[2]) for r in rest}
        return kinds <= {"Rotate", "Stop"}

    def gtid_start(self, spec: Start, offset: dict | None = None) -> Position:
        """The boundary where a GTID start begins: the first transaction the server sends for
        it, or the end of the binlog when there is none yet. *offset*: the Spark offset whose
        GTID state *spec* is; the dump completes table maps from the history it carries (its
        own would be read from information_schema now, not as of the offset)."""
        end = self.master_status()
        state = spec.position().gtid
        client = replica_client(self.opts, spec, self.opts.server_id)
        if offset is not None:
            self.schema.attach_carried(client, offset)
        try:
            for tx in client.transactions():
                return Position(tx.file, tx.pos, state)
        finally:
            client.close()
        return Position(end.file, end.pos, state)

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
        set the caller knows (*mysql_set*), else, in GTID mode, the file's PREVIOUS_GTIDS and
        the GTIDs before *pos* (what a failover resumes from)."""
        if not self.is_mariadb():
            if mysql_set is not None:
                return mysql_set
            rows = self.query("SELECT @@GLOBAL.gtid_mode")
            if not rows or str(rows[0][0]).upper() != "ON":
                return None
            return mysql_state_at(self.query, file, pos)
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

    def purged(self, file: str, logs, context: str = "", *,
               start: bool = False) -> BinlogPurgedError:
        """The error for a purged *file*, with the Spark-side remedies (*start*: the file of
        option startingPosition)."""
        return purged_error(file, logs, self.where, context=context, fix=(
            "Set onDataLoss=skip (failOnDataLoss=false) to start at the oldest binlog the "
            "server has, or start from a snapshot" if start else DATA_LOSS_FIX))


def _key(p: Position) -> str:
    return json.dumps(p.to_offset())
