"""Row images of WRITE/UPDATE/DELETE/PARTIAL_UPDATE rows events, decoded with a table map.

Two decoders give identical values: the compiled ``cdc.rows._rowdecode`` (optional C extension)
and the pure-Python one (generated per-table readers, :mod:`cdc.rows.compile`, and the
per-column decoders of :mod:`cdc.values.types`).  Which one runs is a choice passed along with
the rows (:func:`decode_images`'s ``decoder``; see :mod:`cdc.rows.backend`: None is the process
default, ``BINLOG_CDC_DECODER``, which :func:`active_decoder` tells).

Everything built to decode the rows of one table map -- per-column decoders, generated readers,
compiled-decoder plans, per rows-event shape -- is kept in its :class:`RowPlans`
(``tmap.row_plans``).  The fast decoders read each column as its binary layout in the type
table says (:func:`cdc.values.types.column_layout`).
"""

from __future__ import annotations

import struct

from cdc.binlog.wire import read_lenenc
from cdc.errors import ParseError, TruncatedEventError
from cdc.rows.backend import (DECODER_ENV, active_decoder, c_decoder_available, rowdecode,
                              set_default_decoder, uses_c)
from cdc.rows.compile import compile_full_row_reader, compile_rows_reader
from cdc.rows.old_temporal import OLD_TEMPORAL, settle_precision, unknown_precision
from cdc.values.jsonb.diff import apply_json_diffs, read_json_diffs
from cdc.values.kinds import ABSENT
from cdc.values.temporal import OLD_TEMPORAL_ADVICE
from cdc.values.types import build_decoder, column_layout

__all__ = ["decode_images", "decode_image_columns", "append_columns", "present_columns",
           "malformed_rows_error", "ImageReader", "RowPlans",
           # re-exported from cdc.rows.backend
           "DECODER_ENV", "active_decoder", "c_decoder_available", "set_default_decoder"]

_PRESENT_CACHE: dict = {}

#: the layout kinds the compiled decoder can give in Arrow's integer form
#: (:func:`decode_image_columns`' *int_form*; a DECIMAL only up to 18 digits)
INT_FORMS = {"DECIMAL": "DECIMAL_INT", "DATETIME2": "DATETIME2_US",
             "TIMESTAMP2": "TIMESTAMP2_US", "DATE": "DATE_DAYS"}


def present_columns(bitmap: bytes, ncols: int) -> tuple[int, ...]:
    """The indexes of the columns set in a rows event's column-presence *bitmap*."""
    key = (bitmap, ncols)
    hit = _PRESENT_CACHE.get(key)
    if hit is None:
        hit = tuple(i for i in range(ncols) if bitmap[i >> 3] & (1 << (i & 7)))
        if len(_PRESENT_CACHE) >= 1024:
            _PRESENT_CACHE.clear()
        _PRESENT_CACHE[key] = hit
    return hit


def decode_images(tmap, kind: str, data, pos: int, present1: tuple[int, ...],
                  present2: tuple[int, ...] | None, partial: bool = False,
                  decoder: str | None = None):
    """All rows of one rows event body from *pos*.

    *decoder*: ``"c"``, ``"python"``, ``"auto"`` or None (the process default, see
    :mod:`cdc.rows.backend`).  Returns a list of tuples (insert/delete) or of (before, after)
    tuple pairs (update).
    """
    plans = _settled_plans(tmap, kind, data, pos, present1, present2, partial)
    key = (uses_c(decoder), kind, present1, present2, partial)
    read = plans.readers.get(key)
    if read is None:
        read = plans.readers[key] = _rows_reader(tmap, *key)
    try:
        return read(data, pos)
    except (ParseError, IndexError, ValueError, OverflowError, struct.error) as e:
        raise malformed_rows_error(tmap, kind, data, pos, present1, present2, partial, e) from None


