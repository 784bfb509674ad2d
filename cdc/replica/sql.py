"""Plain SQL around a stream: connections made from a :class:`~cdc.replica.config.ReplicaConfig`,
statements with server errors mapped to binlog-cdc errors, the binlog's end and file list, and
resolving an ``earliest``/``latest`` start to a file position.
"""

from __future__ import annotations

import logging
import socket
import time
from typing import Any, Callable

from cdc.errors import (CR_CONN_HOST_ERROR, ER_SPECIFIC_ACCESS_DENIED, ConfigurationError,
                        ServerConfigError, ServerConnectionError, ServerUnreachableError,
                        is_transient, map_server_error)
from cdc.positions import Position, Start, parse_gtid_state
from cdc.replica.config import ReplicaConfig, RetryPolicy, unverified_context
from cdc.replica.server import (ServerInfo, current_account, grant_statement, privilege_error,
                                server_of)

log = logging.getLogger("cdc.replica")

__all__ = ["connect", "mysql_error", "fetch_rows", "SqlSession", "ask_on", "binlog_status",
           "binary_logs", "resolve_start"]

Query = Callable[..., list]


def connect(config: ReplicaConfig, *, grant: str | None = None, **pymysql_kwargs):
    """A plain autocommit SQL connection (PyMySQL, utf8mb4) with *config*'s host, account, TLS
    options and error messages; *grant* is the GRANT statement to suggest on a privilege error;
    *pymysql_kwargs* add to or override PyMySQL's arguments (e.g. ``cursorclass``). The caller
    closes it."""
    import pymysql
    # The handshake (the server's greeting, TLS, the login) gets connect_timeout: something that
    # accepts connections on the port but says nothing (not a MySQL server, a frozen one) fails
    # within it instead of PyMySQL's read timeout. Statements then get at least 30 s.
    statement_timeout = max(config.connect_timeout, 30.0)
    kw: dict[str, Any] = dict(host=config.host, port=config.port, user=config.user,
                              password=config.password.get(),
                              connect_timeout=config.connect_timeout,
                              read_timeout=config.connect_timeout,
                              write_timeout=config.connect_timeout,
                              charset="utf8mb4", autocommit=True)
    kw.update(pymysql_kwargs)
    if config.ssl is False:
        kw["ssl_disabled"] = True
    elif config.ssl is not None:
        kw["ssl"] = config.ssl.context()
    try:
        conn = _connection_class()(**kw)
        # PyMySQL applies these at the next read/write (Connection._read_bytes/_write_bytes)
        conn._read_timeout = pymysql_kwargs.get("read_timeout", statement_timeout)
        conn._write_timeout = pymysql_kwargs.get("write_timeout", statement_timeout)
        return conn
    except pymysql.err.MySQLError as e:
        import ssl as _ssl
        orig = getattr(e, "original_exception", None)
        if isinstance(orig, _ssl.SSLError):
            raise ConfigurationError(
                f"TLS handshake with {config.where} failed: {orig} (check ssl ca/cert/key and "
                f"verify options)") from e
        if isinstance(orig, (ConnectionRefusedError, socket.gaierror)):
            reason = "connection refused" if isinstance(orig, ConnectionRefusedError) else \
                "the host name does not resolve"
            raise ServerUnreachableError(f"cannot connect to {config.where}: {reason} ({orig}); "
                                         f"check the host and port, and that the server is up",
                                         CR_CONN_HOST_ERROR) from e
        code = e.args[0] if e.args and isinstance(e.args[0], int) else None
        if code == 2026:
            raise ServerConfigError(f"{config.where} does not offer TLS, but ssl options were "
                                    f"given: {e.args[-1]}") from e
        raise mysql_error(e, config, grant=grant) from e


_CONNECTION = None


