"""The initial snapshot (``startingPosition=snapshot``) against MariaDB 10.11, 11.8 and MySQL 9.7
and local Spark: after the binlogs are purged a new stream still ends equal to the source; rows
written, updated (primary keys too) and deleted across chunk boundaries while the snapshot runs
end right, and every snapshot row agrees with the streamed changes around its position (the
chunks' positions are exact); no snapshot transaction lives longer than one chunk's read; a
query killed mid-snapshot resumes at the next unread chunk."""

from __future__ import annotations

import json
import os
import random
import threading
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.server, pytest.mark.spark, pytest.mark.servers()]

pa = pytest.importorskip("pyarrow")
pytest.importorskip("deltalake")

from deltalake import DeltaTable  # noqa: E402

from streaming.sinks.delta.upserter import DeltaUpserter  # noqa: E402

from support.processes import DELTA_JOB, kill_group, run_to_end, start_job  # noqa: E402
from support.spark_support import source_options  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def _create(mariadb, db: str, rows: int) -> None:
    mariadb.execute(f"CREATE DATABASE `{db}`")
    mariadb.execute("CREATE TABLE orders (id BIGINT PRIMARY KEY, customer INT NOT NULL, "
                    "amount DECIMAL(12,2), status ENUM('new','paid','shipped') NOT NULL, "
                    "note VARCHAR(40), created DATETIME(3))", database=db)
    mariadb.execute("CREATE TABLE tags (name VARCHAR(20) NOT NULL, n INT NOT NULL, "
                    "v TEXT, UNIQUE KEY (name, n))", database=db)      # no PK: a unique key
    mariadb.execute("CREATE TABLE loose (a INT, b VARCHAR(10))", database=db)    # no key
    mariadb.execute(
        f"INSERT INTO orders SELECT seq * 2, seq % 97, seq / 100, ELT(1 + seq % 3, 'new', "
        f"'paid', 'shipped'), CONCAT('n', seq), '2024-01-01 00:00:00.123' + INTERVAL seq SECOND "
        f"FROM {mariadb.seq_table(rows)}", database=db)
    mariadb.execute("INSERT INTO tags SELECT CONCAT('t', seq % 7), seq, REPEAT('x', seq % 5) "
                    f"FROM {mariadb.seq_table(300)}", database=db)
    mariadb.execute("INSERT INTO loose SELECT seq, CONCAT('l', seq) "
                    f"FROM {mariadb.seq_table(50)}", database=db)


def _rows(mariadb, db: str, table: str, order: str) -> list[tuple]:
    conn = mariadb.connect(database=db)
    try:
        with conn.cursor() as cur:
            cur.execute(f"SELECT * FROM {table} ORDER BY {order}")
            return [tuple(_norm(v) for v in r) for r in cur.fetchall()]
    finally:
        conn.close()


def _norm(v):
    if isinstance(v, (set, frozenset)):
        return ",".join(sorted(v))
    if hasattr(v, "isoformat") and not isinstance(v, str):
        return v.isoformat(sep=" ") if hasattr(v, "hour") else v.isoformat()
    if isinstance(v, bytes):
        return v
    return str(v) if v is not None and not isinstance(v, (int, str)) else v


def _delta(root: Path, db: str, table: str, order: list[str]) -> list[tuple]:
    t = DeltaTable(str(root / db / table)).to_pyarrow_table().sort_by(
        [(k, "ascending") for k in order])
    return [tuple(_norm(v) for v in r.values()) for r in t.to_pylist()]


