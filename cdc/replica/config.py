"""How to reach a source server: the one config object, built once from CLI arguments or Spark
options and passed down to SQL connections and replica clients.

* :class:`ReplicaConfig` -- server, account, TLS, timeouts, heartbeat, retries, table filter.
* :class:`Secret` -- a password that never shows in reprs, logs, plans or pickles' reprs.
* :class:`SslOptions`, :class:`RetryPolicy` -- the TLS and reconnect settings.
* :func:`read_password` -- a password from its value, a file, or ``$BINLOG_CDC_PASSWORD``.
"""

from __future__ import annotations

import os
import random
import socket
from dataclasses import dataclass, field, replace
from typing import Mapping

from cdc.errors import CLI_PASSWORD_HINT, ConfigurationError

__all__ = ["ReplicaConfig", "Secret", "SslOptions", "RetryPolicy", "read_password",
           "random_server_id", "PASSWORD_ENV", "SSL_MODES", "CLI_PASSWORD_HINT",
           "MAX_PACKET_SIZE", "ON_UNPARSED_DDL"]

#: The environment variable a password is read from when no other is given.
PASSWORD_ENV = "BINLOG_CDC_PASSWORD"

#: The largest payload the client accepts (MySQL's largest max_allowed_packet: 1 GiB).
MAX_PACKET_SIZE = 1 << 30

#: ``on_unparsed_ddl`` values (:data:`cdc.schema.history.ON_UNPARSED_DDL`)
ON_UNPARSED_DDL = ("fail", "skip", "reseed")


class Secret:
    """A password that never shows itself: ``repr``/``str``/format give ``***``; :meth:`get`
    returns it."""

    __slots__ = ("_value",)

    def __init__(self, value: str = ""):
        self._value = value or ""

    def get(self) -> str:
        return self._value

    def __repr__(self) -> str:
        return "Secret('***')"

    def __str__(self) -> str:
        return "***"

    def __format__(self, spec: str) -> str:
        return "***"

    def __bool__(self) -> bool:
        return bool(self._value)

    def __eq__(self, other) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(("Secret", self._value))

    def __reduce__(self):
        return (Secret, (self._value,))


def read_password(password: str | None = None, password_file: str | None = None, *,
                  file_option: str = "--password-file") -> Secret:
    """The password given, else the first line of *password_file*, else ``$BINLOG_CDC_PASSWORD``
    (else empty). *file_option* names the file's option in the error (CLI or Spark)."""
    if password:
        return Secret(password)
    if password_file:
        try:
            with open(password_file, encoding="utf-8") as f:
                return Secret(f.readline().rstrip("\r\n"))
        except OSError as e:
            raise ConfigurationError(f"cannot read {file_option} {password_file}: "
                                     f"{e.strerror or e}") from None
    return Secret(os.environ.get(PASSWORD_ENV, ""))


def random_server_id(lo: int = 1_000_000_000, hi: int = 1_999_999_999) -> int:
    """A replica server_id unlikely to clash with another replica's."""
    return random.SystemRandom().randint(lo, hi)


@dataclass(frozen=True)
class RetryPolicy:
    """How to reconnect after a lost connection: exponential backoff with jitter
    (``initial_backoff * 2**n + uniform(0, jitter)``, at most ``max_backoff``), until
    ``max_attempts`` attempts or ``max_time`` seconds (None: no limit) have been spent.

    The first connection of a client (before any stream has started) is tried for at most
    ``first_connect_time`` seconds (None: the config's ``connect_timeout``): a wrong host or
    port is an error, not an endless retry. A first connection that is refused or whose host
    name does not resolve (:class:`~cdc.errors.ServerUnreachableError`) fails at once, unless
    ``retry_unreachable_first`` (for connections of a Spark task: its query has reached the
    server before, which may be restarting now)."""

    max_attempts: int | None = 20
    max_time: float | None = 300.0
    initial_backoff: float = 0.5
    max_backoff: float = 10.0
    jitter: float = 0.5
    first_connect_time: float | None = None
    retry_unreachable_first: bool = False

    def retrying(self, *, max_time: float | None = None, sleep=None, before_sleep=None,
                 first: bool = False):
        """A ``tenacity.Retrying`` of this policy that retries transient errors
        (:func:`cdc.errors.is_transient`) and re-raises the last one; *max_time* overrides the
        policy's (e.g. a first connection's shorter budget), *sleep*/*before_sleep* are
        tenacity's hooks; *first*: a first connection (an unreachable server is not retried
        unless ``retry_unreachable_first``)."""
        from tenacity import (Retrying, retry_if_exception, stop_after_attempt,
                              stop_after_delay, stop_never, wait_exponential_jitter)

        from cdc.errors import ServerUnreachableError, is_transient
        fail_fast = first and not self.retry_unreachable_first

        def retry(e: BaseException) -> bool:
            return is_transient(e) and not (fail_fast and isinstance(e, ServerUnreachableError))
        limit = self.max_time if max_time is None else max_time
        stop = stop_never
        if self.max_attempts is not None:
            stop = stop_after_attempt(self.max_attempts)
        if limit is not None:
            stop = stop_after_delay(limit) if stop is stop_never else \
                stop | stop_after_delay(limit)
        kw = {"sleep": sleep} if sleep is not None else {}
        return Retrying(stop=stop, wait=wait_exponential_jitter(
            multiplier=self.initial_backoff, max=self.max_backoff, jitter=self.jitter),
            retry=retry_if_exception(retry), before_sleep=before_sleep, reraise=True, **kw)