def _connection_class():
    """PyMySQL's Connection, with the TLS context of its default (PREFERRED: TLS when the server
    offers it, unverified) made once per process instead of once per connection, and without
    the system CA store it would never consult (:func:`~cdc.replica.config.unverified_context`;
    PyMySQL's own loads it: 15-50 ms of CPU, paid by every replication connection -- the
    driver's scan and every task, each micro-batch -- and every query's planning process)."""
    global _CONNECTION
    if _CONNECTION is None:
        import pymysql.connections

        class Connection(pymysql.connections.Connection):
            _preferred = None

            def _create_ssl_ctx(self, sslp):
                if isinstance(sslp, dict) and not sslp:
                    cls = type(self)
                    if cls._preferred is None:
                        cls._preferred = unverified_context()
                    return cls._preferred
                return super()._create_ssl_ctx(sslp)

        _CONNECTION = Connection
    return _CONNECTION


def mysql_error(e, config: ReplicaConfig, *, grant: str | None = None) -> Exception:
    """The binlog-cdc error for a PyMySQL error (*e* itself when it carries no server code)."""
    code = e.args[0] if e.args and isinstance(e.args[0], int) else None
    if code is None:
        return e
    msg = e.args[1] if len(e.args) > 1 else str(e)
    return map_server_error(code, str(msg), user=config.user, where=config.where, grant=grant,
                            password_hint=config.password_hint)


def fetch_rows(conn, sql: str, args=None) -> list[tuple]:
    """Run one statement on a PyMySQL connection: its rows (``[]`` when it returns none)."""
    with conn.cursor() as cur:
        cur.execute(sql, args)
        return list(cur.fetchall()) if cur.description else []


class SqlSession:
    """One SQL connection, opened by *connect* on first use and opened again when the server
    has dropped it: ``run`` retries the call *retries* times (default once) on a new
    connection; with ``retries=0`` the error is raised and the next call reconnects. With a
    *retry* :class:`~cdc.replica.config.RetryPolicy` instead, a call rides out an outage of
    the server (refused connections, lost ones) with that policy's backoff and budget, logging
    each retry; *where* names the server in messages. Pickles without the connection."""

    def __init__(self, connect: Callable[[], Any], *, retries: int = 1,
                 retry: RetryPolicy | None = None, where: str = "the server"):
        self._connect = connect
        self.retries = retries
        self.retry = retry
        self.where = where
        self.conn = None
        self.connected = False      # a connection has been made once

    def run(self, call: Callable[[Any], Any]) -> Any:
        """``call(connection)``, retried on a fresh connection after a lost one."""
        if self.retry is not None:
            return self._run_with_policy(call, self.retry)
        import pymysql
        for attempt in range(self.retries + 1):
            if self.conn is None:
                self.conn = self._connect()
                self.connected = True
            try:
                return call(self.conn)
            except (pymysql.err.OperationalError, pymysql.err.InterfaceError):
                self.close()
                if attempt == self.retries:
                    raise
        raise AssertionError("unreachable")

    def _once(self, call: Callable[[Any], Any]) -> Any:
        if self.conn is None:
            self.conn = self._connect()
            self.connected = True
        try:
            return call(self.conn)
        except BaseException:
            self.close()
            raise

    def _run_with_policy(self, call: Callable[[Any], Any], p: RetryPolicy) -> Any:
        started = time.monotonic()
        tries = [0]

        def before_sleep(state) -> None:
            log.warning("SQL connection to %s failed (attempt %d: %s); retrying in %.1f s",
                        self.where, state.attempt_number, state.outcome.exception(),
                        state.next_action.sleep if state.next_action else 0)

        retrying = p.retrying(before_sleep=before_sleep, first=not self.connected)
        try:
            for attempt in retrying:
                with attempt:
                    tries[0] += 1
                    return self._once(call)
        except Exception as e:
            if tries[0] > 1 and is_transient(e):
                raise ServerConnectionError(
                    f"{self.where} stayed unreachable: {tries[0]} attempts in "
                    f"{time.monotonic() - started:.1f} s; last error: {e}") from e
            raise
        raise AssertionError("unreachable")

    def query(self, sql: str, args=None) -> list[tuple]:
        """The rows of one statement (:func:`fetch_rows`), through :meth:`run`."""
        return self.run(lambda conn: fetch_rows(conn, sql, args))

    def ask(self, ask: Callable, config: ReplicaConfig | None = None):
        """:func:`ask_on` this session's connection, through :meth:`run`."""
        return self.run(lambda conn: ask_on(conn, ask, config))

    def server_version(self) -> str:
        """The server's version text (connecting if needed)."""
        return self.run(lambda conn: str(conn.get_server_info()))

    def close(self) -> None:
        conn, self.conn = self.conn, None
        if conn is not None:
            try:
                conn.close()
            except Exception:
                pass

    def __getstate__(self):
        return dict(self.__dict__, conn=None)


