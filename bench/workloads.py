"""The benchmark workloads, written into a live MariaDB.

Each workload gets its own database ``bench_<name>`` and its own binlog files: the logs are
flushed before it starts (and, for updates/deletes, again after the rows to change are loaded),
so the files measured hold exactly that workload's row changes.
"""

from __future__ import annotations

ORDERS = ("CREATE TABLE {t} (id BIGINT PRIMARY KEY, customer INT, amount DECIMAL(12,2), "
          "sku VARCHAR(32), created DATETIME(6), status VARCHAR(16), flag TINYINT)")


def _orders_values(start, n):
    return ",".join(f"({start + i}, {i % 977}, {i * 1.25:.2f}, 'SKU-{i % 5000}', "
                    f"'2024-01-01 00:00:00.{i % 1000000:06d}', 'new', {i % 2})" for i in range(n))


def _load_orders(s, db, rows):
    s.execute(ORDERS.format(t=f"{db}.orders"))
    for k in range(0, rows, 5000):
        s.execute(f"INSERT INTO {db}.orders VALUES {_orders_values(k, min(5000, rows - k))}")


def w_inserts(s, db, rows):
    _load_orders(s, db, rows)


def w_updates(s, db, rows):
    """Full before and after images (binlog_row_image=FULL) of every row."""
    _load_orders(s, db, rows)
    return f"UPDATE {db}.orders SET status = 'paid', amount = amount + 1"


def w_deletes(s, db, rows):
    _load_orders(s, db, rows)
    return f"DELETE FROM {db}.orders"


def w_wide(s, db, rows):
    """50 columns: INT, VARCHAR(20), DOUBLE in turn."""
    cols = ", ".join(f"c{i} {'INT' if i % 3 == 0 else 'VARCHAR(20)' if i % 3 == 1 else 'DOUBLE'}"
                     for i in range(49))
    s.execute(f"CREATE TABLE {db}.wide (id INT PRIMARY KEY, {cols})")
    for k in range(0, rows, 2000):
        vals = ",".join("(" + ", ".join([str(k + i)] + [
            str(i) if j % 3 == 0 else f"'v{i}-{j}'" if j % 3 == 1 else f"{i}.5"
            for j in range(49)]) + ")" for i in range(min(2000, rows - k)))
        s.execute(f"INSERT INTO {db}.wide VALUES {vals}")


def w_json(s, db, rows):
    """A JSON document per row (MariaDB stores JSON as LONGTEXT: the binlog holds the text)."""
    s.execute(f"CREATE TABLE {db}.docs (id INT PRIMARY KEY, doc JSON)")
    for k in range(0, rows, 2000):
        vals = ",".join(
            f"({k + i}, '{{\"a\": {i}, \"name\": \"customer {i}\", \"tags\": [\"x\", \"y\", \"z\"], "
            f"\"n\": {{\"m\": {i}.5, \"ok\": true, \"list\": [1, 2, 3, 4]}}}}')"
            for i in range(min(2000, rows - k)))
        s.execute(f"INSERT INTO {db}.docs VALUES {vals}")


def w_small_tx(s, db, rows):
    """One single-row INSERT per transaction (autocommit)."""
    s.execute(ORDERS.format(t=f"{db}.orders"))
    conn = s.connect(database=db)
    with conn.cursor() as cur:
        for i in range(rows):
            cur.execute(f"INSERT INTO orders VALUES {_orders_values(i, 1)}")
    conn.close()


WORKLOADS = {"inserts": w_inserts, "updates": w_updates, "deletes": w_deletes, "wide": w_wide,
             "json": w_json, "small_tx": w_small_tx}


def run_workload(server, name: str, rows: int, dest: str):
    """Write workload *name*; return (db, start file, binlog files holding exactly it)."""
    db = f"bench_{name}"
    server.execute(f"DROP DATABASE IF EXISTS {db}")
    server.execute(f"CREATE DATABASE {db}")
    server.flush_binary_logs()
    start_file, _ = server.current_position()
    change = WORKLOADS[name](server, db, rows)
    if change:
        server.flush_binary_logs()
        start_file, _ = server.current_position()
        server.execute(change)
    files = server.snapshot_binlogs(dest, since_file=start_file)
    return db, start_file, files
