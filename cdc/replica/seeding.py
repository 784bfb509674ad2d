"""Seeding a schema history (:class:`cdc.schema.history.SchemaHistory`) from information_schema:
every captured table's columns, unique keys and default collation and every database's default
collation, in four queries, together with the binlog position they are valid at."""

from __future__ import annotations

import logging
from typing import Callable

from cdc.errors import CdcError, SchemaError, is_transient
from cdc.replica.binlog_ddl import ddl_statements
from cdc.replica.metadata import read_columns, recover_members, server_column
from cdc.replica.server import (ServerInfo, check_table_select, parse_server_version,
                                read_unique_keys, system_schemas_sql, table_unique_keys)
from cdc.replica.sql import binlog_status
from cdc.schema.columns import collation_of_name, safe_charset_collation
from cdc.schema.tables import Diverged, TableSchema
from cdc.schema.touched import exact_from as exact_from_statements

__all__ = ["read_schema", "read_collations", "read_table_schema", "server_version",
           "HistorySource"]

log = logging.getLogger("cdc.replica")

#: reads of information_schema a seed makes while DDL on the captured tables runs meanwhile
SEED_TRIES = 10

_ALL_COLUMNS_SQL = (
    "SELECT c.TABLE_SCHEMA, c.TABLE_NAME, c.COLUMN_NAME, c.DATA_TYPE, c.COLUMN_TYPE, "
    "c.DATETIME_PRECISION, c.CHARACTER_SET_NAME, c.COLUMN_KEY, "
    "(SELECT MIN(co.ID) FROM information_schema.COLLATIONS co "
    " WHERE co.COLLATION_NAME = c.COLLATION_NAME), "
    "c.NUMERIC_PRECISION, c.NUMERIC_SCALE, c.CHARACTER_OCTET_LENGTH, c.IS_NULLABLE, "
    "c.COLUMN_DEFAULT, c.EXTRA, VERSION() "
    "FROM information_schema.COLUMNS c WHERE {where} "
    "ORDER BY c.TABLE_SCHEMA, c.TABLE_NAME, c.ORDINAL_POSITION")
_TABLES_SQL = ("SELECT t.TABLE_SCHEMA, t.TABLE_NAME, t.TABLE_COLLATION "
               "FROM information_schema.TABLES t "
               "WHERE t.TABLE_TYPE IN ('BASE TABLE', 'SYSTEM VERSIONED') AND {where}")
_COLLATIONS_SQL = ("SELECT COLLATION_NAME, ID, CHARACTER_SET_NAME, IS_DEFAULT "
                   "FROM information_schema.COLLATIONS")
_SCHEMATA_SQL = ("SELECT SCHEMA_NAME, DEFAULT_CHARACTER_SET_NAME, DEFAULT_COLLATION_NAME "
                 "FROM information_schema.SCHEMATA")


def _text(v) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, (bytes, bytearray)) else str(v)


def _collation(name, charset=None, known=None):
    try:
        return collation_of_name(_text(name), known) if name else safe_charset_collation(
            _text(charset) if charset else None, None, known)
    except CdcError:
        return None


def read_collations(query: Callable) -> dict:
    """``{collation name: id, character set name: its default collation id}`` of the server
    (lower case names)."""
    out: dict = {}
    for name, cid, charset, default in query(_COLLATIONS_SQL, None):
        if name is None or cid is None:
            continue
        name, cid = _text(name).lower(), int(cid)
        out[name] = min(cid, out.get(name, cid))
        if charset is not None and _text(default or "").upper() == "YES":
            out.setdefault(_text(charset).lower(), cid)
    return out


def _where(alias: str, schemas) -> tuple[str, tuple]:
    if schemas:
        marks = ", ".join(["%s"] * len(schemas))
        return f"{alias}.TABLE_SCHEMA IN ({marks})", tuple(schemas)
    return f"{alias}.TABLE_SCHEMA NOT IN ({system_schemas_sql()})", ()


