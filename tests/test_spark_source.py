"""The ``binlog-cdc`` Spark source against the real MariaDB of the harness and a local Spark.

What is checked: every change of the server arrives exactly once (200k changes over rotations,
restarts after kill -9 mid-batch), read limits bound every micro-batch, availableNow drains and
stops, typed mode gives the table's real Spark types and values, a batch read of the binlog files
gives the same rows as the stream, and option errors are clear and never show the password.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import subprocess
import sys
import time
from decimal import Decimal
from pathlib import Path

import pytest

pyspark = pytest.importorskip("pyspark")

from pyspark.sql.types import (BinaryType, ByteType, DateType, DayTimeIntervalType,  # noqa: E402
                               DecimalType, DoubleType, FloatType, IntegerType, LongType,
                               ShortType, StringType, StructType, TimestampNTZType, TimestampType)

from streaming.offsets import BinlogOffset  # noqa: E402

from spark_support import source_options  # noqa: E402

pytestmark = [pytest.mark.server, pytest.mark.spark]

HERE = Path(__file__).resolve().parent


def stream(spark, options: dict):
    reader = spark.readStream.format("binlog-cdc")
    for k, v in options.items():
        reader = reader.option(k, v)
    return reader.load()


def run_available_now(spark, options: dict, out: Path, checkpoint: Path, timeout: float = 240):
    """Run the stream into a parquet directory with availableNow (it must stop by itself);
    return (query, the rows this run added)."""
    before = {r.seq for r in spark.read.parquet(str(out)).collect()} if out.exists() else set()
    q = (stream(spark, options).writeStream.format("parquet").option("path", str(out))
         .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    assert q.awaitTermination(timeout), f"availableNow query did not stop in {timeout} s"
    if q.exception() is not None:
        raise AssertionError(f"query failed: {q.exception()}")
    return q, [r for r in spark.read.parquet(str(out)).collect() if r.seq not in before]


def replay(changes, key="id"):
    """Apply row changes (in seq order) to an empty table: {key: after image}."""
    state: dict = {}
    for r in sorted(changes, key=lambda r: r.seq):
        before = json.loads(r.before) if r.before else None
        after = json.loads(r.after) if r.after else None
        if r.op == "c":
            assert after[key] not in state, f"insert of an existing key: {r}"
            state[after[key]] = after
        elif r.op == "u":
            assert state.get(before[key]) == before, f"update of a different image: {r}"
            del state[before[key]]
            state[after[key]] = after
        else:
            assert state.get(before[key]) == before, f"delete of a different image: {r}"
            del state[before[key]]
    return state


def select_state(mariadb, db: str, table: str) -> dict:
    rows = mariadb.execute(f"SELECT id, v, note FROM `{db}`.`{table}` ORDER BY id")
    return {r[0]: {"id": r[0], "v": r[1], "note": r[2]} for r in rows}


# --- 200k changes over rotations ------------------------------------------------------------


def test_200k_changes_over_rotations_arrive_exactly_once(spark, mariadb, db, tmp_path):
    start = mariadb.current_position()
    files_before = len(mariadb.binlog_files())
    conn = mariadb.connect(database=db)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE orders (id BIGINT PRIMARY KEY, v INT, note VARCHAR(20))")
        for k in range(0, 160_000, 5_000):
            cur.execute("INSERT INTO orders VALUES " + ",".join(
                f"({i}, {i % 1000}, 'n{i}')" for i in range(k, k + 5_000)))
            if k % 40_000 == 35_000:
                cur.execute("FLUSH BINARY LOGS")
        cur.execute("UPDATE orders SET v = v + 1, note = 'upd' WHERE id < 25000")
        cur.execute("DELETE FROM orders WHERE id >= 145000")
    conn.close()
    assert len(mariadb.binlog_files()) - files_before >= 3

    opts = source_options(mariadb, db, start, minPartitions=4, maxBytesPerPartition=1 << 20)
    out = tmp_path / "out"
    q = (stream(spark, opts).writeStream.format("parquet").option("path", str(out))
         .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    assert q.awaitTermination(600)
    assert q.exception() is None
    rows = spark.read.parquet(str(out)).collect()

    ops = {}
    for r in rows:
        ops[r.op] = ops.get(r.op, 0) + 1
    assert ops == {"c": 160_000, "u": 25_000, "d": 15_000}
    assert len({r.seq for r in rows}) == 200_000, "duplicate changes"
    assert {r.table for r in rows} == {"orders"} and {r.db for r in rows} == {db}
    assert len({r.source.file for r in rows}) >= 4, "the changes span the rotated files"
    assert replay(rows) == select_state(mariadb, db, "orders")
    # the batch was planned as several tasks (a chunk per binlog file at least), each writing
    # its own part file
    assert len(list(out.glob("part-*.parquet"))) >= 4


# --- kill -9 mid-batch, restart from the checkpoint ------------------------------------------


def _kill_job_mid_batch(cfg: dict, checkpoint: Path, batches_done: int, timeout: float = 120):
    """Start the job; kill -9 its whole process group while batch ``batches_done`` has an offset
    logged but no commit (mid-batch). Returns the batch number that was cut."""
    proc = subprocess.Popen([sys.executable, str(HERE / "spark_stream_job.py"), json.dumps(cfg)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            assert proc.poll() is None, "the streaming job exited by itself"
            offsets = {int(p.name) for p in (checkpoint / "offsets").glob("[0-9]*")} \
                if (checkpoint / "offsets").exists() else set()
            commits = {int(p.name) for p in (checkpoint / "commits").glob("[0-9]*")} \
                if (checkpoint / "commits").exists() else set()
            pending = sorted(offsets - commits)
            if pending and pending[0] >= batches_done:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(30)
                return pending[0]
            time.sleep(0.05)
        raise AssertionError("no batch started within the time limit")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(30)


def test_killed_three_times_mid_batch_no_loss_no_duplicate(spark, mariadb, db, tmp_path):
    start = mariadb.current_position()
    conn = mariadb.connect(database=db)
    next_id = 0

    def workload(n_tx: int):
        nonlocal next_id
        with conn.cursor() as cur:
            for _ in range(n_tx):
                cur.execute("INSERT INTO orders VALUES " + ",".join(
                    f"({i}, {i % 7}, 'k{i}')" for i in range(next_id, next_id + 40)))
                cur.execute(f"UPDATE orders SET v = v + 100 WHERE id = {next_id}")
                cur.execute(f"DELETE FROM orders WHERE id = {next_id + 1}")
                next_id += 40

    with conn.cursor() as cur:
        cur.execute("CREATE TABLE orders (id BIGINT PRIMARY KEY, v INT, note VARCHAR(20))")
    workload(150)
    mariadb.execute("FLUSH BINARY LOGS")
    workload(100)

    ckpt, out = tmp_path / "ckpt", tmp_path / "out"
    cfg = {"options": source_options(mariadb, db, start, maxEventsPerTrigger=3000,
                                     minPartitions=2),
           "checkpoint": str(ckpt), "out": str(out)}
    cut = []
    for round_ in range(3):
        cut.append(_kill_job_mid_batch(cfg, ckpt, batches_done=(cut[-1] + 1) if cut else 0))
        workload(50)                        # the source moves on while the query is down
        if round_ == 1:
            mariadb.execute("FLUSH BINARY LOGS")
    assert cut == sorted(cut) and len(set(cut)) == 3

    done = subprocess.run([sys.executable, str(HERE / "spark_stream_job.py"),
                           json.dumps(dict(cfg, available_now=True))],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    conn.close()

    rows = spark.read.parquet(str(out)).collect()
    n_tx = 150 + 100 + 3 * 50
    ops = {}
    for r in rows:
        ops[r.op] = ops.get(r.op, 0) + 1
    assert ops == {"c": 40 * n_tx, "u": n_tx, "d": n_tx}
    assert len({r.seq for r in rows}) == len(rows), "a change was delivered twice"
    assert replay(rows) == select_state(mariadb, db, "orders")


# --- read limits and availableNow ------------------------------------------------------------


def test_max_events_per_trigger_bounds_batches_and_available_now_drains(
        spark, mariadb, db, tmp_path, binlog_snapshot):
    start = mariadb.current_position()
    conn = mariadb.connect(database=db)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE orders (id BIGINT PRIMARY KEY, v INT, note VARCHAR(20))")
        for i in range(300):
            cur.execute("INSERT INTO orders VALUES (%s, %s, %s)", (i, i, f"r{i}"))
        cur.execute("UPDATE orders SET v = v + 1000 WHERE id < 120")   # one 120-row transaction
        for i in range(300, 330):
            cur.execute("INSERT INTO orders VALUES (%s, %s, %s)", (i, i, f"r{i}"))
    opts = source_options(mariadb, db, start, maxEventsPerTrigger=50)
    ckpt, out = tmp_path / "ckpt", tmp_path / "out"
    q, rows = run_available_now(spark, opts, out, ckpt)
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert sum(sizes) == len(rows) == 450
    # every batch within the limit, but whole transactions: the 120-row one comes alone
    assert sizes == [50] * 6 + [120, 30]
    assert replay(rows) == select_state(mariadb, db, "orders")
    last = q.lastProgress["sources"][0]
    lag = json.loads(last["latestOffset"])
    assert lag["behindBytes"] == 0 and lag["lagSeconds"] == 0
    end = BinlogOffset.from_dict(json.loads(last["endOffset"]))
    assert end.gtid is not None   # MariaDB GTID position travels with the offset

    # the same query later: only what is new
    with conn.cursor() as cur:
        cur.execute("DELETE FROM orders WHERE id >= 320")
    conn.close()
    q2, rows2 = run_available_now(spark, opts, out, ckpt)
    assert sorted(r.op for r in rows2) == ["d"] * 10
    assert {json.loads(r.key)["id"] for r in rows2} == set(range(320, 330))

    # a batch read of the binlog files gives the very same rows as the stream
    files = binlog_snapshot(since_file=start[0])
    batch = (spark.read.format("binlog-cdc").option("includeTables", f"{db}.*")
             .load(str(files[0].parent)))
    assert batch.schema == stream(spark, opts).schema
    streamed = sorted(rows + rows2, key=lambda r: r.seq)
    assert sorted(batch.collect(), key=lambda r: r.seq) == streamed


# --- typed mode ---------------------------------------------------------------------------------


def test_typed_mode_types_and_values_match_select(spark, mariadb, db, tmp_path):
    from test_types_live import COLUMNS, MAX_ROW, MIN_ROW, NULL_ROW

    start = mariadb.current_position()
    conn = mariadb.connect(database=db)
    with conn.cursor() as cur:
        cur.execute("SET SESSION time_zone = '+00:00'")
        cur.execute(f"CREATE TABLE m ({COLUMNS})")
        for row in (MAX_ROW, MIN_ROW, NULL_ROW):
            cur.execute(f"INSERT INTO m VALUES ({row})")
        cur.execute("UPDATE m SET dc = -dc, vc = 'changed' WHERE id = 1")
        cur.execute("SELECT id, ti, tu, si, bi, bu, dc, dc2, dc3, y, dd, t6, dtm6, ts6, vc, bn, "
                    "e, s, f, d, b10 FROM m ORDER BY id")
        expected = {r[0]: r for r in cur.fetchall()}
    conn.close()
    opts = source_options(mariadb, db, start, table=f"{db}.m")
    opts.pop("includeTables")
    df = stream(spark, opts)
    image = df.schema["after"].dataType
    assert isinstance(image, StructType)
    types = {f.name: f.dataType for f in image.fields}
    assert types["ti"] == ByteType() and types["tu"] == ShortType()
    assert types["si"] == ShortType() and types["mu"] == IntegerType()
    assert types["iu"] == LongType() and types["bi"] == LongType()
    assert types["bu"] == DecimalType(20, 0) and types["dc"] == DecimalType(10, 2)
    assert types["dc2"] == StringType() and types["dc3"] == DecimalType(18, 9)
    assert types["f"] == FloatType() and types["d"] == DoubleType()
    assert types["dd"] == DateType() and types["dtm6"] == TimestampNTZType()
    assert types["ts6"] == TimestampType() and isinstance(types["t6"], DayTimeIntervalType)
    assert types["vc"] == StringType() and types["bn"] == BinaryType()
    assert types["lb"] == BinaryType() and types["tx"] == StringType()
    assert types["e"] == StringType() and types["y"] == IntegerType()
    assert types["b10"] == LongType() and types["b64"] == DecimalType(20, 0)

    q = (df.writeStream.format("memory").queryName("typed")
         .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    assert q.awaitTermination(240) and q.exception() is None
    table = spark.sql("SELECT op, after FROM typed WHERE op = 'c' OR op = 'u' ORDER BY seq"
                      ).toArrow()
    latest = {}
    for rec in table.to_pylist():   # the last image per id (the update comes after its insert)
        latest[rec["after"]["id"]] = rec["after"]
    assert sorted(latest) == [1, 2, 3]
    for id_, exp in expected.items():
        got = latest[id_]
        names = ["id", "ti", "tu", "si", "bi", "bu", "dc", "dc2", "dc3", "y", "dd", "t6", "dtm6",
                 "ts6", "vc", "bn", "e", "s", "f", "d", "b10"]
        for name, want in zip(names, exp):
            have = got[name]
            if want is None:
                assert have is None, (id_, name, have)
            elif name == "dc2":
                assert Decimal(have) == want
            elif name == "ts6":
                assert have == want.replace(tzinfo=dt.timezone.utc)
            elif name == "s":
                assert set(have.split(",")) == (set(want.split(",")) if isinstance(want, str)
                                                else set(want))
            elif name == "f":
                assert abs(have - want) <= abs(want) * 1e-6
            elif name == "b10":
                assert have == int.from_bytes(want, "big")
            else:
                assert have == want, (id_, name, have, want)


# --- options ------------------------------------------------------------------------------------


def test_unknown_option_lists_valid_ones(spark, mariadb, db):
    opts = source_options(mariadb, db, mariadb.current_position(), maxEventPerTrigger=10)
    with pytest.raises(Exception) as e:
        stream(spark, opts).writeStream.format("memory").queryName("bad").start()
    text = str(e.value)
    assert "unknown option 'maxeventpertrigger'" in text.lower()
    assert "maxEventsPerTrigger" in text and "startingPosition" in text


def test_wrong_password_is_clear_and_never_shown(spark, mariadb, db, tmp_path):
    opts = source_options(mariadb, db, mariadb.current_position(), table=f"{db}.x")
    opts.pop("includeTables")
    opts["password"] = "Sup3r-S3cret-Value"
    with pytest.raises(Exception) as e:
        stream(spark, opts)
    text = str(e.value)
    assert "AuthenticationError" in text and "refused user 'cdc'" in text
    assert "Sup3r-S3cret-Value" not in text


def test_missing_start_file_fails_as_data_loss(spark, mariadb, db, tmp_path):
    opts = source_options(mariadb, db, ("mysql-bin.000000", 4))
    q = (stream(spark, opts).writeStream.format("memory").queryName("lost")
         .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True)
         .start())
    with pytest.raises(Exception) as e:
        q.awaitTermination(120)
    text = str(e.value)
    assert "BinlogPurgedError" in text
    assert "mysql-bin.000000" in text and "purged" in text
    assert mariadb.cdc_params()["password"] not in text
