"""Snapshot values without a server: SELECT text (as the server prints it) -> the value the binlog
decoder gives for the same stored value.  Where the binlog side is easy to build, values are
cross-checked against the binlog value decoders themselves (:func:`cdc.values.types.build_decoder`)
on the stored bytes; the live counterpart is tests/live/test_snapshot_values_live.py.
"""

from __future__ import annotations

import datetime as dt
import json
import random
import struct
from decimal import Decimal

import pymysql
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cdc.binlog.constants import ColumnType as T
from cdc.errors import SchemaError
from cdc.snapshot.values import (SESSION_SQL, column_converter, raw_connect_kwargs, row_converter,
                                 select_list)
from cdc.values.decimal import DIG2BYTES
from cdc.values.kinds import Geometry, InvalidTemporal, InvalidText
from cdc.values.render import row_json
from cdc.values.types import ColumnDef, build_decoder

UTF8MB4, LATIN1, UCS2, SJIS, BIG5, BINARY = 45, 8, 35, 13, 1, 63


def col(type_code, meta=None, *, name="c", unsigned=False, collation=None, enum=None, sets=None,
        nullable=True) -> ColumnDef:
    c = ColumnDef(0, type_code, meta, nullable)
    c.name, c.unsigned, c.collation = name, unsigned, collation
    c.enum_values, c.set_values = enum, sets
    return c


def same(a, b) -> bool:
    return type(a) is type(b) and repr(a) == repr(b)


def convert(c: ColumnDef, raw):
    """One value through the generated row converter and through the exact column converter:
    both must agree (the fast path never decides differently)."""
    fast = row_converter([c])((raw,))[0]
    exact = None if raw is None else column_converter(c)(raw)
    assert same(fast, exact), (fast, exact)
    return fast


def binlog(c: ColumnDef, stored: bytes):
    value, end = build_decoder(c)(stored, 0)
    assert end == len(stored)
    return value


# --- the session, the connection, the SELECT list -----------------------------------------------

def test_session_sql_undoes_what_would_convert_values():
    sql = [s.lower() for s in SESSION_SQL]
    assert "set session character_set_results = binary" in sql
    assert "set session time_zone = '+00:00'" in sql
    assert "set session sql_mode = ''" in sql     # no PAD_CHAR_TO_FULL_LENGTH


def test_raw_connect_kwargs_leave_every_value_as_bytes():
    kw = raw_connect_kwargs()
    assert kw["use_unicode"] is False
    conn = pymysql.connections.Connection(defer_connect=True, **kw)
    assert conn.decoders == {} and not conn.use_unicode
    # query parameters are still escaped
    assert pymysql.converters.escape_item("it's", "utf8mb4", conn.encoders) == "'it\\'s'"


def test_select_list_names_columns_and_wraps_only_what_needs_it():
    cols = [col(T.LONG, name="id"), col(T.FLOAT, 4, name="f"), col(T.DOUBLE, 8, name="d"),
            col(T.NEWDECIMAL, (10, 2), name="dc"), col(T.ENUM, (T.ENUM, 1), name="e", enum=["a"]),
            col(T.SET, (T.SET, 1), name="s", sets=["a"]),
            col(T.STRING, (T.STRING, 16), name="u", collation=BINARY),
            col(T.STRING, (T.STRING, 40), name="ch", collation=UTF8MB4),
            col(T.VARCHAR, 300, name="vb", collation=BINARY), col(T.DATETIME2, 6, name="dt"),
            col(T.GEOMETRY, 4, name="g"), col(T.BLOB, 2, name="we`ird", collation=UTF8MB4)]
    assert select_list(cols) == (
        "`id`, `f` - 0e0 AS `f`, `d` - 0e0 AS `d`, `dc`, `e` | 0 AS `e`, `s` | 0 AS `s`, "
        "CAST(`u` AS BINARY) AS `u`, `ch`, `vb`, `dt`, `g`, `we``ird`")


def test_select_list_needs_names():
    with pytest.raises(SchemaError, match="no name"):
        select_list([col(T.LONG, name=None)])


def test_unknown_type_code_is_the_binlog_decoders_error():
    with pytest.raises(SchemaError, match="unknown column type code 200"):
        row_converter([col(200)])


# --- numbers ------------------------------------------------------------------------------------

