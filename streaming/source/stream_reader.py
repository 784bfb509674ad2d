"""The stream reader of the ``binlog-cdc`` source (see :mod:`streaming.source.datasource`
for how a stream works): offsets and planning on the driver, the chunks' replication reads in
the tasks."""

from __future__ import annotations

import logging
import time
from typing import Iterator

from pyspark.sql.datasource import DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

from cdc.errors import BinlogPurgedError, CdcError
from cdc.positions import Position, Start, parse_gtid_state
from cdc.replica.history_state import restore_history, use_history
from cdc.replica.sql import resolve_start

from streaming._compat import (LegacyOffsets, ReadAllAvailable, ReadLimit, ReadMaxBytes,
                               ReadMaxRows, SupportsTriggerAvailableNow)
from streaming.source.driver import DATA_LOSS_FIX, Driver, preflight, replica_client
from streaming.source.options import SourceOptions
from streaming.source.planning import (MAX_CHUNKS, SCAN_LOOKAHEAD, Boundary, after_anchor, choose,
                                       decided_in, delivered_before, delivers_nothing,
                                       holds_quiet, lag_report, skip_set, need_scan,
                                       plan_chunks, quiet_until)
from streaming.source.schema_history import StreamHistory
from streaming.source import snapshot
from streaming.source.spark_errors import user_errors

log = logging.getLogger("binlog_cdc.spark")


def _older(file: str, than: str) -> bool:
    """Whether binlog *file* comes before *than* (same base name, lower number)."""
    base, _, num = file.rpartition(".")
    base2, _, num2 = than.rpartition(".")
    return base == base2 and num.isdigit() and num2.isdigit() and int(num) < int(num2)


# ===================================================================================================
# streaming
# ===================================================================================================


class BinlogChunk(InputPartition):
    """Read transactions of ``file`` from ``start`` to ``end`` (a transaction boundary, or the
    file size: up to the file's end). ``skip_gtids``: a MySQL GTID set whose transactions are
    not delivered (the batch start's set; see :func:`streaming.source.planning.skip_set`).
    ``schema``: the stream's schema history as of ``start`` (None: not in use). ``xa``: the
    prepared XA transactions to read again first (:func:`streaming.source.planning.decided_in`)."""

    def __init__(self, index: int, file: str, start: int, end: int, to_file_end: bool,
                 skip_gtids: str | None = None, schema: dict | None = None, xa=()):
        super().__init__((file, start, end))
        self.index = index
        self.file = file
        self.start = start
        self.end = end
        self.to_file_end = to_file_end
        self.skip_gtids = skip_gtids
        self.schema = schema
        self.xa = tuple(xa)

    def __repr__(self) -> str:
        return f"BinlogChunk({self.index}, {self.file}, {self.start}..{self.end})"


def read_to_chunk_end(read_to, chunk: BinlogChunk) -> bool:
    """Whether a dump that got to *read_to* (:attr:`ReplicaClient.read_to`) sent all of the
    chunk: the event ending at its end (of a chunk to its file's end, the file's last one; of a
    chunk with no transaction, e.g. a new file's first events), or events of a later file."""
    return read_to is not None and (read_to[0] != chunk.file or read_to[1] >= chunk.end)


class _Lost(Exception):
    """The binlog from :attr:`position` on is gone and ``onDataLoss=resnapshot``."""

    def __init__(self, position: Position):
        super().__init__(str(position))
        self.position = position


