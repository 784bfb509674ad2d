"""The one column-type table: table-map metadata parsing and row-image value decoding.

Every MySQL/MariaDB column type that can appear in a row event has one entry in :data:`TYPES`:
how many metadata bytes the table map carries for it, how to parse them, and a factory that builds
the value decoder for one column (built once per table map, then called for every row).

Decoded Python values
---------------------
=====================  ==================================================================
integers               ``int`` (signedness from table-map metadata; signed when unknown)
FLOAT / DOUBLE         ``float``
DECIMAL                ``decimal.Decimal`` (exact)
BIT                    ``int``
YEAR                   ``int`` (0 for the zero year)
DATE                   ``datetime.date``
TIME                   ``datetime.timedelta`` (may be negative or exceed 24 h)
DATETIME               ``datetime.datetime`` (naive, as stored)
TIMESTAMP              ``datetime.datetime`` aware, UTC (the binlog stores epoch seconds)
zero/invalid temporal  :class:`InvalidTemporal` — a ``str`` such as ``"0000-00-00"``, exactly the
                       text MySQL prints; Python's date types cannot hold them
CHAR/VARCHAR/TEXT      ``str`` decoded with the column's collation; binary collations: ``bytes``;
                       bytes not valid in the charset: :class:`InvalidText` (the stored bytes)
BINARY(n)              ``bytes`` padded back to n with ``\\0`` (the binlog strips the padding)
BLOB                   ``bytes``
ENUM / SET             ``str`` (SET: comma-joined, definition order) when the table map carries
                       the value names (binlog_row_metadata=FULL; decoded in the ENUM/SET's
                       charset); else the index / bitmask int
JSON (MySQL binary)    the decoded document (dict/list/str/int/float/Decimal/bool/...); the
                       ``null`` document: :data:`~cdc.values.kinds.JSON_NULL` (not ``None``)
GEOMETRY               :class:`Geometry` (srid, wkb)
VECTOR                 ``list[float]`` (float32 values)
=====================  ==================================================================
Columns absent from a row image (binlog_row_image=MINIMAL/NOBLOB) hold :data:`ABSENT`.
The value classes (:data:`ABSENT`, :class:`InvalidTemporal`, :class:`Geometry`) live in
:mod:`cdc.values.kinds` and are re-exported here.

Binary layouts
--------------
Each entry also says how a column's value lies in a row image -- a :class:`Layout`: the kind
the compiled decoder (:mod:`cdc.rows._rowdecode`) reads natively, its arguments (length-prefix
bytes, fractional digits, precision/scale, padding), the ``struct`` code of a fixed-width
number and the fixed byte size.  The generated Python readers (:mod:`cdc.rows.compile`) and the
compiled decoder's per-column plans (:mod:`cdc.rows.decode`) are built from these records only;
a column whose layout is :data:`FALLBACK` is read by its value decoder from this table.
"""

from __future__ import annotations

import struct
from decimal import Decimal
from typing import Callable, NamedTuple

from cdc.binlog.constants import ColumnType as T
from cdc.errors import SchemaError, TruncatedEventError
from cdc.values.charsets import BINARY_COLLATION, codec_of, make_text_decoder
from cdc.values.decimal import decimal_groups, decimal_size, read_newdecimal
from cdc.values.jsonb.binary import decode_json
from cdc.values.kinds import ABSENT, Geometry, InvalidTemporal
from cdc.values.temporal import (date_factory, datetime2_factory, datetime_factory,
                                 time2_factory, time_factory, timestamp2_factory,
                                 timestamp_factory, year_factory)

__all__ = ["TYPES", "TypeInfo", "ColumnDef", "Layout", "FALLBACK", "type_info", "build_decoder",
           "column_layout",
           # re-exported: the value classes (cdc.values.kinds), DECIMAL reading (cdc.values.decimal)
           "ABSENT", "Geometry", "InvalidTemporal", "read_newdecimal"]


Decoder = Callable[[bytes, int], tuple]


