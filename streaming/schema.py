"""The DataFrame schema of the ``binlog-cdc`` source and the conversion of row changes to Arrow.

Schema (one row per row change, in binlog order)
------------------------------------------------
==========  ==========================  ==========================================================
column      Spark type                  meaning
==========  ==========================  ==========================================================
op          string                      ``c`` insert, ``u`` update, ``d`` delete
db          string                      database (schema) name
table       string                      table name
before      string (JSON) / struct      row image before the change (null for ``c``)
after       string (JSON) / struct      row image after the change (null for ``d``)
key         string (JSON)               primary-key columns and values, e.g. ``{"id": 7}``
                                        (null when the table map carries no primary key)
ts_ms       long                        commit time of the transaction, epoch milliseconds
source      struct                      where the change comes from:
                                        ``server_id`` long (originating server),
                                        ``file`` string (binlog file),
                                        ``pos`` long (start of the transaction in ``file``),
                                        ``gtid`` string (the transaction's GTID, if any),
                                        ``row`` int (index of the change in the transaction),
                                        ``xid`` long (InnoDB XID, null for non-XA engines)
seq         string                      total order of all changes: zero-padded binlog file
                                        number, transaction start position and row index,
                                        ``"0000000003:000000012345:0000000007"``; sorts as text
==========  ==========================  ==========================================================

``before``/``after`` are JSON object texts by default (``cdc.values.render.row_json``: exact decimals,
ISO dates, base64 bytes; columns missing from a MINIMAL/NOBLOB image are left out). With the
option ``table=db.t`` (typed mode) they are structs with one field per column of that table, in
table order, typed as below (the table's definition comes from ``information_schema`` for a
stream, or from the binlog's TABLE_MAP for a batch read of files). A column missing from an
image, or whose value the Spark type cannot hold (zero dates ``0000-00-00``), is null there.

Typed mode: column types (``SPARK_TYPES``, keyed by the type codes of :data:`cdc.values.types.TYPES`)
====================================  ===========================================================
TINYINT / UNSIGNED                    byte / short
SMALLINT / UNSIGNED                   short / int
MEDIUMINT (both)                      int
INT / UNSIGNED                        int / long
BIGINT / UNSIGNED                     long / decimal(20,0)
FLOAT / DOUBLE                        float / double
DECIMAL(p,s)                          decimal(p,s) (p > 38: string with every digit)
YEAR                                  int
DATE                                  date
TIME                                  interval day to second (negative / > 24 h allowed)
DATETIME                              timestamp_ntz (as stored, no time zone)
TIMESTAMP                             timestamp (UTC instant)
BIT(n)                                long (n = 64: decimal(20,0))
CHAR / VARCHAR / TEXT                 string
BINARY / VARBINARY / BLOB, binary     binary
ENUM / SET                            string (SET: comma-joined)
JSON (MySQL)                          string (JSON text); MariaDB's JSON is LONGTEXT: string
GEOMETRY                              binary (MySQL internal format: 4-byte SRID + WKB)
VECTOR                                array<float>
====================================  ===========================================================
"""

from __future__ import annotations

import re
import struct
from decimal import Decimal
from itertools import repeat
from typing import Callable, Iterable, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (ArrayType, BinaryType, ByteType, DataType, DateType,
                               DayTimeIntervalType, DecimalType, DoubleType, FloatType,
                               IntegerType, LongType, ShortType, StringType, StructField,
                               StructType, TimestampNTZType, TimestampType)

from cdc.values.charsets import BINARY_COLLATION, make_text_decoder
from cdc.values.types import ABSENT, TYPES, ColumnDef, Geometry, InvalidTemporal
from cdc.binlog.constants import ColumnType as T
from cdc.errors import ConfigurationError, SchemaError
from cdc.binlog.transactions import key_values
from cdc.values.render import (compile_json_pair_renderer, compile_json_renderer, row_json,
                        to_json_text)

from streaming.offsets import file_number

