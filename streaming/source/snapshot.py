"""The initial snapshot of a stream (``startingPosition=snapshot``): offsets, planning, reading.

A stream that starts with a snapshot first takes the binlog end ``P0`` (before reading any
row), then reads every included table in chunks of keys (:mod:`cdc.snapshot.plan`), each chunk
by a Spark task under a consistent snapshot of its own (:mod:`cdc.snapshot.reader`). Every
snapshot batch also streams the binlog on from where the previous batch ended (DBLog's
interleaving: its chunks and the binlog read in between, :mod:`streaming.source.datasource`): offsets
during the snapshot are the binlog position read up to plus the progress::

    {"file": "mysql-bin.000007", "pos": 4711,
     "snapshot": {"tables": ["shop.orders", "shop.users"], "after": [5000]}}

``tables``: the tables still to read (the first one in progress), ``after``: the last key of the
first table already delivered (null: none yet). The batch that reads the last chunk ends at a
plain binlog offset, and the stream goes on from there as any other. A restarted query resumes
at the next unread chunk and at the binlog position of its last batch.

Why interleaved rather than binlog read after the snapshot (or spooled aside while it runs):
the binlog the stream needs next is never older than one batch, so a snapshot may last longer
than the server keeps binlogs (``PURGE BINARY LOGS`` or ``binlog_expire_logs_seconds`` during it
break nothing: ``snapshotRowsPerTrigger`` bounds a batch); the offsets stay the only state (no
spool files to store, read back and remove, no second reader to keep alive across restarts),
so a killed query resumes exactly as any batch does.

Snapshot rows have ``op = "r"``, ``before`` null, ``after`` the row, ``source.file``/``pos`` the
position the chunk's snapshot corresponds to, and ``seq`` one position lower with the row's
index in the chunk: every row sorts before the first transaction the chunk did not see, after
those it saw. A chunk is read after its batch was planned, so its snapshot holds every change of
the batch's binlog range (and maybe changes of the next batches, which then apply the same
images again); a change of a row whose chunk comes later is delivered before the row itself
(an upsert of the change's full image, overwritten by the row). Applied by ``seq`` (or simply
in order, with full row images) the result is exact.

A re-snapshot after lost binlog (``onDataLoss=resnapshot``, :func:`after_data_loss`) starts at
the binlog end when the loss was found, every captured table again; its offsets carry
``"lost"`` (where the lost binlog began) and each table's first chunk starts with an op ``t``
record (what a TRUNCATE TABLE gives), so a sink replaces the table's rows: rows deleted while
the binlog was lost go too. The batch that jumps from the lost position to the re-snapshot's
start delivers nothing.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Iterator

from pyspark.sql.datasource import DataSourceReader, InputPartition

from cdc.binlog.tablemap import TableMap
from cdc.binlog.transactions import Truncate
from cdc.rows.decode import append_columns
from cdc.errors import ConfigurationError
from cdc.positions import Position
from cdc.snapshot.plan import (SnapshotTable, count_rows, describe_table, estimated_rows,
                               list_tables, next_bound)
from cdc.snapshot.progress import SnapshotProgress

from streaming.source.spark_errors import user_errors

if TYPE_CHECKING:
    from cdc.snapshot.reader import SnapshotChunkReader

    from streaming.source.batches import BatchBuilder

# The stream reader imports this module in every Python worker of a stream (the driver-side
# reader, planning, the tasks); what only a snapshot chunk's task needs (the chunk reader, Arrow
# batches: pyarrow.compute) is imported by read_chunk.

__all__ = ["KEY", "in_snapshot", "initial_offset", "next_state", "with_state", "after_data_loss",
           "lost_at", "partitions", "chunk_rows", "SnapshotChunk", "read_chunk",
           "progress", "SnapshotBatchReader"]

log = logging.getLogger("binlog_cdc.spark")

KEY = "snapshot"


def in_snapshot(offset) -> bool:
    return isinstance(offset, dict) and KEY in offset


def _with(position_offset: dict, tables: list, after, lost: str | None = None) -> dict:
    out = {k: v for k, v in position_offset.items() if k != KEY}
    if tables:
        out[KEY] = {"tables": list(tables), "after": after}
        if lost is not None:
            out[KEY]["lost"] = lost
    return out


def lost_at(offset) -> str | None:
    """Where the lost binlog began (``file:pos``), for the offsets of a re-snapshot after data
    loss (None: any other)."""
    return offset[KEY].get("lost") if in_snapshot(offset) else None


def with_state(binlog_offset: dict, state: dict | None) -> dict:
    """The offset of a snapshot batch: the binlog offset it read up to, the snapshot *state*
    after it (None: the snapshot is done). A binlog offset that asks for a re-snapshot itself
    (:func:`resnapshot_offset`: a signal) adds its tables to those left."""
    asked = binlog_offset.get(KEY)
    if state is None:
        return dict(binlog_offset)
    tables = list(state["tables"])
    if asked:
        tables += [t for t in asked["tables"] if t not in tables]
    return _with(binlog_offset, tables, state["after"], state.get("lost"))


def signalled_tables(opts, tx) -> tuple:
    """The tables a transaction asks to re-snapshot: rows inserted into the option
    ``signalTable``'s table, column ``table_name`` (else the first column) = ``db.table``."""
    want = opts.signal_table.lower()
    out = []
    for ev in tx.rows_events:
        t = ev.table
        if ev.kind != "insert" or t is None or t.qualified_name.lower() != want:
            continue
        names = [n.lower() for n in t.column_names]
        i = names.index("table_name") if "table_name" in names else 0
        for row in ev.decode_rows():
            v = row[i]
            v = v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
            if v.count(".") == 1 and v not in out:
                out.append(v.strip())
            else:
                log.warning("signal table %s: %r is not db.table, ignored", opts.signal_table, v)
    return tuple(out)


