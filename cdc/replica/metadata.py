"""What a TABLE_MAP lacks, from the server's ``information_schema``.

Without ``binlog_row_metadata=FULL`` (MySQL 5.x; MariaDB's default ``NO_LOG``; MySQL 8's default
``MINIMAL``) a TABLE_MAP carries column types only: no names, no character sets (CHAR/VARCHAR/
TEXT would decode as bytes), no signedness, no ENUM/SET members, no primary key -- and MariaDB's
pre-5.6 TIMESTAMP(n)/DATETIME(n)/TIME(n) (``mysql56_temporal_format=OFF``) no precision, without
which their values cannot even be sized.  A live stream asks ``information_schema.COLUMNS`` of
that table instead, once per table and table-map shape (a new shape -- after an ALTER -- reads
it again), and checks the answer against the table map's column count and type codes: a table
that has changed since the binlog was written is a :class:`~cdc.errors.SchemaError`, never
wrongly decoded values.  A table information_schema does not show (dropped since, no
privilege) gets the default character set of binlog files
(:data:`cdc.binlog.files.DEFAULT_CHARSET`) and a warning.

:class:`TableMetadata` is what :class:`~cdc.replica.client.ReplicaClient` uses;
:func:`read_columns` and :func:`complete_table_map` are the two halves.
"""

from __future__ import annotations

import logging
import re
from typing import Callable, NamedTuple

from cdc.binlog.constants import ColumnType as T
from cdc.binlog.files import (DEFAULT_CHARSET, apply_default_charset, charset_columns,
                              collation_for_charset)
from cdc.errors import ConfigurationError, SchemaError
from cdc.values.charsets import BINARY_COLLATION
from cdc.values.types import type_info

__all__ = ["COLUMNS_SQL", "ServerColumn", "read_columns", "needs_metadata", "complete_table_map",
           "check_shape", "TableMetadata"]

log = logging.getLogger("cdc.replica")

COLUMNS_SQL = (
    "SELECT c.COLUMN_NAME, c.DATA_TYPE, c.COLUMN_TYPE, c.DATETIME_PRECISION, "
    "c.CHARACTER_SET_NAME, c.COLUMN_KEY, "
    "(SELECT MIN(co.ID) FROM information_schema.COLLATIONS co "
    " WHERE co.COLLATION_NAME = c.COLLATION_NAME) "
    "FROM information_schema.COLUMNS c WHERE c.TABLE_SCHEMA = %s AND c.TABLE_NAME = %s "
    "ORDER BY c.ORDINAL_POSITION")

_QUOTED = re.compile(r"'((?:[^']|'')*)'")
_BLOBS = frozenset({T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB, T.BLOB})
# information_schema DATA_TYPE -> the binlog type codes (ColumnDef.real_type) it may be logged as
_CODES: dict[str, frozenset] = {
    "tinyint": frozenset({T.TINY}), "smallint": frozenset({T.SHORT}),
    "mediumint": frozenset({T.INT24}), "int": frozenset({T.LONG}),
    "integer": frozenset({T.LONG}), "bigint": frozenset({T.LONGLONG}),
    "float": frozenset({T.FLOAT}), "double": frozenset({T.DOUBLE}),
    "real": frozenset({T.DOUBLE}), "double precision": frozenset({T.DOUBLE}),
    "decimal": frozenset({T.NEWDECIMAL, T.DECIMAL}), "numeric": frozenset({T.NEWDECIMAL, T.DECIMAL}),
    "date": frozenset({T.DATE, T.NEWDATE}), "time": frozenset({T.TIME, T.TIME2}),
    "datetime": frozenset({T.DATETIME, T.DATETIME2}),
    "timestamp": frozenset({T.TIMESTAMP, T.TIMESTAMP2}), "year": frozenset({T.YEAR}),
    "bit": frozenset({T.BIT}), "char": frozenset({T.STRING}), "binary": frozenset({T.STRING}),
    "varchar": frozenset({T.VARCHAR, T.VAR_STRING}),
    "varbinary": frozenset({T.VARCHAR, T.VAR_STRING}),
    "enum": frozenset({T.ENUM}), "set": frozenset({T.SET}),
    "json": frozenset({T.JSON}) | _BLOBS,   # MariaDB's JSON is LONGTEXT
    "vector": frozenset({T.VECTOR}),
    "uuid": frozenset({T.STRING}), "inet6": frozenset({T.STRING}), "inet4": frozenset({T.STRING}),
}
for _name in ("tinyblob", "tinytext", "blob", "text", "mediumblob", "mediumtext", "longblob",
              "longtext", "long", "long varchar"):
    _CODES[_name] = _BLOBS
for _name in ("geometry", "point", "linestring", "polygon", "multipoint", "multilinestring",
              "multipolygon", "geometrycollection", "geomcollection"):
    _CODES[_name] = frozenset({T.GEOMETRY})
_OLD_TEMPORAL = frozenset({T.TIME, T.DATETIME, T.TIMESTAMP})


class ServerColumn(NamedTuple):
    """One column as ``information_schema.COLUMNS`` describes it."""

    name: str
    data_type: str              # DATA_TYPE, lower case
    column_type: str            # COLUMN_TYPE, e.g. "int(10) unsigned", "enum('a','b')"
    precision: int | None       # DATETIME_PRECISION
    collation: int | None       # the collation id; 63 for binary; None: not a text column
    primary_key: bool

    @property
    def unsigned(self) -> bool:
        return "unsigned" in self.column_type.lower()

    @property
    def members(self) -> list[str]:
        """ENUM/SET members, in definition order."""
        return [v.replace("''", "'") for v in _QUOTED.findall(self.column_type)]


