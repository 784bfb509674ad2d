"""TRUNCATE TABLE as a change (op 't'), on events built byte by byte
(tests/support/binlog_builder.py): detecting the statement (and not misfiring on others), the
assembler's changes in binlog order with rows, the table filter, the CLI's JSON lines, the Spark
source's Arrow batches (JSON and typed), and DeltaUpserter applying it in order (delta-rs, local
files; no server, no JVM)."""

from __future__ import annotations

import io
import json
import struct

import pytest

from support.binlog_builder import (FDE_8020, binlog_file, event, lenenc, query_body,
                                    rows_v2_body, table_map_body, xid_body)
from cdc.binlog.constants import EventType
from cdc.binlog.parser import iter_events
from cdc.binlog.transactions import TableFilter, assemble, truncate_target

TS = 1_700_000_000
SID = bytes.fromhex("b8ae2fd2300511f08be80242ac150002")
FDE_MARIADB = FDE_8020[:21] + b"10.11.6-MariaDB-log".ljust(50, b"\0") + FDE_8020[71:]
FILE = "binlog.000003"


# --- event builders --------------------------------------------------------------------------------


def table_map(table_id: int, schema: str, table: str) -> bytes:
    """TABLE_MAP of ``schema.table (id INT PRIMARY KEY, name VARCHAR(20) utf8mb4)``."""
    body = table_map_body(
        table_id, schema, table, bytes([3, 15]), struct.pack("<H", 80), b"\x02",
        optional=b"\x04" + lenenc(8) + lenenc(2) + b"id" + lenenc(4) + b"name"
        + b"\x02" + lenenc(1) + lenenc(45)
        + b"\x08" + lenenc(1) + lenenc(0))
    return event(EventType.TABLE_MAP, body)


def _row(id_: int, name: str) -> bytes:
    raw = name.encode()
    return b"\x00" + struct.pack("<i", id_) + bytes((len(raw),)) + raw


def write_rows(table_id: int, *rows: tuple) -> bytes:
    return event(EventType.WRITE_ROWS, rows_v2_body(table_id, 2, b"".join(_row(*r) for r in rows)))


def update_rows(table_id: int, *pairs: tuple) -> bytes:
    data = b"".join(_row(*b) + _row(*a) for b, a in pairs)
    return event(EventType.UPDATE_ROWS, rows_v2_body(table_id, 2, data, update=True))


def query(text: str, schema: str = "shop", error_code: int = 0) -> bytes:
    body = query_body(text, schema)
    if error_code:
        body = body[:9] + struct.pack("<H", error_code) + body[11:]
    return event(EventType.QUERY, body)


def xid(n: int) -> bytes:
    return event(EventType.XID, xid_body(n))


def mysql_gtid(gno: int) -> bytes:
    body = (b"\x01" + SID + struct.pack("<q", gno) + b"\x02" + struct.pack("<qq", gno - 1, gno)
            + (TS * 1_000_000).to_bytes(7, "little") + lenenc(300) + struct.pack("<I", 80040))
    return event(EventType.GTID, body)


def maria_gtid(seq_no: int, *, standalone: bool) -> bytes:
    flags2 = 0x01 | 0x20 if standalone else 0x0C     # STANDALONE|DDL, or TRANSACTIONAL
    return event(EventType.MARIA_GTID, struct.pack("<QIB", seq_no, 0, flags2).ljust(19, b"\0"),
                 server_id=7)


def insert_tx(id_: int, name: str, table: str = "items", table_id: int = 77) -> list[bytes]:
    return [query("BEGIN"), table_map(table_id, "shop", table), write_rows(table_id, (id_, name)),
            xid(id_)]


def transactions(evs, fde=FDE_8020, table_filter=None):
    return list(assemble(iter_events(binlog_file([fde, *evs]), file=FILE), table_filter))


def changes(txs) -> list[tuple]:
    return [(c.op, c.schema, c.table, c.before, c.after, c.index) for tx in txs
            for c in tx.changes()]


# --- detecting the statement -----------------------------------------------------------------------


