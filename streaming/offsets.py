"""Source offsets: transaction boundaries in the binlog.

An offset is the point right after a committed transaction (or a binlog file start), written as
JSON with a fixed key order::

    {"file": "mysql-bin.000003", "pos": 12345}                    # no GTIDs
    {"file": "mysql-bin.000003", "pos": 12345, "gtid": "0-1-42"}  # GTID position after it

``gtid`` is the MariaDB GTID position (``gtid_slave_pos`` form) or the MySQL GTID set executed
up to the boundary, when the source has GTIDs. Nothing volatile (lag, times) goes into an offset:
Spark compares offsets by their JSON text.

Offsets order by (file number, position): binlog files are ``<basename>.<number>``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from cdc.errors import ConfigurationError
from cdc.binlog.files import binlog_file_number as file_number

@dataclass(frozen=True)
class BinlogOffset:
    file: str
    pos: int
    gtid: str | None = None

    def to_dict(self) -> dict:
        d = {"file": self.file, "pos": int(self.pos)}
        if self.gtid is not None:
            d["gtid"] = self.gtid
        return d

    @classmethod
    def from_dict(cls, d: Mapping) -> "BinlogOffset":
        if isinstance(d, BinlogOffset):
            return d
        try:
            return cls(str(d["file"]), int(d["pos"]), d.get("gtid"))
        except (KeyError, TypeError, ValueError):
            raise ConfigurationError(f"not a binlog-cdc offset: {d!r}") from None

    @property
    def key(self) -> tuple[int, int]:
        return (file_number(self.file), self.pos)

    def same_place(self, other: "BinlogOffset") -> bool:
        return self.file == other.file and self.pos == other.pos

    def __str__(self) -> str:
        return f"{self.file}:{self.pos}" + (f" (gtid {self.gtid})" if self.gtid else "")


def seq(file: str, pos: int, row: int) -> str:
    """A string that orders every row change totally: the binlog file number, the transaction's
    start position and the row's index within the transaction, zero-padded
    (``"0000000003:000000012345:0000000007"``)."""
    return "%010d:%012d:%010d" % (file_number(file), pos, row)
