"""The stream's offsets on every supported PySpark (4.0-4.3): read limits under a processing-time
trigger, availableNow after a stopped query, and the features refused by version.

PySpark 4.0/4.1 have no admission control: Spark calls ``latestOffset()`` without a start or a
limit and the reader bounds each batch itself (:mod:`streaming._compat`).
"""

from __future__ import annotations

import json
import time

import pytest

pyspark = pytest.importorskip("pyspark")

from cdc.errors import SparkVersionError  # noqa: E402
from streaming import _compat  # noqa: E402
from support.spark_support import source_options  # noqa: E402

pytestmark = [pytest.mark.server, pytest.mark.spark]


def _start(spark, opts: dict, out, ckpt, **trigger):
    reader = spark.readStream.format("binlog-cdc")
    for k, v in opts.items():
        reader = reader.option(k, v)
    return (reader.load().writeStream.format("parquet").option("path", str(out))
            .option("checkpointLocation", str(ckpt)).trigger(**trigger).start())


def _wait(q, until, timeout: float = 120):
    deadline = time.monotonic() + timeout
    while not until():
        assert q.exception() is None, f"query failed: {q.exception()}"
        assert time.monotonic() < deadline, "the query did not get there in time"
        time.sleep(0.2)


def _select(mariadb, db) -> dict:
    return {r[0]: r[1] for r in mariadb.execute(f"SELECT id, v FROM `{db}`.t ORDER BY id")}


def _state(rows) -> dict:
    state: dict = {}
    for r in sorted(rows, key=lambda r: r.seq):
        if r.op == "d":
            del state[json.loads(r.before)["id"]]
        else:
            after = json.loads(r.after)
            state[after["id"]] = after["v"]
    return state


@pytest.mark.compat("stream: limits under processingTime, then availableNow")
def test_processing_time_batches_keep_max_events_then_available_now_reads_to_the_end(
        spark, mariadb, db, tmp_path):
    mariadb.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v INT)")
    start = mariadb.current_position()
    opts = source_options(mariadb, db, start, maxEventsPerTrigger=40)
    out, ckpt = tmp_path / "out", tmp_path / "ckpt"
    q = _start(spark, opts, out, ckpt, processingTime="300 milliseconds")
    try:
        _wait(q, lambda: q.lastProgress is not None)        # started: later rows are batched
        conn = mariadb.connect(database=db)
        with conn.cursor() as cur:
            for i in range(200):
                cur.execute("INSERT INTO t VALUES (%s, %s)", (i, i))
            cur.execute("UPDATE t SET v = v + 1000 WHERE id < 60")      # one 60-row transaction
        conn.close()
        _wait(q, lambda: out.exists() and spark.read.parquet(str(out)).count() == 260)
        sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    finally:
        q.stop()
    # every batch within the limit, whole transactions: the 60-row one alone
    assert sum(sizes) == 260 and max(sizes) == 60
    assert all(s <= 40 for s in sizes if s != 60) and sizes.count(60) == 1

    # stopped; more changes; availableNow reads exactly up to the end it saw at its start
    mariadb.execute(f"DELETE FROM `{db}`.t WHERE id >= 150")
    mariadb.execute(f"INSERT INTO `{db}`.t VALUES (500, 5)")
    q = _start(spark, opts, out, ckpt, availableNow=True)
    assert q.awaitTermination(180), "availableNow did not stop"
    assert q.exception() is None, q.exception()
    rows = spark.read.parquet(str(out)).collect()
    assert len(rows) == 260 + 50 + 1 and len({r.seq for r in rows}) == len(rows)
    assert _state(rows) == _select(mariadb, db)


@pytest.mark.compat("AutoCDC (SCD 1: 4.2+, SCD 2: 4.3+)")
def test_features_a_pyspark_lacks_are_refused_naming_the_version():
    for scd, needs in ((1, (4, 2)), (2, (4, 3))):
        if _compat.VERSION >= needs:
            assert hasattr(_compat.pipelines(scd), "create_auto_cdc_flow")
        else:
            with pytest.raises(SparkVersionError, match=rf"needs PySpark {needs[0]}\.{needs[1]} "
                                                        r"or later \(this is PySpark 4\.\d"):
                _compat.pipelines(scd)
