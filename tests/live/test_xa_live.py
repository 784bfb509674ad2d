"""XA transactions end to end, on MySQL 9.7, MariaDB 11.8 and MariaDB 10.11.

The workload (:func:`workload`): ``x1`` prepared then committed, ``x2`` prepared then rolled
back, ``x3`` committed in one phase, ``x4`` prepared, a normal transaction committed while it is
prepared, the binlog rotated, then ``x4`` committed (its XA COMMIT on a later file than its XA
PREPARE). The server keeps rows 1, 3, 4 and 5; a change of a prepared XA transaction is
delivered once, at its XA COMMIT's place in the binlog: 1, 3, 5, 4 (not 1, 3, 4, 5: ``x4`` was
prepared before 5 was committed, and committed after).

Every consumer must say the same: the library's iterator over files, the replica client (also
restarted between an XA PREPARE and its XA COMMIT, by file position and by GTID), ``binlog-cdc
tail`` and ``decode``, and the Spark source (a query restarted from its checkpoint between the
two; a replayed batch).
"""

from __future__ import annotations

import json

import pytest

from cdc.binlog.files import read_events
from cdc.binlog.transactions import assemble
from cdc.positions import Position, Start
from cdc.replica.client import ReplicaClient
from cdc.replica.config import ReplicaConfig

pytestmark = [pytest.mark.server, pytest.mark.servers("mysql-9.7", "mariadb-11.8",
                                                      "mariadb-10.11")]

_server_ids = iter(range(8101, 8900))


def config(server, **kw) -> ReplicaConfig:
    p = server.cdc_params()
    return ReplicaConfig(p["host"], p["port"], p["user"], p["password"],
                         server_id=next(_server_ids), **kw)


@pytest.fixture(autouse=True)
def no_prepared_left(server, db):
    """A test that fails between an XA PREPARE and its decision would leave the transaction
    prepared, its table locked (the database could not be dropped): roll it back."""
    yield
    for fmt, glen, _, data in server.execute("XA RECOVER"):
        data = data if isinstance(data, bytes) else str(data).encode()
        server.execute(f"XA ROLLBACK X'{data[:glen].hex()}',X'{data[glen:].hex()}',{fmt}")


def xa_prepare(server, xid: str, *statements: str) -> None:
    """``XA START`` .. *statements* .. ``XA PREPARE`` on a connection of its own, which is then
    closed: the transaction stays prepared (both servers keep it after the disconnect), and any
    connection may commit or roll it back."""
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"XA START '{xid}'")
            for s in statements:
                cur.execute(s)
            cur.execute(f"XA END '{xid}'")
            cur.execute(f"XA PREPARE '{xid}'")
    finally:
        conn.close()


def xa_one_phase(server, xid: str, *statements: str) -> None:
    conn = server.connect()
    try:
        with conn.cursor() as cur:
            cur.execute(f"XA START '{xid}'")
            for s in statements:
                cur.execute(s)
            cur.execute(f"XA END '{xid}'")
            cur.execute(f"XA COMMIT '{xid}' ONE PHASE")
    finally:
        conn.close()


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


def read_all(server, start, **kw) -> tuple[list, ReplicaClient]:
    client = ReplicaClient(config(server, **kw), start=start, blocking=False)
    with client:
        changes = [c for tx in client.transactions() for c in tx.changes()]
    return changes, client


def test_files_deliver_at_the_commit(server, db, tmp_path):
    start = workload(server, db)
    assert server_rows(server, db) == applied(EXPECTED) == [(1, 11), (3, 30), (4, 40), (5, 50)]
    files = server.snapshot_binlogs(tmp_path, since_file=start[0])
    txs = [tx for tx in assemble(read_events([str(f) for f in files])) if tx.file]
    changes = [c for tx in txs for c in tx.changes()]
    assert summary(changes, db) == EXPECTED
    x4 = [c.tx for c in changes if c.schema == db and c.after[0] == 4][0]
    # at the XA COMMIT's place: the file after the rotation, after transaction 5
    assert x4.file == files[-1].name != [c.tx.file for c in changes if c.after[0] == 5][0]


