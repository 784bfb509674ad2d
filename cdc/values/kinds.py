"""The value classes decoded row images hold besides Python's own types.

* :data:`ABSENT` -- a column outside a row image (binlog_row_image=MINIMAL/NOBLOB), not NULL;
* :class:`InvalidTemporal` -- a zero or partly-zero date/time, as the text MySQL prints;
* :class:`Geometry` -- a GEOMETRY value: SRID and WKB;
* :class:`JsonOpaque` -- an opaque scalar inside a MySQL JSON document.

This module imports nothing of the project: every decoder (:mod:`cdc.values.types`,
:mod:`cdc.values.jsonb`, :mod:`cdc.rows`) and renderer can use it.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["ABSENT", "InvalidTemporal", "Geometry", "JsonOpaque"]


class _Absent:
    __slots__ = ()

    def __repr__(self) -> str:
        return "ABSENT"

    def __bool__(self) -> bool:
        return False

    def __reduce__(self):
        return "ABSENT"


ABSENT = _Absent()
"""Marks a column that is not part of a row image (not the same as NULL)."""


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
