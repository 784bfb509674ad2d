"""A Spark Python worker's heap, settled once before its first task of this source.

PySpark's daemon runs a full garbage collection (``gc.collect()``) after every task of a reused
Python worker. A full collection walks every object the collector tracks: in a task worker of
this source that is mostly what its imports made (pyarrow, pandas, PySpark, ``cdc``,
``streaming``: about 80,000 objects, some 40 ms per collection), after each chunk of a snapshot
or binlog range. :func:`settle` moves those long-lived objects out of the collector's sight
(``gc.freeze()``) once per process, before the task makes objects of its own, so the
collections after each task walk only what tasks made since. The planning process (the
stream reader's, one per query) settles too, before its first binlog scan: the scan keeps a
boundary per transaction alive, and the collections it triggers would walk the imports again.
During a scan the young generation is collected less often (:func:`few_collections`): the
boundaries it keeps would otherwise be walked again by every older collection it triggers.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from typing import Iterator

__all__ = ["few_collections", "settle"]

#: allocations between two collections of the young generation in :func:`few_collections`
#: (Python's default is 700); a scan of 20,000 one-row transactions triggered some 200
#: collections (30-40 ms of 0.4 s) with the default, 2 (15-20 ms) with this
BULK_YOUNG = 100_000

_settled = False


def settle() -> None:
    """Freeze the worker's objects so far (once per process). Nothing is imported for it: a
    JSON batch never imports pandas (:mod:`streaming.source.arrow_values`), and what a task
    imports later (pandas through a typed batch's ``pa.array``) is walked by the collections
    the few times it is there, cheaper than importing it in every worker before the first
    batch."""
    global _settled
    if _settled:
        return
    _settled = True
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
