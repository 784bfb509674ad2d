"""Arrow arrays of Python values (strings, integers) built from buffers: what
``pa.array(values, type)`` gives, without pyarrow's pandas check.

``pa.array`` asks pyarrow's pandas shim whether *values* is a pandas object, and the shim
imports pandas to answer (0.2-0.4 s, once per process, when numpy is installed): in a Spark
Python worker that only yields record batches of strings and integers (the JSON envelope),
that import was most of the first batch's work. :func:`array` builds string and integer arrays
from buffers (same values, same validity) and leaves other types to ``pa.array``; pandas
itself is never touched, so a pandas UDF sharing the worker sees pyarrow as usual.
"""

from __future__ import annotations

import datetime as _dt
import decimal as _decimal
from array import array as _carray
from functools import partial
from itertools import repeat
from operator import is_not

import pyarrow as pa

type_ = type

try:
    import numpy as np      # pyarrow imported it already when it is installed
except ImportError:         # pragma: no cover - without numpy pa.array checks no pandas
    np = None

_MAX_OFFSET = 2 ** 31 - 1       # pa.string()'s int32 offsets


def _int_codes() -> dict:
    """Arrow integer type -> the :mod:`array` type code of its width and sign."""
    out = {}
    for codes, types in (("bhiq", (pa.int8(), pa.int16(), pa.int32(), pa.int64())),
                         ("BHIQ", (pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()))):
        for code, t in zip(codes, types):
            if _carray(code).itemsize * 8 == t.bit_width:
                out[t] = code
    return out


_INT_CODES = _int_codes()


def array(values: list, type: pa.DataType) -> pa.Array:
    """``pa.array(values, type)`` (values: a list or tuple, None for null): string and integer
    types from buffers, others by ``pa.array`` (integers: of Python ints; this module's callers
    never hold a bool, which ``pa.array`` would refuse)."""
    if np is not None:
        if type == pa.string():
            out = strings(values)
            if out is not None:
                return out
        else:
            code = _INT_CODES.get(type)
            if code is not None:
                return _integers(values, type, code)
    return pa.array(values, type)


def _validity(values: list, n: int):
    """The validity bitmap of *values* (None: null) and its bytes (1: a value), or (None, None)
    when none is null."""
    if None not in values:
        return None, None
    valid = np.frombuffer(bytes(map(is_not, values, repeat(None))), bool)
    return pa.py_buffer(np.packbits(valid, bitorder="little")), valid


def _integers(values: list, type: pa.DataType, code: str) -> pa.Array:
    n = len(values)
    validity = None
    try:
        data = _carray(code, values)    # OverflowError out of range, as pa.array's
    except TypeError:                   # nulls, or not all int
        validity, _ = _validity(values, n)
        try:
            if validity is None:
                raise
            data = _carray(code, [0 if v is None else v for v in values])
        except TypeError:   # floats, Decimals, strings...: pa.array's conversions
            return pa.array(values, type)
    return pa.Array.from_buffers(type, n, [validity, pa.py_buffer(data)])


def strings(values: list) -> pa.Array | None:
    """``pa.array(values, pa.string())`` of a list of str (None: null) from buffers; None when
    they are not all str or None, or too long for one array (``pa.array`` decides then)."""
    n = len(values)
    validity = valid = None
    texts = values
    try:
        text = "".join(texts)
    except TypeError:       # nulls, or bytes, numbers...: pa.array's conversions
        validity, valid = _validity(values, n)
        if validity is None:
            return None
        texts = list(filter(partial(is_not, None), values))
        try:
            text = "".join(texts)
        except TypeError:
            return None
    if text.isascii():
        data = text.encode("ascii")
        lengths = np.fromiter(map(len, texts), np.int64, len(texts))
    else:
        try:
            encoded = [t.encode() for t in texts]
        except UnicodeEncodeError:      # lone surrogates: pa.array's error
            return None
        data = b"".join(encoded)
        lengths = np.fromiter(map(len, encoded), np.int64, len(texts))
    if valid is not None:       # nulls: no bytes
        lengths, present = np.zeros(n, np.int64), lengths
        lengths[valid] = present
    if len(data) > _MAX_OFFSET:
        return None
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:], dtype=np.int32)
    return pa.Array.from_buffers(pa.string(), n, [validity, pa.py_buffer(offsets),
                                                  pa.py_buffer(data)])


# --- Arrow's integer form of DECIMAL and temporal values --------------------------------------

_EPOCH = _dt.datetime(1970, 1, 1)
_EPOCH_UTC = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_DAY0 = _dt.date(1970, 1, 1)
_US = _dt.timedelta(microseconds=1)


def has_int_form(type: pa.DataType) -> bool:
    """Whether :func:`int_form_array` builds arrays of *type*: a decimal128 of up to 18 digits,
    a timestamp in microseconds, a date32 (the integer forms of
    :func:`cdc.rows.decode.decode_image_columns`' *int_form*)."""
    return (pa.types.is_decimal128(type) and type.precision <= 18) or type == pa.date32() or \
        (pa.types.is_timestamp(type) and type.unit == "us")


def to_int_form(type: pa.DataType):
    """The function turning one value that ``pa.array`` takes for *type* (:func:`has_int_form`;
    Decimal, datetime, date, int...) into its integer form (None: null)."""
    if pa.types.is_decimal(type):
        scale = type.scale
        return lambda v: int(v.scaleb(scale)) if type_(v) is _decimal.Decimal else \
            int_forms([v], type)[0]
    if type == pa.date32():
        return lambda v: (v - _DAY0).days if type_(v) is _dt.date else int_forms([v], type)[0]
    epoch, naive = (_EPOCH, True) if type.tz is None else (_EPOCH_UTC, False)
    return lambda v: (v - epoch) // _US if type_(v) is _dt.datetime and \
        (v.tzinfo is None) is naive else int_forms([v], type)[0]


def int_forms(values: list, type: pa.DataType) -> list:
    """The integer forms (None: null) of *values* as ``pa.array(values, type)`` reads them
    (:func:`has_int_form`)."""
    a = pa.array(values, type)
    n = len(a)
    if pa.types.is_decimal(type):       # the low words of the 128-bit values
        out = np.frombuffer(a.buffers()[1], np.int64, 2 * n, 16 * a.offset)[::2].tolist()
    else:
        width = np.int64 if pa.types.is_timestamp(type) else np.int32
        out = np.frombuffer(a.buffers()[1], width, n, a.offset * width().itemsize).tolist()
    if a.null_count:
        out = [v if ok else None for v, ok in zip(out, a.is_valid().to_pylist())]
    return out


def int_form_array(values: list, type: pa.DataType) -> pa.Array:
    """The Arrow array of *type* (:func:`has_int_form`) of *values* in its integer form
    (decimal: the unscaled value; timestamp: microseconds since the epoch; date32: days since
    1970-01-01), None null; from buffers."""
    if pa.types.is_decimal(type):
        low = _integers(values, pa.int64(), _INT_CODES[pa.int64()])
        n = len(low)
        words = np.empty((n, 2), np.int64)
        words[:, 0] = np.frombuffer(low.buffers()[1], np.int64, n, low.offset * 8)
        words[:, 1] = words[:, 0] >> 63          # two's complement: the sign in the high word
        return pa.Array.from_buffers(type, n, [low.buffers()[0], pa.py_buffer(words)],
                                     offset=0)
    width = pa.int64() if pa.types.is_timestamp(type) else pa.int32()
    return _integers(values, type, _INT_CODES[width])
