"""Schema-change records (issue 15 item 5): each DDL statement that changes a captured table gives
one record per changed table, built from what the schema history applied (cdc.schema.changes):
type, ddl, renamed_from, renamed_columns, the new columns (type text, nullability, charset,
DEFAULT in the row images' JSON form) and key, unsure; carried by transactions in binlog order
(op 's'), printed by the CLI and made into Arrow rows by the Spark source's BatchBuilder."""

from __future__ import annotations

import json

import pytest

from support.binlog_builder import FDE_8020, binlog_file, event, query_body, xid_body
from cdc.binlog.constants import EventType
from cdc.binlog.events import QueryEvent
from cdc.binlog.parser import iter_events
from cdc.binlog.transactions import TransactionAssembler
from cdc.replica.metadata import server_column, server_default
from cdc.schema import SchemaHistory, TableSchema
from cdc.schema.changes import default_json

FILE = "binlog.000004"


def history(**kw) -> SchemaHistory:
    h = SchemaHistory(captures=kw.pop("captures", lambda name: name.startswith("d.")), **kw)
    h.seed({}, {"d": 45})
    return h


class Run:
    """Statements applied one after another; the records of each, as JSON objects."""

    def __init__(self, h=None):
        self.h = h or history()
        self.pos = 100

    def __call__(self, sql: str, schema: str = "d") -> list[dict]:
        self.pos += 100
        self.h.apply(sql, schema=schema, file=FILE, pos=self.pos)
        self.records = self.h.last_changes
        return [dict(json.loads(r.to_json()), _table=f"{r.db}.{r.table}") for r in self.records]


def cols(rec: dict) -> list[tuple]:
    return [(c["name"], c["type"], c["nullable"], c["charset"], c["default"], c["default_expr"])
            for c in rec["columns"]]


def test_create_table_record_with_every_column_attribute():
    run = Run()
    (rec,) = run("CREATE TABLE t (id BIGINT UNSIGNED NOT NULL AUTO_INCREMENT, "
                 "name VARCHAR(20) CHARACTER SET latin1 NOT NULL DEFAULT 'it''s', "
                 "price DECIMAL(10,2) DEFAULT 1.5, n INT DEFAULT -3, f DOUBLE DEFAULT 2.5e1, "
                 "flag BOOL DEFAULT TRUE, d DATE DEFAULT '2024-02-29', "
                 "dt DATETIME(3) DEFAULT '2024-01-02 03:04:05.5', "
                 "ts TIMESTAMP NULL DEFAULT CURRENT_TIMESTAMP, "
                 "made DATETIME DEFAULT NOW(), calc INT DEFAULT (1 + 2), "
                 "b BINARY(4) DEFAULT 'ab', vb VARBINARY(8) DEFAULT 0x4142, bits BIT(5) "
                 "DEFAULT b'101', e ENUM('x','y') DEFAULT 'y', s SET('p','q') DEFAULT 'p,q', "
                 "tm TIME DEFAULT '10:11:12', nul TEXT DEFAULT NULL, "
                 "PRIMARY KEY (id)) DEFAULT CHARSET=utf8mb4")
    assert list(rec)[:7] == ["type", "ddl", "renamed_from", "renamed_columns", "columns",
                             "primary_key", "unsure"]
    assert rec["_table"] == "d.t" and rec["type"] == "CREATE" and rec["unsure"] is False
    assert rec["ddl"].startswith("CREATE TABLE t (id BIGINT UNSIGNED")
    assert rec["renamed_from"] is None and rec["renamed_columns"] == {}
    assert rec["primary_key"] == ["id"]
    assert cols(rec) == [
        ("id", "bigint unsigned", False, None, None, False),
        ("name", "varchar(20)", False, "latin1", "it's", False),
        ("price", "decimal(10,2)", True, None, 1.5, False),
        ("n", "int", True, None, -3, False),
        ("f", "double", True, None, 25.0, False),
        ("flag", "tinyint(1)", True, None, 1, False),
        ("d", "date", True, None, "2024-02-29", False),
        ("dt", "datetime(3)", True, None, "2024-01-02T03:04:05.500000", False),
        ("ts", "timestamp", True, None, None, True),
        ("made", "datetime", True, None, None, True),
        ("calc", "int", True, None, None, True),
        ("b", "binary(4)", True, None, "YWIAAA==", False),      # 'ab\0\0' in base64
        ("vb", "varbinary(8)", True, None, "QUI=", False),
        ("bits", "bit(5)", True, None, 5, False),
        ("e", "enum('x','y')", True, "utf8mb4", "y", False),
        ("s", "set('p','q')", True, "utf8mb4", "p,q", False),
        ("tm", "time", True, None, "10:11:12", False),
        ("nul", "text", True, "utf8mb4", None, False)]
    # a decimal default keeps every digit of its scale: 1.50, not 1.5 (the JSON text)
    assert '"default": 1.50,' in run.records[0].to_json()