SOURCE_TYPE = StructType([
    StructField("server_id", LongType()),
    StructField("file", StringType()),
    StructField("pos", LongType()),
    StructField("gtid", StringType()),
    StructField("row", IntegerType()),
    StructField("xid", LongType()),
])


def envelope_schema(image_type: DataType = StringType()) -> StructType:
    """The source's schema; ``image_type`` is the type of ``before``/``after``."""
    return StructType([
        StructField("op", StringType()),
        StructField("db", StringType()),
        StructField("table", StringType()),
        StructField("before", image_type),
        StructField("after", image_type),
        StructField("key", StringType()),
        StructField("ts_ms", LongType()),
        StructField("source", SOURCE_TYPE),
        StructField("seq", StringType()),
    ])


JSON_SCHEMA = envelope_schema()


# --- typed mode: the one mapping from column types to Spark types ---------------------------------


class SparkColumn(NamedTuple):
    """How one column appears in typed mode: its Spark type and the function turning a decoded
    value into what Arrow takes for that type (None: the value as is)."""

    spark: DataType
    convert: Callable[[object], object] | None = None


def _no_invalid(v):
    return None if isinstance(v, InvalidTemporal) else v


def _to_decimal(v):
    return None if v is None else Decimal(v)


def _decimal_text(v):
    return None if v is None else format(v, "f")


def _to_text(v):
    if v is None or type(v) is str:
        return v
    return str(v)


def _json_text(v):
    # A MySQL JSON document: its JSON text (a JSON null document is the text "null").
    return to_json_text(v)


def _geometry_bytes(v):
    if v is None:
        return None
    if isinstance(v, Geometry):
        return struct.pack("<I", v.srid) + v.wkb
    return bytes(v)


def _ints(signed: DataType, unsigned: DataType):
    def spark(col: ColumnDef) -> SparkColumn:
        return SparkColumn(unsigned if col.unsigned else signed)
    return spark


def _bigint(col: ColumnDef) -> SparkColumn:
    return SparkColumn(DecimalType(20, 0), _to_decimal) if col.unsigned else SparkColumn(LongType())


def _decimal(col: ColumnDef) -> SparkColumn:
    precision, scale = col.meta if col.meta else (65, 30)
    if precision <= 38:
        return SparkColumn(DecimalType(precision, scale))
    return SparkColumn(StringType(), _decimal_text)


def _bit(col: ColumnDef) -> SparkColumn:
    bits = (col.meta[1] * 8 + col.meta[0]) if col.meta else 64
    if bits < 64:
        return SparkColumn(LongType())
    return SparkColumn(DecimalType(20, 0), _to_decimal)


def is_binary(col: ColumnDef) -> bool:
    """Whether the column decodes to bytes (binary collation, or no collation known): the same
    test as the decoder's (:func:`cdc.values.charsets.make_text_decoder`)."""
    return make_text_decoder(col.collation if col.collation is not None
                             else BINARY_COLLATION) is bytes


def _character(col: ColumnDef) -> SparkColumn:
    return SparkColumn(BinaryType()) if is_binary(col) else SparkColumn(StringType(), _to_text)


def _const(spark: DataType, convert=None):
    def f(_col: ColumnDef) -> SparkColumn:
        return SparkColumn(spark, convert)
    return f


_TIME = DayTimeIntervalType(DayTimeIntervalType.DAY, DayTimeIntervalType.SECOND)

