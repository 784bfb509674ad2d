"""A first connection that is refused (nothing listens on the port) or whose host name does not
resolve fails at once, with the reason: retrying cannot help, and a user who mistyped the port
or the host waited 17 s (``tail``) or 27 s (the Spark source) for the error. Connections lost
after a first success are still retried (tests/faults)."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from cdc.errors import ServerConnectionError
from cdc.replica.client import ReplicaClient
from cdc.replica.config import ReplicaConfig

from support import processes

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
UNKNOWN_HOST = "nosuch-host.invalid"        # RFC 2606: never resolves
REFUSED = "Connection refused"
UNRESOLVED = "Name or service not known"


@pytest.fixture
def closed_port() -> int:
    """A port on 127.0.0.1 where nothing listens (connections are refused)."""
    return processes.closed_port()


def _tail(host: str, port: int):
    env = dict(os.environ, BINLOG_CDC_PASSWORD="x", PYTHONPATH=_ROOT)
    t = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "cdc", "tail", "--host", host, "--port", str(port),
                        "--user", "cdc", "--non-blocking"], env=env, cwd=_ROOT,
                       capture_output=True, text=True, timeout=120)
    return r, time.monotonic() - t


def test_tail_to_a_closed_port_fails_at_once(closed_port):
    r, took = _tail("127.0.0.1", closed_port)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert f"cannot connect to 127.0.0.1:{closed_port}" in r.stderr and REFUSED in r.stderr
    assert took < 2, f"took {took:.1f} s"       # 17.2 s before


def test_tail_to_an_unknown_host_fails_at_once():
    r, took = _tail(UNKNOWN_HOST, 3306)
    assert r.returncode == 2 and "Traceback" not in r.stderr, r.stderr
    assert f"cannot connect to {UNKNOWN_HOST}:3306" in r.stderr and UNRESOLVED in r.stderr
    assert took < 2, f"took {took:.1f} s"       # 17 s before


@pytest.mark.parametrize("host", ["127.0.0.1", UNKNOWN_HOST])
def test_replica_client_first_connect_fails_at_once(host, closed_port):
    client = ReplicaClient(ReplicaConfig(host, closed_port, "cdc", "x"), blocking=False)
    t = time.monotonic()
    with pytest.raises(ServerConnectionError) as e:
        list(client.transactions())
    assert time.monotonic() - t < 2
    assert (REFUSED if host == "127.0.0.1" else UNRESOLVED) in str(e.value)
    assert f"cannot connect to {host}:{closed_port}" in str(e.value)


@pytest.mark.parametrize("host", ["127.0.0.1", UNKNOWN_HOST])
def test_spark_source_fails_at_once(host, closed_port):
    pytest.importorskip("pyspark")
    from streaming.source.datasource import BinlogCdcDataSource
    from streaming.contract.spark_schema import JSON_SCHEMA
    source = BinlogCdcDataSource({"host": host, "port": str(closed_port), "user": "cdc",
                                  "password": "x"})
    reader = source.streamReader(JSON_SCHEMA)
    t = time.monotonic()
    with pytest.raises(ServerConnectionError) as e:
        reader.initialOffset()
    assert time.monotonic() - t < 2             # 27.6 s before
    assert (REFUSED if host == "127.0.0.1" else UNRESOLVED) in str(e.value)


def test_tail_of_a_table_the_server_does_not_have_fails(mariadb, db):
    mariadb.execute(f"CREATE TABLE {db}.orders (id INT PRIMARY KEY)")
    env = dict(os.environ, BINLOG_CDC_PASSWORD="cdc-secret", PYTHONPATH=_ROOT)
    r = subprocess.run([sys.executable, "-m", "cdc", "tail", "--host", "127.0.0.1", "--port",
                        str(mariadb.port), "--user", "cdc", "--non-blocking", "--tables",
                        f"{db}.ordres,{db}.x*"], env=env, cwd=_ROOT, capture_output=True,
                       text=True, timeout=120)
    assert r.returncode == 2 and r.stdout == "", r.stderr       # rc 0 and nothing before
    assert r.stderr == (
        f"binlog-cdc: error: --include-tables names {db}.ordres, which 127.0.0.1:{mariadb.port} "
        f"does not have (did you mean {db}.orders?), or 'cdc'@'%' cannot see it (no privilege "
        f"on it): fix the name, or GRANT SELECT ON {db}.ordres TO 'cdc'@'%'\n")
