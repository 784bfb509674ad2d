"""Per-table row readers generated once per table map (the hot path of row decoding).

For a row image that holds every column and no NULL (the common case), the generic reader
loops over per-column decoders. This module writes straight-line Python per table instead:

* consecutive fixed-width numbers (a ``struct`` code in their layout) -- and the length prefix
  of a following string -- are read by a single ``struct`` call;
* ``STR`` (UTF-8) and unpadded ``BYTES`` strings (VARCHAR/CHAR/TEXT/BLOB) are sliced and
  decoded inline (invalid UTF-8: :class:`~cdc.values.kinds.InvalidText`, as the decoders do);
* ``DECIMAL`` up to 18 digits and ``DATETIME2`` are decoded inline (one ``int.from_bytes`` each);
* every other column calls its decoder from the one type table (:mod:`cdc.values.types`).

What a column is comes from its binary layout in the type table
(:func:`cdc.values.types.column_layout`), the records the compiled decoder's plans are built
from too.

Two kinds of function come out of one generated image body:

* :func:`compile_full_row_reader` -- ``(buf, pos) -> (values, pos)`` for one image whose NULL
  bitmap the caller already checked;
* :func:`compile_rows_reader` -- one loop over every row image of a rows event (insert/delete
  images, or before/after pairs of an update), checking each NULL bitmap itself and handing
  rows with NULLs to the generic reader, so the common row costs no Python call at all.

Values are identical to the generic path (tests/live/test_rowcompile.py runs both on the same
events).  Generated code is cached per table shape (a table map is logged again with every
transaction); the readers of one table map are kept in its ``tmap.row_plans``
(:class:`cdc.rows.decode.RowPlans`).
"""

from __future__ import annotations

import datetime as _dt
import re
import struct
from decimal import Decimal

from cdc.cache import BoundedCache
from cdc.values.decimal import decimal_groups
from cdc.values.kinds import InvalidText
from cdc.values.temporal import fraction_bytes, make_datetime
from cdc.values.types import Layout, column_layout

_LEN_CODES = {1: "B", 2: "H", 4: "I"}
_BEFORE_NAMES = re.compile(r"\b([vr])(\d+)\b")


def _inline_string(layout: Layout):
    """(length-prefix size, text codec or None for bytes) for strings sliced inline, else None.

    ``STR`` (UTF-8) and ``BYTES`` without padding; BINARY(n) (padded back to n bytes) and other
    character sets (``FALLBACK``) keep their decoder.
    """
    if layout.kind == "STR":
        return layout.a, "utf-8"
    if layout.kind == "BYTES" and not layout.b:
        return layout.a, None
    return None


def _decimal_lines(layout: Layout, i: int, env: dict, ind: str) -> tuple[int, list[str]] | None:
    precision, scale = layout.a, layout.b
    if precision > 18:
        return None
    size = layout.size
    groups = decimal_groups(precision, scale)
    nbits = size * 8
    top = 1 << (nbits - 1)
    ones = (1 << nbits) - 1
    shift = nbits
    expr = None
    for n, d in groups:
        shift -= n * 8
        part = f"((r >> {shift}) & {(1 << (n * 8)) - 1})" if shift else f"(r & {(1 << (n * 8)) - 1})"
        expr = part if expr is None else f"({expr} * {10 ** d} + {part})"
    if expr is None:
        expr = "0"
    suffix = "E-%d" % scale
    env[f"P{i}"] = "%d" + suffix
    env[f"N{i}"] = "-%d" + suffix
    return size, [
        f"{ind}r = FB(r{i}, 'big')",
        f"{ind}if r & {top}:",
        f"{ind}    r ^= {top}; v{i} = DEC(P{i} % {expr})",
        f"{ind}else:",
        f"{ind}    r ^= {ones ^ top}; v{i} = DEC(N{i} % {expr})",
    ]


