"""MySQL's binary DECIMAL (NEWDECIMAL): its byte layout and reading one value.

A DECIMAL(precision, scale) is stored big-endian in groups of up to 9 decimal digits: the
integer part's leftover digits, its 9-digit groups (4 bytes each), the fraction's 9-digit
groups, then the fraction's leftover digits (:data:`DIG2BYTES` bytes for n leftover digits).
The sign bit is the top bit of the first byte, inverted; negative values have every byte
inverted.  Row images (:mod:`cdc.values.types`), JSON opaque values
(:mod:`cdc.values.jsonb`) and USER_VAR events use this layout.
"""

from __future__ import annotations

from decimal import Decimal

from cdc.errors import TruncatedEventError

__all__ = ["DIG2BYTES", "decimal_size", "decimal_groups", "read_newdecimal"]

DIG2BYTES = (0, 1, 1, 2, 2, 3, 3, 4, 4, 4)
"""Bytes that hold n (0-9) decimal digits."""


def decimal_size(precision: int, scale: int) -> int:
    """The byte size of a binary DECIMAL(precision, scale)."""
    intg = precision - scale
    return (intg // 9) * 4 + DIG2BYTES[intg % 9] + (scale // 9) * 4 + DIG2BYTES[scale % 9]


def decimal_groups(precision: int, scale: int) -> list[tuple[int, int]]:
    """The (byte length, decimal digits) groups of a binary DECIMAL, in order: the integer
    part's leftover digits, its 9-digit groups, the fraction's 9-digit groups, its leftover."""
    intg = precision - scale
    groups = []
    if intg % 9:
        groups.append((DIG2BYTES[intg % 9], intg % 9))
    groups += [(4, 9)] * (intg // 9)
    groups += [(4, 9)] * (scale // 9)
    if scale % 9:
        groups.append((DIG2BYTES[scale % 9], scale % 9))
    return groups


def read_newdecimal(buf, pos: int, precision: int, scale: int) -> tuple[Decimal, int]:
    """MySQL's binary DECIMAL(precision, scale) at *pos*: (value, position after it).

    Raises :class:`~cdc.errors.TruncatedEventError` when the value runs past the end of *buf*.
    """
    size = decimal_size(precision, scale)
    end = pos + size
    if end > len(buf):
        raise TruncatedEventError("row image runs past the end of the event")
    raw = bytearray(buf[pos:end])
    negative = not (raw[0] & 0x80)
    raw[0] ^= 0x80
    if negative:
        raw = bytearray(b ^ 0xFF for b in raw)
    intg = precision - scale
    lead = DIG2BYTES[intg % 9]
    p = 0
    whole = int.from_bytes(raw[p:p + lead], "big") if lead else 0
    p += lead
    for _ in range(intg // 9):
        whole = whole * 1_000_000_000 + int.from_bytes(raw[p:p + 4], "big")
        p += 4
    frac_text = ""
    for _ in range(scale // 9):
        frac_text += "%09d" % int.from_bytes(raw[p:p + 4], "big")
        p += 4
    tail = scale % 9
    if tail:
        n = DIG2BYTES[tail]
        frac_text += "%0*d" % (tail, int.from_bytes(raw[p:p + n], "big"))
    text = ("-" if negative else "") + str(whole) + ("." + frac_text if frac_text else "")
    return Decimal(text), end
