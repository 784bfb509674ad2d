"""Little-endian primitives shared by the binlog format and the client protocol."""

from __future__ import annotations

import struct

from cdc.errors import TruncatedEventError

U16 = struct.Struct("<H")
U32 = struct.Struct("<I")
U64 = struct.Struct("<Q")
I64 = struct.Struct("<q")


def read_lenenc(buf, pos: int) -> tuple[int, int]:
    """MySQL length-encoded integer (net_field_length). Returns (value, new_pos).

    Every length-encoded integer of the binlog is a count or a length: 0xfb (a NULL in the
    client protocol's result rows) cannot occur there and raises
    :class:`~cdc.errors.TruncatedEventError` like any other corrupt prefix."""
    try:
        first = buf[pos]
    except IndexError:
        raise TruncatedEventError("length-encoded integer runs past the end of the data") from None
    if first < 0xFB:
        return first, pos + 1
    if first == 0xFB:
        raise TruncatedEventError("length-encoded integer is 0xfb (NULL) where a count or length "
                                  "is needed: the event is corrupt")
    size = {0xFC: 2, 0xFD: 3, 0xFE: 8}.get(first)
    if size is None:
        raise TruncatedEventError(f"invalid length-encoded integer prefix 0x{first:02x}")
    end = pos + 1 + size
    if end > len(buf):
        raise TruncatedEventError("length-encoded integer runs past the end of the data")
    return int.from_bytes(buf[pos + 1:end], "little"), end


def read_lenenc_bytes(buf, pos: int) -> tuple[bytes, int]:
    """A length-encoded string: lenenc length then that many bytes."""
    length, pos = read_lenenc(buf, pos)
    end = pos + length
    if end > len(buf):
        raise TruncatedEventError("length-encoded string runs past the end of the data")
    return bytes(buf[pos:end]), end


def write_lenenc(value: int) -> bytes:
    if value < 0xFB:
        return bytes((value,))
    if value < 1 << 16:
        return b"\xfc" + value.to_bytes(2, "little")
    if value < 1 << 24:
        return b"\xfd" + value.to_bytes(3, "little")
    return b"\xfe" + value.to_bytes(8, "little")


def bits_set(bitmap: bytes, count: int) -> list[bool]:
    """The first *count* bits of a little-endian-within-byte bitmap, as booleans."""
    return [bool(bitmap[i >> 3] & (1 << (i & 7))) for i in range(count)]


def bits_set_msb(bitmap: bytes, count: int) -> list[bool]:
    """The first *count* bits of a most-significant-bit-first bitmap (table-map metadata)."""
    return [bool(bitmap[i >> 3] & (0x80 >> (i & 7))) for i in range(count)]
