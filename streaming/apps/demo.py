"""The one-command demo: an order-processing workload streamed into Delta tables.

    python3 -m streaming.demo                      # a private MariaDB, nothing to configure
    python3 -m streaming.demo --host db --user admin --password-file pw   # a server of yours

Steps (each one printed as it happens):

1. a MariaDB server: a private one started with :class:`cdc.embedded.EmbeddedMariaDB` (needs the
   ``mariadb-server`` package), or the server at ``--host``: its user must be able to create the
   database ``cdc_demo`` and to replicate (the privileges `binlog-cdc check` names);
2. a Spark stream (``binlog-cdc`` -> :class:`streaming.sinks.delta.upserter.DeltaUpserter`, a micro-batch every
   half second at most) that upserts the changes into one Delta table per source table under
   ``--out``, reading the ``--existing`` orders with a snapshot first; once that is read,
3. an order-processing workload in a background thread: customers sign up, orders are placed,
   paid, shipped, cancelled and deleted, in many small transactions (``--rate`` a second), while
   each micro-batch is printed: its changes, the running total, its lag (from the binlog time of
   the batch's last change, whole seconds, to the batch's Delta commit) and the binlog bytes
   still behind;
4. once the workload is done the stream is stopped and restarted from its checkpoint with
   ``availableNow`` (the restart a crashed job would do), which drains what is left;
5. each Delta table is compared with ``SELECT *`` of its source table, row for row.

Exit status 0 when every Delta table equals its source table, 1 otherwise; 2 for a mistake
(a server that cannot be reached or refuses the user, a directory not made by the demo, ...),
told in one line.
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

from cdc.errors import ConfigurationError
from cdc.positions import Position
from streaming.sinks.foreach_batch import spark_safe
from streaming.contract.envelope import UPSERT_FIELDS

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
    """Where the demo runs: connection facts for DDL/DML and for replication. Server errors are
    binlog-cdc errors (a refused user, an unreachable host: what to do about it)."""

    def __init__(self, args):
        from cdc.replica.config import ReplicaConfig, read_password
        self.embedded = None
        if args.host:
            password = read_password(args.password, args.password_file).get()
            self.admin = {"host": args.host, "port": args.port, "user": args.user,
                          "password": password}
            self.replication = dict(self.admin)
        else:
            from cdc.embedded import EmbeddedMariaDB
            say("starting a private MariaDB (temporary datadir, row-based binlog) ...")
            self.embedded = EmbeddedMariaDB().start()
            say(f"MariaDB {self.embedded.version} listening on 127.0.0.1:{self.embedded.port}")
            self.admin = self.embedded.root_params()
            self.replication = self.embedded.cdc_params()
        a = self.admin
        self.server = None
        self.config = ReplicaConfig(a["host"], a["port"], a["user"], a["password"],
                                    connect_timeout=10)

    def connect(self, database: str | None = None):
        from cdc.replica.sql import connect
        from cdc.replica.server import server_of
        conn = connect(self.config)
        self.server = server_of(conn)        # the GRANT a privilege error names
        if database is not None:
            self.run(conn, lambda: conn.select_db(database))
        return conn

    def run(self, conn, call):
        """``call()`` with a PyMySQL error turned into the binlog-cdc error it means."""
        import pymysql
        from cdc.replica.sql import mysql_error
        try:
            return call()
        except pymysql.err.MySQLError as e:
            from cdc.replica.server import grant_statement
            account = f"'{self.config.user}'@'%'"
            err = mysql_error(e, self.config, grant=(
                f"GRANT ALL ON {DB}.* TO {account}; " + grant_statement(self.server, account)))
            if err is e:
                raise
            raise err from e

    def query(self, sql: str, args=None) -> list[tuple]:
        from cdc.replica.sql import fetch_rows
        conn = self.connect()
        try:
            return self.run(conn, lambda: fetch_rows(conn, sql, args))
        finally:
            conn.close()

    def position(self) -> Position:
        """The end of the server's binlog (the statement each server version spells)."""
        from cdc.cli.lag import ServerStatus
        status = ServerStatus(self.connect)
        try:
            return self.run(None, status.end)
        finally:
            status.close()

    def close(self) -> None:
        if self.embedded is not None:
            self.embedded.cleanup()