@pytest.mark.parametrize("statement, expected", [
    ("TRUNCATE items", ("shop", "items")),
    ("truncate table items", ("shop", "items")),
    ("TrUnCaTe TaBlE items;", ("shop", "items")),
    ("TRUNCATE TABLE other.items", ("other", "items")),
    ("TRUNCATE TABLE other . items", ("other", "items")),
    ("TRUNCATE TABLE `my db`.`we``ird`", ("my db", "we`ird")),
    ("TRUNCATE `table`", ("shop", "table")),
    ('TRUNCATE TABLE "q"', ("shop", "q")),                          # ANSI_QUOTES
    ("TRUNCATE TABLE ünïcödé_1", ("shop", "ünïcödé_1")),
    ("TRUNCATE TABLE 1abc", ("shop", "1abc")),
    ("/* by the app */ TRUNCATE /* x */ TABLE items", ("shop", "items")),
    ("-- tidy up\nTRUNCATE items", ("shop", "items")),
    ("# tidy up\n  TRUNCATE\tTABLE\r\nitems ;  ", ("shop", "items")),
    ("TRUNCATE TABLE items WAIT 5", ("shop", "items")),
    ("TRUNCATE TABLE items WAIT 0.5", ("shop", "items")),
    ("truncate items nowait", ("shop", "items")),
    ("/*!40000 TRUNCATE TABLE items */", ("shop", "items")),
    ("/*M!100100 TRUNCATE */ items", ("shop", "items")),
    ("TRUNCATE items -- trailing comment", ("shop", "items")),
    ("TRUNCATE items /* trailing */", ("shop", "items")),
])
def test_truncate_statements_are_recognised(statement, expected):
    assert truncate_target(statement, "shop") == expected


@pytest.mark.parametrize("statement", [
    "CREATE PROCEDURE p() BEGIN TRUNCATE TABLE items; END",
    "CREATE DEFINER=`root`@`%` TRIGGER tr AFTER INSERT ON a FOR EACH ROW TRUNCATE TABLE items",
    "INSERT INTO log VALUES ('TRUNCATE TABLE items')",
    "-- TRUNCATE items",
    "/* TRUNCATE items */ DROP TABLE items",
    "/* TRUNCATE items */",
    "ALTER TABLE items TRUNCATE PARTITION p0",
    "TRUNCATE TABLE items, orders",
    "TRUNCATE",
    "TRUNCATE TABLE",
    "TRUNCATE TABLE items extra",
    "TRUNCATE TABLE a.b.c",
    "TRUNCATE TABLE items WAIT",
    "TRUNCATEX items",
    "--TRUNCATE items",
    "DROP TABLE truncate",
    "CREATE TABLE truncate_log (id INT)",
    "TRUNCATE TABLE 'items'",                 # a string, not a name
    "TRUNCATE TABLE `unterminated",
    "/* unterminated TRUNCATE items",
    "BEGIN",
    "",
])
def test_other_statements_are_not_truncates(statement):
    assert truncate_target(statement, "shop") is None


def test_unqualified_truncate_without_a_default_database_is_not_a_change():
    assert truncate_target("TRUNCATE t", "") is None
    assert truncate_target("TRUNCATE t", None) is None
    assert truncate_target("TRUNCATE d.t", "") == ("d", "t")


# --- the assembler ---------------------------------------------------------------------------------


def test_mysql_truncate_is_a_change_between_the_inserts():
    evs = [*insert_tx(1, "a"), mysql_gtid(5), query("TRUNCATE TABLE items"), *insert_tx(2, "b")]
    txs = transactions(evs)
    assert len(txs) == 3
    assert changes(txs) == [("c", "shop", "items", None, (1, "a"), 0),
                            ("t", "shop", "items", None, None, 0),
                            ("c", "shop", "items", None, (2, "b"), 0)]
    tx = txs[1]
    assert tx.gtid == "b8ae2fd2-3005-11f0-8be8-0242ac150002:5"
    assert tx.is_ddl and tx.rows_events == [] and len(tx.queries) == 1
    assert [(t.schema, t.table, t.at) for t in tx.truncates] == [("shop", "items", 0)]
    assert tx.row_count() == 0 and tx.change_count() == 1
    (ch,) = tx.changes()
    assert ch.key() is None and ch.image("before") is None and ch.image("after") is None
    assert ch.columns == [] and ch.table_map is None
    assert txs[0].truncates == () and txs[0].change_count() == 1


