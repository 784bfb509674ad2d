"""Turning decoded values into text: JSON (exact decimals) and ``mysqlbinlog -v`` style.

JSON mapping (used by the CLI's jsonl output and the Spark envelope's ``before``/``after``):

==================  ===========================================================
None                null
int / float         number (NaN/inf: null -- MySQL cannot store them)
Decimal             number with every digit (never through float)
str                 string
bytes               base64 string
InvalidText         ``{"$binary": base64}``: text not valid in its character set, bytes as stored
date / datetime     ISO 8601 string; TIMESTAMP (UTC) ends in ``Z``
timedelta (TIME)    ``"[-]HH:MM:SS[.ffffff]"`` (hours may exceed 24)
InvalidTemporal     its text, e.g. ``"0000-00-00"``
Geometry            ``{"srid": n, "wkb": base64}``
MySQL JSON column   the document as nested JSON, exactly the text MySQL prints for it
                    (``CAST(j AS CHAR)``: ``"2024-01-02 03:04:05.000000"``, ``1.50``,
                    ``"base64:type15:AQI="``, ``1e300``); the JSON ``null`` literal
                    (:data:`~cdc.values.kinds.JSON_NULL`) ``{"$json": null}``
==================  ===========================================================
Columns absent from an image (binlog_row_image MINIMAL/NOBLOB) are left out.  A MySQL JSON
column is only known by its column type (a top-level DATETIME scalar is a ``datetime`` like a
DATETIME column's value): :func:`row_json` and the generated renderers take the columns.
"""

from __future__ import annotations

import base64
import binascii
import datetime as _dt
import json
import math
import re
import struct
from decimal import Decimal
from operator import itemgetter

from cdc.binlog.constants import ColumnType as T
from cdc.cache import BoundedCache
from cdc.values.charsets import BINARY_COLLATION, codec_of
from cdc.values.jsonb.text import json_to_text, time_text
from cdc.values.kinds import ABSENT, JSON_NULL, Geometry, InvalidTemporal, InvalidText
from cdc.values.types import ColumnDef

_str = json.encoder.encode_basestring
_JSON = T.JSON


def _datetime_text(v: _dt.datetime) -> str:
    if v.tzinfo is not None:
        v = v.astimezone(_dt.timezone.utc).replace(tzinfo=None)
        return v.isoformat() + "Z"
    return v.isoformat()


JSON_NULL_IMAGE = '{"$json": null}'
"""A MySQL JSON column holding the JSON ``null`` literal, in a JSON image (SQL NULL is ``null``)."""


def document_json(v) -> str:
    """A MySQL JSON column's value in a JSON image: the document as MySQL prints it
    (:func:`~cdc.values.jsonb.json_to_text`), :data:`JSON_NULL_IMAGE` for the ``null``
    literal, ``null`` for SQL NULL; a :class:`~cdc.values.kinds.JsonDiffs` is its
    ``{"$json_diff": [...]}`` object, values as MySQL prints them."""
    if v is None:
        return "null"
    if v is JSON_NULL:
        return JSON_NULL_IMAGE
    return json_to_text(v)


def document_of_image(v):
    """The inverse of :func:`document_json` on a parsed JSON image's value: ``{"$json": None}``
    is :data:`~cdc.values.kinds.JSON_NULL`, anything else is itself."""
    if type(v) is dict and len(v) == 1 and "$json" in v and v["$json"] is None:
        return JSON_NULL
    return v