# --- the workload ---------------------------------------------------------------------------------


class Workload(threading.Thread):
    """Customers and orders moving through their life cycle, in small transactions, *rate* of
    them a second at most (the writer sleeps in between: the stream gets the CPU to show its
    micro-batches while the workload runs, as it would on a real server)."""

    def __init__(self, server: Server, orders: int, rate: float = 150.0, seed: int = 7):
        super().__init__(name="demo-workload", daemon=True)
        self.server, self.orders, self.rng = server, orders, random.Random(seed)
        self.rate = rate
        self.transactions = 0
        self.changes = 0              # rows written, updated or deleted: the stream's changes
        self.error: BaseException | None = None
        self._t0 = 0.0

    def run(self) -> None:
        self._t0 = time.monotonic()
        try:
            conn = self.server.connect(DB)
            try:
                self.server.run(conn, lambda: self._run(conn))
            finally:
                conn.close()
        except BaseException as e:  # noqa: BLE001 - reported by the main thread
            self.error = e

    def _tx(self, cur, statements) -> None:
        cur.execute("BEGIN")
        for sql, args in statements:
            self.changes += cur.execute(sql, args)
        cur.execute("COMMIT")
        self.transactions += 1
        if self.rate > 0:
            ahead = self._t0 + self.transactions / self.rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)

    def _run(self, conn) -> None:
        rng = self.rng
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


def existing_orders(server: Server, n: int) -> None:
    """*n* orders (ids from 1,000,001: the workload's are smaller) written before the stream
    starts, in transactions of 2000 rows."""
    conn = server.connect(DB)
    try:
        with conn.cursor() as cur:
            for lo in range(0, n, 2000):
                rows = [(1_000_001 + i, i % 97, Decimal(1000 + i % 90000) / 100,
                         ("paid", "shipped", "new")[i % 3], None if i % 4 else f"old #{i}")
                        for i in range(lo, min(n, lo + 2000))]
                cur.execute("BEGIN")
                cur.executemany("INSERT INTO orders VALUES (%s, %s, %s, %s, %s, NOW(6), NULL)",
                                rows)
                cur.execute("COMMIT")
    finally:
        conn.close()


# --- the stream -----------------------------------------------------------------------------------

LIVE_TRIGGER = "500 milliseconds"


def start_stream(spark, server: Server, start: Position | None, out: Path, upserter, *,
                 batch_rows: int | None, available_now: bool):
    """*start* None: a snapshot of the tables first, then the binlog. *batch_rows*: the
    snapshot's chunks and the micro-batches' row limit (None: the source's defaults)."""
    r = server.replication
    begin = "snapshot" if start is None else json.dumps(Position(start.file,
                                                                  start.pos).to_offset())
    reader = (spark.readStream.format("binlog-cdc")
              .option("host", r["host"]).option("port", str(r["port"]))
              .option("user", r["user"]).option("password", r["password"])
              .option("includeTables", f"{DB}.*")
              .option("includeSchemaChanges", "true")     # Delta follows the source's DDL
              .option("fields", ",".join(TimedUpserter.FIELDS))  # what foreachBatch reads
              .option("startingPosition", begin))
    if batch_rows is not None:
        reader = (reader.option("snapshotChunkRows", str(batch_rows))
                  .option("maxEventsPerTrigger", str(batch_rows)))
    writer = (reader.load().writeStream.queryName("cdc_demo").foreachBatch(upserter)
              .option("checkpointLocation", str(out / "checkpoint")))
    writer = writer.trigger(availableNow=True) if available_now else \
        writer.trigger(processingTime=LIVE_TRIGGER)
    return writer.start()


