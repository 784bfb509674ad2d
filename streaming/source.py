"""The ``binlog-cdc`` PySpark data source: MySQL/MariaDB row changes as a DataFrame.

Streaming (a live server, over the replication protocol)::

    df = (spark.readStream.format("binlog-cdc")
          .option("host", "db.example").option("port", 3306)
          .option("user", "cdc").option("passwordFile", "/run/secrets/cdc")
          .option("serverId", 4242)                      # connections use 4242 .. 4242+1024
          .option("startingPosition", "earliest")         # or latest, {"file":..,"pos":..}, {"gtid":..}
          .option("includeTables", "shop.*").option("maxEventsPerTrigger", 50000)
          .load())

Batch (archived binlog files)::

    df = spark.read.format("binlog-cdc").load("/backups/binlogs/mysql-bin.*")

Both give the schema documented in :mod:`streaming.schema`. The options are listed in
:mod:`streaming.options`.

How a stream works
------------------
* Offsets are transaction boundaries (:mod:`streaming.offsets`).
* The driver-side reader only tracks positions: ``SHOW MASTER STATUS`` for the end of the
  binlog, and the boundaries of the transactions after the last offset (one non-blocking
  replication connection reads them; row images are not decoded unless ``maxEventsPerTrigger``
  needs the number of rows).
* ``partitions(start, end)`` cuts the range into chunks at transaction boundaries: one per binlog
  file at least, and files split into byte-balanced chunks (``minPartitions``,
  ``maxBytesPerPartition``). Each chunk is read by a task over its own replication connection
  (``serverId + 1 + chunk index``), from the chunk start until the chunk end, and decoded there
  into Arrow record batches. A replayed batch (after a restart) is planned from the file list
  alone: one chunk per file.
* MySQL GTID offsets carry the GTID set executed up to the boundary, but the driver and the
  tasks read by file and position: a transaction whose GTID is already in the set at the batch
  start (a ``{"gtid": ...}`` start set with gaps, or another server's order of the same
  transactions) is skipped, as ``COM_BINLOG_DUMP_GTID`` would skip it.
* Purged binlogs: with ``failOnDataLoss=true`` (default) the query stops with an error naming
  the missing file; with ``false`` the purged range is skipped (a warning is logged).
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from typing import Iterator

from pyspark.sql.datasource import (DataSource, DataSourceReader, DataSourceStreamReader,
                                    InputPartition)
from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadLimit, ReadMaxBytes,
                                              ReadMaxRows, SupportsTriggerAvailableNow)
from pyspark.sql.types import StructType

from cdc.errors import BinlogPurgedError, CdcError, ConfigurationError
from cdc.binlog.files import BinlogFileReader, binlog_paths
from cdc.binlog.gtid import GtidSet
from cdc.cli.lag import bytes_behind
from cdc.replica.client import SqlSession, binlog_status
from cdc.binlog.transactions import TransactionAssembler

from streaming.offsets import BinlogOffset, file_number
from streaming.options import SourceOptions
from streaming.schema import (JSON_SCHEMA, BatchBuilder, columns_from_server, record_batches,
                     typed_schema)

log = logging.getLogger("binlog_cdc.spark")

MAX_CHUNKS = 1024          # server ids serverId+1 .. serverId+1024 are used by tasks
SCAN_LOOKAHEAD = 4         # the driver scans up to this many limits' worth ahead


# ===================================================================================================
# connections
# ===================================================================================================


def connect(opts: SourceOptions):
    """A plain SQL connection (driver-side queries: positions, information_schema)."""
    from cdc.replica.client import sql_connection
    return sql_connection(opts.host, opts.port, opts.user, opts.password.get(), ssl=opts.ssl,
                          connect_timeout=opts.connect_timeout_s)


def replica_client(opts: SourceOptions, start, server_id: int):
    """A non-blocking :class:`cdc.replica.client.ReplicaClient` from *start*."""
    from cdc.replica.client import ReplicaClient, RetryPolicy
    return ReplicaClient(
        opts.host, opts.port, opts.user, opts.password.get(), server_id=server_id, start=start,
        blocking=False, heartbeat_interval=opts.heartbeat_s, ssl=opts.ssl,
        table_filter=opts.table_filter(), connect_timeout=opts.connect_timeout_s,
        retry=RetryPolicy(max_attempts=10, max_time=120, initial_backoff=0.2, max_backoff=5),
        check_server_id=False)


# ===================================================================================================
# the data source
# ===================================================================================================


class BinlogCdcDataSource(DataSource):
    """``format("binlog-cdc")``: see the module docstring, :mod:`streaming.schema` (the schema)
    and :mod:`streaming.options` (the options)."""

    @classmethod
    def name(cls) -> str:
        return "binlog-cdc"

    def __init__(self, options):
        super().__init__(options)
        self._opts: SourceOptions | None = None
        self._columns = None

    @property
    def opts(self) -> SourceOptions:
        if self._opts is None:
            self._opts = SourceOptions.parse(self.options)
        return self._opts

    def _typed_columns(self, streaming: bool):
        opts = self.opts
        if not opts.table:
            return None
        if self._columns is None:
            db, table = opts.table.split(".")
            if streaming or not opts.paths:
                opts.check_connection()
                conn = connect(opts)
                try:
                    self._columns = columns_from_server(conn, db, table)
                finally:
                    conn.close()
            else:
                self._columns = columns_from_files(opts, db, table)
        return self._columns

    def schema(self):
        opts = self.opts
        if opts.table:
            return typed_schema(self._typed_columns(streaming=not opts.paths))
        return JSON_SCHEMA

    def reader(self, schema: StructType) -> "FileBatchReader":
        opts = self.opts
        if not opts.paths:
            raise ConfigurationError("a batch read of binlog-cdc needs files: "
                                     "spark.read.format('binlog-cdc').load('/path/mysql-bin.*')")
        return FileBatchReader(opts, schema, self._typed_columns(streaming=False))

    def streamReader(self, schema: StructType) -> "BinlogStreamReader":
        opts = self.opts
        opts.check_connection()
        return BinlogStreamReader(opts, schema, self._typed_columns(streaming=True))


# ===================================================================================================
# batch: archived binlog files
# ===================================================================================================


class FilePartition(InputPartition):
    def __init__(self, path: str):
        super().__init__(path)
        self.path = path


def columns_from_files(opts: SourceOptions, db: str, table: str):
    """The column definitions of *db.table* from the first TABLE_MAP for it in the files."""
    from cdc.binlog.events import TableMapEvent
    want = (db.lower(), table.lower())
    for path in binlog_paths(opts.paths):
        for ev in BinlogFileReader([path]).events():
            if isinstance(ev, TableMapEvent):
                tmap = ev.table
                if (tmap.schema.lower(), tmap.table.lower()) == want:
                    if any(c.name is None for c in tmap.columns):
                        raise ConfigurationError(
                            f"option table: the binlog's TABLE_MAP of {db}.{table} has no column "
                            f"names (binlog_row_metadata=FULL is needed for typed batch reads)")
                    return tmap.columns
    raise ConfigurationError(f"option table: {db}.{table} has no row changes in the given files")


class FileBatchReader(DataSourceReader):
    """One task per binlog file; each decodes its file with the sans-IO parser."""

    def __init__(self, opts: SourceOptions, schema: StructType, columns):
        self.opts = opts
        self.schema = schema
        self.columns = columns

    def partitions(self):
        paths = binlog_paths(self.opts.paths)
        if not paths:
            raise ConfigurationError(f"no binlog files at {', '.join(self.opts.paths)}")
        return [FilePartition(str(p)) for p in paths]

    def read(self, partition: FilePartition) -> Iterator:
        builder = BatchBuilder(self.schema, self.columns)
        asm = TransactionAssembler(self.opts.table_filter())

        def transactions():
            for ev in BinlogFileReader([partition.path]).events():
                tx = asm.push(ev)
                if tx is not None:
                    yield tx
        return record_batches(transactions(), builder)


# ===================================================================================================
# streaming
# ===================================================================================================


@dataclass(frozen=True)
class Boundary:
    """The end of one transaction: where the next one starts, and what the transaction held."""

    file: str
    pos: int
    gtid: str | None
    rows: int      # row changes kept by the table filter (0 when not counted)
    bytes: int     # binlog bytes of the transaction
    ts: int | None = None   # commit time of the transaction (epoch seconds)

    @property
    def key(self) -> tuple[int, int]:
        return (file_number(self.file), self.pos)

    def offset(self) -> BinlogOffset:
        return BinlogOffset(self.file, self.pos, self.gtid)


class BinlogChunk(InputPartition):
    """Read transactions of ``file`` from ``start`` to ``end`` (a transaction boundary, or the
    file size: up to the file's end). ``skip_gtids``: a MySQL GTID set whose transactions are
    not delivered (the batch start's set; see :func:`_mysql_skip_set`)."""

    def __init__(self, index: int, file: str, start: int, end: int, to_file_end: bool,
                 skip_gtids: str | None = None):
        super().__init__((file, start, end))
        self.index = index
        self.file = file
        self.start = start
        self.end = end
        self.to_file_end = to_file_end
        self.skip_gtids = skip_gtids

    def __repr__(self) -> str:
        return f"BinlogChunk({self.index}, {self.file}, {self.start}..{self.end})"


def _mysql_skip_set(offset: BinlogOffset, mariadb: bool):
    """The MySQL GTID set of *offset* (None on MariaDB or without GTIDs): transactions read
    from the binlog by file and position after *offset* whose GTID is in it were delivered
    already (a GTID start set need not be a prefix of the binlog: ``uuid:1-10:12-13`` from
    ``uuid:11`` on means 12 and 13 must not come again; COM_BINLOG_DUMP_GTID would skip them,
    the file/position dumps of the driver and the tasks do not). A GTID occurs once in the
    binlog, so the set at the batch start serves every chunk of the batch."""
    if mariadb or not offset.gtid:
        return None
    return GtidSet.parse(offset.gtid)


def _delivered_before(skip, tx) -> bool:
    """Whether *tx* is in *skip*, the set of :func:`_mysql_skip_set` (None: nothing is)."""
    return skip is not None and bool(tx.gtid) and tx.gtid in skip


class _GtidTracker:
    """Carries the GTID state (MariaDB position / MySQL set) from boundary to boundary."""

    def __init__(self, text: str | None, mariadb: bool):
        self.mariadb = mariadb
        self.state = None
        if text is not None:
            from cdc.binlog.gtid import GtidSet, MariaGtidPosition
            self.state = MariaGtidPosition.parse(text) if mariadb else GtidSet.parse(text)

    def advance(self, gtid: str | None) -> str | None:
        if self.state is None:
            return None
        if gtid:
            self.state = self.state.advance(gtid) if self.mariadb else self.state.add(gtid)
        return str(self.state)


class _Driver:
    """Driver-side state: a cached query connection and the boundaries found after the anchor."""

    def __init__(self, opts: SourceOptions):
        self.opts = opts
        self.sql = SqlSession(lambda: connect(opts))
        self.mariadb: bool | None = None
        self.anchor: BinlogOffset | None = None
        self.boundaries: list[Boundary] = []
        self.scanned_to: tuple[int, int] | None = None   # the server end fully scanned
        self.server_end: BinlogOffset | None = None
        self.available_now_end: tuple[int, int] | None = None
        self.status_sql: str | None = None   # the SHOW ... STATUS spelling the server knows

    def query(self, sql: str, args=None) -> list[tuple]:
        rows = self.sql.query(sql, args)
        if self.mariadb is None:
            self.mariadb = "mariadb" in str(self.sql.conn.get_server_info()).lower()
        return rows

    def close(self) -> None:
        self.sql.close()

    def binary_logs(self) -> list[tuple[str, int]]:
        return [(str(r[0]), int(r[1])) for r in self.query("SHOW BINARY LOGS")]

    def master_status(self) -> tuple[BinlogOffset, str | None]:
        """The end of the binlog now, and (MySQL) the executed GTID set there."""
        st = binlog_status(self.query, first=self.status_sql, where=self.opts.describe())
        self.status_sql = st.statement
        end = BinlogOffset(st.file, st.pos)
        self.server_end = end
        return end, st.executed_gtid_set

    def gtid_at(self, file: str, pos: int, mysql_set: str | None = None) -> str | None:
        if self.mariadb is None:
            self.query("SELECT 1")
        if self.mariadb:
            try:
                rows = self.query("SELECT BINLOG_GTID_POS(%s, %s)", (file, pos))
            except Exception as e:  # noqa: BLE001
                log.warning("BINLOG_GTID_POS(%s, %d) failed (%s): offsets carry no GTID", file,
                            pos, e)
                return None
            return str(rows[0][0]) if rows and rows[0][0] is not None else None
        return mysql_set

    def gtid_at_oldest(self, file: str) -> str | None:
        """The GTID state at position 4 of *file*, the oldest binlog the server has: MariaDB's
        BINLOG_GTID_POS there; MySQL's ``gtid_purged`` (the PREVIOUS_GTIDS of the oldest binlog:
        every transaction before it)."""
        if self.mariadb is None:
            self.query("SELECT 1")
        purged = None
        if not self.mariadb:
            rows = self.query("SELECT @@GLOBAL.gtid_purged")
            purged = str(rows[0][0] or "") if rows else None
        return self.gtid_at(file, 4, purged)

    def check_file(self, file: str) -> list[tuple[str, int]]:
        logs = self.binary_logs()
        if file not in {n for n, _ in logs}:
            have = f"{logs[0][0]} .. {logs[-1][0]}" if logs else "no binlog files"
            raise BinlogPurgedError(
                f"binlog file {file} is no longer on {self.opts.describe()} (it has {have}): it "
                f"was purged before the stream read it, so those changes are lost. Restart the "
                f"query from a new snapshot and a new checkpoint, or set failOnDataLoss=false to "
                f"skip the purged range")
        return logs


class BinlogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """See the module docstring. Driver state is created lazily and never pickled."""

    def __init__(self, opts: SourceOptions, schema: StructType, columns):
        self.opts = opts
        self.schema = schema
        self.columns = columns
        self._driver: _Driver | None = None
        self._lag_report: dict | None = None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_driver"] = None
        return state

    def __repr__(self) -> str:
        return f"<BinlogStreamReader {self.opts.describe()}>"

    @property
    def driver(self) -> _Driver:
        if self._driver is None:
            self._driver = _Driver(self.opts)
        return self._driver

    # --- offsets ---------------------------------------------------------------------------

    def initialOffset(self) -> dict:
        d = self.driver
        spec = self.opts.starting
        if spec.kind == "latest":
            end, executed = d.master_status()
            return BinlogOffset(end.file, end.pos, d.gtid_at(end.file, end.pos, executed)).to_dict()
        if spec.kind == "earliest":
            logs = d.binary_logs()
            if not logs:
                raise ConfigurationError(f"SHOW BINARY LOGS on {self.opts.describe()} lists no "
                                         f"file: is the binary log on?")
            return BinlogOffset(logs[0][0], 4, d.gtid_at_oldest(logs[0][0])).to_dict()
        if spec.kind == "file":
            d.check_file(spec.file)
            return BinlogOffset(spec.file, spec.pos, d.gtid_at(spec.file, spec.pos)).to_dict()
        return self._gtid_start(spec.gtid).to_dict()

    def _gtid_start(self, text: str) -> BinlogOffset:
        """The boundary where a GTID start begins: the first transaction the server sends for
        it, or the end of the binlog when there is none yet."""
        d = self.driver
        end, _ = d.master_status()
        client = replica_client(self.opts, text, self.opts.server_id)
        try:
            for tx in client.transactions():
                return BinlogOffset(tx.file, tx.pos, text.strip())
        finally:
            client.close()
        return BinlogOffset(end.file, end.pos, text.strip())

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_events:
            return ReadMaxRows(self.opts.max_events)
        if self.opts.max_bytes:
            return ReadMaxBytes(self.opts.max_bytes)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        end, _ = self.driver.master_status()
        self.driver.available_now_end = end.key
        log.info("availableNow: reading up to %s", end)

    def reportLatestOffset(self):
        """The server's binlog end and how far the latest offset is behind it (shown in
        ``lastProgress.sources[].latestOffset``; :mod:`streaming.metrics` publishes it)."""
        return self._lag_report

    def _lag(self, chosen: BinlogOffset, logs: list[tuple[str, int]]) -> dict | None:
        """How far *chosen* (the offset this trigger reads up to) is behind the server's end.

        ``behindBytes``: binlog bytes between the two (summed over files);
        ``behindTransactions``: transactions known to lie between them (a lower bound when the
        scan stopped early at a read limit); ``lagSeconds``: age of the oldest change not yet
        read (now - its commit time), 0 when caught up, null when unknown."""
        d = self.driver
        end = d.server_end
        if end is None:
            return None
        behind = bytes_behind(chosen.file, chosen.pos, end.file, end.pos, logs)
        pending = [b for b in d.boundaries if chosen.key < b.key <= end.key]
        if behind == 0 or not pending and d.scanned_to is not None and d.scanned_to >= end.key:
            lag = 0.0
        elif pending and pending[0].ts is not None:
            lag = max(0.0, round(time.time() - pending[0].ts, 3))
        else:
            lag = None
        return {"file": end.file, "pos": end.pos, "behindBytes": behind,
                "behindTransactions": len(pending), "lagSeconds": lag}

    def latestOffset(self, start: dict, limit: ReadLimit) -> dict:
        d = self.driver
        s = BinlogOffset.from_dict(start)
        max_rows, max_bytes = self._limits(limit)
        end, _ = d.master_status()
        target = end.key
        if d.available_now_end is not None:
            target = min(target, d.available_now_end)
        self._anchor(s)
        if self._need_scan(max_rows, max_bytes, target):
            self._scan(s, max_rows, max_bytes, target)
        chosen = self._choose(max_rows, max_bytes, target)
        offset = chosen.offset() if chosen is not None else s
        self._lag_report = self._lag(offset, d.binary_logs())
        return offset.to_dict()

    def _limits(self, limit: ReadLimit) -> tuple[int | None, int | None]:
        if isinstance(limit, ReadMaxRows):
            return limit.max_rows, self.opts.max_bytes
        if isinstance(limit, ReadMaxBytes):
            return self.opts.max_events, limit.max_bytes
        return None, None   # ReadAllAvailable (and limits this source does not apply)

    def _anchor(self, s: BinlogOffset) -> None:
        """Make the cached boundaries start right after *s*."""
        d = self.driver
        if d.anchor is not None and d.anchor.same_place(s):
            d.anchor = s
            return
        for i, b in enumerate(d.boundaries):
            if b.file == s.file and b.pos == s.pos:
                d.boundaries = d.boundaries[i + 1:]
                d.anchor = s
                return
        d.boundaries = []
        d.anchor = s
        d.scanned_to = None

    def _choose(self, max_rows, max_bytes, target) -> Boundary | None:
        """The furthest cached boundary within the limits and the target."""
        rows = nbytes = 0
        chosen = None
        for b in self.driver.boundaries:
            if b.key > target:
                break
            rows += b.rows
            nbytes += b.bytes
            if chosen is not None and ((max_rows is not None and rows > max_rows) or
                                       (max_bytes is not None and nbytes > max_bytes)):
                break
            chosen = b
        return chosen

    def _need_scan(self, max_rows, max_bytes, target) -> bool:
        """Whether the cached boundaries fall short of both the limits and the target."""
        d = self.driver
        if d.scanned_to is not None and d.scanned_to >= target:
            return False
        if not d.boundaries:
            return True
        if d.boundaries[-1].key >= target:
            return False
        rows = sum(b.rows for b in d.boundaries)
        nbytes = sum(b.bytes for b in d.boundaries)
        return not ((max_rows is not None and rows > max_rows) or
                    (max_bytes is not None and nbytes > max_bytes))

    def _scan(self, s: BinlogOffset, max_rows, max_bytes, target) -> None:
        """Find transaction boundaries after the last known one (non-blocking dump)."""
        d = self.driver
        last = d.boundaries[-1].offset() if d.boundaries else s
        logs = d.binary_logs()
        if last.file not in {n for n, _ in logs}:
            last = self._data_lost(last, logs)
            if last is None:
                return
        gt = _GtidTracker(last.gtid, bool(d.mariadb))
        skip = _mysql_skip_set(last, bool(d.mariadb))
        rows = sum(b.rows for b in d.boundaries)
        nbytes = sum(b.bytes for b in d.boundaries)
        count_rows = max_rows is not None
        cap_rows = None if max_rows is None else max_rows * SCAN_LOOKAHEAD
        cap_bytes = None if max_bytes is None else max_bytes * SCAN_LOOKAHEAD
        client = replica_client(self.opts, (last.file, last.pos), self.opts.server_id)
        t0 = time.monotonic()
        found = 0
        complete = True
        try:
            for tx in client.transactions():
                r = sum(len(ev.rows) for ev in tx.rows_events) \
                    if count_rows and not _delivered_before(skip, tx) else 0
                b = Boundary(tx.file, tx.end_pos, gt.advance(tx.gtid), r,
                             max(0, tx.end_pos - tx.pos), tx.timestamp)
                d.boundaries.append(b)
                found += 1
                rows += r
                nbytes += b.bytes
                if b.key >= target:
                    complete = False
                    break
                if (cap_rows is not None and rows > cap_rows) or \
                        (cap_bytes is not None and nbytes > cap_bytes):
                    complete = False
                    break
        except BinlogPurgedError as e:
            if self.opts.fail_on_data_loss:
                raise BinlogPurgedError(f"{e} (set failOnDataLoss=false to skip lost data)") \
                    from None
            log.warning("data loss: %s; skipping", e)
        finally:
            client.close()
        if complete:
            d.scanned_to = target
        log.debug("scanned %d transactions from %s in %.2f s", found, last,
                  time.monotonic() - t0)

    def _data_lost(self, last: BinlogOffset, logs) -> BinlogOffset | None:
        """*last* is in a purged file: fail, or (failOnDataLoss=false) move to the first file."""
        have = f"{logs[0][0]} .. {logs[-1][0]}" if logs else "no binlog files"
        msg = (f"binlog file {last.file} (stream offset {last}) is no longer on "
               f"{self.opts.describe()} (it has {have}): it was purged before the stream read "
               f"it, so changes were lost")
        if self.opts.fail_on_data_loss:
            raise BinlogPurgedError(msg + ". Restart from a new snapshot with a new checkpoint, "
                                          "or set failOnDataLoss=false to skip the purged range")
        if not logs:
            return None
        log.warning("%s; continuing at %s:4 (failOnDataLoss=false)", msg, logs[0][0])
        # MySQL: the GTID set there is gtid_purged (gtid_at without it gave None, and every
        # offset after the gap lost its GTID set)
        first = BinlogOffset(logs[0][0], 4, self.driver.gtid_at_oldest(logs[0][0]) if
                             last.gtid is not None else None)
        # the gap itself becomes a boundary: the next offset jumps over the purged files
        self.driver.boundaries.append(Boundary(first.file, first.pos, first.gtid, 0, 0))
        return first

    # --- planning --------------------------------------------------------------------------

    def partitions(self, start: dict, end: dict):
        s, e = BinlogOffset.from_dict(start), BinlogOffset.from_dict(end)
        if s.same_place(e) or s.key >= e.key:
            return []
        d = self.driver
        logs = d.binary_logs()
        sizes = dict(logs)
        files = [n for n, _ in logs if s.key[0] <= file_number(n) <= e.key[0]]
        if s.file not in sizes:
            have = f"{logs[0][0]} .. {logs[-1][0]}" if logs else "no binlog files"
            msg = (f"binlog file {s.file} (batch start {s}) is no longer on "
                   f"{self.opts.describe()} (it has {have}): changes were lost")
            if self.opts.fail_on_data_loss:
                raise BinlogPurgedError(msg + "; set failOnDataLoss=false to skip them")
            log.warning("%s; skipping the purged files", msg)
        ranges = []   # (file, start, end, to_file_end)
        for f in files:
            a = s.pos if f == s.file else 4
            if f == e.file:
                ranges.append((f, a, e.pos, False))
            else:
                ranges.append((f, a, sizes[f], True))
        ranges = [r for r in ranges if r[1] < r[2]]
        total = sum(b - a for _, a, b, _ in ranges)
        target = max(1, min(self.opts.max_bytes_per_partition,
                            math.ceil(total / self.opts.min_partitions)))
        cuts_by_file: dict[str, list[int]] = {}
        for x in d.boundaries:          # every cached boundary is a valid cut point
            cuts_by_file.setdefault(x.file, []).append(x.pos)
        while True:
            chunks: list[tuple] = []
            for f, a, b, to_end in ranges:
                cur = a
                for pos in sorted(cuts_by_file.get(f, ())):
                    if a < pos < b and pos - cur >= target:
                        chunks.append((f, cur, pos, False))
                        cur = pos
                chunks.append((f, cur, b, to_end))
            if len(chunks) <= max(MAX_CHUNKS, len(ranges)):
                break
            target *= 2
        skip = _mysql_skip_set(s, bool(d.mariadb))
        skip_text = str(skip) if skip is not None else None     # a partition carries text
        return [BinlogChunk(i, f, a, b, to_end, skip_text)
                for i, (f, a, b, to_end) in enumerate(chunks)]

    def commit(self, end: dict) -> None:
        """Spark is done with everything up to *end*: forget boundaries up to there."""
        d = self._driver
        if d is None:
            return
        e = BinlogOffset.from_dict(end)
        if d.anchor is not None and d.anchor.key < e.key:
            self._anchor(e)

    def stop(self) -> None:
        if self._driver is not None:
            self._driver.close()

    # --- executors -------------------------------------------------------------------------

    def read(self, partition: BinlogChunk) -> Iterator:
        builder = BatchBuilder(self.schema, self.columns)
        return record_batches(self._chunk_transactions(partition), builder)

    def _chunk_transactions(self, chunk: BinlogChunk):
        opts = self.opts
        client = replica_client(opts, (chunk.file, chunk.start),
                                opts.server_id + 1 + chunk.index % MAX_CHUNKS)
        skip = GtidSet.parse(chunk.skip_gtids) if chunk.skip_gtids else None
        reached = False
        try:
            try:
                for tx in client.transactions():
                    if tx.file != chunk.file:
                        reached = chunk.to_file_end
                        break
                    if tx.end_pos > chunk.end:
                        if tx.pos < chunk.end:
                            raise CdcError(f"{chunk}: the transaction at {tx.file}:{tx.pos} ends "
                                           f"at {tx.end_pos}, past the planned end of the chunk; "
                                           f"the binlog changed under the stream")
                        reached = True
                        break
                    if not _delivered_before(skip, tx):
                        yield tx
                    if tx.end_pos == chunk.end:
                        reached = True
                        break
                else:
                    # the end of the binlog: a chunk to the end of a file ends there too
                    reached = chunk.to_file_end or (client.position is not None and
                                                    client.position.file != chunk.file)
            except BinlogPurgedError as e:
                if opts.fail_on_data_loss:
                    raise BinlogPurgedError(f"{chunk}: {e} (set failOnDataLoss=false to skip "
                                            f"lost data)") from None
                log.warning("%s: data lost, skipped: %s", chunk, e)
                return
        finally:
            client.close()
        if not reached:
            raise CdcError(f"{chunk}: the binlog ended at {client.position} before the planned "
                           f"end {chunk.file}:{chunk.end}")
