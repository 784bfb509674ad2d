"""Column definitions of a table read from the server's ``information_schema`` (a stream's typed
mode): each column as the :class:`~cdc.values.types.ColumnDef` the binlog's TABLE_MAP would
describe, so that :func:`streaming.schema.spark_column` types it the same way."""

from __future__ import annotations

import re

from cdc.values.charsets import BINARY_COLLATION
from cdc.values.types import TYPES, ColumnDef
from cdc.binlog.constants import ColumnType as T
from cdc.errors import ConfigurationError, SchemaError

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
