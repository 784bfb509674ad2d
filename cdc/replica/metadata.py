"""What a TABLE_MAP lacks, from the server's ``information_schema``.

Without ``binlog_row_metadata=FULL`` (MySQL 5.x; MariaDB's default ``NO_LOG``; MySQL 8's default
``MINIMAL``) a TABLE_MAP carries column types only: no names, no character sets (CHAR/VARCHAR/
TEXT would decode as bytes), no signedness, no ENUM/SET members, no primary key -- and MariaDB's
pre-5.6 TIMESTAMP(n)/DATETIME(n)/TIME(n) (``mysql56_temporal_format=OFF``) no precision, without
which their values cannot even be sized.  A live stream asks ``information_schema.COLUMNS`` of
that table instead, once per table and table-map shape (a new shape -- after an ALTER -- reads
it again), and checks the answer against the table map's column count and type codes: a table
that has changed since the binlog was written is a :class:`~cdc.errors.SchemaError`, never
wrongly decoded values.  A table information_schema does not show (dropped since, no
privilege) gets the default character set of binlog files
(:data:`cdc.binlog.files.DEFAULT_CHARSET`) and a warning.

With a schema history (:mod:`cdc.schema`, the default of
:class:`~cdc.replica.client.ReplicaClient`), the table's shape at the table map's position is
used instead of today's: seeded from information_schema when the stream starts
(:mod:`cdc.replica.seeding`), then following the binlog's DDL -- see :class:`TableMetadata`.

:class:`TableMetadata` is what :class:`~cdc.replica.client.ReplicaClient` uses;
:func:`read_columns` and :func:`complete_table_map` are the two halves.
"""

from __future__ import annotations

import logging
import re
from typing import Callable

from cdc.binlog.constants import ColumnType as T
from cdc.binlog.files import (DEFAULT_CHARSET, apply_default_charset, charset_columns,
                              collation_for_charset)
from cdc.errors import CdcError, ConfigurationError, SchemaError, is_transient
from cdc.replica.server import is_mariadb, parse_server_version
from cdc.schema.columns import (CODES, ServerColumn, describe_columns, describe_table_map,
                                logged_type, may_hide_vectors, schema_types, shape_problems)
from cdc.schema.history import Unknown
from cdc.schema.sqltext import ddl_head
from cdc.schema.tables import TableSchema
from cdc.values.charsets import BINARY_COLLATION, charset_of, mysql_collation
from cdc.values.types import type_info

__all__ = ["COLUMNS_SQL", "ServerColumn", "read_columns", "server_column", "recover_members",
           "needs_metadata", "server_default", "complete_table_map", "check_shape", "TableMetadata", "RESEED_HINT"]

log = logging.getLogger("cdc.replica")

COLUMNS_SQL = (
    "SELECT c.COLUMN_NAME, c.DATA_TYPE, c.COLUMN_TYPE, c.DATETIME_PRECISION, "
    "c.CHARACTER_SET_NAME, c.COLUMN_KEY, "
    "(SELECT MIN(co.ID) FROM information_schema.COLLATIONS co "
    " WHERE co.COLLATION_NAME = c.COLLATION_NAME), "
    "c.NUMERIC_PRECISION, c.NUMERIC_SCALE, c.CHARACTER_OCTET_LENGTH, c.IS_NULLABLE, "
    "c.COLUMN_DEFAULT, c.EXTRA, VERSION() "
    "FROM information_schema.COLUMNS c WHERE c.TABLE_SCHEMA = %s AND c.TABLE_NAME = %s "
    "ORDER BY c.ORDINAL_POSITION")

_OLD_TEMPORAL = frozenset({T.TIME, T.DATETIME, T.TIMESTAMP})

