"""A replica client: streams committed transactions from a live MySQL or MariaDB server.

::

    from cdc.replica.client import ReplicaClient, Start

    client = ReplicaClient("db.example", 3306, "cdc", "secret", server_id=4242,
                           start=Start.latest(), heartbeat_interval=5)
    for tx in client.transactions():              # blocks; Ctrl-C / client.close() ends it
        for change in tx.changes():
            print(change.op, change.schema, change.table, change.before, change.after)
        save_checkpoint(client.position)          # resume later with start=client.position

How it works: log in with PyMySQL (every auth plugin PyMySQL supports, caching_sha2_password
included; optional TLS), run pre-flight checks that turn a misconfigured server into one clear
error, negotiate checksums/heartbeats/MariaDB capabilities, ``COM_REGISTER_SLAVE``, then send
``COM_BINLOG_DUMP`` (file/position, MariaDB GTID) or ``COM_BINLOG_DUMP_GTID`` (MySQL GTID set)
and read the event packets ourselves (:mod:`cdc.replica.packets`) into the sans-IO parser and the
:class:`~cdc.binlog.transactions.TransactionAssembler`.

Positions and resuming: :attr:`ReplicaClient.position` is the point right after the most recently
yielded transaction (its ``end_pos``; in GTID modes also the GTID set / MariaDB GTID position
with that transaction added). A transaction is yielded only once its commit event has arrived,
and a lost connection is resumed from :attr:`position` -- so nothing already yielded comes again
and nothing is skipped, however often the connection drops, the server restarts or binlogs
rotate.
"""

from __future__ import annotations

import logging
import re
import socket
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, NamedTuple

from cdc.binlog.constants import ChecksumAlg
from cdc.errors import (BinlogPurgedError, CdcError, ConfigurationError, PrivilegeError,
                     ServerConfigError, ServerConnectionError, ServerIdConflictError)
from cdc.binlog.events import HeartbeatEvent, RotateEvent
from cdc.binlog.gtid import GtidSet, MariaGtidPosition
from cdc.replica.packets import ConnectionLost, ProtocolError, PacketReader, frame, is_eof, parse_err, take_over
from cdc.binlog.parser import BinlogParser
from cdc.replica.protocol import (BINLOG_DUMP_NON_BLOCK, MARIA_SLAVE_CAPABILITY_GTID, ServerInfo,
                       binlog_dump, binlog_dump_gtid, grant_statement, heartbeat_period_ns,
                       is_transient, map_server_error, missing_privileges, parse_server_version,
                       quote_account, register_slave)
from cdc.binlog.transactions import TableFilter, Transaction, TransactionAssembler

__all__ = ["ReplicaClient", "Start", "Position", "RetryPolicy", "SslOptions"]

log = logging.getLogger("cdc.replica.client")

_MARIA_POS_RE = re.compile(r"\s*\d+-\d+-\d+\s*(,\s*\d+-\d+-\d+\s*)*\Z")
_FILE_POS_RE = re.compile(r"(?P<file>[^:\s]+):(?P<pos>\d+)\Z")


# --- start specs and positions ---------------------------------------------------------------


@dataclass(frozen=True)
class Start:
    """Where streaming starts. Build one with a class method, or :meth:`parse` a string."""

    kind: str                       # "file", "gtid", "mariadb_gtid", "earliest", "latest"
    file: str | None = None
    pos: int = 4
    gtid: str | None = None

    @classmethod
    def at(cls, file: str, pos: int = 4) -> "Start":
        """A binlog file and the position of an event in it (a transaction's ``end_pos``)."""
        if not file:
            raise ConfigurationError("a file start needs a binlog file name")
        if not isinstance(pos, int) or pos < 4:
            raise ConfigurationError(f"binlog position must be an integer >= 4, not {pos!r}")
        return cls("file", file=file, pos=pos)

    @classmethod
    def gtid_set(cls, text: str) -> "Start":
        """MySQL: stream every transaction *not* in this GTID set (what the replica has)."""
        return cls("gtid", gtid=str(GtidSet.parse(text)))

    @classmethod
    def mariadb_gtid(cls, text: str) -> "Start":
        """MariaDB: the GTID position already applied (``'0-1-42'``, one GTID per domain)."""
        return cls("mariadb_gtid", gtid=str(MariaGtidPosition.parse(text)))

    @classmethod
    def earliest(cls) -> "Start":
        """The first binlog file the server still has."""
        return cls("earliest")

    @classmethod
    def latest(cls) -> "Start":
        """The current end of the binlog: only changes committed from now on."""
        return cls("latest")

    @classmethod
    def parse(cls, spec: "Start | Position | str | tuple") -> "Start":
        """``'earliest'``, ``'latest'``, ``'file:pos'``, a MySQL GTID set (``'uuid:1-42'``), a
        MariaDB GTID position (``'0-1-42'``), a ``(file, pos)`` tuple, or a :class:`Position`."""
        if isinstance(spec, Start):
            return spec
        if isinstance(spec, Position):
            return spec.to_start()
        if isinstance(spec, tuple) and len(spec) == 2:
            return cls.at(spec[0], int(spec[1]))
        if not isinstance(spec, str):
            raise ConfigurationError(f"cannot use {spec!r} as a start position")
        text = spec.strip()
        if text.lower() in ("earliest", "latest"):
            return cls(text.lower())
        if _MARIA_POS_RE.match(text):
            return cls.mariadb_gtid(text)
        m = _FILE_POS_RE.match(text)
        if m and not re.fullmatch(r"[0-9a-fA-F-]{36}", m.group("file")):
            return cls.at(m.group("file"), int(m.group("pos")))
        try:
            return cls.gtid_set(text)
        except CdcError:
            raise ConfigurationError(
                f"cannot understand start {spec!r}: use 'earliest', 'latest', 'file:pos', a MySQL "
                f"GTID set ('uuid:1-42') or a MariaDB GTID position ('0-1-42')") from None

    def describe(self) -> str:
        if self.kind == "file":
            return f"file {self.file} position {self.pos}"
        if self.kind == "gtid":
            return f"GTID set '{self.gtid}'"
        if self.kind == "mariadb_gtid":
            return f"MariaDB GTID position '{self.gtid}'"
        return self.kind


