"""What every change record of the ``binlog-cdc`` source carries, without Spark: the envelope's
column names, the columns a sink reads, and :func:`seq`, the total order of row changes.

The Spark types of these columns are in :mod:`streaming.contract.spark_schema`.

An offset is a transaction boundary, a :class:`cdc.positions.Position` in its offset form
(:meth:`~cdc.positions.Position.to_offset`): JSON with a fixed key order::

    {"file": "mysql-bin.000003", "pos": 12345}                    # no GTIDs
    {"file": "mysql-bin.000003", "pos": 12345, "gtid": "0-1-42"}  # GTID state there

``gtid`` is the MariaDB GTID position (``gtid_slave_pos`` form) or the MySQL GTID set executed
up to the boundary, when the source has GTIDs. Nothing volatile (lag, times) goes into an offset:
Spark compares offsets by their JSON text. Offsets order by (file number, position).
"""

from __future__ import annotations

from cdc.positions import binlog_file_number

__all__ = ["ENVELOPE_FIELDS", "UPSERT_FIELDS", "SCHEMA_CHANGE", "seq"]

#: the envelope's columns, in order (:func:`streaming.contract.spark_schema.envelope_schema`;
#: the source option ``fields`` picks among them)
ENVELOPE_FIELDS = ("op", "db", "table", "before", "after", "key", "ts_ms", "source", "seq")
#: the envelope columns the sinks read (``schema_change`` too, when the stream has it): option
#: ``fields`` for a stream into a sink
UPSERT_FIELDS = ("op", "db", "table", "before", "after", "seq")
#: the column of the schema-change records (op ``s``) of a stream with ``includeSchemaChanges``
SCHEMA_CHANGE = "schema_change"


def seq(file: str, pos: int, row: int) -> str:
    """A string that orders every row change totally: the binlog file number, the transaction's
    start position and the row's index within the transaction, zero-padded
    (``"0000000003:000000012345:0000000007"``)."""
    return "%010d:%012d:%010d" % (binlog_file_number(file), pos, row)
