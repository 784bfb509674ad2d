"""Decoded JSON documents as text: MySQL's ``SELECT json_col`` form, and JSON-safe values.

Sources (MySQL 8.x): ``sql-common/json_dom.cc`` (``wrapper_to_string``: the text form) and
``strings/dtoa.cc`` (``my_gcvt``: doubles).
"""

from __future__ import annotations

import base64
import datetime as _dt
import json
import math
from decimal import Decimal

from cdc.values.kinds import JSON_NULL, JsonOpaque

__all__ = ["json_to_text", "to_jsonable", "format_double"]

_T_VAR_STRING = 253     # opaque values of this MySQL type are printed as strings

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


def time_text(td: _dt.timedelta, fraction_always: bool = False) -> str:
    """A TIME value as MySQL prints it: ``[-]HH:MM:SS[.ffffff]`` (hours past 24 allowed; the
    fraction only when there is one, unless *fraction_always*)."""
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


def _opaque_text(v: JsonOpaque) -> str:
    if v.field_type == _T_VAR_STRING:
        return bytes(v).decode("utf-8", "replace")
    return "base64:type%d:%s" % (v.field_type, _mysql_base64(v))


def _string_text(v):
    """The text of a scalar MySQL prints as a JSON string (without the quotes), else None."""
    t = type(v)
    if t is str:
        return v
    if t is _dt.datetime:
        return "%04d-%02d-%02d %02d:%02d:%02d.%06d" % (v.year, v.month, v.day, v.hour,
                                                     v.minute, v.second, v.microsecond)
    if t is _dt.date:
        return "%04d-%02d-%02d" % (v.year, v.month, v.day)
    if t is _dt.timedelta:
        return time_text(v, True)
    if t is JsonOpaque:
        return _opaque_text(v)
    if isinstance(v, str):                        # InvalidTemporal and other str subclasses
        return str(v)
    if isinstance(v, (bytes, bytearray, memoryview)):
        return "base64:type%d:%s" % (252, _mysql_base64(bytes(v)))
    return None


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
    elif v is None or v is JSON_NULL:
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
    elif (text := _string_text(v)) is not None:
        out(_quote(text))
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


def json_to_text(value, quoted: bool = True) -> str:
    """*value* (as :func:`decode_json` returns it) as MySQL prints the JSON document.

    Matches ``SELECT CAST(json_col AS CHAR)`` (``Json_wrapper::to_string``): ``", "`` and
    ``": "`` separators, keys in stored order, strings escaped like ``double_quote()``, doubles
    by :func:`format_double` (``1.0``, ``1e300``), decimals with every stored digit (``1.50``),
    DATE ``"2024-01-02"``, DATETIME/TIMESTAMP ``"2024-01-02 12:34:56.000000"`` and TIME
    ``"-838:59:59.000000"`` (MySQL always prints 6 fractional digits there:
    ``my_TIME_to_str(t, 6)``), other opaque values ``"base64:type<N>:<base64>"`` (MySQL's
    base64 breaks lines after 76 characters; the newline is escaped as ``\\n``), the null
    literal (``None``, or :data:`~cdc.values.kinds.JSON_NULL` for a whole document) ``null``.
    Plain ``bytes`` are rendered as BLOB (type 252) opaque values.

    ``quoted=False`` is MySQL's ``json_quoted=false`` (what ``mysqlbinlog -v`` prints): a
    document that is a single string-like scalar -- a string, a date/time, an opaque value --
    is its bare text (``str``, ``2024-01-02 12:34:56.000000``), not a JSON string.
    """
    if not quoted:
        text = _string_text(value)
        if text is not None:
            return text
    parts: list[str] = []
    _text(value, parts.append)
    return "".join(parts)


def to_jsonable(value):
    """*value* with only ``dict``/``list``/``str``/``int``/``float``/``bool``/``None`` in it.

    For ``json.dumps``: the document :func:`json_to_text` prints, with every string-like scalar
    the string MySQL prints (dates ``2024-01-02``, date-times ``2024-01-02 12:34:56.000000``,
    TIME ``-30:00:01.000000``, opaque values ``base64:type<N>:<base64>``; VAR_STRING ones the
    string); numbers stay exact: ``Decimal`` becomes its exact decimal text as a *string*
    (``"1.50"``; ``json.dumps`` cannot write a number it would not round-trip through
    ``float`` -- use :func:`json_to_text` for number text); the null literal
    (:data:`~cdc.values.kinds.JSON_NULL` too) and non-finite floats ``None``.
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
    if value is JSON_NULL:
        return None
    text = _string_text(value)
    if text is not None:
        return text
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
