"""cdc.snapshot.textrows without a server: the generated row parser reads every length coding
of the text protocol (one byte, 0xFC, 0xFD, 0xFE, NULL 0xFB) as PyMySQL does (the live tests
compare whole results: tests/live/test_snapshot_values_live.py, test_snapshot_reader_clients.py).
"""

from __future__ import annotations

import pytest
from pymysql.protocol import MysqlPacket

from cdc.snapshot.textrows import row_parser


def _coded(v: bytes | None) -> bytes:
    if v is None:
        return b"\xfb"
    n = len(v)
    if n < 251:
        return bytes([n]) + v
    if n < 1 << 16:
        return b"\xfc" + n.to_bytes(2, "little") + v
    if n < 1 << 24:
        return b"\xfd" + n.to_bytes(3, "little") + v
    return b"\xfe" + n.to_bytes(8, "little") + v


@pytest.mark.parametrize("values", [
    (b"1",), (None,), (b"",), (b"a" * 250, b"b" * 251, None, b""),
    (b"x" * 65535, b"y" * 65536, b"z" * 70000), (b"q" * (1 << 24),),
    (None, None, b"-12.50", b"2024-01-02 03:04:05.123"),
])
def test_row_parser_reads_every_length_coding(values):
    payload = b"".join(map(_coded, values))
    buf = b"junk" + payload + b"next"
    row, end = row_parser(len(values))(buf, 4)
    assert row == values and end == 4 + len(payload)
    # PyMySQL's own reading of the same packet
    packet = MysqlPacket(payload, "utf8")
    assert tuple(packet.read_length_coded_string() for _ in values) == row
