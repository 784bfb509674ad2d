"""MySQL binary JSON: decoding, MySQL-style text, partial-update diffs (cdc.values.jsonb).

The module carries a small binary-JSON *encoder* written from the format description in
MySQL's ``sql-common/json_binary.h`` / ``json_binary.cc`` (``serialize_json_value``: small
format first, large only when an offset or size overflows 16 bits, keys sorted by length then
bytes, literals / [u]int16 -- and in the large format [u]int32 -- inlined in value entries).
Decoding is checked against it, against hand-built byte vectors and against
python-mysql-replication's reader on the documents it handles.
"""

from __future__ import annotations

import copy
import datetime as dt
import json
import random
import re
import struct
import time
from decimal import Decimal, localcontext

import pytest

from cdc.errors import ParseError
from cdc.values.kinds import JSON_NULL
from cdc.values.jsonb import (INSERT, MAX_DEPTH, REMOVE, REPLACE, JsonBinaryError, JsonDiff,
                       JsonDiffError, JsonOpaque, apply_json_diffs, decode_json, format_double,
                       json_to_text, parse_json_path, read_json_diffs, to_jsonable)

try:
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st
except ImportError:  # pragma: no cover
    st = None


# --- a binary JSON encoder, from the spec ------------------------------------------------------


class U(int):
    """An int to be stored with an unsigned type (Json_uint), like CAST(unsigned AS JSON)."""


class TS(dt.datetime):
    """A datetime stored as opaque TIMESTAMP (type 7) instead of DATETIME (12)."""


class Opaque:
    def __init__(self, field_type: int, data: bytes):
        self.field_type = field_type
        self.data = data


class DecimalP:
    """A Decimal stored with an explicit DECIMAL(precision, scale)."""

    def __init__(self, value: str, precision: int, scale: int):
        self.value = Decimal(value)
        self.precision = precision
        self.scale = scale


class TooBig(Exception):
    pass


def varlen(n: int) -> bytes:
    """append_variable_length(): 7 bits a byte, low bits first, high bit = more follow."""
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)


def decimal_bin(value: Decimal, precision: int, scale: int) -> bytes:
    """decimal2bin(): int part in 9-digit groups (partial group first), then the fraction."""
    with localcontext() as ctx:
        ctx.prec = 200
        q = abs(value).quantize(Decimal(1).scaleb(-scale))
    ip, _, fp = format(q, "f").partition(".")
    intg = precision - scale
    ip = ip.lstrip("0")
    assert len(ip) <= intg
    ip = ip.zfill(intg) if intg else ""
    fp = fp.ljust(scale, "0")
    out = bytearray()
    lead = intg % 9
    if lead:
        out += int(ip[:lead]).to_bytes(DIG2BYTES[lead], "big")
    for i in range(lead, intg, 9):
        out += int(ip[i:i + 9]).to_bytes(4, "big")
    for i in range(0, scale - scale % 9, 9):
        out += int(fp[i:i + 9]).to_bytes(4, "big")
    if scale % 9:
        out += int(fp[scale - scale % 9:]).to_bytes(DIG2BYTES[scale % 9], "big")
    out[0] ^= 0x80
    if value < 0:
        out = bytearray(b ^ 0xFF for b in out)
    return bytes(out)


def pack_datetime(y, mo, d, h=0, mi=0, s=0, us=0) -> int:
    """TIME_to_longlong_datetime_packed()."""
    ymd = ((y * 13 + mo) << 5) | d
    hms = (h << 12) | (mi << 6) | s
    return (((ymd << 17) | hms) << 24) + us


def pack_time(td: dt.timedelta) -> int:
    """TIME_to_longlong_time_packed() (hours = days*24 + hours)."""
    neg = td < dt.timedelta(0)
    if neg:
        td = -td
    secs = td.days * 86400 + td.seconds
    h, rem = divmod(secs, 3600)
    mi, s = divmod(rem, 60)
    packed = (((h << 12) | (mi << 6) | s) << 24) + td.microseconds
    return -packed if neg else packed


def opaque(field_type: int, data: bytes) -> tuple[int, bytes]:
    return 0x0F, bytes([field_type]) + varlen(len(data)) + data


def mysql_key(k: str):
    b = k.encode()
    return len(b), b


def int_type(v: int) -> tuple[int, bytes]:
    if isinstance(v, U):
        if v < 1 << 16:
            return 0x06, struct.pack("<H", v)
        if v < 1 << 32:
            return 0x08, struct.pack("<I", v)
        return 0x0A, struct.pack("<Q", v)
    if -(1 << 15) <= v < 1 << 15:
        return 0x05, struct.pack("<h", v)
    if -(1 << 31) <= v < 1 << 31:
        return 0x07, struct.pack("<i", v)
    if -(1 << 63) <= v < 1 << 63:
        return 0x09, struct.pack("<q", v)
    return 0x0A, struct.pack("<Q", v)


def enc_scalar(v) -> tuple[int, bytes]:
    if v is None:
        return 0x04, b"\x00"
    if v is True:
        return 0x04, b"\x01"
    if v is False:
        return 0x04, b"\x02"
    if isinstance(v, int):
        return int_type(v)
    if isinstance(v, float):
        return 0x0B, struct.pack("<d", v)
    if isinstance(v, str):
        b = v.encode("utf-8")
        return 0x0C, varlen(len(b)) + b
    if isinstance(v, DecimalP):
        return opaque(246, bytes([v.precision, v.scale])
                      + decimal_bin(v.value, v.precision, v.scale))
    if isinstance(v, Decimal):
        sign, digits, exp = v.as_tuple()
        scale = max(0, -exp)
        precision = max(len(digits) + max(exp, 0), scale, 1)
        return enc_scalar(DecimalP(str(v), precision, scale))
    if isinstance(v, TS):
        return opaque(7, struct.pack("<q", pack_datetime(v.year, v.month, v.day, v.hour,
                                                         v.minute, v.second, v.microsecond)))
    if isinstance(v, dt.datetime):
        return opaque(12, struct.pack("<q", pack_datetime(v.year, v.month, v.day, v.hour,
                                                          v.minute, v.second, v.microsecond)))
    if isinstance(v, dt.date):
        return opaque(10, struct.pack("<q", pack_datetime(v.year, v.month, v.day)))
    if isinstance(v, dt.timedelta):
        return opaque(11, struct.pack("<q", pack_time(v)))
    if isinstance(v, Opaque):
        return opaque(v.field_type, v.data)
    if isinstance(v, JsonOpaque):
        return opaque(v.field_type, bytes(v))
    raise TypeError(type(v))


