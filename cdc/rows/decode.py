"""Row images of WRITE/UPDATE/DELETE/PARTIAL_UPDATE rows events, decoded with a table map.

Two decoders give identical values: the compiled ``cdc.rows._rowdecode`` (optional C extension,
used when built) and the pure-Python one (generated per-table readers, :mod:`cdc.rows.compile`,
and the per-column decoders of :mod:`cdc.values.types`). ``BINLOG_CDC_DECODER`` = ``auto``
(default), ``c`` or ``python`` chooses at import; :func:`set_decoder` at run time,
:func:`active_decoder` tells which one runs.
"""

from __future__ import annotations

import os
import struct

from cdc.values.charsets import BINARY_COLLATION, codec_of
from cdc.values.types import ABSENT
from cdc.binlog.constants import ColumnType as T
from cdc.errors import ConfigurationError, TruncatedEventError

try:
    from cdc.rows import _rowdecode
except ImportError as _e:     # not built (no C compiler at install time): pure Python
    _rowdecode = None
    _C_MISSING = f"{type(_e).__name__}: {_e}"
else:
    _C_MISSING = None

DECODER_ENV = "BINLOG_CDC_DECODER"
_use_c = False
_generation = 0      # bumped by set_decoder(): plans built before a switch are rebuilt


def set_decoder(name: str) -> str:
    """Choose the row decoder: ``"auto"`` (the compiled one when built), ``"c"`` or
    ``"python"``; returns the active one. Decoding plans built before the switch are not reused."""
    global _use_c, _generation
    choice = (name or "auto").strip().lower()
    if choice not in ("auto", "c", "python"):
        raise ConfigurationError(f"{DECODER_ENV}={name!r}: expected auto, c or python")
    if choice == "c" and _rowdecode is None:
        raise ConfigurationError(
            f"{DECODER_ENV}=c but the compiled row decoder cdc.rows._rowdecode is not built "
            f"({_C_MISSING}); reinstall binlog-cdc with a C compiler and the Python headers "
            f"(pip install -e .), or use {DECODER_ENV}=auto")
    _use_c = choice == "c" or (choice == "auto" and _rowdecode is not None)
    _generation += 1
    return active_decoder()


def active_decoder() -> str:
    """``"c"`` (cdc.rows._rowdecode) or ``"python"``: the decoder rows events use now."""
    return "c" if _use_c else "python"


def c_decoder_available() -> bool:
    return _rowdecode is not None


set_decoder(os.environ.get(DECODER_ENV, "auto"))


_PRESENT_CACHE: dict = {}


def present_columns(bitmap: bytes, ncols: int) -> tuple[int, ...]:
    key = (bitmap, ncols)
    hit = _PRESENT_CACHE.get(key)
    if hit is None:
        hit = tuple(i for i in range(ncols) if bitmap[i >> 3] & (1 << (i & 7)))
        if len(_PRESENT_CACHE) >= 1024:
            _PRESENT_CACHE.clear()
        _PRESENT_CACHE[key] = hit
    return hit


def _plan(tmap, present: tuple[int, ...]):
    """(column index, decoder) for the columns of one image, cached on the table map."""
    decoders = tmap.decoders
    return [(i, decoders[i]) for i in present]


class ImageReader:
    """Decodes the row images of one rows event (one column-presence bitmap per image)."""

    __slots__ = ("ncols", "plan", "null_bytes", "full", "json_cols", "tmap", "fast", "no_nulls")

    def __init__(self, tmap, present: tuple[int, ...]):
        self.tmap = tmap
        self.ncols = len(tmap.columns)
        self.plan = _plan(tmap, present)
        self.null_bytes = (len(present) + 7) >> 3
        self.full = len(present) == self.ncols
        self.fast = tmap.full_row_reader if self.full else None
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
        from cdc.values.jsonb import apply_json_diffs, read_json_diffs
        from cdc.binlog.wire import read_lenenc

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


def _image_reader(tmap, present: tuple[int, ...]) -> ImageReader:
    """The ImageReader for *present*, kept with the table map's generated reader."""
    cache = tmap.full_row_reader.image_readers
    r = cache.get(present)
    if r is None:
        r = cache[present] = ImageReader(tmap, present)
    return r


def _batch_reader(tmap, update: bool):
    cache = tmap.full_row_reader.batch_readers
    r = cache.get(update)
    if r is None:
        from cdc.rows.compile import compile_rows_reader
        r = cache[update] = compile_rows_reader(tmap, tmap.decoders, update)
    return r


def decode_images(tmap, kind: str, data, pos: int, present1: tuple[int, ...],
                  present2: tuple[int, ...] | None, partial: bool = False):
    """All rows of one rows event body from *pos*.

    Returns a list of tuples (insert/delete) or of (before, after) tuple pairs (update).
    """
    plans = tmap.full_row_reader.plans
    key = (kind, present1, present2, partial)
    hit = plans.get(key)
    if hit is None or hit[0] != _generation:
        hit = plans[key] = (_generation, _rows_plan(tmap, kind, present1, present2, partial))
    return hit[1](data, pos)