@pytest.mark.parametrize("type_code,unsigned,raw,want", [
    (T.TINY, False, b"-128", -128), (T.TINY, True, b"255", 255),
    (T.LONGLONG, True, b"18446744073709551615", 18446744073709551615),
    (T.LONGLONG, False, b"-9223372036854775808", -9223372036854775808),
    (T.LONG, True, b"0007", 7),                      # ZEROFILL
    (T.YEAR, False, b"0000", 0), (T.YEAR, False, b"2155", 2155), (T.YEAR, False, b"1901", 1901),
])
def test_integers(type_code, unsigned, raw, want):
    assert same(convert(col(type_code, unsigned=unsigned), raw), want)


def test_year_zero_is_what_the_binlog_gives():
    assert same(convert(col(T.YEAR), b"0000"), binlog(col(T.YEAR), b"\x00"))
    assert same(convert(col(T.YEAR), b"2000"), binlog(col(T.YEAR), bytes([100])))


def _f32(x: float) -> float:
    return struct.unpack("<f", struct.pack("<f", x))[0]


@pytest.mark.parametrize("raw,want", [
    (b"1.2345677614212036", _f32(1.2345678)),       # the widened double (col - 0e0)
    (b"1.2345678", _f32(1.2345678)),                # a float32's shortest text
    (b"3.4028234663852886e38", 3.4028234663852886e38), (b"3.40282e38", _f32(3.40282e38)),
    (b"1.401298464324817e-45", 1.401298464324817e-45), (b"1.4013e-45", 1.401298464324817e-45),
    (b"-1.1754942106924411e-38", -1.1754942106924411e-38), (b"16777216", 16777216.0),
    (b"0", 0.0), (b"-0", -0.0), (b"0.1", _f32(0.1)),
])
def test_float_is_the_float32_value_widened(raw, want):
    assert same(convert(col(T.FLOAT, 4), raw), want)


def test_float_and_double_equal_the_binlog_on_random_bit_patterns():
    rnd = random.Random(7)
    fcol, dcol = col(T.FLOAT, 4), col(T.DOUBLE, 8)
    n = 0
    while n < 3000:
        b4 = rnd.getrandbits(32).to_bytes(4, "little")
        b8 = rnd.getrandbits(64).to_bytes(8, "little")
        f, d = struct.unpack("<f", b4)[0], struct.unpack("<d", b8)[0]
        if f != f or d != d or abs(f) == float("inf") or abs(d) == float("inf"):
            continue
        n += 1
        assert same(convert(fcol, repr(f).encode()), binlog(fcol, b4)), f
        assert same(convert(fcol, ("%.9g" % f).encode()), binlog(fcol, b4)), f
        assert same(convert(dcol, repr(d).encode()), binlog(dcol, b8)), d


def _decimal_bytes(text: str, precision: int, scale: int) -> bytes:
    """MySQL's binary DECIMAL(precision, scale) of *text* (the inverse of read_newdecimal)."""
    negative = text.startswith("-")
    whole, _, frac = text.lstrip("-").partition(".")
    intg = precision - scale
    whole, frac = whole.zfill(intg)[-intg:] if intg else "", frac.ljust(scale, "0")
    out = bytearray()
    if intg % 9:
        out += int(whole[:intg % 9]).to_bytes(DIG2BYTES[intg % 9], "big")
    for k in range(intg % 9, intg, 9):
        out += int(whole[k:k + 9]).to_bytes(4, "big")
    for k in range(0, scale - scale % 9, 9):
        out += int(frac[k:k + 9]).to_bytes(4, "big")
    if scale % 9:
        out += int(frac[scale - scale % 9:]).to_bytes(DIG2BYTES[scale % 9], "big")
    out[0] ^= 0x80
    return bytes(b ^ 0xFF for b in out) if negative else bytes(out)


@pytest.mark.parametrize("precision,scale", [(1, 0), (5, 2), (10, 2), (18, 9), (19, 0), (20, 10),
                                             (38, 38), (65, 30), (65, 0), (9, 9)])
