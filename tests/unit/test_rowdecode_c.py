"""The compiled row decoder (cdc.rows._rowdecode) against the pure-Python one on the same bytes.

Synthetic table maps cover every natively decoded type (and some that go back to their Python
decoder) with edge values, random bytes, NULLs, partial images, updates and truncation at every
byte offset; values must be identical in type and repr (Decimal('0.00') is not Decimal('0')).
Skipped when the extension is not built, failed when CI is set.
"""

import gc
import os
import random
import struct
import subprocess
import sys
from decimal import Decimal

import pytest

from cdc.binlog.constants import ColumnType as T
from cdc.binlog.constants import EventType
from cdc.binlog.files import read_events
from cdc.binlog.parser import BinlogParser, iter_events
from cdc.binlog.tablemap import TableMap
from cdc.errors import ConfigurationError, TruncatedEventError
from cdc.rows import backend as B
from cdc.rows import decode as R
from cdc.rows.decode import ImageReader, decode_images
from cdc.values.decimal import DIG2BYTES, decimal_groups
from cdc.values.kinds import ABSENT
from cdc.values.types import ColumnDef, build_decoder, column_layout
from support.binlog_builder import (FDE_8020, binlog_file, event, lenenc, rows_v2_body,
                                    table_map_body)


@pytest.fixture(autouse=True, scope="module")
def _needs_c():
    if not B.c_decoder_available():
        msg = f"cdc.rows._rowdecode is not built ({B.C_MISSING})"
        if os.environ.get("CI"):
            pytest.fail(f"CI is set: {msg}", pytrace=False)
        pytest.skip(msg)
    previous = B.active_decoder()
    yield
    B.set_default_decoder(previous)


UTF8MB4, UTF8MB3, LATIN1, BINARY = 45, 33, 8, 63


# --- value encoders (raw bytes of one column value) ---------------------------------------------

