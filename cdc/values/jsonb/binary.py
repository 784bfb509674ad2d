"""MySQL's binary JSON format: one document decoded to Python values.

A JSON column value in a MySQL row event is the document in MySQL's binary format (``JSON``
is column type 245; the row image holds ``<4-byte length><binary document>``).

Sources (MySQL 8.x): ``sql-common/json_binary.h`` / ``json_binary.cc`` (format, parser),
``sql-common/json_dom.cc`` (``Json_datetime::from_packed``) and ``mysys/my_time.cc``
(``TIME_from_longlong_*_packed``).

Binary format
-------------
``doc ::= type(1 byte) value``.  Types: 0x00/0x01 small/large object, 0x02/0x03 small/large
array, 0x04 literal (0 null, 1 true, 2 false), 0x05-0x0a int16/uint16/int32/uint32/int64/uint64
(little-endian), 0x0b double (8-byte IEEE little-endian), 0x0c utf8mb4 string, 0x0f opaque
(``field-type(1) data-length data``, any MySQL type).  String and opaque lengths are
"variable length": 7 bits a byte, least significant group first, high bit = more bytes
follow (at most 5 bytes, value < 2**32).

An object is ``count size key-entry* value-entry* key* value*`` and an array
``count size value-entry* value*``; ``count``, ``size`` and offsets are uint16 in the small
format and uint32 in the large one; offsets are relative to the first byte after the type
byte of the container.  ``key-entry = key-offset key-length(uint16)``, ``value-entry = type
offset-or-inlined-value``: literals, int16 and uint16 (and, in the large format only, int32 and
uint32) are inlined in the entry instead of an offset.  MySQL writes keys sorted by length,
then bytewise; a decoded object keeps that stored order.  A large container may hold small
children; MySQL uses the large format only when the small one overflows (documents > 64 KiB).

Decoded values
--------------
========================  ===============================================================
object / array            ``dict`` (stored key order) / ``list``
null                      ``None`` inside a document; a whole document that is ``null``:
                          :data:`cdc.values.kinds.JSON_NULL` (SQL NULL is ``None``)
true / false              ``True`` / ``False``
int16 ... uint64          ``int``
double                    ``float``
string                    ``str``
opaque NEWDECIMAL (246)   ``decimal.Decimal`` (exact, with the stored scale: ``1.50``)
opaque DATE (10)          ``datetime.date``
opaque TIME (11)          ``datetime.timedelta`` (negative or over 24 h allowed)
opaque DATETIME (12) and  ``datetime.datetime`` (naive: the stored wall-clock value; a JSON
TIMESTAMP (7)             TIMESTAMP holds no time zone)
zero/invalid date/time    :class:`cdc.values.kinds.InvalidTemporal`, the text MySQL prints
other opaque              :class:`~cdc.values.kinds.JsonOpaque`: ``bytes`` with ``.field_type``
========================  ===============================================================

An empty value (0 bytes) is the JSON null literal too (:data:`~cdc.values.kinds.JSON_NULL`), as
MySQL reads it (it appears when NULL went into a NOT NULL JSON column under INSERT IGNORE /
non-strict mode; see ``json_binary::parse_binary``).  A column that is SQL NULL never reaches this
decoder: the row decoder reports it as ``None``.

Malformed input raises :class:`JsonBinaryError` (a :class:`cdc.errors.ParseError`): every
offset and length is checked against its container, nesting is limited to
:data:`MAX_DEPTH`, and the total number of container elements decoded is limited to the
document's byte length, so overlapping (aliased) offsets in corrupt data cannot blow up.
"""

from __future__ import annotations

import datetime as _dt
import struct

from cdc.errors import JsonBinaryError, ParseError
from cdc.values.decimal import decimal_size, read_newdecimal
from cdc.values.kinds import JSON_NULL, InvalidTemporal, JsonOpaque

__all__ = ["decode_json", "decode_json_at", "JsonBinaryError", "MAX_DEPTH"]


MAX_DEPTH = 150
"""Deepest container nesting decoded.  MySQL refuses documents nested deeper than 100
(``JSON_DOCUMENT_MAX_DEPTH``), so this only stops corrupt data."""

# MySQL field types that opaque values carry specially (include/field_types.h).
_T_TIMESTAMP = 7
_T_DATE = 10
_T_TIME = 11
_T_DATETIME = 12
_T_NEWDECIMAL = 246

_HDR_S = struct.Struct("<HH").unpack_from
_HDR_L = struct.Struct("<II").unpack_from
_I16 = struct.Struct("<h").unpack_from
_U16 = struct.Struct("<H").unpack_from
_I32 = struct.Struct("<i").unpack_from
_U32 = struct.Struct("<I").unpack_from
_I64 = struct.Struct("<q").unpack_from
_U64 = struct.Struct("<Q").unpack_from
_F64 = struct.Struct("<d").unpack_from
_LITERALS = (None, True, False)
_NUM_SIZE = {5: 2, 6: 2, 7: 4, 8: 4, 9: 8, 10: 8, 11: 8}
_NUM_READ = {5: _I16, 6: _U16, 7: _I32, 8: _U32, 9: _I64, 10: _U64, 11: _F64}

