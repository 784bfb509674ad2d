"""The replica client end to end: against the in-test fake MySQL 8.4 source (byte-exact events,
GTID dump, scripted connection cuts and errors) and against real MariaDB servers (rotations,
killed dump threads, a restart, purged binlogs, heartbeats, TLS, big transactions and events,
pre-flight errors, the ``tail`` command).

``CDC_TEST_CHANGES`` scales the big streams (default 100000 row changes).
"""

from __future__ import annotations

import json
import logging
import os
import signal
import ssl
import subprocess
import sys
import threading
import time
from collections import Counter

import pytest

from cdc.embedded import EmbeddedMariaDB
from cdc.errors import (AuthenticationError, BinlogPurgedError, ConfigurationError,
                        PrivilegeError, ServerConfigError, ServerConnectionError,
                        ServerIdConflictError)
from cdc.binlog.gtid import GtidSet
from cdc.positions import Start
from cdc.replica.client import ReplicaClient
from cdc.replica.config import ReplicaConfig, RetryPolicy
from support.fake_source import BinlogFile, EventBuilder, FakeSource, Plan, Table
from support.tls import make_tls_files
from conftest import gtid_prefix, start_or_skip
from cdc.embedded import embedded_server

# the live tests run on MariaDB 10.11, MariaDB 11.8 and MySQL 9.7 (those that use `server`)
pytestmark = pytest.mark.servers

N_CHANGES = int(os.environ.get("CDC_TEST_CHANGES", "100000"))
FAST_RETRY = RetryPolicy(max_attempts=30, max_time=60, initial_backoff=0.1, max_backoff=1.0,
                         jitter=0.1)
_server_ids = iter(range(5001, 6000))


def next_server_id() -> int:
    return next(_server_ids)


# ===================================================================================================
# The fake MySQL 8.4 source
# ===================================================================================================

B = EventBuilder()
T = Table()
U = B.uuid
ROWS = {11: [(1, "apple"), (2, None)], 12: [(3, "pear"), (4, "kiwi ü")], 13: [(5, "fig")]}


def fake_binlog() -> BinlogFile:
    return BinlogFile.build(
        "binlog.000001", [B.fde(), B.previous_gtids(f"{U}:1-10")],
        [(f"{U}:{gno}", B.transaction(gno, T, rows, 500 + gno)) for gno, rows in ROWS.items()])


def make_client(host, port, user, password, *, start="latest", blocking=True,
                **config) -> ReplicaClient:
    """A client with one ReplicaConfig of the connection settings in *config*."""
    return ReplicaClient(ReplicaConfig(host, port, user, password, **config), start=start,
                         blocking=blocking)


def fake_client(src: FakeSource, **kw) -> ReplicaClient:
    kw.setdefault("start", Start.gtid_set(f"{U}:1-10"))
    kw.setdefault("blocking", False)
    kw.setdefault("retry", FAST_RETRY)
    kw.setdefault("password", "s3cret")
    password = kw.pop("password")
    return make_client("127.0.0.1", src.port, "cdc", password, server_id=4242, **kw)


def test_fake_source_gtid_dump_end_to_end():
    binlog = fake_binlog()
    with FakeSource(binlog) as src:
        client = fake_client(src, heartbeat_interval=2.5)
        txs = list(client.transactions())
    # exactly the rows built into the events, with their GTIDs, in order
    assert [tx.gtid for tx in txs] == [f"{U}:11", f"{U}:12", f"{U}:13"]
    assert [[(c.op, c.schema, c.table, c.before, c.after) for c in tx.changes()] for tx in txs] \
        == [[("c", "shop", "items", None, r) for r in rows] for rows in ROWS.values()]
    assert txs[0].changes().__next__().key() == {"id": 1}
    assert [tx.xid for tx in txs] == [511, 512, 513]
    # transaction positions are real file offsets: each starts where the previous one ended
    hdr_end = 4 + sum(map(len, binlog.header))
    assert txs[0].pos == hdr_end and txs[1].pos == txs[0].end_pos and txs[2].pos == txs[1].end_pos
    assert client.position.gtid_set == GtidSet.parse(f"{U}:1-13")
    assert (client.position.file, client.position.pos) == ("binlog.000001", txs[2].end_pos)
    assert client.lag_seconds == 0.0   # EOF: the source had nothing more

    # what the client said: the negotiation and one COM_BINLOG_DUMP_GTID, byte for byte
    q = src.got.queries
    assert "SET @master_binlog_checksum = @@global.binlog_checksum" in q
    assert "SET @source_binlog_checksum = @@global.binlog_checksum" in q   # 8.0.26+
    assert "SET @master_heartbeat_period = 2500000000" in q                # nanoseconds
    assert "SHOW REPLICAS" in q                                             # 8.0.22+ syntax
    assert src.got.register == [bytes.fromhex("15" "92100000") + bytes((len(
        client.config.replica_host),)) + client.config.replica_host.encode() + bytes.fromhex(
        "00" "00" "0000" "00000000" "00000000")]
    assert src.got.dumps == [bytes.fromhex(
        "1e" "0500" "92100000"      # COM_BINLOG_DUMP_GTID, NON_BLOCK|THROUGH_GTID, server 4242
        "00000000"                  # no file name
        "0400000000000000"          # position 4
        "30000000"                  # 48 bytes of GTID data:
        "0100000000000000"          #   1 SID
        "3e11fa4771ca11e19e33c80aa9429562"
        "0100000000000000"          #   1 interval
        "0100000000000000" "0b00000000000000")]   # [1, 11) = 1-10


