"""``binlog-cdc tail`` when its start is wrong or the account lacks a privilege, on MySQL 9.7 and
MariaDB 10.11: one line saying what to do, exit 2, no traceback, and nothing misleading -- no
position it never reached, no resume advice pointing at what the server does not have, the
privilege in the server's own words with the GRANT to run. An empty GTID set is a start too:
from the beginning of what the server has."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from cdc.errors import ConfigurationError
from cdc.positions import Start
from cdc.replica.client import ReplicaClient
from cdc.replica.config import ReplicaConfig
from support.accounts import account, monitor_privilege  # noqa: F401 -- a fixture

pytestmark = [pytest.mark.server, pytest.mark.servers("mysql-9.7", "mariadb-10.11")]

ROOT = Path(__file__).resolve().parents[2]
_server_ids = iter(range(9601, 9700))


def tail(server, *args, user: str | None = None, password: str | None = None):
    """(exit code, the jsonl rows' (op, db.table, after), stderr lines) of ``tail
    --non-blocking``."""
    params = server.cdc_params()
    env = dict(os.environ, BINLOG_CDC_PASSWORD=password or params["password"],
               PYTHONPATH=str(ROOT))
    cmd = [sys.executable, "-m", "cdc", "tail", "--host", params["host"], "--port",
           str(params["port"]), "--user", user or params["user"], "--server-id",
           str(next(_server_ids)), "--non-blocking", "--format", "jsonl", *args]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT, timeout=120)
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    return (r.returncode, [(x["op"], f"{x['db']}.{x['table']}", x["after"]) for x in rows],
            r.stderr.splitlines())


def one_error(rc: int, err: list[str]) -> str:
    assert rc == 2 and len(err) == 1 and err[0].startswith("binlog-cdc: error: "), err
    return err[0]


def test_a_purged_start_file_gives_no_resume_advice(server):
    rc, rows, err = tail(server, "--file", "mysql-bin.000000")
    line = one_error(rc, err)
    assert "mysql-bin.000000" in line and "purged" in line and rows == []


def test_a_gtid_start_the_server_refuses_shows_no_position(server, mariadb_factory):
    if server.FLAVOR == "mysql":     # more transactions of the server than it has executed
        uuid = server.execute("SELECT @@server_uuid")[0][0]
        gtid = f"{uuid}:1-99999999"
    else:                            # a GTID a server with one binlog file never binlogged
        server = mariadb_factory()
        server.execute("CREATE DATABASE g")      # 0-1-1 and no more
        gtid = f"0-{server.server_id}-99999999"
    rc, rows, err = tail(server, "--gtid", gtid)
    line = one_error(rc, err)
    assert "None" not in line and rows == []


def test_a_start_inside_an_event_is_not_an_event_boundary(server):
    file = server.current_position()[0]
    starts = {int(r[1]) for r in server.execute(f"SHOW BINLOG EVENTS IN '{file}'")}
    assert 5 not in starts       # inside the FORMAT_DESCRIPTION event that begins at 4
    rc, rows, err = tail(server, "--file", file, "--pos", "5")
    line = one_error(rc, err)
    assert "not a valid event position" in line, line
    assert "SET GLOBAL max_allowed_packet" not in line


def test_no_position_inside_an_event_passes_for_an_event(server):
    """Whatever the server makes of the bytes at a start inside an event -- an impossible
    length (over max_allowed_packet), a truncated or bogus event, or an 'event' whose checksum
    fails here -- the error says the start is not an event boundary."""
    file = server.current_position()[0]
    events = server.execute(f"SHOW BINLOG EVENTS IN '{file}' LIMIT 4")
    starts = {int(r[1]) for r in events}
    end = int(events[-1][4])
    p = server.cdc_params()
    config = ReplicaConfig(p["host"], p["port"], p["user"], p["password"],
                           server_id=next(_server_ids))
    for pos in [q for q in range(5, end, 3) if q not in starts]:
        client = ReplicaClient(config, start=Start.at(file, pos), blocking=False)
        with pytest.raises(ConfigurationError, match="is not a valid event position"):
            list(client.transactions())


def test_an_empty_gtid_set_starts_at_the_beginning(server, mariadb_factory):
    fresh = mariadb_factory()
    fresh.execute("CREATE DATABASE eg")
    fresh.execute("CREATE TABLE eg.t (id INT PRIMARY KEY, a VARCHAR(10))")
    fresh.execute("INSERT INTO eg.t VALUES (1, 'one'), (2, 'two')")
    fresh.execute("UPDATE eg.t SET a = 'uno' WHERE id = 1")
    rc, rows, err = tail(fresh, "--gtid", "", "--tables", "eg.*")
    assert rc == 0, err
    assert rows == [("c", "eg.t", {"id": 1, "a": "one"}), ("c", "eg.t", {"id": 2, "a": "two"}),
                    ("u", "eg.t", {"id": 1, "a": "uno"})]
    assert rows[-1][2] == dict(zip(("id", "a"), fresh.execute(
        "SELECT id, a FROM eg.t WHERE id = 1")[0]))
    assert tail(fresh, "--from", "earliest", "--tables", "eg.*")[1] == rows


# --- privileges --------------------------------------------------------------------------------


def test_tail_without_the_binlog_monitor_privilege(server, account):
    user = account("cdc_nomon", "REPLICATION SLAVE, SELECT")
    rc, _, err = tail(server, "--from", "latest", user=user, password=f"pw-{user}")
    line = one_error(rc, err)
    words = monitor_privilege(server)
    assert f"lacks {words} on " in line, line
    assert f"GRANT REPLICATION SLAVE, {words}" in line and f"TO '{user}'@'%';" in line


def test_tail_without_replication_slave(server, account):
    user = account("cdc_noslave", f"{monitor_privilege(server)}, SELECT")
    rc, _, err = tail(server, "--from", "latest", user=user, password=f"pw-{user}")
    line = one_error(rc, err)
    assert "lacks REPLICATION SLAVE on " in line
    assert "GRANT REPLICATION SLAVE, " in line and f"TO '{user}'@'%';" in line


def test_tail_without_select_on_a_table_its_binlog_does_not_describe(server, account):
    """Without binlog_row_metadata=FULL a table's columns come from information_schema, which
    hides the tables an account may not read instead of refusing."""
    user = account("cdc_nosel", f"REPLICATION SLAVE, {monitor_privilege(server)}")
    server.execute("CREATE DATABASE IF NOT EXISTS nosel")
    server.execute("CREATE TABLE IF NOT EXISTS nosel.t (id INT PRIMARY KEY, a VARCHAR(10))")
    server.execute("SET GLOBAL binlog_row_metadata = 'MINIMAL'")
    try:
        start = server.current_position()
        server.execute("INSERT INTO nosel.t VALUES (1, 'one')")
    finally:
        server.execute("SET GLOBAL binlog_row_metadata = 'FULL'")
    rc, rows, err = tail(server, "--file", start[0], "--pos", str(start[1]), "--tables",
                         "nosel.*", user=user, password=f"pw-{user}")
    assert err[0] == (f"binlog-cdc tail: warning: --include-tables pattern 'nosel.*' matches no "
                      f"table on 127.0.0.1:{server.port} (yet) that '{user}'@'%' can see")
    line = one_error(rc, err[1:])
    assert "lacks SELECT on nosel.t" in line, line
    assert f"GRANT SELECT ON `nosel`.* TO '{user}'@'%';" in line and rows == []
