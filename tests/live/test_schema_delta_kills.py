"""End to end on MariaDB 10.11 (binlog_row_metadata FULL and NO_LOG) and MySQL 9.7 (FULL and
MINIMAL): the schema-history workload (~34
DDL statements interleaved with DML on 3 tables: columns added, dropped, renamed and reordered,
types and charsets changed, primary keys dropped and added, a table renamed, truncated, dropped
and recreated, partitioned) streamed with ``includeSchemaChanges=true`` into Delta by
``foreachBatch(DeltaUpserter)``, a few changes per micro-batch, the query killed -9 twice (once
between a batch's Delta commit and Spark's, once at a random point) and restarted from its
checkpoint: at the end every Delta table equals ``SELECT *`` of its source table, columns (names
and order) and rows."""

from __future__ import annotations

import random
import time
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("deltalake")

from deltalake import DeltaTable  # noqa: E402

from tests.support.ddl_workload import Recorder, norm, run_workload  # noqa: E402
from tests.support.processes import (delta_job, kill_group, run_to_end,  # noqa: E402
                                     start_job, wait_for)
from tests.support.spark_support import select_all, source_options  # noqa: E402

pytestmark = [pytest.mark.server, pytest.mark.spark, pytest.mark.slow,
              pytest.mark.servers("mariadb-10.11", "mysql-9.7")]


@pytest.fixture
def server(metadata_server):
    return metadata_server


def _delta(root: Path, db: str, table: str) -> tuple[list[str], list[tuple]]:
    data = DeltaTable(str(root / db / table)).to_pyarrow_table()
    return data.column_names, sorted((tuple(norm(v) for v in r.values())
                                      for r in data.to_pylist()), key=repr)


def test_ddl_workload_into_delta_killed_twice(server, tmp_path):
    db = f"ddlkill_{server.execute('SELECT @@binlog_row_metadata')[0][0].lower()}"
    server.execute(f"DROP DATABASE IF EXISTS {db}")
    server.execute(f"CREATE DATABASE {db} CHARACTER SET utf8mb4")
    start = server.current_position()
    r = Recorder(server, db)
    run_workload(r, b_unique_key=True)    # an upsert needs a key in every version of b
    assert r.ddl >= 30
    server.execute("FLUSH BINARY LOGS")
    opts = source_options(server, db, start, includeSchemaChanges="true", maxEventsPerTrigger=4)
    root = tmp_path / "delta"
    script, cfg, log = delta_job(server, tmp_path, "ddl-kill", opts, marker_dir=str(tmp_path))

    # kill 1: after batch 3 reached Delta, before Spark committed it (it is replayed)
    proc = start_job(script, dict(cfg, hang_after=3), log)
    try:
        wait_for(log, proc, lambda _t: (tmp_path / "3").exists())
    finally:
        kill_group(proc)
    # kill 2: at a random point a few batches further
    seen = log.read_text().count("batch ")
    proc = start_job(script, cfg, log)
    try:
        wait_for(log, proc, lambda t: t.count("batch ") >= seen + 3)
        time.sleep(random.Random(7).uniform(0.2, 1.5))
    finally:
        kill_group(proc)
    out = log.read_text()
    assert "done" not in out, "the stream ended before the second kill: make batches smaller"
    # the last run goes to the end
    assert "done" in run_to_end(script, cfg, log)

    tables = sorted(t for (t,) in server.execute(
        "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = %s", (db,)))
    assert tables == ["a", "b", "c"]
    for table in tables:
        want = select_all(server, db, table, norm)
        got = _delta(root, db, table)
        assert got[0] == want[0], (table, got[0], want[0])
        assert got[1] == want[1], (table, got[1], want[1])
    server.execute(f"DROP DATABASE {db}")