def test_fake_source_resume_after_a_cut_mid_transaction_redelivers_nothing():
    binlog = fake_binlog()
    # first connection: rotate, FDE, PREVIOUS_GTIDS, all 5 events of :11, 2 events of :12, cut
    with FakeSource(binlog, plans=[Plan(cut_after_events=3 + 5 + 2)]) as src:
        client = fake_client(src)
        txs = list(client.transactions())
    assert [tx.gtid for tx in txs] == [f"{U}:11", f"{U}:12", f"{U}:13"]
    assert client.reconnects == 1 and src.connections == 2
    # the second dump asked for everything after 1-11
    have, _ = GtidSet.from_bytes(src.got.dumps[1], 23)
    assert have == GtidSet.parse(f"{U}:1-11")
    assert sum(len(list(tx.changes())) for tx in txs) == 5


def test_fake_source_gone_for_good_raises_after_the_retry_budget(caplog):
    binlog = fake_binlog()
    with FakeSource(binlog, plans=[Plan(cut_after_events=3 + 5)]) as src:
        client = fake_client(src, retry=RetryPolicy(max_attempts=3, max_time=30,
                                                    initial_backoff=0.05, max_backoff=0.1,
                                                    jitter=0.0))
        got = []
        with caplog.at_level(logging.WARNING, logger="cdc.replica.client"):
            with pytest.raises(ServerConnectionError, match=r"after 3 attempt\(s\)"):
                for tx in client.transactions():
                    got.append(tx.gtid)
                    src.stop_listening()     # the server disappears for good
    assert got == [f"{U}:11"]
    assert "lost" in caplog.text and "retrying" in caplog.text   # WARNINGs name the cause


def test_fake_source_silent_connection_is_detected_and_replaced(caplog):
    """No event and no heartbeat for read_timeout seconds: the connection is presumed dead."""
    with FakeSource(fake_binlog(), plans=[Plan(hang_after_events=3 + 5 + 1)]) as src:
        client = fake_client(src, blocking=True, heartbeat_interval=0.2, read_timeout=0.6)
        got = []
        t0 = time.monotonic()
        with caplog.at_level(logging.WARNING, logger="cdc.replica.client"):
            for tx in client.transactions():
                got.append(tx.gtid)
                if len(got) == 3:
                    client.close()
    assert got == [f"{U}:11", f"{U}:12", f"{U}:13"]
    assert client.reconnects == 1 and client.partial_transactions_dropped == 1
    assert "nothing (not even a heartbeat) from the source" in caplog.text
    assert "read again" in caplog.text
    assert 0.6 <= time.monotonic() - t0 < 5


def test_fake_source_wrong_password_names_the_user():
    with FakeSource(fake_binlog()) as src:
        with pytest.raises(AuthenticationError, match="user 'cdc'") as e:
            list(fake_client(src, password="wrong").transactions())
    assert "1045" in str(e.value) and src.connections == 1   # not retried


@pytest.mark.parametrize("variables, plan, grants, error, text", [
    ({"binlog_format": "STATEMENT"}, None, None, ServerConfigError,
     "SET GLOBAL binlog_format = 'ROW'"),
    ({"log_bin": "OFF"}, None, None, ServerConfigError, "binary logging is off"),
    ({"gtid_mode": "OFF"}, None, None, ServerConfigError, "gtid_mode=ON"),
    ({"gtid_purged": f"{U}:1-20"}, None, None, BinlogPurgedError, f"{U}:11-20"),
    ({}, Plan(dump_error=(1236, "Cannot replicate because the source purged required binary "
                                "logs. ... and the missing transactions are "
                                f"'{U}:11-12'")), None, BinlogPurgedError, f"{U}:11-12"),
    ({}, None, ["GRANT SELECT ON *.* TO `cdc`@`%`"], PrivilegeError,
     "GRANT REPLICATION SLAVE, REPLICATION CLIENT ON *.* TO 'cdc'@'%';"),
    ({"server_id": "4242"}, None, None, ServerIdConflictError, "source's own server_id"),
])
def test_fake_source_preflight_errors(variables, plan, grants, error, text):
    with FakeSource(fake_binlog(), variables=variables, plans=[plan] if plan else None,
                    grants=grants) as src:
        with pytest.raises(error) as e:
            list(fake_client(src).transactions())
    assert text in str(e.value)
    assert src.connections == 1   # configuration errors are not retried


