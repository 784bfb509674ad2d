"""The chunk reader on MariaDB 10.11, 11.8 and MySQL 9.7: with each client library (PyMySQL,
mysqlclient) a table chunked by a composite key of binary and temporal columns (key values travel
as offsets: base64, text) reads every row once and the same values with both; with a writer
committing inserts, updates (primary keys too) and deletes while chunks are read, every chunk's
position is exact: its rows are the table's rows in its key range replayed from the binlog up to
that position, and nothing after it."""

from __future__ import annotations

import random
import threading
import time

import pytest

from cdc.binlog.transactions import TableFilter
from cdc.positions import Start
from cdc.replica.client import ReplicaClient
from cdc.replica.config import ReplicaConfig
from cdc.replica.sql import connect
from cdc.snapshot import reader as reader_module
from cdc.snapshot.plan import describe_table, next_bound
from cdc.snapshot.reader import CLIENTS, SnapshotChunkReader, connect_for_snapshot

pytestmark = [pytest.mark.server, pytest.mark.servers()]


def _config(server, **kw) -> ReplicaConfig:
    p = server.cdc_params()
    return ReplicaConfig(p["host"], p["port"], p["user"], p["password"], **kw)


def _chunks(config, name: str, client: str, chunk: int, pause: float = 0.0):
    """``[(position, after, upto, rows)]`` of every chunk of *name*, in key order; the tries of
    bracketed snapshots are added up in ``TRIES``."""
    plain = connect(config)

    def query(sql, args=None):
        with plain.cursor() as cur:
            cur.execute(sql, args)
            return cur.fetchall()
    table = describe_table(query, name)
    conn = connect_for_snapshot(config, client)
    out, after = [], None
    try:
        while True:
            upto = next_bound(query, table, after, chunk)
            with SnapshotChunkReader(conn, table, after, upto) as r:
                rows = [row for batch in r.batches(rows_per_batch=5) for row in batch]
                out.append((r.position, after, upto, rows))
                TRIES[client] = TRIES.get(client, 0) + r.attempts
            if upto is None:
                return out
            after = upto
            time.sleep(pause)
    finally:
        conn.close()
        plain.close()


TRIES: dict = {}


def _client(name: str) -> str:
    if name == "mysqlclient":
        pytest.importorskip("MySQLdb")
    return name


def test_both_clients_read_every_row_once_with_the_same_values(mariadb, db):
    mariadb.execute("CREATE TABLE t (k VARBINARY(8) NOT NULL, at DATETIME(3) NOT NULL, "
                    "amount DECIMAL(20,6), note VARCHAR(20), PRIMARY KEY (k, at))", database=db)
    mariadb.execute("INSERT INTO t SELECT UNHEX(LPAD(HEX(seq % 5), 2, '0')), "
                    "'2024-01-01 00:00:00.001' + INTERVAL seq SECOND, seq / 7, "
                    f"IF(seq % 4, CONCAT('é', seq), NULL) FROM {mariadb.seq_table(103)}",
                    database=db)
    config = _config(mariadb)
    got = {}
    for c in CLIENTS:
        chunks = _chunks(config, f"{db}.t", _client(c), 7)
        assert all(p.exact and p.position.pos > 4 for p, _a, _u, _r in chunks), chunks
        got[c] = [row for _p, _a, _u, rows in chunks for row in rows]
        assert len(chunks) == 15
    rows = got["pymysql"]
    assert len(rows) == 103
    assert len({(r[0], r[1]) for r in rows}) == 103                 # each row once
    assert got["mysqlclient"] == got["pymysql"]
    assert [repr(v) for v in got["mysqlclient"][0]] == [repr(v) for v in rows[0]]
    first = mariadb.execute("SELECT k, at, amount, note FROM t ORDER BY k, at LIMIT 1",
                            database=db)[0]
    assert rows[0] == first and rows[0][0] == b"\x00" and rows[0][3] == "é5"
    assert str(rows[0][2]) == str(first[2])           # 0.714286 on MariaDB, 0.7143 on MySQL


