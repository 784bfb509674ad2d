"""cdc.binlog.transactions.TransactionAssembler on events built byte by byte
(tests/support/binlog_builder.py): which transactions come out, with which positions, GTIDs,
XIDs, timestamps and row changes -- for BEGIN/XID, MySQL and MariaDB GTIDs, DDL, cut-off and
rolled-back transactions, table filters and file rotation."""

import struct

import pytest

from support.binlog_builder import (FDE_8020, binlog_file, event, lenenc, query_body, rows_v2_body,
                                    table_map_body, xid_body)
from cdc.binlog.constants import ChecksumAlg, EventType
from cdc.binlog.parser import BinlogParser, iter_events
from cdc.binlog.transactions import TableFilter, TransactionAssembler, assemble

TS = 1_700_000_000
SID = bytes.fromhex("b8ae2fd2300511f08be80242ac150002")
SID_TEXT = "b8ae2fd2-3005-11f0-8be8-0242ac150002"
FDE_LEN = len(FDE_8020)            # 121: the first transaction starts at 4 + 121 = 125
# MariaDB's format description: MySQL 8.0.20's with a MariaDB server version (same length).
FDE_MARIADB = FDE_8020[:21] + b"10.11.6-MariaDB-log".ljust(50, b"\0") + FDE_8020[71:]


# --- event builders --------------------------------------------------------------------------------


def table_map(table_id: int, schema: str, table: str) -> bytes:
    """TABLE_MAP of ``schema.table (id INT PRIMARY KEY, name VARCHAR(20) utf8mb4)``."""
    body = table_map_body(
        table_id, schema, table, bytes([3, 15]), struct.pack("<H", 80), b"\x02",
        optional=b"\x04" + lenenc(8) + lenenc(2) + b"id" + lenenc(4) + b"name"   # COLUMN_NAME
        + b"\x02" + lenenc(1) + lenenc(45)                                      # DEFAULT_CHARSET
        + b"\x08" + lenenc(1) + lenenc(0))                                      # SIMPLE_PRIMARY_KEY
    return event(EventType.TABLE_MAP, body)


def row(id_: int, name: str) -> bytes:
    raw = name.encode()
    return b"\x00" + struct.pack("<i", id_) + bytes((len(raw),)) + raw


def write_rows(table_id: int, *rows: tuple, timestamp: int = TS) -> bytes:
    return event(EventType.WRITE_ROWS, rows_v2_body(table_id, 2, b"".join(row(*r) for r in rows)),
                 timestamp=timestamp)


def update_rows(table_id: int, *pairs: tuple) -> bytes:
    data = b"".join(row(*before) + row(*after) for before, after in pairs)
    return event(EventType.UPDATE_ROWS, rows_v2_body(table_id, 2, data, update=True))


def delete_rows(table_id: int, *rows: tuple) -> bytes:
    return event(EventType.DELETE_ROWS, rows_v2_body(table_id, 2, b"".join(row(*r) for r in rows)))


def maria_write_rows_v1(table_id: int, *rows: tuple) -> bytes:
    """WRITE_ROWS_EVENT_V1 (23), as MariaDB writes it: no extra-data field after the flags."""
    body = (table_id.to_bytes(6, "little") + struct.pack("<H", 1) + lenenc(2) + b"\x03"
            + b"".join(row(*r) for r in rows))
    return event(EventType.WRITE_ROWS_V1, body, server_id=7)


def query(text: str, *, timestamp: int = TS, server_id: int = 1) -> bytes:
    return event(EventType.QUERY, query_body(text, "shop"), timestamp=timestamp,
                 server_id=server_id)


def xid(n: int, *, timestamp: int = TS) -> bytes:
    return event(EventType.XID, xid_body(n), timestamp=timestamp)


def mysql_gtid(gno: int) -> bytes:
    """GTID_LOG_EVENT: flags, sid, gno, logical clock, commit timestamp, length, server version."""
    body = (b"\x01" + SID + struct.pack("<q", gno) + b"\x02" + struct.pack("<qq", gno - 1, gno)
            + (TS * 1_000_000).to_bytes(7, "little") + lenenc(300) + struct.pack("<I", 80040))
    return event(EventType.GTID, body)