def test_fake_source_file_start_is_checked_against_show_binary_logs():
    with FakeSource(fake_binlog()) as src:
        with pytest.raises(BinlogPurgedError,
                           match=r"binlog file binlog\.000000 is no longer on .* binlog\.000001"):
            list(fake_client(src, start=Start.at("binlog.000000", 4)).transactions())


# ===================================================================================================
# Real MariaDB
# ===================================================================================================


class Workload:
    """Writes inserts/updates/deletes and keeps the multiset of row changes they must produce:
    ``(op, id, before, after)`` with before/after as ``(id, n, s)``."""

    def __init__(self, server, db: str, table: str = "t"):
        self.server, self.db, self.table = server, db, table
        self.conn = server.connect(database=db)
        self.cur = self.conn.cursor()
        self.cur.execute(f"CREATE TABLE `{table}` (id INT PRIMARY KEY, n INT NOT NULL, "
                         f"s VARCHAR(40) CHARACTER SET utf8mb4)")
        self.rows: dict[int, tuple] = {}
        self.expected: Counter = Counter()
        self.next_id = 1
        self.count = 0

    def insert(self, k: int, commit=True):
        ids = range(self.next_id, self.next_id + k)
        self.next_id += k
        rows = [(i, 0, f"r{i}-é" if i % 7 == 0 else (None if i % 11 == 0 else f"r{i}"))
                for i in ids]
        self.cur.executemany(f"INSERT INTO `{self.table}` VALUES (%s, %s, %s)", rows)
        for r in rows:
            self.rows[r[0]] = r
            self.expected[("c", r[0], None, r)] += 1
        self.count += k

    def update(self, lo: int, hi: int):
        self.cur.execute(f"UPDATE `{self.table}` SET n = n + 1 WHERE id BETWEEN %s AND %s",
                         (lo, hi))
        for i in range(lo, hi + 1):
            if i in self.rows:
                before = self.rows[i]
                after = (i, before[1] + 1, before[2])
                self.rows[i] = after
                self.expected[("u", i, before, after)] += 1
                self.count += 1

    def delete(self, lo: int, hi: int):
        self.cur.execute(f"DELETE FROM `{self.table}` WHERE id BETWEEN %s AND %s", (lo, hi))
        for i in range(lo, hi + 1):
            before = self.rows.pop(i, None)
            if before is not None:
                self.expected[("d", i, before, None)] += 1
                self.count += 1

    def round(self):
        """About 2000 changes in 4 transactions (three autocommit statements, one multi-statement
        transaction)."""
        base = self.next_id
        self.insert(1000)
        self.update(base, base + 499)
        self.delete(base + 800, base + 999)
        self.cur.execute("BEGIN")
        b2 = self.next_id
        self.insert(100)
        self.update(b2, b2 + 99)
        self.update(base, base + 99)
        self.delete(b2 + 50, b2 + 99)
        self.cur.execute("COMMIT")

    def run(self, n_changes: int, between_rounds=None):
        i = 0
        while self.count < n_changes:
            self.round()
            i += 1
            if between_rounds is not None:
                between_rounds(i)

    def reconnect(self):
        self.conn = self.server.connect(database=self.db)
        self.cur = self.conn.cursor()

    def close(self):
        self.conn.close()


