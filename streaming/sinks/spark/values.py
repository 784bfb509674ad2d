"""Row-image values as Spark columns, for :class:`streaming.sinks.spark.merge.SparkMerge`: the JSON
images (``before``/``after`` texts), or typed mode's structs, read on the executors into the
target's column types (and which type changes a format makes in place: :func:`widens`) --
the types of :mod:`streaming.sinks.delta.types` (typed mode's, ``TIME`` as text), with the same
values as its converters give.

An image is read once as a map of column name -> the value's JSON text (``from_json`` to
``map<string,string>``); each column's value is that text cast to its type (dates and times that
do not exist, such as MySQL's zero dates, are null, as in typed mode; binary strings are base64;
``TIMESTAMP`` texts are UTC). MySQL JSON documents, GEOMETRY and VECTOR go through
:func:`streaming.sinks.delta.types.json_converter` in a Python UDF on the executors.
"""

from __future__ import annotations

from cdc.binlog.constants import ColumnType as T
from cdc.values.types import ColumnDef

from streaming.sinks.delta.types import (delta_spark_type, json_converter, parse_image,
                                         typed_converter)

__all__ = ["final_columns", "fill_value", "spark_ddl_type", "same_type", "widens", "WIDENINGS"]

#: the type changes each format makes in place (as the users' docs say them)
WIDENINGS = {
    "delta": "with type widening: tinyint -> smallint -> int -> bigint, float -> double, "
             "an integer or float -> double, an integer -> a decimal with room for it, a "
             "decimal to more digits on both sides of the point, date -> timestamp_ntz",
    "iceberg": "int -> bigint, float -> double, a decimal to a larger precision of the same "
               "scale"}
_INTEGERS = ("tinyint", "smallint", "int", "bigint")
_DIGITS = {"tinyint": 3, "smallint": 5, "int": 10, "bigint": 20}


def spark_ddl_type(col: ColumnDef) -> str:
    """The column's type in a CREATE/ALTER TABLE of the target."""
    return delta_spark_type(col).simpleString()


def same_type(col: ColumnDef, have: str) -> bool:
    """Whether a target column of type *have* (``simpleString``) holds *col*'s values as they
    are (Iceberg stores byte and short as int)."""
    want = spark_ddl_type(col)
    return have == want or (have == "int" and want in ("tinyint", "smallint"))


def _decimal(t: str):
    if not t.startswith("decimal("):
        return None
    p, s = t[len("decimal("):-1].split(",")
    return int(p), int(s)


def widens(fmt: str, have: str, want: str) -> bool:
    """Whether *fmt* (delta / iceberg) changes a column of type *have* to *want* in place
    (``simpleString`` types; Delta's type widening, Iceberg's type promotions)."""
    if have == want:
        return True
    dh, dw = _decimal(have), _decimal(want)
    if fmt == "iceberg":                    # (it stores tinyint and smallint as int)
        small = ("tinyint", "smallint", "int")
        if have in small:
            return want in small or want == "bigint"
        if dh and dw:
            return dw[1] == dh[1] and dw[0] >= dh[0]
        return (have, want) == ("float", "double")
    if have in _INTEGERS:
        if want in _INTEGERS:
            return _INTEGERS.index(want) > _INTEGERS.index(have)
        if dw:
            return dw[0] - dw[1] >= _DIGITS[have]
        return want == "double" and have != "bigint"
    if dh and dw:
        return dw[0] >= dh[0] and dw[1] >= dh[1] and dw[0] - dw[1] >= dh[0] - dh[1]
    return (have, want) in (("float", "double"), ("date", "timestamp_ntz"))


def _udf_kind(col: ColumnDef, spark) -> bool:
    from pyspark.sql.types import ArrayType, BinaryType, StringType
    rt = col.real_type
    return (isinstance(spark, ArrayType) or (isinstance(spark, BinaryType) and rt == T.GEOMETRY)
            or (isinstance(spark, StringType) and rt == T.JSON))


