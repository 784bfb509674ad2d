"""``binlog-cdc tail``: print a server's row changes as they are committed.

::

    BINLOG_CDC_PASSWORD=secret binlog-cdc tail --host db1 --user cdc --format jsonl
    binlog-cdc tail --host db1 --user cdc --password-file ~/.cdcpw --file mysql-bin.000042 --pos 4
    binlog-cdc tail --host db1 --user cdc --gtid '3e11fa47-71ca-11e1-9e33-c80aa9429562:1-42'
    binlog-cdc tail --host db1 --user cdc --gtid 0-1-42 --tables 'shop.*' --heartbeat 5

Ctrl-C (or SIGTERM) stops cleanly with exit code 0 and prints, on stderr, the options that
resume right after the last transaction printed in full.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as _dt
import os
import random
import signal
import sys
import threading
from typing import Callable

from cdc.errors import ConfigurationError
from cdc.values.render import row_json, to_json_text
from cdc.replica.client import ReplicaClient, RetryPolicy, SslOptions, Start
from cdc.binlog.transactions import TableFilter

PASSWORD_ENV = "BINLOG_CDC_PASSWORD"


def _patterns(text: str) -> list[str]:
    return [p.strip() for p in text.split(",") if p.strip()]


def add_connection_arguments(p: argparse.ArgumentParser, *, retries: bool = True) -> None:
    """The connection options shared by ``tail`` and ``lag``: server, account, TLS."""
    c = p.add_argument_group("connection")
    c.add_argument("--host", required=True, help="the source server")
    c.add_argument("--port", type=int, default=3306)
    c.add_argument("--user", default=os.environ.get("BINLOG_CDC_USER", "root"),
                   help="replication account (needs REPLICATION SLAVE and REPLICATION CLIENT / "
                        "BINLOG MONITOR); default $BINLOG_CDC_USER or root")
    pw = c.add_mutually_exclusive_group()
    pw.add_argument("-p", "--password",
                    help=f"the password (prefer --password-file or ${PASSWORD_ENV})")
    pw.add_argument("--password-file", help="read the password from this file (first line)")
    c.add_argument("--server-id", type=int, default=None,
                   help="this replica's server_id, unique among the source's replicas "
                        "(default: a random id from 1000000000 to 1999999999)")
    c.add_argument("--ssl", action="store_true", help="require TLS")
    c.add_argument("--ssl-ca", help="CA certificate file (implies --ssl, verifies the server)")
    c.add_argument("--ssl-cert", help="client certificate file")
    c.add_argument("--ssl-key", help="client private key file")
    c.add_argument("--ssl-verify", action=argparse.BooleanOptionalAction, default=None,
                   help="verify the server certificate (default: when --ssl-ca is given)")
    c.add_argument("--ssl-verify-identity", action="store_true",
                   help="also check the server's host name against its certificate")
    c.add_argument("--connect-timeout", type=float, default=10.0)
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
                        "position ('0-1-42')")
    s.add_argument("--file", help="binlog file to start in")
    s.add_argument("--pos", type=int, help="position in --file (default 4: its start)")
    s.add_argument("--from", dest="start_at", choices=("latest", "earliest"), default=None,
                   help="latest (default): changes from now on; earliest: from the oldest "
                        "binlog the server has")


def add_tail_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``binlog-cdc tail`` (the caller sets ``func=run_tail``)."""
    add_connection_arguments(p)
    add_start_arguments(p, "where to start (default: now)")

    o = p.add_argument_group("output")
    o.add_argument("--format", choices=("text", "jsonl"), default="text",
                   help="text: one readable line per row change; jsonl: one JSON object per row "
                        "change (op, db, table, before, after, key, file, pos, end_pos, gtid, "
                        "xid, row, ts, server_id)")
    o.add_argument("--tables", nargs="+", type=_patterns, default=[], metavar="DB.TABLE",
                   help="only these tables (globs such as 'shop.*'; several, or comma-separated)")
    o.add_argument("--exclude-tables", nargs="+", type=_patterns, default=[], metavar="DB.TABLE",
                   help="skip these tables (globs)")
    o.add_argument("--heartbeat", type=float, default=30.0, metavar="S",
                   help="ask for a heartbeat after S idle seconds (detects a dead connection; "
                        "0 turns heartbeats off)")
    o.add_argument("--non-blocking", action="store_true",
                   help="exit at the end of the binlog instead of waiting for new changes")


def _password(args) -> str:
    if args.password is not None:
        return args.password
    if args.password_file:
        try:
            with open(args.password_file, encoding="utf-8") as f:
                return f.readline().rstrip("\r\n")
        except OSError as e:
            raise ConfigurationError(f"cannot read --password-file {args.password_file}: "
                                     f"{e.strerror or e}") from None
    return os.environ.get(PASSWORD_ENV, "")


