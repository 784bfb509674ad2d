"""Column definitions, keys and table options of CREATE/ALTER TABLE (:class:`DdlParser`), into
:class:`ColumnSpec` records: each column's type as MySQL stores it (``INT8`` is BIGINT,
``BOOL`` TINYINT(1), ``LONG`` MEDIUMTEXT, ``NATIONAL CHAR`` utf8mb3, MariaDB's ``JSON`` LONGTEXT
utf8mb4_bin...), signedness, character set/collation as written, nullability and keys."""

from __future__ import annotations

from dataclasses import dataclass

from cdc.schema.sqltext import TokenParser, Unreadable

__all__ = ["ColumnSpec", "DdlParser", "CONSTRAINT_WORDS", "TABLE_OPTIONS", "PARTITION_OPS"]


@dataclass
class ColumnSpec:
    """One column definition: its type as MySQL would store it and the attributes that matter."""

    name: str
    type_name: str                  # information_schema DATA_TYPE: "int", "varchar", "enum"...
    args: tuple = ()                # lengths/precision/scale, or ENUM/SET members
    unsigned: bool = False
    zerofill: bool = False
    charset: str | None = None
    collation: str | None = None
    nullable: bool | None = None    # None: not said
    primary_key: bool = False
    unique: bool = False
    default: tuple | None = None    # DEFAULT (kind, text): see DdlParser.default_value; None:
    #                                 no DEFAULT clause, or DEFAULT NULL


CONSTRAINT_WORDS = frozenset({"CONSTRAINT", "PRIMARY", "UNIQUE", "INDEX", "KEY", "FULLTEXT",
                              "SPATIAL", "FOREIGN", "CHECK"})
# table options a CREATE/ALTER TABLE may carry that change no column
TABLE_OPTIONS = frozenset({
    "ENGINE", "TYPE", "AUTO_INCREMENT", "AVG_ROW_LENGTH", "CHECKSUM", "TABLE_CHECKSUM", "COMMENT",
    "COMPRESSION", "CONNECTION", "DATA", "INDEX", "DELAY_KEY_WRITE", "ENCRYPTION", "ENCRYPTED",
    "ENCRYPTION_KEY_ID", "ENGINE_ATTRIBUTE", "SECONDARY_ENGINE_ATTRIBUTE", "INSERT_METHOD",
    "KEY_BLOCK_SIZE", "MAX_ROWS", "MIN_ROWS", "PACK_KEYS", "PASSWORD", "ROW_FORMAT",
    "STATS_AUTO_RECALC", "STATS_PERSISTENT", "STATS_SAMPLE_PAGES", "TABLESPACE", "UNION",
    "PAGE_CHECKSUM", "PAGE_COMPRESSED", "PAGE_COMPRESSION_LEVEL", "TRANSACTIONAL", "IETF_QUOTES",
    "SEQUENCE", "AUTOEXTEND_SIZE", "STORAGE", "SECONDARY_ENGINE", "START", "ALGORITHM", "LOCK",
    "FORCE", "ENABLE", "DISABLE", "ORDER", "WITH", "WITHOUT", "DISCARD", "IMPORT", "UPGRADE",
    "NOWAIT", "WAIT", "ONLINE", "VALIDATION"})
PARTITION_OPS = frozenset({"PARTITION", "PARTITIONS", "COALESCE", "REORGANIZE", "EXCHANGE",
                           "ANALYZE", "CHECK", "OPTIMIZE", "REBUILD", "REPAIR", "REMOVE",
                           "TRUNCATE", "SUBPARTITION"})

# type name (upper) -> information_schema DATA_TYPE
_SIMPLE_TYPES = {
    "TINYINT": "tinyint", "INT1": "tinyint", "SMALLINT": "smallint", "INT2": "smallint",
    "MEDIUMINT": "mediumint", "INT3": "mediumint", "MIDDLEINT": "mediumint", "INT": "int",
    "INTEGER": "int", "INT4": "int", "BIGINT": "bigint", "INT8": "bigint", "FLOAT4": "float",
    "FLOAT8": "double", "DECIMAL": "decimal", "DEC": "decimal", "NUMERIC": "decimal",
    "FIXED": "decimal", "BIT": "bit", "DATE": "date", "YEAR": "year", "TIME": "time",
    "DATETIME": "datetime", "TIMESTAMP": "timestamp", "VARCHAR": "varchar",
    "VARCHARACTER": "varchar", "NVARCHAR": "varchar", "VARBINARY": "varbinary",
    "TINYTEXT": "tinytext", "TEXT": "text", "MEDIUMTEXT": "mediumtext", "LONGTEXT": "longtext",
    "TINYBLOB": "tinyblob", "BLOB": "blob", "MEDIUMBLOB": "mediumblob", "LONGBLOB": "longblob",
    "JSON": "json", "ENUM": "enum", "SET": "set", "GEOMETRY": "geometry", "POINT": "point",
    "LINESTRING": "linestring", "POLYGON": "polygon", "MULTIPOINT": "multipoint",
    "MULTILINESTRING": "multilinestring", "MULTIPOLYGON": "multipolygon",
    "GEOMETRYCOLLECTION": "geometrycollection", "GEOMCOLLECTION": "geomcollection",
    "UUID": "uuid", "INET4": "inet4", "INET6": "inet6", "VECTOR": "vector",
}
_NATIONAL = "utf8mb3"


