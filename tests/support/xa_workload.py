"""The XA workload of the XA tests (tests/live/test_xa_live.py, test_xa_spark.py).

:func:`workload`: ``x1`` prepared then committed, ``x2`` prepared then rolled back, ``x3``
committed in one phase, ``x4`` prepared, a normal transaction committed while it is prepared,
the binlog rotated, then ``x4`` committed (its XA COMMIT on a later file than its XA PREPARE).
The server keeps rows 1, 3, 4 and 5; a change of a prepared XA transaction is delivered once,
at its XA COMMIT's place in the binlog: 1, 3, 5, then x4's (not 1, 3, 4, 5: ``x4`` was prepared
before 5 was committed, and committed after).
"""

from __future__ import annotations

import time


def rollback_prepared(server) -> None:
    """Roll back every XA transaction the server holds prepared (a failed test's leftovers: a
    prepared transaction keeps its table locked, the database could not be dropped)."""
    for fmt, glen, _, data in server.execute("XA RECOVER"):
        data = data if isinstance(data, bytes) else str(data).encode()
        server.execute(f"XA ROLLBACK X'{data[:glen].hex()}',X'{data[glen:].hex()}',{fmt}")


def xa_prepare(server, xid: str, *statements: str, end: str = "XA PREPARE '{xid}'") -> None:
    """``XA START`` .. *statements* .. ``XA END`` .. *end* (``XA PREPARE``) on a connection of
    its own, which is then closed: a prepared transaction stays prepared (both servers keep it
    after the disconnect), and any connection may commit or roll it back."""
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT CONNECTION_ID()")
            thread = cur.fetchone()[0]
            cur.execute(f"XA START '{xid}'")
            for s in statements:
                cur.execute(s)
            cur.execute(f"XA END '{xid}'")
            cur.execute(end.format(xid=xid))
    finally:
        conn.close()
    _gone(server, thread)


def _gone(server, thread: int, timeout: float = 30.0) -> None:
    """Wait until the server has ended connection *thread*: closing a connection only sends
    COM_QUIT, and until the server has handled it a transaction that connection prepared is
    still its own (another connection's XA COMMIT of it fails with XAER_NOTA, a DROP waits on
    its locks; seen on loaded machines)."""
    deadline = time.monotonic() + timeout
    while server.execute(f"SELECT 1 FROM information_schema.PROCESSLIST WHERE ID = {thread}"):
        if time.monotonic() > deadline:
            raise AssertionError(f"connection {thread} still open {timeout:.0f} s after closing")
        time.sleep(0.01)


def xa_one_phase(server, xid: str, *statements: str) -> None:
    xa_prepare(server, xid, *statements, end="XA COMMIT '{xid}' ONE PHASE")


def make_table(server, db) -> tuple[str, int]:
    server.execute(f"CREATE TABLE `{db}`.t (id INT PRIMARY KEY, v INT)")
    return server.current_position()


def first_part(server, db) -> None:
    """x1 committed, x2 rolled back, x3 one phase, x4 prepared, 5 committed meanwhile."""
    ins = f"INSERT INTO `{db}`.t VALUES (%d, %d)"
    xa_prepare(server, "x1", ins % (1, 10))
    server.execute("XA COMMIT 'x1'")
    xa_prepare(server, "x2", ins % (2, 20))
    server.execute("XA ROLLBACK 'x2'")
    xa_one_phase(server, "x3", ins % (3, 30))
    xa_prepare(server, "x4", ins % (4, 40), f"UPDATE `{db}`.t SET v = 11 WHERE id = 1")
    server.execute(ins % (5, 50))


def second_part(server, db) -> None:
    """The binlog rotated, then x4 committed."""
    server.flush_binary_logs()
    server.execute("XA COMMIT 'x4'")


def workload(server, db) -> tuple[str, int]:
    start = make_table(server, db)
    first_part(server, db)
    second_part(server, db)
    return start


#: (op, id, v after) of the changes, in delivery order
EXPECTED = [("c", 1, 10), ("c", 3, 30), ("c", 5, 50), ("c", 4, 40), ("u", 1, 11)]
FIRST = EXPECTED[:3]


def server_rows(server, db) -> list[tuple]:
    return [tuple(r) for r in server.execute(f"SELECT id, v FROM `{db}`.t ORDER BY id")]


def summary(changes, db) -> list[tuple]:
    return [(c.op, c.after[0], c.after[1]) for c in changes if c.schema == db]


def applied(expected) -> list[tuple]:
    rows: dict = {}
    for _, k, v in expected:
        rows[k] = v
    return sorted(rows.items())
