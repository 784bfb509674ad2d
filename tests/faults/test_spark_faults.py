"""Faults under the Spark source: kill -9 of a driver process running
``readStream.format("binlog-cdc")`` -> ``foreachBatch(DeltaUpserter)`` while a writer writes,
restarted from its checkpoint each time, ending with the Delta table equal to ``SELECT *``; and
a query that rides out a 5 s restart and a 30 s SIGSTOP of its source, ending with every change
of the source exactly once."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import textwrap
import time
from collections import Counter
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
deltalake = pytest.importorskip("deltalake")

from faultkit import (Figures, Writer, change_key, create_table,  # noqa: E402,F401
                      expected_changes, fault_time_bound, marker, server_state)
from support.processes import kill_group, start_job  # noqa: E402
from support.spark_support import source_options  # noqa: E402

pytestmark = [pytest.mark.server, pytest.mark.spark]


JOB = textwrap.dedent("""
    import json, sys
    from streaming.apps.local_spark import local_spark
    from streaming.sinks.delta.upserter import DeltaUpserter

    cfg = json.loads(sys.argv[1])
    spark = local_spark("delta-fault-test")
    up = DeltaUpserter(cfg["root"], app_id=cfg["app_id"], **cfg["server"])

    def fb(df, batch_id):
        up(df, batch_id)
        print("batch", batch_id, flush=True)

    reader = spark.readStream.format("binlog-cdc")
    for k, v in cfg["options"].items():
        reader = reader.option(k, v)
    writer = reader.load().writeStream.foreachBatch(fb).option("checkpointLocation",
                                                               cfg["checkpoint"])
    if cfg["available_now"]:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime="300 milliseconds")
    q = writer.start()
    q.awaitTermination()
    if q.exception() is not None:
        print("FAILED", q.exception(), flush=True)
        sys.exit(3)
    print("done", flush=True)
    spark.stop()
