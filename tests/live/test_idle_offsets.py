"""The Spark source when its captured tables are idle: other databases of the server busy, or
the whole server idle. Offsets, micro-batches, the cost of a restart and the lag.

The figures (batches, re-scan bytes and seconds of a restart) are printed (``-s``), never
asserted on time.
"""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

pytest.importorskip("pyspark")

from cdc.positions import Position  # noqa: E402

from support.spark_support import source_options  # noqa: E402

pytestmark = [pytest.mark.server, pytest.mark.spark,
              pytest.mark.servers("mariadb-10.11", "mysql-9.7")]

#: row changes written to another database while the captured table is idle (200k in
#: production's report; scaled to run in about a minute here), 10 per transaction
OTHER_CHANGES = int(os.environ.get("CDC_IDLE_OTHER_CHANGES", "200000"))
ROWS_PER_TX = 10


def _stream(spark, options: dict):
    reader = spark.readStream.format("binlog-cdc")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


class Batches:
    """A foreachBatch sink that records (batch id, rows, ids of the captured table)."""

    def __init__(self):
        self.seen: list[tuple[int, int]] = []
        self.keys: list[int] = []
        self.lock = threading.Lock()

    def __call__(self, df, batch_id):
        rows = df.collect()
        with self.lock:
            self.seen.append((batch_id, len(rows)))
            self.keys.extend(json.loads(r.key)["id"] for r in rows)

    @property
    def empty(self) -> int:
        return sum(1 for _, n in self.seen if n == 0)


def _start(spark, opts, ckpt, sink, trigger="1 second"):
    return (_stream(spark, opts).writeStream.foreachBatch(sink)
            .option("checkpointLocation", str(ckpt)).trigger(processingTime=trigger).start())


def _committed(ckpt) -> Position:
    """The end offset of the last batch the checkpoint has committed."""
    last = max(int(p.name) for p in (ckpt / "commits").iterdir() if p.name.isdigit())
    lines = (ckpt / "offsets" / str(last)).read_text().splitlines()
    return Position.from_offset(json.loads(lines[-1]))


def _end(server) -> tuple[Position, list]:
    file, pos = server.current_position()
    logs = [(r[0], int(r[1])) for r in server.execute("SHOW BINARY LOGS")]
    return Position(file, pos), logs


def _reports(q) -> list[dict]:
    return [json.loads(p["sources"][0]["latestOffset"]) for p in q.recentProgress
            if p["sources"] and p["sources"][0]["latestOffset"]]


def _write_other(server, other: str, changes: int) -> float:
    conn = server.connect(database=other)
    t0 = time.monotonic()
    try:
        with conn.cursor() as cur:
            for k in range(0, changes, ROWS_PER_TX):
                cur.execute("INSERT INTO b (v) VALUES " + ",".join(["(1)"] * ROWS_PER_TX))
    finally:
        conn.close()
    return time.monotonic() - t0


def _driver_scan(opts: dict, offset: Position) -> tuple[float, dict]:
    """The first trigger of a query restarted at *offset*: the source's latestOffset on the
    driver (its binlog scan from there to the end), timed. Returns (seconds, its offset)."""
    from streaming._compat import ReadAllAvailable

    from streaming.source.datasource import BinlogCdcDataSource

    source = BinlogCdcDataSource(opts)
    reader = source.streamReader(source.schema())
    try:
        t0 = time.monotonic()
        end = reader.latestOffset(offset.to_offset(), ReadAllAvailable())
        return time.monotonic() - t0, end
    finally:
        reader.stop()


def test_busy_other_database_idle_captured_table_offsets_restart_and_lag(spark, server, db,
                                                                          tmp_path):
    other = f"{db}_busy"
    server.execute(f"DROP DATABASE IF EXISTS `{other}`")
    server.execute(f"CREATE DATABASE `{other}`")
    spark.conf.set("spark.sql.streaming.noDataProgressEventInterval", "1000")
    try:
        _run(spark, server, db, other, tmp_path)
    finally:
        spark.conf.unset("spark.sql.streaming.noDataProgressEventInterval")
        server.execute(f"DROP DATABASE IF EXISTS `{other}`")


