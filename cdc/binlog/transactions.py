"""Transaction assembly: events in, committed transactions (with positions) out.

A transaction starts at a GTID event (MySQL GTID/ANONYMOUS_GTID/GTID_TAGGED, MariaDB GTID) or
at ``QUERY BEGIN`` when there is no GTID event, and ends at XID, ``QUERY COMMIT`` (MyISAM and
other non-transactional engines), ``XA PREPARE``/``XA COMMIT``, or -- for DDL and other
statements outside BEGIN/COMMIT -- at that statement's QUERY event.

Only committed transactions come out: a transaction cut off by the end of the input (or a
ROLLBACK) is dropped, so resuming from :attr:`Transaction.end_pos` never repeats or skips one.
"""

from __future__ import annotations

import fnmatch
from types import MappingProxyType
from typing import Iterable, Iterator, Mapping, NamedTuple

from cdc.values.types import ABSENT
from cdc.binlog.events import (Event, GtidEvent, MariaGtidEvent, QueryEvent, RowsEvent, XaPrepareEvent,
                     XidEvent)
from cdc.binlog.tablemap import TableMap
from cdc.errors import SchemaError

OPS = {"insert": "c", "update": "u", "delete": "d"}


class TableFilter:
    """``db.table`` glob patterns to include and exclude (exclude wins). Empty include = all."""

    def __init__(self, include: Iterable[str] | None = None, exclude: Iterable[str] | None = None):
        self.include = [p.lower() for p in (include or [])]
        self.exclude = [p.lower() for p in (exclude or [])]
        self._cache: dict[str, bool] = {}

    def __call__(self, qualified_name: str) -> bool:
        hit = self._cache.get(qualified_name)
        if hit is None:
            name = qualified_name.lower()
            hit = (not self.include or any(fnmatch.fnmatchcase(name, p) for p in self.include)) \
                and not any(fnmatch.fnmatchcase(name, p) for p in self.exclude)
            self._cache[qualified_name] = hit
        return hit

    def __bool__(self) -> bool:
        return bool(self.include or self.exclude)


class RowChange(NamedTuple):
    """One changed row. ``before``/``after`` are value tuples in column order (None where the
    operation has no such image); ``index`` numbers the row changes within the transaction."""

    op: str                 # "c", "u" or "d"
    schema: str
    table: str
    before: tuple | None
    after: tuple | None
    columns: list
    tx: "Transaction"
    index: int

    @property
    def table_map(self):
        return self.tx._tables_by_name[(self.schema, self.table)]

    def image(self, which: str) -> dict | None:
        """``{"column": value}`` for "before" or "after"; columns outside the image are left out."""
        values = self.before if which == "before" else self.after
        if values is None:
            return None
        return {c: v for c, v in zip(self.columns, values) if v is not ABSENT}

    def key(self) -> dict | None:
        """The primary-key columns and values: from the after image, or the before image for
        deletes and for key columns an update's after image leaves out
        (``binlog_row_image=MINIMAL`` logs only the changed columns after)."""
        tmap = self.table_map
        if not tmap.primary_key:
            return None
        return key_values(self.columns, tmap.primary_key, self.before, self.after)


def key_values(columns, primary_key, before, after) -> dict:
    """``{column: value}`` of the key columns of a row change (see :meth:`RowChange.key`)."""
    if after is None:
        return {columns[i]: before[i] for i in primary_key}
    if before is None:
        return {columns[i]: after[i] for i in primary_key}
    return {columns[i]: after[i] if after[i] is not ABSENT else before[i] for i in primary_key}