@dataclass(frozen=True)
class Position:
    """A resume point: right after a transaction (or at the start).

    ``file``/``pos`` always say where in the binlog; in MySQL GTID mode ``gtid_set`` is the set
    of transactions delivered (the start set plus every GTID since), in MariaDB GTID mode
    ``mariadb_gtid`` the GTID position. ``last_gtid`` is the GTID of the last transaction
    delivered (any mode). Resume with ``ReplicaClient(..., start=position)``.
    """

    file: str | None
    pos: int | None
    gtid_set: GtidSet | None = None
    mariadb_gtid: MariaGtidPosition | None = None
    last_gtid: str | None = None

    @property
    def mode(self) -> str:
        if self.gtid_set is not None:
            return "gtid"
        if self.mariadb_gtid is not None:
            return "mariadb_gtid"
        return "file"

    def to_start(self) -> Start:
        if self.gtid_set is not None:
            return Start("gtid", gtid=str(self.gtid_set))
        if self.mariadb_gtid is not None:
            return Start("mariadb_gtid", gtid=str(self.mariadb_gtid))
        if not self.file or self.pos is None:
            raise ConfigurationError("this position has no file and position to resume from")
        return Start.at(self.file, self.pos)

    def cli_args(self) -> str:
        """How to resume with ``binlog-cdc tail``."""
        if self.gtid_set is not None:
            return f"--gtid '{self.gtid_set}'"
        if self.mariadb_gtid is not None:
            return f"--gtid '{self.mariadb_gtid}'"
        return f"--file {self.file} --pos {self.pos}"

    def __str__(self) -> str:
        where = f"{self.file}:{self.pos}"
        if self.gtid_set is not None:
            return f"{where} gtid_set={self.gtid_set}"
        if self.mariadb_gtid is not None:
            return f"{where} gtid={self.mariadb_gtid}"
        return where


@dataclass(frozen=True)
class RetryPolicy:
    """How to reconnect after a lost connection: exponential backoff with jitter
    (``initial_backoff * 2**n + uniform(0, jitter)``, at most ``max_backoff``), until
    ``max_attempts`` attempts or ``max_time`` seconds (None: no limit) have been spent."""

    max_attempts: int | None = 20
    max_time: float | None = 300.0
    initial_backoff: float = 0.5
    max_backoff: float = 10.0
    jitter: float = 0.5


@dataclass(frozen=True)
class SslOptions:
    """TLS: ``ca`` (CA bundle file), ``cert``/``key`` (client certificate), ``verify`` the
    server's certificate against ``ca`` (default when a CA is given), ``verify_identity``
    (check the host name too)."""

    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    verify: bool | None = None
    verify_identity: bool = False

    @classmethod
    def coerce(cls, value) -> "SslOptions | bool | None":
        if value is None or value is False:
            return value
        if value is True:
            return cls(verify=False)
        if isinstance(value, cls):
            return value
        if isinstance(value, Mapping):
            aliases = {"ssl_ca": "ca", "ssl_cert": "cert", "ssl_key": "key",
                       "ssl_verify": "verify", "ssl_verify_cert": "verify",
                       "ssl_verify_identity": "verify_identity", "check_hostname": "verify_identity"}
            kw = {aliases.get(k, k): v for k, v in value.items()}
            unknown = set(kw) - {"ca", "cert", "key", "verify", "verify_identity"}
            if unknown:
                raise ConfigurationError(f"unknown TLS options {sorted(unknown)}; use ca, cert, "
                                         f"key, verify, verify_identity")
            return cls(**kw)
        raise ConfigurationError(f"ssl must be None, True, a dict or SslOptions, not {value!r}")

    def context(self):
        """The ``ssl.SSLContext`` handed to PyMySQL."""
        import ssl as _ssl
        verify = self.verify if self.verify is not None else bool(self.ca)
        try:
            ctx = _ssl.create_default_context(cafile=self.ca) if self.ca else \
                _ssl.create_default_context()
            ctx.check_hostname = bool(verify and self.verify_identity)
            ctx.verify_mode = _ssl.CERT_REQUIRED if verify else _ssl.CERT_NONE
            ctx.verify_flags &= ~getattr(_ssl, "VERIFY_X509_STRICT", 0)
            if self.cert:
                ctx.load_cert_chain(self.cert, self.key)
        except (OSError, _ssl.SSLError) as e:
            raise ConfigurationError(f"cannot load the TLS files (ca={self.ca}, cert={self.cert}, "
                                     f"key={self.key}): {e}") from e
        return ctx


