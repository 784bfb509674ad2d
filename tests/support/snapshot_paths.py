"""A snapshot chunk's Arrow batches by both of the source's paths, for tests that they agree:
the row path (``row_converter`` -> :class:`~streaming.source.batches.BatchBuilder` via
``record_batches``) and the column path (:mod:`streaming.source.snapshot_columns`, what
``read_chunk`` takes)."""

from __future__ import annotations

import pyarrow as pa

from cdc.positions import Position
from cdc.snapshot.reader import ChunkPosition
from cdc.snapshot.values import row_converter
from cdc.binlog.tablemap import TableMap
from streaming.contract.spark_schema import JSON_SCHEMA, typed_schema
from streaming.source import snapshot as snap
from streaming.source.batches import BatchBuilder, record_batches


class _Reader:
    """The chunk reader's two ways of handing rows over, on rows already read."""

    def __init__(self, columns, raw: list, rows_per_batch: int):
        self.position = ChunkPosition(Position("mysql-bin.000003", 4711), True)
        self.columns = columns
        self.parts = [raw[k:k + rows_per_batch] for k in range(0, len(raw), rows_per_batch)]

    def raw_batches(self):
        yield from self.parts

    def batches(self):
        convert = row_converter(self.columns)
        for part in self.parts:
            yield list(map(convert, part))


def both_paths(columns, raw: list, *, typed: bool, key=(0,), rows_per_batch: int = 8192,
               schema=None) -> tuple[pa.Table, pa.Table]:
    """(the row path's batches, the column path's) of the rows *raw* (as the client read them
    for ``select_list(columns)``) of table ``db.t``, as Arrow tables."""
    key = list(key)
    for i, c in enumerate(columns):
        c.primary_key = i in key
    tmap = TableMap(0, 0, "db", "t", list(columns), key, True)
    if schema is None:
        schema = typed_schema(columns) if typed else JSON_SCHEMA
    typed_columns = list(columns) if typed else None
    reader = _Reader(columns, raw, rows_per_batch)
    tx = snap._ChunkRows(reader, tmap)
    old = list(record_batches([tx], BatchBuilder(schema, typed_columns), rows_per_batch))
    new = list(snap._column_batches(reader, tmap, tx, BatchBuilder(schema, typed_columns)))
    return pa.Table.from_batches(old), pa.Table.from_batches(new)
