"""Per-table row readers generated once per table map (the hot path of row decoding).

For a row image that holds every column and no NULL (the common case), the generic reader
loops over per-column decoders. This module writes straight-line Python per table instead:

* consecutive fixed-width integer/float columns -- and the length prefix of a following
  string -- are read by a single ``struct`` call;
* UTF-8 and binary VARCHAR/CHAR/TEXT/BLOB values are sliced and decoded inline;
* DECIMAL up to 18 digits and DATETIME(n) are decoded inline (one ``int.from_bytes`` each);
* every other column calls its decoder from the one type table (:mod:`cdc.values.types`).

Two kinds of function come out of one generated image body:

* :func:`compile_full_row_reader` -- ``(buf, pos) -> (values, pos)`` for one image whose NULL
  bitmap the caller already checked;
* :func:`compile_rows_reader` -- one loop over every row image of a rows event (insert/delete
  images, or before/after pairs of an update), checking each NULL bitmap itself and handing
  rows with NULLs to the generic reader, so the common row costs no Python call at all.

Values are identical to the generic path (tests/test_rowcompile.py runs both on the same events).
"""

from __future__ import annotations

import datetime as _dt
import re
import struct
import types
from decimal import Decimal

from cdc.cache import BoundedCache
from cdc.values.charsets import codec_of
from cdc.values.types import _frac_reader, _make_datetime, decimal_groups, decimal_size
from cdc.binlog.constants import ColumnType as T

_STRUCT_CODES = {T.TINY: "b", T.SHORT: "h", T.LONG: "i", T.LONGLONG: "q", T.FLOAT: "f",
                 T.DOUBLE: "d"}
_LEN_CODES = {1: "B", 2: "H", 4: "I"}
_BLOBS = (T.TINY_BLOB, T.BLOB, T.MEDIUM_BLOB, T.LONG_BLOB)
_BEFORE_NAMES = re.compile(r"\b([vr])(\d+)\b")


def _struct_code(col) -> str | None:
    code = _STRUCT_CODES.get(col.real_type)
    if code is None:
        return None
    if col.unsigned and code in "bhiq":
        code = code.upper()
    return code


def _inline_string(col):
    """(length-prefix size, text codec or None for bytes) for strings sliced inline, else None.

    VARCHAR/CHAR/TEXT in UTF-8 and VARBINARY/BLOB; BINARY(n) (padded back) and other character
    sets keep their decoder.
    """
    codec = codec_of(col.collation)
    if codec not in ("utf-8", None):
        return None
    rt = col.real_type
    if rt in (T.VARCHAR, T.VAR_STRING):
        lb = 1 if col.meta < 256 else 2
    elif rt == T.STRING:
        if codec is None:
            return None        # BINARY(n): the decoder pads the value back to n bytes
        lb = 1 if col.meta[1] < 256 else 2
    elif rt in _BLOBS:
        lb = col.meta
    else:
        return None
    if codec is None and col.collation is None:
        return None            # unknown collation: the decoder's own rules apply
    return lb, codec


def _decimal_lines(col, i: int, env: dict, ind: str) -> list[str] | None:
    precision, scale = col.meta
    if precision > 18:
        return None
    size = decimal_size(precision, scale)
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


def _datetime2_lines(col, i: int, ind: str) -> list[str]:
    fsp = col.meta or 0
    nfrac, mult = _frac_reader(fsp)
    size = 5 + nfrac
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
        code = _struct_code(col)
        if code is not None:
            run.append((f"v{i}", code))
            continue
        s = _inline_string(col)
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
                lines.append(f"{ind}v{i} = buf[pos:pos + n].decode('utf-8', 'surrogateescape'); "
                             f"pos += n")
            continue
        special = None
        cind = ind + "    " if reuse else ind
        if col.real_type == T.NEWDECIMAL:
            special = _decimal_lines(col, i, env, cind)
        elif col.real_type == T.DATETIME2:
            special = _datetime2_lines(col, i, cind)
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
            "MKDT": _make_datetime}


def _tuple(tmap) -> str:
    return "(" + ", ".join(f"v{c.index}" for c in tmap.columns) + ",)"


def _compile(source: str, env: dict, name: str, tmap):
    exec(compile(source, f"<{name} {tmap.qualified_name}>", "exec"), env)
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
    The generated code is shared by table maps of the same shape; the returned function is
    new per table map (it carries that table map's caches, see :mod:`cdc.rows.decode`).
    """
    code = _cached(tmap, "full", lambda: _build_full_row_reader(tmap, decoders))

    read = types.FunctionType(code.__code__, code.__globals__, "read")
    read.source = code.source
    read.batch_readers = {}     # caches of cdc.rows.decode, dropped with this reader
    read.image_readers = {}
    read.plans = {}
    return read


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
