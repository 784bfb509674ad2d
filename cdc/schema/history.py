"""The schema history of a stream: every captured table's columns as of any binlog position.

A TABLE_MAP without ``binlog_row_metadata=FULL`` carries column types only; names, character sets,
ENUM/SET members, signedness and the primary key have to come from elsewhere -- and for an event
written before a later ``ALTER TABLE`` that is not today's ``information_schema``.  The history is
seeded from information_schema once (:meth:`SchemaHistory.seed`; a replica client does it when
first needed: at the first DDL statement or table map lacking metadata), then follows the DDL
of the binlog's QUERY events (:meth:`SchemaHistory.apply_event`): each statement
that changes a captured table adds a *version* of that table at the statement's position, and
:meth:`SchemaHistory.lookup` answers with the version in effect at a TABLE_MAP's position.

A table's version is a :class:`TableSchema` (columns as :class:`~cdc.schema.columns.ServerColumn`,
the key, the default collation), ``None`` (the table does not exist there) or :class:`Unknown`
(since a position, and why: a statement that could not be read, a shape that could not be worked
out).  When a statement leaves a captured table's shape uncertain and the stream is at the end of
the binlog, the table is read again from information_schema (``read_table``/``at_end``, given by
the caller); otherwise it is :class:`Unknown` from there.

The seed describes the tables as of the binlog position ``valid_from`` where it was read (the
binlog's end then).  For a stream at an earlier position, the caller says which tables the
binlog's DDL changed in between (``exact_from``, see :mod:`cdc.schema.touched`): the seed
describes those from the end of their last change on, and they are unknown before it unless the
stream's own statements tell (a CREATE TABLE) -- where they tell, their ENUM/SET member names are
taken over information_schema's, which show 4-byte characters as ``?``; the other tables it
describes from the stream's position on.  Sans-IO: no connection, no Spark.
"""

from __future__ import annotations

import bisect
import logging
from typing import Callable

from cdc.errors import ConfigurationError, SchemaError
from cdc.schema.changes import SchemaChange
from cdc.schema.columns import collation_of_name, safe_charset_collation
from cdc.schema.ddl import (ANSI_QUOTES, REAL_AS_FLOAT, AlterDatabase, AlterTable, CreateDatabase,
                            CreateIndex, CreateTable, DropDatabase, DropIndex, DropTables,
                            RenameTables, TableName, Unparsed, ddl_head, parse_ddl)
from cdc.schema.persist import db_diff, history_from_json, history_to_json
from cdc.schema.tables import Diverged, TableSchema, Work, apply_actions, finish
from cdc.schema.touched import named
from cdc.schema.versions import BEGINNING, Unknown, Versions, point_key

__all__ = ["SchemaHistory", "TableSchema", "Unknown", "point_key", "ON_UNPARSED_DDL"]

log = logging.getLogger("cdc.schema")

#: what to do with a DDL statement that names a captured table but cannot be parsed
ON_UNPARSED_DDL = ("fail", "skip", "reseed")

class _Unsure(Exception):
    pass