def test_alter_table_column_actions():
    run = Run()
    run("CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(5), b INT, c INT DEFAULT 4)")
    (rec,) = run("ALTER TABLE t ADD COLUMN z INT NOT NULL DEFAULT 0 FIRST, "
                 "ADD y CHAR(2) AFTER id, DROP COLUMN b")
    assert rec["type"] == "ALTER" and rec["renamed_columns"] == {}
    assert [c[:3] for c in cols(rec)] == [("z", "int", False), ("id", "int", False),
                                          ("y", "char(2)", True), ("a", "varchar(5)", True),
                                          ("c", "int", True)]
    (rec,) = run("ALTER TABLE t MODIFY a VARCHAR(50) NOT NULL AFTER z, "
                 "CHANGE COLUMN c c2 BIGINT DEFAULT 7, RENAME COLUMN y TO y2")
    assert rec["renamed_columns"] == {"c": "c2", "y": "y2"}
    assert cols(rec) == [("z", "int", False, None, 0, False),
                         ("a", "varchar(50)", False, "utf8mb4", None, False),
                         ("id", "int", False, None, None, False),
                         ("y2", "char(2)", True, "utf8mb4", None, False),
                         ("c2", "bigint", True, None, 7, False)]
    (rec,) = run("ALTER TABLE t ALTER COLUMN z SET DEFAULT 5, ALTER c2 DROP DEFAULT")
    assert [(c[0], c[4]) for c in cols(rec)][::4] == [("z", 5), ("c2", None)]
    # CHANGE that keeps the name is no rename
    (rec,) = run("ALTER TABLE t CHANGE a a VARCHAR(60)")
    assert rec["renamed_columns"] == {}


def test_primary_key_changes_and_the_unique_key_fallback():
    run = Run()
    (rec,) = run("CREATE TABLE t (id INT NOT NULL, u INT NOT NULL, v INT, UNIQUE KEY uk (u))")
    assert rec["primary_key"] == ["u"]          # no primary key: the UNIQUE NOT NULL key
    (rec,) = run("ALTER TABLE t ADD PRIMARY KEY (v, id)")
    assert rec["primary_key"] == ["v", "id"]
    assert [c[2] for c in cols(rec)] == [False, False, False]     # key columns are NOT NULL
    (rec,) = run("ALTER TABLE t DROP PRIMARY KEY")
    assert rec["primary_key"] == ["u"]          # back to the UNIQUE NOT NULL key
    (rec,) = run("ALTER TABLE t DROP INDEX uk")
    assert rec["primary_key"] == []


def test_convert_to_character_set_changes_the_text_columns():
    run = Run()
    run("CREATE TABLE t (id INT PRIMARY KEY, a VARCHAR(10), b TEXT, c VARBINARY(3)) "
        "CHARACTER SET latin1")
    (rec,) = run("ALTER TABLE t CONVERT TO CHARACTER SET utf8mb4")
    assert [(c[0], c[1], c[3]) for c in cols(rec)] == [
        ("id", "int", None), ("a", "varchar(10)", "utf8mb4"), ("b", "mediumtext", "utf8mb4"),
        ("c", "varbinary(3)", None)]


def test_rename_table_alter_rename_swap_create_like_and_drop():
    run = Run()
    run("CREATE TABLE a (id INT PRIMARY KEY)")
    run("CREATE TABLE b (id INT PRIMARY KEY, x INT)")
    (rec,) = run("RENAME TABLE a TO a2")
    assert (rec["_table"], rec["type"], rec["renamed_from"]) == ("d.a2", "RENAME", "d.a")
    assert cols(rec)[0][0] == "id"
    (rec,) = run("ALTER TABLE a2 RENAME TO a3, ADD COLUMN y INT")
    assert (rec["_table"], rec["type"], rec["renamed_from"]) == ("d.a3", "ALTER", "d.a2")
    assert [c[0] for c in cols(rec)] == ["id", "y"]
    recs = run("RENAME TABLE a3 TO tmp, b TO a3, tmp TO b")      # a swap: two records
    assert sorted((r["_table"], r["renamed_from"], len(r["columns"])) for r in recs) == [
        ("d.a3", "d.b", 2), ("d.b", "d.a3", 2)]
    (rec,) = run("CREATE TABLE c LIKE b")
    assert (rec["_table"], rec["type"], [c[0] for c in cols(rec)]) == ("d.c", "CREATE",
                                                                       ["id", "y"])
    recs = run("DROP TABLE IF EXISTS b, c, nosuch")
    assert [(r["_table"], r["type"], r["columns"], r["primary_key"]) for r in recs] == [
        ("d.b", "DROP", None, []), ("d.c", "DROP", None, [])]
    (rec,) = run("CREATE TABLE other.t (id INT)", schema="other") or [None]
    assert rec is None                          # not a captured table: no record


