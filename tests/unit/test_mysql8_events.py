"""MySQL-only paths (no MySQL server here): events built byte by byte from the documented
layouts -- GTID (33) transactions, rows v2, JSON binary, PARTIAL_UPDATE_ROWS (39), VECTOR."""

import struct

from support.binlog_builder import (FDE_8020, binlog_file, event, lenenc, query_body, rows_v2_body,
                            table_map_body, xid_body)
from cdc.binlog.constants import EventType
from cdc.binlog.parser import iter_events
from cdc.binlog.transactions import assemble

SID = bytes.fromhex("b8ae2fd2300511f08be80242ac150002")


def gtid_body(gno: int, commit_us: int = 1_700_000_000_123_456) -> bytes:
    # flags, sid, gno, lt_type=2, last_committed, sequence_number,
    # immediate_commit_timestamp (7 bytes; high bit clear: original == immediate),
    # transaction_length (lenenc), immediate_server_version (4 bytes; high bit clear)
    return (b"\x01" + SID + struct.pack("<q", gno) + b"\x02" + struct.pack("<qq", gno - 1, gno)
            + commit_us.to_bytes(7, "little") + lenenc(321) + struct.pack("<I", 80040))


# {"a": 1} in MySQL's binary JSON: small object, 1 element, 12 bytes:
# count=1 | size=12 | key entry (offset 11, length 1) | value entry (int16 inlined: 1) | "a"
JSON_A1 = bytes.fromhex("00" "0100" "0c00" "0b000100" "050100" "61")
# A JSON diff: REPLACE (0) at path "$.a" with the scalar int16 2 (type 05, value 0200)
DIFF_A2 = b"\x00" + lenenc(3) + b"$.a" + lenenc(3) + bytes.fromhex("050200")


def _table_map():
    # id INT, doc JSON (4 length bytes), emb VECTOR(2) (4 length bytes)
    return table_map_body(
        90, "app", "docs", bytes([3, 245, 242]), b"\x04\x04", b"\x06",
        optional=b"\x04" + lenenc(len(names)) + names)


names = b"".join(lenenc(len(n)) + n for n in (b"id", b"doc", b"emb"))  # COLUMN_NAME field


def _json_cell(doc: bytes) -> bytes:
    return struct.pack("<I", len(doc)) + doc


def _vector_cell(*values: float) -> bytes:
    raw = struct.pack("<%df" % len(values), *values)
    return struct.pack("<I", len(raw)) + raw


def test_gtid_transaction_with_json_and_vector():
    row = b"\x00" + struct.pack("<i", 1) + _json_cell(JSON_A1) + _vector_cell(0.5, -2.0)
    data = binlog_file([FDE_8020,
                        event(EventType.GTID, gtid_body(12)),
                        event(EventType.QUERY, query_body("BEGIN", "app")),
                        event(EventType.TABLE_MAP, _table_map()),
                        event(EventType.WRITE_ROWS, rows_v2_body(90, 3, row)),
                        event(EventType.XID, xid_body(77))])
    evs = list(iter_events(data))
    gtid_ev = evs[1]
    assert gtid_ev.gtid == "b8ae2fd2-3005-11f0-8be8-0242ac150002:12"
    assert gtid_ev.last_committed == 11 and gtid_ev.sequence_number == 12
    assert gtid_ev.commit_timestamp_us == 1_700_000_000_123_456
    (tx,) = list(assemble(evs))
    assert tx.gtid == "b8ae2fd2-3005-11f0-8be8-0242ac150002:12" and tx.xid == 77
    (change,) = list(tx.changes())
    assert change.after == (1, {"a": 1}, [0.5, -2.0])
    assert change.image("after") == {"id": 1, "doc": {"a": 1}, "emb": [0.5, -2.0]}


def test_anonymous_gtid_transaction():
    body = gtid_body(0)
    body = b"\x01" + bytes(16) + body[17:]
    data = binlog_file([FDE_8020, event(EventType.ANONYMOUS_GTID, body),
                        event(EventType.QUERY, query_body("BEGIN", "app")),
                        event(EventType.TABLE_MAP, _table_map()),
                        event(EventType.WRITE_ROWS, rows_v2_body(
                            90, 3, b"\x04" + struct.pack("<i", 5) + _json_cell(JSON_A1))),
                        event(EventType.XID, xid_body(1))])
    (tx,) = list(assemble(iter_events(data)))
    assert tx.gtid is None
    assert [c.after for c in tx.changes()] == [(5, {"a": 1}, None)]


def test_partial_update_rows_applies_json_diffs():
    before = b"\x00" + struct.pack("<i", 1) + _json_cell(JSON_A1) + _vector_cell(1.0)
    # after image: value_options=1 (PARTIAL_JSON), partial bits (1 JSON column: partial),
    # null bitmap, id, the diff vector in place of the document, the vector
    after = (lenenc(1) + b"\x01" + b"\x00" + struct.pack("<i", 1)
             + struct.pack("<I", len(DIFF_A2)) + DIFF_A2 + _vector_cell(1.0))
    full_after = lenenc(0) + b"\x00" + struct.pack("<i", 2) + _json_cell(JSON_A1) + _vector_cell(3.0)
    data = binlog_file([FDE_8020,
                        event(EventType.GTID, gtid_body(13)),
                        event(EventType.QUERY, query_body("BEGIN", "app")),
                        event(EventType.TABLE_MAP, _table_map()),
                        event(EventType.PARTIAL_UPDATE_ROWS,
                              rows_v2_body(90, 3, before + after + before + full_after,
                                           update=True)),
                        event(EventType.XID, xid_body(78))])
    (tx,) = list(assemble(iter_events(data)))
    first, second = tx.changes()
    assert first.op == "u"
    assert first.before == (1, {"a": 1}, [1.0])
    assert first.after == (1, {"a": 2}, [1.0])
    assert second.after == (2, {"a": 1}, [3.0])  # value_options 0: a plain after image
