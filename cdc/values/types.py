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
CHAR/VARCHAR/TEXT      ``str`` decoded with the column's collation; binary collations: ``bytes``
BINARY(n)              ``bytes`` padded back to n with ``\\0`` (the binlog strips the padding)
BLOB                   ``bytes``
ENUM / SET             ``str`` (SET: comma-joined, definition order) when the table map carries
                       the value names (binlog_row_metadata=FULL); else the index / bitmask int
JSON (MySQL binary)    the decoded document (dict/list/str/int/float/Decimal/bool/None/...)
GEOMETRY               :class:`Geometry` (srid, wkb)
VECTOR                 ``list[float]`` (float32 values)
=====================  ==================================================================
Columns absent from a row image (binlog_row_image=MINIMAL/NOBLOB) hold :data:`ABSENT`.
"""

from __future__ import annotations

import datetime as _dt
import struct
from decimal import Decimal
from typing import Callable, NamedTuple

from cdc.values.charsets import BINARY_COLLATION, make_text_decoder
from cdc.binlog.constants import ColumnType as T
from cdc.errors import SchemaError, TruncatedEventError


class _Absent:
    __slots__ = ()

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self):
        return "ABSENT"


ABSENT = _Absent()
"""Marks a column that is not part of a row image (not the same as NULL)."""


class InvalidTemporal(str):
    """A zero or partly-zero date/time value (``0000-00-00``, ``2024-00-10 10:00:00``...)."""

    __slots__ = ()


class Geometry(NamedTuple):
    srid: int
    wkb: bytes


UTC = _dt.timezone.utc
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=UTC)

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


class TypeInfo(NamedTuple):
    name: str
    meta_len: int
    parse_meta: Callable[[bytes], object]
    make_decoder: Callable[[ColumnDef], Decoder]
    numeric: bool = False      # has a bit in the SIGNEDNESS metadata
    character: bool = False    # has an entry in the (DEFAULT_|COLUMN_)CHARSET metadata


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


def _fixed(fmt: str) -> Callable[[ColumnDef], Decoder]:
    st = struct.Struct(fmt)
    size = st.size
    unpack = st.unpack_from

    def factory(_col):
        def dec(buf, pos):
            return unpack(buf, pos)[0], pos + size
        return dec
    return factory


def _int_factory(size: int) -> Callable[[ColumnDef], Decoder]:
    fmts = {1: "b", 2: "h", 4: "i", 8: "q"}

    def factory(col: ColumnDef) -> Decoder:
        if size == 3:
            signed = not col.unsigned

            def dec24(buf, pos):
                return int.from_bytes(buf[pos:pos + 3], "little", signed=signed), pos + 3
            return dec24
        fmt = fmts[size]
        st = struct.Struct("<" + (fmt.upper() if col.unsigned else fmt))
        unpack = st.unpack_from

        def dec(buf, pos):
            return unpack(buf, pos)[0], pos + size
        return dec
    return factory


_DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


def decimal_size(precision: int, scale: int) -> int:
    intg = precision - scale
    return (intg // 9) * 4 + _DIG2BYTES[intg % 9] + (scale // 9) * 4 + _DIG2BYTES[scale % 9]


def read_newdecimal(buf, pos: int, precision: int, scale: int) -> tuple[Decimal, int]:
    """MySQL's binary DECIMAL(precision, scale) at *pos*: (value, position after it)."""
    size = decimal_size(precision, scale)
    end = pos + size
    _need(buf, end)
    raw = bytearray(buf[pos:end])
    negative = not (raw[0] & 0x80)
    raw[0] ^= 0x80
    if negative:
        raw = bytearray(b ^ 0xFF for b in raw)
    intg = precision - scale
    lead = _DIG2BYTES[intg % 9]
    p = 0
    whole = int.from_bytes(raw[p:p + lead], "big") if lead else 0
    p += lead
    for _ in range(intg // 9):
        whole = whole * 1_000_000_000 + int.from_bytes(raw[p:p + 4], "big")
        p += 4
    frac_text = ""
    for _ in range(scale // 9):
        frac_text += "%09d" % int.from_bytes(raw[p:p + 4], "big")
        p += 4
    tail = scale % 9
    if tail:
        n = _DIG2BYTES[tail]
        frac_text += "%0*d" % (tail, int.from_bytes(raw[p:p + n], "big"))
    text = ("-" if negative else "") + str(whole) + ("." + frac_text if frac_text else "")
    return Decimal(text), end


def decimal_groups(precision: int, scale: int) -> list[tuple[int, int]]:
    """The (byte length, decimal digits) groups of a binary DECIMAL, in order: the integer
    part's leftover digits, its 9-digit groups, the fraction's 9-digit groups, its leftover."""
    intg = precision - scale
    groups = []
    if intg % 9:
        groups.append((_DIG2BYTES[intg % 9], intg % 9))
    groups += [(4, 9)] * (intg // 9)
    groups += [(4, 9)] * (scale // 9)
    if scale % 9:
        groups.append((_DIG2BYTES[scale % 9], scale % 9))
    return groups


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


def _frac_reader(fsp: int):
    nbytes = (fsp + 1) // 2
    mult = {0: 0, 1: 10000, 2: 100, 3: 1}[nbytes]
    return nbytes, mult


def _fmt_frac(us: int, fsp: int) -> str:
    return ("." + ("%06d" % us)[:fsp]) if fsp else ""


def _date_factory(_col):
    def dec(buf, pos):
        v = buf[pos] | (buf[pos + 1] << 8) | (buf[pos + 2] << 16)
        d, m, y = v & 31, (v >> 5) & 15, v >> 9
        try:
            return _dt.date(y, m, d), pos + 3
        except ValueError:
            return InvalidTemporal("%04d-%02d-%02d" % (y, m, d)), pos + 3
    return dec


def _make_datetime(y, mo, d, h, mi, s, us, fsp):
    try:
        return _dt.datetime(y, mo, d, h, mi, s, us)
    except ValueError:
        return InvalidTemporal("%04d-%02d-%02d %02d:%02d:%02d%s" % (y, mo, d, h, mi, s, _fmt_frac(us, fsp)))


def _datetime2_factory(col):
    fsp = col.meta or 0
    nfrac, mult = _frac_reader(fsp)
    size = 5 + nfrac

    def dec(buf, pos):
        end = pos + size
        _need(buf, end)
        packed = int.from_bytes(buf[pos:pos + 5], "big") - 0x8000000000
        us = int.from_bytes(buf[pos + 5:end], "big") * mult if nfrac else 0
        ymd = packed >> 17
        hms = packed & 0x1FFFF
        ym = ymd >> 5
        return _make_datetime(ym // 13, ym % 13, ymd & 31, hms >> 12, (hms >> 6) & 63, hms & 63,
                              us, fsp), end
    return dec


def _datetime_factory(_col):
    def dec(buf, pos):
        v = struct.unpack_from("<Q", buf, pos)[0]
        d, t = divmod(v, 1000000)
        return _make_datetime(d // 10000, (d // 100) % 100, d % 100, t // 10000, (t // 100) % 100,
                              t % 100, 0, 0), pos + 8
    return dec


def _timestamp2_factory(col):
    fsp = col.meta or 0
    nfrac, mult = _frac_reader(fsp)
    size = 4 + nfrac

    def dec(buf, pos):
        end = pos + size
        _need(buf, end)
        secs = int.from_bytes(buf[pos:pos + 4], "big")
        us = int.from_bytes(buf[pos + 4:end], "big") * mult if nfrac else 0
        if secs == 0 and us == 0:
            return InvalidTemporal("0000-00-00 00:00:00" + _fmt_frac(0, fsp)), end
        return _EPOCH + _dt.timedelta(seconds=secs, microseconds=us), end
    return dec


def _timestamp_factory(_col):
    def dec(buf, pos):
        secs = struct.unpack_from("<I", buf, pos)[0]
        if secs == 0:
            return InvalidTemporal("0000-00-00 00:00:00"), pos + 4
        return _EPOCH + _dt.timedelta(seconds=secs), pos + 4
    return dec


def _time2_factory(col):
    fsp = col.meta or 0
    nfrac = (fsp + 1) // 2
    size = 3 + nfrac

    def dec(buf, pos):
        end = pos + size
        _need(buf, end)
        if nfrac == 3:
            packed = int.from_bytes(buf[pos:end], "big") - 0x800000000000
        else:
            intpart = int.from_bytes(buf[pos:pos + 3], "big") - 0x800000
            if nfrac == 0:
                packed = intpart << 24
            else:
                frac = int.from_bytes(buf[pos + 3:end], "big")
                if intpart < 0 and frac:
                    intpart += 1
                    frac -= 0x100 if nfrac == 1 else 0x10000
                packed = (intpart << 24) + frac * (10000 if nfrac == 1 else 100)
        negative = packed < 0
        if negative:
            packed = -packed
        hms = packed >> 24
        us = packed & 0xFFFFFF
        td = _dt.timedelta(hours=(hms >> 12) & 0x3FF, minutes=(hms >> 6) & 63, seconds=hms & 63,
                           microseconds=us)
        return (-td if negative else td), end
    return dec


def _time_factory(_col):
    def dec(buf, pos):
        v = int.from_bytes(buf[pos:pos + 3], "little", signed=True)
        negative = v < 0
        v = abs(v)
        td = _dt.timedelta(hours=v // 10000, minutes=(v // 100) % 100, seconds=v % 100)
        return (-td if negative else td), pos + 3
    return dec


def _year_factory(_col):
    def dec(buf, pos):
        v = buf[pos]
        return (1900 + v if v else 0), pos + 1
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
        pad_to = col.meta[1] if (pad_binary and binary and col.meta) else 0

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


def _json_value(raw: bytes):
    from cdc.values.jsonb import decode_json
    return decode_json(raw)


def _geometry_value(raw: bytes) -> Geometry:
    return Geometry(int.from_bytes(raw[:4], "little"), raw[4:])


def _vector_value(raw: bytes) -> list:
    return list(struct.unpack("<%df" % (len(raw) // 4), raw))


_json_factory = _length_prefixed(_json_value)
_geometry_factory = _length_prefixed(_geometry_value)
_vector_factory = _length_prefixed(_vector_value)


def _unsupported(name):
    def factory(col):
        def dec(buf, pos):
            raise SchemaError(f"column {col.name or col.index}: type {name} cannot appear in a row "
                              f"event of MySQL >= 5.0; the binlog is corrupt or from an old server")
        return dec
    return factory


TYPES: dict[int, TypeInfo] = {
    T.DECIMAL: TypeInfo("DECIMAL(old)", 0, _meta_none, _unsupported("old DECIMAL")),
    T.TINY: TypeInfo("TINYINT", 0, _meta_none, _int_factory(1), numeric=True),
    T.SHORT: TypeInfo("SMALLINT", 0, _meta_none, _int_factory(2), numeric=True),
    T.INT24: TypeInfo("MEDIUMINT", 0, _meta_none, _int_factory(3), numeric=True),
    T.LONG: TypeInfo("INT", 0, _meta_none, _int_factory(4), numeric=True),
    T.LONGLONG: TypeInfo("BIGINT", 0, _meta_none, _int_factory(8), numeric=True),
    T.FLOAT: TypeInfo("FLOAT", 1, _meta_u8, _fixed("<f"), numeric=True),
    T.DOUBLE: TypeInfo("DOUBLE", 1, _meta_u8, _fixed("<d"), numeric=True),
    T.NEWDECIMAL: TypeInfo("DECIMAL", 2, _meta_pair, _decimal_factory, numeric=True),
    T.NULL: TypeInfo("NULL", 0, _meta_none, lambda col: (lambda buf, pos: (None, pos))),
    T.YEAR: TypeInfo("YEAR", 0, _meta_none, _year_factory, numeric=True),
    T.DATE: TypeInfo("DATE", 0, _meta_none, _date_factory),
    T.NEWDATE: TypeInfo("DATE", 0, _meta_none, _date_factory),
    T.TIME: TypeInfo("TIME(old)", 0, _meta_none, _time_factory),
    T.TIME2: TypeInfo("TIME", 1, _meta_u8, _time2_factory),
    T.DATETIME: TypeInfo("DATETIME(old)", 0, _meta_none, _datetime_factory),
    T.DATETIME2: TypeInfo("DATETIME", 1, _meta_u8, _datetime2_factory),
    T.TIMESTAMP: TypeInfo("TIMESTAMP(old)", 0, _meta_none, _timestamp_factory),
    T.TIMESTAMP2: TypeInfo("TIMESTAMP", 1, _meta_u8, _timestamp2_factory),
    T.BIT: TypeInfo("BIT", 2, _meta_pair, _bit_factory),
    T.VARCHAR: TypeInfo("VARCHAR", 2, _meta_u16le, _varlen_factory(_varchar_length_bytes),
                        character=True),
    T.VAR_STRING: TypeInfo("VARCHAR", 2, _meta_u16le, _varlen_factory(_varchar_length_bytes),
                           character=True),
    T.STRING: TypeInfo("CHAR", 2, _meta_string,
                       _varlen_factory(_string_length_bytes, pad_binary=True), character=True),
    T.ENUM: TypeInfo("ENUM", 2, _meta_string, _enum_factory),
    T.SET: TypeInfo("SET", 2, _meta_string, _set_factory),
    T.TINY_BLOB: TypeInfo("BLOB", 1, _meta_u8, _varlen_factory(_blob_length_bytes), character=True),
    T.MEDIUM_BLOB: TypeInfo("BLOB", 1, _meta_u8, _varlen_factory(_blob_length_bytes),
                            character=True),
    T.LONG_BLOB: TypeInfo("BLOB", 1, _meta_u8, _varlen_factory(_blob_length_bytes), character=True),
    T.BLOB: TypeInfo("BLOB", 1, _meta_u8, _varlen_factory(_blob_length_bytes), character=True),
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