def _start(args) -> Start:
    chosen = [n for n, v in (("--gtid", args.gtid), ("--file", args.file),
                             ("--from", args.start_at)) if v is not None]
    if len(chosen) > 1:
        raise ConfigurationError(f"give only one of {', '.join(chosen)}")
    if args.pos is not None and args.file is None:
        raise ConfigurationError("--pos needs --file")
    if args.gtid is not None:
        start = Start.parse(args.gtid)
        if start.kind not in ("gtid", "mariadb_gtid"):
            raise ConfigurationError(f"--gtid {args.gtid!r} is neither a MySQL GTID set "
                                     f"('uuid:1-42') nor a MariaDB GTID position ('0-1-42')")
        return start
    if args.file is not None:
        return Start.at(args.file, args.pos if args.pos is not None else 4)
    return Start(args.start_at or "latest")


def _ssl(args):
    if args.ssl_ca or args.ssl_cert or args.ssl_key or args.ssl_verify or args.ssl:
        return SslOptions(ca=args.ssl_ca, cert=args.ssl_cert, key=args.ssl_key,
                          verify=args.ssl_verify, verify_identity=args.ssl_verify_identity)
    return None


def build_client(args) -> ReplicaClient:
    include = sum(args.tables, [])
    exclude = sum(args.exclude_tables, [])
    server_id = args.server_id if args.server_id is not None else \
        random.randint(1_000_000_000, 1_999_999_999)
    return ReplicaClient(
        args.host, args.port, args.user, _password(args), server_id=server_id,
        start=_start(args), blocking=not args.non_blocking,
        heartbeat_interval=args.heartbeat or None, ssl=_ssl(args),
        table_filter=TableFilter(include, exclude) if include or exclude else None,
        retry=RetryPolicy(max_attempts=args.max_retries, max_time=args.max_retry_time),
        connect_timeout=args.connect_timeout)


def _ts(t: int) -> str:
    return _dt.datetime.fromtimestamp(t, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def change_text(change) -> str:
    """One row change as a readable line."""
    tx = change.tx
    where = f"{tx.file}:{tx.pos}" + (f" {tx.gtid}" if tx.gtid else "")
    images = []
    if change.before is not None:
        images.append("before=" + row_json(change.columns, change.before))
    if change.after is not None:
        images.append("after=" + row_json(change.columns, change.after))
    op = {"c": "INSERT", "u": "UPDATE", "d": "DELETE"}[change.op]
    return f"{_ts(tx.timestamp)} {op} {change.schema}.{change.table} [{where}] {' '.join(images)}"


def change_jsonl(change) -> str:
    """One row change as a JSON line (the same object as ``binlog-cdc decode --format jsonl``)."""
    try:
        from cdc.cli.decode import change_json
    except ImportError:  # pragma: no cover - the CLI module is always there
        change_json = None
    if change_json is not None:
        return change_json(change)
    tx = change.tx
    return ("{" f'"op": "{change.op}", "db": {to_json_text(change.schema)}, '
            f'"table": {to_json_text(change.table)}, '
            f'"before": {row_json(change.columns, change.before)}, '
            f'"after": {row_json(change.columns, change.after)}, '
            f'"file": {to_json_text(tx.file)}, "pos": {to_json_text(tx.pos)}, '
            f'"gtid": {to_json_text(tx.gtid)}, "ts": {tx.timestamp}' "}")


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


def _interrupt() -> None:
    raise KeyboardInterrupt


def run_tail(args) -> int:
    """Stream and print until Ctrl-C/SIGTERM (exit 0), the end of the binlog with
    --non-blocking (exit 0), or an error (raised: the CLI prints it and exits 2)."""
    client = build_client(args)
    render = change_jsonl if args.format == "jsonl" else change_text
    out = sys.stdout
    printed = True  # every transaction yielded so far was printed in full
    try:
        with on_sigterm(_interrupt):
            for tx in client.transactions():
                printed = False
                lines = [render(ch) for ch in tx.changes()]
                if lines:
                    out.write("\n".join(lines) + "\n")
                    out.flush()
                printed = True
    except KeyboardInterrupt:
        pass
    finally:
        client.close()
        # Interrupted in the middle of printing a transaction: resume before it.
        resume = client.position if printed else client.previous_position
        if resume is not None and (resume.mode != "file" or resume.file):
            sys.stderr.write(f"binlog-cdc tail: stopped at {resume}; resume with: "
                             f"{resume.cli_args()}\n")
            sys.stderr.flush()
    return 0