def inline(v, large: bool):
    """attempt_inline_value(): (type, int32 value) or None."""
    if v is None or v is True or v is False:
        return 0x04, {None: 0, True: 1, False: 2}[v]
    if isinstance(v, int) and not isinstance(v, bool):
        t, _ = int_type(v)
        if t in (0x05, 0x06) or (large and t in (0x07, 0x08)):
            return t, v
    return None


def enc_container(v, large: bool) -> bytes:
    """serialize_json_object / serialize_json_array (bytes after the type byte)."""
    off = 4 if large else 2
    lim = 0xFFFFFFFF if large else 0xFFFF
    is_obj = isinstance(v, dict)
    items = sorted(v.items(), key=lambda kv: mysql_key(kv[0])) if is_obj else list(v)
    n = len(items)
    if n > lim:
        raise TooBig
    ksz = (off + 2) if is_obj else 0
    vsz = 1 + off
    header = 2 * off + n * (ksz + vsz)
    buf = bytearray(header)
    fmt = "<I" if large else "<H"
    struct.pack_into(fmt, buf, 0, n)
    key_bytes = [k.encode() for k, _ in items] if is_obj else []
    pos = header
    for i, kb in enumerate(key_bytes):
        if pos > lim:
            raise TooBig
        struct.pack_into(fmt + "H", buf, 2 * off + i * ksz, pos, len(kb))
        pos += len(kb)
    buf += b"".join(key_bytes)
    values = [x for _, x in items] if is_obj else items
    for i, x in enumerate(values):
        entry = 2 * off + n * ksz + i * vsz
        il = inline(x, large)
        if il is not None:
            t, val = il
            buf[entry] = t
            struct.pack_into("<I" if large else "<H", buf, entry + 1,
                             val & (0xFFFFFFFF if large else 0xFFFF))
            continue
        if len(buf) > lim:
            raise TooBig
        t, body = enc_value(x, small_parent=not large)
        buf[entry] = t
        struct.pack_into(fmt, buf, entry + 1, len(buf))
        buf += body
    if len(buf) > lim:
        raise TooBig
    struct.pack_into(fmt, buf, off, len(buf))
    return bytes(buf)


def enc_value(v, small_parent: bool = False) -> tuple[int, bytes]:
    if isinstance(v, (dict, list)):
        small_t, large_t = (0x00, 0x01) if isinstance(v, dict) else (0x02, 0x03)
        try:
            return small_t, enc_container(v, large=False)
        except TooBig:
            if small_parent:
                raise
            return large_t, enc_container(v, large=True)
    return enc_scalar(v)


def encode(v) -> bytes:
    t, body = enc_value(v)
    return bytes([t]) + body


def normalized(v):
    """Plain comparison form: JSON containers, with U/TS/etc. turned into their base types."""
    if isinstance(v, dict):
        return {k: normalized(x) for k, x in v.items()}
    if isinstance(v, list):
        return [normalized(x) for x in v]
    if isinstance(v, U):
        return int(v)
    if isinstance(v, TS):
        return dt.datetime(v.year, v.month, v.day, v.hour, v.minute, v.second, v.microsecond)
    if isinstance(v, DecimalP):
        return v.value
    if isinstance(v, Opaque):
        return JsonOpaque(v.data, v.field_type)
    return v


def document(v):
    """*v* as a whole document decodes: the null literal is JSON_NULL (inside: None)."""
    v = normalized(v)
    return JSON_NULL if v is None else v


def mysql_ordered(v):
    """A document with its objects' keys in MySQL's stored order (as decoding returns them)."""
    if isinstance(v, dict):
        return {k: mysql_ordered(v[k]) for k in sorted(v, key=mysql_key)}
    if isinstance(v, list):
        return [mysql_ordered(x) for x in v]
    return v


# --- hand-built vectors -------------------------------------------------------------------------


def test_small_object_vector_byte_by_byte():
    # {"a": 1} in the small format:
    #   00          type: small object
    #   01 00       element count 1 (uint16)
    #   0c 00       size 12: count(2) + size(2) + key entry(4) + value entry(3) + key "a"(1)
    #   0b 00 01 00 key entry: key at offset 11 (right after the header), key length 1
    #   05 01 00    value entry: type int16, inlined value 1
    #   61          the key "a"
    doc = bytes.fromhex("00 0100 0c00 0b00 0100 05 0100 61")
    assert decode_json(doc) == {"a": 1}
    assert encode({"a": 1}) == doc


def test_small_array_with_inline_and_offset_values():
    # ["x", -2, true, 70000]:
    #   02                   small array
    #   04 00  16 00         4 elements, size 22 (4 + 4*3 entries + 2 + 4)
    #   0c 10 00             string at offset 16
    #   05 fe ff             int16 -2, inlined
    #   04 01 00             literal true, inlined
    #   07 12 00             int32 at offset 18 (not inlined in the small format)
    #   01 78                offset 16: string length 1, "x"
    #   70 11 01 00          offset 18: int32 70000
    doc = bytes.fromhex("02 0400 1600 0c1000 05feff 040100 071200 0178 70110100")
    assert decode_json(doc) == ["x", -2, True, 70000]
    assert encode(["x", -2, True, 70000]) == doc


def test_large_format_inlines_int32_and_sign_extends_int16():
    # A large array [-2, 70000, 4000000000 (uint32), null]: every entry is 1 + 4 bytes.
    body = struct.pack("<II", 4, 8 + 4 * 5)
    body += bytes([0x05]) + struct.pack("<i", -2)          # int16 -2 stored as int32 -2
    body += bytes([0x07]) + struct.pack("<i", 70000)
    body += bytes([0x08]) + struct.pack("<I", 4000000000)
    body += bytes([0x04]) + struct.pack("<I", 0)
    assert decode_json(b"\x03" + body) == [-2, 70000, 4000000000, None]


