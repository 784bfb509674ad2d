"""Decode throughput, side by side on the same binlog stream, in one run.

    python -m bench [--rows 200000] [--workloads inserts,updates,...]

Starts a private MariaDB (cdc.embedded), writes each workload, then decodes the same binlog
files/stream with: binlog-cdc (to Python tuples), python-mysql-replication 1.0.17 (from the
live server, as it cannot read files) and ``mariadb-binlog -v`` (C). Prints rows/s and the
ratios; nothing is asserted. Peak RSS of this process is printed at the end.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import tempfile
import time

from cdc.embedded import EmbeddedMariaDB
from cdc.files import read_events
from cdc.transactions import assemble

ORDERS = ("CREATE TABLE {t} (id BIGINT PRIMARY KEY, customer INT, amount DECIMAL(12,2), "
          "sku VARCHAR(32), created DATETIME(6), status VARCHAR(16), flag TINYINT)")


def _orders_values(start, n):
    return ",".join(f"({start + i}, {i % 977}, {i * 1.25:.2f}, 'SKU-{i % 5000}', "
                    f"'2024-01-01 00:00:00.{i % 1000000:06d}', 'new', {i % 2})" for i in range(n))


def w_inserts(s, db, rows):
    s.execute(ORDERS.format(t=f"{db}.orders"))
    for k in range(0, rows, 5000):
        s.execute(f"INSERT INTO {db}.orders VALUES {_orders_values(k, min(5000, rows - k))}")


def w_updates(s, db, rows):
    w_inserts(s, db, rows)
    return "mark"


def w_deletes(s, db, rows):
    w_inserts(s, db, rows)
    return "mark"


def w_wide(s, db, rows):
    cols = ", ".join(f"c{i} {'INT' if i % 3 == 0 else 'VARCHAR(20)' if i % 3 == 1 else 'DOUBLE'}"
                     for i in range(49))
    s.execute(f"CREATE TABLE {db}.wide (id INT PRIMARY KEY, {cols})")
    for k in range(0, rows, 2000):
        vals = ",".join("(" + ", ".join([str(k + i)] + [
            str(i) if j % 3 == 0 else f"'v{i}-{j}'" if j % 3 == 1 else f"{i}.5"
            for j in range(49)]) + ")" for i in range(min(2000, rows - k)))
        s.execute(f"INSERT INTO {db}.wide VALUES {vals}")


def w_json(s, db, rows):
    s.execute(f"CREATE TABLE {db}.docs (id INT PRIMARY KEY, doc JSON)")
    for k in range(0, rows, 2000):
        vals = ",".join(f"({k + i}, '{{\"a\": {i}, \"tags\": [\"x\", \"y\"], \"n\": {{\"m\": {i}.5}}}}')"
                        for i in range(min(2000, rows - k)))
        s.execute(f"INSERT INTO {db}.docs VALUES {vals}")


def w_small_tx(s, db, rows):
    s.execute(ORDERS.format(t=f"{db}.orders"))
    conn = s.connect(database=db)
    with conn.cursor() as cur:
        for i in range(rows):
            cur.execute(f"INSERT INTO orders VALUES {_orders_values(i, 1)}")
    conn.close()


WORKLOADS = {"inserts": w_inserts, "updates": w_updates, "deletes": w_deletes, "wide": w_wide,
             "json": w_json, "small_tx": w_small_tx}


def ours(files) -> int:
    n = 0
    for tx in assemble(read_events(files)):
        for c in tx.changes():
            n += 1
    return n


def pymysqlreplication(server, start_file) -> int:
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent
    stream = BinLogStreamReader(connection_settings=server.cdc_params(), server_id=9999,
                                blocking=False, resume_stream=True, log_file=start_file,
                                log_pos=4,
                                only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent])
    n = 0
    for ev in stream:
        n += len(ev.rows)
    stream.close()
    return n


def mariadb_binlog(files) -> int:
    out = subprocess.run(["mariadb-binlog", "--no-defaults", "-v", "--base64-output=decode-rows",
                          *map(str, files)], capture_output=True, check=True).stdout
    return out.count(b"\n### INSERT") + out.count(b"\n### UPDATE") + out.count(b"\n### DELETE")


def timed(fn, *args):
    t = time.perf_counter()
    n = fn(*args)
    return n, time.perf_counter() - t


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    ap.add_argument("--rows", type=int, default=100_000)
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--skip-pmr", action="store_true", help="skip python-mysql-replication")
    args = ap.parse_args(argv)
    print(f"{'workload':10} {'rows':>8} {'ours r/s':>10} {'pmr r/s':>10} {'ours/pmr':>9} "
          f"{'mariadb-binlog r/s':>19} {'ours/C':>7}")
    with EmbeddedMariaDB() as server:
        for name in args.workloads.split(","):
            db = f"bench_{name}"
            server.execute(f"CREATE DATABASE {db}")
            start_file, _ = server.current_position()
            mark = WORKLOADS[name](server, db, args.rows)
            if mark:
                server.flush_binary_logs()
                start_file, _ = server.current_position()
                table = f"{db}.orders"
                if name == "updates":
                    server.execute(f"UPDATE {table} SET status = 'paid', amount = amount + 1")
                else:
                    server.execute(f"DELETE FROM {table}")
            files = server.snapshot_binlogs(tempfile.mkdtemp(prefix="bench-"), since_file=start_file)
            n1, t1 = timed(ours, files)
            n3, t3 = timed(mariadb_binlog, files)
            if args.skip_pmr:
                r2 = float("nan")
            else:
                n2, t2 = timed(pymysqlreplication, server, start_file)
                r2 = n2 / t2
            print(f"{name:10} {n1:>8} {n1 / t1:>10,.0f} {r2:>10,.0f} {n1 / t1 / r2:>9.2f} "
                  f"{n3 / t3:>19,.0f} {n1 / t1 / (n3 / t3):>7.3f}", flush=True)
    print(f"peak RSS: {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")


if __name__ == "__main__":
    main()
