"""Arrow record batches of the ``binlog-cdc`` source's schema (:mod:`streaming.contract.spark_schema`) from
committed transactions: :class:`BatchBuilder` and :func:`record_batches`."""

from __future__ import annotations

from itertools import repeat
from typing import Callable, Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.types import StructField, StructType

from cdc.positions import binlog_file_number
from cdc.schema.history import point_key
from cdc.values.types import ABSENT, ColumnDef
from cdc.errors import SchemaError, ShapeChangedError
from cdc.binlog.events import RowsEvent
from cdc.binlog.transactions import SchemaChangeAt, key_values
from cdc.values.render import (compile_json_pair_renderer, compile_json_renderer, row_json,
                               to_json_text)

from streaming._compat import to_arrow_schema, to_arrow_type
from streaming.source.arrow_values import (array, has_int_form, int_form_array, int_forms,
                                           to_int_form)
from streaming.contract.spark_schema import IDENTITY_TYPES, SOURCE_TYPE, image_struct, spark_column


class _TablePlan:
    """What the builder needs per table map, computed once per batch: column names, the
    generated JSON renderers (full images, primary keys), the typed fields' column indexes."""

    __slots__ = ("tmap", "reader", "names", "ncols", "render", "render_pairs", "render_key",
                 "keys", "typed_index", "int_form")

    def __init__(self, tmap, typed_names: list[str] | None):
        self.tmap = tmap
        self.reader = tmap.full_row_reader   # replaced when the table map's names change
        self.names = names = tmap.column_names
        self.ncols = len(names)
        self.render = self.render_pairs = None
        if typed_names is None:
            self.render = compile_json_renderer(tmap.columns, names)
            self.render_pairs = compile_json_pair_renderer(tmap.columns, names)
        self.keys: dict[tuple, Callable] = {}
        self.render_key = self.key_renderer(tmap.primary_key) if tmap.primary_key else None
        self.int_form = frozenset()     # BatchBuilder._int_form
        if typed_names is not None:
            where = {n: i for i, n in enumerate(names)}
            self.typed_index = [where.get(n) for n in typed_names]

    def key_renderer(self, pk):
        pk = tuple(pk)
        fn = self.keys.get(pk)
        if fn is None:
            fn = self.keys[pk] = compile_json_renderer(self.tmap.columns, self.names, pk)
        return fn