def test_top_level_scalars():
    assert decode_json(b"") is JSON_NULL                # empty: JSON null, as MySQL reads it
    assert decode_json(b"\x04\x00") is JSON_NULL         # the null document is not SQL NULL
    assert decode_json(b"\x04\x01") is True
    assert decode_json(b"\x04\x02") is False
    assert decode_json(b"\x05\xff\xff") == -1
    assert decode_json(b"\x06\xff\xff") == 65535
    assert decode_json(b"\x07" + struct.pack("<i", -(2 ** 31))) == -(2 ** 31)
    assert decode_json(b"\x08" + struct.pack("<I", 2 ** 32 - 1)) == 2 ** 32 - 1
    assert decode_json(b"\x09" + struct.pack("<q", -(2 ** 63))) == -(2 ** 63)
    assert decode_json(b"\x0a" + struct.pack("<Q", 2 ** 64 - 1)) == 2 ** 64 - 1
    assert decode_json(b"\x0b" + struct.pack("<d", 1.5)) == 1.5
    assert decode_json(b"\x0c\x03abc") == "abc"
    assert decode_json(b"\x0c\x00") == ""
    # bytearray and memoryview inputs, trailing bytes ignored (MySQL does the same)
    assert decode_json(bytearray(b"\x0c\x03abcXYZ")) == "abc"
    assert decode_json(memoryview(b"\x00\x0c\x02abc")[1:5]) == "ab"


def test_string_lengths_use_variable_length_encoding():
    s = "é" * 100                                       # 200 bytes: 2-byte length c8 01
    assert encode(s)[:3] == bytes([0x0C, 0xC8, 0x01])
    assert decode_json(encode(s)) == s
    long = "x" * 20000                                  # 3-byte length
    assert encode(long)[1:4] == varlen(20000) and len(varlen(20000)) == 3
    assert decode_json(encode(long)) == long
    emoji = "😀 \U0010ffff \x00 \u2028"                   # 4-byte UTF-8, NUL
    assert decode_json(encode(emoji)) == emoji
    # a redundant (non-minimal) length encoding still decodes: 0x83 0x00 = 3
    assert decode_json(b"\x0c\x83\x00abc") == "abc"


def test_object_keys_keep_stored_order():
    doc = {"bb": 1, "a": 2, "ccc": 3, "b": 4, "é": 5}
    got = decode_json(encode(doc))
    assert got == doc
    assert list(got) == ["a", "b", "bb", "é", "ccc"]      # by byte length, then bytes


def test_values_found_through_offsets_not_position():
    # Values stored in reverse order with a gap between them (as in-place partial updates
    # leave free space): only offsets matter.
    #   02 0200 size  | 0c off1 | 0c off2 | pad | "y" | "x"
    header = 4 + 2 * 3
    body = bytearray(struct.pack("<HH", 2, 0))
    body += bytes([0x0C]) + struct.pack("<H", header + 3 + 2)   # first element: "x", later
    body += bytes([0x0C]) + struct.pack("<H", header + 3)       # second element: "y"
    body += b"\xee\xee\xee"                                      # free space
    body += b"\x01y\x01x"
    struct.pack_into("<H", body, 2, len(body))
    assert decode_json(b"\x02" + bytes(body)) == ["x", "y"]


def test_large_document_over_64k():
    doc = {"big": "x" * 70000, "n": [1, 2, 3], "m": {"k": list(range(100))}}
    raw = encode(doc)
    assert raw[0] == 0x01                               # large object
    # keys stored "m", "n", "big"; value entries after count(4) size(4) 3 key entries(6):
    # the nested containers stay small (0x00, 0x02) inside the large parent
    entries = 1 + 8 + 3 * 6
    assert [raw[entries + 5 * i] for i in range(3)] == [0x00, 0x02, 0x0C]
    got = decode_json(raw)
    assert got == doc
    arr = list(range(-100000, 100000, 7))               # int32 values are inlined when large
    raw = encode(arr)
    assert raw[0] == 0x03
    assert decode_json(raw) == arr
    # many keys: large object with many key entries
    obj = {f"k{i}": f"v{i}" * 3 for i in range(8000)}
    raw = encode(obj)
    assert raw[0] == 0x01 and decode_json(raw) == obj


# --- opaque values --------------------------------------------------------------------------


def test_opaque_decimal():
    # DECIMAL(3,2) 1.50: 0f f6 | length 4 | precision 3, scale 2 | 81 32
    #   binary decimal: 1 integer digit -> 1 byte (01), 2 fraction digits -> 1 byte (50=0x32),
    #   sign bit flipped on for a positive value: 81 32
    doc = bytes.fromhex("0f f6 04 03 02 81 32")
    value = decode_json(doc)
    assert type(value) is Decimal and str(value) == "1.50"
    assert json_to_text(value) == "1.50"
    # negative: every byte inverted, then the sign bit flipped: 7e cd
    assert str(decode_json(bytes.fromhex("0f f6 04 03 02 7e cd"))) == "-1.50"
    for text, p, s in [("0", 1, 0), ("-0.001", 4, 3), ("123456789012345678.123456789", 30, 9),
                       ("9" * 35 + "." + "9" * 30, 65, 30), ("-1234567890.0000000001", 20, 10),
                       ("0.5", 1, 1), ("7.000", 10, 3), ("-98765432109876543210", 20, 0)]:
        got = decode_json(encode(DecimalP(text, p, s)))
        assert got == Decimal(text)
        assert json_to_text(got) == text              # every stored digit, as MySQL prints
    assert decode_json(encode({"price": Decimal("10.25")})) == {"price": Decimal("10.25")}
    # size mismatch between precision/scale and data: malformed
    with pytest.raises(JsonBinaryError):
        decode_json(bytes.fromhex("0f f6 05 03 02 81 32 00"))
    with pytest.raises(JsonBinaryError):
        decode_json(bytes.fromhex("0f f6 04 02 03 81 32"))   # scale > precision


