"""``binlog-cdc lag``: how far a replica following a server is behind it, sampled over time.

::

    BINLOG_CDC_PASSWORD=secret binlog-cdc lag --host db1 --user cdc
    binlog-cdc lag --host db1 --user cdc --password-file ~/.cdcpw --interval 5 --format jsonl
    binlog-cdc lag --host db1 --user cdc -p secret --from earliest --duration 60 --plot lag.png

A :class:`~cdc.replica.client.ReplicaClient` follows the server (from its current end by default, or
``--file``/``--pos``, ``--gtid``, ``--from earliest``) in a background thread, and every
``--interval`` seconds one sample is printed:

* ``lag_seconds``: now minus the commit time of the last transaction received; 0 when caught
  up (no bytes behind, or a heartbeat said the server has nothing more); null while unknown;
* ``behind_bytes``: the server's binlog end (``SHOW BINARY LOG STATUS``, ``SHOW MASTER STATUS``
  before MySQL 8.2) minus the client's position, summed over the files in between (``SHOW
  BINARY LOGS``);
* ``tx_per_s`` / ``rows_per_s``: transactions and row changes received per second since the
  previous sample.

It stops on Ctrl-C, SIGTERM or after ``--duration`` seconds; ``--plot out.png`` then draws lag
seconds and bytes behind over time (needs matplotlib: ``pip install matplotlib``).
The password is never printed.
"""

from __future__ import annotations

import argparse
import datetime as _dt
import json
import sys
import threading
import time
from dataclasses import asdict, dataclass
from typing import Callable

from cdc.cli.args import (add_connection_arguments, add_start_arguments, config_from_args,
                          on_sigterm, start_from_args)
from cdc.errors import CdcError, ConfigurationError, ServerConnectionError, is_transient
from cdc.positions import Position
from cdc.replica.client import ReplicaClient
from cdc.replica.config import ReplicaConfig, RetryPolicy
from cdc.replica.sql import SqlSession, binary_logs, binlog_status, connect

__all__ = ["LagSample", "LagMonitor", "ServerStatus", "plot_samples",
           "add_lag_arguments", "run_lag"]

PLOT_HINT = "pip install matplotlib (or, in a checkout, pip install -e '.[plot]')"


class ServerStatus:
    """The server's binlog end and file sizes over an ordinary SQL connection (made by
    *connect*, a callable returning a PyMySQL connection, to the source of *config*);
    reconnects after an error."""

    def __init__(self, connect: Callable[[], object], config: ReplicaConfig | None = None):
        self.sql = SqlSession(connect, retries=0)
        self.config = config

    def end(self) -> Position:
        """Where the server writes its next event."""
        return self._ask(binlog_status)

    def binary_logs(self) -> list[tuple[str, int]]:
        return self._ask(binary_logs)

    def _ask(self, ask):
        try:
            return self.sql.ask(ask, self.config)
        except Exception:
            self.close()        # the next call reconnects
            raise

    def close(self) -> None:
        self.sql.close()


@dataclass
class LagSample:
    """One sample: ``time`` (ISO 8601 UTC), ``ts`` (epoch seconds), ``lag_seconds`` (None while
    unknown), ``behind_bytes`` (None when the server could not be asked), ``tx_per_s``,
    ``rows_per_s``, cumulative ``transactions``/``rows``, the client's ``file``/``pos`` and the
    server's ``server_file``/``server_pos``."""

    time: str
    ts: float
    lag_seconds: float | None
    behind_bytes: int | None
    tx_per_s: float
    rows_per_s: float
    transactions: int
    rows: int
    file: str | None
    pos: int | None
    server_file: str | None
    server_pos: int | None

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    def to_text(self) -> str:
        lag = "-" if self.lag_seconds is None else f"{self.lag_seconds:.1f}"
        behind = "-" if self.behind_bytes is None else str(self.behind_bytes)
        at = f"{self.file}:{self.pos}" if self.file else "-"
        end = f"{self.server_file}:{self.server_pos}" if self.server_file else "-"
        return (f"{self.time:<24} {lag:>8} {behind:>13} {self.tx_per_s:>9.1f} "
                f"{self.rows_per_s:>10.1f}  {at} / {end}")

    TEXT_HEADER = (f"{'time':<24} {'lag_s':>8} {'behind_bytes':>13} {'tx/s':>9} {'rows/s':>10}"
                   f"  position / server end")


def _iso(t: float) -> str:
    return _dt.datetime.fromtimestamp(t, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] \
        + "Z"