def maria_gtid(seq_no: int, domain_id: int = 0, *, standalone: bool = False,
               server_id: int = 7) -> bytes:
    """MariaDB GTID_EVENT: seq_no(8), domain_id(4), flags2(1), zero padding to 19 bytes."""
    flags2 = 0x01 if standalone else 0x0C      # FL_STANDALONE, or FL_TRANSACTIONAL|FL_ALLOW_PARALLEL
    body = struct.pack("<QIB", seq_no, domain_id, flags2).ljust(19, b"\0")
    return event(EventType.MARIA_GTID, body, server_id=server_id)


def rotate(next_file: str, *, artificial: bool = False) -> bytes:
    return event(EventType.ROTATE, struct.pack("<Q", 4) + next_file.encode(),
                 timestamp=0 if artificial else TS, flags=0x20 if artificial else 0)


def ends(*events: bytes, start: int = 4 + FDE_LEN) -> list[int]:
    """The file positions after each of *events*, laid out from *start*."""
    out = []
    for ev in events:
        start += len(ev)
        out.append(start)
    return out


def changes(tx) -> list[tuple]:
    return [(c.op, c.schema, c.table, c.before, c.after, c.index) for c in tx.changes()]


# --- BEGIN ... XID ---------------------------------------------------------------------------------


def test_begin_rows_xid_is_one_transaction():
    evs = [query("BEGIN", timestamp=TS), table_map(77, "shop", "items"),
           write_rows(77, (1, "apple"), (2, "pear")),
           update_rows(77, ((1, "apple"), (1, "apples"))),
           delete_rows(77, (2, "pear")),
           xid(901, timestamp=TS + 5)]
    data = binlog_file([FDE_8020, *evs])
    (tx,) = list(assemble(iter_events(data, file="binlog.000001")))
    assert (tx.file, tx.pos, tx.end_pos) == ("binlog.000001", 125, len(data))
    assert tx.end_pos == ends(*evs)[-1]
    assert tx.xid == 901
    assert tx.gtid is None
    assert tx.timestamp == TS + 5            # the commit event's time
    assert tx.server_id == 1
    assert tx.commit_event.type_code == EventType.XID
    assert tx.row_count() == 4 and len(tx.rows_events) == 3 and tx.queries == []
    assert not tx.is_ddl
    assert changes(tx) == [
        ("c", "shop", "items", None, (1, "apple"), 0),
        ("c", "shop", "items", None, (2, "pear"), 1),
        ("u", "shop", "items", (1, "apple"), (1, "apples"), 2),
        ("d", "shop", "items", (2, "pear"), None, 3),
    ]
    keys = [c.key() for c in tx.changes()]
    assert keys == [{"id": 1}, {"id": 2}, {"id": 1}, {"id": 2}]
    assert [c.image("after") for c in tx.changes()][:2] == [{"id": 1, "name": "apple"},
                                                            {"id": 2, "name": "pear"}]


def test_tables_by_name_is_the_transactions_table_maps_read_only():
    data = binlog_file([FDE_8020, query("BEGIN"), table_map(77, "shop", "items"),
                        write_rows(77, (1, "a")), table_map(78, "shop", "orders"),
                        write_rows(78, (5, "b")), xid(3)])
    (tx,) = list(assemble(iter_events(data)))
    tables = tx.tables_by_name
    assert sorted(tables) == [("shop", "items"), ("shop", "orders")]
    assert tables[("shop", "orders")].table_id == 78
    assert tables[("shop", "items")].primary_key == [0]
    with pytest.raises(TypeError):
        tables[("shop", "x")] = None      # type: ignore[index]