#: MySQL's ``ssl-mode`` values, weakest first (see :meth:`SslOptions.from_mode`).
SSL_MODES = ("disabled", "preferred", "required", "verify_ca", "verify_identity")


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
    def from_mode(cls, mode: str | None, *, ca: str | None = None, cert: str | None = None,
                  key: str | None = None, option: str = "sslMode") -> "SslOptions | bool | None":
        """The TLS setting of a MySQL-style ``ssl-mode`` (the one place the modes are mapped,
        for the CLI's ``--ssl-mode`` and Spark's ``sslMode``; *option* names it in errors):

        * ``disabled``: never TLS (False);
        * ``preferred`` (the default, also None): TLS when the server offers it, certificate not
          checked (None); with a client *cert*, TLS is required (still unchecked);
        * ``required``: TLS or no connection, certificate not checked;
        * ``verify_ca``: TLS, and the server's certificate must be signed by *ca* (default: the
          system's trust store);
        * ``verify_identity``: ``verify_ca`` and the host name must match the certificate.
        """
        m = (mode or "preferred").strip().lower().replace("-", "_")
        if m not in SSL_MODES:
            raise ConfigurationError(f"{option} must be one of {', '.join(SSL_MODES)}, not "
                                     f"{mode!r}")
        if m == "disabled":
            if ca or cert or key:
                raise ConfigurationError(f"{option}=disabled turns TLS off, but TLS files were "
                                         f"given: drop them or choose another {option}")
            return False
        if m == "preferred" and not (cert or key):
            return None
        verify = m in ("verify_ca", "verify_identity")
        return cls(ca=ca, cert=cert, key=key, verify=verify,
                   verify_identity=m == "verify_identity")

    @classmethod
    def coerce(cls, value) -> "SslOptions | bool | None":
        """None (TLS when offered, unverified), False (never), True (required, unverified), a
        mapping of the fields (``ssl_ca``-style aliases too) or an :class:`SslOptions`."""
        if value is None or value is False:
            return value
        if value is True:
            return cls(verify=False)
        if isinstance(value, str):
            return cls.from_mode(value, option="ssl")
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
        if not (verify or self.ca or self.cert):
            return unverified_context()
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


