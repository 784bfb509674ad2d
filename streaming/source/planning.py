"""Planning a micro-batch, as pure functions: transaction boundaries in, offsets and chunks out.

No Spark, no server: the stream reader (:mod:`streaming.source.stream_reader`) feeds these with what the
driver found (:mod:`streaming.source.driver`), and the unit tests feed them made-up boundaries.

* :class:`Boundary` -- the end of one transaction (a :class:`~cdc.positions.Position`) with
  what the transaction held (rows, bytes, commit time).
* :func:`after_anchor` -- the cached boundaries that follow a batch start.
* :func:`choose` / :func:`need_scan` -- the furthest boundary within the read limits, and
  whether the cache must be scanned further first.
* :func:`plan_chunks` -- a batch's byte range cut into per-file, byte-balanced chunks at
  transaction boundaries.
* :func:`lag_report` -- how far an offset is behind the server's end.
* :func:`delivers_nothing` / :func:`quiet_until` / :func:`holds_quiet` -- transactions that give
  the stream nothing (other tables' changes): an offset moves past them only now and then.
* :func:`skip_set` / :func:`delivered_before` -- transactions already delivered.
* :func:`decided_in` -- the prepared XA transactions a chunk's task must read again.
"""

from __future__ import annotations

import math
from typing import Iterable, NamedTuple, Sequence

from cdc.binlog.xa import Prepared
from cdc.positions import Position, binlog_file_number

#: Server ids serverId+1 .. serverId+MAX_CHUNKS are used by tasks: a batch has at most this many
#: chunks (more files than that: one chunk per file).
MAX_CHUNKS = 1024
#: The driver scans up to this many read limits' worth of transactions ahead.
SCAN_LOOKAHEAD = 4

Key = tuple[int, int]


class Boundary(NamedTuple):
    """The end of one transaction: where the next one starts, and what the transaction held."""

    position: Position
    rows: int      # row changes kept by the table filter (0 when not counted)
    bytes: int     # binlog bytes of the transaction
    ts: int | None = None   # commit time of the transaction (epoch seconds)
    signal: tuple = ()      # tables the transaction asks to re-snapshot (option signalTable)
    quiet: bool = False     # the transaction delivers nothing (:func:`delivers_nothing`)

    @property
    def key(self) -> Key:
        return self.position.key


class Chunk(NamedTuple):
    """Transactions of *file* from byte *start* to *end* (a boundary, or the file's size when
    *to_file_end*: up to the file's end)."""

    file: str
    start: int
    end: int
    to_file_end: bool


def after_anchor(boundaries: Sequence[Boundary], start: Position) -> list[Boundary] | None:
    """The boundaries after the one at *start* (None: *start* is not among them, so the cache
    says nothing about what follows it)."""
    for i, b in enumerate(boundaries):
        if b.position.same_place(start):
            return list(boundaries[i + 1:])
    return None


def choose(boundaries: Iterable[Boundary], max_rows: int | None, max_bytes: int | None,
           target: Key) -> Boundary | None:
    """The furthest boundary not past *target* within the limits; at least the first one (a
    transaction larger than a limit still makes a batch of its own); never past one that
    carries a re-snapshot signal."""
    rows = nbytes = 0
    chosen = None
    for b in boundaries:
        if b.key > target:
            break
        rows += b.rows
        nbytes += b.bytes
        if chosen is not None and ((max_rows is not None and rows > max_rows) or
                                   (max_bytes is not None and nbytes > max_bytes)):
            break
        chosen = b
        if b.signal:        # a re-snapshot request ends the batch: the snapshot starts there
            break
    return chosen


def need_scan(boundaries: Sequence[Boundary], scanned_to: Key | None, max_rows: int | None,
              max_bytes: int | None, target: Key) -> bool:
    """Whether the cached boundaries fall short of both the limits and the target."""
    if scanned_to is not None and scanned_to >= target:
        return False
    if not boundaries:
        return True
    if boundaries[-1].key >= target:
        return False
    rows = sum(b.rows for b in boundaries)
    nbytes = sum(b.bytes for b in boundaries)
    return not ((max_rows is not None and rows > max_rows) or
                (max_bytes is not None and nbytes > max_bytes))


def plan_chunks(start: Position, end: Position, logs: Sequence[tuple[str, int]],
                cuts: Iterable[Position], *, min_partitions: int = 1,
                max_bytes_per_partition: int = 16 << 20,
                max_chunks: int = MAX_CHUNKS) -> list[Chunk]:
    """Cut the range *start*..*end* into chunks.

    One range per binlog file the server has (*logs*: ``SHOW BINARY LOGS`` rows) between the
    two (a purged start file contributes nothing); a range is cut at a boundary in *cuts* once
    it holds at least ``ceil(total / min_partitions)`` bytes (at most
    *max_bytes_per_partition*); when that makes more than *max_chunks* chunks, the target size
    doubles until it does not."""
    if start.same_place(end) or start.key >= end.key:
        return []
    sizes = dict(logs)
    first, last = start.key[0], end.key[0]
    ranges = []
    for f, size in logs:
        if not first <= binlog_file_number(f) <= last:
            continue
        a = start.pos if f == start.file else 4
        if f == end.file:
            ranges.append(Chunk(f, a, end.pos, False))
        else:
            ranges.append(Chunk(f, a, sizes[f], True))
    ranges = [r for r in ranges if r.start < r.end]
    total = sum(r.end - r.start for r in ranges)
    target = max(1, min(max_bytes_per_partition, math.ceil(total / max(1, min_partitions))))
    cuts_by_file: dict[str, list[int]] = {}
    for c in cuts:
        cuts_by_file.setdefault(c.file, []).append(c.pos)
    for f in cuts_by_file:
        cuts_by_file[f].sort()
    while True:
        chunks: list[Chunk] = []
        for r in ranges:
            cur = r.start
            for pos in cuts_by_file.get(r.file, ()):
                if r.start < pos < r.end and pos - cur >= target:
                    chunks.append(Chunk(r.file, cur, pos, False))
                    cur = pos
            chunks.append(Chunk(r.file, cur, r.end, r.to_file_end))
        if len(chunks) <= max(max_chunks, len(ranges)):
            return chunks
        target *= 2