def test_two_transactions_in_a_row_have_adjacent_positions():
    first = [query("BEGIN"), table_map(77, "shop", "items"), write_rows(77, (1, "a")), xid(10)]
    second = [query("BEGIN"), table_map(77, "shop", "items"), write_rows(77, (2, "b")), xid(11)]
    data = binlog_file([FDE_8020, *first, *second])
    txs = list(assemble(iter_events(data, file="binlog.000003")))
    first_end = ends(*first)[-1]
    assert [(t.pos, t.end_pos, t.xid) for t in txs] == [(125, first_end, 10),
                                                        (first_end, len(data), 11)]
    assert [changes(t)[0][4] for t in txs] == [(1, "a"), (2, "b")]


def test_in_transaction_while_a_transaction_is_open():
    data = binlog_file([FDE_8020, query("BEGIN"), table_map(77, "shop", "items"),
                        write_rows(77, (1, "a")), xid(42)])
    asm = TransactionAssembler()
    seen = []
    for ev in iter_events(data):
        tx = asm.push(ev)
        seen.append((ev.type_code, asm.in_transaction, tx.xid if tx is not None else None))
    assert seen == [(EventType.FORMAT_DESCRIPTION, False, None),
                    (EventType.QUERY, True, None),
                    (EventType.TABLE_MAP, True, None),
                    (EventType.WRITE_ROWS, True, None),
                    (EventType.XID, False, 42)]


def test_reset_forgets_the_open_transaction():
    data = binlog_file([FDE_8020, query("BEGIN"), table_map(77, "shop", "items"),
                        write_rows(77, (1, "a")), xid(42)])
    evs = list(iter_events(data))
    asm = TransactionAssembler()
    for ev in evs[:3]:
        assert asm.push(ev) is None
    assert asm.in_transaction
    asm.reset()
    assert not asm.in_transaction
    assert asm.push(evs[3]) is None and asm.push(evs[4]) is None   # rows, XID: no transaction


# --- transactions that do not commit ---------------------------------------------------------------


def test_a_transaction_cut_off_by_the_end_of_input_is_not_yielded():
    data = binlog_file([FDE_8020, query("BEGIN"), table_map(77, "shop", "items"),
                        write_rows(77, (1, "a"))])
    assert list(assemble(iter_events(data))) == []
    asm = TransactionAssembler()
    out = [asm.push(ev) for ev in iter_events(data)]
    assert out == [None, None, None, None] and asm.in_transaction


def test_a_gtid_after_an_uncommitted_transaction_drops_it():
    cut = [mysql_gtid(5), query("BEGIN"), table_map(77, "shop", "items"), write_rows(77, (1, "a"))]
    whole = [mysql_gtid(6), query("BEGIN"), table_map(77, "shop", "items"),
             write_rows(77, (2, "b")), xid(12)]
    data = binlog_file([FDE_8020, *cut, *whole])
    asm = TransactionAssembler()
    txs = [tx for ev in iter_events(data) if (tx := asm.push(ev)) is not None]
    assert [(t.gtid, t.pos, t.xid) for t in txs] == [(f"{SID_TEXT}:6", ends(*cut)[-1], 12)]
    assert changes(txs[0]) == [("c", "shop", "items", None, (2, "b"), 0)]
    assert asm.rolled_back == 1


def test_rollback_drops_the_transaction():
    data = binlog_file([FDE_8020, query("BEGIN"), table_map(77, "shop", "items"),
                        write_rows(77, (1, "a")), query("ROLLBACK"),
                        query("BEGIN"), table_map(77, "shop", "items"), write_rows(77, (2, "b")),
                        xid(7)])
    asm = TransactionAssembler()
    txs = [tx for ev in iter_events(data) if (tx := asm.push(ev)) is not None]
    assert [(t.xid, changes(t)[0][4]) for t in txs] == [(7, (2, "b"))]
    assert asm.rolled_back == 1


# --- table filter ----------------------------------------------------------------------------------


