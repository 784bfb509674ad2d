"""The one importer of PySpark APIs that differ between the supported releases (4.0-4.3).

* Admission control (``pyspark.sql.streaming.datasource``: read limits and
  ``SupportsTriggerAvailableNow``) came in PySpark 4.2.  Before it, Spark calls the stream
  reader's ``latestOffset()`` without a start or a limit: :class:`LegacyOffsets` answers it.
* Spark Declarative Pipelines (``pyspark.pipelines``): :func:`pipelines`.

Everything else of PySpark that binlog-cdc uses is the same in 4.0-4.3 and is imported where it
is used.
"""

from __future__ import annotations

import dataclasses

import pyspark

from cdc.errors import SparkVersionError
from cdc.positions import Start

VERSION = tuple(int(p) for p in pyspark.__version__.split(".")[:2])

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
        """Never called by this PySpark: Spark reads up to the end its one ``latestOffset()``
        call at the query's start returned."""


def require(feature: str, release: tuple[int, int]) -> None:
    """Refuse *feature* on a PySpark older than *release*."""
    if VERSION < release:
        raise SparkVersionError(f"{feature} needs PySpark {release[0]}.{release[1]} or later "
                                f"(this is PySpark {pyspark.__version__}): upgrade pyspark")


def pipelines(scd_type: int = 1):
    """``pyspark.pipelines``, refused where it has no AutoCDC flows of *scd_type* (AutoCDC came
    in PySpark 4.2 with SCD type 1, SCD type 2 in 4.3)."""
    try:
        from pyspark import pipelines as dp
    except ImportError:
        dp = None
    if dp is None or not hasattr(dp, "create_auto_cdc_flow"):
        require("AutoCDC (pyspark.pipelines.create_auto_cdc_flow)", (4, 2))
    if int(scd_type) == 2:
        require("AutoCDC with SCD type 2", (4, 3))
    return dp


class LegacyOffsets:
    """``latestOffset()`` of a stream reader on PySpark 4.0/4.1 (no admission control).

    Spark asks for the end of the next batch without saying where it starts or how much to take:
    the batch starts where the previous one ended, which the reader learns from the batches it
    plans (:meth:`planned`; a restarted query's first call is ``partitions(o, o)`` with the
    offset it resumes at) and from the offsets it returned, and the reader applies its own
    limits (``maxEventsPerTrigger``, ``maxBytesPerTrigger``).

    The first call comes before Spark names any start: for ``Trigger.AvailableNow`` Spark asks
    once, at the query's start (before a restarted query says where it resumes), and reads up
    to that answer in one batch.  So that first answer is the end seen then: the binlog's end
    (its schema history made by a reader of its own, leaving this reader's for the start that
    Spark names next), or for a snapshot the snapshot's end.  A new query's first batch
    therefore reads up to the end seen at its start; the limits bound every later batch.
    """

    def __init__(self, history_key: str):
        self.history_key = history_key       # the part of an offset that is not its place
        self.initial: dict | None = None     # initialOffset(), made once
        self.next_start: dict | None = None
        self.guessed: dict | None = None     # a start assumed before Spark named one

    def latest(self, reader) -> dict:
        if self.next_start is not None:
            offset = reader.latest_offset(self.next_start, reader.getDefaultReadLimit())
        elif reader.opts.snapshot:
            self.guessed = reader.initialOffset()
            offset = reader.latest_offset(self.guessed, ReadAllAvailable())
        else:
            probe = type(reader)(dataclasses.replace(reader.opts, starting=Start.latest()),
                                 reader.schema, reader.columns, reader.schema_point)
            try:
                offset = probe.initialOffset()
            finally:
                probe.stop()
        self.next_start = offset
        return offset

    def _place(self, offset: dict) -> dict:
        return {k: v for k, v in offset.items() if k != self.history_key}

    def planned(self, start: dict, end: dict) -> None:
        """Spark plans the batch *start* .. *end*."""
        if self.guessed is not None and self._place(start) != self._place(self.guessed):
            raise SparkVersionError(
                "Trigger.AvailableNow of a restarted snapshot query needs PySpark 4.2 or later "
                f"(PySpark {pyspark.__version__} asks the source for its end before it names "
                "the offset the query resumes at): upgrade pyspark, or run the restarted query "
                "with a processingTime trigger")
        self.guessed = None
        self.next_start = end