def _from_text(col: ColumnDef, text):
    """The Spark column of *col*'s value from its JSON text *text* (a string column)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import (BinaryType, DateType, StringType, TimestampNTZType,
                                   TimestampType)
    spark = delta_spark_type(col)
    if isinstance(spark, StringType):
        return text
    if isinstance(spark, BinaryType):
        return F.unbase64(text)
    if isinstance(spark, DateType):
        return text.try_cast("date")
    if isinstance(spark, TimestampNTZType):
        return text.try_cast("timestamp_ntz")
    if isinstance(spark, TimestampType):            # UTC instants
        zoned = F.when(text.rlike("(Z|[+-][0-9][0-9]:[0-9][0-9])$"), text).otherwise(
            F.concat(text, F.lit("Z")))
        return zoned.try_cast("timestamp")
    return text.cast(spark)


def _by_udf(col: ColumnDef, image, name: str):
    """The value of column *name* of the image (JSON text) through the delta-rs converter."""
    from pyspark.sql import functions as F
    spark = delta_spark_type(col)
    conv = json_converter(col, spark)

    def value(text):
        if text is None:
            return None
        v = parse_image(text).get(name)
        return None if v is None else conv(v)
    return F.udf(value, spark)(image)


def fill_value(col: ColumnDef, value):
    """A JSON-image value of *col* (a DDL's DEFAULT) as the Python value of its Spark type."""
    return None if value is None else json_converter(col, delta_spark_type(col))(value)


def _fill(col: ColumnDef, value):
    from pyspark.sql import functions as F
    return F.lit(fill_value(col, value)).cast(delta_spark_type(col))


def _value(col: ColumnDef, origin, image, parsed):
    """*col*'s value in an image (*image*: the JSON text, *parsed*: it as a map) per *origin*
    (:class:`streaming.sinks.plan.Origin`)."""
    from pyspark.sql import functions as F
    if origin.name is None:
        return _fill(col, origin.fill)
    if _udf_kind(col, delta_spark_type(col)):
        got = _by_udf(col, image, origin.name)
    else:
        got = _from_text(col, parsed[origin.name])
    if origin.present:
        return F.when(F.map_contains_key(parsed, origin.name), got).otherwise(
            _fill(col, origin.fill))
    return got


def _typed_value(col: ColumnDef, image: str, fields, fill):
    """*col*'s value in a typed image (the struct column *image* with *fields*): the field of
    its name (typed mode's type; TIME as its text), else *fill*."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType
    if col.name not in fields:
        return _fill(col, fill)
    got = F.col(image).getField(col.name)
    conv = typed_converter(col)
    if conv is not None:
        return F.udf(conv, StringType())(got)
    return got.cast(delta_spark_type(col))


def final_columns(plan, typed_fields=None) -> list[tuple]:
    """``[(name, value in the after image, value in the before image)]`` of the final shape of
    *plan* (:class:`streaming.sinks.plan.TablePlan`), each JSON row image read through the
    plan's schema changes after it (by its ``seq``). *typed_fields*: the field names of typed
    mode's images (structs in the table's shape when the query started: no schema change to
    read them through)."""
    from pyspark.sql import functions as F
    if typed_fields is not None:
        fill = plan.origins(0)
        return [(c.name, *(_typed_value(c, side, typed_fields, fill[c.name].fill)
                           for side in ("after", "before"))) for c in plan.final.columns]
    from pyspark.sql.types import MapType, StringType
    as_map = MapType(StringType(), StringType())
    images = {side: (F.col(side), F.from_json(F.col(side), as_map)) for side in ("after",
                                                                               "before")}
    unknown = {}
    out = []
    segments = [plan.origins(k) for k in range(len(plan.steps) + 1)]
    for col in plan.final.columns:
        values = []
        for side in ("after", "before"):
            image, parsed = images[side]
            expr = None
            for k, st in enumerate(plan.steps):
                origin = segments[k][col.name]
                if origin.unknown and origin.name is None:
                    unknown[col.name] = origin.unknown
                v = _value(col, origin, image, parsed)
                expr = (F.when(F.col("seq") < F.lit(st.seq), v) if expr is None
                        else expr.when(F.col("seq") < F.lit(st.seq), v))
            last = _value(col, segments[-1][col.name], image, parsed)
            values.append(last if expr is None else expr.otherwise(last))
        out.append((col.name, values[0], values[1]))
    if unknown:
        import logging
        logging.getLogger("binlog_cdc.spark_merge").warning(
            "columns added with a value not known for existing rows (null in the changes "
            "before the DDL of the same batch): %s", unknown)
    return out