def test_decimal_has_the_binlogs_digits_and_exponent(precision, scale):
    c = col(T.NEWDECIMAL, (precision, scale))
    rnd = random.Random(precision * 100 + scale)
    intg = precision - scale
    texts = ["0" + ("." + "0" * scale if scale else ""),
             ("9" * intg or "0") + ("." + "9" * scale if scale else "")]
    for _ in range(200):
        w = str(rnd.randrange(10 ** intg)) if intg else "0"
        f = str(rnd.randrange(10 ** scale)).zfill(scale) if scale else ""
        texts.append(("-" if rnd.random() < 0.5 and (w.strip("0") or f.strip("0")) else "")
                     + w + ("." + f if scale else ""))
    for text in texts:
        got = convert(c, text.encode())
        assert same(got, binlog(c, _decimal_bytes(text, precision, scale))), text
        assert got.as_tuple().exponent == -scale
    # ZEROFILL prints leading zeros: the same value and exponent
    assert same(convert(col(T.NEWDECIMAL, (10, 2)), b"00000012.50"), Decimal("12.50"))


@pytest.mark.parametrize("raw,want", [(b"\x00", 0), (b"\x01", 1), (b"\x02\xaa", 682),
                                      (b"\xff" * 8, (1 << 64) - 1)])
def test_bit(raw, want):
    c = col(T.BIT, (len(raw) * 8 % 8, len(raw)))
    assert same(convert(c, raw), want)
    assert same(convert(c, raw), binlog(c, raw))


# --- dates and times ----------------------------------------------------------------------------

DAYS = st.integers(0, 31)


@settings(max_examples=400, deadline=None)
@given(st.integers(0, 9999), st.integers(0, 12), DAYS)
def test_date_equals_the_binlog(y, m, d):
    c = col(T.DATE)
    stored = (d | m << 5 | y << 9).to_bytes(3, "little")
    got = convert(c, b"%04d-%02d-%02d" % (y, m, d))
    assert same(got, binlog(c, stored))


def _frac_text(us: int, fsp: int) -> bytes:
    return (b"." + (b"%06d" % us)[:fsp]) if fsp else b""


def _frac_bytes(us: int, fsp: int) -> bytes:
    nbytes = (fsp + 1) // 2
    return (us // {1: 10000, 2: 100, 3: 1}[nbytes]).to_bytes(nbytes, "big") if nbytes else b""


def _truncate(us: int, fsp: int) -> int:
    unit = 10 ** (6 - fsp)
    return us // unit * unit


@settings(max_examples=400, deadline=None)
@given(st.integers(0, 9999), st.integers(0, 12), DAYS, st.integers(0, 23), st.integers(0, 59),
       st.integers(0, 59), st.integers(0, 999999), st.integers(0, 6))
def test_datetime_equals_the_binlog(y, mo, d, h, mi, s, us, fsp):
    c = col(T.DATETIME2, fsp)
    us = _truncate(us, fsp)
    packed = ((y * 13 + mo) << 22 | d << 17 | h << 12 | mi << 6 | s) + 0x8000000000
    stored = packed.to_bytes(5, "big") + _frac_bytes(us, fsp)
    text = b"%04d-%02d-%02d %02d:%02d:%02d" % (y, mo, d, h, mi, s) + _frac_text(us, fsp)
    assert same(convert(c, text), binlog(c, stored))


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 2 ** 31 - 1), st.integers(0, 999999), st.integers(0, 6))
def test_timestamp_equals_the_binlog(secs, us, fsp):
    c = col(T.TIMESTAMP2, fsp)
    us = _truncate(us, fsp) if secs else 0      # the zero TIMESTAMP has no fraction
    stored = secs.to_bytes(4, "big") + _frac_bytes(us, fsp)
    if secs:
        v = dt.datetime(1970, 1, 1) + dt.timedelta(seconds=secs, microseconds=us)
        text = v.strftime("%Y-%m-%d %H:%M:%S").encode() + _frac_text(us, fsp)
    else:
        text = b"0000-00-00 00:00:00" + _frac_text(0, fsp)
    got = convert(c, text)
    assert same(got, binlog(c, stored))
    assert isinstance(got, InvalidTemporal) if not secs else got.tzinfo is dt.timezone.utc


