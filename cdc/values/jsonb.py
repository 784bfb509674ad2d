"""MySQL's binary JSON: documents (JSON columns in row events) and partial-update diffs.

A JSON column value in a MySQL row event is the document in MySQL's binary format (``JSON``
is column type 245; the row image holds ``<4-byte length><binary document>``).  This module
decodes it to Python values, renders them the way ``SELECT json_col`` prints them, and applies
the JSON diffs of PARTIAL_UPDATE_ROWS events (binlog_row_value_options=PARTIAL_JSON).

Sources (MySQL 8.x): ``sql-common/json_binary.h`` / ``json_binary.cc`` (format, parser),
``sql-common/json_dom.cc`` (``Json_datetime::from_packed``, ``wrapper_to_string``: the text
form), ``mysys/my_time.cc`` (``TIME_from_longlong_*_packed``), ``strings/dtoa.cc``
(``my_gcvt``), ``sql-common/json_diff.cc`` (``Json_diff::write_binary``,
``Json_diff_vector::read_binary``, ``apply_json_diff``) and ``sql-common/json_path.cc``
(path text written and parsed).

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
null / true / false       ``None`` / ``True`` / ``False``
int16 ... uint64          ``int``
double                    ``float``
string                    ``str``
opaque NEWDECIMAL (246)   ``decimal.Decimal`` (exact, with the stored scale: ``1.50``)
opaque DATE (10)          ``datetime.date``
opaque TIME (11)          ``datetime.timedelta`` (negative or over 24 h allowed)
opaque DATETIME (12) and  ``datetime.datetime`` (naive: the stored wall-clock value; a JSON
TIMESTAMP (7)             TIMESTAMP holds no time zone)
zero/invalid date/time    :class:`cdc.values.types.InvalidTemporal`, the text MySQL prints
other opaque              :class:`JsonOpaque`: ``bytes`` with ``.field_type``
========================  ===============================================================

An empty value (0 bytes) decodes to ``None``: MySQL reads it as the JSON null literal (it
appears when NULL went into a NOT NULL JSON column under INSERT IGNORE / non-strict mode; see
``json_binary::parse_binary``).  This is distinct from an SQL NULL column, which the row
decoder reports as ``None`` too.

Malformed input raises :class:`JsonBinaryError` (a :class:`cdc.errors.ParseError`): every
offset and length is checked against its container, nesting is limited to
:data:`MAX_DEPTH`, and the total number of container elements decoded is limited to the
document's byte length, so overlapping (aliased) offsets in corrupt data cannot blow up.
"""

from __future__ import annotations

import base64
import datetime as _dt
import functools
import json
import math
import struct
from decimal import Decimal
from typing import NamedTuple

from cdc.errors import ParseError

__all__ = [
    "decode_json", "json_to_text", "to_jsonable", "format_double",
    "read_json_diffs", "apply_json_diffs", "parse_json_path",
    "JsonDiff", "JsonOpaque", "JsonBinaryError", "JsonDiffError",
    "REPLACE", "INSERT", "REMOVE", "MAX_DEPTH",
]


class JsonBinaryError(ParseError):
    """A binary JSON document is truncated or corrupt."""


class JsonDiffError(ParseError):
    """A JSON diff of a PARTIAL_UPDATE_ROWS event is malformed or does not apply."""


MAX_DEPTH = 150
"""Deepest container nesting decoded.  MySQL refuses documents nested deeper than 100
(``JSON_DOCUMENT_MAX_DEPTH``), so this only stops corrupt data."""

# MySQL field types that opaque values carry specially (include/field_types.h).
_T_TIMESTAMP = 7
_T_DATE = 10
_T_TIME = 11
_T_DATETIME = 12
_T_VAR_STRING = 253
_T_NEWDECIMAL = 246


class JsonOpaque(bytes):
    """An opaque JSON scalar of a MySQL type with no JSON equivalent (BLOB, BIT, ...).

    The ``bytes`` are the stored data; :attr:`field_type` the MySQL column type code.  MySQL
    prints it as ``"base64:type<N>:<base64>"`` (see :func:`json_to_text`); VAR_STRING (253)
    opaque values are printed as plain strings.
    """

    def __new__(cls, data, field_type: int):
        self = super().__new__(cls, data)
        self.field_type = field_type
        return self

    def __reduce__(self):
        return (JsonOpaque, (bytes(self), self.field_type))

    def __repr__(self) -> str:
        return f"JsonOpaque({bytes(self)!r}, field_type={self.field_type})"