class _Closed(Exception):
    """close() was called: stop quietly."""


_VARIABLES = ("log_bin", "binlog_format", "binlog_row_image", "binlog_checksum", "server_id",
              "gtid_mode", "gtid_purged")


# --- the client ------------------------------------------------------------------------------


def sql_connection(host: str, port: int = 3306, user: str = "root", password: str = "", *,
                   ssl=None, connect_timeout: float = 10.0):
    """A plain autocommit SQL connection to a source server, with the replica client's TLS
    handling and error messages (:meth:`ReplicaClient.connect_sql`)."""
    return ReplicaClient(host, port, user, password, server_id=1, ssl=ssl,
                         connect_timeout=connect_timeout).connect_sql()


class BinlogStatus(NamedTuple):
    """Where the server writes its next binlog event (``SHOW MASTER STATUS``)."""

    file: str
    pos: int
    #: MySQL's ``Executed_Gtid_Set`` there ("" when empty; None on MariaDB).
    executed_gtid_set: str | None
    #: The statement that answered (pass it as *first* next time).
    statement: str


# MySQL 8.4 dropped SHOW MASTER STATUS for SHOW BINARY LOG STATUS; MariaDB 10.5.2+ also spells it
# SHOW BINLOG STATUS.
BINLOG_STATUS_SQL = ("SHOW MASTER STATUS", "SHOW BINARY LOG STATUS", "SHOW BINLOG STATUS")


def binlog_status(query: Callable[[str], list], *, first: str | None = None,
                  where: str = "the server") -> BinlogStatus:
    """The binlog end, asked with ``query(sql) -> rows``; a spelling the server does not know
    (a syntax error) makes way for the next; *first* is tried before the others."""
    import pymysql
    order = ([first] if first else []) + [s for s in BINLOG_STATUS_SQL if s != first]
    last: Exception | None = None
    for sql in order:
        try:
            rows = query(sql)
        except pymysql.err.ProgrammingError as e:
            last = e
            continue
        if not rows:
            raise ConfigurationError(f"{sql} on {where} returned nothing: is the binary log on "
                                     f"(log_bin)?")
        row = rows[0]
        executed = str(row[4]) if len(row) > 4 and row[4] is not None else None
        return BinlogStatus(str(row[0]), int(row[1]), executed, sql)
    raise ConfigurationError(f"cannot read the binlog position of {where}: {last}")


def fetch_rows(conn, sql: str, args=None) -> list[tuple]:
    """Run one statement on a PyMySQL connection: its rows (``[]`` when it returns none)."""
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return list(cur.fetchall()) if cur.description else []