class ColumnDef:
    """One column of a table map, with everything known about it."""

    __slots__ = ("index", "type", "real_type", "meta", "name", "nullable", "unsigned",
                 "collation", "enum_values", "set_values", "geometry_type", "visible",
                 "vector_dimensions", "primary_key")

    def __init__(self, index: int, type_code: int, meta, nullable: bool):
        self.index = index
        self.type = type_code
        self.real_type = type_code
        self.meta = meta
        self.name: str | None = None
        self.nullable = nullable
        self.unsigned = False
        self.collation: int | None = None
        self.enum_values: list[str] | None = None
        self.set_values: list[str] | None = None
        self.geometry_type: int | None = None
        self.visible = True
        self.vector_dimensions: int | None = None
        self.primary_key = False
        if type_code == T.STRING and meta is not None:
            real, _length = meta
            if real in (T.ENUM, T.SET):
                self.real_type = real

    @property
    def type_name(self) -> str:
        return TYPES[self.real_type].name

    def __repr__(self) -> str:
        return (f"ColumnDef({self.index}, {self.name!r}, {self.type_name}, meta={self.meta!r}, "
                f"unsigned={self.unsigned}, collation={self.collation})")


class Layout(NamedTuple):
    """How one column's values lie in a row image: what the fast decoders read natively.

    ``kind`` names a native kind of the compiled decoder (a constant of
    :mod:`cdc.rows._rowdecode`, same name): ``I8`` ``U8`` ``I16`` ``U16`` ``I24`` ``U24`` ``I32``
    ``U32`` ``I64`` ``U64`` ``FLOAT`` ``DOUBLE`` ``YEAR`` ``DATE``; ``BIT`` (``a``: byte size);
    ``STR`` (UTF-8 text) and ``BYTES`` (``a``: length-prefix bytes, ``b``: pad to ``b`` bytes
    with ``\\0``, or 0); ``DECIMAL`` (``a``: precision, ``b``: scale); ``DATETIME2``
    ``TIMESTAMP2`` ``TIME2`` (``a``: fractional digits).  ``FALLBACK``: only the column's value
    decoder reads it.  ``struct_code``: the ``struct`` code of a fixed-width number (None
    otherwise); ``size``: the fixed byte size (0: length-prefixed or unknown).
    """

    kind: str = "FALLBACK"
    a: int = 0
    b: int = 0
    struct_code: str | None = None
    size: int = 0


FALLBACK = Layout()
"""The layout of a column only its value decoder reads."""


def _no_layout(_col) -> Layout:
    return FALLBACK


class TypeInfo(NamedTuple):
    name: str
    meta_len: int
    parse_meta: Callable[[bytes], object]
    make_decoder: Callable[[ColumnDef], Decoder]
    numeric: bool = False      # has a bit in the SIGNEDNESS metadata
    character: bool = False    # has an entry in the (DEFAULT_|COLUMN_)CHARSET metadata
    layout: Callable[[ColumnDef], Layout] = _no_layout   # the binary layout of one column


# --- metadata parsers --------------------------------------------------------------------------

def _meta_none(_b):
    return None


def _meta_u8(b):
    return b[0]


def _meta_u16le(b):
    return b[0] | (b[1] << 8)


def _meta_pair(b):
    return (b[0], b[1])


def _meta_string(b):
    """STRING/ENUM/SET: (real_type, max byte length); high length bits hide in byte 0."""
    byte0, byte1 = b[0], b[1]
    if (byte0 & 0x30) != 0x30:
        return (byte0 | 0x30, byte1 | (((byte0 & 0x30) ^ 0x30) << 4))
    return (byte0, byte1)


# --- helpers ---------------------------------------------------------------------------------

def _need(buf, end: int) -> None:
    if end > len(buf):
        raise TruncatedEventError("row image runs past the end of the event")


# --- binary layouts (see Layout) ------------------------------------------------------------

def _int_layout(size: int, code: str | None):
    """An integer of *size* bytes; *code*: its signed struct code (None: no struct code)."""
    bits = str(size * 8)

    def layout(col: ColumnDef) -> Layout:
        if col.unsigned:
            return Layout("U" + bits, struct_code=code and code.upper(), size=size)
        return Layout("I" + bits, struct_code=code, size=size)
    return layout


def _const_layout(kind: str, size: int, code: str | None = None):
    fixed = Layout(kind, struct_code=code, size=size)
    return lambda _col: fixed