def read_columns(query: Callable, schema: str, table: str) -> list[ServerColumn]:
    """The columns of ``schema.table`` from information_schema (``[]``: not visible)."""
    out = []
    for name, dt, ctype, dt_prec, charset, key, coll_id in query(COLUMNS_SQL, (schema, table)):
        if charset is None:
            collation = None
        elif str(charset).lower() == "binary":
            collation = BINARY_COLLATION
        elif coll_id is not None:
            collation = int(coll_id)
        else:
            try:
                collation = collation_for_charset(str(charset))
            except ConfigurationError:
                collation = None
        if isinstance(ctype, bytes):
            ctype = ctype.decode("utf-8", "replace")
        out.append(ServerColumn(str(name), str(dt).lower(), str(ctype),
                                None if dt_prec is None else int(dt_prec), collation,
                                str(key or "").upper() == "PRI"))
    return out


def needs_metadata(tmap) -> bool:
    """Whether *tmap* lacks something information_schema can give: names, character sets, ENUM
    and SET members, or the precision of pre-5.6 temporal columns."""
    for c in tmap.columns:
        if c.name is None:
            return True
        rt = c.real_type
        if rt in _OLD_TEMPORAL and c.meta is None:
            return True
        if rt == T.ENUM and c.enum_values is None or rt == T.SET and c.set_values is None:
            return True
    return any(c.collation is None for c in charset_columns(tmap))


def _shape(columns) -> str:
    return "(" + ", ".join(columns) + ")"


def check_shape(tmap, server: list[ServerColumn], where: str = "") -> None:
    """SchemaError unless *server*'s columns match the table map's count and type codes."""
    ok = len(server) == len(tmap.columns) and all(
        c.real_type in _CODES.get(s.data_type, frozenset({c.real_type}))
        for c, s in zip(tmap.columns, server))
    if ok:
        return
    binlog = _shape(type_info(c.real_type).name for c in tmap.columns)
    now = _shape(f"{s.name} {s.column_type}" for s in server)
    raise SchemaError(
        f"the TABLE_MAP of {tmap.qualified_name}{where} has {len(tmap.columns)} columns {binlog} "
        f"but information_schema has {len(server)} {now}: the table changed after this part of "
        f"the binlog was written, so its column names, character sets and members cannot be "
        f"taken from the server. Set binlog_row_metadata=FULL on the server (the binlog then "
        f"carries them), or start reading after the change")


def complete_table_map(tmap, server: list[ServerColumn]) -> None:
    """Fill in what *tmap* lacks from *server* (checked with :func:`check_shape` first); what
    the binlog did log wins.  The table's decoding plans are rebuilt."""
    full = tmap.has_optional_metadata
    for c, s in zip(tmap.columns, server):
        rt = c.real_type
        if c.collation is None and (
                rt in (T.ENUM, T.SET) or (rt != T.GEOMETRY and type_info(rt).character)):
            # no character set in information_schema: BINARY, VARBINARY, BLOB
            c.collation = s.collation if s.collation is not None else BINARY_COLLATION
        if not full and type_info(rt).numeric:
            c.unsigned = s.unsigned
        if rt == T.ENUM and c.enum_values is None:
            c.enum_values = s.members
        elif rt == T.SET and c.set_values is None:
            c.set_values = s.members
        elif rt in _OLD_TEMPORAL and c.meta is None:
            c.meta = s.precision or 0
    if not tmap.primary_key:
        tmap.primary_key = [i for i, s in enumerate(server) if s.primary_key]
        for i in tmap.primary_key:
            tmap.columns[i].primary_key = True
    tmap.apply_names([s.name for s in server])   # names where missing; new row plans


class TableMetadata:
    """Completes table maps from information_schema for one stream.

    :param query: ``query(sql, args) -> rows`` on an ordinary SQL connection (opened lazily by
        the caller; not the replication connection).
    :param default_charset: for tables information_schema does not show.
    """

    def __init__(self, query: Callable, *, default_charset: str = DEFAULT_CHARSET):
        self.query = query
        self.default_collation = collation_for_charset(default_charset)
        self._done: dict[int, object] = {}                      # id(tmap) -> tmap
        self._tables: dict[tuple, tuple[tuple, list]] = {}      # (db, table) -> (shape, columns)
        self._warned: set[tuple] = set()
        self.reads = 0                                          # information_schema queries

    def complete(self, tmap, *, file: str | None = None, position: int | None = None) -> None:
        """Fill in what *tmap* lacks (once per table-map object; cheap when nothing is)."""
        done = self._done
        if done.get(id(tmap)) is tmap:
            return
        if len(done) > 4096:
            done.clear()
        if needs_metadata(tmap):
            self._complete(tmap, file, position)
        done[id(tmap)] = tmap

    def _complete(self, tmap, file, position) -> None:
        key = (tmap.schema, tmap.table)
        shape = tuple((c.type, c.meta) for c in tmap.columns)
        hit = self._tables.get(key)
        if hit is not None and hit[0] == shape:
            server = hit[1]
        else:
            self.reads += 1
            server = read_columns(self.query, *key)
            if len(self._tables) > 4096:
                self._tables.clear()
            self._tables[key] = (shape, server)
        if not server:
            if key not in self._warned:
                self._warned.add(key)
                log.warning("%s is not in information_schema (dropped, or no privilege): its "
                            "text columns decode as %s, names as @1, @2...", tmap.qualified_name,
                            DEFAULT_CHARSET)
            apply_default_charset(tmap, self.default_collation)
            return
        where = ""
        if file or position is not None:
            where = f" (at file {file}, position {position})"
        check_shape(tmap, server, where)
        complete_table_map(tmap, server)
