"""The value classes decoded row images hold besides Python's own types.

* :data:`ABSENT` -- a column outside a row image (binlog_row_image=MINIMAL/NOBLOB), not NULL;
* :data:`JSON_NULL` -- a MySQL JSON column holding the JSON ``null`` literal, not SQL NULL;
* :class:`InvalidTemporal` -- a zero or partly-zero date/time, as the text MySQL prints;
* :class:`Geometry` -- a GEOMETRY value: SRID and WKB;
* :class:`JsonOpaque` -- an opaque scalar inside a MySQL JSON document;
* :class:`InvalidText` -- text whose bytes are not valid in the column's character set;
* :class:`JsonDiffs` -- a partial JSON update whose document before is unknown.

This module imports nothing of the project: every decoder (:mod:`cdc.values.types`,
:mod:`cdc.values.jsonb`, :mod:`cdc.rows`) and renderer can use it.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["ABSENT", "JSON_NULL", "InvalidTemporal", "Geometry", "JsonOpaque", "InvalidText", "JsonDiffs"]


class _Marker:
    """A falsy singleton that is not ``None``, kept by pickling (by its module-level name)."""

    __slots__ = ("_name",)

    def __init__(self, name: str):
        self._name = name

    def __repr__(self) -> str:
        return self._name

    def __bool__(self) -> bool:
        return False

    def __reduce__(self):
        return self._name


ABSENT = _Marker("ABSENT")
"""Marks a column that is not part of a row image (not the same as NULL)."""

JSON_NULL = _Marker("JSON_NULL")
"""The value of a MySQL JSON column whose document is the JSON ``null`` literal
(``SELECT j IS NULL`` is 0, ``CAST(j AS CHAR)`` is ``null``); SQL NULL is ``None``.  Only a whole
document is ``JSON_NULL``: a ``null`` inside an array or object is ``None`` there."""


class InvalidTemporal(str):
    """A zero or partly-zero date/time value (``0000-00-00``, ``2024-00-10 10:00:00``...)."""

    __slots__ = ()


class Geometry(NamedTuple):
    srid: int
    wkb: bytes


class JsonOpaque(bytes):
    """An opaque JSON scalar of a MySQL type with no JSON equivalent (BLOB, BIT, ...).

    The ``bytes`` are the stored data; :attr:`field_type` the MySQL column type code.  MySQL
    prints it as ``"base64:type<N>:<base64>"`` (see :func:`cdc.values.jsonb.json_to_text`);
    VAR_STRING (253) opaque values are printed as plain strings.
    """

    def __new__(cls, data, field_type: int):
        self = super().__new__(cls, data)
        self.field_type = field_type
        return self

    def __reduce__(self):
        return (JsonOpaque, (bytes(self), self.field_type))

    def __repr__(self) -> str:
        return f"JsonOpaque({bytes(self)!r}, field_type={self.field_type})"


class InvalidText(bytes):
    """A character column's value whose bytes are not valid in the column's character set (a
    utf8mb4 column can hold ``X'C3'`` after ``sql_mode=''``): the stored bytes, unchanged.

    JSON text: ``{"$binary": "<base64>"}``; Spark typed mode: that JSON text in the string
    column.  Text that is valid is a ``str``, so nothing is lost and nothing is guessed.
    """

    __slots__ = ()

    def __reduce__(self):
        return (InvalidText, (bytes(self),))

    def __repr__(self) -> str:
        return f"InvalidText({bytes(self)!r})"


_DIFF_OPS = ("replace", "insert", "remove")


class JsonDiffs(dict):
    """The new value of a JSON column as MySQL logged it with
    ``binlog_row_value_options=PARTIAL_JSON`` -- changes, not the document -- when the document
    before is unknown (``binlog_row_image=MINIMAL`` leaves it out of the before image):
    ``{"$json_diff": [{"op": "replace", "path": "$.a", "value": 2}, {"op": "remove",
    "path": "$.b"}, ...]}``, applied in order; ``op`` is ``replace`` (the path exists),
    ``insert`` (a new member, or into an array at the index) or ``remove`` (no ``value``).

    A ``dict``, so it is JSON text as it is; :attr:`diffs` is the list.  Where the document
    before is known the diffs are applied and the column holds the new document instead.
    """

    __slots__ = ()

    def __init__(self, diffs=()):
        """*diffs*: ``(operation, path, value)`` triples, operation 0/1/2 or its name."""
        out = []
        for op, path, value in diffs:
            name = _DIFF_OPS[op] if type(op) is int else str(op)
            out.append({"op": name, "path": path} if name == "remove" else
                       {"op": name, "path": path, "value": value})
        super().__init__({"$json_diff": out})

    @property
    def diffs(self) -> list:
        return self["$json_diff"]

    def __reduce__(self):
        return (JsonDiffs, ([(d["op"], d["path"], d.get("value")) for d in self.diffs],))
