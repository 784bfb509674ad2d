"""python -m bench e2e: the pipeline a user runs, end to end, side by side in one run.

    python -m bench e2e [--scale tiny|small|full] [--workloads inserts,updates,small_tx]
                        [--rates 100,1000] [--max-events 100000] [--trigger "0 seconds"]
                        [--markdown FILE]

Starts a private MariaDB (cdc.embedded) and a ``local[2]`` Spark session and measures
``readStream.format("binlog-cdc")`` -> ``foreachBatch(DeltaUpserter)``:

* throughput: each workload (bench.workloads: inserts in 5000-row statements, one big UPDATE,
  one-row transactions ``small_tx``; ``wide``/``json`` when asked) streamed ``availableNow``
  with ``maxEventsPerTrigger`` into Delta, with option ``fields`` (the columns the upserter
  reads); changes/s from ``start()`` to the query's end, on a session that has already run a
  warm-up of inserts through each mode (``--no-warm-up``: without it). Side by side on the
  same binlog: ``decoder`` (bench decode's ``tuples`` path: the binlog files -> decoded rows,
  no Spark, no Delta) and ``hand-written`` (what a user writes
  instead: python-mysql-replication from the live server -> last change per key in a Python
  dict -> pyarrow -> ``deltalake`` MERGE with the same predicates, one MERGE per
  ``--max-events`` changes);
* floor: each throughput run's micro-batches, captured by an untimed run and replayed by
  :mod:`bench.floor`'s trivial source (pre-built Arrow, the same partitions) into the same
  ``foreachBatch(DeltaUpserter)``: "fraction of floor" is the run's changes/s over the floor's;
* latency: a writer thread commits one-row transactions at a fixed rate and stamps each commit
  time; a reader thread polls the Delta table and stamps when each row becomes visible; p50/p95/
  p99 of the difference, the rate the writer reached and whether the pipeline kept up (bench.latency);
  beside it the floor: bench.floor_ticks' trivial source of the same one-row transactions
  (appended to a file instead of the server) into the same sink, trigger and session;
* start: ``start()`` -> first micro-batch in Delta, on a fresh session (cold: Python workers not
  started yet) and again on the same session (warm); beside it the floor: the trivial source's
  cold start, one row into the same sink on a fresh session in a child process; each with the
  CPU seconds of the JVM and the Python workers (bench.floor.CpuMeter);
* peak RSS, sampled every 0.1 s from /proc while Spark runs: the driver's Python process (this
  one), the JVM, the Python workers (largest one and their sum).

Scales: ``tiny`` (seconds; the tests), ``small`` (default, < 2 min), ``full`` (the issue's
720,000 changes: 500k inserts, one 200k-row UPDATE, 20k one-row transactions; latency also at
5,000 transactions/s). ``BENCH_E2E_SCALE`` sets the default scale. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import tempfile
import threading
import time

from streaming.contract.envelope import UPSERT_FIELDS

SCALES = {
    "tiny": {"rows": {"inserts": 2000, "updates": 2000, "small_tx": 200, "wide": 500, "json": 500},
             "rates": [100], "lat_seconds": 2.0, "max_events": 1000, "warm_rows": 1000},
    "small": {"rows": {"inserts": 60_000, "updates": 30_000, "small_tx": 2_000, "wide": 10_000,
                       "json": 10_000},
              "rates": [100, 1000], "lat_seconds": 6.0, "max_events": 100_000,
              "warm_rows": 50_000},
    "full": {"rows": {"inserts": 500_000, "updates": 200_000, "small_tx": 20_000, "wide": 100_000,
                      "json": 100_000},
             "rates": [100, 1000, 5000], "lat_seconds": 20.0, "max_events": 100_000,
             "warm_rows": 200_000},
}
DEFAULT_WORKLOADS = "inserts,updates,small_tx"
KEY_OF = {"inserts": "orders", "updates": "orders", "small_tx": "orders", "wide": "wide",
          "json": "docs"}


# --- RSS sampling --------------------------------------------------------------------------------


def _rss_kib(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def _children() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(d))
    return kids


def _cmd(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def _argv0(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().split(b"\0", 1)[0].decode(errors="replace")
    except OSError:
        return ""


def python_descendants(roots: list[int], kids: dict[int, list[int]]) -> list[int]:
    """The processes below *roots* (in *kids*: :func:`_children`) whose program is a Python
    interpreter. By the program (``argv[0]``), not by "python" anywhere in the command line:
    the JVM's own command line names ``.../python3.x/site-packages/pyspark/jars``, and so does
    the short-lived child it forks to start each Python worker (``posix_spawn``, sharing the
    JVM's memory until its ``exec``), whose VmRSS is the JVM's."""
    out, todo = [], list(roots)
    while todo:
        p = todo.pop()
        for c in kids.get(p, []):
            todo.append(c)
            if os.path.basename(_argv0(c)).startswith("python"):
                out.append(c)
    return out


#: what ran while a sample was taken: the project's queries, the floor's (bench.floor,
#: bench.floor_ticks), the rest (the workload's writes, the hand-written pipeline in this process)
RSS_PHASES = ("project", "floor", "hand")


class RssSampler:
    """Peak RSS (MiB) of this process, the JVM it started and the JVM's Python workers, apart
    for each of :data:`RSS_PHASES` (set :attr:`phase` before each query; Spark reuses its
    Python workers from query to query, so a worker's heap can carry over)."""

    def __init__(self, interval: float = 0.1):
        self.interval = interval
        self.phase = "project"
        self.peak = {ph: {"driver": 0.0, "jvm": 0.0, "worker_max": 0.0, "workers_sum": 0.0}
                     for ph in RSS_PHASES}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        me = os.getpid()
        kids = _children()
        jvms = [p for p in kids.get(me, []) if "java" in _cmd(p)]
        workers = python_descendants(jvms, kids)
        rss = {"driver": _rss_kib(me) / 1024,
               "jvm": sum(_rss_kib(p) for p in jvms) / 1024}
        w = [_rss_kib(p) / 1024 for p in workers]
        rss["worker_max"] = max(w, default=0.0)
        rss["workers_sum"] = sum(w)
        peak = self.peak[self.phase]
        for k, v in rss.items():
            peak[k] = max(peak[k], v)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join()
        return self.peak


# --- the pipeline under test ---------------------------------------------------------------------


def _options(conn: dict, db: str, start_file: str, start_pos: int = 4, **extra) -> dict:
    opts = {"host": conn["host"], "port": str(conn["port"]), "user": conn["user"],
            "password": conn["password"], "includeTables": f"{db}.*",
            "startingPosition": json.dumps({"file": start_file, "pos": start_pos}),
            # the columns DeltaUpserter reads (Spark does not prune a Python source's)
            "fields": ",".join(UPSERT_FIELDS)}
    opts.update({k: str(v) for k, v in extra.items()})
    return opts


def _upserter(conn: dict, root: str, app_id: str):
    from streaming.sinks.delta.upserter import DeltaUpserter
    return DeltaUpserter(root, host=conn["host"], port=conn["port"], user=conn["user"],
                         password=conn["password"], app_id=app_id)


#: the throughput rows' workload label of each mode (--modes)
MODE_LABELS = {"json": "", "typed": " (typed: option table)",
               "defaults": " (without option fields)"}


def _query(spark, opts: dict, fn, ckpt: str, trigger: dict):
    reader = spark.readStream.format("binlog-cdc")
    for k, v in opts.items():
        reader = reader.option(k, v)
    return (reader.load().writeStream.foreachBatch(fn).option("checkpointLocation", ckpt)
            .trigger(**trigger).start())


def _throughput_options(conn, db, start_file, max_events, min_partitions, table=None,
                        fields=True) -> dict:
    opts = _options(conn, db, start_file, maxEventsPerTrigger=max_events,
                    minPartitions=min_partitions)
    if not fields:          # every envelope column: the source's default
        del opts["fields"]
    if table:
        del opts["includeTables"]
        opts["table"] = f"{db}.{table}"
    return opts


def floor_to_delta(spark, conn, db, start_file, work, tag, max_events, min_partitions,
                   table=None, fields=True) -> tuple[int, float]:
    """(changes, seconds) of the engine's floor for the same run (:mod:`bench.floor`): its
    micro-batches, captured by an untimed run, replayed by a trivial source in as many
    partitions into the same ``foreachBatch(DeltaUpserter)``."""
    from . import floor
    floor.register(spark)
    reader = spark.readStream.format("binlog-cdc")
    opts = _throughput_options(conn, db, start_file, max_events, min_partitions, table, fields)
    for k, v in opts.items():
        reader = reader.option(k, v)
    pre = floor.prebuild(floor.capture(reader.load(), work), os.path.join(work, "pre-" + tag),
                         min_partitions)
    up = _upserter(conn, os.path.join(work, "f-" + tag), "bench-floor")
    n, dt, _cpu = floor.run(pre.stream(spark), up, work)
    up.close()
    return n, dt


def stream_to_delta(spark, conn, db, start_file, out, ckpt, max_events, min_partitions=1,
                    timeout=900.0, table=None, fields=True):
    """(changes, seconds, batches, seconds in triggers) of one availableNow run into Delta
    (*table*: typed mode, option table=db.table; *fields* False: without option fields)."""
    up = _upserter(conn, out, "bench-e2e")
    opts = _throughput_options(conn, db, start_file, max_events, min_partitions, table, fields)
    t = time.perf_counter()
    q = _query(spark, opts, up, ckpt, {"availableNow": True})
    if not q.awaitTermination(timeout):
        q.stop()
        raise RuntimeError(f"availableNow query did not stop in {timeout} s")
    dt = time.perf_counter() - t
    up.close()
    if q.exception() is not None:
        raise RuntimeError(f"query failed: {q.exception()}")
    progress = q.recentProgress
    busy = sum(p["durationMs"].get("triggerExecution", 0) for p in progress) / 1000
    return sum(p["numInputRows"] for p in progress), dt, len(progress), busy


def warm_up_runs(spark, server, conn, work: str, rows: int, modes, max_events: int,
                 min_partitions: int, out=print) -> None:
    """Untimed runs of *rows* inserts through each mode before the throughput runs: the JVM's
    JIT compiles the Arrow/row conversion code in a query's first ~100k changes (the first
    100k-row batch of a fresh session took 4-6 s against ~0.6 s later), so without this the
    first workload measured would carry the warm-up that "start" already reports."""
    from .workloads import run_workload
    db, start_file, _ = run_workload(server, "inserts", rows, os.path.join(work, "bl-warm"))
    for mode in modes:
        t = time.perf_counter()
        stream_to_delta(spark, conn, db, start_file, os.path.join(work, "d-warm-" + mode),
                        os.path.join(work, "c-warm-" + mode), max_events, min_partitions,
                        table=KEY_OF["inserts"] if mode == "typed" else None,
                        fields=mode != "defaults")
        out(f"warm-up ({mode}, {rows:,} inserts, not timed): {time.perf_counter() - t:.1f} s")


def start_time(spark, conn, work: str, tag: str) -> tuple[float, float, float]:
    """Seconds from start() to the first micro-batch committed in Delta (one row waiting), the
    CPU seconds the JVM and the Python workers spent meanwhile, and the Python workers' alone
    (:class:`bench.floor.CpuMeter`: on a shared machine the wall clock moves with the load, the
    CPU much less)."""
    db = f"bench_start_{tag}"
    server_exec = conn["_server"].execute
    server_exec(f"DROP DATABASE IF EXISTS {db}")
    server_exec(f"CREATE DATABASE {db}")
    conn["_server"].flush_binary_logs()
    start_file, _ = conn["_server"].current_position()
    server_exec(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)")
    server_exec(f"INSERT INTO {db}.t VALUES (1, 1)")
    up = _upserter(conn, os.path.join(work, f"start-{tag}"), "bench-start")
    from .floor import first_batch
    return first_batch(up, lambda fb: _query(
        spark, _options(conn, db, start_file), fb, os.path.join(work, f"ckpt-start-{tag}"),
        {"availableNow": True}), "start run")


def floor_start(conn, work: str) -> tuple[float, float, float]:
    """:func:`start_time`'s cold start for :mod:`bench.floor_ticks`' trivial source (one row
    into the same sink) on a fresh session of its own."""
    from . import floor_ticks
    db = "bench_start_floor"
    conn["_server"].execute(f"DROP DATABASE IF EXISTS {db}")
    conn["_server"].execute(f"CREATE DATABASE {db}")
    conn["_server"].execute(f"CREATE TABLE {db}.t (id INT PRIMARY KEY, v INT)")
    return floor_ticks.cold_start(conn, db, "t", work)


# --- the hand-written pipeline -------------------------------------------------------------------


def hand_written(conn, db, table, start_file, out, max_events) -> tuple[int, float]:
    """python-mysql-replication -> last change per key (a dict) -> pyarrow -> deltalake MERGE."""
    import pyarrow as pa
    from deltalake import DeltaTable
    from pymysqlreplication import BinLogStreamReader
    from pymysqlreplication.row_event import DeleteRowsEvent, UpdateRowsEvent, WriteRowsEvent

    from streaming.sinks.delta.upserter import ServerColumns, arrow_schema
    from cdc.replica.config import ReplicaConfig
    cols = ServerColumns(ReplicaConfig(conn["host"], conn["port"], conn["user"], conn["password"]))
    info = cols(db, table)      # the schema a user would write by hand: not timed
    cols.close()
    schema = arrow_schema(info.columns)
    pk = info.primary_key
    schema_op = schema.append(pa.field("_op", pa.string()))
    pred = " AND ".join(f"t.`{k}` = s.`{k}`" for k in pk)
    settings = {k: conn[k] for k in ("host", "port", "user", "password")}

    t0 = time.perf_counter()
    dt = DeltaTable.create(out, schema, mode="ignore")
    last: dict = {}
    n = pending = 0

    def flush():
        rows = [dict(v, _op=op) for op, v in last.values()]
        src = pa.Table.from_pylist(rows, schema=schema_op)
        (dt.merge(src, pred, source_alias="s", target_alias="t")
         .when_matched_delete(predicate="s._op = 'd'")
         .when_matched_update_all(predicate="s._op <> 'd'", except_cols=["_op"])
         .when_not_matched_insert_all(predicate="s._op <> 'd'", except_cols=["_op"]).execute())
        last.clear()

    stream = BinLogStreamReader(connection_settings=settings, server_id=9998, blocking=False,
                                resume_stream=True, log_file=start_file, log_pos=4,
                                only_schemas=[db], only_tables=[table],
                                only_events=[WriteRowsEvent, UpdateRowsEvent, DeleteRowsEvent])
    for ev in stream:
        for row in ev.rows:
            if isinstance(ev, WriteRowsEvent):
                v, op = row["values"], "c"
            elif isinstance(ev, UpdateRowsEvent):
                b, v, op = row["before_values"], row["after_values"], "u"
                old = tuple(b[k] for k in pk)
                if old != tuple(v[k] for k in pk):
                    last.pop(old, None)
                    last[old] = ("d", b)
            else:
                v, op = row["values"], "d"
            key = tuple(v[k] for k in pk)
            last.pop(key, None)
            last[key] = (op, v)
        n += len(ev.rows)
        pending += len(ev.rows)
        if pending >= max_events:
            flush()
            pending = 0
    stream.close()
    if last:
        flush()
    return n, time.perf_counter() - t0


# --- the run -------------------------------------------------------------------------------------


def run(scale: str = "small", workloads: str = DEFAULT_WORKLOADS, rates=None,
        max_events: int | None = None, trigger: str = "0 seconds", hand: bool = True,
        decoder: bool = True, min_partitions: int = 1, modes=("json",), warm_up: bool = True,
        out=print) -> dict:
    """Everything, in one run; returns {"throughput": [...], "latency": [...], "start": {...},
    "rss": {...}} and prints the tables as it goes."""
    from cdc.embedded import EmbeddedMariaDB

    from . import latency
    from .decode import measure
    from .spark import session
    from .workloads import run_workload

    cfg = SCALES[scale]
    rates = cfg["rates"] if rates is None else rates
    max_events = max_events or cfg["max_events"]
    work = tempfile.mkdtemp(prefix="bench-e2e-")
    res: dict = {"scale": scale, "throughput": [], "latency": [], "start": {}}
    try:
        with EmbeddedMariaDB() as server:
            conn = dict(server.cdc_params(), _server=server)
            t = time.perf_counter()
            spark = session()
            res["start"]["session"] = time.perf_counter() - t
            sampler = RssSampler()
            try:
                res["start"]["cold"] = start_time(spark, conn, work, "cold")
                res["start"]["warm"] = start_time(spark, conn, work, "warm")
                res["start"]["floor"] = floor_start(conn, work)
                out(f"start -> first batch in Delta: cold {res['start']['cold'][0]:.2f} s, warm "
                    f"{res['start']['warm'][0]:.2f} s (session {res['start']['session']:.1f} s); "
                    f"floor (trivial source) cold {res['start']['floor'][0]:.2f} s")
                names = [w for w in workloads.split(",") if w not in ("", "none")]
                if names and warm_up:
                    warm_up_runs(spark, server, conn, work, cfg["warm_rows"], modes, max_events,
                                 min_partitions, out)
                out(THROUGHPUT_HEADER)
                for name in names:
                    rows = cfg["rows"][name]
                    sampler.phase = "hand"
                    db, start_file, files = run_workload(server, name, rows,
                                                         os.path.join(work, "bl-" + name))
                    decoder_rate = hand_rate = hand_changes = None
                    if decoder:
                        m = measure("tuples", files)
                        decoder_rate = m["rows"] / m["seconds"]
                    if hand:
                        hn, ht = hand_written(conn, db, KEY_OF[name], start_file,
                                              os.path.join(work, "h-" + name), max_events)
                        hand_rate, hand_changes = hn / ht, hn
                    for mode in modes:
                        typed, fields = mode == "typed", mode != "defaults"
                        tag = name + ("" if mode == "json" else "-" + mode)
                        r = {"workload": name + MODE_LABELS[mode]}
                        sampler.phase = "project"
                        n, dt, batches, busy = stream_to_delta(
                            spark, conn, db, start_file, os.path.join(work, "d-" + tag),
                            os.path.join(work, "c-" + tag), max_events, min_partitions,
                            table=KEY_OF[name] if typed else None, fields=fields)
                        sampler.phase = "floor"
                        fn, fdt = floor_to_delta(spark, conn, db, start_file, work, tag,
                                                 max_events, min_partitions,
                                                 table=KEY_OF[name] if typed else None,
                                                 fields=fields)
                        if fn != n:
                            raise RuntimeError(f"{tag}: the floor replayed {fn} of {n} changes")
                        r.update(changes=n, seconds=dt, rate=n / dt, batches=batches,
                                 floor_rate=fn / fdt,
                                 sustained=n / busy if busy else float("nan"),
                                 decoder_rate=decoder_rate, hand_rate=hand_rate,
                                 hand_changes=hand_changes)
                        res["throughput"].append(r)
                        out(_throughput_row(r))
                out(LATENCY_HEADER)
                for rate in rates:
                    for floor in (False, True):
                        sampler.phase = "floor" if floor else "project"
                        lat = latency.latency(spark, server, conn, work, rate, cfg["lat_seconds"],
                                      trigger, max_events, floor=floor)
                        res["latency"].append(lat)
                        out(_latency_row(lat))
            finally:
                res["rss"] = sampler.stop()
                spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    res["trigger"], res["max_events"] = trigger, max_events
    res["min_partitions"] = min_partitions
    return res


def _f(v, spec=",.0f"):
    return "n/a" if v is None or v != v else format(v, spec)


def _throughput_row(r: dict) -> str:
    dec, hand = r.get("decoder_rate"), r.get("hand_rate")
    return (f"| {r['workload']} | {r['changes']:,} | {r['batches']} | {_f(r['rate'])} | "
            f"{_f(r['floor_rate'])} | {_f(r['rate'] / r['floor_rate'], '.2f')} | "
            f"{_f(r['sustained'])} | "
            f"{_f(dec)} | {_f(r['rate'] / dec if dec else None, '.3f')} | {_f(hand)} | "
            f"{_f(r['rate'] / hand if hand else None, '.2f')} |")


def _rate(x: dict) -> str:
    return f"{x['rate']:,}/s" + (" floor (trivial source)" if x.get("floor") else "")


def _latency_row(x: dict) -> str:
    kept = "yes" if x["seen"] == x["rows"] else f"no ({x['seen']}/{x['rows']})"
    return (f"| {_rate(x)} | {x['reached']:,.0f}/s | {x['rows']:,} | {x['p50']:.3f} | "
            f"{x['p95']:.3f} | {x['p99']:.3f} | {x['max']:.3f} | {x['batches']} | {kept} |")


THROUGHPUT_HEADER = ("| workload | changes | batches | changes/s into Delta | "
                     "floor changes/s | fraction of floor | "
                     "changes/s in micro-batches (without query start) | "
                     "decoder alone rows/s | "
                     "e2e / decoder | hand-written (pmr -> pyarrow -> deltalake MERGE) changes/s | "
                     "e2e / hand-written |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
LATENCY_HEADER = ("| target rate | writer reached | transactions | p50 s | p95 s | p99 s | max s | "
                  "batches | kept up |\n|---|---:|---:|---:|---:|---:|---:|---:|---|")


RSS_LABELS = {"project": "binlog-cdc's queries",
              "floor": "the floor's queries (the bench's trivial sources)",
              "hand": "the workload's writes, the hand-written pipeline, the decoder alone"}


def table(res: dict) -> str:
    """The results as markdown tables."""
    lines = [f"Scale: {res['scale']}; maxEventsPerTrigger {res['max_events']:,}; minPartitions "
             f"{res['min_partitions']} (throughput); latency trigger processingTime "
             f"'{res['trigger']}'", "", THROUGHPUT_HEADER]
    lines += [_throughput_row(r) for r in res["throughput"]]
    lines += ["", "commit -> visible in Delta (one-row transactions)", "", LATENCY_HEADER]
    lines += [_latency_row(x) for x in res["latency"]]
    if res["latency"]:
        keys = list(res["latency"][0]["costs"])
        lines += ["", "median ms per micro-batch with rows, latency runs (Spark's durationMs)", "",
                  "| rate | " + " | ".join(keys) + " |", "|---" + "|---:" * len(keys) + "|"]
        lines += [f"| {_rate(x)} | " + " | ".join(_f(x["costs"][k]) for k in keys) + " |"
                  for x in res["latency"]]
    s, m = res["start"], res["rss"]
    lines += ["", "| start -> first batch in Delta | seconds | CPU s (JVM + Python workers) | "
                  "of which Python workers |\n|---|---:|---:|---:|"]
    lines += [f"| {name} | {s[k][0]:.2f} | {s[k][1]:.2f} | {s[k][2]:.2f} |" for k, name in (
        ("cold", "cold (fresh session)"), ("floor", "floor: trivial source, cold (fresh session)"),
        ("warm", "warm"))]
    lines += ["", "| peak RSS (MiB), while running | driver Python | JVM | "
                  "largest Python worker | Python workers summed |\n|---|---:|---:|---:|---:|"]
    lines += [f"| {RSS_LABELS[ph]} | {m[ph]['driver']:.0f} | {m[ph]['jvm']:.0f} | "
              f"{m[ph]['worker_max']:.0f} | {m[ph]['workers_sum']:.0f} |"
              for ph in RSS_PHASES if m[ph]["driver"]]       # the phases that ran
    return "\n".join(lines) + "\n"


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(prog="python -m bench e2e", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", choices=sorted(SCALES),
                    default=os.environ.get("BENCH_E2E_SCALE", "small"))
    ap.add_argument("--workloads", default=DEFAULT_WORKLOADS,
                    help=f"comma-separated, of {','.join(KEY_OF)} (none: latency and start only)")
    ap.add_argument("--rates",
                    help="latency: transactions/s, comma-separated (default: the scale's; "
                         "none: no latency runs)")
    ap.add_argument("--max-events", type=int, help="maxEventsPerTrigger (default: the scale's)")
    ap.add_argument("--trigger", default="0 seconds", help="latency runs' processingTime trigger")
    ap.add_argument("--min-partitions", type=int, default=1,
                    help="minPartitions of the throughput runs (default 1)")
    ap.add_argument("--modes", default="json,typed",
                    help="throughput runs, comma-separated: json (the envelope, option "
                         "includeTables, option fields as the upserter reads), typed (option "
                         "table=db.<the workload's table>), defaults (json without option "
                         "fields: every envelope column)")
    ap.add_argument("--no-hand", action="store_true", help="skip the hand-written pipeline")
    ap.add_argument("--no-warm-up", action="store_true",
                    help="measure throughput on a JVM that has not run a big batch yet")
    ap.add_argument("--markdown", help="also write the tables to this file")
    args = ap.parse_args(argv)
    modes = [m for m in args.modes.split(",") if m]
    if not modes or set(modes) - set(MODE_LABELS):
        ap.error(f"--modes: comma-separated, of {','.join(MODE_LABELS)}")
    rates = None if not args.rates else [] if args.rates == "none" else [
        int(x) for x in args.rates.split(",")]
    res = run(args.scale, args.workloads, rates, args.max_events, args.trigger,
              hand=not args.no_hand, min_partitions=args.min_partitions,
              warm_up=not args.no_warm_up,
              modes=modes)
    show(table(res), args.markdown)
    return res


def show(text: str, markdown: str | None) -> None:
    """Print a run's tables, and write them to the file *markdown* when given."""
    print()
    print(text)
    if markdown:
        with open(markdown, "w") as f:
            f.write(text)


if __name__ == "__main__":
    main()
