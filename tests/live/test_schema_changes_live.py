"""Schema-change records (issue 15 item 5) on a real MariaDB, under binlog_row_metadata FULL and
NO_LOG: a Spark stream with includeSchemaChanges=true delivers each DDL statement on a captured
table as an op 's' row, in seq order between the DML rows, each DML row carrying the columns of
its own time; the records' columns are what information_schema showed right after each
statement; typed mode stops at a DDL that changes its table's shape, naming the statement and
its position, and a restart continues exactly once with the new schema; ``tail
--schema-changes`` prints the records."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("pyspark")


from support.spark_support import source_options  # noqa: E402

pytestmark = [pytest.mark.server, pytest.mark.spark]


@pytest.fixture
def server(metadata_server):
    return metadata_server


_dbs = iter(range(1, 1000))


@pytest.fixture
def sdb(server):
    name = f"sc{next(_dbs)}"
    server.execute(f"DROP DATABASE IF EXISTS {name}")
    server.execute(f"CREATE DATABASE {name} CHARACTER SET utf8mb4")
    yield name
    server.execute(f"DROP DATABASE IF EXISTS {name}")


def _columns_now(server, db, table) -> list[tuple]:
    """(name, type, nullable) of the table as information_schema shows it now."""
    rows = server.execute(
        "SELECT COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE FROM information_schema.COLUMNS WHERE "
        "TABLE_SCHEMA = %s AND TABLE_NAME = %s ORDER BY ORDINAL_POSITION", (db, table))
    import re
    return [(n, re.sub(r"^(smallint|int|bigint)\(\d+\)", r"\1", t), nl == "YES")
            for n, t, nl in rows]


class Workload:
    """Runs DDL and DML; records what the stream must show: per DDL the table and the columns
    information_schema has right after it, per DML the column names of the row."""

    def __init__(self, server, db):
        self.server, self.db = server, db
        self.expected: list[tuple] = []

    def ddl(self, sql: str, table: str, columns: bool = True) -> None:
        self.server.execute(sql, database=self.db)
        cols = _columns_now(self.server, self.db, table) if columns else None
        self.expected.append(("s", table, cols))

    def dml(self, sql: str, table: str, op: str) -> None:
        self.server.execute(sql, database=self.db)
        names = [r[0] for r in _columns_now(self.server, self.db, table)]
        self.expected.append((op, table, names))


def shown(rows) -> list[tuple]:
    """The rows as :class:`Workload` expects them: ``("s", table, [(name, type, nullable)] or
    None)`` per schema-change record, ``("t", table, None)`` per TRUNCATE, ``(op, table, column
    names)`` per row change."""
    got = []
    for r in rows:
        if r.op == "s":
            sc = json.loads(r.schema_change)
            cols = None if sc["columns"] is None else \
                [(c["name"], c["type"], c["nullable"]) for c in sc["columns"]]
            assert (r.before, r.after, r.key, r.source.row) == (None, None, None, 0)
            got.append(("s", r.table, cols))
        elif r.op == "t":
            assert r.schema_change is None
            got.append(("t", r.table, None))
        else:
            assert r.schema_change is None
            got.append((r.op, r.table, list(json.loads(r.after or r.before))))
    return got


def run_workload(w: Workload) -> None:
    w.ddl("CREATE TABLE t (id INT NOT NULL PRIMARY KEY, a VARCHAR(10) DEFAULT 'x')", "t")
    w.dml("INSERT INTO t VALUES (1, 'one')", "t", "c")
    w.ddl("ALTER TABLE t ADD COLUMN b INT NOT NULL DEFAULT 5 AFTER id", "t")
    w.dml("INSERT INTO t (id, a) VALUES (2, 'two')", "t", "c")
    w.ddl("ALTER TABLE t RENAME COLUMN a TO a2, MODIFY b BIGINT NULL FIRST", "t")
    w.dml("UPDATE t SET a2 = 'uno' WHERE id = 1", "t", "u")
    w.ddl("ALTER TABLE t DROP PRIMARY KEY, ADD PRIMARY KEY (id, a2)", "t")
    w.ddl("ALTER TABLE t CONVERT TO CHARACTER SET latin1", "t")
    w.ddl("RENAME TABLE t TO t2", "t2")
    w.dml("INSERT INTO t2 (b, id, a2) VALUES (9, 3, 'three')", "t2", "c")
    w.ddl("CREATE TABLE u LIKE t2", "u")
    w.dml("DELETE FROM t2 WHERE id = 2", "t2", "d")
    w.ddl("DROP TABLE u", "u", columns=False)
    w.server.execute("TRUNCATE TABLE t2", database=w.db)
    w.expected.append(("t", "t2", None))
    w.server.execute("FLUSH TABLES")           # not DDL of a table: nothing


@pytest.mark.compat("schema changes")
def test_stream_delivers_schema_changes_between_the_rows(spark, server, sdb, tmp_path):
    start = server.current_position()
    w = Workload(server, sdb)
    run_workload(w)
    rows = []

    def fb(df, batch_id):
        assert df.columns[-1] == "schema_change"
        rows.extend(df.collect())

    reader = spark.readStream.format("binlog-cdc")
    for k, v in source_options(server, sdb, start, includeSchemaChanges="true").items():
        reader = reader.option(k, v)
    q = (reader.load().writeStream.foreachBatch(fb)
         .option("checkpointLocation", str(tmp_path / "chk")).trigger(availableNow=True).start())
    assert q.awaitTermination(180), "availableNow query did not stop in 180 s"
    assert q.exception() is None, q.exception()
    rows.sort(key=lambda r: r.seq)
    assert shown(rows) == w.expected
    records = [json.loads(r.schema_change) for r in rows if r.op == "s"]
    assert [r["type"] for r in records] == ["CREATE", "ALTER", "ALTER", "ALTER", "ALTER",
                                            "RENAME", "CREATE", "DROP"]
    assert not any(r["unsure"] for r in records)
    assert records[2]["renamed_columns"] == {"a": "a2"}
    assert records[5]["renamed_from"] == f"{sdb}.t"
    assert [r["primary_key"] for r in records[:4]] == [["id"], ["id"], ["id"], ["id", "a2"]]
    assert [(c["name"], c["default"], c["charset"]) for c in records[1]["columns"]] == [
        ("id", None, None), ("b", 5, None), ("a", "x", "utf8mb4")]
    assert records[4]["columns"][2]["charset"] == "latin1"
    assert records[7]["columns"] is None and records[7]["ddl"].startswith("DROP TABLE")


def _run_until_idle(spark, options: dict, checkpoint, batches: dict) -> None:
    """The stream under processingTime until everything there is was processed (PySpark 4.0/4.1
    run availableNow as one batch): each batch's rows into *batches* by batch id, a replayed
    batch's in place of what it delivered the first time, which they must equal."""
    def keep(df, batch_id):
        rows = sorted(df.collect(), key=lambda r: r.seq)
        if batch_id in batches:
            assert shown(rows) == shown(batches[batch_id]), f"batch {batch_id} replayed otherwise"
        batches[batch_id] = rows

    q = (spark.readStream.format("binlog-cdc").options(**options).load().writeStream
         .foreachBatch(keep).option("checkpointLocation", str(checkpoint))
         .trigger(processingTime="0 seconds").start())
    try:
        q.processAllAvailable()
    finally:
        q.stop()
    assert q.exception() is None, q.exception()