def test_mariadb_standalone_truncate_and_one_without_gtid():
    evs = [maria_gtid(1, standalone=False), query("BEGIN"), table_map(77, "shop", "items"),
           write_rows(77, (1, "a"), (2, "b")), xid(1),
           maria_gtid(2, standalone=True), query("truncate `shop`.`items` WAIT 5", ""),
           query("TRUNCATE other.t", "shop")]          # no GTID at all: the statement alone
    txs = transactions(evs, FDE_MARIADB)
    assert [tx.gtid for tx in txs] == ["0-7-1", "0-7-2", None]
    assert changes(txs) == [("c", "shop", "items", None, (1, "a"), 0),
                            ("c", "shop", "items", None, (2, "b"), 1),
                            ("t", "shop", "items", None, None, 0),
                            ("t", "other", "t", None, None, 0)]


def test_truncate_inside_a_transaction_keeps_its_place_among_the_rows():
    # (not what a row-based server writes -- TRUNCATE commits implicitly -- but the order of
    # the changes must follow the binlog whatever comes)
    evs = [query("BEGIN"), table_map(77, "shop", "items"), write_rows(77, (1, "a"), (2, "b")),
           query("TRUNCATE items"), table_map(77, "shop", "items"),
           update_rows(77, ((3, "c"), (3, "d"))), query("TRUNCATE items"),
           query("TRUNCATE items"), xid(9)]
    (tx,) = transactions(evs)
    assert changes([tx]) == [("c", "shop", "items", None, (1, "a"), 0),
                             ("c", "shop", "items", None, (2, "b"), 1),
                             ("t", "shop", "items", None, None, 2),
                             ("u", "shop", "items", (3, "c"), (3, "d"), 3),
                             ("t", "shop", "items", None, None, 4),
                             ("t", "shop", "items", None, None, 5)]
    # the table's columns are known here (its table map is in the transaction)
    assert [c.columns for c in tx.changes() if c.op == "t"] == [["id", "name"]] * 3
    assert tx.change_count() == 6


def test_the_table_filter_applies_to_truncates():
    evs = [mysql_gtid(1), query("TRUNCATE items"), mysql_gtid(2), query("TRUNCATE orders"),
           mysql_gtid(3), query("TRUNCATE TABLE audit.items", "shop")]
    got = lambda f: [(c.schema, c.table) for tx in transactions(evs, table_filter=f)
                     for c in tx.changes()]
    assert got(None) == [("shop", "items"), ("shop", "orders"), ("audit", "items")]
    assert got(TableFilter(["shop.*"])) == [("shop", "items"), ("shop", "orders")]
    assert got(TableFilter(["shop.orders"])) == [("shop", "orders")]     # typed mode's filter
    assert got(TableFilter(exclude=["*.items"])) == [("shop", "orders")]
    # filtered out: still a transaction (a boundary), with no change
    assert [tx.change_count() for tx in transactions(evs, table_filter=TableFilter(["x.*"]))] \
        == [0, 0, 0]


def test_failed_and_other_statements_make_no_change():
    evs = [mysql_gtid(1), query("TRUNCATE items", error_code=1146),
           mysql_gtid(2), query("CREATE PROCEDURE p() BEGIN TRUNCATE TABLE items; END"),
           mysql_gtid(3), query("ALTER TABLE items TRUNCATE PARTITION p0")]
    txs = transactions(evs)
    assert len(txs) == 3 and changes(txs) == []


# --- the CLI's lines -------------------------------------------------------------------------------