def _time2_bytes(negative: bool, h: int, m: int, s: int, us: int, fsp: int) -> bytes:
    """MySQL's my_time_packed_to_binary (TIME2)."""
    nr = ((h << 12 | m << 6 | s) << 24) + us
    if negative:
        nr = -nr
    int_part = nr >> 24                                       # arithmetic shift
    frac_part = -((-nr) % (1 << 24)) if nr < 0 else nr % (1 << 24)   # C's %
    nfrac = (fsp + 1) // 2
    if nfrac == 0:
        return (int_part + 0x800000).to_bytes(3, "big")
    if nfrac == 1:
        return (int_part + 0x800000).to_bytes(3, "big") + bytes([int(frac_part / 10000) & 0xFF])
    if nfrac == 2:
        return ((int_part + 0x800000).to_bytes(3, "big")
                + (int(frac_part / 100) & 0xFFFF).to_bytes(2, "big"))
    return (nr + 0x800000000000).to_bytes(6, "big")


@settings(max_examples=500, deadline=None)
@given(st.booleans(), st.integers(0, 838), st.integers(0, 59), st.integers(0, 59),
       st.integers(0, 999999), st.integers(0, 6))
def test_time_equals_the_binlog(negative, h, m, s, us, fsp):
    c = col(T.TIME2, fsp)
    us = _truncate(us, fsp) if h < 838 or m < 59 or s < 59 else 0
    negative = negative and bool(h or m or s or us)
    text = b"%s%02d:%02d:%02d" % (b"-" if negative else b"", h, m, s) + _frac_text(us, fsp)
    assert same(convert(c, text), binlog(c, _time2_bytes(negative, h, m, s, us, fsp)))


@pytest.mark.parametrize("type_code,fsp,raw,want", [
    (T.DATE, None, b"0000-00-00", InvalidTemporal("0000-00-00")),
    (T.DATE, None, b"2024-02-30", InvalidTemporal("2024-02-30")),
    (T.DATETIME2, 1, b"2024-00-10 10:00:00.5", InvalidTemporal("2024-00-10 10:00:00.5")),
    (T.DATETIME2, 4, b"0001-01-01 00:00:00.0001", dt.datetime(1, 1, 1, 0, 0, 0, 100)),
    (T.TIMESTAMP2, 3, b"0000-00-00 00:00:00.000", InvalidTemporal("0000-00-00 00:00:00.000")),
    (T.TIMESTAMP2, 6, b"2038-01-19 03:14:07.999999",
     dt.datetime(2038, 1, 19, 3, 14, 7, 999999, tzinfo=dt.timezone.utc)),
    (T.TIME2, 6, b"-838:59:59.000000", -dt.timedelta(hours=838, minutes=59, seconds=59)),
    (T.TIME2, 2, b"-00:00:00.01", dt.timedelta(microseconds=-10000)),
    (T.TIME2, 0, b"100:00:00", dt.timedelta(hours=100)),
])
def test_temporal_edges(type_code, fsp, raw, want):
    assert same(convert(col(type_code, fsp), raw), want)


# --- text, binary, members, documents -----------------------------------------------------------

@pytest.mark.parametrize("type_code,collation,raw,want", [
    (T.VARCHAR, UTF8MB4, "ééé😀".encode(), "ééé😀"),
    (T.VARCHAR, UTF8MB4, b"\xed\xa0\x80", InvalidText(b"\xed\xa0\x80")),   # a surrogate
    (T.BLOB, UTF8MB4, b"a\xc3", InvalidText(b"a\xc3")),
    (T.STRING, LATIN1, b"\xe9\x80", "é€"),
    (T.STRING, UCS2, b"\x00A\x00 ", "A "),
    (T.VARCHAR, SJIS, b"\x81\x5c", "―"),
    (T.VARCHAR, BIG5, b"\xa4\x40", "一"),
    (T.VARCHAR, BINARY, b"\xff\x00", b"\xff\x00"),
    (T.STRING, BINARY, b"a\x00\x00\x00", b"a\x00\x00\x00"),      # BINARY(4): sent padded
    (T.BLOB, None, b"\x00\x01", b"\x00\x01"),                     # no collation: binary
    (T.VARCHAR, UTF8MB4, b"", ""),
])
def test_text_and_bytes(type_code, collation, raw, want):
    meta = {T.STRING: (T.STRING, len(raw) if collation == BINARY else 40), T.VARCHAR: 300,
            T.BLOB: 2}[type_code]
    c = col(type_code, meta, collation=collation)
    assert same(convert(c, raw), want)
    # the binlog decoder's value of the same stored bytes (BINARY(n): stored without padding)
    stored = raw.rstrip(b"\0") if collation == BINARY and type_code == T.STRING else raw
    prefix = len(stored).to_bytes(2 if type_code in (T.VARCHAR, T.BLOB) else 1, "little")
    assert same(convert(c, raw), binlog(c, prefix + stored))


