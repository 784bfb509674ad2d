"""What every fault-injection test shares: a writer of known rows, a consumer that records what
it received, the comparison with the server's final state, and the figures line.

The workload is one table ``t (id BIGINT AUTO_INCREMENT PRIMARY KEY, n INT, pad)``: every
transaction inserts rows with ``n = 0`` and increments ``n`` of earlier rows by one. The
server's final ``SELECT id, n`` therefore says exactly which changes a consumer must have
received, whatever happened to the writer's own connection (a transaction in doubt when the
server was killed is settled by what the server kept): for every row ``("c", id, 0)`` once and
``("u", id, k)`` once for each k in 1..n. Anything else received is a duplicate; anything
missing is lost.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time
from collections import Counter
from dataclasses import dataclass, field

import pytest

from cdc.replica.client import ReplicaClient
from cdc.replica.config import ReplicaConfig, RetryPolicy


# --- the time bound of every fault test ----------------------------------------------------


class FaultTestTimeout(Exception):
    """A fault test ran past the time bound of its ``fault`` marker."""


@pytest.fixture(autouse=True)
def fault_time_bound(request: pytest.FixtureRequest):
    """Every fault test carries ``@pytest.mark.fault(timeout=seconds)``; past that, SIGALRM in
    the main thread fails it, so a hung fault cannot hang the suite (the tests' own waits have
    shorter deadlines still). Test modules import this fixture (no conftest.py here: a second
    ``conftest`` module would shadow tests/conftest.py for ``from conftest import ...``)."""
    marker = request.node.get_closest_marker("fault")
    limit = marker.kwargs.get("timeout") if marker is not None else None
    if not limit or threading.current_thread() is not threading.main_thread() \
            or not hasattr(signal, "setitimer"):
        yield
        return

    def on_alarm(signum, frame):
        raise FaultTestTimeout(f"{request.node.nodeid} ran past its bound of {limit} s")

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, float(limit))
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)

TABLE_DDL = ("CREATE TABLE `{db}`.t (id BIGINT AUTO_INCREMENT PRIMARY KEY, n INT NOT NULL "
             "DEFAULT 0, pad VARCHAR(40) NULL)")

#: Reconnect quickly and for long enough to outlast any fault of these tests.
PATIENT_RETRY = RetryPolicy(max_attempts=None, max_time=120, initial_backoff=0.1,
                            max_backoff=1.0, jitter=0.1, first_connect_time=30)

_server_ids = iter(range(7001, 8000))


def create_table(server, db: str) -> None:
    server.execute(f"CREATE DATABASE IF NOT EXISTS `{db}`")
    server.execute(TABLE_DDL.format(db=db))


def replica_client(port: int, start, *, db: str, host: str = "127.0.0.1",
                   heartbeat: float = 0.5, read_timeout: float = 2.0, blocking: bool = True,
                   **kw) -> ReplicaClient:
    """A client of the harness account on *port* that must notice a silent connection within
    *read_timeout* seconds (heartbeats every *heartbeat* s keep a healthy one alive)."""
    kw.setdefault("retry", PATIENT_RETRY)
    kw.setdefault("server_id", next(_server_ids))
    kw.setdefault("connect_timeout", 5)
    config = ReplicaConfig(host, port, "cdc", "cdc-secret", heartbeat_interval=heartbeat,
                           read_timeout=read_timeout, table_filter=[f"{db}.t"], **kw)
    return ReplicaClient(config, start=start, blocking=blocking)


# --- the writer ---------------------------------------------------------------------------------


class Writer:
    """Writes known rows into ``db.t`` from a thread until :meth:`stop`; rides out outages
    (reconnects every 0.2 s while the server is away)."""

    def __init__(self, server, db: str, *, rows_per_tx: int = 10, updates_per_tx: int = 5,
                 big_every: int = 25, big_rows: int = 1000, pause: float = 0.02, seed: int = 13):
        self.server, self.db = server, db
        self.rows_per_tx, self.updates_per_tx, self.pause = rows_per_tx, updates_per_tx, pause
        # every big_every-th transaction inserts big_rows rows (~55 KB of events: a fault armed
        # to strike after so many bytes most likely lands in the middle of one)
        self.big_every, self.big_rows = big_every, big_rows
        self.rng = random.Random(seed)
        self.ids: list[int] = []
        self.committed = 0          # transactions the server confirmed
        self.errors = 0             # transactions that failed or are in doubt
        self._stop = threading.Event()
        self._pausing = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="fault-writer")

    def start(self) -> "Writer":
        self._thread.start()
        return self

    def stop(self, timeout: float = 60) -> None:
        self._stop.set()
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the writer did not stop"

    def _connect(self):
        return self.server.connect(database=self.db, read_timeout=60, write_timeout=60)

    def _run(self) -> None:
        conn = None
        while not self._stop.is_set():
            try:
                if conn is None:
                    conn = self._connect()
                self._transaction(conn)
                self.committed += 1
            except Exception:  # noqa: BLE001 - the server is away: try again shortly
                self.errors += 1
                if conn is not None:
                    try:
                        conn.close()
                    except Exception:  # noqa: BLE001
                        pass
                conn = None
                self._stop.wait(0.2)
                continue
            self._stop.wait(self.pause)
        if conn is not None:
            conn.close()

    def _transaction(self, conn) -> None:
        with conn.cursor() as cur:
            cur.execute("BEGIN")
            big = self.big_every and self.committed % self.big_every == self.big_every - 1
            rows = self.big_rows if big else self.rows_per_tx
            tag = f"w{self.committed}".ljust(40 if big else 0, "-")
            cur.execute("INSERT INTO t (n, pad) VALUES " + ",".join(["(0, %s)"] * rows),
                        [tag] * rows)
            first = cur.lastrowid
            if self.ids:
                ids = sorted({self.rng.choice(self.ids) for _ in range(self.updates_per_tx)})
                cur.execute("UPDATE t SET n = n + 1 WHERE id IN (" + ",".join(map(str, ids))
                            + ")")
            cur.execute("COMMIT")
        self.ids.extend(range(first, first + rows))


def marker(server, db: str) -> int:
    """Insert one row now (straight to the server) and return its id: a change written after
    a fault ended, whose arrival times the recovery."""
    conn = server.connect(database=db)
    try:
        with conn.cursor() as cur:
            cur.execute("INSERT INTO t (n, pad) VALUES (0, 'marker')")
            return cur.lastrowid
    finally:
        conn.close()


# --- the consumer ---------------------------------------------------------------------------------


def change_key(op: str, before, after) -> tuple:
    """``("c", id, 0)``, ``("u", id, n after)`` or ``("d", id, n before)``; an update that is
    not ``n + 1`` of the same row is flagged ``("bad", ...)``."""
    if op == "c":
        return ("c", after[0], after[1])
    if op == "u":
        if before[0] != after[0] or after[1] != before[1] + 1:
            return ("bad", before, after)
        return ("u", after[0], after[1])
    return ("d", before[0], before[1])


class Consumer:
    """Runs ``client.transactions()`` in a thread and counts the changes of table ``t``;
    ``arrivals`` maps each inserted id to the monotonic time it was received."""

    def __init__(self, client: ReplicaClient):
        self.client = client
        self.received: Counter = Counter()
        self.count = 0
        self.arrivals: dict[int, float] = {}
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, daemon=True, name="fault-consumer")
        self._thread.start()

    def _run(self) -> None:
        try:
            for tx in self.client.transactions():
                now = time.monotonic()
                for ch in tx.changes():
                    if ch.table != "t":
                        continue
                    key = change_key(ch.op, ch.before, ch.after)
                    self.received[key] += 1
                    self.count += 1
                    if key[0] == "c":
                        self.arrivals.setdefault(key[1], now)
        except BaseException as e:  # noqa: BLE001 - reported by finish()
            self.error = e

    def arrived(self, row_id: int, timeout: float) -> float | None:
        """When row *row_id*'s insert arrived (waiting up to *timeout* s), or None."""
        deadline = time.monotonic() + timeout
        while row_id not in self.arrivals and time.monotonic() < deadline \
                and self._thread.is_alive():
            time.sleep(0.02)
        return self.arrivals.get(row_id)

    def finish(self, expected_count: int, timeout: float) -> None:
        """Wait until *expected_count* changes have arrived, a little longer (a duplicate would
        come now), then close the client; re-raise what the stream raised."""
        deadline = time.monotonic() + timeout
        while self.count < expected_count and time.monotonic() < deadline \
                and self._thread.is_alive():
            time.sleep(0.05)
        time.sleep(0.5)
        self.client.close()
        self._thread.join(15)
        if self.error is not None:
            raise self.error
        assert not self._thread.is_alive(), "the consumer did not stop"