def _rows_plan(tmap, kind: str, present1, present2, partial: bool):
    """A function ``(data, pos) -> rows`` for one shape of rows event, built once per table map."""
    if _use_c and not partial:
        return _c_rows_plan(tmap, kind == "update", present1, present2)
    r1 = _image_reader(tmap, present1)
    update = kind == "update"
    if not update:
        generic = _image_loop(r1.read, tmap)
    else:
        r2 = r1 if present2 == present1 else _image_reader(tmap, present2)
        generic = _update_images(r1, r2, partial)
    if not (r1.full and not partial and (not update or present2 == present1)):
        return generic
    # Every column in every image: one generated loop over the whole event.
    read_all = _batch_reader(tmap, update)
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


# --- the compiled decoder (cdc/rows/_rowdecode.c) -----------------------------------------------------

def _c_rows_plan(tmap, update: bool, present1, present2):
    """``(data, pos) -> rows`` through cdc.rows._rowdecode, for any column-presence bitmaps.

    PARTIAL_UPDATE_ROWS images (JSON diffs) stay on the Python path.
    """
    p1 = _c_image_plan(tmap, present1)
    p2 = None
    if update:
        p2 = p1 if present2 == present1 else _c_image_plan(tmap, present2)
    decode = _rowdecode.decode_rows
    name = tmap.qualified_name

    def read_c(data, pos):
        try:
            return decode(data, pos, p1, p2)
        except TruncatedEventError:
            raise
        except (IndexError, ValueError, struct.error) as e:
            raise TruncatedEventError(f"row image of {name} is malformed: {e}") from None
    return read_c


def _c_image_plan(tmap, present: tuple[int, ...]):
    """The cdc.rows._rowdecode.Plan of one image shape, kept with the table map's batch readers."""
    cache = tmap.full_row_reader.batch_readers
    key = ("c", present)
    plan = cache.get(key)
    if plan is None:
        decoders, columns = tmap.decoders, tmap.columns
        specs = tuple((i, *c_column_spec(columns[i]), decoders[i]) for i in present)
        plan = cache[key] = _rowdecode.Plan(len(columns), specs, ABSENT)
    return plan


_C_INTS = {T.TINY: ("I8", "U8"), T.SHORT: ("I16", "U16"), T.INT24: ("I24", "U24"),
           T.LONG: ("I32", "U32"), T.LONGLONG: ("I64", "U64")}
_C_FIXED = {T.FLOAT: "FLOAT", T.DOUBLE: "DOUBLE", T.YEAR: "YEAR", T.DATE: "DATE",
            T.NEWDATE: "DATE"}
_C_FRACTIONAL = {T.DATETIME2: "DATETIME2", T.TIMESTAMP2: "TIMESTAMP2", T.TIME2: "TIME2"}
_C_BLOBS = (T.TINY_BLOB, T.BLOB, T.MEDIUM_BLOB, T.LONG_BLOB)


def c_column_spec(col) -> tuple[str | int, int, int]:
    """(kind, a, b) of one column for cdc.rows._rowdecode (kind FALLBACK: its Python decoder).

    Mirrors the decoders of cdc.values.types; anything else -- other character sets, ENUM/SET,
    MySQL JSON, GEOMETRY, VECTOR, old temporal types, odd metadata -- keeps its decoder.
    """
    kind, a, b = _c_kind(col)
    return getattr(_rowdecode, kind), a, b


def _c_kind(col) -> tuple[str, int, int]:
    rt, meta = col.real_type, col.meta
    if rt in _C_INTS:
        return _C_INTS[rt][bool(col.unsigned)], 0, 0
    if rt in _C_FIXED:
        return _C_FIXED[rt], 0, 0
    if rt in _C_FRACTIONAL:
        fsp = meta or 0
        return (_C_FRACTIONAL[rt], fsp, 0) if 0 <= fsp <= 6 else ("FALLBACK", 0, 0)
    if rt == T.NEWDECIMAL:
        precision, scale = meta
        if 1 <= precision <= 65 and 0 <= scale <= precision:
            return "DECIMAL", precision, scale
        return "FALLBACK", 0, 0
    if rt == T.BIT:
        bits, nbytes = meta
        size = nbytes + (1 if bits else 0)
        return ("BIT", size, 0) if size <= 8 else ("FALLBACK", 0, 0)
    if rt in (T.VARCHAR, T.VAR_STRING, T.STRING) or rt in _C_BLOBS:
        if rt in _C_BLOBS:
            lb = meta
            if lb not in (1, 2, 3, 4):
                return "FALLBACK", 0, 0
        elif rt == T.STRING:
            if not meta:
                return "FALLBACK", 0, 0
            lb = 1 if meta[1] < 256 else 2
        else:
            lb = 1 if meta < 256 else 2
        codec = codec_of(col.collation if col.collation is not None else BINARY_COLLATION)
        if codec == "utf-8":
            return "STR", lb, 0
        if codec is None:
            # BINARY(n): the binlog strips trailing \0, the decoder pads back to n bytes
            return "BYTES", lb, meta[1] if rt == T.STRING else 0
        return "FALLBACK", 0, 0
    return "FALLBACK", 0, 0