def test_binary_n_matches_the_binlogs_padding():
    c = col(T.STRING, (T.STRING, 4), collation=BINARY)
    assert same(convert(c, b"a\x00\x00\x00"), binlog(c, b"\x01a"))
    assert same(convert(c, b"\x00" * 4), binlog(c, b"\x00"))


@pytest.mark.parametrize("raw,want", [(b"0", ""), (b"1", "a"), (b"2", "ü"), (b"3", ""),
                                      (b"9", 9), (None, None)])
def test_enum_from_its_number(raw, want):
    c = col(T.ENUM, (T.ENUM, 1), collation=UTF8MB4, enum=["a", "ü", ""])
    assert same(convert(c, raw), want)
    if raw is not None:
        assert same(convert(c, raw), binlog(c, bytes([int(raw)])))


@pytest.mark.parametrize("raw,want", [(b"0", ""), (b"5", "x,z"), (b"15", "x,y,z,😀"),
                                      (b"8", "😀")])
def test_set_from_its_mask(raw, want):
    c = col(T.SET, (T.SET, 1), collation=UTF8MB4, sets=["x", "y", "z", "😀"])
    assert same(convert(c, raw), want)
    assert same(convert(c, raw), binlog(c, bytes([int(raw)])))


def test_enum_and_set_without_members_are_numbers_like_the_binlog():
    assert same(convert(col(T.ENUM, (T.ENUM, 1)), b"2"), 2)
    assert same(convert(col(T.SET, (T.SET, 1)), b"6"), 6)


def test_geometry_is_srid_and_wkb():
    wkb = struct.pack("<BIdd", 1, 1, -1.5, 2.25)
    raw = struct.pack("<I", 4326) + wkb
    c = col(T.GEOMETRY, 4)
    assert same(convert(c, raw), Geometry(4326, wkb))
    assert same(convert(c, raw), binlog(c, len(raw).to_bytes(4, "little") + raw))


def test_vector_is_its_float32_values():
    raw = struct.pack("<3f", 0.1, -2.5, 3e38)
    c = col(T.VECTOR, 4)
    assert same(convert(c, raw), [_f32(0.1), -2.5, _f32(3e38)])
    assert same(convert(c, raw), binlog(c, len(raw).to_bytes(4, "little") + raw))


def test_mysql_json_document():
    c = col(T.JSON, 4)
    raw = b'{"a": [1, 2.5, "\\u00e9", null, true, false], "b": {"n": 18446744073709551615}}'
    assert convert(c, raw) == {"a": [1, 2.5, "é", None, True, False],
                               "b": {"n": 18446744073709551615}}
    assert list(convert(c, b'{"z": 1, "a": 2}')) == ["z", "a"]     # the server's key order
    assert same(convert(c, b"100000000000000000000"), 1e20)      # beyond uint64: a double
    assert same(convert(c, b'"x"'), "x")


# --- whole rows ---------------------------------------------------------------------------------

ORDERS = [col(T.LONG, name="id", nullable=False), col(T.VARCHAR, 400, name="customer",
                                                      collation=UTF8MB4),
          col(T.NEWDECIMAL, (12, 2), name="amount"), col(T.DATETIME2, 0, name="created"),
          col(T.ENUM, (T.ENUM, 1), name="status", collation=UTF8MB4,
              enum=["new", "paid", "shipped"]),
          col(T.TIMESTAMP2, 6, name="updated"), col(T.BLOB, 2, name="note", collation=UTF8MB4)]