def resnapshot_offset(driver, opts, position_offset: dict, tables) -> dict:
    """The offset that starts a re-snapshot of *tables* (those the server has) at a
    transaction boundary; the binlog goes on from that boundary afterwards."""
    known = set(list_tables(driver.query, None))
    found = [t for t in tables if t in known]
    for t in tables:
        if t not in known:
            log.warning("re-snapshot of %s asked for, but the server has no such table", t)
    log.info("re-snapshot of %s at %s", ", ".join(found) or "nothing", position_offset)
    _progress(driver, opts).start(found)
    return _with(position_offset, found, None)


def _end(driver) -> Position:
    end = driver.master_status()
    return Position(end.file, end.pos, driver.gtid_at(end.file, end.pos, end.gtid))


def initial_offset(driver, opts) -> dict:
    """``P0`` (the binlog end now) with every included table still to read."""
    p0 = _end(driver)
    tables = list_tables(driver.query, opts.table_filter())
    if not tables:
        log.warning("snapshot: no table matches the options includeTables/excludeTables/table: "
                    "streaming from %s", p0)
    log.info("snapshot of %d table(s) from %s, the binlog from %s along", len(tables),
             opts.describe(), p0)
    _progress(driver, opts).start(tables)
    return _with(p0.to_offset(), tables, None)


def after_data_loss(driver, opts, lost: Position, history) -> dict:
    """The offset of a re-snapshot of every captured table from the binlog end now, after the
    binlog from *lost* on was found purged (``onDataLoss=resnapshot``); *history*
    (:class:`streaming.source.schema_history.StreamHistory`) is seeded there anew (the DDL of the lost
    binlog is lost too)."""
    p = driver.known(_end(driver))
    tables = list_tables(driver.query, opts.table_filter())
    history.seed_at_start(p)
    log.warning("binlog lost from %s (purged) on %s: re-snapshot of %d table(s) (%s) from %s, "
                "replacing their rows (onDataLoss=resnapshot)", lost, opts.describe(),
                len(tables), ", ".join(tables) or "none", p)
    _progress(driver, opts).start(tables)
    return _with(history.offset(p), tables, None, f"{lost.file}:{lost.pos}")


def _table(driver, opts, name: str) -> SnapshotTable:
    cache = driver.snapshot_tables
    t = cache.get(name)
    if t is None:
        t = cache[name] = describe_table(driver.query, name, opts.snapshot_keys)
    return t