def enc_decimal(text: str, precision: int, scale: int) -> bytes:
    neg = text.startswith("-")
    ip, _, fp = text.lstrip("-").partition(".")
    intg = precision - scale
    ip = ip.rjust(intg, "0")[-intg:] if intg else ""
    fp = fp.ljust(scale, "0")[:scale]
    out = bytearray()
    p = intg % 9
    if p:
        out += int(ip[:p]).to_bytes(DIG2BYTES[p], "big")
    for g in range(intg // 9):
        out += int(ip[p + 9 * g:p + 9 * g + 9]).to_bytes(4, "big")
    for g in range(scale // 9):
        out += int(fp[9 * g:9 * g + 9]).to_bytes(4, "big")
    if scale % 9:
        out += int(fp[scale - scale % 9:]).to_bytes(DIG2BYTES[scale % 9], "big")
    out[0] |= 0x80
    return bytes(b ^ 0xFF for b in out) if neg else bytes(out)


def _frac(us: int, fsp: int) -> bytes:
    nfrac = (fsp + 1) // 2
    if not nfrac:
        return b""
    return (us // {1: 10000, 2: 100, 3: 1}[nfrac]).to_bytes(nfrac, "big")


def enc_datetime2(y, mo, d, h, mi, s, us, fsp) -> bytes:
    packed = ((((y * 13 + mo) << 5) | d) << 17 | (h << 12) | (mi << 6) | s) + 0x8000000000
    return packed.to_bytes(5, "big") + _frac(us, fsp)


def enc_date(y, m, d) -> bytes:
    return ((y << 9) | (m << 5) | d).to_bytes(3, "little")


def col(index, type_code, meta=None, *, unsigned=False, collation=None, enum=None, sets=None):
    c = ColumnDef(index, type_code, meta, True)
    c.unsigned = unsigned
    c.collation = collation
    c.enum_values = enum
    c.set_values = sets
    c.name = f"c{index}"
    return c


def _rand(rng, n):
    return bytes(rng.randrange(256) for _ in range(n))


def _lp(raw: bytes, lb: int) -> bytes:
    return len(raw).to_bytes(lb, "little") + raw


# (type, meta, options, value generator rng -> raw bytes, native kind expected)
def _int_gen(size, edges):
    def gen(rng):
        if rng.random() < 0.3:
            return rng.choice(edges)
        return _rand(rng, size)
    return gen


def _ints():
    out = []
    for t, size, fmt in ((T.TINY, 1, "b"), (T.SHORT, 2, "h"), (T.INT24, 3, None),
                         (T.LONG, 4, "i"), (T.LONGLONG, 8, "q")):
        bits = size * 8
        edges = [(v % (1 << bits)).to_bytes(size, "little")
                 for v in (0, 1, -1, (1 << (bits - 1)) - 1, -(1 << (bits - 1)), 255, 256)]
        for unsigned in (False, True):
            out.append(((t, None), {"unsigned": unsigned}, _int_gen(size, edges)))
    return out


def _floats():
    f_edges = [struct.pack("<f", v) for v in (0.0, -0.0, 1.5, -3.4e38, float("inf"),
                                               float("nan"), 1e-45)]
    d_edges = [struct.pack("<d", v) for v in (0.0, -0.0, 0.1, 1.7976931348623157e308,
                                               float("-inf"), float("nan"), 5e-324)]
    return [((T.FLOAT, 4), {}, _int_gen(4, f_edges)), ((T.DOUBLE, 8), {}, _int_gen(8, d_edges))]


def _decimal_gen(p, s):
    size = sum(n for n, _ in decimal_groups(p, s))

    def gen(rng):
        r = rng.random()
        if r < 0.1:
            return _rand(rng, size)          # mostly out-of-range digit groups: Python decides
        if r < 0.2:
            return enc_decimal(rng.choice(["0", "-0"]), p, s)
        if r < 0.3:
            nines = "9" * (p - s) + "." + "9" * s
            return enc_decimal(rng.choice(["", "-"]) + nines, p, s)
        ip = "".join(rng.choice("0123456789") for _ in range(rng.randrange(p - s + 1)))
        fp = "".join(rng.choice("0123456789") for _ in range(s))
        return enc_decimal(rng.choice(["", "-"]) + (ip or "0") + "." + fp, p, s)
    return gen


def _decimals():
    return [((T.NEWDECIMAL, (p, s)), {}, _decimal_gen(p, s))
            for p, s in ((1, 0), (5, 0), (4, 4), (12, 2), (18, 9), (19, 0), (30, 10), (65, 30),
                         (65, 0), (65, 38), (10, 1), (9, 9), (27, 18))]


def _datetime_gen(fsp):
    def gen(rng):
        r = rng.random()
        if r < 0.15:
            return _rand(rng, 5 + (fsp + 1) // 2)
        if r < 0.25:
            return enc_datetime2(0, 0, 0, 0, 0, 0, 0, fsp)               # zero date
        if r < 0.35:
            return enc_datetime2(2024, 0, 10, 10, 0, 0, 500000 if fsp else 0, fsp)
        if r < 0.4:
            return rng.choice([enc_datetime2(2023, 2, 29, 0, 0, 0, 0, fsp),  # not a leap year
                               enc_datetime2(0, 1, 1, 0, 0, 0, 0, fsp),      # year 0
                               enc_datetime2(9999, 12, 31, 23, 59, 59, 999999, fsp),
                               enc_datetime2(2024, 1, 1, 24, 0, 0, 0, fsp),
                               enc_datetime2(2024, 1, 1, 0, 60, 0, 0, fsp),
                               enc_datetime2(2024, 1, 1, 0, 0, 60, 0, fsp)])
        us = rng.randrange(1000000)
        us -= us % (10 ** (6 - fsp))
        return enc_datetime2(rng.randrange(1000, 10000), rng.randrange(1, 13),
                             rng.randrange(1, 29), rng.randrange(24), rng.randrange(60),
                             rng.randrange(60), us, fsp)
    return gen


def _timestamp_gen(fsp):
    nfrac = (fsp + 1) // 2

    def gen(rng):
        r = rng.random()
        if r < 0.15:
            return bytes(4 + nfrac)                                       # zero timestamp
        if r < 0.4:
            return _rand(rng, 4 + nfrac)     # also fractions >= 10**6 (3 bytes): Python decides
        us = rng.randrange(1000000)
        us -= us % (10 ** (6 - fsp))
        return rng.randrange(1 << 32).to_bytes(4, "big") + _frac(us, fsp)
    return gen


def _date_gen(rng):
    r = rng.random()
    if r < 0.2:
        return _rand(rng, 3)
    if r < 0.3:
        return rng.choice([enc_date(0, 0, 0), enc_date(2024, 0, 1), enc_date(2024, 2, 30),
                           enc_date(2000, 2, 29), enc_date(9999, 12, 31), enc_date(1, 1, 1),
                           enc_date(0, 1, 1), enc_date(10000, 1, 1), enc_date(1900, 2, 29),
                           enc_date(2024, 4, 31), enc_date(2024, 13, 1)])
    return enc_date(rng.randrange(1, 10000), rng.randrange(1, 13), rng.randrange(1, 29))


def _time_gen(fsp):
    def gen(rng):
        return _rand(rng, 3 + (fsp + 1) // 2)
    return gen


def _text_gen(lb, maxlen, utf8=True):
    samples = ["", "a", "ééé😀", "x" * maxlen, "\u0000nul", "ÿ"]

    def gen(rng):
        r = rng.random()
        if r < 0.3:
            raw = rng.choice(samples).encode()[:maxlen]
        elif r < 0.5:
            raw = _rand(rng, rng.randrange(min(maxlen, 40) + 1))   # invalid UTF-8 too
        else:
            raw = "".join(chr(rng.randrange(32, 0x300)) for _ in range(
                rng.randrange(min(maxlen, 30) + 1))).encode()[:maxlen]
        return _lp(raw, lb)
    return gen


def _strings():
    out = []
    for coll in (UTF8MB4, UTF8MB3, BINARY, None, LATIN1):
        out.append(((T.VARCHAR, 40), {"collation": coll}, _text_gen(1, 40)))
        out.append(((T.VARCHAR, 300), {"collation": coll}, _text_gen(2, 300)))
        out.append(((T.STRING, (T.STRING, 32)), {"collation": coll}, _text_gen(1, 32)))
        out.append(((T.STRING, (T.STRING, 400)), {"collation": coll}, _text_gen(2, 400)))
    out.append(((T.STRING, (T.STRING, 4)), {"collation": BINARY}, _text_gen(1, 4)))  # BINARY(4)
    for lb, t in ((1, T.BLOB), (2, T.BLOB), (3, T.BLOB), (4, T.BLOB), (4, T.LONG_BLOB)):
        for coll in (UTF8MB4, BINARY):
            out.append(((t, lb), {"collation": coll}, _text_gen(lb, 255 if lb == 1 else 300)))
    return out


def _others():
    """Columns that keep their Python decoder (kind FALLBACK), between native ones."""
    return [
        ((T.STRING, (T.ENUM, 1)), {"enum": ["a", "b"]}, lambda rng: bytes((rng.randrange(4),))),
        ((T.STRING, (T.SET, 1)), {"sets": ["x", "y", "z"]}, lambda rng: bytes((rng.randrange(8),))),
        ((T.GEOMETRY, 4), {}, lambda rng: _lp(b"\xe6\x10\x00\x00" + _rand(rng, 21), 4)),
        # pre-5.6 formats of precision 0 (as in MySQL's table maps; MariaDB's of unknown
        # precision: tests/unit/test_old_temporal.py)
        ((T.TIMESTAMP, 0), {}, lambda rng: _rand(rng, 4)),
        ((T.TIME, 0), {}, lambda rng: _rand(rng, 3)),
        ((T.DATETIME, 0), {}, lambda rng: struct.pack("<Q", rng.choice(
            [0, 20240229235959, 20240230000000, rng.randrange(10 ** 14)]))),
        ((T.JSON, 4), {}, lambda rng: _lp(b"\x04" + bytes((rng.randrange(3),)), 4)),
        ((T.VECTOR, 4), {}, lambda rng: _lp(struct.pack("<2f", 1.5, -2.0), 4)),
    ]


def _zoo():
    specs = _ints() + _floats()
    specs.append(((T.YEAR, None), {}, lambda rng: _rand(rng, 1)))
    specs += _decimals()
    for fsp in range(7):
        specs.append(((T.DATETIME2, fsp), {}, _datetime_gen(fsp)))
        specs.append(((T.TIMESTAMP2, fsp), {}, _timestamp_gen(fsp)))
        specs.append(((T.TIME2, fsp), {}, _time_gen(fsp)))
    specs.append(((T.DATE, None), {}, _date_gen))
    for bits, nbytes in ((1, 0), (0, 8), (2, 1), (0, 1), (7, 7)):
        size = nbytes + (1 if bits else 0)
        specs.append(((T.BIT, (bits, nbytes)), {}, lambda rng, n=size: _rand(rng, n)))
    specs += _strings()
    specs += _others()
    return specs


ZOO = _zoo()


def make_table(specs):
    columns = [col(i, t, meta, **opts) for i, ((t, meta), opts, _gen) in enumerate(specs)]
    return TableMap(1, 0, "db", "zoo", columns, [0], True)


def make_image(rng, specs, present, null_rate=0.2, pad_bits=False):
    """NULL bitmap + values of the *present* columns."""
    nulls = bytearray((len(present) + 7) // 8)
    body = b""
    for k, i in enumerate(present):
        if rng.random() < null_rate:
            nulls[k >> 3] |= 1 << (k & 7)
        else:
            body += specs[i][2](rng)
    if pad_bits and len(present) & 7:
        nulls[-1] |= (0xFF << (len(present) & 7)) & 0xFF
    return bytes(nulls) + body


def typed(rows):
    def one(row):
        return [(type(v).__name__, repr(v)) for v in row]
    return [[one(r) for r in row] if isinstance(row[0], tuple) else one(row) for row in rows]


def decode(mode, tmap, kind, data, present1, present2=None, pos=0):
    return decode_images(tmap, kind, data, pos, present1, present2, decoder=mode)


def generic(tmap, kind, data, present1, present2=None):
    """Only the per-column decoders of the type table (no generated code, no C)."""
    def reader(present):
        r = ImageReader(tmap, present)
        r.fast = None
        return r.read
    read1 = reader(present1)
    read2 = reader(present2) if kind == "update" else None
    pos, rows = 0, []
    while pos < len(data):
        row, pos = read1(data, pos)
        if read2 is not None:
            after, pos = read2(data, pos)
            row = (row, after)
        rows.append(row)
    return rows


def outcome(fn):
    try:
        return typed(fn())
    except TruncatedEventError:
        return "truncated"


# --- tests -------------------------------------------------------------------------------------

def test_common_types_are_native_and_rare_ones_fall_back():
    tmap = make_table(ZOO)
    decode_images(tmap, "insert", make_image(random.Random(0), ZOO, tuple(range(len(ZOO)))), 0,
                  tuple(range(len(ZOO))), None, decoder="c")
    plan = tmap.row_plans.c_plans[tuple(range(len(ZOO)))]
    kinds = dict(zip(range(len(ZOO)), plan.kinds))
    from cdc.rows import _rowdecode as C
    names = {v: k for k, v in vars(C).items() if k.isupper()}
    # the plan is the type table's layout of each column, nothing else
    assert [names[k] for k in plan.kinds] == [column_layout(c).kind for c in tmap.columns]
    by_type = {}
    for i, c in enumerate(tmap.columns):
        by_type.setdefault((c.real_type, c.collation), set()).add(names[kinds[i]])
    for t in (T.TINY, T.SHORT, T.INT24, T.LONG, T.LONGLONG, T.FLOAT, T.DOUBLE, T.YEAR,
              T.NEWDECIMAL, T.DATETIME2, T.TIMESTAMP2, T.TIME2, T.DATE, T.BIT):
        assert "FALLBACK" not in by_type[(t, None)], t
    for coll in (UTF8MB4, UTF8MB3):
        assert by_type[(T.VARCHAR, coll)] == {"STR"} == by_type[(T.STRING, coll)]
    assert by_type[(T.BLOB, UTF8MB4)] == {"STR"} and by_type[(T.BLOB, BINARY)] == {"BYTES"}
    assert by_type[(T.VARCHAR, BINARY)] == {"BYTES"} == by_type[(T.STRING, BINARY)]
    assert by_type[(T.VARCHAR, None)] == {"BYTES"}
    for t in (T.ENUM, T.SET, T.GEOMETRY, T.JSON, T.VECTOR, T.TIMESTAMP, T.TIME, T.DATETIME):
        assert by_type[(t, None)] == {"FALLBACK"}, t
    assert by_type[(T.VARCHAR, LATIN1)] == {"FALLBACK"}


def test_layouts_agree_with_the_value_decoders():
    """The type table's binary layout of a column (what the generated readers and the compiled
    decoder read) takes exactly the bytes its value decoder takes."""
    rng = random.Random(4)
    for (t, meta), opts, gen in ZOO:
        c = col(0, t, meta, **opts)
        layout, dec = column_layout(c), build_decoder(c)
        for _ in range(20):
            raw = gen(rng)
            assert dec(raw, 0)[1] == len(raw), (t, meta)
            if layout.size:
                assert layout.size == len(raw), (t, meta)
            if layout.kind in ("STR", "BYTES"):
                assert int.from_bytes(raw[:layout.a], "little") == len(raw) - layout.a
            if layout.struct_code:
                assert struct.calcsize("<" + layout.struct_code) == layout.size


@pytest.mark.parametrize("seed", range(4))
def test_random_rows_equal_python(seed):
    rng = random.Random(seed)
    tmap = make_table(ZOO)
    full = tuple(range(len(ZOO)))
    data = b"".join(make_image(rng, ZOO, full, null_rate=0.0 if k % 3 == 0 else 0.2,
                               pad_bits=k % 2 == 1) for k in range(60))
    c_rows = decode("c", tmap, "insert", data, full)
    py_rows = decode("python", tmap, "insert", data, full)
    assert len(c_rows) == 60
    assert typed(c_rows) == typed(py_rows) == typed(generic(tmap, "insert", data, full))


def test_each_column_alone_equals_python():
    """One table per column type: its native code alone, many values, NULLs among them."""
    rng = random.Random(11)
    for spec in ZOO:
        tmap = make_table([spec])
        data = b"".join(make_image(rng, [spec], (0,), null_rate=0.1) for _ in range(300))
        c_rows = decode("c", tmap, "delete", data, (0,))
        assert typed(c_rows) == typed(decode("python", tmap, "delete", data, (0,))), spec[:2]


def test_edge_values():
    specs = [((T.LONGLONG, None), {"unsigned": True}, None),
             ((T.LONGLONG, None), {}, None),
             ((T.LONG, None), {"unsigned": True}, None),
             ((T.INT24, None), {}, None),
             ((T.NEWDECIMAL, (65, 30)), {}, None),
             ((T.NEWDECIMAL, (12, 2)), {}, None),
             ((T.NEWDECIMAL, (4, 4)), {}, None),
             ((T.DATETIME2, 0), {}, None),
             ((T.DATETIME2, 3), {}, None),
             ((T.DATETIME2, 6), {}, None),
             ((T.DATETIME2, 1), {}, None),
             ((T.TIMESTAMP2, 6), {}, None),
             ((T.DATE, None), {}, None),
             ((T.YEAR, None), {}, None),
             ((T.STRING, (T.STRING, 4)), {"collation": BINARY}, None),
             ((T.VARCHAR, 40), {"collation": UTF8MB4}, None)]
    tmap = make_table(specs)
    big = "9" * 35 + "." + "9" * 30
    image = (b"\x00\x00"
             + b"\xff" * 8 + struct.pack("<q", -2 ** 63) + b"\xff" * 4 + b"\x00\x00\x80"
             + enc_decimal("-" + big, 65, 30) + enc_decimal("-0.00", 12, 2)
             + enc_decimal("0.0001", 4, 4)
             + enc_datetime2(2024, 2, 29, 23, 59, 59, 0, 0)
             + enc_datetime2(1000, 1, 1, 0, 0, 0, 1000, 3)
             + enc_datetime2(0, 0, 0, 0, 0, 0, 0, 6)
             + enc_datetime2(2024, 1, 1, 0, 0, 0, 900000, 1)
             + (1).to_bytes(4, "big") + (1).to_bytes(3, "big")
             + enc_date(2024, 0, 10) + b"\x00" + b"\x01\x01" + _lp(b"\xff\xfe", 1))
    (row,) = decode("c", tmap, "insert", image, tuple(range(len(specs))))
    assert typed([row]) == typed(decode("python", tmap, "insert", image, tuple(range(len(specs)))))
    assert row[0] == 2 ** 64 - 1 and row[1] == -2 ** 63 and row[2] == 2 ** 32 - 1
    assert row[3] == -2 ** 23
    assert repr(row[4]) == f"Decimal('-{big}')"
    assert repr(row[5]) == "Decimal('-0.00')" and repr(row[6]) == "Decimal('0.0001')"
    assert row[7].isoformat() == "2024-02-29T23:59:59"
    assert row[8].microsecond == 1000 and row[9] == "0000-00-00 00:00:00.000000"
    assert row[10].microsecond == 900000
    assert row[11].isoformat() == "1970-01-01T00:00:01.000001+00:00"
    import datetime as dt
    assert row[11].tzinfo is dt.timezone.utc
    assert row[12] == "2024-00-10" and type(row[12]).__name__ == "InvalidTemporal"
    assert row[13] == 0 and row[14] == b"\x01\x00\x00\x00"
    # invalid UTF-8 in a utf8mb4 column: the stored bytes, as InvalidText (both decoders)
    assert row[15] == b"\xff\xfe" and type(row[15]).__name__ == "InvalidText"


def test_partial_images_and_updates():
    rng = random.Random(5)
    tmap = make_table(ZOO)
    n = len(ZOO)
    full = tuple(range(n))
    some = tuple(i for i in range(n) if i % 3)
    key = (0, 5, n - 1)
    # MINIMAL-like images: key columns before, changed columns after
    cases = [(some, some), (key, some), (full, key), (full, full)]
    for before, after in cases:
        data = b""
        for _ in range(25):
            b = make_image(rng, ZOO, before)
            # half the rows: the after image repeats the before image (values reused in C)
            data += b + (b if before == after and rng.random() < 0.5 else make_image(rng, ZOO, after))
        c_rows = decode("c", tmap, "update", data, before, after)
        assert typed(c_rows) == typed(decode("python", tmap, "update", data, before, after))
        assert typed(c_rows) == typed(generic(tmap, "update", data, before, after))
        assert all(len(r[0]) == n and len(r[1]) == n for r in c_rows)
        if before != full:
            assert any(v is ABSENT for v in c_rows[0][0])
    data = b"".join(make_image(rng, ZOO, some) for _ in range(20))
    assert typed(decode("c", tmap, "insert", data, some)) == typed(generic(tmap, "insert", data, some))


def test_repeated_costly_values_are_shared_and_equal():
    """A DECIMAL/temporal value with the bytes of the previous row's (the NOW() of a multi-row
    INSERT) is the previous row's object; values stay those of the Python path."""
    specs = [((T.LONG, None), {}, None), ((T.NEWDECIMAL, (12, 2)), {}, None),
             ((T.DATETIME2, 6), {}, None), ((T.DATE, None), {}, None)]
    tmap = make_table(specs)
    now = enc_datetime2(2024, 5, 1, 12, 0, 0, 123456, 6)
    images = [b"\x00" + struct.pack("<i", i) + enc_decimal(price, 12, 2) + now + enc_date(*d)
              for i, (price, d) in enumerate([("9.99", (2024, 5, 1)), ("9.99", (2024, 5, 1)),
                                              ("-9.99", (0, 0, 0)), ("-9.99", (0, 0, 0)),
                                              ("1.00", (2024, 5, 2))])]
    data = b"".join(images[:2]) + b"\x0e" + struct.pack("<i", 9) + b"".join(images[2:])
    rows = decode("c", tmap, "insert", data, (0, 1, 2, 3))
    assert typed(rows) == typed(decode("python", tmap, "insert", data, (0, 1, 2, 3)))
    assert rows[0][1] is rows[1][1] and rows[0][2] is rows[1][2] and rows[0][3] is rows[1][3]
    assert rows[2] == (9, None, None, None)          # a NULL row between: nothing to share
    assert rows[3][2] == rows[1][2] and rows[3][2] is not rows[1][2]
    assert rows[4][1] is rows[3][1] and rows[4][2] is rows[3][2] and rows[5][2] is rows[4][2]
    assert rows[4][3] == "0000-00-00" and rows[5][3].isoformat() == "2024-05-02"
    assert repr(rows[5][1]) == "Decimal('1.00')"


def test_truncated_images_raise_at_every_offset():
    rng = random.Random(3)
    specs = ZOO
    tmap = make_table(specs)
    full = tuple(range(len(specs)))
    rows = [make_image(rng, specs, full, null_rate=0.1) for _ in range(3)]
    data = b"".join(rows)
    boundaries = {sum(len(r) for r in rows[:k]) for k in range(4)}
    for cut in range(len(data)):
        short = data[:cut]
        c = outcome(lambda: decode("c", tmap, "insert", short, full))
        assert c == outcome(lambda: decode("python", tmap, "insert", short, full)), cut
        assert (c == "truncated") == (cut not in boundaries), cut
    # partial images and updates: both decoders raise TruncatedEventError at every cut that is
    # not a row boundary (the generic Python path once returned a short last value instead)
    some = full[::2]
    pairs = [make_image(rng, specs, some) + make_image(rng, specs, full) for _ in range(2)]
    data = b"".join(pairs)
    boundaries = {0, len(pairs[0]), len(data)}
    for cut in range(len(data)):
        short = data[:cut]
        c = outcome(lambda: decode("c", tmap, "update", short, some, full))
        assert c == outcome(lambda: decode("python", tmap, "update", short, some, full)), cut
        assert (c == "truncated") == (cut not in boundaries), cut


@pytest.mark.parametrize("mode", ["c", "python"])
def test_short_last_value_of_a_partial_image_raises(mode):
    """A MEDIUMINT read by slicing: a short slice must not become a smaller number."""
    tmap = make_table([((T.LONG, None), {}, None), ((T.INT24, None), {}, None),
                       ((T.LONG, None), {}, None)])
    image = b"\x00" + (7).to_bytes(4, "little") + (5).to_bytes(3, "little")   # columns 0, 1
    assert decode(mode, tmap, "insert", image, (0, 1)) == [(7, 5, ABSENT)]
    with pytest.raises(TruncatedEventError):
        decode(mode, tmap, "insert", image[:-1], (0, 1))


@pytest.mark.parametrize("mode", ["c", "python"])
def test_an_image_of_no_columns_raises_instead_of_looping(mode):
    tmap = make_table(ZOO[:1])
    with pytest.raises(TruncatedEventError, match="no columns|malformed|past the end"):
        decode(mode, tmap, "insert", b"\x01\x02", ())


def test_malformed_lengths_do_not_read_past_the_end():
    tmap = make_table([((T.BLOB, 4), {"collation": UTF8MB4}, None)])
    for length in (5, 2 ** 31, 2 ** 32 - 1):
        data = b"\x00" + length.to_bytes(4, "little") + b"abcd"
        with pytest.raises(TruncatedEventError):
            decode("c", tmap, "insert", data, (0,))


def test_other_buffers_and_start_position():
    rng = random.Random(8)
    tmap = make_table(ZOO)
    full = tuple(range(len(ZOO)))
    data = b"junk" + b"".join(make_image(rng, ZOO, full) for _ in range(5))
    expected = typed(decode("python", tmap, "insert", data, full, pos=4))
    plan = tmap.row_plans.c_plan(full)
    from cdc.rows import _rowdecode as C
    for buf in (data, bytearray(data), memoryview(data)):
        assert typed(C.decode_rows(buf, 4, plan)) == expected
    with pytest.raises(ValueError):
        C.decode_rows(data, len(data) + 1, plan)


def test_rows_without_containers_are_not_gc_tracked():
    specs = [((T.LONG, None), {}, None), ((T.VECTOR, 4), {}, None)]
    tmap = make_table(specs)
    data = (b"\x02" + b"\x01\x00\x00\x00"
            + b"\x00" + b"\x02\x00\x00\x00" + _lp(struct.pack("<2f", 1.5, -2.0), 4))
    (no_list, with_list), = [decode("c", tmap, "insert", data, (0, 1))]
    assert with_list[1] == [1.5, -2.0] and no_list[1] is None
    assert not gc.is_tracked(no_list)
    assert gc.is_tracked(with_list)      # holds a list: the collector must see it
    assert typed([no_list, with_list]) == typed(decode("python", tmap, "insert", data, (0, 1)))


def test_each_decoder_has_its_own_plans():
    rng = random.Random(1)
    tmap = make_table(ZOO[:10])
    full = tuple(range(10))
    data = make_image(rng, ZOO, full)
    decode("python", tmap, "insert", data, full)
    assert full not in tmap.row_plans.c_plans
    decode("c", tmap, "insert", data, full)
    assert full in tmap.row_plans.c_plans
    assert {key[0] for key in tmap.row_plans.readers} == {False, True}   # compiled or not


def test_the_default_decoder_is_what_none_means():
    rng = random.Random(2)
    tmap = make_table(ZOO[:10])
    full = tuple(range(10))
    data = make_image(rng, ZOO, full)
    try:
        assert B.set_default_decoder("python") == "python" and R.active_decoder() == "python"
        decode_images(tmap, "insert", data, 0, full, None)
        assert full not in tmap.row_plans.c_plans
        assert B.set_default_decoder("auto") == "c" and R.active_decoder() == "c"
        decode_images(tmap, "insert", data, 0, full, None)
        assert full in tmap.row_plans.c_plans
        with pytest.raises(ConfigurationError, match="expected auto, c or python"):
            B.set_default_decoder("fast")
        with pytest.raises(ConfigurationError, match="expected auto, c or python"):
            decode_images(tmap, "insert", data, 0, full, None, decoder="fast")
    finally:
        B.set_default_decoder("auto")


def test_the_parser_carries_its_row_decoder(tmp_path):
    assert BinlogParser().ctx.row_decoder is None
    assert BinlogParser(row_decoder="python").ctx.row_decoder == "python"
    assert BinlogParser(row_decoder="AUTO").ctx.row_decoder == "c"
    with pytest.raises(ConfigurationError, match="expected auto, c or python"):
        BinlogParser(row_decoder="fast")
    # the choice reaches the rows events, whatever the process default
    tmap = table_map_body(5, "db", "t", bytes([T.LONG, T.VARCHAR]), struct.pack("<H", 80),
                          b"\x03", optional=b"\x02" + lenenc(1) + lenenc(45))
    rows = b"".join(b"\x00" + struct.pack("<i", k) + b"\x02ab" for k in range(3))
    data = binlog_file([FDE_8020, event(EventType.TABLE_MAP, tmap),
                        event(EventType.WRITE_ROWS, rows_v2_body(5, 2, rows))])
    (tmp_path / "binlog.000001").write_bytes(data)
    with pytest.raises(ConfigurationError, match="expected auto, c or python"):
        read_events([tmp_path / "binlog.000001"], row_decoder="fast")
    try:
        for default in ("c", "python"):
            B.set_default_decoder(default)
            for chosen, compiled in ((None, default == "c"), ("c", True), ("python", False)):
                for events in (iter_events(data, row_decoder=chosen),
                               read_events([tmp_path / "binlog.000001"], row_decoder=chosen)):
                    (ev,) = [e for e in events if e.type_name == "WRITE_ROWS"]
                    assert ev.row_decoder == chosen
                    assert ev.decode_rows() == [(0, "ab"), (1, "ab"), (2, "ab")]
                    assert [key[0] for key in ev.table.row_plans.readers] == [compiled]
    finally:
        B.set_default_decoder("auto")


def test_bad_plans_are_rejected():
    from cdc.rows import _rowdecode as C
    dec = lambda buf, pos: (None, pos)  # noqa: E731
    with pytest.raises(ValueError):
        C.Plan(2, [(1, C.I8, 0, 0, dec), (0, C.I8, 0, 0, dec)], ABSENT)
    with pytest.raises(ValueError):
        C.Plan(1, [(1, C.I8, 0, 0, dec)], ABSENT)
    with pytest.raises(ValueError):
        C.Plan(1, [(0, 999, 0, 0, dec)], ABSENT)
    with pytest.raises(ValueError):
        C.Plan(1, [(0, C.STR, 5, 0, dec)], ABSENT)
    with pytest.raises(TypeError):
        C.Plan(1, [(0, C.I8, 0, 0, None)], ABSENT)
    # a decoder going nowhere: an empty image is an error, not an endless loop
    with pytest.raises(ValueError):
        C.decode_rows(b"\x00", 0, C.Plan(0, [], ABSENT))


def _env_run(value, code="import cdc.rows.decode as r; print(r.active_decoder())", block_c=False):
    env = dict(os.environ, BINLOG_CDC_DECODER=value)
    if block_c:
        code = "import sys; sys.modules['cdc.rows._rowdecode'] = None; " + code
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)


def test_environment_variable_selects_the_decoder():
    assert _env_run("python").stdout.strip() == "python"
    assert _env_run("c").stdout.strip() == "c"
    assert _env_run("auto").stdout.strip() == "c"
    assert _env_run("auto", block_c=True).stdout.strip() == "python"
    r = _env_run("c", block_c=True)
    assert r.returncode != 0 and "BINLOG_CDC_DECODER=c but the compiled row decoder" in r.stderr
    r = _env_run("bogus")
    assert r.returncode != 0 and "expected auto, c or python" in r.stderr


def test_decimal_text_of_the_python_decoder_is_what_c_builds():
    """Sanity of the test's own encoder: the Python decoder reads back what it wrote."""
    from cdc.values.decimal import read_newdecimal
    for text, p, s in (("-12.34", 12, 2), ("0.5", 4, 4), ("123456789012345678901", 30, 0)):
        assert read_newdecimal(enc_decimal(text, p, s), 0, p, s)[0] == Decimal(text)