SPARK_TYPES: dict[int, Callable[[ColumnDef], SparkColumn]] = {
    T.DECIMAL: _const(StringType(), _to_text),       # pre-5.0 DECIMAL: never in a row event
    T.TINY: _ints(ByteType(), ShortType()),
    T.SHORT: _ints(ShortType(), IntegerType()),
    T.INT24: _ints(IntegerType(), IntegerType()),
    T.LONG: _ints(IntegerType(), LongType()),
    T.LONGLONG: _bigint,
    T.FLOAT: _const(FloatType()),
    T.DOUBLE: _const(DoubleType()),
    T.NEWDECIMAL: _decimal,
    T.NULL: _const(StringType(), lambda v: None),
    T.YEAR: _const(IntegerType()),
    T.DATE: _const(DateType(), _no_invalid),
    T.NEWDATE: _const(DateType(), _no_invalid),
    T.TIME: _const(_TIME),
    T.TIME2: _const(_TIME),
    T.DATETIME: _const(TimestampNTZType(), _no_invalid),
    T.DATETIME2: _const(TimestampNTZType(), _no_invalid),
    T.TIMESTAMP: _const(TimestampType(), _no_invalid),
    T.TIMESTAMP2: _const(TimestampType(), _no_invalid),
    T.BIT: _bit,
    T.VARCHAR: _character,
    T.VAR_STRING: _character,
    T.STRING: _character,
    T.ENUM: _const(StringType(), _to_text),
    T.SET: _const(StringType(), _to_text),
    T.TINY_BLOB: _character,
    T.MEDIUM_BLOB: _character,
    T.LONG_BLOB: _character,
    T.BLOB: _character,
    T.JSON: _const(StringType(), _json_text),
    T.GEOMETRY: _const(BinaryType(), _geometry_bytes),
    T.VECTOR: _const(ArrayType(FloatType())),
}
assert set(SPARK_TYPES) == set(TYPES), "SPARK_TYPES must cover exactly the type table"


def spark_column(col: ColumnDef) -> SparkColumn:
    try:
        return SPARK_TYPES[col.real_type](col)
    except KeyError:
        raise SchemaError(f"column {col.name}: type code {col.real_type} has no Spark type") \
            from None


def image_struct(columns: list[ColumnDef]) -> StructType:
    return StructType([StructField(c.name, spark_column(c).spark) for c in columns])


def typed_schema(columns: list[ColumnDef]) -> StructType:
    return envelope_schema(image_struct(columns))


# --- column definitions from information_schema (streams) ------------------------------------------

_INT_CODES = {"tinyint": T.TINY, "smallint": T.SHORT, "mediumint": T.INT24, "int": T.LONG,
              "integer": T.LONG, "bigint": T.LONGLONG}
_BLOB_LEN = {"tinyblob": 1, "tinytext": 1, "blob": 2, "text": 2, "mediumblob": 3,
             "mediumtext": 3, "longblob": 4, "longtext": 4, "long": 3, "long varchar": 3}
_GEOMETRY = {"geometry", "point", "linestring", "polygon", "multipoint", "multilinestring",
             "multipolygon", "geometrycollection", "geomcollection"}
_QUOTED = re.compile(r"'((?:[^']|'')*)'")

COLUMNS_SQL = (
    "SELECT c.COLUMN_NAME, c.DATA_TYPE, c.COLUMN_TYPE, c.NUMERIC_PRECISION, c.NUMERIC_SCALE, "
    "c.DATETIME_PRECISION, c.CHARACTER_OCTET_LENGTH, c.CHARACTER_SET_NAME, c.IS_NULLABLE, "
    "(SELECT MIN(co.ID) FROM information_schema.COLLATIONS co "
    " WHERE co.COLLATION_NAME = c.COLLATION_NAME) "
    "FROM information_schema.COLUMNS c WHERE c.TABLE_SCHEMA = %s AND c.TABLE_NAME = %s "
    "ORDER BY c.ORDINAL_POSITION")

_TEXT_COLLATION = 45  # utf8mb4_general_ci: stands for "a character set" when the id is unknown