class Transaction:
    """A committed transaction. ``pos`` is where it starts, ``end_pos`` the position after its
    commit event (the resume point), both in ``file``. ``gtid`` is its GTID as text (None
    without one)."""

    __slots__ = ("file", "pos", "end_pos", "_gtid", "xid", "timestamp", "server_id", "rows_events",
                 "queries", "_tables_by_name", "commit_event", "events_seen", "standalone")

    def __init__(self, file, pos, gtid, server_id, timestamp):
        self.file = file
        self.pos = pos
        self.end_pos = None
        self._gtid = gtid        # text, or a MariaGtid turned into text on first access
        self.xid = None
        self.timestamp = timestamp
        self.server_id = server_id
        self.rows_events: list[RowsEvent] = []
        self.queries: list[QueryEvent] = []
        self._tables_by_name: dict = {}
        self.commit_event: Event | None = None
        self.events_seen = 0
        # MariaDB's GTID says whether one statement is the whole transaction; for MySQL it is
        # inferred (a statement right after the GTID, with no BEGIN, is DDL).
        self.standalone: bool | None = None

    @property
    def gtid(self) -> str | None:
        g = self._gtid
        if g is not None and type(g) is not str:
            g = self._gtid = str(g)
        return g

    @property
    def tables_by_name(self) -> Mapping[tuple[str, str], TableMap]:
        """``(schema, table) -> TableMap`` of the tables whose rows events the transaction kept:
        per name, the last table map seen (the one :meth:`RowChange.key` takes the primary key
        of). Read-only."""
        return MappingProxyType(self._tables_by_name)

    @property
    def is_ddl(self) -> bool:
        return not self.rows_events and bool(self.queries)

    def changes(self) -> Iterator[RowChange]:
        index = 0
        for ev in self.rows_events:
            tmap = ev.table
            op = OPS[ev.kind]
            cols = tmap.column_names
            schema, table = tmap.schema, tmap.table
            rows = ev.decode_rows()
            if op == "u":
                for before, after in rows:
                    yield RowChange(op, schema, table, before, after, cols, self, index)
                    index += 1
            elif op == "c":
                for after in rows:
                    yield RowChange(op, schema, table, None, after, cols, self, index)
                    index += 1
            else:
                for before in rows:
                    yield RowChange(op, schema, table, before, None, cols, self, index)
                    index += 1

    def row_count(self) -> int:
        return sum(len(ev.rows) for ev in self.rows_events)

    def __repr__(self) -> str:
        return (f"Transaction(file={self.file!r}, pos={self.pos}, end_pos={self.end_pos}, "
                f"gtid={self.gtid!r}, xid={self.xid}, rows_events={len(self.rows_events)}, "
                f"queries={len(self.queries)})")


_COMMIT_QUERIES = ("COMMIT", "XA COMMIT", "XA ROLLBACK")


