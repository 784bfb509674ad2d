"""Which tables an initial snapshot reads, by which key, in which chunks (sans-IO: every function
takes ``query(sql, args) -> rows`` of an ordinary SQL connection).

A table is read in chunks of consecutive keys, ``after < key <= upto`` in key order (keyset
pagination: no OFFSET over the rows themselves, no lock). The key is the primary key, else the
smallest unique index whose columns are all NOT NULL, else the columns the user names
(``snapshotKeys``); a table with none is read as one chunk (one consistent-snapshot transaction,
logged). Chunk ends are found on the index alone: ``SELECT key ... ORDER BY key LIMIT 1 OFFSET
n-1`` after the previous end.

Key values travel in Spark offsets, so they are JSON: integers and text as they are, other
values as text (the server compares a text literal with a DECIMAL/DATE/DATETIME column by the
column's type), binary strings as ``{"b64": ...}``.
"""

from __future__ import annotations

import base64
import datetime as _dt
import logging
from decimal import Decimal
from typing import Callable, NamedTuple, Sequence

from cdc.errors import ConfigurationError
from cdc.replica.metadata import ServerColumn, read_columns
from cdc.replica.server import system_schemas_sql, table_unique_keys
from cdc.snapshot import SNAPSHOT_BATCH_ROWS

__all__ = ["SNAPSHOT_BATCH_ROWS", "SnapshotTable", "list_tables", "choose_key", "describe_table",
           "encode_key", "decode_key", "range_condition", "next_bound", "count_rows",
           "estimated_rows", "quote_name"]

log = logging.getLogger("cdc.snapshot")


Query = Callable[..., list]

_TABLES_SQL = ("SELECT TABLE_SCHEMA, TABLE_NAME FROM information_schema.TABLES "
               "WHERE TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA NOT IN ("
               + system_schemas_sql() + ") ORDER BY TABLE_SCHEMA, TABLE_NAME")


def quote_name(name: str) -> str:
    return "`" + str(name).replace("`", "``") + "`"


class SnapshotTable(NamedTuple):
    """One table to snapshot: its columns (information_schema) and the key it is chunked by
    (column names, in key order; empty: no usable key, one chunk)."""

    schema: str
    table: str
    columns: list          # [ServerColumn]
    key: list              # [column name]

    @property
    def name(self) -> str:
        return f"{self.schema}.{self.table}"

    @property
    def sql_name(self) -> str:
        return quote_name(self.schema) + "." + quote_name(self.table)

    def column_defs(self) -> list:
        """The columns as :class:`~cdc.values.types.ColumnDef` (what a FULL table map gives);
        a column of a type binlog-cdc cannot read is a ConfigurationError."""
        defs = [c.column_def(i) for i, c in enumerate(self.columns)]
        for s, c in zip(self.columns, defs):
            if c is None:
                raise ConfigurationError(f"{self.name}: column {s.name} has type "
                                         f"{s.column_type}, which binlog-cdc cannot read; "
                                         f"exclude the table with excludeTables")
        return defs

    @property
    def key_indexes(self) -> list[int]:
        names = [c.name for c in self.columns]
        return [names.index(k) for k in self.key]


def list_tables(query: Query, table_filter) -> list[str]:
    """``db.table`` of every base table the filter keeps (system schemas never), sorted."""
    out = []
    for schema, table in query(_TABLES_SQL, None):
        name = f"{schema}.{table}"
        if table_filter is None or table_filter(name):
            out.append(name)
    return out


def choose_key(query: Query, schema: str, table: str, columns: Sequence[ServerColumn],
               user_key: Sequence[str] | None = None) -> list[str]:
    """The columns *table* is chunked by: *user_key* (checked), else the primary key, else the
    unique NOT NULL index with the fewest columns (no prefix indexes), else ``[]``."""
    names = [c.name for c in columns]
    if user_key:
        lower = {n.lower(): n for n in names}
        missing = [k for k in user_key if k.lower() not in lower]
        if missing:
            raise ConfigurationError(
                f"option snapshotKeys: {schema}.{table} has no column {', '.join(missing)} "
                f"(its columns: {', '.join(names)})")
        return [lower[k.lower()] for k in user_key]
    indexes = table_unique_keys(query, schema, table)
    if "PRIMARY" in indexes:
        return [p.column for p in indexes["PRIMARY"]]
    usable = [[p.column for p in parts] for parts in indexes.values()
              if all(p.column is not None and p.sub_part is None and not p.nullable
                     for p in parts)]
    if usable:
        return min(usable, key=len)
    return []