class Collector:
    """Runs ``client.transactions()`` in a thread and keeps the row changes of one table."""

    def __init__(self, client: ReplicaClient, table: str, slow_on: str | None = None):
        self.client, self.table = client, table
        self.slow_on = slow_on   # a slow consumer: 0.3 s per transaction on this table
        self.changes: list[tuple] = []
        self.txs: list[tuple] = []
        self.error: BaseException | None = None
        self.first_at = self.last_at = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self):
        try:
            for tx in self.client.transactions():
                self.txs.append((tx.file, tx.pos, tx.end_pos, tx.gtid))
                for ch in tx.changes():
                    if ch.table != self.table:
                        continue
                    if self.first_at is None:
                        self.first_at = time.monotonic()
                    self.changes.append((ch.op, (ch.after or ch.before)[0], ch.before, ch.after))
                self.last_at = time.monotonic()
                if self.slow_on and any(ev.table.table == self.slow_on
                                        for ev in tx.rows_events):
                    time.sleep(0.3)
        except BaseException as e:  # noqa: BLE001 - reported by the test
            self.error = e

    def wait_for(self, n: int, timeout: float):
        deadline = time.monotonic() + timeout
        while len(self.changes) < n and time.monotonic() < deadline and self.error is None \
                and self.thread.is_alive():
            time.sleep(0.05)
        time.sleep(0.5)   # anything extra (a duplicate) would arrive now
        self.client.close()
        self.thread.join(10)
        if self.error is not None:
            raise self.error
        assert not self.thread.is_alive()


def assert_same_changes(collector: Collector, workload: Workload):
    got = Counter(collector.changes)
    assert len(collector.changes) == workload.count
    missing = workload.expected - got
    extra = got - workload.expected
    assert not missing and not extra, (f"{sum(missing.values())} missing, e.g. "
                                       f"{list(missing)[:3]}; {sum(extra.values())} extra, e.g. "
                                       f"{list(extra)[:3]}")
    # every transaction once, in binlog order
    keys = [(f, p) for f, p, _, _ in collector.txs]
    assert len(keys) == len(set(keys)) and keys == sorted(keys)


def live_client(server, **kw) -> ReplicaClient:
    params = server.cdc_params()
    kw.setdefault("server_id", next_server_id())
    kw.setdefault("retry", FAST_RETRY)
    return make_client(params["host"], params["port"], params["user"], params["password"],
                       **kw)


def dump_threads(server, client: ReplicaClient) -> list[int]:
    addr = client.local_address
    if not addr:
        return []
    host = f"{addr[0]}:{addr[1]}"
    return [row[0] for row in server.execute("SHOW PROCESSLIST")
            if row[4] == "Binlog Dump" and row[2] == host]


