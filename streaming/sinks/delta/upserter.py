"""Upserting a ``binlog-cdc`` stream into Delta tables from ``foreachBatch`` (delta-rs, no JVM
Delta needed)::

    from streaming.delta import DeltaUpserter

    up = DeltaUpserter("/data/delta", host="db.example", port=3306, user="cdc",
                       password=secret, app_id="orders-cdc")
    (spark.readStream.format("binlog-cdc").option(...).load()
         .writeStream.foreachBatch(up).option("checkpointLocation", "/chk/orders").start())

For every source table present in a micro-batch:

1. its changes are collected on the driver (``DataFrame.toArrow()``) and the row images (JSON
   texts, or the structs of typed mode) are converted to typed Arrow columns;
2. they are reduced to the LAST change per primary key, in ``seq`` order (an update that changes
   the primary key counts as a delete of the old key and a write of the new one);
3. one ``MERGE`` into ``<root>/<db>/<table>``: matched and deleted -> delete; matched -> update
   all columns; not matched and not deleted -> insert. A table that does not exist yet is
   created by one append of the changes that are not deletes (what that MERGE into an empty
   table gives, without its join: a snapshot's first batch can be a whole table).

``TRUNCATE TABLE`` (op ``t``) is applied in ``seq`` order with the other changes: what came
before the batch's last truncate of a table is superseded, and the table ends up holding only
what the changes after it left: one commit, the MERGE of those changes that also deletes every
other row (``when_not_matched_by_source_delete``), or a plain delete of every row when nothing
follows the truncate. A truncate of a table that has no Delta table yet, with nothing after it,
does nothing (no table is created).

DDL (the source's ``includeSchemaChanges``: ``op='s'`` records) is applied in ``seq`` order too:
:mod:`streaming.sinks.delta.ddl`.

Types: the Delta table's schema comes from the source table (``information_schema`` through
:func:`streaming.contract.tables.columns_from_server`), with the types of :mod:`streaming.sinks.delta.types`
(typed mode's, ``TIME`` as text).

Exactly once: the micro-batch id is committed with each MERGE as the Delta app-transaction
version of ``app_id`` (``CommitProperties(app_transactions=[Transaction(app_id, batch_id)])``). A
batch whose id is <= the version recorded in a table is skipped for that table, so a batch that
Spark replays after a crash is not applied twice. Use one ``app_id`` per checkpoint: a new
checkpoint restarts batch ids at 0, so pair it with a new ``app_id`` (or new tables).

Needs: a primary key on every upserted table, and full after images (``binlog_row_image=FULL``).
A session with delta-spark configured could ``MERGE`` through Spark instead; this module does not.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Callable

import pyarrow as pa

from cdc.values.types import ColumnDef
from cdc.errors import ConfigurationError, SchemaError
from cdc.replica.config import ReplicaConfig

from streaming.sinks.delta.ddl import SCHEMA_CHANGE, apply_schema_changes
from streaming.sinks.delta.narrow import narrow_columns, widen
from streaming.sinks.delta.types import (arrow_schema, delta_spark_type, json_converter,
                                         parse_image, time_texts, typed_converter)
from streaming.sinks.foreach_batch import spark_safe
from streaming.sinks.json_images import NotFast, read_images, reader_schema
from streaming.sinks.delta.last_change import (by_table, in_seq_order, last_changes,
                                               last_changes_typed, last_truncate)
from streaming.sinks.plan import OP_COLUMN, merge_clauses, refuse_keyless
from streaming.sinks.tables import (ColumnSource, ServerColumns, TableInfo, default_table_path,
                                    server_columns, table_info_from_server)
from streaming.contract.envelope import UPSERT_FIELDS
from streaming.contract.spark_schema import image_table


log = logging.getLogger("binlog_cdc.delta")

# --- the upserter ----------------------------------------------------------------------------------


class _Table:
    """The per-source-table state: definition, Delta schema, converters."""

    def __init__(self, db: str, name: str, info: TableInfo):
        self.db, self.name = db, name
        refuse_keyless("DeltaUpserter", db, name, info.primary_key)
        self.columns = info.columns
        self.names = [c.name for c in info.columns]
        self.name_set = set(self.names)
        missing = [k for k in info.primary_key if k not in self.names]
        if missing:
            raise SchemaError(f"DeltaUpserter: {db}.{name}: primary key columns {missing} are not "
                              f"among the columns {self.names}")
        if OP_COLUMN in self.name_set:
            raise SchemaError(f"DeltaUpserter: {db}.{name} has a column named {OP_COLUMN}, the "
                              f"name the upserter uses for the change kind in its MERGE")
        self.primary_key = list(info.primary_key)
        self.pk_index = [self.names.index(k) for k in self.primary_key]
        self.spark_types = [delta_spark_type(c) for c in info.columns]
        self.schema = arrow_schema(info.columns)
        self.json_conv = [json_converter(c, s) for c, s in zip(self.columns, self.spark_types)]
        self.typed_conv = [typed_converter(c) for c in self.columns]
        # the same for whole Arrow columns of typed images (only TIME has one)
        self.typed_arrow_conv = {c.name: time_texts for c, f in zip(self.columns,
                                                                 self.typed_conv) if f}
        self.read_schema = reader_schema(self.schema, self.columns)   # None: value by value


def _no_schema_changes(changes: pa.Table) -> None:
    """Changes without the ``schema_change`` column must hold row changes only: a schema change
    record (op ``s``) without it would be taken for a row change without its image."""
    import pyarrow.compute as pc
    is_s = pc.fill_null(pc.equal(changes.column("op"), "s"), False)
    if not pc.any(is_s).as_py():
        return
    first = changes.filter(is_s).slice(0, 1).to_pylist()[0]
    raise ConfigurationError(
        f"DeltaUpserter: the changes hold schema changes (op s; the first: "
        f"{first['db']}.{first['table']} at {first['seq']}) but not their {SCHEMA_CHANGE} "
        f"column; pass it with the rows (DeltaUpserter.columns_of(df) lists what to select)")


def _quote(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


class DeltaUpserter:
    """A ``foreachBatch`` function: ``up(batch_df, batch_id)`` upserts the changes of a batch of
    the ``binlog-cdc`` source into one Delta table per source table (``<root>/<db>/<table>``).

    The table definitions come from the source server: ``config`` (the stream's
    :class:`~cdc.replica.config.ReplicaConfig`, e.g. ``SourceOptions.replica_config()``, so the
    upserter connects with the same TLS settings as the stream), or ``host``/``port``/``user``/
    ``password``/``ssl``; ``columns``: a :data:`ColumnSource` (``(db, table) -> TableInfo``)
    to use instead. ``table_path``: ``(root, db, table)
    -> path`` to place tables elsewhere. ``storage_options`` go to delta-rs (object stores).
    Table definitions are cached for the life of the upserter and read again when a row image
    does not match them. Its exceptions reach Spark in a form Spark can read
    (:func:`streaming.sinks.foreach_batch.spark_safe`).
    """

    def __init__(self, root: str | os.PathLike, host: str | None = None, port: int = 3306,
                 user: str | None = None, password: str | None = None, *,
                 app_id: str, columns: ColumnSource | None = None,
                 table_path: Callable[[str, str, str], str] | None = None,
                 storage_options: dict[str, str] | None = None, ssl=None,
                 config: ReplicaConfig | None = None):
        if not app_id:
            raise ConfigurationError("DeltaUpserter: app_id is required (it names the stream in "
                                     "the Delta tables' transaction log; one per checkpoint)")
        if columns is None:
            columns = server_columns("DeltaUpserter", host, port, user, password, ssl, config)
        self.root = os.fspath(root)
        self.app_id = str(app_id)
        self.columns = columns
        self.table_path = table_path or default_table_path
        self.storage_options = storage_options
        self._tables: dict[tuple[str, str], _Table] = {}
        self._handles: dict[str, object] = {}      # path -> DeltaTable kept across batches
        self._lock = threading.Lock()

    # --- entry point -----------------------------------------------------------------------------

    @spark_safe
    def __call__(self, df, batch_id: int) -> None:
        self.upsert_arrow(self._collect(df), batch_id)

    def _collect(self, df) -> pa.Table:
        """The changes of *df* as Arrow: of a typed stream without schema changes, only what
        its columns tell (:mod:`streaming.sinks.delta.narrow`)."""
        wanted = self.columns_of(df)
        table = image_table(df.schema)
        if table is not None:
            tbl = self._table(*table)
            columns = narrow_columns(df, *table, tbl.names, tbl.primary_key)
            if columns is not None:
                changes = widen(df.selectExpr(*columns).toArrow(), *table)
                if changes is not None:
                    return changes
                log.info("%s.%s: the batch holds changes of other tables (a union of typed "
                         "streams?): collected again, whole", *table)
        return df.select(*wanted).toArrow()

    @staticmethod
    def columns_of(df) -> list[str]:
        """The columns of a binlog-cdc DataFrame that :meth:`upsert_arrow` reads (the row
        changes', and ``schema_change`` when the source has it)."""
        wanted = list(UPSERT_FIELDS)
        if SCHEMA_CHANGE in df.columns:             # includeSchemaChanges: streaming.sinks.delta.ddl
            wanted.append(SCHEMA_CHANGE)
        missing = [c for c in wanted if c not in df.columns]
        if missing:
            raise ConfigurationError(f"DeltaUpserter: the DataFrame lacks the columns {missing}; "
                                     f"pass the binlog-cdc source's DataFrame unchanged (with "
                                     f"option fields, at least {','.join(UPSERT_FIELDS)})")
        return wanted

    def upsert_arrow(self, changes: pa.Table, batch_id: int) -> dict[str, int]:
        """Upsert an Arrow table of changes (columns op, db, table, before, after, seq, and
        schema_change with schema-change records: :mod:`streaming.sinks.delta.ddl`); returns
        ``{"db.table": rows merged}``, plus one for a truncate (0: skipped as already applied,
        or nothing to do)."""
        with self._lock:
            return self._upsert(changes, int(batch_id))

    def path(self, db: str, table: str) -> str:
        return self.table_path(self.root, db, table)

    def close(self) -> None:
        close = getattr(self.columns, "close", None)
        if close:
            close()

    def __getstate__(self):  # picklable (Spark Connect runs foreachBatch in a server process)
        state = self.__dict__.copy()
        del state["_lock"]
        state["_handles"] = {}
        return state

    def __setstate__(self, state) -> None:
        self.__dict__.update(state)
        self.__dict__.setdefault("_handles", {})
        self._lock = threading.Lock()

    # --- internals -------------------------------------------------------------------------------

    def _upsert(self, changes: pa.Table, batch_id: int) -> dict[str, int]:
        if SCHEMA_CHANGE in changes.column_names:
            changes = apply_schema_changes(self, changes, batch_id)
        else:
            _no_schema_changes(changes)
        if changes.num_rows == 0:
            return {}
        typed = pa.types.is_struct(changes.schema.field("after").type)
        done = {}
        for (db, name), part, in_order in by_table(changes):
            path = self.path(db, name)
            dt = self._open(path)
            if dt is not None:
                applied = dt.transaction_version(self.app_id)
                if applied is not None and batch_id <= applied:
                    log.info("%s.%s: batch %d already applied (recorded %d), skipped",
                             db, name, batch_id, applied)
                    done[f"{db}.{name}"] = 0
                    continue
            # a TRUNCATE supersedes everything before it: only what follows the last one counts
            cut = last_truncate(part)
            if cut is not None:
                part = part.slice(cut + 1)
                if not part.num_rows:
                    done[f"{db}.{name}"] = self._truncate(db, name, path, dt, batch_id)
                    continue
            source = self._last_changes_of(db, name, part, typed, in_order)
            done[f"{db}.{name}"] = self._merge(db, name, path, dt, source, batch_id,
                                               truncate=cut is not None)
        return done

    def _commit_properties(self, db: str, name: str, batch_id: int, truncate: bool):
        from deltalake import CommitProperties, Transaction
        meta = {"binlog_cdc.batch_id": str(batch_id), "binlog_cdc.source": f"{db}.{name}"}
        if truncate:
            meta["binlog_cdc.truncate"] = "true"
        return CommitProperties(app_transactions=[Transaction(self.app_id, batch_id)],
                                custom_metadata=meta)

    def _truncate(self, db: str, name: str, path: str, dt, batch_id: int) -> int:
        """A batch whose last change of the table is a TRUNCATE: delete every row (no table
        definition needed; a table not in Delta yet stays absent)."""
        if dt is None:
            log.info("%s.%s: truncated before it has a Delta table: nothing to delete", db, name)
            return 0
        props = self._commit_properties(db, name, batch_id, truncate=True)
        dt.delete(commit_properties=props)
        self._recorded(path, batch_id, props)
        return 1

    def _recorded(self, path: str, batch_id: int, props) -> None:
        """Make sure the batch id is recorded in the table: an operation that changed nothing
        (a truncate of an empty table) commits nothing, so commit an empty append then."""
        from deltalake import DeltaTable, write_deltalake
        dt = DeltaTable(path, storage_options=self.storage_options)
        applied = dt.transaction_version(self.app_id)
        if applied is None or applied < batch_id:
            empty = pa.schema(dt.schema().to_arrow()).empty_table()
            write_deltalake(path, empty, mode="append", commit_properties=props,
                            storage_options=self.storage_options)

    # --- for streaming.sinks.delta.ddl ---------------------------------------------------------------

    def table_types(self, columns: list[ColumnDef]) -> tuple[pa.Schema, list]:
        """The Delta (Arrow) schema of *columns* and each column's converter from JSON values."""
        return arrow_schema(columns), [json_converter(c, delta_spark_type(c)) for c in columns]

    def use_table(self, db: str, name: str, columns: list[ColumnDef], primary_key: list[str]):
        """Read ``db.name``'s changes with this definition from now on (a schema change's)."""
        self._tables[(db, name)] = _Table(db, name, TableInfo(columns, list(primary_key)))

    def forget_table(self, db: str, name: str) -> None:
        self._tables.pop((db, name), None)

    def known_table(self, db: str, name: str) -> bool:
        return (db, name) in self._tables

    def _open(self, path: str):
        """The Delta table at *path* at its latest version, or None. The handle is kept across
        batches and brought up to date in place (only the commits since the last batch are
        read; a fresh open replays the log since the last checkpoint every batch)."""
        from deltalake import DeltaTable
        from deltalake.exceptions import DeltaError
        dt = self._handles.get(path)
        if dt is not None and ("://" in path or os.path.isdir(os.path.join(path, "_delta_log"))):
            try:                                # (is_deltatable costs as much as an open)
                dt.update_incremental()
                return dt
            except (DeltaError, OSError):
                pass
        self._handles.pop(path, None)           # removed since: created again by the MERGE
        if DeltaTable.is_deltatable(path, storage_options=self.storage_options):
            dt = self._handles[path] = DeltaTable(path, storage_options=self.storage_options)
            return dt
        return None

    def _table(self, db: str, name: str, refresh: bool = False) -> _Table:
        key = (db, name)
        if refresh or key not in self._tables:
            self._tables[key] = _Table(db, name, self.columns(db, name))
        return self._tables[key]

    def _last_changes_of(self, db: str, name: str, part: pa.Table, typed: bool,
                         in_order: bool = True) -> pa.Table:
        """:meth:`_last_changes` of an Arrow table of one table's changes (in ``seq`` order,
        or inserts only: :func:`~streaming.sinks.delta.last_change.by_table`): typed images,
        and JSON images where they can be, in Arrow compute (:mod:`streaming.sinks.plan`)."""
        tbl = self._table(db, name)
        seq = None if in_order else part.column("seq")
        try:
            if typed:
                return last_changes_typed(part.column("op"), part.column("before"),
                                          part.column("after"), tbl.schema, tbl.primary_key,
                                          OP_COLUMN, tbl.typed_arrow_conv, seq)
            if tbl.read_schema is not None:
                return last_changes(part.column("op"), part.column("before"),
                                    part.column("after"), tbl.schema, tbl.read_schema,
                                    tbl.names, tbl.primary_key, OP_COLUMN, seq)
        except NotFast as e:
            log.debug("%s.%s: per-value path (%s)", db, name, e)
        if not in_order:
            part = in_seq_order(part)
        rows = list(zip(*(part.column(c).to_pylist() for c in ("op", "before", "after", "seq"))))
        return self._last_changes(db, name, rows, typed, fast=False)

    def _last_changes(self, db: str, name: str, changes: list, typed: bool,
                      fast: bool = True) -> pa.Table:
        """The last change per primary key as an Arrow table: the table's columns + the op."""
        tbl = self._table(db, name)
        if fast and not typed and tbl.read_schema is not None:
            try:
                return self._last_changes_fast(tbl, changes)
            except NotFast as e:
                log.debug("%s.%s: per-value path (%s)", db, name, e)
        try:
            images = self._images(tbl, changes, typed)
        except _Mismatch:
            tbl = self._table(db, name, refresh=True)       # the table changed since: re-read it
            try:
                images = self._images(tbl, changes, typed)
            except _Mismatch as e:
                raise SchemaError(f"DeltaUpserter: {db}.{name}: {e}; upserts need full row images "
                                  f"(binlog_row_image=FULL) of the table's current columns "
                                  f"{tbl.names}") from None
        last: dict[tuple, tuple[str, list]] = {}
        pk = tbl.pk_index
        for op, before, after in images:        # in seq order: later changes win
            if op == "d":
                last[tuple(before[i] for i in pk)] = ("d", before)
            else:
                if op == "u" and before is not None:
                    old = tuple(before[i] for i in pk)
                    new = tuple(after[i] for i in pk)
                    if old != new:              # primary key changed: the old row is gone
                        last.pop(old, None)
                        last[old] = ("d", before)
                last.pop(tuple(after[i] for i in pk), None)
                last[tuple(after[i] for i in pk)] = (op, after)
        values = list(last.values())
        arrays = []
        for j, field in enumerate(tbl.schema):
            try:
                arrays.append(pa.array([img[j] for _, img in values], type=field.type))
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError) as e:
                raise SchemaError(f"DeltaUpserter: {db}.{name}: values of column {field.name} do "
                                  f"not fit its type {field.type} (was the table altered?): {e}"
                                  ) from None
        arrays.append(pa.array([op for op, _ in values], type=pa.string()))
        return pa.Table.from_arrays(arrays, schema=tbl.schema.append(pa.field(OP_COLUMN,
                                                                               pa.string())))

    def _last_changes_fast(self, tbl: _Table, changes: list) -> pa.Table:
        """:meth:`_last_changes` of JSON images read in one pass (:mod:`streaming.sinks.json_images`);
        :class:`NotFast` when they need the per-value path."""
        a_at: dict[int, int] = {}
        b_at: dict[int, int] = {}
        afters, befores = [], []
        for i, (op, before, after, _seq) in enumerate(changes):
            if op == "d":
                if before is None:
                    raise NotFast("a delete without a before image")
            elif after is None:
                raise NotFast("a change without an after image")
            else:
                a_at[i] = len(afters)
                afters.append(after)
            if before is not None and op in ("d", "u"):
                b_at[i] = len(befores)
                befores.append(before)
        a = read_images(afters, tbl.schema, tbl.read_schema, tbl.names)
        b = read_images(befores, tbl.schema, tbl.read_schema, tbl.primary_key)
        a_keys = list(zip(*(a.column(k).to_pylist() for k in tbl.primary_key)))
        b_keys = list(zip(*(b.column(k).to_pylist() for k in tbl.primary_key)))
        last: dict[tuple, tuple[str, int, int]] = {}       # key -> (op, 0: a / 1: b, row)
        for i, (op, _b, _a, _seq) in enumerate(changes):   # in seq order: later changes win
            if op == "d":
                key = b_keys[b_at[i]]
                last.pop(key, None)
                last[key] = ("d", 1, b_at[i])
                continue
            new = a_keys[a_at[i]]
            if op == "u" and i in b_at:
                old = b_keys[b_at[i]]
                if old != new:                  # primary key changed: the old row is gone
                    last.pop(old, None)
                    last[old] = ("d", 1, b_at[i])
            last.pop(new, None)
            last[new] = (op, 0, a_at[i])
        parts, ops = [], []
        for side, table in ((0, a), (1, b)):
            picked = [(op, row) for op, s, row in last.values() if s == side]
            if picked:
                parts.append(table.take(pa.array([row for _op, row in picked], pa.int64())))
                ops += [op for op, _row in picked]
        out = pa.concat_tables(parts) if parts else tbl.schema.empty_table()
        return out.append_column(pa.field(OP_COLUMN, pa.string()), pa.array(ops, pa.string()))

    def _images(self, tbl: _Table, changes: list, typed: bool) -> list:
        out = []
        for op, before, after, seq in changes:
            # before images only give the key (deletes, primary-key changes): MINIMAL is enough
            b = self._image(tbl, before, typed, False, seq) if before is not None else None
            a = self._image(tbl, after, typed, True, seq) if after is not None else None
            if op == "d" and b is None or op != "d" and a is None:
                raise _Mismatch(f"change {seq} (op {op}) has no {'before' if op == 'd' else 'after'}"
                                f" image")
            out.append((op, b, a))
        return out

    def _image(self, tbl: _Table, image, typed: bool, need: bool, seq: str) -> list:
        """One image as values in the table's column order, converted for Arrow. ``need``: all
        columns must be there (after images; before images of deletes need the key only)."""
        if typed:
            row = image                         # dict: field name -> typed value
            conv = tbl.typed_conv
        else:
            row = parse_image(image)
            conv = tbl.json_conv
        extra = [k for k in row if k not in tbl.name_set]
        if extra:
            raise _Mismatch(f"change {seq} has columns {extra} the table definition lacks")
        out = []
        for j, name in enumerate(tbl.names):
            if name in row:
                v = row[name]
                f = conv[j]
                out.append(v if f is None or v is None else f(v))
            elif need or j in tbl.pk_index:
                raise _Mismatch(f"change {seq} lacks column {name}")
            else:
                out.append(None)
        return out

    def _merge(self, db: str, name: str, path: str, dt, source: pa.Table, batch_id: int,
               truncate: bool = False) -> int:
        """MERGE the last changes per key; *truncate*: they follow a TRUNCATE, so every other
        row of the table goes (in the same commit)."""
        from deltalake import DeltaTable
        tbl = self._table(db, name)
        merge_schema = False
        props = self._commit_properties(db, name, batch_id, truncate)
        if dt is None:
            if self._create_with(db, name, path, source, props):
                return source.num_rows + 1 if truncate else source.num_rows
            dt = DeltaTable.create(path, tbl.schema, mode="ignore", name=f"{db}.{name}",
                                   storage_options=self.storage_options)
            self._handles[path] = dt
        else:
            merge_schema = self._check_schema(db, name, dt, tbl)
        predicate = " AND ".join(f"t.{_quote(k)} = s.{_quote(k)}" for k in tbl.primary_key)
        if not truncate:
            predicate = key_ranges(source, tbl.schema, tbl.primary_key) + predicate
        merge = dt.merge(source, predicate, source_alias="s", target_alias="t",
                         merge_schema=merge_schema, commit_properties=props)
        for kind, cond in merge_clauses(truncate):        # streaming.sinks.plan
            if kind == "delete":
                merge = merge.when_matched_delete(predicate=cond)
            elif kind == "update":
                merge = merge.when_matched_update_all(predicate=cond, except_cols=[OP_COLUMN])
            elif kind == "insert":
                merge = merge.when_not_matched_insert_all(predicate=cond, except_cols=[OP_COLUMN])
            else:
                merge = merge.when_not_matched_by_source_delete()
        merge.execute()
        if truncate:
            self._recorded(path, batch_id, props)
            return source.num_rows + 1
        return source.num_rows

    def _create_with(self, db: str, name: str, path: str, source: pa.Table, props) -> bool:
        """A table that does not exist yet: create it holding the last changes that are not
        deletes, in one append commit with the batch id -- what a MERGE into the empty table
        gives, without its join (a snapshot's first batch can be the whole table). False when
        the table appeared meanwhile: the caller MERGEs."""
        import pyarrow.compute as pc
        from deltalake import DeltaTable, write_deltalake
        from deltalake.exceptions import DeltaError
        keep = pc.not_equal(source.column(OP_COLUMN), "d")
        rows = source if not keep.null_count and pc.all(keep).as_py() else source.filter(keep)
        rows = rows.drop_columns([OP_COLUMN])
        try:
            write_deltalake(path, rows, mode="error", name=f"{db}.{name}",
                            commit_properties=props, storage_options=self.storage_options)
        except (DeltaError, FileExistsError) as e:
            log.info("%s.%s: created meanwhile (%s): MERGE", db, name, e)
            return False
        self._handles[path] = DeltaTable(path, storage_options=self.storage_options)
        return True

    def _check_schema(self, db: str, name: str, dt, tbl: _Table) -> bool:
        """Whether the Delta table can take the source's columns; True when columns must be
        added (MERGE with schema evolution). Raises SchemaError when it cannot."""
        from deltalake import Schema
        have = {f.name: f.type for f in dt.schema().fields}
        want = Schema.from_arrow(tbl.schema).fields
        problems, added = [], []
        for f in want:
            if f.name not in have:
                added.append(f.name)
            elif have[f.name] != f.type:
                problems.append(f"column {f.name} is {_type_text(have[f.name])} in the Delta "
                                f"table but {_type_text(f.type)} in the source")
        gone = [n for n in have if n not in {f.name for f in want}]
        if gone:
            problems.append(f"columns {gone} of the Delta table are no longer in the source")
        if problems:
            raise SchemaError(
                f"DeltaUpserter: {db}.{name} changed in a way the Delta table "
                f"{self.path(db, name)} cannot take: " + "; ".join(problems) + ". Rebuild the "
                "Delta table (drop it and re-stream from a snapshot) or migrate it by hand")
        if added:
            log.info("%s.%s: adding columns %s to the Delta table", db, name, added)
        return bool(added)


