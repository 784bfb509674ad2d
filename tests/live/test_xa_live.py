"""XA transactions end to end, on MySQL 9.7, MariaDB 11.8 and MariaDB 10.11, with the workload
of :mod:`support.xa_workload` (prepared then committed or rolled back, one phase, a commit
after other transactions and on a later binlog file).

The library's iterator over files, the replica client (also restarted between an XA PREPARE and
its XA COMMIT or XA ROLLBACK, by file position and by GTID), ``binlog-cdc tail`` and ``decode``
all deliver a committed XA transaction's changes once, at its XA COMMIT's place, and a rolled
back one's never. The Spark source: tests/live/test_xa_spark.py.
"""

from __future__ import annotations

import json

import pytest

from cdc.binlog.files import read_events
from cdc.binlog.transactions import assemble
from cdc.positions import Position, Start
from cdc.replica.client import ReplicaClient
from cdc.replica.config import ReplicaConfig
from support.xa_workload import (EXPECTED, FIRST, applied, first_part, make_table,
                                 rollback_prepared, second_part, server_rows, summary, workload,
                                 xa_prepare)

pytestmark = [pytest.mark.server, pytest.mark.servers("mysql-9.7", "mariadb-11.8",
                                                      "mariadb-10.11")]

_server_ids = iter(range(8101, 8900))


def config(server, **kw) -> ReplicaConfig:
    p = server.cdc_params()
    return ReplicaConfig(p["host"], p["port"], p["user"], p["password"],
                         server_id=next(_server_ids), **kw)


@pytest.fixture(autouse=True)
def no_prepared_left(server, db):
    """A test that fails between an XA PREPARE and its decision leaves it prepared."""
    yield
    rollback_prepared(server)


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
    # (the first file also holds what earlier tests wrote before the start: only this db counts)
    mine = [c for c in changes if c.schema == db]
    assert x4.file == files[-1].name != [c.tx.file for c in mine if c.after and c.after[0] == 5][0]


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


def test_two_prepared_decided_in_reverse_order_across_restarts(server, db):
    start = make_table(server, db)
    ins = f"INSERT INTO `{db}`.t VALUES (%d, %d)"
    xa_prepare(server, "a1", ins % (1, 1))
    xa_prepare(server, "a2", ins % (2, 2))
    server.execute(ins % (3, 3))
    got, client = read_all(server, Start.at(*start))
    assert summary(got, db) == [("c", 3, 3)]
    assert [p.xid for p in client.position.prepared] == ["X'6131',X'',1", "X'6132',X'',1"]
    server.execute("XA COMMIT 'a2'")
    got, client = read_all(server, client.position)
    assert summary(got, db) == [("c", 2, 2)]
    assert [p.xid for p in client.position.prepared] == ["X'6131',X'',1"]
    server.flush_binary_logs()
    server.execute(ins % (4, 4))
    server.execute("XA COMMIT 'a1'")
    got, client = read_all(server, client.position)
    assert summary(got, db) == [("c", 4, 4), ("c", 1, 1)]
    assert client.position.prepared == ()
    assert server_rows(server, db) == [(1, 1), (2, 2), (3, 3), (4, 4)]


def test_tail_xa_at_a_place_without_a_prepare_exits_2(server, db, capsys, monkeypatch):
    from cdc.cli.main import main
    start = make_table(server, db)
    server.execute(f"INSERT INTO `{db}`.t VALUES (1, 1)")
    p = server.cdc_params()
    monkeypatch.setenv("BINLOG_CDC_PASSWORD", p["password"])
    rc = main(["tail", "--host", p["host"], "--port", str(p["port"]), "--user", p["user"],
               "--server-id", str(next(_server_ids)), "--non-blocking", "--file", start[0],
               "--pos", str(start[1]), "--xa", f"{start[0]}:{start[1]}"])
    err = capsys.readouterr().err
    assert rc == 2 and "Traceback" not in err
    assert f"a prepared XA transaction at {start[0]}:{start[1]} is not in the binlog of" in err
    assert "that is not an XA PREPARE" in err


def test_a_client_reconnecting_keeps_what_it_holds(server, db):
    """The same client dumps again (as after a lost connection): the prepared transaction it
    holds in memory is not read again, and is delivered at its XA COMMIT."""
    start = make_table(server, db)
    first_part(server, db)
    client = ReplicaClient(config(server), start=Start.at(*start), blocking=False)
    try:
        first = [c for tx in client.transactions() for c in tx.changes()]
        assert summary(first, db) == FIRST and list(client.prepared) == ["X'7834',X'',1"]
        held = client.prepared["X'7834',X'',1"]
        second_part(server, db)
        rest = [c for tx in client.transactions() for c in tx.changes()]
        assert client.dump_thread_starts == 2
        # the events it held, not a new reading of them
        assert summary(rest, db) == EXPECTED[3:] and rest[0].tx.rows_events is held.rows_events
        assert dict(client.prepared) == {} and client.position.prepared == ()
    finally:
        client.close()
