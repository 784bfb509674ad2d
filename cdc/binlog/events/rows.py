"""TABLE_MAP and rows events (WRITE/UPDATE/DELETE, PARTIAL_UPDATE, MariaDB's compressed ones).

A rows event keeps its row images undecoded until asked (:attr:`RowsEvent.rows`,
:meth:`RowsEvent.decode_rows`); it decodes them with its table map's plans and the row decoder
of the parser that read it (:mod:`cdc.rows.decode`).
"""

from __future__ import annotations

from cdc.binlog.constants import DELETE_TYPES, UPDATE_TYPES, WRITE_TYPES, EventType
from cdc.binlog.events.base import Event, new_event, register
from cdc.binlog.events.payload import maria_uncompress
from cdc.binlog.tablemap import MAX_COLUMNS, apply_default_charset, decode_table_map
from cdc.binlog.wire import read_lenenc
from cdc.errors import ParseError, SchemaError, TruncatedEventError
from cdc.rows.decode import (append_columns, count_images, decode_image_columns,
                              decode_images, present_columns)


def _located(e: ParseError, file, pos) -> ParseError:
    """*e* (of its own class) with the rows event's file and position attached."""
    new = ParseError.__new__(type(e))
    Exception.__init__(new, f"{e} (at " + ", ".join(
        p for p in (f"file {file}" if file else "",
                    f"position {pos}" if pos is not None else "") if p) + ")")
    new.__dict__.update(vars(e))
    new.file, new.position = file, pos
    return new


class TableMapEvent(Event):
    __slots__ = ("table",)
    _fields = ("table",)

    @property
    def table_id(self) -> int:
        return self.table.table_id


@register(EventType.TABLE_MAP)
def _table_map(h, body, ctx):
    key = bytes(body)
    tmap = ctx.table_map_cache.get(key)
    if tmap is None:
        tmap = decode_table_map(body, ctx.post_header_len(EventType.TABLE_MAP, 8), ctx.is_mariadb)
        if ctx.default_collation is not None:
            apply_default_charset(tmap, ctx.default_collation)
        if len(ctx.table_map_cache) > 4096:
            ctx.table_map_cache.clear()
        ctx.table_map_cache[key] = tmap
    ctx.tables[tmap.table_id] = tmap
    ev = new_event(TableMapEvent)
    ev.header = h
    ev.table = tmap
    return ev


class RowsEvent(Event):
    """WRITE/UPDATE/DELETE rows. ``kind`` is "insert", "update" or "delete".

    ``rows`` (decoded on first access) is a list of value tuples for inserts/deletes and of
    (before, after) tuple pairs for updates; tuples follow the table's column order and hold
    :data:`cdc.values.kinds.ABSENT` for columns outside the image.  ``row_decoder`` is the row
    decoder of the parser that read the event (``"c"``, ``"python"`` or None: the process
    default, see :mod:`cdc.rows.backend`).
    """

    __slots__ = ("kind", "table_id", "flags", "table", "extra", "_data", "_start", "_present",
                 "_present_after", "_rows", "partial", "row_decoder")
    _fields = ("kind", "table_id", "table_name", "row_count")

    @property
    def table_name(self) -> str | None:
        return self.table.qualified_name if self.table else None

    @property
    def rows(self) -> list:
        if self._rows is None:
            self._rows = self.decode_rows()
        return self._rows

    def decode_rows(self, table=None) -> list:
        """The rows, as :attr:`rows`, decoded afresh and not kept on the event: a consumer that
        walks a large transaction once holds one event's decoded rows at a time. *table*: decode
        with this description of the event's table instead (e.g.
        :meth:`~cdc.binlog.tablemap.TableMap.with_stored_text`).

        Row images that do not decode raise a :class:`~cdc.errors.ParseError` (most often
        :class:`~cdc.errors.TruncatedEventError`) naming the table, the row, the column and this
        event's file and position."""
        if table is None:
            if self._rows is not None:
                return self._rows
            table = self.table
        return self._images(decode_images, table)

    def decode_columns(self, out: list, after_out: list | None = None,
                       int_form: frozenset = frozenset()) -> int:
        """:meth:`decode_rows` column by column, appended to *out* (one list per column of the
        table; updates: the before images, and the after images to *after_out*); returns the
        number of rows. *int_form*: columns whose values may come in Arrow's integer form
        (:func:`cdc.rows.decode.decode_image_columns`)."""
        if self._rows is not None:
            return append_columns(self._rows, self.kind == "update", out, after_out)
        return self._images(lambda *a: decode_image_columns(*a, out=out, after_out=after_out,
                                                            int_form=int_form), self.table)

    def count_rows(self) -> int:
        """``len(self.decode_rows())``, without building the rows when the compiled decoder
        is in use (the same errors)."""
        if self._rows is not None:
            return len(self._rows)
        return self._images(count_images, self.table)

    def _images(self, walk, table):
        if table is None:
            raise SchemaError(
                f"rows event for table id {self.table_id} has no TABLE_MAP before it (at file "
                f"{self.file}, position {self.pos}); start reading at a transaction boundary (a "
                f"GTID/BEGIN event), not mid-transaction")
        try:
            return walk(table, self.kind, self._data, self._start, self._present,
                        self._present_after, self.partial, self.row_decoder)
        except ParseError as e:
            if e.file is None and e.position is None and (self.file or self.pos is not None):
                raise _located(e, self.file, self.pos) from None
            raise

    @property
    def row_count(self) -> int:
        return len(self.rows) if self.table is not None else -1

    @property
    def stmt_end(self) -> bool:
        return bool(self.flags & 1)

    @property
    def present(self) -> tuple[int, ...]:
        """Indexes of the columns in the image (for updates: the before image)."""
        return self._present

    @property
    def present_after(self) -> tuple[int, ...] | None:
        """Updates: indexes of the columns in the after image; None for inserts and deletes."""
        return self._present_after