def lag_report(chosen: Position, end: Position | None, logs: Sequence[tuple[str, int]],
               boundaries: Iterable[Boundary], scanned_to: Key | None,
               now: float) -> dict | None:
    """How far *chosen* (the offset a trigger reads up to) is behind the server's *end*:

    ``behindBytes`` (binlog bytes between the two, summed over files), ``behindTransactions``
    (transactions known to lie between them; a lower bound when the scan stopped early at a
    read limit) and ``lagSeconds`` (age of the oldest change not yet read: *now* - its commit
    time; 0 when caught up; None when unknown)."""
    if end is None:
        return None
    behind = chosen.bytes_behind(end, logs)
    pending = [b for b in boundaries if chosen.key < b.key <= end.key]
    if behind == 0 or not pending and scanned_to is not None and scanned_to >= end.key:
        lag = 0.0
    elif pending and pending[0].ts is not None:
        lag = max(0.0, round(now - pending[0].ts, 3))
    else:
        lag = None
    return {"file": end.file, "pos": end.pos, "behindBytes": behind,
            "behindTransactions": len(pending), "lagSeconds": lag}


def delivers_nothing(skip, tx) -> bool:
    """Whether the stream delivers nothing of transaction *tx*: no row change, TRUNCATE,
    statement (DDL, which the schema history may follow) or XA step of the captured tables
    (a transaction of other tables only), or one in *skip* (:func:`delivered_before`)."""
    return not (tx.rows_events or tx.queries or tx.truncates or tx.schema_changes or
                tx.xa is not None) or delivered_before(skip, tx)


def quiet_until(boundaries: Iterable[Boundary], start: Position, end: Key) -> Position:
    """The furthest point after *start*, up to *end*, that only quiet transactions
    (:attr:`Boundary.quiet`) separate from *start*: where reading *start*..*end* has to begin
    (*start* when the first transaction after it delivers something)."""
    at = start
    for b in boundaries:
        if b.key <= start.key:
            continue
        if b.key > end or not b.quiet:
            break
        at = b.position
    return at


def holds_quiet(start: Position, chosen: Boundary | None, boundaries: Iterable[Boundary],
                target: Key, logs: Sequence[tuple[str, int]], *, held_for: float,
                max_bytes: int, max_seconds: float) -> bool:
    """Whether a trigger keeps the offset at *start* (Spark runs no micro-batch) although the
    driver found transactions up to *chosen*: every one of them is quiet (other tables'
    changes), *chosen* is the *target* (nothing unread follows), and they hold less than
    *max_bytes* binlog bytes, kept for less than *max_seconds* so far (*held_for*). A busy
    other database then costs an empty micro-batch at most every *max_seconds* or *max_bytes*,
    and a restart reads about that much again at most."""
    if chosen is None or chosen.key < target:
        return False
    if not quiet_until(boundaries, start, chosen.key).same_place(chosen.position):
        return False
    return held_for < max_seconds and start.bytes_behind(chosen.position, logs) < max_bytes


def skip_set(position: Position, moved: bool = False):
    """The GTID state whose transactions, read from the binlog by file and position after
    *position*, were delivered already (None: nothing to skip).

    MySQL: the GTID set of *position* (a GTID start set need not be a prefix of the binlog:
    ``uuid:1-10:12-13`` from ``uuid:11`` on means 12 and 13 must not come again;
    COM_BINLOG_DUMP_GTID would skip them, the file/position dumps of the driver and the tasks do
    not). A GTID occurs once in the binlog, so the set at the batch start serves every chunk of
    the batch. MariaDB: the GTID position, only when *moved* (the offset was read from another
    server and resumes here by its GTID state, where this server's binlog may hold some of its
    transactions after the resume point: another domain's came first); a GTID is delivered when
    its domain's sequence number is not past the position's."""
    if position.gtid_set:
        return position.gtid_set
    return position.mariadb_gtid if moved and position.mariadb_gtid else None


def delivered_before(skip, tx) -> bool:
    """Whether transaction *tx* is in *skip*, the state of :func:`skip_set`."""
    return skip is not None and bool(tx.gtid) and tx.gtid in skip


def decided_in(start: Position, end: Position, boundaries: Iterable[Boundary],
               chunk: Chunk) -> tuple[Prepared, ...]:
    """The prepared XA transactions held where *chunk* starts and decided inside it (its XA
    COMMIT or XA ROLLBACK is in the chunk): its task reads them again before its dump, to
    deliver a commit's changes (see :mod:`cdc.binlog.xa`). What is held at a point is what the
    last boundary at or before it holds -- the batch *start*, the *boundaries* found in between,
    the batch *end* -- so a chunk that starts at neither needs the boundaries before it."""
    points = [start] + [b.position for b in boundaries if start.key < b.key < end.key] + [end]
    points.sort(key=lambda p: p.key)

    def held_at(key: Key) -> tuple[Prepared, ...]:
        held = start.prepared
        for p in points:
            if p.key > key:
                break
            held = p.prepared
        return held

    number = binlog_file_number(chunk.file)
    first = held_at((number, chunk.start))
    if not first:
        return ()
    still = {p.xid for p in held_at((number, chunk.end))}
    return tuple(p for p in first if p.xid not in still)