class TimedUpserter:
    """The ``foreachBatch`` function: the :class:`~streaming.sinks.delta.upserter.DeltaUpserter`, and the lag of
    each batch: from the binlog time of its last change (``ts_ms``: whole seconds, so the real
    lag lies in a range 1 s wide) to the end of its Delta commit."""

    #: the source's option ``fields``: what the upserter reads, and the change's binlog time
    #: (``schema_change`` comes with option includeSchemaChanges)
    FIELDS = [*UPSERT_FIELDS, "ts_ms"]

    def __init__(self, upserter):
        self.upserter = upserter
        self.lags: dict[int, tuple[float, float]] = {}     # batch id -> (low, high) seconds

    @spark_safe
    def __call__(self, df, batch_id: int) -> None:
        changes = df.select(*self.upserter.columns_of(df), "ts_ms").toArrow()
        self.upserter.upsert_arrow(changes, batch_id)
        stamps = [t for t in changes.column("ts_ms").to_pylist() if t is not None]
        if stamps:
            high = max(0.0, time.time() - max(stamps) / 1000)
            self.lags[int(batch_id)] = (max(0.0, high - 1.0), high)


def lag_of(progress: dict) -> dict:
    for src in progress.get("sources", []):
        try:
            rep = json.loads(src.get("latestOffset") or "null")
        except ValueError:
            continue
        if isinstance(rep, dict) and ("behindBytes" in rep or "snapshot" in rep):
            return rep
    return {}


def snapshot_line(snap) -> str:
    """A snapshot's progress report (:mod:`cdc.snapshot.progress`) in words."""
    if not isinstance(snap, dict):
        return "snapshot done, the binlog next"
    rate, eta = snap.get("rowsPerSecond"), snap.get("etaSeconds")
    counts = (f"tables {snap.get('tablesDone')}/{snap.get('tables')}, chunks "
              f"{snap.get('chunksDone')}/{snap.get('chunks')}, rows {snap.get('rowsDone'):,}/"
              f"~{snap.get('rows'):,}") if snap.get("rows") is not None else ""
    if snap.get("done"):
        return f"snapshot done ({counts}), the binlog next"
    speed = f"{rate:,.0f} rows/s" if rate is not None else "rows/s not known yet"
    left = f"ETA {eta:.0f} s" if eta is not None else "ETA not known yet"
    return f"snapshot of {snap.get('table')}: {counts}, {speed}, {left}"


class ProgressPrinter:
    """Prints each micro-batch once, across the live query and the drain (one running total):
    changes, total, lag, binlog bytes behind -- or the snapshot's progress, and the batch that
    ends it. *snapshot*: the stream starts with one (:attr:`in_snapshot` until it is read)."""

    def __init__(self, timed: TimedUpserter, snapshot: bool = False):
        from streaming.apps.runtime import Batches
        self.batches = Batches()
        self.timed = timed
        self.last_lag: dict = {}
        self.rows = 0                 # the running total, batch after batch
        self.printed = 0              # batches printed: every one that ran
        self.in_snapshot = snapshot
        self.snapshot_rows = 0

    def poll(self, query) -> None:
        from streaming.apps.runtime import batch_offsets
        for p in self.batches.new(query):
            report = lag_of(p)          # none: a batch replayed from the checkpoint on restart
            self.last_lag = report or self.last_lag
            rows = p.get("numInputRows") or 0
            self.rows += rows
            lag = self.timed.lags.get(p["batchId"])
            self.printed += 1
            start, end = batch_offsets(p)
            snap = report.get("snapshot")
            reading = self.in_snapshot or start is not None and "snapshot" in start
            if reading:
                self.snapshot_rows += rows
            if reading and end is not None and "snapshot" not in end:   # ends at the binlog
                self.in_snapshot = False
                where = f"snapshot done: {self.snapshot_rows:,} rows read, the binlog next"
                self.snapshot_rows = 0
            elif isinstance(snap, dict):
                where = snapshot_line(snap)
            elif reading or not report and isinstance(self.last_lag.get("snapshot"), dict):
                where = "snapshot: a batch replayed from the checkpoint (no progress reported)"
            else:
                where = f"{self.last_lag.get('behindBytes', '?')} binlog bytes behind"
            say(f"batch {p['batchId']:>3}: {rows:>5} changes upserted "
                f"(total {self.rows}), lag "
                f"{'?' if lag is None else f'{lag[0]:.1f}-{lag[1]:.1f} s'}, {where}")


