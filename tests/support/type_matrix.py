"""The differential type oracle's matrix: tables of every MariaDB column type and of every
character set, their rows, the server's reference expression per column, and canonical forms.

Every value is reduced to one *canonical* form per kind, from both sides:

* the server: :func:`ref_expr` is the SELECT expression whose result is that form with no client
  conversion involved (text as HEX of ``CONVERT(col USING utf8mb4)``, binary as HEX, DECIMAL as
  ``CAST(col AS CHAR)``, temporal as ``CAST(col AS CHAR(64))``, FLOAT as ``CAST(col AS DOUBLE)``,
  BIT/YEAR as ``CAST(col AS UNSIGNED)``, GEOMETRY as the HEX of its SRID + WKB);
* our decoders: :func:`canon_value` (Python row images), :func:`canon_json` (the JSON text of
  ``decode --format jsonl`` and of the Spark source's JSON mode), :func:`canon_spark` (the Spark
  source's typed mode).

Canonical forms: ``None`` for NULL; a ``str`` of decimal digits for integers, BIT and YEAR; the
exact ``CAST(col AS CHAR)`` text for DECIMAL; ``repr`` of the exact double for FLOAT/DOUBLE;
``CAST(col AS CHAR(64))`` text for DATE/TIME/DATETIME/TIMESTAMP (session time zone UTC); the
Unicode text for CHAR/VARCHAR/TEXT/ENUM/SET/JSON; ``bytes`` for BINARY/VARBINARY/BLOB, UUID,
INET4/INET6 (their binary form) and GEOMETRY (4-byte little-endian SRID + WKB).  A decoded value
of the wrong Python type never reaches a canonical form equal to the reference (e.g. text as
``bytes`` stays ``("bytes", ...)``).
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from dataclasses import dataclass, field
from decimal import Context, Decimal

#: every charset of SHOW CHARACTER SET on MariaDB 10.11 (a test checks the running server has
#: no other, so a new one is never silently left out).
CHARSETS = (
    "armscii8 ascii big5 binary cp1250 cp1251 cp1256 cp1257 cp850 cp852 cp866 cp932 dec8 "
    "eucjpms euckr gb2312 gbk geostd8 greek hebrew hp8 keybcs2 koi8r koi8u latin1 latin2 "
    "latin5 latin7 macce macroman sjis swe7 tis620 ucs2 ujis utf16 utf16le utf32 utf8mb3 "
    "utf8mb4").split()

DEFAULT_CHARSET = "utf8mb4"   # the file decoders' documented default without table-map charsets


@dataclass
class Col:
    """One column: DDL, kind (how it is canonicalised), fsp, and the SQL values of its rows."""

    name: str
    ddl: str
    kind: str
    values: list = field(default_factory=list)
    fsp: int = 0
    needs_metadata: bool = False  # not decodable from a NO_LOG table map alone (files)
    fill: str = "NULL"            # the value of rows past ``values`` (DEFAULT: generated)

    @property
    def needs_members(self) -> bool:
        """ENUM/SET: member names are only in a FULL table map (not MINIMAL, not NO_LOG)."""
        return self.ddl.startswith(("ENUM", "SET"))


@dataclass
class Table:
    name: str
    group: str                  # the test id part: "types" or "charset-<cs>"
    cols: list                  # Col, the first is ``id INT PRIMARY KEY``
    rows: list                  # list of SQL value tuples, one per row (id first)


# --- the type table ---------------------------------------------------------------------------

def _int_cols():
    out = []
    spec = [("tinyint", -128, 127, 255), ("smallint", -32768, 32767, 65535),
            ("mediumint", -8388608, 8388607, 16777215),
            ("int", -2147483648, 2147483647, 4294967295),
            ("bigint", -9223372036854775808, 9223372036854775807, 18446744073709551615)]
    for t, lo, hi, uhi in spec:
        out.append(Col(f"{t[:2]}_s", t.upper(), "int", [str(lo), str(hi), "0", "-1", "1"]))
        out.append(Col(f"{t[:2]}_u", f"{t.upper()} UNSIGNED", "int",
                       [str(uhi), "0", str(hi), str(hi + 1), "1"], needs_metadata=True))
        out.append(Col(f"{t[:2]}_z", f"{t.upper()}(4) ZEROFILL", "int",
                       [str(uhi), "0", "7", str(hi + 1), "12345"], needs_metadata=True))
    return out


def _decimal_cols():
    out = []
    for p, s in [(1, 0), (5, 2), (10, 2), (18, 9), (19, 0), (20, 10), (38, 0), (38, 38),
                 (40, 20), (65, 0), (65, 30), (9, 9), (10, 10)]:
        ip = p - s
        mx = ("9" * ip or "0") + ("." + "9" * s if s else "")
        small = "0." + "0" * (s - 1) + "1" if s else "1"
        vals = [mx, "-" + mx, "0", "-" + small, small, "-0", ("1" + "0" * (ip - 1) if ip else "0")
                + ("." + "5" + "0" * (s - 1) if s else "")]
        out.append(Col(f"dec_{p}_{s}", f"DECIMAL({p},{s})", "decimal", vals))
    out.append(Col("dec_u", "DECIMAL(12,4) UNSIGNED", "decimal",
                   ["99999999.9999", "0", "12.5", "0.0001"]))
    return out


def _float_cols():
    return [
        Col("fl", "FLOAT", "float", ["3.40282e38", "-3.40282e38", "1.17549435e-38", "-0e0",
                                    "1.2345678", "1e-45", "0", "-1.5", "16777217"]),
        Col("fl_u", "FLOAT UNSIGNED", "float", ["3.4e38", "0", "0.1"]),
        Col("db", "DOUBLE", "float", ["1.7976931348623157e308", "-1.7976931348623157e308",
                                     "2.2250738585072014e-308", "-0e0", "4.9e-324", "0.1",
                                     "-123456789.123456789", "9007199254740993", "1e22"]),
        Col("db_53", "DOUBLE(20,5)", "float", ["123456789012345.12345", "-0.00001", "0"]),
    ]


def _bit_cols():
    out = []
    for n in (1, 2, 7, 8, 9, 15, 16, 17, 24, 31, 32, 33, 48, 63, 64):
        mx = (1 << n) - 1
        out.append(Col(f"bit_{n}", f"BIT({n})", "bit",
                       [f"b'{mx:b}'", "b'0'", f"b'{1 << (n - 1):b}'", f"b'{(mx // 3):b}'" if n > 1
                        else "b'1'"]))
    return out


def _temporal_cols():
    out = [Col("yr", "YEAR", "year", ["2155", "1901", "0", "2000", "'69'"]),
           Col("dt", "DATE", "temporal", ["'9999-12-31'", "'1000-01-01'", "'0000-00-00'",
                                           "'2024-02-29'", "'2024-00-10'", "'0001-01-01'",
                                           "'2001-01-00'"])]
    for f in range(7):
        frac = ("." + "9" * f) if f else ""
        one = ("." + "0" * (f - 1) + "1") if f else ""
        out.append(Col(f"tm_{f}", f"TIME({f})", "temporal",
                       [f"'838:59:59{frac}'", f"'-838:59:59{frac}'", "'00:00:00'",
                        f"'-00:00:00{one}'" if f else "'-00:00:01'", f"'24:00:00{one}'",
                        f"'-25:30:00{frac}'", f"'12:34:56{one}'"], fsp=f))
        out.append(Col(f"dtm_{f}", f"DATETIME({f})", "temporal",
                       [f"'9999-12-31 23:59:59{frac}'", "'1000-01-01 00:00:00'",
                        "'0000-00-00 00:00:00'", f"'2024-00-10 10:00:00{one}'",
                        f"'0001-01-01 00:00:00{one}'", f"'2024-02-29 12:34:56{frac}'",
                        "'2001-01-00 00:00:00'"], fsp=f))
        out.append(Col(f"ts_{f}", f"TIMESTAMP({f}) NULL", "temporal",
                       [f"'2038-01-19 03:14:07{frac}'", f"'1970-01-01 00:00:01{one}'",
                        "'0000-00-00 00:00:00'", f"'2000-02-29 23:59:59{frac}'",
                        f"'2024-06-01 12:00:00{one}'"], fsp=f))
    return out


_TEXT_VALUES = ["'ééééééééé😀'", "''", "' '", "'tail  '", "'\\'\"\\\\\\n\\t'",
                "CONVERT(UNHEX('00') USING utf8mb4)", "'a\\0b'", "'Ωmega ✓'"]


def _text_cols():
    u = "CHARACTER SET utf8mb4"
    return [
        Col("ch", f"CHAR(10) {u}", "text", _TEXT_VALUES + ["REPEAT('😀', 10)"]),
        Col("ch_255", f"CHAR(255) {u}", "text", _TEXT_VALUES + ["REPEAT('😀', 255)"]),
        Col("ch_l1", "CHAR(5) CHARACTER SET latin1", "text", ["'ÿÿÿÿÿ'", "''", "'a  '", "'é'"],
            needs_metadata=True),
        Col("ch_u3", "CHAR(4) CHARACTER SET utf8mb3", "text", ["'€€€€'", "''", "'ab'"],
            needs_metadata=True),
        Col("vc", f"VARCHAR(300) {u}", "text", _TEXT_VALUES + ["REPEAT('😀', 300)"]),
        Col("vc_l1", "VARCHAR(10) CHARACTER SET latin1", "text", ["'abcdefghij'", "''", "'ÿ '"],
            needs_metadata=True),
        Col("vc_bin", "VARCHAR(20) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin", "text",
            ["'Bin é'", "''"]),
        Col("vc_sur", f"VARCHAR(20) {u}", "text", ["x'eda080'", "x'61edbfbf62'", "'ok'"]),
        Col("ch_sur", "CHAR(4) CHARACTER SET utf8mb3", "text", ["x'eda080'", "'ok'"],
            needs_metadata=True),
        Col("tt", f"TINYTEXT {u}", "text", _TEXT_VALUES + ["REPEAT('t', 255)"]),
        Col("tx", f"TEXT {u}", "text", _TEXT_VALUES + ["REPEAT('x', 65535)"]),
        Col("mt", f"MEDIUMTEXT {u}", "text", _TEXT_VALUES + ["REPEAT('m', 70000)"]),
        Col("lt", f"LONGTEXT {u}", "text", _TEXT_VALUES + ["REPEAT('é', 100000)"]),
        Col("bn", "BINARY(4)", "binary", ["x'ffffffff'", "x'00'", "x'0100'", "x''",
                                          "x'00000000'", "x'61000000'"], needs_metadata=True),
        Col("bn_1", "BINARY(1)", "binary", ["x'00'", "x'ff'", "x''"], needs_metadata=True),
        Col("vb", "VARBINARY(300)", "binary", ["REPEAT(x'ff', 300)", "x''", "x'00'",
                                               "x'610000'", "x'c3'"], needs_metadata=True),
        Col("tb", "TINYBLOB", "binary", ["REPEAT(x'01', 255)", "x''", "x'0000'"],
            needs_metadata=True),
        Col("bl", "BLOB", "binary", ["REPEAT(x'02', 65535)", "x''", "x'ff00'"],
            needs_metadata=True),
        Col("mb", "MEDIUMBLOB", "binary", ["REPEAT(x'03', 70000)", "x''"], needs_metadata=True),
        Col("lb", "LONGBLOB", "binary", ["REPEAT(x'04', 100000)", "x''", "x'c328'"],
            needs_metadata=True),
        Col("en", "ENUM('a','b','c','ü','😀')", "text",
            ["'a'", "'c'", "'ü'", "'😀'", "''", "'b'"], needs_metadata=True),
        Col("en_big", "ENUM(" + ",".join(f"'m{k}'" for k in range(300)) + ")", "text",
            ["'m0'", "'m299'", "'m256'", "'m255'"], needs_metadata=True),
        Col("st", "SET('x','y','z','ü')", "text",
            ["'x,y,z,ü'", "''", "'y'", "'ü'", "'x,z'"], needs_metadata=True),
        Col("st_64", "SET(" + ",".join(f"'s{k}'" for k in range(64)) + ")", "text",
            ["'" + ",".join(f"s{k}" for k in range(64)) + "'", "'s63'", "''", "'s0,s62'"],
            needs_metadata=True),
        Col("js", "JSON", "text", ["'{\"k\": [1, 2.5, \"é\", null, true]}'", "'[]'", "'\"\"'",
                                   "CONCAT('{\"k\": [', REPEAT('1,', 3000), '1]}')", "'1.0'"]),
    ]


def _geometry_cols():
    g = "ST_GeomFromText"
    return [
        Col("ge", "GEOMETRY", "geometry",
            [f"{g}('LINESTRING(0 0,1 1,2 2)')", f"{g}('POINT(-1.5 2.25)', 4326)",
             f"{g}('GEOMETRYCOLLECTION(POINT(1 1),LINESTRING(0 0,1 1))')"]),
        Col("pt", "POINT", "geometry", [f"{g}('POINT(0 0)')", f"{g}('POINT(1e300 -1e-300)')"]),
        Col("ls", "LINESTRING", "geometry", [f"{g}('LINESTRING(0 0,1 2,3 4)')"]),
        Col("pg", "POLYGON", "geometry", [f"{g}('POLYGON((0 0,1 0,1 1,0 0))')"]),
        Col("mp", "MULTIPOINT", "geometry", [f"{g}('MULTIPOINT(1 1,2 2)')"]),
        Col("ml", "MULTILINESTRING", "geometry", [f"{g}('MULTILINESTRING((0 0,1 1),(2 2,3 3))')"]),
        Col("mg", "MULTIPOLYGON", "geometry",
            [f"{g}('MULTIPOLYGON(((0 0,1 0,1 1,0 0)),((5 5,6 5,6 6,5 5)))')"]),
        Col("gc", "GEOMETRYCOLLECTION", "geometry", [f"{g}('GEOMETRYCOLLECTION(POINT(3 4))')"]),
    ]


def _special_cols() -> list:
    """Generated (virtual and stored) and invisible columns: in the table map and row images
    as the server logs them; SELECT (naming them) is still the reference."""
    return [
        Col("gv", "INT AS (`in_s` DIV 2) VIRTUAL", "int", fill="DEFAULT"),
        Col("gs", "VARCHAR(400) CHARACTER SET utf8mb4 AS (CONCAT(`vc`, '!')) PERSISTENT", "text",
            fill="DEFAULT"),
        Col("iv", "INT INVISIBLE DEFAULT 42", "int", ["-7", "0"], fill="DEFAULT"),
    ]


def single_table() -> Table:
    """A table of one column (JSON renderers must not turn its value into a list)."""
    return Table("single", "single", [Col("id", "INT NOT NULL", "int")],
                 [(str(k),) for k in range(1, 6)])


def _mariadb_type_cols(version: tuple) -> list:
    out = []
    if version >= (10, 7):
        out.append(Col("uu", "UUID", "binary_cast",
                       ["'6ccd780c-baba-1026-9564-5b8c656024db'",
                        "'00000000-0000-0000-0000-000000000000'", "'ffffffff-ffff-1fff-bfff-ffffffffffff'"],
                       needs_metadata=True))
    if version >= (10, 5):
        out.append(Col("i6", "INET6", "binary_cast",
                       ["'2001:db8::ff00:42:8329'", "'::'", "'::ffff:192.0.2.1'"],
                       needs_metadata=True))
    if version >= (10, 10):
        out.append(Col("i4", "INET4", "binary_cast", ["'192.168.1.200'", "'0.0.0.0'",
                                                      "'255.255.255.255'"], needs_metadata=True))
    return out


def old_temporal_tables() -> list:
    """For a server with mysql56_temporal_format=OFF: TIME/DATETIME/TIMESTAMP of precision 0
    (the old formats every decoder knows) and of precision 1..6 (sizes only information_schema
    knows: a live stream decodes them, file decoders must raise)."""
    out = []
    for name, fsps in (("old_fsp0", [0]), ("old_fsp", range(1, 7))):
        cols = [c for c in _temporal_cols() if c.fsp in fsps and c.name[:3] in ("tm_", "dtm", "ts_")]
        n = max(len(c.values) for c in cols)
        rows = [(str(k + 1),) + tuple(c.values[k] if k < len(c.values) else "NULL" for c in cols)
                for k in range(n)]
        rows.append((str(n + 1),) + ("NULL",) * len(cols))
        cols = [Col("id", "INT NOT NULL PRIMARY KEY", "int")] + cols
        out.append(Table(name, name.replace("_", "-"), cols, rows))
    return out


def types_table(version: tuple) -> Table:
    cols = (_int_cols() + _decimal_cols() + _float_cols() + _bit_cols() + _temporal_cols()
            + _text_cols() + _geometry_cols() + _mariadb_type_cols(version) + _special_cols())
    n = max(len(c.values) for c in cols)
    rows = []
    for k in range(n):
        rows.append((str(k + 1),) + tuple(c.values[k] if k < len(c.values) else c.fill
                                          for c in cols))
    rows.append((str(n + 1),) + tuple(c.fill for c in cols))
    cols = [Col("id", "INT NOT NULL PRIMARY KEY", "int")] + cols
    return Table("types", "types", cols, rows)


# --- charset tables -----------------------------------------------------------------------------

def _hex(b: bytes) -> str:
    return b.hex().upper()


def discover_repertoire(cur, cs: str, maxlen: int) -> list:
    """``[(raw bytes, text)]``: characters of *cs* the server stores and converts to utf8mb4
    as one character other than '?' (single-byte: every byte; double-byte: every lead/trail
    pair; EUC 3-byte: every 0x8F row; Unicode charsets: a spread of code points)."""
    if cs == "binary":
        return [(bytes([b]), None) for b in range(256)]
    cands = [bytes([b]) for b in range(256)]
    if cs in ("ujis", "eucjpms"):
        hi = range(0xA1, 0xFF)
        cands += [bytes([a, b]) for a in [0x8E, *hi] for b in hi]
        cands += [bytes([0x8F, a, b]) for a in hi for b in hi]
    elif maxlen == 2 and not cs.startswith(("ucs", "utf")):
        cands += [bytes([a, b]) for a in range(0x81, 0xFF) for b in range(0x40, 0xFF)]
    elif cs.startswith(("ucs", "utf")):
        cps = [*range(0x20, 0x800, 3), *range(0x800, 0xD800, 41), *range(0xE000, 0x10000, 29)]
        if cs != "utf8mb3":
            cps += list(range(0x10000, 0x110000, 1021))
        enc = {"ucs2": "utf-16-be", "utf16": "utf-16-be", "utf16le": "utf-16-le",
               "utf32": "utf-32-be"}.get(cs, "utf-8")
        cands = [chr(c).encode(enc) for c in cps if cs != "ucs2" or c < 0x10000]
    cur.execute("DROP TEMPORARY TABLE IF EXISTS cand")
    cur.execute("CREATE TEMPORARY TABLE cand (h VARCHAR(16) CHARACTER SET ascii)")
    for k in range(0, len(cands), 5000):
        cur.execute("INSERT INTO cand VALUES " + ",".join(f"('{_hex(c)}')" for c in cands[k:k + 5000]))
    cur.execute(f"SELECT h, HEX(CONVERT(CONVERT(UNHEX(h) USING {cs}) USING utf8mb4)), "
                f"CHAR_LENGTH(CONVERT(UNHEX(h) USING {cs})) FROM cand")
    out = []
    for h, u, n in cur.fetchall():
        try:
            text = bytes.fromhex(u).decode("utf-8")
        except UnicodeDecodeError:   # e.g. a lone ucs2 surrogate: not a character
            continue
        if n == 1 and len(text) == 1 and text != "?":
            out.append((bytes.fromhex(h), text))
    cur.execute("DROP TEMPORARY TABLE cand")
    return sorted(out)


def discover_members(cur, cs: str, repertoire: list, limit: int = 200) -> list:
    """ENUM/SET members for *cs*: characters of the repertoire that survive the DDL's
    utf8mb4 -> *cs* conversion unchanged and are distinct under *cs*'s default collation."""
    if cs == "binary":
        return []
    texts = [t for _, t in repertoire if ord(t) > 0x20 and t not in "',\\`" and t.isprintable()]
    cur.execute("DROP TEMPORARY TABLE IF EXISTS candm")
    cur.execute("CREATE TEMPORARY TABLE candm (id INT, u VARCHAR(4) CHARACTER SET utf8mb4 "
                "COLLATE utf8mb4_bin)")
    if texts:
        cur.executemany("INSERT INTO candm VALUES (%s, %s)", list(enumerate(texts)))
    cur.execute(f"SELECT MIN(id) FROM candm WHERE CONVERT(CONVERT(u USING {cs}) USING utf8mb4) = u "
                f"GROUP BY CONVERT(u USING {cs}) ORDER BY 1")
    ids = [r[0] for r in cur.fetchall()]
    cur.execute("DROP TEMPORARY TABLE candm")
    step = max(1, len(ids) // limit)
    picked = [texts[i] for i in ids[::step]][:limit]
    ascii_part = [t for t in picked if ord(t) < 0x80][:8]
    return ascii_part + [t for t in picked if ord(t) >= 0x80][:limit - len(ascii_part)]


def charset_table(cs: str, repertoire: list, members: list, collations=()) -> Table:
    """A table of charset *cs*: text columns holding *repertoire* (each item the raw bytes of
    one valid character in *cs*) in chunks, an ENUM and a SET of *members* (Unicode strings the
    server stores in *cs*), and one more text column per non-default collation in *collations*
    (the table map carries collation ids: each must map to the charset's codec)."""
    meta = cs != DEFAULT_CHARSET
    raws = [r for r, _ in repertoire]
    chunks = [raws[k:k + 48] for k in range(0, len(raws), 48)] or [[]]
    cols = [Col("id", "INT NOT NULL PRIMARY KEY", "int")]
    kind = "binary" if cs == "binary" else "text"
    ccs = "" if cs == "binary" else f" CHARACTER SET {cs}"
    vtype = "VARBINARY(2000)" if cs == "binary" else f"VARCHAR(600){ccs}"
    cols.append(Col("v", vtype, kind, needs_metadata=meta))
    cols.append(Col("t", "BLOB" if cs == "binary" else f"TEXT{ccs}", kind, needs_metadata=meta))
    cols.append(Col("c", "BINARY(8)" if cs == "binary" else f"CHAR(8){ccs}", kind,
                    needs_metadata=meta))
    if members:
        lit = ",".join("'" + m.replace("\\", "\\\\").replace("'", "''") + "'" for m in members)
        smembers = [m for m in members if "," not in m][:64]
        slit = ",".join("'" + m.replace("\\", "\\\\").replace("'", "''") + "'" for m in smembers)
        cols.append(Col("e", f"ENUM({lit}){ccs}", "text", needs_metadata=True))
        cols.append(Col("s", f"SET({slit}){ccs}", "text", needs_metadata=True))
    else:
        smembers = []
    for k, coll in enumerate(collations):
        cols.append(Col(f"k{k}", f"VARCHAR(64){ccs} COLLATE {coll}", kind, needs_metadata=meta))
    conv = (lambda h: f"UNHEX('{h}')") if cs == "binary" else \
        (lambda h: f"CONVERT(UNHEX('{h}') USING {cs})")
    n = max(len(chunks), len(members))
    rows = []
    for k in range(n):
        row = [str(k + 1)]
        chunk = chunks[k] if k < len(chunks) else chunks[k % len(chunks)]
        row.append(conv(_hex(b"".join(chunk))))
        row.append(conv(_hex(b"".join(reversed(chunk)))))
        row.append(conv(_hex(b"".join(chunk[:8]) if cs != "binary" else b"".join(chunk)[:8])))
        if members:
            row.append(str(k % len(members) + 1))          # ENUM by index: no conversion
            mask = (1 << len(smembers)) - 1
            row.append(str((k * 0x9E3779B97F4A7C15 >> 7) & mask) if k else str(mask))
        row += [conv(_hex(b"".join(chunk)))] * len(collations)
        rows.append(tuple(row))
    rows.append((str(n + 1), conv(""), conv(""), conv("")) + (("0", "0") if members else ())
                + (conv(""),) * len(collations))
    rows.append((str(n + 2),) + ("NULL",) * (len(cols) - 1))
    name = "cs_" + cs
    return Table(name, "charset-" + cs, cols, rows)


# --- canonical forms ----------------------------------------------------------------------------

def ref_expr(col: Col) -> str:
    """The SELECT expression giving *col*'s reference (see the module docstring)."""
    q = f"`{col.name}`"
    k = col.kind
    if k == "int":
        return f"CAST({q} AS DECIMAL(20,0))"
    if k in ("bit", "year"):
        return f"CAST({q} AS UNSIGNED)"
    if k == "decimal":
        return f"CAST({q} AS CHAR)"
    if k == "float":
        return f"CAST({q} AS DOUBLE)"
    if k == "temporal":
        return f"CAST({q} AS CHAR(64))"
    if k == "text":
        return f"HEX(CONVERT({q} USING utf8mb4))"
    if k == "binary_cast":
        return f"HEX(CAST({q} AS BINARY))"
    return f"HEX({q})"   # binary, geometry


def canon_ref(col: Col, v):
    """The canonical form of the server's answer to :func:`ref_expr`."""
    if v is None:
        return None
    k = col.kind
    if k in ("int", "bit", "year"):
        return str(int(v))
    if k == "float":
        return repr(float(v))
    if k in ("decimal", "temporal"):
        return v if isinstance(v, str) else v.decode()
    if k == "text":
        raw = bytes.fromhex(v)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:   # stored bytes the server accepts but are not UTF-8
            return ("invalid", raw)   # (e.g. ED A0 80): the documented InvalidText
    return bytes.fromhex(v)


def _frac(us: int, fsp: int) -> str:
    return ("." + f"{us:06d}"[:fsp]) if fsp else ""


def _tag(v):
    return ("unexpected " + type(v).__name__, repr(v)[:300])


def canon_value(col: Col, v):
    """A decoded Python value (a row image of ReplicaClient or of the file decoder) in
    canonical form; a value of the wrong type is returned tagged, so it never compares equal."""
    if v is None:
        return None
    k, t = col.kind, type(v)
    if k in ("int", "bit", "year"):
        return str(v) if t is int else _tag(v)
    if k == "float":
        return repr(v) if t is float else _tag(v)
    if k == "decimal":
        return format(v, "f") if t is Decimal else _tag(v)
    if k == "temporal":
        if t.__name__ == "InvalidTemporal":
            return str(v)
        if t is dt.datetime:
            if v.tzinfo is not None:
                v = v.astimezone(dt.timezone.utc)
            return (f"{v.year:04d}-{v.month:02d}-{v.day:02d} {v.hour:02d}:{v.minute:02d}:"
                    f"{v.second:02d}" + _frac(v.microsecond, col.fsp))
        if t is dt.date:
            return f"{v.year:04d}-{v.month:02d}-{v.day:02d}"
        if t is dt.timedelta:
            sign = "-" if v < dt.timedelta(0) else ""
            us = abs(v) // dt.timedelta(microseconds=1)
            s, us = divmod(us, 1_000_000)
            return (f"{sign}{s // 3600:02d}:{s // 60 % 60:02d}:{s % 60:02d}"
                    + _frac(us, col.fsp))
        return _tag(v)
    if k == "text":
        if t.__name__ == "InvalidText":
            return ("invalid", bytes(v))
        return v if t is str else _tag(v)
    if k == "geometry":
        if t.__name__ == "Geometry":
            return v.srid.to_bytes(4, "little") + bytes(v.wkb)
        return _tag(v)
    return bytes(v) if t is bytes else _tag(v)


def _iso_to_sql(text: str, fsp: int):
    """ISO text of a JSON image (``T``, trailing ``Z``, 0 or 6 fraction digits) -> SQL text."""
    s = text.replace("T", " ")
    if s.endswith("Z"):
        s = s[:-1]
    head, dot, frac = s.partition(".")
    if frac.rstrip("0")[fsp:]:
        return ("fraction beyond the column's precision", text)
    return head + (("." + (frac + "000000")[:fsp]) if fsp else "")


def loads_exact(text: str):
    """JSON text with every number kept as its text (so decimals keep every digit)."""
    return json.loads(text, parse_float=lambda s: ("num", s), parse_int=lambda s: ("num", s),
                      object_pairs_hook=list)


def canon_json(col: Col, v):
    """A value of a JSON image (parsed by :func:`loads_exact`) in canonical form."""
    if v is None:
        return None
    k = col.kind
    num = v[1] if isinstance(v, tuple) and v[0] == "num" else None
    if k in ("int", "bit", "year"):
        return num if num is not None and num.lstrip("-").isdigit() else _tag(v)
    if k == "decimal":
        return num if num is not None else _tag(v)
    if k == "float":
        return repr(float(num)) if num is not None else _tag(v)
    if k == "temporal":
        return _iso_to_sql(v, col.fsp) if isinstance(v, str) else _tag(v)
    if k == "text":
        if isinstance(v, list) and len(v) == 1 and v[0][0] == "$binary":
            return ("invalid", base64.b64decode(v[0][1]))
        return v if isinstance(v, str) else _tag(v)
    if k == "geometry":
        if isinstance(v, list) and dict(v).keys() == {"srid", "wkb"}:
            d = dict(v)
            return int(d["srid"][1]).to_bytes(4, "little") + base64.b64decode(d["wkb"])
        return _tag(v)
    if isinstance(v, str):
        try:
            return base64.b64decode(v, validate=True)
        except ValueError:
            return _tag(v)
    return _tag(v)


def is_zero_temporal(text) -> bool:
    """A DATE/DATETIME/TIMESTAMP text with a zero year, month or day (Spark cannot hold it)."""
    return isinstance(text, str) and len(text) >= 10 and text[4] == "-" and (
        text[:4] == "0000" or text[5:7] == "00" or text[8:10] == "00")


def canon_spark(col: Col, v):
    """A value of a typed-mode Spark row (``after``/``before`` struct field) in canonical form."""
    if v is None:
        return None
    k, t = col.kind, type(v)
    if k in ("int", "bit", "year"):
        if t is Decimal and v == v.to_integral_value():
            return str(int(v))
        return str(v) if t is int else _tag(v)
    if k == "decimal":
        if t is Decimal:   # Spark's decimal(p,s) carries the scale; PySpark's Decimal may not
            scale = int(col.ddl.split(",")[1].split(")")[0])
            q = v.quantize(Decimal(1).scaleb(-scale), context=Context(prec=100))
            return format(q, "f") if q == v else _tag(v)
        return v if t is str else _tag(v)
    if k == "float":
        return repr(v) if t is float else _tag(v)
    if k == "temporal" and t is dt.datetime and v.tzinfo is None and col.name.startswith("ts_"):
        v = v.astimezone(dt.timezone.utc)   # Spark gives TimestampType as naive local time
    if k == "text" and t is str and v.startswith('{"$binary": "'):
        return canon_json(col, loads_exact(v))
    if k in ("binary", "binary_cast") and t is bytearray:
        v = bytes(v)
    if k == "geometry":
        return bytes(v) if t in (bytes, bytearray) else _tag(v)
    return canon_value(col, v)
