"""DDL statements of a binlog's QUERY events, parsed into what they do to tables' shapes.

:func:`parse_ddl` turns one statement into a :class:`CreateTable`, :class:`AlterTable`,
:class:`RenameTables`, :class:`DropTables`, :class:`TruncateTable`, :class:`CreateIndex`,
:class:`DropIndex`, :class:`CreateDatabase`, :class:`AlterDatabase` or :class:`DropDatabase`;
``None`` for every statement that changes no table's or database's shape (``BEGIN``, ``GRANT``,
``CREATE PROCEDURE``, ``FLUSH``, ``OPTIMIZE``, statement-based DML, ...); :class:`Unparsed` for a
table DDL it cannot read, with the tables it names.

The text is tokenized by sqlglot's MySQL tokenizer (quoting, escapes, comments); MySQL's
executable comments (``/*!50100 ... */``, MariaDB's ``/*M!100100 ... */``) are unwrapped first,
and with ``sql_mode`` ANSI_QUOTES ``"x"`` is an identifier.  The grammar itself is ours:
sqlglot's MySQL *parser* maps several column types lossily (``INT8`` to TINYINT, ``LONG`` to
BIGINT, ``REAL`` to FLOAT, no POINT/INET6/``LONG VARCHAR``/``NATIONAL CHAR``), drops column
character sets in ``CONVERT TO``, and gives up on ``RENAME TABLE`` and partition clauses, while a
schema history needs the exact type, signedness, character set and members of every column.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import NamedTuple

from cdc.schema.grammar import (CONSTRAINT_WORDS, PARTITION_OPS, TABLE_OPTIONS,
                                ColumnSpec, DdlParser)
from cdc.schema.sqltext import (TableName, Tok, Unreadable, ddl_head,
                                strip_executable_comments, tokenize)

__all__ = ["parse_ddl", "ddl_head", "ColumnSpec", "TableName", "CreateTable", "AlterTable",
           "RenameTables", "DropTables", "TruncateTable", "CreateIndex", "DropIndex",
           "CreateDatabase", "AlterDatabase", "DropDatabase", "Unparsed", "Action",
           "strip_executable_comments", "ANSI_QUOTES", "REAL_AS_FLOAT"]

#: sql_mode bits (the QUERY event's Q_SQL_MODE_CODE) that change how DDL reads
REAL_AS_FLOAT = 1 << 0
ANSI_QUOTES = 1 << 2


class Action(NamedTuple):
    """One ALTER TABLE action: ``kind`` and its arguments (see :func:`parse_ddl`)."""

    kind: str       # add, drop, modify, change, rename_column, add_pk, drop_pk, add_unique,
    #                 drop_index, rename_index, drop_constraint, rename, convert, default_charset,
    #                 set_default, unsure
    args: tuple = ()


@dataclass
class CreateTable:
    table: TableName
    columns: list = field(default_factory=list)          # ColumnSpec
    primary_key: list = field(default_factory=list)      # (column, prefix?)
    unique_keys: list = field(default_factory=list)      # (name | None, [(column, prefix?)])
    charset: str | None = None
    collation: str | None = None
    like: TableName | None = None
    if_not_exists: bool = False
    unsure: str | None = None       # why the result's shape is not known exactly


@dataclass
class AlterTable:
    table: TableName
    actions: list = field(default_factory=list)          # Action


@dataclass
class RenameTables:
    pairs: list = field(default_factory=list)            # (TableName, TableName)


@dataclass
class DropTables:
    tables: list = field(default_factory=list)
    if_exists: bool = False


@dataclass
class TruncateTable:
    table: TableName


@dataclass
class CreateIndex:
    table: TableName
    name: str
    unique: bool
    parts: list = field(default_factory=list)


@dataclass
class DropIndex:
    table: TableName
    name: str


@dataclass
class CreateDatabase:
    name: str
    charset: str | None = None
    collation: str | None = None
    if_not_exists: bool = False


@dataclass
class AlterDatabase:
    name: str | None
    charset: str | None = None
    collation: str | None = None


@dataclass
class DropDatabase:
    name: str


@dataclass
class Unparsed:
    """A table DDL that could not be read: ``reason`` and the tables it names (as far as they
    could be made out; ``[]``: none)."""

    reason: str
    tables: list = field(default_factory=list)


# --- statements -----------------------------------------------------------------------------------

def _create_table(p: DdlParser) -> CreateTable:
    if_not_exists = p.if_not_exists()
    stmt = CreateTable(p.qualified(), if_not_exists=if_not_exists)
    if p.accept("LIKE"):
        stmt.like = p.qualified()
        return stmt
    if p.is_p("(") and p.up(1) == "LIKE":
        p.i += 2
        stmt.like = p.qualified()
        p.expect_p(")")
        return stmt
    if not p.is_p("("):
        p.table_options(stmt)
        if stmt.unsure is None:
            raise Unreadable("CREATE TABLE without columns")
        return stmt
    if p.peek(1) is not None and p.up(1) == "SELECT":
        stmt.unsure = "CREATE TABLE ... SELECT"
        return stmt
    p.i += 1
    while True:
        w = p.up()
        if w in CONSTRAINT_WORDS or (w == "PERIOD" and p.up(1) == "FOR"):
            c = p.constraint() if w in ("CONSTRAINT", "PRIMARY", "UNIQUE") else p.skip_item()
            if c and c[0] == "pk":
                stmt.primary_key = c[1]
            elif c:
                stmt.unique_keys.append((c[1], c[2]))
        else:
            stmt.columns.append(p.column_def())
        if p.accept_p(")"):
            break
        p.expect_p(",")
    p.table_options(stmt)
    return stmt


def _position(p: DdlParser):
    if p.accept("FIRST"):
        return ("first", None)
    if p.accept("AFTER"):
        return ("after", p.name())
    return None


def _alter_action(p: DdlParser, actions: list, table: TableName) -> None:
    w = p.up()
    if w == "ADD":
        p.i += 1
        nxt = p.up()
        if nxt in CONSTRAINT_WORDS:
            c = p.constraint()
            if c and c[0] == "pk":
                actions.append(Action("add_pk", (c[1],)))
            elif c:
                actions.append(Action("add_unique", (c[1], c[2])))
            return
        if nxt in ("PARTITION", "SUBPARTITION"):
            p.i = len(p.t)
            return
        if nxt in ("PERIOD", "SYSTEM") and p.up(1) in ("FOR", "VERSIONING"):
            actions.append(Action("unsure", ("system versioning",)))
            p.skip_item()
            return
        p.accept("COLUMN")
        if_not_exists = p.if_not_exists()
        if p.accept_p("("):
            while True:
                actions.append(Action("add", (p.column_def(alter=True), None, if_not_exists)))
                if p.accept_p(")"):
                    return
                p.expect_p(",")
        spec = p.column_def(alter=True)
        actions.append(Action("add", (spec, _position(p), if_not_exists)))
        return
    if w == "DROP":
        p.i += 1
        if p.accept("PRIMARY", "KEY"):
            actions.append(Action("drop_pk"))
        elif p.accept("INDEX") or p.accept("KEY"):
            if_exists = p.if_exists()
            actions.append(Action("drop_index", (p.name(), if_exists)))
        elif p.accept("FOREIGN", "KEY") or p.accept("CHECK"):
            p.if_exists()
            p.name()
        elif p.accept("CONSTRAINT"):
            p.if_exists()
            actions.append(Action("drop_constraint", (p.name(),)))
        elif p.up() in ("PARTITION", "SUBPARTITION"):
            p.i = len(p.t)
        elif p.up() in ("SYSTEM", "PERIOD") and p.up(1) in ("VERSIONING", "FOR"):
            actions.append(Action("unsure", ("system versioning",)))
            p.skip_item()
        else:
            p.accept("COLUMN")
            if_exists = p.if_exists()
            actions.append(Action("drop", (p.name(), if_exists)))
            p.accept("RESTRICT") or p.accept("CASCADE")
        return
    if w == "MODIFY":
        p.i += 1
        p.accept("COLUMN")
        if_exists = p.if_exists()
        spec = p.column_def(alter=True)
        actions.append(Action("modify", (spec, _position(p), if_exists)))
        return
    if w == "CHANGE":
        p.i += 1
        p.accept("COLUMN")
        if_exists = p.if_exists()
        old = p.name()
        spec = p.column_def(alter=True)
        actions.append(Action("change", (old, spec, _position(p), if_exists)))
        return
    if w == "RENAME":
        p.i += 1
        if p.accept("COLUMN"):
            p.if_exists()
            old = p.name()
            if not p.accept("TO"):
                raise Unreadable("RENAME COLUMN without TO")
            actions.append(Action("rename_column", (old, p.name())))
        elif p.accept("INDEX") or p.accept("KEY"):
            old = p.name()
            p.accept("TO")
            actions.append(Action("rename_index", (old, p.name())))
        else:
            p.accept("TO") or p.accept("AS")
            actions.append(Action("rename", (p.qualified(),)))
        return
    if w == "ALTER":
        p.i += 1
        if p.accept("INDEX") or p.accept("KEY") or p.accept("CHECK") or p.accept("CONSTRAINT"):
            p.skip_item()
            return
        p.accept("COLUMN")
        if_exists = p.if_exists()
        name = p.name()
        if p.accept("SET", "DEFAULT"):
            actions.append(Action("set_default", (name, p.default_value(), if_exists)))
        elif p.accept("DROP", "DEFAULT"):
            actions.append(Action("set_default", (name, None, if_exists)))
        p.skip_item()       # SET VISIBLE/INVISIBLE, ...
        return
    if w == "CONVERT":
        p.i += 1
        if p.accept("TO"):
            if not p.accept_charset_words():
                raise Unreadable("CONVERT TO without CHARACTER SET")
            cs = p.charset_name()
            coll = p.charset_name() if p.accept("COLLATE") else None
            actions.append(Action("convert", (cs, coll)))
            return
        if p.accept("PARTITION"):
            p.name()
            if not p.accept("TO", "TABLE"):
                raise Unreadable("CONVERT PARTITION without TO TABLE")
            actions.append(Action("partition_to_table", (p.qualified(),)))
            return
        if p.accept("TABLE"):
            actions.append(Action("table_to_partition", (p.qualified(),)))
            p.i = len(p.t)
            return
        raise Unreadable("unknown CONVERT")
    if w in PARTITION_OPS and (w == "PARTITION" or p.up(1) in ("PARTITION", "PARTITIONING",
                                                                 "SUBPARTITION")):
        p.i = len(p.t)
        return
    # table options (ENGINE=..., DEFAULT CHARSET=..., ALGORITHM=..., FORCE, ...)
    start = p.i
    _alter_option(p, actions)
    if p.i == start:
        raise Unreadable(f"unknown ALTER TABLE action {p._where()}")


_ACTION_WORDS = frozenset({"ADD", "DROP", "MODIFY", "CHANGE", "RENAME", "ALTER", "CONVERT",
                           "ALGORITHM", "LOCK", "FORCE", "ENGINE", "DEFAULT", "CHARACTER",
                           "CHARSET", "COLLATE", "ORDER", "COMMENT", "AUTO_INCREMENT"})


def _alter_option(p: DdlParser, actions: list) -> None:
    """One table option of an ALTER TABLE (up to the next comma)."""
    w = p.up()
    p.accept("DEFAULT")
    if p.accept_charset_words():
        cs = p.charset_name()
        coll = p.charset_name() if p.accept("COLLATE") else None
        actions.append(Action("default_charset", (cs, coll)))
        return
    if p.accept("COLLATE"):
        actions.append(Action("default_charset", (None, p.charset_name())))
        return
    if p.accept("ORDER", "BY"):
        while True:
            p.name()
            p.accept("ASC") or p.accept("DESC")
            if not (p.is_p(",") and p.peek(1) is not None and p.peek(1).kind in ("w", "i")
                    and p.up(1) not in _ACTION_WORDS):
                return
            p.i += 1
    if w in TABLE_OPTIONS:
        p.i += 1
        p.skip_item()


def _alter_table(p: DdlParser) -> AlterTable:
    p.if_exists()
    stmt = AlterTable(p.qualified())
    if p.accept("WAIT"):
        p.number()
    p.accept("NOWAIT")
    while not p.at_end():
        if p.up() in ("PARTITION", "SUBPARTITION") and p.up(1) == "BY":
            break
        _alter_action(p, stmt.actions, stmt.table)
        if not p.accept_p(","):
            if p.up() in ("PARTITION", "SUBPARTITION") or p.at_end():
                break
            raise Unreadable(f"unexpected {p._where()} after an ALTER TABLE action")
    return stmt


def _names_list(p: DdlParser) -> list:
    out = [p.qualified()]
    while p.accept_p(","):
        out.append(p.qualified())
    return out


def _database_options(p: DdlParser, stmt) -> None:
    while not p.at_end():
        p.accept("DEFAULT")
        if p.accept_charset_words():
            stmt.charset = p.charset_name()
        elif p.accept("COLLATE"):
            stmt.collation = p.charset_name()
        elif p.up() in ("ENCRYPTION", "COMMENT", "READ"):
            p.i += 1
            p.accept("ONLY")
            p.skip_value()
        else:
            raise Unreadable(f"unexpected {p._where()} among the database options")


def _statement(p: DdlParser, head: str):
    p.i = 1
    if head == "CREATE":
        p.accept("OR", "REPLACE")
        if p.accept("TEMPORARY"):
            return None
        if p.accept("TABLE"):
            return _create_table(p)
        unique = p.accept("UNIQUE")
        if not unique and (p.accept("FULLTEXT") or p.accept("SPATIAL")):
            if not p.up() == "INDEX":
                return None
        if p.accept("INDEX"):
            p.if_not_exists()
            name = p.name()
            if p.accept("USING") or p.accept("TYPE"):
                p.name()
            if not p.accept("ON"):
                raise Unreadable("CREATE INDEX without ON")
            table = p.qualified()
            return CreateIndex(table, name, unique, p.key_parts())
        if p.accept("DATABASE") or p.accept("SCHEMA"):
            ine = p.if_not_exists()
            stmt = CreateDatabase(p.name(), if_not_exists=ine)
            _database_options(p, stmt)
            return stmt
        return None     # VIEW, PROCEDURE, FUNCTION, TRIGGER, EVENT, USER, ROLE, SEQUENCE...
    if head == "ALTER":
        p.accept("ONLINE")
        p.accept("IGNORE")
        if p.accept("TABLE"):
            return _alter_table(p)
        if p.accept("DATABASE") or p.accept("SCHEMA"):
            name = None
            if p.up() not in ("DEFAULT", "CHARACTER", "CHARSET", "COLLATE", "CHAR", "READ",
                              "ENCRYPTION", "COMMENT"):
                name = p.name()
                if p.up() == "UPGRADE":
                    return None
            stmt = AlterDatabase(name)
            _database_options(p, stmt)
            return stmt
        return None     # ALTER USER/VIEW/EVENT/PROCEDURE/SERVER/SEQUENCE/INSTANCE...
    if head == "DROP":
        if p.accept("TEMPORARY"):
            return None
        if p.accept("TABLE") or p.accept("TABLES"):
            ie = p.if_exists()
            names = _names_list(p)
            return DropTables(names, ie)
        if p.accept("INDEX"):
            p.if_exists()
            name = p.name()
            if not p.accept("ON"):
                raise Unreadable("DROP INDEX without ON")
            return DropIndex(p.qualified(), name)
        if p.accept("DATABASE") or p.accept("SCHEMA"):
            p.if_exists()
            return DropDatabase(p.name())
        return None
    if head == "RENAME":
        if not (p.accept("TABLE") or p.accept("TABLES")):
            return None     # RENAME USER
        p.if_exists()
        stmt = RenameTables()
        while True:
            old = p.qualified()
            if p.accept("WAIT"):
                p.number()
            p.accept("NOWAIT")
            if not p.accept("TO"):
                raise Unreadable("RENAME TABLE without TO")
            stmt.pairs.append((old, p.qualified()))
            if not p.accept_p(","):
                return stmt
    if head == "TRUNCATE":
        p.accept("TABLE")
        return TruncateTable(p.qualified())
    return None


def _named_tables(toks: list[Tok], head: str) -> list:
    """The tables a table DDL names, as far as its tokens show (for a statement that did not
    parse): after TABLE/TABLES [IF [NOT] EXISTS], after ON (CREATE/DROP INDEX), around TO."""
    out = []
    p = DdlParser(toks, real_as_float=False, mariadb=True)
    while p.i < len(toks):
        w = p.up()
        p.i += 1
        if w in ("TABLE", "TABLES", "ON", "TO") or (head == "TRUNCATE" and p.i == 1):
            p.accept("IF", "NOT", "EXISTS") or p.accept("IF", "EXISTS")
            try:
                out.append(p.qualified())
                while head in ("DROP", "RENAME") and p.accept_p(","):
                    out.append(p.qualified())
            except Unreadable:
                pass
    return out


_TABLE_WORDS = re.compile(r"\b(?:TABLES?|ON|TO)\s+(?:IF\s+(?:NOT\s+)?EXISTS\s+)?"
                          r"((?:`[^`]+`|\w+)(?:\s*\.\s*(?:`[^`]+`|\w+))?)", re.I)


def _regex_tables(sql: str) -> list:
    out = []
    for m in _TABLE_WORDS.finditer(sql):
        parts = [x.strip().strip("`") for x in m.group(1).split(".")]
        out.append(TableName(parts[0], parts[1]) if len(parts) == 2 else TableName(None, parts[0]))
    return out


def _is_table_ddl(toks: list[Tok], head: str) -> bool:
    """Whether a statement starting with *head* is about tables (not a view, procedure...)."""
    words = [t.up for t in toks[1:6]]
    if head in ("TRUNCATE",):
        return True
    if head == "RENAME":
        return bool(words) and words[0] in ("TABLE", "TABLES")
    for w in words:
        if w in ("TABLE", "TABLES", "INDEX"):
            return True
        if w not in ("OR", "REPLACE", "ONLINE", "IGNORE", "UNIQUE", "FULLTEXT", "SPATIAL"):
            return False
    return False


def parse_ddl(sql: str, *, ansi_quotes: bool = False, real_as_float: bool = False,
              mariadb: bool = True, version: int | None = None):
    """What the statement *sql* does to tables' shapes (see the module); None: nothing.

    :param ansi_quotes: the statement's sql_mode has ANSI_QUOTES (``"x"`` is a name).
    :param real_as_float: sql_mode REAL_AS_FLOAT (``REAL`` is FLOAT, not DOUBLE).
    :param mariadb: the server is MariaDB (``JSON`` is LONGTEXT; ``/*M!...*/`` runs).
    :param version: the server version as ``100611`` (executable comments above it are dropped).
    """
    head = ddl_head(sql)
    if head is None:
        return None
    text = strip_executable_comments(sql, version, mariadb=mariadb)
    try:
        toks = tokenize(text, ansi_quotes)
    except Exception as e:      # sqlglot's TokenError: an unterminated string or comment
        if head == "TRUNCATE" or re.match(r"\s*(?:ALTER|CREATE|DROP|RENAME)\b.*?\bTABLES?\b",
                                          text, re.I | re.S):
            return Unparsed(f"the statement does not tokenize ({e})", _regex_tables(text))
        return None
    if not toks or toks[0].up != head:
        return None
    p = DdlParser(toks, real_as_float=real_as_float, mariadb=mariadb)
    try:
        return _statement(p, head)
    except Exception as e:      # Unreadable; anything else is a grammar gap, reported alike
        reason = str(e) if isinstance(e, Unreadable) else f"{type(e).__name__}: {e}"
        if not _is_table_ddl(toks, head):
            return None
        return Unparsed(reason, _named_tables(toks, head))