@user_errors
class BinlogStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """See the module docstring. Driver state is created lazily and never pickled."""

    def __init__(self, opts: SourceOptions, schema: StructType, columns, schema_point=None):
        self.opts = opts
        self.schema = schema
        self.columns = columns
        self.schema_point = schema_point
        self._driver: Driver | None = None
        self._lag_report: dict | None = None
        self._quiet_since: float | None = None   # monotonic time the offset was first held
        self._legacy = LegacyOffsets()           # PySpark 4.0/4.1: the next batch's start

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_driver"] = None
        return state

    def __repr__(self) -> str:
        return f"<BinlogStreamReader {self.opts.describe()}>"

    @property
    def driver(self) -> Driver:
        if self._driver is None:
            from streaming.source.worker_heap import settle
            settle()    # the planning process's imports, out of the scan's full collections
            preflight(self.opts, snapshot=self.opts.snapshot)   # where the query starts
            self._driver = Driver(self.opts)
        return self._driver

    # --- offsets ---------------------------------------------------------------------------

    def initialOffset(self) -> dict:
        """Where the stream starts (made once); the schema history is seeded there."""
        return self._legacy.once(self._initial_offset)

    def _initial_offset(self) -> dict:
        d = self.driver
        if self.opts.snapshot:
            first = snapshot.initial_offset(d, self.opts)
            p0 = d.offset(first)
            d.schema.seed_at_start(p0)
            out = d.schema.offset(p0)
            if snapshot.KEY in first:
                out[snapshot.KEY] = first[snapshot.KEY]
            return out
        start = d.known(self._start_position())
        d.schema.seed_at_start(start)
        return d.schema.offset(start)

    def _start_position(self) -> Position:
        d = self.driver
        spec = self.opts.starting
        if spec.is_gtid:
            return d.gtid_start(spec)
        if spec.kind == "file":
            logs = d.binary_logs()
            if spec.file not in {n for n, _ in logs}:
                err = d.purged(spec.file, logs, context="startingPosition", start=True)
                oldest = logs[0][0] if logs else None
                # only a file before the oldest one was purged (a later one is a mistake)
                if self.opts.fail_on_data_loss or oldest is None or not _older(spec.file, oldest):
                    raise err
                log.warning("%s; starting at the oldest binlog the server has, %s:4 "
                            "(failOnDataLoss=false)", err, oldest)
                return Position(oldest, 4, d.gtid_at_oldest(oldest))
            return Position(spec.file, spec.pos, d.gtid_at(spec.file, spec.pos))
        if spec.kind == "latest":
            end = d.master_status()
            return Position(end.file, end.pos, d.gtid_at(end.file, end.pos, end.gtid))
        first = resolve_start(d.query, spec, d.server, d.config)          # earliest
        return Position(first.file, first.pos, d.gtid_at_oldest(first.file))

    def getDefaultReadLimit(self) -> ReadLimit:
        if self.opts.max_events:
            return ReadMaxRows(self.opts.max_events)
        if self.opts.max_bytes:
            return ReadMaxBytes(self.opts.max_bytes)
        return ReadAllAvailable()

    def prepareForTriggerAvailableNow(self) -> None:
        end = self.driver.master_status()
        self.driver.available_now_end = end.key
        log.info("availableNow: reading up to %s", end)

    def reportLatestOffset(self):
        """The server's binlog end and how far the latest offset is behind it (shown in
        ``lastProgress.sources[].latestOffset``; :mod:`streaming.metrics` publishes it)."""
        return self._lag_report

    def latestOffset(self, start: dict | None = None, limit: ReadLimit | None = None) -> dict:
        # PySpark 4.0/4.1 (no admission control) give no start: see streaming._compat
        return self._legacy.latest(self) if start is None else self.latest_offset(start, limit)

    def latest_offset(self, start: dict, limit: ReadLimit, whole: bool = False) -> dict:
        """The end of the batch from *start* within *limit*; *whole*: a snapshot not yet read
        is read whole in this batch (the one batch of ``Trigger.Once``, see
        :class:`streaming._compat.LegacyOffsets`)."""
        d = self.driver
        max_rows, max_bytes = self._limits(limit)
        try:
            if d.lost is not None:          # a replayed batch found its binlog purged
                raise _Lost(d.lost)
            if not snapshot.in_snapshot(start):
                return self._binlog_offset(start, max_rows, max_bytes, snapshotting=False)
            # a snapshot batch: chunks, and the binlog on from the last batch (snapshot module)
            state = snapshot.next_state(d, self.opts, start, max_rows)
            while whole and state is not None:
                state = snapshot.next_state(d, self.opts, {snapshot.KEY: state}, max_rows)
            end = self._binlog_offset(start, max_rows, max_bytes, snapshotting=True)
            self._lag_report = dict(self._lag_report or {},
                                    snapshot=snapshot.progress(d, start))
            return snapshot.with_state(end, state)
        except _Lost as lost:
            d.lost, d.boundaries, d.scanned_to, d.anchor = None, [], None, None
            d.schema = StreamHistory(self.opts, d.query)
            end = snapshot.after_data_loss(d, self.opts, lost.position, d.schema)
            self._lag_report = {"snapshot": snapshot.progress(d, end)}
            return end

    def _binlog_offset(self, start: dict, max_rows, max_bytes, snapshotting: bool) -> dict:
        """The binlog offset a batch from *start* reads up to. A snapshot batch reads on to
        the binlog end (its chunks are read later still, availableNow or not) and is never held
        (:func:`streaming.source.planning.holds_quiet`)."""
        d = self.driver
        s = d.offset(start)
        d.schema.restore(start, s)
        target = d.master_status().key
        if d.available_now_end is not None and not snapshotting:
            target = min(target, d.available_now_end)
        self._anchor(s)
        if need_scan(d.boundaries, d.scanned_to, max_rows, max_bytes, target):
            self._scan(s, max_rows, max_bytes, target)
        chosen = choose(d.boundaries, max_rows, max_bytes, target)
        offset = d.known(chosen.position) if chosen is not None else s
        logs = d.binary_logs()
        # the lag is the truth of what was read: transactions of other tables, read and held
        # below, are not behind
        self._lag_report = lag_report(offset, d.server_end, logs, d.boundaries, d.scanned_to,
                                      time.time())
        now = time.monotonic()
        if not snapshotting and d.available_now_end is None and holds_quiet(
                s, chosen, d.boundaries, target, logs, held_for=now - (self._quiet_since or now),
                max_bytes=self.opts.idle_advance_bytes, max_seconds=self.opts.idle_advance_s):
            self._quiet_since = self._quiet_since or now
            return start            # the same offset: no micro-batch
        self._quiet_since = None
        if chosen is not None and chosen.signal:
            return snapshot.resnapshot_offset(d, self.opts, d.schema.offset(offset),
                                              chosen.signal)
        return d.schema.offset(offset)

    def _limits(self, limit: ReadLimit) -> tuple[int | None, int | None]:
        if isinstance(limit, ReadMaxRows):
            return limit.max_rows, self.opts.max_bytes
        if isinstance(limit, ReadMaxBytes):
            return self.opts.max_events, limit.max_bytes
        return None, None   # ReadAllAvailable (and limits this source does not apply)

    def _anchor(self, s: Position) -> None:
        """Make the cached boundaries start right after *s*."""
        d = self.driver
        if d.anchor is not None and d.anchor.same_place(s):
            d.anchor = s
            return
        rest = after_anchor(d.boundaries, s)
        if rest is None:
            d.boundaries, d.scanned_to = [], None
        else:
            d.boundaries = rest
        d.anchor = s

    def _scan(self, s: Position, max_rows, max_bytes, target) -> None:
        """Find transaction boundaries after the last known one (non-blocking dump)."""
        d = self.driver
        last = d.boundaries[-1].position if d.boundaries else s
        logs = d.binary_logs()
        if last.file not in {n for n, _ in logs}:
            last = self._data_lost(last, logs)
            if last is None:
                return
        d.schema.feed(last, lambda at: replica_client(self.opts, at, self.opts.server_id))
        skip = skip_set(last, d.moved(s))
        rows = sum(b.rows for b in d.boundaries)
        nbytes = sum(b.bytes for b in d.boundaries)
        count_rows = max_rows is not None
        cap_rows = None if max_rows is None else max_rows * SCAN_LOOKAHEAD
        cap_bytes = None if max_bytes is None else max_bytes * SCAN_LOOKAHEAD
        client = replica_client(self.opts, Start.at(last.file, last.pos), self.opts.server_id)
        d.schema.attach(client)     # the scan follows the DDL into the stream's history
        from streaming.source.worker_heap import few_collections
        t0 = time.monotonic()
        found = 0
        complete = True
        at = last
        with_changes, signals = self.opts.include_schema_changes, self.opts.signal_table
        boundaries = d.boundaries
        try:
            with few_collections():   # boundaries kept: see worker_heap
                for tx in client.transactions():
                    before = skip is not None and delivered_before(skip, tx)
                    # what the tasks deliver: typed mode follows DDL without delivering it
                    r = tx.change_count(with_changes) if count_rows and not before else 0
                    at = at.after(tx.file, tx.end_pos, tx.gtid, tx.xa)
                    signal = snapshot.signalled_tables(self.opts, tx) \
                        if signals and not before else ()
                    b = Boundary(at, r, max(0, tx.end_pos - tx.pos), tx.timestamp, signal,
                                 before or delivers_nothing(None, tx))
                    boundaries.append(b)
                    found += 1
                    rows += r
                    nbytes += b.bytes
                    if at.key >= target:
                        break           # scanned up to the target: complete
                    if (cap_rows is not None and rows > cap_rows) or \
                            (cap_bytes is not None and nbytes > cap_bytes):
                        complete = False
                        break
        except BinlogPurgedError as e:
            if self.opts.on_data_loss == "resnapshot":
                raise _Lost(last) from None
            if self.opts.fail_on_data_loss:
                raise BinlogPurgedError(f"{e} ({DATA_LOSS_FIX})") from None
            log.warning("data loss: %s; skipping", e)
        finally:
            client.close()
        d.schema.scanned(at)
        if complete:
            d.scanned_to = target
        log.debug("scanned %d transactions from %s in %.2f s", found, last,
                  time.monotonic() - t0)

    def _data_lost(self, last: Position, logs) -> Position | None:
        """*last* is in a purged file: fail, or (failOnDataLoss=false) move to the first file."""
        d = self.driver
        err = d.purged(last.file, logs, context=f"stream offset {last}")
        if self.opts.on_data_loss == "resnapshot":
            raise _Lost(last)
        if self.opts.fail_on_data_loss:
            raise err
        if not logs:
            return None
        log.warning("%s; continuing at %s:4 (failOnDataLoss=false)", err, logs[0][0])
        # MySQL: the GTID set there is gtid_purged (gtid_at without it gave None, and every
        # offset after the gap lost its GTID set)
        first = Position(logs[0][0], 4, d.gtid_at_oldest(logs[0][0])
                         if last.gtid is not None else None)
        # the gap itself becomes a boundary: the next offset jumps over the purged files
        d.boundaries.append(Boundary(first, 0, 0))
        return first

    # --- planning --------------------------------------------------------------------------

    def partitions(self, start: dict, end: dict):
        d = self.driver
        self._legacy.planned(start, end, lambda o: Position.from_offset(o).key)
        if snapshot.lost_at(end) and snapshot.lost_at(end) != snapshot.lost_at(start):
            return []           # lost binlog: the re-snapshot that starts at *end* replaces it
        chunks = self._binlog_partitions(start, end)
        if snapshot.in_snapshot(start):
            # after the binlog's chunks: applied in order, a snapshot row (read after the batch
            # was planned) comes after the changes it holds
            chunks += snapshot.partitions(d, self.opts, start, end)
        return chunks

    def _binlog_partitions(self, start: dict, end: dict) -> list:
        d = self.driver
        s, e = d.offset(start), d.offset(end)
        if s.same_place(e) or s.key >= e.key:
            return []
        d.schema.restore(start, s)
        logs = d.binary_logs()
        if s.file not in dict(logs):
            err = d.purged(s.file, logs, context=f"batch start {s}")
            if self.opts.on_data_loss == "resnapshot":
                log.warning("%s; the next batch re-snapshots (onDataLoss=resnapshot)", err)
                d.lost = s
                return []
            if self.opts.fail_on_data_loss:
                raise err
            log.warning("%s; skipping the purged files", err)
        if s.file != e.file and not self._known(s, e):
            # a replayed batch: what its files hold at their starts (prepared XA) is found first
            self._anchor(s)
            self._scan(s, None, None, e.key)
        # transactions of other tables only, first: not read
        read_from = quiet_until(d.boundaries, s, e.key) if self._known(s, e) else s
        chunks = plan_chunks(read_from, e, logs, (b.position for b in d.boundaries),
                             min_partitions=self.opts.min_partitions,
                             max_bytes_per_partition=self.opts.max_bytes_per_partition)
        skip = skip_set(s, d.moved(s))
        skip_text = str(skip) if skip is not None else None     # a partition carries text
        # each task gets the schema history as of its chunk's start (a replayed batch of a
        # restarted query: the driver follows the batch's DDL first)
        d.schema.feed(e, lambda at: replica_client(self.opts, at, self.opts.server_id))
        return [BinlogChunk(i, c.file, c.start, c.end, c.to_file_end, skip_text,
                            d.schema.state(c.file, c.start), decided_in(s, e, d.boundaries, c))
                for i, c in enumerate(chunks)]

    def _known(self, s: Position, e: Position) -> bool:
        """Whether the driver's boundaries cover the batch *s*..*e* (not for a replayed one)."""
        d = self.driver
        places = [b.position for b in d.boundaries]
        return any(p.same_place(e) for p in places) and (
            (d.anchor is not None and d.anchor.same_place(s)) or
            any(p.same_place(s) for p in places))

    def commit(self, end: dict) -> None:
        """Spark is done with everything up to *end*: forget boundaries up to there."""
        d = self._driver
        if d is None:
            return
        e = d.offset(end)
        if d.anchor is not None and d.anchor.key < e.key:
            self._anchor(e)

    def stop(self) -> None:
        if self._driver is not None:
            self._driver.close()

    # --- executors -------------------------------------------------------------------------

    def read(self, partition: "BinlogChunk") -> Iterator:
        from streaming.source.worker_heap import settle
        settle()
        if self.opts.layout == "flat":
            from streaming.contract.flat import flatten_batches
            return flatten_batches(self._read(partition), self.columns)
        return self._read(partition)

    def _read(self, partition: "BinlogChunk") -> Iterator:
        if isinstance(partition, snapshot.SnapshotChunk):
            return snapshot.read_chunk(self.opts, self.schema, self.columns, partition)
        from streaming.source.batches import BatchBuilder, record_batches
        builder = BatchBuilder(self.schema, self.columns, table=self.opts.table,
                               schema_point=self.schema_point)
        return record_batches(self._chunk_transactions(partition), builder)

    def _chunk_transactions(self, chunk: "BinlogChunk"):
        """The chunk's transactions; a dump that ends before the planned end (a server shutting
        down ends a non-blocking dump as if the binlog ended there) is read on from where it
        stopped, within the retry budget, before that is an error."""
        p = self.opts.retry
        start = Start.at(chunk.file, chunk.start, chunk.xa)
        t0 = time.monotonic()
        history: list = []      # the chunk's schema history, carried across the attempts
        for attempt in range(1, (p.max_attempts or 10) + 1):
            at = yield from self._chunk_once(chunk, start, history)
            if at is None:
                return
            if attempt >= (p.max_attempts or 10) or \
                    (p.max_time is not None and time.monotonic() - t0 > p.max_time):
                break
            wait = min(p.max_backoff, p.initial_backoff * 2 ** (attempt - 1))
            log.warning("%s: the binlog dump ended at %s before the planned end %s:%d (is the "
                        "server restarting?); reading on from there in %.1f s", chunk, at,
                        chunk.file, chunk.end, wait)
            time.sleep(wait)
            start = Start.at(at.file, at.pos, at.prepared)
        raise CdcError(f"{chunk}: the binlog ended at {at} before the planned end "
                       f"{chunk.file}:{chunk.end}")

    def _chunk_once(self, chunk: "BinlogChunk", start: Start, history: list):
        """One dump for *chunk* from *start*: None when the chunk was read to its end, else the
        position where the dump stopped short. *history*: [the schema history the chunk's
        dumps follow, from the one the chunk carries] (empty until the first dump)."""
        opts = self.opts
        client = replica_client(opts, start, opts.server_id + 1 + chunk.index % MAX_CHUNKS)
        if chunk.schema is not None:
            if not history:
                history.append(restore_history(client, chunk.schema))
            use_history(client, history[0])
        skip = parse_gtid_state(chunk.skip_gtids) if chunk.skip_gtids else None
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
                    if not delivered_before(skip, tx):
                        yield tx
                    if tx.end_pos == chunk.end:
                        reached = True
                        break
                else:
                    # The dump ended: at the end of the binlog, or early (a source shutting down
                    # ends a non-blocking dump with the same EOF). A chunk whose end no
                    # transaction ends at (the end of its closed file, or of events that are no
                    # transaction) ends there only if the dump did send that end.
                    reached = (client.position is not None and
                               client.position.file != chunk.file) or \
                        read_to_chunk_end(client.read_to, chunk)
            except BinlogPurgedError as e:
                if opts.fail_on_data_loss:
                    raise BinlogPurgedError(f"{chunk}: {e} ({DATA_LOSS_FIX})") from None
                log.warning("%s: data lost, skipped: %s", chunk, e)
                return None
        finally:
            client.close()
        if reached:
            return None
        at = client.position
        return at if at is not None and at.file else start.position()
