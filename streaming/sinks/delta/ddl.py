"""The source's DDL in the Delta tables of :class:`streaming.sinks.delta.upserter.DeltaUpserter`: the
schema-change records of a batch (``op='s'`` rows with a ``schema_change`` JSON column, the
source's option ``includeSchemaChanges``) applied in ``seq`` order with the batch's other changes.

:func:`apply_schema_changes` runs before the upserter's per-table loop and hands it back the
batch's row changes, every one in the shape its table has at the END of the batch, so that the loop
(last change per key, truncates, one MERGE per table) works unchanged:

* Each table is followed as a *lineage*: it starts from the Delta table at its path as it was
  before the batch (or from nothing: ``CREATE``), is renamed by ``RENAME``, ends at ``DROP`` (or
  at a ``CREATE`` of its name). Every row change belongs to the lineage bearing its table name at
  its ``seq``.
* A record (ALTER/RENAME/CREATE) is a step from the previous shape (the previous record's, or
  for the first one the Delta table's own columns) to the record's ``columns``: columns matched by
  name (``renamed_columns`` first) are kept, converted to their new Delta type by Arrow's safe cast;
  new ones get the record's ``default`` literal (or MySQL's implicit default of a NOT NULL
  column: 0, ``''``, the first ENUM member...; null when nullable); dropped ones go. Row images
  before a record go through the same steps (their values re-read with the new type); the Delta
  table's rows are converted once, in memory, and overwritten in one commit (``schema_mode=
  overwrite``) when the Delta columns change -- a *rewrite*. A step that changes no Delta column
  (a key, a character set, a VARCHAR length) writes nothing.
* ``RENAME TABLE``: the lineage's rows (those before the rename too) go to the new name's path,
  whose Delta table becomes the old one's content (a rewrite); the old path keeps its Delta table,
  its rows deleted. ``DROP TABLE``: the Delta table's rows are deleted, the table kept (as a
  TRUNCATE). ``CREATE TABLE`` (also after a DROP in the same batch): the path gets a new, empty
  Delta table of that shape.
* Nothing is written before every step of the batch has been checked: a column added with an
  expression default (``CURRENT_TIMESTAMP``...) to a table holding rows, a value the new type
  cannot hold, a record without columns, stops with :class:`~cdc.errors.SchemaError`.

Exactly once: a rewrite commits the batch id as the Delta app-transaction version of
``<app_id>#ddl``; a replayed batch skips the rewrites already recorded (and reads a rename's
source as it was before the batch), then merges as usual (``<app_id>``).
"""

from __future__ import annotations

import logging
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc

from cdc.errors import SchemaError
from cdc.values.render import to_json_text

from streaming.contract.envelope import SCHEMA_CHANGE
from streaming.sinks.delta.types import parse_image
from streaming.sinks.plan import RESNAPSHOT, Shape, Step, record_columns, split_name

__all__ = ["SCHEMA_CHANGE", "DDL_SUFFIX", "apply_schema_changes", "record_columns",
           "delta_shape"]

log = logging.getLogger("binlog_cdc.delta")

DDL_SUFFIX = "#ddl"         # <app_id>#ddl: the app transaction of the rewrites
_META, _KEY = "binlog_cdc.column", "binlog_cdc.key"    # Delta column metadata


# --- the shape a record describes -----------------------------------------------------------------


class _Shape(Shape):
    """:class:`streaming.sinks.plan.Shape` with the Delta table's Arrow schema and converters."""

    def __init__(self, up, db: str, table: str, record: dict):
        super().__init__(db, table, record)
        self.schema, self.conv = up.table_types(self.columns)
        pk = self.primary_key
        self.annotated = pa.schema([   # the schema with each column's MySQL definition
            f.with_metadata({_META: to_json_text(spec),
                             _KEY: str(pk.index(f.name) + 1) if f.name in pk else ""})
            for f, spec in zip(self.schema, record["columns"])])


# --- steps and lineages ---------------------------------------------------------------------------


