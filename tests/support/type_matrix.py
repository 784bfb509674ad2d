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
import struct
from dataclasses import dataclass, field
from decimal import Context, Decimal

from cdc.values.jsonb import apply_json_diffs, json_to_text
from cdc.values.kinds import ABSENT
from cdc.values.render import JSON_NULL_IMAGE

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
    setup: tuple = ()           # SQL run before its CREATE TABLE (helper tables its values read)
    #: the UPDATE statements of the workload, each shifting ``id`` and making these assignments
    #: (``((column, expression), ...)``); the default: one UPDATE of ``id`` alone
    updates: tuple = ((),)


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


def _decimal_cols(max_scale: int = 38):
    """DECIMAL(p,s) of every storage shape; scales past *max_scale* (MySQL: 30) become it."""
    out = []
    for p, s in [(1, 0), (5, 2), (10, 2), (18, 9), (19, 0), (20, 10), (38, 0), (38, 38),
                 (40, 20), (65, 0), (65, 30), (9, 9), (10, 10)]:
        s = min(s, max_scale)
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


def _special_cols(stored: str = "PERSISTENT") -> list:
    """Generated (virtual and stored) and invisible columns: in the table map and row images
    as the server logs them; SELECT (naming them) is still the reference."""
    return [
        Col("gv", "INT AS (`in_s` DIV 2) VIRTUAL", "int", fill="DEFAULT"),
        Col("gs", f"VARCHAR(400) CHARACTER SET utf8mb4 AS (CONCAT(`vc`, '!')) {stored}", "text",
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


def _table(name: str, cols: list, **kw) -> Table:
    """A table of *cols* after ``id``: row k holds every column's k-th value (or its fill),
    one more row holds only fills."""
    n = max(len(c.values) for c in cols)
    rows = []
    for k in range(n):
        rows.append((str(k + 1),) + tuple(c.values[k] if k < len(c.values) else c.fill
                                          for c in cols))
    rows.append((str(n + 1),) + tuple(c.fill for c in cols))
    cols = [Col("id", "INT NOT NULL PRIMARY KEY", "int")] + cols
    return Table(name, name.replace("_", "-"), cols, rows, **kw)


def types_table(version: tuple) -> Table:
    return _table("types", _int_cols() + _decimal_cols() + _float_cols() + _bit_cols()
                  + _temporal_cols() + _text_cols() + _geometry_cols()
                  + _mariadb_type_cols(version) + _special_cols())


# --- MySQL 9.7 ----------------------------------------------------------------------------------

#: every charset of SHOW CHARACTER SET on MySQL 9.7 (MariaDB's and gb18030)
MYSQL_CHARSETS = sorted(CHARSETS + ["gb18030"])


def _sql(text: str) -> str:
    """*text* as an SQL string literal."""
    return "'" + text.replace("\\", "\\\\").replace("'", "''") + "'"


def _mysql_cols() -> list:
    """MySQL's own types and attributes: VECTOR, ENUM/SET of 4-byte members."""
    v = "STRING_TO_VECTOR"
    return [
        Col("vec", "VECTOR(3)", "vector", [f"{v}('[1.5,-2,3.4028235e38]')",
                                           f"{v}('[0,-0,1.2e-38]')", f"{v}('[0.1,0.2,0.3]')"]),
        Col("vec_1", "VECTOR(1)", "vector", [f"{v}('[-1.17549435e-38]')", f"{v}('[7]')"]),
        Col("vec_max", "VECTOR(16383)", "vector",
            [f"{v}(CONCAT('[', REPEAT('0.5,', 16382), '-1]'))"]),
        Col("en_4", "ENUM('a','😀','ü','𝄞') CHARACTER SET utf8mb4", "text",
            ["'😀'", "'𝄞'", "'a'", "''"], needs_metadata=True),
        Col("st_4", "SET('😀','x','𝄞') CHARACTER SET utf8mb4", "text",
            ["'😀,𝄞'", "'x'", "''", "'😀,x,𝄞'"], needs_metadata=True),
    ]


def mysql_types_tables() -> list:
    """Every MySQL column type: ``types``, ``geometry`` (apart: ``mysqlbinlog -v`` prints no
    GEOMETRY value, and gives up on the rest of the row), and JSON (:func:`json_tables`)."""
    g = "ST_GeomFromText"
    srid = [Col("pt_srid", "POINT SRID 4326", "geometry",
                [f"{g}('POINT(45 90)', 4326)", f"{g}('POINT(-90 -180)', 4326)"]),
            Col("ge_srid", "GEOMETRY SRID 3857", "geometry",
                [f"{g}('LINESTRING(0 0,1e6 -1e6)', 3857)"])]
    return [_table("types", _int_cols() + _decimal_cols(30) + _float_cols() + _bit_cols()
                   + _temporal_cols() + [c for c in _text_cols() if c.name != "js"]
                   + _mysql_cols() + _special_cols("STORED")),
            _table("geometry", _geometry_cols() + srid), *json_tables()]


_UNSIGNED = ("CAST(65535 AS UNSIGNED)", "CAST(4294967295 AS UNSIGNED)",
             "CAST(18446744073709551615 AS UNSIGNED)")
_NUMBERS = ("-32768", "32767", "-2147483648", "2147483647", "-9223372036854775808",
            "9223372036854775807", "1e300", "-1.5e-7", "CAST(1.50 AS DECIMAL(10,2))",
            "CAST('-12345678901234567890123456789012345.123456789012345678901234567890' AS "
            "DECIMAL(65,30))") + _UNSIGNED


def _json_cols() -> list:
    """JSON documents: objects, arrays, nesting, every scalar kind MySQL's binary JSON has
    (int16 ... uint64, double, string, literals, DECIMAL) and documents past 64 KiB (the
    large format)."""
    escapes = json.dumps({'key "q"': "\u0001\n\t\\ é😀\u2028", "ü": "ü", "\u0000x": "nul",
                          "ascii": "\u00e9\U0001f600"}, ensure_ascii=False)
    docs = [_sql('{"k": [1, 2.5, "é", null, true]}'), "'[]'", "'{}'",
            _sql('{"a": {"b": {"c": [1, [2, [3, {"d": null}]]]}}, "z": false, "": ""}'),
            _sql(escapes), _sql(json.dumps({"esc": "\u00e9\U0001f600\u0007"})),
            _sql('{"bb": 1, "a": 2, "ccc": 3, "b": 4, "a": 5, "aa": [], "ab": {}}'),
            "CONCAT(REPEAT('[', 99), '1', REPEAT(']', 99))",
            "JSON_OBJECT(" + ", ".join(f"'n{k}', {x}" for k, x in enumerate(_NUMBERS)) + ")",
            "JSON_ARRAY(" + ", ".join(_NUMBERS) + ")",
            "JSON_ARRAY(ST_GeomFromText('POINT(1 2)'), "
            "ST_GeomFromText('POLYGON((0 0,1 0,1 1,0 0))', 4326))",
            _sql("[1.0, 0.1, -0.0, 1e15, 123456789012345.0, 1.5e-7, 1e-300, "
                 "2.2250738585072014e-308, 5e-324, 0.30000000000000004, 1e16, 12345678.9]")]
    scalars = ["'1'", "'-1'", "'32767'", "'32768'", "'-32769'", "'65535'", "'2147483648'",
               "'-2147483649'", "'9223372036854775807'", "'-9223372036854775808'",
               "'18446744073709551615'", "'1.0'", "'-0.0'", "'0.1'", "'1e300'", "'true'", "'false'", *(f"CAST({x} AS JSON)" for x in _UNSIGNED[:2]),
               *(f"CAST({x} AS JSON)" for x in _NUMBERS[-5:-3])]
    big = ["CONCAT('[', REPEAT('1,', 40000), '1]')",
           "CONCAT('{\"a\": \"', REPEAT('x', 70000), '\"}')",
           _sql("{" + ", ".join(f'"k{i}": {i * 100003}' for i in range(6000)) + "}"),
           _sql("[" + ", ".join(f'{{"i": {i}, "s": "v{i}", "f": {i}.5}}' for i in range(3000))
                + "]"),
           "CONCAT('{\"k\": [', REPEAT('\"abc\",', 20000), '\"z\"]}')",
           "JSON_ARRAY(REPEAT('é', 30000), -70000, 70000, CAST(70000 AS UNSIGNED))"]
    return [Col("j", "JSON", "json", docs), Col("js", "JSON", "json", scalars),
            Col("jb", "JSON", "json", big)]


#: a helper table whose columns give JSON values of types only a column has (TIMESTAMP, BIT,
#: BLOB, YEAR, FLOAT, ENUM/SET, zero dates)
_JSRC = ("CREATE TABLE jsrc (ts TIMESTAMP(6) NULL, b9 BIT(9), bl BLOB, y YEAR, f FLOAT, "
         "t TIME(3), d6 DATETIME(6), zd DATE, zdt DATETIME, e ENUM('x','y'), st SET('p','q'))",
         "INSERT INTO jsrc VALUES ('2024-06-01 12:34:56.654321', b'101010101', x'00ff10', 2024, "
         "1.5, '-12:34:56.789', '0001-01-01 00:00:00.000001', '0000-00-00', "
         "'2024-00-10 10:00:00', 'y', 'p,q')")


def _json_string_cols() -> list:
    """JSON values MySQL prints as strings: DATE/TIME/DATETIME/TIMESTAMP and opaque scalars
    (binary strings, BIT, BLOB) inside containers and as the whole document, and string
    documents."""
    return [Col("j", "JSON", "json", ["'\"str\"'", "'\"\"'", _sql(json.dumps("é\n\"😀")),
        "JSON_ARRAY(CAST('2024-01-02' AS DATE), CAST('-837:59:59.5' AS TIME(6)), "
        "CAST('2024-01-02 03:04:05.123456' AS DATETIME(6)), CAST('12:00:00' AS TIME), "
        "CAST('0001-01-01 00:00:00' AS DATETIME))",
        "CAST(CAST('2024-02-29' AS DATE) AS JSON)", "CAST(CAST('838:59:59' AS TIME) AS JSON)",
        "CAST(CAST('-00:00:00.000001' AS TIME(6)) AS JSON)",
        "CAST(CAST('9999-12-31 23:59:59.999999' AS DATETIME(6)) AS JSON)",
        "(SELECT JSON_ARRAY(ts, b9, bl, y, f, t, d6, zd, zdt, e, st) FROM jsrc)",
        "(SELECT JSON_OBJECT('ts', ts, 'd6', d6) FROM jsrc)",
        "(SELECT CAST(ts AS JSON) FROM jsrc)", "(SELECT CAST(b9 AS JSON) FROM jsrc)",
        "(SELECT CAST(bl AS JSON) FROM jsrc)",
        "JSON_ARRAY(UNHEX('FF00'), CAST('abc' AS BINARY), b'101', REPEAT(x'ab', 100))"])]


def _json_null_cols() -> list:
    """The JSON null literal as a column's whole document (not SQL NULL); a NOT NULL column
    given NULL in a multi-row INSERT holds MySQL's empty value, which reads as null."""
    return [Col("j", "JSON", "json", ["'null'", "CAST('null' AS JSON)", "'[null]'", "NULL"]),
            Col("jn", "JSON NOT NULL", "json", ["'1'", "NULL", "'null'"], fill="'{}'")]


def json_tables() -> list:
    """The JSON groups: ``json``, ``json-strings`` (values printed as strings), ``json-null``."""
    return [_table("json", _json_cols()), _table("json_strings", _json_string_cols(), setup=_JSRC),
            _table("json_null", _json_null_cols())]


_PAD = "p" * 300


def partial_json_table() -> Table:
    """JSON documents changed in place by JSON_SET/JSON_REPLACE/JSON_REMOVE (logged as JSON
    diffs with binlog_row_value_options=PARTIAL_JSON), one UPDATE each."""
    docs = [{"a": 1, "b": [1, 2, 3], "c": "x", "o": {"p": 1}},
            {"a": "str", "b": [], "c": None, "o": {}},
            {"a": [1], "b": [{"x": 1}, 2], "c": 1.5, "o": {"p": [1, 2]}},
            {"b": [1]}]
    j = [_sql(json.dumps(dict(d, pad=_PAD))) for d in docs] + ["NULL", _sql("[1, 2, 3]")]
    k = [_sql(json.dumps({"s": "short", "t": [1, 2, 3], "pad": _PAD}))] * 5 + ["NULL"]
    cols = [Col("j", "JSON", "json", j), Col("k", "JSON", "json", k),
            Col("n", "INT", "int", ["1", "2", "3", "4", "5", "NULL"])]
    updates = (
        (("j", "JSON_SET(j, '$.a', 2, '$.new', 'x')"),),
        (("j", "JSON_REPLACE(j, '$.b[1]', 'y', '$.o.p', JSON_ARRAY(1, 2.5, 'é'))"),
         ("n", "n + 1")),
        (("j", "JSON_REMOVE(j, '$.c', '$.b[0]')"),),
        (("j", "JSON_SET(j, '$.b[9]', 9, '$.o.q', CAST(1.25 AS DECIMAL(5,2)))"),
         ("k", "JSON_REPLACE(k, '$.s', 'a longer string than before')")),
        (("j", "JSON_SET(j, '$.\"key with space\"', JSON_OBJECT('deep', "
               "JSON_ARRAY(1, JSON_OBJECT('x', NULL))), '$.a', 'a value longer than any "
               "that was there before it')"), ("k", "JSON_REMOVE(k, '$.t[0]')")),
        (("n", "n * 2"),),
        (("j", "JSON_REPLACE(j, '$.pad', 'q', '$.b[0]', 1e300)"),),
    )
    return _table("partial_json", cols, updates=updates)


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
    elif cs == "gb18030":   # every 2-byte code; 4-byte codes of the BMP and beyond, sampled
        cands += [bytes([a, b]) for a in range(0x81, 0xFF) for b in range(0x40, 0xFF)]
        cands += [bytes([a, b, c, d]) for a in (0x81, 0x82, 0x84, 0x8F, 0x90, 0x95, 0xE3, 0xFE)
                  for b in range(0x30, 0x3A) for c in range(0x81, 0xFF, 5)
                  for d in range(0x30, 0x3A)]
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
    if k == "json":
        return f"HEX(CAST({q} AS CHAR))"
    return f"HEX({q})"   # binary, geometry, vector


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
    if k == "json":
        return json_canon(bytes.fromhex(v).decode("utf-8"))
    return bytes.fromhex(v)


def _frac(us: int, fsp: int) -> str:
    return ("." + f"{us:06d}"[:fsp]) if fsp else ""


def _tag(v):
    return ("unexpected " + type(v).__name__, repr(v)[:300])


def canon_value(col: Col, v):
    """A decoded Python value (a row image of ReplicaClient or of the file decoder) in
    canonical form; a value of the wrong type is returned tagged, so it never compares equal."""
    if v is None or v is ABSENT:
        return v
    k, t = col.kind, type(v)
    if k == "json":   # the document as MySQL prints it (a partial update: its diffs)
        return json_canon(json_to_text(v))
    if k == "vector":
        return _floats32(v) if t is list and all(type(x) is float for x in v) else _tag(v)
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


class Pairs(list):
    """A JSON object as :func:`loads_exact` returns it: its ``(key, value)`` pairs in order."""


def loads_exact(text: str):
    """JSON text with every number kept as its text (so decimals keep every digit), objects
    as :class:`Pairs`."""
    return json.loads(text, parse_float=lambda s: ("num", s), parse_int=lambda s: ("num", s),
                      object_pairs_hook=Pairs)


def _jnorm(x):
    """A :func:`loads_exact` value as a JSON column's canonical form: objects
    ``("obj", ((key, v), ...))`` in stored order, arrays ``("arr", (...))``, numbers
    ``("int", n)`` or ``("num", Decimal)`` (the value, not its text: ``1e300`` = ``1E+300``)."""
    t = type(x)
    if t is Pairs:
        return ("obj", tuple((k, _jnorm(v)) for k, v in x))
    if t is list:
        return ("arr", tuple(_jnorm(v) for v in x))
    if t is tuple:
        s = x[1]
        return ("int", int(s)) if s.lstrip("-").isdigit() else ("num", Decimal(s))
    return x


def json_canon(text: str):
    """A JSON column's canonical form from its JSON text: ``("json", document)`` (the JSON null
    literal is ``("json", None)``, never SQL NULL's ``None``)."""
    return ("json", _jnorm(loads_exact(text)))


def _image_document(v):
    """A JSON column's value in a JSON image (:func:`loads_exact`) in canonical form: the
    document, or the JSON null literal written as :data:`~cdc.values.render.JSON_NULL_IMAGE`."""
    if v == loads_exact(JSON_NULL_IMAGE):
        return ("json", None)
    return ("json", _jnorm(v))


def _jpy(c):
    """A canonical JSON value back to Python values (:func:`_jstruct` undoes it)."""
    if type(c) is tuple:
        if c[0] == "obj":
            return {k: _jpy(v) for k, v in c[1]}
        if c[0] == "arr":
            return [_jpy(v) for v in c[1]]
        return c[1]
    return c


def _jstruct(v):
    if type(v) is dict:
        return ("obj", tuple((k, _jstruct(x)) for k, x in v.items()))
    if type(v) is list:
        return ("arr", tuple(_jstruct(x) for x in v))
    if type(v) is int:
        return ("int", v)
    if type(v) is Decimal:
        return ("num", v)
    return v


_DIFF_OPS = ("replace", "insert", "remove")


def json_diffs(c):
    """The diffs of a partial JSON update in canonical form (``{"$json_diff": [...]}``, see
    :class:`cdc.values.kinds.JsonDiffs`), or None when *c* is a document."""
    if type(c) is tuple and c[0] == "json" and type(c[1]) is tuple and c[1][0] == "obj" \
            and [k for k, _ in c[1][1]] == ["$json_diff"]:
        return [dict(d[1]) for d in c[1][1][0][1][1]]
    return None


def apply_diffs(before, diffs):
    """The canonical document *before* with canonical *diffs* applied (MySQL's semantics:
    :func:`cdc.values.jsonb.apply_json_diffs`), or the error as a tagged value."""
    try:
        after = apply_json_diffs(_jpy(before[1]), [
            (_DIFF_OPS.index(d["op"]), d["path"], _jpy(d.get("value"))) for d in diffs])
    except Exception as e:   # noqa: BLE001 - reported as a wrong value
        return ("diffs do not apply", str(e))
    return ("json", _jstruct(after))


def _floats32(v) -> bytes:
    """A VECTOR's values as MySQL stores them (float32 little-endian)."""
    return struct.pack("<%df" % len(v), *v)


def canon_json(col: Col, v):
    """A value of a JSON image (parsed by :func:`loads_exact`) in canonical form."""
    if v is None or v is ABSENT:
        return v
    k = col.kind
    if k == "json":
        return _image_document(v)
    if k == "vector":
        if isinstance(v, list) and all(isinstance(x, tuple) for x in v):
            return _floats32([float(x[1]) for x in v])
        return _tag(v)
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
    if k == "json":
        return _image_document(loads_exact(v)) if t is str else _tag(v)
    if k == "vector":
        return _floats32(v) if t is list else _tag(v)
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