def _writer(server, db: str, stop: threading.Event, writes: list) -> None:
    """Autocommit inserts, updates (primary keys too) and deletes all over the table."""
    rnd = random.Random(11)
    conn = server.connect(database=db)
    try:
        with conn.cursor() as cur:
            while not stop.is_set():
                k = rnd.randrange(1, 402)
                op = len(writes) % 4
                if op == 0:
                    cur.execute("INSERT IGNORE INTO t VALUES (%s, 0, 'w')", (k,))
                elif op == 1:
                    cur.execute("UPDATE t SET v = v + 1, note = 'u' WHERE id = %s", (k,))
                elif op == 2:
                    cur.execute("UPDATE IGNORE t SET id = id + 1000 WHERE id = %s", (k,))
                else:
                    cur.execute("DELETE FROM t WHERE id = %s", (k,))
                writes.append(time.monotonic())
                time.sleep(0.001)
    finally:
        conn.close()


def _replayed(config, start) -> list:
    """``[(end, {id: row})]``: the table after each transaction from *start* to the binlog end
    (``end`` = the position after the transaction)."""
    client = ReplicaClient(config, start=Start.at(*start), blocking=False)
    state: dict = {}
    out = []
    for tx in client.transactions():
        for c in tx.changes():
            if c.before is not None:
                state.pop(c.before[0], None)
            if c.after is not None:
                state[c.after[0]] = tuple(c.after)
        out.append(((tx.file, tx.end_pos), dict(state)))
    return out


def _state_at(replay: list, position) -> dict:
    state: dict = {}
    for end, s in replay:
        if end <= (position.file, position.pos):
            state = s
    return state


def test_chunk_positions_are_exact_under_a_concurrent_writer(mariadb, db):
    """A small table read in chunks over and over while a writer commits every millisecond or so:
    the rows of each chunk are the table's rows in its key range at the chunk's position
    (replayed from the binlog; no transaction after it shows, none before it is missing), and
    every position is exact."""
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL, note VARCHAR(10))",
                    database=db)
    start = mariadb.current_position()
    mariadb.execute(f"INSERT INTO t SELECT seq * 2, seq, 'n' FROM {mariadb.seq_table(200)}",
                    database=db)
    config = _config(mariadb, table_filter=TableFilter([f"{db}.t"]))
    TRIES.clear()
    stop, writes, chunks = threading.Event(), [], []
    writer = threading.Thread(target=_writer, args=(mariadb, db, stop, writes))
    writer.start()
    try:
        while len(writes) < 20:
            time.sleep(0.01)
        while len(chunks) < 200:
            chunks += _chunks(config, f"{db}.t", "pymysql", 50)
        during = len(writes)
    finally:
        stop.set()
        writer.join()
    replay = _replayed(config, start)
    positions = {(p.position.file, p.position.pos) for p, _a, _u, _r in chunks}
    print(f"EXACT chunks={len(chunks)} positions={len(positions)} writes={len(writes)} "
          f"during={during} tries={TRIES.pop('pymysql', 0)}")
    assert len(positions) > len(chunks) // 4, "the writer did not write between the chunks"
    for p, after, upto, rows in chunks:
        lo = after[0] if after else None
        hi = upto[0] if upto else None
        want = sorted(r for k, r in _state_at(replay, p.position).items()
                      if (lo is None or k > lo) and (hi is None or k <= hi))
        assert [tuple(r) for r in rows] == want, (p, after, upto)
    assert [p.exact for p, _a, _u, _r in chunks] == [True] * len(chunks)