# --- the comparison and the figures ------------------------------------------------------------


def expected_changes(rows) -> Counter:
    """The changes a consumer must have received, from ``SELECT id, n`` of the final state."""
    want: Counter = Counter()
    for row_id, n in rows:
        want[("c", row_id, 0)] += 1
        for k in range(1, n + 1):
            want[("u", row_id, k)] += 1
    return want


def server_state(server, db: str) -> list[tuple[int, int]]:
    return [(int(i), int(n)) for i, n in server.execute(f"SELECT id, n FROM `{db}`.t")]


@dataclass
class Figures:
    """The printed outcome of one fault test."""

    name: str
    faults: int = 0
    written: int = 0
    received: int = 0
    lost: int = 0
    duplicated: int = 0
    recoveries: list[float] = field(default_factory=list)
    extra: dict = field(default_factory=dict)

    @property
    def max_recovery_s(self) -> float | None:
        return max(self.recoveries) if self.recoveries else None

    def tally(self, want: Counter, got: Counter) -> "Figures":
        self.written = sum(want.values())
        self.received = sum(got.values())
        self.lost = sum((want - got).values())
        self.duplicated = sum((got - want).values())
        self._examples = (list(want - got)[:3], list(got - want)[:3])
        return self

    def line(self) -> str:
        rec = self.max_recovery_s
        parts = [f"faults={self.faults}", f"written={self.written}", f"received={self.received}",
                 f"lost={self.lost}", f"duplicated={self.duplicated}",
                 "max_recovery_s=" + ("-" if rec is None else f"{rec:.1f}")]
        parts += [f"{k}=" + (",".join(map(str, v)) if isinstance(v, (list, tuple)) else str(v))
                  for k, v in self.extra.items()]
        return f"FAULTS {self.name}: " + " ".join(parts)

    def report(self) -> None:
        """Print the figures line (and append it to ``$CDC_FAULT_FIGURES`` when set)."""
        text = self.line()
        print("\n" + text)
        path = os.environ.get("CDC_FAULT_FIGURES")
        if path:
            with open(path, "a", encoding="utf-8") as f:
                f.write(text + "\n")

    def assert_exact(self) -> None:
        missing, extra = getattr(self, "_examples", ([], []))
        assert self.lost == 0 and self.duplicated == 0, (
            f"{self.line()}; missing e.g. {missing}, extra e.g. {extra}")
        assert self.written == self.received


