"""Binlog retention against the Spark source and DeltaUpserter, on real servers.

* A snapshot that lasts longer than the server keeps its binlogs: binlogs are rotated and
  purged every few seconds while a throttled snapshot (small chunks, small batches) runs for
  minutes with a concurrent writer, and the query is killed -9 once mid-snapshot and restarted
  from its checkpoint. The Delta table ends equal to ``SELECT *``, and every change the writer
  made reached the stream exactly once (counts printed with ``-s``).
* A checkpoint whose binlog was purged while the query was down: the default stops with the
  purged-binlog error; ``onDataLoss=resnapshot`` re-reads the captured tables from the current
  position, replacing their rows (rows deleted while the binlog was lost go too), records it
  (an op ``t`` record before the rows, the ``dataLoss`` progress figure and its metric).
"""

from __future__ import annotations

import json
import random
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
pytest.importorskip("deltalake")

from deltalake import DeltaTable  # noqa: E402

from support.processes import delta_job, kill_group, run_to_end, start_job, wait_for  # noqa: E402
from support.spark_support import source_options  # noqa: E402

pytestmark = [pytest.mark.server, pytest.mark.spark,
              pytest.mark.servers("mariadb-10.11", "mysql-9.7")]

def _rows(server, db: str) -> list[tuple]:
    return sorted(tuple(r) for r in server.execute(f"SELECT id, v, n FROM {db}.items"))


def _delta(root: Path, db: str) -> list[tuple]:
    t = DeltaTable(str(root / db / "items")).to_pyarrow_table()
    return sorted((r["id"], r["v"], r["n"]) for r in t.to_pylist())


def _logs(server) -> list[str]:
    return [r[0] for r in server.execute("SHOW BINARY LOGS")]


def _purge(server, keep: int = 1) -> list[str]:
    """Purge all but the last *keep* binlogs; returns those purged."""
    logs = _logs(server)
    if logs[:-keep]:
        server.purge_binary_logs(logs[-keep])
    return logs[:-keep]


class Writer(threading.Thread):
    """Single-row transactions on ``db.items`` (even ids 2 .. 2 * *ids*), each with its own
    token: inserts of odd ids between them (``("c", id)``), updates (``("u", "u<k>")``, the new
    v), deletes (``("d", id)``); :attr:`made` holds the tokens of those that changed a row."""

    def __init__(self, server, db: str, ids: int):
        super().__init__(daemon=True)
        self.server, self.db, self.ids = server, db, ids
        self.stop = threading.Event()
        self.made: list = []
        self.error: Exception | None = None

    def run(self) -> None:
        rnd = random.Random(29)
        conn = self.server.connect(database=self.db)
        conn.autocommit(True)
        used: set = set()
        k = 0
        try:
            with conn.cursor() as cur:
                while not self.stop.is_set():
                    k += 1
                    i = 2 * rnd.randrange(1, self.ids + 1)
                    if k % 3 == 0 and i + 1 not in used:
                        used.add(i + 1)
                        cur.execute("INSERT INTO items VALUES (%s, %s, %s)", (i + 1, f"c{k}", k))
                        self.made.append(("c", i + 1))
                    elif k % 3 == 1:
                        if cur.execute("UPDATE items SET v = %s, n = n + 1 WHERE id = %s",
                                       (f"u{k}", i)):
                            self.made.append(("u", f"u{k}"))
                    elif i not in used:
                        used.add(i)
                        if cur.execute("DELETE FROM items WHERE id = %s", (i,)):
                            self.made.append(("d", i))
                    time.sleep(0.02)
        except Exception as e:  # noqa: BLE001 - the test fails on it
            self.error = e
        finally:
            conn.close()


class Purger(threading.Thread):
    """Every *every* seconds: ``FLUSH BINARY LOGS`` and purge all but the last *keep* files
    (a retention of about ``every * keep`` seconds), while :attr:`on` is set."""

    def __init__(self, server, every: float = 2.0, keep: int = 15):
        super().__init__(daemon=True)
        self.server, self.every, self.keep = server, every, keep
        self.on = threading.Event()
        self.stop = threading.Event()
        self.purged: list[str] = []
        self.error: Exception | None = None

    def run(self) -> None:
        try:
            while not self.stop.wait(self.every):
                if not self.on.is_set():
                    continue
                self.server.execute("FLUSH BINARY LOGS")
                self.purged += _purge(self.server, self.keep)
        except Exception as e:  # noqa: BLE001 - the test fails on it
            self.error = e


