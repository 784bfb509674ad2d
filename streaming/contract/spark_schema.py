"""The DataFrame schema of the ``binlog-cdc`` source, and the Spark types of MySQL columns in typed
mode (:func:`spark_column`, :func:`typed_schema`).

Column definitions from ``information_schema`` are read by :mod:`streaming.contract.tables`; row changes
become Arrow record batches of this schema in :mod:`streaming.source.batches`.

Schema (one row per change, in binlog order)
--------------------------------------------
==========  ==========================  ==========================================================
column      Spark type                  meaning
==========  ==========================  ==========================================================
op          string                      ``c`` insert, ``u`` update, ``d`` delete, ``t`` truncate
                                        (``TRUNCATE TABLE``: every row of the table is gone),
                                        ``r`` a row of the initial snapshot, ``s`` a schema
                                        change (with ``includeSchemaChanges``)
db          string                      database (schema) name
table       string                      table name
before      string (JSON) / struct      row image before the change (null for ``c``, ``r``,
                                        ``t``, ``s``)
after       string (JSON) / struct      row image after the change (null for ``d``, ``t``,
                                        ``s``)
key         string (JSON)               primary-key columns and values, e.g. ``{"id": 7}``
                                        (null when the table map carries no primary key, and
                                        for ``t``)
ts_ms       long                        commit time of the transaction, epoch milliseconds
source      struct                      where the change comes from:
                                        ``server_id`` long (originating server),
                                        ``file`` string (binlog file),
                                        ``pos`` long (start of the transaction in ``file``),
                                        ``gtid`` string (the transaction's GTID, if any),
                                        ``row`` int (index of the change in the transaction;
                                        a truncate counts as one),
                                        ``xid`` long (InnoDB XID, null for non-XA engines)
seq         string                      total order of all changes: zero-padded binlog file
                                        number, transaction start position and row index,
                                        ``"0000000003:000000012345:0000000007"``; sorts as text
schema_     string (JSON)               only with ``includeSchemaChanges=true`` (the last
change                                  column): for ``s`` the record of
                                        :mod:`cdc.schema.changes` (type, ddl, renamed_from,
                                        renamed_columns, columns, primary_key, unsure), null
                                        for the other ops. An ``s`` row's ``table`` is the
                                        table's name after the statement, ``ts_ms`` the
                                        statement's time, ``source.pos`` and ``seq`` the
                                        statement's position with row 0
==========  ==========================  ==========================================================

``before``/``after`` are JSON object texts by default (``cdc.values.render.row_json``: exact decimals,
ISO dates, base64 bytes, MySQL JSON documents nested as MySQL prints them; columns missing from a MINIMAL/NOBLOB image are left out). With the
option ``table=db.t`` (typed mode) they are structs with one field per column of that table
(named in their metadata: :func:`image_table`), in table order, typed as below (the table's definition comes from ``information_schema`` for a
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
JSON (MySQL)                          string: the text MySQL prints (``CAST(j AS CHAR)``), the
                                      JSON null literal ``null`` (SQL NULL: null); MariaDB's JSON
                                      is LONGTEXT: string
GEOMETRY                              binary (MySQL internal format: 4-byte SRID + WKB)
VECTOR                                array<float>
====================================  ===========================================================
"""


from __future__ import annotations

import struct
from decimal import Decimal
from typing import Callable, NamedTuple

from pyspark.sql.types import (ArrayType, BinaryType, ByteType, DataType, DateType,
                               DayTimeIntervalType, DecimalType, DoubleType, FloatType,
                               IntegerType, LongType, ShortType, StringType, StructField,
                               StructType, TimestampNTZType, TimestampType)

from cdc.values.charsets import BINARY_COLLATION, make_text_decoder
from cdc.values.kinds import InvalidText
from cdc.values.types import TYPES, ColumnDef, Geometry, InvalidTemporal
from cdc.binlog.constants import ColumnType as T
from cdc.errors import SchemaError
from cdc.values.jsonb import json_to_text
from cdc.values.render import to_json_text

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


def with_fields(schema: StructType, fields) -> StructType:
    """*schema* (an envelope) keeping only *fields* (option ``fields``; None: all)."""
    if fields is None:
        return schema
    return StructType([f for f in schema.fields if f.name in fields])


#: the column a schema includes with ``includeSchemaChanges=true``
SCHEMA_CHANGE_FIELD = StructField("schema_change", StringType())


def with_schema_changes(schema: StructType) -> StructType:
    """*schema* with the ``schema_change`` column at the end (``includeSchemaChanges``)."""
    return StructType(list(schema.fields) + [SCHEMA_CHANGE_FIELD])


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
    if isinstance(v, InvalidText):   # not valid in its charset: '{"$binary": "<base64>"}'
        return to_json_text(v)
    return str(v)


def _json_text(v):
    # A MySQL JSON document: the text MySQL prints for it (the null literal, JSON_NULL: "null").
    return json_to_text(v)


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


#: the metadata keys of a typed schema's ``before``/``after`` fields that name the table whose
#: images they hold (:func:`typed_schema`, :func:`image_table`)
IMAGE_DB, IMAGE_TABLE = "binlog_cdc.db", "binlog_cdc.table"


def typed_schema(columns: list[ColumnDef], table: tuple[str, str] | None = None) -> StructType:
    """The typed envelope of a table of *columns*; *table* (``(db, table)``, typed mode's option
    ``table``): named in the metadata of ``before`` and ``after`` (:func:`image_table`)."""
    schema = envelope_schema(image_struct(columns))
    if table is None:
        return schema
    meta = {IMAGE_DB: table[0], IMAGE_TABLE: table[1]}
    return StructType([StructField(f.name, f.dataType, f.nullable, meta)
                       if f.name in ("before", "after") else f for f in schema.fields])


def image_table(schema: StructType) -> tuple[str, str] | None:
    """``(db, table)`` of the one table every row of a typed stream's DataFrame (*schema*) is a
    change of (:func:`typed_schema`), or None when the schema does not say (the JSON envelope,
    a DataFrame whose ``after`` is not the source's)."""
    if "after" not in schema.fieldNames():
        return None
    meta = schema["after"].metadata or {}
    if IMAGE_DB in meta and IMAGE_TABLE in meta:
        return str(meta[IMAGE_DB]), str(meta[IMAGE_TABLE])
    return None


_NoneType = type(None)
#: Converters that return most values as they are, each with a test on a value's type: true when
#: the converter returns such a value unchanged (a column whose values all pass is taken as is).
IDENTITY_TYPES: dict[Callable, Callable[[type], bool]] = {
    _no_invalid: lambda t: not issubclass(t, InvalidTemporal),
    _to_text: lambda t: t is str or t is _NoneType,
}
