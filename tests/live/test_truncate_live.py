"""TRUNCATE TABLE end to end, on the harness's MariaDB: the issue's reproduction (after a
TRUNCATE the source held 1 row and the Delta table 3, with no error: the stream had no truncate).

A Spark stream (availableNow, foreachBatch(DeltaUpserter)) over inserts, a TRUNCATE, inserts and
updates -- the truncate inside one micro-batch with changes before and after it, and across
micro-batches (maxEventsPerTrigger=1: the truncate alone in its batch) -- ends with Delta equal to
``SELECT *``; the stream's op column has the ``t`` in binlog order; a table the options leave out
gets no truncate; ``binlog-cdc tail --format jsonl`` prints it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("deltalake")

from deltalake import DeltaTable  # noqa: E402

from streaming.sinks.delta.upserter import DeltaUpserter  # noqa: E402

from support.spark_support import source_options  # noqa: E402

pytestmark = [pytest.mark.server, pytest.mark.spark, pytest.mark.servers]

TABLE = ("CREATE TABLE `{db}`.`{t}` (id INT NOT NULL PRIMARY KEY, v VARCHAR(20) NOT NULL, "
         "n INT NULL) ENGINE=InnoDB")


def workload(mariadb, db):
    """items: 3 inserts, TRUNCATE, insert + update (ends with 1 row); other: never truncated;
    gone: an insert, then a TRUNCATE as the very last transaction (qualified, backquoted,
    MariaDB's WAIT); skip: truncated, but left out by excludeTables."""
    for t in ("items", "other", "gone", "skip"):
        mariadb.execute(TABLE.format(db=db, t=t))
    start = mariadb.current_position()
    ex = mariadb.execute
    for i in (1, 2, 3):
        ex(f"INSERT INTO `{db}`.items VALUES (%s, %s, %s)", (i, f"v{i}", i * 10))
    ex(f"INSERT INTO `{db}`.other VALUES (1, 'o1', NULL), (2, 'o2', 2)")
    ex(f"INSERT INTO `{db}`.skip VALUES (1, 's', NULL)")
    ex("/* the app's cleanup */ truncate items", database=db)     # unqualified: default db
    ex(f"INSERT INTO `{db}`.items VALUES (4, 'v4', 40)")
    ex(f"UPDATE `{db}`.items SET v = 'x', n = NULL WHERE id = 4")
    ex(f"UPDATE `{db}`.other SET v = 'o2b' WHERE id = 2")
    ex(f"TRUNCATE TABLE `{db}`.skip")
    ex(f"INSERT INTO `{db}`.gone VALUES (7, 'g', 7)")
    wait = " WAIT 5" if mariadb.FLAVOR == "mariadb" else ""   # MariaDB's lock-wait clause
    ex(f"TRUNCATE TABLE `{db}`.`gone`{wait}")
    return start


def run_stream(spark, mariadb, db, start, tmp_path: Path, **extra):
    """Stream *db* (availableNow) into Delta tables under tmp_path/delta; returns the root and
    ``[(batch_id, op, table)]`` in seq order per batch."""
    root = tmp_path / "delta"
    p = mariadb.cdc_params()
    up = DeltaUpserter(root, host=p["host"], port=p["port"], user=p["user"],
                       password=p["password"], app_id="trunc-app")
    seen = []

    def fb(df, batch_id):
        rows = df.select("op", "table", "seq", "before", "after", "key").collect()
        for r in sorted(rows, key=lambda r: r.seq):
            seen.append((batch_id, r.op, r.table))
            if r.op == "t":
                assert (r.before, r.after, r.key) == (None, None, None)
        up(df, batch_id)

    reader = spark.readStream.format("binlog-cdc")
    for k, v in source_options(mariadb, db, start, excludeTables=f"{db}.skip", **extra).items():
        reader = reader.option(k, v)
    q = (reader.load().writeStream.foreachBatch(fb)
         .option("checkpointLocation", str(tmp_path / "chk")).trigger(availableNow=True).start())
    assert q.awaitTermination(180), "availableNow query did not stop in 180 s"
    assert q.exception() is None, q.exception()
    return root, seen


def source_rows(mariadb, db, t):
    return [tuple(r) for r in mariadb.execute(f"SELECT * FROM `{db}`.`{t}` ORDER BY id")]


def delta_rows(root, db, t):
    path = root / db / t
    if not path.exists():
        return None
    tbl = DeltaTable(str(path)).to_pyarrow_table().sort_by([("id", "ascending")])
    return [(r["id"], r["v"], r["n"]) for r in tbl.to_pylist()]


def ops_of(seen, table):
    return [op for _, op, t in seen if t == table]


def test_truncate_in_one_micro_batch(spark, mariadb, db, tmp_path):
    start = workload(mariadb, db)
    root, seen = run_stream(spark, mariadb, db, start, tmp_path)
    assert source_rows(mariadb, db, "items") == [(4, "x", None)]
    assert delta_rows(root, db, "items") == [(4, "x", None)]          # was 4 rows before the fix
    assert {b for b, _, _ in seen} == {0}                  # everything in one micro-batch
    assert ops_of(seen, "items") == ["c", "c", "c", "t", "c", "u"]
    assert ops_of(seen, "gone") == ["c", "t"] and ops_of(seen, "skip") == []
    assert delta_rows(root, db, "other") == source_rows(mariadb, db, "other") \
        == [(1, "o1", None), (2, "o2b", 2)]
    # inserted then truncated within the batch: no Delta table to delete from, none made
    assert source_rows(mariadb, db, "gone") == [] and delta_rows(root, db, "gone") is None
    assert delta_rows(root, db, "skip") is None
    h = DeltaTable(str(root / db / "items")).history(1)[0]
    assert (h["binlog_cdc.batch_id"], h["binlog_cdc.truncate"]) == ("0", "true")


def test_truncate_across_micro_batches(spark, mariadb, db, tmp_path):
    start = workload(mariadb, db)
    root, seen = run_stream(spark, mariadb, db, start, tmp_path, maxEventsPerTrigger=1)
    items = [(b, op) for b, op, t in seen if t == "items"]
    assert [op for _, op in items] == ["c", "c", "c", "t", "c", "u"]
    batches = [b for b, _ in items]
    assert batches == sorted(set(batches))                 # one change per micro-batch
    assert [op for _, op, t in seen if t == "gone"] == ["c", "t"]
    gone_t = [b for b, op, t in seen if t == "gone" and op == "t"]
    assert gone_t == [max(b for b, _, _ in seen)]          # the last batch: a truncate alone
    assert delta_rows(root, db, "items") == source_rows(mariadb, db, "items") == [(4, "x", None)]
    assert delta_rows(root, db, "other") == source_rows(mariadb, db, "other")
    assert delta_rows(root, db, "gone") == source_rows(mariadb, db, "gone") == []
    assert delta_rows(root, db, "skip") is None
    # each batch that touched the table recorded once, the truncate's among them
    t_batch = batches[3]
    hist = [h for h in reversed(DeltaTable(str(root / db / "items")).history())
            if "binlog_cdc.batch_id" in h]
    assert [int(h["binlog_cdc.batch_id"]) for h in hist] == batches
    assert [h.get("binlog_cdc.truncate") for h in hist] == [None, None, None, "true", None, None]
    assert DeltaTable(str(root / db / "gone")).transaction_version("trunc-app") == gone_t[0]
    assert t_batch > batches[2]


def test_tail_jsonl_prints_the_truncate(mariadb, db, capsys, monkeypatch):
    from cdc.cli.main import main
    start = workload(mariadb, db)
    monkeypatch.setenv("BINLOG_CDC_PASSWORD", mariadb.cdc_params()["password"])
    p = mariadb.cdc_params()
    rc = main(["tail", "--host", p["host"], "--port", str(p["port"]), "--user", p["user"],
               "--server-id", "7311", "--non-blocking", "--file", start[0], "--pos",
               str(start[1]), "--format", "jsonl", "--tables", f"{db}.*", "--exclude-tables",
               f"{db}.skip"])
    assert rc == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    truncs = [(l["db"], l["table"], l["before"], l["after"], l["key"], l["row"]) for l in lines
              if l["op"] == "t"]
    assert truncs == [(db, "items", None, None, None, 0), (db, "gone", None, None, None, 0)]
    assert [l["op"] for l in lines if l["table"] == "items"] == ["c", "c", "c", "t", "c", "u"]