def count_images(tmap, kind: str, data, pos: int, present1: tuple[int, ...],
                 present2: tuple[int, ...] | None, partial: bool = False,
                 decoder: str | None = None) -> int:
    """``len(decode_images(...))``; the compiled decoder walks the images without building the
    rows (a driver counting rows to bound a micro-batch does not need them)."""
    if not (uses_c(decoder) and not partial and hasattr(rowdecode, "count_rows")):
        return len(decode_images(tmap, kind, data, pos, present1, present2, partial, decoder))
    plans = _settled_plans(tmap, kind, data, pos, present1, present2, partial)
    p1 = plans.c_plan(present1)
    p2 = None if kind != "update" else p1 if present2 == present1 else plans.c_plan(present2)
    try:
        return rowdecode.count_rows(data, pos, p1, p2)
    except (ParseError, IndexError, ValueError, OverflowError, struct.error) as e:
        raise malformed_rows_error(tmap, kind, data, pos, present1, present2, partial, e) from None


def decode_image_columns(tmap, kind: str, data, pos: int, present1: tuple[int, ...],
                         present2: tuple[int, ...] | None, partial: bool = False,
                         decoder: str | None = None, out: list | None = None,
                         after_out: list | None = None, int_form: frozenset = frozenset()) -> int:
    """:func:`decode_images` column by column: each row's values are appended to *out* (one
    list per column of the table; ABSENT where the image does not hold the column) and, for
    updates, the after images' to *after_out*; returns the number of rows. The compiled
    decoder appends as it decodes (no row tuples); the same values and errors either way.

    *int_form*: indexes of columns whose values the compiled decoder may give in Arrow's
    integer form instead (:data:`INT_FORMS`: a DECIMAL of up to 18 digits as its unscaled int,
    DATETIME as microseconds since 1970-01-01 of its wall time, TIMESTAMP as microseconds since
    the epoch, DATE as days since 1970-01-01); values it does not build itself (zero dates...)
    and every value of the Python decoder stay the objects :func:`decode_images` gives."""
    if not (uses_c(decoder) and not partial and hasattr(rowdecode, "decode_columns")):
        rows = decode_images(tmap, kind, data, pos, present1, present2, partial, decoder)
        return append_columns(rows, kind == "update", out, after_out)
    plans = _settled_plans(tmap, kind, data, pos, present1, present2, partial)
    p1 = plans.c_plan(present1, int_form)
    p2 = None if kind != "update" else p1 if present2 == present1 else \
        plans.c_plan(present2, int_form)
    try:
        try:
            return rowdecode.decode_columns(data, pos, p1, p2, out, after_out)
        except (IndexError, ValueError, struct.error) as e:     # as _c_rows_reader's
            raise TruncatedEventError(f"row image of {tmap.qualified_name} is malformed: "
                                      f"{e}") from None
    except (ParseError, OverflowError) as e:      # as decode_images'
        raise malformed_rows_error(tmap, kind, data, pos, present1, present2, partial, e) from None


def append_columns(rows: list, update: bool, out: list, after_out: list | None) -> int:
    """Decoded *rows* (:func:`decode_images`) appended column by column, as
    :func:`decode_image_columns` does: the number of rows."""
    for image, dest in (((r[0] for r in rows), out), ((r[1] for r in rows), after_out)) \
            if update else ((rows, out),):
        for column, values in zip(dest, zip(*image)):
            column += values
    return len(rows)


def _settled_plans(tmap, kind: str, data, pos: int, present1, present2, partial: bool):
    """*tmap*'s plans, once old-format temporal columns of unknown precision (MariaDB binlogs
    read without the server) are settled for this event (:mod:`cdc.rows.old_temporal`)."""
    plans = tmap.row_plans
    if plans.unknown_precision and not partial and settle_precision(
            tmap, plans.decoders, kind, data, pos, present1, present2):
        plans = tmap.row_plans = RowPlans(tmap)
    return plans


def _column_label(col) -> str:
    name = col.name if col.name is not None else f"@{col.index + 1}"
    return f"column {name} ({col.type_name})"