def _uncommit_last(checkpoint) -> int:
    """Forget Spark's commit of the last batch, as a query killed after its sink wrote the batch
    and before Spark's commit: a restart replays it. Its id."""
    last = max(int(p.name) for p in (checkpoint / "commits").glob("[0-9]*"))
    (checkpoint / "commits" / str(last)).unlink()
    (checkpoint / "commits" / f".{last}.crc").unlink(missing_ok=True)
    return last


@pytest.mark.compat("schema changes")
def test_restarted_queries_deliver_each_ddl_with_its_columns(spark, server, sdb, tmp_path):
    """Restarts from the checkpoint, each replaying the last batch (as after a kill between the
    sink's write and Spark's commit): the table altered while the query was down, then the batch
    holding those ALTERs replayed. Every schema-change record has the columns information_schema
    showed right after its statement (a record without them is one a sink must refuse), every
    row the columns of its time, each once."""
    start = server.current_position()
    w = Workload(server, sdb)
    w.ddl("CREATE TABLE a (id INT PRIMARY KEY, name VARCHAR(20))", "a")
    w.dml("INSERT INTO a VALUES (1, 'x')", "a", "c")
    opts = source_options(server, sdb, start, includeSchemaChanges="true")
    chk, batches = tmp_path / "chk", {}
    _run_until_idle(spark, opts, chk, batches)
    w.dml("INSERT INTO a VALUES (2, 'y')", "a", "c")
    _run_until_idle(spark, opts, chk, batches)
    _uncommit_last(chk)
    w.ddl("ALTER TABLE a ADD COLUMN qty INT NOT NULL DEFAULT 5", "a")
    w.dml("INSERT INTO a VALUES (3, 'z', 3)", "a", "c")
    w.ddl("ALTER TABLE a RENAME COLUMN name TO title", "a")
    w.dml("UPDATE a SET title = 'zz' WHERE id = 3", "a", "u")
    _run_until_idle(spark, opts, chk, batches)          # the replay, then the ALTERs' batch(es)
    replayed = _uncommit_last(chk)
    assert any(r.op == "s" for r in batches[replayed]), "the last batch holds no ALTER"
    _run_until_idle(spark, opts, chk, batches)
    assert shown(r for _, rows in sorted(batches.items()) for r in rows) == w.expected


