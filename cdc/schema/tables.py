"""One version of a table (:class:`TableSchema`) and the column/key changes of CREATE and ALTER
TABLE applied to it (:func:`apply_actions` on a :class:`Work` copy, :func:`finish`).

The effective key is what information_schema's COLUMN_KEY marks ``PRI``: the primary key, or
without one the first UNIQUE key whose columns are all NOT NULL and not prefixes (the server then
uses it as the primary key).  A change the table as known cannot take -- dropping a column it does
not have, adding one it has -- means the history is wrong about the table (the server accepted the
statement): :class:`Diverged`.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from cdc.errors import ConfigurationError
from cdc.schema.columns import (ServerColumn, charset_collation, collation_of_name,
                                convert_column, server_column)

__all__ = ["TableSchema", "Work", "Diverged", "apply_actions", "finish", "column_collation",
           "TEXTUAL"]

#: column types a character set applies to
TEXTUAL = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum",
                     "set"})


class Diverged(Exception):
    """The statement does not fit the table as the history knows it (or leaves its shape
    uncertain): the table's shape is not known after it."""


@dataclass(frozen=True)
class TableSchema:
    """One version of a table: ``columns`` (:class:`~cdc.schema.columns.ServerColumn`, the
    effective key marked ``primary_key`` as information_schema's COLUMN_KEY shows it), the
    declared ``primary_key`` and ``unique_keys`` (``((name, ((column, prefix?), ...)), ...)``),
    the table's default ``collation`` and where the version comes from (``origin``)."""

    columns: tuple
    collation: int | None = None
    primary_key: tuple = ()
    unique_keys: tuple = ()
    origin: str = ""

    @property
    def names(self) -> list[str]:
        return [c.name for c in self.columns]

    @classmethod
    def from_server(cls, columns, collation: int | None = None, keys=None,
                    origin: str = "information_schema") -> "TableSchema":
        """A version read from information_schema: *columns* (:class:`ServerColumn`), the
        table's default *collation*, *keys* (``[(index name, [(column, prefix?)...])]`` of its
        unique indexes, ``PRIMARY`` first; None: the columns' ``primary_key`` flags)."""
        cols = tuple(columns)
        if keys is None:
            return cls(cols, collation, tuple(c.name for c in cols if c.primary_key), (), origin)
        pk = next((tuple(c for c, _ in parts) for name, parts in keys if name == "PRIMARY"), ())
        uniques = tuple((name, tuple(parts)) for name, parts in keys if name != "PRIMARY")
        work = Work([c._replace(primary_key=False) for c in cols], list(pk),
                    [(n, list(p)) for n, p in uniques], collation)
        return finish(work, origin)

    def with_exact_members(self, defined: "TableSchema") -> "TableSchema":
        """This version (information_schema's) with the ENUM/SET members of *defined* -- the
        same table at the same binlog position, as its DDL statements define it -- where
        information_schema shows them without their 4-byte characters
        (:meth:`ServerColumn.exact_members`)."""
        by_name = {c.name.lower(): c for c in defined.columns}
        cols = tuple(c.exact_members(by_name[c.name.lower()]) if c.name.lower() in by_name else c
                     for c in self.columns)
        return self if cols == self.columns else replace(self, columns=cols)

    def work(self) -> "Work":
        """A mutable copy to apply changes to."""
        return Work([c._replace(primary_key=False) for c in self.columns], list(self.primary_key),
                    [(n, list(p)) for n, p in self.unique_keys], self.collation)


@dataclass
class Work:
    cols: list = field(default_factory=list)        # ServerColumn, primary_key False
    pk: list = field(default_factory=list)          # column names
    uniques: list = field(default_factory=list)     # [(name, [(column, prefix?)])]
    collation: int | None = None
    known: dict | None = None                       # the server's collation ids by name

    def index(self, name: str) -> int | None:
        low = name.lower()
        for i, c in enumerate(self.cols):
            if c.name.lower() == low:
                return i
        return None

    def need(self, name: str) -> int:
        i = self.index(name)
        if i is None:
            raise Diverged(f"the statement names a column {name!r} the table does not have")
        return i


def column_collation(spec, table_collation: int | None, known: dict | None = None) -> int | None:
    """The collation id of the column definition *spec* (None: not a text column); *known*:
    the server's collation ids by name."""
    if spec.type_name not in TEXTUAL:
        return None
    try:
        if spec.collation and spec.collation != "_bin":
            return collation_of_name(spec.collation, known)
        if spec.charset:
            return charset_collation(spec.charset, known)
    except ConfigurationError:
        raise Diverged(f"column {spec.name!r} has a character set binlog-cdc does not know "
                       f"({spec.charset or spec.collation})") from None
    if table_collation is None:
        raise Diverged(f"the character set of column {spec.name!r} is its table's default, which "
                       f"is not known")
    return table_collation


def _place(work: Work, col: ServerColumn, position, at: int | None) -> None:
    if at is not None:
        del work.cols[at]
    if position is None:
        work.cols.insert(len(work.cols) if at is None else at, col)
    elif position[0] == "first":
        work.cols.insert(0, col)
    else:
        work.cols.insert(work.need(position[1]) + 1, col)


def _rename_in_keys(work: Work, old: str, new: str) -> None:
    low = old.lower()
    work.pk = [new if c.lower() == low else c for c in work.pk]
    work.uniques = [(n, [(new if c.lower() == low else c, p) for c, p in parts])
                    for n, parts in work.uniques]


def _drop_from_keys(work: Work, name: str) -> None:
    low = name.lower()
    work.pk = [c for c in work.pk if c.lower() != low]
    uniques = []
    for n, parts in work.uniques:
        parts = [(c, p) for c, p in parts if c.lower() != low]
        if parts:
            uniques.append((n, parts))
    work.uniques = uniques


