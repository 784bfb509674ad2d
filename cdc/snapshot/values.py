"""Snapshot values: table rows read with plain SELECTs, as exactly the values the binlog row
decoder gives for the same rows (:mod:`cdc.values.types`), so that a snapshot row and the same row
decoded from the binlog render the same JSON text and the same typed Spark values.

How a snapshot reads
--------------------
* the connection: the usual PyMySQL keyword arguments plus :func:`raw_connect_kwargs`
  (``use_unicode=False`` and encoders only, no decoders): every value arrives as the ``bytes``
  the server sent, NULL as None;
* first the statements of :data:`SESSION_SQL`: ``character_set_results = binary`` (text columns
  arrive as their stored bytes, in the column's own character set), ``time_zone = '+00:00'``
  (TIMESTAMPs in UTC) and ``sql_mode = ''`` (no ``PAD_CHAR_TO_FULL_LENGTH``: CHAR values without
  their trailing spaces, as the binlog stores them);
* ``SELECT {select_list(columns)} FROM ...``, each row through ``row_converter(columns)``.

*columns* are :class:`~cdc.values.types.ColumnDef` records as a TABLE_MAP with full metadata
describes them (:func:`cdc.replica.metadata.read_columns`, ``ServerColumn.column_def``), in the
order they are selected.

Value mapping (SELECT text -> binlog value)
-------------------------------------------
======================  ==========================================================================
integers, YEAR          ``int(text)`` (ZEROFILL digits too; the zero year ``0000`` is 0)
FLOAT                   selected as ``col - 0e0``: the server prints a FLOAT with 6 digits (and
                        FLOAT(M,D) with D decimals), the double it widens to exactly; then
                        rounded through float32 (a no-op on an exact value) -- the float32 value
                        widened, as the binlog holds it
DOUBLE                  selected as ``col - 0e0`` (DOUBLE(M,D) prints D decimals otherwise);
                        ``float(text)`` (the server prints a double's shortest round-trip text)
DECIMAL                 ``Decimal(text)``: the digits and the column's scale, as the binlog's
BIT                     the value's bytes, big-endian -> ``int``
DATE / DATETIME         ``datetime.date`` / naive ``datetime.datetime``; zero and invalid dates
                        (``0000-00-00``, ``2024-00-10 10:00:00.5``, ``2024-02-30``):
                        :class:`~cdc.values.kinds.InvalidTemporal` of the server's text, which
                        is the binlog decoder's text (fsp fraction digits)
TIMESTAMP               aware UTC ``datetime`` (session time zone ``+00:00``); the zero
                        TIMESTAMP: ``InvalidTemporal("0000-00-00 00:00:00[.000...]")``
TIME                    ``timedelta`` (negative, over 24 h, fractions)
CHAR/VARCHAR/TEXT/JSON  the stored bytes decoded with the column's collation by
                        :func:`cdc.values.charsets.make_text_decoder`, the binlog decoder's own:
                        ``str``, ``InvalidText`` for bytes invalid in the charset, ``bytes`` for
                        binary collations (MariaDB's JSON is LONGTEXT)
BINARY(n), UUID, INET6, selected as ``CAST(col AS BINARY)``: their stored binary form (BINARY(n)
INET4                   already padded to n with ``\\0``; UUID/INET6/INET4 print as text otherwise)
VARBINARY / BLOB        the bytes
ENUM / SET              selected as ``col | 0`` (the member number / bit mask, whatever the
                        charset; ``col + 0`` is a double on MySQL, and negative on MariaDB for
                        masks >= 2^63) -> the member name(s) from the column's members, like the
                        binlog decoder (``""`` for the empty ENUM value; the number when the
                        ColumnDef has no members)
GEOMETRY                ``Geometry(srid, wkb)``: the server sends its internal form, 4-byte
                        little-endian SRID + WKB
VECTOR                  ``list[float]`` of its float32 values (the server sends the bytes)
JSON (MySQL binary)     the document parsed from the server's text (the ``null`` document:
                        ``JSON_NULL``): exact for strings, integers, doubles, literals, arrays and
                        objects; DECIMAL and date/time scalars inside a document (JSON from CAST
                        or JSON functions of such values) come out as float / str where the
                        binlog decoder gives Decimal / datetime (date/time and opaque scalars
                        then render to the same JSON text, decimals lose trailing zeros)
======================  ==========================================================================
NULL is None.  Generated columns are read like others (their value is computed by the SELECT).

Speed: :func:`row_converter` generates one function per column shape (cached), one expression
per column with the common case inline; a row where an inline expression fails (a NULL in a NOT
NULL column, a zero date, text invalid in its charset) is converted again column by column by the
exact converters, so the fast path never decides a value the slow path would decide otherwise.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
import struct
from decimal import Decimal
from typing import Callable

from cdc.binlog.constants import ColumnType as T
from cdc.cache import BoundedCache
from cdc.errors import SchemaError
from cdc.values.temporal import datetime_from_text
from cdc.values.charsets import BINARY_COLLATION, codec_of, make_text_decoder
from cdc.values.kinds import JSON_NULL, Geometry, InvalidTemporal
from cdc.values.types import ColumnDef, type_info

__all__ = ["SESSION_SQL", "raw_connect_kwargs", "select_list", "row_converter",
           "column_expression", "column_converter"]

SESSION_SQL: list[str] = [
    # text columns arrive as their stored bytes (no conversion), decoded like the binlog's
    "SET SESSION character_set_results = binary",
    # TIMESTAMP values in UTC: the binlog's epoch seconds, as aware UTC datetimes
    "SET SESSION time_zone = '+00:00'",
    # no PAD_CHAR_TO_FULL_LENGTH: CHAR values without trailing spaces, as the binlog stores them
    "SET SESSION sql_mode = ''",
]
"""The statements a snapshot connection runs first (before any SELECT of rows)."""


def raw_connect_kwargs() -> dict:
    """The ``pymysql.connect`` keyword arguments (added to the usual host, account, TLS and
    charset arguments) that leave every value as the ``bytes`` the server sent: no decoders
    (``conv``: PyMySQL's encoders only, so query parameters are still escaped) and no text
    decoding (``use_unicode=False``).  Column names in ``cursor.description`` stay ``str``."""
    import pymysql.converters
    return {"use_unicode": False, "conv": dict(pymysql.converters.encoders)}


# --- the SELECT list ----------------------------------------------------------------------------

_FLOATS = frozenset({T.FLOAT, T.DOUBLE})
_MEMBERS = frozenset({T.ENUM, T.SET})


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def column_expression(col: ColumnDef) -> str:
    """The SELECT expression of one column (see the module docstring)."""
    if col.name is None:
        raise SchemaError(f"column {col.index} has no name: a snapshot selects columns by name "
                          f"(describe them with cdc.replica.metadata.read_columns)")
    q = _quote(col.name)
    rt = col.real_type
    if rt in _FLOATS:
        expr = f"{q} - 0e0"
    elif rt in _MEMBERS:
        expr = f"{q} | 0"
    elif rt == T.STRING and _collation(col) == BINARY_COLLATION:
        expr = f"CAST({q} AS BINARY)"
    else:
        return q
    return f"{expr} AS {q}"


def select_list(columns: list[ColumnDef]) -> str:
    """The SELECT expressions of *columns*, comma-separated, in order."""
    return ", ".join(column_expression(c) for c in columns)


# --- exact converters of one value (bytes, never None) -------------------------------------------

_UTC = _dt.timezone.utc
_DATE_ISO = _dt.date.fromisoformat
_DT_ISO = datetime_from_text

_TD = _dt.timedelta
_F32 = struct.Struct("<f")


def _collation(col: ColumnDef) -> int:
    return col.collation if col.collation is not None else BINARY_COLLATION


def to_float32(raw: bytes) -> float:
    """FLOAT: the float32 value the text names, widened to a Python float."""
    return _F32.unpack(_F32.pack(float(raw)))[0]


def to_decimal(raw: bytes) -> Decimal:
    return Decimal(raw.decode("ascii"))


def to_bit(raw: bytes) -> int:
    return int.from_bytes(raw, "big")


def to_date(raw: bytes):
    text = raw.decode("ascii")
    try:
        return _DATE_ISO(text)
    except ValueError:
        return InvalidTemporal(text)


def to_datetime(raw: bytes):
    text = raw.decode("ascii")
    try:
        return _DT_ISO(text)
    except ValueError:
        return InvalidTemporal(text)


def to_timestamp(raw: bytes):
    text = raw.decode("ascii")
    try:
        return _DT_ISO(text).replace(tzinfo=_UTC)
    except ValueError:
        return InvalidTemporal(text)


def to_time(raw: bytes) -> _dt.timedelta:
    """``[-]h:mm:ss[.f]`` (hours up to 838) -> timedelta."""
    negative = raw[:1] == b"-"
    if negative:
        raw = raw[1:]
    hms, _, frac = raw.partition(b".")
    h, m, s = hms.split(b":")
    us = int(frac.ljust(6, b"0")) if frac else 0
    td = _TD(0, int(h) * 3600 + int(m) * 60 + int(s), us)
    return -td if negative else td


def to_geometry(raw: bytes) -> Geometry:
    return Geometry(int.from_bytes(raw[:4], "little"), raw[4:])


def to_vector(raw: bytes) -> list:
    return list(struct.unpack("<%df" % (len(raw) // 4), raw))


_INT64 = (-(1 << 63), (1 << 64) - 1)


def _json_int(text: str):
    v = int(text)
    # MySQL keeps integers in int64/uint64; a longer one is a double in its binary JSON
    return v if _INT64[0] <= v <= _INT64[1] else float(text)


def to_mysql_json(raw: bytes):
    """MySQL's JSON type (printed as text): the document (see the module docstring's limits);
    the ``null`` literal is :data:`~cdc.values.kinds.JSON_NULL`, as the binlog decoder gives it."""
    doc = json.loads(raw.decode("utf-8"), parse_int=_json_int)
    return JSON_NULL if doc is None else doc


def _enum_converter(names):
    if names is None:
        return int
    names = list(names)
    count = len(names)

    def to_enum(raw: bytes):
        idx = int(raw)
        if idx == 0:
            return ""
        return names[idx - 1] if idx <= count else idx
    return to_enum


def _set_converter(names):
    if names is None:
        return int
    names = list(names)
    memo: dict = {}

    def to_set(raw: bytes):
        value = memo.get(raw)
        if value is None:
            mask = int(raw)
            value = ",".join(n for i, n in enumerate(names) if mask >> i & 1)
            if len(memo) < 4096:
                memo[raw] = value
        return value
    to_set.memo = memo
    return to_set


def _passthrough(raw: bytes) -> bytes:
    return raw


def column_converter(col: ColumnDef) -> Callable[[bytes], object]:
    """The exact converter of one column's non-NULL value (bytes -> the binlog decoder's value)."""
    rt = col.real_type
    type_info(rt)   # an unknown type code: the SchemaError the binlog decoder raises
    if rt in (T.TINY, T.SHORT, T.INT24, T.LONG, T.LONGLONG, T.YEAR):
        return int
    if rt == T.FLOAT:
        return to_float32
    if rt == T.DOUBLE:
        return float
    if rt in (T.NEWDECIMAL, T.DECIMAL):
        return to_decimal
    if rt == T.BIT:
        return to_bit
    if rt in (T.DATE, T.NEWDATE):
        return to_date
    if rt in (T.DATETIME, T.DATETIME2):
        return to_datetime
    if rt in (T.TIMESTAMP, T.TIMESTAMP2):
        return to_timestamp
    if rt in (T.TIME, T.TIME2):
        return to_time
    if rt == T.ENUM:
        return _enum_converter(col.enum_values)
    if rt == T.SET:
        return _set_converter(col.set_values)
    if rt == T.GEOMETRY:
        return to_geometry
    if rt == T.VECTOR:
        return to_vector
    if rt == T.JSON:
        return to_mysql_json
    if rt == T.NULL:
        return lambda raw: None
    decode = make_text_decoder(_collation(col))
    return _passthrough if decode is bytes else decode


# --- the generated row converter ------------------------------------------------------------------

# The inline (fast) expression of a value ``v`` that is not None, by type; what an expression
# cannot decide (a zero date, invalid text) raises, and the row goes through the exact converters.
_INLINE = {
    T.TINY: "int(v)", T.SHORT: "int(v)", T.INT24: "int(v)", T.LONG: "int(v)",
    T.LONGLONG: "int(v)", T.YEAR: "int(v)", T.DOUBLE: "float(v)",
    T.FLOAT: "F32U(F32P(float(v)))[0]",
    T.NEWDECIMAL: "DEC(v.decode())", T.BIT: "FB(v, 'big')",
    T.DATE: "DATE_ISO(v.decode())", T.NEWDATE: "DATE_ISO(v.decode())",
    T.DATETIME2: "DT_ISO(v.decode())", T.DATETIME: "DT_ISO(v.decode())",
    T.TIMESTAMP2: "DT_ISO(v.decode()).replace(tzinfo=UTC)",
    T.TIMESTAMP: "DT_ISO(v.decode()).replace(tzinfo=UTC)",
    T.GEOMETRY: "GEO(FB(v[:4], 'little'), v[4:])",
}
_ENV = {"F32U": _F32.unpack, "F32P": _F32.pack, "DEC": Decimal, "FB": int.from_bytes,
        "DATE_ISO": _DATE_ISO, "DT_ISO": _DT_ISO, "UTC": _UTC, "GEO": Geometry}
_CONVERTERS = BoundedCache(512)


def _shape(columns) -> tuple:
    return tuple((c.real_type, repr(c.meta), c.unsigned, c.collation, bool(c.nullable),
                  tuple(c.enum_values) if c.enum_values is not None else None,
                  tuple(c.set_values) if c.set_values is not None else None)
                 for c in columns)


def row_converter(columns: list[ColumnDef]) -> Callable[[tuple], tuple]:
    """A function ``convert(row) -> tuple``: one row as PyMySQL returns it on a connection made
    with :func:`raw_connect_kwargs` (a tuple of ``bytes``/None, in *columns*' order, selected
    with :func:`select_list`) -> the tuple the binlog row decoder yields for that row.

    Generated once per column shape and cached; ``list(map(convert, rows))`` converts many.
    ``convert.source`` is the generated code.
    """
    columns = list(columns)
    return _CONVERTERS.get_or_build(_shape(columns), lambda: _build(columns))


def _inline_expr(col: ColumnDef, conv, i: int, env: dict) -> str:
    v = f"v{i}"
    if conv is _passthrough:
        return v                      # bytes as they came, None included
    rt = col.real_type
    expr = _INLINE.get(rt)
    if expr is None and type_info(rt).character and codec_of(_collation(col)) == "utf-8":
        expr = "v.decode()"           # invalid UTF-8 raises: the exact path gives InvalidText
    elif rt == T.ENUM and col.enum_values is not None:
        # the member by its number's text; a number past the members raises (KeyError)
        env[f"M{i}"] = {b"%d" % k: name for k, name in enumerate(["", *col.enum_values])}
        expr = f"M{i}[v]"
    elif rt == T.SET and col.set_values is not None:
        env[f"M{i}"] = conv.memo             # masks seen so far; C(v) computes and keeps one
        env[f"C{i}"] = conv
        expr = f"(M{i}.get(v) or C{i}(v))"
    if expr is None:
        env[f"C{i}"] = conv
        expr = f"C{i}(v)"
    expr = re.sub(r"\bv\b", v, expr)
    if col.nullable:
        return f"(None if {v} is None else {expr})"
    return expr                       # a NULL after all raises: the exact path handles it


def _build(columns):
    convs = [column_converter(c) for c in columns]
    env = dict(_ENV)

    def exact(row):
        return tuple(None if v is None else f(v) for f, v in zip(convs, row))
    env["EXACT"] = exact
    n = len(columns)
    if not n:
        def convert(row):
            return ()
        convert.source = ""
        return convert
    names = ", ".join(f"v{i}" for i in range(n)) + ","
    exprs = ", ".join(_inline_expr(c, f, i, env) for i, (c, f) in enumerate(zip(columns, convs)))
    src = "\n".join([
        "def convert(row):",
        f"    {names} = row",
        "    try:",
        f"        return ({exprs},)",
        "    except Exception:",
        "        return EXACT(row)",
        ""])
    exec(compile(src, "<snapshot row converter>", "exec"), env)
    convert = env["convert"]
    convert.source = src
    return convert
