"""``binlog-cdc decode``: binlog files as ``mysqlbinlog -v`` text or JSON lines."""

from __future__ import annotations

import argparse
import datetime as _dt
import sys

from cdc.binlog.events import (Event, FormatDescriptionEvent, GtidEvent, MariaGtidEvent, QueryEvent,
                     RotateEvent, RowsEvent, RowsQueryEvent, TableMapEvent, XidEvent)
from cdc.binlog.files import DEFAULT_CHARSET, BinlogFileReader
from cdc.cache import BoundedCache
from cdc.cli.args import add_table_arguments, table_filter
from cdc.cli.changes import change_json
from cdc.values.render import mysqlbinlog_rows
from cdc.binlog.transactions import TransactionAssembler
from cdc.binlog.xa import COMMIT


def _ts(t: int) -> str:
    return _dt.datetime.fromtimestamp(t, _dt.timezone.utc).strftime("%y%m%d %H:%M:%S")


def _describe(ev: Event) -> str:
    if isinstance(ev, QueryEvent):
        return f"Query\tschema={ev.schema}\n{ev.query}"
    if isinstance(ev, RowsEvent):
        return f"{ev.kind.capitalize()}_rows: table id {ev.table_id} ({ev.table_name})"
    if isinstance(ev, TableMapEvent):
        return f"Table_map: `{ev.table.schema}`.`{ev.table.table}` mapped to number {ev.table_id}"
    if isinstance(ev, (GtidEvent, MariaGtidEvent)):
        return f"GTID {ev.gtid}"
    if isinstance(ev, XidEvent):
        return f"Xid = {ev.xid}\nCOMMIT"
    if isinstance(ev, RotateEvent):
        return f"Rotate to {ev.next_file}  pos: {ev.next_position}"
    if isinstance(ev, FormatDescriptionEvent):
        return f"Start: binlog v {ev.binlog_version}, server v {ev.server_version}"
    if isinstance(ev, RowsQueryEvent):
        return f"Annotate_rows:\n#Q> {ev.query}"
    return ev.type_name + " " + ", ".join(f"{k}={v}" for k, v in ev.fields().items())


_STORED_TEXT = BoundedCache(256)     # id(table map) -> (table map, its with_stored_text copy)


def _stored_text_table(tmap):
    hit = _STORED_TEXT.get(id(tmap))
    if hit is None or hit[0] is not tmap:
        hit = (tmap, tmap.with_stored_text())
        if len(_STORED_TEXT) >= _STORED_TEXT.limit:
            _STORED_TEXT.clear()
        _STORED_TEXT[id(tmap)] = hit
    return hit[1]


def _print_text(ev: Event, out, tables, mysql: bool) -> None:
    """One event as text; *mysql*: the binlog is MySQL's (values escaped as its mysqlbinlog
    does, else as mariadb-binlog does)."""
    out.write(f"# at {ev.pos}\n#{_ts(ev.timestamp)} server id {ev.server_id}  end_log_pos "
              f"{ev.end_pos} \t{_describe(ev)}\n")
    if isinstance(ev, RowsEvent) and ev.table is not None:
        if tables and not tables(ev.table.qualified_name):
            return
        out.flush()
        buf = out.buffer if hasattr(out, "buffer") else None
        # text columns as the bytes the binlog stores, like mysqlbinlog -v (not re-encoded: in
        # some character sets two byte sequences decode to one character)
        table = _stored_text_table(ev.table)
        lines = mysqlbinlog_rows(ev.kind, table, ev.decode_rows(table), mysql)
        if buf is not None:
            buf.write(b"\n".join(lines) + b"\n")
            buf.flush()
        else:
            out.write("\n".join(l.decode("utf-8", "replace") for l in lines) + "\n")


def cmd_decode(args) -> int:
    tables = table_filter(args)
    def show_progress(done, total):
        sys.stderr.write(f"\rdecoded {done / 1e6:.1f} / {total / 1e6:.1f} MB")
        sys.stderr.flush()
    reader = BinlogFileReader(args.files, start_position=args.start_position,
                              stop_position=args.stop_position,
                              verify_checksum=not args.no_verify_checksum,
                              progress=show_progress if args.progress else None,
                              charset=args.charset)
    out = sys.stdout
    if args.format == "text":
        for ev in reader.events():
            _print_text(ev, out, tables, not reader.parser.ctx.is_mariadb)
    else:
        asm = TransactionAssembler(tables)
        for ev in reader.events():
            tx = asm.push(ev)
            if tx is not None:
                for change in tx.changes():
                    out.write(change_json(change) + "\n")
                if tx.xa is not None and tx.xa.missing and tx.xa.action == COMMIT:
                    sys.stderr.write(f"binlog-cdc decode: the XA COMMIT of {tx.xa.xid} at "
                                     f"{tx.file}:{tx.pos} commits a transaction prepared before "
                                     f"the files read: its changes are not printed (decode from "
                                     f"an earlier file)\n")
    if args.progress:
        sys.stderr.write("\n")
    return 0


def add_decode_arguments(d: argparse.ArgumentParser) -> None:
    """The options of ``binlog-cdc decode`` (the caller sets ``func=cmd_decode``)."""
    d.add_argument("files", nargs="+", help="binlog files, directories, .index files or globs")
    d.add_argument("--format", choices=("text", "jsonl"), default="text",
                   help="text: events like mysqlbinlog -v; jsonl: one JSON object per row change")
    d.add_argument("--start-position", type=int, help="offset in the first file to start at")
    d.add_argument("--stop-position", type=int, help="offset in the last file to stop at")
    add_table_arguments(d, several=False)
    d.add_argument("--no-verify-checksum", action="store_true",
                   help="do not verify CRC32s (salvage a damaged file)")
    d.add_argument("--progress", action="store_true", help="show progress on stderr")
    d.add_argument("--charset", default=DEFAULT_CHARSET, metavar="NAME",
                   help="character set of text columns whose TABLE_MAP carries none (MySQL 5.x, "
                        "MariaDB binlog_row_metadata=NO_LOG); 'binary' keeps bytes (default: "
                        "%(default)s)")