_MARIA_COMPRESSED_ROWS = {EventType.MARIA_WRITE_ROWS_COMPRESSED_V1,
                          EventType.MARIA_UPDATE_ROWS_COMPRESSED_V1,
                          EventType.MARIA_DELETE_ROWS_COMPRESSED_V1,
                          EventType.MARIA_WRITE_ROWS_COMPRESSED,
                          EventType.MARIA_UPDATE_ROWS_COMPRESSED,
                          EventType.MARIA_DELETE_ROWS_COMPRESSED}
_V2_ROWS = {EventType.WRITE_ROWS, EventType.UPDATE_ROWS, EventType.DELETE_ROWS,
            EventType.PARTIAL_UPDATE_ROWS, EventType.MARIA_WRITE_ROWS_COMPRESSED,
            EventType.MARIA_UPDATE_ROWS_COMPRESSED, EventType.MARIA_DELETE_ROWS_COMPRESSED}


_ROWS_DECODED = (WRITE_TYPES | UPDATE_TYPES | DELETE_TYPES) - {
    EventType.PRE_GA_WRITE_ROWS, EventType.PRE_GA_UPDATE_ROWS, EventType.PRE_GA_DELETE_ROWS}
# type code -> (kind, partial, post-header length when the FDE does not say, compressed)
_ROWS_SPEC = {t: ("insert" if t in WRITE_TYPES else "update" if t in UPDATE_TYPES else "delete",
                  t == EventType.PARTIAL_UPDATE_ROWS,
                  10 if t in _V2_ROWS and t not in _MARIA_COMPRESSED_ROWS else 8,
                  t in _MARIA_COMPRESSED_ROWS)
              for t in _ROWS_DECODED}


@register(*_ROWS_DECODED)
def _rows(h, body, ctx):
    t = h[1]
    kind, partial, default_phl, compressed = _ROWS_SPEC[t]
    ev = new_event(RowsEvent)
    ev.header = h
    ev.kind = kind
    ev.partial = partial
    ev.row_decoder = ctx.row_decoder
    fde = ctx.fde
    phl = fde.post_header_lengths[t - 1] if fde is not None and t <= len(
        fde.post_header_lengths) else default_phl
    if phl == 6:
        ev.table_id = int.from_bytes(body[0:4], "little")
        ev.flags = int.from_bytes(body[4:6], "little")
    else:
        ev.table_id = int.from_bytes(body[0:6], "little")
        ev.flags = int.from_bytes(body[6:8], "little")
    p = phl
    ev.extra = None
    if phl == 10:
        extra_len = int.from_bytes(body[8:10], "little")
        if extra_len > 2:
            ev.extra = bytes(body[10:10 + extra_len - 2])
        p = 8 + extra_len
    ncols = body[p]
    if ncols < 251:
        p += 1
    else:
        ncols, p = read_lenenc(body, p)
    nbytes = (ncols + 7) >> 3 if ncols is not None else 0
    if ncols is None or ncols > MAX_COLUMNS or \
            p + nbytes * (2 if kind == "update" else 1) > len(body):
        # checked before the column bitmaps are expanded (a few bytes may claim millions)
        raise TruncatedEventError(
            f"rows event claims {ncols} columns (at most {MAX_COLUMNS}, and one bitmap bit per "
            f"column must follow): the event is corrupt")
    ev._present = present_columns(bytes(body[p:p + nbytes]), ncols)
    p += nbytes
    if kind == "update":
        ev._present_after = present_columns(bytes(body[p:p + nbytes]), ncols)
        p += nbytes
    else:
        ev._present_after = None
    if p > len(body):
        raise TruncatedEventError("rows event header runs past the end of the event")
    data = body[p:]
    if compressed:
        data = maria_uncompress(data)
    ev._data = bytes(data)
    ev._start = 0
    ev._rows = None
    # Table maps stay valid until the end of the transaction (the STMT_END flag does not drop them).
    tmap = ev.table = ctx.tables.get(ev.table_id)
    if tmap is not None and len(tmap.columns) != ncols:
        raise SchemaError(
            f"rows event for {tmap.qualified_name} has {ncols} columns but its TABLE_MAP has "
            f"{len(tmap.columns)}; the binlog is inconsistent")
    return ev