def describe_table(query: Query, name: str, user_keys: dict | None = None) -> SnapshotTable:
    """The :class:`SnapshotTable` of ``db.table`` *name*."""
    schema, _, table = name.partition(".")
    columns = read_columns(query, schema, table)
    if not columns:
        raise ConfigurationError(f"{name} does not exist on the server (or the user cannot see "
                                 f"it in information_schema): it cannot be snapshotted")
    user_key = None
    for pattern, key in (user_keys or {}).items():
        if pattern.lower() == name.lower():
            user_key = key
    key = choose_key(query, schema, table, columns, user_key)
    if not key:
        log.warning("%s has no primary key and no unique NOT NULL key: it is snapshotted as one "
                    "chunk (one consistent-snapshot transaction for the whole table); name key "
                    "columns with the option snapshotKeys to read it in chunks", name)
    return SnapshotTable(schema, table, columns, key)


# --- key values in offsets ------------------------------------------------------------------------

def _encode_value(v):
    if v is None or isinstance(v, (bool, int, str)):
        return v
    if isinstance(v, (bytes, bytearray)):
        return {"b64": base64.b64encode(bytes(v)).decode("ascii")}
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, Decimal):
        return format(v, "f")
    if isinstance(v, _dt.datetime):
        return v.strftime("%Y-%m-%d %H:%M:%S.%f")
    if isinstance(v, _dt.date):
        return v.isoformat()
    if isinstance(v, _dt.timedelta):
        sign = "-" if v < _dt.timedelta(0) else ""
        v = abs(v)
        secs = v.days * 86400 + v.seconds
        return "%s%d:%02d:%02d.%06d" % (sign, secs // 3600, secs // 60 % 60, secs % 60,
                                         v.microseconds)
    return str(v)


def encode_key(values: Sequence) -> list:
    """Key values (as PyMySQL returns them) in their JSON offset form."""
    return [_encode_value(v) for v in values]


def decode_key(values: Sequence) -> list:
    """An offset's key values back into SQL parameters."""
    return [base64.b64decode(v["b64"]) if isinstance(v, dict) else v for v in values]


# --- chunk SQL --------------------------------------------------------------------------------------

def _after(key: Sequence[str]) -> str:
    """``(k1, k2, ...) > (%s, %s, ...)`` spelled out (index ranges on every server)."""
    q = [quote_name(k) for k in key]
    terms = []
    for i in range(len(q)):
        eq = [f"{q[j]} = %s" for j in range(i)]
        terms.append("(" + " AND ".join(eq + [f"{q[i]} > %s"]) + ")")
    return "(" + " OR ".join(terms) + ")"


def _after_args(values: Sequence) -> list:
    out = []
    for i in range(len(values)):
        out += list(values[:i]) + [values[i]]
    return out


def range_condition(key: Sequence[str], after: Sequence | None,
                    upto: Sequence | None) -> tuple[str, list]:
    """``WHERE`` text and parameters of the rows with ``after < key <= upto`` (None: open)."""
    parts, args = [], []
    if after is not None:
        parts.append(_after(key))
        args += _after_args(decode_key(after))
    if upto is not None:
        parts.append("NOT " + _after(key))
        args += _after_args(decode_key(upto))
    return (" AND ".join(parts) if parts else "1=1"), args


def next_bound(query: Query, table: SnapshotTable, after: Sequence | None,
               rows: int, upto: Sequence | None = None) -> list | None:
    """The key of the *rows*-th row after *after* in key order (the end of a chunk of *rows*
    rows), or None when fewer rows are left before *upto* (or the table's end)."""
    if not table.key:
        return None
    where, args = range_condition(table.key, after, upto)
    cols = ", ".join(quote_name(k) for k in table.key)
    sql = (f"SELECT {cols} FROM {table.sql_name} WHERE {where} ORDER BY {cols} "
           f"LIMIT 1 OFFSET {int(rows) - 1}")
    found = query(sql, args)
    return encode_key(found[0]) if found else None


def count_rows(query: Query, table: SnapshotTable, after: Sequence | None,
               upto: Sequence | None = None) -> int:
    """How many rows lie in ``after < key <= upto`` now (an index range count; the whole table
    for a table without a key)."""
    where, args = range_condition(table.key, after, upto) if table.key else ("1=1", [])
    found = query(f"SELECT COUNT(*) FROM {table.sql_name} WHERE {where}", args)
    return int(found[0][0]) if found else 0


_ROWS_SQL = ("SELECT TABLE_SCHEMA, TABLE_NAME, TABLE_ROWS FROM information_schema.TABLES "
             "WHERE TABLE_TYPE = 'BASE TABLE' AND TABLE_SCHEMA NOT IN (" + system_schemas_sql()
             + ")")


def estimated_rows(query: Query) -> dict[str, int]:
    """``{"db.table": rows}``: the server's estimate of every table's size
    (``information_schema.TABLES.TABLE_ROWS``: InnoDB's statistics, approximate; 0 when
    unknown), one query for all tables."""
    return {f"{schema}.{table}": int(rows or 0) for schema, table, rows in query(_ROWS_SQL, None)}
