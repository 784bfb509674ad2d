"""Faults of the server under a streaming replica client: SIGKILL (a crash, restarted on the
same datadir and port), SIGSTOP/SIGCONT (a server that hangs longer than the client's read
timeout, then wakes up), KILL of the client's dump thread; and a purge while the client is
stopped, which must end in the documented BinlogPurgedError, not in a silent gap."""

from __future__ import annotations

import os
import signal
import time

import pytest

from cdc.errors import BinlogPurgedError
from cdc.positions import Start
from faultkit import (Consumer, Figures, Writer, create_table, expected_changes,  # noqa: F401
                      fault_time_bound, replica_client, run_scenario, server_state)

pytestmark = [pytest.mark.server]


def dump_threads(server, client) -> list[int]:
    """Processlist ids of the client's dump thread (Command 'Binlog Dump', its address)."""
    addr = client.local_address
    if not addr:
        return []
    return [row[0] for row in server.execute("SHOW PROCESSLIST")
            if row[4] == "Binlog Dump" and row[2] == f"{addr[0]}:{addr[1]}"]


@pytest.mark.fault(timeout=180)
@pytest.mark.slow
def test_stream_survives_sigkill_sigstop_and_dump_thread_kills(mariadb_factory):
    server = mariadb_factory()
    port = server.port

    def sigkill(client):
        server.kill()                       # SIGKILL: a crash, no clean shutdown
        time.sleep(1)
        server.start()                      # crash recovery on the same datadir
        assert server.port == port
        return time.monotonic()

    def sigstop(client):
        os.kill(server.pid, signal.SIGSTOP)
        try:
            time.sleep(5)                   # longer than the client's 2 s read timeout
        finally:
            os.kill(server.pid, signal.SIGCONT)
        return time.monotonic()

    def kill_dump_thread(client):
        deadline = time.monotonic() + 20
        while not (ids := dump_threads(server, client)):
            assert time.monotonic() < deadline, "no dump thread of the client to kill"
            time.sleep(0.02)
        server.execute(f"KILL {ids[0]}")
        return time.monotonic()

    figures, client = run_scenario(
        "server-kill-stop", server, "faults", port,
        [kill_dump_thread, sigkill, sigstop, kill_dump_thread, sigkill, sigstop])
    figures.assert_exact()
    assert client.reconnects >= 6


@pytest.mark.fault(timeout=90)
def test_purge_while_stopped_is_the_documented_error(mariadb_factory):
    """A client streams, stops; the binlogs it would resume from are purged; resuming (by file
    position, and by MariaDB GTID position) fails with BinlogPurgedError and the documented
    message -- at once, not after retries."""
    server = mariadb_factory()
    db = "purge"
    port = server.port
    create_table(server, db)
    start_file = Start.at(*server.current_position())
    start_gtid = Start.mariadb_gtid(server.execute("SELECT @@gtid_binlog_pos")[0][0] or "0-1-0")
    writer = Writer(server, db, big_every=0).start()
    time.sleep(1.5)
    writer.stop()
    want = expected_changes(server_state(server, db))

    positions = {}
    figures = Figures("purge-while-stopped", faults=1)
    for mode, start in (("file", start_file), ("gtid", start_gtid)):
        client = replica_client(port, start, db=db, blocking=False)
        consumer = Consumer(client)
        consumer.finish(sum(want.values()), timeout=60)
        figures.tally(want, consumer.received)
        figures.assert_exact()                        # everything so far, once
        positions[mode] = client.position

    Writer(server, db, big_every=0, seed=14).start().stop()  # a little more while stopped
    server.execute(f"INSERT INTO `{db}`.t (pad) VALUES ('after the stop')")
    server.flush_binary_logs()
    server.flush_binary_logs()
    current = server.current_position()[0]
    server.purge_binary_logs(current)

    by_file = positions["file"]
    client = replica_client(port, by_file, db=db)
    t0 = time.monotonic()
    with pytest.raises(BinlogPurgedError) as e:
        list(client.transactions())
    seconds = time.monotonic() - t0
    assert str(e.value) == (
        f"binlog file {by_file.file} is no longer on 127.0.0.1:{port} (it has {current} .. "
        f"{current}): it was purged, or never existed, so the changes in it are lost to this "
        f"stream. Start from 'earliest' or from a GTID position the server still has")
    assert client.reconnects == 0 and client.dump_thread_starts == 0

    by_gtid = positions["gtid"]
    client = replica_client(port, by_gtid, db=db)
    with pytest.raises(BinlogPurgedError) as e:
        list(client.transactions())
    seconds = max(seconds, time.monotonic() - t0)
    head = (f"the binlog the replica needs for MariaDB GTID position '{by_gtid.mariadb_gtid}' is "
            f"no longer on the server (127.0.0.1:{port}): it was purged (or never existed). "
            f"Restart from a position the server still has (start='earliest', or a fresh "
            f"snapshot) [server error 1236: ")
    assert str(e.value).startswith(head), str(e.value)
    assert "purged" in str(e.value)[len(head):]      # the server's own words follow
    assert client.reconnects == 0
    assert seconds < 10
    figures.extra.update(error="BinlogPurgedError", error_after_s=f"{seconds:.1f}")
    figures.report()