def kill_dump_thread(server, client: ReplicaClient, timeout: float = 20.0,
                     before_kill=None) -> int:
    """KILL the client's dump thread (found in the processlist: Command 'Binlog Dump', Host = the
    client's address), then wait until the client has reconnected. ``before_kill`` runs between
    finding the thread and killing it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ids = dump_threads(server, client)
        if ids:
            starts = client.dump_thread_starts
            if before_kill is not None:
                before_kill()
            server.execute(f"KILL {ids[0]}")
            while client.dump_thread_starts == starts and time.monotonic() < deadline:
                time.sleep(0.01)
            return ids[0]
        time.sleep(0.01)
    raise AssertionError("the client's dump thread did not show up in the processlist")


@pytest.fixture(scope="module")
def private(server, tmp_path_factory):
    """A server of this module's own, of the test's kind (it gets restarted, purged,
    reconfigured) with TLS on."""
    name = server.server_name
    base = tmp_path_factory.mktemp("replica-" + name)
    tls = make_tls_files(base)
    own = start_or_skip(embedded_server(name, basedir=base / "server", extra_options={
        "ssl_ca": tls["ca"], "ssl_cert": tls["cert"], "ssl_key": tls["key"]}))
    own.server_name = name
    own.tls = tls
    try:
        yield own
    finally:
        own.cleanup()


# --- streams under stress ---------------------------------------------------------------------------


def test_stream_with_binlog_rotations(mariadb, db):
    """N row changes, FLUSH BINARY LOGS every few rounds: no loss, no duplicate."""
    # (a file/position captured now: "latest" would be resolved when the client connects)
    client = live_client(mariadb, start=Start.at(*mariadb.current_position()),
                         table_filter=[f"{db}.*"], heartbeat_interval=5)
    files_before = len(mariadb.binlog_files())
    wl = Workload(mariadb, db)
    col = Collector(client, "t")
    t0 = time.monotonic()
    rounds = max(1, N_CHANGES // 2000)
    wl.run(N_CHANGES, lambda i: i % max(1, rounds // 6) == 0 and mariadb.flush_binary_logs())
    written = time.monotonic() - t0
    col.wait_for(wl.count, timeout=120)
    elapsed = col.last_at - t0
    wl.close()
    rotations = len(mariadb.binlog_files()) - files_before
    assert rotations >= 5
    assert_same_changes(col, wl)
    assert len({f for f, _, _, _ in col.txs}) >= 5        # the stream crossed the files
    assert client.reconnects == 0
    print(f"\n[rotations] {wl.count} changes in {len(col.txs)} transactions across {rotations} "
          f"rotations: written in {written:.1f} s, all delivered {elapsed:.1f} s after the first "
          f"write ({wl.count / elapsed:,.0f} changes/s end to end)")


def test_stream_survives_five_killed_dump_threads(mariadb, db):
    client = live_client(mariadb, start=Start.at(*mariadb.current_position()),
                         table_filter=[f"{db}.*"])
    wl = Workload(mariadb, db)
    col = Collector(client, "t", slow_on="wide")
    rounds = max(6, N_CHANGES // 2000)
    kill_at = {max(1, rounds * k // 6) for k in range(1, 6)}
    killed = []

    wl.cur.execute("CREATE TABLE wide (id INT PRIMARY KEY, pad VARCHAR(1000))")
    wl.cur.execute(f"INSERT INTO wide SELECT seq, REPEAT('w', 1000) FROM {mariadb.seq_table(2000)}")

    def two_big_transactions():
        # Two 4 MB transactions (on another table): while the (slow) consumer handles the first,
        # the second fills the socket buffers and the dump thread waits to send the rest, so
        # the kill is likely to cut a transaction in the middle.
        wl.update(max(1, wl.next_id - 2000), wl.next_id - 1)
        wl.cur.execute("UPDATE wide SET pad = REPEAT(CHAR(97 + id % 26), 1000)")
        wl.cur.execute("UPDATE wide SET pad = REPEAT('w', 1000)")

    def between(i):
        if i in kill_at:
            killed.append(kill_dump_thread(mariadb, client, before_kill=two_big_transactions))
        if i % 10 == 0:
            mariadb.flush_binary_logs()
    wl.run(N_CHANGES, between)
    while len(killed) < 5:
        wl.round()
        killed.append(kill_dump_thread(mariadb, client))
    col.wait_for(wl.count, timeout=120)
    wl.close()
    assert len(killed) == 5 and len(set(killed)) == 5
    assert client.reconnects >= 5 and client.dump_thread_starts >= 6
    # (5 of 5 in practice: the slow consumer makes the dump thread wait mid-transaction)
    assert client.partial_transactions_dropped >= 1
    assert_same_changes(col, wl)
    print(f"\n[kills] {wl.count} changes, {len(killed)} dump threads killed, "
          f"{client.reconnects} reconnects, {client.partial_transactions_dropped} of them in the "
          f"middle of a transaction")


def test_stream_survives_a_server_restart_in_gtid_mode(private, caplog):
    db = "restart_db"
    private.execute(f"DROP DATABASE IF EXISTS {db}")
    private.execute(f"CREATE DATABASE {db}")
    gtid = private.gtid_executed()
    client = live_client(private, start=Start.gtid_text(gtid), table_filter=[f"{db}.*"])
    n = max(4000, N_CHANGES // 4)
    wl = Workload(private, db)
    col = Collector(client, "t")
    with caplog.at_level(logging.WARNING, logger="cdc.replica.client"):
        wl.run(n // 2)
        wl.close()
        deadline = time.monotonic() + 30
        while not col.changes and time.monotonic() < deadline:
            time.sleep(0.005)
        assert col.changes                # streaming is under way
        private.restart()                 # stop (SIGTERM, clean) and start mariadbd
        wl.reconnect()
        wl.run(n)
        col.wait_for(wl.count, timeout=120)
        wl.close()
    assert client.reconnects >= 1
    assert "lost" in caplog.text and "reconnecting from" in caplog.text
    assert_same_changes(col, wl)
    if private.FLAVOR == "mariadb":
        assert client.position.mode == "mariadb_gtid"
        assert str(client.position.mariadb_gtid) == private.gtid_executed()
    else:
        assert client.position.mode == "gtid"
        assert str(client.position.gtid_set) == private.gtid_executed()
    print(f"\n[restart] {wl.count} changes, {client.reconnects} reconnect(s) across a restart")


def test_single_update_of_100k_rows_is_one_complete_transaction(mariadb, db):
    n = N_CHANGES
    conn = mariadb.connect(database=db)
    cur = conn.cursor()
    cur.execute("CREATE TABLE big (id INT PRIMARY KEY, n INT NOT NULL, pad CHAR(20))")
    for lo in range(0, n, 10_000):
        cur.execute("INSERT INTO big SELECT seq, seq, 'x' FROM "
                    + mariadb.seq_table(min(n, lo + 10_000), lo + 1))
    file, pos = mariadb.current_position()
    cur.execute("UPDATE big SET n = n * 2")
    conn.close()
    client = live_client(mariadb, start=Start.at(file, pos), blocking=False)
    t0 = time.monotonic()
    txs = list(client.transactions())
    assert len(txs) == 1
    changes = [(c.op, c.before, c.after) for c in txs[0].changes()]
    dt = time.monotonic() - t0
    assert len(changes) == n
    assert changes[0] == ("u", (1, 1, "x"), (1, 2, "x"))
    assert all(op == "u" and b[0] == a[0] and a[1] == 2 * b[1] for op, b, a in changes)
    assert sorted(b[0] for _, b, _ in changes) == list(range(1, n + 1))
    assert client.position.pos == txs[0].end_pos
    print(f"\n[one update] {n} row changes in one transaction ({len(txs[0].rows_events)} rows "
          f"events) streamed and decoded in {dt:.2f} s ({n / dt:,.0f} changes/s)")


def test_event_over_16_mib_is_reassembled(mariadb, db):
    """A single 17 MiB row: its rows event spans two packets (0xffffff + continuation)."""
    blob = bytes(range(256)) * (17 * 4096)   # 17 MiB
    conn = mariadb.connect(database=db)
    cur = conn.cursor()
    cur.execute("CREATE TABLE blobs (id INT PRIMARY KEY, b LONGBLOB)")
    file, pos = mariadb.current_position()
    cur.execute("INSERT INTO blobs VALUES (1, %s)", (blob,))
    conn.close()
    client = live_client(mariadb, start=Start.at(file, pos), blocking=False)
    txs = list(client.transactions())
    [change] = [c for tx in txs for c in tx.changes()]
    assert change.after[0] == 1 and change.after[1] == blob
    assert max(ev.header.event_size for ev in txs[0].rows_events) > 0xFFFFFF


# --- positions, heartbeats, TLS ------------------------------------------------------------------------


def test_heartbeats_on_an_idle_server(mariadb, db):
    client = live_client(mariadb, start="latest", heartbeat_interval=1)
    txs = []
    t = threading.Thread(target=lambda: txs.extend(client.transactions()), daemon=True)
    t.start()
    time.sleep(3.6)
    alive, beats, lag = client.source_alive_at, client.heartbeats, client.lag_seconds
    client.close()
    t.join(5)
    assert not t.is_alive() and txs == []
    assert beats >= 2                                    # ~1 per second while idle
    assert time.time() - alive < 1.6                     # the source is alive, per heartbeats
    assert lag == 0.0                                    # idle and caught up
    file, pos = mariadb.current_position()
    assert client.last_heartbeat == (file, pos)          # where the source is


def test_resume_from_position_after_close(mariadb, db):
    """A new client started at a previous client's position gets exactly the rest."""
    conn = mariadb.connect(database=db)
    cur = conn.cursor()
    cur.execute("CREATE TABLE r (id INT PRIMARY KEY)")
    file, pos = mariadb.current_position()
    for i in range(1, 11):
        cur.execute("INSERT INTO r VALUES (%s)", (i,))
    conn.close()
    first = live_client(mariadb, start=Start.at(file, pos), blocking=False)
    seen = []
    for tx in first.transactions():
        seen += [c.after[0] for c in tx.changes()]
        if len(seen) == 4:
            break
    first.close()
    second = live_client(mariadb, start=first.position, blocking=False)
    rest = [c.after[0] for c in second.changes()]
    assert seen + rest == list(range(1, 11))
    assert first.previous_position.pos < first.position.pos


