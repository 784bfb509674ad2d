"""The floor of latency and start: a trivial streaming source of one-row changes, measured the
way ``bench e2e`` measures the ``binlog-cdc`` stream.

``bench-floor-ticks`` reads a "tick file" that a writer appends one fixed-width line to per
committed transaction (the row's id). Its offset is the number of lines (the file's size over
the line width: no scan), one partition per micro-batch reads the new lines and yields the
rows in the envelope the upserter reads (``op='c'``, ``db``, ``table``, ``after`` as JSON
``{"id": i, "v": i}``, ``seq``). Into the same ``foreachBatch(DeltaUpserter)`` with the same
trigger and session, commit -> visible of this source is what Spark and the sink cost a
one-row-transaction stream with a source that does nothing; its cold start (a fresh session in
a child process: :func:`cold_start`) is what a session costs before any source runs.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile

import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.types import StructType

FORMAT = "bench-floor-ticks"
WIDTH = 20      # bytes per line: 19 digits and a newline


class _Range(InputPartition):
    def __init__(self, path: str, start: int, end: int):
        super().__init__((start, end))
        self.path, self.start, self.end = path, start, end


class TickReader(DataSourceStreamReader):
    def __init__(self, path: str, db: str, table: str, schema: StructType):
        self.path, self.db, self.table, self.schema = path, db, table, schema

    def initialOffset(self) -> dict:
        return {"n": 0}

    def latestOffset(self, start: dict | None = None, limit=None) -> dict:
        try:
            return {"n": os.path.getsize(self.path) // WIDTH}
        except OSError:
            return {"n": 0}

    def partitions(self, start: dict, end: dict):
        return [_Range(self.path, start["n"], end["n"])] if end["n"] > start["n"] else []

    def read(self, p: _Range):
        from streaming._compat import to_arrow_schema
        with open(p.path, "rb") as f:
            f.seek(p.start * WIDTH)
            ids = [int(x) for x in f.read((p.end - p.start) * WIDTH).split()]
        n = len(ids)
        cols = {"op": ["c"] * n, "db": [self.db] * n, "table": [self.table] * n,
                "before": [None] * n, "after": [f'{{"id": {i}, "v": {i}}}' for i in ids],
                "seq": ["%010d:%012d:%010d" % (1, i, 0) for i in ids]}
        schema = to_arrow_schema(self.schema)
        yield pa.RecordBatch.from_arrays([pa.array(cols[f.name], f.type) for f in schema],
                                         schema=schema)

    def commit(self, end: dict) -> None:
        pass


class TickSource(DataSource):
    """Options: ``path`` (the tick file), ``db``, ``table`` (the server table the rows are of:
    the upserter reads its columns there)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self):
        from streaming.contract.envelope import UPSERT_FIELDS
        from streaming.contract.spark_schema import JSON_SCHEMA, with_fields
        return with_fields(JSON_SCHEMA, UPSERT_FIELDS)

    def streamReader(self, schema: StructType) -> TickReader:
        o = self.options
        return TickReader(o["path"], o["db"], o["table"], schema)


def stream(spark, path: str, db: str, table: str):
    """The tick source's streaming DataFrame (registers the source in *spark*)."""
    spark.dataSource.register(TickSource)
    return (spark.readStream.format(FORMAT).option("path", path).option("db", db)
            .option("table", table).load())


class Ticks:
    """The writer's side: :meth:`commit` appends row *i*'s line (flushed: the source sees it)."""

    def __init__(self, path: str):
        self.path = path
        self._f = open(path, "ab", buffering=0)

    def commit(self, i: int) -> None:
        self._f.write(b"%019d\n" % i)

    def close(self) -> None:
        self._f.close()


def cold_start(conn: dict, db: str, table: str, work: str) -> tuple[float, float, float]:
    """Seconds (and CPU seconds of the JVM and the Python workers meanwhile, and of the Python
    workers alone: :func:`bench.floor.first_batch`) from ``start()``
    to the first micro-batch in Delta of a one-row tick stream on a
    fresh session of its own (a child process: a new JVM and new Python workers, as the
    stream's cold start has), into ``foreachBatch(DeltaUpserter)``; *db*.*table* (``id``,
    ``v``) must exist on the server of *conn*."""
    args = {k: conn[k] for k in ("host", "port", "user", "password")}
    args.update(db=db, table=table, work=tempfile.mkdtemp(prefix="ticks-start-", dir=work))
    out = subprocess.run([sys.executable, "-m", "bench.floor_ticks", json.dumps(args)],
                         capture_output=True, text=True, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"the floor's cold start failed: {out.stderr[-2000:]}")
    return tuple(float(x) for x in out.stdout.strip().splitlines()[-1].split())


def _child(args: dict) -> tuple[float, float, float]:
    from .e2e import _upserter
    from .floor import first_batch
    from .spark import session

    spark = session()
    work = args["work"]
    path = os.path.join(work, "ticks")
    t = Ticks(path)
    t.commit(1)
    t.close()
    up = _upserter(args, os.path.join(work, "delta"), "bench-floor-start")
    try:
        return first_batch(up, lambda fb: (
            stream(spark, path, args["db"], args["table"]).writeStream.foreachBatch(fb)
            .option("checkpointLocation", os.path.join(work, "ckpt"))
            .trigger(availableNow=True).start()), "tick stream")
    finally:
        spark.stop()


if __name__ == "__main__":
    print(*_child(json.loads(sys.argv[1])))
