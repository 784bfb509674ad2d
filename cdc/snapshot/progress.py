"""How far an initial snapshot has come, and how long the rest should take (sans-IO).

The stream's offsets say only which tables are left and the last key delivered of the first
one (:mod:`streaming.source.snapshot`); everything else lives in the memory of whoever plans the
batches (the Spark driver), so offsets stay deterministic: no clock, no rate in them.

:class:`SnapshotProgress` is told each planned batch (its start, its end, the rows it holds as
the plan found them) and reports::

    {"tables": 3, "tablesDone": 1, "tablesLeft": 2, "table": "shop.orders", "after": [5000],
     "chunks": 24, "chunksDone": 11, "rows": 120000, "rowsDone": 55000,
     "rowsPerSecond": 84000.0, "etaSeconds": 0.8, "done": false}

* rows: a finished table counts the rows its batches held; the table in progress its rows up to
  the last key (counted on the server when the planner did not see them planned: a restarted
  query); a table not started yet the server's estimate (``TABLE_ROWS``, :func:`estimated_rows`),
  counted exactly instead when the estimate is below *exact_below* rows (a cheap index count;
  InnoDB's estimate of a new small table is often 0); ``rows`` is never below ``rowsDone``.
* chunks: the tasks the batches are cut into (``chunkRows`` rows each, a batch's last chunk
  shorter; the last batch of a table ends with the table's tail chunk), done ones counted, the
  rest reckoned from the rows left.
* ``rowsPerSecond``: rows planned per second of wall time over the last batches (None until two
  batches have been planned); ``etaSeconds``: the rows left at that rate (None: unknown).
* done = as of the end of the batch being planned: Spark reports a batch's progress once it ran.
"""

from __future__ import annotations

import math
import time
from collections import deque
from typing import Callable, Sequence

__all__ = ["SnapshotProgress", "batch_chunks", "chunks_left", "chunks_read"]


def batch_chunks(rows: int, chunk_rows: int, tail: bool) -> int:
    """The chunks one batch's part of a table is cut into: ``ceil(rows / chunk_rows)`` up to a
    key; a table's tail (read to its end) ``rows // chunk_rows + 1`` (the last chunk is open)."""
    if tail:
        return rows // chunk_rows + 1
    return max(1, math.ceil(rows / chunk_rows))


def chunks_left(rows: int, chunk_rows: int, batch_rows: int | None) -> int:
    """The chunks of a table's *rows* left, read in batches of at most *batch_rows* rows."""
    if not batch_rows:
        return batch_chunks(rows, chunk_rows, True)
    full, rest = divmod(rows, batch_rows)
    return full * batch_chunks(batch_rows, chunk_rows, False) + batch_chunks(rest, chunk_rows, True)


def chunks_read(rows: int, chunk_rows: int, batch_rows: int | None) -> int:
    """The chunks that read a table's first *rows* rows (batches of at most *batch_rows*)."""
    if not batch_rows:
        return math.ceil(rows / chunk_rows)
    full, rest = divmod(rows, batch_rows)
    return full * batch_chunks(batch_rows, chunk_rows, False) + math.ceil(rest / chunk_rows)