class DdlParser(TokenParser):
    """The column, key and table-option grammar (see the module)."""

    # -- types
    def type_args(self, strings: bool) -> tuple:
        if not self.is_p("("):
            return ()
        self.i += 1
        out: list = []
        while True:
            tok = self.peek()
            if tok is None:
                raise Unreadable("unbalanced parentheses in a type")
            if strings:
                if tok.kind != "s":
                    raise Unreadable(f"ENUM/SET members must be strings, not {tok.text!r}")
                self.i += 1
                out.append(tok.text)
            else:
                out.append(self.number())
            if self.accept_p(")"):
                return tuple(out)
            self.expect_p(",")

    def column_type(self, spec: ColumnSpec) -> None:
        w = self.up()
        tok = self.peek()
        if tok is None or tok.kind != "w":
            raise Unreadable(f"expected a column type at {self._where()}")
        self.i += 1
        charset = None
        t = None
        args: tuple = ()
        if w in ("BOOL", "BOOLEAN"):
            t, args = "tinyint", (1,)
        elif w == "SERIAL":
            t, spec.unsigned, spec.nullable, spec.unique = "bigint", True, False, True
        elif w in ("FLOAT", "REAL", "DOUBLE"):
            if w == "DOUBLE":
                self.accept("PRECISION")
            args = self.type_args(False)
            if w == "FLOAT":
                t = "double" if len(args) == 1 and args[0] > 24 else "float"
                if len(args) == 1:
                    args = ()
            else:
                t = "float" if w == "REAL" and self.real_as_float else "double"
        elif w in ("CHAR", "CHARACTER", "NCHAR", "NATIONAL"):
            if w == "NATIONAL":
                if not (self.accept("CHAR") or self.accept("CHARACTER") or self.up() == "VARCHAR"):
                    raise Unreadable("NATIONAL must be followed by CHAR or VARCHAR")
                charset = _NATIONAL
            elif w == "NCHAR":
                charset = _NATIONAL
            if self.accept("VARYING") or self.accept("VARCHAR") or self.accept("VARCHARACTER"):
                t = "varchar"
            else:
                t = "char"
            args = self.type_args(False)
            if t == "char" and self.accept("BYTE"):
                t = "binary"
        elif w == "NVARCHAR":
            t, charset = "varchar", _NATIONAL
            args = self.type_args(False)
        elif w == "BINARY":
            t = "varbinary" if self.accept("VARYING") else "binary"
            args = self.type_args(False)
        elif w == "LONG":
            if self.accept("VARBINARY") or self.accept("BINARY", "VARYING"):
                t = "mediumblob"
            else:
                self.accept("VARCHAR") or self.accept("CHAR", "VARYING") or \
                    self.accept("CHARACTER", "VARYING")
                t = "mediumtext"
        elif w in _SIMPLE_TYPES:
            t = _SIMPLE_TYPES[w]
            args = self.type_args(t in ("enum", "set"))
            if t == "varchar" and w == "NVARCHAR":
                charset = _NATIONAL
        else:
            raise Unreadable(f"unknown column type {tok.text!r}")
        if t == "json" and self.mariadb:
            t, charset, spec.collation = "longtext", "utf8mb4", "utf8mb4_bin"
        spec.type_name, spec.args = t, args
        if charset:
            spec.charset = charset
        self.type_attributes(spec)

    def charset_name(self) -> str:
        self.accept_p("=")
        if self.accept("DEFAULT"):
            return "DEFAULT"
        return self.text_value()

    def accept_charset_words(self) -> bool:
        return self.accept("CHARACTER", "SET") or self.accept("CHARSET") or \
            self.accept("CHAR", "SET")

    def type_attributes(self, spec: ColumnSpec) -> None:
        while True:
            w = self.up()
            if w == "UNSIGNED":
                spec.unsigned = True
            elif w == "SIGNED":
                pass
            elif w == "ZEROFILL":
                spec.zerofill = spec.unsigned = True
            elif w == "BINARY":
                spec.collation = spec.collation or "_bin"
            elif w == "ASCII":
                spec.charset = "latin1"
            elif w == "UNICODE":
                spec.charset = "ucs2"
            elif w == "BYTE" and spec.type_name in ("char", "varchar"):
                spec.charset = "binary"
            elif self.accept_charset_words():
                spec.charset = self.charset_name()
                continue
            elif w == "COLLATE":
                self.i += 1
                spec.collation = self.charset_name()
                continue
            else:
                return
            self.i += 1

    # -- DEFAULT values
    def default_value(self) -> tuple | None:
        """The value after ``DEFAULT``: None for NULL, else ``(kind, text)`` -- ``("str",
        text)`` a string literal (introducer, concatenation and N'' read), ``("num", text)`` a
        number (sign included; TRUE/FALSE are 1/0), ``("hex", digits)``, ``("bit", digits)``,
        or ``("expr", text)`` an expression whose per-row value is not known here
        (``CURRENT_TIMESTAMP``, ``NOW(3)``, ``(expr)``, ``NEXT VALUE FOR s``...)."""
        start = self.i
        self.accept_p("=")
        sign = ""
        while self.is_p("-") or self.is_p("+"):
            if self.peek().text == "-":
                sign = "" if sign else "-"
            self.i += 1
        tok = self.peek()
        if tok is not None and not sign and tok.kind == "w" and tok.text.startswith("_") and \
                self.peek(1) is not None and self.peek(1).kind in ("s", "x", "b"):
            self.i += 1         # _utf8mb4'x', _binary 0x41
            tok = self.peek()
        literal = None
        if tok is None:
            raise Unreadable("a DEFAULT value is missing")
        if tok.kind in ("s", "v") and not sign:
            self.i += 1
            text = tok.text
            while self.peek() is not None and self.peek().kind == "s":
                text += self.peek().text        # 'a' 'b' is 'ab'
                self.i += 1
            literal = ("str", text)
        elif tok.kind == "n":
            self.i += 1
            literal = ("num", sign + tok.text)
        elif tok.kind in ("x", "b") and not sign:
            self.i += 1
            literal = ("hex" if tok.kind == "x" else "bit", tok.text)
        elif tok.kind == "w" and tok.up in ("NULL", "TRUE", "FALSE") and not sign and \
                not self.is_p("(", 1):
            self.i += 1
            literal = None if tok.up == "NULL" else ("num", "1" if tok.up == "TRUE" else "0")
        if literal is not None or (tok.kind == "w" and tok.up == "NULL" and self.i > start):
            if self.at_end() or self.is_p(",") or self.is_p(")") or \
                    self.peek().kind == "w":    # the next attribute: the literal stands alone
                return literal
        # an expression: skip it, keep its text
        self.i = start
        self.skip_value()
        return ("expr", " ".join(t.text for t in self.t[start:self.i]).lstrip("= "))

    # -- column definitions
    def column_def(self, *, alter: bool = False) -> ColumnSpec:
        spec = ColumnSpec(self.name(), "")
        self.column_type(spec)
        while not self.at_end() and not self.is_p(",") and not self.is_p(")"):
            w = self.up()
            if alter and w in ("FIRST", "AFTER"):
                break
            if alter and w == "PARTITION":
                break
            if self.accept("NOT", "NULL"):
                spec.nullable = False
            elif self.accept("NULL"):
                spec.nullable = True
            elif self.accept("PRIMARY", "KEY") or self.accept("KEY"):
                spec.primary_key = True
            elif self.accept("UNIQUE"):
                self.accept("KEY")
                spec.unique = True
            elif self.accept("DEFAULT"):
                spec.default = self.default_value()
            elif self.accept("SERIAL", "DEFAULT", "VALUE"):
                spec.nullable, spec.unique = False, True
            elif w == "COLLATE":
                self.i += 1
                spec.collation = self.charset_name()
            elif self.accept_charset_words():
                spec.charset = self.charset_name()
            elif self.accept("ON", "UPDATE"):
                self.skip_value()
            elif w == "COMPRESSED":         # MariaDB: COMPRESSED[=zlib]
                self.i += 1
                if self.is_p("="):
                    self.skip_value()
            elif w in ("COMMENT", "COLUMN_FORMAT", "STORAGE", "SRID", "ENGINE_ATTRIBUTE",
                       "SECONDARY_ENGINE_ATTRIBUTE"):
                self.i += 1
                self.skip_value()
            elif w == "REFERENCES":
                self.i += 1
                self.qualified()
                while not self.at_end() and not self.is_p(",") and not self.is_p(")"):
                    if self.is_p("("):
                        self.skip_group()
                    elif self.up() in ("MATCH", "ON", "DELETE", "UPDATE", "CASCADE", "RESTRICT",
                                       "SET", "NULL", "NO", "ACTION", "DEFAULT", "FULL",
                                       "PARTIAL", "SIMPLE"):
                        self.i += 1
                    else:
                        break
            elif w == "CONSTRAINT":
                self.i += 1
                if self.up() != "CHECK":
                    self.name()
            elif w == "CHECK":
                self.i += 1
                self.skip_group()
            elif w in ("GENERATED", "AS"):
                self.accept("GENERATED", "ALWAYS") or self.accept("GENERATED", "BY", "DEFAULT")
                self.accept("AS")
                if self.is_p("("):
                    self.skip_group()
                elif self.accept("ROW", "START") or self.accept("ROW", "END"):
                    pass
                else:
                    raise Unreadable(f"unexpected {self._where()} in a generated column")
            elif w in ("AUTO_INCREMENT", "VIRTUAL", "STORED", "PERSISTENT", "INVISIBLE",
                       "VISIBLE", "ENFORCED", "FIXED", "DYNAMIC", "DISK", "MEMORY"):
                self.i += 1
            elif self.accept("WITH", "SYSTEM", "VERSIONING") or \
                    self.accept("WITHOUT", "SYSTEM", "VERSIONING") or \
                    self.accept("NOT", "ENFORCED"):
                pass
            else:
                raise Unreadable(f"unexpected {self._where()} in the definition of column "
                                  f"{spec.name!r}")
        return spec

    def key_parts(self) -> list:
        """``(col, col(10) DESC, (expr))`` -> [(column, prefix?)]; expressions are left out."""
        self.expect_p("(")
        parts = []
        while True:
            if self.is_p("("):
                self.skip_group()
            else:
                col = self.name()
                prefix = False
                if self.is_p("("):
                    self.skip_group()
                    prefix = True
                parts.append((col, prefix))
            self.accept("ASC") or self.accept("DESC")
            if self.accept_p(")"):
                return parts
            self.expect_p(",")

    def index_head(self) -> str | None:
        """``[INDEX|KEY] [IF NOT EXISTS] [name] [USING x]`` before the key parts: the name."""
        self.accept("INDEX") or self.accept("KEY")
        self.if_not_exists()
        name = None
        if not self.is_p("(") and self.up() != "USING":
            name = self.name()
        if self.accept("USING") or self.accept("TYPE"):
            self.name()
        return name

    def constraint(self):
        """A table constraint of a CREATE TABLE or ADD: ('pk', parts) / ('unique', name, parts)
        / None (a key or check that changes nothing we track)."""
        symbol = None
        if self.accept("CONSTRAINT"):
            if self.up() not in ("PRIMARY", "UNIQUE", "FOREIGN", "CHECK"):
                symbol = self.name()
        if self.accept("PRIMARY", "KEY"):
            if self.accept("USING") or self.accept("TYPE"):
                self.name()
            parts = self.key_parts()
            self.skip_item()
            return ("pk", parts)
        if self.accept("UNIQUE"):
            name = self.index_head() or symbol
            parts = self.key_parts()
            self.skip_item()
            return ("unique", name, parts)
        self.skip_item()
        return None

    def table_options(self, create: CreateTable) -> None:
        """CREATE TABLE options up to the end, a partition clause or a SELECT."""
        while not self.at_end():
            if self.accept_p(","):
                continue
            w = self.up()
            if w in ("PARTITION", "SUBPARTITION"):
                self.i = len(self.t)
                return
            if self.accept("WITH", "SYSTEM", "VERSIONING"):
                create.unsure = "a system-versioned table (its row_start/row_end columns)"
                continue
            if w in ("SELECT", "AS", "IGNORE", "REPLACE") or self.is_p("("):
                create.unsure = "CREATE TABLE ... SELECT"
                self.i = len(self.t)
                return
            self.accept("DEFAULT")
            if self.accept_charset_words():
                create.charset = self.charset_name()
                continue
            if self.accept("COLLATE"):
                create.collation = self.charset_name()
                continue
            if w in TABLE_OPTIONS:
                self.i += 1
                if w in ("DATA", "INDEX"):
                    self.accept("DIRECTORY")
                self.skip_value()
                continue
            raise Unreadable(f"unexpected {self._where()} among the table options")
