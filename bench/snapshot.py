"""python -m bench snapshot: initial-snapshot throughput, side by side in one run.

    python -m bench snapshot [--rows 500000] [--chunk-rows 50000] [--repeat 1] [--markdown F]
    python -m bench floor    [...the same]     # also every floor shape and sink, and noop

Starts a private MariaDB, fills an ``orders`` table (BIGINT key, INT, DECIMAL, ENUM, VARCHAR,
DATETIME(3)) and measures on that table:

* ``reader (mysqlclient)`` / ``reader (pymysql)``: binlog-cdc's chunk reader alone
  (:mod:`cdc.snapshot.reader`: consistent-snapshot chunks, values converted to the binlog
  decoder's) with each client library, no Spark, one process (mysqlclient only when installed);
* ``floor``: the engine's floor (:mod:`bench.floor`): a trivial source replaying the
  snapshot's own rows, pre-built as Arrow, in the same partitions and batch sizes, same session,
  into ``foreachBatch(toArrow -> write_deltalake append)``; every path is also printed as a
  fraction of it (``bench floor``: also the envelopes into the upserter and table rows into
  ``noop``, beside the project's path into ``noop``); ``bench floor`` also prints the floor of
  the project's server read (:mod:`bench.floor_read`: the same chunks read from the same server
  with the same client, each fetched batch as Arrow ``binary`` columns, nothing else) into
  ``noop`` and append, and the project's paths as a fraction of it (the upserter beside its
  append);
* ``binlog-cdc snapshot``: ``readStream.format("binlog-cdc")`` with ``startingPosition=snapshot``,
  availableNow, ``foreachBatch(DeltaUpserter)`` (query start to end; the session is warm);
  ``typed (option table)``: the same in typed mode (``option("table", "db.orders")``: row images
  as Arrow structs from the tasks to the MERGE, no JSON on the way);
* ``hand-written``: what a user would write instead: PyMySQL ``SELECT *`` (unbuffered) ->
  pyarrow -> ``deltalake.write_deltalake`` (one transaction for the whole table, no chunks, no
  upsert semantics).

Prints a markdown table of rows/s and ratios; nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time

from cdc.embedded import EmbeddedMariaDB
from streaming.contract.envelope import UPSERT_FIELDS

from .spark import session

DB = "bench_snap"


def _fill(server, rows: int) -> None:
    server.execute(f"CREATE DATABASE {DB}")
    server.execute("CREATE TABLE orders (id BIGINT PRIMARY KEY, customer INT NOT NULL, "
                   "amount DECIMAL(12,2), status ENUM('new','paid','shipped') NOT NULL, "
                   "note VARCHAR(40), created DATETIME(3))", database=DB)
    step = 200_000
    for lo in range(0, rows, step):
        n = min(step, rows - lo)
        server.execute(
            f"INSERT INTO orders SELECT {lo} + seq, seq % 997, seq / 100, "
            f"ELT(1 + seq % 3, 'new', 'paid', 'shipped'), CONCAT('note ', seq), "
            f"'2024-01-01 00:00:00.123' + INTERVAL seq SECOND FROM seq_1_to_{n}", database=DB)


def _reader(conn: dict, chunk_rows: int, client: str | None = None) -> tuple[int, float]:
    from cdc.replica.config import ReplicaConfig
    from cdc.replica.sql import connect
    from cdc.snapshot.plan import describe_table, next_bound
    from cdc.snapshot.reader import SnapshotChunkReader, connect_for_snapshot

    config = ReplicaConfig(conn["host"], conn["port"], conn["user"], conn["password"])
    t0 = time.perf_counter()
    plain = connect(config)

    def query(sql, args=None):
        with plain.cursor() as cur:
            cur.execute(sql, args)
            return cur.fetchall()
    table = describe_table(query, f"{DB}.orders")
    snap = connect_for_snapshot(config, client)
    n, after = 0, None
    while True:
        upto = next_bound(query, table, after, chunk_rows)
        with SnapshotChunkReader(snap, table, after, upto) as r:
            for rows in r.batches():
                n += len(rows)
        if upto is None:
            break
        after = upto
    plain.close()
    snap.close()
    return n, time.perf_counter() - t0


def _stream(spark, conn: dict, chunk_rows: int, typed: bool = False):
    """The project's snapshot stream of the table (*typed*: option table)."""
    return (spark.readStream.format("binlog-cdc")
            .option("host", conn["host"]).option("port", str(conn["port"]))
            .option("user", conn["user"]).option("password", conn["password"])
            .option("table" if typed else "includeTables", f"{DB}.orders")
            .option("startingPosition", "snapshot")
            .option("snapshotChunkRows", str(chunk_rows))
            .option("fields", ",".join(UPSERT_FIELDS)).load())