def test_table_filter_keeps_only_the_matching_tables_changes():
    evs = [query("BEGIN"),
           table_map(77, "shop", "items"), write_rows(77, (1, "kept")),
           table_map(78, "shop", "secret_keys"), write_rows(78, (2, "excluded")),
           table_map(79, "other", "items"), write_rows(79, (3, "not included")),
           table_map(80, "SHOP", "Orders"), write_rows(80, (4, "kept, any case")),
           xid(5)]
    data = binlog_file([FDE_8020, *evs])
    only = TableFilter(include=["shop.*"], exclude=["shop.secret*"])
    (tx,) = list(assemble(iter_events(data), table_filter=only))
    assert [(c.schema, c.table, c.after) for c in tx.changes()] == [
        ("shop", "items", (1, "kept")), ("SHOP", "Orders", (4, "kept, any case"))]
    assert [c.index for c in tx.changes()] == [0, 1]
    assert sorted(tx.tables_by_name) == [("SHOP", "Orders"), ("shop", "items")]
    assert (tx.pos, tx.end_pos, tx.xid) == (125, len(data), 5)
    (unfiltered,) = list(assemble(iter_events(data)))
    assert unfiltered.row_count() == 4


def test_a_transaction_whose_changes_are_all_filtered_still_commits():
    data = binlog_file([FDE_8020, query("BEGIN"), table_map(79, "other", "items"),
                        write_rows(79, (3, "x")), xid(6)])
    (tx,) = list(assemble(iter_events(data), table_filter=TableFilter(include=["shop.*"])))
    assert tx.rows_events == [] and list(tx.changes()) == []
    assert (tx.xid, tx.end_pos) == (6, len(data))


def test_table_filter_globs():
    f = TableFilter(include=["shop.*", "crm.customers"], exclude=["shop.tmp_*"])
    assert [f(n) for n in ("shop.items", "Shop.Items", "shop.tmp_x", "crm.customers",
                           "crm.leads", "other.items")] == [True, True, False, True, False, False]
    assert bool(f) and not bool(TableFilter())
    assert TableFilter()("any.table") is True
    assert TableFilter(exclude=["*.log"])("app.log") is False


# --- GTIDs -----------------------------------------------------------------------------------------


def test_mysql_gtid_transaction_carries_its_gtid():
    evs = [mysql_gtid(12), query("BEGIN"), table_map(77, "shop", "items"),
           write_rows(77, (1, "a")), xid(77)]
    data = binlog_file([FDE_8020, *evs])
    (tx,) = list(assemble(iter_events(data, file="binlog.000002")))
    assert tx.gtid == f"{SID_TEXT}:12"
    assert (tx.file, tx.pos, tx.end_pos, tx.xid) == ("binlog.000002", 125, len(data), 77)
    assert tx.standalone is None
    assert changes(tx) == [("c", "shop", "items", None, (1, "a"), 0)]


def test_mariadb_gtid_transaction_carries_its_gtid():
    # MariaDB: the GTID event opens the transaction (no BEGIN), rows events v1, XID.
    evs = [maria_gtid(42, domain_id=3), table_map(77, "shop", "items"),
           maria_write_rows_v1(77, (9, "maria")), xid(8, timestamp=TS + 1)]
    data = binlog_file([FDE_MARIADB, *evs])
    (tx,) = list(assemble(iter_events(data, file="mariadb-bin.000001")))
    assert tx.gtid == "3-7-42"                     # domain-server-seq; server id from the header
    assert (tx.file, tx.pos, tx.end_pos) == ("mariadb-bin.000001", 125, len(data))
    assert (tx.xid, tx.timestamp, tx.server_id) == (8, TS + 1, 7)
    assert tx.standalone is False
    assert changes(tx) == [("c", "shop", "items", None, (9, "maria"), 0)]


# --- DDL -------------------------------------------------------------------------------------------


def test_ddl_query_without_begin_is_a_transaction_of_its_own():
    ddl = query("CREATE TABLE t (id INT PRIMARY KEY)", timestamp=TS + 3, server_id=2)
    data = binlog_file([FDE_8020, ddl])
    (tx,) = list(assemble(iter_events(data, file="binlog.000001")))
    assert (tx.pos, tx.end_pos, tx.gtid, tx.xid) == (125, 125 + len(ddl), None, None)
    assert (tx.timestamp, tx.server_id) == (TS + 3, 2)
    assert tx.is_ddl and tx.rows_events == [] and list(tx.changes()) == []
    assert [q.query for q in tx.queries] == ["CREATE TABLE t (id INT PRIMARY KEY)"]


