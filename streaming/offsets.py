"""The stream's offsets and change order, as Spark sees them.

An offset is a transaction boundary, a :class:`cdc.positions.Position` in its offset form
(:meth:`~cdc.positions.Position.to_offset`): JSON with a fixed key order::

    {"file": "mysql-bin.000003", "pos": 12345}                    # no GTIDs
    {"file": "mysql-bin.000003", "pos": 12345, "gtid": "0-1-42"}  # GTID state there

``gtid`` is the MariaDB GTID position (``gtid_slave_pos`` form) or the MySQL GTID set executed
up to the boundary, when the source has GTIDs. Nothing volatile (lag, times) goes into an offset:
Spark compares offsets by their JSON text. Offsets order by (file number, position).

:func:`seq` is the total order of row changes, the ``seq`` column.
"""

from __future__ import annotations

from cdc.positions import binlog_file_number

__all__ = ["seq"]


def seq(file: str, pos: int, row: int) -> str:
    """A string that orders every row change totally: the binlog file number, the transaction's
    start position and the row's index within the transaction, zero-padded
    (``"0000000003:000000012345:0000000007"``)."""
    return "%010d:%012d:%010d" % (binlog_file_number(file), pos, row)