def _writer(mariadb, db: str, stop: threading.Event, stats: dict, base: int) -> None:
    """Inserts, updates (primary keys too), deletes across the whole key range."""
    rnd = random.Random(7)
    conn = mariadb.connect(database=db)
    conn.autocommit(True)
    n = 0
    try:
        with conn.cursor() as cur:
            while not stop.is_set():
                k = rnd.randrange(1, base) * 2
                op = n % 4
                if op == 0:
                    cur.execute("INSERT IGNORE INTO orders VALUES (%s, 1, 1.5, 'new', 'w', NULL)",
                                (k + 1,))               # odd ids: between existing ones
                elif op == 1:
                    cur.execute("UPDATE orders SET amount = amount + 1, status = 'paid' "
                                "WHERE id = %s", (k,))
                elif op == 2:
                    cur.execute("UPDATE IGNORE orders SET id = id + 1000000001 WHERE id = %s",
                                (k,))                   # a primary-key change
                else:
                    cur.execute("DELETE FROM orders WHERE id = %s", (k + 2,))
                n += 1
                stats["writes"] = n
                time.sleep(0.002)
    finally:
        conn.close()


def _trx_monitor(mariadb, user: str, stop: threading.Event, ages: list) -> None:
    """The age of the snapshot user's open transactions (information_schema.innodb_trx); an
    error ends up in *ages* too (the test then fails on it)."""
    conn = mariadb.connect()
    try:
        with conn.cursor() as cur:
            while not stop.is_set():
                cur.execute("SELECT MAX(TIMESTAMPDIFF(MICROSECOND, t.trx_started, NOW(6))) "
                            "FROM information_schema.innodb_trx t JOIN "
                            "information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id "
                            "WHERE p.USER = %s", (user,))
                age = cur.fetchone()[0]
                if age is not None:
                    ages.append(int(age) / 1e6)
                # InnoDB refreshes its innodb_trx cache only when it was not read for 100 ms
                time.sleep(0.15)
    except Exception as e:  # noqa: BLE001
        ages.append(e)
    finally:
        conn.close()


def _images(change) -> list:
    """``[(id, image before, image after)]`` of a streamed row (None: no such row); a primary-key
    change is a delete of the old id and an insert of the new one."""
    op, before, after = change
    b = json.loads(before) if before else None
    a = json.loads(after) if after else None
    if op == "r":
        return [(a["id"], None, a)]
    if b is not None and a is not None and a["id"] != b["id"]:
        return [(b["id"], b, None), (a["id"], None, a)]
    return [((a or b)["id"], b, a)]


def _disagreements(rows: list) -> list:
    """Snapshot rows (op r) that disagree with the changes streamed around their position, in
    ``seq`` order: the last change of the same row before it must leave the image it holds, the
    first change after it must find that image."""
    timeline: dict = {}
    for seq, op, before, after in sorted(rows):
        for key, b, a in _images((op, before, after)):
            timeline.setdefault(key, []).append((seq, op, b, a))
    bad = []
    for key, events in timeline.items():
        for i, (seq, op, _b, image) in enumerate(events):
            if op != "r":
                continue
            prev = [e for e in events[:i] if e[1] != "r"]
            after = [e for e in events[i + 1:] if e[1] != "r"]
            if prev and prev[-1][3] != image:
                bad.append(("before", key, seq, prev[-1], image))
            if after and after[0][2] != image:
                bad.append(("after", key, seq, after[0], image))
    return bad


