"""Faults of the network between a replica client and its server, injected by a loopback relay
(tests/support/relay.py): frozen connections (silent, still open: the client must notice by its
read timeout), cut connections (reset), and partitions (blackholed or refused for seconds).
Each test streams a table a writer keeps changing and ends with every change of the server's
final state received exactly once, and prints its figures line."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time

import pytest

from faultkit import fault_time_bound, run_scenario  # noqa: F401 (autouse fixture)
from support.relay import Relay

pytestmark = [pytest.mark.server]


# --- the relay itself -----------------------------------------------------------------------


@pytest.fixture
def echo_port():
    """A loopback echo server (each connection echoes what it receives)."""
    srv = socket.create_server(("127.0.0.1", 0))
    srv.settimeout(0.1)
    stop = threading.Event()

    def serve(conn):
        with conn:
            try:
                while data := conn.recv(4096):
                    conn.sendall(data)
            except OSError:
                pass

    def accept():
        while not stop.is_set():
            try:
                conn, _ = srv.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            threading.Thread(target=serve, args=(conn,), daemon=True).start()

    t = threading.Thread(target=accept, daemon=True)
    t.start()
    yield srv.getsockname()[1]
    stop.set()
    t.join(2)
    srv.close()


def _echo(sock, data: bytes) -> bytes:
    sock.sendall(data)
    return sock.recv(100)


@pytest.mark.fault(timeout=30)
def test_the_relay_freezes_cuts_and_partitions(echo_port):
    with Relay(echo_port) as relay:
        a = socket.create_connection(("127.0.0.1", relay.port), timeout=2)
        a.settimeout(0.5)
        assert _echo(a, b"one") == b"one"
        relay.freeze()                                   # silent, but open
        a.sendall(b"held")
        with pytest.raises(socket.timeout):
            a.recv(100)
        late = socket.create_connection(("127.0.0.1", relay.port), timeout=2)   # accepted...
        late.settimeout(0.3)
        late.sendall(b"late")
        with pytest.raises(socket.timeout):                                      # ...but silent
            late.recv(100)
        relay.thaw()
        a.settimeout(2)
        late.settimeout(2)
        assert a.recv(100) == b"held" and late.recv(100) == b"late"   # held bytes delivered
        assert relay.cut() == 2                                       # both reset
        with pytest.raises(ConnectionResetError):
            a.recv(100)
        b = socket.create_connection(("127.0.0.1", relay.port), timeout=2)
        b.settimeout(2)
        assert _echo(b, b"two") == b"two"                            # new ones work at once
        relay.partition(0.8, mode="refuse")
        with pytest.raises(ConnectionResetError):
            b.recv(100)                                              # current ones reset
        with pytest.raises((ConnectionResetError, BrokenPipeError)):  # new ones refused
            c = socket.create_connection(("127.0.0.1", relay.port), timeout=2)
            c.settimeout(2)
            _echo(c, b"refused")
        time.sleep(1.0)                                              # healed by itself
        d = socket.create_connection(("127.0.0.1", relay.port), timeout=2)
        d.settimeout(2)
        assert _echo(d, b"healed") == b"healed"
        relay.partition(0.8)                                         # blackhole
        d.sendall(b"dropped?")
        d.settimeout(0.4)
        with pytest.raises(socket.timeout):
            d.recv(100)
        d.settimeout(2)
        assert d.recv(100) == b"dropped?"                            # delivered when healed
        # armed faults strike after so many bytes towards the client, mid-read
        relay.freeze(after_bytes=3)
        d.sendall(b"abcdef")
        assert relay.wait_fired(2) and relay.frozen
        assert d.recv(100) == b"abc"
        relay.thaw()
        assert d.recv(100) == b"def"
        relay.cut(after_bytes=2)
        d.sendall(b"xyz")
        assert relay.wait_fired(2)
        assert d.recv(100) == b"xy"
        with pytest.raises(ConnectionResetError):
            d.recv(100)
        assert (relay.accepted, relay.refused, relay.cuts, relay.freezes, relay.partitions) \
            == (4, 1, 4, 3, 2)
        for s in (a, b, d, late):
            s.close()
    assert relay.open_connections() == 0


# --- a replica client through the relay ----------------------------------------------------------


@pytest.mark.fault(timeout=120)
@pytest.mark.slow
def test_replica_client_rides_out_frozen_connections(mariadb, db, caplog):
    """Three 4 s freezes, each longer than the client's 2 s read timeout: the client must
    declare the silent connection dead and reconnect (its new connection is frozen too until
    the thaw)."""
    with Relay(mariadb.port) as relay:
        def freeze(client):
            relay.freeze(after_bytes=20_000)     # most likely inside a packet/transaction
            assert relay.wait_fired(30)
            time.sleep(4)
            relay.thaw()
            return time.monotonic()

        with caplog.at_level(logging.WARNING, logger="cdc.replica"):
            figures, client = run_scenario("relay-freeze", mariadb, db, relay.port,
                                           [freeze] * 3)
    figures.assert_exact()
    assert client.reconnects >= 3
    assert caplog.text.count("nothing (not even a heartbeat) from the source") >= 3


@pytest.mark.fault(timeout=90)
def test_replica_client_rides_out_cut_connections(mariadb, db):
    """Five resets of the replication connection while a writer writes."""
    with Relay(mariadb.port) as relay:
        def reset(client):
            cuts = relay.cuts
            relay.cut(after_bytes=20_000)        # most likely inside a packet/transaction
            assert relay.wait_fired(30) and relay.cuts > cuts
            return time.monotonic()

        figures, client = run_scenario("relay-cut", mariadb, db, relay.port, [reset] * 5,
                                       settle=0.7)
    figures.assert_exact()
    assert client.reconnects >= 5


#: The blackhole partition's length: 10 s in the default suite, ``CDC_FAULT_PARTITION_S=30``
#: for the issue's 30 s.
PARTITION_S = float(os.environ.get("CDC_FAULT_PARTITION_S", "10"))


@pytest.mark.fault(timeout=150 + 2 * PARTITION_S)
@pytest.mark.slow
def test_replica_client_rides_out_partitions(mariadb, db):
    """A 10 s blackhole partition (nothing flows, new connections hang; see PARTITION_S) and a
    5 s refusing one (connections reset, new ones refused)."""
    with Relay(mariadb.port) as relay:
        def partition(seconds, mode):
            def inject(client):
                relay.partition(seconds, mode=mode)
                time.sleep(seconds)
                while relay.partitioned:
                    time.sleep(0.01)
                return time.monotonic()
            return inject

        figures, client = run_scenario("relay-partition", mariadb, db, relay.port,
                                       [partition(PARTITION_S, "blackhole"),
                                        partition(5, "refuse")])
        refused = relay.refused
    figures.extra.update(refused_connections=refused)
    figures.assert_exact()
    assert client.reconnects >= 2 and refused >= 1