def test_statements_that_change_no_captured_shape_make_no_record():
    run = Run()
    run("CREATE TABLE t (id INT PRIMARY KEY, a INT)")
    for sql in ("ALTER TABLE t ENGINE=InnoDB", "ALTER TABLE t ADD INDEX ia (a)",
                "CREATE INDEX ib ON t (a)", "ALTER TABLE t COMMENT 'x'",
                "GRANT SELECT ON d.* TO 'u'@'%'", "TRUNCATE TABLE t", "OPTIMIZE TABLE t",
                "ALTER TABLE t PARTITION BY HASH (id) PARTITIONS 2"):
        assert run(sql) == [], sql


def test_unsure_records():
    # unparsable DDL with on_unparsed_ddl=reseed at the binlog's end: the table is read again
    reread = TableSchema((server_column(("id", "int", "int(11)", None, None, "PRI", None)),),
                         None, ("id",), (), "information_schema")
    run = Run(history(on_unparsed="reseed", read_table=lambda db, t: reread,
                      at_end=lambda f, p: True))
    run("CREATE TABLE t (id INT PRIMARY KEY, a INT)")
    (rec,) = run("ALTER TABLE t FROBNICATE a")
    assert rec["unsure"] is True and rec["type"] == "ALTER"
    assert [c[0] for c in cols(rec)] == ["id"]
    # not at the end: the shape is unknown from there
    run = Run(history(on_unparsed="reseed"))
    run("CREATE TABLE t (id INT PRIMARY KEY)")
    (rec,) = run("ALTER TABLE t FROBNICATE a")
    assert (rec["unsure"], rec["columns"], rec["primary_key"]) == (True, None, [])
    # skip: no record (the history keeps the previous shape)
    run = Run(history(on_unparsed="skip"))
    run("CREATE TABLE t (id INT PRIMARY KEY)")
    assert run("ALTER TABLE t FROBNICATE a") == []


@pytest.mark.parametrize("text, extra, version, data_type, expected", [
    (None, "", "10.11.6-MariaDB", "int", None),
    ("NULL", "", "10.11.6-MariaDB", "varchar", None),
    ("'NULL'", "", "10.11.6-MariaDB", "varchar", ("str", "NULL")),
    ("'it''s'", "", "10.11.6-MariaDB", "varchar", ("str", "it's")),
    ("5", "", "10.11.6-MariaDB", "int", ("num", "5")),
    ("-1.50", "", "10.11.6-MariaDB", "decimal", ("num", "-1.50")),
    ("b'101'", "", "10.11.6-MariaDB", "bit", ("bit", "101")),
    ("current_timestamp()", "", "10.11.6-MariaDB", "timestamp", ("expr", "current_timestamp()")),
    ("abc", "", "8.4.3", "varchar", ("str", "abc")),
    ("5", "", "8.4.3", "varchar", ("str", "5")),
    ("5", "", "8.4.3", "int", ("num", "5")),
    ("CURRENT_TIMESTAMP", "DEFAULT_GENERATED", "8.4.3", "timestamp",
     ("expr", "CURRENT_TIMESTAMP")),
    ("(rand())", "DEFAULT_GENERATED", "8.4.3", "double", ("expr", "(rand())")),
    ("0x4142", "", "8.4.3", "varbinary", ("hex", "4142")),
])
def test_information_schema_defaults(text, extra, version, data_type, expected):
    assert server_default(text, extra, version, data_type) == expected


def test_seeded_and_ddl_defaults_render_alike():
    """A column read from information_schema and the same column from DDL: one JSON default."""
    seeded = server_column(("p", "decimal", "decimal(6,2)", None, None, "", None, 6, 2, None,
                            "YES", "1.50", "", "10.11.6-MariaDB"))
    run = Run()
    (rec,) = run("CREATE TABLE t (p DECIMAL(6,2) DEFAULT 1.5)")
    assert default_json(seeded) == default_json(run.records[0].columns[0]) == ("1.50", False)


# --- in the stream ---------------------------------------------------------------------------------

def _query(text: str) -> bytes:
    return event(EventType.QUERY, query_body(text, "d"))


def _stream(statements: list[str]):
    """The statements as binlog events, through a history and the assembler as the replica
    client does it (records handed over before the QUERY event is pushed)."""
    h = history()
    asm = TransactionAssembler()
    txs = []
    for ev in iter_events(binlog_file([FDE_8020] + [_query(s) for s in statements]), file=FILE):
        if type(ev) is QueryEvent and h.apply_event(ev):
            asm.schema_changed(ev, h.last_changes)
        tx = asm.push(ev)
        if tx is not None:
            txs.append(tx)
    return txs