# Entry tables by (large, is_object, count): one unpack_from reads a container's whole header.
_ENTRY_CACHE: dict = {}
_ENTRY_CACHE_MAX_COUNT = 512


def _entries(large: int, is_obj: bool, count: int):
    key = (large, is_obj, count)
    fn = _ENTRY_CACHE.get(key)
    if fn is None:
        if large:
            fmt = "<" + ("IH" * count if is_obj else "") + "BI" * count
        else:
            fmt = "<" + ("%dH" % (2 * count) if is_obj else "") + "BH" * count
        fn = struct.Struct(fmt).unpack_from
        if count <= _ENTRY_CACHE_MAX_COUNT:
            _ENTRY_CACHE[key] = fn
    return fn


def _bad(what: str, pos: int) -> JsonBinaryError:
    return JsonBinaryError(f"malformed binary JSON: {what} (document offset {pos})")


def _varlen(data, p: int, end: int):
    """A variable-length length at *p* (< *end*): (length, position after it)."""
    length = 0
    shift = 0
    for _ in range(5):
        if p >= end:
            raise _bad("length field runs past its value", p)
        b = data[p]
        p += 1
        length |= (b & 0x7F) << shift
        if not b & 0x80:
            if length > 0xFFFFFFFF:
                raise _bad("length field over 2**32", p)
            return length, p
        shift += 7
    raise _bad("length field longer than 5 bytes", p)


def _container(data: bytes, pos: int, end: int, large: int, is_obj: bool, depth: int,
               budget: list):
    """The object/array whose count field is at *pos*; it must end by *end*."""
    if depth > MAX_DEPTH:
        raise _bad(f"nested deeper than {MAX_DEPTH} levels", pos)
    if large:
        if pos + 8 > end:
            raise _bad("container header runs past its value", pos)
        count, size = _HDR_L(data, pos)
        header = 8 + count * (11 if is_obj else 5)
    else:
        if pos + 4 > end:
            raise _bad("container header runs past its value", pos)
        count, size = _HDR_S(data, pos)
        header = 4 + count * (7 if is_obj else 3)
    if size > end - pos:
        raise _bad(f"container of {size} bytes runs past its enclosing value", pos)
    if header > size:
        raise _bad(f"container of {size} bytes too small for {count} entries", pos)
    if not count:
        return {} if is_obj else []
    budget[0] -= count
    if budget[0] < 0:
        raise _bad("more elements than the document has bytes (overlapping values)", pos)
    ent = _entries(large, is_obj, count)(data, pos + (8 if large else 4))
    cend = pos + size
    vals = []
    append = vals.append
    first = 2 * count if is_obj else 0             # the value entries in ent
    # Values (like keys) live after the header.  (MySQL's own check is weaker -- after the
    # value's entry -- but it never writes a value inside a header.)
    for tp, v in zip(ent[first::2], ent[first + 1::2]):
        if tp == 0x0C:                              # string: the common case, inline here
            if v < header or v >= size:
                raise _bad(f"value offset {v} outside its container", pos)
            p = pos + v
            n = data[p]
            if n < 0x80:
                p += 1
            else:
                n, p = _varlen(data, p, cend)
            q = p + n
            if q > cend:
                raise _bad("string runs past its container", p)
            append(data[p:q].decode())
        elif tp == 0x05:                            # inlined int16 (the entry's first 2 bytes)
            v &= 0xFFFF
            append(v - 0x10000 if v & 0x8000 else v)
        elif tp == 0x04:                            # inlined literal (the entry's first byte)
            v &= 0xFF
            if v > 2:
                raise _bad(f"unknown literal {v}", pos)
            append(_LITERALS[v])
        elif tp == 0x06:                            # inlined uint16
            append(v & 0xFFFF)
        elif large and tp == 0x07:                  # int32: inlined in the large format
            append(v - 0x100000000 if v & 0x80000000 else v)
        elif large and tp == 0x08:                  # uint32: inlined in the large format
            append(v)
        else:
            if v < header or v >= size:
                raise _bad(f"value offset {v} outside its container", pos)
            if tp == 0x0B:
                if v + 8 > size:
                    raise _bad("double runs past its container", pos + v)
                append(_F64(data, pos + v)[0])
            elif tp <= 0x03:
                append(_container(data, pos + v, cend, tp & 1, tp < 2, depth + 1, budget))
            else:
                append(_value(tp, data, pos + v, cend, depth, budget))
    if not is_obj:
        return vals
    obj = {}
    for o, n, val in zip(ent[0:first:2], ent[1:first:2], vals):
        if o < header or o + n > size:
            raise _bad(f"key at offset {o} outside its object", pos)
        o += pos
        obj[data[o:o + n].decode()] = val
    return obj