def test_replica_client_delivers_at_the_commit(server, db):
    start = workload(server, db)
    changes, client = read_all(server, Start.at(*start))
    assert summary(changes, db) == EXPECTED
    assert client.position.prepared == ()
    seqs = [(Position(c.tx.file, c.tx.pos).key, c.index) for c in changes]
    assert seqs == sorted(seqs)


def gtid_start(server) -> Start:
    if server.FLAVOR == "mysql":
        return Start.gtid_set(server.execute("SELECT @@GLOBAL.gtid_executed")[0][0])
    return Start.mariadb_gtid(server.execute("SELECT @@GLOBAL.gtid_binlog_pos")[0][0])


@pytest.mark.parametrize("mode", ["file", "gtid"])
def test_replica_client_restarted_between_prepare_and_commit(server, db, mode):
    start = make_table(server, db)
    begin = Start.at(*start) if mode == "file" else gtid_start(server)
    first_part(server, db)
    first, client = read_all(server, begin)
    assert summary(first, db) == FIRST            # x4 prepared: held, not delivered
    resume = client.position
    assert [p.xid for p in resume.prepared] == ["X'7834',X'',1"]
    assert resume.mode == ("file" if mode == "file" else
                           "gtid" if server.FLAVOR == "mysql" else "mariadb_gtid")
    # the checkpoint's text form (Spark offset, tail's schema file) gives it back
    assert Position.from_offset(json.dumps(resume.to_offset())) == resume
    second_part(server, db)
    rest, client2 = read_all(server, resume)
    assert summary(rest, db) == EXPECTED[3:]      # x4 once, nothing of before again
    assert client2.position.prepared == ()
    assert applied(summary(first + rest, db)) == server_rows(server, db)


def test_restart_before_a_rollback_delivers_nothing(server, db):
    start = make_table(server, db)
    xa_prepare(server, "r1", f"INSERT INTO `{db}`.t VALUES (7, 70)")
    first, client = read_all(server, Start.at(*start))
    assert summary(first, db) == []
    server.flush_binary_logs()
    server.execute("XA ROLLBACK 'r1'")
    rest, client2 = read_all(server, client.position)
    assert summary(rest, db) == [] and server_rows(server, db) == []
    assert client2.position.prepared == ()


def test_tail_prints_committed_xa_at_the_commit(server, db, capsys, monkeypatch):
    from cdc.cli.main import main
    start = make_table(server, db)
    first_part(server, db)
    p = server.cdc_params()
    monkeypatch.setenv("BINLOG_CDC_PASSWORD", p["password"])
    base = ["tail", "--host", p["host"], "--port", str(p["port"]), "--user", p["user"],
            "--server-id", str(next(_server_ids)), "--non-blocking", "--format", "jsonl",
            "--tables", f"{db}.*"]
    assert main(base + ["--file", start[0], "--pos", str(start[1])]) == 0
    out = capsys.readouterr()
    lines = [json.loads(line) for line in out.out.splitlines()]
    assert [(l["op"], l["after"]["id"]) for l in lines] == [("c", 1), ("c", 3), ("c", 5)]
    # the resume options name the prepared transaction
    resume = out.err.strip().rsplit("resume with: ", 1)[1]
    assert "--xa " in resume
    second_part(server, db)
    import shlex
    assert main(base + shlex.split(resume)) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(l["op"], l["after"]["id"]) for l in lines] == [("c", 4), ("u", 1)]
    # at the XA COMMIT's place: after the rotation
    assert {l["file"] for l in lines} == {server.current_position()[0]}


def test_decode_jsonl(server, db, tmp_path, capsys):
    from cdc.cli.main import main
    start = workload(server, db)
    files = [str(f) for f in server.snapshot_binlogs(tmp_path, since_file=start[0])]
    assert main(["decode", "--format", "jsonl", "--include-tables", f"{db}.*"] + files) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [(l["op"], l["after"]["id"], l["after"]["v"]) for l in lines] == EXPECTED
    # the XA COMMIT's file alone: its prepared transaction is in the file before
    assert main(["decode", "--format", "jsonl", files[-1]]) == 0
    out = capsys.readouterr()
    assert out.out == ""
    assert "the XA COMMIT of X'7834',X'',1" in out.err and "decode from an earlier file" in out.err
