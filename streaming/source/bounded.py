"""Bounded batch reads of a live server: ``startingPosition`` .. ``endingPosition`` as one DataFrame.

::

    df = (spark.read.format("binlog-cdc").option("host", ...).option("user", ...)
          .option("startingPosition", '{"file": "mysql-bin.000042", "pos": 4}')
          .option("endingPosition", "latest")          # or a file/pos, or {"gtid": "..."}
          .load())

Like Kafka's ``startingOffsets``/``endingOffsets``: the rows are those a stream started at
``startingPosition`` would deliver up to the end, read the way the stream reads a micro-batch
(the same code: :class:`streaming.source.BinlogStreamReader` plans the range with
:func:`streaming.source.planning.plan_chunks` and each task reads its chunk over its own replication
connection).  The end is a transaction boundary: ``latest`` is the binlog end when the read is
planned; a file/pos takes the transactions that end at or before it; a GTID set takes the
transactions from the start on while their GTIDs are in the set.
"""

from __future__ import annotations

import logging

from pyspark.sql.datasource import DataSourceReader, InputPartition

from cdc.errors import ConfigurationError
from cdc.positions import binlog_file_number

from streaming._compat import ReadAllAvailable

log = logging.getLogger("binlog_cdc.spark")


def _in_set(state, gtid: str) -> bool:
    if hasattr(state, "contains"):
        return state.contains(gtid)
    return gtid in state


class BoundedBatchReader(DataSourceReader):
    """The chunks of a stream reader's range, planned once on the driver."""

    def __init__(self, stream_reader):
        self.stream = stream_reader
        opts = stream_reader.opts
        if opts.snapshot:
            raise ConfigurationError("options startingPosition=snapshot and endingPosition "
                                     "exclude each other: a bounded read reads the binlog "
                                     "(omit endingPosition for a snapshot)")

    def end_offset(self, start: dict) -> dict:
        """The offset of the read's end (a transaction boundary after *start*)."""
        r, d = self.stream, self.stream.driver
        spec = r.opts.ending
        end = d.master_status()
        if spec.kind == "file":
            target = (binlog_file_number(spec.file), spec.pos)
            if d.offset(start).key >= target:
                return start
            d.available_now_end = min(end.key, target)
        else:
            d.available_now_end = end.key
        offset = r.latestOffset(start, ReadAllAvailable())
        if not spec.is_gtid:
            return offset
        want = spec.position().gtid
        chosen = start
        for b in d.boundaries:
            if b.position.last_gtid and not _in_set(want, b.position.last_gtid):
                break
            chosen = b.position.to_offset()
        return chosen

    def partitions(self):
        r = self.stream
        try:
            start = r.initialOffset()
            end = self.end_offset(start)
            log.info("bounded read from %s to %s", start, end)
            # an empty range still needs a partition (Spark would add one of its own)
            return r.partitions(start, end) or [EmptyRange()]
        finally:
            r.stop()

    def read(self, partition):
        if isinstance(partition, EmptyRange):
            return iter(())
        return self.stream.read(partition)


class EmptyRange(InputPartition):
    """The one partition of a read whose range holds no transaction."""

    def __init__(self):
        super().__init__(None)