def to_json_text(v) -> str:
    """One value as JSON text (see the module docstring for the mapping).  By its Python type
    only: a MySQL JSON column's document needs :func:`document_json`."""
    if v is None:
        return "null"
    if v is JSON_NULL:
        return JSON_NULL_IMAGE
    t = type(v)
    if t is int:
        return str(v)
    if t is str or t is InvalidTemporal:
        return _str(v)
    if t is float:
        return repr(v) if math.isfinite(v) else "null"
    if t is Decimal:
        return format(v, "f") if v.is_finite() else "null"
    if t is bool:
        return "true" if v else "false"
    if t is bytes:
        return '"' + base64.b64encode(v).decode("ascii") + '"'
    if t is InvalidText:
        return '{"$binary": "' + base64.b64encode(v).decode("ascii") + '"}'
    if t is _dt.datetime:
        return '"' + _datetime_text(v) + '"'
    if t is _dt.date:
        return '"' + v.isoformat() + '"'
    if t is _dt.timedelta:
        return '"' + time_text(v) + '"'
    if t is Geometry:
        return '{"srid": %d, "wkb": "%s"}' % (v.srid, base64.b64encode(v.wkb).decode("ascii"))
    if isinstance(v, dict):
        return "{" + ", ".join(_str(str(k)) + ": " + to_json_text(x) for k, x in v.items()) + "}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(to_json_text(x) for x in v) + "]"
    if isinstance(v, (int, float, str, bytes)):  # subclasses (bool handled above)
        return to_json_text(t.__mro__[1](v) if t.__mro__[1] in (int, float, str, bytes) else str(v))
    return _str(str(v))


def row_json(names, values, columns: list[ColumnDef] | None = None) -> str:
    """One row image as a JSON object text: ``{"name": value, ...}``, absent columns left out.

    *columns*: the values' columns; a MySQL JSON column's value is rendered by
    :func:`document_json`, the others by :func:`to_json_text`.  Without them every value is
    rendered by its Python type (:func:`to_json_text`): give them whenever the image may hold a
    MySQL JSON column."""
    if values is None:
        return "null"
    if columns is None:
        return "{" + ", ".join(_str(n) + ": " + to_json_text(v)
                               for n, v in zip(names, values) if v is not ABSENT) + "}"
    return "{" + ", ".join(
        _str(n) + ": " + (document_json(v) if c.real_type == _JSON else to_json_text(v))
        for n, v, c in zip(names, values, columns) if v is not ABSENT) + "}"


# --- generated renderers: row_json for many full images of one table ---------------------------
#
# One expression per column type, on the value ``v``: a fast branch guarded by an exact type test
# (and whatever else makes it produce exactly what to_json_text would), else to_json_text itself.
# Every expression yields a str, an exact int or a finite float (``%s`` formats them as str()
# would, and str() of a float is its repr()).

_INT_TYPES = (T.TINY, T.SHORT, T.INT24, T.LONG, T.LONGLONG, T.YEAR, T.BIT)
_TEXT_TYPES = (T.VARCHAR, T.VAR_STRING, T.STRING, T.ENUM, T.SET, T.TINY_BLOB, T.MEDIUM_BLOB,
               T.LONG_BLOB, T.BLOB)
_JSON_EXPR: dict[int, str] = {}
for _t in _INT_TYPES:
    _JSON_EXPR[_t] = "(v if type(v) is int else J(v))"
for _t in _TEXT_TYPES:
    # str() of a plain str is the text itself; bytes (binary collations): base64
    _JSON_EXPR[_t] = ("(S(v) if type(v) is str else "
                      "'\"' + B64(v, newline=False).decode('ascii') + '\"' if type(v) is bytes "
                      "else J(v))")
for _t in (T.FLOAT, T.DOUBLE):
    # finite (nan compares false): the float itself, str() of a float is its repr()
    _JSON_EXPR[_t] = "(v if type(v) is float and -INF < v < INF else J(v))"
for _t in (T.NEWDECIMAL, T.DECIMAL):
    # str() is format(v, "f") whenever it has no exponent (finite, exponent <= 0, adjusted >= -6)
    _JSON_EXPR[_t] = ("(t if type(v) is DEC and 'E' not in (t := STR(v)) and v.is_finite() "
                      "else J(v))")
for _t in (T.DATETIME, T.DATETIME2):
    _JSON_EXPR[_t] = "('\"' + v.isoformat() + '\"' if type(v) is DT and v.tzinfo is None else J(v))"
for _t in (T.TIMESTAMP, T.TIMESTAMP2):
    # an aware UTC datetime's isoformat() ends in "+00:00": to_json_text writes "Z"
    _JSON_EXPR[_t] = ("('\"' + v.isoformat()[:-6] + 'Z\"' if type(v) is DT and v.tzinfo is UTC "
                      "else J(v))")