def _fractional_layout(kind: str, base: int):
    """DATETIME2 / TIMESTAMP2 / TIME2: *base* bytes and (fsp + 1) // 2 fraction bytes."""
    def layout(col: ColumnDef) -> Layout:
        fsp = col.meta or 0
        if not 0 <= fsp <= 6:
            return FALLBACK
        return Layout(kind, fsp, size=base + (fsp + 1) // 2)
    return layout


def _decimal_layout(col: ColumnDef) -> Layout:
    precision, scale = col.meta
    if 1 <= precision <= 65 and 0 <= scale <= precision:
        return Layout("DECIMAL", precision, scale, size=decimal_size(precision, scale))
    return FALLBACK


def _bit_layout(col: ColumnDef) -> Layout:
    bits, nbytes = col.meta
    size = nbytes + (1 if bits else 0)
    return Layout("BIT", size, size=size) if size <= 8 else FALLBACK


def _string_layout(length_bytes_of: Callable[[ColumnDef], int], *, pad_binary: bool = False):
    """A length-prefixed string: ``STR`` in UTF-8, ``BYTES`` in a binary collation (BINARY(n):
    padded back to n bytes), other character sets ``FALLBACK``."""
    def layout(col: ColumnDef) -> Layout:
        if col.meta is None:
            return FALLBACK
        lb = length_bytes_of(col)
        if lb not in (1, 2, 3, 4):
            return FALLBACK
        codec = codec_of(col.collation if col.collation is not None else BINARY_COLLATION)
        if codec == "utf-8":
            return Layout("STR", lb)
        if codec is None:
            return Layout("BYTES", lb, col.meta[1] if pad_binary and col.collation ==
                          BINARY_COLLATION else 0)
        return FALLBACK
    return layout


def column_layout(col: ColumnDef) -> Layout:
    """The binary layout of one column's values (:class:`Layout`), from the type table."""
    return type_info(col.real_type).layout(col)


# --- value decoders ----------------------------------------------------------------------------

def _struct_factory(layout_of: Callable[[ColumnDef], Layout]) -> Callable[[ColumnDef], Decoder]:
    """A number one ``struct`` code reads: the code and size of the column's layout."""
    def factory(col: ColumnDef) -> Decoder:
        layout = layout_of(col)
        size = layout.size
        unpack = struct.Struct("<" + layout.struct_code).unpack_from

        def dec(buf, pos):
            return unpack(buf, pos)[0], pos + size
        return dec
    return factory


def _int24_factory(col: ColumnDef) -> Decoder:
    signed = not col.unsigned

    def dec24(buf, pos):
        return int.from_bytes(buf[pos:pos + 3], "little", signed=signed), pos + 3
    return dec24


def _decimal_factory(col: ColumnDef) -> Decoder:
    precision, scale = col.meta
    size = decimal_size(precision, scale)
    if precision <= 18:
        # Fast path: the value fits one integer; digits are grouped by 9 per 4 bytes.
        groups = decimal_groups(precision, scale)
        suffix = "E-%d" % scale
        nbits = size * 8
        top = 1 << (nbits - 1)
        ones = (1 << nbits) - 1
        layout = [((1 << (n * 8)) - 1, 10 ** d) for n, d in groups]
        shifts = []
        shift = nbits
        for n, _d in groups:
            shift -= n * 8
            shifts.append(shift)
        layout = [(sh, mask, mul) for sh, (mask, mul) in zip(shifts, layout)]
        from_bytes = int.from_bytes

        def dec_small(buf, pos):
            end = pos + size
            if end > len(buf):
                _need(buf, end)
            raw = from_bytes(buf[pos:end], "big")
            negative = not (raw & top)
            raw ^= top
            if negative:
                raw ^= ones
            value = 0
            for sh, mask, mul in layout:
                value = value * mul + ((raw >> sh) & mask)
            return Decimal(("-%d" if negative else "%d") % value + suffix), end
        return dec_small

    def dec(buf, pos):
        return read_newdecimal(buf, pos, precision, scale)
    return dec


def _bit_factory(col):
    bits, nbytes = col.meta
    size = nbytes + (1 if bits else 0)

    def dec(buf, pos):
        end = pos + size
        _need(buf, end)
        return int.from_bytes(buf[pos:end], "big"), end
    return dec


def _text_decoder_for(col: ColumnDef):
    return make_text_decoder(col.collation if col.collation is not None else BINARY_COLLATION)


def _varlen_factory(length_bytes_of: Callable[[ColumnDef], int], *, pad_binary: bool = False):
    def factory(col: ColumnDef) -> Decoder:
        lb = length_bytes_of(col)
        conv = _text_decoder_for(col)
        binary = conv is bytes
        # BINARY(n) only: a CHAR of unknown character set (no charset metadata) is not padded.
        pad_to = col.meta[1] if (pad_binary and binary and col.meta
                                 and col.collation == BINARY_COLLATION) else 0

        def dec(buf, pos):
            start = pos + lb
            n = int.from_bytes(buf[pos:start], "little")
            end = start + n
            _need(buf, end)
            raw = buf[start:end]
            if binary:
                raw = bytes(raw)
                if pad_to and n < pad_to:
                    raw += b"\0" * (pad_to - n)
                return raw, end
            return conv(raw), end
        return dec
    return factory


def _string_length_bytes(col):
    return 1 if col.meta[1] < 256 else 2


def _varchar_length_bytes(col):
    return 1 if col.meta < 256 else 2


def _blob_length_bytes(col):
    return col.meta


def _enum_factory(col):
    size = col.meta[1] if col.meta else 1
    names = col.enum_values

    def dec(buf, pos):
        end = pos + size
        _need(buf, end)
        idx = int.from_bytes(buf[pos:end], "little")
        if names is not None:
            if idx == 0:
                return "", end
            if idx <= len(names):
                return names[idx - 1], end
        return idx, end
    return dec


def _set_factory(col):
    size = col.meta[1] if col.meta else 1
    names = col.set_values

    def dec(buf, pos):
        end = pos + size
        _need(buf, end)
        mask = int.from_bytes(buf[pos:end], "little")
        if names is None:
            return mask, end
        return ",".join(n for i, n in enumerate(names) if mask >> i & 1), end
    return dec


def _length_prefixed(convert: Callable[[bytes], object], default_lb: int = 4):
    """A value stored as <metadata-many length bytes><that many bytes>, then converted."""
    def factory(col):
        lb = col.meta or default_lb

        def dec(buf, pos):
            start = pos + lb
            end = start + int.from_bytes(buf[pos:start], "little")
            _need(buf, end)
            return convert(bytes(buf[start:end])), end
        return dec
    return factory


def _geometry_value(raw: bytes) -> Geometry:
    return Geometry(int.from_bytes(raw[:4], "little"), raw[4:])


def _vector_value(raw: bytes) -> list:
    return list(struct.unpack("<%df" % (len(raw) // 4), raw))


_json_factory = _length_prefixed(decode_json)
_geometry_factory = _length_prefixed(_geometry_value)
_vector_factory = _length_prefixed(_vector_value)


def _unsupported(name):
    def factory(col):
        def dec(buf, pos):
            raise SchemaError(f"column {col.name or col.index}: type {name} cannot appear in a row "
                              f"event of MySQL >= 5.0; the binlog is corrupt or from an old server")
        return dec
    return factory


_TINY, _SHORT, _INT24 = _int_layout(1, "b"), _int_layout(2, "h"), _int_layout(3, None)
_LONG, _LONGLONG = _int_layout(4, "i"), _int_layout(8, "q")
_FLOAT, _DOUBLE = _const_layout("FLOAT", 4, "f"), _const_layout("DOUBLE", 8, "d")
_DATE = _const_layout("DATE", 3)
_VARCHAR = _string_layout(_varchar_length_bytes)
_BLOB = _string_layout(_blob_length_bytes)

TYPES: dict[int, TypeInfo] = {
    T.DECIMAL: TypeInfo("DECIMAL(old)", 0, _meta_none, _unsupported("old DECIMAL")),
    T.TINY: TypeInfo("TINYINT", 0, _meta_none, _struct_factory(_TINY), numeric=True,
                     layout=_TINY),
    T.SHORT: TypeInfo("SMALLINT", 0, _meta_none, _struct_factory(_SHORT), numeric=True,
                      layout=_SHORT),
    T.INT24: TypeInfo("MEDIUMINT", 0, _meta_none, _int24_factory, numeric=True, layout=_INT24),
    T.LONG: TypeInfo("INT", 0, _meta_none, _struct_factory(_LONG), numeric=True, layout=_LONG),
    T.LONGLONG: TypeInfo("BIGINT", 0, _meta_none, _struct_factory(_LONGLONG), numeric=True,
                         layout=_LONGLONG),
    T.FLOAT: TypeInfo("FLOAT", 1, _meta_u8, _struct_factory(_FLOAT), numeric=True,
                      layout=_FLOAT),
    T.DOUBLE: TypeInfo("DOUBLE", 1, _meta_u8, _struct_factory(_DOUBLE), numeric=True,
                       layout=_DOUBLE),
    T.NEWDECIMAL: TypeInfo("DECIMAL", 2, _meta_pair, _decimal_factory, numeric=True,
                           layout=_decimal_layout),
    T.NULL: TypeInfo("NULL", 0, _meta_none, lambda col: (lambda buf, pos: (None, pos))),
    T.YEAR: TypeInfo("YEAR", 0, _meta_none, year_factory, numeric=True,
                     layout=_const_layout("YEAR", 1)),
    T.DATE: TypeInfo("DATE", 0, _meta_none, date_factory, layout=_DATE),
    T.NEWDATE: TypeInfo("DATE", 0, _meta_none, date_factory, layout=_DATE),
    T.TIME: TypeInfo("TIME(old)", 0, _meta_none, time_factory),
    T.TIME2: TypeInfo("TIME", 1, _meta_u8, time2_factory, layout=_fractional_layout("TIME2", 3)),
    T.DATETIME: TypeInfo("DATETIME(old)", 0, _meta_none, datetime_factory),
    T.DATETIME2: TypeInfo("DATETIME", 1, _meta_u8, datetime2_factory,
                          layout=_fractional_layout("DATETIME2", 5)),
    T.TIMESTAMP: TypeInfo("TIMESTAMP(old)", 0, _meta_none, timestamp_factory),
    T.TIMESTAMP2: TypeInfo("TIMESTAMP", 1, _meta_u8, timestamp2_factory,
                           layout=_fractional_layout("TIMESTAMP2", 4)),
    T.BIT: TypeInfo("BIT", 2, _meta_pair, _bit_factory, layout=_bit_layout),
    T.VARCHAR: TypeInfo("VARCHAR", 2, _meta_u16le, _varlen_factory(_varchar_length_bytes),
                        character=True, layout=_VARCHAR),
    T.VAR_STRING: TypeInfo("VARCHAR", 2, _meta_u16le, _varlen_factory(_varchar_length_bytes),
                           character=True, layout=_VARCHAR),
    T.STRING: TypeInfo("CHAR", 2, _meta_string,
                       _varlen_factory(_string_length_bytes, pad_binary=True), character=True,
                       layout=_string_layout(_string_length_bytes, pad_binary=True)),
    T.ENUM: TypeInfo("ENUM", 2, _meta_string, _enum_factory),
    T.SET: TypeInfo("SET", 2, _meta_string, _set_factory),
    T.TINY_BLOB: TypeInfo("BLOB", 1, _meta_u8, _varlen_factory(_blob_length_bytes),
                          character=True, layout=_BLOB),
    T.MEDIUM_BLOB: TypeInfo("BLOB", 1, _meta_u8, _varlen_factory(_blob_length_bytes),
                            character=True, layout=_BLOB),
    T.LONG_BLOB: TypeInfo("BLOB", 1, _meta_u8, _varlen_factory(_blob_length_bytes),
                          character=True, layout=_BLOB),
    T.BLOB: TypeInfo("BLOB", 1, _meta_u8, _varlen_factory(_blob_length_bytes), character=True,
                     layout=_BLOB),
    T.JSON: TypeInfo("JSON", 1, _meta_u8, _json_factory),
    T.GEOMETRY: TypeInfo("GEOMETRY", 1, _meta_u8, _geometry_factory),
    T.VECTOR: TypeInfo("VECTOR", 1, _meta_u8, _vector_factory),
}


def type_info(type_code: int) -> TypeInfo:
    info = TYPES.get(type_code)
    if info is None:
        raise SchemaError(f"unknown column type code {type_code} in a TABLE_MAP event; this server "
                          f"version writes a type binlog-cdc does not know yet (please report it)")
    return info


def build_decoder(col: ColumnDef) -> Decoder:
    """The value decoder for one column (call once per table map, then per row)."""
    return type_info(col.real_type).make_decoder(col)
