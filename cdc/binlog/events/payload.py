"""Event payloads inside other framing: MySQL's type/length/value fields, MariaDB's compressed
events, and MySQL's TRANSACTION_PAYLOAD (a compressed transaction).
"""

from __future__ import annotations

import zlib

from cdc.binlog.constants import EventType
from cdc.binlog.events.base import Event, register
from cdc.binlog.wire import read_lenenc
from cdc.errors import CompressionError, TruncatedEventError


def tlv_fields(body, pos: int = 0) -> tuple[dict[int, bytes], int]:
    """MySQL's on-the-wire type/length/value fields (HEARTBEAT_V2, TRANSACTION_PAYLOAD)."""
    out: dict[int, bytes] = {}
    end = len(body)
    while pos < end:
        ftype, pos = read_lenenc(body, pos)
        if ftype == 0:  # header end mark
            break
        length, pos = read_lenenc(body, pos)
        if pos + length > end:
            raise TruncatedEventError("event field runs past the end of the event")
        out[ftype] = bytes(body[pos:pos + length])
        pos += length
    return out, pos


def maria_uncompress(data) -> bytes:
    """MariaDB's compressed-event payload: header byte, big-endian length, zlib stream."""
    if not data:
        raise CompressionError("compressed event has no payload")
    hdr = data[0]
    lenlen = hdr & 0x07
    if not hdr & 0x80 or (hdr >> 4) & 0x07 or lenlen == 0:
        raise CompressionError(f"unknown MariaDB compression header 0x{hdr:02x}")
    expected = int.from_bytes(data[1:1 + lenlen], "big")
    try:
        out = zlib.decompress(bytes(data[1 + lenlen:]))
    except zlib.error as e:
        raise CompressionError(f"MariaDB compressed event does not inflate: {e}") from None
    if len(out) != expected:
        raise CompressionError(f"MariaDB compressed event inflates to {len(out)} bytes, header "
                               f"says {expected}")
    return out


# --- TRANSACTION_PAYLOAD (MySQL 8.0.20+ binlog_transaction_compression) ---------------------------


class TransactionPayloadEvent(Event):
    """A compressed transaction; the parser yields the inner events right after this one."""

    __slots__ = ("compression", "payload_size", "uncompressed_size", "payload")
    _fields = ("compression", "payload_size", "uncompressed_size")
    ZSTD, NONE = 0, 255

    def uncompressed(self) -> bytes:
        if self.compression == self.NONE:
            return self.payload
        if self.compression != self.ZSTD:
            raise CompressionError(f"TRANSACTION_PAYLOAD uses unknown compression type "
                                   f"{self.compression}")
        import zstandard
        try:
            dobj = zstandard.ZstdDecompressor().decompressobj()
            out = dobj.decompress(self.payload)
        except zstandard.ZstdError as e:
            raise CompressionError(f"TRANSACTION_PAYLOAD does not decompress: {e}") from None
        if self.uncompressed_size is not None and len(out) != self.uncompressed_size:
            raise CompressionError(
                f"TRANSACTION_PAYLOAD decompresses to {len(out)} bytes, header says "
                f"{self.uncompressed_size}")
        return out


@register(EventType.TRANSACTION_PAYLOAD)
def _payload(h, body, ctx):
    ev = TransactionPayloadEvent(h)
    fields, p = tlv_fields(body)
    ev.payload_size = read_lenenc(fields[1], 0)[0] if 1 in fields else len(body) - p
    ev.compression = read_lenenc(fields[2], 0)[0] if 2 in fields else 0
    ev.uncompressed_size = read_lenenc(fields[3], 0)[0] if 3 in fields else None
    ev.payload = bytes(body[p:p + ev.payload_size])
    if len(ev.payload) != ev.payload_size:
        raise TruncatedEventError("TRANSACTION_PAYLOAD is shorter than its payload size")
    return ev