for _t in (T.DATE, T.NEWDATE):
    _JSON_EXPR[_t] = "('\"' + v.isoformat() + '\"' if type(v) is DATE else J(v))"
for _t in (T.TIME, T.TIME2):
    _JSON_EXPR[_t] = "('\"' + TT(v) + '\"' if type(v) is TD else J(v))"
del _t
_JSON_EXPR[T.JSON] = "DJ(v)"
_GENERIC_EXPR = "J(v)"    # NULL, GEOMETRY, VECTOR, unknown codes

_RENDER_ENV = {"J": to_json_text, "DJ": document_json, "S": _str, "B64": binascii.b2a_base64, "DEC": Decimal,
               "STR": str, "DT": _dt.datetime, "DATE": _dt.date, "TD": _dt.timedelta,
               "UTC": _dt.timezone.utc, "TT": time_text, "IG": itemgetter, "INF": math.inf}
_RENDERERS = BoundedCache(512)


def _value_expr(col: ColumnDef, var: str) -> str:
    """The expression rendering the value in variable *var* of column *col*."""
    expr = _JSON_EXPR.get(col.real_type, _GENERIC_EXPR)
    return re.sub(r"\bv\b", var, re.sub(r"\bt\b", "t_" + var, expr))


def _object_format(names) -> str:
    """The ``%`` format of a JSON object with these keys (``%s`` for each value)."""
    return "{" + ", ".join(_str(n).replace("%", "%%") + ": %s" for n in names) + "}"


def _compile_renderer(src: str, fmt: str):
    env = dict(_RENDER_ENV, FMT=fmt)
    exec(compile(src, "<json renderer>", "exec"), env)
    render = env["render"]
    render.source = src
    return render


def compile_json_renderer(columns: list[ColumnDef], names: list[str], indexes=None):
    """A function ``render(rows) -> list[str]`` for full row images of one table: *rows* are
    value tuples holding every column of *columns* (none ABSENT).

    Without *indexes*: each row's ``row_json(names, row, columns)``. With *indexes* (e.g. a primary
    key): each row's ``to_json_text({names[i]: row[i] for i in indexes})``.

    Generated once per layout (names, types, indexes) and cached, like the row readers of
    :mod:`cdc.rows.compile`: one list comprehension with a specialised expression per column.
    """
    if indexes is not None:
        indexes = tuple(indexes)
    key = ("rows", tuple(names), tuple(c.real_type for c in columns), indexes)
    return _RENDERERS.get_or_build(key, lambda: _build_json_renderer(columns, names, indexes))


def _build_json_renderer(columns, names, indexes):
    if indexes is None:
        indexes = tuple(range(len(columns)))
        source = "rows"
    else:
        if len({names[i] for i in indexes}) != len(indexes):
            # a repeated column or name: the dict keeps one -- no shortcut
            def render(rows):
                return [to_json_text({names[i]: r[i] for i in indexes}) for r in rows]
            return render
        source = "map(IG(" + ", ".join(str(i) for i in indexes) + "), rows)"
    if not indexes:
        return lambda rows: ["{}" for _ in rows]
    values = ", ".join(_value_expr(columns[i], f"v{i}") for i in indexes)
    target = ", ".join(f"v{i}" for i in indexes)
    if source == "rows":
        target += ","       # rows are tuples, of one value too; IG(i) of one index is the value
    src = f"def render(rows):\n    return [FMT % ({values},) for {target} in {source}]\n"
    return _compile_renderer(src, _object_format(names[i] for i in indexes))


def compile_json_pair_renderer(columns: list[ColumnDef], names: list[str]):
    """A function ``render(pairs) -> (before texts, after texts)`` for the (before, after)
    pairs of an update whose images both hold every column: ``row_json(names, image, columns)``
    of each.

    An after-image value that *is* its before-image value (the row readers hand an unchanged
    DECIMAL/DATETIME over as the same object) takes the text already made for it.
    """
    key = ("pairs", tuple(names), tuple(c.real_type for c in columns))
    return _RENDERERS.get_or_build(key, lambda: _build_json_pair_renderer(columns, names))


