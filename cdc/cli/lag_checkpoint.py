"""``binlog-cdc lag --checkpoint DIR``: how far a Spark streaming query is behind its server, from
the offset its checkpoint has committed (:mod:`cdc.checkpoint`), without Spark.

* ``behind_bytes``: the server's binlog end minus the committed offset, summed over the files
  in between;
* ``behind_transactions``: the transactions from the offset to the end, counted by reading the
  binlog from the offset; beyond :data:`SCAN_BYTES` the rest is estimated from the size of the
  transactions read (``transactions_estimated`` true);
* ``lag_seconds``: now minus the commit time of the oldest transaction not yet read (whole
  seconds: the binlog's timestamps); 0 when caught up. The source's ``lagSeconds`` metric says
  the same of the offset a running trigger reads up to.
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, dataclass

from cdc.checkpoint import read_committed
from cdc.cli.args import config_from_args
from cdc.errors import CdcError
from cdc.positions import Position
from cdc.replica.client import ReplicaClient
from cdc.replica.config import RetryPolicy
from cdc.replica.sql import ask_on, binary_logs, binlog_status, connect, mysql_error

__all__ = ["CheckpointLag", "measure", "run_checkpoint_lag", "SCAN_BYTES"]

#: binlog bytes read from the committed offset to count the transactions behind it
SCAN_BYTES = 64 << 20


@dataclass
class CheckpointLag:
    checkpoint: str
    batch: int
    file: str
    pos: int
    gtid: str | None
    server_file: str
    server_pos: int
    behind_bytes: int
    behind_transactions: int
    transactions_estimated: bool
    lag_seconds: float

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    def to_text(self) -> str:
        gtid = f" (GTID {self.gtid})" if self.gtid else ""
        txs = f"~{self.behind_transactions} (estimated)" if self.transactions_estimated \
            else str(self.behind_transactions)
        return (f"checkpoint {self.checkpoint}: batch {self.batch} committed up to "
                f"{self.file}:{self.pos}{gtid}\n"
                f"server binlog end: {self.server_file}:{self.server_pos}\n"
                f"behind: {self.behind_bytes} bytes, {txs} transactions, "
                f"{self.lag_seconds:.0f} s (the oldest change not read yet committed that long "
                f"ago)")


def measure(args, now: float | None = None) -> CheckpointLag:
    """Read the committed offset of ``args.checkpoint`` and measure it against the server of
    the connection options."""
    committed = read_committed(args.checkpoint)
    at = committed.position
    config = config_from_args(args, heartbeat_interval=None,
                              retry=RetryPolicy(max_attempts=1, max_time=None))
    end, logs = _server_end(config, at)
    behind = at.bytes_behind(end, logs)
    count, oldest, estimated = 0, None, False
    if behind > 0:
        count, oldest, read = _scan(config, at, end, logs)
        if read < behind and count:
            count, estimated = round(count * behind / read), True
    now = time.time() if now is None else now
    return CheckpointLag(args.checkpoint, committed.batch, at.file, at.pos,
                         committed.offset.get("gtid"), end.file, end.pos, behind, count,
                         estimated, max(0.0, now - oldest) if oldest is not None else 0.0)


def _server_end(config, at: Position) -> tuple[Position, list | None]:
    """The server's binlog end, and its binlog files' sizes when *at* is in an earlier file."""
    import pymysql
    conn = connect(config)
    try:
        end = ask_on(conn, binlog_status, config)
        return end, ask_on(conn, binary_logs, config) if at.file != end.file else None
    except pymysql.err.MySQLError as e:
        err = mysql_error(e, config)
        raise (err if err is not e else CdcError(f"cannot read the binlog end of "
                                                 f"{config.where}: {e}")) from e
    finally:
        conn.close()


def _scan(config, at: Position, end: Position, logs) -> tuple[int, float | None, int]:
    """(transactions, commit time of the first, bytes read): the binlog read from *at* until
    *end* or :data:`SCAN_BYTES`."""
    client = ReplicaClient(config, start=at.to_start(), blocking=False)
    count, first, read = 0, None, 0
    try:
        for tx in client.transactions():
            count += 1
            first = tx.timestamp if first is None else first
            done = Position(tx.file, tx.end_pos or tx.pos)
            read = at.bytes_behind(done, logs)
            if done.key >= end.key or read >= SCAN_BYTES:
                break
    finally:
        client.close()
    return count, first, read


def run_checkpoint_lag(args) -> int:
    lag = measure(args)
    sys.stdout.write((lag.to_json() if args.format == "jsonl" else lag.to_text()) + "\n")
    return 0