def test_opaque_date_datetime_timestamp():
    # DATE 2024-01-02: packed = ((2024*13+1) << 5 | 2) << 17 << 24, int64 little-endian
    packed = ((2024 * 13 + 1) << 5 | 2) << 41
    #   = 0x19b2440000000000; stored little-endian after 0f (opaque) 0a (DATE) 08 (length)
    doc = bytes.fromhex("0f 0a 08 000000000044b219")
    assert struct.unpack("<q", doc[3:])[0] == packed
    assert decode_json(doc) == dt.date(2024, 1, 2)
    assert json_to_text(decode_json(doc)) == '"2024-01-02"'
    # DATETIME 2024-01-02 12:34:56.000007
    v = dt.datetime(2024, 1, 2, 12, 34, 56, 7)
    got = decode_json(encode(v))
    assert got == v and type(got) is dt.datetime
    assert json_to_text(got) == '"2024-01-02 12:34:56.000007"'
    assert json_to_text(dt.datetime(2024, 1, 2, 12, 34, 56)) == '"2024-01-02 12:34:56.000000"'
    # TIMESTAMP (type 7) uses the datetime packing too
    ts = TS(1999, 12, 31, 23, 59, 59, 999999)
    raw = encode(ts)
    assert raw[1] == 7
    assert decode_json(raw) == dt.datetime(1999, 12, 31, 23, 59, 59, 999999)
    # zero / invalid dates: MySQL's text as InvalidTemporal
    zero = decode_json(bytes([0x0F, 10, 8]) + struct.pack("<q", 0))
    assert zero == "0000-00-00" and isinstance(zero, str)
    assert json_to_text(zero) == '"0000-00-00"'
    bad = decode_json(bytes([0x0F, 12, 8]) + struct.pack("<q", pack_datetime(2024, 2, 30, 1)))
    assert bad == "2024-02-30 01:00:00.000000"
    # not 8 bytes: malformed
    with pytest.raises(JsonBinaryError):
        decode_json(bytes([0x0F, 12, 4, 0, 0, 0, 0]))


def test_opaque_time_positive_negative_and_long():
    for td, text in [
        (dt.timedelta(hours=12, minutes=34, seconds=56, microseconds=123456), "12:34:56.123456"),
        (dt.timedelta(0), "00:00:00.000000"),
        (-dt.timedelta(hours=12, minutes=34, seconds=56, microseconds=500000),
         "-12:34:56.500000"),
        (dt.timedelta(hours=838, minutes=59, seconds=59), "838:59:59.000000"),
        (-dt.timedelta(hours=838, minutes=59, seconds=59), "-838:59:59.000000"),
        (-dt.timedelta(microseconds=1), "-00:00:00.000001"),
        (dt.timedelta(days=1, hours=1), "25:00:00.000000"),
    ]:
        raw = encode(td)
        assert raw[:3] == bytes([0x0F, 11, 8])
        got = decode_json(raw)
        assert got == td and type(got) is dt.timedelta
        assert json_to_text(got) == f'"{text}"'
    # hand-checked bytes: -00:00:01.000000 -> packed -(1 << 24) = 0xffffffffff000000
    assert decode_json(bytes.fromhex("0f0b08 000000ffffffffff")) == -dt.timedelta(seconds=1)


def test_other_opaque_types():
    blob = bytes(range(256)) * 2
    got = decode_json(encode(Opaque(252, blob)))
    assert isinstance(got, JsonOpaque) and got == blob and got.field_type == 252
    import base64
    b64 = base64.b64encode(blob).decode()
    lines = "\\n".join(b64[i:i + 76] for i in range(0, len(b64), 76))
    assert json_to_text(got) == '"base64:type252:' + lines + '"'
    assert json_to_text(decode_json(encode(Opaque(15, b"\xca\xfe")))) == '"base64:type15:yv4="'
    assert json_to_text(decode_json(encode(Opaque(16, b"")))) == '"base64:type16:"'
    # VAR_STRING opaque values print as plain strings (wrapper_to_string)
    assert json_to_text(decode_json(encode(Opaque(253, "héllo".encode())))) == '"héllo"'
    assert to_jsonable(decode_json(encode(Opaque(253, b"abc")))) == "abc"
    assert to_jsonable(got) == "base64:type252:" + lines.replace("\\n", "\n")  # MySQL's text
    import pickle
    again = pickle.loads(pickle.dumps(got))
    assert again == got and again.field_type == 252


# --- round trips --------------------------------------------------------------------------------


SAMPLE_DOCS = [
    {},
    [],
    {"a": 1, "b": [True, None, "x"]},
    [[[[[]]]]],
    {"": "", " ": [{}], "nested": {"deeper": {"deepest": [1.5, -0.0, 1e300, 5e-324]}}},
    [0, -1, 32767, -32768, 32768, -32769, 2 ** 31 - 1, -(2 ** 31), 2 ** 31, 2 ** 63 - 1,
     -(2 ** 63), 2 ** 63, 2 ** 64 - 1, U(0), U(65535), U(65536), U(2 ** 32), U(2 ** 64 - 1)],
    {"unicode 😀": "𝄞 music", "ключ": "значение", "tab\t": "nl\n"},
    ["s" * 127, "s" * 128, "é" * 8191, "é" * 8192],
    {"date": dt.date(1, 1, 1), "dt": dt.datetime(9999, 12, 31, 23, 59, 59, 999999),
     "t": -dt.timedelta(hours=1, microseconds=3), "bin": Opaque(252, b"\x00\xff")},
    {"big": list(range(20000)), "s": "y" * 5000},
]


@pytest.mark.parametrize("doc", SAMPLE_DOCS, ids=range(len(SAMPLE_DOCS)))
def test_round_trip_samples(doc):
    raw = encode(doc)
    got = decode_json(raw)
    assert got == normalized(doc)
    assert json_to_text(got) == json_to_text(mysql_ordered(normalized(doc)))
    assert decode_json(memoryview(raw)) == got
    json.dumps(to_jsonable(got))


