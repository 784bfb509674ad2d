"""Columns as ``information_schema.COLUMNS`` describes them, built from DDL too, and compared with
TABLE_MAP events.

:class:`ServerColumn` is one column the way information_schema shows it (what
:func:`cdc.replica.metadata.read_columns` reads); :func:`server_column` builds the same record from
a column definition of a DDL statement (:class:`cdc.schema.ddl.ColumnSpec`), so the schema history
(:mod:`cdc.schema.history`) and information_schema speak one language.  :func:`shape_problems`
compares a table map with such columns: the type codes, and where both sides know it exactly the
byte length of CHAR/VARCHAR (which tells character sets apart), the length bytes of TEXT/BLOB,
DECIMAL precision and scale, fractional seconds, BIT width and ENUM/SET storage size.
"""

from __future__ import annotations

import re
from typing import NamedTuple

from cdc.binlog.constants import ColumnType as T
from cdc.binlog.files import collation_for_charset
from cdc.errors import ConfigurationError
from cdc.values.charsets import BINARY_COLLATION, DECODED_APART, charset_of
from cdc.values.types import ColumnDef, type_info

__all__ = ["ServerColumn", "CODES", "BLOB_LENGTH_BYTES", "server_column", "shape_problems",
           "charset_collation", "collation_of_name", "max_bytes_per_char", "describe_columns",
           "describe_table_map", "TEXT_TYPES", "BLOB_TYPES", "convert_column",
           "safe_charset_collation", "DEFAULT_COLLATIONS", "logged_type", "schema_types",
           "may_hide_vectors", "shown_as_utf8mb3"]

_QUOTED = re.compile(r"'((?:[^']|'')*)'")
_INT_CODES = {"tinyint": T.TINY, "smallint": T.SHORT, "mediumint": T.INT24, "int": T.LONG,
              "integer": T.LONG, "bigint": T.LONGLONG}
_TEMPORAL2 = {"time": T.TIME2, "datetime": T.DATETIME2, "timestamp": T.TIMESTAMP2}
BLOB_LENGTH_BYTES = {"tinyblob": 1, "tinytext": 1, "blob": 2, "text": 2, "mediumblob": 3,
                     "mediumtext": 3, "longblob": 4, "longtext": 4, "long": 3,
                     "long varchar": 3}
TEXT_TYPES = ("tinytext", "text", "mediumtext", "longtext")
BLOB_TYPES = ("tinyblob", "blob", "mediumblob", "longblob")
_GEOMETRIES = frozenset({"geometry", "point", "linestring", "polygon", "multipoint",
                         "multilinestring", "multipolygon", "geometrycollection",
                         "geomcollection"})
_BLOBS = frozenset({T.TINY_BLOB, T.MEDIUM_BLOB, T.LONG_BLOB, T.BLOB})
#: information_schema DATA_TYPE -> the binlog type codes (ColumnDef.real_type) it may be logged as
CODES: dict[str, frozenset] = {
    "tinyint": frozenset({T.TINY}), "smallint": frozenset({T.SHORT}),
    "mediumint": frozenset({T.INT24}), "int": frozenset({T.LONG}),
    "integer": frozenset({T.LONG}), "bigint": frozenset({T.LONGLONG}),
    "float": frozenset({T.FLOAT}), "double": frozenset({T.DOUBLE}),
    "real": frozenset({T.DOUBLE}), "double precision": frozenset({T.DOUBLE}),
    "decimal": frozenset({T.NEWDECIMAL, T.DECIMAL}),
    "numeric": frozenset({T.NEWDECIMAL, T.DECIMAL}),
    "date": frozenset({T.DATE, T.NEWDATE}), "time": frozenset({T.TIME, T.TIME2}),
    "datetime": frozenset({T.DATETIME, T.DATETIME2}),
    "timestamp": frozenset({T.TIMESTAMP, T.TIMESTAMP2}), "year": frozenset({T.YEAR}),
    "bit": frozenset({T.BIT}), "char": frozenset({T.STRING}), "binary": frozenset({T.STRING}),
    "varchar": frozenset({T.VARCHAR, T.VAR_STRING}),
    "varbinary": frozenset({T.VARCHAR, T.VAR_STRING}),
    "enum": frozenset({T.ENUM}), "set": frozenset({T.SET}),
    "json": frozenset({T.JSON}) | _BLOBS,   # MariaDB's JSON is LONGTEXT
    "vector": frozenset({T.VECTOR, T.VARCHAR, T.VAR_STRING}),   # MariaDB's: a VARBINARY
    "uuid": frozenset({T.STRING}), "inet6": frozenset({T.STRING}), "inet4": frozenset({T.STRING}),
}
for _name in BLOB_LENGTH_BYTES:
    CODES[_name] = _BLOBS
