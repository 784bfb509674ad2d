"""Snapshot rows column by column: a chunk's rows as the client read them (tuples of the text
protocol's ``bytes``, :func:`cdc.snapshot.values.select_list`) straight to Arrow, one conversion
per column of a fetched batch instead of one Python call per value.

:class:`JsonImages` renders the JSON ``after`` images (and the primary key's JSON) of a batch:
each column becomes an Arrow array of its values' JSON texts (its *fragments*), joined per row
by Arrow (``{"a": <a>, "b": <b>}``). Where the server's text already is the JSON text (integers,
decimals, UTF-8 text, ENUM members, dates and times) the fragments come from Arrow compute; a
column any of whose values the fast form cannot prove exact (a ZEROFILL decimal, text needing
JSON escapes, an invalid date, any other type) is rendered value by value in that batch by the
exact converters and :mod:`cdc.values.render` (:func:`~cdc.values.render.to_json_text`), as every
row was before. The texts are exactly :func:`~cdc.values.render.row_json` of the converted rows
(``tests/live/test_snapshot_values_live.py`` checks it on the type matrix and every charset).
"""

from __future__ import annotations

from operator import itemgetter
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from cdc.binlog.constants import ColumnType as T
from cdc.values.charsets import codec_of
from cdc.values.render import document_json, to_json_text
from cdc.values.types import ColumnDef
from cdc.snapshot.values import column_converter

from streaming.contract.spark_schema import is_binary

__all__ = ["JsonImages", "TypedImages", "column_fragments"]

_json_str = to_json_text      # a str's JSON text (encode_basestring)

_SIGNED_INTS = frozenset({T.TINY, T.SHORT, T.INT24, T.LONG, T.LONGLONG, T.YEAR})
_DECIMALS = frozenset({T.NEWDECIMAL, T.DECIMAL})
_DATETIMES = frozenset({T.DATETIME, T.DATETIME2})
_TIMESTAMPS = frozenset({T.TIMESTAMP, T.TIMESTAMP2})
_DATES = frozenset({T.DATE, T.NEWDATE})
_TEXTS = frozenset({T.VARCHAR, T.VAR_STRING, T.STRING, T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB,
                    T.BLOB})

# a DECIMAL's text that is its own format(Decimal(text), "f") (no ZEROFILL zeros, no sign +)
_PLAIN_DECIMAL = r"^-?(0|[1-9][0-9]*)(\.[0-9]+)?$"
# what encode_basestring escapes: control characters, " and backslash
_QUOTE, _BACKSLASH = ord('"'), ord("\\")


class _Slow(Exception):
    """This column of this batch goes value by value."""


def _strings(raw: pa.Array) -> pa.Array:
    try:
        return raw.cast(pa.string())      # validates UTF-8 (what bytes.decode() accepts)
    except pa.ArrowInvalid:
        raise _Slow from None


class _Parts(NamedTuple):
    """A column's JSON texts as ``open + text + close`` (*open*, *close*: literal text; *text*
    without nulls when either is set): :func:`_object` folds the literals into the separators,
    so a quoted column costs no pass of its own."""

    open: str
    text: pa.Array
    close: str = ""

    def joined(self) -> pa.Array:
        if not (self.open or self.close):
            return self.text
        return pc.binary_join_element_wise(self.open, self.text, self.close, "")


def _quoted(text: pa.Array, suffix: str = "") -> _Parts:
    """``"text<suffix>"`` for each value (nulls stay null)."""
    if text.null_count:
        return _Parts("", pc.binary_join_element_wise('"', text, suffix + '"', ""))
    return _Parts('"', text, suffix + '"')