class SqlSession:
    """One SQL connection, opened by *connect* on first use and opened again when the server
    has dropped it: ``run`` retries the call *retries* times (default once) on a new
    connection; with ``retries=0`` the error is raised and the next call reconnects. Pickles
    without the connection."""

    def __init__(self, connect: Callable[[], Any], *, retries: int = 1):
        self._connect = connect
        self.retries = retries
        self.conn = None

    def run(self, call: Callable[[Any], Any]) -> Any:
        """``call(connection)``, retried on a fresh connection after a lost one."""
        import pymysql
        for attempt in range(self.retries + 1):
            if self.conn is None:
                self.conn = self._connect()
            try:
                return call(self.conn)
            except (pymysql.err.OperationalError, pymysql.err.InterfaceError):
                self.close()
                if attempt == self.retries:
                    raise
        raise AssertionError("unreachable")

    def query(self, sql: str, args=None) -> list[tuple]:
        """The rows of one statement (:func:`fetch_rows`), through :meth:`run`."""
        return self.run(lambda conn: fetch_rows(conn, sql, args))

    def close(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass

    def __getstate__(self):
        return dict(self.__dict__, conn=None)


class ReplicaClient:
    """Streams committed transactions from a MySQL (5.7-9.x) or MariaDB (10.x-11.x) server.

    :param server_id: this replica's id; must differ from the source's and every other
        replica's (checked at the first connect: :class:`~cdc.errors.ServerIdConflictError`).
    :param start: a :class:`Start`, a :class:`Position` (resume), or a string for
        :meth:`Start.parse` (default ``"latest"``).
    :param blocking: True: wait for new transactions forever; False: stop at the end of the
        binlog as it is when the server reaches it (``BINLOG_DUMP_NON_BLOCK``).
    :param heartbeat_interval: ask the source for a heartbeat after this many idle seconds;
        also arms dead-connection detection (no packet for ``read_timeout``, default
        ``2 * heartbeat_interval + 5`` s, means the connection is dead: reconnect).
    :param ssl: None (PyMySQL's default: TLS when the server offers it, unverified), False
        (never TLS), True (require TLS, unverified), a dict (``ca``/``cert``/``key``/``verify``/
        ``verify_identity``) or :class:`SslOptions`.
    :param table_filter: a :class:`~cdc.binlog.transactions.TableFilter`, a callable on ``"db.table"``
        or a list of ``db.table`` glob patterns to include.
    :param retry: the :class:`RetryPolicy` for (re)connecting.
    :param check_server_id: check SHOW REPLICAS / SHOW SLAVE HOSTS for a clash at the first
        connect.
    """

    def __init__(self, host: str, port: int = 3306, user: str = "root", password: str = "", *,
                 server_id: int, start: "Start | Position | str | tuple" = "latest",
                 blocking: bool = True, heartbeat_interval: float | None = None,
                 ssl=None, table_filter=None, retry: RetryPolicy | None = None,
                 connect_timeout: float = 10.0, read_timeout: float | None = None,
                 check_server_id: bool = True, report_host: str | None = None,
                 gtid_strict_mode: bool = False, gtid_ignore_duplicates: bool = False,
                 tick: float = 1.0):
        if not isinstance(server_id, int) or not 1 <= server_id < 1 << 32:
            raise ConfigurationError(f"server_id must be an integer from 1 to 4294967295, not "
                                     f"{server_id!r}")
        self.host = host
        self.port = int(port)
        self.user = user
        self.password = password or ""
        self.server_id = server_id
        self.start = Start.parse(start)
        self.blocking = blocking
        self.heartbeat_interval = heartbeat_interval
        self._heartbeat_ns = heartbeat_period_ns(heartbeat_interval) if heartbeat_interval else None
        self.read_timeout = read_timeout if read_timeout is not None else (
            2 * heartbeat_interval + 5 if heartbeat_interval else None)
        self.ssl = SslOptions.coerce(ssl)
        if isinstance(table_filter, (list, tuple)):
            table_filter = TableFilter(table_filter)
        self.table_filter = table_filter or None
        self.retry = retry or RetryPolicy()
        self.connect_timeout = connect_timeout
        self.check_server_id = check_server_id
        self.report_host = (report_host if report_host is not None
                            else socket.gethostname())[:60]
        self.gtid_strict_mode = gtid_strict_mode
        self.gtid_ignore_duplicates = gtid_ignore_duplicates
        self.tick = tick

        # state visible to users
        self.server: ServerInfo | None = None
        self.source_alive_at: float | None = None   # time.time() of the last packet
        self.heartbeats = 0
        self.last_heartbeat: tuple[str, int] | None = None
        self.reconnects = 0
        self.partial_transactions_dropped = 0   # cut off by a lost connection, then re-read
        self.transactions_delivered = 0
        self.checksum: ChecksumAlg | None = None
        self._position = self._initial_position(self.start)
        self._previous_position: Position | None = None
        self._last_commit_ts: int | None = None
        self._caught_up = False

        # connection state
        self._lock = threading.RLock()
        self._conn = None
        self._reader: PacketReader | None = None
        self._parser: BinlogParser | None = None
        self._asm: TransactionAssembler | None = None
        self._pending: list[bytes] = []
        self._connected_once = False
        self._closed = False
        self._wake = threading.Event()
        self._last_packet_mono = 0.0
        self._warned_row_image = False
        self.dump_thread_starts = 0

    # --- public state ------------------------------------------------------------------------

    @staticmethod
    def _initial_position(start: Start) -> Position | None:
        if start.kind == "file":
            return Position(start.file, start.pos)
        if start.kind == "gtid":
            return Position(None, None, gtid_set=GtidSet.parse(start.gtid))
        if start.kind == "mariadb_gtid":
            return Position(None, None, mariadb_gtid=MariaGtidPosition.parse(start.gtid))
        return None  # earliest / latest: resolved at the first connect

    @property
    def position(self) -> Position | None:
        """Right after the last transaction yielded (None until an earliest/latest start has
        been resolved by the first connect)."""
        return self._position

    @property
    def previous_position(self) -> Position | None:
        """Right before the last transaction yielded (resume here to get it again)."""
        return self._previous_position

    @property
    def lag_seconds(self) -> float | None:
        """How far behind the source: 0 when the source says (heartbeat, end of binlog) that it
        has nothing more to send; otherwise now minus the commit time of the last transaction
        yielded; None before anything is known."""
        if self._caught_up:
            return 0.0
        if self._last_commit_ts is None:
            return None
        return max(0.0, time.time() - self._last_commit_ts)

    @property
    def where(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def local_address(self) -> tuple | None:
        """(host, port) of this end of the replication connection, while connected (what the
        server's processlist shows as the client's Host)."""
        reader = self._reader
        try:
            return reader.sock.getsockname() if reader is not None else None
        except (OSError, AttributeError):
            return None

    @property
    def closed(self) -> bool:
        return self._closed

    # --- iteration -----------------------------------------------------------------------------

    def transactions(self, *, max_idle: float | None = None) -> Iterator[Transaction]:
        """Yield committed transactions in binlog order. Reconnects as needed.

        Ends at the end of the binlog in non-blocking mode, when no transaction has arrived for
        ``max_idle`` seconds (if given), or when :meth:`close` is called (from any thread).
        """
        if self._closed:
            raise ServerConnectionError("the replica client is closed")
        try:
            while not self._closed:
                if self._reader is None:
                    try:
                        self._connect_with_retry()
                    except _Closed:
                        return
                try:
                    yield from self._pump(max_idle)
                    return
                except ConnectionLost as e:
                    if self._closed:
                        return
                    self._lost(e)
                except CdcError as e:
                    if self._closed and isinstance(e, ServerConnectionError):
                        return
                    if is_transient(e):
                        self._lost(e)
                    else:
                        raise
        finally:
            self._disconnect()

    def changes(self, *, max_idle: float | None = None):
        """Row changes (:class:`~cdc.binlog.transactions.RowChange`) of :meth:`transactions`, flattened."""
        for tx in self.transactions(max_idle=max_idle):
            yield from tx.changes()

    def __iter__(self):
        return self.transactions()

    def close(self) -> None:
        """Stop streaming (safe from another thread or a signal handler); idempotent."""
        self._closed = True
        self._wake.set()
        reader = self._reader
        if reader is not None:
            try:
                # The plain socket's shutdown, also for an SSLSocket (whose own shutdown() drops
                # the TLS object under the thread that is reading): the reader wakes with EOF.
                socket.socket.shutdown(reader.sock, socket.SHUT_RDWR)
            except (OSError, ValueError, AttributeError, TypeError):
                pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        self._disconnect()

    # --- the stream ---------------------------------------------------------------------------

    def _lost(self, e: BaseException) -> None:
        self.reconnects += 1
        asm = self._asm
        partial = ""
        if asm is not None and asm.in_transaction:
            self.partial_transactions_dropped += 1
            partial = "; the transaction being received is dropped and read again"
        log.warning("replication connection to %s lost (%s); reconnecting from %s%s", self.where,
                    e, self._position, partial)
        self._disconnect()

    def _pump(self, max_idle: float | None) -> Iterator[Transaction]:
        reader, parser, asm = self._reader, self._parser, self._asm
        assert reader is not None and parser is not None and asm is not None
        tick = min(self.tick, max_idle if max_idle is not None else self.tick,
                   self.read_timeout / 2 if self.read_timeout else self.tick)
        tick = max(0.01, tick)
        reader.sock.settimeout(tick)
        idle_since = time.monotonic()
        mysql_gtid = self.start.kind == "gtid" or (self._position is not None and
                                                   self._position.gtid_set is not None)
        while True:
            if self._pending:
                payload = self._pending.pop(0)
            else:
                try:
                    payload = reader.read_payload()
                except TimeoutError:
                    if self._closed:
                        return
                    now = time.monotonic()
                    if max_idle is not None and now - idle_since >= max_idle:
                        return
                    if self.read_timeout and now - self._last_packet_mono > self.read_timeout:
                        raise ConnectionLost(
                            f"nothing (not even a heartbeat) from the source for "
                            f"{now - self._last_packet_mono:.0f} s") from None
                    continue
                self._last_packet_mono = time.monotonic()
                self.source_alive_at = time.time()
            head = payload[0] if payload else -1
            if head == 0:
                events = parser.feed_event(memoryview(payload)[1:])
            elif head == 0xFF:
                raise self._dump_error(payload)
            elif is_eof(payload):
                if self.blocking:
                    # A blocking dump never ends by itself: MariaDB sends EOF when it shuts down.
                    raise ConnectionLost("the server ended the binlog dump (shutting down?)")
                self._caught_up = True
                return
            else:
                raise ProtocolError(f"unexpected replication packet starting with 0x{head:02x}")
            for ev in events:
                tx = asm.push(ev)
                if tx is not None:
                    pos = self._position
                    if mysql_gtid and tx.gtid and pos is not None and pos.gtid_set is not None \
                            and tx.gtid in pos.gtid_set:
                        log.debug("skipping %s: already in the delivered GTID set", tx.gtid)
                        continue
                    self._delivered(tx)
                    idle_since = time.monotonic()
                    yield tx
                elif isinstance(ev, HeartbeatEvent):
                    self.heartbeats += 1
                    self.last_heartbeat = (ev.log_file, ev.log_pos)
                    if not asm.in_transaction:
                        self._caught_up = True
                elif isinstance(ev, RotateEvent):
                    self._rotated(ev, asm)

    def _delivered(self, tx: Transaction) -> None:
        pos = self._position
        gs = pos.gtid_set if pos is not None else None
        mg = pos.mariadb_gtid if pos is not None else None
        if tx.gtid:
            if gs is not None:
                gs = gs.add(tx.gtid)
            elif mg is not None:
                mg = mg.advance(tx.gtid)
        end = tx.end_pos
        if end is None:  # a commit event without log_pos (never seen from a real server)
            log.warning("transaction %s has no end position; file resume point not advanced", tx)
            file, end = (pos.file, pos.pos) if pos is not None else (tx.file, None)
        else:
            file = tx.file
        self._previous_position = pos
        self._position = Position(file, end, gs, mg, tx.gtid)
        self._last_commit_ts = tx.timestamp
        self._caught_up = False
        self.transactions_delivered += 1

    def _rotated(self, ev: RotateEvent, asm: TransactionAssembler) -> None:
        pos = self._position
        if ev.artificial:
            # Where the dump starts (or, after a file the server finished reading, continues):
            # the current file -- not a transaction boundary of ours.
            if pos is not None and pos.file is None:
                self._position = Position(ev.next_file, ev.next_position, pos.gtid_set,
                                          pos.mariadb_gtid, pos.last_gtid)
            return
        if not asm.in_transaction and pos is not None:
            # A real rotation between transactions: resuming at the new file skips nothing.
            self._position = Position(ev.next_file, ev.next_position, pos.gtid_set,
                                      pos.mariadb_gtid, pos.last_gtid)

    def _dump_error(self, payload: bytes) -> CdcError:
        err = parse_err(payload)
        start = self._resume_start()
        return map_server_error(err.code, err.message, user=self.user, where=self.where,
                                start=start.describe() if start else None,
                                grant=self._grant_hint())

    # --- connecting ------------------------------------------------------------------------------

    def _sleep(self, seconds: float) -> None:
        if self._wake.wait(seconds) or self._closed:
            raise _Closed()

    def _connect_with_retry(self) -> None:
        from tenacity import (Retrying, retry_if_exception, stop_after_attempt, stop_after_delay,
                              stop_never, wait_exponential_jitter)
        p = self.retry
        stop = stop_never
        if p.max_attempts is not None:
            stop = stop_after_attempt(p.max_attempts)
        if p.max_time is not None:
            stop = stop_after_delay(p.max_time) if stop is stop_never else \
                stop | stop_after_delay(p.max_time)
        started = time.monotonic()
        attempts = [0]

        def before_sleep(state) -> None:
            exc = state.outcome.exception()
            log.warning("connecting to %s failed (attempt %d: %s); retrying in %.1f s",
                        self.where, state.attempt_number, exc,
                        state.next_action.sleep if state.next_action else 0)

        retrying = Retrying(stop=stop, wait=wait_exponential_jitter(
            multiplier=p.initial_backoff, max=p.max_backoff, jitter=p.jitter),
            retry=retry_if_exception(is_transient), sleep=self._sleep,
            before_sleep=before_sleep, reraise=True)
        try:
            for attempt in retrying:
                with attempt:
                    attempts[0] += 1
                    if self._closed:
                        raise _Closed()
                    self._open()
        except _Closed:
            raise
        except Exception as e:
            if is_transient(e):
                raise ServerConnectionError(
                    f"could not (re)connect to {self.where} after {attempts[0]} attempt(s) in "
                    f"{time.monotonic() - started:.1f} s; last error: {e}") from e
            raise

    def _resume_start(self) -> Start | None:
        if self._position is not None:
            try:
                return self._position.to_start()
            except ConfigurationError:
                return None
        return self.start if self.start.kind not in ("earliest", "latest") else None

    def _grant_hint(self) -> str | None:
        if self.server is None:
            return None
        return grant_statement(self.server, getattr(self, "_account", f"'{self.user}'@'%'"))

    def connect_sql(self):
        """A plain autocommit SQL connection (PyMySQL, utf8mb4) with this client's host, user,
        TLS options and error mapping: for the queries around a stream (positions, table
        definitions). The caller closes it."""
        import pymysql
        kw: dict[str, Any] = dict(host=self.host, port=self.port, user=self.user,
                                  password=self.password, connect_timeout=self.connect_timeout,
                                  read_timeout=max(self.connect_timeout, 30.0),
                                  write_timeout=max(self.connect_timeout, 30.0),
                                  charset="utf8mb4", autocommit=True)
        if self.ssl is False:
            kw["ssl_disabled"] = True
        elif self.ssl is not None:
            kw["ssl"] = self.ssl.context()
        try:
            return pymysql.connect(**kw)
        except pymysql.err.MySQLError as e:
            import ssl as _ssl
            orig = getattr(e, "original_exception", None)
            if isinstance(orig, _ssl.SSLError):
                raise ConfigurationError(
                    f"TLS handshake with {self.where} failed: {orig} (check ssl ca/cert/key and "
                    f"verify options)") from e
            code = e.args[0] if e.args and isinstance(e.args[0], int) else None
            if code == 2026:
                raise ServerConfigError(f"{self.where} does not offer TLS, but ssl options were "
                                        f"given: {e.args[-1]}") from e
            raise self._mysql_error(e) from e

    def _mysql_error(self, e) -> Exception:
        code = e.args[0] if e.args and isinstance(e.args[0], int) else None
        if code is None:
            return e
        msg = e.args[1] if len(e.args) > 1 else str(e)
        return map_server_error(code, str(msg), user=self.user, where=self.where,
                                grant=self._grant_hint())

    def _query(self, cur, sql: str, args=None) -> list[tuple]:
        import pymysql
        try:
            cur.execute(sql, args)
            return list(cur.fetchall()) if cur.description else []
        except pymysql.err.MySQLError as e:
            raise self._mysql_error(e) from e

    def _open(self) -> None:
        """One connection attempt: log in, check, negotiate, register, start the dump and read
        its first packet."""
        self._disconnect()
        conn = self.connect_sql()
        try:
            self._open_on(conn)
        except BaseException:
            try:
                conn._force_close()
            except Exception:
                pass
            self._reader = None
            raise

    def _open_on(self, conn) -> None:
        info = parse_server_version(conn.get_server_info())
        self.server = info
        cur = conn.cursor()
        names = ", ".join(f"'{v}'" for v in _VARIABLES)
        variables = {str(k).lower(): v for k, v in self._query(
            cur, f"SHOW GLOBAL VARIABLES WHERE Variable_name IN ({names})")}
        self._check_config(variables, info)
        self._account = quote_account(str(self._query(cur, "SELECT CURRENT_USER()")[0][0]))
        self._check_privileges(cur, info)
        if not self._connected_once and self.check_server_id:
            self._check_server_id(cur, info, variables)

        start = self._resume_start() if self._connected_once or self._position is not None \
            else None
        if start is None:
            start = self._resolve(cur, info, self.start)
            if self._position is None:
                self._position = self._initial_position(start)
        self._check_start(cur, info, variables, start)

        checksum = str(variables.get("binlog_checksum", "NONE") or "NONE").upper()
        self.checksum = ChecksumAlg.CRC32 if checksum == "CRC32" else ChecksumAlg.OFF
        for sql in self._session_sql(info, variables, start):
            self._query(cur, sql)
        cur.close()

        reader = take_over(conn)
        self._conn, self._reader = conn, reader
        sock = reader.sock
        reader.recv_size = 1 << 18
        deadline_s = max(self.connect_timeout, 5.0)
        sock.settimeout(min(self.tick, deadline_s))

        # COM_REGISTER_SLAVE is what makes SHOW SLAVE HOSTS / SHOW REPLICAS list us.
        self._command(register_slave(self.server_id, host=self.report_host, port=0),
                      expect_ok=True, deadline_s=deadline_s)

        flags = 0 if self.blocking else BINLOG_DUMP_NON_BLOCK
        if start.kind == "gtid":
            gtids = GtidSet.parse(start.gtid)
            cmd = binlog_dump_gtid(gtids.to_bytes(), self.server_id, flags=flags)
        elif start.kind == "mariadb_gtid":
            cmd = binlog_dump("", 4, self.server_id, flags=flags)
        else:
            cmd = binlog_dump(start.file, start.pos, self.server_id, flags=flags)
        first = self._command(cmd, expect_ok=False, deadline_s=deadline_s)
        if first[:1] == b"\xff":
            raise self._dump_error(first)
        self._pending = [first]
        self._last_packet_mono = time.monotonic()
        self.source_alive_at = time.time()
        self._parser = BinlogParser(stream=True, file=start.file if start.kind == "file" else None,
                                    checksum=self.checksum)
        self._asm = TransactionAssembler(self.table_filter)
        self._connected_once = True
        self.dump_thread_starts += 1
        log.info("streaming from %s (%s %s) at %s", self.where, info.flavor,
                 ".".join(map(str, info.version)), start.describe())

    def _command(self, payload: bytes, *, expect_ok: bool, deadline_s: float) -> bytes:
        reader = self._reader
        assert reader is not None
        try:
            reader.sock.sendall(frame(payload, 0))
        except OSError as e:
            raise ConnectionLost(f"sending a command to {self.where} failed: {e}") from e
        reader.seq = 1
        deadline = time.monotonic() + deadline_s
        while True:
            try:
                reply = reader.read_payload()
                break
            except TimeoutError:
                if self._closed:
                    raise _Closed() from None
                if time.monotonic() > deadline:
                    raise ConnectionLost(f"{self.where} did not answer within {deadline_s:.0f} s")
        if expect_ok and reply[:1] == b"\xff":
            err = parse_err(reply)
            raise map_server_error(err.code, err.message, user=self.user, where=self.where,
                                   grant=self._grant_hint())
        return reply

    # --- pre-flight checks ------------------------------------------------------------------------

    def _check_config(self, v: dict, info: ServerInfo) -> None:
        log_bin = str(v.get("log_bin", "OFF")).upper()
        if log_bin not in ("ON", "1"):
            raise ServerConfigError(
                f"binary logging is off on {self.where} (log_bin={log_bin}): start the server "
                f"with log_bin (e.g. log-bin=mysql-bin and server-id=1 in the [mysqld] section "
                f"of my.cnf) and restart it")
        fmt = str(v.get("binlog_format", "")).upper()
        if fmt != "ROW":
            raise ServerConfigError(
                f"binlog_format is {fmt or 'unknown'} on {self.where}; row-based CDC needs ROW: "
                f"run SET GLOBAL binlog_format = 'ROW' (affects new sessions) and put "
                f"binlog_format=ROW in the [mysqld] section of my.cnf")
        image = str(v.get("binlog_row_image", "FULL")).upper()
        if image != "FULL" and not self._warned_row_image:
            self._warned_row_image = True
            log.warning("binlog_row_image is %s on %s: row images will lack the columns the "
                        "server leaves out (they come out as ABSENT); SET GLOBAL "
                        "binlog_row_image = 'FULL' for complete before/after images",
                        image, self.where)

    def _check_privileges(self, cur, info: ServerInfo) -> None:
        try:
            grants = [str(r[0]) for r in self._query(cur, "SHOW GRANTS")]
        except PrivilegeError:
            return
        missing = missing_privileges(grants)
        if missing:
            raise PrivilegeError(
                f"user {self.user!r} ({self._account}) lacks {' and '.join(missing)} on "
                f"{self.where}, which a replica needs to read the binlog. Run as an "
                f"administrator: {grant_statement(info, self._account)}")

    def _check_server_id(self, cur, info: ServerInfo, variables: dict) -> None:
        import pymysql
        own = variables.get("server_id")
        if own is not None and str(own) == str(self.server_id):
            raise ServerIdConflictError(
                f"server_id {self.server_id} is the source's own server_id on {self.where}; "
                f"give this replica a different server_id")
        new_syntax = (not info.is_mariadb and info.version >= (8, 0, 22))
        sql = "SHOW REPLICAS" if new_syntax else "SHOW SLAVE HOSTS"
        try:
            cur.execute(sql)
            rows = list(cur.fetchall())
            cols = [d[0].lower() for d in cur.description or ()]
        except pymysql.err.MySQLError as e:
            log.debug("cannot check for server_id clashes (%s): %s", sql, e)
            return
        if "server_id" not in cols:
            return
        i = cols.index("server_id")
        h = cols.index("host") if "host" in cols else None
        for row in rows:
            if str(row[i]) == str(self.server_id):
                who = f" (host {row[h]!r})" if h is not None else ""
                raise ServerIdConflictError(
                    f"another replica{who} is connected to {self.where} with server_id "
                    f"{self.server_id} ({sql}); the server would disconnect one of the two. "
                    f"Give this replica a unique server_id (e.g. --server-id)")

    def _binary_logs(self, cur) -> list[tuple[str, int]]:
        rows = self._query(cur, "SHOW BINARY LOGS")
        return [(str(r[0]), int(r[1])) for r in rows]

    def _resolve(self, cur, info: ServerInfo, start: Start) -> Start:
        if start.kind == "earliest":
            logs = self._binary_logs(cur)
            if not logs:
                raise ServerConfigError(f"SHOW BINARY LOGS on {self.where} lists no file")
            return Start.at(logs[0][0], 4)
        if start.kind == "latest":
            if info.is_mariadb:
                sql = "SHOW MASTER STATUS"
            elif info.version >= (8, 2, 0):
                sql = "SHOW BINARY LOG STATUS"
            else:
                sql = "SHOW MASTER STATUS"
            rows = self._query(cur, sql)
            if not rows:
                raise ServerConfigError(f"{sql} on {self.where} returned nothing: is log_bin on?")
            return Start.at(str(rows[0][0]), int(rows[0][1]))
        return start

    def _check_start(self, cur, info: ServerInfo, v: dict, start: Start) -> None:
        if start.kind == "file":
            logs = self._binary_logs(cur)
            names = [n for n, _ in logs]
            if start.file not in names:
                have = f"{names[0]} .. {names[-1]}" if names else "no files"
                raise BinlogPurgedError(
                    f"binlog file {start.file} is not on {self.where} (it has {have}): it was "
                    f"purged, or never existed. Start from 'earliest' or from a GTID position "
                    f"instead (changes in the purged files are lost to this replica)")
        elif start.kind == "gtid":
            if info.is_mariadb:
                raise ConfigurationError(
                    f"{self.where} is MariaDB: give a MariaDB GTID position ('0-1-42'), not a "
                    f"MySQL GTID set")
            mode = str(v.get("gtid_mode", "OFF")).upper()
            if mode != "ON":
                raise ServerConfigError(
                    f"gtid_mode is {mode} on {self.where}; a GTID start needs gtid_mode=ON and "
                    f"enforce_gtid_consistency=ON (or start from a file and position)")
            purged = GtidSet.parse(str(v.get("gtid_purged") or ""))
            have = GtidSet.parse(start.gtid)
            missing = purged.subtract(have)
            if missing:
                raise BinlogPurgedError(
                    f"the server {self.where} has purged transactions the replica has not seen: "
                    f"{missing} (gtid_purged is {purged}, requested from {have or 'nothing'}). "
                    f"Those changes are lost to this replica; restart from a fresh snapshot")
        elif start.kind == "mariadb_gtid" and not info.is_mariadb:
            raise ConfigurationError(
                f"{self.where} is MySQL: give a GTID set ('uuid:1-42'), not a MariaDB GTID position")

    def _session_sql(self, info: ServerInfo, v: dict, start: Start) -> list[str]:
        sql = []
        new_names = not info.is_mariadb and info.version >= (8, 0, 26)
        if "binlog_checksum" in v:
            sql.append("SET @master_binlog_checksum = @@global.binlog_checksum")
            if new_names:
                sql.append("SET @source_binlog_checksum = @@global.binlog_checksum")
        if self._heartbeat_ns:
            sql.append(f"SET @master_heartbeat_period = {self._heartbeat_ns}")
            if new_names:
                sql.append(f"SET @source_heartbeat_period = {self._heartbeat_ns}")
        if info.is_mariadb:
            sql.append(f"SET @mariadb_slave_capability = {MARIA_SLAVE_CAPABILITY_GTID}")
            if start.kind == "mariadb_gtid":
                sql.append(f"SET @slave_connect_state = '{MariaGtidPosition.parse(start.gtid)}'")
                sql.append(f"SET @slave_gtid_strict_mode = {int(self.gtid_strict_mode)}")
                sql.append(f"SET @slave_gtid_ignore_duplicates = "
                           f"{int(self.gtid_ignore_duplicates)}")
        return sql

    # --- teardown ----------------------------------------------------------------------------------

    def _disconnect(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
            self._reader = None
            self._parser = None
            self._asm = None
            self._pending = []
        if conn is not None:
            try:
                conn._force_close()
            except Exception:
                pass

    def __repr__(self) -> str:
        return (f"<ReplicaClient {self.user}@{self.where} server_id={self.server_id} "
                f"position={self._position}>")