def malformed_rows_error(tmap, kind: str, data, pos: int, present1, present2, partial: bool,
                         cause: BaseException) -> ParseError:
    """The one error of row images that do not decode, whichever decoder failed: the images are
    walked again column by column (error path only) to name the row and the column that does
    not fit; both decoders give the same message."""
    decoders, columns = tmap.row_plans.decoders, tmap.columns
    end = len(data)
    name = tmap.qualified_name
    shapes = (present1, present2) if kind == "update" else (present1,)
    row = 0
    try:
        while pos < end:
            row += 1
            for k, present in enumerate(shapes):
                if k == 1 and partial:
                    raise _Undiagnosed()   # PARTIAL_UPDATE after-images: the Python path's error
                nb = (len(present) + 7) >> 3
                nulls = data[pos:pos + nb]
                if len(nulls) != nb:
                    return TruncatedEventError(
                        f"row image {row} of {name}: its NULL bitmap runs past the end of the "
                        f"rows event")
                pos += nb
                start = pos
                for j, i in enumerate(present):
                    if nulls[j >> 3] & (1 << (j & 7)):
                        continue
                    try:
                        _value, pos = decoders[i](data, pos)
                        bad = None if pos <= end else "runs past the end of the rows event"
                    except ParseError as e:
                        if not isinstance(e, TruncatedEventError):
                            return _retyped(e, f"row image {row} of {name}, "
                                               f"{_column_label(columns[i])}: {e}")
                        bad = "runs past the end of the rows event"
                    except (IndexError, ValueError, OverflowError, struct.error):
                        bad = "runs past the end of the rows event or does not decode"
                    if bad is not None:
                        return TruncatedEventError(
                            f"row image {row} of {name}, {_column_label(columns[i])}: the value "
                            f"{bad}{_old_temporal_hint(tmap)}")
                if pos <= start:
                    return TruncatedEventError(f"row image {row} of {name} has no bytes (no "
                                               f"columns): the rows event is malformed")
    except _Undiagnosed:
        pass
    if isinstance(cause, ParseError):
        return cause
    return TruncatedEventError(f"row images of {name} do not decode: the rows event is "
                               f"malformed{_old_temporal_hint(tmap)}")


def _retyped(e: ParseError, message: str) -> ParseError:
    try:
        return type(e)(message)
    except TypeError:
        return ParseError(message)


class _Undiagnosed(Exception):
    pass


def _old_temporal_hint(tmap) -> str:
    """A hint for tables with pre-5.6 temporal columns: with fractional seconds (MariaDB's
    mysql56_temporal_format=OFF) their size is not in the binlog."""
    olds = unknown_precision(tmap)
    if not olds:
        return ""
    c = tmap.columns[olds[0]]
    label = c.name if c.name is not None else f"@{c.index + 1}"
    return (f"; note: column {label} is a {OLD_TEMPORAL[c.real_type][0]} in the pre-5.6 binary "
            f"format, whose fractional-second precision the binlog does not carry (MariaDB "
            f"with mysql56_temporal_format=OFF): {OLD_TEMPORAL_ADVICE}")