def chunk_rows(opts) -> int:
    """Rows per chunk (task): ``snapshotChunkRows``, smaller when ``maxEventsPerTrigger`` makes
    batches that would otherwise be one chunk: a batch is cut into at least
    ``max(2, minPartitions)`` chunks, so that every core of a small cluster reads."""
    rows = opts.snapshot_chunk_rows
    if opts.max_events:
        rows = min(rows, -(-opts.max_events // max(2, opts.min_partitions)))
    return max(1, rows)


def next_state(driver, opts, start: dict, max_rows: int | None) -> dict | None:
    """The snapshot state after the next batch (None: the snapshot is done): up to
    :meth:`~streaming.source.options.SourceOptions.snapshot_batch_rows` more rows of the current table
    (whole chunks), or the rest of the table. The batch is told to the driver's
    :class:`~cdc.snapshot.progress.SnapshotProgress`."""
    snap = start[KEY]
    tables, after = list(snap["tables"]), snap["after"]
    limit = opts.snapshot_batch_rows(max_rows)
    table = _table(driver, opts, tables[0])
    bound = next_bound(driver.query, table, after, limit)
    if bound is None:        # the table's tail: fewer than the limit, counted
        end, rows = _with({}, tables[1:], None, snap.get("lost")), \
            count_rows(driver.query, table, after)
    else:
        end, rows = _with({}, tables, bound, snap.get("lost")), limit
    p = _progress(driver, opts)
    p.batch_rows = limit
    p.planned(snap, end.get(KEY), rows)
    return end.get(KEY)


def _progress(driver, opts) -> SnapshotProgress:
    p = driver.snapshot_progress
    if p is None:
        def count_done(name, after):
            return count_rows(driver.query, _table(driver, opts, name), None, after)
        p = driver.snapshot_progress = SnapshotProgress(
            lambda: estimated_rows(driver.query), count_done,
            lambda: list_tables(driver.query, opts.table_filter()),
            chunk_rows(opts), opts.max_events)
    return p


def progress(driver, offset=None) -> dict | None:
    """The snapshot's progress after the batch planned last (for the lag report; see
    :mod:`cdc.snapshot.progress`), None before any; with ``"lost"`` when *offset* is a
    re-snapshot after data loss."""
    p = driver.snapshot_progress
    out = p.report() if p is not None and p.scope else None
    if out is not None and lost_at(offset):
        out["lost"] = lost_at(offset)
    return out


class SnapshotChunk(InputPartition):
    """Rows ``after < key <= upto`` of one table (None: open), read by one task; *replace*: an op
    ``t`` record first (the first chunk of a re-snapshot after data loss)."""

    def __init__(self, index: int, table: SnapshotTable, after, upto, replace: bool = False):
        super().__init__((table.name, after, upto, replace))
        self.index = index
        self.table = table
        self.after = after
        self.upto = upto
        self.replace = replace

    def __repr__(self) -> str:
        return f"SnapshotChunk({self.index}, {self.table.name}, {self.after}..{self.upto})"


def partitions(driver, opts, start: dict, end: dict) -> list[SnapshotChunk]:
    """The chunks between two snapshot offsets (*end* may be plain: the snapshot's end)."""
    snap = start[KEY]
    stop = end.get(KEY)
    if stop == snap:
        return []
    replace = snap.get("lost") is not None
    chunks: list[SnapshotChunk] = []
    for i, name in enumerate(snap["tables"]):
        after = snap["after"] if i == 0 else None
        upto = None
        if stop is not None and stop["tables"] and stop["tables"][0] == name:
            upto = stop["after"]
            if upto is None:          # the end offset starts this table: nothing of it here
                break
        table = _table(driver, opts, name)
        rows = chunk_rows(opts)
        while True:
            bound = next_bound(driver.query, table, after, rows, upto)
            chunks.append(SnapshotChunk(len(chunks), table, after, bound if bound else upto,
                                        replace and after is None))
            if bound is None or bound == upto:     # no empty chunk after the batch's last key
                break
            after = bound
        if upto is not None:
            break
    log.info("snapshot batch: %d chunk(s) of %s", len(chunks),
             ", ".join(sorted({c.table.name for c in chunks})))
    return chunks


def _table_map(table: SnapshotTable) -> TableMap:
    columns = table.column_defs()             # primary-key columns marked
    pk = [i for i, c in enumerate(columns) if c.primary_key]
    return TableMap(0, 0, table.schema, table.table, columns, pk, True)


class _ReadRows:
    """One batch of snapshot rows, as the batch builder reads a rows event."""

    kind = "read"
    partial = False
    present_after = None

    def __init__(self, table: TableMap, rows: list):
        self.table = table
        self.rows = rows
        self.present = range(len(table.columns))

    def decode_rows(self) -> list:
        return self.rows

    def decode_columns(self, out: list, after_out=None) -> int:
        return append_columns(self.rows, False, out, after_out)


class _ChunkRows:
    """A chunk as the batch builder reads a transaction: its rows events come as they are read."""

    gtid = None
    xid = None
    server_id = None
    tables_by_name: dict = {}

    def __init__(self, reader: SnapshotChunkReader, tmap: TableMap, replace: bool = False):
        p = reader.position.position
        self.file = p.file
        self.pos = max(0, p.pos - 1)      # seq: just before the first transaction not seen
        self.source_pos = p.pos
        self.timestamp = int(time.time())
        self._reader = reader
        self._tmap = tmap
        # the table's rows are replaced: a truncate record before them
        self.truncates = (Truncate(tmap.schema, tmap.table, 0, None),) if replace else ()

    @property
    def rows_events(self) -> Iterator[_ReadRows]:
        for rows in self._reader.batches():
            yield _ReadRows(self._tmap, rows)


def read_chunk(opts, schema, typed_columns, chunk: SnapshotChunk) -> Iterator:
    """The Arrow record batches of one chunk (on an executor)."""
    from cdc.snapshot.reader import SnapshotChunkReader, connect_for_snapshot

    from streaming.source.batches import BatchBuilder, record_batches
    config = opts.replica_config()
    tmap = _table_map(chunk.table)
    conn = connect_for_snapshot(config)
    try:
        with SnapshotChunkReader(conn, chunk.table, chunk.after, chunk.upto,
                                 config=config) as reader:
            builder = BatchBuilder(schema, typed_columns)
            rows = _ChunkRows(reader, tmap, chunk.replace)
            if chunk.replace:       # an op t record first
                yield from record_batches([rows], builder)
            else:
                yield from _column_batches(reader, tmap, rows, builder)
            log.info("%s: %d rows at %s (%s)", chunk, reader.rows, reader.position.position,
                     "exact" if reader.position.exact else "not exact")
    finally:
        conn.close()


def _column_batches(reader: SnapshotChunkReader, tmap: TableMap, tx: _ChunkRows,
                    builder: BatchBuilder) -> Iterator:
    """A chunk's batches, each fetched batch of rows converted column by column
    (:mod:`streaming.source.snapshot_columns`): the rows
    :func:`~streaming.source.batches.record_batches` gives for the converted rows."""
    from streaming.source.snapshot_columns import JsonImages, TypedImages
    names, key = tmap.column_names, tmap.primary_key
    if builder.typed:
        images = TypedImages(tmap.columns, names, key, builder.names, builder.image_fields,
                             builder.typed_child)
    else:
        images = JsonImages(tmap.columns, names, key)
    index = 0
    for raw in reader.raw_batches():
        after, keys = images.images(raw, keys=builder.with_key)   # the key's JSON: option fields
        yield builder.read_batch(tx, tmap, index, after, keys)
        index += len(raw)


@user_errors
class SnapshotBatchReader(DataSourceReader):
    """``spark.read.format("binlog-cdc").option("host", ...).load()``: a one-off read of the
    included tables of a live server, in chunks read by tasks (each chunk consistent in itself,
    as in a stream's snapshot; not one snapshot across tables)."""

    def __init__(self, opts, schema, columns):
        self.opts = opts
        self.schema = schema
        self.columns = columns

    def partitions(self):
        from streaming.source.driver import Driver, preflight
        preflight(self.opts, snapshot=True, binlog=False)
        d = Driver(self.opts)
        try:
            start = initial_offset(d, self.opts)
            chunks = partitions(d, self.opts, start, _with(start, [], None)) \
                if in_snapshot(start) else []
            # one batch: every row, whatever snapshotRowsPerTrigger says
        finally:
            d.close()
        if not chunks:
            raise ConfigurationError(f"no table of {self.opts.describe()} matches the options "
                                     f"includeTables/excludeTables/table: nothing to read")
        return chunks

    def read(self, partition: SnapshotChunk) -> Iterator:
        from streaming.source.worker_heap import settle
        settle()
        return read_chunk(self.opts, self.schema, self.columns, partition)
