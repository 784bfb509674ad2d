"""End to end through Spark's MERGE (:class:`streaming.sinks.spark.merge.SparkMerge`), for Delta
(delta-spark) and Iceberg (its Spark runtime), on MariaDB 10.11 and MySQL 9.7: a workload of
inserts, updates, primary-key changes, deletes, a TRUNCATE, an ADD COLUMN (NOT NULL DEFAULT:
existing rows get it) and a RENAME COLUMN on two tables, streamed with ``includeSchemaChanges``
a few changes per micro-batch, the query killed -9 twice (once between a batch's MERGE and
Spark's commit, once at a random point of the next batch) and restarted from its checkpoint: at
the end each target table equals ``SELECT *`` of its source table, columns (names and order) and
rows.

Every batch runs under :func:`tests.support.no_collect.no_image_collect`: had the sink brought
rows to the driver, the job would have failed.

Runs in a PySpark with the format's connector (``python3 -m tools.spark_env 4.2`` for Delta,
``4.1`` for Iceberg; the main environment's 4.3 has none): skipped with the reason elsewhere.
"""

from __future__ import annotations

import importlib
import json
import random
import time

import pytest

pytest.importorskip("pyspark")

from cdc.errors import ConfigurationError  # noqa: E402
from tests.support.processes import REPO, kill_group, run_to_end, start_job, wait_for  # noqa: E402
from tests.support.spark_support import select_all, source_options  # noqa: E402

pytestmark = [pytest.mark.server, pytest.mark.spark, pytest.mark.slow,
              pytest.mark.servers("mariadb-10.11", "mysql-9.7")]

JOB = REPO / "tests" / "support" / "merge_job.py"


def needs_connector(fmt: str) -> None:
    """Skip (with the reason) where this PySpark cannot run the stream into *fmt*."""
    import pyspark

    from streaming.apps.local_spark import connector
    try:
        connector(fmt)
    except ConfigurationError as e:
        pytest.skip(str(e))
    if fmt == "delta":
        pytest.importorskip("delta", reason="delta-spark (pip install delta-spark) is missing")
    try:
        importlib.import_module("streaming.source.datasource")
    except ImportError as e:
        pytest.skip(f"the binlog-cdc source does not run on PySpark {pyspark.__version__} "
                    f"in this checkout ({e})")


TABLES = ["CREATE TABLE a (id INT PRIMARY KEY, name VARCHAR(20), amount DECIMAL(10,2), "
          "created DATETIME)",
          "CREATE TABLE b (k VARCHAR(10) PRIMARY KEY, n BIGINT, note TEXT)"]


def run_sql(server, db: str, statements) -> None:
    conn = server.connect(database=db)
    conn.autocommit(True)
    try:
        with conn.cursor() as cur:
            for sql in statements:
                cur.execute(sql)
    finally:
        conn.close()


def workload(server, db: str) -> None:
    run_sql(server, db, [
        "INSERT INTO a VALUES " + ", ".join(
            f"({i}, 'n{i}', {i}.25, '2024-01-{i:02d} 10:00:00')" for i in range(1, 13)),
        "INSERT INTO b VALUES " + ", ".join(
            f"('k{i}', {i * 10}, 'note {i}')" for i in range(1, 7)),
        "UPDATE a SET amount = amount + 1 WHERE id % 3 = 0",
        "UPDATE a SET id = id + 100 WHERE id IN (2, 5)",        # primary-key changes
        "DELETE FROM a WHERE id IN (4, 7)",
        "UPDATE b SET k = 'k9', n = 99 WHERE k = 'k2'",
        "INSERT INTO a VALUES (4, 'again', 4.00, NULL)",           # a deleted key back
        "ALTER TABLE a ADD COLUMN qty INT NOT NULL DEFAULT 5",
        "INSERT INTO a VALUES (20, 'n20', 20.00, '2024-02-01 00:00:00', 1), "
        "(21, 'n21', 21.00, NULL, 2)",
        "UPDATE a SET qty = qty + 10 WHERE id IN (1, 20)",
        "ALTER TABLE a RENAME COLUMN name TO title",
        "UPDATE a SET title = 'renamed' WHERE id = 3",
        "UPDATE a SET id = 30, title = 'moved' WHERE id = 8",
        "TRUNCATE TABLE b",
        "INSERT INTO b VALUES ('k20', 1, 'after'), ('k21', 2, NULL), ('k22', 3, 'x')",
        "UPDATE b SET n = n * 2 WHERE k = 'k21'",
        "DELETE FROM a WHERE id = 101",
        "DELETE FROM b WHERE k = 'k22'",
        "INSERT INTO a VALUES (40, 'last', 0.50, '2024-03-01 12:30:00', 7)",
    ])