""")


def batch_lines(log: Path) -> list[str]:
    return [line for line in log.read_text(errors="replace").splitlines()
            if line.startswith("batch ")]


def batches_in(log: Path) -> int:
    return len(batch_lines(log))


def delta_history_batches(path: Path) -> list[int]:
    return [int(h["binlog_cdc.batch_id"]) for h in reversed(deltalake.DeltaTable(str(path))
                                                             .history())
            if "binlog_cdc.batch_id" in h]


@pytest.mark.fault(timeout=330)
@pytest.mark.slow
def test_kill_9_of_a_delta_driver_mid_stream(mariadb_factory, tmp_path):
    """Two kill -9 of the driver at different moments of its micro-batches, with writes going
    on; each restart resumes from the checkpoint; a last availableNow run drains. The Delta
    table ends equal to SELECT *, and no batch was applied to it twice."""
    server = mariadb_factory()
    db = "deltafault"
    create_table(server, db)
    start = server.current_position()
    script = tmp_path / "job.py"
    script.write_text(JOB)
    log = tmp_path / "job.log"
    root = tmp_path / "delta"
    p = server.cdc_params()
    cfg = {"root": str(root), "app_id": "fault-kill", "checkpoint": str(tmp_path / "chk"),
           "server": {"host": p["host"], "port": p["port"], "user": p["user"],
                      "password": p["password"]},
           "options": source_options(server, db, start, maxEventsPerTrigger=400,
                                     heartbeatIntervalMs=1000),
           "available_now": False}
    writer = Writer(server, db, big_every=0, pause=0.1).start()
    figures = Figures("spark-delta-kill-9", faults=2)
    killed_at = None
    try:
        for delay in (0.0, 1.2):                    # after a batch line: at once, later
            proc = start_job(script, cfg, log)
            try:
                seen = batches_in(log)
                deadline = time.monotonic() + 120
                while batches_in(log) <= seen:
                    assert proc.poll() is None, f"job ended:\n{log.read_text()[-3000:]}"
                    assert time.monotonic() < deadline, \
                        f"no batch within 120 s:\n{log.read_text()[-3000:]}"
                    time.sleep(0.05)
                if killed_at is not None:
                    figures.recoveries.append(time.monotonic() - killed_at)
                time.sleep(delay)
            finally:
                kill_group(proc)
            killed_at = time.monotonic()
            figures.extra.setdefault("kill_after_batches", []).append(batches_in(log) - seen)
    finally:
        writer.stop()
    cfg["available_now"] = True                      # drain what was written meanwhile,
    cfg["options"]["maxEventsPerTrigger"] = "20000"  # in a few big batches
    drain_started = time.monotonic()
    proc = start_job(script, cfg, log)
    try:
        rc = proc.wait(timeout=180)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        pytest.fail(f"the draining run did not finish:\n{log.read_text()[-3000:]}")
    assert rc == 0, log.read_text()[-3000:]
    figures.extra["drain_s"] = f"{time.monotonic() - drain_started:.0f}"

    source = {int(r[0]): (int(r[1]), r[2]) for r in
              server.execute(f"SELECT id, n, pad FROM `{db}`.t")}
    table = deltalake.DeltaTable(str(root / db / "t")).to_pyarrow_table().to_pylist()
    delta = {r["id"]: (r["n"], r["pad"]) for r in table}
    history = delta_history_batches(root / db / "t")
    twice = len(history) - len(set(history))
    figures.written, figures.received = len(source), len(delta)
    figures.lost = sum(1 for k, v in source.items() if delta.get(k) != v)
    figures.duplicated = len(table) - len(delta) + len(set(delta) - set(source)) + twice
    lines = batch_lines(log)
    figures.extra.update(source_changes=sum(expected_changes(
        [(k, n) for k, (n, _) in source.items()]).values()), delta_commits=len(history),
        replayed_batches=len(lines) - len(set(lines)),    # run again after a kill (skipped)
        writer_errors=writer.errors)
    figures.report()
    assert len(source) > 1000
    assert delta == source
    assert history == sorted(set(history)), history   # no batch applied twice


# --- a query that rides out a restart and a 30 s SIGSTOP of its source ---------------------------


def sink_changes(spark, name: str) -> Counter:
    got: Counter = Counter()
    for r in spark.sql(f"SELECT op, before, after FROM {name}").collect():
        before = json.loads(r.before) if r.before else None
        after = json.loads(r.after) if r.after else None
        got[change_key(r.op, before and (before["id"], before["n"]),
                       after and (after["id"], after["n"]))] += 1
    return got


def wait_for_row(spark, name: str, row_id: int, timeout: float) -> float | None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if spark.sql(f"SELECT 1 FROM {name} WHERE op = 'c' AND "
                     f"get_json_object(after, '$.id') = {row_id}").count():
            return time.monotonic()
        time.sleep(0.25)
    return None


@pytest.mark.fault(timeout=300)
@pytest.mark.slow
def test_spark_query_survives_a_5_s_restart_and_a_30_s_sigstop(spark, mariadb_factory,
                                                               tmp_path):
    server = mariadb_factory()
    db = "sparkstop"
    create_table(server, db)
    start = server.current_position()
    reader = spark.readStream.format("binlog-cdc")
    for k, v in source_options(server, db, start, heartbeatIntervalMs=1000).items():
        reader = reader.option(k, v)
    q = (reader.load().writeStream.format("memory").queryName("fault_sigstop")
         .option("checkpointLocation", str(tmp_path / "chk"))
         .trigger(processingTime="500 milliseconds").start())
    writer = Writer(server, db, big_every=0, pause=0.05).start()
    figures = Figures("spark-restart-sigstop", faults=2)

    def restart_5_s():
        server.stop()
        time.sleep(5)
        server.start()
        return time.monotonic()

    def sigstop_30_s():
        os.kill(server.pid, signal.SIGSTOP)
        try:
            time.sleep(30)
        finally:
            os.kill(server.pid, signal.SIGCONT)
        return time.monotonic()

    try:
        first = marker(server, db)
        assert wait_for_row(spark, "fault_sigstop", first, 90), q.exception()
        for inject in (restart_5_s, sigstop_30_s):
            time.sleep(1)
            ended = inject()
            row_id = marker(server, db)
            arrived = wait_for_row(spark, "fault_sigstop", row_id, 150)
            assert arrived is not None, f"nothing new after {inject.__name__}: {q.exception()}"
            figures.recoveries.append(arrived - ended)
            assert q.isActive, q.exception()
        time.sleep(2)
        writer.stop()
        want = expected_changes(server_state(server, db))
        deadline = time.monotonic() + 90
        while True:
            got = sink_changes(spark, "fault_sigstop")
            if sum(got.values()) >= sum(want.values()) or time.monotonic() > deadline \
                    or not q.isActive:
                break
            time.sleep(0.5)
        time.sleep(1.5)                                  # a duplicate would come now
        got = sink_changes(spark, "fault_sigstop")
        assert q.isActive and q.exception() is None, q.exception()
    finally:
        writer.stop()
        q.stop()
    figures.tally(want, got)
    figures.extra.update(writer_errors=writer.errors)
    figures.report()
    figures.assert_exact()