def _build_json_pair_renderer(columns, names):
    n = len(columns)
    if not n:
        return lambda pairs: (["{}"] * len(pairs), ["{}"] * len(pairs))
    before, after = [], []
    for i, col in enumerate(columns):
        if _JSON_EXPR.get(col.real_type) == _JSON_EXPR[T.LONG]:
            # an int is as cheap to render as to look up
            before.append(_value_expr(col, f"b{i}"))
            after.append(_value_expr(col, f"a{i}"))
        else:
            before.append(f"(u{i} := {_value_expr(col, f'b{i}')})")
            after.append(f"(u{i} if a{i} is b{i} else {_value_expr(col, f'a{i}')})")
    src = "\n".join([
        "def render(pairs):",
        "    before, after = [], []",
        "    bappend, aappend = before.append, after.append",
        "    for (%s), (%s) in pairs:" % (", ".join(f"b{i}" for i in range(n)) + ",",
                                          ", ".join(f"a{i}" for i in range(n)) + ","),
        f"        bappend(FMT % ({', '.join(before)},))",
        f"        aappend(FMT % ({', '.join(after)},))",
        "    return before, after",
        ""])
    return _compile_renderer(src, _object_format(names))


# --- mysqlbinlog -v ------------------------------------------------------------------------------

_INT_BITS = {T.TINY: 8, T.SHORT: 16, T.INT24: 24, T.LONG: 32, T.LONGLONG: 64}


# How the tools print each byte of a string between its quotes: mariadb-binlog escapes the bytes
# below 0x20 as \xNN; MySQL's mysqlbinlog also writes \b \t \n \f \r and escapes ' and \.
_MARIADB_BYTES = tuple(b"\\x%02x" % b if b < 0x20 else bytes((b,)) for b in range(256))
_MYSQL_BYTES = tuple({0x08: b"\\b", 0x09: b"\\t", 0x0A: b"\\n", 0x0C: b"\\f", 0x0D: b"\\r",
                      0x27: b"\\'", 0x5C: b"\\\\"}.get(b, _MARIADB_BYTES[b]) for b in range(256))


def _quoted(raw: bytes, mysql: bool = False) -> bytes:
    return b"'" + b"".join(map((_MYSQL_BYTES if mysql else _MARIADB_BYTES).__getitem__, raw)) + b"'"


def _encode_text(v: str, col: ColumnDef) -> bytes:
    codec = codec_of(col.collation)
    if codec in (None, "utf-8?"):
        codec = "utf-8"
    return v.encode(codec, "surrogateescape" if codec == "utf-8" else "strict")


def _frac(us: int, fsp: int) -> str:
    return ("." + ("%06d" % us)[:fsp]) if fsp else ""