for _name in _GEOMETRIES:
    CODES[_name] = frozenset({T.GEOMETRY})

# the most bytes one character takes (MySQL's mbmaxlen); other character sets: 1
_MAXLEN = {"utf8mb4": 4, "utf8mb3": 3, "ucs2": 2, "utf16": 4, "utf16le": 4, "utf32": 4,
           "big5": 2, "gbk": 2, "sjis": 2, "cp932": 2, "euckr": 2, "gb2312": 2, "ujis": 3,
           "eucjpms": 3, "gb18030": 4}


class ServerColumn(NamedTuple):
    """One column as ``information_schema.COLUMNS`` describes it."""

    name: str
    data_type: str              # DATA_TYPE, lower case
    column_type: str            # COLUMN_TYPE, e.g. "int(10) unsigned", "enum('a','b')"
    precision: int | None       # DATETIME_PRECISION
    collation: int | None       # the collation id; 63 for binary; None: not a text column
    primary_key: bool
    numeric_precision: int | None = None
    numeric_scale: int | None = None
    octets: int | None = None   # CHARACTER_OCTET_LENGTH
    nullable: bool = True
    member_names: tuple | None = None   # ENUM/SET members read from rows (see recover_members)
    #: the DEFAULT: None (none, or NULL) or ``(kind, text)`` with kind ``str``, ``num``, ``hex``,
    #: ``bit`` (literals) or ``expr`` (see :meth:`cdc.schema.grammar.DdlParser.default_value`)
    default: tuple | None = None

    @property
    def unsigned(self) -> bool:
        return "unsigned" in self.column_type.lower()

    @property
    def members(self) -> list[str]:
        """ENUM/SET members, in definition order."""
        if self.member_names is not None:
            return list(self.member_names)
        return [v.replace("''", "'") for v in _QUOTED.findall(self.column_type)]

    def exact_members(self, defined: "ServerColumn") -> "ServerColumn":
        """This column (as the server's metadata shows it) with the ENUM/SET members of
        *defined*, the same column as its DDL statement defines it, where this one shows them
        with ``?`` for the characters utf8mb3 lacks (:func:`shown_as_utf8mb3`); itself when
        *defined* differs otherwise (another column, other members)."""
        if self.data_type not in ("enum", "set") or (self.name.lower(), self.data_type,
                                                     self.collation) != (
                defined.name.lower(), defined.data_type, defined.collation):
            return self
        shown, exact = self.members, defined.members
        if shown == exact or len(shown) != len(exact) or not all(
                shown_as_utf8mb3(s, e) for s, e in zip(shown, exact)):
            return self
        return self._replace(member_names=tuple(exact))

    @property
    def dimensions(self) -> int | None:
        """A VECTOR's dimensions (None: not a VECTOR, or not said)."""
        m = re.fullmatch(r"vector\((\d+)\)", self.column_type.strip().lower())
        return int(m.group(1)) if self.data_type == "vector" and m else None

    @property
    def charset(self) -> str | None:
        """The character set name (None: not a text column)."""
        return None if self.collation is None else charset_of(self.collation)

    def describe(self) -> str:
        """``name column_type [charset]`` for messages."""
        cs = self.charset
        text = f"{self.name} {self.column_type}"
        return text + (f" {cs}" if cs and cs != "binary" else "")

    def column_def(self, index: int) -> ColumnDef | None:
        """This column as the :class:`~cdc.values.types.ColumnDef` a TABLE_MAP with full metadata
        would describe (None: a type binlog-cdc has no column description for)."""
        dt = self.data_type
        collation = self.collation if self.collation is not None else BINARY_COLLATION
        meta = None
        if dt in _INT_CODES:
            code = _INT_CODES[dt]
        elif dt == "float":
            code, meta = T.FLOAT, 4
        elif dt in ("double", "real", "double precision"):
            code, meta = T.DOUBLE, 8
        elif dt in ("decimal", "numeric"):
            code, meta = T.NEWDECIMAL, (int(self.numeric_precision), int(self.numeric_scale or 0))
        elif dt == "date":
            code = T.DATE
        elif dt in _TEMPORAL2:
            code, meta = _TEMPORAL2[dt], int(self.precision or 0)
        elif dt == "year":
            code = T.YEAR
        elif dt == "bit":
            n = int(self.numeric_precision or 1)
            code, meta = T.BIT, (n % 8, n // 8)
        elif dt in ("char", "binary"):
            code, meta = T.STRING, (T.STRING, int(self.octets or 0) & 0xFF)
        elif dt in ("varchar", "varbinary"):
            code, meta = T.VARCHAR, int(self.octets or 0)
        elif dt in BLOB_LENGTH_BYTES:
            code, meta = T.BLOB, BLOB_LENGTH_BYTES[dt]
        elif dt in ("enum", "set"):
            code = T.ENUM if dt == "enum" else T.SET
            meta = (code, 1)
        elif dt == "json":
            code, meta = T.JSON, 4
        elif dt in _GEOMETRIES:
            code, meta = T.GEOMETRY, 4
        elif dt == "vector":
            code, meta = T.VECTOR, 4
        elif dt in ("uuid", "inet6", "inet4"):
            code, collation = T.STRING, BINARY_COLLATION
            meta = (T.STRING, 4 if dt == "inet4" else 16)
        else:
            return None
        col = ColumnDef(index, code, meta, self.nullable)
        col.name = self.name
        col.unsigned = self.unsigned
        if type_info(col.real_type).character or code in (T.ENUM, T.SET):
            col.collation = collation
        if code == T.ENUM:
            col.enum_values = self.members
        elif code == T.SET:
            col.set_values = self.members
        col.primary_key = self.primary_key
        return col


# --- character sets -------------------------------------------------------------------------------

def _norm_charset(name: str) -> str:
    n = str(name).strip().strip("'\"`").lower()
    return "utf8mb3" if n == "utf8" else n


#: each character set's default collation id (MySQL and MariaDB agree on these; MySQL 8's
#: utf8mb4 default is 255, utf8mb4_0900_ai_ci, which decodes as 45 does)
DEFAULT_COLLATIONS = {
    "big5": 1, "dec8": 3, "cp850": 4, "hp8": 6, "koi8r": 7, "latin1": 8, "latin2": 9,
    "swe7": 10, "ascii": 11, "ujis": 12, "sjis": 13, "hebrew": 16, "tis620": 18, "euckr": 19,
    "koi8u": 22, "gb2312": 24, "greek": 25, "cp1250": 26, "gbk": 28, "latin5": 30,
    "armscii8": 32, "utf8mb3": 33, "ucs2": 35, "cp866": 36, "keybcs2": 37, "macce": 38,
    "macroman": 39, "cp852": 40, "latin7": 41, "utf8mb4": 45, "cp1251": 51, "utf16": 54,
    "utf16le": 56, "cp1256": 57, "cp1257": 59, "utf32": 60, "binary": 63, "geostd8": 92,
    "cp932": 95, "eucjpms": 97, "gb18030": 248,
}


def charset_collation(charset: str, known: dict | None = None) -> int:
    """The default collation id of *charset* (``utf8`` is ``utf8mb3``): from *known* (the
    server's ``{charset or collation name: id}``, see ``SchemaHistory.collations``), else
    :data:`DEFAULT_COLLATIONS`; ConfigurationError if unknown."""
    n = _norm_charset(charset)
    if known and n in known:
        return known[n]
    hit = DEFAULT_COLLATIONS.get(n)
    return hit if hit is not None else collation_for_charset(n)


def collation_of_name(collation: str, known: dict | None = None) -> int:
    """The id of the collation *collation* (``latin1_swedish_ci``, ``utf8mb4_0900_ai_ci``,
    ``binary``): from *known* (the server's names), else its character set's default collation
    (every collation of a character set decodes alike but latin2_czech_cs, which needs the
    server's id). ConfigurationError if unknown."""
    n = str(collation).strip().strip("'\"`").lower()
    if n == "binary":
        return BINARY_COLLATION
    if known and n in known:
        return known[n]
    if n in DECODED_APART:      # the server's names not at hand (a history restored in a task)
        return DECODED_APART[n]
    cs = n.split("_", 1)[0]
    return charset_collation("utf8mb3" if cs == "utf8" else cs, known)


def max_bytes_per_char(collation: int | None) -> int:
    """MySQL's ``mbmaxlen`` of the character set of *collation* (1 for binary/unknown)."""
    return _MAXLEN.get(charset_of(collation) or "", 1)


# --- columns from DDL -----------------------------------------------------------------------------

def shown_as_utf8mb3(shown: str, exact: str) -> bool:
    """Whether *shown* is the ENUM/SET member name *exact* as MySQL's and MariaDB's metadata
    (information_schema, SHOW CREATE TABLE) keep it: in utf8mb3, each character it lacks (4-byte
    UTF-8: emoji, gb18030's 4-byte characters outside the BMP) as ``?``."""
    return len(shown) == len(exact) and all(
        s == e or (s == "?" and ord(e) > 0xFFFF) for s, e in zip(shown, exact))


def _members_sql(members) -> str:
    return ",".join("'" + m.replace("'", "''") + "'" for m in members)


def _blob_type_for(length: int, text: bool) -> str:
    """MySQL's ``get_blob_type_from_length``: the smallest TEXT/BLOB holding *length* bytes."""
    kinds = TEXT_TYPES if text else BLOB_TYPES
    if length < 256:
        return kinds[0]
    if length < 65536:
        return kinds[1]
    if length < 1 << 24:
        return kinds[2]
    return kinds[3]


def server_column(spec, collation: int | None, *, primary_key: bool = False) -> ServerColumn:
    """The :class:`ServerColumn` information_schema would show for the column definition *spec*
    (a :class:`cdc.schema.ddl.ColumnSpec` whose character set, if it has one, is already resolved
    to *collation*: the column's own, else its table's default)."""
    t = spec.type_name
    args = spec.args
    unsigned = spec.unsigned or spec.zerofill
    precision = num_prec = num_scale = octets = None
    members = None
    text_coll = None
    if t in ("char", "varchar") or t in TEXT_TYPES or t in ("enum", "set"):
        text_coll = collation
        if text_coll == BINARY_COLLATION and t not in ("enum", "set"):
            # CHAR(n) CHARACTER SET binary is BINARY(n), VARCHAR is VARBINARY, TEXT is BLOB
            t = {"char": "binary", "varchar": "varbinary"}.get(t) or \
                BLOB_TYPES[TEXT_TYPES.index(t)]
            text_coll = None
    shown = [str(a) for a in args]
    if t in ("tinyint", "smallint", "mediumint", "int", "bigint", "float", "double", "decimal",
             "year", "bit"):
        if t == "decimal":
            num_prec = int(args[0]) if args else 10
            num_scale = int(args[1]) if len(args) > 1 else 0
            shown = [str(num_prec), str(num_scale)]
        elif t == "bit":
            num_prec = int(args[0]) if args else 1
            shown = [str(num_prec)]
    elif t in ("time", "datetime", "timestamp"):
        precision = int(args[0]) if args else 0
        shown = [str(precision)] if precision else []
    elif t in ("char", "binary", "varchar", "varbinary"):
        n = int(args[0]) if args else 1
        octets = n * (max_bytes_per_char(text_coll) if text_coll is not None else 1)
        shown = [str(n)]
    elif t in TEXT_TYPES or t in BLOB_TYPES:
        if args:   # TEXT(n), BLOB(n): the smallest type holding n characters
            n = int(args[0]) * (max_bytes_per_char(text_coll) if text_coll is not None else 1)
            t = _blob_type_for(n, t in TEXT_TYPES)
        octets = (255, 65535, (1 << 24) - 1, (1 << 32) - 1)[
            (TEXT_TYPES if t in TEXT_TYPES else BLOB_TYPES).index(t)]
        shown = []
    elif t in ("enum", "set"):
        members = tuple(args)
        shown = []
    elif t == "vector":
        shown = [str(args[0])] if args else []
    ctype = t + (f"({','.join(shown)})" if shown else "")
    if members is not None:
        ctype = f"{t}({_members_sql(members)})"
    if unsigned and t in ("tinyint", "smallint", "mediumint", "int", "bigint", "float", "double",
                          "decimal"):
        ctype += " unsigned"
        if spec.zerofill:
            ctype += " zerofill"
    return ServerColumn(spec.name, t, ctype, precision, text_coll, primary_key, num_prec,
                        num_scale, octets, spec.nullable is not False and not primary_key,
                        members, getattr(spec, "default", None))


def convert_column(col: ServerColumn, collation: int) -> ServerColumn:
    """*col* after ``ALTER TABLE ... CONVERT TO CHARACTER SET`` (collation *collation*): text
    columns change character set, keeping their length in characters (TEXT types grow to the
    type that holds it: MySQL's rule); binary columns stay as they are."""
    t = col.data_type
    if col.collation is None or col.collation == BINARY_COLLATION and t not in ("enum", "set"):
        return col
    old, new = max_bytes_per_char(col.collation), max_bytes_per_char(collation)
    to_binary = collation == BINARY_COLLATION
    if t in ("char", "varchar"):
        chars = (col.octets or 0) // old
        nt = ({"char": "binary", "varchar": "varbinary"}[t]) if to_binary else t
        return col._replace(data_type=nt, column_type=f"{nt}({chars})",
                            collation=None if to_binary else collation, octets=chars * new)
    if t in TEXT_TYPES:
        chars = (col.octets or 0) // old
        nt = _blob_type_for(chars * new, not to_binary)
        octets = (255, 65535, (1 << 24) - 1, (1 << 32) - 1)[
            (TEXT_TYPES if nt in TEXT_TYPES else BLOB_TYPES).index(nt)]
        return col._replace(data_type=nt, column_type=nt,
                            collation=None if to_binary else collation, octets=octets)
    if t in ("enum", "set"):
        return col._replace(collation=collation)
    return col


# --- comparing with a table map -------------------------------------------------------------------

def _enum_pack(n: int) -> int:
    return 1 if n < 256 else 2


def _set_pack(n: int) -> int:
    length = (n + 7) // 8
    return 8 if length > 4 else length


def logged_type(c: ColumnDef) -> int:
    """The type code the binlog logged column *c* as: its ``real_type``, but a VARCHAR that
    :func:`schema_types` made a VECTOR is the VARCHAR."""
    return c.type if c.type in (T.VARCHAR, T.VAR_STRING) else c.real_type


def may_hide_vectors(tmap) -> bool:
    """Whether a column of *tmap* may be a MariaDB VECTOR, which its binlog logs as a VARBINARY
    of 4 bytes per dimension (nothing in the table map tells it from one)."""
    return tmap.mariadb and any(
        c.type in (T.VARCHAR, T.VAR_STRING) and c.collation in (None, BINARY_COLLATION)
        and c.meta and c.meta % 4 == 0 for c in tmap.columns)


def schema_types(tmap, columns) -> None:
    """Give *tmap*'s columns the types only the schema *columns* (of the same shape) know:
    a MariaDB VECTOR, logged as a VARBINARY, decodes as MySQL's VECTOR (``real_type``
    :data:`~cdc.binlog.constants.ColumnType.VECTOR`, a list of floats); a VARBINARY stays one.
    The table's decoding plans are rebuilt when a type changed."""
    changed = False
    for c, s in zip(tmap.columns, columns):
        if c.type in (T.VARCHAR, T.VAR_STRING):
            want = T.VECTOR if s.data_type == "vector" else c.type
            if c.real_type != want:
                c.real_type = want
                c.vector_dimensions = s.dimensions if want == T.VECTOR else None
                changed = True
    if changed:
        tmap.replan()


def _meta_problem(c: ColumnDef, s: ServerColumn) -> str | None:
    """Why *c*'s metadata cannot be *s*'s (None: it can), where both are exact."""
    rt, meta = logged_type(c), c.meta
    if meta is None:
        return None
    dt = s.data_type
    if rt == T.NEWDECIMAL and s.numeric_precision is not None:
        want = (s.numeric_precision, s.numeric_scale or 0)
        return None if tuple(meta) == want else f"DECIMAL{tuple(meta)} vs {s.column_type}"
    if rt in (T.TIME2, T.DATETIME2, T.TIMESTAMP2):
        return None if meta == (s.precision or 0) else f"{type_info(rt).name}({meta}) vs " \
                                                       f"{s.column_type}"
    if rt in (T.VARCHAR, T.VAR_STRING) and dt == "vector" and s.dimensions is not None:
        want = 4 * s.dimensions      # MariaDB's VECTOR(n): a VARBINARY(4n)
        return None if meta == want else f"{meta} bytes vs {s.column_type} ({want} bytes)"
    if rt in (T.VARCHAR, T.VAR_STRING) and s.octets is not None and dt in ("varchar", "varbinary"):
        return None if meta == s.octets else f"{meta} bytes vs {s.describe()} ({s.octets} bytes)"
    if rt == T.STRING and s.octets is not None and dt in ("char", "binary"):
        return None if meta[1] == s.octets else f"{meta[1]} bytes vs {s.describe()} " \
                                                f"({s.octets} bytes)"
    if rt in _BLOBS and dt in BLOB_LENGTH_BYTES:
        want = BLOB_LENGTH_BYTES[dt]
        return None if meta == want else f"a {meta}-byte-length BLOB/TEXT vs {s.column_type}"
    if rt == T.BIT and s.numeric_precision is not None:
        bits = meta[1] * 8 + meta[0]
        return None if bits == s.numeric_precision else f"BIT({bits}) vs {s.column_type}"
    if rt == T.ENUM and meta[1] != _enum_pack(len(s.members)):
        return f"an ENUM of {meta[1]} byte(s) vs {len(s.members)} members"
    if rt == T.SET and meta[1] != _set_pack(len(s.members)):
        return f"a SET of {meta[1]} byte(s) vs {len(s.members)} members"
    return None


def shape_problems(tmap, columns, *, exact: bool = True, names: bool = False) -> list[str]:
    """How the table map *tmap* disagrees with *columns* (``[]``: it does not): the column count,
    the type codes, with *exact* the lengths/precisions both know (see the module), with *names*
    the column names the table map carries."""
    if len(columns) != len(tmap.columns):
        return [f"{len(tmap.columns)} columns in the table map, {len(columns)} in the schema"]
    out = []
    for c, s in zip(tmap.columns, columns):
        codes = CODES.get(s.data_type)
        if codes is not None and logged_type(c) not in codes:
            out.append(f"column {c.index + 1}: {type_info(logged_type(c)).name} vs "
                       f"{s.describe()}")
            continue
        if names and c.name is not None and c.name != s.name:
            out.append(f"column {c.index + 1}: named {c.name!r} vs {s.name!r}")
        if exact and codes is not None:
            why = _meta_problem(c, s)
            if why:
                out.append(f"column {c.index + 1} ({s.name}): {why}")
    return out


def describe_table_map(tmap) -> str:
    """``(INT, VARCHAR(40 bytes), ...)``: a table map's shape, for messages."""
    parts = []
    for c in tmap.columns:
        rt, meta = logged_type(c), c.meta
        name = type_info(rt).name
        if rt in (T.VARCHAR, T.VAR_STRING) and meta is not None:
            name += f"({meta} bytes)"
        elif rt == T.STRING and meta is not None:
            name += f"({meta[1]} bytes)"
        elif rt == T.NEWDECIMAL and meta is not None:
            name += f"({meta[0]},{meta[1]})"
        elif rt in (T.TIME2, T.DATETIME2, T.TIMESTAMP2) and meta:
            name += f"({meta})"
        if c.name is not None:
            name = f"{c.name} {name}"
        parts.append(name)
    return "(" + ", ".join(parts) + ")"


def describe_columns(columns) -> str:
    """``(id int unsigned, name varchar(10) latin1)``: columns, for messages."""
    return "(" + ", ".join(s.describe() for s in columns) + ")"


def safe_charset_collation(charset: str | None, fallback: int | None,
                           known: dict | None = None) -> int | None:
    """:func:`charset_collation`, or *fallback* for no/unknown character set."""
    if not charset:
        return fallback
    try:
        return charset_collation(charset, known)
    except ConfigurationError:
        return fallback