def _datetime2_lines(layout: Layout, i: int, ind: str) -> tuple[int, list[str]]:
    fsp = layout.a
    nfrac, mult = fraction_bytes(fsp)
    size = layout.size
    lines = [f"{ind}r = FB(r{i}, 'big')"]
    if nfrac:
        lines.append(f"{ind}p = (r >> {8 * nfrac}) - 0x8000000000; "
                     f"us = (r & {(1 << (8 * nfrac)) - 1})" + (f" * {mult}" if mult != 1 else ""))
    else:
        lines.append(f"{ind}p = r - 0x8000000000; us = 0")
    lines += [
        f"{ind}ymd = p >> 17; hms = p & 0x1FFFF; y, mo = divmod(ymd >> 5, 13)",
        f"{ind}try:",
        f"{ind}    v{i} = DT(y, mo, ymd & 31, hms >> 12, (hms >> 6) & 63, hms & 63, us)",
        f"{ind}except ValueError:",
        f"{ind}    v{i} = MKDT(y, mo, ymd & 31, hms >> 12, (hms >> 6) & 63, hms & 63, us, {fsp})",
    ]
    return size, lines


def _image_body(tmap, decoders, env: dict, ind: str, reuse: str | None = None) -> list[str]:
    """Lines decoding one full NULL-free image at ``pos`` (after its NULL bitmap) into
    ``v0..vN`` and leaving ``pos`` after it.

    *reuse*: the prefix of the before image's variables (update after-images): a DECIMAL or
    DATETIME whose raw bytes equal the before image's takes that (immutable) value as is.
    """
    lines: list[str] = []
    run: list[tuple[str, str]] = []   # (target, struct code)
    pending: list[str] = []           # conversions of raw bytes read by the current run

    def flush_run():
        if not run:
            return
        fmt = "<" + "".join(code for _, code in run)
        sname = f"S{len(env)}"
        env[sname] = struct.Struct(fmt).unpack_from
        targets = ", ".join(t for t, _ in run)
        lines.append(f"{ind}{targets}, = {sname}(buf, pos); pos += {struct.calcsize(fmt)}")
        lines.extend(pending)
        run.clear()
        pending.clear()

    for col, dec in zip(tmap.columns, decoders):
        i = col.index
        layout = column_layout(col)
        if layout.struct_code is not None:
            run.append((f"v{i}", layout.struct_code))
            continue
        s = _inline_string(layout)
        if s is not None:
            lb, codec = s
            if lb in _LEN_CODES:
                run.append(("n", _LEN_CODES[lb]))
                flush_run()
            else:
                flush_run()
                lines.append(f"{ind}n = FB(buf[pos:pos + {lb}], 'little'); pos += {lb}")
            if codec is None:
                lines.append(f"{ind}v{i} = buf[pos:pos + n]; pos += n")
            else:
                # invalid UTF-8 (sql_mode=''): the bytes as InvalidText (try costs nothing)
                lines += [f"{ind}try:",
                          f"{ind}    v{i} = buf[pos:pos + n].decode('utf-8')",
                          f"{ind}except UnicodeDecodeError:",
                          f"{ind}    v{i} = INVALID(buf[pos:pos + n])",
                          f"{ind}pos += n"]
            continue
        special = None
        cind = ind + "    " if reuse else ind
        if layout.kind == "DECIMAL":
            special = _decimal_lines(layout, i, env, cind)
        elif layout.kind == "DATETIME2":
            special = _datetime2_lines(layout, i, cind)
        if special is not None:
            # fixed size: the raw bytes join the struct run, converted after it
            size, conv = special
            run.append((f"r{i}", f"{size}s"))
            if reuse:
                pending.extend([f"{ind}if r{i} == {reuse}r{i}:", f"{ind}    v{i} = {reuse}v{i}",
                                f"{ind}else:"])
            pending.extend(conv)
        else:
            flush_run()
            env[f"D{i}"] = dec
            lines.append(f"{ind}v{i}, pos = D{i}(buf, pos)")
    flush_run()
    return lines


def _env() -> dict:
    return {"FB": int.from_bytes, "STR": str, "DEC": Decimal, "DT": _dt.datetime,
            "MKDT": make_datetime, "INVALID": InvalidText}


def _tuple(tmap) -> str:
    return "(" + ", ".join(f"v{c.index}" for c in tmap.columns) + ",)"


def _compile(source: str, env: dict, name: str, tmap):
    label = tmap.qualified_name.replace("\0", "\\0")   # a corrupt name may hold a NUL
    exec(compile(source, f"<{name} {label}>", "exec"), env)
    fn = env["read"]
    fn.source = source
    return fn