def column_from_information_schema(index: int, row: tuple) -> ColumnDef:
    """One ``information_schema.COLUMNS`` row (see :data:`COLUMNS_SQL`) as the
    :class:`~cdc.values.types.ColumnDef` the binlog's TABLE_MAP would describe."""
    (name, data_type, column_type, num_prec, num_scale, dt_prec, octets, charset, nullable,
     coll_id) = row
    dt = str(data_type).lower()
    ctype = str(column_type).lower()
    if charset is None or str(charset).lower() == "binary":
        collation = BINARY_COLLATION
    else:
        collation = int(coll_id) if coll_id is not None else _TEXT_COLLATION
    meta = None
    if dt in _INT_CODES:
        code = _INT_CODES[dt]
    elif dt == "float":
        code, meta = T.FLOAT, 4
    elif dt in ("double", "real", "double precision"):
        code, meta = T.DOUBLE, 8
    elif dt in ("decimal", "numeric"):
        code, meta = T.NEWDECIMAL, (int(num_prec), int(num_scale or 0))
    elif dt == "date":
        code = T.DATE
    elif dt == "time":
        code, meta = T.TIME2, int(dt_prec or 0)
    elif dt == "datetime":
        code, meta = T.DATETIME2, int(dt_prec or 0)
    elif dt == "timestamp":
        code, meta = T.TIMESTAMP2, int(dt_prec or 0)
    elif dt == "year":
        code = T.YEAR
    elif dt == "bit":
        n = int(num_prec or 1)
        code, meta = T.BIT, (n % 8, n // 8)
    elif dt in ("char", "binary"):
        code, meta = T.STRING, (T.STRING, int(octets or 0) & 0xFF)
    elif dt in ("varchar", "varbinary"):
        code, meta = T.VARCHAR, int(octets or 0)
    elif dt in _BLOB_LEN:
        code, meta = T.BLOB, _BLOB_LEN[dt]
    elif dt in ("enum", "set"):
        code = T.ENUM if dt == "enum" else T.SET
        meta = (code, 1)
    elif dt == "json":
        code, meta = T.JSON, 4
    elif dt in _GEOMETRY:
        code, meta = T.GEOMETRY, 4
    elif dt == "vector":
        code, meta = T.VECTOR, 4
    elif dt in ("uuid", "inet6", "inet4"):
        code, meta, collation = T.STRING, (T.STRING, 16), BINARY_COLLATION
    else:
        raise SchemaError(f"column {name} has type {column_type}, which typed mode cannot map "
                          f"to a Spark type; read the table without option table (JSON images)")
    col = ColumnDef(index, code, meta, str(nullable).upper() == "YES")
    col.name = str(name)
    col.unsigned = "unsigned" in ctype
    if TYPES[col.real_type].character or code in (T.ENUM, T.SET):
        col.collation = collation
    if code == T.ENUM:
        col.enum_values = [v.replace("''", "'") for v in _QUOTED.findall(ctype)]
    elif code == T.SET:
        col.set_values = [v.replace("''", "'") for v in _QUOTED.findall(ctype)]
    return col


def columns_from_server(conn, db: str, table: str) -> list[ColumnDef]:
    with conn.cursor() as cur:
        cur.execute(COLUMNS_SQL, (db, table))
        rows = cur.fetchall()
    if not rows:
        raise ConfigurationError(f"option table: {db}.{table} does not exist on the server (or "
                                 f"the user cannot see it in information_schema)")
    return [column_from_information_schema(i, r) for i, r in enumerate(rows)]


# --- row changes to Arrow ----------------------------------------------------------------------------


class _TablePlan:
    """What the builder needs per table map, computed once per batch: column names, the
    generated JSON renderers (full images, primary keys), the typed fields' column indexes."""

    __slots__ = ("tmap", "reader", "names", "ncols", "render", "render_pairs", "render_key",
                 "keys", "typed_index")

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
        if typed_names is not None:
            where = {n: i for i, n in enumerate(names)}
            self.typed_index = [where.get(n) for n in typed_names]

    def key_renderer(self, pk):
        pk = tuple(pk)
        fn = self.keys.get(pk)
        if fn is None:
            fn = self.keys[pk] = compile_json_renderer(self.tmap.columns, self.names, pk)
        return fn


_NoneType = type(None)
# Converters that return most values as they are: for these types a whole column is taken as is.
_IDENTITY_TYPES: dict[Callable, Callable[[type], bool]] = {
    _no_invalid: lambda t: not issubclass(t, InvalidTemporal),
    _to_text: lambda t: t is str or t is _NoneType,
}


class BatchBuilder:
    """Collects the row changes of committed transactions (:class:`cdc.binlog.transactions.Transaction`)
    and turns them into ``pyarrow.RecordBatch``es of exactly the source's schema: the rows one
    :class:`~cdc.binlog.transactions.RowChange` each would give, in the same order.

    Works per rows event, column by column: the envelope fields are runs of one value per event
    (Arrow expands them at :meth:`flush`), full row images go through a JSON renderer generated
    per table layout (:func:`cdc.values.render.compile_json_renderer`), typed images are built one
    struct child at a time and go to Arrow in chunks of about ``_TYPED_CHUNK_VALUES`` values.
    """

    def __init__(self, schema: StructType, typed_columns: list[ColumnDef] | None = None):
        self.schema = schema
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")
        self.typed = typed_columns is not None
        self.names = None
        if self.typed:
            self.names = [c.name for c in typed_columns]
            self.converters = [spark_column(c).convert for c in typed_columns]
            self.identity = [_IDENTITY_TYPES.get(c) for c in self.converters]
            image_type = self.arrow_schema.field("before").type
            self.image_fields = [image_type.field(i) for i in range(image_type.num_fields)]
            self._chunk_rows = max(256, _TYPED_CHUNK_VALUES // max(1, len(self.names)))
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
        if self.typed:
            self.before = _TypedImage(len(self.names))
            self.after = _TypedImage(len(self.names))
        else:
            self.before, self.after = [], []
            self.before_filled = self.after_filled = False
        self.rows = 0

    def __len__(self) -> int:
        return self.rows

    def _plan(self, tmap) -> _TablePlan:
        plan = self._plans.get(id(tmap))
        if plan is None or plan.tmap is not tmap or plan.reader is not tmap.full_row_reader:
            plan = self._plans[id(tmap)] = _TablePlan(tmap, self.names)  # keeps tmap alive
        return plan

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
        tables = tx._tables_by_name
        prefix = None
        index = 0
        for ev in tx.rows_events:
            rows = ev.decode_rows()
            n = len(rows)
            if not n:
                continue
            if prefix is None:   # streaming.offsets.seq without the row index
                number = self._file_numbers.get(file)
                if number is None:
                    number = self._file_numbers[file] = file_number(file)
                prefix = "%010d:%012d:" % (number, pos)
            tmap = ev.table
            plan = self._plan(tmap)
            ncols = plan.ncols
            kind = ev.kind
            # before/after: the images (None: the operation has none); *_full: the image holds
            # every column, so no value is ABSENT (a PARTIAL_UPDATE_ROWS after image may still
            # hold ABSENT in a JSON column)
            if kind == "insert":
                op, before, after = "c", None, rows
                before_full, after_full = True, len(ev._present) == ncols
            elif kind == "delete":
                op, before, after = "d", rows, None
                before_full, after_full = len(ev._present) == ncols, True
            else:
                op = "u"
                before_full = len(ev._present) == ncols
                after_full = len(ev._present_after) == ncols and not ev.partial
                before = None if before_full and after_full and not typed else \
                    [r[0] for r in rows]
                after = [r[1] for r in rows]
            if typed:
                self._typed(plan, before, before_full, ev._present, self.before, n)
                self._typed(plan, after, after_full,
                            ev._present_after if kind == "update" else ev._present,
                            self.after, n)
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
            pk = named.primary_key
            if not pk:
                self.key += [None] * n
            else:
                self.key_filled = True
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

    @staticmethod
    def _json(plan: _TablePlan, images, full: bool, out: list, n: int) -> None:
        """Appends the JSON texts of one event's images (None: the operation has none)."""
        if images is None:
            out += [None] * n
        elif full:
            out += plan.render(images)
        else:
            names = plan.names
            out += [row_json(names, r) for r in images]

    def _typed(self, plan: _TablePlan, images, full: bool, present, out, n: int) -> None:
        """Appends one event's images (None: the operation has none) to the struct children of
        *out*: per typed field, the values of its column (None where the table has no such
        column or the image does not hold it), converted for Arrow."""
        children, filled = out.children, out.filled
        out.rows += n
        if images is None:
            nones = [None] * n
            for child in children:
                child += nones
            return
        columns = list(zip(*images))        # the image's values, one tuple per column
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
            # a converter that would hand back every value of the column: skip it
            if conv is None or (identity is not None
                                and all(map(identity, set(map(type, vals))))):
                child += vals
            else:
                child += [None if v is None else conv(v) for v in vals]
        if out.rows >= self._chunk_rows:
            self._convert(out)

    def _convert(self, out: "_TypedImage") -> None:
        """The values collected in *out* to Arrow arrays, one chunk per child: while they are
        still in the CPU caches (a whole batch of values is not), and freed early."""
        for j, (field, vals, has) in enumerate(zip(self.image_fields, out.children, out.filled)):
            if not has:
                out.chunks[j].append(pa.nulls(len(vals), field.type))
                continue
            try:
                out.chunks[j].append(pa.array(vals, type=field.type))
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError) as e:
                raise SchemaError(f"typed mode: values of column {field.name} do not fit its "
                                  f"Spark type {field.type} (was the table altered?): {e}") \
                    from None
        out.clear()

    def flush(self) -> pa.RecordBatch | None:
        n = self.rows
        if not n:
            return None
        s = self.arrow_schema
        (_, op, db, table, ts, server, file, pos, gtid, xid, prefix) = zip(*self.events)
        run_ends = pa.array([e[0] for e in self.events], pa.int64())

        def runs(values, type):
            return pc.run_end_decode(pa.RunEndEncodedArray.from_arrays(
                run_ends, pa.array(values, type)))

        def strings(values, filled):
            return pa.array(values, pa.string()) if filled else pa.nulls(n, pa.string())

        st = s.field("source").type
        row = pa.array(self.s_row, st.field("row").type)
        # seq: "%010d" of the row index after the transaction's prefix (streaming.offsets.seq)
        seq = pc.binary_join_element_wise(runs(prefix, pa.string()),
                                          pc.utf8_lpad(pc.cast(row, pa.string()), 10, "0"), "")
        source = pa.StructArray.from_arrays(
            [runs(server, st.field("server_id").type), runs(file, st.field("file").type),
             runs(pos, st.field("pos").type), runs(gtid, st.field("gtid").type), row,
             runs(xid, st.field("xid").type)],
            fields=[st.field(i) for i in range(st.num_fields)])
        op = runs(op, pa.string())
        if self.typed:
            before = self._typed_array(self.before, mask=pc.equal(op, "c"))
            after = self._typed_array(self.after, mask=pc.equal(op, "d"))
        else:
            before = strings(self.before, self.before_filled)
            after = strings(self.after, self.after_filled)
        arrays = [op, runs(db, pa.string()), runs(table, pa.string()), before, after,
                  strings(self.key, self.key_filled), runs(ts, pa.int64()), source, seq]
        batch = pa.RecordBatch.from_arrays(arrays, schema=s)
        self._reset()
        self._plans.clear()
        return batch

    def _typed_array(self, image: "_TypedImage", mask) -> pa.StructArray:
        if image.rows:
            self._convert(image)
        children = [c[0] if len(c) == 1 else pa.concat_arrays(c) for c in image.chunks]
        return pa.StructArray.from_arrays(children, fields=self.image_fields, mask=mask)


# typed values are converted to Arrow about this many at a time (and at least 256 rows)
_TYPED_CHUNK_VALUES = 16384


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


def record_batches(transactions: Iterable, builder: BatchBuilder, rows_per_batch: int = 8192):
    """Arrow batches of the row changes of *transactions*, about *rows_per_batch* each: a batch
    ends after the rows event that fills it, so a big transaction spans several batches and
    memory stays bounded by the batch (every batch of a Spark partition belongs to the same
    micro-batch: offsets stay at transaction boundaries)."""
    for tx in transactions:
        if tx.rows_events:
            for _ in builder.add_events(tx):
                if len(builder) >= rows_per_batch:
                    yield builder.flush()
    last = builder.flush()
    if last is not None:
        yield last