def test_tls_stream_with_a_verified_server_certificate(private):
    db = "tls_db"
    private.execute(f"DROP DATABASE IF EXISTS {db}")
    private.execute(f"CREATE DATABASE {db}")
    private.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v TEXT)")
    file, pos = private.current_position()
    private.execute(f"INSERT INTO t SELECT seq, REPEAT('v', seq % 5000) FROM "
                    f"{private.seq_table(3000)}", database=db)
    client = live_client(private, start=Start.at(file, pos), blocking=True,
                         ssl={"ca": private.tls["ca"], "verify": True, "verify_identity": True})
    got = []
    for tx in client.transactions(max_idle=1.0):
        assert isinstance(client._reader.sock, ssl.SSLSocket)
        got += [c.after for c in tx.changes()]
    assert [a[0] for a in got] == list(range(1, 3001))
    assert all(a[1] == "v" * (a[0] % 5000) for a in got)
    # close() from another thread while a blocking TLS stream waits: it ends quietly
    client = live_client(private, start=Start.at(file, pos),
                         ssl={"ca": private.tls["ca"], "verify": True})
    col = Collector(client, "t")
    col.wait_for(3000, timeout=30)   # closes the client from this thread, re-raises its errors
    assert len(col.changes) == 3000
    # a CA that did not sign the server's certificate is refused, and not retried
    other = make_tls_files(private.basedir)  # a new CA
    bad = live_client(private, start=Start.at(file, pos), blocking=False, ssl={"ca": other["ca"]})
    with pytest.raises(ConfigurationError, match="TLS handshake"):
        list(bad.transactions())


