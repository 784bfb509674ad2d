"""Snapshot progress against MariaDB 10.11, 11.8 and MySQL 9.7 and local Spark: what each
micro-batch's progress reports (tables, chunks, rows done and in all, rows/s, ETA) is checked
against the real table sizes, the rows the batches delivered and the tasks they ran; a
maxEventsPerTrigger-sized batch is read by at least two tasks (both cores)."""

from __future__ import annotations

import json

import pytest

pytestmark = [pytest.mark.server, pytest.mark.spark, pytest.mark.servers()]

from support.spark_support import source_options  # noqa: E402


def _create(mariadb, db: str) -> dict:
    mariadb.execute(f"CREATE DATABASE `{db}`")
    mariadb.execute("CREATE TABLE orders (id BIGINT PRIMARY KEY, note VARCHAR(20))", database=db)
    mariadb.execute("CREATE TABLE tags (name VARCHAR(20) NOT NULL, n INT NOT NULL, "
                    "UNIQUE KEY (name, n))", database=db)
    mariadb.execute("CREATE TABLE loose (a INT)", database=db)          # no key: one chunk
    mariadb.execute("INSERT INTO orders SELECT seq * 3, CONCAT('n', seq) "
                    f"FROM {mariadb.seq_table(3000)}", database=db)
    mariadb.execute("INSERT INTO tags SELECT CONCAT('t', seq % 7), seq "
                    f"FROM {mariadb.seq_table(300)}", database=db)
    mariadb.execute(f"INSERT INTO loose SELECT seq FROM {mariadb.seq_table(50)}", database=db)
    # no ANALYZE TABLE: TABLE_ROWS of these new tables may be anything (often 0); tables
    # estimated below 100,000 rows are counted
    return {f"{db}.{t}": n for t, n in (("loose", 50), ("orders", 3000), ("tags", 300))}


def _snapshot_report(progress) -> dict | None:
    for src in progress.sources:
        d = json.loads(src.latestOffset) if src.latestOffset else None
        if isinstance(d, dict) and isinstance(d.get("snapshot"), dict):
            return d["snapshot"]
    return None


def test_progress_reports_rows_chunks_tables_rate_and_eta(spark, mariadb, tmp_path):
    db = "snap_progress"
    sizes = _create(mariadb, db)
    total = sum(sizes.values())
    # chunks of 50000 rows by default: a 1000-row batch is still cut in two (both cores read)
    opts = source_options(mariadb, db, ("x", 4), maxEventsPerTrigger=1000)
    opts["startingPosition"] = "snapshot"
    tasks: dict[int, int] = {}
    rows: dict[int, int] = {}

    def fb(df, batch_id):
        tasks[batch_id] = df.rdd.getNumPartitions()
        rows[batch_id] = df.count()

    q = (spark.readStream.format("binlog-cdc").options(**opts).load().writeStream
         .foreachBatch(fb).option("checkpointLocation", str(tmp_path / "chk"))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(180) and q.exception() is None, q.exception()
    reports = [(p.batchId, _snapshot_report(p)) for p in q.recentProgress]
    reports = [(b, r) for b, r in reports if r is not None]
    # loose (50 rows, one batch), orders (3 batches of 1000, then its empty tail), tags (300)
    assert [b for b, _ in reports] == list(range(6)), reports
    done_rows = done_chunks = 0
    for i, (batch, r) in enumerate(reports):
        done_rows += rows[batch]
        done_chunks += tasks[batch]
        assert r["rowsDone"] == done_rows, (i, r)       # what the batches delivered so far
        assert r["chunksDone"] == done_chunks, (i, r)   # the tasks they ran
        assert r["rows"] == total, (i, r)               # every table's real size
        assert r["tables"] == 3
        if i == 0:
            assert r["rowsPerSecond"] is None and r["etaSeconds"] is None
        elif i >= 2 and not r["done"]:      # (Spark may plan the first batch on another reader)
            assert r["rowsPerSecond"] > 0 and r["etaSeconds"] >= 0, r
            assert r["etaSeconds"] == pytest.approx((total - r["rowsDone"]) /
                                                    r["rowsPerSecond"], abs=0.1)
    first = reports[0][1]
    assert (first["table"], first["tablesDone"], first["rowsDone"]) == (f"{db}.orders", 1, 50)
    # orders: 1000-row batches cut in two 500-row chunks (two cores: two tasks each)
    assert [tasks[b] for b, _ in reports[1:4]] == [2, 2, 2]
    assert [rows[b] for b, _ in reports[1:4]] == [1000, 1000, 1000]
    last = reports[-1][1]
    assert last["done"] and last["etaSeconds"] == 0
    assert (last["tablesDone"], last["tablesLeft"], last["rowsDone"]) == (3, 0, total)
    assert last["chunks"] == last["chunksDone"] == sum(tasks[b] for b, _ in reports)