def _add_unique(work: Work, name, parts) -> None:
    for c, _p in parts:
        work.need(c)
    if not parts:
        return      # a functional key: no column of ours
    taken = {n.lower() for n, _ in work.uniques}
    if name is None:
        base = name = parts[0][0]
        k = 2
        while name.lower() in taken or name.upper() == "PRIMARY":
            name, k = f"{base}_{k}", k + 1
    work.uniques.append((name, list(parts)))


def _drop_index(work: Work, name: str) -> None:
    if name.upper() == "PRIMARY":
        work.pk = []
        return
    work.uniques = [(n, p) for n, p in work.uniques if n.lower() != name.lower()]


def _set_collation(work: Work, charset, collation, default) -> int | None:
    try:
        if collation:
            return collation_of_name(collation, work.known)
        if charset and str(charset).upper() == "DEFAULT":
            return default
        return charset_collation(charset, work.known) if charset else work.collation
    except ConfigurationError:
        raise Diverged(f"a character set binlog-cdc does not know ({charset or collation})") \
            from None


def _column(work: Work, spec) -> ServerColumn:
    return server_column(spec, column_collation(spec, work.collation, work.known))


def apply_actions(work: Work, actions, *, default: int | None = None,
                  known: dict | None = None) -> None:
    """Apply ALTER TABLE actions (``(kind, args)``, see :class:`cdc.schema.ddl.Action`) to
    *work*; *default* is the database's default collation (``CONVERT TO CHARACTER SET
    DEFAULT``), *known* the server's collation ids by name. :class:`Diverged` when they do
    not fit."""
    if known is not None:
        work.known = known
    for kind, args in actions:
        if kind == "add":
            spec, position, if_not_exists = args
            if work.index(spec.name) is not None:
                if if_not_exists:
                    continue
                raise Diverged(f"the statement adds a column {spec.name!r} the table already has")
            _place(work, _column(work, spec), position, None)
            _key_attributes(work, spec)
        elif kind in ("modify", "change"):
            if kind == "modify":
                (spec, position, if_exists), old = args, args[0].name
            else:
                old, spec, position, if_exists = args
            at = work.index(old)
            if at is None:
                if if_exists:
                    continue
                work.need(old)
            other = work.index(spec.name)
            if other is not None and other != at:
                raise Diverged(f"the statement renames {old!r} to the existing {spec.name!r}")
            _place(work, _column(work, spec), position, at)
            _rename_in_keys(work, old, spec.name)
            _key_attributes(work, spec)
        elif kind == "drop":
            name, if_exists = args
            at = work.index(name)
            if at is None:
                if if_exists:
                    continue
                work.need(name)
            del work.cols[at]
            _drop_from_keys(work, name)
        elif kind == "rename_column":
            old, new = args
            at = work.need(old)
            if work.index(new) not in (None, at):
                raise Diverged(f"the statement renames {old!r} to the existing {new!r}")
            work.cols[at] = work.cols[at]._replace(name=new)
            _rename_in_keys(work, old, new)
        elif kind == "add_pk":
            if work.pk:
                raise Diverged("the statement adds a primary key to a table that has one")
            names = [work.cols[work.need(c)].name for c, _p in args[0]]
            work.pk = names
        elif kind == "drop_pk":
            work.pk = []
        elif kind == "add_unique":
            _add_unique(work, *args)
        elif kind in ("drop_index", "drop_constraint"):
            _drop_index(work, args[0])
        elif kind == "rename_index":
            old, new = args
            work.uniques = [(new if n.lower() == old.lower() else n, p) for n, p in work.uniques]
        elif kind == "convert":
            coll = _set_collation(work, args[0], args[1], default)
            if coll is None:
                raise Diverged("CONVERT TO the database's default character set, which is not "
                               "known")
            work.collation = coll
            work.cols = [convert_column(c, coll) for c in work.cols]
        elif kind == "default_charset":
            work.collation = _set_collation(work, args[0], args[1], default)
        elif kind == "set_default":
            name, value, if_exists = args
            at = work.index(name)
            if at is None:
                if if_exists:
                    continue
                work.need(name)
            work.cols[at] = work.cols[at]._replace(default=value)
        elif kind == "unsure":
            raise Diverged(f"the statement changes the table in a way the history does not "
                           f"follow ({args[0]})")
        # rename, partition_to_table, table_to_partition: the caller's; others change nothing


def _key_attributes(work: Work, spec) -> None:
    if spec.primary_key:
        if work.pk:
            raise Diverged("the statement adds a primary key to a table that has one")
        work.pk = [spec.name]
    if spec.unique:
        _add_unique(work, None, [(spec.name, False)])


def finish(work: Work, origin: str) -> TableSchema:
    """*work* as a :class:`TableSchema`, the effective key marked on its columns."""
    pk = [work.cols[work.need(c)].name for c in work.pk]
    key = pk
    if not key:
        for _name, parts in work.uniques:
            idx = [work.index(c) for c, _p in parts]
            if all(i is not None and not work.cols[i].nullable for i in idx) and \
                    not any(p for _c, p in parts):
                key = [work.cols[i].name for i in idx]
                break
    keyset = {k.lower() for k in key}
    declared = {k.lower() for k in pk}
    cols = []
    for c in work.cols:
        low = c.name.lower()
        if low in keyset:
            c = c._replace(primary_key=True, nullable=False if low in declared else c.nullable)
        cols.append(c)
    return TableSchema(tuple(cols), work.collation, tuple(pk),
                       tuple((n, tuple(p)) for n, p in work.uniques), origin)
