"""Binlog positions as ordering keys, and the versions of one table along the binlog: the data
model under :class:`cdc.schema.history.SchemaHistory` (and its persisted form, :mod:`cdc.schema.persist`)."""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field
from typing import NamedTuple

_FILE_NUMBER = re.compile(r"^(.*?)(\d+)$")


def point_key(file: str | None, pos: int | None) -> tuple:
    """An ordering key of the binlog position (*file*, *pos*): files by their number."""
    if file is None:
        return ("", -1, pos or 0)
    m = _FILE_NUMBER.match(file)
    if m:
        return (m.group(1), int(m.group(2)), pos or 0)
    return (file, 0, pos or 0)


BEGINNING = ("", -2, 0)
DROPPED = object()


class Unknown(NamedTuple):
    """A table whose shape the history does not know from ``since`` (file, position) on."""

    since: tuple
    reason: str

    def describe(self) -> str:
        return f"unknown since file {self.since[0]}, position {self.since[1]} ({self.reason})"


@dataclass
class Versions:
    keys: list = field(default_factory=list)
    states: list = field(default_factory=list)

    def at(self, key):
        i = bisect.bisect_right(self.keys, key) - 1
        return (self.states[i], True) if i >= 0 else (None, False)

    def put(self, key, state) -> None:
        i = bisect.bisect_left(self.keys, key)
        if i < len(self.keys) and self.keys[i] == key:
            self.states[i] = state
        else:
            self.keys.insert(i, key)
            self.states.insert(i, state)