class RowPlans:
    """What decoding the rows of one table map needs, built on first use and kept
    (``tmap.row_plans``; a table map whose column names change gets a new one).

    * :attr:`decoders` -- one value decoder per column (the type table's);
    * :attr:`full_row_reader` -- the generated reader of a full, NULL-free image
      (:func:`cdc.rows.compile.compile_full_row_reader`, shared by table maps of one shape);
    * :attr:`image_readers` -- :class:`ImageReader` per column-presence bitmap;
    * :attr:`batch_readers` -- the generated whole-event loops, per "is an update";
    * :attr:`c_plans` -- ``cdc.rows._rowdecode.Plan`` per column-presence bitmap;
    * :attr:`readers` -- ``(data, pos) -> rows`` per (compiled decoder?, kind, bitmaps,
      partial): what :func:`decode_images` runs.
    """

    __slots__ = ("tmap", "_decoders", "_full_row_reader", "image_readers", "batch_readers",
                 "c_plans", "readers", "unknown_precision")

    def __init__(self, tmap):
        self.tmap = tmap
        #: old-format temporal columns whose width each rows event must settle first
        self.unknown_precision = unknown_precision(tmap)
        self._decoders = None
        self._full_row_reader = None
        self.image_readers: dict[tuple, ImageReader] = {}
        self.batch_readers: dict[bool, object] = {}
        self.c_plans: dict[tuple, object] = {}
        self.readers: dict[tuple, object] = {}

    @property
    def decoders(self) -> list:
        if self._decoders is None:
            self._decoders = [build_decoder(c) for c in self.tmap.columns]
        return self._decoders

    @property
    def full_row_reader(self):
        if self._full_row_reader is None:
            self._full_row_reader = compile_full_row_reader(self.tmap, self.decoders)
        return self._full_row_reader

    def image_reader(self, present: tuple[int, ...]) -> ImageReader:
        r = self.image_readers.get(present)
        if r is None:
            r = self.image_readers[present] = ImageReader(self.tmap, present)
        return r

    def batch_reader(self, update: bool):
        r = self.batch_readers.get(update)
        if r is None:
            r = self.batch_readers[update] = compile_rows_reader(self.tmap, self.decoders, update)
        return r

    def c_plan(self, present: tuple[int, ...], int_form: frozenset = frozenset()):
        """The compiled decoder's Plan of one image shape: per present column its layout from
        the type table (kind, a, b) and its value decoder (FALLBACK columns, odd values);
        *int_form*: the columns to give in Arrow's integer form where they have one
        (:func:`decode_image_columns`)."""
        key = (present, int_form) if int_form else present
        plan = self.c_plans.get(key)
        if plan is None:
            decoders, columns = self.decoders, self.tmap.columns
            specs = []
            for i in present:
                layout = column_layout(columns[i])
                kind = layout.kind
                if i in int_form and kind in INT_FORMS and (kind != "DECIMAL" or layout.a <= 18):
                    kind = INT_FORMS[kind]
                specs.append((i, getattr(rowdecode, kind), layout.a, layout.b, decoders[i]))
            plan = self.c_plans[key] = rowdecode.Plan(len(columns), tuple(specs), ABSENT)
        return plan


class ImageReader:
    """Decodes the row images of one rows event (one column-presence bitmap per image)."""

    __slots__ = ("ncols", "plan", "null_bytes", "full", "json_cols", "tmap", "fast", "no_nulls")

    def __init__(self, tmap, present: tuple[int, ...]):
        self.tmap = tmap
        self.ncols = len(tmap.columns)
        decoders = tmap.row_plans.decoders
        self.plan = [(i, decoders[i]) for i in present]
        self.null_bytes = (len(present) + 7) >> 3
        self.full = len(present) == self.ncols
        self.fast = tmap.row_plans.full_row_reader if self.full else None
        # A NULL bitmap without NULLs: all zero, or with the unused trailing bits set (servers
        # write both).
        nb = self.null_bytes
        pad = (0xFF << (len(present) & 7)) & 0xFF if len(present) & 7 else 0
        self.no_nulls = {bytes(nb), bytes(nb - 1) + bytes((pad,))} if nb else {b""}

    def read(self, buf, pos: int):
        """One image at *pos*: (tuple of values, position after it)."""
        nb = self.null_bytes
        nulls = buf[pos:pos + nb]
        if len(nulls) != nb:
            raise TruncatedEventError("row image null bitmap runs past the end of the event")
        pos += nb
        try:
            if self.fast is not None and nulls in self.no_nulls:
                return self.fast(buf, pos)
            values = [ABSENT] * self.ncols
            for k, (i, dec) in enumerate(self.plan):
                if nulls[k >> 3] & (1 << (k & 7)):
                    values[i] = None
                else:
                    values[i], pos = dec(buf, pos)
            return tuple(values), pos
        except (IndexError, ValueError, struct.error) as e:
            raise TruncatedEventError(f"row image of {self.tmap.qualified_name} is malformed: {e}") from None

    def read_partial_after(self, buf, pos: int, before: tuple):
        """A PARTIAL_UPDATE_ROWS after-image: value_options, partial bits, then the image.

        JSON columns flagged partial carry a list of diffs applied to the before-image value.
        """
        options, pos = read_lenenc(buf, pos)
        partial = set()
        if options & 1:
            jcols = self.tmap.json_columns
            nbytes = (len(jcols) + 7) >> 3
            bits = buf[pos:pos + nbytes]
            pos += nbytes
            partial = {c for k, c in enumerate(jcols) if bits[k >> 3] & (1 << (k & 7))}
        if not partial:
            return self.read(buf, pos)
        nb = self.null_bytes
        nulls = buf[pos:pos + nb]
        pos += nb
        values = [ABSENT] * self.ncols
        for k, (i, dec) in enumerate(self.plan):
            if nulls[k >> 3] & (1 << (k & 7)):
                values[i] = None
            elif i in partial:
                lb = self.tmap.columns[i].meta
                n = int.from_bytes(buf[pos:pos + lb], "little")
                start = pos + lb
                pos = start + n
                if pos > len(buf):
                    raise TruncatedEventError("JSON diff runs past the end of the event")
                values[i] = apply_json_diffs(before[i], read_json_diffs(buf, start, n))
            else:
                values[i], pos = dec(buf, pos)
        return tuple(values), pos


