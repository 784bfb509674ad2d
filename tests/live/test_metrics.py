"""streaming.metrics: Prometheus lag metrics from a real streaming query on the real MariaDB."""

from __future__ import annotations

import json
import math
import sys
import time
import urllib.request
import uuid

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("prometheus_client")

from streaming.metrics import (BinlogCdcMetricsListener, cdc_source_reports,  # noqa: E402
                               parse_exposition, start_metrics)

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def spark():
    from pyspark.sql import SparkSession

    session = (SparkSession.builder.master("local[2]").appName("test_metrics")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.pyspark.python", sys.executable)
               .config("spark.pyspark.driver.python", sys.executable)
               .getOrCreate())
    try:
        yield session
    finally:
        session.stop()


def _scrape(port: int) -> tuple[str, dict[str, float]]:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    return text, parse_exposition(text)


def _value(samples: dict[str, float], name: str, query: str) -> float:
    hits = [v for k, v in samples.items() if k.startswith(name + "{") and f'query="{query}"' in k]
    assert len(hits) == 1, (name, query, samples)
    return hits[0]


# --- a synthetic progress event ---------------------------------------------------------------


class _Event:
    def __init__(self, progress):
        self.progress = progress


def _progress(qid, name, rows, latest):
    return {"id": qid, "runId": str(uuid.uuid4()), "name": name, "numInputRows": rows,
            "sources": [
                {"description": "some other source", "latestOffset": '{"0": 17}',
                 "numInputRows": 1000},
                {"description": "PythonMicroBatchStream", "numInputRows": rows,
                 "latestOffset": latest if isinstance(latest, str) else json.dumps(latest)}]}


def test_listener_on_synthetic_events():
    from prometheus_client import generate_latest

    listener = BinlogCdcMetricsListener()
    qid = str(uuid.uuid4())
    listener.onQueryProgress(_Event(_progress(qid, "orders", 50, {
        "file": "mysql-bin.000003", "pos": 9000, "behindBytes": 12345,
        "behindTransactions": 7, "lagSeconds": 4.5})))
    listener.onQueryProgress(_Event(_progress(qid, "orders", 20, {
        "file": "mysql-bin.000003", "pos": 9000, "behindBytes": 0,
        "behindTransactions": 0, "lagSeconds": 0.0})))
    s = listener.samples()
    lbl = f'{{query="orders",query_id="{qid}"}}'
    assert s["binlog_cdc_rows_total" + lbl] == 70          # the other source's rows not counted
    assert s["binlog_cdc_behind_bytes" + lbl] == 0
    assert s["binlog_cdc_behind_transactions" + lbl] == 0
    assert s["binlog_cdc_lag_seconds" + lbl] == 0
    assert time.time() - s["binlog_cdc_last_progress_timestamp_seconds" + lbl] < 60
    assert listener.events == 2

    # lag unknown (null) -> NaN; the JSON text form of a progress works too
    listener.update(json.dumps(_progress(qid, "orders", 0, {
        "file": "f.000001", "pos": 4, "behindBytes": 10, "behindTransactions": 1,
        "lagSeconds": None})))
    s = listener.samples()
    assert math.isnan(s["binlog_cdc_lag_seconds" + lbl])
    assert s["binlog_cdc_behind_bytes" + lbl] == 10

    # no binlog-cdc source / a "null" latest offset / garbage: ignored, nothing raised
    assert not listener.update({"id": qid, "name": "x", "sources": [
        {"latestOffset": "null", "numInputRows": 3}, {"latestOffset": None}]})
    listener.onQueryProgress(_Event(object()))
    assert listener.events == 3

    text = generate_latest(listener.registry).decode()
    for name in ("binlog_cdc_lag_seconds", "binlog_cdc_rows_total", "binlog_cdc_behind_bytes",
                 "binlog_cdc_behind_transactions"):
        assert f"# TYPE {name.removesuffix('_total')}" in text

    # termination drops the gauges, keeps the counter
    class _Term:
        id = uuid.UUID(qid)
    listener.onQueryTerminated(_Term())
    s = listener.samples()
    assert "binlog_cdc_lag_seconds" + lbl not in s and "binlog_cdc_behind_bytes" + lbl not in s
    assert s["binlog_cdc_rows_total" + lbl] == 70

    # a second listener in the same process: its own registry, no duplicate-metric error
    other = BinlogCdcMetricsListener()
    assert other.samples().get("binlog_cdc_rows_total" + lbl) is None


