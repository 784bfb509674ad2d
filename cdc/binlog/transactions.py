"""Transaction assembly: events in, committed transactions (with positions) out.

A transaction starts at a GTID event (MySQL GTID/ANONYMOUS_GTID/GTID_TAGGED, MariaDB GTID) or
at ``QUERY BEGIN`` when there is no GTID event, and ends at XID, ``QUERY COMMIT`` (MyISAM and
other non-transactional engines), ``XA PREPARE``, ``XA COMMIT``/``XA ROLLBACK``, or -- for DDL
and other statements outside BEGIN/COMMIT -- at that statement's QUERY event.

XA transactions (:mod:`cdc.binlog.xa`): the changes of an ``XA PREPARE`` are held
(:attr:`TransactionAssembler.prepared`), and come out as the changes of the transaction of its
``XA COMMIT``, at that place in the binlog order; an ``XA ROLLBACK`` drops them. The XA PREPARE
and XA ROLLBACK come out as transactions without changes (:attr:`Transaction.xa` says which).

``TRUNCATE [TABLE] [db.]t`` is logged as a statement (a QUERY event, a standalone DDL
transaction in row-based binlogs) with no rows events: :func:`truncate_target` recognises it and
the transaction carries it (:attr:`Transaction.truncates`) as a change with op ``"t"`` for that
table, in binlog order with the row changes.

A DDL statement that changes captured tables can be carried too, as *schema changes* (op
``"s"``): the assembler does not parse DDL itself; whoever follows the schema (a replica
client's schema history, :mod:`cdc.schema`) hands the records of a statement to
:meth:`TransactionAssembler.schema_changed` before pushing its QUERY event, and the transaction
carries them (:attr:`Transaction.schema_changes`), in binlog order with the rows and truncates.

Only committed changes come out: a transaction cut off by the end of the input (or a ROLLBACK)
is dropped, so resuming from :attr:`Transaction.end_pos` never repeats or skips one (with the
prepared XA transactions held there: :attr:`cdc.positions.Position.prepared`).
"""

from __future__ import annotations

import fnmatch
import re
from types import MappingProxyType
from typing import Iterable, Iterator, Mapping, NamedTuple

from cdc.values.types import ABSENT
from cdc.binlog.events import (Event, GtidEvent, MariaGtidEvent, QueryEvent, RowsEvent, XaPrepareEvent,
                     XidEvent)
from cdc.binlog.tablemap import TableMap
from cdc.binlog.xa import COMMIT, PREPARE, Prepared, XaStep, decision, xid_text
from cdc.errors import SchemaError

OPS = {"insert": "c", "update": "u", "delete": "d"}
TRUNCATE = "t"   # the op of a TRUNCATE TABLE (Debezium's letter)
SCHEMA_CHANGE = "s"     # the op of a DDL statement's schema change (Debezium's letter too)


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
    operation has no such image); ``index`` numbers the changes within the transaction.

    A ``TRUNCATE TABLE`` is a change too: op ``"t"``, no images (``before``/``after`` None),
    ``columns`` the table's column names when a table map of it is in the transaction, else
    empty; :meth:`key` is None.

    A schema change is one too: op ``"s"``, no images, ``schema_change`` the record (a
    :class:`cdc.schema.changes.SchemaChange`: ``to_json()``), ``table`` the table's name after
    the statement."""

    op: str                 # "c", "u", "d", "t" (truncate) or "s" (schema change)
    schema: str
    table: str
    before: tuple | None
    after: tuple | None
    columns: list
    tx: "Transaction"
    index: int
    schema_change: object = None    # op "s": the SchemaChange record

    @property
    def table_map(self):
        """The transaction's table map of the change's table (None for a truncate of a table
        the transaction has no rows of)."""
        return self.tx._tables_by_name.get((self.schema, self.table))

    def image(self, which: str) -> dict | None:
        """``{"column": value}`` for "before" or "after"; columns outside the image are left out."""
        values = self.before if which == "before" else self.after
        if values is None:
            return None
        return {c: v for c, v in zip(self.columns, values) if v is not ABSENT}

    def key(self) -> dict | None:
        """The primary-key columns and values: from the after image, or the before image for
        deletes and for key columns an update's after image leaves out
        (``binlog_row_image=MINIMAL`` logs only the changed columns after). None for a table
        without a primary key, and for a truncate."""
        if self.op == TRUNCATE or self.op == SCHEMA_CHANGE:
            return None
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


class Truncate(NamedTuple):
    """A ``TRUNCATE TABLE schema.table`` in a transaction: it comes after the first ``at`` of
    the transaction's (kept) rows events; ``query`` is its QUERY event."""

    schema: str
    table: str
    at: int
    query: QueryEvent


