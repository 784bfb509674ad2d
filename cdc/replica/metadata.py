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
from cdc.errors import CdcError, ConfigurationError, SchemaError
from cdc.values.charsets import BINARY_COLLATION, charset_of
from cdc.values.types import ColumnDef, type_info

__all__ = ["COLUMNS_SQL", "ServerColumn", "read_columns", "recover_members", "needs_metadata",
           "complete_table_map", "check_shape", "TableMetadata"]

log = logging.getLogger("cdc.replica")

COLUMNS_SQL = (
    "SELECT c.COLUMN_NAME, c.DATA_TYPE, c.COLUMN_TYPE, c.DATETIME_PRECISION, "
    "c.CHARACTER_SET_NAME, c.COLUMN_KEY, "
    "(SELECT MIN(co.ID) FROM information_schema.COLLATIONS co "
    " WHERE co.COLLATION_NAME = c.COLLATION_NAME), "
    "c.NUMERIC_PRECISION, c.NUMERIC_SCALE, c.CHARACTER_OCTET_LENGTH, c.IS_NULLABLE "
    "FROM information_schema.COLUMNS c WHERE c.TABLE_SCHEMA = %s AND c.TABLE_NAME = %s "
    "ORDER BY c.ORDINAL_POSITION")

_QUOTED = re.compile(r"'((?:[^']|'')*)'")
_INT_CODES = {"tinyint": T.TINY, "smallint": T.SHORT, "mediumint": T.INT24, "int": T.LONG,
              "integer": T.LONG, "bigint": T.LONGLONG}
_TEMPORAL2 = {"time": T.TIME2, "datetime": T.DATETIME2, "timestamp": T.TIMESTAMP2}
_BLOB_LENGTH_BYTES = {"tinyblob": 1, "tinytext": 1, "blob": 2, "text": 2, "mediumblob": 3,
                      "mediumtext": 3, "longblob": 4, "longtext": 4, "long": 3, "long varchar": 3}
_GEOMETRIES = frozenset({"geometry", "point", "linestring", "polygon", "multipoint",
                         "multilinestring", "multipolygon", "geometrycollection",
                         "geomcollection"})
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
for _name in _BLOB_LENGTH_BYTES:
    _CODES[_name] = _BLOBS
for _name in _GEOMETRIES:
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
    numeric_precision: int | None = None
    numeric_scale: int | None = None
    octets: int | None = None   # CHARACTER_OCTET_LENGTH
    nullable: bool = True
    member_names: tuple | None = None   # ENUM/SET members read from rows (see recover_members)

    @property
    def unsigned(self) -> bool:
        return "unsigned" in self.column_type.lower()

    @property
    def members(self) -> list[str]:
        """ENUM/SET members, in definition order."""
        if self.member_names is not None:
            return list(self.member_names)
        return [v.replace("''", "'") for v in _QUOTED.findall(self.column_type)]

    def column_def(self, index: int) -> ColumnDef | None:
        """This column as the :class:`~cdc.values.types.ColumnDef` a TABLE_MAP with full metadata
        would describe (None: a type binlog-cdc has no column description for)."""
        dt = self.data_type
        collation = self.collation if self.collation is not None else BINARY_COLLATION
        meta = None
        if dt in _INT_CODES:
            code = _INT_CODES[dt]
        elif dt == "float":
            code, meta = T.FLOAT, 4
        elif dt in ("double", "real", "double precision"):
            code, meta = T.DOUBLE, 8
        elif dt in ("decimal", "numeric"):
            code, meta = T.NEWDECIMAL, (int(self.numeric_precision), int(self.numeric_scale or 0))
        elif dt == "date":
            code = T.DATE
        elif dt in _TEMPORAL2:
            code, meta = _TEMPORAL2[dt], int(self.precision or 0)
        elif dt == "year":
            code = T.YEAR
        elif dt == "bit":
            n = int(self.numeric_precision or 1)
            code, meta = T.BIT, (n % 8, n // 8)
        elif dt in ("char", "binary"):
            code, meta = T.STRING, (T.STRING, int(self.octets or 0) & 0xFF)
        elif dt in ("varchar", "varbinary"):
            code, meta = T.VARCHAR, int(self.octets or 0)
        elif dt in _BLOB_LENGTH_BYTES:
            code, meta = T.BLOB, _BLOB_LENGTH_BYTES[dt]
        elif dt in ("enum", "set"):
            code = T.ENUM if dt == "enum" else T.SET
            meta = (code, 1)
        elif dt == "json":
            code, meta = T.JSON, 4
        elif dt in _GEOMETRIES:
            code, meta = T.GEOMETRY, 4
        elif dt == "vector":
            code, meta = T.VECTOR, 4
        elif dt in ("uuid", "inet6", "inet4"):
            code, collation = T.STRING, BINARY_COLLATION
            meta = (T.STRING, 4 if dt == "inet4" else 16)
        else:
            return None
        col = ColumnDef(index, code, meta, self.nullable)
        col.name = self.name
        col.unsigned = self.unsigned
        if type_info(col.real_type).character or code in (T.ENUM, T.SET):
            col.collation = collation
        if code == T.ENUM:
            col.enum_values = self.members
        elif code == T.SET:
            col.set_values = self.members
        col.primary_key = self.primary_key
        return col


def read_columns(query: Callable, schema: str, table: str) -> list[ServerColumn]:
    """The columns of ``schema.table`` from information_schema (``[]``: not visible), ENUM/SET
    members the server's metadata garbled recovered from the table's rows
    (:func:`recover_members`)."""
    out = []
    for (name, dt, ctype, dt_prec, charset, key, coll_id, *more) in query(COLUMNS_SQL,
                                                                          (schema, table)):
        num_prec, num_scale, octets, nullable = (list(more) + [None] * 4)[:4]
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
                                str(key or "").upper() == "PRI",
                                None if num_prec is None else int(num_prec),
                                None if num_scale is None else int(num_scale),
                                None if octets is None else int(octets),
                                str(nullable or "YES").upper() == "YES"))
    return recover_members(query, schema, table, out)