# Generated code per table shape: a table map is logged again with every transaction, and a new
# TableMap with the same columns must not pay for code generation again.
_SHAPE_CACHE = BoundedCache(512)


def _shape(tmap, kind: str):
    """Everything the generated code and the column decoders depend on."""
    return (kind, tmap.schema, tmap.table, tuple(
        (c.type, c.real_type, repr(c.meta), c.unsigned, c.collation, c.name,
         tuple(c.enum_values) if c.enum_values is not None else None,
         tuple(c.set_values) if c.set_values is not None else None, c.geometry_type,
         c.vector_dimensions) for c in tmap.columns))


def _cached(tmap, kind: str, build):
    return _SHAPE_CACHE.get_or_build(_shape(tmap, kind), build)


def compile_full_row_reader(tmap, decoders):
    """A function ``(buf, pos) -> (values tuple, new pos)`` for a full image without NULLs.

    *buf* must be ``bytes``. Raises IndexError/struct.error/ValueError on short input, which
    the caller turns into TruncatedEventError (it also checks the final position).
    The function is shared by table maps of the same shape.
    """
    return _cached(tmap, "full", lambda: _build_full_row_reader(tmap, decoders))


def _build_full_row_reader(tmap, decoders):
    env = _env()
    lines = ["def read(buf, pos):"]
    lines += _image_body(tmap, decoders, env, "    ")
    lines.append("    if pos > len(buf):")
    lines.append("        raise IndexError('row runs past the end of the event')")
    lines.append(f"    return {_tuple(tmap)}, pos")
    return _compile("\n".join(lines), env, "row reader", tmap)


def _no_null_values(nb: int, npresent: int):
    """The NULL bitmaps meaning "no NULL": all zero, or with the unused trailing bits set."""
    pad = (0xFF << (npresent & 7)) & 0xFF if npresent & 7 else 0
    if nb == 1:
        return frozenset({0, pad})
    return frozenset({bytes(nb), bytes(nb - 1) + bytes((pad,))})


def compile_rows_reader(tmap, decoders, update: bool):
    """A function ``(buf, pos, end, rows, slow) -> pos`` appending every row of one rows event.

    Both images of an update (and the one image of an insert/delete) must hold every column.
    Each image whose NULL bitmap shows a NULL is read with ``slow(buf, pos)`` (the generic
    reader, which checks the bitmap again). The caller checks the returned position against
    the end and turns IndexError/struct.error/ValueError into TruncatedEventError.
    """
    return _cached(tmap, "update" if update else "rows",
                   lambda: _build_rows_reader(tmap, decoders, update))


def _build_rows_reader(tmap, decoders, update: bool):
    ncols = len(tmap.columns)
    nb = (ncols + 7) >> 3
    env = _env()
    env["NONULL"] = _no_null_values(nb, ncols)
    body = _image_body(tmap, decoders, env, "            ")
    tup = _tuple(tmap)
    check = "buf[pos]" if nb == 1 else f"buf[pos:pos + {nb}]"

    def image(target: str, body: list[str], tup: str) -> list[str]:
        return [f"        if {check} in NONULL:",
                f"            pos += {nb}",
                *body,
                f"            {target} = {tup}",
                "        else:",
                f"            {target}, pos = slow(buf, pos)"]

    lines = ["def read(buf, pos, end, rows, slow):",
             "    append = rows.append",
             "    while pos < end:"]
    if update:
        # The before image's variables are renamed bv*/br*; the after image takes the before
        # value of a DECIMAL/DATETIME whose raw bytes are the same (values are immutable and a
        # pure function of the bytes, so even bytes left from an earlier row are safe).
        before = [_BEFORE_NAMES.sub(r"b\1\2", line) for line in body]
        raws = sorted({m for line in before for m in re.findall(r"\bbr\d+\b", line)})
        if raws:
            lines.insert(1, f"    {' = '.join(raws)} = None")
        after = _image_body(tmap, decoders, env, "            ", reuse="b")
        lines += image("b", before, _BEFORE_NAMES.sub(r"b\1\2", tup))
        lines += image("a", after, tup)
        lines.append("        append((b, a))")
    else:
        lines += image("row", body, tup)
        lines.append("        append(row)")
    lines.append("    return pos")
    return _compile("\n".join(lines), env, "rows reader", tmap)