def test_decode_jsonl_and_tail_text_print_the_truncate(tmp_path, capsys):
    from cdc.cli.changes import change_json
    from cdc.cli.main import main
    from cdc.cli.tail import change_text
    evs = [*insert_tx(1, "a"), mysql_gtid(5), query("TRUNCATE TABLE items"), *insert_tx(2, "b")]
    data = binlog_file([FDE_8020, *evs])
    path = tmp_path / FILE
    path.write_bytes(data)
    assert main(["decode", "--format", "jsonl", str(path)]) == 0
    lines = [json.loads(l) for l in capsys.readouterr().out.splitlines()]
    assert [(l["op"], l["after"]) for l in lines] == [("c", {"id": 1, "name": "a"}), ("t", None),
                                                      ("c", {"id": 2, "name": "b"})]
    t = lines[1]
    tx = transactions(evs)[1]
    assert t == {"op": "t", "db": "shop", "table": "items", "before": None, "after": None,
                 "key": None, "file": FILE, "pos": tx.pos, "end_pos": tx.end_pos,
                 "gtid": "b8ae2fd2-3005-11f0-8be8-0242ac150002:5", "xid": None, "row": 0,
                 "ts": TS, "server_id": 1}
    (ch,) = tx.changes()
    assert json.loads(change_json(ch)) == t
    assert change_text(ch) == (f"2023-11-14T22:13:20Z TRUNCATE shop.items [{FILE}:{tx.pos} "
                               f"b8ae2fd2-3005-11f0-8be8-0242ac150002:5]")
    # filtered out by --exclude-tables
    assert main(["decode", "--format", "jsonl", "--exclude-tables", "shop.items", str(path)]) == 0
    assert capsys.readouterr().out == ""


# --- the Spark source's Arrow batches --------------------------------------------------------------

WORKLOAD = [*insert_tx(1, "a"), mysql_gtid(5), query("TRUNCATE TABLE items"),
            query("BEGIN"), table_map(77, "shop", "items"), write_rows(77, (2, "b"), (3, "c")),
            update_rows(77, ((2, "b"), (2, "bb"))), xid(6)]


def _seq(tx, row: int) -> str:
    return "%010d:%012d:%010d" % (3, tx.pos, row)


def test_batches_json_mode_carry_the_truncate_in_order():
    pytest.importorskip("pyspark")
    from streaming.source.batches import BatchBuilder, record_batches
    from streaming.contract.spark_schema import JSON_SCHEMA
    txs = transactions(WORKLOAD)
    rows = [r for b in record_batches(txs, BatchBuilder(JSON_SCHEMA)) for r in b.to_pylist()]
    assert [(r["op"], r["before"], r["after"], r["key"]) for r in rows] == [
        ("c", None, '{"id": 1, "name": "a"}', '{"id": 1}'),
        ("t", None, None, None),
        ("c", None, '{"id": 2, "name": "b"}', '{"id": 2}'),
        ("c", None, '{"id": 3, "name": "c"}', '{"id": 3}'),
        ("u", '{"id": 2, "name": "b"}', '{"id": 2, "name": "bb"}', '{"id": 2}')]
    t = rows[1]
    tx = txs[1]
    assert (t["db"], t["table"], t["ts_ms"], t["seq"]) == ("shop", "items", TS * 1000, _seq(tx, 0))
    assert t["source"] == {"server_id": 1, "file": FILE, "pos": tx.pos,
                           "gtid": "b8ae2fd2-3005-11f0-8be8-0242ac150002:5", "row": 0,
                           "xid": None}
    assert [r["seq"] for r in rows] == sorted(r["seq"] for r in rows)


def test_a_truncate_only_transaction_is_delivered():
    pytest.importorskip("pyspark")
    from streaming.source.batches import BatchBuilder, record_batches
    from streaming.contract.spark_schema import JSON_SCHEMA
    txs = transactions([mysql_gtid(5), query("TRUNCATE TABLE items")])
    batches = list(record_batches(txs, BatchBuilder(JSON_SCHEMA)))
    assert [b.num_rows for b in batches] == [1]
    assert batches[0].column("op").to_pylist() == ["t"]


def test_batches_follow_the_changes_and_split_anywhere():
    pytest.importorskip("pyspark")
    from streaming.source.batches import BatchBuilder, record_batches
    from streaming.contract.spark_schema import JSON_SCHEMA
    evs = [query("BEGIN"), table_map(77, "shop", "items"), write_rows(77, (1, "a"), (2, "b")),
           query("TRUNCATE items"), table_map(77, "shop", "items"),
           update_rows(77, ((3, "c"), (3, "d"))), query("TRUNCATE items"),
           query("TRUNCATE items"), xid(9), mysql_gtid(3), query("TRUNCATE items")]
    txs = transactions(evs)
    want = [(c.op, _seq(c.tx, c.index), c.index) for tx in txs for c in tx.changes()]
    assert [w[0] for w in want] == ["c", "c", "t", "u", "t", "t", "t"]
    for per_batch in (1, 2, 8192):
        batches = list(record_batches(txs, BatchBuilder(JSON_SCHEMA), per_batch))
        got = [(r["op"], r["seq"], r["source"]["row"]) for b in batches for r in b.to_pylist()]
        assert got == want, per_batch
    assert len(list(record_batches(txs, BatchBuilder(JSON_SCHEMA), 1))) == 6


