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

``before``/``after`` are JSON object texts by default (``cdc.render.row_json``: exact decimals,
ISO dates, base64 bytes; columns missing from a MINIMAL/NOBLOB image are left out). With the
option ``table=db.t`` (typed mode) they are structs with one field per column of that table, in
table order, typed as below (the table's definition comes from ``information_schema`` for a
stream, or from the binlog's TABLE_MAP for a batch read of files). A column missing from an
image, or whose value the Spark type cannot hold (zero dates ``0000-00-00``), is null there.

Typed mode: column types (``SPARK_TYPES``, keyed by the type codes of :data:`cdc.coltypes.TYPES`)
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
from typing import Callable, Iterable, NamedTuple

import pyarrow as pa
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import (ArrayType, BinaryType, ByteType, DataType, DateType,
                               DayTimeIntervalType, DecimalType, DoubleType, FloatType,
                               IntegerType, LongType, ShortType, StringType, StructField,
                               StructType, TimestampNTZType, TimestampType)

from cdc.charsets import BINARY_COLLATION, make_text_decoder
from cdc.coltypes import ABSENT, TYPES, ColumnDef, Geometry, InvalidTemporal
from cdc.constants import ColumnType as T
from cdc.errors import ConfigurationError, SchemaError
from cdc.render import row_json, to_json_text

from .offsets import seq as make_seq

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
    test as the decoder's (:func:`cdc.charsets.make_text_decoder`)."""
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
    :class:`~cdc.coltypes.ColumnDef` the binlog's TABLE_MAP would describe."""
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


class BatchBuilder:
    """Collects row changes (:class:`cdc.transactions.RowChange`) and turns them into
    ``pyarrow.RecordBatch``es of exactly the source's schema."""

    def __init__(self, schema: StructType, typed_columns: list[ColumnDef] | None = None):
        self.schema = schema
        self.arrow_schema = to_arrow_schema(schema, timezone="UTC")
        self.typed = typed_columns is not None
        if self.typed:
            self.names = [c.name for c in typed_columns]
            self.converters = [spark_column(c).convert for c in typed_columns]
            image_type = self.arrow_schema.field("before").type
            self.image_fields = [image_type.field(i) for i in range(image_type.num_fields)]
            self._maps: dict[int, tuple] = {}
        self._reset()

    def _reset(self) -> None:
        self.op, self.db, self.table, self.key, self.ts = [], [], [], [], []
        self.before, self.after = [], []
        self.s_server, self.s_file, self.s_pos, self.s_gtid, self.s_row, self.s_xid = \
            [], [], [], [], [], []
        self.seq = []
        self.rows = 0

    def __len__(self) -> int:
        return self.rows

    def add_transaction(self, tx) -> None:
        file, pos, gtid, xid, server_id = tx.file, tx.pos, tx.gtid, tx.xid, tx.server_id
        ts = tx.timestamp * 1000 if tx.timestamp is not None else None
        typed = self.typed
        for ch in tx.changes():
            self.op.append(ch.op)
            self.db.append(ch.schema)
            self.table.append(ch.table)
            if typed:
                self.before.append(self._typed_image(ch.columns, ch.before))
                self.after.append(self._typed_image(ch.columns, ch.after))
            else:
                self.before.append(None if ch.before is None else row_json(ch.columns, ch.before))
                self.after.append(None if ch.after is None else row_json(ch.columns, ch.after))
            k = ch.key()
            self.key.append(None if k is None else to_json_text(k))
            self.ts.append(ts)
            self.s_server.append(server_id)
            self.s_file.append(file)
            self.s_pos.append(pos)
            self.s_gtid.append(gtid)
            self.s_row.append(ch.index)
            self.s_xid.append(xid)
            self.seq.append(make_seq(file, pos, ch.index))
            self.rows += 1

    def _typed_image(self, columns: list, values):
        """The values of one image in the typed struct's column order (None: no image)."""
        if values is None:
            return None
        entry = self._maps.get(id(columns))
        if entry is None or entry[0] is not columns:
            where = {n: i for i, n in enumerate(columns)}
            entry = (columns, [where.get(n) for n in self.names])
            self._maps[id(columns)] = entry   # keeps `columns` alive: its id stays unique
        out = []
        for i in entry[1]:
            if i is None:
                out.append(None)
            else:
                v = values[i]
                out.append(None if v is ABSENT else v)
        return out

    def flush(self) -> pa.RecordBatch | None:
        if not self.rows:
            return None
        s = self.arrow_schema
        st = s.field("source").type
        source = pa.StructArray.from_arrays(
            [pa.array(col, type=st.field(i).type) for i, col in enumerate(
                (self.s_server, self.s_file, self.s_pos, self.s_gtid, self.s_row, self.s_xid))],
            fields=[st.field(i) for i in range(st.num_fields)])
        if self.typed:
            before, after = self._typed_array(self.before), self._typed_array(self.after)
        else:
            before = pa.array(self.before, type=pa.string())
            after = pa.array(self.after, type=pa.string())
        arrays = [pa.array(self.op, pa.string()), pa.array(self.db, pa.string()),
                  pa.array(self.table, pa.string()), before, after,
                  pa.array(self.key, pa.string()), pa.array(self.ts, pa.int64()), source,
                  pa.array(self.seq, pa.string())]
        batch = pa.RecordBatch.from_arrays(arrays, schema=s)
        self._reset()
        if self.typed:
            self._maps.clear()
        return batch

    def _typed_array(self, images: list) -> pa.StructArray:
        n = len(images)
        children = []
        for j, (field, conv) in enumerate(zip(self.image_fields, self.converters)):
            if conv is None:
                vals = [None if img is None else img[j] for img in images]
            else:
                vals = [None if img is None or img[j] is None else conv(img[j]) for img in images]
            try:
                children.append(pa.array(vals, type=field.type))
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError, TypeError) as e:
                raise SchemaError(f"typed mode: values of column {field.name} do not fit its "
                                  f"Spark type {field.type} (was the table altered?): {e}") \
                    from None
        mask = pa.array([img is None for img in images], type=pa.bool_())
        if not n:
            mask = None
        return pa.StructArray.from_arrays(children, fields=self.image_fields, mask=mask)


def record_batches(transactions: Iterable, builder: BatchBuilder, rows_per_batch: int = 8192):
    """Arrow batches of the row changes of *transactions* (at most about *rows_per_batch* each;
    a transaction is never split across batches)."""
    for tx in transactions:
        if tx.rows_events:
            builder.add_transaction(tx)
            if len(builder) >= rows_per_batch:
                yield builder.flush()
    last = builder.flush()
    if last is not None:
        yield last
