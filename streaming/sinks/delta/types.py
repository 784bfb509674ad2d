"""The Delta table's types of source columns, and converters of row-image values to them:
what :class:`streaming.sinks.delta.upserter.DeltaUpserter` writes.

The types are typed mode's Spark types (:func:`streaming.contract.spark_schema.spark_column`) turned into
Arrow types, except ``TIME``: Delta has no interval type, so it is stored as its text
``[-]HH:MM:SS[.ffffff]``.
"""

from __future__ import annotations

import base64
import datetime as _dt
from decimal import Decimal
from typing import Callable

import pyarrow as pa
from pyspark.sql.types import (ArrayType, BinaryType, DataType, DateType, DayTimeIntervalType,
                               DecimalType, DoubleType, FloatType, StringType, TimestampNTZType,
                               TimestampType)

from cdc.binlog.constants import ColumnType as T
from cdc.values.render import time_text, to_json_text
from cdc.values.types import ColumnDef

from streaming._compat import to_arrow_type
from streaming.contract.spark_schema import spark_column
from streaming.sinks.json_images import document_text, parse_image

__all__ = ["arrow_schema", "delta_spark_type", "json_converter",
           "parse_image", "time_texts", "typed_converter"]


def delta_spark_type(col: ColumnDef) -> DataType:
    """The Spark type a column has in the Delta table: its typed-mode type, except ``TIME``
    (Delta has no interval type: stored as text)."""
    t = spark_column(col).spark
    if isinstance(t, DayTimeIntervalType):
        return StringType()
    return t


def arrow_schema(columns: list[ColumnDef]) -> pa.Schema:
    """The Arrow schema of the Delta table of a source table (every column nullable)."""
    return pa.schema([pa.field(c.name, to_arrow_type(delta_spark_type(c), timezone="UTC"))
                      for c in columns])


def json_converter(col: ColumnDef, spark: DataType) -> Callable[[object], object]:
    """Converter: a value parsed from a ``row_json`` image (floats parsed as Decimal) -> what
    Arrow takes for the column's Delta type."""
    rt = col.real_type

    if isinstance(spark, StringType):
        if rt == T.JSON:      # MySQL JSON: a nested document, back to the text MySQL prints
            return document_text
        if rt == T.NEWDECIMAL:                 # DECIMAL(p > 38): every digit, as text
            return lambda v: None if v is None else format(Decimal(v), "f")
        def text(v):
            if v is None or type(v) is str:
                return v
            if isinstance(v, (dict, list)):
                return to_json_text(v)
            return str(v)                      # ENUM/SET indexes without FULL row metadata
        return text
    if isinstance(spark, DecimalType):
        return lambda v: None if v is None else Decimal(v)
    if isinstance(spark, (FloatType, DoubleType)):
        return lambda v: None if v is None else float(v)
    if isinstance(spark, BinaryType):
        if rt == T.GEOMETRY:
            def geometry(v):
                if v is None:
                    return None
                import struct
                return struct.pack("<I", int(v["srid"])) + base64.b64decode(v["wkb"])
            return geometry
        return lambda v: None if v is None else base64.b64decode(v)
    if isinstance(spark, DateType):
        def date(v):
            try:
                return None if v is None else _dt.date.fromisoformat(v)
            except ValueError:                 # zero dates: null, as in typed mode
                return None
        return date
    if isinstance(spark, (TimestampNTZType, TimestampType)):
        def timestamp(v):
            if v is None:
                return None
            if v[-1:] == "Z":                  # UTC; Python < 3.11 reads only +00:00
                v = v[:-1] + "+00:00"
            try:
                return _dt.datetime.fromisoformat(v)
            except ValueError:                 # zero dates: null, as in typed mode
                return None
        return timestamp
    if isinstance(spark, ArrayType):
        return lambda v: None if v is None else [None if x is None else float(x) for x in v]
    return lambda v: v if v is None or type(v) is int else int(v)     # integer types


def typed_converter(col: ColumnDef) -> Callable[[object], object] | None:
    """Converter for typed-mode struct values (already typed): only TIME changes."""
    if isinstance(spark_column(col).spark, DayTimeIntervalType):
        return lambda v: None if v is None else time_text(v)
    return None


def time_texts(arr) -> pa.Array:
    """TIME values of typed mode (an Arrow duration array) as the text Delta stores,
    ``[-]HH:MM:SS[.ffffff]`` like :func:`~cdc.values.render.time_text`, in Arrow compute."""
    import pyarrow.compute as pc
    us = pc.cast(pc.cast(arr, pa.duration("us")), pa.int64())
    whole = pc.abs(us)
    secs = pc.divide(whole, 1_000_000)                  # integer division
    frac = pc.subtract(whole, pc.multiply(secs, 1_000_000))
    mins, hours = pc.divide(secs, 60), pc.divide(secs, 3600)

    def digits(x, width):
        return pc.utf8_lpad(pc.cast(x, pa.string()), width=width, padding="0")
    sign = pc.if_else(pc.less(us, 0), "-", "")
    fraction = pc.if_else(pc.equal(frac, 0), "",
                          pc.binary_join_element_wise(".", digits(frac, 6), ""))
    return pc.binary_join_element_wise(
        sign, digits(hours, 2), ":", digits(pc.subtract(mins, pc.multiply(hours, 60)), 2), ":",
        digits(pc.subtract(secs, pc.multiply(mins, 60)), 2), fraction, "")