class BatchBuilder:
    """Collects the row changes of committed transactions (:class:`cdc.binlog.transactions.Transaction`)
    and turns them into ``pyarrow.RecordBatch``es of exactly the source's schema: the rows one
    :class:`~cdc.binlog.transactions.RowChange` each would give, in the same order.

    Works per rows event, column by column: the envelope fields are runs of one value per event
    (Arrow expands them at :meth:`flush`), full row images go through a JSON renderer generated
    per table layout (:func:`cdc.values.render.compile_json_renderer`), typed images are built one
    struct child at a time and go to Arrow in chunks of about ``_TYPED_CHUNK_VALUES`` values;
    DECIMAL (up to 18 digits), DATETIME, TIMESTAMP and DATE values come from the row decoder in
    Arrow's integer form (:meth:`_int_form`) and go to Arrow from buffers.
    """

    def __init__(self, schema: StructType, typed_columns: list[ColumnDef] | None = None, *,
                 table: str | None = None, schema_point: tuple | None = None):
        self.schema = schema
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")
        self.typed = typed_columns is not None
        # includeSchemaChanges: schema changes are rows (op s) with this column
        self.with_changes = "schema_change" in schema.fieldNames()
        # option fields: the envelope columns built (the key's JSON only when delivered)
        self.with_key = "key" in schema.fieldNames()
        # typed mode: the table ("db.t") whose shape the stream's schema is
        self.table = table
        self.typed_columns = typed_columns
        # typed mode: (file, pos) where the table's shape was read; a statement before it is
        # already in that shape (a restarted query replays it), one after it changes the shape
        self.schema_point = point_key(*schema_point) if schema_point else None
        # typed mode: a statement changed the table in a way the schema history does not know:
        # the table's next table map says whether its shape changed (SchemaChangeAt)
        self.typed_pending = None
        self.names = None
        if self.typed:
            self.names = [c.name for c in typed_columns]
            self.converters = [spark_column(c).convert for c in typed_columns]
            self.identity = [IDENTITY_TYPES.get(c) for c in self.converters]
            image_type = to_arrow_schema(StructType([StructField(
                "image", image_struct(typed_columns))]), timezone="UTC").field(0).type
            self.image_fields = [image_type.field(i) for i in range(image_type.num_fields)]
            self._chunk_rows = max(256, _TYPED_CHUNK_VALUES // max(1, len(self.names)))
            # the fields whose values are collected in Arrow's integer form (DECIMAL up to 18
            # digits, timestamps, dates: no Decimal/datetime/date per value), and how a value
            # the decoder gave as an object gets that form
            self.to_int = [to_int_form(f.type) if has_int_form(f.type) else None
                           for f in self.image_fields]
        self._plans: dict[int, _TablePlan] = {}
        self._file_numbers: dict[str, int] = {}
        self._reset()

    def _reset(self) -> None:
        # per rows event: (end row, op, db, table, ts_ms, server_id, file, pos, gtid, xid,
        # seq prefix)
        self.events: list[tuple] = []
        self.s_row: list[int] = []
        self.key: list = []
        self.key_filled = False
        self.change_texts: dict[int, str] = {}    # batch row -> schema_change JSON (op s)
        self.before_filled = self.after_filled = False     # (JSON images)
        if self.typed:
            self.before = _TypedImage(len(self.names))
            self.after = _TypedImage(len(self.names))
        else:
            self.before, self.after = [], []
        self.rows = 0

    def __len__(self) -> int:
        return self.rows

    def _plan(self, tmap) -> _TablePlan:
        plan = self._plans.get(id(tmap))
        if plan is None or plan.tmap is not tmap or plan.reader is not tmap.full_row_reader:
            plan = self._plans[id(tmap)] = _TablePlan(tmap, self.names)  # keeps tmap alive
            if self.typed:
                plan.int_form = self._int_form(plan)
        return plan

    def _int_form(self, plan: _TablePlan) -> frozenset:
        """The columns of *plan*'s table map that the row decoder may give in Arrow's integer
        form (:func:`cdc.rows.decode.decode_image_columns`): those of a typed field collected in
        that form whose column has the field's type (:meth:`add_events` leaves out the primary
        key's when the key's JSON is rendered from the values)."""
        columns = plan.tmap.columns
        return frozenset(i for j, i in enumerate(plan.typed_index)
                         if i is not None and self.to_int[j] is not None and
                         spark_column(columns[i]).spark ==
                         spark_column(self.typed_columns[j]).spark)

    def add_transaction(self, tx) -> None:
        """Add every row change of *tx*."""
        for _ in self.add_events(tx):
            pass

    def add_events(self, tx):
        """Add the row changes of *tx* one rows event at a time, yielding after each (so a
        caller can flush a batch in the middle of a big transaction)."""
        file, pos, gtid, xid, server_id = tx.file, tx.pos, tx.gtid, tx.xid, tx.server_id
        ts = tx.timestamp * 1000 if tx.timestamp is not None else None
        typed = self.typed
        # RowChange.key() takes the primary key of the transaction's table map of that name
        tables = tx.tables_by_name
        # TRUNCATE TABLEs (op t) and schema changes (op s), each after the first .at rows
        # events (a snapshot chunk has none)
        truncates = tx.statements() if getattr(tx, "schema_changes", None) else \
            (getattr(tx, "truncates", None) or ())
        k = 0
        prefix = None
        index = 0
        for number, ev in enumerate(tx.rows_events):
            while k < len(truncates) and truncates[k].at <= number:
                if prefix is None:
                    prefix = self._prefix(file, pos)
                index += self._statement(truncates[k], index,
                                         (ts, server_id, file, pos, gtid, xid, prefix))
                k += 1
                yield
            if typed:
                # typed images column by column (no row tuples): one list per table column
                cols = [[] for _ in ev.table.columns] if ev.table is not None else []
                cols_after = [[] for _ in cols] if ev.kind == "update" else None
                int_form = self._plan(ev.table).int_form if ev.table is not None and \
                    isinstance(ev, RowsEvent) else None
                if int_form and self.with_key:
                    named = tables.get((ev.table.schema, ev.table.table), ev.table)
                    int_form = int_form.difference(named.primary_key or ())
                n = ev.decode_columns(cols, cols_after, int_form) if int_form else \
                    ev.decode_columns(cols, cols_after)
                rows, images = None, cols
            else:
                rows = images = ev.decode_rows()
                n = len(rows)
            if not n:
                continue
            if prefix is None:
                prefix = self._prefix(file, pos)
            tmap = ev.table
            plan = self._plan(tmap)
            if self.typed_pending is not None:
                self._check_table_map(tmap)
            ncols = plan.ncols
            kind = ev.kind
            # before/after: the images (None: the operation has none); *_full: the image holds
            # every column, so no value is ABSENT (a PARTIAL_UPDATE_ROWS after image may still
            # hold ABSENT in a JSON column)
            if kind == "insert" or kind == "read":      # read: a snapshot row
                op, before, after = ("c" if kind == "insert" else "r"), None, images
                before_full, after_full = True, len(ev.present) == ncols
            elif kind == "delete":
                op, before, after = "d", images, None
                before_full, after_full = len(ev.present) == ncols, True
            else:
                op = "u"
                before_full = len(ev.present) == ncols
                after_full = len(ev.present_after) == ncols and not ev.partial
                if typed:
                    before, after = cols, cols_after
                else:
                    before = None if before_full and after_full else [r[0] for r in rows]
                    after = [r[1] for r in rows]
            if typed:
                self._typed(plan, before, before_full, ev.present, self.before, n, int_form)
                self._typed(plan, after, after_full,
                            ev.present_after if kind == "update" else ev.present,
                            self.after, n, int_form)
            elif kind == "update" and before is None:
                # both images full: rendered together, unchanged values once
                texts = plan.render_pairs(rows)
                self.before += texts[0]
                self.after += texts[1]
                self.before_filled = self.after_filled = True
            else:
                self._json(plan, before, before_full, self.before, n)
                self.before_filled |= before is not None
                self._json(plan, after, after_full, self.after, n)
                self.after_filled |= after is not None
            named = tables.get((tmap.schema, tmap.table), tmap)
            pk = named.primary_key if self.with_key else None
            if not pk:
                self.key += [None] * n
            else:
                self.key_filled = True
                if typed:       # the images as rows (tuples), as the key renderers take them
                    before, after = (_rows(before), _rows(after))
                    rows = after or before
                src, full = (after, after_full) if after is not None else (rows, before_full)
                if full:
                    render = plan.render_key if named is tmap else plan.key_renderer(pk)
                    self.key += render(src)
                else:
                    names = plan.names
                    olds = before if after is not None and before is not None else repeat(None)
                    self.key += [to_json_text(key_values(names, pk, b, a))
                                 for a, b in zip(src, olds)]
            self.s_row += range(index, index + n)
            index += n
            self.rows += n
            self.events.append((self.rows, op, tmap.schema, tmap.table, ts, server_id, file, pos,
                                gtid, xid, prefix))
            yield
        for t in truncates[k:]:
            if prefix is None:
                prefix = self._prefix(file, pos)
            index += self._statement(t, index, (ts, server_id, file, pos, gtid, xid, prefix))
            yield

    def read_batch(self, tx, tmap, index: int, after: pa.Array, key: pa.Array | None) \
            -> pa.RecordBatch:
        """A batch of snapshot rows (op ``r``) of *tx* (a chunk) whose ``after`` images (JSON
        texts, or the typed struct) and primary keys' JSON (None: no key) are Arrow arrays
        already; *index*: the first row's index in the chunk. The builder holds nothing."""
        assert not self.rows, "read_batch on a builder holding rows"
        n = len(after)
        ts = tx.timestamp * 1000 if tx.timestamp is not None else None
        self.s_row = range(index, index + n)
        self.rows = n
        self.events.append((n, "r", tmap.schema, tmap.table, ts, tx.server_id, tx.file, tx.pos,
                            tx.gtid, tx.xid, self._prefix(tx.file, tx.pos)))
        self.after, self.after_filled = after, True
        if key is not None and self.with_key:
            self.key, self.key_filled = key, True
        else:
            self.key = [None] * n
        # no before image: one null array (a typed struct's children null, not n values each)
        self.before = pa.nulls(n, pa.struct(self.image_fields) if self.typed else pa.string())
        return self.flush()

    def _prefix(self, file: str, pos: int) -> str:
        """streaming.contract.envelope.seq of a transaction, without the row index."""
        number = self._file_numbers.get(file)
        if number is None:
            number = self._file_numbers[file] = binlog_file_number(file)
        return "%010d:%012d:" % (number, pos)

    def _statement(self, t, index: int, envelope: tuple) -> int:
        """A truncate or a schema change (:class:`cdc.binlog.transactions.SchemaChangeAt`):
        the rows added (a schema change is one only with ``includeSchemaChanges``)."""
        if type(t) is not SchemaChangeAt:
            self._truncate(t, index, envelope)
            return 1
        if self.typed:
            self._check_typed(t)
        if not self.with_changes:
            return 0
        q = t.query
        ts = q.timestamp * 1000 if q.timestamp is not None else envelope[0]
        self._no_images()
        self.change_texts[self.rows] = t.change.to_json()
        self.s_row.append(0)
        self.rows += 1
        # the statement's own position: seq and source.pos, row 0
        self.events.append((self.rows, "s", t.schema, t.table, ts, envelope[1], q.file, q.pos,
                            envelope[4], None, self._prefix(q.file, q.pos)))
        return 1

    def _check_typed(self, t) -> None:
        """Typed mode: a statement that changes the typed table's shape stops the stream (the
        DataFrame's schema is the table's old shape)."""
        sc = t.change
        names = {f"{t.schema}.{t.table}"}
        if sc.renamed_from:
            names.add(sc.renamed_from)
        if self.table is None or self.table not in names or sc.type == "DROP":
            return
        if self.schema_point is not None and point_key(t.query.file, t.query.pos) < \
                self.schema_point:
            return      # before the shape was read: the stream's schema is its outcome
        if sc.columns is None:
            # the history does not know the new shape (it was read after the statement): the
            # table's next table map tells
            self.typed_pending = t
            return
        new = []
        for i, c in enumerate(sc.columns):
            d = c.column_def(i)
            new.append((c.name, spark_column(d).spark if d is not None else c.column_type))
        if new == self._typed_shape() and f"{t.schema}.{t.table}" == self.table:
            return      # the shape the stream was started with (a restart after this error)
        self._typed_error(t, new)

    def _typed_shape(self) -> list:
        return [(c.name, spark_column(c).spark) for c in self.typed_columns]

    def _check_table_map(self, tmap) -> None:
        """The typed table's first table map after a statement the history could not follow:
        its shape must be the stream's."""
        t = self.typed_pending
        if f"{tmap.schema}.{tmap.table}" != f"{t.schema}.{t.table}":
            return
        self.typed_pending = None
        new = [(c.name, spark_column(c).spark) for c in tmap.columns]
        if new != self._typed_shape():
            self._typed_error(t, new)

    def _typed_error(self, t, new: list) -> None:
        sc = t.change
        shown = ", ".join(f"{n} {s.simpleString() if hasattr(s, 'simpleString') else s}"
                          for n, s in new)
        raise ShapeChangedError(
            f"typed mode (table={self.table}): the DDL statement at {t.query.file}:{t.query.pos} "
            f"changes the table's shape: {' '.join(sc.ddl.split())[:500]!r}. The stream's schema "
            f"is the table's shape when the query started; the table now has ({shown})"
            + (f" and is called {t.schema}.{t.table}" if f"{t.schema}.{t.table}" != self.table
               else "")
            + ". Restart the query: it reads the new shape from information_schema and continues "
              "from this micro-batch exactly once (its rows before the statement come with the "
              "new schema, column by name); or read without option table (JSON images follow "
              "every shape)")

    def _no_images(self) -> None:
        if self.typed:
            self.before.append_nulls(1)
            self.after.append_nulls(1)
        else:
            self.before.append(None)
            self.after.append(None)
        self.key.append(None)

    def _truncate(self, t, index: int, envelope: tuple) -> None:
        """One row for a TRUNCATE TABLE (:class:`cdc.binlog.transactions.Truncate`): op ``t``,
        no images, no key; *envelope*: (ts_ms, server_id, file, pos, gtid, xid, seq prefix)."""
        self._no_images()
        self.s_row.append(index)
        self.rows += 1
        self.events.append((self.rows, "t", t.schema, t.table) + envelope)

    @staticmethod
    def _json(plan: _TablePlan, images, full: bool, out: list, n: int) -> None:
        """Appends the JSON texts of one event's images (None: the operation has none)."""
        if images is None:
            out += [None] * n
        elif full:
            out += plan.render(images)
        else:
            names, columns = plan.names, plan.tmap.columns
            out += [row_json(names, r, columns) for r in images]

    def _typed(self, plan: _TablePlan, images, full: bool, present, out, n: int,
               int_form) -> None:
        """Appends one event's images (None: the operation has none) to the struct children of
        *out*: per typed field, the values of its column (None where the table has no such
        column or the image does not hold it), converted for Arrow (*int_form*: the columns
        decoded in Arrow's integer form, :meth:`_int_form`)."""
        children, filled = out.children, out.filled
        out.rows += n
        if images is None:
            out.append_nulls(n, counted=True)
            return
        columns = images        # the image's values, one list per column
        partial = None if full else set(present)
        for j, (child, i, conv, identity) in enumerate(zip(children, plan.typed_index,
                                                           self.converters, self.identity)):
            if i is None or (partial is not None and i not in partial):
                child += [None] * n
                continue
            filled[j] = True
            vals = columns[i]
            if not full:
                vals = [None if v is ABSENT else v for v in vals]
            to_int = self.to_int[j]
            types = None if conv is None and to_int is None else set(map(type, vals))
            # a converter that would hand back every value of the column: skip it
            if conv is not None and not (identity is not None and all(map(identity, types))):
                vals = [None if v is None else conv(v) for v in vals]
                types = set(map(type, vals))
            if to_int is not None:
                if int_form is None or i not in int_form:   # objects, as pa.array takes them
                    vals = self._arrow(self.image_fields[j], vals, int_forms)
                elif not types <= _INT_OR_NONE:
                    # the values the native decoder left to the Python one (zero dates...)
                    vals = [v if v is None or type(v) is int else to_int(v) for v in vals]
            child += vals
        if out.rows >= self._chunk_rows:
            self._convert(out)

    def _convert(self, out: "_TypedImage") -> None:
        """The values collected in *out* to Arrow arrays, one chunk per child: while they are
        still in the CPU caches (a whole batch of values is not), and freed early."""
        for j, (field, vals, has) in enumerate(zip(self.image_fields, out.children, out.filled)):
            if not has:
                out.chunks[j].append(pa.nulls(len(vals), field.type))
                continue
            if self.to_int[j] is not None:
                out.chunks[j].append(self._arrow(field, vals, int_form_array))
            else:
                out.chunks[j].append(self._arrow(field, vals))
        out.clear()

    @staticmethod
    def _arrow(field, vals: list, build=array) -> pa.Array:
        try:
            return build(vals, field.type)
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError) as e:
            raise SchemaError(f"typed mode: values of column {field.name} do not fit its "
                              f"Spark type {field.type} (was the table altered?): {e}") from None

    def typed_child(self, j: int, values: list) -> pa.Array:
        """Typed field *j*'s Arrow array of a column's decoded values (None: NULL)."""
        conv = self.converters[j]
        if conv is not None:
            values = [None if v is None else conv(v) for v in values]
        return self._arrow(self.image_fields[j], values)

    def flush(self) -> pa.RecordBatch | None:
        n = self.rows
        if not n:
            return None
        s = self.arrow_schema
        (_, op, db, table, ts, server, file, pos, gtid, xid, prefix) = zip(*self.events)
        run_ends = array([e[0] for e in self.events], pa.int64())

        def runs(values, type):
            # from_buffers: from_arrays asks pa.scalar (pandas, arrow_values) for the length
            return pc.run_end_decode(pa.RunEndEncodedArray.from_buffers(
                pa.run_end_encoded(pa.int64(), type), n, [None], 0, 0,
                [run_ends, array(values, type)]))

        def strings(values, filled):
            if isinstance(values, pa.Array):
                return values
            return array(values, pa.string()) if filled else pa.nulls(n, pa.string())

        row = _row_indexes(self.s_row)
        op = runs(op, pa.string())
        columns = {     # each envelope column, built only if the schema has it (option fields)
            "op": lambda: op, "db": lambda: runs(db, pa.string()),
            "table": lambda: runs(table, pa.string()),
            "before": lambda: self._image_array(self.before, op, _NO_BEFORE,
                                                self.before_filled),
            "after": lambda: self._image_array(self.after, op, _NO_AFTER, self.after_filled),
            "key": lambda: strings(self.key, self.key_filled),
            "ts_ms": lambda: runs(ts, pa.int64()),
            "source": lambda: self._source(runs, s.field("source").type, server, file, pos,
                                           gtid, row, xid),
            # seq: "%010d" of the row index after the transaction's prefix
            # (streaming.contract.envelope.seq)
            "seq": lambda: pc.binary_join_element_wise(
                runs(prefix, pa.string()), pc.utf8_lpad(pc.cast(row, pa.string()), 10, "0"),
                _NO_SEPARATOR),
            "schema_change": lambda: (array([self.change_texts.get(i) for i in range(n)],
                                            pa.string()) if self.change_texts
                                      else pa.nulls(n, pa.string())),
        }
        arrays = [columns[name]() for name in s.names]
        batch = pa.RecordBatch.from_arrays(arrays, schema=s)
        self._reset()
        self._plans.clear()
        return batch

    def _image_array(self, image, op, no_image, filled: bool) -> pa.Array:
        if isinstance(image, pa.Array):     # read_batch's
            return image
        if self.typed:
            # null structs where the op has no such image (r: a snapshot row, t: a truncate)
            return self._typed_array(image, mask=pc.is_in(op, array(no_image, pa.string())))
        return array(image, pa.string()) if filled else pa.nulls(len(op), pa.string())

    @staticmethod
    def _source(runs, st, server, file, pos, gtid, row, xid) -> pa.StructArray:
        return pa.StructArray.from_arrays(
            [runs(server, st.field("server_id").type), runs(file, st.field("file").type),
             runs(pos, st.field("pos").type), runs(gtid, st.field("gtid").type), row,
             runs(xid, st.field("xid").type)],
            fields=[st.field(i) for i in range(st.num_fields)])

    def _typed_array(self, image: "_TypedImage", mask) -> pa.StructArray:
        if image.rows:
            self._convert(image)
        children = [c[0] if len(c) == 1 else pa.concat_arrays(c) for c in image.chunks]
        return pa.StructArray.from_arrays(children, fields=self.image_fields, mask=mask)