# --- errors ------------------------------------------------------------------------------------------------


def test_purged_file_and_purged_gtids(private):
    private.execute("CREATE DATABASE IF NOT EXISTS purge_db")
    private.execute("CREATE TABLE IF NOT EXISTS purge_db.t (id INT PRIMARY KEY)")
    for i in range(5):
        private.execute(f"INSERT INTO purge_db.t VALUES ({i}) ON DUPLICATE KEY UPDATE id = id")
    old_file = private.binlog_files()[0].name
    # a GTID state that needs the purged transactions: MariaDB's first GTID, MySQL's empty set
    old_gtid = "0-1-1" if private.FLAVOR == "mariadb" else ""
    private.flush_binary_logs()
    private.flush_binary_logs()
    current, _ = private.current_position()
    private.purge_binary_logs(current)
    assert private.binlog_files()[0].name == current
    with pytest.raises(BinlogPurgedError, match=f"binlog file {old_file} is no longer on"):
        list(live_client(private, start=Start.at(old_file, 4), blocking=False).transactions())
    # by GTID: the server itself says the requested GTID state is gone (error 1236)
    with pytest.raises(BinlogPurgedError, match=old_gtid or None) as e:
        list(live_client(private, start=Start.gtid_text(old_gtid),
                         blocking=False).transactions())
    if private.FLAVOR == "mariadb":   # the server's own refusal
        assert "1236" in str(e.value) and "purged" in str(e.value)
    else:                             # found before the dump, from @@gtid_purged
        purged = private.execute("SELECT @@GLOBAL.gtid_purged")[0][0]
        assert "has purged transactions the replica has not seen" in str(e.value)
        assert purged and purged.split(":")[0] in str(e.value)
    # earliest is still fine
    assert live_client(private, start="earliest", blocking=False).position is None
    assert list(live_client(private, start="earliest", blocking=False).transactions()) == []


def test_wrong_password_names_the_user(mariadb):
    client = make_client(mariadb.host, mariadb.port, "cdc", "not-the-password",
                         server_id=next_server_id(), retry=FAST_RETRY)
    with pytest.raises(AuthenticationError, match=r"refused user 'cdc'.*1045"):
        list(client.transactions())


def test_missing_privileges_give_the_grant_to_run(mariadb):
    mariadb.execute("CREATE USER IF NOT EXISTS 'weak'@'%' IDENTIFIED BY 'weak-pw'")
    mariadb.execute("GRANT SELECT ON *.* TO 'weak'@'%'")
    try:
        client = make_client(mariadb.host, mariadb.port, "weak", "weak-pw",
                             server_id=next_server_id(), retry=FAST_RETRY)
        with pytest.raises(PrivilegeError) as e:
            list(client.transactions())
        grant = ("REPLICATION SLAVE, BINLOG MONITOR, REPLICATION MASTER ADMIN"
                 if mariadb.FLAVOR == "mariadb" else "REPLICATION SLAVE, REPLICATION CLIENT")
        assert f"GRANT {grant} ON *.* TO 'weak'@'%';" in str(e.value)
    finally:
        mariadb.execute("DROP USER 'weak'@'%'")


def test_server_id_clash_with_a_connected_replica(mariadb):
    sid = next_server_id()
    a = live_client(mariadb, server_id=sid, start="latest")
    t = threading.Thread(target=lambda: list(a.transactions()), daemon=True)
    t.start()
    try:
        deadline = time.monotonic() + 10
        replicas = "SHOW SLAVE HOSTS" if mariadb.FLAVOR == "mariadb" else "SHOW REPLICAS"
        while time.monotonic() < deadline and not any(
                r[0] == sid for r in mariadb.execute(replicas)):
            time.sleep(0.05)
        b = live_client(mariadb, server_id=sid, start="latest")
        with pytest.raises(ServerIdConflictError, match=f"server_id {sid}"):
            list(b.transactions())
    finally:
        a.close()
        t.join(5)
    with pytest.raises(ServerIdConflictError, match="source's own server_id"):
        list(live_client(mariadb, server_id=mariadb.server_id).transactions())