def check(query) -> None:
    """Raise the failure of a query that should be running, if it failed or ended."""
    from streaming.apps.runtime import raise_if_failed
    if not query.isActive:
        raise_if_failed(query, stop_asked=False)


def wait_until_running(query, timeout: float = 180.0) -> None:
    """Wait for the query's first trigger (its start offset resolved, the source connected)."""
    deadline = time.monotonic() + timeout
    while query.lastProgress is None:
        check(query)
        if time.monotonic() > deadline:
            raise ConfigurationError(f"the stream did not start within {timeout:.0f} s")
        time.sleep(0.2)


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


def build_parser() -> argparse.ArgumentParser:
    from cdc.cli.entry import add_entry_arguments
    ap = argparse.ArgumentParser(prog="python3 -m streaming.demo", description=__doc__.split(
        "\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--host", help="use this server instead of a private MariaDB")
    ap.add_argument("--port", type=int, default=3306, help="with --host: its port (default 3306)")
    ap.add_argument("--user", default="root", help="with --host: a user that can create the "
                    "database cdc_demo and replicate")
    ap.add_argument("--password", default=os.environ.get("BINLOG_CDC_PASSWORD", ""),
                    help="with --host: the user's password (default $BINLOG_CDC_PASSWORD; prefer "
                         "that or --password-file)")
    ap.add_argument("--password-file", help="with --host: read the password from this file")
    ap.add_argument("--orders", type=int, default=2000, help="orders placed (default 2000)")
    ap.add_argument("--existing", type=int, default=20000,
                    help="orders already in the database before the stream starts: the stream "
                         "reads them first with a snapshot (default 20000; 0: none)")
    ap.add_argument("--rate", type=float, default=150.0,
                    help="transactions a second the workload writes at most (default 150; "
                         "0: as fast as it can)")
    ap.add_argument("--batch-rows", type=int, default=None,
                    help="rows per snapshot chunk and per micro-batch at most (the source's "
                         "snapshotChunkRows and maxEventsPerTrigger; default: the source's "
                         "defaults)")
    ap.add_argument("--out", default="binlog-cdc-demo",
                    help="Delta tables and the checkpoint go here (default ./binlog-cdc-demo)")
    ap.add_argument("--metrics-port", type=int, default=None,
                    help="also serve Prometheus metrics on this port")
    ap.add_argument("--traceback", action="store_true",
                    help="on a failure that is not a binlog-cdc error, show the whole traceback")
    add_entry_arguments(ap, "binlog-cdc demo")
    return ap


def main(argv=None) -> int:
    from cdc.cli.entry import configure_logging
    args = build_parser().parse_args(argv)
    configure_logging(args)

    out = Path(args.out).resolve()
    if out.exists():
        if not (out / MARKER).exists():
            print(f"binlog-cdc demo: --out {out} exists and was not made by the demo: choose "
                  f"another directory", file=sys.stderr)
            return 2
        shutil.rmtree(out)          # a previous demo's tables and checkpoint: start afresh
    out.mkdir(parents=True)
    (out / MARKER).write_text("made by python3 -m streaming.demo; safe to delete\n")

    from streaming.apps.runtime import cdc_error, report_failure
    demo = Demo(args, out)
    try:
        return demo.run()
    except KeyboardInterrupt:
        print("binlog-cdc demo: interrupted", file=sys.stderr)
        return 130
    except Exception as e:  # noqa: BLE001 - reported in one line, exit status 1 or 2
        if args.traceback and cdc_error(e) is None:
            raise
        return report_failure(e, "binlog-cdc demo")
    finally:
        demo.close()


class Demo:
    """The steps of the demo, and what they leave to clean up."""

    def __init__(self, args, out: Path):
        self.args, self.out = args, out
        self.server = self.spark = self.query = self.listener = None

    def run(self) -> int:
        args, out = self.args, self.out
        self.server = server = Server(args)
        server.query(f"DROP DATABASE IF EXISTS {DB}")
        start = server.position()
        server.query(f"CREATE DATABASE {DB}")
        for ddl in TABLES.values():
            server.query(ddl.format(db=DB))
        if args.existing > 0:
            existing_orders(server, args.existing)
            start = None                  # the stream reads them with a snapshot first
            say(f"created {DB}.customers and {DB}.orders with {args.existing} orders already "
                f"there: the stream snapshots them first (startingPosition=snapshot), then "
                f"follows the binlog")
        else:
            say(f"created {DB}.customers and {DB}.orders; the stream starts at "
                f"{start.file}:{start.pos}")

        say("starting Spark (local[2]) ...")
        from streaming.apps.local_spark import local_spark
        self.spark = spark = local_spark("binlog-cdc-demo")
        from streaming.apps.runtime import quiet_query_errors
        quiet_query_errors(spark)         # a failed stream is told in one line, below
        if args.metrics_port is not None:
            from streaming.metrics import start_metrics
            self.listener = start_metrics(spark, port=args.metrics_port)
            say(f"Prometheus metrics on http://127.0.0.1:{self.listener.port}/metrics")
        from streaming.sinks.delta.upserter import DeltaUpserter
        r = server.replication
        timed = TimedUpserter(DeltaUpserter(out / "delta", host=r["host"], port=r["port"],
                                            user=r["user"], password=r["password"],
                                            app_id="cdc-demo"))
        self.query = start_stream(spark, server, start, out, timed, batch_rows=args.batch_rows,
                                  available_now=False)
        wait_until_running(self.query)
        say(f"stream running (a micro-batch every {LIVE_TRIGGER} at most); lag: from the binlog "
            f"time of a batch's last change (whole seconds) to its Delta commit")
        printer = ProgressPrinter(timed, snapshot=start is None)
        while printer.in_snapshot:        # the workload's changes come after it, live
            check(self.query)
            printer.poll(self.query)
            time.sleep(0.25)

        work = Workload(server, args.orders, rate=args.rate)
        work.start()
        say(f"workload running: {args.orders} orders placed, paid, shipped, cancelled ...")
        while work.is_alive():
            check(self.query)
            printer.poll(self.query)
            work.join(0.25)
        if work.error is not None:
            raise work.error
        say(f"workload done: {work.transactions} transactions, {work.changes} row changes")
        printer.poll(self.query)
        from streaming.apps.runtime import raise_if_failed, stop_between_batches
        stop_between_batches(self.query)
        raise_if_failed(self.query, stop_asked=True)
        printer.poll(self.query)
        say("stream stopped; restarting it from its checkpoint with availableNow to drain "
            "(the lag of what is left includes the restart) ...")
        self.query = start_stream(spark, server, start, out, timed,
                                  batch_rows=args.batch_rows, available_now=True)
        while not self.query.awaitTermination(0.25):
            printer.poll(self.query)
        raise_if_failed(self.query, stop_asked=True)      # availableNow ends by itself
        printer.poll(self.query)
        say(f"caught up: {printer.rows} changes in {printer.printed} batches, "
            f"{printer.last_lag.get('behindBytes')} binlog bytes behind; Delta tables under "
            f"{out / 'delta'}")
        ok = compare(server, timed.upserter)
        say("every Delta table equals its source table" if ok else
            "MISMATCH between Delta and the source")
        return 0 if ok else 1

    def close(self) -> None:
        """The stream, the metrics, Spark and the private server stopped (each step even when an
        earlier one failed: the error being reported, if any, is the one that matters)."""
        steps = []
        if self.query is not None:
            steps.append(lambda: self.query.isActive and self.query.stop())
        if self.listener is not None:
            from streaming.metrics import stop_metrics
            steps.append(lambda: stop_metrics(self.spark, self.listener))
        if self.spark is not None:
            steps.append(self.spark.stop)
        if self.server is not None:
            steps.append(self.server.close)
        for step in steps:
            try:
                step()
            except Exception:  # noqa: BLE001 - see above
                pass


if __name__ == "__main__":
    sys.exit(main())
