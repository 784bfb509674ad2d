"""The one-command demo: an order-processing workload streamed into Delta tables.

    python3 -m streaming.demo                      # a private MariaDB, nothing to configure
    python3 -m streaming.demo --host db --user admin --password-file pw   # a server of yours

Steps (each one printed as it happens):

1. a MariaDB server: a private one started with :class:`cdc.embedded.EmbeddedMariaDB` (needs the
   ``mariadb-server`` package), or the server at ``--host``: its user must be able to create the
   database ``cdc_demo`` and to replicate (REPLICATION SLAVE, REPLICATION CLIENT);
2. an order-processing workload in a background thread: customers sign up, orders are placed,
   paid, shipped, cancelled and deleted, in many small transactions;
3. meanwhile a Spark stream (``binlog-cdc`` -> :class:`streaming.delta.DeltaUpserter`) upserts the
   changes into one Delta table per source table under ``--out``, a micro-batch at a time, and
   the progress (changes per batch, lag, bytes behind) is printed;
4. once the workload is done the stream is stopped and restarted from its checkpoint with
   ``availableNow`` (the restart a crashed job would do), which drains what is left;
5. each Delta table is compared with ``SELECT *`` of its source table, row for row.

Exit status 0 when every Delta table equals its source table, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import threading
import time
from decimal import Decimal
from pathlib import Path

from cdc.errors import CdcError
from cdc.positions import Position

MARKER = ".binlog-cdc-demo"     # --out holds this file: the demo may clear the directory
DB = "cdc_demo"
TABLES = {
    "customers": "CREATE TABLE {db}.customers (id INT PRIMARY KEY, name VARCHAR(64) NOT NULL, "
                 "email VARCHAR(128), created DATETIME(6) NOT NULL)",
    "orders": "CREATE TABLE {db}.orders (id BIGINT PRIMARY KEY, customer_id INT NOT NULL, "
              "amount DECIMAL(12,2) NOT NULL, status VARCHAR(16) NOT NULL, note TEXT, "
              "created DATETIME(6) NOT NULL, updated DATETIME(6) NULL)",
}


def say(msg: str) -> None:
    print(f"[demo {time.strftime('%H:%M:%S')}] {msg}", flush=True)


# --- the server -----------------------------------------------------------------------------------


class Server:
    """Where the demo runs: connection facts for DDL/DML and for replication."""

    def __init__(self, args):
        self.embedded = None
        if args.host:
            password = args.password
            if args.password_file:
                password = Path(args.password_file).read_text().splitlines()[0]
            self.admin = {"host": args.host, "port": args.port, "user": args.user,
                          "password": password or ""}
            self.replication = dict(self.admin)
        else:
            from cdc.embedded import EmbeddedMariaDB
            say("starting a private MariaDB (temporary datadir, row-based binlog) ...")
            self.embedded = EmbeddedMariaDB().start()
            say(f"MariaDB {self.embedded.version} listening on 127.0.0.1:{self.embedded.port}")
            self.admin = self.embedded.root_params()
            self.replication = self.embedded.cdc_params()

    def connect(self, database: str | None = None):
        import pymysql
        return pymysql.connect(**self.admin, database=database, autocommit=True,
                               charset="utf8mb4", connect_timeout=10)

    def query(self, sql: str, args=None) -> list[tuple]:
        from cdc.replica.sql import fetch_rows
        conn = self.connect()
        try:
            return fetch_rows(conn, sql, args)
        finally:
            conn.close()

    def position(self) -> Position:
        """The end of the server's binlog (the statement each server version spells)."""
        from cdc.cli.lag import ServerStatus
        status = ServerStatus(self.connect)
        try:
            return status.end()
        finally:
            status.close()

    def close(self) -> None:
        if self.embedded is not None:
            self.embedded.cleanup()


# --- the workload ---------------------------------------------------------------------------------