def test_binlog_format_and_row_image_checks(private, caplog):
    try:
        private.execute("SET GLOBAL binlog_format = 'STATEMENT'")
        with pytest.raises(ServerConfigError, match="SET GLOBAL binlog_format = 'ROW'"):
            list(live_client(private, blocking=False).transactions())
        private.execute("SET GLOBAL binlog_format = 'ROW'")
        private.execute("SET GLOBAL binlog_row_image = 'MINIMAL'")
        with caplog.at_level(logging.WARNING, logger="cdc.replica.client"):
            assert list(live_client(private, blocking=False).transactions()) == []
        assert "binlog_row_image is MINIMAL" in caplog.text
    finally:
        private.execute("SET GLOBAL binlog_format = 'ROW'")
        private.execute("SET GLOBAL binlog_row_image = 'FULL'")


# --- binlog-cdc tail ----------------------------------------------------------------------------------


def _tail_cmd(server, *args):
    params = server.cdc_params()
    env = dict(os.environ, BINLOG_CDC_PASSWORD=params["password"], PYTHONUNBUFFERED="1")
    cmd = [sys.executable, "-m", "cdc", "tail", "--host", params["host"], "--port",
           str(params["port"]), "--user", params["user"], "--server-id",
           str(next_server_id()), *args]
    return cmd, env


def test_tail_jsonl_until_ctrl_c(mariadb, db):
    mariadb.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v VARCHAR(10))")
    file, pos = mariadb.current_position()
    for i in range(1, 4):
        mariadb.execute(f"INSERT INTO {db}.t VALUES ({i}, 'v{i}')")
    mariadb.execute(f"UPDATE {db}.t SET v = 'w' WHERE id = 2")
    end = mariadb.current_position()
    cmd, env = _tail_cmd(mariadb, "--file", file, "--pos", str(pos), "--format", "jsonl",
                         "--tables", f"{db}.*", "--heartbeat", "1")
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    try:
        lines = [json.loads(proc.stdout.readline()) for _ in range(4)]
        time.sleep(0.3)
        proc.send_signal(signal.SIGINT)
        rc = proc.wait(20)
    finally:
        proc.kill()
    err = proc.stderr.read()
    assert rc == 0, err
    assert [(d["op"], d["db"], d["table"], d["before"], d["after"]) for d in lines] == [
        ("c", db, "t", None, {"id": 1, "v": "v1"}), ("c", db, "t", None, {"id": 2, "v": "v2"}),
        ("c", db, "t", None, {"id": 3, "v": "v3"}),
        ("u", db, "t", {"id": 2, "v": "v2"}, {"id": 2, "v": "w"})]
    assert all(d["file"] == file and d["gtid"].startswith(gtid_prefix(mariadb)) and d["ts"] > 0
               for d in lines)
    assert f"resume with: --file {end[0]} --pos {end[1]}" in err


def test_tail_text_non_blocking(mariadb, db):
    mariadb.execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY)")
    file, pos = mariadb.current_position()
    mariadb.execute(f"INSERT INTO {db}.t VALUES (7)")
    mariadb.execute(f"DELETE FROM {db}.t")
    cmd, env = _tail_cmd(mariadb, "--file", file, "--pos", str(pos), "--non-blocking")
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    out = r.stdout.splitlines()
    assert len(out) == 2
    assert f"INSERT {db}.t [{file}:" in out[0] and 'after={"id": 7}' in out[0]
    assert f"DELETE {db}.t" in out[1] and 'before={"id": 7}' in out[1]
    cmd, env = _tail_cmd(mariadb, "--file", "x", "--gtid", "0-1-1")
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2 and "give only one of --gtid, --file" in r.stderr


# --- MySQL 8.4 (only where a Docker engine is available) -----------------------------------------


def test_mysql84_gtid_stream(mysql84):
    """COM_BINLOG_DUMP_GTID against a real MySQL 8.4 (caching_sha2_password, GTID on)."""
    mysql84.execute("CREATE TABLE IF NOT EXISTS cdc_test.r84 (id INT PRIMARY KEY, v VARCHAR(20))")
    mysql84.execute("DELETE FROM cdc_test.r84")
    executed = mysql84.execute("SELECT @@GLOBAL.gtid_executed")[0][0]
    for i in range(1, 4):
        mysql84.execute(f"INSERT INTO cdc_test.r84 VALUES ({i}, 'v{i}')")
    client = make_client(mysql84.host, mysql84.port, mysql84.cdc_user, mysql84.cdc_password,
                         server_id=next_server_id(), start=Start.gtid_set(executed),
                           blocking=False, retry=FAST_RETRY)
    txs = list(client.transactions())
    assert [c.after for tx in txs for c in tx.changes()] == [(1, "v1"), (2, "v2"), (3, "v3")]
    assert client.position.gtid_set == GtidSet.parse(
        mysql84.execute("SELECT @@GLOBAL.gtid_executed")[0][0])
