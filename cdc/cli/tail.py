"""``binlog-cdc tail``: print a server's row changes as they are committed.

::

    BINLOG_CDC_PASSWORD=secret binlog-cdc tail --host db1 --user cdc --format jsonl
    binlog-cdc tail --host db1 --user cdc --password-file ~/.cdcpw --file mysql-bin.000042 --pos 4
    binlog-cdc tail --host db1 --user cdc --gtid '3e11fa47-71ca-11e1-9e33-c80aa9429562:1-42'
    binlog-cdc tail --host db1 --user cdc --gtid 0-1-42 --include-tables 'shop.*' --heartbeat 5

Ctrl-C (or SIGTERM) stops cleanly with exit code 0 and prints, on stderr, the options that
resume right after the last transaction printed in full.

Only committed transactions are printed: tail holds a transaction's binlog events (their
row images undecoded, about the transaction's size in the binlog) until its commit, then
decodes, renders and writes its row changes a chunk at a time (:func:`write_changes`).
"""

from __future__ import annotations

import argparse
import datetime as _dt
import shlex
import sys

from cdc.check import WARN, require, run_checks
from cdc.cli.args import (add_connection_arguments, add_start_arguments, add_table_arguments,
                          config_from_args, on_sigterm, start_from_args, table_filter)
from cdc.cli.changes import change_json, image_json
from cdc.cli.schema_file import load_schema_file, save_schema_file
from cdc.errors import ServerConnectionError, TransientServerError
from cdc.positions import Position
from cdc.replica.client import ReplicaClient
from cdc.replica.config import ON_UNPARSED_DDL, RetryPolicy
from cdc.replica.sql import ask_on, binlog_status, connect
from cdc.schema.changes import type_text


def add_tail_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``binlog-cdc tail`` (the caller sets ``func=run_tail``)."""
    add_connection_arguments(p)
    add_start_arguments(p, "where to start (default: now)")

    o = p.add_argument_group("output")
    o.add_argument("--format", choices=("text", "jsonl"), default="text",
                   help="text: one readable line per row change; jsonl: one JSON object per row "
                        "change (op, db, table, before, after, key, file, pos, end_pos, gtid, "
                        "xid, row, ts, server_id)")
    add_table_arguments(o, several=True)
    o.add_argument("--heartbeat", type=float, default=30.0, metavar="S",
                   help="ask for a heartbeat after S idle seconds (detects a dead connection; "
                        "0 turns heartbeats off)")
    o.add_argument("--non-blocking", action="store_true",
                   help="exit at the end of the binlog instead of waiting for new changes")
    o.add_argument("--schema-changes", action="store_true",
                   help="also print the DDL statements that change the tables shown (op s: the "
                        "statement, the table and its new columns; jsonl: key schema_change)")
    o.add_argument("--on-unparsed-ddl", choices=ON_UNPARSED_DDL, default="fail",
                   help="a DDL statement on a shown table that binlog-cdc cannot parse: fail "
                        "(stop, the default), skip (keep the table's previous shape) or reseed "
                        "(read the table again from information_schema)")
    o.add_argument("--schema-file", metavar="FILE",
                   help="keep the schema history in FILE: written when tail stops (as of the "
                        "position to resume from), read when it resumes from there -- rows "
                        "before a DDL that ran meanwhile keep the columns of their time "
                        "without binlog_row_metadata=FULL")


def build_client(args) -> ReplicaClient:
    config = config_from_args(
        args, heartbeat_interval=args.heartbeat or None,
        retry=RetryPolicy(max_attempts=args.max_retries, max_time=args.max_retry_time),
        table_filter=table_filter(args),
        on_unparsed_ddl=args.on_unparsed_ddl, include_schema_changes=args.schema_changes)
    return ReplicaClient(config, start=start_from_args(args), blocking=not args.non_blocking)


def _ts(t: int) -> str:
    return _dt.datetime.fromtimestamp(t, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def change_text(change) -> str:
    """One row change as a readable line."""
    tx = change.tx
    where = f"{tx.file}:{tx.pos}" + (f" {tx.gtid}" if tx.gtid else "")
    if change.schema_change is not None:
        return schema_change_text(change, where)
    images = []
    if change.before is not None:
        images.append("before=" + image_json(change, change.before))
    if change.after is not None:
        images.append("after=" + image_json(change, change.after))
    op = {"c": "INSERT", "u": "UPDATE", "d": "DELETE", "t": "TRUNCATE"}[change.op]
    line = f"{_ts(tx.timestamp)} {op} {change.schema}.{change.table} [{where}]"
    return line + " " + " ".join(images) if images else line


def schema_change_text(change, where: str) -> str:
    """A schema change (op ``s``) as a readable line: ``SCHEMA ALTER db.t [where] (columns)
    key=(...): statement``."""
    sc = change.schema_change
    what = f"{_ts(change.tx.timestamp)} SCHEMA {sc.type} {change.schema}.{change.table} [{where}]"
    if sc.renamed_from:
        what += f" from {sc.renamed_from}"
    if sc.columns is not None:
        what += " (" + ", ".join(f"{c.name} {type_text(c)}" for c in sc.columns) + ")"
        if sc.primary_key:
            what += " key=(" + ", ".join(sc.primary_key) + ")"
    if sc.unsure:
        what += " unsure"
    return what + ": " + " ".join(sc.ddl.split())


# Rendered text written at a time: bounds tail's memory by a transaction's events (which it
# holds until the commit, to print only committed changes), not by their rendering.
CHUNK_CHARS = 1 << 16


def write_changes(out, tx, render) -> int:
    """Render *tx*'s row changes and write them, one line each, about :data:`CHUNK_CHARS` of
    text at a time (rows are decoded one rows event at a time: see
    :meth:`~cdc.binlog.events.rows.RowsEvent.decode_rows`); flush at the end. Returns the
    number of lines."""
    chunk: list[str] = []
    size = count = 0
    for change in tx.changes():
        line = render(change)
        chunk.append(line)
        size += len(line) + 1
        if size >= CHUNK_CHARS:
            chunk.append("")
            out.write("\n".join(chunk))
            count += len(chunk) - 1
            chunk, size = [], 0
    if chunk:
        chunk.append("")
        out.write("\n".join(chunk))
        count += len(chunk) - 1
    if count:
        out.flush()
    return count


def _interrupt() -> None:
    raise KeyboardInterrupt


def binlog_end(client: ReplicaClient) -> Position:
    """The end of the source's binlog now, asked on a connection of its own."""
    conn = connect(client.config)
    try:
        return ask_on(conn, binlog_status, client.config)
    finally:
        conn.close()


