"""What ``tail`` and ``lag`` share: the connection and start options, turned once into a
:class:`~cdc.replica.config.ReplicaConfig` and a :class:`~cdc.positions.Start`, and the
SIGTERM handling of a command that runs until stopped."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import threading
from typing import Callable

from cdc.binlog.transactions import TableFilter
from cdc.binlog.xa import Prepared
from cdc.errors import ConfigurationError
from cdc.positions import Start
from cdc.replica.config import (PASSWORD_ENV, SSL_MODES, ReplicaConfig, RetryPolicy,
                                SslOptions, read_password)


def patterns(text: str) -> list[str]:
    """Comma-separated table globs."""
    return [p.strip() for p in text.split(",") if p.strip()]


def add_table_arguments(group, *, several: bool) -> None:
    """``--include-tables`` (also spelled ``--tables``) and ``--exclude-tables`` of ``tail``,
    ``check`` and ``decode``: comma-separated globs, repeatable; *several*: each option also
    takes several words (``decode`` takes one, its files follow)."""
    kw = {"nargs": "+", "action": "extend"} if several else {"action": "append"}
    more = "several, comma-separated or repeated" if several else "comma-separated, repeatable"
    group.add_argument("--include-tables", type=patterns, default=[], metavar="DB.TABLE[,...]",
                       help=f"only these tables (globs such as 'shop.*'; {more})", **kw)
    group.add_argument("--tables", dest="include_tables", type=patterns, default=[],
                       help=argparse.SUPPRESS, **kw)          # the older spelling of tail's
    group.add_argument("--exclude-tables", type=patterns, default=[], metavar="DB.TABLE[,...]",
                       help=f"skip these tables (globs; {more})", **kw)


def table_filter(args) -> TableFilter | None:
    """The :class:`TableFilter` of :func:`add_table_arguments`' options, None without any."""
    include, exclude = sum(args.include_tables, []), sum(args.exclude_tables, [])
    return TableFilter(include, exclude) if include or exclude else None


def add_connection_arguments(p: argparse.ArgumentParser, *, retries: bool = True) -> None:
    """The connection options shared by ``tail`` and ``lag``: server, account, TLS."""
    c = p.add_argument_group("connection")
    c.add_argument("--host", required=True, help="the source server")
    c.add_argument("--port", type=int, default=3306, help="the server's port (default 3306)")
    c.add_argument("--user", default=os.environ.get("BINLOG_CDC_USER", "root"),
                   help="replication account (needs REPLICATION SLAVE and REPLICATION CLIENT; MariaDB "
                        "10.5.2+: REPLICATION SLAVE, BINLOG MONITOR and REPLICATION MASTER "
                        "ADMIN); default $BINLOG_CDC_USER or root")
    pw = c.add_mutually_exclusive_group()
    pw.add_argument("-p", "--password",
                    help=f"the password (prefer --password-file or ${PASSWORD_ENV})")
    pw.add_argument("--password-file", help="read the password from this file (first line)")
    c.add_argument("--server-id", type=int, default=None,
                   help="this replica's server_id, unique among the source's replicas "
                        "(default: a random id from 1000000000 to 1999999999)")
    c.add_argument("--ssl-mode", type=str.lower, choices=SSL_MODES, default=None,
                   help="disabled | preferred (default: TLS when offered, unverified) | required "
                        "(TLS, unverified) | verify_ca (the server's certificate is signed by "
                        "--ssl-ca, default the system's CAs) | verify_identity (and names this "
                        "--host)")
    c.add_argument("--ssl", action="store_true", help="require TLS (older spelling of "
                                                      "--ssl-mode required)")
    c.add_argument("--ssl-ca", help="CA certificate file (implies --ssl, verifies the server)")
    c.add_argument("--ssl-cert", help="client certificate file")
    c.add_argument("--ssl-key", help="client private key file")
    c.add_argument("--ssl-verify", action=argparse.BooleanOptionalAction, default=None,
                   help="verify the server certificate (default: when --ssl-ca is given)")
    c.add_argument("--ssl-verify-identity", action="store_true",
                   help="also check the server's host name against its certificate")
    c.add_argument("--connect-timeout", type=float, default=10.0, metavar="S",
                   help="give up a connection attempt after S seconds (default 10)")
    if retries:
        c.add_argument("--max-retries", type=int, default=None,
                       help="give up after this many reconnect attempts in a row (default: no "
                            "limit)")
        c.add_argument("--max-retry-time", type=float, default=None,
                       help="give up after reconnecting for this many seconds (default: no "
                            "limit)")


