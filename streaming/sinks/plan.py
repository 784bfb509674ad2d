"""The upsert plan both sinks follow (:class:`~streaming.sinks.delta.upserter.DeltaUpserter`
with delta-rs, :class:`~streaming.sinks.spark.merge.SparkMerge` with Spark's MERGE): what a batch
of changes does to one target table, whatever writes it.

* **Last change per key.** Every row change is a candidate for its key (the after image's for
  inserts, updates and snapshot rows, the before image's for deletes) at rank
  :data:`RANK_CHANGE`; an update whose key changed adds a delete of the old key at rank
  :data:`RANK_MOVED_AWAY` (it loses to the change itself and to anything later with that key,
  and wins over anything before). Per key the candidate with the highest ``(seq, rank)`` wins.
* **The MERGE** (:func:`merge_clauses`): matched and a delete -> delete; matched -> update every
  column; not matched and not a delete -> insert; after a TRUNCATE also: a target row no change
  writes -> delete.
* **TRUNCATE in order** (:meth:`TablePlan.cut`): what came before a table's last truncate (or
  DROP / CREATE TABLE) in the batch is superseded; only the changes after it are merged, with
  the truncate's clause.
* **Schema-change lineage** (:func:`plan_table`): the batch's DDL records of the table in
  ``seq`` order are steps from one shape (columns, key) to the next; a row image before a step
  is read through the steps after it: each column of the final shape comes from a column of the
  image (renames followed back) or is the value the DDL gave existing rows (:class:`Shape`'s
  ``fill``: the record's DEFAULT, MySQL's implicit default of a NOT NULL column, null).
* **Keyless tables are refused** (:func:`refuse_keyless`).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Callable, NamedTuple

from cdc.binlog.constants import ColumnType as T
from cdc.errors import ConfigurationError, SchemaError
from cdc.schema.columns import charset_collation, server_column
from cdc.schema.ddl import CreateTable, parse_ddl
from cdc.values.types import ColumnDef

__all__ = ["OP_COLUMN", "RANK_CHANGE", "RANK_MOVED_AWAY", "merge_clauses", "refuse_keyless",
           "record_columns", "implicit_default", "Shape", "Step", "TableEvents", "TablePlan",
           "plan_table", "RESNAPSHOT", "Moves", "table_moves", "split_name"]

OP_COLUMN = "_cdc_op"     # the change kind carried next to the columns in the MERGE source
RANK_MOVED_AWAY = 0       # the delete of an update's old key
RANK_CHANGE = 1           # the change itself
RESNAPSHOT = ("re-snapshot the table into a new target table (the source's option signalTable, "
              "docs/snapshot.md), or migrate the target table by hand")


def merge_clauses(truncate: bool) -> list[tuple[str, str | None]]:
    """The MERGE's clauses in order, ``(kind, condition on the source row s)``: ``delete``
    (matched), ``update`` (matched: every column), ``insert`` (not matched), and after a
    truncate ``delete_unmatched`` (target rows no change matches)."""
    op = f"s.{OP_COLUMN}"
    out = [("delete", f"{op} = 'd'"), ("update", f"{op} <> 'd'"), ("insert", f"{op} <> 'd'")]
    if truncate:
        out.append(("delete_unmatched", None))
    return out


def refuse_keyless(who: str, db: str, table: str, primary_key) -> None:
    if not primary_key:
        raise ConfigurationError(
            f"{who}: {db}.{table} has no primary key; upserts need a primary key to match "
            f"changes to rows (add one, or leave the table out with excludeTables)")


# --- shapes and steps -----------------------------------------------------------------------------

_ZERO_TEMPORAL = {"date": "0000-00-00", "datetime": "0000-00-00 00:00:00", "year": 0,
                  "time": "00:00:00"}


def _column_def(i: int, c: dict) -> ColumnDef:
    ctype = str(c["type"])
    quoted = "`" + str(c["name"]).replace("`", "``") + "`"
    stmt = parse_ddl(f"CREATE TABLE t ({quoted} {ctype})", mariadb=False)
    if not isinstance(stmt, CreateTable) or len(stmt.columns) != 1:
        raise SchemaError(f"schema change: column {c['name']} has a type {ctype!r} binlog-cdc "
                          f"cannot read")
    charset = c.get("charset") or "utf8mb4"
    try:
        coll = charset_collation("binary" if charset == "binary" else charset)
    except Exception:           # an unknown character set: the text stays text
        coll = charset_collation("utf8mb4")
    col = server_column(stmt.columns[0], coll)._replace(nullable=bool(c.get("nullable", True)))
    out = col.column_def(i)
    if out is None:
        raise SchemaError(f"schema change: column {c['name']} has type {ctype}, which the "
                          f"sinks cannot map to a table type")
    return out


def record_columns(record: dict) -> list[ColumnDef]:
    """The columns of a schema-change record as :class:`~cdc.values.types.ColumnDef`."""
    pk = set(record.get("primary_key") or [])
    cols = [_column_def(i, c) for i, c in enumerate(record["columns"])]
    for c in cols:
        c.primary_key = c.name in pk
    return cols


def implicit_default(col: ColumnDef, data_type: str):
    """The JSON-image value MySQL gives existing rows for a NOT NULL column added without a
    DEFAULT (None: not known)."""
    rt = col.real_type
    if rt in (T.ENUM,):
        return col.enum_values[0] if col.enum_values else ""
    if data_type in _ZERO_TEMPORAL:
        return _ZERO_TEMPORAL[data_type]
    if rt in (T.TIMESTAMP, T.TIMESTAMP2, T.GEOMETRY, T.JSON, T.VECTOR):
        return None
    if rt in (T.TINY, T.SHORT, T.INT24, T.LONG, T.LONGLONG, T.BIT):
        return 0
    if rt in (T.FLOAT, T.DOUBLE, T.NEWDECIMAL):
        return Decimal(0)
    return ""               # text, binary (base64 of b''), SET




class Shape:
    """A table's shape after a schema-change record: columns, key, and what the columns the
    record added hold in the rows that existed before (``fill``: JSON-image values; ``unknown``:
    column -> why its value is not known)."""

    def __init__(self, db: str, table: str, record: dict):
        self.record = record
        self.specs = record["columns"]
        self.columns: list[ColumnDef] = record_columns(record)
        self.primary_key = list(record.get("primary_key") or [])
        self.names = [c.name for c in self.columns]
        self.fill: dict[str, object] = {}
        self.unknown: dict[str, str] = {}
        for spec, col in zip(record["columns"], self.columns):
            if spec.get("default_expr"):
                self.unknown[col.name] = (
                    f"column {col.name} is added with the expression default of "
                    f"{db}.{table}'s DDL {record.get('ddl')!r}, whose value in existing rows is "
                    f"not in the binlog")
            elif spec.get("default") is not None:
                self.fill[col.name] = spec["default"]
            elif spec.get("nullable", True):
                self.fill[col.name] = None
            else:
                v = implicit_default(col, str(spec["type"]).split("(")[0].split()[0].lower())
                if v is None:
                    self.unknown[col.name] = (
                        f"column {col.name} ({spec['type']} NOT NULL, no DEFAULT) is added by "
                        f"{db}.{table}'s DDL {record.get('ddl')!r}; the value MySQL gave "
                        f"existing rows is not known")
                self.fill[col.name] = v

    @classmethod
    def of_columns(cls, columns: list[ColumnDef], primary_key: list[str]) -> "Shape":
        """A shape known from a table definition (no record: nothing to fill)."""
        self = cls.__new__(cls)
        self.record, self.specs = None, None
        self.columns, self.primary_key = list(columns), list(primary_key)
        self.names = [c.name for c in columns]
        self.fill, self.unknown = {}, {}
        return self


class Step:
    """One record applied to a table: from the columns *prev* (names; None: not known) to
    *shape*, columns renamed by *renamed* (``{old: new}``)."""

    def __init__(self, seq: str, prev: list[str] | None, shape: Shape, renamed: dict):
        self.seq, self.prev, self.shape = seq, prev, shape
        self.renamed = dict(renamed or {})
        self.inverse = {new: old for old, new in self.renamed.items()}

    def source(self, name: str, old) -> str | None:
        """The old column the new column *name* comes from (None: added); *old*: the names
        before the step."""
        if name in self.inverse:
            return self.inverse[name]
        return name if name in old and name not in self.renamed else None


# --- one table's plan -----------------------------------------------------------------------------


class TableEvents(NamedTuple):
    """A table's TRUNCATE (op ``t``) and schema-change (op ``s``: the record) changes of a batch,
    ``[(seq, op, record or None)]`` in ``seq`` order."""

    db: str
    table: str
    events: list


class Origin(NamedTuple):
    """Where a final column's value comes from in the rows before some step: the image's
    column *name* (None: none), else *fill* (a JSON-image value; *unknown*: why it is not
    known, None when it is); *present*: the image's column only when the image has it (the
    shape before the batch is not known)."""

    name: str | None
    fill: object = None
    unknown: str | None = None
    present: bool = False


class TablePlan:
    """What a batch does to one table: ``cut`` (the seq of its last truncate, or None),
    ``final`` (the shape its rows are merged in; None: dropped), ``steps`` (the schema changes
    after the cut, whose row images are read through them), ``has_ddl``."""

    RANK_CHANGE = RANK_CHANGE
    RANK_MOVED_AWAY = RANK_MOVED_AWAY

    def __init__(self):
        self.cut: str | None = None
        self.final: Shape | None = None
        self.steps: list[Step] = []
        self.renaming: list[Step] = []      # every step since the last CREATE (target renames)
        self.has_ddl = False

    def on(self, t: str, s: str) -> str:
        """The MERGE's join condition (the key)."""
        return " AND ".join(f"{t}.`{k}` = {s}.`{k}`" for k in self.final.primary_key)

    def renames(self, have: list[str]) -> list[tuple[str, str]]:
        """The column renames that bring a target with columns *have* to the final shape, in
        order (those it already has done left out)."""
        names, out = list(have), []
        for st in self.renaming:
            for old, new in st.renamed.items():
                if old in names and new not in names:
                    names[names.index(old)] = new
                    out.append((old, new))
        return out

    def origins(self, segment: int) -> dict[str, Origin]:
        """For the rows before step *segment* (``len(steps)``: after the last one): where each
        final column comes from."""
        out = {}
        for name in self.final.names:
            out[name] = self._origin(name, segment)
        return out

    def _origin(self, name: str, segment: int) -> Origin:
        for st in reversed(self.steps[segment:]):
            if st.prev is None:                 # not known: the image's column when it has it
                if name in st.inverse:
                    name = st.inverse[name]
                    continue
                return Origin(name, st.shape.fill.get(name), st.shape.unknown.get(name), True)
            src = st.source(name, st.prev)
            if src is None:
                return Origin(None, st.shape.fill.get(name), st.shape.unknown.get(name))
            name = src
        return Origin(name)

    def check_types(self, types: dict[str, str], where: str, same: Callable,
                    hint: str = "") -> None:
        """SchemaError when a target column's type (*types*: name -> the target's type) is not
        the final shape's (*same(column, type)*); *hint*: why the target cannot change it."""
        specs = self.final.specs or [None] * len(self.final.columns)
        bad = [f"column {c.name} is {types[c.name]} in {where} but "
               f"{spec['type'] if spec else c.type_name.lower()} in the source"
               for c, spec in zip(self.final.columns, specs)
               if c.name in types and not same(c, types[c.name])]
        if bad:
            raise SchemaError(f"{where} cannot take the source's columns: " + "; ".join(bad)
                              + (f" ({hint})" if hint else "") + f"; nothing was written; "
                              f"{RESNAPSHOT}")