_INT_OR_NONE = {int, type(None)}
# the Arrow type of source.row (seq is built from it even when source is not delivered)
SOURCE_ROW_TYPE = to_arrow_type(SOURCE_TYPE["row"].dataType)
# typed values are converted to Arrow about this many at a time (and at least 256 rows)
_TYPED_CHUNK_VALUES = 16384
# the ops whose rows have no before / no after image (plain tuples: pa.array() at import time
# would import pandas, 0.2 s, in every Spark Python worker that merely looks the source up)
_NO_BEFORE = ("c", "r", "t", "s")
_NO_AFTER = ("d", "t", "s")
# seq's separator: a Scalar already (pyarrow.compute makes a Python "" one with pa.scalar, which
# imports pandas: streaming.source.arrow_values)
_NO_SEPARATOR = array([""], pa.string())[0]


def _row_indexes(rows) -> pa.Array:
    """source.row of a batch: *rows* a list, or a range (read_batch's) made without a Python int
    per row (from numpy's buffer: ``pa.array`` of an ndarray would import pandas)."""
    if isinstance(rows, range):
        values = np.arange(rows.start, rows.stop, dtype=SOURCE_ROW_TYPE.to_pandas_dtype())
        return pa.Array.from_buffers(SOURCE_ROW_TYPE, len(values), [None, pa.py_buffer(values)])
    return array(rows, SOURCE_ROW_TYPE)