def server_column(row) -> ServerColumn:
    """A :data:`COLUMNS_SQL` row as a :class:`ServerColumn`."""
    name, dt, ctype, dt_prec, charset, key, coll_id, *more = row
    num_prec, num_scale, octets, nullable, default, extra, version = (list(more) + [None] * 7)[:7]
    if charset is None:
        collation = None
    elif str(charset).lower() == "binary":
        collation = BINARY_COLLATION
    elif coll_id is not None:
        collation = int(coll_id)
    else:
        try:
            collation = collation_for_charset(str(charset))
        except ConfigurationError:
            collation = None
    if version is not None and not is_mariadb(version):   # as a MySQL table map gives it
        collation = mysql_collation(collation)
    if isinstance(ctype, bytes):
        ctype = ctype.decode("utf-8", "replace")
    return ServerColumn(str(name), str(dt).lower(), str(ctype),
                        None if dt_prec is None else int(dt_prec), collation,
                        str(key or "").upper() == "PRI",
                        None if num_prec is None else int(num_prec),
                        None if num_scale is None else int(num_scale),
                        None if octets is None else int(octets),
                        str(nullable or "YES").upper() == "YES", None,
                        server_default(default, extra, version, str(dt).lower()))


_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


def server_default(text, extra=None, version=None, data_type: str = "") -> tuple | None:
    """``information_schema.COLUMNS.COLUMN_DEFAULT`` as :attr:`ServerColumn.default`. MariaDB
    (10.2.7+) quotes string literals and shows NULL as ``NULL``, an expression as its text
    (``current_timestamp()``); MySQL shows literals unquoted and marks expressions
    ``DEFAULT_GENERATED`` in EXTRA (``CURRENT_TIMESTAMP`` before 8.0.13)."""
    if text is None:
        return None
    text = _text(text)
    extra = _text(extra or "")
    if is_mariadb(version):
        if text == "NULL":
            return None
        if len(text) >= 2 and text[0] == "'" and text[-1] == "'":
            return ("str", text[1:-1].replace("''", "'").replace("\\\\", "\\"))
        if _NUMBER.fullmatch(text):
            return ("num", text)
        if text.startswith("b'") and text.endswith("'"):
            return ("bit", text[2:-1])
        return ("expr", text)
    if "DEFAULT_GENERATED" in extra.upper() or text.upper().startswith("CURRENT_TIMESTAMP"):
        return ("expr", text)
    if data_type == "bit" and text.startswith("b'") and text.endswith("'"):
        return ("bit", text[2:-1])
    if text.lower().startswith("0x") and data_type in ("binary", "varbinary", "blob", "tinyblob",
                                                      "mediumblob", "longblob", "bit"):
        return ("hex", text[2:])
    if _NUMBER.fullmatch(text) and data_type not in ("char", "varchar", "tinytext", "text",
                                                    "mediumtext", "longtext", "enum", "set"):
        return ("num", text)
    return ("str", text)


def read_columns(query: Callable, schema: str, table: str) -> list[ServerColumn]:
    """The columns of ``schema.table`` from information_schema (``[]``: not visible), ENUM/SET
    members the server's metadata garbled recovered from the server's values
    (:func:`recover_members`).  What every reader of one table's columns goes through."""
    rows = list(query(COLUMNS_SQL, (schema, table)))
    out = [server_column(row) for row in rows]
    return recover_members(query, schema, table, out, rows[-1][-1] if rows else "")


# --- ENUM/SET members information_schema garbles ---------------------------------------------------
#
# MariaDB and MySQL keep ENUM/SET member names in utf8mb3 metadata: a member with a 4-byte
# character (an emoji in a utf8mb4 column) reads '?' in information_schema and SHOW CREATE TABLE
# alike, while the table's own values carry the real name. Without binlog_row_metadata=FULL (the
# binlog then carries the names) binlog-cdc asks for the values themselves, the way the server's
# flavour allows: on MariaDB (10.3+) a compound statement with variables of the column's own type
# (``TYPE OF db.t.col``: SELECT privilege only) set to each member number, which reads every
# member; on MySQL (no such statement, and no other way to a member's value without a row holding
# it) rows of the table holding the member.

_FOUR_BYTE_CHARSETS = frozenset({"utf8mb4", "utf16", "utf16le", "utf32", "gb18030"})
_LOOKUP_SECONDS = 5


def _lost(s: ServerColumn) -> list[int]:
    """0-based indexes of the members of *s* that may have lost a 4-byte character."""
    if s.data_type not in ("enum", "set") or s.member_names is not None:
        return []
    if charset_of(s.collation) not in _FOUR_BYTE_CHARSETS:
        return []
    return [i for i, m in enumerate(s.members) if "?" in m]