def _token(op: str, before, after):
    if op == "c":
        return ("c", json.loads(after)["id"])
    if op == "u":
        return ("u", json.loads(after)["v"])
    if op == "d":
        return ("d", json.loads(before)["id"])
    return (op, None)


@pytest.mark.slow
def test_a_snapshot_longer_than_retention_killed_once_loses_nothing(server, mariadb_factory,
                                                                   tmp_path):
    server = mariadb_factory()          # a server of its own: its binlogs are purged
    db, ids = "retention", 3000
    server.execute(f"CREATE DATABASE {db}")
    server.execute("CREATE TABLE items (id INT PRIMARY KEY, v VARCHAR(40), n INT)", database=db)
    server.execute(f"INSERT INTO items SELECT 2 * seq, CONCAT('v', seq), 0 FROM "
                   f"{server.seq_table(ids)}", database=db)
    # 30 batches of 100 snapshot rows (2 chunks each), the binlog read along: minutes here
    opts = source_options(server, db, ("x", 4), snapshotChunkRows=50,
                          snapshotRowsPerTrigger=100, includeTables=f"{db}.items",
                          serverId=7300)
    opts["startingPosition"] = "snapshot"
    out = tmp_path / "batches"
    out.mkdir()
    root = tmp_path / "delta"
    # each batch takes 2 s at least: the 30 batches outlast the purger's ~30 s retention on a
    # fast machine too (else the snapshot ends before its start file is purged)
    script, cfg, log = delta_job(server, tmp_path, "retention", opts, out=str(out),
                                 batch_pause=2.0)
    p0_file = _logs(server)[-1]
    writer, purger = Writer(server, db, ids), Purger(server)
    t0 = time.monotonic()
    proc = start_job(script, cfg, log)
    try:
        wait_for(log, proc, lambda t: "batch 0\n" in t)         # P0 is taken: changes from here
        writer.start()
        purger.start()
        purger.on.set()
        # kill -9 a few batches on, mid-snapshot; retention covers the restart (no purge then)
        wait_for(log, proc, lambda t: "batch 6\n" in t)
        time.sleep(random.Random(3).uniform(0.2, 2.0))
    finally:
        kill_group(proc)
    purger.on.clear()
    assert "done" not in log.read_text()
    seen = log.read_text().count("batch ")
    proc = start_job(script, cfg, log)
    try:
        wait_for(log, proc, lambda t: t.count("batch ") > seen)
        purger.on.set()
        text = wait_for(log, proc, lambda t: "done" in t or "FAILED" in t, timeout=900)
        assert proc.wait(60) == 0, text[-4000:]
    finally:
        kill_group(proc)
        purger.stop.set()
        writer.stop.set()
        purger.join()
        writer.join()
    snapshot_s = time.monotonic() - t0
    assert writer.error is None and purger.error is None, (writer.error, purger.error)
    # the binlog of the snapshot's start was purged while the snapshot still had rows to read
    assert p0_file in purger.purged and p0_file not in _logs(server)
    text = run_to_end(script, cfg, log)                    # what the writer did last
    batches = {int(f.stem): json.loads(f.read_text()) for f in out.glob("*.json")}
    delivered = [_token(op, b, a) for n in sorted(batches) for op, b, a in batches[n]]
    made = set(writer.made)
    lost = len(made - set(delivered))
    twice = len(delivered) - len(set(delivered))
    print(f"{server.server_name} snapshot with retention ~{purger.every * purger.keep:.0f} s: "
          f"{snapshot_s:.0f} s, {len(purger.purged)} binlogs purged, {len(batches)} batches, "
          f"1 kill; writer changes {len(made)}: delivered {len(delivered)}, lost {lost}, "
          f"duplicated {twice}")
    assert len(made) > 100
    assert (lost, twice) == (0, 0) and set(delivered) == made
    assert _delta(root, db) == _rows(server, db)
    assert "FAILED" not in text


def _run(spark, opts: dict, ckpt: Path, sink) -> object:
    reader = spark.readStream.format("binlog-cdc")
    for k, v in opts.items():
        reader = reader.option(k, v)
    q = (reader.load().writeStream.foreachBatch(sink).option("checkpointLocation", str(ckpt))
         .trigger(availableNow=True).start())
    try:
        q.awaitTermination(300)
    except Exception:  # noqa: BLE001 - the query failed: q.exception() tells
        pass
    return q