def random_doc(rng: random.Random, depth: int = 0):
    r = rng.random()
    if depth < 4 and r < 0.25:
        return {rng.choice(["a", "b", "key", "ключ", "k" * rng.randint(1, 40), "😀", ""])
                + str(rng.randint(0, 50)): random_doc(rng, depth + 1)
                for _ in range(rng.randint(0, 6))}
    if depth < 4 and r < 0.45:
        return [random_doc(rng, depth + 1) for _ in range(rng.randint(0, 6))]
    kind = rng.randint(0, 9)
    if kind == 0:
        return rng.choice([None, True, False])
    if kind == 1:
        return rng.randint(-40000, 40000)
    if kind == 2:
        return rng.choice([rng.randint(-(2 ** 63), 2 ** 63 - 1), rng.randint(0, 2 ** 64 - 1),
                           rng.randint(-(2 ** 31), 2 ** 31)])
    if kind == 3:
        return U(rng.choice([rng.randint(0, 70000), rng.randint(0, 2 ** 40)]))
    if kind == 4:
        return rng.choice([rng.uniform(-1e6, 1e6), rng.random() * 10 ** rng.randint(-300, 300),
                           float(rng.randint(-100, 100))])
    if kind == 5:
        n = rng.choice([0, 1, 5, 127, 128, 300])
        return "".join(rng.choice("aé€😀\n\"\\") for _ in range(n))
    if kind == 6:
        return Decimal(rng.randint(-10 ** 12, 10 ** 12)).scaleb(-rng.randint(0, 8))
    if kind == 7:
        return dt.datetime(rng.randint(1, 9999), rng.randint(1, 12), rng.randint(1, 28),
                           rng.randint(0, 23), rng.randint(0, 59), rng.randint(0, 59),
                           rng.randint(0, 999999))
    if kind == 8:
        return dt.timedelta(microseconds=rng.randint(-838 * 3600 * 10 ** 6,
                                                     838 * 3600 * 10 ** 6))
    return rng.choice([dt.date(rng.randint(1, 9999), rng.randint(1, 12), rng.randint(1, 28)),
                       Opaque(rng.choice([15, 16, 252, 254]), rng.randbytes(rng.randint(0, 90)))])


def test_round_trip_seeded_random_docs():
    rng = random.Random(20240102)
    for _ in range(1500):
        doc = random_doc(rng)
        got = decode_json(encode(doc))
        assert got == document(doc)
        json.dumps(to_jsonable(got))
        json_to_text(got)


if st is not None:
    _keys = st.text(max_size=12)
    _scalars = (st.none() | st.booleans() | st.integers(-(2 ** 63), 2 ** 64 - 1)
                | st.integers(0, 2 ** 64 - 1).map(U)
                | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=300))
    _docs = st.recursive(_scalars, lambda c: st.lists(c, max_size=8)
                         | st.dictionaries(_keys, c, max_size=8), max_leaves=60)

    @settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
    @given(_docs)
    def test_round_trip_hypothesis(doc):
        got = decode_json(encode(doc))
        assert got == document(doc)
        # MySQL-style text is valid JSON with the same content
        assert json.loads(json_to_text(got)) == json.loads(json.dumps(normalized(doc)))


# --- compared with python-mysql-replication ---------------------------------------------------


def _pmr_normalized(v):
    if isinstance(v, dict):
        return {k.decode() if isinstance(k, bytes) else k: _pmr_normalized(x)
                for k, x in v.items()}
    if isinstance(v, list):
        return [_pmr_normalized(x) for x in v]
    if isinstance(v, bytes):
        return v.decode()
    return v


def test_matches_python_mysql_replication_on_plain_documents():
    json_binary = pytest.importorskip("pymysqlreplication.json_binary")
    rng = random.Random(7)

    def plain(depth=0):
        r = rng.random()
        if depth < 4 and r < 0.3:
            return {f"k{rng.randint(0, 99)}": plain(depth + 1) for _ in range(rng.randint(0, 5))}
        if depth < 4 and r < 0.5:
            return [plain(depth + 1) for _ in range(rng.randint(0, 5))]
        return rng.choice([None, True, False, rng.randint(-(2 ** 63), 2 ** 63 - 1),
                           rng.randint(-300, 300), rng.uniform(-1e9, 1e9),
                           "txt" * rng.randint(0, 60), "é😀"])

    docs = [plain() for _ in range(400)]
    docs.append({"big": "z" * 70000, "arr": list(range(-5, 100000, 97))})  # large format
    compared = 0
    for doc in docs:
        raw = encode(doc)
        ours = decode_json(raw)
        theirs = _pmr_normalized(json_binary.parse_json(raw[0], raw[1:]))
        assert ours == (JSON_NULL if theirs is None else theirs)
        compared += 1
    assert compared == len(docs)


# --- malformed input ------------------------------------------------------------------------------


MALFORMED = [
    b"\x00",                                    # object header missing
    b"\x00\x01\x00",                            # half a header
    b"\x00\x01\x00\xff\x00",                    # size beyond the data
    b"\x02\x05\x00\x06\x00",                    # 5 entries do not fit in 6 bytes
    b"\x0c\x05ab",                              # string longer than the data
    b"\x0c\x80",                                # length continues past the end
    b"\x0c\xff\xff\xff\xff\xff\x01",            # length field over 5 bytes
    b"\x0c\xff\xff\xff\xff\x7f",                # length over 2**32
    b"\x0c\x02\xff\xfe",                        # not UTF-8
    b"\x04\x03",                                # unknown literal
    b"\x04",                                    # literal without its byte
    b"\x05\x01",                                # int16 cut short
    b"\x0b\x00\x00",                            # double cut short
    b"\x0d\x00",                                # unknown type
    b"\x0f",                                    # opaque without a field type
    b"\x0f\x0c\x09" + bytes(9),                 # DATETIME of 9 bytes
    b"\x0f\xfc\x05ab",                          # opaque longer than the data
    bytes.fromhex("02 0100 0700 0c0300"),       # value offset inside its own entry
    bytes.fromhex("02 0100 0700 0c0700"),       # value offset == size
    bytes.fromhex("00 0100 0c00 0200 0100 05 0100 61"),  # key offset inside the header
    bytes.fromhex("00 0100 0c00 0b00 0500 05 0100 61"),  # key runs past the object
    bytes.fromhex("02 0100 0700 040300"),       # inlined literal 3
]


@pytest.mark.parametrize("raw", MALFORMED, ids=[m.hex() for m in MALFORMED])
def test_malformed_documents_raise_parse_error(raw):
    with pytest.raises(JsonBinaryError) as info:
        decode_json(raw)
    assert isinstance(info.value, ParseError)


def test_nesting_depth_guard():
    deep = []
    for _ in range(100):                       # MySQL's own limit: 100 levels
        deep = [deep]
    assert decode_json(encode(deep)) == deep
    raw = b"\x02\x00\x00\x04\x00"               # innermost: empty small array
    for _ in range(MAX_DEPTH + 5):              # wrap it: [ <prev> ] with the child at offset 7
        inner = raw
        body = struct.pack("<HH", 1, 7 + len(inner) - 1) + bytes([inner[0]]) + \
            struct.pack("<H", 7) + inner[1:]
        raw = b"\x02" + body
    with pytest.raises(JsonBinaryError, match="deeper"):
        decode_json(raw)