class SchemaChangeAt(NamedTuple):
    """A DDL statement's change of one captured table in a transaction (op ``"s"``): after the
    first ``at`` rows events; ``query`` its QUERY event, ``change`` the record (see the
    module)."""

    schema: str
    table: str
    at: int
    query: QueryEvent
    change: object


# --- recognising TRUNCATE TABLE ---------------------------------------------------------------------

_TRUNCATE_WORD = re.compile(r"truncate", re.IGNORECASE)
# whitespace and comments (not the executable ones, /*!...*/ and /*M!...*/: their text is SQL);
# "--" starts a comment only when a space or control character follows
_SKIP = re.compile(r"(?:\s+|/\*(?!M?!).*?\*/|--(?=[\x00-\x20]|$)[^\n]*|#[^\n]*)*", re.DOTALL)
_EXEC_OPEN = re.compile(r"/\*M?!\d*")
_TOKEN = re.compile(r"""
    (?P<w>[0-9A-Za-z_$\u0080-\U0010ffff]+)    # a word: keyword, name, number
  | `(?P<b>(?:[^`]|``)*)`                       # a `quoted` name
  | "(?P<d>(?:[^"]|"")*)"                       # a "quoted" name (ANSI_QUOTES)
  | (?P<p>.)                                    # anything else, one character
""", re.VERBOSE | re.DOTALL)


def _sql_tokens(text: str, limit: int) -> list[tuple[str, str]]:
    """The first tokens of a statement (at most *limit* + 1), comments and whitespace skipped:
    ``("w", word)``, ``("q", quoted name)`` (quotes removed, doubled quotes undone) or
    ``("p", character)`` (punctuation, a quote without its end, ...)."""
    out: list[tuple[str, str]] = []
    pos, end, executable = 0, len(text), 0
    while len(out) <= limit:
        pos = _SKIP.match(text, pos).end()
        if pos >= end:
            break
        m = _EXEC_OPEN.match(text, pos)
        if m is not None:                   # /*!50001 ... */: the text inside runs
            executable += 1
            pos = m.end()
            continue
        if executable and text.startswith("*/", pos):
            executable -= 1
            pos += 2
            continue
        m = _TOKEN.match(text, pos)
        kind = m.lastgroup
        value = m.group(kind)
        if kind == "b":
            kind, value = "q", value.replace("``", "`")
        elif kind == "d":
            kind, value = "q", value.replace('""', '"')
        out.append((kind, value))
        pos = m.end()
    return out


def _name(token) -> str | None:
    kind, value = token
    if kind == "q":
        return value or None
    if kind == "w" and not value.isdigit():
        return value
    return None


def truncate_target(statement: str, default_db: str | None) -> tuple[str, str] | None:
    """``(db, table)`` when *statement* is ``TRUNCATE [TABLE] [db.]table [WAIT n | NOWAIT]``
    (any case, comments, quoted names; *default_db*: the database of an unqualified name, the
    QUERY event's), None for every other statement -- a procedure or trigger whose body
    truncates, a string that says TRUNCATE, ``ALTER TABLE ... TRUNCATE PARTITION``."""
    if not _TRUNCATE_WORD.search(statement):
        return None
    toks = _sql_tokens(statement, 9)
    toks.append(("", ""))                       # the end
    if toks[0][0] != "w" or toks[0][1].lower() != "truncate":
        return None
    i = 1
    if toks[i][0] == "w" and toks[i][1].lower() == "table":
        i += 1
    first = _name(toks[i])
    if first is None:
        return None
    i += 1
    db, table = default_db, first
    if toks[i] == ("p", "."):
        db, table = first, _name(toks[i + 1])
        if table is None:
            return None
        i += 2
    word = toks[i][1].lower() if toks[i][0] == "w" else None
    if word == "nowait":
        i += 1
    elif word == "wait":                        # MariaDB: WAIT n (seconds, maybe fractional)
        if not (toks[i + 1][0] == "w" and toks[i + 1][1].isdigit()):
            return None
        i += 2
        if toks[i] == ("p", ".") and toks[i + 1][0] == "w" and toks[i + 1][1].isdigit():
            i += 2
    if toks[i] == ("p", ";"):
        i += 1
    if toks[i] != ("", "") or not db:
        return None
    return db, table