def _rows_reader(tmap, use_c: bool, kind: str, present1, present2, partial: bool):
    """A function ``(data, pos) -> rows`` for one shape of rows event (kept in RowPlans.readers).

    PARTIAL_UPDATE_ROWS images (JSON diffs) always take the Python path.
    """
    plans = tmap.row_plans
    update = kind == "update"
    if use_c and not partial:
        return _c_rows_reader(tmap, update, present1, present2)
    r1 = plans.image_reader(present1)
    if not update:
        generic = _image_loop(r1.read, tmap)
    else:
        r2 = r1 if present2 == present1 else plans.image_reader(present2)
        generic = _update_images(r1, r2, partial)
    if not (r1.full and not partial and (not update or present2 == present1)):
        return generic
    # Every column in every image: one generated loop over the whole event.
    read_all = plans.batch_reader(update)
    slow = r1.read
    name = tmap.qualified_name

    def read_full(data, pos):
        if type(data) is not bytes:
            return generic(data, pos)
        end = len(data)
        rows = []
        try:
            pos = read_all(data, pos, end, rows, slow)
        except TruncatedEventError:
            raise
        except (IndexError, ValueError, struct.error) as e:
            raise TruncatedEventError(f"row image of {name} is malformed: {e}") from None
        if pos > end:
            raise TruncatedEventError(f"row image of {name} runs past the end of the event")
        return rows
    return read_full


def _check_image_end(start: int, pos: int, end: int, tmap) -> None:
    """An image must take bytes and end inside the event: a value decoder that slices past the
    end reads short bytes without an IndexError, and an image of no columns would loop."""
    if pos > end:
        raise TruncatedEventError(f"row image of {tmap.qualified_name} runs past the end of the "
                                  f"event")
    if pos <= start:
        raise TruncatedEventError(f"rows event of {tmap.qualified_name} has an image of no bytes "
                                  f"(no columns): the event is malformed")


def _image_loop(read_row, tmap):
    """``(data, pos) -> rows``: *read_row* ``(data, pos) -> (row, pos)`` until the end, each row
    checked to take bytes and to end inside the event."""
    def read_rows(data, pos):
        end = len(data)
        rows = []
        while pos < end:
            start = pos
            row, pos = read_row(data, pos)
            if pos > end or pos <= start:
                _check_image_end(start, pos, end, tmap)
            rows.append(row)
        return rows
    return read_rows


def _update_images(r1: ImageReader, r2: ImageReader, partial: bool):
    read1, read2, read_partial = r1.read, r2.read, r2.read_partial_after

    def read_pair(data, pos):
        before, pos = read1(data, pos)
        if partial:
            after, pos = read_partial(data, pos, before)
        else:
            after, pos = read2(data, pos)
        return (before, after), pos
    return _image_loop(read_pair, r1.tmap)


def _c_rows_reader(tmap, update: bool, present1, present2):
    """``(data, pos) -> rows`` through cdc.rows._rowdecode, for any column-presence bitmaps."""
    plans = tmap.row_plans
    p1 = plans.c_plan(present1)
    p2 = None
    if update:
        p2 = p1 if present2 == present1 else plans.c_plan(present2)
    decode = rowdecode.decode_rows
    name = tmap.qualified_name

    def read_c(data, pos):
        try:
            return decode(data, pos, p1, p2)
        except TruncatedEventError:
            raise
        except (IndexError, ValueError, struct.error) as e:
            raise TruncatedEventError(f"row image of {name} is malformed: {e}") from None
    return read_c