@pytest.mark.servers("mysql-9.7")
def test_a_transaction_owning_its_gtid_holds_the_chunk_back(server, mariadb_factory,
                                                             monkeypatch):
    """MySQL: a chunk started while a transaction owns its GTID (``SET GTID_NEXT``, not
    committed) waits for it: committed meanwhile, the chunk is exact and holds its row; still
    open after ``SETTLE_SECONDS``, the chunk is read at a position that is not exact. (A server
    of its own: the GTID leaves a gap in its gtid_executed.)"""
    mariadb, db = mariadb_factory(), "owned"
    mariadb.execute(f"CREATE DATABASE {db}")
    mariadb.execute("CREATE TABLE t (id INT PRIMARY KEY, v INT NOT NULL, note VARCHAR(10))",
                    database=db)
    mariadb.execute(f"INSERT INTO t SELECT seq, seq, 'n' FROM {mariadb.seq_table(10)}",
                    database=db)
    uuid = mariadb.execute("SELECT @@GLOBAL.server_uuid")[0][0]
    gno = 1000
    owner = mariadb.connect(database=db)
    config = _config(mariadb)
    try:
        with owner.cursor() as cur:
            cur.execute(f"SET GTID_NEXT = '{uuid}:{gno}'")
            cur.execute("BEGIN")
            cur.execute("INSERT INTO t VALUES (11, 11, 'owner')")
        monkeypatch.setattr(reader_module, "SETTLE_SECONDS", 0.3)
        t0 = time.monotonic()
        (p, _a, _u, rows), = _chunks(config, f"{db}.t", "pymysql", 100)
        assert not p.exact and time.monotonic() - t0 >= 0.3
        assert len(rows) == 10
        monkeypatch.setattr(reader_module, "SETTLE_SECONDS", 30)
        timer = threading.Timer(0.5, owner.commit)
        timer.start()
        t0 = time.monotonic()
        TRIES.clear()
        (p, _a, _u, rows), = _chunks(config, f"{db}.t", "pymysql", 100)
        waited = time.monotonic() - t0
        timer.join()
    finally:
        owner.close()
    assert p.exact and waited >= 0.5 and TRIES["pymysql"] == 2, (p, waited, TRIES)
    assert [r[2] for r in rows] == ["n"] * 10 + ["owner"]
    assert (p.position.file, p.position.pos) == mariadb.current_position()


def test_text_protocol_reader_long_values_and_early_stop(server, db):
    """cdc.snapshot.textrows (the chunk reader's PyMySQL path) against PyMySQL's own fetch:
    values on each side of the length-coding steps (251, 65536, 2^24 bytes; a row longer than
    one 16 MiB packet), NULLs, empty strings; a read stopped after its first batch leaves the
    connection usable (the rest is drained)."""
    import pymysql.cursors
    from cdc.replica.sql import connect as plain_connect
    from cdc.snapshot.textrows import pymysql_batches
    from cdc.snapshot.values import raw_connect_kwargs
    server.execute("SET GLOBAL max_allowed_packet = 67108864")
    lengths = [0, 1, 250, 251, 252, 65535, 65536, 70000, (1 << 24) - 1, 1 << 24, 20_000_000]
    server.execute("CREATE TABLE t (id INT PRIMARY KEY, a LONGBLOB, b VARCHAR(10))", database=db)
    for i, n in enumerate(lengths):
        server.execute(f"INSERT INTO t VALUES ({i}, REPEAT(CHAR(65 + {i % 26}), {n}), "
                       f"{'NULL' if i % 3 else repr(str(i))})", database=db)
    server.execute(f"INSERT INTO t VALUES (100, NULL, '')", database=db)
    conn = plain_connect(_config(server), cursorclass=pymysql.cursors.SSCursor,
                         **raw_connect_kwargs())
    try:
        sql = f"SELECT id, a, b, id FROM `{db}`.t ORDER BY id"
        with conn.cursor() as cur:
            cur.execute(sql)
            want = list(cur.fetchall())
        assert [len(r[1]) if r[1] is not None else None for r in want] == lengths + [None]
        with conn.cursor() as cur:
            cur.execute(sql)
            got = [list(b) for b in pymysql_batches(cur, 2)]
        assert [len(b) for b in got] == [2] * 6
        assert [r for b in got for r in b] == want
        with conn.cursor() as cur:
            cur.execute(sql)
            batches = pymysql_batches(cur, 2)
            assert next(batches) == want[:2]
            batches.close()                     # stopped early: the rest drained
        with conn.cursor() as cur:
            cur.execute("SELECT 7")
            assert list(cur.fetchall()) == [(b"7",)]
    finally:
        conn.close()
