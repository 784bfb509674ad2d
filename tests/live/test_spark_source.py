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

from cdc.positions import Position  # noqa: E402

from streaming._compat import ADMISSION_CONTROL  # noqa: E402
from support.spark_support import source_options  # noqa: E402

pytestmark = [pytest.mark.server, pytest.mark.spark, pytest.mark.servers]

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
    proc = subprocess.Popen([sys.executable, str(HERE.parent / "support" / "spark_stream_job.py"), json.dumps(cfg)],
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


@pytest.mark.compat("stream: driver killed mid-batch 3 times")
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

    # PySpark 4.0/4.1 run availableNow as Trigger.Once: the run that finishes the interrupted
    # batch stops there, and a second one reads the rest
    for _ in range(1 if ADMISSION_CONTROL else 2):
        done = subprocess.run([sys.executable, str(HERE.parent / "support" /
                                                   "spark_stream_job.py"),
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


@pytest.mark.compat("stream: limits, availableNow, restart; file batch read")
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
    if ADMISSION_CONTROL:
        # every batch within the limit, but whole transactions: the 120-row one comes alone
        assert sizes == [50] * 6 + [120, 30]
    else:   # PySpark 4.0/4.1: availableNow is one batch up to the end seen at the start
        assert sizes == [450]
    assert replay(rows) == select_state(mariadb, db, "orders")
    last = q.lastProgress["sources"][0]
    lag = json.loads(last["latestOffset"])
    assert lag["behindBytes"] == 0 and lag["lagSeconds"] == 0
    end = Position.from_offset(json.loads(last["endOffset"]))
    # the GTID state travels with the offset (on MySQL a file/position start learns the set
    # executed before it), so the query can resume on another server by GTID
    assert str(end.gtid) == mariadb.gtid_executed()

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


def test_typed_mode_batches_hold_max_events_when_ddl_precedes_the_rows(spark, mariadb, db,
                                                                       tmp_path):
    """Typed mode follows DDL without delivering it: a CREATE TABLE in the range takes no room
    in a batch (it took one row of the limit: 49-row batches and a 1-row tail)."""
    start = mariadb.current_position()
    conn = mariadb.connect(database=db)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE orders (id BIGINT PRIMARY KEY, v INT)")
        for i in range(100):
            cur.execute("INSERT INTO orders VALUES (%s, %s)", (i, i))
        cur.execute("ALTER TABLE orders COMMENT 'no shape change'")
        for i in range(100, 150):
            cur.execute("INSERT INTO orders VALUES (%s, %s)", (i, i))
    conn.close()
    opts = source_options(mariadb, db, start, maxEventsPerTrigger=50)
    del opts["includeTables"]
    opts["table"] = f"{db}.orders"
    q, rows = run_available_now(spark, opts, tmp_path / "out", tmp_path / "ckpt")
    assert [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]] == [50, 50, 50]
    assert sorted(r.after.id for r in rows) == list(range(150))


# --- typed mode ---------------------------------------------------------------------------------


def test_typed_mode_types_and_values_match_select(spark, mariadb, db, tmp_path):
    from test_types_live import COLUMNS, rows_for

    start = mariadb.current_position()
    conn = mariadb.connect(database=db)
    with conn.cursor() as cur:
        cur.execute("SET SESSION time_zone = '+00:00'")
        cur.execute(f"CREATE TABLE m ({COLUMNS})")
        for row in rows_for(mariadb):
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


# ===================================================================================================
# The MySQL 8.4 path (GTID-set offsets, COM_BINLOG_DUMP(_GTID), SHOW BINARY LOG STATUS, rows v2,
# the MySQL FORMAT_DESCRIPTION) end to end through Spark, against the fake MySQL 8.4 source of
# tests/fake_source.py: no MySQL server is needed, the events are built byte by byte from the spec.
# ===================================================================================================

from cdc.binlog.gtid import GtidSet  # noqa: E402

from support.fake_source import (COM_BINLOG_DUMP, COM_BINLOG_DUMP_GTID, BinlogFile,  # noqa: E402
                         EventBuilder, FakeSource, Table, parse_dump)

MY = EventBuilder()                 # server_id 1, uuid 3e11fa47-71ca-11e1-9e33-c80aa9429562
MY_UUID = MY.uuid
ITEMS = Table(91, "shop", "items")
ORDERS = Table(92, "crm", "orders")
MY_TS_MS = MY.timestamp * 1000


def my_statements(g: int) -> list:
    """The statements of transaction MY_UUID:g, as ``(op, table, rows)`` (update rows are
    ``(before, after)`` pairs): multi-row inserts, updates and deletes, one or two tables."""
    k = g % 4
    if k == 0:      # a 3-row insert
        return [("c", ITEMS, [(g * 10 + i, f"item {g}.{i}") for i in range(3)])]
    if k == 1:      # two statements on two tables (NULL and non-ASCII values)
        return [("c", ORDERS, [(g, "ü-order ✓" if g % 3 else None)]),
                ("u", ITEMS, [((g * 10 - 10, f"item {g - 1}.0"), (g * 10 - 10, "sold"))])]
    if k == 2:      # a 2-row update
        return [("u", ORDERS, [((g - 1, None), (g - 1, "paid")),
                               ((g + 500, "a"), (g + 500, None))])]
    return [("d", ITEMS, [((g - 3) * 10 + 1, f"item {g - 3}.1"), ((g - 3) * 10 + 2, None)])]


def my_file(name: str, first: int, last: int, *, rotate_to: str | None = None,
            previous: str = "") -> BinlogFile:
    """A binlog file with transactions MY_UUID:first..last (PREVIOUS_GTIDS: 1..first-1 and
    *previous*)."""
    prev = str(GtidSet.parse(previous).union(f"{MY_UUID}:1-{first - 1}" if first > 1 else ""))
    txs = [(f"{MY_UUID}:{g}", MY.transaction_of(g, my_statements(g), 1000 + g))
           for g in range(first, last + 1)]
    return BinlogFile.build(name, [MY.fde(), MY.previous_gtids(prev)], txs, rotate_to=rotate_to)


def my_expected(files: list[BinlogFile], gnos) -> list[tuple]:
    """The row changes of transactions *gnos* in binlog order, as :func:`my_actual` gives them:
    (op, db, table, before, after, key, gtid, file, tx start, row index, xid, ts_ms)."""
    image = (lambda r: None if r is None else {"id": r[0], "name": r[1]})
    out = []
    for f in files:
        starts = {}
        for off, _, gtid in f.events():
            starts.setdefault(gtid, off)
        for gtid, _ in f.transactions:
            g = int(gtid.rsplit(":", 1)[1])
            if g not in gnos:
                continue
            row = 0
            for op, t, rows in my_statements(g):
                for r in rows:
                    before, after = {"c": (None, r), "u": r, "d": (r, None)}[op]
                    key = {"id": (after or before)[0]}
                    out.append((op, t.schema, t.name, image(before), image(after), key, gtid,
                                f.name, starts[gtid], row, 1000 + g, MY_TS_MS))
                    row += 1
    return out


def my_actual(rows) -> list[tuple]:
    """Spark rows in ``seq`` order as the tuples of :func:`my_expected`."""
    load = (lambda text: None if text is None else json.loads(text))
    return [(r.op, r.db, r.table, load(r.before), load(r.after), load(r.key), r.source.gtid,
             r.source.file, r.source.pos, r.source.row, r.source.xid, r.ts_ms)
            for r in sorted(rows, key=lambda r: r.seq)]


def my_options(src: FakeSource, start: str, **extra) -> dict:
    opts = {"host": "127.0.0.1", "port": str(src.port), "user": src.user,
            "password": src.password, "serverId": "7000", "startingPosition": start,
            "maxEventsPerTrigger": "9"}
    opts.update({k: str(v) for k, v in extra.items()})
    return opts


def checkpoint_offsets(ckpt: Path) -> dict[int, dict]:
    """Batch id -> the source's JSON offset in ``<checkpoint>/offsets/<id>``."""
    return {int(p.name): json.loads(p.read_text().splitlines()[-1])
            for p in (ckpt / "offsets").iterdir() if p.name.isdigit()}


def dump_starts(src: FakeSource) -> list[tuple[str, int]]:
    """(file, pos) of every COM_BINLOG_DUMP the fake was sent."""
    return [(parse_dump(d)["file"], parse_dump(d)["pos"]) for d in src.got.dumps
            if d[0] == COM_BINLOG_DUMP]


def boundary_gnos(files: list[BinlogFile]) -> dict[tuple[str, int], int]:
    """(file, end of a transaction) -> its gno."""
    return {(f.name, f.end_of(g)): int(g.rsplit(":", 1)[1]) for f in files
            for g, _ in f.transactions}


def run_available_now_batches(spark, options: dict, checkpoint: Path, timeout: float = 240):
    """Run the stream with availableNow into foreachBatch (a sink that recovers from any
    checkpoint); return (query, {batch id: its rows})."""
    batches: dict[int, list] = {}

    def collect(df, batch_id):
        batches[batch_id] = df.collect()   # a replayed batch id overwrites: idempotent

    q = (stream(spark, options).writeStream.foreachBatch(collect)
         .option("checkpointLocation", str(checkpoint)).trigger(availableNow=True).start())
    assert q.awaitTermination(timeout), f"availableNow query did not stop in {timeout} s"
    if q.exception() is not None:
        raise AssertionError(f"query failed: {q.exception()}")
    return q, batches


def drop_batches(ckpt: Path, *, offsets_after: int, commits_from: int) -> None:
    """Forget batches as a crash would have: offset logs after *offsets_after* and commits from
    *commits_from* on (with the checksum files Hadoop keeps beside them)."""
    for log, first in (("offsets", offsets_after + 1), ("commits", commits_from)):
        for p in (ckpt / log).iterdir():
            if p.name.isdigit() and int(p.name) >= first:
                p.unlink()
                (ckpt / log / f".{p.name}.crc").unlink(missing_ok=True)


def assert_batches_within(q, limit: int) -> list[int]:
    """Each micro-batch holds at most *limit* changes (the fake's transactions are all smaller);
    returns the batch sizes."""
    sizes = [p["numInputRows"] for p in q.recentProgress if p["numInputRows"]]
    assert sizes and max(sizes) <= limit, sizes
    return sizes


def test_mysql84_fake_answers_the_driver_and_dumps_from_a_position_as_mysql_does():
    """What the Spark tests rely on, checked without Spark: the fake answers the driver's
    queries as MySQL 8.4 does, and a COM_BINLOG_DUMP from a mid-file position gets the
    artificial ROTATE (with that position), the FORMAT_DESCRIPTION with log_pos and created
    cleared, then the events from the position on (not PREVIOUS_GTIDS)."""
    import pymysql
    import zlib

    from cdc.replica.protocol import binlog_dump
    from support.fake_source import FDE, GTID, PREVIOUS_GTIDS, ROTATE

    f1 = my_file("binlog.000001", 1, 6, rotate_to="binlog.000002")
    f2 = my_file("binlog.000002", 7, 9)
    with FakeSource([f1, f2]) as src:
        conn = pymysql.connect(host="127.0.0.1", port=src.port, user=src.user,
                               password=src.password)
        try:
            with conn.cursor() as cur:
                with pytest.raises(pymysql.err.ProgrammingError) as e:
                    cur.execute("SHOW MASTER STATUS")         # gone in 8.4
                assert e.value.args[0] == 1064
                cur.execute("SHOW BINARY LOG STATUS")
                assert cur.fetchall() == (("binlog.000002", str(f2.size), "", "",
                                           f"{MY_UUID}:1-9"),)
                cur.execute("SHOW BINARY LOGS")
                assert cur.fetchall() == (("binlog.000001", str(f1.size), "No"),
                                          ("binlog.000002", str(f2.size), "No"))
                cur.execute("SELECT @@GLOBAL.gtid_purged")
                assert cur.fetchall() == (("",),)
                cur.execute("SELECT VERSION()")
                assert cur.fetchall() == (("8.4.0",),)
        finally:
            conn.close()

        mid = f1.end_of(f"{MY_UUID}:3")
        _, sent = src._dump_stream(binlog_dump("binlog.000001", mid, 7000, flags=1))
        assert [ev[4] for ev in sent[:3]] == [ROTATE, FDE, GTID]    # no PREVIOUS_GTIDS
        assert sent[0][19:27] == mid.to_bytes(8, "little") and sent[0][27:-4] == b"binlog.000001"
        assert int.from_bytes(sent[1][13:17], "little") == 0            # FDE log_pos cleared
        assert zlib.crc32(sent[1][:-4]) == int.from_bytes(sent[1][-4:], "little")
        # then the rest of binlog.000001 (its ROTATE), and binlog.000002 from its start
        rest = [ev for off, ev, _ in f1.events() if off >= mid]
        assert sent[2:2 + len(rest)] == rest
        after = sent[2 + len(rest):]
        assert [ev[4] for ev in after[:3]] == [ROTATE, FDE, PREVIOUS_GTIDS]
        assert after[1] == f2.header[0]                       # from position 4: as written
        # positions MySQL refuses: inside an event, past the end, an unknown file
        for name, pos in (("binlog.000001", mid + 1), ("binlog.000002", f2.size + 1),
                          ("binlog.000009", 4)):
            _, err = src._dump_stream(binlog_dump(name, pos, 7000, flags=1))
            assert err[:3] == b"\xff\xd4\x04"                   # ERR 1236


def test_mysql84_fake_earliest_gtid_offsets_restart_rotation_and_replay(spark, tmp_path):
    ckpt, out = tmp_path / "ckpt", tmp_path / "out"
    f30 = my_file("binlog.000001", 1, 30)

    # 1. from the earliest binlog: every change once, in several micro-batches
    with FakeSource(f30) as src:
        q, rows = run_available_now(spark, my_options(src, "earliest"), out, ckpt)
        queries = list(src.got.queries)
        dumps = dump_starts(src)
    assert my_actual(rows) == my_expected([f30], range(1, 31))
    assert len({r.seq for r in rows}) == len(rows)     # nothing twice
    sizes = assert_batches_within(q, 9)
    assert len(sizes) >= 5 and sum(sizes) == len(rows)
    # MySQL 8.4: the server's version chooses SHOW BINARY LOG STATUS (SHOW MASTER STATUS, a
    # syntax error there, is never tried)
    assert "SHOW MASTER STATUS" not in queries and "SHOW BINARY LOG STATUS" in queries
    assert "SELECT @@GLOBAL.gtid_purged" in queries
    offsets = checkpoint_offsets(ckpt)
    assert sorted(offsets) == list(range(len(sizes)))
    # each batch's task read from the batch's start, mid-file (COM_BINLOG_DUMP at file, pos)
    assert {("binlog.000001", 4)} | {(offsets[i]["file"], offsets[i]["pos"])
                                     for i in sorted(offsets)[:-1]} <= set(dumps)
    # the committed offsets: transaction boundaries carrying the MySQL GTID set up to there
    ends = boundary_gnos([f30])
    gnos = [ends[(o["file"], o["pos"])] for o in (offsets[i] for i in sorted(offsets))]
    assert gnos == sorted(set(gnos)) and gnos[-1] == 30
    for i, g in zip(sorted(offsets), gnos):
        assert offsets[i]["gtid"] == f"{MY_UUID}:1-{g}"
    end = Position.from_offset(json.loads(q.lastProgress["sources"][0]["endOffset"]), mariadb=False)
    assert end == Position("binlog.000001", f30.size, GtidSet.parse(f"{MY_UUID}:1-30"))
    lag = json.loads(q.lastProgress["sources"][0]["latestOffset"])
    assert lag["behindBytes"] == 0 and lag["lagSeconds"] == 0

    # 2. the query again on the same checkpoint, against the source now on another port with
    # six more transactions in the same (active) file: only those
    n_batches = len(offsets)
    f36 = my_file("binlog.000001", 1, 36)
    with FakeSource(f36) as src2:
        q2, rows2 = run_available_now(spark, my_options(src2, "earliest"), out, ckpt)
        # the stream resumed at the checkpoint's offset: nothing was read from an earlier place
        assert min(p for _, p in dump_starts(src2)) == f30.size
        assert my_actual(rows2) == my_expected([f36], range(31, 37))
        offsets = checkpoint_offsets(ckpt)
        assert offsets[max(offsets)] == {"file": "binlog.000001", "pos": f36.size,
                                         "gtid": f"{MY_UUID}:1-36"}
        assert_batches_within(q2, 9)

        # 3. the server rotates (a real ROTATE closes binlog.000001) and commits 9 more in
        # binlog.000002: only those, across the rotation; the offset moves to the new file
        n_batches = len(offsets)
        f1 = my_file("binlog.000001", 1, 36, rotate_to="binlog.000002")
        f2 = my_file("binlog.000002", 37, 45)
        src2.binlogs = [f1, f2]
        q3, rows3 = run_available_now(spark, my_options(src2, "earliest"), out, ckpt)
        assert my_actual(rows3) == my_expected([f1, f2], range(37, 46))
        assert {r.source.file for r in rows3} == {"binlog.000002"}
        offsets = checkpoint_offsets(ckpt)
        new = [offsets[i] for i in sorted(offsets) if i >= n_batches]
        ends = boundary_gnos([f1, f2])
        gnos = [ends[(o["file"], o["pos"])] for o in new]
        assert gnos == sorted(set(gnos)) and gnos[-1] == 45 and len(new) >= 2
        assert [o["gtid"] for o in new] == [f"{MY_UUID}:1-{g}" for g in gnos]
        assert new[0]["file"] == "binlog.000002"   # the first batch spans the rotation

        # 4. a crash after the first batch of step 3 was planned but before it was committed:
        # Spark replays it from the logged offsets (planned from the file list alone: a chunk
        # per file, binlog.000001 from the old offset to its end, binlog.000002 from 4), then
        # plans the rest again. Into a fresh sink: exactly the changes of step 3 again.
        drop_batches(ckpt, offsets_after=n_batches, commits_from=n_batches)
        q4, batches = run_available_now_batches(spark, my_options(src2, "earliest"), ckpt)
        assert min(batches) == n_batches        # the replayed batch, then new ones
        assert my_actual([r for b in batches.values() for r in b]) == \
            my_expected([f1, f2], range(37, 46))
        assert checkpoint_offsets(ckpt)[n_batches] == new[0]   # the replay kept its end


@pytest.mark.parametrize("start, gnos", [
    (f"{MY_UUID}:1-10", list(range(11, 31))),
    # not a prefix of the binlog: 12 and 13 are in the set, the first transaction missing is 11
    (f"{MY_UUID}:1-10:12-13,a1b2c3d4-0000-1111-2222-333344445555:1-7",
     [11] + list(range(14, 31))),
])
def test_mysql84_fake_gtid_set_start(spark, tmp_path, start, gnos):
    f30 = my_file("binlog.000001", 1, 30)
    ckpt = tmp_path / "ckpt"
    with FakeSource(f30) as src:
        # three tasks a batch: chunks start at transaction boundaries inside the batch
        q, rows = run_available_now(
            spark, my_options(src, json.dumps({"gtid": start}), minPartitions=3),
            tmp_path / "out", ckpt)
        gtid_dumps = [parse_dump(d) for d in src.got.dumps if d[0] == COM_BINLOG_DUMP_GTID]
    # exactly the transactions not in the set, each once
    assert my_actual(rows) == my_expected([f30], set(gnos))
    assert len({r.seq for r in rows}) == len(rows)
    assert_batches_within(q, 9)
    # the start was found with COM_BINLOG_DUMP_GTID (the set, byte for byte)
    assert gtid_dumps and gtid_dumps[0]["gtids"] == GtidSet.parse(start)
    # offsets: the start set plus every transaction up to the boundary
    offsets = checkpoint_offsets(ckpt)
    ends = boundary_gnos([f30])
    for o in (offsets[i] for i in sorted(offsets)):
        upto = ends[(o["file"], o["pos"])]
        assert GtidSet.parse(o["gtid"]) == GtidSet.parse(start).union(
            GtidSet.parse(f"{MY_UUID}:11-{upto}"))
    assert GtidSet.parse(offsets[max(offsets)]["gtid"]) == GtidSet.parse(start).union(
        f"{MY_UUID}:1-30")


def test_mysql84_fake_latest_start_takes_the_executed_gtid_set(spark, tmp_path):
    ckpt, out = tmp_path / "ckpt", tmp_path / "out"
    other = "a1b2c3d4-0000-1111-2222-333344445555:1-7"   # from an earlier primary
    f20 = my_file("binlog.000001", 1, 20, previous=other)
    with FakeSource(f20) as src:
        opts = my_options(src, "latest")
        q, rows = run_available_now(spark, opts, out, ckpt)
        assert rows == []
        # then 8 more transactions: those only, the offsets continuing SHOW BINARY LOG STATUS's
        # Executed_Gtid_Set (two UUIDs, one a line as MySQL shows it)
        f28 = my_file("binlog.000001", 1, 28, previous=other)
        src.binlog = f28
        q2, rows2 = run_available_now(spark, opts, out, ckpt)
    assert my_actual(rows2) == my_expected([f28], range(21, 29))
    offsets = [o for _, o in sorted(checkpoint_offsets(ckpt).items())]
    # the first (empty) batch of the first run logged where "latest" was: the end of the binlog
    # with the executed GTID set there
    assert (offsets[0]["file"], offsets[0]["pos"]) == ("binlog.000001", f20.size)
    assert GtidSet.parse(offsets[0]["gtid"]) == GtidSet.parse(f"{MY_UUID}:1-20,{other}")
    ends = boundary_gnos([f28])
    for o in offsets[1:]:
        assert GtidSet.parse(o["gtid"]) == \
            GtidSet.parse(f"{MY_UUID}:1-{ends[(o['file'], o['pos'])]},{other}")
    assert GtidSet.parse(offsets[-1]["gtid"]) == GtidSet.parse(f"{MY_UUID}:1-28,{other}")
    assert len(offsets) >= 3


def test_mysql84_fake_purged_binlog_stops_the_query_or_is_skipped_keeping_gtid_sets(
        spark, tmp_path):
    ckpt, out = tmp_path / "ckpt", tmp_path / "out"
    f30 = my_file("binlog.000001", 1, 30)
    with FakeSource(f30) as src:
        _, rows = run_available_now(spark, my_options(src, "earliest"), out, ckpt)
        assert len(rows) == len(my_expected([f30], range(1, 31)))
        # while the query is down, 31..36 are committed to binlog.000001, the server rotates
        # and commits 37..45, and binlog.000001 is purged (gtid_purged becomes 1-36)
        f2 = my_file("binlog.000002", 37, 45)
        src.binlogs = [f2]
        with pytest.raises(Exception) as e:
            run_available_now(spark, my_options(src, "earliest"), out, ckpt)
        text = str(e.value)
        assert "BinlogPurgedError" in text and "binlog.000001" in text and "purged" in text
        # failOnDataLoss=false: the purged range is skipped, the rest arrives, and the offsets
        # keep carrying the GTID set (from gtid_purged at binlog.000002:4)
        n_batches = len(checkpoint_offsets(ckpt))
        _, rows2 = run_available_now(spark, my_options(src, "earliest", failOnDataLoss="false"),
                                     out, ckpt)
    assert my_actual(rows2) == my_expected([f2], range(37, 46))
    offsets = checkpoint_offsets(ckpt)
    new = [offsets[i] for i in sorted(offsets) if i >= n_batches]
    ends = boundary_gnos([f2])
    assert new and all(o["file"] == "binlog.000002" for o in new)
    assert [o["gtid"] for o in new] == \
        [f"{MY_UUID}:1-{ends[(o['file'], o['pos'])]}" for o in new]
    assert new[-1]["gtid"] == f"{MY_UUID}:1-45"