def test_a_purged_checkpoint_resnapshots_on_request(spark, server, mariadb_factory, tmp_path):
    from streaming.sinks.delta.upserter import DeltaUpserter
    from streaming.metrics import BinlogCdcMetricsListener

    server = mariadb_factory()          # a server of its own: its binlogs are purged
    db = "lost"
    server.execute(f"CREATE DATABASE {db}")
    server.execute("CREATE TABLE items (id INT PRIMARY KEY, v VARCHAR(40), n INT)", database=db)
    server.execute("CREATE TABLE other (id INT PRIMARY KEY, v VARCHAR(40), n INT)", database=db)
    server.execute(f"INSERT INTO items SELECT seq, CONCAT('v', seq), 0 FROM "
                   f"{server.seq_table(500)}", database=db)
    p = server.cdc_params()
    opts = source_options(server, db, ("x", 4), includeTables=f"{db}.items", serverId=7400,
                          snapshotChunkRows=200, maxEventsPerTrigger=300)
    opts["startingPosition"] = "snapshot"
    up = DeltaUpserter(tmp_path / "delta", host=p["host"], port=p["port"], user=p["user"],
                       password=p["password"], app_id="lost")
    ops: list = []

    def sink(df, batch_id):
        t = df.toArrow()
        ops.append([(op, tb) for op, tb in zip(t.column("op").to_pylist(),
                                               t.column("table").to_pylist())])
        up(df, batch_id)

    ckpt = tmp_path / "chk"
    q = _run(spark, opts, ckpt, sink)
    assert q.exception() is None, q.exception()
    server.execute("UPDATE items SET v = 'live', n = 1 WHERE id <= 10", database=db)
    q = _run(spark, opts, ckpt, sink)
    assert q.exception() is None, q.exception()
    assert _delta(tmp_path / "delta", db) == _rows(server, db)

    # while the query is down: changes, then the binlogs that hold them are purged
    server.execute("DELETE FROM items WHERE id BETWEEN 100 AND 149", database=db)
    server.execute("UPDATE items SET v = 'lost', n = 2 WHERE id BETWEEN 200 AND 219", database=db)
    server.execute(f"INSERT INTO items SELECT seq, 'new', 3 FROM {server.seq_table(1030, 1001)}",
                   database=db)
    server.execute("INSERT INTO other VALUES (1, 'x', 1)", database=db)
    purged = _logs(server)[-1]           # the checkpoint's file
    server.execute("FLUSH BINARY LOGS")
    assert purged in _purge(server) and purged not in _logs(server)

    q = _run(spark, opts, ckpt, sink)                       # the default: a clear error
    assert q.exception() is not None
    assert "purged" in str(q.exception()) and "onDataLoss=resnapshot" in str(q.exception())
    assert _delta(tmp_path / "delta", db) != _rows(server, db)

    n = len(ops)
    first = _run(spark, dict(opts, onDataLoss="resnapshot"), ckpt, sink)
    assert first.exception() is None, first.exception()
    server.execute("UPDATE items SET v = 'after', n = 4 WHERE id = 1", database=db)
    q = _run(spark, dict(opts, onDataLoss="resnapshot"), ckpt, sink)
    assert q.exception() is None, q.exception()
    want = _rows(server, db)
    got = _delta(tmp_path / "delta", db)
    after = [o for batch in ops[n:] for o in batch]
    print(f"{server.server_name} purged checkpoint, onDataLoss=resnapshot: source rows "
          f"{len(want)}, Delta rows {len(got)}, lost {len(set(want) - set(got))}, extra "
          f"{len(set(got) - set(want))}; re-snapshot rows {after.count(('r', 'items'))}")
    assert got == want
    # the record: a truncate marker before the table's rows, the progress figure, the metric
    assert after[0] == ("t", "items") and after.count(("t", "items")) == 1
    assert after.count(("r", "items")) == len(want) and ("u", "items") in after
    assert ("r", "other") not in after
    reports = [json.loads(s.latestOffset) for pr in first.recentProgress for s in pr.sources
               if s.latestOffset and s.latestOffset.startswith("{")]
    lost = {(r.get("snapshot") or {}).get("lost") for r in reports} - {None}
    assert len(lost) == 1 and lost.pop().startswith(purged), reports
    listener = BinlogCdcMetricsListener()
    for pr in first.recentProgress:
        listener.update(pr)
    counted = [v for k, v in listener.samples().items()
               if k.startswith("binlog_cdc_data_loss_resnapshots_total{")]
    assert counted == [1.0], listener.samples()
