"""The DDL statements of a stretch of the server's binlog, read with ``SHOW BINLOG EVENTS`` on an
ordinary SQL connection (the replication account's privileges suffice): what a schema history
read from information_schema needs to know to say where the read is exact
(:mod:`cdc.replica.seeding`)."""

from __future__ import annotations

import re
from typing import Callable, NamedTuple

from cdc.schema.sqltext import ddl_head
from cdc.schema.versions import point_key

__all__ = ["Statement", "ddl_statements"]

#: events asked for at a time
PAGE = 5000
#: events asked for on the SQL connection before a stretch is read on with the raw pages
#: (a PyMySQL row costs several times what a raw page's does)
FIRST_PAGE = 500

_USE = re.compile(r"use `((?:[^`]|``)*)`; ", re.S)


class Statement(NamedTuple):
    """A DDL statement of the binlog: its QUERY event's (file, position, end position), its
    default database (None: none) and text."""

    file: str
    pos: int
    end_pos: int
    schema: str | None
    sql: str


def _text(v) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, (bytes, bytearray)) else str(v)


def _statement(file: str, row) -> Statement | None:
    _log, pos, kind, _server, end, info = row[:6]
    if _text(kind) != "Query" or info is None:
        return None
    text, schema = _text(info), None
    m = _USE.match(text)
    if m:
        schema, text = m.group(1).replace("``", "`"), text[m.end():]
    if ddl_head(text) is None:
        return None
    return Statement(file, int(pos), int(end), schema, text)


def ddl_statements(query: Callable, start: tuple, end: tuple,
                   pages: Callable | None = None) -> list[Statement]:
    """The DDL statements the binlog holds from *start* = (file, pos) up to *end* = (file, pos),
    the binlog's end (both event boundaries), in binlog order.

    *pages*: makes a :class:`~cdc.replica.binlog_events.QueryEventPages` (a connection of its
    own); a stretch of more than :data:`FIRST_PAGE` events is read on with it (its rows cost
    less to read)."""
    if point_key(*start) >= point_key(*end):
        return []
    files = [_text(r[0]) for r in query("SHOW BINARY LOGS", None)]
    ends_at = point_key(*end)
    wanted = [f for f in files if point_key(start[0], 0) <= point_key(f, 0) <= point_key(end[0], 0)]
    out: list[Statement] = []
    fast = None
    try:
        for file in wanted:
            pos, skip = (start[1] if file == start[0] else 4), 0
            while True:
                if fast is None:
                    limit = PAGE if pages is None else min(PAGE, FIRST_PAGE)
                    rows = query(f"SHOW BINLOG EVENTS IN %s FROM {int(pos)} "
                                 f"LIMIT {skip}, {limit}", (file,))
                    kept, count, last = rows, len(rows), rows[-1] if rows else None
                else:
                    limit = PAGE
                    kept, count, last = fast(file, pos, skip, PAGE)
                for row in kept:
                    if point_key(file, int(row[1])) >= ends_at:
                        return out
                    st = _statement(file, row)
                    if st is not None:
                        out.append(st)
                if last is not None and point_key(file, int(last[1])) >= ends_at:
                    return out
                if count < limit:
                    break
                # the next page: after the last event (MariaDB 11.4+ logs an event inside a
                # transaction with End_log_pos 0, so not from its end)
                pos, skip = int(last[1]), 1
                if fast is None and pages is not None:
                    fast = pages()
    finally:
        if fast is not None:
            fast.close()
    return out
