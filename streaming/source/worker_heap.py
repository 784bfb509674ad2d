"""A Spark Python worker's heap, settled before its tasks of this source.

PySpark's daemon runs a full garbage collection (``gc.collect()``) after every task of a reused
Python worker. A full collection walks every object the collector tracks: in a task worker of
this source that is mostly what its imports made (pyarrow, pandas, PySpark, ``cdc``,
``streaming``: about 80,000 objects, some 40 ms per collection), after each chunk of a snapshot
or binlog range. :func:`settle` moves those long-lived objects out of the collector's sight
(``gc.freeze()``) before the task makes objects of its own, so the collections after each
task walk only what tasks made since; and again at a later task's start when modules were
imported since (the first tasks import the chunk reader, the batch builder, pandas: some
40,000 objects, 10-20 ms a collection, after every task otherwise). The planning process (the
stream reader's, one per query) settles too, before its first binlog scan: the scan keeps a
boundary per transaction alive, and the collections it triggers would walk the imports again.
So do PySpark's planning workers (the source's creation, the read's planning: the daemon
collects after each of their calls too, 15-20 ms each per query otherwise): the data source
settles when it is made, after its schema and after making a reader.
During a scan the young generation is collected less often (:func:`few_collections`): the
boundaries it keeps would otherwise be walked again by every older collection it triggers.
"""

from __future__ import annotations

import gc
import sys
from contextlib import contextmanager
from typing import Iterator

__all__ = ["few_collections", "settle"]

#: allocations between two collections of the young generation in :func:`few_collections`
#: (Python's default is 700); a scan of 20,000 one-row transactions triggered some 200
#: collections (30-40 ms of 0.4 s) with the default, 2 (15-20 ms) with this
BULK_YOUNG = 100_000

_modules_at_freeze = 0          # len(sys.modules) when the heap was frozen last


def settle() -> None:
    """Freeze the worker's objects so far: the first time, and whenever modules were imported
    since the last time (nothing else: a task's own objects stay collectable). Nothing is
    imported for it: a JSON batch never imports pandas (:mod:`streaming.source.arrow_values`),
    and what a task imports (pandas through a typed batch's ``pa.array``) is frozen at the
    next task's start, cheaper than importing it in every worker before the first batch."""
    global _modules_at_freeze
    modules = len(sys.modules)
    if modules == _modules_at_freeze:
        return
    _modules_at_freeze = modules
    gc.freeze()


@contextmanager
def few_collections(young: int = BULK_YOUNG) -> Iterator[None]:
    """Collect the young generation only every *young* allocations while the block runs (a
    scan that keeps most of what it makes), then as before; the garbage it leaves is collected
    as usual."""
    old = gc.get_threshold()
    gc.set_threshold(max(young, old[0]), *old[1:])
    try:
        yield
    finally:
        gc.set_threshold(*old)