def _short_of(client: ReplicaClient, end: Position) -> bool:
    """Whether the dump stopped before *end* (what it last sent, or the position it resumes
    from when it sent nothing)."""
    at = client.read_to
    if at is None or at[0] is None:
        pos = client.position
        at = (pos.file, pos.pos) if pos is not None and pos.file else None
    if at is None:
        return True
    return Position(*at).key < end.key


def run_tail(args) -> int:
    """Stream and print until Ctrl-C/SIGTERM (exit 0), the end of the binlog with
    --non-blocking (exit 0), or an error (raised: the CLI prints it and exits 2).

    --non-blocking reads at least to the binlog end of when it started: a source that shuts
    down ends the dump with the same EOF as the end of the binlog, so a dump that ends short
    of it is read on from where it stopped (up to ``--max-retries`` times, 10 by default)."""
    client = build_client(args)
    f = client.config.table_filter
    # no snapshot: the oldest binlog's age is not asked (it dumps that file's first event)
    for finding in require(run_checks(client.config, include=f.include if f else (),
                                      exclude=f.exclude if f else (), oldest=False,
                                      include_option="--include-tables")):
        if finding.status == WARN and finding.check == "tables":
            sys.stderr.write(f"binlog-cdc tail: warning: {finding.message}\n")
    schema_file = getattr(args, "schema_file", None)
    if schema_file:
        load_schema_file(schema_file, client, start_from_args(args))
    render = change_json if args.format == "jsonl" else change_text
    out = sys.stdout
    printed = True  # every transaction yielded so far was printed in full
    failed = False
    try:
        with on_sigterm(_interrupt):
            end = None
            if args.non_blocking:
                try:
                    end = binlog_end(client)
                except TransientServerError:
                    pass    # unreachable: the client's first connection says so, in its words
            attempts = args.max_retries or 10
            for attempt in range(attempts + 1):
                if attempt:
                    if attempt == attempts:
                        raise ServerConnectionError(
                            f"the binlog dump from {client.where} ended before the end of the "
                            f"binlog ({end.file}:{end.pos}) {attempts} times in a row (is the "
                            f"server shutting down?)")
                    sys.stderr.write(f"binlog-cdc tail: the dump ended at {client.position}, "
                                     f"before the end of the binlog ({end.file}:{end.pos}; is "
                                     f"the server restarting?); reading on\n")
                for tx in client.transactions():
                    printed = False
                    write_changes(out, tx, render)
                    printed = True
                if not args.non_blocking:
                    break
                if end is None:     # the source was up for the dump: where it ends now
                    end = binlog_end(client)
                if not _short_of(client, end):
                    break
    except KeyboardInterrupt:
        pass
    except BaseException:
        failed = True
        raise
    finally:
        client.close()
        # Interrupted in the middle of printing a transaction: resume before it.
        resume = client.position if printed else client.previous_position
        # A failure before any transaction: the start given is the one to resume from (the
        # error says what is wrong with it); a start the server resolved is news, though.
        reached = not failed or client.transactions_delivered > 0 or \
            client.start.kind in ("earliest", "latest")
        if reached and resume is not None and (resume.mode != "file" or resume.file):
            how = resume.cli_args()
            if schema_file and resume.file:
                save_schema_file(schema_file, client, resume)
                how += f" --schema-file {shlex.quote(schema_file)}"
            sys.stderr.write(f"binlog-cdc tail: stopped at {resume}; resume with: {how}\n")
            sys.stderr.flush()
    return 0