def add_start_arguments(p: argparse.ArgumentParser, title: str) -> None:
    """Where a client starts: --gtid, --file/--pos or --from latest|earliest."""
    s = p.add_argument_group(title)
    s.add_argument("--gtid", metavar="SET",
                   help="MySQL: the GTID set already seen ('uuid:1-42'); MariaDB: the GTID "
                        "position ('0-1-42'); '' (none seen): all the binlog the server has")
    s.add_argument("--file", help="binlog file to start in")
    s.add_argument("--pos", type=int, help="position in --file (default 4: its start)")
    s.add_argument("--from", dest="start_at", choices=("latest", "earliest"), default=None,
                   help="latest (default): changes from now on; earliest: from the oldest "
                        "binlog the server has")
    s.add_argument("--xa", metavar="FILE:POS[,...]", type=patterns, default=None,
                   help="the XA transactions prepared before the start and not yet committed "
                        "or rolled back there (tail prints them in its resume options): their "
                        "changes are delivered at their XA COMMIT")


def start_from_args(args) -> Start:
    """The :class:`Start` of --gtid, --file/--pos or --from (one of them at most), holding
    the prepared XA transactions of --xa."""
    start = _start(args)
    xa = getattr(args, "xa", None)
    return start.holding(Prepared.parse(p) for p in xa) if xa else start


def _start(args) -> Start:
    chosen = [n for n, v in (("--gtid", args.gtid), ("--file", args.file),
                             ("--from", args.start_at)) if v is not None]
    if len(chosen) > 1:
        raise ConfigurationError(f"give only one of {', '.join(chosen)}")
    if args.pos is not None and args.file is None:
        raise ConfigurationError("--pos needs --file")
    if args.gtid is not None:
        if not args.gtid.strip():       # nothing seen yet: all the binlog the server has
            return Start.gtid_set("")
        start = Start.parse(args.gtid)
        if not start.is_gtid:
            raise ConfigurationError(f"--gtid {args.gtid!r} is neither a MySQL GTID set "
                                     f"('uuid:1-42') nor a MariaDB GTID position ('0-1-42')")
        return start
    if args.file is not None:
        return Start.at(args.file, args.pos if args.pos is not None else 4)
    return Start(args.start_at or "latest")


def _ssl(args) -> SslOptions | bool | None:
    mode = getattr(args, "ssl_mode", None)
    if mode is not None:
        old = [n for n, v in (("--ssl", args.ssl), ("--ssl-verify", args.ssl_verify),
                              ("--ssl-verify-identity", args.ssl_verify_identity)) if v]
        if old or args.ssl_verify is False:
            raise ConfigurationError(f"--ssl-mode replaces {', '.join(old) or '--no-ssl-verify'}"
                                     f": give only --ssl-mode (with --ssl-ca/--ssl-cert/--ssl-key)")
        return SslOptions.from_mode(mode, ca=args.ssl_ca, cert=args.ssl_cert, key=args.ssl_key,
                                    option="--ssl-mode")
    if args.ssl_ca or args.ssl_cert or args.ssl_key or args.ssl_verify or args.ssl or \
            args.ssl_verify_identity:
        verify = args.ssl_verify
        if verify is None and args.ssl_verify_identity:
            verify = True      # checking the host name means checking the certificate
        return SslOptions(ca=args.ssl_ca, cert=args.ssl_cert, key=args.ssl_key,
                          verify=verify, verify_identity=args.ssl_verify_identity)
    return None


def config_from_args(args, *, heartbeat_interval: float | None, retry: RetryPolicy,
                     table_filter=None, **more) -> ReplicaConfig:
    """The :class:`ReplicaConfig` of the connection options (:func:`add_connection_arguments`);
    *more*: other ReplicaConfig fields."""
    return ReplicaConfig(
        args.host, args.port, args.user,
        read_password(args.password, args.password_file, file_option="--password-file"),
        server_id=args.server_id, ssl=_ssl(args), connect_timeout=args.connect_timeout,
        heartbeat_interval=heartbeat_interval, retry=retry, table_filter=table_filter, **more)


@contextlib.contextmanager
def on_sigterm(handler: Callable[[], None]):
    """Call *handler* on SIGTERM while the block runs, then restore the previous handler (only
    in the main thread: elsewhere Python cannot set signal handlers, and SIGTERM stays as is)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGTERM, lambda signum, frame: handler())
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)