def read_schema(query: Callable, captures: Callable[[str], bool] | None = None,
                schemas=None, known: dict | None = None) -> tuple[dict, dict]:
    """``({(db, table): TableSchema}, {db: default collation id})`` of the tables *captures*
    takes (all but the system databases' when None), as information_schema shows them now;
    *schemas* (names) narrows the queries to those databases; *known*: the server's collation
    ids by name (:func:`read_collations`)."""
    databases = {_text(name): _collation(coll, cs, known)
                 for name, cs, coll in query(_SCHEMATA_SQL, None)}
    where, args = _where("t", schemas)
    collations = {}
    for db, table, coll in query(_TABLES_SQL.format(where=where), args or None):
        db, table = _text(db), _text(table)
        if captures is None or captures(f"{db}.{table}"):
            collations[(db, table)] = _collation(coll, None, known)
    where, args = _where("c", schemas)
    columns: dict[tuple, list] = {}
    version = ""
    for row in query(_ALL_COLUMNS_SQL.format(where=where), args or None):
        key = (_text(row[0]), _text(row[1]))
        version = row[-1]
        if key in collations:
            columns.setdefault(key, []).append(server_column(row[2:]))
    where, args = _where("s", schemas)
    keys = {k: v for k, v in read_unique_keys(query, where, args).items() if k in columns}
    tables = {}
    for key, cols in columns.items():
        cols = recover_members(query, key[0], key[1], cols, version)
        tables[key] = _schema(cols, collations.get(key), keys.get(key, {}))
    return tables, databases


def _schema(cols, collation, unique_keys: dict) -> TableSchema:
    """A TableSchema whose effective key is the one information_schema marks PRI;
    *unique_keys*: the table's (:func:`cdc.replica.server.read_unique_keys`)."""
    # (column name, partial: a prefix or a functional key part)
    keys = {name: [(p.column or "", p.column is None or p.sub_part is not None) for p in parts]
            for name, parts in unique_keys.items()}
    ordered = [("PRIMARY", keys["PRIMARY"])] if "PRIMARY" in keys else []
    others = [(n, p) for n, p in keys.items() if n != "PRIMARY" and all(c for c, _ in p)]
    pri = {c.name.lower() for c in cols if c.primary_key}
    others.sort(key=lambda np: {c.lower() for c, _ in np[1]} != pri)   # the server's pick first
    try:
        return TableSchema.from_server(cols, collation, ordered + others)
    except Diverged as e:      # keys naming columns that are not there (a concurrent ALTER)
        log.debug("keys of a table do not fit its columns (%s); using COLUMN_KEY", e)
        return TableSchema.from_server(cols, collation)


def read_table_schema(query: Callable, db: str, table: str,
                      known: dict | None = None) -> TableSchema | None:
    """One table as information_schema shows it now (None: not there); *known*: the server's
    collation ids by name."""
    cols = read_columns(query, db, table)
    if not cols:
        return None
    rows = query("SELECT TABLE_COLLATION FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s "
                 "AND TABLE_NAME = %s", (db, table))
    collation = _collation(rows[0][0], None, known) if rows and rows[0][0] else None
    return _schema(cols, collation, table_unique_keys(query, db, table))


def server_version(version: tuple) -> int:
    """``(10, 11, 6)`` -> ``101106``, as executable comments number versions."""
    major, minor, patch = (list(version) + [0, 0, 0])[:3]
    return int(major) * 10000 + int(minor) * 100 + int(patch)


def _literal_schemas(table_filter) -> list[str] | None:
    """The databases a TableFilter's include patterns name literally (None: any may match)."""
    include = getattr(table_filter, "include", None)
    if not include:
        return None
    out = []
    for pattern in include:
        db = pattern.split(".", 1)[0]
        if not db or any(ch in db for ch in "*?[]"):
            return None
        out.append(db)
    return sorted(set(out))


