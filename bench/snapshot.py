"""python -m bench snapshot: initial-snapshot throughput, side by side in one run.

    python -m bench snapshot [--rows 500000] [--chunk-rows 50000]

Starts a private MariaDB, fills an ``orders`` table (BIGINT key, INT, DECIMAL, ENUM, VARCHAR,
DATETIME(3)) and measures on that table:

* ``reader (mysqlclient)`` / ``reader (pymysql)``: binlog-cdc's chunk reader alone
  (:mod:`cdc.snapshot.reader`: consistent-snapshot chunks, values converted to the binlog
  decoder's) with each client library, no Spark, one process (mysqlclient only when installed);
* ``spark->delta``: ``readStream.format("binlog-cdc")`` with ``startingPosition=snapshot``,
  availableNow, ``foreachBatch(DeltaUpserter)`` (query start to end; the session is warm);
  ``typed (option table)``: the same in typed mode (``option("table", "db.orders")``: row images
  as Arrow structs from the tasks to the MERGE, no JSON on the way);
* ``hand-written``: what a user would write instead: PyMySQL ``SELECT *`` (unbuffered) ->
  pyarrow -> ``deltalake.write_deltalake`` (one transaction for the whole table, no chunks, no
  upsert semantics).

Prints rows/s and ratios; nothing is asserted.
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


def _spark(spark, conn: dict, out: str, chk: str, chunk_rows: int,
           typed: bool = False) -> tuple[int, float]:
    """*typed*: option table (typed mode: row images as structs, no JSON on the way)."""
    from streaming.sinks.delta.upserter import DeltaUpserter
    up = DeltaUpserter(out, host=conn["host"], port=conn["port"], user=conn["user"],
                       password=conn["password"], app_id="bench")
    count = [0]

    def fb(df, batch_id):
        t = df.select("op", "db", "table", "before", "after", "seq").toArrow()
        count[0] += t.num_rows
        up.upsert_arrow(t, batch_id)

    t0 = time.perf_counter()
    q = (spark.readStream.format("binlog-cdc")
         .option("host", conn["host"]).option("port", str(conn["port"]))
         .option("user", conn["user"]).option("password", conn["password"])
         .option("table" if typed else "includeTables", f"{DB}.orders")
         .option("startingPosition", "snapshot")
         .option("snapshotChunkRows", str(chunk_rows))
         .option("fields", ",".join(UPSERT_FIELDS)).load()
         .writeStream.foreachBatch(fb).option("checkpointLocation", chk)
         .trigger(availableNow=True).start())
    q.awaitTermination()
    if q.exception() is not None:
        raise RuntimeError(str(q.exception()))
    return count[0], time.perf_counter() - t0


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


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(prog="python -m bench snapshot", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=500_000)
    ap.add_argument("--chunk-rows", type=int, default=50_000)
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
            # warm the session (Python workers, JIT) on a tiny run
            _spark(spark, conn, os.path.join(work, "warm"), os.path.join(work, "warm-chk"),
                   args.chunk_rows)
            shutil.rmtree(os.path.join(work, "warm"), ignore_errors=True)
            res = {}
            if _has_mysqlclient():
                res["reader (mysqlclient)"] = _reader(conn, args.chunk_rows, "mysqlclient")
            res.update({
                "reader (pymysql)": _reader(conn, args.chunk_rows, "pymysql"),
                "spark->delta": _spark(spark, conn, os.path.join(work, "delta"),
                                       os.path.join(work, "chk"), args.chunk_rows),
                "spark->delta, typed (option table)": _spark(
                    spark, conn, os.path.join(work, "delta-typed"),
                    os.path.join(work, "chk-typed"), args.chunk_rows, typed=True),
                "hand-written": _hand_written(conn, os.path.join(work, "hand")),
            })
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    hand = res["hand-written"][0] / res["hand-written"][1]
    print(f"\n| path | rows | seconds | rows/s | vs hand-written |\n|---|---:|---:|---:|---:|")
    for name, (n, dt) in res.items():
        print(f"| {name} | {n:,} | {dt:.1f} | {n / dt:,.0f} | {n / dt / hand:.2f}x |")
