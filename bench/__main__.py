"""python -m bench: decode and end-to-end throughput, side by side, in one run.

    python -m bench [--rows 200000] [--workloads inserts,updates,...] [--no-spark]
                    [--markdown FILE]
    python -m bench snapshot [--rows 500000]      # initial snapshot: see bench.snapshot
    python -m bench floor [--rows 500000]         # snapshot beside the engine's floor: bench.floor
    python -m bench e2e [--scale small]           # stream -> Delta end to end: see bench.e2e
    python -m bench sinks [--rows 20000]          # delta-rs vs Spark MERGE: see bench.sinks

Starts a private MariaDB (cdc.embedded), writes each workload into its own binlog files, then
measures on those same files / that same stream: binlog-cdc to Python tuples and to Arrow
RecordBatches, python-mysql-replication (live server), ``mariadb-binlog -v`` (C), Delta, and
Spark end to end with 1 and 2 partitions. Prints rows/s, the ratios and each measurement's
peak RSS; nothing is asserted. See bench.decode and bench.spark for what each column times.
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import shutil
import tempfile
from importlib.metadata import version

from cdc.embedded import EmbeddedMariaDB

from .decode import measure
from .workloads import WORKLOADS, run_workload

DECODERS = ["tuples", "tuples_py", "arrow", "arrow_typed", "pmr", "mariadb", "delta"]


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{cpu}, {os.cpu_count()} cores, {platform.system()} {platform.release()}"


def _versions(server) -> str:
    return (f"Python {platform.python_version()}, MariaDB {server.version}, "
            f"python-mysql-replication {version('mysql-replication')}, "
            f"pyspark {version('pyspark')}, pyarrow {version('pyarrow')}, "
            f"deltalake {version('deltalake')}")


def main(argv=None):
    import sys
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["snapshot"]:
        from .snapshot import main as snapshot_main
        return snapshot_main(argv[1:])
    if argv[:1] == ["floor"]:
        from .snapshot import main as snapshot_main
        return snapshot_main(argv[1:], floor_all=True)
    if argv[:1] == ["e2e"]:
        from .e2e import main as e2e_main
        return e2e_main(argv[1:])
    if argv[:1] == ["sinks"]:
        from .sinks import main as sinks_main
        return sinks_main(argv[1:])
    ap = argparse.ArgumentParser(prog="python -m bench", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=200_000, help="rows per workload")
    ap.add_argument("--small-tx-rows", type=int, default=None,
                    help="rows (= transactions) of small_tx (default: --rows)")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--repeat", type=int, default=3,
                    help="runs of each decoder measurement; the fastest counts (default 3)")
    ap.add_argument("--no-spark", action="store_true", help="skip the Spark end-to-end runs")
    ap.add_argument("--markdown", help="also write the results table (markdown) to this file")
    args = ap.parse_args(argv)

    results = []
    work = tempfile.mkdtemp(prefix="bench-")
    spark = None
    with EmbeddedMariaDB() as server:
        conn = server.cdc_params()
        header = (f"{'workload':9} {'rows':>7} {'tuples':>9} {'tup_py':>9} {'arrow':>8} {'arrow_t':>8} "
                  f"{'pmr':>7} {'C -v':>9} {'delta':>7} {'spark1':>7} {'spark2':>7} "
                  f"{'tup/pmr':>7} {'py/pmr':>6} {'cpu':>5} {'arr/pmr':>7} {'tup/C':>6} {'RSS tup/arr/delta MiB':>22}")
        print(_machine())
        print(_versions(server))
        print("rows/s per column; ratios of rows/s", flush=True)
        print(header, flush=True)
        for name in args.workloads.split(","):
            rows = args.small_tx_rows if (name == "small_tx" and args.small_tx_rows) else args.rows
            db, start_file, files = run_workload(server, name, rows, os.path.join(work, name))
            r = {"workload": name}
            for m in DECODERS:
                kw = {}
                if m == "pmr":
                    kw = {"conn": conn, "start_file": start_file}
                elif m == "delta":
                    kw = {"out": os.path.join(work, f"delta-{name}")}
                runs = [measure(m, files, **kw) for _ in range(max(1, args.repeat))]
                r[m] = min(runs, key=lambda x: x["seconds"])
                r[m]["cpu_seconds"] = min(x["cpu_seconds"] for x in runs)
                r[m]["rss_mib"] = max(x["rss_mib"] for x in runs)
            r["rows"] = r["tuples"]["rows"]
            for m in DECODERS:
                if r[m]["rows"] != r["rows"]:
                    raise RuntimeError(f"{name}: {m} saw {r[m]['rows']} rows, tuples {r['rows']}")
            if not args.no_spark:
                from .spark import session, stream_rows_per_s, warm_up
                if spark is None:
                    spark = session()
                    warm_up(spark, conn, db, start_file)
                for p in (1, 2):
                    n, dt = stream_rows_per_s(spark, conn, db, start_file, p)
                    if n != r["rows"]:
                        raise RuntimeError(f"{name}: spark saw {n} rows, tuples {r['rows']}")
                    r[f"spark{p}"] = {"rows": n, "seconds": dt}
            results.append(r)
            rate = {k: (v["rows"] / v["seconds"] if isinstance(v, dict) and "seconds" in v else
                        float("nan")) for k, v in r.items()}
            print(f"{name:9} {r['rows']:>7} {rate['tuples']:>9,.0f} {rate['tuples_py']:>9,.0f} "
                  f"{rate['arrow']:>8,.0f} "
                  f"{rate['arrow_typed']:>8,.0f} {rate['pmr']:>7,.0f} {rate['mariadb']:>9,.0f} "
                  f"{rate['delta']:>7,.0f} {rate.get('spark1', float('nan')):>7,.0f} "
                  f"{rate.get('spark2', float('nan')):>7,.0f} "
                  f"{rate['tuples'] / rate['pmr']:>7.1f} {rate['tuples_py'] / rate['pmr']:>6.1f} "
                  f"{cpu_ratio(r, 'tuples_py', 'pmr'):>5.1f} "
                  f"{rate['arrow'] / rate['pmr']:>7.2f} "
                  f"{rate['tuples'] / rate['mariadb']:>6.2f} "
                  f"{r['tuples']['rss_mib']:>8.0f}/{r['arrow']['rss_mib']:.0f}/"
                  f"{r['delta']['rss_mib']:.0f}", flush=True)
            r["rate"] = rate
        machine, versions = _machine(), _versions(server)
    if spark is not None:
        spark.stop()
    shutil.rmtree(work, ignore_errors=True)
    print(f"peak RSS of this process: "
          f"{resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(markdown(results, machine, versions, argv_text(args)))
        print(f"wrote {args.markdown}")


def cpu_ratio(r, a: str, b: str) -> float:
    """Ratio of rows per CPU-second (user + system of the decoding process)."""
    return (r[a]["rows"] / r[a]["cpu_seconds"]) / (r[b]["rows"] / r[b]["cpu_seconds"])


def argv_text(args) -> str:
    parts = ["python -m bench", f"--rows {args.rows}"]
    if args.small_tx_rows:
        parts.append(f"--small-tx-rows {args.small_tx_rows}")
    if args.repeat != 3:
        parts.append(f"--repeat {args.repeat}")
    if args.workloads != ",".join(WORKLOADS):
        parts.append(f"--workloads {args.workloads}")
    if args.no_spark:
        parts.append("--no-spark")
    parts.append(f"--markdown {args.markdown}")
    return " ".join(parts)


def markdown(results, machine: str, versions: str, command: str) -> str:
    def f(v):
        return "n/a" if v != v else f"{v:,.0f}"
    lines = [f"Machine: {machine}  ", f"Versions: {versions}  ", f"Command: `{command}`", "",
             "rows/s, wall clock (CPU s: rows per CPU-second of the decoding process, which a "
             "busy shared machine does not skew); pmr = python-mysql-replication; each decoder "
             "column is the fastest of --repeat runs, each in a fresh process; 'binlog-cdc "
             "tuples' uses the compiled row decoder (cdc.rows._rowdecode) when it is built, 'pure "
             "Python' is the same with BINLOG_CDC_DECODER=python; Spark and Delta "
             "columns are end to end (see bench/spark.py, bench/decode.py)", "",
             "| workload | rows | binlog-cdc tuples | tuples, pure Python | Arrow (JSON) | "
             "Arrow (typed) | python-mysql-replication | mariadb-binlog -v | tuples / pmr | "
             "pure Python / pmr | pure Python / pmr (CPU s) | Arrow / pmr | "
             "tuples / mariadb-binlog | Delta | Spark 1 part. | Spark 2 part. | "
             "peak RSS tuples / Arrow / Delta (MiB) |",
             "|---" * 17 + "|"]
    for r in results:
        x = r["rate"]
        lines.append(
            f"| {r['workload']} | {r['rows']:,} | {f(x['tuples'])} | {f(x['tuples_py'])} | "
            f"{f(x['arrow'])} | {f(x['arrow_typed'])} | {f(x['pmr'])} | {f(x['mariadb'])} | "
            f"{x['tuples'] / x['pmr']:.1f}x | {x['tuples_py'] / x['pmr']:.1f}x | "
            f"{cpu_ratio(r, 'tuples_py', 'pmr'):.1f}x | "
            f"{x['arrow'] / x['pmr']:.2f}x | "
            f"{x['tuples'] / x['mariadb']:.2f}x | {f(x['delta'])} | "
            f"{f(x.get('spark1', float('nan')))} | {f(x.get('spark2', float('nan')))} | "
            f"{r['tuples']['rss_mib']:.0f} / {r['arrow']['rss_mib']:.0f} / "
            f"{r['delta']['rss_mib']:.0f} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
