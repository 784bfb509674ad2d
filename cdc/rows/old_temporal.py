"""Pre-5.6 TIME/TIMESTAMP/DATETIME columns whose precision the binlog does not carry.

MariaDB logs TIME(n), TIMESTAMP(n) and DATETIME(n) of tables in the old temporal format (made
with ``mysql56_temporal_format=OFF``, or before MariaDB 10.1.2) with the old type codes 11/7/12
and no metadata: a value takes 3/4/8 bytes at precision 0 but 4-6/5-7/6-8 bytes ("hires", big
endian) with fractional seconds, and nothing in the TABLE_MAP or the rows event says which.  A
live stream reads the precision from information_schema (``ColumnDef.meta``); MySQL never wrote
fractional seconds in these formats (the table map decoder sets precision 0 for its binlogs).
For a MariaDB binlog read without the server such a column's precision is unknown
(``meta is None``), and reading it as precision 0 may *fit* a rows event of another precision:
one row ``(1, '2015-12-07 10:11:12.3')`` of ``TIMESTAMP(1)`` read as ``(1, 2004-03-19 ...),
(None, None)`` (the fraction byte taken for a second row's NULL bitmap).

:func:`settle_precision` decides from the event itself.  The true widths always parse the
event exactly, so when precision 0 parses it and no other width does, precision 0 is the truth:
the columns with a value in the event get ``meta = 0`` (their table map then decodes at full
speed).  When another width parses it too -- or only another does -- the event's values cannot
be told from the binlog alone: a :class:`~cdc.errors.ParseError` naming the column and
``mysql56_temporal_format``, never a guess.  The search tries one precision per stored width
(the most digits of that width: the value checks of :mod:`cdc.values.temporal` are then as
loose as real values need), branching at each column's first value, within a budget of decoded
values (:data:`SEARCH_BUDGET`; beyond it: the same error).
"""

from __future__ import annotations

import copy
import struct

from cdc.binlog.constants import ColumnType as T
from cdc.errors import ParseError
from cdc.values.temporal import old_temporal_error
from cdc.values.types import build_decoder

__all__ = ["OLD_TEMPORAL", "SEARCH_BUDGET", "unknown_precision", "settle_precision"]

#: old type code -> (name, a precision per stored width: precision 0 (None: the old format,
#: checked), then hires widths 4/5/6/7, 4/5/6 or 6/7/8 bytes)
OLD_TEMPORAL = {T.TIMESTAMP: ("TIMESTAMP", (None, 2, 4, 6)),
                T.TIME: ("TIME", (None, 2, 5, 6)),
                T.DATETIME: ("DATETIME", (None, 2, 5, 6))}

SEARCH_BUDGET = 200_000
"""Values decoded at most while settling one rows event's widths."""

_BAD_VALUE = (ParseError, IndexError, ValueError, OverflowError, struct.error)


def unknown_precision(tmap) -> tuple[int, ...]:
    """Indexes of *tmap*'s old-format temporal columns whose precision is not known."""
    return tuple(c.index for c in tmap.columns if c.real_type in OLD_TEMPORAL and c.meta is None)


class _TooLong(Exception):
    pass


class _Search:
    """Parses one rows event with every combination of widths of the unknown columns (lazily:
    a column's width is chosen at its first value), recording which combinations fit."""

    def __init__(self, tmap, decoders, unknown, data, end, shapes):
        self.data, self.end, self.shapes = data, end, shapes
        self.decoders = decoders                  # the known columns' decoders
        self.fsps = {i: OLD_TEMPORAL[tmap.columns[i].real_type][1] for i in unknown}
        self.candidates = {}                      # (column, precision) -> decoder
        for i, fsps in self.fsps.items():
            for fsp in fsps:
                col = copy.copy(tmap.columns[i])
                col.meta = fsp
                self.candidates[(i, fsp)] = build_decoder(col)
        self.budget = SEARCH_BUDGET
        self.zero_fit: dict | None = None         # precision 0 for all: it fits
        self.other_fit: dict | None = None        # widths of fractional seconds that fit

    def walk(self, pos: int, k: int, j: int, nulls, assign: dict) -> None:
        """Parse on from image shape *k*, its column *j* (-1: the image's start), with the
        precisions *assign* chose so far; a parse that ends with the event is recorded."""
        data, end, shapes, fsps = self.data, self.end, self.shapes, self.fsps
        while True:
            if j < 0:
                if pos == end and k == 0:
                    if any(fsp is not None for fsp in assign.values()):
                        self.other_fit = assign
                    elif self.zero_fit is None:
                        self.zero_fit = assign
                    return
                nb = (len(shapes[k]) + 7) >> 3
                if pos + nb > end:
                    return
                nulls = data[pos:pos + nb]
                pos += nb
                j = 0
            present = shapes[k]
            while j < len(present):
                i = present[j]
                if nulls[j >> 3] & (1 << (j & 7)):
                    j += 1
                    continue
                if i in fsps:
                    if i not in assign:
                        for fsp in fsps[i]:
                            self.walk(pos, k, j, nulls, {**assign, i: fsp})
                            if self.other_fit is not None:
                                return
                        return
                    dec = self.candidates[(i, assign[i])]
                else:
                    dec = self.decoders[i]
                self.budget -= 1
                if self.budget < 0:
                    raise _TooLong()
                try:
                    _value, pos = dec(data, pos)
                except _BAD_VALUE:
                    return
                if pos > end:
                    return
                j += 1
            k = (k + 1) % len(shapes)
            j = -1


def _error(tmap, i: int, detail: str) -> ParseError:
    col = tmap.columns[i]
    label = col.name if col.name is not None else f"@{i + 1}"
    return old_temporal_error(OLD_TEMPORAL[col.real_type][0],
                              f"column {label} of {tmap.qualified_name}: {detail}")


def settle_precision(tmap, decoders, kind: str, data, pos: int, present1, present2) -> bool:
    """Decide the precision of *tmap*'s unknown old-format temporal columns from one rows event
    (see the module docstring): True when some became known (``meta = 0``; the caller rebuilds
    the table's plans).  Raises the ParseError of :func:`~cdc.values.temporal.old_temporal_error`
    when the event does not show precision 0; returns False, changing nothing, when no width
    fits (the row decoder then raises its own error)."""
    unknown = unknown_precision(tmap)
    shapes = (present1, present2) if kind == "update" else (present1,)
    search = _Search(tmap, decoders, unknown, data, len(data), shapes)
    try:
        search.walk(pos, 0, -1, None, {})
    except _TooLong:
        raise _error(tmap, unknown[0], "too many ways to read this rows event to tell whether "
                                       "it has fractional seconds") from None
    if search.other_fit is not None:
        i = next(c for c, fsp in search.other_fit.items() if fsp is not None)
        raise _error(tmap, i, "this rows event reads as precision 0 and as fractional seconds"
                     if search.zero_fit is not None else "its values have fractional seconds")
    if not search.zero_fit:
        return False
    for i in search.zero_fit:
        tmap.columns[i].meta = 0
    return True
