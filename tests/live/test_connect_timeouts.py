"""connect_timeout bounds the whole handshake of a SQL connection (the server's greeting, TLS,
the login), not only the TCP connect: something that accepts connections on the port but never
speaks (not a MySQL server, a frozen one) failed only after PyMySQL's 30 s read timeout --
``tail --connect-timeout 2`` took 30-60 s to say it cannot connect. Statements on the connection
still get at least 30 s."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from cdc.errors import TransientServerError
from cdc.replica.config import ReplicaConfig
from cdc.replica.sql import connect, fetch_rows

_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def silent_port():
    """A port on 127.0.0.1 that accepts connections and never sends a byte."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                continue
    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield srv.getsockname()[1]
    stop.set()
    t.join(5)
    for c in held:
        c.close()
    srv.close()


def test_a_silent_port_fails_within_connect_timeout(silent_port):
    t = time.monotonic()
    with pytest.raises(TransientServerError):
        connect(ReplicaConfig("127.0.0.1", silent_port, "cdc", "x", connect_timeout=1.0))
    assert time.monotonic() - t < 5


def test_tail_to_a_silent_port_gives_up_within_its_connect_timeout(silent_port):
    env = dict(os.environ, BINLOG_CDC_PASSWORD="x", PYTHONPATH=_ROOT)
    t = time.monotonic()
    r = subprocess.run([sys.executable, "-m", "cdc", "tail", "--host", "127.0.0.1", "--port",
                        str(silent_port), "--user", "cdc", "--non-blocking",
                        "--connect-timeout", "2"], env=env, cwd=_ROOT, capture_output=True,
                       text=True, timeout=120)
    took = time.monotonic() - t
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "cannot connect to 127.0.0.1" in r.stderr
    assert took < 20, f"took {took:.1f} s"       # 30-60 s before


@pytest.mark.server
def test_statements_still_get_more_than_connect_timeout(mariadb):
    p = mariadb.cdc_params()
    conn = connect(ReplicaConfig(p["host"], p["port"], p["user"], p["password"],
                                 connect_timeout=1.0))
    try:
        assert fetch_rows(conn, "SELECT SLEEP(2), 7") == [(0, 7)]
    finally:
        conn.close()
