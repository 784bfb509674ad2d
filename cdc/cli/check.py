"""``binlog-cdc check``: before a first stream, everything binlog-cdc can know about the source
(:mod:`cdc.check`), one line per check::

    binlog-cdc check --host db1 --user cdc --include-tables 'shop.*' --snapshot --upsert

Exit status 2 when a check FAILs, else 0 (WARN lines included).
"""

from __future__ import annotations

import argparse
import sys

from cdc.check import SNAPSHOT_ROWS_PER_SECOND, exit_status, render, run_checks
from cdc.snapshot.plan import SNAPSHOT_BATCH_ROWS
from cdc.cli.args import (add_connection_arguments, add_start_arguments, add_table_arguments,
                          config_from_args, start_from_args)
from cdc.replica.config import RetryPolicy


def add_check_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``binlog-cdc check`` (the caller sets ``func=run_check``)."""
    add_connection_arguments(p, retries=False)
    add_start_arguments(p, "where the stream would start (checked to be on the server)")
    w = p.add_argument_group("what the stream would do")
    add_table_arguments(w, several=True)       # as tail's, the options includeTables/...
    w.add_argument("--snapshot", action="store_true",
                   help="the stream starts with a snapshot of the tables (startingPosition="
                        "snapshot): SELECT on them, and binlogs kept longer than one snapshot "
                        "batch takes (a WARN when shorter than the whole snapshot)")
    w.add_argument("--upsert", action="store_true",
                   help="the changes go to a sink that upserts (Delta): every table needs a "
                        "primary key and full row images")
    w.add_argument("--snapshot-rate", type=float, default=SNAPSHOT_ROWS_PER_SECOND,
                   metavar="ROWS/S", help="the snapshot speed the retention check assumes "
                                          f"(default {SNAPSHOT_ROWS_PER_SECOND})")
    w.add_argument("--snapshot-batch-rows", type=int, default=SNAPSHOT_BATCH_ROWS,
                   metavar="ROWS", help="snapshot rows per micro-batch (the stream's "
                                        f"snapshotRowsPerTrigger; default {SNAPSHOT_BATCH_ROWS})")


def run_check(args) -> int:
    config = config_from_args(args, heartbeat_interval=None, retry=RetryPolicy())
    start = start_from_args(args) if (args.gtid or args.file or args.start_at) else None
    findings = run_checks(config, include=sum(args.include_tables, []),
                          exclude=sum(args.exclude_tables, []), start=start,
                          snapshot=args.snapshot, upsert=args.upsert,
                          rows_per_second=args.snapshot_rate,
                          batch_rows=args.snapshot_batch_rows,
                          include_option="--include-tables")
    for line in render(findings):
        print(line)
    sys.stdout.flush()
    return exit_status(findings)