def _needs_escape(text: pa.Array) -> bool:
    """Whether a string array's values hold a character JSON escapes (one look at its data
    buffer; bytes of null slots count too, which only sends the column value by value)."""
    if len(text) == 0:
        return False
    offsets = np.frombuffer(text.buffers()[1], np.int32)
    data = text.buffers()[2]
    if data is None:
        return False
    b = np.frombuffer(data, np.uint8)[offsets[text.offset]:offsets[text.offset + len(text)]]
    return bool((b < 0x20).any() or (b == _QUOTE).any() or (b == _BACKSLASH).any())


def _temporal(raw: pa.Array, parse_type) -> pa.Array:
    """The column's text, checked to be a date Python's ``fromisoformat`` takes (Arrow's parser
    rejects a zero or invalid date; year 0 is checked here): an invalid one goes value by
    value (its JSON is the server's text, an InvalidTemporal)."""
    text = _strings(raw)
    try:
        text.cast(parse_type)
    except pa.ArrowInvalid:
        raise _Slow from None
    if pc.any(pc.starts_with(text, "0000")).as_py():
        raise _Slow
    return text


def _canonical_integers(text: pa.Array) -> bool:
    """Whether each of a column's integer texts (Arrow's parser took them) is the number's own
    text: no ZEROFILL zeros (``007``, the YEAR ``0000``), no ``-0``."""
    if pc.any(pc.starts_with(text, "-0")).as_py():
        return False
    lead = pc.starts_with(text, "0")
    if not pc.any(lead).as_py():
        return True
    return pc.all(pc.equal(text.filter(lead), "0")).as_py()


def _iso_datetime(text: pa.Array, suffix: str = "") -> _Parts:
    """``YYYY-MM-DD HH:MM:SS[.fff]`` -> the JSON text of ``datetime.isoformat()`` (and
    *suffix*): ``T``, a fraction of zeros dropped, any other fraction padded to 6 digits. The
    server prints a column's values with the same number of fraction digits: then the padding
    is a literal, and only a column with a zero fraction somewhere takes the general form."""
    lengths = pc.min_max(pc.binary_length(text))       # ASCII: the parser took it
    lo, hi = lengths["min"].as_py(), lengths["max"].as_py()
    if lo == hi == 19:
        return _quoted(pc.binary_replace_slice(text, 10, 11, "T"), suffix)
    if lo == hi and lo is not None and 21 <= lo <= 26 and \
            not pc.any(pc.ends_with(text, "." + "0" * (lo - 20))).as_py():
        return _quoted(pc.binary_replace_slice(text, 10, 11, "T"), "0" * (26 - lo) + suffix)
    text = pc.replace_substring_regex(text, r"\.0+$", "")
    text = pc.if_else(pc.greater(pc.utf8_length(text), 19), pc.utf8_rpad(text, 26, "0"), text)
    return _quoted(pc.replace_substring(text, " ", "T", max_replacements=1), suffix)


def _fast_parts(col: ColumnDef, raw: pa.Array) -> _Parts:
    """The JSON texts of a column's non-null values by Arrow compute (nulls stay null), or
    :class:`_Slow`."""
    rt = col.real_type
    try:
        if rt in _SIGNED_INTS:
            big = pa.uint64() if rt == T.LONGLONG and col.unsigned else pa.int64()
            text = _strings(raw)
            number = text.cast(big)       # checked: an integer in range
            if _canonical_integers(text):
                return _Parts("", text)
            return _Parts("", number.cast(pa.string()))
        if rt in _DECIMALS:
            text = _strings(raw)
            if not pc.all(pc.match_substring_regex(text, _PLAIN_DECIMAL)).as_py():
                raise _Slow
            return _Parts("", text)
        if rt in _DATETIMES:
            return _iso_datetime(_temporal(raw, pa.timestamp("us")))
        if rt in _TIMESTAMPS:
            return _iso_datetime(_temporal(raw, pa.timestamp("us")), "Z")
        if rt in _DATES:
            return _quoted(_temporal(raw, pa.date32()))
        if rt == T.ENUM and col.enum_values is not None:
            members = pa.array(['""'] + [_json_str(n) for n in col.enum_values], pa.string())
            index = _strings(raw).cast(pa.int64())
            if (pc.max(index).as_py() or 0) >= len(members):
                raise _Slow           # a number past the members: the number itself
            return _Parts("", pc.take(members, index))
        if rt in _TEXTS and col.collation is not None and codec_of(col.collation) == "utf-8":
            text = _strings(raw)
            if _needs_escape(text):
                raise _Slow
            return _quoted(text)
    except (pa.ArrowInvalid, OverflowError):
        raise _Slow from None
    raise _Slow


