"""Row images of WRITE/UPDATE/DELETE/PARTIAL_UPDATE rows events, decoded with a table map."""

from __future__ import annotations

import struct

from .coltypes import ABSENT
from .errors import TruncatedEventError


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
        from .jsonb import apply_json_diffs, read_json_diffs
        from .wire import read_lenenc

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
        from .rowcompile import compile_rows_reader
        r = cache[update] = compile_rows_reader(tmap, tmap.decoders, update)
    return r


def decode_images(tmap, kind: str, data, pos: int, present1: tuple[int, ...],
                  present2: tuple[int, ...] | None, partial: bool = False):
    """All rows of one rows event body from *pos*.

    Returns a list of tuples (insert/delete) or of (before, after) tuple pairs (update).
    """
    plans = tmap.full_row_reader.plans
    key = (kind, present1, present2, partial)
    fn = plans.get(key)
    if fn is None:
        fn = plans[key] = _rows_plan(tmap, kind, present1, present2, partial)
    return fn(data, pos)


def _rows_plan(tmap, kind: str, present1, present2, partial: bool):
    """A function ``(data, pos) -> rows`` for one shape of rows event, built once per table map."""
    r1 = _image_reader(tmap, present1)
    update = kind == "update"
    if not update:
        generic = _single_images(r1.read)
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


def _single_images(read):
    def read_images(data, pos):
        end = len(data)
        rows = []
        while pos < end:
            row, pos = read(data, pos)
            rows.append(row)
        return rows
    return read_images


def _update_images(r1: ImageReader, r2: ImageReader, partial: bool):
    read1, read2, read_partial = r1.read, r2.read, r2.read_partial_after

    def read_pairs(data, pos):
        end = len(data)
        rows = []
        while pos < end:
            before, pos = read1(data, pos)
            if partial:
                after, pos = read_partial(data, pos, before)
            else:
                after, pos = read2(data, pos)
            rows.append((before, after))
        return rows
    return read_pairs