class _Step(Step):
    """:class:`streaming.sinks.plan.Step` of a lineage: from *prev_schema* (the Arrow schema,
    or None: not known) to *shape*, with the conversion of row images and Delta tables."""

    def __init__(self, seq: str, prev_schema: pa.Schema | None, shape: _Shape, renamed: dict):
        super().__init__(seq, prev_schema.names if prev_schema is not None else None, shape,
                         renamed)
        self.prev_schema = prev_schema
        self._retyped_at: dict[int, bool] = {}

    def changes_data(self) -> bool:
        """Whether the Delta columns change (names, order or Delta types)."""
        if self.prev_schema is None:
            return True
        return [(f.name, _delta_type(f.type)) for f in self.prev_schema] != \
            [(f.name, _delta_type(f.type)) for f in self.shape.schema]

    def image(self, row: dict, typed: bool) -> dict:
        old = set(self.prev_schema.names) if self.prev_schema is not None else set(row)
        out = {}
        for j, name in enumerate(self.shape.names):
            src = self.source(name, old)
            if src is not None:
                if src in row:
                    out[name] = v = row[src]
                    if v is not None and self._retyped(j, src):
                        self._check(j, v, typed)
            elif name in self.shape.unknown:
                raise SchemaError(f"DeltaUpserter: {self.shape.unknown[name]} (a change before "
                                  f"it in the same batch needs it); {RESNAPSHOT}")
            else:
                v = self.shape.fill[name]
                out[name] = self.shape.conv[j](v) if typed and v is not None else v
        return out

    def _retyped(self, j: int, src: str) -> bool:
        """Whether column *j* comes from *src* of another Delta type (or one not known)."""
        if j not in self._retyped_at:
            new = self.shape.schema.field(j).type
            old = self.prev_schema.field(src).type if self.prev_schema is not None else None
            self._retyped_at[j] = old is None or _delta_type(old) != _delta_type(new)
        return self._retyped_at[j]

    def _check(self, j: int, v, typed: bool) -> None:
        """A value of a change before the DDL must fit the column's new type as the Delta
        table's values must (checked before anything is written)."""
        field = self.shape.schema.field(j)
        try:
            if isinstance(v, Decimal) and pa.types.is_integer(field.type) \
                    and v != v.to_integral_value():
                raise ValueError("not an integer")
            pa.array([v if typed else self.shape.conv[j](v)], type=field.type)
        except (ValueError, TypeError, ArithmeticError, OverflowError, pa.ArrowException) as e:
            raise SchemaError(
                f"DeltaUpserter: a change before {self.shape.record.get('ddl')!r} in the same "
                f"batch has {field.name} = {v!r}, which the column's new type {field.type} "
                f"cannot hold ({e}); nothing was written; {RESNAPSHOT}") from None

    def table(self, data: pa.Table, where: str) -> pa.Table:
        old = set(data.column_names)
        arrays = []
        for j, field in enumerate(self.shape.schema):
            src = self.source(field.name, old)
            if src is not None:
                arr = data.column(src)
                if arr.type != field.type:
                    try:
                        arr = _cast(arr, field.type)
                    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
                        raise SchemaError(
                            f"DeltaUpserter: {where}: the DDL {self.shape.record.get('ddl')!r} "
                            f"changes column {field.name} from {arr.type} to {field.type}, and "
                            f"the Delta table's values do not convert exactly ({e}); "
                            f"{RESNAPSHOT}") from None
                arrays.append(arr)
            elif field.name in self.shape.unknown and data.num_rows:
                raise SchemaError(f"DeltaUpserter: {where}: {self.shape.unknown[field.name]}; "
                                  f"nothing was written; {RESNAPSHOT}")
            else:
                v = self.shape.fill.get(field.name)
                v = None if v is None else self.shape.conv[j](v)
                arrays.append(pa.array([v] * data.num_rows, type=field.type))
        return pa.Table.from_arrays(arrays, schema=self.shape.schema)


