"""Prometheus metrics for binlog-cdc streaming queries (lag, rows, bytes behind).

::

    from streaming.metrics import start_metrics

    listener = start_metrics(spark, port=9464)        # serves http://127.0.0.1:9464/metrics
    q = (spark.readStream.format("binlog-cdc").option("host", "db1")...
         .load().writeStream.queryName("orders_cdc")...start())
    ...
    stop_metrics(spark, listener)     # before the session stops or the program exits

Each progress event of a query that reads ``binlog-cdc`` updates, labelled by ``query`` (the
query name, or its id when unnamed) and ``query_id``:

* ``binlog_cdc_lag_seconds`` (gauge): age of the oldest change not yet read, 0 when caught up
  (the source's ``lagSeconds``; NaN while unknown);
* ``binlog_cdc_behind_bytes`` (gauge): binlog bytes between the offset the trigger reads up to
  and the server's end (summed over files);
* ``binlog_cdc_behind_transactions`` (gauge): transactions known to lie in between;
* ``binlog_cdc_rows_total`` (counter): row changes read (sum of the source's ``numInputRows``);
* ``binlog_cdc_last_progress_timestamp_seconds`` (gauge): when the last progress (or idle
  event) was handled;
* during an initial snapshot (``startingPosition=snapshot``) or a re-snapshot, its progress
  (:mod:`cdc.snapshot.progress`): ``binlog_cdc_snapshot_tables_left``,
  ``binlog_cdc_snapshot_tables{state="done"|"total"}``,
  ``binlog_cdc_snapshot_chunks{state=...}``, ``binlog_cdc_snapshot_rows{state="done"|"total"}``
  (total: rows read plus the server's estimate of the rest), ``binlog_cdc_snapshot_rows_per_second``
  and ``binlog_cdc_snapshot_eta_seconds`` (NaN while unknown; 0 when done);
* ``binlog_cdc_data_loss_resnapshots_total`` (counter): re-snapshots after lost binlog
  (``onDataLoss=resnapshot``: the snapshot progress names the position the loss began at,
  ``"lost"``), counted once each.

The figures come from the JSON that the source reports as its ``latestOffset`` in the progress
(``{"file", "pos", "behindBytes", "behindTransactions", "lagSeconds"}``); a source is recognised
by that JSON having ``behindBytes``, whatever Spark prints as its description. A trigger that
finds nothing new posts no progress but, every ``spark.sql.streaming.noDataProgressEventInterval``
(10 s by default), an idle event: the source says "nothing new" only once it has read to the
server's binlog end (other tables' changes there are read, not pending), so an idle event sets
the lag and the bytes and transactions behind to 0. When a query terminates its gauges are
removed (a stopped query has no lag); its counter stays.
"""

from __future__ import annotations

import json
import logging
import math
import threading
import time
from typing import Any

from pyspark.sql.streaming import StreamingQueryListener

__all__ = ["BinlogCdcMetricsListener", "start_metrics", "stop_metrics", "cdc_source_reports",
           "parse_exposition"]

log = logging.getLogger("streaming.metrics")

LABELS = ("query", "query_id")


def _get(obj: Any, name: str, default: Any = None) -> Any:
    """An attribute of a pyspark progress object, or a key of the dict form of one."""
    if isinstance(obj, dict) and name in obj:
        return obj[name]
    return getattr(obj, name, default)


def _offset_json(value: Any) -> dict | None:
    if value is None:
        return None
    if isinstance(value, dict):
        return value
    text = str(value).strip()
    if not text.startswith("{"):
        return None      # "null", "None" or another source's offset format
    try:
        d = json.loads(text)
    except ValueError:
        return None
    return d if isinstance(d, dict) else None


def cdc_source_reports(progress: Any) -> list[tuple[Any, dict]]:
    """``(source progress, latestOffset dict)`` for every binlog-cdc source of *progress*
    (a :class:`pyspark.sql.streaming.listener.StreamingQueryProgress` or its dict/JSON form):
    the sources whose ``latestOffset`` is a JSON object with ``behindBytes``."""
    out = []
    for src in _get(progress, "sources", None) or ():
        d = _offset_json(_get(src, "latestOffset"))
        if d is not None and ("behindBytes" in d or "snapshot" in d):
            out.append((src, d))
    return out