class HistorySource:
    """The IO half of a stream's schema history: seeding it from information_schema, and the
    history's ``read_table``/``at_end`` callbacks (on *query*, a SQL connection of its own)."""

    def __init__(self, config, query: Callable):
        self.config = config
        self.query = query
        self.reads = 0              # information_schema reads (seeds, single tables)
        self.metadata = None        # a TableMetadata whose ``reads`` count them too
        self._server: ServerInfo | None = None
        self.history = None

    def _pages(self):
        from cdc.replica.binlog_events import QueryEventPages
        return QueryEventPages(self.config)

    @property
    def server(self) -> ServerInfo:
        """The server *query* asks (set at connect, else asked once: ``VERSION()``)."""
        if self._server is None:
            rows = self.query("SELECT VERSION()", None)
            self._server = parse_server_version(rows[0][0] if rows else "")
        return self._server

    @server.setter
    def server(self, info: ServerInfo) -> None:
        self._server = info

    def binlog_end(self) -> tuple:
        """(file, position) of the binlog's end now."""
        end = binlog_status(lambda sql: self.query(sql, None), self.server, self.config)
        return (end.file, end.pos)

    def new_history(self):
        """A :class:`~cdc.schema.history.SchemaHistory` for the config (None: switched off)."""
        from cdc.schema.history import SchemaHistory
        if not getattr(self.config, "schema_history", True):
            return None
        self.history = SchemaHistory(captures=self.config.table_filter,
                                     on_unparsed=getattr(self.config, "on_unparsed_ddl", "fail"),
                                     read_table=self.read_table, at_end=self.at_end)
        return self.history

    def _count(self) -> None:
        self.reads += 1
        if self.metadata is not None:
            self.metadata.reads += 1

    def read_table(self, db: str, table: str):
        self._count()
        known = self.history.collations if self.history is not None else None
        return read_table_schema(self.query, db, table, known)

    def check_hidden(self, db: str, table: str) -> None:
        """A PrivilegeError when information_schema hides *table* for want of SELECT."""
        check_table_select(self.query, db, table, user=self.config.user, where=self.config.where)

    def at_end(self, file, end_pos) -> bool:
        return file is not None and end_pos is not None and self.binlog_end() == (file, end_pos)

    def seed(self, history, *, at: tuple | None = None) -> tuple | None:
        """Seed *history* from information_schema now, for a stream at the binlog position *at*
        (None: the binlog's end; a re-seed's versions begin there, see ``SchemaHistory.seed``);
        returns the binlog position the read holds at.

        The read is exact: the binlog's end is read before and after it, and the DDL statements
        the binlog holds from *at* to that end are read too (``SHOW BINLOG EVENTS``). A table
        changed before the read began is described from the end of its last change on (unknown
        before it); a change to a captured table while the read ran makes it read again (up to
        :data:`SEED_TRIES` times, then a :class:`~cdc.errors.SchemaError`).

        A first seed the server refuses (an error that is not a lost connection) leaves the
        history empty, with a warning: tables it then meets are completed from information_schema
        as it is when they are met."""
        q = self.query
        info = self.server
        history.mariadb = bool(info.is_mariadb)
        history.version = server_version(info.version)
        try:
            rows = q("SELECT @@lower_case_table_names", None)
            history.lower = bool(int(rows[0][0] or 0)) if rows else False
            history.collations.update(read_collations(q))
            tables, databases, before, exact_from = self._exact_read(history, at)
        except CdcError as e:
            if is_transient(e) or history.seeded or isinstance(e, SchemaError):
                raise
            log.warning("the schema history could not be read from information_schema (%s); "
                        "tables are completed from information_schema when they are met", e)
            history.seed({}, {})
            return None
        history.seed(tables, databases, valid_from=before, at=at, exact_from=exact_from)
        log.info("schema history: %d table(s) read from information_schema, valid at %s%s",
                 len(tables), before, f" ({len(exact_from)} from a later statement on)"
                 if exact_from else "")
        return before

    def _exact_read(self, history, at):
        """(tables, databases, the binlog position the read began at, {table: end of its last
        change before that}) -- see :meth:`seed`."""
        q = self.query
        schemas = _literal_schemas(self.config.table_filter)
        for _attempt in range(SEED_TRIES):
            before = self.binlog_end()
            tables, databases = read_schema(q, self.config.table_filter, schemas,
                                            history.collations)
            self._count()
            after = self.binlog_end()
            if before is None or after is None:
                return tables, databases, after, {}
            start = at if at is not None and at[0] is not None else before
            statements = ddl_statements(q, start, after, self._pages) if start != after else []
            exact_from, conflicts = exact_from_statements(history, statements, tables, before)
            if not conflicts:
                return tables, databases, before, exact_from
            log.info("schema history: %s changed a captured table while information_schema "
                     "was read; reading it again", conflicts[0].sql[:200])
        raise SchemaError(
            f"the captured tables' definitions kept changing while the schema history read "
            f"them from information_schema ({SEED_TRIES} tries); start the stream again when "
            f"their DDL has run, or set binlog_row_metadata=FULL on the server")
