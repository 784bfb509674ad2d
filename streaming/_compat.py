"""The one importer of PySpark APIs that differ between the supported releases (4.0-4.3).

* Admission control (``pyspark.sql.streaming.datasource``: read limits and
  ``SupportsTriggerAvailableNow``) came in PySpark 4.2.  Before it, Spark calls the stream
  reader's ``latestOffset()`` without a start or a limit: :class:`LegacyOffsets` answers it.
* Spark Declarative Pipelines (``pyspark.pipelines``): :func:`pipelines`.
* Spark types as Arrow types (:func:`to_arrow_type`, :func:`to_arrow_schema`): 4.2 names the
  timestamps' zone (``timezone=``), 4.0/4.1 only say whether it is UTC (``timestamp_utc=``);
  and back (:func:`from_arrow_schema`): 4.2 reads a zone-less timestamp as ``TIMESTAMP_NTZ`` by
  default, 4.0/4.1 as ``TIMESTAMP``.
* JVM class names that moved: :data:`CHECKPOINT_FILE_MANAGER`.

Everything else of PySpark that binlog-cdc uses is the same in 4.0-4.3 and is imported where it
is used.
"""

from __future__ import annotations

import inspect

import pyspark
from pyspark.sql.pandas import types as arrow_types

from cdc.errors import SparkVersionError

VERSION = tuple(int(p) for p in pyspark.__version__.split(".")[:2])

#: Spark's checkpoint writer that renames a temporary file with the FileSystem API (its package
#: gained ``checkpointing`` in 4.1)
CHECKPOINT_FILE_MANAGER = ("org.apache.spark.sql.execution.streaming."
                           + ("checkpointing." if VERSION >= (4, 1) else "")
                           + "FileSystemBasedCheckpointFileManager")

def require(feature: str, release: tuple[int, int]) -> None:
    """Refuse *feature* on a PySpark older than *release*."""
    if VERSION < release:
        raise SparkVersionError(f"{feature} needs PySpark {release[0]}.{release[1]} or later "
                                f"(this is PySpark {pyspark.__version__}): upgrade pyspark")


_TIMEZONE = "timezone" in inspect.signature(arrow_types.to_arrow_type).parameters


def _zone(timezone: str | None) -> dict:
    if _TIMEZONE:
        return {"timezone": timezone}
    if timezone not in (None, "UTC"):
        require(f"Arrow timestamps in {timezone}", (4, 2))
    return {"timestamp_utc": timezone is not None}


def to_arrow_type(dt, timezone: str | None = None):
    """The Arrow type of the Spark type *dt*, timestamps in *timezone* (None: without one)."""
    return arrow_types.to_arrow_type(dt, **_zone(timezone))


def to_arrow_schema(schema, timezone: str | None = None):
    """The Arrow schema of the Spark *schema*, timestamps in *timezone* (None: without one)."""
    return arrow_types.to_arrow_schema(schema, **_zone(timezone))


def from_arrow_schema(schema):
    """The Spark schema of the Arrow *schema*, every timestamp a ``TIMESTAMP`` (in the session's
    zone; never ``TIMESTAMP_NTZ``, whichever default the release has)."""
    return arrow_types.from_arrow_schema(schema, prefer_timestamp_ntz=False)


try:
    from pyspark.sql.streaming.datasource import (ReadAllAvailable, ReadLimit, ReadMaxBytes,
                                                  ReadMaxRows, SupportsTriggerAvailableNow)
    ADMISSION_CONTROL = True
except ImportError:                          # PySpark 4.0/4.1: the source applies its limits
    ADMISSION_CONTROL = False

    class ReadLimit:                         # type: ignore[no-redef]
        """A read limit (this PySpark has none of its own)."""

    class ReadAllAvailable(ReadLimit):       # type: ignore[no-redef]
        pass

    class ReadMaxRows(ReadLimit):            # type: ignore[no-redef]
        def __init__(self, max_rows: int):
            self.max_rows = max_rows

    class ReadMaxBytes(ReadLimit):           # type: ignore[no-redef]
        def __init__(self, max_bytes: int):
            self.max_bytes = max_bytes

    class SupportsTriggerAvailableNow:       # type: ignore[no-redef]
        """Never called by this PySpark: it runs ``Trigger.AvailableNow`` as ``Trigger.Once``."""


def pipelines(scd_type: int = 1):
    """``pyspark.pipelines``, refused where it has no AutoCDC flows of *scd_type* (AutoCDC came
    in PySpark 4.2 with SCD type 1, SCD type 2 in 4.3)."""
    if int(scd_type) == 2:
        require("AutoCDC with SCD type 2", (4, 3))
    try:
        from pyspark import pipelines as dp
    except ImportError:
        dp = None
    if dp is None or not hasattr(dp, "create_auto_cdc_flow"):
        require("AutoCDC (pyspark.pipelines.create_auto_cdc_flow)", (4, 2))
    return dp


class LegacyOffsets:
    """``latestOffset()`` of a stream reader on PySpark 4.0/4.1 (no admission control).

    Spark asks for the end of the next batch without saying where it starts or how much to take.
    The batch starts where the previous one ended: the reader learns that place from the batches
    it plans (:meth:`planned`; a restarted query's first call is ``partitions(o, o)`` with the
    offset it resumes at), from the offsets it answered, or for a new query from its initial
    offset.  The reader applies its own limits (``maxEventsPerTrigger``, ``maxBytesPerTrigger``)
    to every answer but the first: these releases run ``Trigger.AvailableNow`` as
    ``Trigger.Once``, one batch from a single call, so the first batch after a start reads up to
    the end seen then, the rest of an initial snapshot included.  (A run that restarts an interrupted batch runs only that batch: Spark's
    ``Trigger.Once``.)
    """

    def __init__(self):
        self.initial: dict | None = None     # initialOffset(), made once
        self.next_start: dict | None = None
        self.answered = False
        self.guessed: dict | None = None     # a start assumed before Spark named one

    def once(self, make) -> dict:
        """The initial offset, *make* called once."""
        if self.initial is None:
            self.initial = make()
        return self.initial

    def latest(self, reader) -> dict:
        if self.next_start is None:          # a new query
            self.guessed = self.next_start = reader.initialOffset()
        limit = reader.getDefaultReadLimit() if self.answered else ReadAllAvailable()
        self.next_start = reader.latest_offset(self.next_start, limit, whole=not self.answered)
        self.answered = True
        return self.next_start

    def planned(self, start: dict, end: dict, place) -> None:
        """Spark plans the batch *start* .. *end* (*place*: an offset's place in the binlog)."""
        if self.guessed is not None and place(start) != place(self.guessed):
            # spark.sql.streaming.triggerAvailableNowWrapper.enabled asks before naming it
            raise SparkVersionError(
                "this restarted query asked binlog-cdc for its end before it said where it "
                "resumes (spark.sql.streaming.triggerAvailableNowWrapper.enabled with "
                f"Trigger.AvailableNow): that needs PySpark 4.2 or later (this is PySpark "
                f"{pyspark.__version__}); upgrade pyspark, or leave that setting off")
        self.guessed = None
        self.next_start = end