def _number(value: Any) -> float | None:
    try:
        x = float(value)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


class BinlogCdcMetricsListener(StreamingQueryListener):
    """A :class:`~pyspark.sql.streaming.StreamingQueryListener` that publishes the lag of
    binlog-cdc sources as Prometheus metrics in *registry* (default: a new
    :class:`prometheus_client.CollectorRegistry`, so several listeners can live in one
    process). Register it with ``spark.streams.addListener(listener)``, or use
    :func:`start_metrics`."""

    def __init__(self, registry=None, namespace: str = "binlog_cdc"):
        from prometheus_client import CollectorRegistry, Counter, Gauge

        self.registry = registry if registry is not None else CollectorRegistry(auto_describe=True)
        ns = namespace
        self.lag_seconds = Gauge(f"{ns}_lag_seconds", "Age in seconds of the oldest binlog "
                                 "change not yet read by the query (0 when caught up; NaN while "
                                 "unknown)", LABELS, registry=self.registry)
        self.behind_bytes = Gauge(f"{ns}_behind_bytes", "Binlog bytes between the offset the "
                                  "query reads up to and the server's binlog end",
                                  LABELS, registry=self.registry)
        self.behind_transactions = Gauge(f"{ns}_behind_transactions", "Transactions known to "
                                         "lie between the offset the query reads up to and the "
                                         "server's binlog end", LABELS, registry=self.registry)
        # prometheus_client appends _total to a counter's name on exposition
        self.rows = Counter(f"{ns}_rows", "Row changes read from the binlog (sum of the "
                            "source's numInputRows)", LABELS, registry=self.registry)
        self.last_progress = Gauge(f"{ns}_last_progress_timestamp_seconds", "Unix time of the "
                                   "last progress event handled for the query", LABELS,
                                   registry=self.registry)
        self.snapshot_tables_left = Gauge(f"{ns}_snapshot_tables_left", "Tables the initial "
                                          "snapshot (startingPosition=snapshot) has still to "
                                          "read, the one in progress included (0: done)",
                                          LABELS, registry=self.registry)
        state = LABELS + ("state",)
        self.snapshot_tables = Gauge(f"{ns}_snapshot_tables", "Tables of the snapshot: read "
                                     "(state=done) and in all (state=total)", state,
                                     registry=self.registry)
        self.snapshot_chunks = Gauge(f"{ns}_snapshot_chunks", "Chunks (tasks) of the snapshot: "
                                     "read (state=done) and in all, the rest estimated "
                                     "(state=total)", state, registry=self.registry)
        self.snapshot_rows = Gauge(f"{ns}_snapshot_rows", "Rows of the snapshot: read "
                                   "(state=done) and in all, the tables not read yet by the "
                                   "server's estimate (state=total)", state,
                                   registry=self.registry)
        self.snapshot_rate = Gauge(f"{ns}_snapshot_rows_per_second", "Snapshot rows read per "
                                   "second over the last batches (NaN while unknown)", LABELS,
                                   registry=self.registry)
        self.snapshot_eta = Gauge(f"{ns}_snapshot_eta_seconds", "Estimated seconds until the "
                                  "snapshot is read (NaN while unknown, 0 when done)", LABELS,
                                  registry=self.registry)
        self.data_loss = Counter(f"{ns}_data_loss_resnapshots", "Re-snapshots of the captured "
                                 "tables after their binlog was found purged "
                                 "(onDataLoss=resnapshot)", LABELS, registry=self.registry)
        self._losses: set = set()      # (query id, where the lost binlog began) counted
        self._gauges = (self.lag_seconds, self.behind_bytes, self.behind_transactions,
                        self.last_progress, self.snapshot_tables_left, self.snapshot_rate,
                        self.snapshot_eta)
        self._state_gauges = (self.snapshot_tables, self.snapshot_chunks, self.snapshot_rows)
        self._lock = threading.Lock()
        self._labels: dict[str, tuple[str, str]] = {}   # query id -> label values
        self.events = 0                                  # progress events with a cdc source

    # --- the listener interface ------------------------------------------------------------

    def onQueryStarted(self, event) -> None:
        pass

    def onQueryProgress(self, event) -> None:
        try:
            self.update(event.progress)
        except Exception:   # never let metrics break the query's listener bus
            log.exception("binlog-cdc metrics: cannot handle a progress event")

    def onQueryIdle(self, event) -> None:
        try:
            self.idle(str(_get(event, "id")))
        except Exception:
            log.exception("binlog-cdc metrics: cannot handle an idle event")

    def onQueryTerminated(self, event) -> None:
        try:
            self.forget(str(_get(event, "id")))
        except Exception:
            log.exception("binlog-cdc metrics: cannot handle a termination event")

    # --- the work ----------------------------------------------------------------------------

    def update(self, progress: Any) -> bool:
        """Publish one progress (an object with ``id``, ``name``, ``sources``; or its dict or
        JSON text). Returns False when it has no binlog-cdc source."""
        if isinstance(progress, (str, bytes)):
            progress = json.loads(progress)
        reports = cdc_source_reports(progress)
        if not reports:
            return False
        qid = str(_get(progress, "id", "") or "")
        name = _get(progress, "name", None) or qid or "unnamed"
        labels = (str(name), qid)
        lag = behind = txs = snap_left = None
        snaps = []
        losses: set = set()
        rows = 0
        for src, d in reports:
            snap = d.get("snapshot")
            if snap is not None:        # snapshot progress: no binlog lag to report yet
                left = snap.get("tablesLeft") if isinstance(snap, dict) else 0
                snap_left = max(snap_left or 0, int(left or 0))
                if isinstance(snap, dict):
                    snaps.append(snap)
                    if snap.get("lost"):
                        losses.add((qid, str(snap["lost"])))
            n = _number(_get(src, "numInputRows", 0))
            rows += int(n) if n and n > 0 else 0
            # several binlog-cdc sources in one query: report the worst of them
            for key, cur in (("lagSeconds", lag), ("behindBytes", behind),
                             ("behindTransactions", txs)):
                v = _number(d.get(key))
                if v is not None and (cur is None or v > cur):
                    if key == "lagSeconds":
                        lag = v
                    elif key == "behindBytes":
                        behind = v
                    else:
                        txs = v
        with self._lock:
            old = self._labels.get(qid)
            if old is not None and old != labels:      # renamed: drop the old series
                self._remove(old)
            self._labels[qid] = labels
            self.lag_seconds.labels(*labels).set(lag if lag is not None else math.nan)
            if snap_left is not None:
                self.snapshot_tables_left.labels(*labels).set(snap_left)
            if snaps:
                self._snapshot(labels, snaps)
            if behind is not None:
                self.behind_bytes.labels(*labels).set(behind)
            if txs is not None:
                self.behind_transactions.labels(*labels).set(txs)
            self.rows.labels(*labels).inc(rows)
            for loss in losses - self._losses:
                self._losses.add(loss)
                self.data_loss.labels(*labels).inc()
            self.last_progress.labels(*labels).set(time.time())
            self.events += 1
        return True

    def idle(self, query_id: str) -> bool:
        """A trigger of the query found nothing new to read (Spark's ``QueryIdleEvent``, every
        ``spark.sql.streaming.noDataProgressEventInterval`` while idle): a binlog-cdc source
        says so only when it has read to the server's binlog end (what it read there being
        other tables' changes, if any), so the query is caught up: lag and bytes behind 0.
        Returns False for a query not seen with a binlog-cdc source."""
        with self._lock:
            labels = self._labels.get(query_id)
            if labels is None:
                return False
            for gauge in (self.lag_seconds, self.behind_bytes, self.behind_transactions):
                gauge.labels(*labels).set(0)
            self.last_progress.labels(*labels).set(time.time())
        return True

    def _snapshot(self, labels: tuple, snaps: list) -> None:
        """The snapshot gauges (several binlog-cdc sources: summed; the rate summed, the ETA
        the longest)."""
        for gauge, done, total in ((self.snapshot_tables, "tablesDone", "tables"),
                                   (self.snapshot_chunks, "chunksDone", "chunks"),
                                   (self.snapshot_rows, "rowsDone", "rows")):
            for state, key in (("done", done), ("total", total)):
                values = [_number(s.get(key)) for s in snaps]
                if any(v is not None for v in values):
                    gauge.labels(*labels, state).set(sum(v for v in values if v is not None))
        rates = [_number(s.get("rowsPerSecond")) for s in snaps]
        etas = [_number(s.get("etaSeconds")) for s in snaps]
        self.snapshot_rate.labels(*labels).set(
            math.nan if None in rates else sum(rates))
        self.snapshot_eta.labels(*labels).set(math.nan if None in etas else max(etas))

    def _remove_state(self, labels: tuple) -> None:
        for g in self._state_gauges:
            for state in ("done", "total"):
                try:
                    g.remove(*labels, state)
                except KeyError:
                    pass

    def forget(self, query_id: str) -> None:
        """Remove the gauges of a query (it terminated); its rows counter stays."""
        with self._lock:
            labels = self._labels.get(query_id)
            if labels is not None:
                for g in self._gauges:
                    try:
                        g.remove(*labels)
                    except KeyError:
                        pass
                self._remove_state(labels)

    def _remove(self, labels: tuple[str, str]) -> None:
        for m in (*self._gauges, self.rows, self.data_loss):
            try:
                m.remove(*labels)
            except KeyError:
                pass
        self._remove_state(labels)

    def samples(self) -> dict[str, float]:
        """``{"name{label=...}": value}`` of this listener's metrics (handy in tests/REPLs)."""
        out = {}
        for metric in self.registry.collect():
            for s in metric.samples:
                lbl = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
                out[f"{s.name}{{{lbl}}}" if lbl else s.name] = s.value
        return out


