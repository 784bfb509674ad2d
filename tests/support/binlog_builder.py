"""Byte-exact binlog event builders for tests, written from the format documentation
(../shared/seeds/004: v4 header = timestamp 4, type 1, server_id 4, size 4, log_pos 4, flags 2;
CRC32 of everything before it, little-endian, when the FDE says CRC32)."""

from __future__ import annotations

import struct
import zlib

MAGIC = b"\xfebin"

# The FORMAT_DESCRIPTION_EVENT of MySQL 8.0.20, copied byte for byte from the seed's hex dump
# (000_f233fdbe3152a954.txt, offsets 0x04-0x7c): 121 bytes, CRC32 63 c8 ff 8b.
FDE_8020 = bytes.fromhex(
    "8777d45e0f0100000079000000" "7d000000" "0000" "0400" + "382e302e3230".ljust(100, "0")
    + "8777d45e" "13"
    "000d0008000000000400040000006100041a08000000080808020000000a0a0a2a2a001234000a28"
    "01" "63c8ff8b")


def event(type_code: int, body: bytes, *, timestamp: int = 1700000000, server_id: int = 1,
          log_pos: int = 0, flags: int = 0, checksum: bool = True) -> bytes:
    size = 19 + len(body) + (4 if checksum else 0)
    raw = struct.pack("<IBIIIH", timestamp, type_code, server_id, size, log_pos, flags) + body
    if checksum:
        raw += struct.pack("<I", zlib.crc32(raw))
    return raw


def binlog_file(events: list[bytes]) -> bytes:
    """A binlog file: magic + events, with log_pos fields rewritten to the real offsets and the
    CRC32s recomputed (events must carry a checksum)."""
    out = bytearray(MAGIC)
    for ev in events:
        end = len(out) + len(ev)
        raw = bytearray(ev)
        raw[13:17] = struct.pack("<I", end)
        raw[-4:] = struct.pack("<I", zlib.crc32(bytes(raw[:-4])))
        out += raw
    return bytes(out)


def lenenc(n: int) -> bytes:
    if n < 251:
        return bytes((n,))
    if n < 1 << 16:
        return b"\xfc" + n.to_bytes(2, "little")
    if n < 1 << 24:
        return b"\xfd" + n.to_bytes(3, "little")
    return b"\xfe" + n.to_bytes(8, "little")


def table_map_body(table_id: int, schema: str, table: str, types: bytes, meta: bytes,
                   nullable: bytes, optional: bytes = b"") -> bytes:
    s, t = schema.encode(), table.encode()
    return (table_id.to_bytes(6, "little") + b"\x01\x00" + bytes((len(s),)) + s + b"\0"
            + bytes((len(t),)) + t + b"\0" + lenenc(len(types)) + types + lenenc(len(meta)) + meta
            + nullable + optional)


def rows_v2_body(table_id: int, ncols: int, rows: bytes, *, flags: int = 1,
                 update: bool = False) -> bytes:
    bitmap = ((1 << ncols) - 1).to_bytes((ncols + 7) // 8, "little")
    return (table_id.to_bytes(6, "little") + struct.pack("<H", flags) + b"\x02\x00"
            + lenenc(ncols) + bitmap + (bitmap if update else b"") + rows)


def query_body(query: str, schema: str = "", status: bytes = b"") -> bytes:
    s = schema.encode()
    return (struct.pack("<IIBHH", 7, 0, len(s), 0, len(status)) + status + s + b"\0"
            + query.encode())


def xid_body(xid: int) -> bytes:
    return struct.pack("<Q", xid)