def _upserter(conn: dict, out: str):
    """``foreachBatch``: DeltaUpserter as a user passes it (``foreachBatch(up)``: the columns it
    collects -> ``toArrow`` -> the upsert)."""
    from streaming.sinks.delta.upserter import DeltaUpserter
    up = DeltaUpserter(out, host=conn["host"], port=conn["port"], user=conn["user"],
                       password=conn["password"], app_id="bench")

    def fb(df, batch_id):
        up(df, batch_id)
    return fb


def _hand_written(conn: dict, out: str) -> tuple[int, float]:
    import pyarrow as pa
    import pymysql
    import pymysql.cursors
    from deltalake import write_deltalake

    t0 = time.perf_counter()
    c = pymysql.connect(host=conn["host"], port=conn["port"], user=conn["user"],
                        password=conn["password"], database=DB,
                        cursorclass=pymysql.cursors.SSCursor)
    cols: list[list] = []
    names: list[str] = []
    with c.cursor() as cur:
        cur.execute("SELECT * FROM orders")
        names = [d[0] for d in cur.description]
        cols = [[] for _ in names]
        while True:
            rows = cur.fetchmany(10000)
            if not rows:
                break
            for i, col in enumerate(zip(*rows)):
                cols[i].extend(col)
    c.close()
    table = pa.table({n: pa.array(v) for n, v in zip(names, cols)})
    write_deltalake(out, table, mode="overwrite")
    return table.num_rows, time.perf_counter() - t0


def _has_mysqlclient() -> bool:
    try:
        import MySQLdb  # noqa: F401
    except ImportError:
        return False
    return True