def start_metrics(spark, port: int = 9464, addr: str = "127.0.0.1", registry=None,
                  listener: BinlogCdcMetricsListener | None = None) -> BinlogCdcMetricsListener:
    """Serve Prometheus metrics on ``http://addr:port/metrics`` and register a
    :class:`BinlogCdcMetricsListener` with ``spark.streams``. Returns the listener (its
    ``registry``, ``port`` and ``http_server``; :func:`stop_metrics` removes both before the
    program exits: a listener left registered has the JVM call into a Python process that is
    going away). *registry* defaults to a new
    :class:`~prometheus_client.CollectorRegistry` (pass ``prometheus_client.REGISTRY`` to
    serve the process-wide default metrics too)."""
    from prometheus_client import start_http_server

    listener = listener or BinlogCdcMetricsListener(registry)
    server = start_http_server(int(port), addr=addr, registry=listener.registry)
    # prometheus-client >= 0.17 returns (server, thread); older ones return None
    listener.http_server = server[0] if isinstance(server, tuple) else server
    # with port=0 the system picks a free port: tell which
    listener.port = getattr(listener.http_server, "server_port", int(port))
    try:
        spark.streams.addListener(listener)
    except BaseException:
        _close_server(listener)
        raise
    log.info("binlog-cdc metrics on http://%s:%d/metrics", addr, listener.port)
    return listener


def stop_metrics(spark, listener: BinlogCdcMetricsListener) -> None:
    """Undo :func:`start_metrics`: the listener removed from ``spark.streams`` (while the
    session is alive) and the HTTP server shut down (its port free again). Safe to call twice,
    and after the session stopped."""
    try:
        spark.streams.removeListener(listener)
    except Exception:  # noqa: BLE001 - a stopped session has no listeners left to remove
        log.debug("binlog-cdc metrics: the listener was not removed", exc_info=True)
    _close_server(listener)


def _close_server(listener) -> None:
    server = getattr(listener, "http_server", None)
    if server is not None:
        listener.http_server = None
        server.shutdown()
        server.server_close()


def parse_exposition(text: str) -> dict[str, float]:
    """Prometheus text exposition -> ``{"name{labels}": value}`` (label text as served)."""
    out: dict[str, float] = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        key, _, value = line.rpartition(" ")
        try:
            out[key] = float(value)
        except ValueError:
            pass
    return out