def test_batches_typed_mode_have_null_images_for_the_truncate():
    pytest.importorskip("pyspark")
    from streaming.source.batches import BatchBuilder, record_batches
    from streaming.contract.spark_schema import typed_schema
    txs = transactions(WORKLOAD, table_filter=TableFilter(["shop.items"]))
    cols = txs[0].rows_events[0].table.columns
    rows = [r for b in record_batches(txs, BatchBuilder(typed_schema(cols), cols))
            for r in b.to_pylist()]
    assert [(r["op"], r["before"], r["after"], r["key"]) for r in rows] == [
        ("c", None, {"id": 1, "name": "a"}, '{"id": 1}'),
        ("t", None, None, None),
        ("c", None, {"id": 2, "name": "b"}, '{"id": 2}'),
        ("c", None, {"id": 3, "name": "c"}, '{"id": 3}'),
        ("u", {"id": 2, "name": "b"}, {"id": 2, "name": "bb"}, '{"id": 2}')]
    assert rows[1]["seq"] == _seq(txs[1], 0)


# --- DeltaUpserter ---------------------------------------------------------------------------------


def _arrow(evs, typed: bool, first=None):
    """The source's Arrow table for *evs* (what foreachBatch's DataFrame.toArrow() gives)."""
    import pyarrow as pa
    from streaming.source.batches import BatchBuilder, record_batches
    from streaming.contract.spark_schema import JSON_SCHEMA, typed_schema
    txs = transactions(evs, table_filter=TableFilter(["shop.items"]))
    cols = _columns()
    builder = BatchBuilder(typed_schema(cols), cols) if typed else BatchBuilder(JSON_SCHEMA)
    return pa.Table.from_batches(list(record_batches(txs, builder)), builder.arrow_schema)


def _columns():
    txs = transactions(insert_tx(1, "a"))
    return txs[0].rows_events[0].table.columns


def _upserter(root, calls=None, fail=False):
    from streaming.sinks.delta.upserter import DeltaUpserter, TableInfo

    def columns(db, table):
        if calls is not None:
            calls.append((db, table))
        if fail:
            raise AssertionError("the table definition is not needed")
        return TableInfo(_columns(), ["id"])
    return DeltaUpserter(str(root), app_id="t-app", columns=columns)


def _delta(root):
    from deltalake import DeltaTable
    t = DeltaTable(str(root / "shop" / "items"))
    return sorted((r["id"], r["name"]) for r in t.to_pyarrow_table().to_pylist())


def _history(root) -> list[int]:
    from deltalake import DeltaTable
    return [int(h["binlog_cdc.batch_id"]) for h in reversed(DeltaTable(
        str(root / "shop" / "items")).history()) if "binlog_cdc.batch_id" in h]


def _version(root):
    from deltalake import DeltaTable
    return DeltaTable(str(root / "shop" / "items")).transaction_version("t-app")


def _tx(*evs) -> list[bytes]:
    return [query("BEGIN"), table_map(77, "shop", "items"), *evs, xid(1)]


def _trunc(gno: int = 9) -> list[bytes]:
    return [mysql_gtid(gno), query("TRUNCATE TABLE items")]


def _delete_rows(table_id: int, *rows: tuple) -> bytes:
    return event(EventType.DELETE_ROWS, rows_v2_body(table_id, 2,
                                                     b"".join(_row(*r) for r in rows)))