class LagMonitor:
    """Follows a server with *client* in a background thread, counting what arrives;
    :meth:`sample` measures the lag at that moment. *status* defaults to a
    :class:`ServerStatus` over a connection made with the client's settings."""

    def __init__(self, client: ReplicaClient, status: ServerStatus | None = None):
        self.client = client
        self.status = status or ServerStatus(lambda: connect(client.config), client.config)
        self.transactions = 0
        self.rows = 0
        self.error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._prev: tuple[float, int, int] | None = None

    def start(self, wait: float | None = None) -> "LagMonitor":
        """Start following; wait up to *wait* seconds for the first connection."""
        self._thread = threading.Thread(target=self._follow, name="binlog-cdc-lag", daemon=True)
        self._thread.start()
        self._prev = (time.time(), 0, 0)
        if wait:
            deadline = time.monotonic() + wait
            while (self.client.dump_thread_starts == 0 and self.error is None
                   and self._thread.is_alive() and time.monotonic() < deadline):
                time.sleep(0.02)
        self.check()
        return self

    def _follow(self) -> None:
        try:
            for tx in self.client.transactions():
                self.rows += tx.row_count()
                self.transactions += 1
        except BaseException as e:   # reported by check() in the sampling thread
            if not self.client.closed:
                self.error = e

    def check(self) -> None:
        """Raise the error that stopped the follower, if any."""
        if self.error is not None:
            raise self.error

    def position(self) -> Position | None:
        """How far the client has received: its position, or the position of the last
        heartbeat when later (a heartbeat means everything before it has been sent)."""
        p = self.client.position
        best = Position(p.file, p.pos) if p is not None and p.file and p.pos is not None \
            else None
        hb = self.client.last_heartbeat
        if hb is not None and hb[0] and hb[1]:
            beat = Position(hb[0], int(hb[1]))
            if best is None or beat.key > best.key:
                best = beat
        return best

    def sample(self) -> LagSample:
        self.check()
        now = time.time()
        txs, rows = self.transactions, self.rows
        client_lag = self.client.lag_seconds
        at = self.position()
        end = logs = None
        try:
            end = self.status.end()
            if at is not None and at.file != end.file:
                logs = self.status.binary_logs()
        except Exception as e:
            if not is_transient(e):
                if isinstance(e, CdcError):
                    raise
                raise CdcError(f"cannot read the binlog end of {self.client.where}: {e}") from e
            end = None        # the server is away for the moment: unknown, not fatal
        behind = at.bytes_behind(end, logs) if at is not None and end is not None else None
        if behind == 0 or client_lag == 0:
            lag = 0.0
        else:
            lag = round(client_lag, 3) if client_lag is not None else None
        t0, tx0, rows0 = self._prev or (now, txs, rows)
        dt = max(now - t0, 1e-6)
        self._prev = (now, txs, rows)
        return LagSample(_iso(now), round(now, 3), lag, behind, round((txs - tx0) / dt, 2),
                         round((rows - rows0) / dt, 2), txs, rows,
                         at.file if at else None, at.pos if at else None,
                         end.file if end else None, end.pos if end else None)

    def stop(self, timeout: float = 10.0) -> None:
        self.client.close()
        if self._thread is not None:
            self._thread.join(timeout)
        self.status.close()


# --- the plot -------------------------------------------------------------------------------------


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise ConfigurationError(f"--plot needs matplotlib: {PLOT_HINT}") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def plot_samples(samples: list[LagSample], path: str, title: str = "binlog-cdc lag") -> str:
    """Draw lag seconds and bytes behind over time into a PNG at *path*."""
    plt = _pyplot()
    import matplotlib.dates as mdates

    times = [_dt.datetime.fromtimestamp(s.ts, _dt.timezone.utc) for s in samples]
    nan = float("nan")
    lag = [s.lag_seconds if s.lag_seconds is not None else nan for s in samples]
    behind = [s.behind_bytes if s.behind_bytes is not None else nan for s in samples]
    fig, (ax1, ax2) = plt.subplots(2, 1, sharex=True, figsize=(9, 5.5))
    try:
        ax1.plot(times, lag, marker=".", color="tab:red")
        ax1.set_ylabel("lag (s)")
        ax1.set_ylim(bottom=0)
        ax1.grid(True, alpha=0.3)
        ax1.set_title(title)
        ax2.plot(times, behind, marker=".", color="tab:blue")
        ax2.set_ylabel("bytes behind")
        ax2.set_ylim(bottom=0)
        ax2.grid(True, alpha=0.3)
        ax2.set_xlabel("time (UTC)")
        ax2.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M:%S"))
        fig.autofmt_xdate()
        fig.tight_layout()
        fig.savefig(path, format="png", dpi=100)
    finally:
        plt.close(fig)
    return path


# --- the command ----------------------------------------------------------------------------------


