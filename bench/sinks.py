"""python -m bench sinks: the two upsert sinks side by side on the same stream, in one run.

    python -m bench sinks [--rows 20000] [--max-events 5000] [--rate 20] [--seconds 15]
                          [--markdown FILE]

Starts a private MariaDB (cdc.embedded) and one ``local[2]`` Spark session with the table-format
connectors this PySpark has (``streaming.apps.local_spark``: delta-spark on 4.0-4.2, Iceberg on
4.0/4.1), and measures ``readStream.format("binlog-cdc")`` -> ``foreachBatch(sink)`` for each
sink: ``delta-rs`` (DeltaUpserter: the batch collected to the driver, MERGEd by delta-rs),
``delta-spark`` and ``iceberg`` (SparkMerge: Spark's MERGE on the executors):

* throughput: the ``updates`` workload (``--rows`` rows inserted, then one UPDATE of every row:
  full before and after images; the stream starts at the UPDATE, into a new target table)
  streamed ``availableNow`` with ``maxEventsPerTrigger``; changes/s from
  ``start()`` to the query's end, after an untimed warm-up run of each sink;
* latency: a writer commits one-row transactions at ``--rate``/s for ``--seconds`` and stamps
  each commit; a reader polls the target (delta-rs reads both Delta tables; Iceberg is read
  through the session) and stamps when each row becomes visible; p50/p95/max of the difference.

Nothing is asserted. Run it in a PySpark that has a connector (``python3 -m tools.spark_env
4.2``; the main environment's 4.3 has none, so only delta-rs runs there).
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from importlib.metadata import version

from .e2e import _options, _query, show
from .latency import _pct, server_inserts, timed_inserts
from .spark import compile_sources


def available_sinks() -> list[str]:
    from streaming.apps.local_spark import connector
    out = ["delta-rs"]
    for fmt, sink in (("delta", "delta-spark"), ("iceberg", "iceberg")):
        try:
            connector(fmt)
            if fmt == "delta":
                __import__("delta.tables")           # delta-spark's Python API
        except Exception:  # noqa: BLE001 - no connector: the sink is left out
            continue
        out.append(sink)
    return out


def make_sink(kind: str, conn: dict, work: str, tag: str):
    """(foreachBatch function, visible ids reader factory) of sink *kind*."""
    server = {"host": conn["host"], "port": conn["port"], "user": conn["user"],
              "password": conn["password"]}
    if kind == "delta-rs":
        from streaming.sinks.delta.upserter import DeltaUpserter
        return DeltaUpserter(os.path.join(work, f"{tag}-rs"), app_id=tag, **server)
    from streaming.sinks.spark import SparkMerge
    if kind == "delta-spark":
        return SparkMerge(os.path.join(work, f"{tag}-spark"), format="delta", app_id=tag,
                          **server)
    return SparkMerge("iceberg", format="iceberg", app_id=tag, table=lambda db, t:
                      f"iceberg.`{tag}`.`{t}`", **server)


def _ids_reader(spark, sink, kind: str, db: str, table: str):
    """A function returning the ids the target shows now (None: not there yet)."""
    if kind == "iceberg":
        name = sink.name_of(db, table)

        def read_iceberg():
            try:
                return [r[0] for r in spark.table(name).select("id").collect()]
            except Exception:  # noqa: BLE001 - not created yet
                return None
        return read_iceberg
    import pyarrow.parquet as pq
    from deltalake import DeltaTable
    path = sink.path(db, table) if kind == "delta-rs" else sink.name_of(db, table)[7:-1]
    state: dict = {"files": set()}

    def read_delta():
        """The ids of the data files added since the last call: the log through delta-rs, the
        files with pyarrow (delta-rs does not read delta-spark's column-mapped tables)."""
        try:
            if "dt" not in state:
                state["dt"] = DeltaTable(path)
            else:
                state["dt"].update_incremental()
        except Exception:  # noqa: BLE001 - not created yet
            return None
        dt = state["dt"]
        if state.get("version") == dt.version():
            return []
        state["version"] = dt.version()
        field = next(f for f in dt.schema().fields if f.name == "id")
        column = (field.metadata or {}).get("delta.columnMapping.physicalName", "id")
        out = []
        for f in dt.get_add_actions(flatten=True).column("path").to_pylist():
            if f not in state["files"]:
                state["files"].add(f)
                out += pq.read_table(os.path.join(path, f), columns=[column]).column(
                    column).to_pylist()
        return out
    return read_delta


def throughput(spark, server, conn, kind: str, work: str, rows: int, max_events: int) -> dict:
    from .workloads import run_workload
    db, start_file, _files = run_workload(server, "updates", rows, os.path.join(work, "bl-" + kind))
    sink = make_sink(kind, conn, work, f"tp_{kind.replace('-', '_')}")
    t = time.perf_counter()
    q = _query(spark, _options(conn, db, start_file, maxEventsPerTrigger=max_events), sink,
               os.path.join(work, "ckpt-tp-" + kind), {"availableNow": True})
    q.awaitTermination()
    dt = time.perf_counter() - t
    if q.exception() is not None:
        raise RuntimeError(f"{kind}: {q.exception()}")
    sink.close()
    changes = sum(p["numInputRows"] for p in q.recentProgress)
    return {"sink": kind, "changes": changes, "batches": len(q.recentProgress),
            "seconds": dt, "rate": changes / dt}


def latency(spark, server, conn, kind: str, work: str, rate: int, seconds: float) -> dict:
    db = f"bench_sinklat_{kind.replace('-', '_')}"
    server.execute(f"DROP DATABASE IF EXISTS {db}")
    server.execute(f"CREATE DATABASE {db}")
    server.execute(f"CREATE TABLE {db}.ev (id BIGINT PRIMARY KEY, v INT)")
    start_file, start_pos = server.current_position()
    sink = make_sink(kind, conn, work, f"lat_{kind.replace('-', '_')}")
    q = _query(spark, _options(conn, db, start_file, start_pos), sink,
               os.path.join(work, "ckpt-lat-" + kind), {"processingTime": "0 seconds"})
    read = _ids_reader(spark, sink, kind, db, "ev")
    visible: dict[int, float] = {}

    def reader(stop):
        while not stop.is_set():
            ids = read()
            now = time.time()
            for i in ids or ():
                visible.setdefault(i, now)
            time.sleep(0.02)

    commit, close = server_inserts(server, db)
    lat, _reached, n = timed_inserts(commit, q, visible, reader, rate, seconds)
    close()
    sink.close()
    return {"sink": kind, "rows": n, "seen": len(lat), "p50": _pct(lat, 50),
            "p95": _pct(lat, 95), "max": max(lat, default=float("nan")),
            "batches": len(q.recentProgress)}


def table(res: dict) -> str:
    lat = {x["sink"]: x for x in res["latency"]}
    lines = [f"PySpark {res['pyspark']}; `updates` workload: one UPDATE of {res['rows']:,} rows "
             f"(the stream starts at it), maxEventsPerTrigger {res['max_events']:,}; latency: "
             f"{res['rate']} one-row transactions/s for {res['seconds']} s, trigger "
             "processingTime '0 seconds'", "",
             "| sink | changes | batches | changes/s | latency p50 s | p95 s | max s | kept up |",
             "|---|---:|---:|---:|---:|---:|---:|---|"]
    for r in res["throughput"]:
        x = lat.get(r["sink"])
        kept = "n/a" if x is None else "yes" if x["seen"] == x["rows"] else \
            f"no ({x['seen']}/{x['rows']})"
        f = (lambda k: "n/a" if x is None else f"{x[k]:.3f}")
        lines.append(f"| {r['sink']} | {r['changes']:,} | {r['batches']} | {r['rate']:,.0f} | "
                     f"{f('p50')} | {f('p95')} | {f('max')} | {kept} |")
    return "\n".join(lines) + "\n"


def run(rows: int, max_events: int, rate: int, seconds: float, out=print) -> dict:
    from cdc.embedded import EmbeddedMariaDB
    from streaming.apps.local_spark import local_spark
    work = tempfile.mkdtemp(prefix="bench-sinks-")
    sinks = available_sinks()
    formats = [f for f, s in (("delta", "delta-spark"), ("iceberg", "iceberg")) if s in sinks]
    res = {"pyspark": version("pyspark"), "rows": rows, "max_events": max_events, "rate": rate,
           "seconds": seconds, "throughput": [], "latency": []}
    try:
        with EmbeddedMariaDB() as server:
            conn = server.cdc_params()
            compile_sources()
            spark = local_spark("bench-sinks", formats=formats,
                                warehouse=os.path.join(work, "warehouse"))
            out(f"sinks: {', '.join(sinks)}")
            for kind in sinks:                 # untimed: JIT, Python workers, first tables
                throughput(spark, server, conn, kind, os.path.join(work, "warm"), 2000, 2000)
            for kind in sinks:
                r = throughput(spark, server, conn, kind, work, rows, max_events)
                out(f"{kind}: {r['changes']:,} changes in {r['seconds']:.1f} s")
                res["throughput"].append(r)
            for kind in sinks:
                x = latency(spark, server, conn, kind, work, rate, seconds)
                out(f"{kind}: latency p50 {x['p50']:.3f} s")
                res["latency"].append(x)
            spark.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return res


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(prog="python -m bench sinks", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--max-events", type=int, default=5_000, help="maxEventsPerTrigger")
    ap.add_argument("--rate", type=int, default=20, help="latency: transactions/s")
    ap.add_argument("--seconds", type=float, default=15.0, help="latency: how long")
    ap.add_argument("--markdown", help="also write the table to this file")
    args = ap.parse_args(argv)
    res = run(args.rows, args.max_events, args.rate, args.seconds)
    show(table(res), args.markdown)
    return res
