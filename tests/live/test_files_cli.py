"""File reader, transaction boundaries and the decode CLI on binlogs of the live MariaDB."""

import json
import subprocess
import sys

import pytest

from cdc.binlog.files import binlog_paths, read_events
from cdc.binlog.transactions import TableFilter, assemble
from conftest import gtid_prefix, reference_decoder

pytestmark = [pytest.mark.server, pytest.mark.servers]


@pytest.fixture
def shop(mariadb, db, binlog_snapshot):
    start_file, _ = mariadb.current_position()
    conn = mariadb.connect(database=db)
    with conn.cursor() as cur:
        cur.execute("CREATE TABLE orders (id INT PRIMARY KEY, amount DECIMAL(8,2), note VARCHAR(20))")
        cur.execute("CREATE TABLE log (id INT PRIMARY KEY AUTO_INCREMENT, msg TEXT) ENGINE=MyISAM")
        cur.execute("INSERT INTO orders VALUES (1, 9.99, 'a'), (2, -1.50, 'b')")
        conn.begin()
        cur.execute("UPDATE orders SET amount = 10.00 WHERE id = 1")
        cur.execute("INSERT INTO orders VALUES (3, 0.01, 'c')")
        conn.commit()
        conn.begin()
        cur.execute("INSERT INTO orders VALUES (4, 4.00, 'rolled back')")
        conn.rollback()
    mariadb.flush_binary_logs()
    with conn.cursor() as cur:
        cur.execute("INSERT INTO log (msg) VALUES ('myisam')")
        cur.execute("DELETE FROM orders WHERE id = 2")
    conn.close()
    return db, binlog_snapshot(since_file=start_file), mariadb


def test_transactions_and_positions(shop):
    db, files, server = shop
    assert len(files) >= 2
    txs = [tx for tx in assemble(read_events(files))
           if any(c.schema == db for c in tx.changes()) or
           any(q.schema == db for q in tx.queries)]
    ddl = [tx.queries[0].query.split(" (")[0] for tx in txs if tx.is_ddl]
    assert ddl[-2:] == ["CREATE TABLE orders", "CREATE TABLE log"]
    # MariaDB's GTID event flags a DDL standalone; MySQL's GTID event does not say
    standalone = True if server.FLAVOR == "mariadb" else None
    assert all(tx.standalone is standalone and tx.xid is None for tx in txs if tx.is_ddl)
    txs = [tx for tx in txs if not tx.is_ddl]
    kinds = [(tx.is_ddl, [(c.table, c.op) for c in tx.changes()]) for tx in txs]
    assert kinds == [(False, [("orders", "c"), ("orders", "c")]),
                     (False, [("orders", "u"), ("orders", "c")]),
                     (False, [("log", "c")]),
                     (False, [("orders", "d")])]
    # rolled-back work never reaches the binlog of InnoDB; nothing of id 4 anywhere
    assert all(c.after is None or c.after[0] != 4 for tx in txs for c in tx.changes())
    for tx in txs:
        assert tx.gtid and tx.gtid.startswith(gtid_prefix(server))
        assert tx.pos < tx.end_pos
    # resuming at a transaction's end position yields exactly the transactions after it
    second = txs[1]
    rest = [tx.gtid for tx in assemble(read_events([f for f in files if f.name >= second.file],
                                                   start_position=second.end_pos))
            if any(c.schema == db for c in tx.changes())]
    assert rest == [tx.gtid for tx in txs[2:]] and len(rest) == 2
    assert txs[2].xid is None  # MyISAM: committed by QUERY COMMIT, no XID


def test_table_filter(shop):
    db, files, server = shop
    only_log = [c.table for tx in assemble(read_events(files), TableFilter([f"{db}.log"]))
                for c in tx.changes()]
    assert only_log == ["log"]
    no_log = {c.table for tx in assemble(read_events(files), TableFilter([f"{db}.*"], ["*.log"]))
              for c in tx.changes()}
    assert no_log == {"orders"}


def test_directory_and_index_expansion(mariadb):
    files = binlog_paths([mariadb.datadir])
    assert [f.name for f in files] == [f.name for f in mariadb.binlog_files()]
    index = next(mariadb.datadir.glob("*.index"))
    assert binlog_paths([index]) == files


def test_stop_position(shop):
    db, files, server = shop
    evs = list(read_events(files[:1]))
    stop = evs[len(evs) // 2].pos
    got = list(read_events(files[:1], stop_position=stop))
    assert got and all(e.pos < stop for e in got) and len(got) == len(evs) // 2


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "cdc", *map(str, args)], capture_output=True,
                          text=True, timeout=120)


def test_cli_jsonl(shop):
    db, files, server = shop
    res = _cli("decode", "--format", "jsonl", "--include-tables", f"{db}.orders", *files)
    assert res.returncode == 0, res.stderr
    lines = [json.loads(l) for l in res.stdout.splitlines()]
    assert [(l["op"], l["key"]) for l in lines] == [
        ("c", {"id": 1}), ("c", {"id": 2}), ("u", {"id": 1}), ("c", {"id": 3}), ("d", {"id": 2})]
    upd = lines[2]
    assert upd["before"] == {"id": 1, "amount": 9.99, "note": "a"}
    assert upd["after"]["amount"] == 10.0
    assert '"amount": 10.00' in res.stdout.splitlines()[2]  # decimals keep every digit
    assert upd["gtid"].startswith(gtid_prefix(server)) and upd["row"] == 0 and lines[3]["row"] == 1
    assert upd["pos"] < upd["end_pos"]


def test_cli_text_matches_the_servers_own_decoder(shop):
    db, files, server = shop
    res = subprocess.run([sys.executable, "-m", "cdc", "decode", *map(str, files)],
                         capture_output=True, timeout=120)
    assert res.returncode == 0, res.stderr
    ours = [l for l in res.stdout.split(b"\n") if l.startswith(b"### ")]
    ref = subprocess.run([*reference_decoder(server), *map(str, files)], capture_output=True,
                         check=True).stdout
    ref = [l.rstrip() for l in ref.split(b"\n") if l.startswith(b"### ")]
    assert [l.rstrip() for l in ours] == ref and len(ref) > 10
    assert b"# at 4\n" in res.stdout


def test_cli_errors_are_one_line(tmp_path):
    res = _cli("decode", tmp_path / "missing.000001")
    assert res.returncode == 2
    assert res.stderr.startswith("binlog-cdc: error: no binlog file at") and "Traceback" not in res.stderr
    bad = tmp_path / "bad.000001"
    bad.write_bytes(b"not a binlog at all")
    res = _cli("decode", bad)
    assert res.returncode == 2 and "not a binlog file" in res.stderr
