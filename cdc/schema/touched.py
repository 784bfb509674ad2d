"""Which tables a DDL statement changes, and where a read of information_schema is exact.

information_schema describes the tables at the moment it is read; the binlog position that
moment corresponds to is only known between two reads of the binlog's end, *before* and *after*.
A table's description is exact from the end of the last statement that changed it up to that
moment: :func:`exact_from` works that out from the binlog's DDL statements between a stream's
position and *after* (sans-IO: the caller reads them, see :mod:`cdc.replica.binlog_ddl`).
"""

from __future__ import annotations

from cdc.schema.ddl import (AlterTable, CreateIndex, CreateTable, DropDatabase, DropIndex,
                            DropTables, RenameTables, TableName, TruncateTable, Unparsed,
                            parse_ddl)
from cdc.schema.versions import point_key

__all__ = ["named", "changed_by", "exact_from"]


def named(stmt) -> list[TableName]:
    """The tables a parsed statement names."""
    if isinstance(stmt, (CreateTable, AlterTable, TruncateTable, CreateIndex, DropIndex)):
        return [stmt.table]
    if isinstance(stmt, DropTables):
        return list(stmt.tables)
    if isinstance(stmt, RenameTables):
        return [t for pair in stmt.pairs for t in pair]
    return []


def changed_by(stmt, schema: str | None) -> list[tuple] | None:
    """(db, table) of every table whose shape or existence *stmt* may change (table None: every
    table of the database); None: it cannot be told (a statement that could not be read)."""
    if isinstance(stmt, Unparsed):
        tables = stmt.tables
        if not tables:
            return None
    elif isinstance(stmt, DropDatabase):
        return [(stmt.name, None)]
    elif isinstance(stmt, TruncateTable):
        return []
    elif isinstance(stmt, AlterTable):
        tables = [stmt.table] + [a.args[0] for a in stmt.actions if a.kind in (
            "rename", "partition_to_table", "table_to_partition")]
    else:
        tables = named(stmt)
    return [(t.db or schema or "", t.name) for t in tables]


def exact_from(history, statements, tables, before: tuple) -> tuple[dict, list]:
    """Where each of *tables* (the keys of a read of information_schema that began at the binlog
    position *before*) is described exactly, given *statements*: the binlog's DDL from the
    stream's position to the end of the read (``(file, pos, end_pos, schema, sql)``).

    Returns ``({table key: (file, end_pos)}, conflicts)``: for each captured table a statement
    before *before* changed, the end of the last such statement (the read holds from there);
    *conflicts*: statements from *before* on that change a captured table -- the read may or
    may not show them, so it is not exact anywhere and has to be made again."""
    h = history
    keys = {h._key(*k) for k in tables}
    since: dict = {}
    conflicts = []
    start = point_key(*before)
    for st in statements:
        stmt = parse_ddl(st.sql, mariadb=h.mariadb, version=h.version)
        if stmt is None:
            continue
        names = changed_by(stmt, st.schema)
        if names is None:
            hit = set(keys)
        else:
            hit = set()
            for db, table in names:
                if table is None:
                    hit.update(k for k in keys if k[0] == h._key(db, "")[0])
                elif h.captured(db, table):
                    hit.add(h._key(db, table))
        if not hit:
            continue
        if point_key(st.file, st.pos) >= start:
            conflicts.append(st)
            continue
        for k in hit:
            since[k] = (st.file, st.end_pos)
    return since, conflicts