def add_lag_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``binlog-cdc lag`` (the caller sets ``func=run_lag``)."""
    add_connection_arguments(p, retries=False)
    add_start_arguments(p, "where to start (default: the server's current end)")

    k = p.add_argument_group("a Spark query's lag")
    k.add_argument("--checkpoint", metavar="DIR",
                   help="instead of following the server: how far the streaming query with "
                        "this checkpoint directory is behind it (its committed offset: bytes, "
                        "transactions, seconds), reported once; local directories only (a path "
                        "or file:), not object stores or HDFS; no Spark needed")
    o = p.add_argument_group("sampling and output")
    o.add_argument("--interval", type=float, default=1.0, metavar="S",
                   help="print a sample every S seconds (default 1)")
    o.add_argument("--duration", type=float, default=None, metavar="S",
                   help="stop after S seconds (default: until Ctrl-C/SIGTERM)")
    o.add_argument("--format", choices=("text", "jsonl"), default="text",
                   help="text: aligned columns; jsonl: one JSON object per sample (time, ts, "
                        "lag_seconds, behind_bytes, tx_per_s, rows_per_s, transactions, rows, "
                        "file, pos, server_file, server_pos)")
    o.add_argument("--plot", metavar="OUT.PNG",
                   help="at the end, draw lag seconds and bytes behind over time into this PNG "
                        f"(needs matplotlib: {PLOT_HINT})")
    o.add_argument("--heartbeat", type=float, default=None, metavar="S",
                   help="heartbeat period asked of the server (default: --interval, at least "
                        "0.5 s); a heartbeat tells that the replica is caught up")


def build_lag_client(args) -> ReplicaClient:
    if args.interval <= 0:
        raise ConfigurationError("--interval must be a positive number of seconds")
    if args.duration is not None and args.duration <= 0:
        raise ConfigurationError("--duration must be a positive number of seconds")
    heartbeat = args.heartbeat if args.heartbeat is not None else max(0.5, args.interval)
    config = config_from_args(args, heartbeat_interval=heartbeat,
                              retry=RetryPolicy(max_attempts=None, max_time=None))
    return ReplicaClient(config, start=start_from_args(args), blocking=True)


def _sample_loop(args, monitor, stop: threading.Event, samples: list, out) -> None:
    """Take a sample every --interval seconds until *stop* is set or --duration ends."""
    if args.format == "text":
        out.write(LagSample.TEXT_HEADER + "\n")
        out.flush()
    started = time.monotonic()
    # --duration bounds the whole run, the wait for the first connection included
    monitor.start(wait=args.connect_timeout if args.duration is None
                  else min(args.connect_timeout, args.duration))
    next_at = time.monotonic() + args.interval
    while not stop.is_set():
        if args.duration is not None:
            left = started + args.duration - time.monotonic()
            if left <= 0:
                break
            wait = min(next_at - time.monotonic(), left)
        else:
            wait = next_at - time.monotonic()
        if wait > 0 and stop.wait(wait):
            break
        if time.monotonic() < next_at:
            continue          # --duration ended between two samples
        next_at += args.interval
        if next_at < time.monotonic():   # a slow sample: skip the missed ticks
            next_at = time.monotonic() + args.interval
        s = monitor.sample()
        samples.append(s)
        out.write((s.to_json() if args.format == "jsonl" else s.to_text()) + "\n")
        out.flush()
    if monitor.client.dump_thread_starts == 0 and not stop.is_set():
        monitor.check()    # the follower's own error (e.g. refused, wrong password) first
        last = monitor.client.last_connect_failure
        raise ServerConnectionError(
            f"cannot connect to {monitor.client.where}: "
            f"{last if last is not None else 'no answer'} (no connection within --duration "
            f"{args.duration:g} s; check --host/--port and that the server is up)")


def run_lag(args) -> int:
    """Sample until Ctrl-C/SIGTERM or --duration (exit 0); errors are raised (the CLI prints
    them and exits 2). With --checkpoint: one report of that query's lag."""
    if args.checkpoint is not None:
        from cdc.cli.lag_checkpoint import run_checkpoint_lag
        return run_checkpoint_lag(args)
    if args.plot:
        _pyplot()   # fail now, not after the whole run
    client = build_lag_client(args)
    monitor = LagMonitor(client)
    out = sys.stdout
    samples: list[LagSample] = []
    stop = threading.Event()
    try:
        with on_sigterm(stop.set):
            _sample_loop(args, monitor, stop, samples, out)
    except KeyboardInterrupt:
        pass
    finally:
        monitor.stop()
    if args.plot:
        if samples:
            plot_samples(samples, args.plot, title=f"binlog-cdc lag of a replica of "
                                                   f"{args.host}:{args.port}")
            sys.stderr.write(f"binlog-cdc lag: {len(samples)} samples plotted to {args.plot}\n")
        else:
            sys.stderr.write("binlog-cdc lag: no samples taken, nothing plotted\n")
    return 0