def prepare(server, tmp_path, fmt: str) -> tuple[str, dict]:
    """The database (its tables created, no rows yet) and the job's config."""
    needs_connector(fmt)
    db = f"smerge_{fmt}"
    server.execute(f"DROP DATABASE IF EXISTS {db}")
    server.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
    start = server.current_position()
    run_sql(server, db, TABLES)
    p = server.cdc_params()
    return db, {"format": fmt, "app_id": "merge-kill", "checkpoint": str(tmp_path / "chk"),
                "target": str(tmp_path / "delta") if fmt == "delta" else "iceberg",
                "warehouse": str(tmp_path / "warehouse"), "marker_dir": str(tmp_path),
                "options": source_options(server, db, start, includeSchemaChanges="true",
                                          maxEventsPerTrigger=3),
                "server": {"host": p["host"], "port": p["port"], "user": p["user"],
                           "password": p["password"]},
                "dump": str(tmp_path / "dump.json"), "tables": [[db, "a"], [db, "b"]],
                "written": str(tmp_path / "written")}


def assert_equal_to_select(server, db: str, tmp_path) -> None:
    got = json.loads((tmp_path / "dump.json").read_text())
    for table in ("a", "b"):
        names, rows = select_all(server, db, table, lambda v: None if v is None else str(v))
        have = got[f"{db}.{table}"]
        assert have["columns"] == names, (table, have["columns"], names)
        got_rows = sorted((tuple(r) for r in have["rows"]), key=repr)
        assert got_rows == rows, (table, got_rows, rows)
    server.execute(f"DROP DATABASE {db}")


@pytest.mark.parametrize("fmt", [
    pytest.param("delta", marks=pytest.mark.compat("SparkMerge into Delta (delta-spark)")),
    pytest.param("iceberg", marks=pytest.mark.compat("SparkMerge into Iceberg"))])
def test_stream_into_spark_merge_equals_select(server, tmp_path, fmt):
    """The workload in one run of the query (the rows written once its first batch ran)."""
    db, cfg = prepare(server, tmp_path, fmt)
    log = tmp_path / "job.log"
    proc = start_job(JOB, cfg, log)
    try:
        wait_for(log, proc, lambda t: "batch 0" in t, timeout=1200)
        workload(server, db)
        (tmp_path / "written").touch()
        proc.wait(timeout=1800)
    finally:
        kill_group(proc)
    assert "done" in log.read_text(), log.read_text()[-4000:]
    assert_equal_to_select(server, db, tmp_path)


@pytest.mark.parametrize("fmt", [
    pytest.param("delta", marks=pytest.mark.compat("SparkMerge into Delta (delta-spark), killed "
                                                   "twice")),
    pytest.param("iceberg", marks=pytest.mark.compat("SparkMerge into Iceberg, killed twice"))])
def test_stream_into_spark_merge_killed_twice_equals_select(server, tmp_path, fmt):
    db, cfg = prepare(server, tmp_path, fmt)
    log = tmp_path / "job.log"

    # kill 1: after batch 3 reached the tables, before Spark committed it (it is replayed). The
    # rows come once the query has run its first batch: before PySpark 4.2 a new query's first
    # batch takes everything there is (its limits apply from the second on)
    proc = start_job(JOB, dict(cfg, hang_after=3, dump=None), log)
    try:
        wait_for(log, proc, lambda t: "batch 0" in t, timeout=1200)
        workload(server, db)
        (tmp_path / "written").touch()
        wait_for(log, proc, lambda _t: (tmp_path / "3").exists(), timeout=1200)
    finally:
        kill_group(proc)
    # kill 2: at a random point of the batch after the replayed one (before PySpark 4.2 a
    # restarted query's first new batch takes everything there is)
    seen = log.read_text().count("batch ")
    proc = start_job(JOB, dict(cfg, dump=None), log)
    try:
        wait_for(log, proc, lambda t: t.count("batch ") > seen, timeout=1200)
        time.sleep(random.Random(11).uniform(0.5, 3.0))
    finally:
        kill_group(proc)
    assert "done" not in log.read_text(), "the stream ended before the second kill"
    assert "done" in run_to_end(JOB, cfg, log, timeout=1800)

    assert_equal_to_select(server, db, tmp_path)