def plan_table(ev: TableEvents, before: tuple | None, known: Callable[[], tuple]) -> TablePlan:
    """The plan of one table's batch (see the module). *before*: ``(column specs, primary
    key)`` the last schema change applied to the target left (None: not known); *known()*:
    ``(columns, primary key)`` of the table otherwise (the target's or the server's), asked
    only when needed."""
    plan = TablePlan()
    if before is not None:
        shape = Shape(ev.db, ev.table, {"columns": before[0], "primary_key": before[1]})
        prev: list[str] | None = shape.names
    else:
        shape, prev = None, None
    for seq, op, rec in ev.events:
        if op == "t":
            plan.cut, plan.steps = seq, []
            continue
        kind = str(rec.get("type") or "").upper()
        if rec.get("renamed_from") and rec.get("columns") is None:
            continue                    # moved as it is (table_moves); its shape not known
        plan.has_ddl = True
        if kind == "DROP":
            plan.cut, plan.steps, plan.renaming = seq, [], []
            shape, prev = None, None
            continue
        if rec.get("columns") is None:
            raise SchemaError(f"{ev.db}.{ev.table}: the schema change {rec.get('ddl')!r} has no "
                              f"column list; {RESNAPSHOT}")
        new = Shape(ev.db, ev.table, rec)
        if kind == "CREATE":
            plan.cut, plan.steps, plan.renaming = seq, [], []
            prev = []
        step = Step(seq, prev, new, {} if kind == "CREATE" else rec.get("renamed_columns"))
        plan.steps.append(step)
        plan.renaming.append(step)
        shape, prev = new, new.names
    if shape is None and not plan.has_ddl:
        columns, key = known()
        shape = Shape.of_columns(columns, key)
    plan.final = shape
    return plan


