"""The error a Spark user sees when a callback of the binlog-cdc data source fails on a user's
mistake (a wrong password, a missing privilege, binlog_format not ROW, a typo in an option).

Spark runs a Python data source's callbacks (``schema``, ``latestOffset``, ``partitions``,
``read``...) in Python worker processes. When one raises, the worker sends the formatted
traceback to the JVM and exits, and Spark quotes that text after its own prefix::

    [STREAM_FAILED] Query [...] terminated with exception: [PYTHON_STREAMING_DATA_SOURCE_
    RUNTIME_ERROR] Failed when Python streaming data source perform latestOffset: Traceback
    (most recent call last):
      File ".../python_streaming_source_runner.py", line 279, in main
      ... (about 16 more lines of frames)
    cdc.errors.AuthenticationError: the server (db1:3306) refused user 'cdc': check the password ...

A :class:`~cdc.errors.CdcError` says what to do in its message; its frames help no one. Raised
out of a callback of a class decorated with :func:`user_errors`, it leaves the worker without
its traceback (the worker's ``sys.tracebacklimit`` is set to 0 just before; the worker exits
after reporting it) and without chained exceptions, so the first line of Spark's error ends
with ``cdc.errors.AuthenticationError: the server (db1:3306) refused user 'cdc': ...``. Any
other exception (a defect) keeps its whole traceback. Outside a Spark worker (a callback
called directly) nothing changes.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Iterator

from cdc.errors import CdcError

__all__ = ["CALLBACKS", "user_errors"]

#: the methods of a DataSource and its readers that Spark calls
CALLBACKS = ("schema", "reader", "streamReader", "partitions", "read", "initialOffset",
             "latestOffset", "commit", "getDefaultReadLimit", "prepareForTriggerAvailableNow",
             "reportLatestOffset")


def _in_spark_worker() -> bool:
    """Whether this process is a Python worker started by Spark's JVM (it connects back with
    the secret or socket path the JVM put in its environment)."""
    return any(k in os.environ for k in ("PYTHON_WORKER_FACTORY_SECRET",
                                         "PYTHON_WORKER_FACTORY_SOCK_PATH"))


def _shown(e: CdcError) -> CdcError:
    if _in_spark_worker():
        sys.tracebacklimit = 0        # the worker exits once it has reported the exception
    return e


def _iterate(it):
    try:
        yield from it
    except CdcError as e:
        raise _shown(e) from None


def _wrap(func):
    @functools.wraps(func)
    def call(*args, **kwargs):
        try:
            out = func(*args, **kwargs)
        except CdcError as e:
            raise _shown(e) from None
        return _iterate(out) if isinstance(out, Iterator) else out
    return call


def user_errors(cls):
    """Class decorator: the :data:`CALLBACKS` *cls* defines raise a binlog-cdc error as one
    line (see the module)."""
    for name in CALLBACKS:
        func = cls.__dict__.get(name)
        if callable(func):
            setattr(cls, name, _wrap(func))
    return cls