class TransactionAssembler:
    """Feed every event with :meth:`push`; it returns a :class:`Transaction` at each commit.

    :param table_filter: keep only rows events of tables for which it returns True
        (a :class:`TableFilter` or any callable on ``"db.table"``).
    """

    def __init__(self, table_filter=None):
        self.table_filter = table_filter
        self._tx: Transaction | None = None
        self._pending_gtid = None  # a GTID event seen, BEGIN not yet
        self.rolled_back = 0

    @property
    def in_transaction(self) -> bool:
        return self._tx is not None

    def _begin(self, ev: Event, gtid) -> Transaction:
        tx = Transaction(ev.file, ev.pos, gtid, ev.header.server_id, ev.header.timestamp)
        self._tx = tx
        return tx

    def push(self, ev: Event) -> Transaction | None:
        handler = _HANDLERS.get(type(ev))
        if handler is None:
            handler = _handler_for(type(ev))
        return handler(self, ev)

    def _on_gtid(self, ev) -> None:
        if self._tx is not None:
            self.rolled_back += 1  # the previous one never committed (cut-off input)
        gtid = ev.gtid
        h = ev.header
        tx = self._tx = Transaction(ev.file, ev.pos, gtid, h[2], h[0])
        tx.events_seen = 1
        if type(ev) is MariaGtidEvent:
            tx.standalone = ev.standalone
        return None

    def _on_query(self, ev: QueryEvent) -> Transaction | None:
        tx = self._tx
        q = ev.query
        if q == "BEGIN" or q.startswith("XA START"):
            if tx is None:
                tx = self._begin(ev, None)
            tx.events_seen += 1
            return None
        if tx is not None and tx.events_seen > 0 and (q in _COMMIT_QUERIES or
                                                      q.startswith(_COMMIT_QUERIES[1:])):
            return self._commit(tx, ev)
        if tx is not None and (q == "ROLLBACK" or q.startswith("XA ROLLBACK")):
            self._tx = None
            self.rolled_back += 1
            return None
        # A statement: inside BEGIN..COMMIT it is part of the transaction; after a bare GTID
        # (DDL, standalone MariaDB GTID) it *is* the transaction.
        if tx is None:
            tx = self._begin(ev, None)
            tx.queries.append(ev)
            return self._commit(tx, ev)
        tx.queries.append(ev)
        if tx.standalone or (tx.standalone is None and tx.events_seen == 1):
            return self._commit(tx, ev)  # GTID then a statement, no BEGIN: DDL
        tx.events_seen += 1
        return None

    def _on_rows(self, ev: RowsEvent) -> None:
        tx = self._tx
        if tx is None:
            return None
        tx.events_seen += 1
        tmap = ev.table
        if tmap is None:
            raise SchemaError(
                f"rows event for table id {ev.table_id} has no TABLE_MAP before it in its "
                f"transaction (at file {ev.file}, position {ev.pos}); the binlog is inconsistent "
                f"or the reading started mid-transaction: start at a transaction boundary (a "
                f"GTID/BEGIN event)")
        if (self.table_filter is None or self.table_filter(tmap.qualified_name)):
            tx.rows_events.append(ev)
            tx._tables_by_name[(tmap.schema, tmap.table)] = tmap
        return None

    def _on_commit_event(self, ev) -> Transaction | None:
        """XID and XA PREPARE end the transaction they are in."""
        tx = self._tx
        if tx is None:
            return None
        tx.events_seen += 1
        if type(ev) is XidEvent:
            tx.xid = ev.xid
        return self._commit(tx, ev)

    def _on_other(self, ev) -> None:
        """Table maps, annotations, rotates, ...: counted inside a transaction, else ignored."""
        tx = self._tx
        if tx is not None:
            tx.events_seen += 1
        return None

    def _commit(self, tx: Transaction, ev: Event) -> Transaction:
        tx.end_pos = ev.end_pos
        tx.commit_event = ev
        if ev.header.timestamp:
            tx.timestamp = ev.header.timestamp
        self._tx = None
        return tx

    def reset(self) -> None:
        """Forget a transaction in progress (after a reconnect restarts from a boundary)."""
        self._tx = None


_HANDLER_BY_BASE = ((GtidEvent, TransactionAssembler._on_gtid),
                    (MariaGtidEvent, TransactionAssembler._on_gtid),
                    (QueryEvent, TransactionAssembler._on_query),
                    (RowsEvent, TransactionAssembler._on_rows),
                    (XidEvent, TransactionAssembler._on_commit_event),
                    (XaPrepareEvent, TransactionAssembler._on_commit_event))
_HANDLERS: dict[type, object] = {}


def _handler_for(cls: type):
    """The push handler of an event class (by its nearest known base), cached per class."""
    handler = next((h for base, h in _HANDLER_BY_BASE if issubclass(cls, base)),
                   TransactionAssembler._on_other)
    _HANDLERS[cls] = handler
    return handler


def assemble(events: Iterable[Event], table_filter=None) -> Iterator[Transaction]:
    asm = TransactionAssembler(table_filter)
    handlers = _HANDLERS
    for ev in events:   # TransactionAssembler.push, inlined
        handler = handlers.get(type(ev))
        if handler is None:
            handler = _handler_for(type(ev))
        tx = handler(asm, ev)
        if tx is not None:
            yield tx