def _rows(columns: list | None) -> list | None:
    """Column lists (typed images) as row tuples."""
    return None if columns is None else list(zip(*columns))


class _TypedImage:
    """The struct children of one image column of a batch: Arrow chunks, and the values
    collected since the last chunk (per child: a list, and whether it holds a non-null)."""

    __slots__ = ("chunks", "children", "filled", "rows")

    def __init__(self, n: int):
        self.chunks: list[list] = [[] for _ in range(n)]
        self.clear()

    def clear(self) -> None:
        n = len(self.chunks)
        self.children: list[list] = [[] for _ in range(n)]
        self.filled = [False] * n
        self.rows = 0

    def append_nulls(self, n: int, counted: bool = False) -> None:
        """*n* rows of no image (null in every child); *counted*: ``rows`` counts them already."""
        nones = [None] * n
        for child in self.children:
            child += nones
        if not counted:
            self.rows += n


def record_batches(transactions: Iterable, builder: BatchBuilder, rows_per_batch: int = 8192):
    """Arrow batches of the row changes of *transactions*, about *rows_per_batch* each: a batch
    ends after the rows event that fills it, so a big transaction spans several batches and
    memory stays bounded by the batch (every batch of a Spark partition belongs to the same
    micro-batch: offsets stay at transaction boundaries)."""
    for tx in transactions:
        # a TRUNCATE-only one too, and DDL with schema changes
        if tx.rows_events or getattr(tx, "truncates", None) or getattr(tx, "schema_changes",
                                                                      None):
            for _ in builder.add_events(tx):
                if len(builder) >= rows_per_batch:
                    yield builder.flush()
    last = builder.flush()
    if last is not None:
        yield last