class SchemaHistory:
    """The captured tables' shapes along the binlog (see the module).

    :param captures: ``captures("db.table") -> bool``: the tables to follow (None: all).
    :param on_unparsed: ``"fail"`` (default: a :class:`~cdc.errors.SchemaError`), ``"skip"`` or
        ``"reseed"`` for a DDL statement that names a captured table but cannot be parsed.
    :param mariadb: the server is MariaDB (``JSON`` is LONGTEXT; ``/*M!...*/`` comments run).
    :param version: the server version as ``101106`` (for executable comments; None: any).
    :param lower_case_table_names: the server's setting (1, 2: names compare in lower case).
    :param read_table: ``read_table(db, table) -> TableSchema | None``: the table as
        information_schema shows it now (IO, by the caller).
    :param at_end: ``at_end(file, end_pos) -> bool``: whether that is the binlog's end now.
    """

    def __init__(self, *, captures: Callable[[str], bool] | None = None,
                 on_unparsed: str = "fail", mariadb: bool = True, version: int | None = None,
                 lower_case_table_names: int = 0,
                 read_table: Callable[[str, str], TableSchema | None] | None = None,
                 at_end: Callable[[str | None, int | None], bool] | None = None):
        if on_unparsed not in ON_UNPARSED_DDL:
            raise ConfigurationError(f"on_unparsed_ddl must be one of {', '.join(ON_UNPARSED_DDL)}"
                                     f", not {on_unparsed!r}")
        self.captures = captures
        self.on_unparsed = on_unparsed
        self.mariadb = mariadb
        self.version = version
        self.lower = bool(lower_case_table_names)
        self.read_table = read_table
        self.at_end = at_end
        self.databases: dict[str, int | None] = {}
        #: the server's collation ids by collation name, and its character sets' defaults by
        #: character set name (``information_schema.COLLATIONS``, read with the seed)
        self.collations: dict[str, int] = {}
        self.generation = 0          # bumped by every change: cheap "has anything changed?"
        self.seeded = False
        self.statements_applied = 0
        self._tables: dict[tuple, Versions] = {}
        self._seed: dict[tuple, TableSchema] = {}
        #: tables the seed describes only from the end (file, end_pos) of a statement on
        self._anchors: dict[tuple, tuple] = {}
        self._seed_key = None
        self._seed_point = None
        self._applied = None         # key of the last statement applied (replays are skipped)
        #: the :class:`~cdc.schema.changes.SchemaChange` records of the last statement applied
        #: (one per captured table it changed, in the order it changed them)
        self.last_changes: list[SchemaChange] = []
        # the databases' default collations as seeded, then each statement's changes to them
        # (key, {db: collation id, or DROPPED}): ``databases`` as of a position (to_json)
        self._db_base: dict = {}
        self._db_changes: list = []

    # --- names ------------------------------------------------------------------------------

    def _key(self, db: str | None, table: str) -> tuple:
        db = db or ""
        return (db.lower(), table.lower()) if self.lower else (db, table)

    def captured(self, db: str | None, table: str) -> bool:
        return self.captures is None or bool(self.captures(f"{db}.{table}"))

    # --- seeding ------------------------------------------------------------------------------

    def seed(self, tables: dict, databases: dict | None = None, *,
             valid_from: tuple | None = None, at: tuple | None = None,
             exact_from: dict | None = None) -> None:
        """Start from *tables* (``{(db, table): TableSchema}``, as information_schema showed them
        at the binlog position *valid_from* = (file, pos)) and *databases* (``{db: default
        collation id}``). The tables' versions begin at the binlog's beginning the first time;
        a re-seed replaces every version from *at* (default: *valid_from*) on.

        *exact_from*: ``{(db, table): (file, end_pos)}``, the tables that statements between the
        stream's position *at* and *valid_from* changed, and the end of the last such statement:
        the read describes them from there on; before it they are unknown (unless the stream's
        own statements tell, e.g. a CREATE TABLE), never described by a later shape."""
        reseed = self.seeded
        start = BEGINNING
        if reseed:
            point = at or valid_from
            start = point_key(*point) if point else (self._applied or BEGINNING)
        seeded = {self._key(*k): v for k, v in tables.items() if self.captured(*k)}
        anchors = {self._key(*k): tuple(e) for k, e in (exact_from or {}).items()
                   if self.captured(*k)}
        if reseed:
            for versions in self._tables.values():
                cut = bisect.bisect_left(versions.keys, start)
                del versions.keys[cut:], versions.states[cut:]
                versions.put(start, None)
        since = at or valid_from or (None, None)
        for key in set(seeded) | set(anchors):
            versions = self._versions(*key)
            end = anchors.get(key)
            if end is None:
                versions.put(start, seeded[key])
                continue
            versions.put(start, Unknown(since, (
                f"changed by the statement ending at file {end[0]}, position {end[1]}, before "
                f"the schema history read it from information_schema at file {valid_from[0]}, "
                f"position {valid_from[1]}: its shape before that statement is not known")))
            versions.put(point_key(*end), seeded.get(key))
        self._seed = seeded
        self._anchors = anchors
        self.databases.update(databases or {})
        self._db_base, self._db_changes = dict(self.databases), []
        self._seed_point = valid_from
        self._seed_key = point_key(*valid_from) if valid_from else None
        self.seeded = True
        self.generation += 1

    def _versions(self, db: str | None, table: str) -> Versions:
        key = self._key(db, table)
        v = self._tables.get(key)
        if v is None:
            v = self._tables[key] = Versions()
        return v

    # --- lookups ------------------------------------------------------------------------------

    def lookup(self, db: str, table: str, file: str | None = None, pos: int | None = None):
        """The table's version at (*file*, *pos*) -- :class:`TableSchema`, :class:`Unknown` or
        None (not there) -- and whether the history knows the table at all, as a pair."""
        v = self._tables.get(self._key(db, table))
        if v is None:
            return None, False
        return v.at(point_key(file, pos))

    @property
    def seed_point(self) -> tuple | None:
        """(file, position) where the seed was read from information_schema."""
        return self._seed_point

    def before_seed(self, file: str | None, pos: int | None) -> bool:
        """Whether (*file*, *pos*) comes before the point the seed was read at."""
        return self._seed_key is not None and point_key(file, pos) < self._seed_key

    def tables(self) -> list[tuple]:
        """(db, table) of every table the history has followed."""
        return sorted(self._tables)

    # --- persisting ---------------------------------------------------------------------------

    def to_json(self, file: str | None = None, pos: int | None = None) -> dict:
        """The history as of binlog position (*file*, *pos*) -- every followed table's version in
        effect there, before any statement at that position (None: after everything applied,
        past the seed point) --
        as a JSON-able dict with a fixed key order and sorted tables: the same state always
        gives the same text. :meth:`from_json` makes a history that continues from there."""
        return history_to_json(self, file, pos)

    @classmethod
    def from_json(cls, data, **kw) -> "SchemaHistory":
        """A seeded history from :meth:`to_json`'s *data* (a dict or its JSON text); *kw* are
        the constructor's arguments (``captures``, ``on_unparsed``, ``read_table``,
        ``at_end``)."""
        return history_from_json(cls, data, **kw)

    # --- applying statements -----------------------------------------------------------------

    def apply_event(self, ev) -> list[str]:
        """Apply a QUERY event (``query``, ``schema``, ``file``, ``pos``, ``end_pos``, ``status``,
        ``error_code``): see :meth:`apply`."""
        if ddl_head(ev.query) is None:
            return []
        status = ev.status
        charset = status.get("charset")
        return self.apply(ev.query, schema=ev.schema, file=ev.file, pos=ev.pos,
                          end_pos=ev.end_pos, sql_mode=int(status.get("sql_mode") or 0),
                          server_collation=charset[2] if charset else None,
                          error_code=getattr(ev, "error_code", 0) or 0)

    def apply(self, sql: str, *, schema: str | None, file: str | None, pos: int | None,
              end_pos: int | None = None, sql_mode: int = 0, server_collation: int | None = None,
              error_code: int = 0) -> list[str]:
        """Apply the statement *sql* (default database *schema*) found at (*file*, *pos*); the
        ``db.table`` names of the captured tables it changed. A statement at or before one
        already applied is skipped (a reconnect reads it again)."""
        self.last_changes = []
        head = ddl_head(sql)
        if head is None:
            return []
        key = point_key(file, pos)
        if self._applied is not None and key <= self._applied:
            return []
        stmt = parse_ddl(sql, ansi_quotes=bool(sql_mode & ANSI_QUOTES),
                         real_as_float=bool(sql_mode & REAL_AS_FLOAT), mariadb=self.mariadb,
                         version=self.version)
        if stmt is None:
            return []
        ctx = _Statement(self, sql, schema, (file, pos), (file, end_pos), key, server_collation)
        dbs = dict(self.databases)
        if isinstance(stmt, Unparsed):
            ctx.unparsed(stmt)      # on_unparsed_ddl="fail": SchemaError, not applied
        elif error_code:
            for t in named(stmt):
                ctx.unsure(t, f"the statement failed on the source (error {error_code})")
        else:
            ctx.run(stmt)
        self._applied = key
        if self.databases != dbs:
            self._db_changes.append((key, db_diff(dbs, self.databases)))
        changed = ctx.commit()
        if changed:
            self.statements_applied += 1
            self.generation += 1
            self.last_changes = ctx.records(stmt, head)
        return changed