def _value(tp: int, data, p: int, end: int, depth: int, budget: list):
    """The value of type *tp* stored at *p*, which must end by *end*."""
    if tp <= 0x03:
        return _container(data, p, end, tp & 1, tp < 2, depth + 1, budget)
    if tp == 0x0C:
        n, p = _varlen(data, p, end)
        if p + n > end:
            raise _bad("string runs past its value", p)
        return data[p:p + n].decode()
    if tp == 0x04:
        if p >= end:
            raise _bad("literal runs past its value", p)
        lit = data[p]
        if lit > 2:
            raise _bad(f"unknown literal {lit}", p)
        return (None, True, False)[lit]
    if 0x05 <= tp <= 0x0B:
        if p + _NUM_SIZE[tp] > end:
            raise _bad("number runs past its value", p)
        return _NUM_READ[tp](data, p)[0]
    if tp == 0x0F:
        return _opaque(data, p, end)
    raise _bad(f"unknown value type 0x{tp:02x}", p)


def _opaque(data, p: int, end: int):
    if p >= end:
        raise _bad("opaque value runs past its value", p)
    ft = data[p]
    n, p = _varlen(data, p + 1, end)
    q = p + n
    if q > end:
        raise _bad("opaque value runs past its value", p)
    if ft == _T_NEWDECIMAL:
        # Json_decimal::convert_from_binary: precision(1) scale(1) then exactly the
        # binary decimal of that precision/scale.
        if n < 2:
            raise _bad("opaque DECIMAL shorter than 2 bytes", p)
        precision = data[p]
        scale = data[p + 1]
        if not 0 < precision or scale > precision or \
                decimal_size(precision, scale) != n - 2:
            raise _bad(f"opaque DECIMAL({precision},{scale}) of {n - 2} data bytes", p)
        return read_newdecimal(data, p + 2, precision, scale)[0]
    if ft == _T_DATETIME or ft == _T_DATE or ft == _T_TIME or ft == _T_TIMESTAMP:
        if n != 8:
            raise _bad(f"opaque date/time of {n} bytes (not 8)", p)
        return _temporal(ft, _I64(data, p)[0])
    return JsonOpaque(data[p:q], ft)


def _temporal(ft: int, packed: int):
    """A date/time in MySQL's packed in-memory format (Json_datetime::from_packed)."""
    neg = packed < 0
    if neg:
        packed = -packed
    frac = packed % (1 << 24)
    intpart = packed >> 24
    if ft == _T_TIME:
        # TIME_from_longlong_time_packed: hour 10 bits, minute 6, second 6.
        hour = (intpart >> 12) % (1 << 10)
        minute = (intpart >> 6) % (1 << 6)
        second = intpart % (1 << 6)
        if minute > 59 or second > 59 or frac > 999999:
            return InvalidTemporal("%s%02d:%02d:%02d.%06d" % ("-" if neg else "", hour,
                                                              minute, second, frac))
        td = _dt.timedelta(hours=hour, minutes=minute, seconds=second, microseconds=frac)
        return -td if neg else td
    # TIME_from_longlong_datetime_packed: (year*13+month) 17 bits, day 5, hour 5, min 6, sec 6
    ymd = intpart >> 17
    hms = intpart % (1 << 17)
    day = ymd % (1 << 5)
    ym = ymd >> 5
    month = ym % 13
    year = ym // 13
    second = hms % (1 << 6)
    minute = (hms >> 6) % (1 << 6)
    hour = hms >> 12
    try:
        if ft == _T_DATE:
            return _dt.date(year, month, day)
        return _dt.datetime(year, month, day, hour, minute, second, frac)
    except ValueError:
        if ft == _T_DATE:
            return InvalidTemporal("%04d-%02d-%02d" % (year, month, day))
        return InvalidTemporal("%04d-%02d-%02d %02d:%02d:%02d.%06d"
                               % (year, month, day, hour, minute, second, frac))


def decode_json_at(data: bytes, start: int, end: int):
    """The value in ``data[start:end]`` (*data* must be ``bytes``) as it is inside a document:
    ``null`` (and empty input) is ``None`` (a partial update's new value; see
    :func:`decode_json` for whole documents)."""
    if start >= end:
        return None
    tp = data[start]
    try:
        if tp <= 0x03:
            return _container(data, start + 1, end, tp & 1, tp < 2, 1, [end - start])
        return _value(tp, data, start + 1, end, 0, [end - start])
    except ParseError:
        raise
    except (IndexError, struct.error, UnicodeDecodeError, ValueError, OverflowError,
            RecursionError) as e:
        raise JsonBinaryError(f"malformed binary JSON: {e}") from None


def decode_json(data) -> object:
    """Decode one binary JSON document (``bytes``, ``bytearray`` or ``memoryview``).

    Other buffer types are copied to ``bytes`` once (slicing ``bytes`` and decoding UTF-8 from
    them is the fastest path); offsets are followed without further copies.
    A document that is the ``null`` literal, and empty input (MySQL reads it as that literal),
    is :data:`~cdc.values.kinds.JSON_NULL`, never ``None`` (SQL NULL).  Raises
    :class:`JsonBinaryError` (a :class:`~cdc.errors.ParseError`) on malformed input; bytes
    after the top-level value are ignored, as MySQL does.
    """
    if type(data) is not bytes:
        data = bytes(data)
    value = decode_json_at(data, 0, len(data))
    return JSON_NULL if value is None else value