def test_aliased_offsets_cannot_explode():
    # Every level is an array of 200 entries all pointing at the same next level: decoding by
    # following offsets naively would visit 200**6 values.  The element budget stops it.
    level = b"\x02" + struct.pack("<HH", 0, 4)  # empty array
    for _ in range(6):
        n = 200
        header = 4 + 3 * n
        body = struct.pack("<HH", n, header + len(level) - 1)
        body += (bytes([level[0]]) + struct.pack("<H", header)) * n
        body += level[1:]
        level = b"\x02" + body
    t0 = time.monotonic()
    with pytest.raises(JsonBinaryError, match="overlapping"):
        decode_json(level)
    assert time.monotonic() - t0 < 2


def _corpus():
    rng = random.Random(99)
    docs = [encode(d) for d in SAMPLE_DOCS[:9]]
    docs += [encode(random_doc(rng)) for _ in range(60)]
    docs.append(encode({"big": "q" * 66000, "a": [1, {"b": Decimal("1.5")}]}))
    return docs


def test_fuzz_truncations_and_bit_flips_raise_parse_error_or_decode():
    rng = random.Random(1234)
    corpus = _corpus()
    tried = 0
    t0 = time.monotonic()
    for raw in corpus:
        cuts = range(len(raw)) if len(raw) < 300 else rng.sample(range(len(raw)), 150)
        for cut in cuts:
            _decode_or_parse_error(raw[:cut])
            tried += 1
        for _ in range(40):
            b = bytearray(raw)
            for _ in range(rng.randint(1, 3)):
                i = rng.randrange(len(b))
                if rng.random() < 0.5:
                    b[i] ^= 1 << rng.randrange(8)
                else:
                    b[i] = rng.randrange(256)
            _decode_or_parse_error(bytes(b))
            tried += 1
    assert tried > 3000
    assert time.monotonic() - t0 < 120


def _decode_or_parse_error(raw):
    t0 = time.monotonic()
    try:
        decode_json(raw)
    except ParseError:
        pass
    assert time.monotonic() - t0 < 5, raw[:40].hex()


# --- text rendering -------------------------------------------------------------------------


def test_json_to_text_like_mysql():
    doc = decode_json(encode({"a": 1, "b": [True, None, "x"]}))
    assert json_to_text(doc) == '{"a": 1, "b": [true, null, "x"]}'
    assert json_to_text({}) == "{}" and json_to_text([]) == "[]"
    assert json_to_text([[], {}, [[]]]) == "[[], {}, [[]]]"
    assert json_to_text("top") == '"top"'          # SELECT json_col quotes a string doc
    assert json_to_text(None) == "null"
    assert json_to_text(-(2 ** 63)) == "-9223372036854775808"
    assert json_to_text(2 ** 64 - 1) == "18446744073709551615"
    # strings: double_quote() escapes '"', '\\' and bytes <= 0x1f (lower-case hex), not 0x7f
    assert json_to_text('a"b\\c\n\t\r\b\f\x01\x1f\x7fé😀') == \
        '"a\\"b\\\\c\\n\\t\\r\\b\\f\\u0001\\u001f\x7fé😀"'
    assert json_to_text({"k\"ey": "v"}) == '{"k\\"ey": "v"}'
    assert json_to_text(Decimal("1.50")) == "1.50"
    assert json_to_text(Decimal("-0.001")) == "-0.001"
    assert json_to_text(Decimal("1E+2")) == "100"


@pytest.mark.parametrize("value, text", [
    (1.5, "1.5"), (1.0, "1.0"), (0.0, "0.0"), (-0.0, "-0.0"), (-3.0, "-3.0"),
    (100.0, "100.0"), (1e300, "1e300"), (1e-300, "1e-300"), (0.1, "0.1"),
    (1e15, "1e15"), (1e14, "100000000000000.0"), (123456789012345.0, "123456789012345.0"),
    (1234567890123456.7, "1234567890123456.8"), (1e16, "1e16"),
    (1.2345678901234568e+20, "1.2345678901234568e20"), (1e-5, "0.00001"),
    (1.5e-7, "0.00000015"), (1e-15, "0.000000000000001"), (1e-16, "1e-16"),
    (-2.5e-16, "-2.5e-16"), (5e-324, "5e-324"), (1.7976931348623157e308,
                                                 "1.7976931348623157e308"),
    (0.30000000000000004, "0.30000000000000004"), (3.141592653589793, "3.141592653589793"),
    (float("inf"), "null"), (float("nan"), "null"),
])
def test_doubles_like_my_gcvt(value, text):
    assert format_double(value) == text
    if value == value:                             # NaN does not survive the float round trip
        assert json_to_text(decode_json(encode(value))) == text


def test_unquoted_text_is_what_mysqlbinlog_prints():
    """json_quoted=false: a document that is one string-like scalar prints bare, the rest as
    always (containers keep their strings quoted)."""
    assert json_to_text("a\nb", quoted=False) == "a\nb"
    assert json_to_text(dt.datetime(2024, 1, 2, 3, 4, 5), quoted=False) == \
        "2024-01-02 03:04:05.000000"
    assert json_to_text(-dt.timedelta(hours=838), quoted=False) == "-838:00:00.000000"
    assert json_to_text(dt.date(2024, 1, 2), quoted=False) == "2024-01-02"
    assert json_to_text(JsonOpaque(b"\x01\x02", 15), quoted=False) == "base64:type15:AQI="
    assert json_to_text(JSON_NULL, quoted=False) == json_to_text(JSON_NULL) == "null"
    assert json_to_text(Decimal("1.50"), quoted=False) == "1.50"
    assert json_to_text(["s", dt.date(2024, 1, 2)], quoted=False) == '["s", "2024-01-02"]'