def _run(spark, server, db, other, tmp_path):
    from streaming.metrics import start_metrics, stop_metrics

    server.execute(f"CREATE TABLE {other}.b (id BIGINT AUTO_INCREMENT PRIMARY KEY, v INT)")
    start = server.current_position()
    server.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)")
    server.execute(f"INSERT INTO {db}.t VALUES (1, 1)")
    threshold = 4 << 20
    # the offset moves past the other database's transactions once 4 MiB of them wait (never
    # after a time here: the interval is longer than the test)
    opts = source_options(server, db, start, idleAdvanceBytes=threshold,
                          idleAdvanceIntervalMs=600_000)
    ckpt = tmp_path / "ckpt"
    listener = start_metrics(spark, port=0)

    # the captured table's row arrives; then only the other database writes, the query running
    sink = Batches()
    q = _start(spark, opts, ckpt, sink)
    try:
        q.processAllAvailable()
        assert sink.keys == [1]
        batches_before = len(sink.seen)
        before = _committed(ckpt)
        end0, _ = _end(server)
        seconds = _write_other(server, other, OTHER_CHANGES)
        end1, logs1 = _end(server)
        written = end0.bytes_behind(end1, logs1)
        q.processAllAvailable()
        # the whole server idle now: Spark's idle events say the query is caught up
        idle_from = time.time()
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            samples = listener.samples()
            stamp = [v for k, v in samples.items()
                     if k.startswith("binlog_cdc_last_progress_timestamp_seconds{")]
            if stamp and stamp[0] > idle_from + 1:
                break
            time.sleep(0.5)
        assert q.exception() is None, q.exception()
        during = sink.seen[batches_before:]
        reports = _reports(q)
    finally:
        q.stop()
        stop_metrics(spark, listener)
    held = _committed(ckpt)
    end2, logs2 = _end(server)
    rescan = held.bytes_behind(end2, logs2)
    empty = sum(1 for _, n in during if n == 0)
    print(f"\n[idle] {OTHER_CHANGES} row changes to another database in "
          f"{OTHER_CHANGES // ROWS_PER_TX} transactions, {written} binlog bytes, written in "
          f"{seconds:.1f} s; the query ran {len(during)} micro-batches meanwhile ({empty} "
          f"empty); its committed offset is {rescan} bytes behind the binlog end")

    # what a restart's first trigger scans, and how long it takes: from the checkpoint, and
    # from before the burst (a restart when the whole burst was held: idleAdvanceBytes above
    # it and a burst shorter than idleAdvanceIntervalMs, as with the defaults)
    scan_s, after = _driver_scan(opts, held)
    full_s, _ = _driver_scan(opts, before)
    full = before.bytes_behind(end2, logs2)
    print(f"[idle] restart from the checkpoint: its first trigger scans {rescan} binlog bytes "
          f"in {scan_s:.2f} s; from before the burst: {full} bytes in {full_s:.2f} s")

    # the offset kept moving: at most one empty micro-batch per idleAdvanceBytes of the other
    # database's transactions, and a restart reads less than that again
    assert during and all(n == 0 for _, n in during)
    assert empty <= written // threshold + 1, (empty, written)
    assert rescan < threshold
    assert Position.from_offset(after).same_place(held), "the restart holds the offset too"
    # the lag is the truth: everything read (other tables' changes), nothing behind
    last = reports[-1]
    assert last["behindBytes"] == 0 and last["behindTransactions"] == 0 and \
        last["lagSeconds"] == 0
    assert stamp and stamp[0] > idle_from + 1, "idle events keep the metrics fresh"
    for name in ("binlog_cdc_lag_seconds", "binlog_cdc_behind_bytes",
                 "binlog_cdc_behind_transactions"):
        assert [v for k, v in samples.items() if k.startswith(name + "{")] == [0.0], name

    # a restart delivers the next row of the captured table once, nothing again
    sink2 = Batches()
    q = _start(spark, opts, ckpt, sink2)
    try:
        q.processAllAvailable()
        server.execute(f"INSERT INTO {db}.t VALUES (2, 2)")
        q.processAllAvailable()
        assert q.exception() is None, q.exception()
    finally:
        q.stop()
    assert sink2.keys == [2]
    assert sum(1 for _, n in sink2.seen if n) == 1


def test_offset_at_a_file_end_continues_after_an_idle_rotation(server, db, caplog):
    """An offset at the end of a binlog file, then the server rotates while the stream is idle:
    the restarted reader continues at the next file's first transaction, in order, and says
    so at INFO (no failover warning: the same server's binlog, not another's)."""
    import logging

    from streaming._compat import ReadAllAvailable
    from streaming.source.datasource import BinlogCdcDataSource

    from support.spark_support import replayed_rows

    start = server.current_position()
    server.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)")
    server.execute(f"INSERT INTO {db}.t VALUES (1, 1)")
    opts = source_options(server, db, start)
    source = BinlogCdcDataSource(opts)
    reader = source.streamReader(source.schema())
    try:
        first = reader.latestOffset(reader.initialOffset(), ReadAllAvailable())
    finally:
        reader.stop()
    end_file, end_pos = server.current_position()
    assert Position.from_offset(first).same_place(Position(end_file, end_pos))
    assert first.get("gtid"), first                    # resumes by GTID after a rotation
    server.flush_binary_logs()
    server.execute(f"INSERT INTO {db}.t VALUES (2, 2)")

    reader = BinlogCdcDataSource(opts).streamReader(source.schema())
    try:
        with caplog.at_level(logging.INFO, logger="binlog_cdc.spark"):
            second = reader.latestOffset(first, ReadAllAvailable())
            rows = replayed_rows(reader, first, second)
    finally:
        reader.stop()
    assert rows == [("c", {"id": 2, "v": 2})]
    text = [r.getMessage() for r in caplog.records]
    assert not [t for t in text if "failover" in t], text
    assert [t for t in text if "at the end of its binlog file" in t], text