def measure(spark, conn: dict, work: str, rows: int, chunk_rows: int,
            floor_all: bool = False, repeat: int = 1, out=print) -> list[tuple[str, str, int, float]]:
    """Every path as (path, sink, rows, seconds), the floor's beside the project's, in one run
    on *spark*. *floor_all*: every floor shape and sink, and the project's path into noop."""
    from . import floor, floor_read

    def w(name):
        return os.path.join(work, name)
    floor.register(spark)
    floor_read.register(spark)
    # the captures are the untimed warm-up too: Python workers, the JVM's JIT, both modes
    t0 = time.perf_counter()
    typed_df = _stream(spark, conn, chunk_rows, typed=True)
    typed = floor.capture(typed_df, work)
    env = floor.capture(_stream(spark, conn, chunk_rows), work)
    parts = -(-rows // chunk_rows)
    pre = {"flat": floor.prebuild([floor.flat(t) for t in typed], w("pre-flat"), parts),
           "typed": floor.prebuild(typed, w("pre-typed"), parts, typed_df.schema),
           "json": floor.prebuild(env, w("pre-json"), parts)}
    read_plan = floor_read.plan(conn, f"{DB}.orders", chunk_rows) if floor_all else None
    out(f"captured and pre-built the floor's batches in {time.perf_counter() - t0:.1f} s "
        f"({parts} partitions, {floor.ARROW_ROWS}-row Arrow batches)", flush=True)
    res = []
    if _has_mysqlclient():
        res.append(("reader (mysqlclient)", "-", *_reader(conn, chunk_rows, "mysqlclient"),
                    None))
    res.append(("reader (pymysql)", "-", *_reader(conn, chunk_rows, "pymysql"), None))
    json_ = "binlog-cdc snapshot, JSON envelope"
    typed_ = "binlog-cdc snapshot, typed (option table)"
    runs = [(FLOOR, APPEND, lambda: pre["flat"].stream(spark), lambda o: floor.appender(o)),
            (json_, UPSERTER, lambda: _stream(spark, conn, chunk_rows),
             lambda o: _upserter(conn, o)),
            (typed_, UPSERTER, lambda: _stream(spark, conn, chunk_rows, typed=True),
             lambda o: _upserter(conn, o))]
    if floor_all:
        runs += [(FLOOR, "noop", lambda: pre["flat"].stream(spark), None),
                 ("floor: JSON envelope", UPSERTER, lambda: pre["json"].stream(spark),
                  lambda o: _upserter(conn, o)),
                 ("floor: typed envelope", UPSERTER, lambda: pre["typed"].stream(spark),
                  lambda o: _upserter(conn, o)),
                 (READ_FLOOR, APPEND, lambda: floor_read.stream(spark, conn, read_plan),
                  lambda o: floor.appender(o)),
                 (READ_FLOOR, "noop", lambda: floor_read.stream(spark, conn, read_plan), None),
                 (json_, "noop", lambda: _stream(spark, conn, chunk_rows), None),
                 (typed_, "noop", lambda: _stream(spark, conn, chunk_rows, typed=True), None)]
    best: dict = {}
    for r in range(repeat):           # rounds: every path once per round, the fastest counts
        for i, (path, sink, df, fb) in enumerate(runs):
            n, dt, cpu = floor.run(df(), "noop" if fb is None else fb(w(f"out-{r}-{i}")), work)
            out(f"{path} -> {sink}: {n:,} rows, {dt:.1f} s, {n / dt:,.0f} rows/s, CPU s "
                f"{_cpu_text(cpu)}", flush=True)
            if (path, sink) not in best or dt < best[(path, sink)][3]:
                best[(path, sink)] = (path, sink, n, dt, cpu)
    res += best.values()
    res.append(("hand-written", "write_deltalake (one transaction)",
                *_hand_written(conn, w("hand")), None))
    return res


FLOOR = "floor: table rows (bench-floor source)"
READ_FLOOR = "floor: server read, chunks as bytes (bench-floor-read source)"
APPEND = "foreachBatch(toArrow -> write_deltalake append)"
UPSERTER = "foreachBatch(DeltaUpserter)"


def _cpu_text(cpu: dict | None) -> str:
    return "-" if cpu is None else " / ".join(f"{cpu[k]:.1f}" for k in ("driver", "jvm",
                                                                         "workers"))


def table(res, rows: int, chunk_rows: int) -> str:
    """The results as markdown, each path also as a fraction of the floor (the trivial source's
    table rows appended to Delta in the same run): by wall clock, and by CPU seconds (driver
    Python + JVM + Python workers; what a machine shared with other work does not skew)."""
    rate = {(p, s): n / dt for p, s, n, dt, _c in res}
    cpu = {(p, s): sum(c.values()) for p, s, _n, _dt, c in res if c}
    fl, hand = rate[(FLOOR, APPEND)], rate[("hand-written", "write_deltalake (one transaction)")]
    fl_cpu = cpu[(FLOOR, APPEND)]
    lines = [f"{rows:,} rows, snapshotChunkRows {chunk_rows:,}; floor = {FLOOR} -> {APPEND}: "
             f"{fl:,.0f} rows/s, {fl_cpu:.1f} CPU s", "",
             "| path | sink | rows | seconds | rows/s | fraction of floor | CPU s: driver / JVM "
             "/ workers | fraction of floor (CPU) | vs hand-written | fraction of server-read "
             "floor |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for p, s, n, dt, c in res:
        frac_cpu = f"{fl_cpu / cpu[(p, s)]:.2f}" if c else "-"
        # the project's path beside the floor of its own server read, into the same sink
        # (the upserter beside the read floor's append)
        read = rate.get((READ_FLOOR, APPEND if s == UPSERTER else s))
        frac_read = f"{n / dt / read:.2f}" if read and p.startswith("binlog-cdc") else "-"
        lines.append(f"| {p} | {s} | {n:,} | {dt:.1f} | {n / dt:,.0f} | {n / dt / fl:.2f} | "
                     f"{_cpu_text(c)} | {frac_cpu} | {n / dt / hand:.2f}x | {frac_read} |")
    return "\n".join(lines) + "\n"


def main(argv=None, floor_all: bool = False) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench " + ("floor" if floor_all else "snapshot"),
                                 description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=500_000)
    ap.add_argument("--chunk-rows", type=int, default=50_000)
    ap.add_argument("--repeat", type=int, default=1,
                    help="rounds of every Spark path, interleaved; the fastest counts")
    ap.add_argument("--markdown", help="also write the table to this file")
    args = ap.parse_args(argv)
    work = tempfile.mkdtemp(prefix="bench-snap-")
    spark = session()
    try:
        with EmbeddedMariaDB() as server:
            conn = server.cdc_params()
            t0 = time.perf_counter()
            _fill(server, args.rows)
            print(f"filled {DB}.orders with {args.rows} rows in {time.perf_counter() - t0:.1f} s",
                  flush=True)
            res = measure(spark, conn, work, args.rows, args.chunk_rows, floor_all, args.repeat)
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    text = table(res, args.rows, args.chunk_rows)
    print("\n" + text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
