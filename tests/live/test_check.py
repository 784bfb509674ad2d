"""``binlog-cdc check`` against real servers: a well-configured one (every line PASS, exit 0) and
misconfigured ones (STATEMENT format, an account without privileges, a typo in the tables, a
table without primary key, binlogs kept for less than a snapshot batch or the whole snapshot
takes), each line asserted
against what the server itself says."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import datetime

import pytest

pytestmark = pytest.mark.servers("mariadb-10.11", "mysql-9.7")

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def check(server, *args: str, user: str = "cdc", password: str = "cdc-secret"):
    """``binlog-cdc check`` on *server*: (exit status, {check name: (status, message)}, stdout)."""
    env = dict(os.environ, BINLOG_CDC_PASSWORD=password, PYTHONPATH=_ROOT)
    r = subprocess.run([sys.executable, "-m", "cdc", "check", "--host", "127.0.0.1", "--port",
                        str(server.port), "--user", user, *args], env=env, cwd=_ROOT,
                       capture_output=True, text=True, timeout=120)
    assert "Traceback" not in r.stderr, r.stderr
    lines = {}
    for line in r.stdout.splitlines():
        status, rest = line.split("  ", 1)
        name, _, message = rest.partition("  ")
        lines[name.strip()] = (status, message.strip())
    return r.returncode, lines, r.stdout


def one(server, sql: str):
    return server.execute(sql)[0][0]


def oldest_binlog(server) -> tuple[str, str]:
    """The server's oldest binlog file and the time of its first event, as the server's own
    mysqlbinlog / mariadb-binlog prints it (in UTC)."""
    oldest = str(server.execute("SHOW BINARY LOGS")[0][0])
    tool = server.program("mariadb-binlog" if server.FLAVOR == "mariadb" else "mysqlbinlog")
    out = subprocess.run([tool, "--no-defaults", str(server.log_bin_path.parent / oldest)],
                         env=dict(os.environ, TZ="UTC"), capture_output=True, text=True,
                         check=True, timeout=60).stdout
    m = re.search(r"^#(\d{6})\s+(\d{1,2}:\d\d:\d\d) server id", out, re.M)
    assert m, out[:2000]
    at = datetime.strptime(f"{m.group(1)} {m.group(2)}", "%y%m%d %H:%M:%S")
    return oldest, at.strftime("%Y-%m-%d %H:%M:%S UTC")


def keyed_db(server, name: str) -> None:
    server.execute(f"DROP DATABASE IF EXISTS {name}")
    server.execute(f"CREATE DATABASE {name}")
    server.execute(f"CREATE TABLE {name}.orders (id INT PRIMARY KEY, total DECIMAL(10,2))")
    server.execute(f"CREATE TABLE {name}.users (id INT PRIMARY KEY, name VARCHAR(40))")


def test_a_well_configured_server_passes_every_check(server):
    keyed_db(server, "chk_ok")
    rc, lines, out = check(server, "--tables", "chk_ok.*", "--snapshot", "--upsert")
    assert rc == 0, out
    assert [s for s, _m in lines.values()] == ["PASS"] * len(lines), out
    assert list(lines) == ["connection", "tls", "log_bin", "binlog_format", "binlog_row_image",
                           "binlog_row_metadata", "gtid", "privileges", "tables",
                           "privileges (snapshot)", "keys", "retention"]
    version = one(server, "SELECT VERSION()").split("-")[0]
    flavor = "MariaDB" if server.FLAVOR == "mariadb" else "MySQL"
    assert lines["connection"][1] == \
        f"connected to 127.0.0.1:{server.port} ({flavor} {version}) as 'cdc'@'%'"
    cipher = server.execute("SHOW GLOBAL STATUS LIKE 'Ssl_cipher'")   # the server's own TLS?
    assert lines["tls"][1].startswith("encrypted (") or lines["tls"][1].startswith(
        "not encrypted"), cipher
    assert lines["binlog_format"][1] == f"binlog_format is {one(server, 'SELECT @@binlog_format')}"
    assert lines["binlog_row_image"][1] == "binlog_row_image is FULL"
    assert lines["binlog_row_metadata"][1] == "binlog_row_metadata is FULL"
    assert lines["gtid"][1] == ("MariaDB GTIDs (domain-server-sequence) are available"
                                if server.FLAVOR == "mariadb" else "gtid_mode is ON")
    assert lines["privileges"][1] == "'cdc'@'%' may read the binlog (replication privileges)"
    assert lines["tables"][1] == "--include-tables matches 2 table(s): chk_ok.orders, chk_ok.users"
    assert lines["privileges (snapshot)"][1] == "'cdc'@'%' may read the 2 captured table(s)"
    assert lines["keys"][1] == "every captured table has a primary key"
    expire = int(one(server, "SELECT @@binlog_expire_logs_seconds"))
    if expire:
        assert lines["retention"][1].startswith(
            f"binlogs are kept for {expire // 86400} days (binlog_expire_logs_seconds={expire}); "
            f"the initial snapshot takes about 0 s (")
    else:
        assert lines["retention"][1].startswith("binlogs are kept until purged by hand")
    oldest, began = oldest_binlog(server)
    assert f"; the oldest binlog, {oldest}, begins at {began} (" in lines["retention"][1], out
    server.execute("DROP DATABASE chk_ok")


def test_a_misconfigured_server_fails_each_check(server, mariadb_factory):
    """(server: runs the test once per server kind, on a new server of that kind)"""
    server = mariadb_factory()
    keyed_db(server, "shop")
    server.execute("CREATE TABLE shop.audit (at DATETIME, what TEXT)")           # no key
    # a table large enough that a snapshot at 100 rows/s outlasts 60 s of binlog retention
    server.execute("CREATE TABLE shop.big (id INT PRIMARY KEY)")
    server.execute("CREATE TABLE shop.d (n INT)")
    server.execute("INSERT INTO shop.d VALUES (0),(1),(2),(3),(4),(5),(6),(7),(8),(9)")
    server.execute("INSERT INTO shop.big SELECT a.n + 10*b.n + 100*c.n + 1000*e.n FROM shop.d a, "
                   "shop.d b, shop.d c, shop.d e")
    server.execute("DROP TABLE shop.d")
    server.execute("ANALYZE TABLE shop.big")
    server.execute("SET GLOBAL binlog_format = 'STATEMENT'")
    server.execute("SET GLOBAL binlog_expire_logs_seconds = 60")
    server.execute("CREATE USER 'nopriv'@'%' IDENTIFIED BY 'pw'")

    rc, lines, out = check(server, "--tables", "shop.*", "--snapshot", "--upsert",
                           "--snapshot-rate", "100")
    assert rc == 2, out
    assert lines["binlog_format"] == ("FAIL", (
        f"binlog_format is STATEMENT on 127.0.0.1:{server.port}; row-based CDC needs ROW: run "
        f"SET GLOBAL binlog_format = 'ROW' (affects new sessions) and put binlog_format=ROW in "
        f"the [mysqld] section of my.cnf"))
    assert lines["keys"] == ("FAIL", (
        "shop.audit has no primary key, which a sink that upserts needs to match changes to "
        "rows: add one (ALTER TABLE ... ADD PRIMARY KEY), or leave the table out with "
        "excludeTables"))
    rows = sum(int(r[0] or 0) for r in server.execute(
        "SELECT TABLE_ROWS FROM information_schema.TABLES WHERE TABLE_SCHEMA = 'shop'"))
    assert rows >= 5000
    assert lines["retention"][0] == "FAIL"
    assert lines["retention"][1].startswith(
        f"binlogs are kept for 1 min (binlog_expire_logs_seconds=60) on 127.0.0.1:{server.port}"
        f", less than the initial snapshot's estimated ")
    assert f"({rows:,} rows at 100 rows/s): the binlog from the snapshot's start would be " \
        f"purged before the stream reads it; raise it" in lines["retention"][1]
    assert lines["tables"][0] == "PASS" and lines["privileges"][0] == "PASS"
    # snapshot batches of 1,000 rows (10 s) fit the retention; the whole snapshot does not
    rc, lines, out = check(server, "--tables", "shop.*", "--snapshot", "--snapshot-rate", "100",
                           "--snapshot-batch-rows", "1000")
    assert lines["retention"][0] == "WARN", out
    assert lines["retention"][1].startswith(
        "binlogs are kept for 1 min (binlog_expire_logs_seconds=60), less than the initial "
        "snapshot's estimated ")
    assert (
        f"({rows:,} rows at 100 rows/s): nothing is lost while the query runs (each snapshot "
        f"batch reads the binlog along, 1,000 rows), but a query stopped during the snapshot "
        f"for longer than the retention resumes only with onDataLoss=resnapshot (or a new "
        f"snapshot); the oldest binlog") in lines["retention"][1]

    # the plain stream: a keyless table is a warning; a typo in a name is a FAIL
    rc, lines, out = check(server, "--tables", "shop.ordres,shop.audit,shop.x*")
    assert rc == 2, out
    assert lines["keys"] == ("WARN", (
        "shop.audit has no primary key: its changes carry no key, and a snapshot reads it in one "
        "chunk (add a primary key, or name key columns with snapshotKeys)"))
    statuses = [l for l in out.splitlines() if " tables " in f" {l.split('  ')[1]} "]
    assert statuses == [
        "PASS  tables                 --include-tables matches 1 table(s): shop.audit",
        f"FAIL  tables                 --include-tables names shop.ordres, which 127.0.0.1:"
        f"{server.port} does not have (did you mean shop.orders?), or 'cdc'@'%' cannot see it "
        f"(no privilege on it): fix the name, or GRANT SELECT ON shop.ordres TO 'cdc'@'%'",
        f"WARN  tables                 --include-tables pattern 'shop.x*' matches no table on "
        f"127.0.0.1:{server.port} (yet) that 'cdc'@'%' can see"]
    assert lines["retention"][0] == "PASS" and lines["retention"][1].startswith(
        "binlogs are kept for 1 min (binlog_expire_logs_seconds=60): a stream stopped for longer "
        "must start over; the oldest binlog, ")

    # an account without privileges
    rc, lines, out = check(server, "--tables", "shop.orders", "--snapshot", user="nopriv",
                           password="pw")
    assert rc == 2, out
    grant = ("GRANT REPLICATION SLAVE, BINLOG MONITOR, REPLICATION MASTER ADMIN ON *.* TO "
             "'nopriv'@'%';" if server.FLAVOR == "mariadb" else
             "GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'nopriv'@'%';")
    monitor = "BINLOG MONITOR" if server.FLAVOR == "mariadb" else "REPLICATION CLIENT"
    assert lines["privileges"] == ("FAIL", (
        f"user 'nopriv' ('nopriv'@'%') lacks REPLICATION SLAVE and {monitor} on "
        f"127.0.0.1:{server.port}, which a replica needs to read the binlog. Run as an "
        f"administrator: {grant}"))
    assert lines["tables"][0] == "FAIL" and "'nopriv'@'%' cannot see it" in lines["tables"][1]
    assert lines["privileges (snapshot)"] == ("WARN", (
        "'nopriv'@'%' sees no table to snapshot; it needs SELECT on the captured tables: GRANT "
        "SELECT ON `shop`.* TO 'nopriv'@'%'"))

    # a wrong password: the connection line alone
    rc, lines, out = check(server, password="wrong")
    assert rc == 2 and list(lines) == ["connection"] and lines["connection"][0] == "FAIL", out
    assert "refused user 'cdc'" in lines["connection"][1]


def test_binlogs_purged_sooner_than_the_snapshot_takes(server, mariadb_factory):
    """The setting keeps binlogs for days, but files were purged minutes ago (by hand, by a job,
    by a size limit): the retention check reads when the oldest binlog begins."""
    server = mariadb_factory()
    keyed_db(server, "shop")
    server.execute("INSERT INTO shop.orders VALUES (1, 1), (2, 2), (3, 3)")
    server.execute("FLUSH BINARY LOGS")
    server.execute("FLUSH BINARY LOGS")
    newest = str(server.execute("SHOW BINARY LOGS")[-1][0])
    server.purge_binary_logs(newest)
    server.execute("SET GLOBAL binlog_expire_logs_seconds = 864000")
    server.execute("ANALYZE TABLE shop.orders")
    rc, lines, out = check(server, "--tables", "shop.*", "--snapshot", "--snapshot-rate",
                           "0.01")
    oldest, began = oldest_binlog(server)
    assert oldest == newest
    status, message = lines["retention"]
    assert rc == 0 and status == "WARN", out
    assert message.startswith(f"the oldest binlog, {oldest}, begins at {began} ("), message
    assert "binlogs before it were purged sooner than the initial snapshot's estimated 5 min " \
        "(3 rows at 0.01 rows/s) takes, although the setting keeps them for 10 days (binlog_expire_" \
        "logs_seconds=864000): stop what purges them early (PURGE BINARY LOGS run by hand or " \
        "by a job, a binlog size limit) while the snapshot runs" in message, message