def unverified_context():
    """A TLS client context that encrypts but verifies nothing (``ssl-mode`` PREFERRED and
    REQUIRED): the default context's settings without loading the system's CA store, which it
    would never consult (15-50 ms of CPU in every process that connects)."""
    import ssl as _ssl
    ctx = _ssl.SSLContext(_ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = _ssl.CERT_NONE
    return ctx


@dataclass(frozen=True)
class ReplicaConfig:
    """Everything needed to reach a source server and follow its binlog (not where to start:
    that is the stream's :class:`~cdc.positions.Start`).

    :param server_id: this replica's id (None: a random one, see :func:`random_server_id`);
        must differ from the source's and every other replica's.
    :param ssl: None (PyMySQL's default: TLS when the server offers it, unverified), False
        (never TLS), True (require TLS, unverified), an ``ssl-mode`` name (``"verify_identity"``:
        :meth:`SslOptions.from_mode`), a mapping or :class:`SslOptions`.
    :param heartbeat_interval: ask the source for a heartbeat after this many idle seconds; also
        arms dead-connection detection (no packet for ``read_timeout``, default
        ``2 * heartbeat_interval + 5`` s, means the connection is dead: reconnect).
    :param table_filter: a :class:`~cdc.binlog.transactions.TableFilter`, a callable on
        ``"db.table"`` or a list of ``db.table`` globs to include.
    :param retry: the :class:`RetryPolicy` for (re)connecting.
    :param check_server_id: check SHOW REPLICAS / SHOW SLAVE HOSTS for a clash at the first
        connect.
    :param row_decoder: ``"c"``, ``"python"`` or None (the default: ``$BINLOG_CDC_DECODER``).
    :param password_hint: where the password is set, named by an authentication error.
    :param max_packet_size: the largest payload (event) accepted from the server; a larger one
        is a :class:`~cdc.errors.ProtocolError` instead of unbounded memory.
    :param schema_history: follow the captured tables' shapes along the binlog
        (:mod:`cdc.schema`): seeded from information_schema at the stream's start, then from
        the binlog's DDL; table maps without full metadata are completed from the shape *of
        their time*. False: from information_schema as it is now (checked by column types).
    :param on_unparsed_ddl: a DDL statement that names a captured table but cannot be parsed:
        ``"fail"`` (the default: :class:`~cdc.errors.SchemaError`), ``"skip"`` (ignore it: the
        table keeps its previous shape) or ``"reseed"`` (read the table again from
        information_schema if the stream is at the binlog's end, else its shape is unknown
        from there).
    :param include_schema_changes: transactions carry the DDL statements that change captured
        tables as schema changes (:attr:`~cdc.binlog.transactions.Transaction.schema_changes`,
        op ``"s"`` in :meth:`~cdc.binlog.transactions.Transaction.changes`; records of
        :mod:`cdc.schema.changes`); needs ``schema_history``.
    """

    host: str
    port: int = 3306
    user: str = "root"
    password: Secret = field(default_factory=Secret, repr=False)
    server_id: int | None = None
    ssl: SslOptions | bool | None = None
    connect_timeout: float = 10.0
    read_timeout: float | None = None
    heartbeat_interval: float | None = None
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    table_filter: object = None
    check_server_id: bool = True
    report_host: str | None = None
    gtid_strict_mode: bool = False
    gtid_ignore_duplicates: bool = False
    tick: float = 1.0
    row_decoder: str | None = None
    password_hint: str = CLI_PASSWORD_HINT
    max_packet_size: int = MAX_PACKET_SIZE
    schema_history: bool = True
    on_unparsed_ddl: str = "fail"
    include_schema_changes: bool = False

    def __post_init__(self):
        if not self.host:
            raise ConfigurationError("a source server needs a host name")
        try:
            port = int(self.port)
        except (TypeError, ValueError):
            raise ConfigurationError(f"port must be an integer, not {self.port!r}") from None
        if not 1 <= port <= 65535:
            raise ConfigurationError(f"port must be from 1 to 65535, not {port}")
        object.__setattr__(self, "port", port)
        if not isinstance(self.password, Secret):
            object.__setattr__(self, "password", Secret(self.password or ""))
        sid = self.server_id
        if sid is None:
            sid = random_server_id()
        if not isinstance(sid, int) or isinstance(sid, bool) or not 1 <= sid < 1 << 32:
            raise ConfigurationError(f"server_id must be an integer from 1 to 4294967295, not "
                                     f"{sid!r}")
        object.__setattr__(self, "server_id", sid)
        object.__setattr__(self, "ssl", SslOptions.coerce(self.ssl))
        if not isinstance(self.max_packet_size, int) or self.max_packet_size < 1024:
            raise ConfigurationError(f"max_packet_size must be an integer >= 1024, not "
                                     f"{self.max_packet_size!r}")
        if self.on_unparsed_ddl not in ON_UNPARSED_DDL:
            raise ConfigurationError(f"on_unparsed_ddl must be one of "
                                     f"{', '.join(ON_UNPARSED_DDL)}, not "
                                     f"{self.on_unparsed_ddl!r}")
        if self.include_schema_changes and not self.schema_history:
            raise ConfigurationError("include_schema_changes needs the schema history (the "
                                     "records are what it follows): leave schema_history=True")
        tf = self.table_filter
        if isinstance(tf, (list, tuple)):
            from cdc.binlog.transactions import TableFilter
            tf = TableFilter(list(tf))
        object.__setattr__(self, "table_filter", tf or None)
        if self.read_timeout is None and self.heartbeat_interval:
            object.__setattr__(self, "read_timeout", 2 * self.heartbeat_interval + 5)

    @property
    def where(self) -> str:
        """``host:port`` for messages."""
        return f"{self.host}:{self.port}"

    def describe(self) -> str:
        """Where, as whom (never the password)."""
        return f"{self.user}@{self.host}:{self.port}"

    @property
    def replica_host(self) -> str:
        """The host name this replica reports in COM_REGISTER_SLAVE (at most 60 characters)."""
        return (self.report_host if self.report_host is not None else socket.gethostname())[:60]

    def replace(self, **changes) -> "ReplicaConfig":
        """A copy with some fields changed (e.g. another ``server_id`` for a task)."""
        return replace(self, **changes)
