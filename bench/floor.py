"""The engine's floor: what Spark and the sink cost with a source that does nothing.

``bench-floor`` is a trivial Python streaming data source: it replays pre-built Arrow record
batches (IPC files, memory-mapped by the tasks) micro-batch by micro-batch. The batches are the
very rows a measured ``binlog-cdc`` query delivered: :func:`capture` runs that query once
(untimed) and keeps each micro-batch's Arrow table; :func:`prebuild` cuts each into the same
number of partitions the source used and into Arrow batches of the same size (8,192 rows), so
the floor pays exactly what the project's path pays after its source: Spark's Python -> JVM
transfer, the JVM's rows, ``toArrow`` back to the driver and the sink.

Shapes: the envelope as the query produced it (JSON images or typed structs), and ``flat``:
the typed ``after`` images as plain columns (the table's own columns, what a trivial source of
the table would yield). Sinks: ``noop``, ``append`` (``foreachBatch``: ``toArrow`` ->
``deltalake.write_deltalake`` append) and the upserter (``foreachBatch(DeltaUpserter)``).
"""

from __future__ import annotations

import os
import shutil
import tempfile
import threading
import time

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition

from streaming._compat import (LegacyOffsets, ReadAllAvailable, ReadMaxRows,
                              SupportsTriggerAvailableNow)
from pyspark.sql.types import StructType

FORMAT = "bench-floor"
ARROW_ROWS = 8192           # rows per Arrow batch, as streaming.source.batches yields them


class _File(InputPartition):
    def __init__(self, path: str):
        super().__init__(path)
        self.path = path