# --- tables renamed -------------------------------------------------------------------------------


def split_name(name: str, db: str) -> tuple[str, str]:
    """``(db, table)`` of a record's ``renamed_from`` (``db.t``, or ``t`` in *db*)."""
    if "." in name:
        d, t = name.split(".", 1)
        return d, t
    return db, name


class Moves(NamedTuple):
    """The RENAME TABLEs of a batch (:func:`table_moves`): ``moves``: ``[(seq, old, new)]`` in
    ``seq`` order (names ``(db, table)``); ``spans``: ``{name: [(since, upto, final)]}``: the
    changes of *name* with ``since <= seq < upto`` (None: no bound) belong to the table that
    ends the batch as *final*; ``vacated``: names renamed away and not taken again."""

    moves: list
    spans: dict
    vacated: list

    def final(self, name: tuple, seq: str) -> tuple:
        """The name at the end of the batch of the table *name* had at *seq*."""
        for since, upto, final in self.spans.get(name, ()):
            if (since is None or seq >= since) and (upto is None or seq < upto):
                return final
        return name


def table_moves(tables: list[TableEvents]) -> Moves:
    """Follow the batch's tables through its RENAME TABLEs (records with ``renamed_from``; the
    record is its new name's): the changes a table had under an old name, before the rename,
    belong to it under the name it ends the batch with. A DROP or CREATE starts a new table of
    that name. (Exactly one name per table at any seq.)"""
    events = sorted((seq, (t.db, t.table), op, rec) for t in tables for seq, op, rec in t.events)
    bearer: dict[tuple, list] = {}          # name -> [its final name] (one list per table)
    start: dict[tuple, str | None] = {}
    spans: dict[tuple, list] = {}
    moves, vacated = [], set()

    def close(name, seq):
        if name in bearer:
            spans.setdefault(name, []).append((start.get(name), seq, bearer.pop(name)))

    def table(name):
        return bearer.setdefault(name, [name])

    for seq, name, op, rec in events:
        if op != "s":
            continue
        kind = str(rec.get("type") or "").upper()
        if rec.get("renamed_from"):
            old = split_name(str(rec["renamed_from"]), name[0])
            line = table(old)
            close(old, seq)
            vacated.add(old)
            close(name, seq)
            bearer[name], start[name] = line, seq
            line[0] = name
            vacated.discard(name)
            moves.append((seq, old, name))
        elif kind in ("DROP", "CREATE"):
            close(name, seq)
            bearer[name], start[name] = [name], seq
            if kind == "CREATE":
                vacated.discard(name)
    for name in list(bearer):
        close(name, None)
    out = {}
    for name, parts in spans.items():
        moved = [(a, u, line[0]) for a, u, line in parts if line[0] != name]
        if moved:
            out[name] = moved
    return Moves(moves, out, sorted(vacated))