class Workload(threading.Thread):
    """Customers and orders moving through their life cycle, in small transactions."""

    def __init__(self, server: Server, orders: int, seed: int = 7):
        super().__init__(name="demo-workload", daemon=True)
        self.server, self.orders, self.rng = server, orders, random.Random(seed)
        self.transactions = 0
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self._run()
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            self.error = e

    def _tx(self, cur, statements) -> None:
        cur.execute("BEGIN")
        for sql, args in statements:
            cur.execute(sql, args)
        cur.execute("COMMIT")
        self.transactions += 1

    def _run(self) -> None:
        rng = self.rng
        conn = self.server.connect(DB)
        try:
            with conn.cursor() as cur:
                customers = max(10, self.orders // 10)
                for k in range(0, customers, 50):
                    self._tx(cur, [(
                        "INSERT INTO customers VALUES (%s, %s, %s, NOW(6))",
                        (i, f"customer {i}", f"c{i}@example.com" if i % 7 else None))
                        for i in range(k, min(customers, k + 50))])
                open_orders: list[int] = []
                for oid in range(1, self.orders + 1):
                    self._tx(cur, [(
                        "INSERT INTO orders VALUES (%s, %s, %s, 'new', %s, NOW(6), NULL)",
                        (oid, rng.randrange(customers), Decimal(rng.randrange(100, 99999)) / 100,
                         None if oid % 3 else f"gift wrap #{oid} ✓"))])
                    open_orders.append(oid)
                    if len(open_orders) > 20:
                        self._advance(cur, open_orders.pop(rng.randrange(len(open_orders))))
                    if oid % 500 == 0:
                        self._tx(cur, [("UPDATE customers SET email = CONCAT('new-', id, "
                                        "'@example.com') WHERE id %% 10 = %s",
                                        (oid // 500 % 10,))])
                for oid in open_orders:
                    self._advance(cur, oid)
        finally:
            conn.close()

    def _advance(self, cur, oid: int) -> None:
        """paid -> shipped, or cancelled and (sometimes) deleted."""
        if self.rng.random() < 0.15:
            self._tx(cur, [("UPDATE orders SET status = 'cancelled', updated = NOW(6) "
                            "WHERE id = %s", (oid,))])
            if self.rng.random() < 0.5:
                self._tx(cur, [("DELETE FROM orders WHERE id = %s", (oid,))])
            return
        for status in ("paid", "shipped"):
            self._tx(cur, [("UPDATE orders SET status = %s, updated = NOW(6) WHERE id = %s",
                            (status, oid))])


# --- the stream -----------------------------------------------------------------------------------


def start_stream(spark, server: Server, start: Position, out: Path, upserter, *,
                 batch_rows: int, available_now: bool):
    r = server.replication
    reader = (spark.readStream.format("binlog-cdc")
              .option("host", r["host"]).option("port", str(r["port"]))
              .option("user", r["user"]).option("password", r["password"])
              .option("includeTables", f"{DB}.*")
              .option("startingPosition", json.dumps(Position(start.file, start.pos).to_offset()))
              .option("maxEventsPerTrigger", str(batch_rows)))
    writer = (reader.load().writeStream.queryName("cdc_demo").foreachBatch(upserter)
              .option("checkpointLocation", str(out / "checkpoint")))
    writer = writer.trigger(availableNow=True) if available_now else \
        writer.trigger(processingTime="1 second")
    return writer.start()


def lag_of(progress: dict) -> dict:
    for src in progress.get("sources", []):
        try:
            rep = json.loads(src.get("latestOffset") or "null")
        except ValueError:
            continue
        if isinstance(rep, dict) and "behindBytes" in rep:
            return rep
    return {}


class ProgressPrinter:
    """Prints each new micro-batch of a query: changes, lag, bytes behind."""

    def __init__(self):
        self.seen = -1
        self.rows = 0
        self.last_lag: dict = {}

    def poll(self, query) -> None:
        for p in query.recentProgress:
            if p["batchId"] <= self.seen:
                continue
            self.seen = p["batchId"]
            self.rows += p["numInputRows"]
            self.last_lag = lag_of(p) or self.last_lag
            if p["numInputRows"]:
                lag = self.last_lag.get("lagSeconds")
                say(f"batch {p['batchId']:>3}: {p['numInputRows']:>5} changes upserted "
                    f"(total {self.rows}), lag {'?' if lag is None else f'{lag:.1f} s'}, "
                    f"{self.last_lag.get('behindBytes', '?')} binlog bytes behind")


# --- the comparison -------------------------------------------------------------------------------


def compare(server: Server, upserter) -> bool:
    from deltalake import DeltaTable
    ok = True
    say(f"{'table':<22}{'source rows':>12}{'delta rows':>12}  equal")
    for table in TABLES:
        conn = server.connect(DB)
        try:
            with conn.cursor() as cur:
                cur.execute(f"SELECT * FROM {table} ORDER BY 1")
                names = [d[0] for d in cur.description]
                source = [dict(zip(names, row)) for row in cur.fetchall()]
        finally:
            conn.close()
        delta = DeltaTable(upserter.path(DB, table)).to_pyarrow_table().to_pylist()
        delta.sort(key=lambda row: row[names[0]])
        equal = delta == source
        ok = ok and equal
        say(f"{DB + '.' + table:<22}{len(source):>12}{len(delta):>12}  {'yes' if equal else 'NO'}")
        if not equal:
            for a, b in zip(source, delta):
                if a != b:
                    say(f"  first difference: source {a} != delta {b}")
                    break
    return ok


# --- main -----------------------------------------------------------------------------------------


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python3 -m streaming.demo", description=__doc__.split(
        "\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", help="use this server instead of a private MariaDB")
    ap.add_argument("--port", type=int, default=3306)
    ap.add_argument("--user", default="root", help="with --host: a user that can create the "
                    "database cdc_demo and replicate")
    ap.add_argument("--password", default=os.environ.get("BINLOG_CDC_PASSWORD", ""))
    ap.add_argument("--password-file")
    ap.add_argument("--orders", type=int, default=2000, help="orders placed (default 2000)")
    ap.add_argument("--batch-rows", type=int, default=1000,
                    help="maxEventsPerTrigger of the stream (default 1000)")
    ap.add_argument("--out", default="binlog-cdc-demo",
                    help="Delta tables and the checkpoint go here (default ./binlog-cdc-demo)")
    ap.add_argument("--metrics-port", type=int, default=None,
                    help="also serve Prometheus metrics on this port")
    args = ap.parse_args(argv)

    out = Path(args.out).resolve()
    if out.exists():
        if not (out / MARKER).exists():
            ap.error(f"--out {out} exists and was not made by the demo: choose another directory")
        shutil.rmtree(out)          # a previous demo's tables and checkpoint: start afresh
    out.mkdir(parents=True)
    (out / MARKER).write_text("made by python3 -m streaming.demo; safe to delete\n")

    server = None
    try:
        server = Server(args)
        server.query(f"DROP DATABASE IF EXISTS {DB}")
        start = server.position()
        server.query(f"CREATE DATABASE {DB}")
        for ddl in TABLES.values():
            server.query(ddl.format(db=DB))
        say(f"created {DB}.customers and {DB}.orders; the stream starts at {start.file}:{start.pos}")

        say("starting Spark (local[2]) ...")
        from streaming.local_spark import local_spark
        spark = local_spark("binlog-cdc-demo")
        if args.metrics_port is not None:
            from streaming.metrics import start_metrics
            start_metrics(spark, port=args.metrics_port)
            say(f"Prometheus metrics on http://127.0.0.1:{args.metrics_port}/metrics")
        from streaming.delta import DeltaUpserter
        r = server.replication
        upserter = DeltaUpserter(out / "delta", host=r["host"], port=r["port"], user=r["user"],
                                 password=r["password"], app_id="cdc-demo")

        work = Workload(server, args.orders)
        work.start()
        say(f"workload running: {args.orders} orders placed, paid, shipped, cancelled ...")
        query = start_stream(spark, server, start, out, upserter, batch_rows=args.batch_rows,
                             available_now=False)
        printer = ProgressPrinter()
        while work.is_alive():
            if query.exception() is not None:
                raise query.exception()
            printer.poll(query)
            time.sleep(0.5)
        if work.error is not None:
            raise work.error
        say(f"workload done: {work.transactions} transactions")
        printer.poll(query)
        deadline = time.monotonic() + 60
        while query.status["isTriggerActive"] and time.monotonic() < deadline:
            time.sleep(0.2)          # stop between two micro-batches
        query.stop()
        say("stream stopped; restarting it from its checkpoint with availableNow to drain ...")
        query = start_stream(spark, server, start, out, upserter, batch_rows=args.batch_rows,
                             available_now=True)
        printer = ProgressPrinter()
        while not query.awaitTermination(0.5):
            printer.poll(query)
        printer.poll(query)
        lag = printer.last_lag
        say(f"caught up: lag {lag.get('lagSeconds')} s, {lag.get('behindBytes')} bytes behind; "
            f"Delta tables under {out / 'delta'}")
        ok = compare(server, upserter)
        say("every Delta table equals its source table" if ok else
            "MISMATCH between Delta and the source")
        return 0 if ok else 1
    except CdcError as e:
        print(f"binlog-cdc demo: {e}", file=sys.stderr)
        return 2
    finally:
        if server is not None:
            server.close()


if __name__ == "__main__":
    sys.exit(main())