class SnapshotProgress:
    """Progress of one snapshot as its batches are planned (see the module docstring).

    *estimate* ``() -> {"db.table": rows}`` gives the server's size estimates (asked once);
    *count_done* ``(table, after) -> rows`` counts a table's rows up to a key (None: all; asked
    when the planner resumes mid-table without having planned the rows before, and for tables
    estimated below *exact_below* rows); *included*
    ``() -> [db.table]`` lists the tables an initial snapshot reads (sorted), asked on such a
    resume to count the tables read before; *chunk_rows* and *batch_rows* (None: no limit) say
    how batches and chunks are cut."""

    WINDOW = 20        # batches the rate is measured over

    def __init__(self, estimate: Callable[[], dict], count_done: Callable[[str, list], int],
                 included: Callable[[], list], chunk_rows: int, batch_rows: int | None,
                 clock=time.monotonic, exact_below: int = 100_000):
        self._estimate_fn = estimate
        self._estimates: dict | None = None
        self._count_done = count_done
        self._included = included
        self.chunk_rows = max(1, int(chunk_rows))
        self.batch_rows = batch_rows
        self._clock = clock
        self.exact_below = exact_below
        self.scope: list[str] = []        # every table of this snapshot, in reading order
        self.exact: dict[str, int] = {}   # finished tables: their rows
        self.left: list[str] = []         # tables left (the first one in progress)
        self.after = None                 # its last key delivered (offset form)
        self.current_done = 0             # rows of the first table left, up to that key
        self.chunks_done = 0
        self._samples: deque = deque(maxlen=self.WINDOW)

    # --- what the planner tells ----------------------------------------------------------------

    def start(self, tables: Sequence[str]) -> None:
        """A new snapshot of *tables* starts (an initial snapshot, a re-snapshot on signal)."""
        self.scope = list(tables)
        self.exact = {}
        self.left, self.after = list(tables), None
        self.current_done = self.chunks_done = 0
        self._estimates = None          # sizes as they are now
        self._samples.clear()

    def planned(self, start: dict, end: dict | None, rows: int | None) -> None:
        """A batch from snapshot state *start* (``{"tables", "after"}``) to *end* (None: the
        snapshot's end) holding *rows* rows of ``start["tables"][0]`` (None: no limit, every
        table left to its end, by the estimates)."""
        tables, after = list(start["tables"]), start["after"]
        if not self.scope or (self.left, self.after) != (tables, after):
            self._resync(tables, after)
        self._samples.append((self._clock(), self.rows_done))
        end_tables = list(end["tables"]) if end else []
        first = tables[0]
        if rows is None:
            for i, name in enumerate(tables):
                before = self.current_done if i == 0 else 0
                left = max(0, self._estimate(name) - before)
                self.exact[name] = before + left
                self.chunks_done += batch_chunks(left, self.chunk_rows, True)
            self.current_done = 0
        elif end_tables and end_tables[0] == first and end["after"] is not None:
            self.current_done += rows          # the table goes on in the next batch
            self.chunks_done += batch_chunks(rows, self.chunk_rows, False)
        else:                                  # the table's tail: it is finished
            self.exact[first] = self.current_done + rows
            self.chunks_done += batch_chunks(rows, self.chunk_rows, True)
            self.current_done = 0
        self.left = end_tables
        self.after = end["after"] if end_tables else None

    def _resync(self, tables: list, after) -> None:
        """The first batch seen of a snapshot (a new query, a restarted one, a re-snapshot).
        Tables of the same snapshot before the first one left count as read: those this planner
        saw, else -- tables left in sorted order, as an initial snapshot reads them -- the
        included tables sorted before them (a restarted re-snapshot may count a few too many)."""
        if tables[0] in self.scope and self.scope[self.scope.index(tables[0]):] == tables:
            done = self.scope[:self.scope.index(tables[0])]
        elif tables == sorted(tables):
            done = [t for t in self._included() if t < tables[0] and t not in tables]
        else:
            done = []
        self.scope = done + tables
        self.exact = {t: self.exact.get(t, self._estimate(t)) for t in done}
        self.chunks_done = sum(chunks_left(self.exact[t], self.chunk_rows, self.batch_rows)
                               for t in done)
        self.current_done = self._count_done(tables[0], after) if after is not None else 0
        self.chunks_done += chunks_read(self.current_done, self.chunk_rows, self.batch_rows)
        self.left, self.after = tables, after
        self._samples.clear()

    # --- the report ----------------------------------------------------------------------------

    def _estimate(self, name: str) -> int:
        if name in self.exact:
            return self.exact[name]
        if self._estimates is None:
            self._estimates = dict(self._estimate_fn() or {})
        est = self._estimates.get(name, 0)
        if isinstance(est, int) and est < self.exact_below:
            est = self._estimates[name] = ("counted", self._count_done(name, None))
        return int(est[1] if isinstance(est, tuple) else est)

    @property
    def rows_done(self) -> int:
        left = set(self.left)
        return sum(self.exact.get(t, 0) for t in self.scope if t not in left) + \
            (self.current_done if self.left else 0)

    def rate(self) -> float | None:
        """Rows per second over the last batches planned (None: fewer than two)."""
        if len(self._samples) < 2:
            return None
        (t0, r0), (t1, r1) = self._samples[0], self._samples[-1]
        return (r1 - r0) / (t1 - t0) if t1 > t0 else None

    def report(self) -> dict:
        done_rows = rows = self.rows_done
        chunks = self.chunks_done
        for i, name in enumerate(self.left):
            before = self.current_done if i == 0 else 0
            remaining = max(0, self._estimate(name) - before)
            rows += remaining
            chunks += chunks_left(remaining, self.chunk_rows, self.batch_rows)
        rate = self.rate()
        if not self.left:
            eta = 0.0
        else:
            eta = round((rows - done_rows) / rate, 1) if rate else None
        return {"tables": len(self.scope), "tablesDone": len(self.scope) - len(self.left),
                "tablesLeft": len(self.left), "table": self.left[0] if self.left else None,
                "after": self.after, "chunks": chunks, "chunksDone": self.chunks_done,
                "rows": rows, "rowsDone": done_rows,
                "rowsPerSecond": round(rate, 1) if rate is not None else None,
                "etaSeconds": eta, "done": not self.left}
