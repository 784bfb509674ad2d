"""The hex dumps of ../shared/seeds/ decoded through the parser, asserting the documented values."""

import struct
import zlib

import pytest

from support.binlog_builder import FDE_8020, MAGIC, binlog_file, event
from cdc.binlog.constants import ChecksumAlg, EventType
from cdc.errors import ChecksumError
from cdc.binlog.events import FormatDescriptionEvent, PreviousGtidsEvent, RotateEvent
from cdc.binlog.parser import BinlogParser, iter_events

# ROTATE_EVENT at 1428 of binlog.000024 (003_3426d8020b4ca3d6.txt): 44 bytes incl. CRC de7e7110.
ROTATE_SEED = bytes.fromhex("39103568" "04" "01000000" "2c000000" "c0050000" "0000"
                            "0400000000000000" "62696e6c6f672e303030303235" "de7e7110")

# PREVIOUS_GTIDS_LOG_EVENT of MySQL 8.0.40 (001_1eb88d19ff377fec.txt): header at 126, payload at
# 145 (48 bytes). The seed shows no CRC; the test computes it.
PREV_GTIDS_HEADER_8040 = bytes.fromhex("6e0f3568" "23" "01000000" "47000000" "c5000000" "8000")
PREV_GTIDS_PAYLOAD_8040 = bytes.fromhex(
    "0100000000000000" "b8ae2fd2300511f08be80242ac150002" "0100000000000000"
    "0100000000000000" "0c00000000000000")
# The tagged payload of MySQL 9.6 (95 bytes from offset 146).
PREV_GTIDS_PAYLOAD_96 = bytes.fromhex(
    "0102000000000001"                                        # tagged format, 2 tsids
    "55778904029911f1b1b84ef0c4956feb" "00"                   # uuid, no tag
    "0100000000000000" "0100000000000000" "0e00000000000000"  # 1 interval: [1, 14)
    "55778904029911f1b1b84ef0c4956feb" "0a" "6d79746167"      # uuid, tag "mytag" (5*2)
    "0100000000000000" "0100000000000000" "0300000000000000")


def test_fde_8020_seed_decodes_with_crc32_verified():
    assert len(FDE_8020) == 121
    (ev,) = list(iter_events(MAGIC + FDE_8020, file="binlog.000001"))
    assert isinstance(ev, FormatDescriptionEvent)
    assert ev.header == (1590982535, 15, 1, 121, 125, 0)
    assert (ev.pos, ev.end_pos) == (4, 125)
    assert ev.binlog_version == 4
    assert ev.server_version == "8.0.20"
    assert ev.create_timestamp == 1590982535
    assert ev.header_length == 19
    assert ev.checksum_alg == ChecksumAlg.CRC32
    phl = ev.post_header_lengths
    assert len(phl) == 40  # event types 1..40 (TRANSACTION_PAYLOAD) known to 8.0.20
    assert phl[EventType.QUERY - 1] == 13
    assert phl[EventType.ROTATE - 1] == 8
    assert phl[EventType.FORMAT_DESCRIPTION - 1] == 0x61 == 97
    assert phl[EventType.TABLE_MAP - 1] == 8
    assert phl[EventType.WRITE_ROWS - 1] == 10
    assert phl[EventType.GTID - 1] == 42
    assert phl[EventType.TRANSACTION_PAYLOAD - 1] == 40
    assert int.from_bytes(FDE_8020[-4:], "little") == zlib.crc32(FDE_8020[:-4]) == 0x8BFFC863


def test_fde_seed_with_one_flipped_bit_is_a_checksum_error():
    bad = bytearray(FDE_8020)
    bad[30] ^= 0x04  # inside the server version
    with pytest.raises(ChecksumError) as e:
        list(iter_events(MAGIC + bytes(bad), file="binlog.000001"))
    assert e.value.file == "binlog.000001" and e.value.position == 4
    assert e.value.expected == 0x8BFFC863


def test_rotate_seed_on_disk():
    p = BinlogParser(stream=True, file="binlog.000024", checksum=ChecksumAlg.CRC32)
    (ev,) = p.feed_event(ROTATE_SEED)
    assert isinstance(ev, RotateEvent)
    assert ev.header == (1748308025, 4, 1, 44, 1472, 0)
    assert ev.next_file == "binlog.000025" and ev.next_position == 4
    assert not ev.artificial
    assert (ev.pos, ev.end_pos) == (1428, 1472)
    assert ev.file == "binlog.000024"          # the event belongs to the file it closes
    assert p.file == "binlog.000025"           # what follows is in the next one


def test_rotate_artificial_sets_the_file_without_a_boundary():
    body = ROTATE_SEED[19:-4]
    raw = event(EventType.ROTATE, body, timestamp=0, flags=0x20, log_pos=0)
    p = BinlogParser(stream=True, checksum=ChecksumAlg.CRC32)
    (ev,) = p.feed_event(raw)
    assert ev.artificial and ev.next_file == "binlog.000025"
    assert ev.file == "binlog.000025" and ev.pos is None
    assert p.file == "binlog.000025"


def test_rotate_seed_crc_mismatch_detected():
    bad = bytearray(ROTATE_SEED)
    bad[-6] ^= 0x01  # a letter of the file name
    p = BinlogParser(stream=True, file="binlog.000024", checksum=ChecksumAlg.CRC32)
    with pytest.raises(ChecksumError):
        p.feed_event(bytes(bad))


def _with_crc(raw: bytes) -> bytes:
    return raw + struct.pack("<I", zlib.crc32(raw))


def test_previous_gtids_8040_event_through_the_parser():
    raw = _with_crc(PREV_GTIDS_HEADER_8040 + PREV_GTIDS_PAYLOAD_8040)
    assert len(raw) == 71  # the header's event size
    p = BinlogParser(stream=True, file="binlog.000024", checksum=ChecksumAlg.CRC32)
    (ev,) = p.feed_event(raw)
    assert isinstance(ev, PreviousGtidsEvent)
    assert ev.header.flags == 0x80  # LOG_EVENT_IGNORABLE_F, yet a known type: decoded
    assert (ev.pos, ev.end_pos) == (126, 197)
    assert str(ev.gtid_set) == "b8ae2fd2-3005-11f0-8be8-0242ac150002:1-11"


def test_previous_gtids_96_tagged_in_a_file():
    assert len(PREV_GTIDS_PAYLOAD_96) == 95
    data = binlog_file([FDE_8020, event(EventType.PREVIOUS_GTIDS, PREV_GTIDS_PAYLOAD_96,
                                        flags=0x80)])
    fde, prev = list(iter_events(data, file="binlog_gtid_tag.000001"))
    assert prev.pos == 125 and prev.end_pos == 125 + 19 + 95 + 4
    text = str(prev.gtid_set)
    assert text == ("55778904-0299-11f1-b1b8-4ef0c4956feb:1-13:mytag:1-2")
