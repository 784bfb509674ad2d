"""Sets of transaction numbers as sorted, disjoint, non-adjacent half-open ``[start, end)``
intervals (what a :class:`~cdc.binlog.gtid.GtidSet` keeps per uuid and tag): coalescing, union,
difference, intersection, membership and inclusion."""

from __future__ import annotations

from bisect import bisect_right
from typing import Iterable

from cdc.binlog.gtid.parts import GNO_END

#: Sorted, disjoint, non-adjacent ``[start, end)`` intervals.
Intervals = tuple[tuple[int, int], ...]


def merge_intervals(intervals: Iterable[tuple[int, int]]) -> Intervals:
    """Sort and coalesce half-open intervals (touching ones merge: [1,4)+[4,6) = [1,6))."""
    out: list[list[int]] = []
    for s, e in sorted(intervals):
        if out and s <= out[-1][1]:
            if e > out[-1][1]:
                out[-1][1] = e
        else:
            out.append([s, e])
    return tuple((s, e) for s, e in out)


def union_intervals(a: Intervals, b: Intervals) -> Intervals:
    """Numbers in *a* or *b*."""
    if not a:
        return b
    if not b:
        return a
    if len(b) == 1 and a[-1][1] <= b[0][0]:
        s, e = b[0]        # the common case: numbers after the last interval (a new GTID)
        return a[:-1] + ((a[-1][0], e),) if a[-1][1] == s else a + b
    return merge_intervals(a + b)


def subtract_intervals(a: Intervals, b: Intervals) -> Intervals:
    """Numbers in *a* but not in *b*."""
    out: list[tuple[int, int]] = []
    j = 0
    nb = len(b)
    for s, e in a:
        while j < nb and b[j][1] <= s:
            j += 1
        k = j
        while k < nb and b[k][0] < e:
            bs, be = b[k]
            if bs > s:
                out.append((s, bs))
            s = max(s, be)
            if s >= e:
                break
            k += 1
        if s < e:
            out.append((s, e))
    return tuple(out)


def intersect_intervals(a: Intervals, b: Intervals) -> Intervals:
    """Numbers in both *a* and *b*."""
    out: list[tuple[int, int]] = []
    i = j = 0
    while i < len(a) and j < len(b):
        s = max(a[i][0], b[j][0])
        e = min(a[i][1], b[j][1])
        if s < e:
            out.append((s, e))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return tuple(out)


def intervals_contain(ivs: Intervals, gno: int) -> bool:
    """Whether *gno* is in *ivs*."""
    i = bisect_right(ivs, (gno, GNO_END + 1)) - 1
    return i >= 0 and ivs[i][0] <= gno < ivs[i][1]


def intervals_subset(a: Intervals, b: Intervals) -> bool:
    """Whether every number of *a* is in *b*."""
    j = 0
    for s, e in a:
        while j < len(b) and b[j][1] < e:
            j += 1
        if j == len(b) or b[j][0] > s or b[j][1] < e:
            return False
    return True