def test_snapshot_after_purge_with_concurrent_writes_equals_source(spark, server,
                                                                     mariadb_factory, tmp_path):
    mariadb = mariadb_factory()
    db = "snap1"
    base = 20000
    _create(mariadb, db, base)
    mariadb.execute("FLUSH BINARY LOGS")
    file, _ = mariadb.current_position()
    mariadb.execute(f"PURGE BINARY LOGS TO '{file}'")     # the rows' inserts are gone
    p = mariadb.cdc_params()
    opts = source_options(mariadb, db, ("x", 4), maxEventsPerTrigger=3000,
                          snapshotChunkRows=1000, includeTables=f"{db}.orders")
    opts["startingPosition"] = "snapshot"
    root = tmp_path / "delta"
    up = DeltaUpserter(root, host=p["host"], port=p["port"], user=p["user"],
                       password=p["password"], app_id="snap")
    reads = {"r": 0, "other": 0, "batches": 0}
    streamed: list = []

    def fb(df, batch_id):
        t = df.toArrow() if hasattr(df, "toArrow") else pa.Table.from_pandas(df.toPandas())
        ops = t.column("op").to_pylist()
        reads["r"] += ops.count("r")
        reads["other"] += len(ops) - ops.count("r")
        reads["batches"] += 1
        streamed.extend(zip(*(t.column(c).to_pylist() for c in ("seq", "op", "before",
                                                                "after"))))
        up(df, batch_id)

    stop, stats = threading.Event(), {"writes": 0}
    threads = [threading.Thread(target=_writer, args=(mariadb, db, stop, stats, base))]
    for t in threads:
        t.start()
    try:
        reader = spark.readStream.format("binlog-cdc")
        for k, v in opts.items():
            reader = reader.option(k, v)
        q = (reader.load().writeStream.foreachBatch(fb)
             .option("checkpointLocation", str(tmp_path / "chk"))
             .trigger(availableNow=True).start())
        assert q.awaitTermination(300)
        assert q.exception() is None, q.exception()
    finally:
        stop.set()
        for t in threads:
            t.join()
    # the writes after the snapshot's end too
    q = (spark.readStream.format("binlog-cdc").options(**opts).load().writeStream
         .foreachBatch(fb).option("checkpointLocation", str(tmp_path / "chk"))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(300) and q.exception() is None, q.exception()
    print(f"SNAPSHOT rows={reads['r']} changes={reads['other']} batches={reads['batches']} "
          f"writes={stats['writes']}")
    assert stats["writes"] > 50, stats
    assert _delta(root, db, "orders", ["id"]) == _rows(mariadb, db, "orders", "id")
    assert reads["r"] >= base - stats["writes"]
    assert reads["batches"] >= 7                       # maxEventsPerTrigger bounds batches
    # exact chunk positions: no snapshot row holds a change after its seq or misses one before
    bad = _disagreements(streamed)
    assert not bad, (len(bad), bad[:3])


@pytest.mark.compat("snapshot")
def test_tables_by_unique_key_and_without_key(spark, mariadb, tmp_path):
    """A table without a primary key is chunked by a unique NOT NULL key; one without any key
    is read as one chunk; JSON images of snapshot rows are the binlog's (op 'r')."""
    db = "snap_keys"
    _create(mariadb, db, 10)
    opts = source_options(mariadb, db, ("x", 4), snapshotChunkRows=64)
    opts["startingPosition"] = "snapshot"
    got: list = []

    def fb(df, batch_id):
        got.extend(df.select("op", "table", "after", "key", "seq", "source").collect())

    q = (spark.readStream.format("binlog-cdc").options(**opts).load().writeStream
         .foreachBatch(fb).option("checkpointLocation", str(tmp_path / "chk"))
         .trigger(availableNow=True).start())
    assert q.awaitTermination(120) and q.exception() is None, q.exception()
    by_table: dict = {}
    for r in got:
        assert r.op == "r"
        by_table.setdefault(r.table, []).append(json.loads(r.after))
    tags = sorted((d["name"], d["n"], d["v"]) for d in by_table["tags"])
    assert tags == _rows(mariadb, db, "tags", "name, n")
    loose = sorted((d["a"], d["b"]) for d in by_table["loose"])
    assert loose == _rows(mariadb, db, "loose", "a")
    orders = [r for r in got if r.table == "orders"]
    assert sorted(json.loads(r.key)["id"] for r in orders) == [2 * i for i in range(1, 11)]
    first = [r for r in orders if json.loads(r.key) == {"id": 2}][0]
    assert json.loads(first.after) == {"id": 2, "customer": 1, "amount": 0.01, "status": "paid",
                                       "note": "n1", "created": "2024-01-01T00:00:01.123000"}
    assert first.source.file and first.source.pos > 4


@pytest.mark.slow
@pytest.mark.servers("mariadb-10.11", "mysql-9.7")   # 11.8 reads chunks as 10.11 does
def test_million_rows_killed_three_times_mid_snapshot(server, mariadb_factory, tmp_path):
    """1,000,000 rows (BINLOG_CDC_SNAPSHOT_ROWS) snapshotted while a writer inserts, updates
    (primary keys too) and deletes across chunk boundaries; the query is killed -9 three times
    mid-snapshot and restarted from its checkpoint; the Delta table ends equal to SELECT *."""
    rows = int(os.environ.get("BINLOG_CDC_SNAPSHOT_ROWS", "1000000"))
    mariadb = mariadb_factory()
    db = "snapkill"
    t0 = time.monotonic()
    _create(mariadb, db, rows)
    created = time.monotonic() - t0
    p = mariadb.cdc_params()
    opts = source_options(mariadb, db, ("x", 4), maxEventsPerTrigger=rows // 8,
                          snapshotChunkRows=rows // 16, includeTables=f"{db}.orders")
    opts["startingPosition"] = "snapshot"
    root = tmp_path / "delta"
    cfg = {"root": str(root), "app_id": "snap-kill", "checkpoint": str(tmp_path / "chk"),
           "options": opts,
           "server": {"host": p["host"], "port": p["port"], "user": p["user"],
                      "password": p["password"]}}
    script = tmp_path / "job.py"
    script.write_text(DELTA_JOB)
    log = tmp_path / "job.log"
    stop, stats, ages = threading.Event(), {"writes": 0}, []
    writer = threading.Thread(target=_writer, args=(mariadb, db, stop, stats, rows))
    monitor = threading.Thread(target=_trx_monitor, args=(mariadb, p["user"], stop, ages))
    writer.start()
    monitor.start()
    t_snap = time.monotonic()
    kills = []
    try:
        for _kill in range(3):
            seen = log.read_text().count("batch ") if log.exists() else 0
            proc = start_job(script, cfg, log)
            deadline = time.monotonic() + 240
            try:
                while log.read_text().count("batch ") < seen + 1:
                    assert proc.poll() is None, log.read_text()[-3000:]
                    assert time.monotonic() < deadline, log.read_text()[-3000:]
                    time.sleep(0.2)
                time.sleep(random.Random(_kill).uniform(0.5, 3.0))   # inside the next batch
            finally:
                kill_group(proc)
            kills.append(log.read_text().count("batch "))
        assert "done" not in log.read_text(), "the snapshot ended before the third kill"
    finally:
        stop.set()
        writer.join()
        monitor.join()
    t1 = time.monotonic()
    killed_phase = t1 - t_snap
    run_to_end(script, cfg, log)
    got, want = _delta(root, db, "orders", ["id"]), _rows(mariadb, db, "orders", "id")
    print(f"SNAPSHOT-KILL rows={rows} created_s={created:.1f} kills={len(kills)} "
          f"batch_lines_at_kills={kills} writes={stats['writes']} "
          f"final_run_s={time.monotonic() - t1:.1f} source_rows={len(want)} "
          f"trx_samples={len(ages)} longest_trx_s={max([a for a in ages if not isinstance(a, Exception)], default=0):.2f} "
          f"killed_phase_s={killed_phase:.0f}")
    assert len(got) == len(want) and got == want
    # no transaction held for the whole snapshot: the snapshot user's transactions (one per
    # chunk of rows/16 rows) were seen, none older than a chunk's read
    assert ages, "the monitor never saw a snapshot transaction"
    assert not [a for a in ages if isinstance(a, Exception)], ages[-1]
    assert max(ages) < min(10.0, killed_phase / 3), (max(ages), killed_phase)


@pytest.mark.compat("snapshot")
def test_batch_read_of_a_live_server_and_typed_mode(spark, mariadb):
    """spark.read with option host: the tables of a live server, read in chunks; typed mode
    gives the table's Spark types."""
    db = "snap_batch"
    _create(mariadb, db, 500)
    p = mariadb.cdc_params()
    base = {"host": p["host"], "port": str(p["port"]), "user": p["user"],
            "password": p["password"], "snapshotChunkRows": "64"}
    df = spark.read.format("binlog-cdc").options(includeTables=f"{db}.orders", **base).load()
    rows = df.select("op", "key", "after").collect()
    assert {r.op for r in rows} == {"r"}
    assert sorted(json.loads(r.key)["id"] for r in rows) == [2 * i for i in range(1, 501)]
    typed = spark.read.format("binlog-cdc").options(table=f"{db}.orders", **base).load()
    got = sorted((r.after.id, str(r.after.amount), r.after.status, r.after.created)
                 for r in typed.select("after").collect())
    conn = mariadb.connect(database=db)
    with conn.cursor() as cur:
        cur.execute("SELECT id, amount, status, created FROM orders ORDER BY id")
        want = [(i, str(a), s, c) for i, a, s, c in cur.fetchall()]
    conn.close()
    assert got == want
    with pytest.raises(Exception) as e:
        spark.read.format("binlog-cdc").options(includeTables="nope.*", **base).load().collect()
    assert "nothing to read" in str(e.value)


def test_a_signal_re_snapshots_one_table_while_the_stream_runs(spark, mariadb, tmp_path):
    """Rows that exist before the stream's start (startingPosition=latest) reach Delta only once
    a row in the signal table asks for a re-snapshot of their table; the stream goes on."""
    db = "snap_signal"
    _create(mariadb, db, 3000)
    mariadb.execute("CREATE TABLE signals (id INT AUTO_INCREMENT PRIMARY KEY, "
                    "table_name VARCHAR(200) NOT NULL)", database=db)
    p = mariadb.cdc_params()
    opts = source_options(mariadb, db, ("x", 4), includeTables=f"{db}.orders",
                          signalTable=f"{db}.signals", snapshotChunkRows=500)
    opts["startingPosition"] = "latest"
    root = tmp_path / "delta"
    up = DeltaUpserter(root, host=p["host"], port=p["port"], user=p["user"],
                       password=p["password"], app_id="signal")
    ops: list = []

    def fb(df, batch_id):
        batch_ops = [r.op for r in df.select("op").collect()]
        up(df, batch_id)
        ops.extend(batch_ops)

    q = (spark.readStream.format("binlog-cdc").options(**opts).load().writeStream
         .foreachBatch(fb).option("checkpointLocation", str(tmp_path / "chk"))
         .trigger(processingTime="300 milliseconds").start())
    try:
        deadline = time.monotonic() + 120
        while q.lastProgress is None:             # the start offset ('latest') is taken
            assert time.monotonic() < deadline and q.exception() is None, q.exception()
            time.sleep(0.2)
        mariadb.execute("UPDATE orders SET note = 'live' WHERE id = 2", database=db)
        deadline = time.monotonic() + 60
        while "u" not in ops:
            assert time.monotonic() < deadline and q.exception() is None, q.exception()
            time.sleep(0.3)
        assert len(_delta(root, db, "orders", ["id"])) == 1      # only the live change
        mariadb.execute(f"INSERT INTO signals (table_name) VALUES ('{db}.orders')", database=db)
        mariadb.execute("DELETE FROM orders WHERE id = 4", database=db)
        want = _rows(mariadb, db, "orders", "id")
        deadline = time.monotonic() + 120
        while not (root / db / "orders").exists() or _delta(root, db, "orders", ["id"]) != want:
            assert time.monotonic() < deadline, (len(_delta(root, db, "orders", ["id"])),
                                                 len(want))
            assert q.exception() is None, q.exception()
            time.sleep(0.5)
        mariadb.execute("INSERT INTO orders VALUES (1, 1, 1, 'new', 'after', NULL)", database=db)
        want = _rows(mariadb, db, "orders", "id")
        deadline = time.monotonic() + 60
        while _delta(root, db, "orders", ["id"]) != want:
            assert time.monotonic() < deadline and q.exception() is None, q.exception()
            time.sleep(0.3)
    finally:
        q.stop()
    assert ops.count("r") == 2999                  # the table as the re-snapshot read it
