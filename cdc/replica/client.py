"""A replica client: streams committed transactions from a live MySQL or MariaDB server.

::

    from cdc.positions import Start
    from cdc.replica.client import ReplicaClient
    from cdc.replica.config import ReplicaConfig

    config = ReplicaConfig("db.example", 3306, "cdc", "secret", server_id=4242,
                           heartbeat_interval=5)
    client = ReplicaClient(config, start=Start.latest())
    for tx in client.transactions():              # blocks; Ctrl-C / client.close() ends it
        for change in tx.changes():
            print(change.op, change.schema, change.table, change.before, change.after)
        save_checkpoint(client.position)          # resume later with start=client.position

How it works: log in with PyMySQL (:func:`cdc.replica.sql.connect`: every auth plugin PyMySQL
supports, caching_sha2_password included; optional TLS), run the pre-flight checks of
:mod:`cdc.replica.preflight`, negotiate checksums/heartbeats/MariaDB capabilities,
``COM_REGISTER_SLAVE``, then send ``COM_BINLOG_DUMP`` (file/position, MariaDB GTID) or
``COM_BINLOG_DUMP_GTID`` (MySQL GTID set) and read the event packets ourselves
(:mod:`cdc.replica.packets`) into the sans-IO parser and the
:class:`~cdc.binlog.transactions.TransactionAssembler`.

Positions and resuming: :attr:`ReplicaClient.position` is the point right after the most recently
yielded transaction (its ``end_pos``; in GTID modes also the GTID set / MariaDB GTID position
with that transaction added). A transaction is yielded only once its commit event has arrived,
and a lost connection is resumed from :attr:`position` -- so nothing already yielded comes again
and nothing is skipped, however often the connection drops, the server restarts or binlogs
rotate.

XA transactions (:mod:`cdc.binlog.xa`): a prepared one is held, its changes yielded with the
transaction of its XA COMMIT. :attr:`position` past an undecided XA PREPARE names it
(:attr:`~cdc.positions.Position.prepared`); a client resuming there reads it again before
streaming (:mod:`cdc.replica.prepared`), so a restart between the XA PREPARE and the XA COMMIT
neither loses nor repeats its changes.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from types import MappingProxyType
from typing import Iterator, Mapping

from cdc.binlog.constants import ChecksumAlg
from cdc.binlog.events import HeartbeatEvent, QueryEvent, RotateEvent, TableMapEvent
from cdc.binlog.gtid import GtidSet
from cdc.binlog.parser import BinlogParser
from cdc.binlog.transactions import Transaction, TransactionAssembler
from cdc.errors import (CdcError, ConfigurationError, ConnectionLost, ParseError, ProtocolError,
                        ServerConnectionError, ServerUnreachableError, connect_reason,
                        is_transient, map_server_error, not_an_event_start)
from cdc.positions import Position, Start
from cdc.replica import preflight
from cdc.replica.config import ReplicaConfig
from cdc.replica.packets import PacketReader, frame, is_eof, parse_err, take_over
from cdc.replica.protocol import (binlog_dump, binlog_dump_gtid, dump_flags, heartbeat_period_ns,
                                  register_slave)
from cdc.replica.server import ServerInfo, grant_statement, quote_account, server_of
from cdc.replica.metadata import TableMetadata
from cdc.replica.prepared import read_prepared
from cdc.replica.seeding import HistorySource
from cdc.replica.sql import SqlSession, connect, mysql_error, resolve_start

__all__ = ["ReplicaClient"]

log = logging.getLogger("cdc.replica")


class _Closed(Exception):
    """close() was called: stop quietly."""


class ReplicaClient:
    """Streams committed transactions from a MySQL (5.7-9.x) or MariaDB (10.x-11.x) server.

    :param config: the :class:`~cdc.replica.config.ReplicaConfig` (server, account, TLS,
        heartbeat, retries, table filter, server_id; a server_id clash is checked at the first
        connect: :class:`~cdc.errors.ServerIdConflictError`).
    :param start: a :class:`~cdc.positions.Start`, a :class:`~cdc.positions.Position`
        (resume), or any spelling :meth:`Start.parse` reads (default ``"latest"``).
    :param blocking: True: wait for new transactions forever; False: stop at the end of the
        binlog as it is when the server reaches it (``BINLOG_DUMP_NON_BLOCK``).
    """

    def __init__(self, config: ReplicaConfig, *, start="latest", blocking: bool = True):
        if not isinstance(config, ReplicaConfig):
            raise ConfigurationError(f"ReplicaClient needs a ReplicaConfig, not {config!r}")
        self.config = config
        self.start = Start.parse(start)
        self.blocking = blocking
        hb = config.heartbeat_interval
        self._heartbeat_ns = heartbeat_period_ns(hb) if hb else None

        # state visible to users
        self.server: ServerInfo | None = None
        self.source_alive_at: float | None = None   # time.time() of the last packet
        self.heartbeats = 0
        self.last_heartbeat: tuple[str, int] | None = None
        self.reconnects = 0
        self.partial_transactions_dropped = 0   # cut off by a lost connection, then re-read
        self.transactions_delivered = 0
        self.checksum: ChecksumAlg | None = None
        self._position = self.start.position()
        self._previous_position: Position | None = None
        self._read_to: tuple[str | None, int] | None = None
        self._last_commit_ts: int | None = None
        self._caught_up = False

        # connection state
        self._lock = threading.RLock()
        self._conn = None
        self._reader: PacketReader | None = None
        self._parser: BinlogParser | None = None
        self._asm: TransactionAssembler | None = None
        self._prepared: dict[str, Transaction] = {}     # held XA transactions, across dumps
        self._pending: list[bytes] = []
        self._connected_once = False
        self._closed = False
        self._wake = threading.Event()
        self._last_packet_mono = 0.0
        self._warned_row_image = False
        self.dump_thread_starts = 0
        # What TABLE_MAPs lack (no binlog_row_metadata=FULL): from the schema history (seeded
        # from information_schema at the first connect, then following the binlog's DDL), or
        # information_schema itself, on a connection of its own (cdc.replica.metadata, .seeding).
        self._metadata_sql = SqlSession(lambda: connect(self.config, grant=self._grant_hint()))
        self._schema_source = source = HistorySource(config, self._metadata_query)
        self.metadata = TableMetadata(self._metadata_query, history=source.new_history(),
                                      seed=source.seed, check_hidden=source.check_hidden)
        source.metadata = self.metadata
        self.last_connect_failure: str | None = None   # why the last attempt failed

    # --- public state ------------------------------------------------------------------------

    @property
    def position(self) -> Position | None:
        """Right after the last transaction yielded (None until an earliest/latest start has
        been resolved by the first connect)."""
        return self._position

    @property
    def prepared(self) -> Mapping[str, Transaction]:
        """The prepared XA transactions held (xid -> the transaction with its changes): those
        :attr:`position` names, once read."""
        return MappingProxyType(self._prepared)

    @property
    def previous_position(self) -> Position | None:
        """Right before the last transaction yielded (resume here to get it again)."""
        return self._previous_position

    @property
    def read_to(self) -> tuple[str | None, int] | None:
        """(file, end position) of the last event the current dump delivered (None before the
        first one with a position): how far the source sent the binlog, past
        :attr:`position` when events other than transactions (a ROTATE closing a file, a
        transaction cut off by the end of the dump) came after the last one. A non-blocking
        dump ends with the same EOF at the end of the binlog and when the source shuts down;
        this tells the two apart for a reader that knows where a file ends."""
        return self._read_to

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
        return self.config.where

    @property
    def server_id(self) -> int:
        return self.config.server_id

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
                    if not is_transient(e):     # e.g. a payload over max_packet_size
                        raise
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

    def reseed_schema(self) -> None:
        """Read the captured tables' shapes from information_schema again, to be used from
        :attr:`position` on (after a :class:`~cdc.errors.SchemaError` saying the schema history
        lost track of a table; then iterate again). A table changed since :attr:`position` is
        described from the end of its last change on (unknown before it)."""
        history = self.metadata.history
        if history is None:
            raise ConfigurationError("reseed_schema() needs schema_history=True")
        pos = self._position
        at = (pos.file, pos.pos) if pos is not None and pos.file is not None else None
        self._schema_source.seed(history, at=at)

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
        cfg = self.config
        tick = min(cfg.tick, max_idle if max_idle is not None else cfg.tick,
                   cfg.read_timeout / 2 if cfg.read_timeout else cfg.tick)
        tick = max(0.01, tick)
        reader.sock.settimeout(tick)
        idle_since = time.monotonic()
        mysql_gtid = self.start.kind == "gtid" or (self._position is not None and
                                                   self._position.gtid_set is not None)
        while True:
            if self._pending:
                payloads = [self._pending.pop(0)]
            else:
                # what the last receive brought, all at once; else wait for more
                payloads = reader.ready()
                if not payloads:
                    try:
                        payloads = [reader.read_payload()]
                    except TimeoutError:
                        if self._closed:
                            return
                        now = time.monotonic()
                        if max_idle is not None and now - idle_since >= max_idle:
                            return
                        if cfg.read_timeout and now - self._last_packet_mono > cfg.read_timeout:
                            raise ConnectionLost(
                                f"nothing (not even a heartbeat) from the source for "
                                f"{now - self._last_packet_mono:.0f} s") from None
                        continue
                self._last_packet_mono = time.monotonic()
                self.source_alive_at = time.time()
            for payload in payloads:
                head = payload[0] if payload else -1
                if head == 0:
                    try:
                        events = parser.feed_event(memoryview(payload)[1:])
                    except ParseError as e:
                        raise self._unparsed(e) from e
                    last = events[-1]
                    if last.end_pos and type(last) is not HeartbeatEvent:
                        self._read_to = (last.file, last.end_pos)
                elif head == 0xFF:
                    raise self._dump_error(payload, self._resume_start())
                elif is_eof(payload):
                    if self.blocking:
                        # A blocking dump never ends by itself: MariaDB sends EOF when it shuts
                        # down.
                        raise ConnectionLost("the server ended the binlog dump (shutting down?)")
                    self._caught_up = True
                    return
                else:
                    raise ProtocolError(f"unexpected replication packet starting with "
                                        f"0x{head:02x}")
                for ev in events:
                    tev = type(ev)
                    if tev is TableMapEvent:
                        self.metadata.complete(ev.table, file=ev.file, position=ev.pos)
                    elif tev is QueryEvent:
                        # DDL: the schema history follows it (and says what changed)
                        if self.metadata.on_query(ev) and cfg.include_schema_changes:
                            asm.schema_changed(ev, self.metadata.history.last_changes)
                    tx = asm.push(ev)
                    if tx is not None:
                        pos = self._position
                        if mysql_gtid and tx.gtid and pos is not None and \
                                pos.gtid_set is not None and tx.gtid in pos.gtid_set:
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
        previous = self._position
        pos = previous if previous is not None else Position(None, None)
        end = tx.end_pos
        if end is None:  # a commit event without log_pos (never seen from a real server)
            log.warning("transaction %s has no end position; file resume point not advanced", tx)
            file, end = (pos.file, pos.pos) if previous is not None else (tx.file, None)
        else:
            file = tx.file
        self._previous_position = previous
        self._position = pos.after(file, end, tx.gtid, tx.xa)
        if tx.xa is not None and tx.xa.missing and tx.xa.action == "commit":
            log.warning("XA COMMIT of %s at %s:%s: its XA PREPARE came before this stream's "
                        "start, so its changes are not delivered", tx.xa.xid, tx.file, tx.pos)
        self._last_commit_ts = tx.timestamp
        self._caught_up = False
        self.transactions_delivered += 1

    def _rotated(self, ev: RotateEvent, asm: TransactionAssembler) -> None:
        pos = self._position
        if ev.artificial:
            # Where the dump starts (or, after a file the server finished reading, continues):
            # the current file -- not a transaction boundary of ours.
            if pos is not None and pos.file is None:
                self._position = pos.moved_to(ev.next_file, ev.next_position)
            return
        if not asm.in_transaction and pos is not None:
            # A real rotation between transactions: resuming at the new file skips nothing.
            self._position = pos.moved_to(ev.next_file, ev.next_position)

    def _unparsed(self, e: ParseError) -> CdcError:
        """Bytes of the dump that do not parse before any event of it did, from a file position
        the user gave: that position is not where an event begins."""
        start = self.start
        if self._read_to is not None or start.kind != "file" or start.pos <= 4 or \
                self._position != start.position():
            return e
        return not_an_event_start(start.describe(), f" ({self.where})",
                                  f"what the server sent from there is not an event: {e}")

    def _dump_error(self, payload: bytes, start: Start | None = None) -> CdcError:
        """The error of an ERR packet; *start*: what was asked for (the dump's)."""
        err = parse_err(payload)
        return map_server_error(err.code, err.message, user=self.config.user, where=self.where,
                                start=start.describe() if start else None,
                                grant=self._grant_hint(), password_hint=self.config.password_hint)

    # --- connecting ------------------------------------------------------------------------------

    def _sleep(self, seconds: float) -> None:
        if self._wake.wait(seconds) or self._closed:
            raise _Closed()

    def _connect_with_retry(self) -> None:
        p = self.config.retry
        first = not self._connected_once
        # The first connection ever: a bounded try (a wrong port is an error), then the policy.
        max_time = p.max_time
        if first:
            budget = p.first_connect_time if p.first_connect_time is not None else \
                self.config.connect_timeout
            max_time = budget if max_time is None else min(max_time, budget)
        started = time.monotonic()
        attempts = [0]

        def before_sleep(state) -> None:
            exc = state.outcome.exception()
            self.last_connect_failure = connect_reason(exc)
            log.warning("connecting to %s failed (attempt %d: %s); retrying in %.1f s",
                        self.where, state.attempt_number, self.last_connect_failure,
                        state.next_action.sleep if state.next_action else 0)

        retrying = p.retrying(max_time=max_time, sleep=self._sleep,
                              before_sleep=before_sleep, first=first)
        try:
            for attempt in retrying:
                with attempt:
                    attempts[0] += 1
                    if self._closed:
                        raise _Closed()
                    self._open()
        except _Closed:
            raise
        except ServerUnreachableError as e:
            if first and not p.retry_unreachable_first:    # a wrong host or port
                self.last_connect_failure = str(e)
                raise ServerConnectionError(str(e)) from e
            raise ServerConnectionError(
                f"could not (re)connect to {self.where} after {attempts[0]} attempt(s) in "
                f"{time.monotonic() - started:.1f} s; last error: {e}") from e
        except Exception as e:
            if is_transient(e) and first:
                raise ServerConnectionError(
                    f"cannot connect to {self.where}: {connect_reason(e)} ({attempts[0]} "
                    f"attempt(s) in {time.monotonic() - started:.1f} s; check the host and port, "
                    f"and that the server is up)") from e
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
        return grant_statement(self.server, getattr(self, "_account", f"'{self.config.user}'@'%'"))

    def _query(self, conn, sql: str, args=None) -> list[tuple]:
        import pymysql
        try:
            with conn.cursor() as cur:
                cur.execute(sql, args)
                return list(cur.fetchall()) if cur.description else []
        except pymysql.err.MySQLError as e:
            raise mysql_error(e, self.config, grant=self._grant_hint()) from e

    def _metadata_query(self, sql: str, args=None) -> list[tuple]:
        """A statement on the metadata connection (reopened once after a lost one)."""
        import pymysql
        try:
            return self._metadata_sql.query(sql, args)
        except pymysql.err.MySQLError as e:
            raise mysql_error(e, self.config, grant=self._grant_hint()) from e

    def _open(self) -> None:
        """One connection attempt: log in, check, negotiate, register, start the dump and read
        its first packet."""
        self._disconnect()
        conn = connect(self.config, grant=self._grant_hint())
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
        cfg = self.config
        info = server_of(conn)
        self.server = info
        self.start, self._position = preflight.in_server_kind(self.start, self._position, info)

        def query(sql, args=None):
            return self._query(conn, sql, args)

        variables = preflight.server_variables(query)
        if preflight.check_binlog_config(variables, self.where,
                                         warn_row_image=not self._warned_row_image):
            self._warned_row_image = True
        self._account = quote_account(str(query("SELECT CURRENT_USER()")[0][0]))
        preflight.check_privileges(query, info, user=cfg.user, account=self._account,
                                   where=self.where)
        if not self._connected_once and cfg.check_server_id:
            preflight.check_server_id(conn, info, variables, server_id=cfg.server_id,
                                      where=self.where)

        start = self._resume_start() if self._connected_once or self._position is not None \
            else None
        self._schema_source.server = info     # for the schema history's information_schema reads
        if start is None:
            # at the binlog's end: the schema history is read first, and the stream starts
            # where that read holds (every later DDL statement is then applied to it)
            at = self._schema_source.seed(self.metadata.history) if \
                self.start.kind == "latest" and self._seed_at_start(variables) else None
            start = Start.at(*at) if at else resolve_start(query, self.start, info, cfg)
            if self._position is None:
                self._position = start.position()
        preflight.check_start(query, info, variables, start, where=self.where)
        pos = self._position
        if pos is not None and pos.prepared:
            self._position = pos.holding(read_prepared(pos.prepared, self._prepared, self))

        checksum = str(variables.get("binlog_checksum", "NONE") or "NONE").upper()
        self.checksum = ChecksumAlg.CRC32 if checksum == "CRC32" else ChecksumAlg.OFF
        for sql in preflight.session_sql(info, variables, start, heartbeat_ns=self._heartbeat_ns,
                                         gtid_strict_mode=cfg.gtid_strict_mode,
                                         gtid_ignore_duplicates=cfg.gtid_ignore_duplicates):
            query(sql)

        reader = take_over(conn, max_payload=cfg.max_packet_size)
        self._conn, self._reader = conn, reader
        sock = reader.sock
        reader.recv_size = 1 << 18
        deadline_s = max(cfg.connect_timeout, 5.0)
        sock.settimeout(min(cfg.tick, deadline_s))

        # COM_REGISTER_SLAVE is what makes SHOW SLAVE HOSTS / SHOW REPLICAS list us.
        self._command(register_slave(cfg.server_id, host=cfg.replica_host, port=0),
                      expect_ok=True, deadline_s=deadline_s)

        flags = dump_flags(info, variables, blocking=self.blocking)
        if start.kind == "gtid":
            gtids = GtidSet.parse(start.gtid)
            cmd = binlog_dump_gtid(gtids.to_bytes(), cfg.server_id, flags=flags)
        elif start.kind == "mariadb_gtid":
            cmd = binlog_dump("", 4, cfg.server_id, flags=flags)
        else:
            cmd = binlog_dump(start.file, start.pos, cfg.server_id, flags=flags)
        first = self._command(cmd, expect_ok=False, deadline_s=deadline_s)
        if first[:1] == b"\xff":
            raise self._dump_error(first, self._resume_start())
        self._pending = [first]
        self._read_to = None
        self._last_packet_mono = time.monotonic()
        self.source_alive_at = time.time()
        self._parser = BinlogParser(**self._parser_options(start))
        self._asm = TransactionAssembler(cfg.table_filter, prepared=self._prepared)
        self._connected_once = True
        self.dump_thread_starts += 1
        log.info("streaming from %s (%s %s) at %s", self.where, info.flavor,
                 ".".join(map(str, info.version)), start.describe())

    def _seed_at_start(self, variables: dict) -> bool:
        """Whether the schema history is read when the stream starts: it is not seeded yet, and
        table maps lack column metadata or the schema changes are wanted (without them, a
        FULL-metadata stream reads it only when a DDL statement needs it)."""
        h = self.metadata.history
        if h is None or h.seeded:
            return False
        full = str(variables.get("binlog_row_metadata") or "").upper() == "FULL"
        return not full or self.config.include_schema_changes

    def _parser_options(self, start: Start) -> dict:
        opts = dict(stream=True, file=start.file if start.kind == "file" else None,
                    checksum=self.checksum, charset=None)   # charsets: TableMetadata's job
        if self.config.row_decoder is not None:
            opts["row_decoder"] = self.config.row_decoder
        return opts

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
            raise self._dump_error(reply)
        return reply

    # --- teardown ----------------------------------------------------------------------------------

    def _disconnect(self) -> None:
        with self._lock:
            conn, self._conn = self._conn, None
            self._reader = None
            self._parser = None
            self._asm = None
            self._pending = []
        self._metadata_sql.close()
        if conn is not None:
            try:
                conn._force_close()
            except Exception:
                pass

    def __repr__(self) -> str:
        return (f"<ReplicaClient {self.config.user}@{self.where} server_id={self.server_id} "
                f"position={self._position}>")
