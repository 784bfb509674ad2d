"""Commit -> visible: a writer commits one-row transactions at a fixed rate and stamps each
commit; a reader polls the target and stamps when each row shows (``bench e2e``, ``bench
sinks``)."""

from __future__ import annotations

import os
import threading
import time

from .e2e import _options, _query, _upserter



def _pct(xs: list[float], p: float) -> float:
    if not xs:
        return float("nan")
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100 * (len(xs) - 1))))]


def server_inserts(server, db: str):
    """(commit, close) of a latency run's writer on the server: ``commit(i)`` inserts row *i*
    into ``db.ev`` (``id``, ``v``) in a transaction of its own."""
    c = server.connect(database=db)
    c.autocommit(True)
    cur = c.cursor()
    return (lambda i: cur.execute(f"INSERT INTO ev VALUES ({i}, {i})")), c.close


def timed_inserts(commit, q, visible: dict, reader, rate: int, seconds: float):
    """The writer of a latency run: ``commit(i)`` commits one-row transaction *i* (row *i* of
    the target) at *rate*/s for *seconds*, while ``reader(stop)`` runs in a thread, stamping in
    *visible* (id -> time) when each row shows in the target, until the Event *stop* is set.
    Row 0 first, not timed (the stream's first batch); waits for every row to show (or for a
    timeout, or the query *q* to end), then stops *q*. Returns (commit -> visible seconds of
    each row seen, the rate reached, rows timed)."""
    stop = threading.Event()
    committed: dict[int, float] = {}
    commit(0)                                           # warm: the first batch, not timed
    committed[0] = time.time()
    rt = threading.Thread(target=reader, args=(stop,), daemon=True)
    rt.start()
    deadline = time.time() + 300
    while 0 not in visible and time.time() < deadline and q.isActive:
        time.sleep(0.01)
    n = int(rate * seconds)
    t0 = time.perf_counter()
    for i in range(1, n + 1):
        due = t0 + i / rate
        wait = due - time.perf_counter()
        if wait > 0:
            time.sleep(wait)
        commit(i)
        committed[i] = time.time()
    reached = n / (time.perf_counter() - t0)
    deadline = time.time() + max(30.0, seconds * 3)
    while len(visible) < n + 1 and time.time() < deadline and q.isActive:
        time.sleep(0.02)
    stop.set()
    rt.join()
    q.stop()
    return [visible[i] - committed[i] for i in range(1, n + 1) if i in visible], reached, n


def latency(spark, server, conn, work: str, rate: int, seconds: float, trigger: str,
            max_events: int, floor: bool = False) -> dict:
    """Commit -> visible in Delta at *rate* one-row transactions/s for *seconds*; *floor*: of
    :mod:`bench.floor_ticks`' trivial source (a tick file for the server's transactions) into
    the same sink, trigger and session."""
    db = f"bench_lat_{rate}"
    if floor:
        from . import floor_ticks
        ticks = floor_ticks.Ticks(os.path.join(work, f"ticks-{rate}"))
        commit, close = ticks.commit, ticks.close
        df = floor_ticks.stream(spark, ticks.path, db, "ev")
    else:
        server.execute(f"DROP DATABASE IF EXISTS {db}")
        server.execute(f"CREATE DATABASE {db}")
        server.execute(f"CREATE TABLE {db}.ev (id BIGINT PRIMARY KEY, v INT)")
        start_file, start_pos = server.current_position()
        commit, close = server_inserts(server, db)
        df = None
    tag = f"{rate}-floor" if floor else str(rate)
    out = os.path.join(work, f"lat-{tag}")
    up = _upserter(conn, out, "bench-lat")
    if df is None:
        q = _query(spark, _options(conn, db, start_file, start_pos,
                                   maxEventsPerTrigger=max_events),
                   up, os.path.join(work, f"ckpt-lat-{tag}"), {"processingTime": trigger})
    else:
        q = (df.writeStream.foreachBatch(up).option("checkpointLocation",
                                                    os.path.join(work, f"ckpt-lat-{tag}"))
             .trigger(processingTime=trigger).start())
    visible: dict[int, float] = {}
    lat, reached, n = timed_inserts(commit, q, visible, _delta_reader(os.path.join(out, db, "ev"),
                                                                      visible), rate, seconds)
    close()
    up.close()
    costs = {}                                  # median ms per phase of the batches with rows
    busy = [p["durationMs"] for p in q.recentProgress if p["numInputRows"]]
    for k in ("triggerExecution", "latestOffset", "queryPlanning", "addBatch", "walCommit",
              "commitOffsets"):
        vals = sorted(d.get(k, 0) for d in busy)
        costs[k] = vals[len(vals) // 2] if vals else float("nan")
    return {"rate": rate, "reached": reached, "rows": n, "seen": len(lat), "floor": floor,
            "p50": _pct(lat, 50), "p95": _pct(lat, 95), "p99": _pct(lat, 99),
            "max": max(lat, default=float("nan")), "batches": len(q.recentProgress),
            "costs": costs}


def _delta_reader(path: str, visible: dict):
    """A latency run's reader: polls the Delta table at *path* and stamps in *visible* when each
    row id first shows."""
    import pyarrow.parquet as pq
    from deltalake import DeltaTable
    seen_files: set[str] = set()

    def reader(stop):
        d, version = None, None
        while not stop.is_set():
            try:
                if d is None:
                    d = DeltaTable(path)        # one handle, brought up to date in place
                else:
                    d.update_incremental()
            except Exception:        # noqa: BLE001 - not created yet
                time.sleep(0.01)
                continue
            if d.version() != version:
                now = time.time()
                version = d.version()
                adds = d.get_add_actions(flatten=True).column("path").to_pylist()
                for f in adds:                  # only the files not read yet
                    if f not in seen_files:
                        seen_files.add(f)
                        ids = pq.read_table(os.path.join(path, f), columns=["id"])
                        for i in ids.column("id").to_pylist():
                            visible.setdefault(i, now)
            time.sleep(0.01)
    return reader
