"""The floor of the snapshot's server read: what reading the chunks costs with nothing else.

``bench-floor-read`` is a trivial Python streaming data source whose tasks read the very chunks
a ``binlog-cdc`` snapshot reads, from the same server, with the same client library and
session (:func:`cdc.snapshot.reader.connect_for_snapshot`) and the same statement
(``SELECT <select_list> FROM t WHERE <key range> ORDER BY <key>``, fetched 8,192 rows at a
time), and yield each fetched batch as Arrow with the cheapest conversion there is: every
column's values as they came (``bytes``) into one ``pa.array(values, pa.binary())``. No
consistent-snapshot transaction, no position, no value conversion, no envelope, no checks.

:func:`plan` gets the chunks from the project's own planning
(:mod:`streaming.source.snapshot`: the micro-batches of an ``availableNow`` snapshot and each
one's chunks), so the floor reads what the project reads, micro-batch by micro-batch.
"""

from __future__ import annotations

import json
from operator import itemgetter

import pyarrow as pa
from pyspark.sql.datasource import DataSource, InputPartition
from pyspark.sql.types import BinaryType, StructField, StructType

from .floor import CountedBatches

FORMAT = "bench-floor-read"
FETCH_ROWS = 8192          # rows per fetch, as cdc.snapshot.reader's raw_batches


class _Chunk(InputPartition):
    def __init__(self, sql: str, args: list):
        super().__init__((sql, args))
        self.sql = sql
        self.args = args


class ReadFloorReader(CountedBatches):
    """The planned micro-batches, each one's chunks its partitions."""

    def __init__(self, options: dict, batches: list, names: list[str]):
        super().__init__(len(batches))
        self.options = options
        self.batches = batches
        self.names = names

    def batch_partitions(self, batch: int) -> list:
        return [_Chunk(sql, args) for sql, args in self.batches[batch]]

    def read(self, partition: _Chunk):
        from cdc.replica.config import ReplicaConfig
        from cdc.snapshot.reader import connect_for_snapshot
        from streaming.source.worker_heap import settle
        settle()          # as the source's tasks do: no full collection of the imports per task
        o = self.options
        conn = connect_for_snapshot(ReplicaConfig(o["host"], int(o["port"]), o["user"],
                                                  o["password"]))
        schema = pa.schema([(n, pa.binary()) for n in self.names])
        getters = [itemgetter(i) for i in range(len(self.names))]
        try:
            with conn.cursor() as cur:
                cur.execute(partition.sql, partition.args)
                while True:
                    rows = cur.fetchmany(FETCH_ROWS)
                    if not rows:
                        break
                    yield pa.RecordBatch.from_arrays(
                        [pa.array(list(map(g, rows)), pa.binary()) for g in getters],
                        schema=schema)
        finally:
            conn.close()


class ReadFloorSource(DataSource):
    """Options: ``host``, ``port``, ``user``, ``password``, ``plan`` (:func:`plan`'s JSON)."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def _plan(self) -> dict:
        return json.loads(self.options["plan"])

    def schema(self):
        return StructType([StructField(n, BinaryType()) for n in self._plan()["columns"]])

    def streamReader(self, schema: StructType) -> ReadFloorReader:
        p = self._plan()
        return ReadFloorReader(dict(self.options), p["batches"], p["columns"])


def plan(conn: dict, table: str, chunk_rows: int) -> str:
    """The chunks an ``availableNow`` snapshot of *table* (``db.table``) reads, grouped in its
    micro-batches, each as its statement and parameters (JSON, the option ``plan``)."""
    from cdc.snapshot.reader import chunk_select
    from streaming.source import snapshot
    from streaming.source.driver import Driver
    from streaming.source.options import SourceOptions

    opts = SourceOptions.parse({"host": conn["host"], "port": str(conn["port"]),
                                "user": conn["user"], "password": conn["password"],
                                "includeTables": table, "startingPosition": "snapshot",
                                "snapshotChunkRows": str(chunk_rows)})
    d = Driver(opts)
    batches, columns = [], []
    try:
        start = snapshot.initial_offset(d, opts)
        while snapshot.in_snapshot(start):
            state = snapshot.next_state(d, opts, start, None)
            end = snapshot.with_state({k: v for k, v in start.items() if k != snapshot.KEY},
                                      state)
            chunks = []
            for c in snapshot.partitions(d, opts, start, end):
                columns = [col.name for col in c.table.column_defs()]
                sql, args = chunk_select(c.table, c.after, c.upto)
                chunks.append((sql, list(args)))
            batches.append(chunks)
            start = end
    finally:
        d.close()
    return json.dumps({"columns": columns, "batches": batches}, default=str)


def stream(spark, conn: dict, plan_json: str):
    """The floor's ``readStream`` of the planned chunks."""
    r = spark.readStream.format(FORMAT)
    for k in ("host", "port", "user", "password"):
        r = r.option(k, str(conn[k]))
    return r.option("plan", plan_json).load()


def register(spark) -> None:
    spark.dataSource.register(ReadFloorSource)
