"""``mysql::serialization`` variable-length integers (``libs/mysql/serialization/
variable_length_integers.h``): what GTID_TAGGED_LOG_EVENT bodies and the tag lengths of the
tagged GTID set encoding are made of."""

from __future__ import annotations

from cdc.errors import GtidError
from cdc.binlog.gtid.parts import Buffer


class ShortData(GtidError):
    """Bytes ended in the middle of a value (callers in this package re-raise it as
    truncation)."""


def read_varlen_unsigned(buf: Buffer, pos: int = 0, end: int | None = None,
                         *, max_value: int = (1 << 64) - 1) -> tuple[int, int]:
    """Read a ``mysql::serialization`` variable-length unsigned integer.

    The number of trailing one bits of the first byte, plus one, is the total byte count
    (1..9).  The first byte's remaining high bits hold the lowest bits of the value; the
    following bytes (little-endian) hold the rest, shifted left by ``8 - n`` (by 0 when n == 9).
    Mirrors ``read_varlen_bytes_unsigned`` in ``libs/mysql/serialization/variable_length_integers.h``.

    Returns ``(value, new_pos)``; raises :class:`GtidError` when the bytes end early or the value
    exceeds *max_value* (the C++ target type's maximum).
    """
    if end is None:
        end = len(buf)
    if pos >= end:
        raise ShortData("variable-length integer runs past the end of the data")
    first = buf[pos]
    n = 1
    b = first
    while b & 1 and n < 9:
        n += 1
        b >>= 1
    if pos + n > end:
        raise ShortData(
            f"variable-length integer needs {n} bytes but only {end - pos} remain")
    value = first >> n
    if n > 1:
        rest = int.from_bytes(buf[pos + 1:pos + n], "little")
        value |= rest << (0 if n == 9 else 8 - n)
    if value > max_value:
        raise GtidError(f"variable-length integer {value} exceeds its field's maximum {max_value}")
    return value, pos + n


def read_varlen_signed(buf: Buffer, pos: int = 0, end: int | None = None) -> tuple[int, int]:
    """Read a ``mysql::serialization`` variable-length signed (int64) integer.

    The unsigned value's least significant bit is the sign; the rest is ``x`` for ``x >= 0``
    and ``-(x + 1)`` for negatives (``read_varlen_bytes_signed``).
    """
    raw, pos = read_varlen_unsigned(buf, pos, end)
    mag = raw >> 1
    return (~mag if raw & 1 else mag), pos


def write_varlen_unsigned(value: int) -> bytes:
    """Encode like ``write_varlen_bytes_unsigned`` (used here only for tag lengths)."""
    if value < 0 or value >= 1 << 64:
        raise GtidError(f"cannot encode {value} as an unsigned 64-bit integer")
    n = ((value.bit_length() * 575) >> 12) + 1
    first = ((1 << (n - 1)) - 1) | ((value << n) & 0xFF)
    if n == 1:
        return bytes((first,))
    rest = value >> (0 if n == 9 else 8 - n)
    return bytes((first,)) + (rest & ((1 << (8 * (n - 1))) - 1)).to_bytes(n - 1, "little")