def test_idle_events_say_caught_up():
    """Spark's QueryIdleEvent (a trigger found nothing new; no progress is posted then): the
    query's lag and bytes behind become 0 and its last-progress time moves; another query's
    idle event changes nothing here."""
    from pyspark.sql.streaming.listener import QueryIdleEvent

    listener = BinlogCdcMetricsListener()
    qid = str(uuid.uuid4())
    listener.onQueryProgress(_Event(_progress(qid, "orders", 5, {
        "file": "mysql-bin.000003", "pos": 9000, "behindBytes": 4000,
        "behindTransactions": 3, "lagSeconds": 12.0})))
    lbl = f'{{query="orders",query_id="{qid}"}}'
    before = listener.samples()["binlog_cdc_last_progress_timestamp_seconds" + lbl]
    time.sleep(0.05)
    listener.onQueryIdle(QueryIdleEvent.fromJson({"id": str(uuid.uuid4()),
                                                  "runId": str(uuid.uuid4()),
                                                  "timestamp": "2026-01-01T00:00:00.000Z"}))
    assert listener.samples()["binlog_cdc_lag_seconds" + lbl] == 12.0
    listener.onQueryIdle(QueryIdleEvent.fromJson({"id": qid, "runId": str(uuid.uuid4()),
                                                  "timestamp": "2026-01-01T00:00:00.000Z"}))
    s = listener.samples()
    assert s["binlog_cdc_lag_seconds" + lbl] == 0
    assert s["binlog_cdc_behind_bytes" + lbl] == 0
    assert s["binlog_cdc_behind_transactions" + lbl] == 0
    assert s["binlog_cdc_last_progress_timestamp_seconds" + lbl] > before
    assert s["binlog_cdc_rows_total" + lbl] == 5


def test_pyspark_progress_objects():
    """The real pyspark progress class (what a listener receives) is understood."""
    from pyspark.sql.streaming.listener import QueryProgressEvent, StreamingQueryProgress

    qid = str(uuid.uuid4())
    raw = _progress(qid, None, 5, {"file": "b.000001", "pos": 400, "behindBytes": 3,
                                   "behindTransactions": 1, "lagSeconds": 1.25})
    raw.update(timestamp="2026-01-01T00:00:00.000Z", batchId=0, batchDuration=1,
               stateOperators=[], sink={"description": "memory", "numOutputRows": 5})
    for s in raw["sources"]:
        s.update(startOffset=None, endOffset=None, inputRowsPerSecond=0.0,
                 processedRowsPerSecond=0.0)
    progress = StreamingQueryProgress.fromJson(raw)
    assert len(cdc_source_reports(progress)) == 1
    listener = BinlogCdcMetricsListener()
    listener.onQueryProgress(QueryProgressEvent.fromJson({"progress": raw}))
    s = listener.samples()
    lbl = f'{{query="{qid}",query_id="{qid}"}}'           # unnamed: the id is the name
    assert s["binlog_cdc_lag_seconds" + lbl] == 1.25
    assert s["binlog_cdc_rows_total" + lbl] == 5


# --- a real query ---------------------------------------------------------------------------------


N_ROWS = 300


