"""A Spark Python worker's heap, settled once before its first task of this source.

PySpark's daemon runs a full garbage collection (``gc.collect()``) after every task of a reused
Python worker. A full collection walks every object the collector tracks: in a task worker of
this source that is mostly what its imports made (pyarrow, pandas, PySpark, ``cdc``,
``streaming``: about 80,000 objects, some 40 ms per collection), after each chunk of a snapshot
or binlog range. :func:`settle` moves those long-lived objects out of the collector's sight
(``gc.freeze()``) once per process, before the task makes objects of its own, so the
collections after each task walk only what tasks made since.
"""

from __future__ import annotations

import gc

__all__ = ["settle"]

_settled = False


def settle() -> None:
    """Freeze the worker's objects so far (once per process). pyarrow's first ``pa.array`` of
    a Python list imports pandas (when installed): done here first, so pandas is frozen too."""
    global _settled
    if _settled:
        return
    _settled = True
    import pyarrow as pa
    pa.array([], pa.binary())
    gc.freeze()