def _cast(arr, to: pa.DataType):
    """Arrow's safe cast; to a DECIMAL through decimal(38, scale) (Arrow refuses int32 ->
    decimal(12, 3) for its type's width, whatever the values)."""
    try:
        return pc.cast(arr, to, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        if not pa.types.is_decimal(to) or to.precision >= 38:
            raise
    return pc.cast(pc.cast(arr, pa.decimal128(38, to.scale), safe=True), to, safe=True)


def _delta_type(t: pa.DataType) -> str:
    from deltalake import Schema
    return str(Schema.from_arrow(pa.schema([pa.field("x", t)])).fields[0].type)


class _Lineage:
    def __init__(self, name: tuple, origin: tuple | None, prev: pa.Schema | None):
        self.name, self.origin = name, origin
        self.created = origin is None
        self.alive = True
        self.steps: list[_Step] = []
        self.prev = prev                    # the shape before the first step (Delta's)
        self.has_rows = False

    @property
    def shape(self) -> pa.Schema | None:
        return self.steps[-1].shape.schema if self.steps else self.prev


# --- the plan -------------------------------------------------------------------------------------


class _Planner:
    def __init__(self, up, batch_id: int):
        self.up, self.batch_id = up, batch_id
        self.ddl_app = up.app_id + DDL_SUFFIX
        self.bearer: dict[tuple, _Lineage] = {}
        self.lineages: list[_Lineage] = []
        self.vacated: dict[tuple, str] = {}        # path name -> seq it was left at
        self._before: dict[tuple, object] = {}

    def before(self, name: tuple):
        """The Delta table at *name*'s path as it was before this batch (None: none)."""
        if name not in self._before:
            self._before[name] = _table_before(self.up, self.up.path(*name), self.batch_id,
                                               self.ddl_app)
        return self._before[name]

    def lineage(self, name: tuple) -> _Lineage:
        if name not in self.bearer:
            dt = self.before(name)
            prev = pa.schema(dt.schema().to_arrow()) if dt is not None else None
            self.bearer[name] = _Lineage(name, name, prev)
            self.lineages.append(self.bearer[name])
        return self.bearer[name]

    def record(self, db: str, table: str, seq: str, rec: dict) -> None:
        kind = str(rec.get("type") or "").upper()
        name = (db, table)
        if kind == "DROP":
            line = self.lineage(name)
            line.alive = False
            del self.bearer[name]
            self.vacated[name] = seq
            return
        if rec.get("columns") is None and not (rec.get("renamed_from") and kind == "RENAME"):
            raise SchemaError(f"DeltaUpserter: {db}.{table}: the schema change {rec.get('ddl')!r}"
                              f" has no column list; {RESNAPSHOT}")
        if rec.get("unsure"):
            log.warning("%s.%s: the source could not follow %r exactly; columns are matched by "
                        "name", db, table, rec.get("ddl"))
        if kind == "CREATE":
            old = self.bearer.pop(name, None)
            if old is not None:
                old.alive = False
            line = _Lineage(name, None, None)
            self.lineages.append(line)
            self.bearer[name] = line
        elif rec.get("renamed_from"):
            src = split_name(str(rec["renamed_from"]), db)
            line = self.lineage(src)
            del self.bearer[src]
            self.vacated[src] = seq
            self.bearer.pop(name, None)
            line.name = name
            self.bearer[name] = line
        else:
            line = self.lineage(name)
        self.vacated.pop(name, None)
        if rec.get("columns") is None:       # a RENAME of a table of unknown shape: moved as is
            return
        line.steps.append(_Step(seq, line.shape, _Shape(self.up, db, table, rec),
                                {} if kind == "CREATE" else rec.get("renamed_columns") or {}))


def _table_before(up, path: str, batch_id: int, ddl_app: str):
    from deltalake import DeltaTable
    if not DeltaTable.is_deltatable(path, storage_options=up.storage_options):
        return None
    dt = DeltaTable(path, storage_options=up.storage_options)
    done = [v for v in (dt.transaction_version(up.app_id), dt.transaction_version(ddl_app))
            if v is not None]
    if done and max(done) >= batch_id:        # a replay: this batch already wrote here
        ours = [h["version"] for h in dt.history()
                if h.get("binlog_cdc.batch_id") == str(batch_id)]
        if ours:
            if min(ours) == 0:
                return None
            dt.load_as_version(min(ours) - 1)
    return dt


def apply_schema_changes(up, changes: pa.Table, batch_id: int) -> pa.Table:
    """Apply the schema-change records of *changes* to *up*'s Delta tables; return the other
    changes (op, db, table, before, after, seq), each in its table's final shape (see the
    module)."""
    pairs = changes.select(["db", "table"]).group_by(["db", "table"]).aggregate([])
    _known_shapes(up, {(r["db"], r["table"]) for r in pairs.to_pylist()})
    if not pc.any(pc.equal(changes.column("op"), "s")).as_py():     # the usual batch: no DDL
        return changes.drop_columns([SCHEMA_CHANGE])
    ops = changes.column("op").to_pylist()
    dbs = changes.column("db").to_pylist()
    tables = changes.column("table").to_pylist()
    seqs = changes.column("seq").to_pylist()
    recs = changes.column(SCHEMA_CHANGE).to_pylist()
    typed = pa.types.is_struct(changes.schema.field("after").type)
    befores = changes.column("before").to_pylist()
    afters = changes.column("after").to_pylist()
    plan = _Planner(up, batch_id)
    touched = set()
    for i, op in enumerate(ops):
        if op == "s":
            rec = parse_image(recs[i]) if isinstance(recs[i], str) else recs[i]
            recs[i] = rec
            touched.add((dbs[i], tables[i]))
            if rec.get("renamed_from"):
                touched.add(split_name(str(rec["renamed_from"]), dbs[i]))
    owner: dict[int, tuple[_Lineage, int]] = {}
    for i in sorted(range(len(ops)), key=seqs.__getitem__):
        name = (dbs[i], tables[i])
        if ops[i] == "s":
            plan.record(dbs[i], tables[i], seqs[i], recs[i])
        elif name in touched:
            line = plan.lineage(name)
            line.has_rows = True
            owner[i] = (line, len(line.steps))
    # everything is converted and checked before anything is written
    actions = _rewrites(up, plan, batch_id)
    keep, out_dbs, out_tables, out_b, out_a = [], [], [], [], []
    for i in range(len(ops)):
        if ops[i] == "s":
            continue
        b, a, db, table = befores[i], afters[i], dbs[i], tables[i]
        if i in owner:
            line, k = owner[i]
            if not line.alive:
                continue                      # dropped or recreated: its rows are gone
            db, table = line.name
            if k < len(line.steps):
                b = _convert(b, line.steps[k:], typed)
                a = _convert(a, line.steps[k:], typed)
        keep.append(i)
        out_dbs.append(db)
        out_tables.append(table)
        out_b.append(b)
        out_a.append(a)
    extra = [(db, t, seq) for (db, t), seq in plan.vacated.items()]
    _write(up, actions, batch_id, plan.ddl_app)
    for line in plan.lineages:
        if line.alive and line.steps:
            shape = line.steps[-1].shape
            if shape.primary_key:
                up.use_table(line.name[0], line.name[1], shape.columns, shape.primary_key)
            else:
                up.forget_table(*line.name)
    image_type = changes.schema.field("after").type
    take = pa.array(keep, pa.int64())
    n = len(extra)
    return pa.table({
        "op": pa.array([ops[i] for i in keep] + ["t"] * n, pa.string()),
        "db": pa.array(out_dbs + [d for d, _t, _s in extra], pa.string()),
        "table": pa.array(out_tables + [t for _d, t, _s in extra], pa.string()),
        "before": _images(out_b + [None] * n, image_type, typed),
        "after": _images(out_a + [None] * n, image_type, typed),
        "seq": pa.concat_arrays([changes.column("seq").combine_chunks().take(take),
                                 pa.array([s for _d, _t, s in extra], pa.string())]),
    })


def _known_shapes(up, names: set) -> None:
    """Tables the upserter meets for the first time take the shape a rewrite left in their
    Delta table (the source's at the last DDL the upserter applied), not today's server's."""
    from deltalake import DeltaTable
    for db, table in names:
        if up.known_table(db, table):
            continue
        path = up.path(db, table)
        if not DeltaTable.is_deltatable(path, storage_options=up.storage_options):
            continue
        shape = delta_shape(DeltaTable(path, storage_options=up.storage_options))
        if shape is not None and shape["primary_key"]:
            up.use_table(db, table, record_columns(shape), shape["primary_key"])


def _images(values: list, image_type: pa.DataType, typed: bool) -> pa.Array:
    if not typed:
        return pa.array(values, pa.string())
    arr = pa.array(values)
    return arr if pa.types.is_struct(arr.type) else pa.array(values, image_type)


def _convert(image, steps: list[_Step], typed: bool):
    if image is None:
        return None
    row = dict(image) if typed else parse_image(image)
    for st in steps:
        row = st.image(row, typed)
    return row if typed else to_json_text(row)


def _rewrites(up, plan: _Planner, batch_id: int) -> list[tuple]:
    """What the batch's DDL writes, computed and checked in memory: ``("write", path, content,
    ddl)`` (a rewrite) or ``("meta", path, {column: metadata}, ddl)`` (only the columns' MySQL
    definitions change), for every path not yet recorded as done."""
    from deltalake import DeltaTable
    out = []
    for line in plan.lineages:
        moved = line.origin != line.name
        if not line.alive or not (line.steps or moved):
            continue
        shape = line.steps[-1].shape if line.steps else None
        if shape is not None and not shape.primary_key and line.has_rows:
            raise SchemaError(f"DeltaUpserter: {line.name[0]}.{line.name[1]} has no primary key "
                              f"after {shape.record.get('ddl')!r}; upserts need one (add one, or "
                              f"leave the table out with excludeTables)")
        path = up.path(*line.name)
        now = None
        if DeltaTable.is_deltatable(path, storage_options=up.storage_options):
            now = DeltaTable(path, storage_options=up.storage_options)
            v = now.transaction_version(plan.ddl_app)
            if v is not None and v >= batch_id:
                log.info("%s: the DDL of batch %d is already applied", path, batch_id)
                continue
        ddl = "; ".join(str(s.shape.record.get("ddl")) for s in line.steps)
        if not (line.created or moved or any(s.changes_data() for s in line.steps)):
            have = {f.name: dict(f.metadata or {}) for f in now.schema().fields} if now else {}
            want = {f.name: {k.decode(): v.decode() for k, v in f.metadata.items()}
                    for f in shape.annotated}
            meta = {n: m for n, m in want.items() if have.get(n) != m}
            if meta and now is not None:
                out.append(("meta", path, meta, ddl))
            continue
        where = f"{line.name[0]}.{line.name[1]} ({path})"
        origin = None if line.created else plan.before(line.origin)
        if origin is None and shape is None:
            continue                        # nothing to move, shape unknown: nothing to write
        if origin is None:
            data = shape.schema.empty_table()
        else:
            data = origin.to_pyarrow_table()
            if shape is None:               # moved as is, with the columns' metadata
                data = data.cast(pa.schema(origin.schema().to_arrow()))
            for st in line.steps:
                data = st.table(data, where)
        if shape is not None:
            data = pa.Table.from_arrays(data.columns, schema=shape.annotated)
        out.append(("write", path, data, ddl))
    return out


def _write(up, actions: list, batch_id: int, ddl_app: str) -> None:
    from deltalake import CommitProperties, DeltaTable, Transaction, write_deltalake

    def props(ddl, last=True):
        return CommitProperties(
            app_transactions=[Transaction(ddl_app, batch_id)] if last else None,
            custom_metadata={"binlog_cdc.batch_id": str(batch_id), "binlog_cdc.ddl": ddl[:4000]})
    for kind, path, data, ddl in actions:
        if kind == "meta":          # one commit a column; the last one records the batch
            dt = DeltaTable(path, storage_options=up.storage_options)
            for k, (name, meta) in enumerate(data.items()):
                dt.alter.set_column_metadata(name, meta,
                                             commit_properties=props(ddl, k == len(data) - 1))
            continue
        log.info("%s: rewritten for %s (%d rows)", path, ddl, data.num_rows)
        write_deltalake(path, data, mode="overwrite", schema_mode="overwrite",
                        commit_properties=props(ddl), storage_options=up.storage_options)


def delta_shape(dt) -> dict | None:
    """The shape (``{"columns": [...], "primary_key": [...]}``) a rewrite left in the Delta
    table's column metadata; None when not every column has it."""
    columns, key = [], []
    for f in dt.schema().fields:
        meta = f.metadata or {}
        if _META not in meta:
            return None
        columns.append(parse_image(meta[_META]))
        if meta.get(_KEY):
            key.append((int(meta[_KEY]), f.name))
    return {"columns": columns, "primary_key": [n for _k, n in sorted(key)]}