def mysqlbinlog_value(v, col: ColumnDef, mysql: bool = False) -> bytes:
    """A value exactly as ``mariadb-binlog -v`` prints it, or MySQL's ``mysqlbinlog -v`` with
    *mysql* (bytes: the tools print string bytes raw; they escape some bytes differently)."""
    if v is None:
        return b"NULL"
    rt = col.real_type
    if rt in _INT_BITS:
        bits = _INT_BITS[rt]
        signed = v - (1 << bits) if v >= 1 << (bits - 1) else v
        if signed < 0:
            return b"%d (%d)" % (signed, signed + (1 << bits))
        return b"%d" % signed
    if rt == T.YEAR:
        return b"%d" % (v or 1900)  # the tools print 1900 + the stored byte, 0 included
    if rt == T.FLOAT:
        return (b"%-20g" % v)
    if rt == T.DOUBLE:
        return (b"%-.20g" % v)
    if rt == T.NEWDECIMAL:
        return format(v, "f").encode()
    if rt in (T.DATETIME2, T.DATETIME):
        fsp = col.meta or 0 if rt == T.DATETIME2 else 0
        if isinstance(v, InvalidTemporal):
            return b"'" + v.encode() + b"'"
        return ("'%04d-%02d-%02d %02d:%02d:%02d%s'" % (v.year, v.month, v.day, v.hour, v.minute,
                                                       v.second, _frac(v.microsecond, fsp))).encode()
    if rt in (T.TIMESTAMP2, T.TIMESTAMP):
        fsp = col.meta or 0 if rt == T.TIMESTAMP2 else 0
        if isinstance(v, InvalidTemporal):
            return b"0" + (b"." + b"0" * fsp if fsp else b"")
        secs = int((v - _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)).total_seconds() // 1)
        return ("%d%s" % (secs, _frac(v.microsecond, fsp))).encode()
    if rt in (T.TIME2, T.TIME):
        fsp = col.meta or 0 if rt == T.TIME2 else 0
        neg = v < _dt.timedelta(0)
        a = -v if neg else v
        total = a.days * 86400 + a.seconds
        return ("'%s%02d:%02d:%02d%s'" % ("-" if neg else "", total // 3600, total // 60 % 60,
                                          total % 60, _frac(a.microseconds, fsp))).encode()
    if rt in (T.DATE, T.NEWDATE):
        if isinstance(v, InvalidTemporal):
            return b"'" + v.replace("-", ":").encode() + b"'"
        return b"'%04d:%02d:%02d'" % (v.year, v.month, v.day)
    if rt == T.BIT:
        bits, nbytes = col.meta
        width = nbytes * 8 + bits
        return b"b'" + format(v, "0%db" % width).encode() + b"'"
    if rt == T.ENUM:
        idx = v if isinstance(v, int) else (col.enum_values.index(v) + 1 if v else 0)
        return b"%d" % idx
    if rt == T.SET:
        if isinstance(v, int):
            mask = v
        else:
            names = set(v.split(",")) if v else set()
            mask = sum(1 << i for i, n in enumerate(col.set_values) if n in names)
        # mariadb-binlog prints the stored bytes (little-endian), each as 8 bits
        stored = mask.to_bytes(col.meta[1], "little")
        return b"b'" + "".join(format(b, "08b") for b in stored).encode() + b"'"
    if rt == T.JSON:   # the tools print a document that is one string-like scalar bare: 'str'
        return _quoted(json_to_text(v, quoted=False).encode("utf-8", "surrogateescape"), mysql)
    if rt == T.GEOMETRY:
        return _quoted(struct.pack("<I", v.srid) + v.wkb, mysql)
    if rt == T.VECTOR:
        if mysql:   # mysqlbinlog prints the values, like VECTOR_TO_STRING
            return b"[" + b",".join(b"%.5e" % x for x in v) + b"]"
        # MariaDB logs VECTOR(n) as VARBINARY(4n): mariadb-binlog prints the float32 bytes
        return _quoted(struct.pack("<%df" % len(v), *v), mysql)
    if isinstance(v, bytes):
        if rt == T.STRING and col.collation == BINARY_COLLATION:
            v = v.rstrip(b"\0")  # the binlog stores BINARY(n) without its padding
        return _quoted(v, mysql)
    if isinstance(v, str):
        return _quoted(_encode_text(v, col), mysql)
    return _quoted(str(v).encode(), mysql)


def mysqlbinlog_rows(change_kind: str, table, rows, mysql: bool = False) -> list[bytes]:
    """The ``### ...`` lines ``mariadb-binlog -v`` (*mysql*: MySQL's ``mysqlbinlog -v``) prints
    for one rows event."""
    q = ("`%s`.`%s`" % (table.schema, table.table)).encode()
    cols = table.columns
    out = []

    def image(values):
        for c, v in zip(cols, values):
            if v is ABSENT:
                continue
            out.append(b"###   @%d=%s" % (c.index + 1, mysqlbinlog_value(v, c, mysql)))

    for row in rows:
        if change_kind == "insert":
            out += [b"### INSERT INTO " + q, b"### SET"]
            image(row)
        elif change_kind == "delete":
            out += [b"### DELETE FROM " + q, b"### WHERE"]
            image(row)
        else:
            out += [b"### UPDATE " + q, b"### WHERE"]
            image(row[0])
            out.append(b"### SET")
            image(row[1])
    return out