@pytest.mark.parametrize("typed", [False, True], ids=["json", "typed"])
def test_delta_truncate_inside_one_batch_supersedes_what_came_before(tmp_path, typed):
    pytest.importorskip("deltalake")
    root = tmp_path / "delta"
    up = _upserter(root)
    up.upsert_arrow(_arrow(_tx(write_rows(77, (1, "a"), (2, "b"), (7, "g"))), typed), 0)
    assert _delta(root) == [(1, "a"), (2, "b"), (7, "g")]
    evs = [*_tx(write_rows(77, (3, "c")), update_rows(77, ((1, "a"), (1, "A")))), *_trunc(),
           *_tx(write_rows(77, (4, "d"), (5, "e"), (1, "z"))),
           *_tx(update_rows(77, ((4, "d"), (4, "x"))), _delete_rows(77, (5, "e")))]
    changes_ = _arrow(evs, typed)
    assert changes_.column("op").to_pylist() == ["c", "u", "t", "c", "c", "c", "u", "d"]
    # the order of the rows in the batch does not matter: seq does
    reversed_ = changes_.take(list(range(changes_.num_rows - 1, -1, -1)))
    assert up.upsert_arrow(reversed_, 1) == {"shop.items": 4}    # 3 keys + the truncate
    assert _delta(root) == [(1, "z"), (4, "x")]
    assert _history(root)[-1] == 1 and _version(root) == 1
    # replayed: skipped, unchanged
    assert up.upsert_arrow(changes_, 1) == {"shop.items": 0}
    assert _delta(root) == [(1, "z"), (4, "x")]


def test_delta_truncates_across_batches_exactly_once(tmp_path):
    pytest.importorskip("deltalake")
    root = tmp_path / "delta"
    up = _upserter(root)
    up.upsert_arrow(_arrow(_tx(write_rows(77, (1, "a"), (2, "b"), (3, "c"))), False), 0)
    up.upsert_arrow(_arrow([*_trunc(), *_tx(write_rows(77, (4, "d")))], False), 1)
    assert _delta(root) == [(4, "d")]
    # a batch of only a truncate: no table definition needed
    calls = []
    up2 = _upserter(root, calls, fail=True)
    assert up2.upsert_arrow(_arrow(_trunc(), False), 2) == {"shop.items": 1}
    assert _delta(root) == [] and calls == []
    # again, on the empty table: still recorded
    assert up2.upsert_arrow(_arrow(_trunc(10), False), 3) == {"shop.items": 1}
    assert _delta(root) == []
    assert _history(root) == [0, 1, 2, 3] and _version(root) == 3
    up.upsert_arrow(_arrow(_tx(write_rows(77, (5, "e"))), False), 4)
    assert up.upsert_arrow(_arrow(_trunc(), False), 3) == {"shop.items": 0}    # replayed: skipped
    assert _delta(root) == [(5, "e")] and _history(root) == [0, 1, 2, 3, 4]


def test_delta_truncate_of_a_table_not_yet_in_delta(tmp_path):
    pytest.importorskip("deltalake")
    root = tmp_path / "delta"
    up = _upserter(root, fail=True)
    assert up.upsert_arrow(_arrow([*_tx(write_rows(77, (1, "a"))), *_trunc()], False), 0) \
        == {"shop.items": 0}
    assert not (root / "shop" / "items").exists()
    up = _upserter(root)
    up.upsert_arrow(_arrow([*_trunc(), *_tx(write_rows(77, (2, "b")))], True), 1)
    assert _delta(root) == [(2, "b")] and _history(root) == [1]


def test_typed_snapshot_rows_have_a_null_before_struct():
    """op r (snapshot) rows: before is null, not a struct of nulls (same mask as c and t)."""
    pytest.importorskip("pyspark")
    from streaming.source.batches import BatchBuilder, record_batches
    from streaming.contract.spark_schema import typed_schema
    cols = _columns()
    tmap = transactions(insert_tx(1, "a"))[0].rows_events[0].table

    class Read:             # a snapshot chunk's rows, as streaming.source.snapshot hands them over
        kind, partial, present_after = "read", False, None
        table, rows, present = tmap, [(1, "a"), (2, "b")], range(2)

        def decode_rows(self):
            return self.rows

        def decode_columns(self, out, after_out=None):
            from cdc.rows.decode import append_columns
            return append_columns(self.rows, False, out, after_out)

    class Chunk:
        file, pos, gtid, xid, server_id, timestamp = FILE, 999, None, None, None, TS
        tables_by_name: dict = {}
        rows_events = [Read()]

    rows = [r for b in record_batches([Chunk()], BatchBuilder(typed_schema(cols), cols))
            for r in b.to_pylist()]
    assert [(r["op"], r["before"], r["after"]) for r in rows] == [
        ("r", None, {"id": 1, "name": "a"}), ("r", None, {"id": 2, "name": "b"})]
