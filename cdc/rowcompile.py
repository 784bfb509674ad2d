"""Per-table row readers generated once per table map (the hot path of row decoding).

For a row image that holds every column and no NULL (the common case), the generic reader
loops over per-column decoders. This module writes one straight-line function per table
instead: consecutive fixed-width integer/float columns are read by a single ``struct`` call,
short UTF-8 strings are sliced and decoded inline, and every other column calls its decoder
from the one type table. Values are identical to the generic path (the tests run both).
"""

from __future__ import annotations

import struct

from .charsets import codec_of
from .constants import ColumnType as T

_STRUCT_CODES = {T.TINY: "b", T.SHORT: "h", T.LONG: "i", T.LONGLONG: "q", T.FLOAT: "f",
                 T.DOUBLE: "d"}


def _struct_code(col) -> str | None:
    code = _STRUCT_CODES.get(col.real_type)
    if code is None:
        return None
    if col.unsigned and code in "bhiq":
        code = code.upper()
    return code


def _inline_utf8(col) -> int | None:
    """Length-prefix size for VARCHAR/CHAR columns in UTF-8 that can be decoded inline."""
    if codec_of(col.collation) != "utf-8":
        return None
    if col.real_type in (T.VARCHAR, T.VAR_STRING):
        return 1 if col.meta < 256 else 2
    if col.real_type == T.STRING:
        return 1 if col.meta[1] < 256 else 2
    return None


def compile_full_row_reader(tmap, decoders):
    """A function ``(buf, pos) -> (values tuple, new pos)`` for a full image without NULLs.

    *buf* must be ``bytes``. Raises IndexError/struct.error/ValueError on short input, which
    the caller turns into TruncatedEventError (it also checks the final position).
    """
    lines = ["def read(buf, pos):"]
    env: dict = {}
    names = []
    run: list[tuple[int, str]] = []

    def flush_run():
        if not run:
            return
        fmt = "<" + "".join(code for _, code in run)
        sname = f"S{run[0][0]}"
        env[sname] = struct.Struct(fmt).unpack_from
        targets = ", ".join(f"v{i}" for i, _ in run)
        lines.append(f"    {targets}, = {sname}(buf, pos)")
        lines.append(f"    pos += {struct.calcsize(fmt)}")
        run.clear()

    for col, dec in zip(tmap.columns, decoders):
        i = col.index
        names.append(f"v{i}")
        code = _struct_code(col)
        if code is not None:
            run.append((i, code))
            continue
        flush_run()
        lb = _inline_utf8(col)
        if lb == 1:
            lines.append(f"    n = buf[pos]; pos += 1")
            lines.append(f"    v{i} = buf[pos:pos + n].decode('utf-8', 'surrogateescape'); pos += n")
        elif lb == 2:
            lines.append(f"    n = buf[pos] | (buf[pos + 1] << 8); pos += 2")
            lines.append(f"    v{i} = buf[pos:pos + n].decode('utf-8', 'surrogateescape'); pos += n")
        else:
            env[f"D{i}"] = dec
            lines.append(f"    v{i}, pos = D{i}(buf, pos)")
    flush_run()
    lines.append(f"    if pos > len(buf):")
    lines.append(f"        raise IndexError('row runs past the end of the event')")
    lines.append(f"    return ({', '.join(names)},), pos")
    source = "\n".join(lines)
    exec(compile(source, f"<row reader {tmap.qualified_name}>", "exec"), env)
    read = env["read"]
    read.source = source
    return read