def _slow_fragments(col: ColumnDef, values) -> pa.Array:
    convert = column_converter(col)
    render = document_json if col.real_type == T.JSON else to_json_text
    return pa.array(["null" if v is None else render(convert(v)) for v in values], pa.string())


def column_fragments(col: ColumnDef, values) -> pa.Array:
    """The JSON text of each of a column's values (the client's ``bytes``, None for NULL), as
    :func:`~cdc.values.render.row_json` renders the converted value: a string array."""
    return _column_parts(col, values).joined()


def _column_parts(col: ColumnDef, values) -> _Parts:
    """:func:`column_fragments` as :class:`_Parts`."""
    try:
        raw = pa.array(values, pa.binary())
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
        return _Parts("", _slow_fragments(col, values))
    try:
        parts = _fast_parts(col, raw)
    except _Slow:
        return _Parts("", _slow_fragments(col, values))
    if raw.null_count:         # the parts' text holds the nulls: no literals around it
        return _Parts("", parts.text.fill_null("null"))
    return parts


def _column(rows: list, i: int) -> list:
    return list(map(itemgetter(i), rows))


def _columns(rows: list, n: int | None = None) -> list[list]:
    """The values of each column of *rows* (one C call per column: ``zip(*rows)`` makes the
    garbage collector walk the heap more)."""
    if n is None:
        n = len(rows[0]) if rows else 0
    return [_column(rows, i) for i in range(n)]


def _object(names, parts: list[_Parts]) -> pa.Array:
    """``{"name": <value>, ...}`` of each row: one join of the columns' texts, the literals
    between them (separators, names, each column's open and close) merged."""
    args: list = []
    literal = "{"
    for i, (name, p) in enumerate(zip(names, parts)):
        literal += ("" if i == 0 else ", ") + _json_str(name) + ": " + p.open
        args += [literal, p.text]
        literal = p.close
    args.append(literal + "}")
    return pc.binary_join_element_wise(*args, "")


class JsonImages:
    """The JSON images (and primary keys) of a table's rows, a fetched batch at a time:
    ``images(rows)`` with *rows* as the client returns them for ``SELECT select_list(columns)``."""

    def __init__(self, columns: list[ColumnDef], names: list[str], key: list[int] | None):
        self.columns = list(columns)
        self.names = list(names)
        self.key = list(key) if key else None

    def images(self, rows: list, keys: bool = True) -> tuple[pa.Array, pa.Array | None]:
        """(the rows' ``after`` texts, their key texts or None without a primary key or
        without *keys*: the stream does not deliver them)."""
        if not self.columns:
            return pa.array(["{}"] * len(rows), pa.string()), None
        parts = [_column_parts(c, vals) for c, vals in zip(self.columns, _columns(rows))]
        return _object(self.names, parts), self._key(parts) if keys else None

    def keys(self, rows: list) -> pa.Array | None:
        """The rows' key texts alone (None without a primary key)."""
        if self.key is None:
            return None
        return self._key({i: _column_parts(self.columns[i], _column(rows, i))
                          for i in self.key})

    def _key(self, parts) -> pa.Array | None:
        if self.key is None:
            return None
        return _object([self.names[i] for i in self.key], [parts[i] for i in self.key])


# --- typed images ---------------------------------------------------------------------------------