# --- ENUM/SET members information_schema garbles ---------------------------------------------------
#
# MariaDB and MySQL keep ENUM/SET member names in utf8mb3 metadata: a member with a 4-byte
# character (an emoji in a utf8mb4 column) reads '?' in information_schema and SHOW CREATE TABLE
# alike, while the table's own values carry the real name. Without binlog_row_metadata=FULL (the
# binlog then carries the names) binlog-cdc asks for the values themselves: on MariaDB (10.3+) a
# compound statement with variables of the column's own type (``TYPE OF db.t.col``: SELECT
# privilege only) set to each member number; elsewhere rows of the table holding the member.

_FOUR_BYTE_CHARSETS = frozenset({"utf8mb4", "utf16", "utf16le", "utf32", "gb18030"})
_LOOKUP_SECONDS = 5


def _lost(s: ServerColumn) -> list[int]:
    """0-based indexes of the members of *s* that may have lost a 4-byte character."""
    if s.data_type not in ("enum", "set") or s.member_names is not None:
        return []
    if charset_of(s.collation) not in _FOUR_BYTE_CHARSETS:
        return []
    return [i for i, m in enumerate(s.members) if "?" in m]


def _quote_name(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _text(v) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def recover_members(query: Callable, schema: str, table: str,
                    columns: list[ServerColumn]) -> list[ServerColumn]:
    """*columns* with the ENUM/SET members information_schema shows with ``?`` (where a 4-byte
    character may have been) read from the server's values (see above). A member that cannot be
    read stays as the server describes it, with a warning recommending
    ``binlog_row_metadata=FULL``."""
    lost = {k: _lost(s) for k, s in enumerate(columns)}
    lost = {k: v for k, v in lost.items() if v}
    if not lost:
        return columns
    where = _quote_name(schema) + "." + _quote_name(table)
    found = _anchored_members(query, where, columns, lost)
    if found is None:
        found = {k: _member_rows(query, where, columns[k], idx) for k, idx in lost.items()}
    out = list(columns)
    for k, idx in lost.items():
        s = columns[k]
        names = s.members
        for i, name in found.get(k, {}).items():
            names[i] = name
        missing = [names[i] for i in idx if i not in found.get(k, {})]
        if missing:
            log.warning("%s.%s column %s: information_schema shows the %s member(s) %s with '?' "
                        "(the server keeps member names as utf8mb3, which has no 4-byte "
                        "characters) and they could not be read from the server's values; rows "
                        "with them decode to what the server shows. Set binlog_row_metadata=FULL: "
                        "the binlog then carries the names", schema, table, s.name,
                        s.data_type.upper(), ", ".join(repr(m) for m in missing))
        out[k] = s._replace(member_names=tuple(names))
    return out


def _anchored_members(query: Callable, where: str, columns, lost) -> dict | None:
    """MariaDB: ``{column index: {member index: name}}`` from variables of the columns' own types
    set to each member number (one compound statement); None where that is not supported."""
    declare, assign, pick = [], [], []
    for k, idx in lost.items():
        col = where + "." + _quote_name(columns[k].name)
        for i in idx:
            var = f"v{k}_{i}"
            declare.append(f"DECLARE {var} TYPE OF {col};")
            assign.append(f"{var} = {i + 1 if columns[k].data_type == 'enum' else 1 << i}")
            pick.append((k, i, var))
    sql = ("BEGIN NOT ATOMIC " + " ".join(declare) + " SET " + ", ".join(assign) + "; SELECT "
           + ", ".join(var for _k, _i, var in pick) + "; END")
    try:
        rows = query(sql, None)
    except CdcError as e:
        log.debug("reading ENUM/SET members through TYPE OF variables failed: %s", e)
        return None
    if not rows or len(rows[0]) != len(pick):
        return None
    found: dict = {}
    for (k, i, _var), v in zip(pick, rows[0]):
        if v is not None:
            found.setdefault(k, {})[i] = _text(v)
    return found


def _member_rows(query: Callable, where: str, s: ServerColumn, lost: list[int]) -> dict:
    """``{member index: name}`` from rows of the table holding those members (bounded query)."""
    col = _quote_name(s.name)
    if s.data_type == "enum":
        cond = f"{col}+0 IN ({', '.join(str(i + 1) for i in lost)})"
    else:
        cond = f"{col} & {sum(1 << i for i in lost)}"
    sql = (f"SELECT /*+ MAX_EXECUTION_TIME({_LOOKUP_SECONDS * 1000}) */ DISTINCT {col}+0, {col} "
           f"FROM {where} WHERE {cond} LIMIT 256")
    try:
        rows = query(sql, None)
    except CdcError as e:
        log.debug("reading ENUM/SET members from rows failed: %s", e)
        return {}
    found = {}
    for number, text in rows:
        if number is None or text is None:
            continue
        number, text = int(number), _text(text)
        if s.data_type == "enum":
            if number - 1 in lost:
                found[number - 1] = text
            continue
        parts = text.split(",") if text else []
        bits = [i for i in range(64) if number >> i & 1]
        if len(parts) == len(bits):
            found.update((i, p) for i, p in zip(bits, parts) if i in lost)
    return found


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