def test_to_jsonable():
    doc = decode_json(encode({
        "d": Decimal("12.340"), "date": dt.date(2024, 1, 2),
        "dt": dt.datetime(2024, 1, 2, 3, 4, 5, 6), "t": -dt.timedelta(hours=30, seconds=1),
        "b": Opaque(16, b"\x01"), "n": [1, 2.5, None, True, "s"], "big": 2 ** 64 - 1,
    }))
    out = to_jsonable(doc)
    # the strings MySQL prints for them (CAST(j AS CHAR)), decimals as exact text
    assert out == {"b": "base64:type16:AQ==", "d": "12.340", "n": [1, 2.5, None, True, "s"],
                   "t": "-30:00:01.000000", "dt": "2024-01-02 03:04:05.000006",
                   "big": 18446744073709551615, "date": "2024-01-02"}
    assert json.loads(json.dumps(out)) == out
    assert json.loads(json_to_text(doc)) == {**out, "d": 12.34}
    assert to_jsonable(float("nan")) is None and to_jsonable(JSON_NULL) is None
    assert to_jsonable(dt.timedelta(seconds=1, microseconds=5)) == "00:00:01.000005"


# --- partial updates ------------------------------------------------------------------------------


def net_len(n: int) -> bytes:
    if n < 251:
        return bytes([n])
    if n < 1 << 16:
        return b"\xfc" + n.to_bytes(2, "little")
    if n < 1 << 24:
        return b"\xfd" + n.to_bytes(3, "little")
    return b"\xfe" + n.to_bytes(8, "little")


def diff_bytes(op: int, path: str, value=None) -> bytes:
    """Json_diff::write_binary(): operation, path (length + text), value (length + binary)."""
    p = path.encode()
    out = bytes([op]) + net_len(len(p)) + p
    if op != REMOVE:
        v = encode(value)
        out += net_len(len(v)) + v
    return out


def test_read_json_diffs_layout():
    # REPLACE $.a with 5:  00 | 03 "$.a" | 03  05 05 00
    one = bytes.fromhex("00 03 242e61 03 050500")
    assert diff_bytes(REPLACE, "$.a", 5) == one
    # REMOVE $[0]: 02 | 04 "$[0]"  (no value)
    two = bytes.fromhex("02 04 245b305d")
    buf = b"junk" + one + two + b"tail"
    diffs = read_json_diffs(buf, 4, len(one) + len(two))
    assert diffs == [JsonDiff(REPLACE, "$.a", 5), JsonDiff(REMOVE, "$[0]", None)]
    assert diffs[0].operation == 0 and diffs[0].path == "$.a" and diffs[0].value == 5
    assert "REPLACE" in repr(diffs[0]) and "REMOVE" in repr(diffs[1])
    assert read_json_diffs(buf, 4, 0) == []
    # memoryview buffers work too
    assert read_json_diffs(memoryview(buf), 4, len(one)) == diffs[:1]


def test_read_json_diffs_net_field_lengths():
    long_path = "$." + "k" * 300                       # 0xfc + 2 bytes
    big_value = "v" * 70000                            # value length 0xfd + 3 bytes
    raw = diff_bytes(INSERT, long_path, big_value)
    assert raw[1] == 0xFC and raw[2:4] == (len(long_path)).to_bytes(2, "little")
    diffs = read_json_diffs(raw, 0, len(raw))
    assert diffs == [JsonDiff(INSERT, long_path, big_value)]
    assert raw[1 + 3 + len(long_path)] == 0xFD
    # the 8-byte form (0xfe) for a small length is accepted
    raw = b"\x00" + b"\xfe" + (3).to_bytes(8, "little") + b"$.a" + b"\x03\x05\x07\x00"
    assert read_json_diffs(raw, 0, len(raw)) == [JsonDiff(REPLACE, "$.a", 7)]
    # an empty value is JSON null
    raw = b"\x00\x03$.a\x00"
    assert read_json_diffs(raw, 0, len(raw)) == [JsonDiff(REPLACE, "$.a", None)]


@pytest.mark.parametrize("raw", [
    b"\x03\x03$.a\x03\x05\x05\x00",                    # unknown operation
    b"\x00\x09$.a",                                    # path longer than the list
    b"\x00\x03$.a",                                    # value length missing
    b"\x00\x03$.a\x05\x05\x05\x00",                    # value longer than the list
    b"\x00\xfb$.a",                                    # NULL length
    b"\x00\xfc\x03",                                   # cut inside a length
    b"\x00\x03$.a\x02\x0d\x00",                        # bad value document
    b"\x02\x02\xff\xfe",                               # path not UTF-8
])
def test_read_json_diffs_malformed(raw):
    with pytest.raises(ParseError):
        read_json_diffs(raw, 0, len(raw))


def test_read_json_diffs_length_past_buffer():
    with pytest.raises(JsonDiffError):
        read_json_diffs(b"\x02\x01$", 0, 10)


def test_parse_json_path():
    assert parse_json_path("$") == ()
    assert parse_json_path("$.a[1]") == ((0, "a"), (1, 1))
    assert parse_json_path(' $ . a [ 1 ] ."b c"[last]') == ((0, "a"), (1, 1), (0, "b c"),
                                                            (2, 0))
    assert parse_json_path("$[last-3][last - 0]") == ((2, 3), (2, 0))
    assert parse_json_path('$."a\\"b\\u00e9"') == ((0, 'a"bé'),)
    assert parse_json_path("$.ключ.$x_1") == ((0, "ключ"), (0, "$x_1"))
    for bad in ["", "a", "$.", "$[", "$[x]", "$[1", "$.*", "$[*]", "$**.a", "$[1 to 2]",
                '$."unterminated', "$[99999999999]", "$a"]:
        with pytest.raises(JsonDiffError):
            parse_json_path(bad)