def _fast_typed(col: ColumnDef, raw: pa.Array, type: pa.DataType) -> pa.Array:
    """A column's values as the Arrow array of its Spark type (what ``spark_column(col)``'s
    converter and ``pa.array`` make of the converted values) by Arrow compute, or
    :class:`_Slow`."""
    rt = col.real_type
    try:
        if rt in _SIGNED_INTS or rt in _DECIMALS:
            if pa.types.is_string(type):        # DECIMAL(M > 38): format(Decimal, "f")
                if rt in _SIGNED_INTS:
                    raise _Slow
                text = _strings(raw)
                if not pc.all(pc.match_substring_regex(text, _PLAIN_DECIMAL)).as_py():
                    raise _Slow
                return text
            if not (pa.types.is_integer(type) or pa.types.is_decimal(type)):
                raise _Slow
            return _strings(raw).cast(type)     # checked: overflow or lost digits raise
        if rt == T.DOUBLE and pa.types.is_float64(type):
            return _strings(raw).cast(type)     # both parse to the nearest double
        if rt in _DATETIMES and type == pa.timestamp("us"):
            return _temporal(raw, type).cast(type)
        if rt in _TIMESTAMPS and pa.types.is_timestamp(type) and type.unit == "us" \
                and type.tz in ("UTC", "+00:00"):
            return _temporal(raw, pa.timestamp("us")).cast(pa.timestamp("us")).cast(type)
        if rt in _DATES and pa.types.is_date32(type):
            return _temporal(raw, type).cast(type)
        if rt == T.ENUM and col.enum_values is not None and pa.types.is_string(type):
            members = pa.array([""] + list(col.enum_values), pa.string())
            index = _strings(raw).cast(pa.int64())
            if (pc.max(index).as_py() or 0) >= len(members):
                raise _Slow
            return pc.take(members, index)
        if rt in _TEXTS:
            if pa.types.is_binary(type) and is_binary(col):
                return raw                     # the bytes as stored
            if pa.types.is_string(type) and col.collation is not None \
                    and codec_of(col.collation) == "utf-8":
                return _strings(raw)
    except (pa.ArrowInvalid, OverflowError):
        raise _Slow from None
    raise _Slow


class TypedImages:
    """Typed mode's ``after`` images of a table's rows (the struct of the stream's typed
    columns, matched by name; a typed column the table lacks is null), a fetched batch at a
    time: ``images(rows)`` as :class:`JsonImages`'s. *convert*: the exact path of one column,
    ``convert(j, values) -> pa.Array`` for typed column *j* and the converted values."""

    def __init__(self, columns: list[ColumnDef], names: list[str], key: list[int] | None,
                 typed_names: list[str], fields: list, convert):
        where = {n: i for i, n in enumerate(names)}
        self.columns = list(columns)
        self.index = [where.get(n) for n in typed_names]
        self.fields = fields
        self.convert = convert
        self.json = JsonImages(columns, names, key)

    def images(self, rows: list, keys: bool = True) -> tuple[pa.Array, pa.Array | None]:
        n = len(rows)
        columns = _columns(rows, len(self.columns))
        children = []
        for j, (i, field) in enumerate(zip(self.index, self.fields)):
            if i is None:
                children.append(pa.nulls(n, field.type))
                continue
            children.append(self._child(j, self.columns[i], columns[i], field.type))
        after = pa.StructArray.from_arrays(children, fields=self.fields) if self.fields else \
            pa.array([{}] * n, pa.struct([]))
        return after, self.json.keys(rows) if keys else None

    def _child(self, j: int, col: ColumnDef, values, type) -> pa.Array:
        try:
            raw = pa.array(values, pa.binary())
            return _fast_typed(col, raw, type)
        except (_Slow, pa.ArrowInvalid, pa.ArrowTypeError, TypeError):
            convert = column_converter(col)
            return self.convert(j, [None if v is None else convert(v) for v in values])