class Transaction:
    """A committed transaction. ``pos`` is where it starts, ``end_pos`` the position after its
    commit event (the resume point), both in ``file``. ``gtid`` is its GTID as text (None
    without one). ``xa``: its step of an XA transaction (:class:`~cdc.binlog.xa.XaStep`; None
    for others): a prepare or rollback has no changes, a commit has the prepared ones."""

    __slots__ = ("file", "pos", "end_pos", "_gtid", "xid", "timestamp", "server_id", "rows_events",
                 "queries", "_tables_by_name", "commit_event", "events_seen", "standalone",
                 "truncates", "schema_changes", "xa")

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
        # the TRUNCATE TABLEs the table filter kept, in order (a tuple: most have none)
        self.truncates: tuple[Truncate, ...] = ()
        # the schema changes handed to the assembler for its statements, in order
        self.schema_changes: tuple[SchemaChangeAt, ...] = ()
        self._tables_by_name: dict = {}
        self.commit_event: Event | None = None
        self.events_seen = 0
        # MariaDB's GTID says whether one statement is the whole transaction; for MySQL it is
        # inferred (a statement right after the GTID, with no BEGIN, is DDL).
        self.standalone: bool | None = None
        self.xa: XaStep | None = None

    def _hold(self, xid: str) -> "Transaction":
        """This prepared transaction keeps its changes (held); the transaction it is in the
        binlog order, without them, is returned."""
        step = XaStep(PREPARE, xid, Prepared(xid, self.file, self.pos, self.end_pos))
        boundary = Transaction(self.file, self.pos, self._gtid, self.server_id, self.timestamp)
        boundary.end_pos, boundary.commit_event = self.end_pos, self.commit_event
        boundary.events_seen, boundary.standalone = self.events_seen, self.standalone
        self.xa = boundary.xa = step
        return boundary

    def _take(self, held: "Transaction") -> None:
        """The changes of the prepared transaction *held* become this XA COMMIT's."""
        self.rows_events, self.queries = held.rows_events, held.queries
        self.truncates, self.schema_changes = held.truncates, held.schema_changes
        self._tables_by_name = held._tables_by_name

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

    def statements(self) -> tuple:
        """The transaction's truncates and schema changes (:class:`Truncate`,
        :class:`SchemaChangeAt`) in binlog order."""
        if not self.schema_changes:
            return self.truncates
        if not self.truncates:
            return self.schema_changes
        order = {id(q): n for n, q in enumerate(self.queries)}
        return tuple(sorted(self.truncates + self.schema_changes,
                            key=lambda t: (t.at, order.get(id(t.query), 0))))

    def changes(self) -> Iterator[RowChange]:
        """The row changes, truncates and schema changes, in binlog order; ``index`` counts
        them all."""
        index = 0
        truncates = self.statements()
        k = 0
        for n, ev in enumerate(self.rows_events):
            while k < len(truncates) and truncates[k].at <= n:
                yield self._truncate_change(truncates[k], index)
                index += 1
                k += 1
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
        for t in truncates[k:]:
            yield self._truncate_change(t, index)
            index += 1

    def _truncate_change(self, t, index: int) -> RowChange:
        if type(t) is SchemaChangeAt:
            return RowChange(SCHEMA_CHANGE, t.schema, t.table, None, None, [], self, index,
                             t.change)
        tmap = self._tables_by_name.get((t.schema, t.table))
        return RowChange(TRUNCATE, t.schema, t.table, None, None,
                         tmap.column_names if tmap is not None else [], self, index)

    def row_count(self) -> int:
        """Rows changed (truncates not counted); counted without building the rows where the
        decoder can (:meth:`~cdc.binlog.events.rows.RowsEvent.count_rows`)."""
        return sum(ev.count_rows() for ev in self.rows_events)

    def change_count(self, schema_changes: bool = True) -> int:
        """The number of :meth:`changes`: rows changed plus truncates and (*schema_changes*:
        a reader that delivers them) schema changes."""
        n = self.row_count() + len(self.truncates)
        return n + len(self.schema_changes) if schema_changes else n

    def __repr__(self) -> str:
        xa = f", xa={self.xa.action} {self.xa.xid}" if self.xa is not None else ""
        return (f"Transaction(file={self.file!r}, pos={self.pos}, end_pos={self.end_pos}, "
                f"gtid={self.gtid!r}, xid={self.xid}, rows_events={len(self.rows_events)}, "
                f"queries={len(self.queries)}, truncates={len(self.truncates)}{xa})")