def _quote_name(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def _text(v) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def recover_members(query: Callable, schema: str, table: str, columns: list[ServerColumn],
                    version) -> list[ServerColumn]:
    """*columns* with the ENUM/SET members information_schema shows with ``?`` (where a 4-byte
    character may have been) read from the server's values (see above); *version*: the server's
    ``VERSION()`` text (its flavour chooses how). A member that cannot be read stays as the
    server describes it, with a warning recommending ``binlog_row_metadata=FULL``."""
    lost = {k: _lost(s) for k, s in enumerate(columns)}
    lost = {k: v for k, v in lost.items() if v}
    if not lost:
        return columns
    where = _quote_name(schema) + "." + _quote_name(table)
    info = parse_server_version(version)
    found = None
    if info.is_mariadb and info.version >= (10, 3, 0):
        found = _anchored_members(query, where, columns, lost)
    if found is None:
        found = {k: _member_rows(query, where, columns[k], idx) for k, idx in lost.items()}
    out = list(columns)
    for k, idx in lost.items():
        s = columns[k]
        names = s.members
        for i, name in found.get(k, {}).items():
            names[i] = name
        missing = [names[i] for i in idx if i not in found.get(k, {})]
        if missing:
            log.warning("%s.%s column %s: information_schema shows the %s member(s) %s with '?' "
                        "(the server keeps member names as utf8mb3, which has no 4-byte "
                        "characters) and they could not be read from the server's values; rows "
                        "with them decode to what the server shows. Set binlog_row_metadata=FULL: "
                        "the binlog then carries the names", schema, table, s.name,
                        s.data_type.upper(), ", ".join(repr(m) for m in missing))
        out[k] = s._replace(member_names=tuple(names))
    return out


def _lookup(query: Callable, sql: str, what: str) -> list | None:
    """The rows of one member lookup; None when the server refused it (a missing privilege, a
    timeout: the members stay as information_schema shows them). A lost connection is raised,
    whatever client *query* runs on."""
    try:
        return query(sql, None)
    except Exception as e:
        if is_transient(e) or not _server_error(e):
            raise
        log.debug("reading ENUM/SET members %s failed: %s", what, e)
        return None


def _server_error(e: Exception) -> bool:
    """Whether *e* is an error the server answered a statement with (a binlog-cdc error, or the
    PyMySQL error of a plain connection)."""
    if isinstance(e, CdcError):
        return True
    import pymysql
    return isinstance(e, pymysql.err.MySQLError)


def _anchored_members(query: Callable, where: str, columns, lost) -> dict | None:
    """MariaDB: ``{column index: {member index: name}}`` from variables of the columns' own types
    set to each member number (one compound statement); None if the server refused it."""
    declare, assign, pick = [], [], []
    for k, idx in lost.items():
        col = where + "." + _quote_name(columns[k].name)
        for i in idx:
            var = f"v{k}_{i}"
            declare.append(f"DECLARE {var} TYPE OF {col};")
            assign.append(f"{var} = {i + 1 if columns[k].data_type == 'enum' else 1 << i}")
            pick.append((k, i, var))
    sql = ("BEGIN NOT ATOMIC " + " ".join(declare) + " SET " + ", ".join(assign) + "; SELECT "
           + ", ".join(var for _k, _i, var in pick) + "; END")
    rows = _lookup(query, sql, "through TYPE OF variables")
    if not rows or len(rows[0]) != len(pick):
        return None
    found: dict = {}
    for (k, i, _var), v in zip(pick, rows[0]):
        if v is not None:
            found.setdefault(k, {})[i] = _text(v)
    return found


def _member_rows(query: Callable, where: str, s: ServerColumn, lost: list[int]) -> dict:
    """``{member index: name}`` from rows of the table holding those members (bounded query)."""
    col = _quote_name(s.name)
    if s.data_type == "enum":
        cond = f"{col}+0 IN ({', '.join(str(i + 1) for i in lost)})"
    else:
        cond = f"{col} & {sum(1 << i for i in lost)}"
    sql = (f"SELECT /*+ MAX_EXECUTION_TIME({_LOOKUP_SECONDS * 1000}) */ DISTINCT {col}+0, {col} "
           f"FROM {where} WHERE {cond} LIMIT 256")
    rows = _lookup(query, sql, "from rows") or []
    found = {}
    for number, text in rows:
        if number is None or text is None:
            continue
        number, text = int(number), _text(text)
        if s.data_type == "enum":
            if number - 1 in lost:
                found[number - 1] = text
            continue
        parts = text.split(",") if text else []
        bits = [i for i in range(64) if number >> i & 1]
        if len(parts) == len(bits):
            found.update((i, p) for i, p in zip(bits, parts) if i in lost)
    return found


def needs_metadata(tmap) -> bool:
    """Whether *tmap* lacks something information_schema can give: names, character sets, ENUM
    and SET members, or the precision of pre-5.6 temporal columns."""
    for c in tmap.columns:
        if c.name is None:
            return True
        rt = c.real_type
        if rt in _OLD_TEMPORAL and c.meta is None:
            return True
        if rt == T.ENUM and c.enum_values is None or rt == T.SET and c.set_values is None:
            return True
    return any(c.collation is None for c in charset_columns(tmap))


def _shape(columns) -> str:
    return "(" + ", ".join(columns) + ")"


def check_shape(tmap, server: list[ServerColumn], where: str = "") -> None:
    """SchemaError unless *server*'s columns match the table map's count and type codes."""
    ok = len(server) == len(tmap.columns) and all(
        logged_type(c) in CODES.get(s.data_type, frozenset({logged_type(c)}))
        for c, s in zip(tmap.columns, server))
    if ok:
        return
    binlog = _shape(type_info(logged_type(c)).name for c in tmap.columns)
    now = _shape(f"{s.name} {s.column_type}" for s in server)
    raise SchemaError(
        f"the TABLE_MAP of {tmap.qualified_name}{where} has {len(tmap.columns)} columns {binlog} "
        f"but information_schema has {len(server)} {now}: the table changed after this part of "
        f"the binlog was written, so its column names, character sets and members cannot be "
        f"taken from the server. Set binlog_row_metadata=FULL on the server (the binlog then "
        f"carries them), or start reading after the change")


def complete_table_map(tmap, server: list[ServerColumn]) -> None:
    """Fill in what *tmap* lacks from *server* (checked with :func:`check_shape` first); what
    the binlog did log wins.  The table's decoding plans are rebuilt."""
    full = tmap.has_optional_metadata
    for c, s in zip(tmap.columns, server):
        rt = c.real_type
        if c.collation is None and (
                rt in (T.ENUM, T.SET) or (rt != T.GEOMETRY and type_info(rt).character)):
            # no character set in information_schema: BINARY, VARBINARY, BLOB
            c.collation = s.collation if s.collation is not None else BINARY_COLLATION
        if not full and type_info(rt).numeric:
            c.unsigned = s.unsigned
        if rt == T.ENUM and c.enum_values is None:
            c.enum_values = s.members
        elif rt == T.SET and c.set_values is None:
            c.set_values = s.members
        elif rt in _OLD_TEMPORAL and c.meta is None:
            c.meta = s.precision or 0
    if not tmap.primary_key:
        tmap.primary_key = [i for i, s in enumerate(server) if s.primary_key]
        for i in tmap.primary_key:
            tmap.columns[i].primary_key = True
    schema_types(tmap, server)                   # MariaDB's VECTOR columns
    tmap.apply_names([s.name for s in server])   # names where missing; new row plans


class TableMetadata:
    """Completes table maps for one stream: from a schema history when one is given (the
    table's shape at the table map's position), else from information_schema as it is now.

    :param query: ``query(sql, args) -> rows`` on an ordinary SQL connection (opened lazily by
        the caller; not the replication connection).
    :param default_charset: for tables information_schema does not show.
    :param history: a :class:`~cdc.schema.history.SchemaHistory` (fed with the stream's QUERY
        events through :meth:`on_query`), or None.

    With a history, a table map lacking metadata takes it from the history's version of the
    table at its position; a table map that disagrees with that version (column count, type
    codes, byte lengths, precisions) is a :class:`~cdc.errors.SchemaError` naming the table, the
    position and both shapes.  A table map with full metadata (column names) is the truth: the
    history only cross-checks it, with a warning when they disagree.  Tables the history does
    not follow (outside the table filter: their rows are dropped anyway -- not read; never seen)
    fall back to information_schema as it is now.
    """

    def __init__(self, query: Callable, *, default_charset: str = DEFAULT_CHARSET,
                 history=None, seed: Callable | None = None,
                 check_hidden: Callable[[str, str], None] | None = None):
        self.query = query
        # check_hidden(db, table): raises when a table information_schema does not show is
        # hidden from the account (a privilege it lacks) rather than gone
        self.check_hidden = check_hidden
        self.default_collation = collation_for_charset(default_charset)
        self.history = history
        # seed(history, at=(file, pos)): on the first need (a DDL, a table map lacking)
        self.seed = seed
        self._done: dict[int, tuple] = {}     # id(tmap) -> (tmap, generation, full metadata)
        self._tables: dict[tuple, tuple[tuple, list]] = {}      # (db, table) -> (shape, columns)
        self._warned: set = set()
        self.reads = 0                                          # information_schema queries
        self.disagreements = 0     # full table maps the history disagreed with (warnings)

    def on_query(self, ev) -> list[str]:
        """Feed a QUERY event to the history (DDL changes it); the tables it changed."""
        h = self.history
        if h is None or ddl_head(ev.query) is None:
            return []
        if not h.seeded and self.seed is not None:
            self.seed(h, at=(ev.file, ev.pos))
        return h.apply_event(ev)

    def complete(self, tmap, *, file: str | None = None, position: int | None = None) -> None:
        """Fill in what *tmap* lacks (once per table-map object and history generation; cheap
        when nothing is)."""
        done = self._done
        h = self.history
        generation = h.generation if h is not None else 0
        hit = done.get(id(tmap))
        again = hit is not None and hit[0] is tmap
        if again and hit[1] == generation:
            return
        if len(done) > 4096:
            done.clear()
        # full metadata: the binlog named the columns (before anything here named them)
        full = hit[2] if again else all(c.name is not None for c in tmap.columns)
        if h is None:
            if needs_metadata(tmap):
                self._complete(tmap, file, position)
            elif may_hide_vectors(tmap):
                self._vectors(tmap)
        else:
            self._from_history(h, tmap, file, position, again=again, full=full)
        done[id(tmap)] = (tmap, generation, full)

    def _server_columns(self, tmap) -> list[ServerColumn]:
        """*tmap*'s table in information_schema now (read once per table and table-map shape)."""
        key = (tmap.schema, tmap.table)
        shape = tuple((c.type, c.meta) for c in tmap.columns)
        hit = self._tables.get(key)
        if hit is not None and hit[0] == shape:
            return hit[1]
        self.reads += 1
        server = read_columns(self.query, *key)
        if len(self._tables) > 4096:
            self._tables.clear()
        self._tables[key] = (shape, server)
        return server

    def _vectors(self, tmap) -> None:
        """A table map with full metadata whose VARBINARY columns may be MariaDB VECTORs: their
        types from information_schema now, if it has the table map's shape (else a warning)."""
        server = self._server_columns(tmap)
        if server and not shape_problems(tmap, server):
            schema_types(tmap, server)
            return
        mark = ("vectors", tmap.schema, tmap.table)
        if mark not in self._warned:
            self._warned.add(mark)
            log.warning("the TABLE_MAP of %s %s does not match information_schema %s: its "
                        "VARBINARY columns decode as bytes, though a MariaDB VECTOR column would "
                        "be a list of floats", tmap.qualified_name, describe_table_map(tmap),
                        describe_columns(server))

    def _complete(self, tmap, file, position) -> None:
        key = (tmap.schema, tmap.table)
        server = self._server_columns(tmap)
        if not server:
            if key not in self._warned:
                if self.check_hidden is not None:
                    self.check_hidden(*key)
                self._warned.add(key)
                log.warning("%s is not in information_schema (dropped, or no privilege): its "
                            "text columns decode as %s, names as @1, @2...", tmap.qualified_name,
                            DEFAULT_CHARSET)
            apply_default_charset(tmap, self.default_collation)
            return
        where = ""
        if file or position is not None:
            where = f" (at file {file}, position {position})"
        check_shape(tmap, server, where)
        complete_table_map(tmap, server)

    def _from_history(self, h, tmap, file, position, *, again: bool, full: bool) -> None:
        needs = needs_metadata(tmap)
        vectors = full and may_hide_vectors(tmap)
        if not h.seeded and self.seed is not None:
            if not (needs or vectors) or not h.captured(tmap.schema, tmap.table):
                return      # nothing to complete (a FULL table map is cross-checked once seeded)
            self.seed(h, at=(file, position))
        state, known = h.lookup(tmap.schema, tmap.table, file, position)
        if not known:
            if h.captured(tmap.schema, tmap.table):
                if needs:
                    self._complete(tmap, file, position)
                elif vectors:
                    self._vectors(tmap)
            return
        where = f"at file {file}, position {position}"
        if isinstance(state, TableSchema):
            columns = list(state.columns)
            if full:
                problems = shape_problems(tmap, columns, names=True)
                mark = (tmap.schema, tmap.table, id(state))
                if problems and mark not in self._warned:
                    self._warned.add(mark)
                    self.disagreements += 1
                    log.warning("the TABLE_MAP of %s %s disagrees with the schema history (%s): "
                                "binlog %s, history %s: %s. The table map (full metadata) is "
                                "used; the history may be wrong about this table",
                                tmap.qualified_name, where, state.origin,
                                describe_table_map(tmap), describe_columns(columns),
                                "; ".join(problems))
                if not problems:
                    schema_types(tmap, columns)     # MariaDB's VECTOR columns
                if needs:   # FULL, but pre-5.6 temporals without their precision
                    self._complete(tmap, file, position) if problems else \
                        complete_table_map(tmap, columns)
                return
            problems = shape_problems(tmap, columns)
            if problems:
                why = ("a statement it could not follow, or a stream started before a change to "
                       "the table")
                if state.origin == "information_schema" and h.before_seed(file, position):
                    seed = h.seed_point
                    why = (f"it read the table from information_schema at file {seed[0]}, "
                           f"position {seed[1]}, and the table changed between this position "
                           f"and that one")
                raise SchemaError(
                    f"the TABLE_MAP of {tmap.qualified_name} {where} does not match the schema "
                    f"history: the binlog has {describe_table_map(tmap)}, the history "
                    f"({state.origin}) has {describe_columns(columns)} -- {'; '.join(problems)}. "
                    f"The history has lost track of this table ({why}), so its names, character "
                    f"sets and members cannot be trusted here. {RESEED_HINT}")
            if again:
                _forget_completion(tmap)
            complete_table_map(tmap, columns)
            return
        if full:
            if needs:
                self._complete(tmap, file, position)
            elif vectors:
                self._vectors(tmap)
            return
        why = state.describe() if isinstance(state, Unknown) else \
            "not there (dropped or renamed before this position)"
        raise SchemaError(
            f"the TABLE_MAP of {tmap.qualified_name} {where} lacks column metadata "
            f"(binlog_row_metadata is not FULL) and the schema history cannot give it: the "
            f"table is {why}. {RESEED_HINT}")


#: how to get past a history that has lost track of a table (in SchemaError messages)
RESEED_HINT = (
    "To re-seed the history: resume the stream from a position after the table's last change "
    "(a new stream reads the history from information_schema), or call "
    "ReplicaClient.reseed_schema() and iterate again when the stream is at the binlog's end; "
    "set binlog_row_metadata=FULL on the server (the binlog then carries all of it); or "
    "ReplicaConfig(schema_history=False) to take today's information_schema (checked by column "
    "types only)")


def _forget_completion(tmap) -> None:
    """Undo what completing *tmap* filled in (the same table-map object under a newer version of
    its table): names, members, key, and without optional metadata charsets and signedness."""
    bare = not tmap.has_optional_metadata
    for c in tmap.columns:
        c.name = None
        c.enum_values = c.set_values = None
        c.primary_key = False
        if c.real_type != logged_type(c):      # a MariaDB VECTOR (schema_types)
            c.real_type, c.vector_dimensions = logged_type(c), None
        if bare:
            c.collation = None
            c.unsigned = False
    tmap.primary_key = []