def test_apply_json_diffs_operations():
    before = decode_json(encode({"a": 1, "b": [10, 20, 30], "c d": {"x": "y"}, "e": None}))
    snapshot = copy.deepcopy(before)
    diffs = [
        JsonDiff(REPLACE, "$.a", "one"),
        JsonDiff(REPLACE, "$.b[1]", {"new": True}),
        JsonDiff(REPLACE, '$."c d".x', [1]),
        JsonDiff(INSERT, "$.aa", 2),               # new key: sorted into MySQL's order
        JsonDiff(INSERT, "$.b[0]", 5),
        JsonDiff(INSERT, "$.b[100]", 99),          # past the end: appended
        JsonDiff(INSERT, "$.b[last]", 98),         # before the last element
        JsonDiff(REMOVE, "$.e"),
        JsonDiff(REMOVE, "$.b[last]"),
        JsonDiff(REPLACE, "$.b[2].new", False),    # inside a value set by an earlier diff
        JsonDiff(INSERT, "$.b[2].z", 0),
    ]
    after = apply_json_diffs(before, diffs)
    assert before == snapshot                      # the before image is not modified
    assert after == {"a": "one", "aa": 2, "b": [5, 10, {"new": False, "z": 0}, 30, 98],
                     "c d": {"x": [1]}}
    # MySQL's key order (length, then bytes): a, b, aa, "c d"; in the inner object z, new
    assert json_to_text(after) == \
        '{"a": "one", "b": [5, 10, {"z": 0, "new": false}, 30, 98], "aa": 2, "c d": {"x": [1]}}'
    # unchanged parts are shared, changed ones are copies
    unchanged = decode_json(encode({"keep": {"deep": [1]}, "chg": 1}))
    out = apply_json_diffs(unchanged, [JsonDiff(REPLACE, "$.chg", 2)])
    assert out["keep"] is unchanged["keep"] and out is not unchanged
    assert apply_json_diffs(unchanged, []) is unchanged
    # top-level arrays
    assert apply_json_diffs([1, 2, 3], [JsonDiff(REMOVE, "$[0]"), JsonDiff(INSERT, "$[1]", "x"),
                                        JsonDiff(REPLACE, "$[last]", 0)]) == [2, "x", 0]


@pytest.mark.parametrize("doc, diff", [
    ({"a": 1}, JsonDiff(REPLACE, "$.b", 1)),           # missing member
    ({"a": 1}, JsonDiff(REPLACE, "$[0]", 1)),          # no auto-wrapping
    ([1], JsonDiff(REPLACE, "$[1]", 1)),               # out of bounds
    ([1], JsonDiff(REPLACE, "$[last-1]", 1)),
    ([1], JsonDiff(REPLACE, "$.a", 1)),
    ({"a": 1}, JsonDiff(INSERT, "$.a", 2)),            # existing member
    ({"a": 1}, JsonDiff(INSERT, "$.a.b", 2)),          # parent is a scalar
    ({"a": [1]}, JsonDiff(INSERT, "$.a.b", 2)),        # member leg into an array
    ({"a": 1}, JsonDiff(REMOVE, "$.b")),
    ([1, 2], JsonDiff(REMOVE, "$[2]")),
    ({"a": 1}, JsonDiff(REMOVE, "$")),                 # the whole document
    ({"a": 1}, JsonDiff(REPLACE, "$.*", 1)),           # wildcard
    ({"a": [1, 2]}, JsonDiff(REMOVE, "$.a[0 to 1]")),  # range
    ("scalar", JsonDiff(REPLACE, "$.a", 1)),
])
def test_apply_json_diffs_rejected(doc, diff):
    before = copy.deepcopy(doc)
    with pytest.raises(JsonDiffError):
        apply_json_diffs(doc, [diff])
    assert doc == before


def test_apply_json_diffs_without_before_image():
    # issue 12: no document before (binlog_row_image=MINIMAL): the diffs are the value
    from cdc.values.kinds import ABSENT, JsonDiffs
    got = apply_json_diffs(ABSENT, [JsonDiff(REPLACE, "$.a", 1)])
    assert type(got) is JsonDiffs
    assert got == {"$json_diff": [{"op": "replace", "path": "$.a", "value": 1}]}


def _mysql_path(legs) -> str:
    """Json_path::to_string(): identifiers bare, other names double-quoted."""
    out = "$"
    for leg in legs:
        if isinstance(leg, str):
            out += "." + (leg if re.fullmatch(r"[A-Za-z_$][A-Za-z0-9_$]*", leg)
                          else json.dumps(leg, ensure_ascii=False))
        elif leg < 0:
            out += "[last]" if leg == -1 else f"[last-{-leg - 1}]"
        else:
            out += f"[{leg}]"
    return out


def _paths(doc, prefix=()):
    yield prefix
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            yield from _paths(v, prefix + (i,))


def _get(doc, legs):
    for leg in legs:
        doc = doc[leg]
    return doc


def test_apply_random_diffs_equals_decoded_after_image():
    """Random JSON_SET/JSON_INSERT/JSON_ARRAY_INSERT/JSON_REMOVE-like changes: applying the
    binary diffs to the decoded before image gives exactly the decoded after image (keys in
    MySQL's order included)."""
    rng = random.Random(42)
    checked = 0
    for _ in range(300):
        before_model = random_doc(rng)
        if not isinstance(before_model, (dict, list)):
            before_model = {"root": before_model}
        model = copy.deepcopy(normalized(before_model))
        raw_diffs = b""
        for _ in range(rng.randint(1, 5)):
            paths = [p for p in _paths(model) if p]
            choice = rng.random()
            if paths and choice < 0.4:
                p = rng.choice(paths)
                new = normalized(random_doc(rng, 3))
                parent = _get(model, p[:-1])
                parent[p[-1]] = copy.deepcopy(new)
                legs = list(p)
                if isinstance(parent, list) and rng.random() < 0.3:
                    legs[-1] = -(len(parent) - p[-1])        # as [last-N]
                raw_diffs += diff_bytes(REPLACE, _mysql_path(legs), new)
            elif paths and choice < 0.6:
                p = rng.choice(paths)
                del _get(model, p[:-1])[p[-1]]
                raw_diffs += diff_bytes(REMOVE, _mysql_path(p))
            else:
                containers = [p for p in _paths(model)
                              if isinstance(_get(model, p), (dict, list))]
                p = rng.choice(containers)
                target = _get(model, p)
                new = normalized(random_doc(rng, 3))
                if isinstance(target, dict):
                    key = rng.choice(["new", "a", "zz", "é", "with space", "0"]) + \
                        str(rng.randint(0, 9))
                    if key in target:
                        continue
                    target[key] = copy.deepcopy(new)
                    raw_diffs += diff_bytes(INSERT, _mysql_path(p + (key,)), new)
                else:
                    i = rng.randint(0, len(target) + 2)
                    target.insert(min(i, len(target)), copy.deepcopy(new))
                    raw_diffs += diff_bytes(INSERT, _mysql_path(p + (i,)), new)
        before = decode_json(encode(before_model))
        snapshot = json_to_text(before)
        diffs = read_json_diffs(raw_diffs, 0, len(raw_diffs))
        after = apply_json_diffs(before, diffs)
        expected = decode_json(encode(model))
        assert json_to_text(after) == json_to_text(expected)
        assert json_to_text(before) == snapshot
        checked += 1
    assert checked > 250