def ask_on(conn, ask: Callable, config: ReplicaConfig | None = None):
    """``ask(query, server, config)`` -- :func:`binlog_status`, :func:`binary_logs` -- on a
    PyMySQL connection, *server* its server."""
    return ask(lambda sql: fetch_rows(conn, sql), server_of(conn), config)


def _monitored(query: Query, sql: str, server: ServerInfo | None,
               config: ReplicaConfig | None) -> list:
    """The rows of *sql*, a statement that needs the binlog monitor privilege (REPLICATION
    CLIENT, MariaDB 10.5.2+: BINLOG MONITOR). With the *server* and the source's *config*, a
    refusal for want of it is a PrivilegeError with the GRANT to run; other errors are raised as
    they are."""
    import pymysql
    try:
        return query(sql)
    except pymysql.err.MySQLError as e:
        code = e.args[0] if e.args and isinstance(e.args[0], int) else None
        if code != ER_SPECIFIC_ACCESS_DENIED or server is None or config is None:
            raise
        account = current_account(lambda q, args=None: query(q), config.user)
        raise privilege_error(user=config.user, account=account, where=config.where,
                              lacking=server.monitor_privilege,
                              needed_for=f"binlog-cdc needs to read the binlog's end and files "
                                         f"({sql})",
                              grant=grant_statement(server, account)) from e


def binlog_status(query: Query, server: ServerInfo,
                  config: ReplicaConfig | None = None) -> Position:
    """The binlog's end now (on MySQL with the executed GTID set there: ``Executed_Gtid_Set``),
    asked with ``query(sql) -> rows`` in *server*'s words (:attr:`ServerInfo.status_sql`);
    *config*: the source's (errors: see :func:`_monitored`)."""
    sql = server.status_sql
    rows = _monitored(query, sql, server, config)
    if not rows:
        where = config.where if config is not None else "the server"
        raise ConfigurationError(f"{sql} on {where} returned nothing: is the binary log on "
                                 f"(log_bin)?")
    row = rows[0]
    executed = str(row[4]) if len(row) > 4 and row[4] is not None else None
    gtid = parse_gtid_state(executed, mariadb=False) if executed is not None else None
    return Position(str(row[0]), int(row[1]), gtid)


def binary_logs(query: Query, server: ServerInfo | None = None,
                config: ReplicaConfig | None = None) -> list[tuple[str, int]]:
    """``SHOW BINARY LOGS``: (file name, size) of every binlog file the server has, oldest
    first; *server*, *config*: see :func:`_monitored`."""
    return [(str(r[0]), int(r[1])) for r in _monitored(query, "SHOW BINARY LOGS", server,
                                                        config)]


def resolve_start(query: Query, start: Start, server: ServerInfo, config: ReplicaConfig) -> Start:
    """*start* with ``earliest`` (the oldest binlog file the server has, position 4) and
    ``latest`` (the binlog end now) resolved to file starts; others are returned as they are."""
    if start.kind == "earliest":
        logs = binary_logs(query, server, config)
        if not logs:
            raise ServerConfigError(f"SHOW BINARY LOGS on {config.where} lists no file: is the "
                                    f"binary log on (log_bin)?")
        return Start.at(logs[0][0], 4)
    if start.kind == "latest":
        end = binlog_status(query, server, config)
        return Start.at(end.file, end.pos)
    return start