def key_ranges(source: pa.Table, schema: pa.Schema, key: list[str]) -> str:
    """``t.k >= min AND t.k <= max AND `` for each integer key column *k* of the changes: the
    same matches (a target row equal to a change's key lies in the changes' range), but
    delta-rs skips every file whose statistics lie outside it instead of reading the whole
    table each batch (a stream's inserts land beyond every existing file: a one-row MERGE after
    300 batches went from ~170 to ~100 ms). Other key types: no range (string statistics may
    be truncated)."""
    import pyarrow.compute as pc
    out = []
    for k in key:
        if not pa.types.is_integer(schema.field(k).type):
            continue
        lo_hi = pc.min_max(source[k])
        lo, hi = lo_hi["min"].as_py(), lo_hi["max"].as_py()
        if lo is None:
            continue
        out.append(f"t.{_quote(k)} >= {int(lo)} AND t.{_quote(k)} <= {int(hi)} AND ")
    return "".join(out)


def _type_text(t) -> str:
    s = str(t)
    if s.startswith("PrimitiveType("):
        return s[len("PrimitiveType("):-1].strip('"')
    return s


class _Mismatch(Exception):
    """A row image does not fit the table definition at hand."""


__all__ = ["DeltaUpserter", "ServerColumns", "TableInfo", "ColumnSource", "arrow_schema",
           "default_table_path", "delta_spark_type", "table_info_from_server"]
