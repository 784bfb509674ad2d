"""Framing, chunking and damaged input: the parser raises a ParseError subclass, never yields a
wrong row, never hangs."""

import random
import struct
import zlib

import pytest
import zstandard

from support.binlog_builder import (FDE_8020, MAGIC, binlog_file, event, lenenc, query_body, rows_v2_body,
                            table_map_body, xid_body)
from cdc.binlog.constants import ChecksumAlg, EventType
from cdc.errors import (BadMagicError, ChecksumError, EncryptedBinlogError, ParseError,
                        TruncatedEventError, UnsupportedBinlogVersionError)
from cdc.binlog.events import RawEvent, TransactionPayloadEvent
from cdc.binlog.parser import BinlogParser, iter_events
from cdc.binlog.transactions import assemble


def _mysql8_transaction(n_rows=3, start_id=1):
    """TABLE_MAP (id INT, name VARCHAR(20) utf8mb4) + WRITE_ROWS v2 + XID, as MySQL 8 writes."""
    tmap = table_map_body(
        77, "shop", "items", bytes([3, 15]), struct.pack("<H", 80), b"\x02",
        optional=b"\x04" + lenenc(8) + lenenc(2) + b"id" + lenenc(4) + b"name"     # COLUMN_NAME
        + b"\x02" + lenenc(1) + lenenc(45))                                        # DEFAULT_CHARSET
    rows = b""
    for k in range(n_rows):
        name = f"item-{start_id + k}-é".encode()
        rows += b"\x00" + struct.pack("<i", start_id + k) + bytes((len(name),)) + name
    return [event(EventType.QUERY, query_body("BEGIN", "shop")),
            event(EventType.TABLE_MAP, tmap),
            event(EventType.WRITE_ROWS, rows_v2_body(77, 2, rows)),
            event(EventType.XID, xid_body(900 + start_id))]


def _expected_rows(n_rows=3, start_id=1):
    return [(start_id + k, f"item-{start_id + k}-é") for k in range(n_rows)]


def test_builder_file_decodes():
    data = binlog_file([FDE_8020, *_mysql8_transaction()])
    (tx,) = list(assemble(iter_events(data, file="binlog.000001")))
    assert [c.after for c in tx.changes()] == _expected_rows()
    assert tx.xid == 901 and tx.pos == 125 and tx.end_pos == len(data)
    assert tx.changes().__next__().columns == ["id", "name"]


@pytest.mark.parametrize("chunk", [1, 2, 7, 19, 64, 4096])
def test_any_chunking_gives_the_same_events(chunk):
    data = binlog_file([FDE_8020, *_mysql8_transaction(), *_mysql8_transaction(2, 10)])
    p = BinlogParser(file="f")
    seen = []
    for i in range(0, len(data), chunk):
        p.feed(data[i:i + chunk])
        seen += [(ev.type_code, ev.pos, ev.end_pos) for ev in p.events()]
    p.close()
    whole = [(ev.type_code, ev.pos, ev.end_pos) for ev in iter_events(data)]
    assert seen == whole and len(whole) == 9


def test_bad_magic():
    with pytest.raises(BadMagicError, match="not a binlog file"):
        list(iter_events(b"GIF89a" + FDE_8020))


def test_v1_and_v3_start_events_are_rejected_clearly():
    v3 = struct.pack("<IBIIIH", 1, 1, 1, 75, 79, 0) + struct.pack("<H", 3) + b"4.0.2".ljust(50, b"\0") \
        + struct.pack("<I", 1)
    with pytest.raises(UnsupportedBinlogVersionError, match=r"v3 \(MySQL 4.0.2-4.1\)"):
        list(iter_events(MAGIC + v3))
    v1 = struct.pack("<IBII", 1, 1, 1, 69) + struct.pack("<H", 1) + b"3.23.58".ljust(50, b"\0") \
        + struct.pack("<I", 1)
    with pytest.raises(UnsupportedBinlogVersionError, match=r"v1 \(MySQL 3.23\)"):
        list(iter_events(MAGIC + v1))