# --- one scenario: a stream, a writer, faults, the comparison ----------------------------------


def run_scenario(name: str, server, db: str, port: int, faults, *, settle: float = 1.0,
                 recovery_timeout: float = 60.0, client_kw: dict | None = None) -> tuple:
    """Stream ``db.t`` from *port* (the server, or a relay in front of it) while a
    :class:`Writer` writes, inject each of *faults* (``inject(client)``, returning the monotonic
    time the fault ended) with *settle* seconds of normal streaming before each, time the recovery
    (a marker row written after the fault, received), then stop writing and compare what was
    received with the server's final state. Returns ``(figures, client)``; the figures are
    printed, not yet asserted."""
    from cdc.positions import Start

    create_table(server, db)
    client = replica_client(port, Start.at(*server.current_position()), db=db,
                            **(client_kw or {}))
    consumer = Consumer(client)
    writer = Writer(server, db).start()
    figures = Figures(name, faults=len(faults))
    try:
        first = marker(server, db)
        assert consumer.arrived(first, timeout=30) is not None, \
            f"the stream did not start: {consumer.error!r}"
        for inject in faults:
            time.sleep(settle)
            ended = inject(client)
            row_id = marker(server, db)
            arrived = consumer.arrived(row_id, timeout=recovery_timeout)
            assert arrived is not None, (f"{name}: nothing new arrived within "
                                         f"{recovery_timeout} s of the fault's end: "
                                         f"{consumer.error!r}")
            figures.recoveries.append(max(0.0, arrived - ended))
        time.sleep(settle)
    except BaseException:
        client.close()
        raise
    finally:
        writer.stop()
    want = expected_changes(server_state(server, db))
    consumer.finish(sum(want.values()), timeout=recovery_timeout)
    figures.tally(want, consumer.received)
    figures.extra.update(reconnects=client.reconnects,
                         partial_tx_redone=client.partial_transactions_dropped,
                         writer_errors=writer.errors)
    figures.report()
    return figures, client