def test_a_row_with_nulls_zero_dates_and_invalid_text():
    conv = row_converter(ORDERS)
    rows = [(b"1", "Zoë".encode(), b"12.50", b"2024-02-29 12:00:00", b"2",
             b"2024-06-01 00:00:00.000001", b"ok"),
            (b"2", None, None, None, None, None, None),
            (b"3", b"\xc3", b"-0.01", b"0000-00-00 00:00:00", b"0", b"0000-00-00 00:00:00.000000",
             b"\xff"),
            (None, b"", b"0.00", b"2024-00-10 10:00:00", b"3", b"1970-01-01 00:00:01.000000",
             b"")]                         # NULL in a NOT NULL column: converted, not an error
    got = list(map(conv, rows))
    utc = dt.timezone.utc
    want = [(1, "Zoë", Decimal("12.50"), dt.datetime(2024, 2, 29, 12), "paid",
             dt.datetime(2024, 6, 1, 0, 0, 0, 1, tzinfo=utc), "ok"),
            (2, None, None, None, None, None, None),
            (3, InvalidText(b"\xc3"), Decimal("-0.01"), InvalidTemporal("0000-00-00 00:00:00"), "",
             InvalidTemporal("0000-00-00 00:00:00.000000"), InvalidText(b"\xff")),
            (None, "", Decimal("0.00"), InvalidTemporal("2024-00-10 10:00:00"), "shipped",
             dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=utc), "")]
    for g, w in zip(got, want):
        assert len(g) == len(w) and all(same(a, b) for a, b in zip(g, w)), (g, w)
    names = [c.name for c in ORDERS]
    assert row_json(names, got[2]) == (
        '{"id": 3, "customer": {"$binary": "ww=="}, "amount": -0.01, "created": '
        '"0000-00-00 00:00:00", "status": "", "updated": "0000-00-00 00:00:00.000000", '
        '"note": {"$binary": "/w=="}}')


def test_converters_are_generated_once_per_shape():
    assert row_converter(ORDERS) is row_converter(list(ORDERS))
    assert "v1.decode()" in row_converter(ORDERS).source       # UTF-8 decoded inline
    assert row_converter([])(()) == ()


_KINDS = [
    (col(T.LONGLONG, unsigned=True), lambda r: str(r.randrange(1 << 64)).encode()),
    (col(T.SHORT, nullable=False), lambda r: str(r.randrange(-32768, 32768)).encode()),
    (col(T.FLOAT, 4), lambda r: repr(_f32(r.uniform(-1e6, 1e6))).encode()),
    (col(T.DOUBLE, 8), lambda r: repr(r.uniform(-1e300, 1e300)).encode()),
    (col(T.NEWDECIMAL, (20, 4)), lambda r: b"%d.%04d" % (r.randrange(-10 ** 15, 10 ** 15),
                                                         r.randrange(10000))),
    (col(T.BIT, (3, 1)), lambda r: bytes([r.randrange(8)])),
    (col(T.DATE), lambda r: b"%04d-%02d-%02d" % (r.randrange(10000), r.randrange(13),
                                                 r.randrange(32))),
    (col(T.DATETIME2, 3), lambda r: b"%04d-%02d-%02d 01:02:03.%03d" % (
        r.randrange(10000), r.randrange(13), r.randrange(32), r.randrange(1000))),
    (col(T.TIMESTAMP2, 0), lambda r: r.choice([b"0000-00-00 00:00:00", b"2001-02-03 04:05:06"])),
    (col(T.TIME2, 1), lambda r: b"-%d:59:59.%d" % (r.randrange(839), r.randrange(10))),
    (col(T.VARCHAR, 40, collation=UTF8MB4),
     lambda r: r.choice(["ok", "é😀", ""]).encode() + r.choice([b"", b"", b"\xc3"])),
    (col(T.VARCHAR, 40, collation=LATIN1), lambda r: bytes(r.randrange(256) for _ in range(3))),
    (col(T.STRING, (T.STRING, 4), collation=BINARY), lambda r: r.randbytes(4)),
    (col(T.ENUM, (T.ENUM, 1), enum=["a", "b"]), lambda r: str(r.randrange(4)).encode()),
    (col(T.SET, (T.SET, 1), sets=["a", "b", "c"]), lambda r: str(r.randrange(8)).encode()),
    (col(T.GEOMETRY, 4), lambda r: r.randbytes(4) + b"\x01\x01\x00\x00\x00" + r.randbytes(16)),
]


def test_generated_rows_equal_the_exact_converters_on_random_rows():
    rnd = random.Random(14)
    columns = [c for c, _ in _KINDS]
    conv = row_converter(columns)
    exact = [column_converter(c) for c in columns]
    for _ in range(2000):
        raw = tuple(None if rnd.random() < 0.1 else make(rnd) for _, make in _KINDS)
        got = conv(raw)
        want = tuple(None if v is None else f(v) for f, v in zip(exact, raw))
        assert all(same(a, b) for a, b in zip(got, want)), (raw, got, want)
    assert json.loads(row_json([f"c{i}" for i in range(len(columns))], got)) is not None