def test_every_single_bit_flip_is_detected():
    data = binlog_file([FDE_8020, *_mysql8_transaction()])
    rng = random.Random(7)
    for offset in rng.sample(range(4, len(data)), 120):
        bad = bytearray(data)
        bad[offset] ^= 1 << rng.randrange(8)
        with pytest.raises(ParseError):
            list(iter_events(bytes(bad), file="binlog.000001"))


def test_truncation_inside_an_event_is_reported():
    data = binlog_file([FDE_8020, *_mysql8_transaction()])
    boundaries = {ev.end_pos for ev in iter_events(data)} | {4}
    for cut in range(5, len(data)):
        if cut in boundaries:
            continue
        with pytest.raises(TruncatedEventError) as e:
            list(iter_events(data[:cut], file="binlog.000001"))
        assert e.value.file == "binlog.000001"


def test_checksum_can_be_ignored_to_salvage():
    data = bytearray(binlog_file([FDE_8020, *_mysql8_transaction()]))
    data[-1] ^= 0xFF  # the XID's CRC
    with pytest.raises(ChecksumError):
        list(iter_events(bytes(data)))
    evs = list(iter_events(bytes(data), verify_checksum=False))
    assert evs[-1].xid == 901


def test_stream_event_size_must_match_the_packet():
    raw = event(EventType.XID, xid_body(5))
    p = BinlogParser(stream=True, checksum=ChecksumAlg.CRC32)
    with pytest.raises(TruncatedEventError, match="packet carries"):
        p.feed_event(raw + b"\0")
    (ev,) = p.feed_event(raw)
    assert ev.xid == 5


def test_start_encryption_is_a_clear_error():
    data = binlog_file([FDE_8020, event(EventType.MARIA_START_ENCRYPTION, b"\x01" + b"\0" * 16)])
    with pytest.raises(EncryptedBinlogError, match="encrypted"):
        list(iter_events(data))


def test_unknown_and_ignorable_events_are_yielded_raw():
    data = binlog_file([FDE_8020, event(99, b"future!", flags=0x80)])
    ev = list(iter_events(data))[-1]
    assert isinstance(ev, RawEvent) and ev.ignorable and ev.body == b"future!"


def _payload_event(inner: list[bytes], compression=0):
    blob = b"".join(inner)
    data = zstandard.ZstdCompressor().compress(blob) if compression == 0 else blob
    fields = (lenenc(2) + lenenc(len(lenenc(compression))) + lenenc(compression)
              + lenenc(3) + lenenc(len(lenenc(len(blob)))) + lenenc(len(blob))
              + lenenc(1) + lenenc(len(lenenc(len(data)))) + lenenc(len(data)) + b"\x00")
    return event(EventType.TRANSACTION_PAYLOAD, fields + data)


@pytest.mark.parametrize("compression", [0, 255])
def test_transaction_payload_inner_events_are_decoded(compression):
    # Inner events carry no CRC32 (the payload event's covers them).
    inner = [ev[:-4] for ev in _mysql8_transaction(4, 20)]
    inner = [ev[:9] + struct.pack("<I", len(ev)) + ev[13:] for ev in inner]
    data = binlog_file([FDE_8020, _payload_event(inner, compression)])
    evs = list(iter_events(data, file="binlog.000003"))
    assert isinstance(evs[1], TransactionPayloadEvent)
    assert evs[1].uncompressed_size == sum(map(len, inner))
    assert [e.type_code for e in evs[2:]] == [2, 19, 30, 16]
    assert all(e.pos == evs[1].pos and e.end_pos == evs[1].end_pos for e in evs[2:])
    (tx,) = list(assemble(evs))
    assert [c.after for c in tx.changes()] == _expected_rows(4, 20)
    assert tx.end_pos == len(data)


def test_corrupt_payload_is_a_compression_error():
    inner = [ev[:-4] for ev in _mysql8_transaction()]
    raw = bytearray(_payload_event(inner))
    raw[-10] ^= 0xFF
    raw[-4:] = struct.pack("<I", zlib.crc32(bytes(raw[:-4])))
    with pytest.raises(ParseError):
        list(iter_events(binlog_file([FDE_8020, bytes(raw)])))
