"""A guard for tests of sinks that must not bring a batch's rows to the driver.

Inside ``with no_image_collect():`` every way a PySpark (classic) DataFrame hands its rows to the
driver -- ``collect``, ``toArrow``, ``toPandas``, ``toLocalIterator``, ``take``, ``head``,
``first``, ``tail``, ``toJSON``, ``rdd`` -- first looks at the DataFrame's optimized plan: when
any node of it reads a ``before`` or ``after`` column (the row images), or the result has such a
column, it raises :class:`ImagesCollected` instead. A plan's leaves (the scan, a cached
relation) list every column without reading them; the nodes above read only what they use
(Spark prunes the rest), so an aggregate of names and DDL records passes, and anything built
from the images -- a parse, a filter on them, the images themselves -- does not.
"""

from __future__ import annotations

import contextlib

IMAGE_COLUMNS = ("before", "after")
_METHODS = ("collect", "toArrow", "toPandas", "toLocalIterator", "take", "head", "first",
            "tail", "toJSON")


class ImagesCollected(AssertionError):
    """A DataFrame reading row images was about to be collected to the driver."""


def _seq(jseq):
    it = jseq.iterator()
    while it.hasNext():
        yield it.next()


def reads_images(df) -> list[str]:
    """What of *df*'s optimized plan reads or returns the row images (empty: nothing)."""
    plan = df._jdf.queryExecution().optimizedPlan()
    found = [f"returns {a.name()}" for a in _seq(plan.output()) if a.name() in IMAGE_COLUMNS]
    todo = [plan]
    while todo:
        node = todo.pop()
        refs = [a.name() for a in _seq(node.references().toSeq())]
        hit = sorted(set(refs) & set(IMAGE_COLUMNS))
        if hit:
            found.append(f"{node.nodeName()} reads {', '.join(hit)}")
        todo.extend(_seq(node.children()))
    return found


@contextlib.contextmanager
def no_image_collect():
    """Make collecting a DataFrame that reads row images raise (see the module)."""
    from pyspark.sql.classic.dataframe import DataFrame

    saved = {}

    def guard(name, method):
        def guarded(self, *args, **kwargs):
            why = reads_images(self)
            if why:
                raise ImagesCollected(f"DataFrame.{name} of row images on the driver: "
                                      + "; ".join(why))
            return method(self, *args, **kwargs)
        return guarded

    for name in _METHODS:
        saved[name] = DataFrame.__dict__.get(name)
        setattr(DataFrame, name, guard(name, getattr(DataFrame, name)))
    rdd = DataFrame.__dict__["rdd"]

    def guarded_rdd(self):
        why = reads_images(self)
        if why:
            raise ImagesCollected("DataFrame.rdd of row images: " + "; ".join(why))
        return rdd.fget(self)
    DataFrame.rdd = property(guarded_rdd)
    try:
        yield
    finally:
        for name, method in saved.items():
            if method is None:
                delattr(DataFrame, name)            # inherited: the base class's again
            else:
                setattr(DataFrame, name, method)
        DataFrame.rdd = rdd