_COMMIT_QUERIES = ("COMMIT", "XA COMMIT", "XA ROLLBACK")


class TransactionAssembler:
    """Feed every event with :meth:`push`; it returns a :class:`Transaction` at each commit.

    :param table_filter: keep only rows events of tables for which it returns True
        (a :class:`TableFilter` or any callable on ``"db.table"``).
    :param prepared: the dict of held prepared XA transactions to use (xid -> the
        :class:`Transaction` with its changes; :attr:`prepared`): a reader that makes a new
        assembler per connection keeps its held transactions across them.
    :param missing_prepared: ``missing_prepared(xid)``: the prepared transaction of an XA
        COMMIT or ROLLBACK that the assembler does not hold (read from elsewhere, e.g.
        :class:`cdc.binlog.files.EarlierPrepared`), or None.
    """

    def __init__(self, table_filter=None, prepared: dict | None = None,
                 missing_prepared=None):
        self.table_filter = table_filter
        #: prepared XA transactions not decided yet: xid -> the transaction, changes held
        self.prepared: dict[str, Transaction] = {} if prepared is None else prepared
        self.missing_prepared = missing_prepared
        self._tx: Transaction | None = None
        self._pending_gtid = None  # a GTID event seen, BEGIN not yet
        self.rolled_back = 0
        self._schema_changes = None     # (QUERY event, records) for the next statement

    @property
    def in_transaction(self) -> bool:
        return self._tx is not None

    def schema_changed(self, ev: QueryEvent, changes) -> None:
        """Before :meth:`push` of the QUERY event *ev*: the schema-change records of its
        statement (objects with ``db``, ``table`` and ``to_json()``, e.g.
        :class:`cdc.schema.changes.SchemaChange`); its transaction carries them
        (:attr:`Transaction.schema_changes`)."""
        self._schema_changes = (ev, tuple(changes)) if changes else None

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
        if q[:3] == "XA " and (tx is None or tx.events_seen <= 1):
            step = decision(q)      # XA COMMIT/ROLLBACK, a group of its own
            if step is not None:
                return self._decide(tx if tx is not None else self._begin(ev, None), ev, step)
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
            self._statement(tx, ev)
            return self._commit(tx, ev)
        self._statement(tx, ev)
        if tx.standalone or (tx.standalone is None and tx.events_seen == 1):
            return self._commit(tx, ev)  # GTID then a statement, no BEGIN: DDL
        tx.events_seen += 1
        return None

    def _statement(self, tx: Transaction, ev: QueryEvent) -> None:
        """A statement of *tx*: kept in ``queries``; a TRUNCATE TABLE of a table the filter
        keeps also in ``truncates`` (one that failed on the source, error code set, is not)."""
        tx.queries.append(ev)
        pending = self._schema_changes
        if pending is not None:
            self._schema_changes = None
            if pending[0] is ev:
                at = len(tx.rows_events)
                tx.schema_changes += tuple(SchemaChangeAt(c.db, c.table, at, ev, c)
                                           for c in pending[1])
        if ev.error_code:
            return
        target = truncate_target(ev.query, ev.schema)
        if target is None:
            return
        if self.table_filter is not None and not self.table_filter(f"{target[0]}.{target[1]}"):
            return
        tx.truncates += (Truncate(target[0], target[1], len(tx.rows_events), ev),)

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
        """XID and XA PREPARE end the transaction they are in; a (two-phase) XA PREPARE holds
        its changes."""
        tx = self._tx
        if tx is None:
            return None
        tx.events_seen += 1
        if type(ev) is XidEvent:
            tx.xid = ev.xid
        elif not ev.one_phase:
            xid = xid_text(ev.format_id, ev.gtrid, ev.bqual)
            self._commit(tx, ev)
            self.prepared[xid] = tx
            return tx._hold(xid)
        return self._commit(tx, ev)

    def _decide(self, tx: Transaction, ev: QueryEvent, step: XaStep) -> Transaction:
        """The XA COMMIT or XA ROLLBACK (*step*) of a prepared transaction: a commit delivers
        the held changes, a rollback drops them."""
        tx.events_seen += 1
        held = self.prepared.pop(step.xid, None)
        if held is None and self.missing_prepared is not None:
            held = self.missing_prepared(step.xid)
        if held is None:
            step = step._replace(missing=True)
        elif step.action == COMMIT:
            tx._take(held)
        tx.xa = step
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
        """Forget a transaction in progress (after a reconnect restarts from a boundary); the
        held prepared transactions stay."""
        self._tx = None
        self._schema_changes = None


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