def _same(a: TableSchema, b) -> bool:
    return isinstance(b, TableSchema) and (a.columns, a.collation, a.primary_key,
                                           a.unique_keys) == (b.columns, b.collation,
                                                              b.primary_key, b.unique_keys)


class _Statement:
    """Applying one statement: new versions collect in ``pending`` until :meth:`commit`."""

    def __init__(self, h: SchemaHistory, sql: str, schema, point, end_point, key,
                 server_collation):
        self.h, self.sql, self.schema = h, sql, schema or None
        self.point, self.end_point, self.key = point, end_point, key
        self.server_collation = server_collation
        self.pending: dict[tuple, tuple] = {}     # key -> (db, table, state)
        self.renamed: dict[tuple, tuple] = {}     # key -> (db, table) it was renamed from
        self.renamed_away: set = set()            # keys of tables renamed to another name
        self.unsure_keys: set = set()             # keys whose new shape is re-read or unknown
        self.changed: list[tuple] = []            # (db, table, new state, state before)

    def where(self) -> str:
        return f"file {self.point[0]}, position {self.point[1]}"

    def name(self, t: TableName) -> tuple[str, str]:
        return (t.db or self.schema or "", t.name)

    def state(self, db: str, table: str):
        k = self.h._key(db, table)
        if k in self.pending:
            return self.pending[k][2], True
        v = self.h._tables.get(k)
        return v.at(self.key) if v is not None else (None, False)

    def put(self, db: str, table: str, state) -> None:
        if self.h.captured(db, table):
            self.pending[self.h._key(db, table)] = (db, table, state)

    def unsure(self, t, reason: str, unknown: Unknown | None = None) -> None:
        """The table's shape after this statement is not known: read it again if the stream is
        at the binlog's end, else it is *unknown* (default: unknown from here, for *reason*)."""
        db, table = self.name(t) if isinstance(t, TableName) else t
        if not self.h.captured(db, table):
            return
        h = self.h
        self.unsure_keys.add(h._key(db, table))
        if self.anchored(h._key(db, table)):
            self.put(db, table, unknown or Unknown(self.point, reason))   # the seed, at commit
            return
        if h.read_table is not None and h.at_end is not None and h.at_end(*self.end_point):
            schema = h.read_table(db, table)
            # exact only if nothing was written to the binlog while it was read
            if h.at_end(*self.end_point):
                log.info("%s.%s: %s at %s; read again from information_schema (the stream is "
                         "at the binlog's end)", db, table, reason, self.where())
                self.put(db, table, schema)
                return
        if unknown is None:
            log.warning("%s.%s: %s at %s: its shape is unknown from here", db, table, reason,
                        self.where())
        self.put(db, table, unknown or Unknown(self.point, reason))

    # -- statements
    def run(self, stmt) -> None:
        h = self.h
        if isinstance(stmt, CreateDatabase):
            if not (stmt.if_not_exists and stmt.name in h.databases):
                h.databases[stmt.name] = self.db_collation(stmt.charset, stmt.collation,
                                                           self.server_collation)
        elif isinstance(stmt, AlterDatabase):
            name = stmt.name or self.schema
            if name:
                h.databases[name] = self.db_collation(stmt.charset, stmt.collation,
                                                      h.databases.get(name))
        elif isinstance(stmt, DropDatabase):
            h.databases.pop(stmt.name, None)
            for (db, table) in list(h._tables):
                if db == (stmt.name.lower() if h.lower else stmt.name):
                    self.put(db, table, None)
        elif isinstance(stmt, CreateTable):
            self.create(stmt)
        elif isinstance(stmt, AlterTable):
            self.alter(stmt.table, stmt.actions)
        elif isinstance(stmt, CreateIndex):
            if stmt.unique:
                self.alter(stmt.table, [("add_unique", (stmt.name, stmt.parts))])
        elif isinstance(stmt, DropIndex):
            self.alter(stmt.table, [("drop_index", (stmt.name, True))])
        elif isinstance(stmt, DropTables):
            for t in stmt.tables:
                self.put(*self.name(t), None)
        elif isinstance(stmt, RenameTables):
            for old, new in stmt.pairs:
                self.rename(self.name(old), self.name(new))
        # TruncateTable: the shape does not change

    def db_collation(self, charset, collation, fallback):
        try:
            if collation:
                return collation_of_name(collation, self.h.collations)
        except ConfigurationError:
            return fallback
        return safe_charset_collation(charset, fallback, self.h.collations)

    def table_collation(self, db: str, charset, collation):
        if collation:
            try:
                return collation_of_name(collation, self.h.collations)
            except ConfigurationError:
                return None
        if charset and charset.upper() != "DEFAULT":
            return safe_charset_collation(charset, None, self.h.collations)
        return self.h.databases.get(db, self.server_collation if not self.h.databases else None)

    def create(self, stmt: CreateTable) -> None:
        db, table = self.name(stmt.table)
        if not self.h.captured(db, table):
            return
        before, _known = self.state(db, table)
        if stmt.if_not_exists and before is not None:
            return
        if stmt.like is not None:
            src, _ = self.state(*self.name(stmt.like))
            if isinstance(src, TableSchema):
                self.put(db, table, TableSchema(src.columns, src.collation, src.primary_key,
                                                src.unique_keys, f"CREATE TABLE ... LIKE at "
                                                f"{self.where()}"))
            else:
                self.unsure((db, table), f"created LIKE {stmt.like.name}, whose shape is unknown")
            return
        if stmt.unsure:
            self.unsure((db, table), f"created by a statement whose result is not known exactly "
                                     f"({stmt.unsure})")
            return
        coll = self.table_collation(db, stmt.charset, stmt.collation)
        work = Work([], [], [], coll)
        try:
            actions = [("add", (spec, None, False)) for spec in stmt.columns]
            if stmt.primary_key:
                actions.append(("add_pk", (stmt.primary_key,)))
            actions += [("add_unique", (n, parts)) for n, parts in stmt.unique_keys]
            apply_actions(work, actions, known=self.h.collations)
        except Diverged as e:
            self.unsure((db, table), str(e))
            return
        self.put(db, table, finish(work, f"CREATE TABLE at {self.where()}"))

    def alter(self, t: TableName, actions) -> None:
        db, table = self.name(t)
        before, _known = self.state(db, table)
        captured = self.h.captured(db, table)
        rename = [a for a in actions if a[0] == "rename"]
        target = self.name(rename[-1][1][0]) if rename else None
        extra = [a for a in actions if a[0] in ("partition_to_table", "table_to_partition")]
        for a in extra:     # MariaDB: a partition becomes a table of this shape, or vice versa
            other = self.name(a[1][0])
            if a[0] == "table_to_partition":
                self.put(*other, None)
            elif isinstance(before, TableSchema):
                self.put(*other, before)
            else:
                self.unsure(other, "made from a partition of a table whose shape is unknown")
        if not captured and (target is None or not self.h.captured(*target)):
            return
        if isinstance(before, Unknown):
            new = before
            self.unsure(target or (db, table), before.reason, before)
            if target is not None and target != (db, table):
                self.put(db, table, None)
                self.moved((db, table), target)
            return
        elif before is None:
            new = None
            if any(a[0] not in ("rename", "partition_to_table", "table_to_partition")
                   for a in actions) or target is not None:
                reason = "changed by ALTER TABLE while the history does not know it"
                if target is not None:
                    self.put(db, table, None)
                    self.moved((db, table), target)
                    self.unsure(target, reason)
                else:
                    self.unsure((db, table), reason)
                return
        else:
            self.seed_warning(db, table, before)
            if self.before_seed() and before.origin == "information_schema":
                new = Unknown(self.point, "changed before the point information_schema was read")
            else:
                try:
                    work = before.work()
                    apply_actions(work, actions, default=self.h.databases.get(db),
                                  known=self.h.collations)
                    new = finish(work, f"ALTER TABLE at {self.where()}")
                except Diverged as e:
                    self.put(db, table, before)
                    if target is not None:
                        self.put(db, table, None)
                        self.moved((db, table), target)
                        db, table = target
                    self.unsure((db, table), str(e))
                    return
        if target is not None and target != (db, table):
            self.put(db, table, None)
            self.moved((db, table), target)
            db, table = target
        elif isinstance(new, TableSchema) and _same(new, before):
            return      # ENGINE=, ADD INDEX, partitions...: no new version
        if isinstance(new, Unknown):
            self.unsure((db, table), new.reason)
        else:
            self.put(db, table, new)

    def moved(self, old: tuple, new: tuple) -> None:
        """Note that the table *old* is called *new* after the statement."""
        h = self.h
        ko, kn = h._key(*old), h._key(*new)
        origin = self.renamed.pop(ko, old)
        if h._key(*origin) == kn:
            self.renamed.pop(kn, None)      # renamed back within the statement
        else:
            self.renamed[kn] = origin
        self.renamed_away.add(ko)
        self.renamed_away.discard(kn)

    def rename(self, old: tuple, new: tuple) -> None:
        state, known = self.state(*old)
        self.moved(old, new)
        if self.h.captured(*old):
            self.seed_warning(*old, state)
            self.put(*old, None)
        if not self.h.captured(*new):
            return
        if isinstance(state, TableSchema) and not (self.before_seed() and
                                                    state.origin == "information_schema"):
            self.put(*new, TableSchema(state.columns, state.collation, state.primary_key,
                                       state.unique_keys, f"RENAME TABLE at {self.where()}"))
        else:
            self.unsure(new, f"renamed from {old[0]}.{old[1]}, whose shape is not known here")

    # -- the seed's validity
    def before_seed(self) -> bool:
        return self.h._seed_key is not None and self.key < self.h._seed_key

    def seed_warning(self, db: str, table: str, state) -> None:
        if isinstance(state, TableSchema) and state.origin == "information_schema" and \
                self.before_seed():
            log.warning("%s.%s changes at %s, before the binlog position %s where the schema "
                        "history read it from information_schema: its rows before that were "
                        "decoded with its shape as of %s", db, table, self.where(),
                        self.h._seed_point, self.h._seed_point)

    # -- unparsable statements
    def unparsed(self, stmt: Unparsed) -> None:
        h = self.h
        names = [self.name(t) for t in stmt.tables]
        touched = [n for n in names if h.captured(*n)]
        if names and not touched:
            log.info("ignoring a DDL statement at %s that could not be parsed (%s) and touches "
                     "no captured table: %.300s", self.where(), stmt.reason, self.sql)
            return
        shown = ", ".join(f"{d}.{t}" for d, t in touched) or "(the table could not be made out)"
        if h.on_unparsed == "fail":
            raise SchemaError(
                f"a DDL statement at {self.where()} touches the captured table(s) {shown} but "
                f"could not be parsed ({stmt.reason}): {self.sql[:500]!r}. The schema history "
                f"would no longer know the table's shape, so the stream stops rather than decode "
                f"rows with a wrong one. Set on_unparsed_ddl='skip' to ignore the statement (the "
                f"history keeps the table's previous shape: right only if the statement changed "
                f"no column) or 'reseed' (the table is read again from information_schema when "
                f"the stream is at the binlog's end; until then its rows need "
                f"binlog_row_metadata=FULL), and resume from the client's position; please "
                f"report the statement")
        if h.on_unparsed == "skip":
            log.warning("skipping a DDL statement at %s that could not be parsed (%s), as "
                        "on_unparsed_ddl='skip' says; the history keeps the previous shape of %s: "
                        "%.300s", self.where(), stmt.reason, shown, self.sql)
            return
        for n in touched:
            self.unsure(n, f"a DDL statement that could not be parsed ({stmt.reason})")

    def anchored(self, key: tuple) -> bool:
        """Whether the seed describes the table from the end of this statement on."""
        end = self.h._anchors.get(key)
        return end is not None and point_key(*end) == point_key(*self.end_point)

    def commit(self) -> list[str]:
        h = self.h
        changed = []
        for k in h._anchors:
            if not self.anchored(k):
                continue
            # the seed's shape is the one after this statement, where the statements followed
            # did not tell it
            db, table, state = self.pending.get(k, (k[0], k[1], None))
            if k not in self.pending:
                v = h._tables.get(k)
                state = v.at(self.key)[0] if v is not None else None
            if not isinstance(state, TableSchema) or k in self.unsure_keys:
                self.pending[k] = (db, table, h._seed.get(k))
                self.unsure_keys.discard(k)
            elif isinstance(h._seed.get(k), TableSchema):
                # the statements told it: their ENUM/SET members are exact where
                # information_schema's show 4-byte characters as '?'
                exact = h._seed[k] = h._seed[k].with_exact_members(state)
                h._versions(db, table).put(point_key(*self.end_point), exact)
        for k, (db, table, state) in self.pending.items():
            v = h._versions(db, table)
            before, _known = v.at(self.key)
            if (before is state or (isinstance(state, TableSchema) and _same(state, before))) \
                    and k not in self.renamed:
                continue
            v.put(self.key, state)
            self.changed.append((db, table, state, before))
            if self.before_seed():
                # from the point the seed was read on, information_schema's answer is exact
                v.put(h._seed_key, h._seed.get(k))
            changed.append(f"{db}.{table}")
        return changed

    # -- schema-change records
    def records(self, stmt, head: str) -> list[SchemaChange]:
        """The :class:`~cdc.schema.changes.SchemaChange` of each captured table the statement
        changed (:meth:`commit` first); a table renamed away is part of its new name's record."""
        h = self.h
        if isinstance(stmt, CreateTable):
            kind = "CREATE"
        elif isinstance(stmt, RenameTables):
            kind = "RENAME"
        elif isinstance(stmt, (DropTables, DropDatabase)):
            kind = "DROP"
        elif isinstance(stmt, (AlterTable, CreateIndex, DropIndex)):
            kind = "ALTER"
        else:       # an unparsed statement (re-read), ...
            kind = {"CREATE": "CREATE", "DROP": "DROP", "RENAME": "RENAME"}.get(head, "ALTER")
        columns_renamed: dict = {}
        altered = None
        if isinstance(stmt, AlterTable):
            altered = h._key(*self.name(stmt.table))
            for a in stmt.actions:
                if a[0] == "rename_column" and a[1][0] != a[1][1]:
                    columns_renamed[a[1][0]] = a[1][1]
                elif a[0] == "change" and a[1][0] != a[1][1].name:
                    columns_renamed[a[1][0]] = a[1][1].name
        out = []
        for db, table, state, before in self.changed:
            k = h._key(db, table)
            origin = self.renamed.get(k)
            if state is None:
                if k in self.renamed_away:
                    continue        # renamed: the new name's record says so
                typ = "DROP"
            elif before is None and origin is None and kind != "CREATE":
                typ = "CREATE"      # a table made by another statement (CONVERT PARTITION...)
            else:
                typ = kind if kind != "DROP" else "CREATE"
            own = altered is not None and (k == altered or (origin is not None and
                                                            h._key(*origin) == altered))
            schema = state if isinstance(state, TableSchema) else None
            cols = schema.columns if schema is not None else None
            if schema is None:
                key = ()
            elif schema.primary_key:
                key = tuple(schema.primary_key)
            else:
                key = tuple(c.name for c in schema.columns if c.primary_key)
            out.append(SchemaChange(
                db, table, typ, self.sql,
                f"{origin[0]}.{origin[1]}" if origin is not None else None,
                dict(columns_renamed) if own else {}, cols, key,
                k in self.unsure_keys or isinstance(state, Unknown)))
        return out