def test_metrics_from_a_real_stream(spark, mariadb, db):
    mariadb.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(20))")
    # 300 row changes in 30 transactions of 10 rows, committed a few seconds ago by the time
    # the stream reads them (lag > 0 for the early batches)
    conn = mariadb.connect(database=db)
    try:
        with conn.cursor() as cur:
            for t in range(N_ROWS // 10):
                cur.executemany("INSERT INTO t VALUES (%s, %s)",
                                [(t * 10 + i, f"v{t * 10 + i}") for i in range(10)])
    finally:
        conn.close()
    mariadb.execute(f"UPDATE {db}.t SET v = 'x' WHERE id < 20")       # one tx, 20 changes
    expected = N_ROWS + 20
    time.sleep(1.5)

    listener = start_metrics(spark, port=0)
    port = listener.port
    params = mariadb.cdc_params()
    name = f"metrics_{db}"
    try:
        df = (spark.readStream.format("binlog-cdc")
              .option("host", params["host"]).option("port", str(params["port"]))
              .option("user", params["user"]).option("password", params["password"])
              .option("startingPosition", "earliest").option("includeTables", f"{db}.*")
              .option("maxEventsPerTrigger", "50").load())
        q = df.writeStream.format("memory").queryName(name).start()
        try:
            q.processAllAvailable()
            assert q.exception() is None, q.exception()
            history = list(q.recentProgress)
            rows = spark.sql(f"SELECT count(*) FROM {name}").collect()[0][0]
            assert rows == expected

            # the listener bus is asynchronous: wait until it has seen every batch so far
            deadline = time.monotonic() + 30
            while listener.events < len(history) and time.monotonic() < deadline:
                time.sleep(0.2)

            text, samples = _scrape(port)             # while the query runs
            for metric in ("binlog_cdc_lag_seconds", "binlog_cdc_rows_total",
                           "binlog_cdc_behind_bytes", "binlog_cdc_behind_transactions"):
                assert f"\n{metric}{{" in text, metric
            assert _value(samples, "binlog_cdc_rows_total", name) == expected
            # caught up at the end
            assert _value(samples, "binlog_cdc_behind_bytes", name) == 0
            assert _value(samples, "binlog_cdc_behind_transactions", name) == 0
            assert _value(samples, "binlog_cdc_lag_seconds", name) == 0
        finally:
            q.stop()

        # stopped: the gauges go (no lag for a query that is not running), the counter stays
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            text, samples = _scrape(port)
            if "\nbinlog_cdc_lag_seconds{" not in text:
                break
            time.sleep(0.2)
        assert "\nbinlog_cdc_lag_seconds{" not in text and "\nbinlog_cdc_behind_bytes{" not in text
        assert _value(samples, "binlog_cdc_rows_total", name) == expected

        # the progress history: early batches were behind, the last one is not
        reports = [(p, cdc_source_reports(p)) for p in history]
        reports = [(p, r[0][1]) for p, r in reports if r]
        assert len(reports) == len(history) >= 2
        first = reports[0][1]
        assert first["behindBytes"] > 0 and first["behindTransactions"] > 0
        assert first["lagSeconds"] is not None and first["lagSeconds"] > 1.0
        last = reports[-1][1]
        assert last["behindBytes"] == 0 and last["lagSeconds"] == 0
        assert sum(p.numInputRows for p, _ in reports) == expected
        assert max(p.numInputRows for p, _ in reports) <= 50 + 20
    finally:
        spark.streams.removeListener(listener)
        listener.http_server.shutdown()


def test_snapshot_progress_is_published():
    """During startingPosition=snapshot the source reports the snapshot's progress (tables left)
    instead of binlog figures; its rows count, the lag is unknown until the binlog is read."""
    listener = BinlogCdcMetricsListener()
    qid = str(uuid.uuid4())
    lbl = f'{{query="snap",query_id="{qid}"}}'
    listener.update(_progress(qid, "snap", 500, {"snapshot": {
        "tablesLeft": 2, "table": "shop.orders", "after": [500]}}))
    s = listener.samples()
    assert s["binlog_cdc_snapshot_tables_left" + lbl] == 2
    assert s["binlog_cdc_rows_total" + lbl] == 500
    assert math.isnan(s["binlog_cdc_lag_seconds" + lbl])
    listener.update(_progress(qid, "snap", 100, {"snapshot": "done"}))
    assert listener.samples()["binlog_cdc_snapshot_tables_left" + lbl] == 0


def test_snapshot_rows_chunks_rate_and_eta_are_published():
    listener = BinlogCdcMetricsListener()
    qid = str(uuid.uuid4())
    lbl = f'query="snap",query_id="{qid}"'
    listener.update(_progress(qid, "snap", 250, {"snapshot": {
        "tables": 2, "tablesDone": 0, "tablesLeft": 2, "table": "d.a", "after": [250],
        "chunks": 9, "chunksDone": 3, "rows": 670, "rowsDone": 250, "rowsPerSecond": None,
        "etaSeconds": None, "done": False}}))
    s = listener.samples()
    assert s[f'binlog_cdc_snapshot_rows{{{lbl},state="done"}}'] == 250
    assert s[f'binlog_cdc_snapshot_rows{{{lbl},state="total"}}'] == 670
    assert s[f'binlog_cdc_snapshot_chunks{{{lbl},state="done"}}'] == 3
    assert s[f'binlog_cdc_snapshot_chunks{{{lbl},state="total"}}'] == 9
    assert s[f'binlog_cdc_snapshot_tables{{{lbl},state="total"}}'] == 2
    assert math.isnan(s[f"binlog_cdc_snapshot_rows_per_second{{{lbl}}}"])
    assert math.isnan(s[f"binlog_cdc_snapshot_eta_seconds{{{lbl}}}"])
    listener.update(_progress(qid, "snap", 250, {"snapshot": {
        "tables": 2, "tablesDone": 0, "tablesLeft": 2, "table": "d.a", "after": [500],
        "chunks": 9, "chunksDone": 6, "rows": 670, "rowsDone": 500, "rowsPerSecond": 125.0,
        "etaSeconds": 1.4, "done": False}}))
    s = listener.samples()
    assert s[f"binlog_cdc_snapshot_rows_per_second{{{lbl}}}"] == 125.0
    assert s[f"binlog_cdc_snapshot_eta_seconds{{{lbl}}}"] == 1.4
    assert s[f'binlog_cdc_snapshot_rows{{{lbl},state="done"}}'] == 500
    listener.forget(qid)                      # a stopped query: its gauges go
    assert not any("snapshot_rows" in k and qid in k for k in listener.samples())