# --- decoding --------------------------------------------------------------------------------

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


_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
_read_newdecimal = None


def _decimal_bin_size(precision: int, scale: int) -> int:
    intg = precision - scale
    return ((intg // 9) * 4 + _DIG2BYTES[intg % 9]
            + (scale // 9) * 4 + _DIG2BYTES[scale % 9])


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
                _decimal_bin_size(precision, scale) != n - 2:
            raise _bad(f"opaque DECIMAL({precision},{scale}) of {n - 2} data bytes", p)
        global _read_newdecimal
        if _read_newdecimal is None:
            from cdc.values.types import read_newdecimal
            _read_newdecimal = read_newdecimal
        return _read_newdecimal(data, p + 2, precision, scale)[0]
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
            return _invalid("%s%02d:%02d:%02d.%06d" % ("-" if neg else "", hour, minute,
                                                        second, frac))
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
            return _invalid("%04d-%02d-%02d" % (year, month, day))
        return _invalid("%04d-%02d-%02d %02d:%02d:%02d.%06d"
                        % (year, month, day, hour, minute, second, frac))


def _invalid(text: str):
    from cdc.values.types import InvalidTemporal
    return InvalidTemporal(text)


def _decode(data, start: int, end: int):
    """The document in ``data[start:end]`` (``bytes``)."""
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
    Empty input is JSON null (``None``), as MySQL reads it.  Raises :class:`JsonBinaryError`
    (a :class:`~cdc.errors.ParseError`) on malformed input; bytes after the top-level value are
    ignored, as MySQL does.
    """
    if type(data) is not bytes:
        data = bytes(data)
    return _decode(data, 0, len(data))


# --- text -----------------------------------------------------------------------------------

# json's string encoder escapes exactly what MySQL's double_quote() escapes: '"', '\\', and
# every byte <= 0x1f (\b \t \n \f \r short, the others as \u00xx in lower-case hex).
_quote = json.encoder.encode_basestring

_GCVT_WIDTH = 34  # MY_GCVT_MAX_FIELD_WIDTH = DBL_DIG + 4 + max(5, MAX_DECPT_FOR_F_FORMAT)


def format_double(x: float) -> str:
    """A double as MySQL prints it in JSON text (``my_gcvt`` + ``".0"`` if it looks integral).

    ``my_gcvt(x, MY_GCVT_ARG_DOUBLE, 34)`` takes the shortest round-trip digits (dtoa mode 4
    with 34 digits allowed, which is the same digit string as Python's ``repr``), then picks
    fixed notation when the decimal exponent is between -14 and 15 (longer integers are
    exact: ``1e15`` prints as ``1e15``, ``123456789012345.0`` as ``123456789012345.0``), else
    ``d.ddde[-]N`` without ``+`` or zero padding: ``1e300``, ``1.5e-7``, ``0.00001``.
    Infinities and NaN (which MySQL cannot store) give ``null``.
    """
    if not math.isfinite(x):
        return "null"
    r = repr(x)
    neg = r[0] == "-"
    if neg:
        r = r[1:]
    mant, _, exp = r.partition("e")
    ip, _, fp = mant.partition(".")
    digits = ip + fp
    stripped = digits.lstrip("0")
    decpt = len(ip) - (len(digits) - len(stripped)) + (int(exp) if exp else 0)
    digits = stripped.rstrip("0")
    if not digits:
        digits = "0"
        decpt = 1
    n = len(digits)
    width = _GCVT_WIDTH - (1 if x < 0 else 0)
    f_len = n - decpt + 2 if decpt <= 0 else (n + 1 if decpt < n else decpt)
    have_space = f_len <= width
    exp_len = 1 + (decpt >= 101 or decpt <= -99) + (decpt >= 11 or decpt <= -9)
    force_e = decpt <= 0 and width <= 2 - decpt and width >= 3 + exp_len
    use_f = ((have_space or (decpt <= width and (decpt >= -1 or (decpt == -2 and (
        n > 1 or not force_e))) and not force_e))
        and (not have_space or (decpt >= -14 and (decpt <= 15 or n > decpt))))
    sign = "-" if neg else ""
    if use_f:
        # (With at most 17 digits and 33+ columns, f-format never needs truncating.)
        if decpt <= 0:
            text = "0." + "0" * -decpt + digits
        elif decpt < n:
            text = digits[:decpt] + "." + digits[decpt:]
        else:
            text = digits + "0" * (decpt - n) + ".0"   # MySQL appends ".0" to integral doubles
        return sign + text
    e = decpt - 1
    return (sign + digits[0] + ("." + digits[1:] if n > 1 else "") + "e"
            + ("-" if e < 0 else "") + str(abs(e)))


def _time_text(td: _dt.timedelta, fraction_always: bool) -> str:
    neg = td < _dt.timedelta(0)
    if neg:
        td = -td
    secs = td.days * 86400 + td.seconds
    h, rem = divmod(secs, 3600)
    m, s = divmod(rem, 60)
    text = "%s%02d:%02d:%02d" % ("-" if neg else "", h, m, s)
    if fraction_always or td.microseconds:
        text += ".%06d" % td.microseconds
    return text


def _mysql_base64(data: bytes) -> str:
    """MySQL's base64_encode(): standard alphabet, a newline after every 76 characters."""
    b64 = base64.b64encode(data).decode("ascii")
    if len(b64) <= 76:
        return b64
    return "\n".join(b64[i:i + 76] for i in range(0, len(b64), 76))


def _text(v, out) -> None:
    t = type(v)
    if t is str:
        out(_quote(v))
    elif t is dict:
        out("{")
        first = True
        for k, x in v.items():
            if first:
                first = False
            else:
                out(", ")
            out(_quote(k))
            out(": ")
            _text(x, out)
        out("}")
    elif t is list or t is tuple:
        out("[")
        first = True
        for x in v:
            if first:
                first = False
            else:
                out(", ")
            _text(x, out)
        out("]")
    elif v is None:
        out("null")
    elif v is True:
        out("true")
    elif v is False:
        out("false")
    elif t is int:
        out(str(v))
    elif t is float:
        out(format_double(v))
    elif t is Decimal:
        out(format(v, "f") if v.is_finite() else "null")
    elif t is _dt.datetime:
        out('"%04d-%02d-%02d %02d:%02d:%02d.%06d"' % (v.year, v.month, v.day, v.hour,
                                                      v.minute, v.second, v.microsecond))
    elif t is _dt.date:
        out('"%04d-%02d-%02d"' % (v.year, v.month, v.day))
    elif t is _dt.timedelta:
        out('"' + _time_text(v, True) + '"')
    elif t is JsonOpaque:
        if v.field_type == _T_VAR_STRING:
            out(_quote(bytes(v).decode("utf-8", "replace")))
        else:
            out(_quote("base64:type%d:%s" % (v.field_type, _mysql_base64(v))))
    elif isinstance(v, str):                      # InvalidTemporal and other str subclasses
        out(_quote(str(v)))
    elif isinstance(v, (bytes, bytearray, memoryview)):
        out(_quote("base64:type%d:%s" % (252, _mysql_base64(bytes(v)))))
    elif isinstance(v, bool):
        out("true" if v else "false")
    elif isinstance(v, int):
        out(str(int(v)))
    elif isinstance(v, float):
        out(format_double(float(v)))
    elif isinstance(v, dict):
        _text(dict(v), out)
    elif isinstance(v, (list, tuple)):
        _text(list(v), out)
    else:
        raise TypeError(f"not a decoded JSON value: {type(v).__name__}")


def json_to_text(value) -> str:
    """*value* (as :func:`decode_json` returns it) as MySQL prints the JSON document.

    Matches ``SELECT json_col`` (``Json_wrapper::to_string``): ``", "`` and ``": "``
    separators, keys in stored order, strings escaped like ``double_quote()``, doubles by
    :func:`format_double` (``1.0``, ``1e300``), decimals with every stored digit (``1.50``),
    DATE ``"2024-01-02"``, DATETIME/TIMESTAMP ``"2024-01-02 12:34:56.000000"`` and TIME
    ``"-838:59:59.000000"`` (MySQL always prints 6 fractional digits there:
    ``my_TIME_to_str(t, 6)``), other opaque values ``"base64:type<N>:<base64>"`` (MySQL's
    base64 breaks lines after 76 characters; the newline is escaped as ``\\n``).  Plain
    ``bytes`` are rendered as BLOB (type 252) opaque values.
    """
    parts: list[str] = []
    _text(value, parts.append)
    return "".join(parts)


def to_jsonable(value):
    """*value* with only ``dict``/``list``/``str``/``int``/``float``/``bool``/``None`` in it.

    For ``json.dumps`` (the CDC envelope).  Numbers stay exact: ``Decimal`` becomes its exact
    decimal text as a *string* (``"1.50"``; ``json.dumps`` cannot write a number it would not
    round-trip through ``float`` -- use :func:`json_to_text` for number text); ``date`` and
    ``datetime`` ISO 8601 strings (``2024-01-02``, ``2024-01-02T12:34:56.000001``); TIME
    ``"[-]HH:MM:SS[.ffffff]"``; opaque values ``"base64:type<N>:<base64>"`` on one line
    (VAR_STRING ones: the string); non-finite floats ``None``.
    """
    t = type(value)
    if t is str or t is int or t is bool or value is None:
        return value
    if t is dict:
        return {k: to_jsonable(x) for k, x in value.items()}
    if t is list or t is tuple:
        return [to_jsonable(x) for x in value]
    if t is float:
        return value if math.isfinite(value) else None
    if t is Decimal:
        return format(value, "f") if value.is_finite() else None
    if t is _dt.datetime or t is _dt.date:
        return value.isoformat()
    if t is _dt.timedelta:
        return _time_text(value, False)
    if t is JsonOpaque:
        if value.field_type == _T_VAR_STRING:
            return bytes(value).decode("utf-8", "replace")
        return "base64:type%d:%s" % (value.field_type,
                                     base64.b64encode(value).decode("ascii"))
    if isinstance(value, str):
        return str(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, bool):
        return bool(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return to_jsonable(float(value))
    if isinstance(value, dict):
        return {str(k): to_jsonable(x) for k, x in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_jsonable(x) for x in value]
    raise TypeError(f"not a decoded JSON value: {type(value).__name__}")


# --- partial updates: JSON diffs ----------------------------------------------------------------

REPLACE = 0
INSERT = 1
REMOVE = 2
_OP_NAMES = ("REPLACE", "INSERT", "REMOVE")


class JsonDiff(NamedTuple):
    """One change of a partially updated JSON column (``enum_json_diff_operation``).

    ``operation`` is :data:`REPLACE` (0), :data:`INSERT` (1) or :data:`REMOVE` (2); ``path``
    the path text MySQL wrote (``$.a[1]``, ``$."b c"[last]``); ``value`` the decoded new value
    (``None`` for REMOVE -- and for a JSON null).
    """

    operation: int
    path: str
    value: object = None

    def __repr__(self) -> str:
        name = _OP_NAMES[self.operation] if 0 <= self.operation < 3 else self.operation
        if self.operation == REMOVE:
            return f"JsonDiff({name}, {self.path!r})"
        return f"JsonDiff({name}, {self.path!r}, {self.value!r})"


def _net_field_length(buf, p: int, end: int):
    """MySQL's net_field_length_checked: (value, position after it)."""
    if p >= end:
        raise JsonDiffError("JSON diff truncated before a length field")
    b = buf[p]
    if b < 251:
        return b, p + 1
    if b == 251:
        raise JsonDiffError("JSON diff has a NULL length (0xfb)")
    size = 2 if b == 252 else 3 if b == 253 else 8
    if p + 1 + size > end:
        raise JsonDiffError("JSON diff truncated inside a length field")
    return int.from_bytes(buf[p + 1:p + 1 + size], "little"), p + 1 + size


def read_json_diffs(buf, pos: int, length: int) -> list[JsonDiff]:
    """The JSON diffs in ``buf[pos:pos+length]`` (a partial JSON column of a PARTIAL_UPDATE_ROWS
    after-image, after its 4-byte length; ``Json_diff_vector::read_binary``).

    Each diff: operation (1 byte: 0 REPLACE, 1 INSERT, 2 REMOVE), path length
    (net_field_length) + path text, then -- unless REMOVE -- value length (net_field_length) +
    the value as a binary JSON document.
    """
    end = pos + length
    if pos < 0 or length < 0 or end > len(buf):
        raise JsonDiffError(f"JSON diff list of {length} bytes runs past the end of the event")
    if type(buf) is not bytes:
        buf = bytes(buf[pos:end])
        pos, end = 0, length
    diffs = []
    while pos < end:
        op = buf[pos]
        if op > REMOVE:
            raise JsonDiffError(f"unknown JSON diff operation {op}")
        n, pos = _net_field_length(buf, pos + 1, end)
        if n > end - pos:
            raise JsonDiffError("JSON diff path runs past the end of the diff list")
        try:
            path = buf[pos:pos + n].decode()
        except UnicodeDecodeError:
            raise JsonDiffError("JSON diff path is not UTF-8") from None
        pos += n
        if op == REMOVE:
            diffs.append(JsonDiff(op, path, None))
            continue
        n, pos = _net_field_length(buf, pos, end)
        if n > end - pos:
            raise JsonDiffError("JSON diff value runs past the end of the diff list")
        value = _decode(buf, pos, pos + n)
        pos += n
        diffs.append(JsonDiff(op, path, value))
    return diffs


# Path legs: (_MEMBER, name) | (_CELL, index) | (_FROM_END, index) -- "[last-index]".
_MEMBER = 0
_CELL = 1
_FROM_END = 2
_WS = " \t\n\r\x0b\x0c"


@functools.lru_cache(maxsize=4096)
def parse_json_path(path: str) -> tuple:
    """A MySQL JSON path made of member and array-cell legs, as a tuple of legs.

    Accepts what ``json_path.cc`` writes and parses: ``$``, ``.name``, ``."quoted name"`` (JSON
    escapes), ``[N]``, ``[last]``, ``[last-N]``, whitespace between tokens.  Wildcards
    (``.*``, ``[*]``, ``**``) and ranges (``[1 to 3]``) never appear in diffs and raise
    :class:`JsonDiffError`, as does anything malformed.
    """
    s = path
    n = len(s)

    def fail(msg: str):
        return JsonDiffError(f"JSON diff path {path!r}: {msg}")

    def ws(i: int) -> int:
        while i < n and s[i] in _WS:
            i += 1
        return i

    def index(i: int):
        from_end = False
        if s.startswith("last", i):
            from_end = True
            i = ws(i + 4)
            if i < n and s[i] == "-":
                i = ws(i + 1)
            else:
                return 0, True, i
        j = i
        while j < n and "0" <= s[j] <= "9":
            j += 1
        if j == i:
            raise fail(f"array index expected at {i}")
        value = int(s[i:j])
        if value > 0xFFFFFFFF:
            raise fail("array index over 2**32")
        return value, from_end, j

    i = ws(0)
    if i >= n or s[i] != "$":
        raise fail("does not start with '$'")
    i = ws(i + 1)
    legs = []
    while i < n:
        c = s[i]
        if c == "[":
            i = ws(i + 1)
            if i < n and s[i] == "*":
                raise fail("array wildcard [*] is not supported")
            idx, from_end, i = index(i)
            i = ws(i)
            if s.startswith("to", i) and i + 2 < n and s[i + 2] in _WS and s[i - 1] in _WS:
                raise fail("array ranges are not supported")
            if i >= n or s[i] != "]":
                raise fail(f"']' expected at {i}")
            i += 1
            legs.append((_FROM_END if from_end else _CELL, idx))
        elif c == ".":
            i = ws(i + 1)
            if i >= n:
                raise fail("member name expected")
            if s[i] == "*":
                raise fail("member wildcard .* is not supported")
            if s[i] == '"':
                j = i + 1
                while j < n:
                    if s[j] == "\\":
                        j += 2
                        continue
                    if s[j] == '"':
                        break
                    j += 1
                if j >= n:
                    raise fail("unterminated quoted member name")
                raw = s[i:j + 1]
                i = j + 1
            else:
                j = i
                while j < n and s[j] not in _WS and s[j] not in "[.*":
                    j += 1
                raw = '"' + s[i:j] + '"'
                if j == i:
                    raise fail("empty member name")
                i = j
            try:
                name = json.loads(raw)
            except ValueError:
                raise fail(f"bad member name {raw}") from None
            if type(name) is not str:
                raise fail(f"bad member name {raw}")
            legs.append((_MEMBER, name))
        elif c == "*":
            raise fail("the ** wildcard is not supported")
        else:
            raise fail(f"unexpected {c!r} at {i}")
        i = ws(i)
    return tuple(legs)


def _mysql_key(k: str):
    b = k.encode("utf-8", "surrogatepass")
    return len(b), b


def _position(kind: int, idx: int, size: int):
    """Json_array_index: (position, within bounds)."""
    if kind == _FROM_END:
        return (size - idx - 1 if idx < size else 0), idx < size
    return min(idx, size), idx < size


def _describe(node) -> str:
    if isinstance(node, dict):
        return "an object"
    if isinstance(node, list):
        return "an array"
    if node is None:
        return "null"
    return f"a {type(node).__name__}"


def apply_json_diffs(doc: object, diffs) -> object:
    """The document after applying *diffs* (``apply_json_diff`` semantics) to *doc*.

    *doc* is the decoded before-image value; it is not modified (containers on the changed
    paths are copied, the rest is shared).  REPLACE needs the path to exist; INSERT adds an
    object member (the key must be new; keys are kept in MySQL's stored order, so the result
    equals the decoded full after-image) or inserts into an array at the index (past the end:
    appends); REMOVE deletes an existing member or element.  There is no auto-wrapping.  A diff
    that does not apply -- MySQL's replica rejects it too -- raises :class:`JsonDiffError`.
    """
    if not diffs:
        return doc
    root = [doc]
    fresh: set[int] = set()
    keep: list = []          # keeps copies alive so their ids stay unique during this call

    def own(parent, key, node):
        """*node* (= parent[key]) as a container private to this call."""
        if id(node) in fresh:
            return node
        t = type(node)
        if t is dict or isinstance(node, dict):
            node = dict(node)
        elif t is list or isinstance(node, (list, tuple)):
            node = list(node)
        else:
            return node
        parent[key] = node
        fresh.add(id(node))
        keep.append(node)
        return node

    for diff in diffs:
        op, path, value = diff[0], diff[1], diff[2]
        legs = parse_json_path(path)
        if not legs:
            raise JsonDiffError(f"JSON diff {_OP_NAMES[op] if 0 <= op < 3 else op} at '$': "
                                f"MySQL never writes a diff for the whole document")
        node = own(root, 0, root[0])
        for depth, (kind, key) in enumerate(legs):
            last = depth == len(legs) - 1
            if last and op != REPLACE:
                break
            if isinstance(node, dict):
                if kind != _MEMBER or key not in node:
                    raise _rejected(diff, legs, depth, node)
                if last:
                    node[key] = value
                else:
                    node = own(node, key, node[key])
            elif isinstance(node, list):
                if kind == _MEMBER:
                    raise _rejected(diff, legs, depth, node)
                p, within = _position(kind, key, len(node))
                if not within:
                    raise _rejected(diff, legs, depth, node)
                if last:
                    node[p] = value
                else:
                    node = own(node, p, node[p])
            else:
                raise _rejected(diff, legs, depth, node)
        if op == REPLACE:
            continue
        kind, key = legs[-1]
        if op == INSERT:
            if isinstance(node, dict) and kind == _MEMBER:
                if key in node:
                    raise _rejected(diff, legs, len(legs) - 1, node, "the member exists")
                if node and _mysql_key(key) < _mysql_key(next(reversed(node))):
                    node[key] = value
                    items = sorted(node.items(), key=lambda kv: _mysql_key(kv[0]))
                    node.clear()
                    node.update(items)
                else:
                    node[key] = value
            elif isinstance(node, list) and kind != _MEMBER:
                node.insert(_position(kind, key, len(node))[0], value)
            else:
                raise _rejected(diff, legs, len(legs) - 1, node)
        elif op == REMOVE:
            if isinstance(node, dict) and kind == _MEMBER and key in node:
                del node[key]
            elif isinstance(node, list) and kind != _MEMBER and \
                    _position(kind, key, len(node))[1]:
                del node[_position(kind, key, len(node))[0]]
            else:
                raise _rejected(diff, legs, len(legs) - 1, node)
        else:
            raise JsonDiffError(f"unknown JSON diff operation {op}")
    return root[0]


def _rejected(diff, legs, depth: int, node, why: str = "") -> JsonDiffError:
    name = _OP_NAMES[diff[0]] if 0 <= diff[0] < 3 else str(diff[0])
    kind, key = legs[depth]
    leg = "." + json.dumps(key, ensure_ascii=False) if kind == _MEMBER else \
        ("[last-%d]" % key if kind == _FROM_END else "[%d]" % key)
    if not why:
        why = f"leg {leg} does not match {_describe(node)}"
        if depth == 0 and not isinstance(node, (dict, list)):
            from cdc.values.types import ABSENT
            if node is ABSENT:
                why = ("the before image lacks this column (binlog_row_image=MINIMAL?): "
                       "a partial JSON update cannot be rebuilt without it")
    return JsonDiffError(f"JSON diff {name} {diff[1]!r} does not apply: {why}")