def test_transactions_carry_the_records_in_order_and_the_cli_prints_them():
    from cdc.cli.changes import change_json
    from cdc.cli.tail import change_text
    txs = _stream(["CREATE TABLE t (id INT PRIMARY KEY, a INT)", "TRUNCATE TABLE t",
                   "ALTER TABLE t RENAME COLUMN a TO b", "GRANT SELECT ON *.* TO 'u'@'%'"])
    changes = [c for tx in txs for c in tx.changes()]
    assert [(c.op, c.table, c.key(), c.before, c.after) for c in changes] == [
        ("s", "t", None, None, None), ("t", "t", None, None, None),
        ("s", "t", None, None, None)]
    assert [tx.change_count() for tx in txs] == [1, 1, 1, 0]
    line = json.loads(change_json(changes[2]))
    assert line["op"] == "s" and line["schema_change"]["renamed_columns"] == {"a": "b"}
    assert line["pos"] == txs[2].pos and "schema_change" not in json.loads(
        change_json(changes[1]))
    text = change_text(changes[2])
    assert " SCHEMA ALTER d.t [binlog.000004:" in text
    assert text.endswith("(id int, b int) key=(id): ALTER TABLE t RENAME COLUMN a TO b")


def test_batch_builder_rows_for_schema_changes():
    pytest.importorskip("pyspark")
    from streaming.source.batches import BatchBuilder, record_batches
    from streaming.contract.spark_schema import JSON_SCHEMA, with_schema_changes
    txs = _stream(["CREATE TABLE t (id INT PRIMARY KEY)", "DROP TABLE t"])
    rows = [r for b in record_batches(txs, BatchBuilder(with_schema_changes(JSON_SCHEMA)))
            for r in b.to_pylist()]
    assert [(r["op"], r["db"], r["table"], r["before"], r["after"], r["key"]) for r in rows] == [
        ("s", "d", "t", None, None, None), ("s", "d", "t", None, None, None)]
    q = [tx.queries[0] for tx in txs]
    assert [(r["source"]["pos"], r["source"]["row"], r["seq"]) for r in rows] == [
        (q[0].pos, 0, "0000000004:%012d:0000000000" % q[0].pos),
        (q[1].pos, 0, "0000000004:%012d:0000000000" % q[1].pos)]
    assert [json.loads(r["schema_change"])["type"] for r in rows] == ["CREATE", "DROP"]
    assert rows[0]["ts_ms"] == q[0].timestamp * 1000
    # without the option: no rows, the schema is unchanged
    assert list(record_batches(txs, BatchBuilder(JSON_SCHEMA))) == []


def test_typed_mode_stops_only_at_a_change_after_its_shape_was_read():
    pytest.importorskip("pyspark")
    from cdc.errors import SchemaError, ShapeChangedError
    from streaming.source.batches import BatchBuilder, record_batches
    from streaming.contract.spark_schema import typed_schema
    txs = _stream(["CREATE TABLE k (id INT PRIMARY KEY)", "ALTER TABLE k ADD COLUMN a INT",
                   "ALTER TABLE k ADD COLUMN b INT"])
    shapes = [[c.column_def(i) for i, c in enumerate(tx.schema_changes[0].change.columns)]
              for tx in txs]
    alter_a = txs[1].queries[0]

    def run(cols, point):
        b = BatchBuilder(typed_schema(cols), cols, table="d.k", schema_point=point)
        return list(record_batches(txs, b))

    # a query that read the shape (id) before the ALTERs: stops at the first, naming it
    with pytest.raises(ShapeChangedError) as e:      # (a SchemaError the job restarts on)
        run(shapes[0], (FILE, txs[1].pos))
    assert f"the DDL statement at {FILE}:{alter_a.pos} changes the table's shape: " \
           f"'ALTER TABLE k ADD COLUMN a INT'" in str(e.value)
    assert "the table now has (id int, a int)" in str(e.value)
    # restarted after both ALTERs (its shape read at the end): the replayed DDL is no change
    assert run(shapes[2], (FILE, txs[2].end_pos)) == []
    # a shape read between them: only the second ALTER stops it
    with pytest.raises(ShapeChangedError) as e:
        run(shapes[1], (FILE, txs[2].pos))
    assert "ADD COLUMN b INT" in str(e.value)
    # no known point: every statement is checked (the CREATE makes a shape that is not the
    # stream's)
    with pytest.raises(SchemaError):
        run(shapes[2], None)


def test_a_statement_with_bytes_invalid_in_its_charset_gives_utf8_safe_json():
    run = Run()
    (rec,) = run("CREATE TABLE t (id INT PRIMARY KEY COMMENT 'caf\udce9')")     # surrogateescape
    text = run.records[0].to_json()
    text.encode("utf-8")                 # Arrow/Spark take it
    assert json.loads(text)["ddl"].endswith("COMMENT 'caf\udce9')")