def test_ddl_after_a_mysql_gtid_ends_at_the_statement():
    evs = [mysql_gtid(3), query("ALTER TABLE t ADD c INT"),
           mysql_gtid(4), query("BEGIN"), table_map(77, "shop", "items"),
           write_rows(77, (1, "a")), xid(9)]
    data = binlog_file([FDE_8020, *evs])
    ddl, dml = list(assemble(iter_events(data)))
    assert (ddl.gtid, ddl.pos, ddl.end_pos, ddl.xid) == (f"{SID_TEXT}:3", 125, ends(*evs)[1], None)
    assert ddl.is_ddl and [q.query for q in ddl.queries] == ["ALTER TABLE t ADD c INT"]
    assert (dml.gtid, dml.pos, dml.end_pos, dml.xid) == (f"{SID_TEXT}:4", ends(*evs)[1],
                                                         len(data), 9)
    assert not dml.is_ddl and dml.row_count() == 1


def test_ddl_after_a_standalone_mariadb_gtid():
    evs = [maria_gtid(5, standalone=True), query("DROP TABLE t")]
    data = binlog_file([FDE_MARIADB, *evs])
    (tx,) = list(assemble(iter_events(data)))
    assert (tx.gtid, tx.standalone, tx.pos, tx.end_pos) == ("0-7-5", True, 125, len(data))
    assert tx.is_ddl and [q.query for q in tx.queries] == ["DROP TABLE t"]


# --- ROTATE ----------------------------------------------------------------------------------------


def _split(data: bytes) -> list[bytes]:
    """The events of a binlog file's bytes (after the magic), each with its log_pos."""
    out, off = [], 4
    while off < len(data):
        size = int.from_bytes(data[off + 9:off + 13], "little")
        out.append(data[off:off + size])
        off += size
    return out


def test_rotate_between_transactions_moves_to_the_next_file():
    # A replication stream: artificial ROTATE naming the file, its events, the real ROTATE at its
    # end, the next file's format description and events (positions from the headers' log_pos).
    tx1 = [query("BEGIN"), table_map(77, "shop", "items"), write_rows(77, (1, "a")), xid(1)]
    tx2 = [query("BEGIN"), table_map(77, "shop", "items"), write_rows(77, (2, "b")), xid(2)]
    file1 = binlog_file([FDE_8020, *tx1, rotate("binlog.000002")])
    file2 = binlog_file([FDE_8020, *tx2])
    p = BinlogParser(stream=True, checksum=ChecksumAlg.CRC32)
    asm = TransactionAssembler()
    out = []
    for raw in [rotate("binlog.000001", artificial=True), *_split(file1), *_split(file2)]:
        for ev in p.feed_event(raw):
            tx = asm.push(ev)
            out.append((ev.type_code, ev.file, asm.in_transaction,
                        None if tx is None else (tx.file, tx.pos, tx.end_pos, tx.xid)))
    end1 = ends(*tx1)[-1]
    assert out == [
        (EventType.ROTATE, "binlog.000001", False, None),
        (EventType.FORMAT_DESCRIPTION, "binlog.000001", False, None),
        (EventType.QUERY, "binlog.000001", True, None),
        (EventType.TABLE_MAP, "binlog.000001", True, None),
        (EventType.WRITE_ROWS, "binlog.000001", True, None),
        (EventType.XID, "binlog.000001", False, ("binlog.000001", 125, end1, 1)),
        (EventType.ROTATE, "binlog.000001", False, None),
        (EventType.FORMAT_DESCRIPTION, "binlog.000002", False, None),
        (EventType.QUERY, "binlog.000002", True, None),
        (EventType.TABLE_MAP, "binlog.000002", True, None),
        (EventType.WRITE_ROWS, "binlog.000002", True, None),
        (EventType.XID, "binlog.000002", False, ("binlog.000002", 125, len(file2), 2)),
    ]
    assert p.rotated_to == "binlog.000002"
    assert len(file1) == end1 + len(rotate("binlog.000002"))