def test_without_the_option_nothing_changes(spark, server, sdb):
    start = server.current_position()
    w = Workload(server, sdb)
    run_workload(w)
    opts = source_options(server, sdb, start, endingPosition="latest")
    df = spark.read.format("binlog-cdc").options(**opts).load()
    assert "schema_change" not in df.columns
    assert [r.op for r in df.orderBy("seq").collect()] == \
        [e[0] for e in w.expected if e[0] != "s"]


@pytest.mark.compat("schema changes")
def test_typed_mode_stops_at_a_change_of_its_table_then_restarts_with_the_new_shape(
        spark, server, sdb, tmp_path):
    server.execute(f"CREATE TABLE {sdb}.k (id INT PRIMARY KEY, v VARCHAR(5))")
    start = server.current_position()
    server.execute(f"INSERT INTO {sdb}.k VALUES (1, 'a')")
    opts = source_options(server, sdb, start, table=f"{sdb}.k")
    del opts["includeTables"]
    seen = []

    def run(df):
        q = (df.writeStream.foreachBatch(lambda df, b: seen.extend(df.collect()))
             .option("checkpointLocation", str(tmp_path / "chk"))
             .trigger(availableNow=True).start())
        try:
            assert q.awaitTermination(180), "availableNow query did not stop in 180 s"
        except Exception as e:      # StreamingQueryException: the query failed
            return e
        return q.exception()

    # the query's schema is the table's shape when it is defined: before the ALTER
    df = spark.readStream.format("binlog-cdc").options(**opts).load()
    assert df.schema["after"].dataType.fieldNames() == ["id", "v"]
    before = server.current_position()
    server.execute(f"ALTER TABLE {sdb}.k ADD COLUMN n INT")
    server.execute(f"INSERT INTO {sdb}.k VALUES (2, 'b', 7)")
    events = server.execute(f"SHOW BINLOG EVENTS IN '{before[0]}' FROM {before[1]}")
    alter_pos = next(r[1] for r in events if "ADD COLUMN n" in str(r[5]))
    err = run(df)
    assert err is not None and seen == []
    text = str(err)
    if server.execute("SELECT @@binlog_row_metadata")[0][0] != "FULL":
        # NO_LOG: the query reads the history from information_schema when it starts (after
        # the ALTER), which describes the table only from the ALTER on: the first insert's
        # table map stops the stream with a SchemaError naming the table and that statement
        assert f"the TABLE_MAP of {sdb}.k at file " in text
        assert "lacks column metadata" in text and "changed by the statement ending at" in text
        return
    assert f"typed mode (table={sdb}.k): the DDL statement at " in text
    assert f":{alter_pos} changes the table's shape" in text
    assert "ADD COLUMN n INT" in text and "Restart the query" in text
    from cdc.errors import ShapeChangedError
    from streaming.apps.runtime import cdc_error
    assert isinstance(cdc_error(err), ShapeChangedError)   # what the job restarts on
    # restarted (the same checkpoint): the new shape, from the failed batch on, exactly once
    assert run(spark.readStream.format("binlog-cdc").options(**opts).load()) is None
    assert [(r.op, r.after.asDict()) for r in sorted(seen, key=lambda r: r.seq)] == [
        ("c", {"id": 1, "v": "a", "n": None}), ("c", {"id": 2, "v": "b", "n": 7})]


def test_tail_prints_schema_changes(server, sdb, capsys, monkeypatch):
    from cdc.cli.main import main
    start = server.current_position()
    w = Workload(server, sdb)
    run_workload(w)
    p = server.cdc_params()
    monkeypatch.setenv("BINLOG_CDC_PASSWORD", p["password"])
    base = ["tail", "--host", p["host"], "--port", str(p["port"]), "--user", p["user"],
            "--server-id", "7312", "--non-blocking", "--file", start[0], "--pos", str(start[1]),
            "--tables", f"{sdb}.*", "--on-unparsed-ddl", "fail"]
    assert main(base + ["--format", "jsonl", "--schema-changes"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(l["op"], l["table"]) for l in lines] == [(e[0], e[1]) for e in w.expected]
    sc = [l["schema_change"] for l in lines if l["op"] == "s"]
    assert [s["type"] for s in sc] == ["CREATE", "ALTER", "ALTER", "ALTER", "ALTER", "RENAME",
                                       "CREATE", "DROP"]
    assert [(c["name"], c["type"]) for c in sc[-2]["columns"]] == \
        [(n, t) for n, t, _ in w.expected[-4][2]]
    assert main(base + ["--schema-changes"]) == 0
    text = capsys.readouterr().out.splitlines()
    assert sum(" SCHEMA " in line for line in text) == 8
    assert any(f"SCHEMA RENAME {sdb}.t2 [" in line and f"from {sdb}.t " in line and
               line.endswith(": RENAME TABLE t TO t2") for line in text)
    assert main(base) == 0                                   # without the flag: no DDL lines
    assert " SCHEMA " not in capsys.readouterr().out
