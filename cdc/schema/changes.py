"""Schema-change records: what one DDL statement did to one captured table, as the stream shows
it (``op='s'`` rows of the Spark source with ``includeSchemaChanges``, ``tail --schema-changes``).

:class:`SchemaChange` is built by the schema history (:meth:`cdc.schema.history.SchemaHistory.apply`
keeps those of the last statement in ``last_changes``) from the versions the statement made;
:meth:`SchemaChange.to_json` is the record's JSON object, with a fixed key order::

    {"type": "CREATE" | "ALTER" | "DROP" | "RENAME", "ddl": statement text,
     "renamed_from": "db.old" | null, "renamed_columns": {"old": "new"},
     "columns": [{"name", "type", "nullable", "charset", "default", "default_expr"}] | null,
     "primary_key": ["col", ...], "unsure": bool}

A column's ``default`` is its literal DEFAULT in the JSON form the row images use (numbers,
exact decimals, ISO dates, base64 for binary strings; see :mod:`cdc.values.render`), null for no
default or DEFAULT NULL; ``default_expr`` is true for a DEFAULT whose per-row value is not known
from the statement: an expression (``CURRENT_TIMESTAMP``, ``(expr)``), and a TIMESTAMP literal
(its UTC value depends on the session's time zone).  Sans-IO.
"""

from __future__ import annotations

import base64
import datetime as _dt
import json
import re
from decimal import Decimal, InvalidOperation
from typing import NamedTuple

from cdc.values.render import to_json_text
from cdc.values.temporal import datetime_from_text


def _j(v) -> str:
    # ASCII JSON: a statement's text may hold surrogate escapes (bytes not valid in its
    # character set), which only escaped JSON carries through UTF-8
    return json.dumps(v)

__all__ = ["SchemaChange", "default_json", "column_json", "type_text", "SCHEMA_CHANGE_TYPES"]

SCHEMA_CHANGE_TYPES = ("CREATE", "ALTER", "DROP", "RENAME")

_INTS = frozenset({"tinyint", "smallint", "mediumint", "int", "integer", "bigint", "year"})
_TEXT = frozenset({"char", "varchar", "tinytext", "text", "mediumtext", "longtext", "enum", "set",
                   "json", "uuid", "inet4", "inet6"})
_BYTES = frozenset({"binary", "varbinary", "tinyblob", "blob", "mediumblob", "longblob"})
# integer display widths, but TINYINT(1) (BOOL), which MySQL 8 keeps too
_DISPLAY_WIDTH = re.compile(r"^(tinyint(?!\(1\))|smallint|mediumint|int|integer|bigint|year)"
                            r"\(\d+\)")


class SchemaChange(NamedTuple):
    """One captured table changed by one DDL statement (see the module): ``db``/``table`` its
    name after the statement; ``columns`` (:class:`~cdc.schema.columns.ServerColumn`, table
    order) None when it was dropped or its shape is unknown; ``primary_key`` the key the source
    uses (the primary key, else a UNIQUE NOT NULL key)."""

    db: str
    table: str
    type: str
    ddl: str
    renamed_from: str | None
    renamed_columns: dict
    columns: tuple | None
    primary_key: tuple
    unsure: bool

    def to_json(self) -> str:
        """The record as a JSON object (fixed key order)."""
        cols = "null" if self.columns is None else \
            "[" + ", ".join(column_json(c) for c in self.columns) + "]"
        return ("{" f'"type": {_j(self.type)}, "ddl": {_j(self.ddl)}, '
                f'"renamed_from": {_j(self.renamed_from)}, '
                f'"renamed_columns": {_j(self.renamed_columns)}, "columns": {cols}, '
                f'"primary_key": {_j(list(self.primary_key))}, '
                f'"unsure": {json.dumps(self.unsure)}' "}")


def type_text(col) -> str:
    """The column's MySQL type text (``varchar(20)``, ``bigint unsigned``, ``decimal(10,2)``,
    ``enum('a','b')``): information_schema's COLUMN_TYPE without integer display widths (which
    MariaDB shows and a DDL statement may omit), but ``tinyint(1)``, as MySQL 8 shows it."""
    return _DISPLAY_WIDTH.sub(r"\1", col.column_type)


def column_json(col) -> str:
    value, expr = default_json(col)
    cs = col.charset
    return ("{" f'"name": {_j(col.name)}, "type": {_j(type_text(col))}, '
            f'"nullable": {json.dumps(bool(col.nullable))}, '
            f'"charset": {json.dumps(cs if cs and cs != "binary" else None)}, '
            f'"default": {value}, "default_expr": {json.dumps(expr)}' "}")


def _number(text: str) -> Decimal:
    return Decimal(text.strip())


def _bytes_of(kind: str, text: str, col) -> bytes:
    if kind == "hex":
        return bytes.fromhex(text if len(text) % 2 == 0 else "0" + text)
    if kind == "bit":
        n = int(text or "0", 2)
        return n.to_bytes(max(1, (len(text) + 7) // 8), "big")
    return text.encode("utf-8")


def _value(col, kind: str, text: str):
    """The default's value as the row decoder would give it; ValueError/ArithmeticError when
    the literal does not read as the column's type."""
    t = col.data_type
    if t in _INTS:
        if kind in ("hex", "bit"):
            return int(text, 16 if kind == "hex" else 2)
        d = _number(text)
        if d != d.to_integral_value():
            raise ValueError(text)
        return int(d)
    if t == "bit":
        if kind == "bit":
            return int(text or "0", 2)
        if kind == "hex":
            return int(text, 16)
        if kind == "str":
            return int.from_bytes(text.encode("utf-8"), "big")
        return int(_number(text))
    if t in ("float", "double", "real", "double precision"):
        return float(_number(text))
    if t in ("decimal", "numeric"):
        scale = col.numeric_scale or 0
        return _number(text).quantize(Decimal(1).scaleb(-scale))
    if t in _BYTES:
        b = _bytes_of(kind, text, col)
        if t == "binary" and col.octets:
            b = b.ljust(col.octets, b"\0")
        return b
    if t in _TEXT:
        if kind in ("hex", "bit"):
            return _bytes_of(kind, text, col).decode("utf-8", "replace")
        return text
    if t == "date":
        try:
            return _dt.date.fromisoformat(text.strip())
        except ValueError:
            return text.strip()         # a zero date: its text, as the row images show it
    if t == "datetime":
        try:
            return datetime_from_text(text.strip())
        except ValueError:
            return text.strip()
    if t == "time":
        return text.strip()
    raise ValueError(f"no literal default for {t}")


def default_json(col) -> tuple[str, bool]:
    """(the column's DEFAULT as JSON text in the row images' form, whether it is an expression
    whose per-row value is unknown); ``("null", False)`` for no default or DEFAULT NULL."""
    d = getattr(col, "default", None)
    if d is None:
        return "null", False
    kind, text = d
    if kind == "expr" or col.data_type == "timestamp":
        return "null", True
    try:
        value = _value(col, kind, text)
    except (ValueError, ArithmeticError, InvalidOperation, TypeError):
        return _j(text), False      # kept as written: the server accepted it
    if isinstance(value, bytes):
        return json.dumps(base64.b64encode(value).decode("ascii")), False
    return to_json_text(value), False
