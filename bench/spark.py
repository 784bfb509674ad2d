"""End-to-end into Spark: the ``binlog-cdc`` stream from the live server, ``availableNow``,
into the ``noop`` sink, with 1 and 2 partitions per micro-batch (``minPartitions``).

The time is the whole query (planning, the driver's boundary scan, the tasks' replication
reads, decoding, Arrow conversion, the JVM side), measured on a warm session.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time


def session(cores: int = 2):
    from streaming.apps.local_spark import local_spark
    compile_sources()
    return local_spark("binlog-cdc-bench", cores)


def compile_sources() -> None:
    """Write the bytecode of this project's modules (``cdc``, ``streaming``, ``bench``,
    ``pyspark_binlog_cdc``) next to them if it is missing or stale, as an installed package has
    it (pip compiles at install). Spark's Python workers run with this process' environment:
    with ``PYTHONDONTWRITEBYTECODE`` set and a source tree without bytecode, each of the ~5
    workers before a query's first batch would compile the source's modules again (0.1-0.3 s
    each), which no installed copy does."""
    import compileall

    import cdc
    import streaming
    for pkg in (cdc, streaming, sys.modules[__package__]):
        compileall.compile_dir(os.path.dirname(pkg.__file__), quiet=2)
    root = os.path.dirname(os.path.dirname(streaming.__file__))
    module = os.path.join(root, "pyspark_binlog_cdc.py")
    if os.path.isfile(module):
        compileall.compile_file(module, quiet=2)


def stream_rows_per_s(spark, conn: dict, db: str, start_file: str, partitions: int,
                      timeout: float = 600) -> tuple[int, float]:
    """(rows, seconds) of one availableNow run over the workload's binlog range."""
    reader = spark.readStream.format("binlog-cdc")
    opts = {"host": conn["host"], "port": str(conn["port"]), "user": conn["user"],
            "password": conn["password"], "includeTables": f"{db}.*",
            "startingPosition": json.dumps({"file": start_file, "pos": 4}),
            "minPartitions": str(partitions), "maxBytesPerPartition": str(1 << 30)}
    for k, v in opts.items():
        reader = reader.option(k, v)
    ckpt = tempfile.mkdtemp(prefix="bench-ckpt-")
    t = time.perf_counter()
    q = (reader.load().writeStream.format("noop").option("checkpointLocation", ckpt)
         .trigger(availableNow=True).start())
    if not q.awaitTermination(timeout):
        q.stop()
        raise RuntimeError(f"availableNow query did not stop in {timeout} s")
    dt = time.perf_counter() - t
    if q.exception() is not None:
        raise RuntimeError(f"query failed: {q.exception()}")
    rows = sum(p["numInputRows"] for p in q.recentProgress)
    return rows, dt


def warm_up(spark, conn: dict, db: str, start_file: str) -> None:
    """One small run so the first measured query does not pay for worker start-up."""
    stream_rows_per_s(spark, conn, db, start_file, 1)