class CountedBatches(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """A stream of *count* planned micro-batches: offsets ``{"batch": k}``, one micro-batch per
    trigger (all of them when the engine asks for everything available: ``Trigger.Once``;
    ``Trigger.AvailableNow`` replays them one by one, as the measured query ran them); a
    subclass gives :meth:`batch_partitions` and ``read``."""

    def __init__(self, count: int):
        self.count = count
        self._legacy = LegacyOffsets()      # PySpark 4.0/4.1: the next batch's start

    def prepareForTriggerAvailableNow(self) -> None:
        """The batches are all known: nothing to fix (without this, ``Trigger.AvailableNow``
        would run them all as one micro-batch, their partitions side by side)."""

    def initialOffset(self) -> dict:
        return {"batch": 0}

    def getDefaultReadLimit(self):
        return ReadMaxRows(1)

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:
        # PySpark 4.0/4.1 give no start: see streaming._compat.LegacyOffsets
        return self._legacy.latest(self) if start is None else self.latest_offset(start, limit)

    def latest_offset(self, start: dict, limit, whole: bool = False) -> dict:
        if isinstance(limit, ReadAllAvailable):
            return {"batch": self.count}
        return {"batch": min(self.count, start["batch"] + 1)}

    def partitions(self, start: dict, end: dict):
        self._legacy.planned(start, end, lambda o: o["batch"])
        return [p for b in range(start["batch"], end["batch"]) for p in self.batch_partitions(b)]

    def batch_partitions(self, batch: int) -> list:
        raise NotImplementedError

    def commit(self, end: dict) -> None:
        pass


class FloorReader(CountedBatches):
    """The pre-built micro-batches of *root*, one file per partition."""

    def __init__(self, root: str, batches: int):
        super().__init__(batches)
        self.root = root

    def batch_partitions(self, batch: int) -> list:
        d = os.path.join(self.root, str(batch))
        return [_File(os.path.join(d, f)) for f in sorted(os.listdir(d))]

    def read(self, partition: _File):
        from streaming.source.worker_heap import settle
        settle()          # as the source's tasks do: no full collection of the imports per task
        with pa.memory_map(partition.path) as src:
            r = pa.ipc.open_file(src)
            for i in range(r.num_record_batches):
                yield r.get_batch(i)


class FloorSource(DataSource):
    """Options: ``path`` (from :func:`prebuild`), ``batches`` (micro-batches), ``schema``
    (the Spark schema as JSON)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self):
        return StructType.fromJson(__import__("json").loads(self.options["schema"]))

    def streamReader(self, schema: StructType) -> FloorReader:
        return FloorReader(self.options["path"], int(self.options["batches"]))


class Prebuilt:
    """Micro-batches written as Arrow IPC files: ``root/<batch>/<partition>.arrow``."""

    def __init__(self, root: str, batches: int, schema: StructType, rows: int):
        self.root, self.batches, self.schema, self.rows = root, batches, schema, rows

    def stream(self, spark):
        return (spark.readStream.format(FORMAT).option("path", self.root)
                .option("batches", str(self.batches)).option("schema", self.schema.json())
                .load())


def prebuild(tables: list[pa.Table], root: str, partitions: int,
             schema: StructType | None = None) -> Prebuilt:
    """Write each micro-batch table in *partitions* slices of ``ARROW_ROWS``-row batches;
    *schema*: the Spark schema the source declares (the captured stream's, with its metadata: a
    typed stream names its table there), else the tables' own."""
    from streaming._compat import from_arrow_schema, to_arrow_schema

    shutil.rmtree(root, ignore_errors=True)
    schema = schema or from_arrow_schema(tables[0].schema)
    arrow = to_arrow_schema(schema, timezone="UTC")     # what a task must yield
    rows = 0
    for b, t in enumerate(tables):
        t = t.cast(arrow)
        d = os.path.join(root, str(b))
        os.makedirs(d)
        per = -(-t.num_rows // max(1, partitions)) or 1
        for p, lo in enumerate(range(0, max(t.num_rows, 1), per)):
            part = t.slice(lo, per)
            with pa.OSFile(os.path.join(d, f"{p:05d}.arrow"), "wb") as f, \
                    pa.ipc.new_file(f, arrow) as w:
                for batch in part.to_batches(max_chunksize=ARROW_ROWS):
                    w.write_batch(batch)
        rows += t.num_rows
    return Prebuilt(root, len(tables), schema, rows)


def flat(t: pa.Table) -> pa.Table:
    """The ``after`` images of a typed envelope table as plain columns."""
    after = t.column("after").combine_chunks()
    return pa.Table.from_arrays(after.flatten(), names=[f.name for f in after.type])


def capture(stream_df, work: str) -> list[pa.Table]:
    """Each micro-batch of *stream_df* (a ``readStream...load()``, availableNow) as Arrow."""
    out: list[pa.Table] = []
    q = (stream_df.writeStream.foreachBatch(lambda df, _id: out.append(df.toArrow()))
         .option("checkpointLocation", tempfile.mkdtemp(prefix="floor-cap-", dir=work))
         .trigger(availableNow=True).start())
    q.awaitTermination()
    if q.exception() is not None:
        raise RuntimeError(str(q.exception()))
    return [t for t in out if t.num_rows]


def appender(root: str):
    """``foreachBatch``: ``toArrow`` -> ``deltalake.write_deltalake`` append."""
    from deltalake import write_deltalake

    def fb(df, _batch_id):
        t = df.toArrow()
        if t.num_rows:
            write_deltalake(root, t, mode="append")
    return fb


_TICK = os.sysconf("SC_CLK_TCK")


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of *pid* (all its threads)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            v = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(v[11]) + int(v[12])) / _TICK


def _processes() -> dict[int, str]:
    """This process ("driver": the driver's Python, delta-rs' threads included), the JVM it
    started ("jvm") and the JVM's descendants ("workers": the Python workers)."""
    from .e2e import _children, _cmd
    me, kids = os.getpid(), _children()
    out = {me: "driver"}
    todo = [p for p in kids.get(me, []) if "java" in _cmd(p)]
    out.update({p: "jvm" for p in todo})
    while todo:
        p = todo.pop()
        for c in kids.get(p, []):
            out[c] = "workers"
            todo.append(c)
    return out


class CpuMeter:
    """CPU seconds per process kind (:func:`_processes`) between start and :meth:`stop`,
    sampled every *interval* s: Python workers come and go (a worker's time is not added to a
    parent that ignores SIGCHLD), so each process counts from its first sample to its last."""

    def __init__(self, interval: float = 0.1):
        self.interval = interval
        self.first: dict[int, tuple[str, float]] = {}
        self.last: dict[int, float] = {}
        self._sample(at_start=True)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _sample(self, at_start: bool = False) -> None:
        for pid, kind in _processes().items():
            cpu = _cpu_s(pid)
            if pid not in self.first:
                # a process started after the meter: all its time is the run's
                self.first[pid] = (kind, cpu if at_start else 0.0)
            self.last[pid] = max(cpu, self.last.get(pid, 0.0))

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()
        self.own = time.thread_time()       # the meter's own CPU, not the driver's work

    def stop(self) -> dict[str, float]:
        self._stop.set()
        self._thread.join()
        self._sample()
        out = {"driver": -self.own, "jvm": 0.0, "workers": 0.0}
        for pid, (kind, c0) in self.first.items():
            out[kind] += self.last[pid] - c0
        # /proc counts in clock ticks (10 ms), thread_time() exactly: on a short run the
        # meter's own time can exceed the driver's counted ticks
        return {k: max(0.0, v) for k, v in out.items()}


def first_batch(up, start, what: str) -> tuple[float, float, float]:
    """Seconds from *start* (``start(foreachBatch function) -> StreamingQuery``) to the first
    micro-batch applied by the sink *up*, the CPU seconds the JVM and the Python workers
    spent meanwhile, and of those the Python workers' (:class:`CpuMeter`); then waits for the
    query's end and closes *up*.
    RuntimeError naming *what* when no batch came or the query failed."""
    done = threading.Event()

    def fb(df, batch_id):
        up(df, batch_id)
        done.set()

    meter = CpuMeter()
    t = time.perf_counter()
    q = start(fb)
    ok = done.wait(300)
    dt = time.perf_counter() - t
    cpu = meter.stop()
    q.awaitTermination(60)
    up.close()
    if not ok or q.exception() is not None:
        raise RuntimeError(f"{what} failed: {q.exception()}")
    return dt, cpu["jvm"] + cpu["workers"], cpu["workers"]


def run(stream_df, sink, work: str) -> tuple[int, float, dict]:
    """(rows, seconds, CPU seconds per process kind: :class:`CpuMeter`) of one availableNow
    run of *stream_df* into *sink* ("noop" or a foreachBatch function), from ``start()`` to the
    query's end."""
    w = stream_df.writeStream
    w = w.format("noop") if sink == "noop" else w.foreachBatch(sink)
    meter = CpuMeter()
    t = time.perf_counter()
    q = (w.option("checkpointLocation", tempfile.mkdtemp(prefix="floor-chk-", dir=work))
         .trigger(availableNow=True).start())
    q.awaitTermination()
    dt = time.perf_counter() - t
    cpu = meter.stop()
    if q.exception() is not None:
        raise RuntimeError(str(q.exception()))
    return sum(p["numInputRows"] for p in q.recentProgress), dt, cpu


def register(spark) -> None:
    spark.dataSource.register(FloorSource)
