"""The offset a Spark streaming query has committed, read from its checkpoint directory without
Spark (``binlog-cdc lag --checkpoint``, the job's "resumes from" line).

A checkpoint holds two logs of numbered files: ``offsets/<n>`` (what batch *n* reads: a version
line, a metadata line, then one offset line per source of the query) and ``commits/<n>``
(written once batch *n* is done). The committed offset is the binlog-cdc source's line of
``offsets/<n>`` for the highest *n* in ``commits/``. Only local directories are read (a path or a
``file:`` URI).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from cdc.errors import ConfigurationError
from cdc.positions import Position

__all__ = ["CommittedOffset", "read_committed", "committed_offset"]


@dataclass(frozen=True)
class CommittedOffset:
    """Batch *batch* of the query is committed; the binlog-cdc source has read up to *offset*
    (its JSON form, :meth:`Position.to_offset`)."""

    batch: int
    offset: dict

    @property
    def position(self) -> Position:
        return Position.from_offset(self.offset)


def local_directory(checkpoint: str) -> Path:
    """The local directory of a checkpoint location (a path or a ``file:`` URI)."""
    url = urlparse(checkpoint)
    if url.scheme == "file":
        return Path(url.path)
    if url.scheme and len(url.scheme) > 1:     # (a Windows drive letter is not a scheme)
        raise ConfigurationError(f"checkpoint {checkpoint}: only local checkpoint directories "
                                 f"are read (a path or file:), not {url.scheme}:")
    return Path(checkpoint)


def read_committed(checkpoint: str) -> CommittedOffset:
    """The committed offset of the binlog-cdc source in *checkpoint*; a
    :class:`ConfigurationError` saying what is wrong when there is none."""
    root = local_directory(checkpoint)
    if not (root / "offsets").is_dir() or not (root / "commits").is_dir():
        raise ConfigurationError(f"{checkpoint} is not the checkpoint directory of a streaming "
                                 f"query (no offsets/ and commits/ in it): give the query's "
                                 f"checkpointLocation")
    ids = [int(p.name) for p in (root / "commits").iterdir() if p.name.isdigit()]
    if not ids:
        raise ConfigurationError(f"checkpoint {checkpoint}: no batch committed yet")
    batch = max(ids)
    try:
        lines = (root / "offsets" / str(batch)).read_text().splitlines()
    except OSError as e:
        raise ConfigurationError(f"checkpoint {checkpoint}: batch {batch} is committed but its "
                                 f"offsets/{batch} cannot be read ({e.strerror})") from None
    found = [d for d in map(_json, lines) if isinstance(d, dict) and "file" in d
             and "pos" in d]
    if not found:
        raise ConfigurationError(f"checkpoint {checkpoint}: batch {batch} has no binlog-cdc "
                                 f"offset (the query reads no binlog-cdc source)")
    if len(found) > 1:
        raise ConfigurationError(f"checkpoint {checkpoint}: the query reads {len(found)} "
                                 f"binlog-cdc sources; only a query with one is measured")
    return CommittedOffset(batch, found[0])


def committed_offset(checkpoint: str) -> dict | None:
    """The offset of :func:`read_committed`, or None when there is none (or the checkpoint is
    not a local directory)."""
    try:
        return read_committed(checkpoint).offset
    except (ConfigurationError, OSError, ValueError):
        return None


def _json(line: str):
    try:
        return json.loads(line)
    except ValueError:
        return None
